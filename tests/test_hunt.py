"""qconform hunt (issue #17): the spaces, the search, its groups and files, findings' ``where``, the
pytest form, and the runtime bugs the hunt found (tests/data/hunt/), checked against the runtimes."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from reference import golden
from suite.cases.hunt import PARAMS, RandomDraw, draw_case, hunt_ops, params
from suite.core.case import load_case
from suite.core.findings import findings, match
from suite.core.spec import check_case
from suite.harness import hunt as hunt_mod
from suite.harness.hunt import Hunter, HuntOptions, failure_region, unspecified
from suite.harness.judge import symptom
from suite.harness.isolation import executor_for
from suite.harness.shrink import elements
from targets import get_target
from targets.base import Timing
from tests.conftest import ROOT
from tests.helper_targets import GoldenTarget
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"
DATA = ROOT / "tests" / "data" / "hunt"


class CornerBug(GoldenTarget):
    """The golden, except in two corners: ADD with an output multiplier above 2^6 comes out 9 LSB
    high at element 0, and LESS aborts the process when an input scale is exactly a power of two >= 1."""

    name = "corner-bug"

    def outputs(self, case):
        if case.op == "LESS" and any(t.scale[0] >= 1 and np.log2(t.scale[0]).is_integer() for t in case.inputs):
            os.abort()
        outs = super().outputs(case)
        if case.op == "ADD":
            a, b, o = case.inputs[0].scale[0], case.inputs[1].scale[0], case.outputs[0].scale[0]
            if 2 * max(a, b) / (2 ** 20 * o) > 2 ** 6:
                flat = outs[0].reshape(-1)
                flat[0] = min(int(flat[0]) + 9, 127)
        return outs


def _hunt(target, op, **kw):
    opts = HuntOptions(**{"budget": 60.0, "findings": False, **kw})
    h = Hunter(getattr(target, "name", "t"), target, opts)
    try:
        return h, h.hunt(op)
    finally:
        h.close()


# ----------------------------------------------------------------------------- the spaces

@pytest.mark.parametrize("op", hunt_ops())
def test_every_space_draws_cases_the_spec_and_the_golden_take(op):
    """Every drawn case passes its spec table and the golden computes it (a case either refuses is
    never a finding, and a space that draws many of them wastes the budget)."""
    for i in range(6):
        case = draw_case(RandomDraw(np.random.default_rng([17, i])), op, i)
        assert not check_case(case), (case.id, check_case(case)[:1])
        if not unspecified(case):   # (a NaN input: the golden refuses it, the hunt does not judge it)
            golden(case)
        p = params(case)
        assert set(p) <= set(PARAMS), set(p) - set(PARAMS)


def test_every_where_names_params_a_hunted_case_has():
    allowed = set(PARAMS) | {"max_abs_lsb", "cause"}
    group = {"mean_err_lsb", "max_abs_lsb"}   # a group bias's region (reports.causes.judge_group)
    for f in findings():
        for w in f.where:
            ok = group if set(f.status) <= {"bias+", "bias-"} else allowed
            assert set(w) <= ok, (f.id, set(w) - ok)


def test_where_matches_every_case_by_its_params_never_by_its_variant():
    hunted = {"out_mult_log2": 2.5}
    for variant in ("hunt", "mult_gt1", "random", "*"):   # a hunted, generated or any case alike
        assert match("SUB", "tflite-ref", variant, "fail", hunted).id == "sub-output-multiplier-gt1"
        assert match("SUB", "tflite-ref", variant, "fail", {"out_mult_log2": -0.5}) is None
    assert match("SUB", "tflite-ref", "hunt", "fail", {}) is None            # a missing param holds nothing
    assert match("SUB", "tflite-ref", "mult_gt1", "fail") is None             # no params: no region holds
    assert match("FULLY_CONNECTED", "tflite-ref", "hunt", "fail",
                 {"table": "qnn", "dtype": "uint8"}).id == "litert-ref-fc-uint8-int8-weights"
    assert match("FULLY_CONNECTED", "tflite-ref", "hunt", "fail", {"table": "qnn", "dtype": "uint16"}) is None
    assert match("SUM", "tflite-ref", "hunt", "fail", {}).id == "litert-ref-sum-int8-as-uint8"   # variant "*"


# ----------------------------------------------------------------------------- the search

def test_the_same_seed_gives_the_same_search_another_seed_another():
    t = CornerBug()
    runs = [_hunt(t, "ADD", seed=s, max_examples=120, isolation="none")[1] for s in (3, 3, 4)]
    assert runs[0].examples == runs[1].examples == 120
    assert runs[0].fingerprint == runs[1].fingerprint != runs[2].fingerprint
    assert [g.key for g in runs[0].groups] == [g.key for g in runs[1].groups]


@pytest.fixture(scope="module")
def corner_add():
    """A hunt of ADD on CornerBug (300 cases, in process), with every score it gave hypothesis."""
    scores, real = [], hunt_mod.hypothesis_target

    def record(v, label):
        scores.append((label, v))
        real(v, label=label)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(hunt_mod, "hypothesis_target", record)
        h, res = _hunt(CornerBug(), "ADD", max_examples=300, isolation="none")
    return h, res, scores


def test_a_corner_bug_is_found_grouped_and_written(tmp_path, corner_add):
    h, res, _ = corner_add
    bad = [g for g in res.groups if g.status == "fail"]
    assert bad and all(params(g.case)["out_mult_log2"] > 6 for g in bad), [g.line() for g in res.groups]
    assert all(g.region["err"] == "+" for g in bad)   # CornerBug's error is +9
    g = bad[0]
    assert elements(g.case) <= 8   # found that small, or shrunk to it
    h.write(res, tmp_path)
    doc = json.loads(Path(g.file).read_text())
    case = load_case(g.file)
    assert not check_case(case) and doc["hunt"]["status"] == "fail" and doc["hunt"]["max_abs_lsb"] >= 9
    assert doc["hunt"]["params"]["out_mult_log2"] > 6 and doc["judged"]["target"] == h.selector
    assert doc["want"][0][0] != doc["got"][0][0]


def test_failures_of_one_symptom_are_one_group(corner_add):
    """Every hit is filed once, under the group its own symptom gives (status, cause, best scheme,
    where its worst element lies); hits of one symptom are merged (the corner has few and many hits)."""
    _, res, _ = corner_add
    c = res.counts
    judged = sum(g.hits for g in res.groups) + c.get("pass", 0) + c.get("unsupported", 0)
    refused = sum(c.get(k, 0) for k in ("invalid", "golden_refused", "cut", "space_error"))
    assert judged > 0 and judged + refused <= res.examples   # (hypothesis may end a draw midway)
    for g in res.groups:
        assert g.region == failure_region(g.case, g.row, g.status) and g.cause == symptom(g.row, g.status)
    assert len({g.key for g in res.groups}) == len(res.groups)
    assert sum(g.hits for g in res.groups) > 2 * len(res.groups), [g.line() for g in res.groups]


def test_one_symptom_in_two_param_regions_is_one_group():
    """CornerBug's ADD error (+9 at element 0) in two parameter regions (broadcast or not) and at
    another output scale: one symptom, one group of three hits (#24: not a group per bucket)."""
    h = Hunter("corner-bug", CornerBug(), HuntOptions(findings=False, isolation="none"))
    a = load_case(DATA / "add-multiplier-1-abort.json")        # output multiplier 2^81
    b = copy.deepcopy(a)
    b.inputs[0].shape, b.inputs[0].data, b.outputs[0].shape = (2,), np.array([89, 90], np.int8), (2,)
    c = copy.deepcopy(a)
    c.outputs[0].scale = [2.0 ** -90]
    groups: dict = {}
    try:
        for i, case in enumerate((a, b, c)):
            v, o = h.run_case(case)
            assert v.status.value == "fail", v.reason
            h._record(groups, case, v, o, 0.0, i)
    finally:
        h.close()
    assert [(g.cause, g.region, g.hits) for g in groups.values()] == [("saturation", {"want": "dtype-low", "err": "+"}, 3)]


def test_the_search_scores_a_new_failure_above_every_pass_and_a_repeat_as_nothing(corner_add):
    """The signal hypothesis climbs: a group's first hit 1e3 + its error (9 LSB here), a pass its error
    (at most 1 LSB + the share off), a later hit of a known group 0."""
    _, res, scores = corner_add
    sev = [v for label, v in scores if label == "severity"]
    assert len(sev) == sum(g.hits for g in res.groups) + res.counts.get("pass", 0) + res.counts.get("unsupported", 0)
    assert sorted(v for v in sev if v >= 1e3) == [1e3 + g.row["max_abs_lsb"] for g in res.groups if g.hits]
    assert sev.count(0.0) >= sum(g.hits - 1 for g in res.groups) > 0
    assert all(v < 2.0 for v in sev if v < 1e3)


def test_the_random_baseline_runs_the_same_spaces_seeded():
    runs = [_hunt(CornerBug(), "ADD", search="random", seed=s, max_examples=100, isolation="none")[1] for s in (2, 2, 3)]
    assert [r.examples for r in runs] == [100] * 3
    assert runs[0].fingerprint == runs[1].fingerprint != runs[2].fingerprint


def test_a_crash_costs_one_case_and_the_hunt_goes_on():
    """LESS aborts in CornerBug's corner: a ``crash`` group; the worker is replaced, the search goes on."""
    _, res = _hunt(CornerBug(), "LESS", max_examples=20, timeout=20.0)   # (each crash: a new worker)
    crash = [g for g in res.groups if g.status == "crash"]
    assert crash and "SIGABRT" in crash[0].row["reason"]
    assert res.examples == 20 and crash[0].hits < 20 and res.counts.get("pass", 0) > 0


def test_known_findings_are_recognised_and_not_chased_unless_asked():
    t = get_target("tflite-ref")
    if not t.availability()[0]:
        pytest.skip("tflite-ref is not available")
    _, res = _hunt(t, "SUB", findings=True, max_examples=150, seed=1)
    gt1 = [g for g in res.groups if params(g.case)["out_mult_log2"] > 0]
    assert gt1 and all(g.known and g.finding == "sub-output-multiplier-gt1" and g.shrunk is None for g in gt1)
    assert all(g not in res.new for g in gt1)


def test_a_short_hunt_rediscovers_sub_multiplier_above_one_on_tflite_ref():
    """Findings off, a fixed seed and 200 cases: the SUB finding comes out as a new distinct failure,
    shrunk, and its params are what the finding's ``where`` names (the 60 s per op check of docs/hunt.md
    is a measurement, not this test)."""
    t = get_target("tflite-ref")
    if not t.availability()[0]:
        pytest.skip("tflite-ref is not available")
    _, res = _hunt(t, "SUB", max_examples=200, seed=0)
    hit = [g for g in res.new if g.finding == "sub-output-multiplier-gt1" and g.cause == "saturation"]
    assert hit, res.summary()
    assert hit[0].shrunk and params(hit[0].case)["out_mult_log2"] > 0


# ----------------------------------------------------------------------------- the forms

def test_pytest_hunt_is_a_test_per_op_and_target_after_the_cases(pytester):
    target = "tests.test_hunt:CornerBug"
    proc, rd = run_inprocess(pytester, f"--target={target}", "--ops=ADD", "--cases-per-op=2", "--hunt=8",
                             "--isolation=none", "-v")
    out = proc.stdout
    lines = [ln for ln in out.splitlines() if ln.startswith("::")]
    assert "ADD:corner-bug::test_hunt FAILED" in lines[-1] and "ADD:corner-bug::test_group" in lines[-2], out
    assert all("test_case" in ln for ln in lines[:-2]), out   # the cases, their group's verdict, then the hunt
    assert proc.returncode == 1
    files = sorted((rd / "hunt" / "corner-bug").glob("ADD-hunt-*.json"))
    assert files
    # the printed repro of a hunted case judges it as the hunt did, and fails
    judged = json.loads(files[0].read_text())["judged"]
    assert judged["tolerance"]["file"].endswith("tolerance.toml") and judged["target"] == target
    again, _ = run_inprocess(pytester, f"--target={target}", f"--case-file={files[0]}", "--isolation=none",
                             f"--tolerance={judged['tolerance']['file']}", f"--case-timeout={judged['timeout']:g}",
                             f"--scheme={judged['scheme']}")
    assert again.returncode == 1 and "1 failed" in again.stdout, again.stdout


def test_cli_writes_cases_and_a_summary_and_refuses_unknown_ops(tmp_path, qconform_main):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    bad = qconform_main("hunt", "--target=ref", "--ops=CONV2D")
    assert bad.returncode == 2 and "no hunt space for CONV2D" in bad.stderr
    p = subprocess.run([sys.executable, "-m", "suite", "hunt", "--target=tests.test_hunt:CornerBug", "--ops=ADD",
                        "--max-examples=150", "--budget=60", "-o", str(tmp_path), "-q"],
                       capture_output=True, text=True, cwd=ROOT, env=env)
    assert p.returncode == 1, p.stdout + p.stderr
    summary = json.loads((tmp_path / "hunt.json").read_text())
    groups = summary["hunts"][0]["groups"]
    assert summary["format"] == "qconform-hunt/1" and groups and all(os.path.exists(g["file"]) for g in groups)
    assert "reproduce: qconform repro " in p.stdout and "--target=tests.test_hunt:CornerBug" in p.stdout


# ----------------------------------------------------------------------------- what the hunt found

def _run(target: str, path):
    t = get_target(target)
    ok, why = t.availability()
    if not ok:
        pytest.skip(f"{target}: {why}")
    case = load_case(path)
    ex = executor_for(t, "process", 120.0)   # (a time limit for a loaded machine, not a measurement)
    try:
        return case, ex.run([case], Timing(0, 1))[0]
    finally:
        ex.close()


@pytest.mark.parametrize("target", ["tflite-ref", "tflite"])
def test_litert_comparisons_abort_at_scale_1_and_are_wrong_above(target):
    case, o = _run(target, DATA / "less-scale-1-abort.json")
    assert o.status == "crash" and "SIGABRT" in o.reason
    assert match("LESS", target, "hunt", "crash", params(case)).id == "litert-comparison-scale-1-or-above"
    case, o = _run(target, DATA / "less-scale-above-1.json")
    a, b = case.inputs   # 22 * 3.07 = 67.6 < 73 * 3.07 = 224.3
    assert (105 - 83) * a.scale[0] < (79 - 6) * b.scale[0] and golden(case)[0].ravel().tolist() == [True]
    assert o.status == "ok" and np.asarray(o.outputs[0]).ravel().tolist() == [False]
    assert match("LESS", target, "hunt", "fail", params(case)).id == "litert-comparison-scale-1-or-above"


@pytest.mark.parametrize("target", ["tflite-ref", "tflite"])
def test_litert_add_aborts_on_a_multiplier_of_1_or_more(target):
    case, o = _run(target, DATA / "add-multiplier-1-abort.json")
    assert params(case)["out_mult_log2"] == 81.0
    assert o.status == "crash" and "SIGABRT" in o.reason
    assert match("ADD", target, "hunt", "crash", params(case)).id == "litert-add-multiplier-1-or-above-abort"


# the spec's codes of the overflow cases: the exact result clamped (RELU at zero point 71 for CONV_2D)
SATURATED = {"fc-requant-overflow": [127], "conv-requant-overflow": [71, 127, 71, 71],
             "dw-requant-overflow": [127, -128]}


def _spec_codes(case, lo):
    return np.clip(np.round(golden(case, "exact")[0].ravel()), lo, 127).astype(int).tolist()


@pytest.mark.parametrize("name,target,got", [
    ("fc-requant-overflow", "tflite-ref", [-128]), ("fc-requant-overflow", "tflite", [127]),
    ("conv-requant-overflow", "tflite-ref", [127, 71, 127, 127]), ("conv-requant-overflow", "tflite", [71, 127, 71, 71]),
    ("dw-requant-overflow", "tflite-ref", [0, 1]), ("dw-requant-overflow", "tflite", [127, -128])])
def test_litert_reference_requantization_wraps_beyond_int32(name, target, got):
    """Accumulators (+ bias) at 2^31 with a multiplier of 1 (a left shift of 1): the spec saturates,
    LiteRT's default kernels too; its reference kernels wrap around (the finding names only them)."""
    case, o = _run(target, DATA / f"{name}.json")
    assert params(case)["shifted_acc_log2"] >= 31 and params(case)["mult_max_log2"] == 0.0
    spec = _spec_codes(case, 71 if name.startswith("conv") else -128)
    assert spec == SATURATED[name]
    assert o.status == "ok" and np.asarray(o.outputs[0]).ravel().tolist() == got
    f = match(case.op, target, "hunt", "fail", params(case))
    if got != spec:
        assert f.id == "litert-requant-left-shift-overflow"
    else:
        assert f is None


@pytest.mark.parametrize("name,lo", [("conv-requant-overflow", 71), ("dw-requant-overflow", -128),
                                     ("sub-golden-wrap", -128)])
def test_the_golden_saturates_a_requantization_beyond_int32(name, lo):
    case = load_case(DATA / f"{name}.json")
    assert golden(case)[0].ravel().tolist() == _spec_codes(case, lo)


def test_the_fc_golden_saturates_beyond_int32():
    case = load_case(DATA / "fc-requant-overflow.json")
    assert golden(case)[0].ravel().tolist() == _spec_codes(case, -128) == [127]


def test_litert_ref_sum_rounds_in_float32():
    """SUM of [0] (zero point -93): exact 127.4999988 above the output zero point -128, so -1; LiteRT's
    reference SUM gets 93 * float32(s_in / s_out) = 127.5 and returns 0."""
    case, o = _run("tflite-ref", DATA / "sum-float32-tie.json")
    x, out = case.inputs[0], case.outputs[0]
    ratio = np.float32(np.float32(x.scale[0]) / np.float32(out.scale[0]))
    assert np.float32(93) * ratio == np.float32(127.5) and 127.4999 < golden(case, "exact")[0] + 128 < 127.5
    assert golden(case)[0].ravel().tolist() == [-1]
    assert o.status == "ok" and np.asarray(o.outputs[0]).ravel().tolist() == [0]
    assert match("SUM", "tflite-ref", "hunt", "fail", params(case)).id == "litert-ref-sum-int8-as-uint8"


@pytest.mark.parametrize("target", ["tflite-ref", "tflite"])
def test_litert_conv_reads_int8_weights_as_uint8(target):
    case, o = _run(target, DATA / "conv-uint8-int8-weights.json")
    as_uint8 = load_case(DATA / "conv-uint8-int8-weights.json")
    w = as_uint8.inputs[1]
    w.dtype, w.data = "uint8", (w.data.astype(np.int64) % 256).astype(np.uint8)
    assert golden(case)[0].ravel().tolist() == [122] and golden(as_uint8)[0].ravel().tolist() == [150]
    assert o.status == "ok" and np.asarray(o.outputs[0]).ravel().tolist() == [150]
    assert match("CONV_2D", target, "hunt", "fail", params(case)).id == "litert-conv-uint8-int8-weights"


def test_htp_mean_wraps_at_huge_multipliers():
    """Seven codes -60 at s_in / s_out = 2^28: the spec saturates to -128; QNN HTP returns 127."""
    case, o = _run("htp", DATA / "mean-htp-huge-multiplier.json")
    assert golden(case, "exact")[0] < -2.0 ** 31 and params(case)["out_mult_log2"] == 28.0
    assert o.status == "ok" and np.asarray(o.outputs[0]).ravel().tolist() == [127]
    assert match("MEAN", "htp", "hunt", "fail", params(case)).id == "qnn-htp-mean-huge-multiplier"
    # a generated case in the other finding's region: by its params, not its variant
    assert match("MEAN", "htp", "mult_extreme", "fail", {"out_mult_log2": -20.0}).id == "qnn-htp-mean-tiny-ratio"


@pytest.mark.parametrize("name", ["concat-htp-rank5-relu-segfault", "sub-htp-rank5-relu-segfault"])
def test_htp_segfaults_on_rank5_with_a_fused_relu(name):
    case, o = _run("htp", DATA / f"{name}.json")
    assert o.status == "crash" and "SIGSEGV" in o.reason
    p = params(case)
    assert p["out_rank"] == 5 and p["act"] == "RELU"
    assert match(case.op, "htp", "hunt", "crash", p).id == "qnn-htp-rank5-relu-segfault"


@pytest.mark.parametrize("name,got", [("sub-htp-scale-ratio-2lsb", [62]), ("sub-htp-scale-ratio-wrong", [-128])])
def test_htp_sub_is_wrong_with_input_scales_far_apart(name, got):
    case, o = _run("htp", DATA / f"{name}.json")
    exact = float(golden(case, "exact")[0].ravel()[0])
    want = golden(case)[0].ravel().tolist()
    assert want == {"sub-htp-scale-ratio-2lsb": [round(exact)], "sub-htp-scale-ratio-wrong": [127]}[name]
    assert o.status == "ok" and np.asarray(o.outputs[0]).ravel().tolist() == got
    assert abs(params(case)["in_ratio_log2"]) >= 13
    assert match("SUB", "htp", "hunt", "fail", params(case)).id == "qnn-htp-sub-input-scale-ratio"


@pytest.mark.parametrize("name,finding,other", [
    ("gather-htp-rank5", "qnn-htp-gather-last-axis", "tflite-ref"),
    ("gather-htp-middle-axis", "qnn-htp-gather-last-axis", "tflite-ref"),
    ("pad-htp-rank2", "qnn-htp-pad-value", "tflite-ref"),
    ("less-htp-coarse", "comparison-resolution-htp", "ort")])   # (LiteRT's LESS is wrong at scale 32)
def test_htp_is_wrong_where_the_hunt_widened_a_finding(name, finding, other):
    """QNN HTP differs from the golden; another runtime agrees with it (the golden is not the odd one)."""
    case, o = _run("htp", DATA / f"{name}.json")
    want = golden(case)[0].ravel().tolist()
    assert o.status == "ok" and np.asarray(o.outputs[0]).ravel().tolist() != want
    _, ref = _run(other, DATA / f"{name}.json")
    assert np.asarray(ref.outputs[0]).ravel().tolist() == want
    assert match(case.op, "htp", "hunt", "fail", params(case)).id == finding


def test_htp_conv_drops_the_relu6_bound():
    case, o = _run("htp", DATA / "conv-htp-relu6-ignored.json")
    assert golden(case)[0].ravel().tolist() == [64, 64, 64, 64]   # 6 / s_out above the zero point -128
    assert o.status == "ok" and np.asarray(o.outputs[0]).ravel().tolist() == [127, 127, 90, 90]
    assert match("CONV_2D", "htp", "hunt", "fail", params(case)).id == "qnn-htp-conv-clip-ignored"


@pytest.mark.parametrize("target", ["tflite-ref", "tflite"])
def test_litert_add_sub_return_the_zero_point_when_the_activation_range_overflows(target):
    case, o = _run(target, DATA / "sub-activation-range-overflow.json")
    assert case.outputs[0].scale[0] == 2.0 ** -31 and golden(case)[0].ravel().tolist() == [-128]
    assert golden(case, "exact")[0].ravel()[0] < -128   # (a negative real far below the range)
    assert o.status == "ok" and np.asarray(o.outputs[0]).ravel().tolist() == [case.outputs[0].zero_point[0]]
    assert match("SUB", target, "hunt", "fail", params(case)).id == "litert-activation-range-overflow"


def test_htp_sub_with_a_high_output_zero_point_gives_minus_128():
    """[89] - [1] at scales 1, output scale 4, zero point 127: the spec (and ort) 127, HTP -128."""
    case, o = _run("htp", DATA / "sub-htp-high-zero-point.json")
    assert golden(case)[0].ravel().tolist() == [127] and float(golden(case, "exact")[0].ravel()[0]) > 127
    ort_case, ort = _run("ort", DATA / "sub-htp-high-zero-point.json")
    assert np.asarray(ort.outputs[0]).ravel().tolist() == [127]
    assert o.status == "ok" and np.asarray(o.outputs[0]).ravel().tolist() == [-128]
    assert match("SUB", "htp", "hunt", "fail", params(case)).id == "qnn-htp-sub-high-zero-point"


# ----------------------------------------------------------------------------- float32 inputs (#24)

@pytest.mark.parametrize("op", ["QUANTIZE", "QuantizeLinear"])
def test_float_inputs_reach_the_whole_float32_range(op):
    """Beyond the int32 range of x / s, +-inf, NaN, subnormals and -0.0 are all drawn."""
    seen = set()
    for i in range(300):
        case = draw_case(RandomDraw(np.random.default_rng([24, i])), op, i)
        x, o = case.inputs[0], case.outputs[0]
        if x.dtype != "float32":
            continue
        v = np.asarray(x.data, np.float32).ravel()
        s = np.float64(min(o.scale))
        with np.errstate(all="ignore"):
            q = np.abs(v.astype(np.float64) / s)
        seen |= {k for k, hit in (("inf", np.isinf(v).any()), ("nan", np.isnan(v).any()),
                                  ("-0", (np.signbit(v) & (v == 0)).any()),
                                  ("subnormal", ((v != 0) & (np.abs(v) < np.finfo(np.float32).tiny)).any()),
                                  ("beyond_int32", (np.isfinite(q) & (q > 2.0 ** 31)).any())) if hit}
    assert seen == {"inf", "nan", "-0", "subnormal", "beyond_int32"}, seen


class NanGarbage(GoldenTarget):
    """The golden, except that a case with a NaN input gets all zeros (any answer the spec leaves open)."""

    name = "nan-garbage"

    def outputs(self, case):
        if any(t.dtype == "float32" and np.isnan(np.asarray(t.data, np.float32)).any() for t in case.inputs):
            return [np.zeros(tuple(o.shape), np.int64) for o in case.outputs]
        return super().outputs(case)


def test_a_nan_input_is_unspecified_and_not_judged():
    _, res = _hunt(NanGarbage(), "QUANTIZE", max_examples=50, isolation="none")
    assert res.counts.get("unspecified", 0) > 0 and not res.groups, res.summary()


@pytest.mark.parametrize("name, got", [("neg", -128), ("pos", 127)])
def test_litert_ref_quantize_beyond_int32_is_int32_min_where_the_spec_saturates(name, got):
    """float32 QUANTIZE with |x / s| beyond 2^31: the spec (and LiteRT's default path) saturates,
    the reference kernel's int32 conversion gives INT32_MIN (+ the zero point, wrapped)."""
    path = DATA / f"quantize-float-beyond-int32-{name}.json"
    case, ref = _run("tflite-ref", path)
    _, xnn = _run("tflite", path)
    assert golden(case)[0].ravel().tolist() == [got] and params(case)["quot_log2"] > 31
    assert np.asarray(xnn.outputs[0]).ravel().tolist() == [got]
    assert np.asarray(ref.outputs[0]).ravel().tolist() == [-1 - got]   # the other end of int8
    assert match("QUANTIZE", "tflite-ref", "hunt", "fail", params(case)).id == "litert-ref-quantize-float-beyond-int32"


def test_a_nan_input_is_unspecified_in_a_run_too():
    """The run's judge as the hunt's: a NaN input's outputs are not judged (unsupported, reason
    "unspecified"), a crash on it still is one."""
    from suite.core.tolerance import load_policy
    from suite.core.waivers import Waivers
    from suite.harness.judge import Goldens, Judge
    from targets.base import Outcome
    case = load_case(DATA / "quantize-float-beyond-int32-pos.json")
    case.inputs[0].data = np.array([[np.nan]], np.float32)
    judge = Judge(scheme="tflite-ref-double", policy=load_policy(None), waivers=Waivers(), goldens=Goldens(),
                  run_id="t", seed=0)
    v, failure = judge(case, "tflite-ref", Outcome.ok([np.array([[5]], np.int8)]), {})
    assert v.status.value == "unsupported" and v.reason.startswith("unspecified: input 0 has NaN") and failure is None
    v, _ = judge(case, "tflite-ref", Outcome.error("killed by SIGSEGV", status="crash"), {})
    assert v.status.value == "crash"
