"""Bias and rounding (issue #14): the round-half-up schemes, the sign test, the bias of a whole
(op, target) under the tolerance policy, and a target's declared scheme, from the scheme's
arithmetic to the run's exit status, certificate, --resume and xdist."""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from reports.certify import read_certificate

from reference import golden
from reference.schemes import get_scheme, kernel_schemes
from reports import causes
from reports.causes import BiasTally, SchemeTally, judge_group
from suite.cases.generate import generate
from suite.core.tolerance import load_policy, sign_test_p
from tests.conftest import rows_written
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"

HALF_UP = "--target=tests.bias_targets:HalfUp"
GOLDEN = "--target=tests.helper_targets:GoldenTarget"
ADD30 = ("--ops", "ADD", "--cases-per-op", "30")


# ----------------------------------------------------------------------------- the schemes

@pytest.mark.parametrize("acc, want", [
    # acc * 0.25 (m = 2^30, shift -1): the exact value, then per scheme:
    #        tflite-ref-double, arm-half-up-double, arm-half-up-single, tflite-ref-single
    (10, (3, 3, 3, 3)),      # +2.5: every scheme rounds the tie up
    (-10, (-3, -2, -2, -2)),  # -2.5: gemmlowp's RDBPOT away from zero; ARM's rounding shift (and one step) up
    (9, (3, 3, 2, 2)),       # +2.25: SRDHM's rounding makes 2.5, the second step 3 (double rounding)
    (-11, (-3, -2, -3, -3)),  # -2.75: SRDHM gives -2.5, which only the half-up shift takes to -2
])
def test_half_up_schemes_at_ties(acc, want):
    names = ("tflite-ref-double", "arm-half-up-double", "arm-half-up-single", "tflite-ref-single")
    got = tuple(int(get_scheme(n).requantize(np.array([acc]), 0.25, 0, -128, 127)[0]) for n in names)
    assert got == want


def test_half_up_names():
    assert "arm-half-up-double" in kernel_schemes()
    # one rounding step with ties up on every op, FULLY_CONNECTED's too: D1's arithmetic, one golden
    assert get_scheme("arm-half-up-single") is get_scheme("caffe-d1")


def test_half_up_double_only_moves_negative_ties_up_in_every_op():
    """Against the same arithmetic with gemmlowp's final shift (caffe-d2: MBQM on every op), every
    element is equal or one up, and each op that requantizes has some: none is left out."""
    ops = ["ADD", "SUB", "MUL", "CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "FULLY_CONNECTED",
           "BATCH_MATMUL", "MEAN", "SUM", "LEAKY_RELU", "L2_NORMALIZATION", "QUANTIZE", "RESIZE_BILINEAR"]
    up = dict.fromkeys(ops, 0)
    for c in generate(ops, 10):
        for a, b in zip(golden(c, "arm-half-up-double"), golden(c, "caffe-d2")):
            d = a.astype(np.int64) - b.astype(np.int64)
            assert set(np.unique(d).tolist()) <= {0, 1}, c.id
            up[c.op] += int(d.sum())
    assert all(up.values()), up


# ----------------------------------------------------------------------------- the sign test

def test_sign_test_p_exact_values():
    assert sign_test_p(0, 0) == 1.0 and sign_test_p(5, 5) == 1.0 and sign_test_p(3, 2) == 1.0
    assert sign_test_p(10, 0) == pytest.approx(2 / 1024, rel=1e-12)
    assert sign_test_p(6, 4) == pytest.approx(2 * (1 + 10 + 45 + 120 + 210) / 1024, rel=1e-12)
    assert sign_test_p(1, 4) == pytest.approx(2 * 6 / 32, rel=1e-12)      # symmetric
    assert sign_test_p(21, 0) < 1e-6 < sign_test_p(20, 0)                  # the default rule's edge


def test_sign_test_p_large_counts():
    # a normal approximation: 51000 : 49000 is 6.3 sd off an even split, p ~ 2.5e-10
    p = sign_test_p(51000, 49000)
    assert 1e-10 < p < 1e-9
    assert sign_test_p(50100, 49900) == pytest.approx(0.527, abs=0.01)
    assert sign_test_p(10**6, 10) == 0.0 and sign_test_p(40000, 0) == 0.0    # below the float range


# ----------------------------------------------------------------------------- the group verdict

def _tallies(pos: int, neg: int, elements: int = 10000, dtype: str = "int8", exact=None):
    b, s = BiasTally(), SchemeTally()
    row = {"status": "pass", "elements": elements, "sum_err_lsb": pos - neg, "pos_err": pos, "neg_err": neg,
           "out_dtype": dtype, "scheme_exact": exact or {"tflite-ref-double": elements - pos - neg}}
    b.add(row)
    s.add(row)
    b.add({**row, "finding": "x"})     # explained rows are left out
    b.add({**row, "status": "waived"})
    return b, s


def test_default_policy_judges_bias(monkeypatch):
    monkeypatch.setattr(causes, "match", lambda *a, **kw: None)
    pol = load_policy()
    cols, fails = judge_group("ADD", "k", *_tallies(21, 0, 1000), pol)
    assert cols["bias"] == "+" and [f["kind"] for f in fails] == ["bias"]
    assert "21 above, 0 below" in cols["group_failure"] and "(tolerance rule 0)" in cols["group_failure"]
    assert "|mean| > 0.003 LSB" in cols["group_failure"]
    assert judge_group("ADD", "k", *_tallies(20, 0, 1000), pol)[0]["bias"] == ""            # p 1.9e-6
    assert judge_group("ADD", "k", *_tallies(60, 100, 1000), pol)[0]["group_failure"] is None  # p 0.002
    assert judge_group("ADD", "k", *_tallies(0, 300), pol)[0]["bias"] == "-"
    assert judge_group("RESHAPE", "k", *_tallies(0, 300), pol)[0]["bias"] == ""       # exact ops: no bias rule
    assert judge_group("ADD", "k", *_tallies(0, 300), None)[0]["bias"] == ""          # no policy, no verdict


@pytest.mark.parametrize("pos, neg, elements, biased", [
    # QNN HTP's ADD on efficientnet_lite0's 9 residual ADDs (one random input, 2026-12-05): -0.0015 LSB, p 1.6e-18
    (474, 785, 210112, False),
    (0, 62, 20000, True),         # -0.0031 LSB: just beyond the bound
    (0, 60, 20000, False),        # -0.003 LSB, p 1.7e-18: not beyond it
    (89, 0, 19850, True),         # QUANTIZE, half-up final shift, default run: +0.0045
    (144, 0, 24948, True),        # MUL, every tie up, default run: +0.0058
    (0, 300, 10000, True),
])
def test_a_bias_needs_significance_and_a_size_that_matters(monkeypatch, pos, neg, elements, biased):
    monkeypatch.setattr(causes, "match", lambda *a, **kw: None)
    cols, fails = judge_group("ADD", "htp", *_tallies(pos, neg, elements), load_policy())
    assert sign_test_p(pos, neg) < 1e-6
    assert bool(cols["bias"]) is biased and bool(cols["group_failure"]) is biased, cols


def _with_ties(pos, neg, up, down, toward, elements=1000, counted=True):
    b, s = BiasTally(), SchemeTally()
    row = {"status": "fail", "elements": elements, "sum_err_lsb": pos - neg, "pos_err": pos, "neg_err": neg,
           "out_dtype": "int8", "scheme_exact": {"tflite-ref-double": elements - pos - neg}}
    if counted:
        row.update(tie_up=up, tie_down=down, tie_toward_zp=toward)
    b.add(row)
    s.add(row)
    return b, s


@pytest.mark.parametrize("pos, neg, ties, words", [
    # a kernel rounding half up (ADD, default run): every negative tie +1, each also toward zero
    (313, 0, (313, 0, 313), "mechanism: ties broken toward +inf (313 up, 0 down, 313 toward zero, of 313 "
                            "mismatching elements)"),
    (5, 90, (0, 80, 80), "mechanism: ties broken toward -inf (0 up, 80 down, 80 toward zero, of 95"),
    # rounding half toward zero (ADD, default run): both ways, all toward the zero point
    (313, 558, (313, 558, 871), "mechanism: ties broken toward zero (313 up, 558 down, 871 toward zero, of 871"),
    # QNN HTP's float requantization on efficientnet_lite0's ADDs (over fewer elements): near-ties, no exact tie
    (474, 785, (0, 0, 0), "mechanism: not a tie-breaking rule (0 of the 1259 mismatching elements are exact "
                          "ties: 0 up, 0 down, 0 toward zero)"),
    # ties a third of the side (as arm-half-up-double's MUL: its final shift's ties are mostly not exact ones)
    (10, 300, (0, 100, 100), "mechanism: ties broken toward -inf at every exact tie (0 up, 100 down, 100 toward "
                             "zero), 100 of the 300 mismatching elements below the golden: the others are no exact tie"),
    (300, 100, (200, 100, 150), "mechanism: not a tie-breaking rule"),               # ties both ways, not all toward
])
def test_a_bias_names_the_tie_breaking_that_makes_it(monkeypatch, pos, neg, ties, words):
    monkeypatch.setattr(causes, "match", lambda *a, **kw: None)
    cols, fails = judge_group("ADD", "k", *_with_ties(pos, neg, *ties, elements=10000), load_policy())
    assert len(fails) == 1 and words in fails[0]["text"] and words in cols["group_failure"], cols["group_failure"]


def test_no_mechanism_without_every_row_s_tie_counts(monkeypatch):
    monkeypatch.setattr(causes, "match", lambda *a, **kw: None)
    b, s = _with_ties(300, 0, 0, 0, 0, counted=False)     # a row judged before rows had tie counts
    cols, _ = judge_group("ADD", "k", b, s, load_policy())
    assert cols["bias"] == "+" and "mechanism" not in cols["group_failure"]
    b.add({"status": "pass", "elements": 10, "sum_err_lsb": 0, "pos_err": 0, "neg_err": 0, "out_dtype": "int8"})
    assert b.mechanism("int8", "+") is None                # (an exact row needs none; the other still lacks them)


def test_analyse_counts_the_ties_each_way():
    """reports.causes.analyse on a case whose ties a kernel broke up (HalfUp): each mismatching tie is up and
    toward the zero point; toward zero: up at negative ties, down at positive ones, all toward the zero point."""
    from reference.schemes import get_scheme  # noqa: F401  (the golden's schemes are what analyse compares)
    from tests import tie_kernels
    c = next(c for c in generate(["ADD"]) if sum(tie_kernels.tie_split(c)) >= 4)
    want = golden(c)
    pos_ties, neg_ties = tie_kernels.tie_split(c)
    for kernel, up, down in ((tie_kernels.HalfUp(), neg_ties, 0), (tie_kernels.TowardZero(), neg_ties, pos_ties)):
        got = kernel.run_one(c, None).outputs
        errors = [np.asarray(g, np.int64) - np.asarray(w, np.int64) for g, w in zip(got, want)]
        out = causes.analyse(c, errors, want, lambda name: golden(c, name), "tflite-ref-double")
        assert (out["tie_up"], out["tie_down"], out["tie_toward_zp"]) == (up, down, up + down), c.id


def test_a_bias_finding_explains_its_own_sign_only(monkeypatch):
    from suite.core.findings import Finding
    f = Finding("known-low", ("ADD",), ("k",), "why", status=("bias-",))
    monkeypatch.setattr(causes, "match", lambda op, t, v, status, **kw: f if f.matches(op, t, v, status) else None)
    pol = load_policy()
    cols, fails = judge_group("ADD", "k", *_tallies(0, 300), pol)
    assert fails[0]["finding"] == "known-low" and cols["group_failure"] is None and "known-low" in cols["group_known"]
    cols, fails = judge_group("ADD", "k", *_tallies(300, 0), pol)       # it flipped: new
    assert fails[0]["finding"] is None and cols["group_failure"]


def test_declared_scheme_gap(monkeypatch):
    monkeypatch.setattr(causes, "match", lambda *a, **kw: None)
    n = 10000
    for gap, flagged in ((causes.SCHEME_GAP_MIN - 1, False), (causes.SCHEME_GAP_MIN, True)):
        b, s = _tallies(0, 0, n, exact={"tflite-ref-double": n - gap, "xnnpack-fp32": n})
        cols, fails = judge_group("ADD", "k", b, s, None, expected="tflite-ref-double")
        assert cols["expected_scheme_exact_pct"] == round(100 * (n - gap) / n, 3)
        assert (cols["scheme_mismatch"] == "xnnpack-fp32") is flagged and bool(fails) is flagged
    cols, fails = judge_group("ADD", "k", b, s, None, expected="a free label")   # not a scheme: not checked
    assert cols["expected_scheme_exact_pct"] is None and not fails


# ----------------------------------------------------------------------------- runs

@pytest.fixture
def run(pytester):
    return lambda *args, **kw: run_inprocess(pytester, *args, **kw)


def _group_failure(proc) -> str:
    return next(line for line in proc.stdout.splitlines() if line.startswith("ADD on half-up as a whole"))


def _summary(rd) -> dict:
    return {(r["op"], r["target"]): r for r in csv.DictReader((rd / "summary.csv").open())}


def test_half_up_kernel_is_named_and_fails_the_run_on_its_bias(run):
    proc, rd = run(HALF_UP, "--target=tests.bias_targets:HalfUpClaimsRef", GOLDEN, *ADD30, "--certify")
    assert proc.returncode == 1, proc.stdout[-3000:]
    # every case within tolerance; each (op, target) judged whole is a test too (suite/harness/groups.py)
    proc.result.assert_outcomes(passed=3 + 1, failed=2)   # 3 (op, target)s' test_cases, golden's test_group
    assert {f"ADD:{t}::test_group" for t in ("half-up", "half-up-claims-ref")} == {
        ln.split(" ")[1].split("::", 1)[1] for ln in proc.stdout.splitlines() if ln.startswith("FAILED ")}
    s = _summary(rd)
    hu = s[("ADD", "half-up")]
    assert hu["best_scheme"] == "arm-half-up-double" and float(hu["best_scheme_exact_pct"]) == 100.0
    assert hu["cause_unexplained"] == "0" and int(hu["cause_tie"]) > 0
    assert hu["bias"] == "+" and float(hu["bias_lsb"]) > 0 and float(hu["bias_p"]) < 1e-6
    assert "int8 outputs biased +" in hu["group_failure"] and not hu["scheme_mismatch"]
    # its mechanism, counted: every mismatching element a negative tie broken up
    assert "mechanism: ties broken toward +inf (313 up, 0 down, 313 toward zero, of 313 mismatching elements)" \
        in hu["group_failure"]
    assert s[("ADD", "golden")]["bias"] == "" and not s[("ADD", "golden")]["group_failure"]
    claims = s[("ADD", "half-up-claims-ref")]
    assert claims["expected_scheme"] == "tflite-ref-double" and claims["scheme_mismatch"] == "arm-half-up-double"
    assert float(claims["expected_scheme_exact_pct"]) < 100.0
    assert "BIAS: ADD on half-up: int8 outputs biased +" in proc.stdout
    # the terminal's line fits its width (80 columns here); summary.md has it whole
    assert "SCHEME: ADD on half-up-claims-ref: declares expected_scheme" in proc.stdout
    assert "declares expected_scheme tflite-ref-double" in (rd / "summary.md").read_text()
    assert json.loads((rd / "run.json").read_text())["exit_status"] == 1
    assert "FAIL" in (rd / "summary.md").read_text().splitlines()[2]
    cert = {(o["target"], o["spec"]): o for o in read_certificate(rd)["ops"]
            if o["op"] == "ADD"}
    assert cert[("half-up", "litert-int8")]["verdict"] == "non-conformant"
    assert any("biased +" in w and "toward +inf" in w for w in cert[("half-up", "litert-int8")]["op_failures"])
    assert cert[("half-up", "litert-int8")]["bias"]["ties"] == {"up": 313, "down": 0, "toward_zero": 313}
    assert any("declares expected_scheme" in w for w in cert[("half-up-claims-ref", "litert-int8")]["op_failures"])
    assert cert[("golden", "litert-int8")]["verdict"] == "bit-exact"


def test_resumed_run_gives_the_verdict_of_an_uninterrupted_one(run):
    proc, rd = run(HALF_UP, *ADD30)
    assert proc.returncode == 1
    want = (rd / "summary.csv").read_text()
    lines = (rd / "results.jsonl").read_text().splitlines(keepends=True)
    (rd / "results.jsonl").write_text("".join(lines[:5]))       # as if killed after 5 cases
    proc2, rd2 = run(f"--resume={rd}", HALF_UP)
    assert rd2 == rd and proc2.returncode == 1, proc2.stdout[-3000:]
    proc2.result.assert_outcomes(passed=1, failed=1)   # test_cases (the cases not recorded); the bias: test_group
    assert [ln for ln in proc2.stdout.splitlines() if ln.startswith("qconform:")][-1].endswith(
        f"; {len(lines)} results: {len(lines)} passed")   # the recorded cases counted too
    assert (rd / "summary.csv").read_text() == want
    # the group's test judged every case, the 5 recorded ones too: the uninterrupted run's words
    assert _group_failure(proc2) == _group_failure(proc) and "19024 elements" in _group_failure(proc)
    assert "BIAS: ADD on half-up" in proc2.stdout


def test_xdist_run_gives_the_verdict_of_a_single_process(run, run_suite, tmp_path):
    pytest.importorskip("xdist")
    args = (HALF_UP, GOLDEN, "--ops", "ADD,MUL", "--cases-per-op", "30")
    one, rd1 = run(*args)
    xml = tmp_path / "junit.xml"
    many, rd2 = run_suite(*args, "-n", "2", f"--junitxml={xml}", report_dir=tmp_path / "xdist")
    assert one.returncode == many.returncode == 1, many.stdout[-3000:] + many.stderr[-3000:]
    # each (op, target) judged whole is a JUnit testcase, on the worker that ran its cases
    groups = {c.get("classname").rsplit(".", 1)[1]: c.find("failure") for c in ET.parse(xml).getroot().iter("testcase")
              if c.get("name") == "test_group"}
    assert set(groups) == {f"{op}:{t}" for op in ("ADD", "MUL") for t in ("half-up", "golden")}
    assert {k for k, f in groups.items() if f is not None} == {"ADD:half-up", "MUL:half-up"}
    assert "int8 outputs biased +" in groups["ADD:half-up"].get("message")
    props = {p.get("name"): p.get("value") for p in ET.parse(xml).getroot().iter("property")}
    assert props["qconform.run_id"] == json.loads((rd2 / "run.json").read_text())["run_id"]   # under xdist too
    cols = ("bias", "bias_lsb", "bias_p", "group_failure", "best_scheme", "best_scheme_exact_pct")
    s1, s2 = _summary(rd1), _summary(rd2)
    assert s1.keys() == s2.keys() and {k: [s1[k][c] for c in cols] for k in s1} == {k: [s2[k][c] for c in cols] for k in s2}
    assert {k for k, r in s2.items() if r["bias"]} == {("ADD", "half-up"), ("MUL", "half-up")}
    assert "BIAS: ADD on half-up" in many.stdout


def test_a_group_is_judged_on_all_its_cases_even_those_not_selected(run):
    """-k leaving out cases (or --lf running only the group's test): the group's test runs them
    for its verdict (a subset that shows no bias shows nothing), and fails for those that fail."""
    whole, rd = run(HALF_UP, *ADD30)
    every = sorted(r["case_id"] for r in rows_written(rd))
    assert len(every) == 36
    proc, rd = run(HALF_UP, *ADD30, "-k", "not sat_hi", "--item=case")
    proc.result.assert_outcomes(passed=34, failed=1, deselected=2)     # 36 cases, 2 left out
    assert _group_failure(proc) == _group_failure(whole)   # the verdict of all 36
    assert len(rows_written(rd)) == 36
    # --case-id (one item per (op, target)): the same
    proc, rd = run(HALF_UP, *ADD30, "--case-id=" + ",".join(c for c in every if "sat_hi" not in c))
    proc.result.assert_outcomes(passed=1, failed=1)
    assert _group_failure(proc) == _group_failure(whole) and len(rows_written(rd)) == 36
    proc, _ = run("--target=tests.spine_targets:OffByOne", *ADD30, "-k", "test_group")   # none of its cases
    proc.result.assert_outcomes(failed=1, deselected=1)   # (its test_cases)
    assert "of its cases not selected here fail: ADD-" in proc.stdout


def test_group_items_follow_their_cases_and_only_where_a_rule_judges():
    from types import SimpleNamespace as NS

    from suite.harness.groups import after_their_cases, has_group_rule
    a, b = NS(name="A"), NS(name="B")
    items = [NS(name="test_group", parent=a), NS(name="x", parent=a), NS(name="test_group", parent=b),
             NS(name="y", parent=b), NS(name="z", parent=a)]
    after_their_cases(items)
    assert [(i.name, i.parent.name) for i in items] == [("x", "A"), ("y", "B"), ("test_group", "B"),
                                                        ("z", "A"), ("test_group", "A")]
    pol = load_policy(None)
    assert has_group_rule("ADD", "ort", {"int8"}, pol, None)
    assert not has_group_rule("RESHAPE", "ort", {"int8"}, pol, None)       # exact ops: no bias rule
    assert not has_group_rule("ADD", "ref", {"int8"}, pol, None)           # the golden against itself
    assert has_group_rule("RESHAPE", "ort", {"int8"}, pol, "tflite-ref-double")   # a declared scheme


def test_a_known_bias_is_the_group_tests_xfail(run, monkeypatch):
    from suite.core.findings import Finding
    f = Finding("known-half-up", ("ADD",), ("half-up",), "ties up", status=("bias+",))
    monkeypatch.setattr(causes, "match", lambda op, t, v, status, **kw: f if f.matches(op, t, v, status) else None)
    proc, _ = run(HALF_UP, *ADD30, "-rx")
    assert proc.returncode == 0, proc.stdout[-3000:]
    proc.result.assert_outcomes(passed=1, xfailed=1)   # test_cases (36 cases), test_group
    assert [ln for ln in proc.stdout.splitlines() if ln.startswith("qconform:")][-1].endswith("; 36 results: 36 passed")
    assert "known finding known-half-up" in proc.stdout


def test_a_groups_printed_repro_fails_as_the_run_did(run, tmp_path):
    """The group verdict's reproduction command carries what decided it (here --certify and the run's
    tolerance copy); run as printed, it fails the same group the same way."""
    import shlex
    import subprocess
    import sys

    from tests.conftest import ROOT
    proc, rd = run(HALF_UP, *ADD30, "--certify")
    assert proc.returncode == 1, proc.stdout[-3000:]
    cmd = next(ln.split("reproduce: ", 1)[1] for ln in proc.stdout.splitlines()
               if ln.lstrip("E ").startswith("reproduce: pytest ") and "--target=tests.bias_targets:HalfUp" in ln)
    args = shlex.split(cmd)
    assert args[0] == "pytest" and "--certify" in args and any(a.startswith("--tolerance=") for a in args)
    again = subprocess.run([sys.executable, "-m", *args, "-q", "-p", "no:randomly", f"--report-dir={tmp_path / 'r'}"],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert again.returncode == 1, again.stdout[-3000:]
    assert _group_failure(proc).split(":")[0] in again.stdout and "biased +" in again.stdout
