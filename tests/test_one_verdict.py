"""One verdict per case, wherever it runs (#24): a finding's region (``where``) is a function of the
case (suite/cases/hunt/params.py) and of its verdict, evaluated by the judge for every case, so a
hunt's case file run again with ``pytest --target=<its target> --case-file=<file>`` gets the verdict
the hunt gave it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from suite.core.case import load_case
from suite.core.tolerance import load_policy
from suite.core.waivers import Waivers
from suite.harness.hunt import Hunter, HuntOptions
from suite.harness.judge import Goldens, Judge
from targets import get_target
from targets.base import Outcome, Target
from tests.conftest import ROOT
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"
DATA = ROOT / "tests" / "data" / "hunt"

#: file -> (its target, the verdict, the finding that explains it): what the runtime did is the
#: file's ``got`` (or its crash); the finding is the one whose text names the file
EXPECTED = {
    "add-multiplier-1-abort.json": ("tflite-ref", "crash", "litert-add-multiplier-1-or-above-abort"),
    "concat-htp-rank5-relu-segfault.json": ("htp", "crash", "qnn-htp-rank5-relu-segfault"),
    "conv-htp-relu6-ignored.json": ("htp", "fail", "qnn-htp-conv-clip-ignored"),
    # tflite saturates as the spec does (the golden wrapped when the hunt found it): a pass
    "conv-requant-overflow.json": ("tflite", "pass", None),
    "conv-uint8-int8-weights.json": ("tflite-ref", "fail", "litert-conv-uint8-int8-weights"),
    "dw-requant-overflow.json": ("tflite-ref", "fail", "litert-requant-left-shift-overflow"),
    "fc-requant-overflow.json": ("tflite-ref", "fail", "litert-requant-left-shift-overflow"),
    "gather-htp-middle-axis.json": ("htp", "fail", "qnn-htp-gather-last-axis"),
    "gather-htp-rank5.json": ("htp", "fail", "qnn-htp-gather-last-axis"),
    "less-htp-coarse.json": ("htp", "fail", "comparison-resolution-htp"),
    "less-scale-1-abort.json": ("tflite-ref", "crash", "litert-comparison-scale-1-or-above"),
    "less-scale-above-1.json": ("tflite-ref", "fail", "litert-comparison-scale-1-or-above"),
    "mean-htp-huge-multiplier.json": ("htp", "fail", "qnn-htp-mean-huge-multiplier"),
    "pad-htp-rank2.json": ("htp", "fail", "qnn-htp-pad-value"),
    "sub-activation-range-overflow.json": ("tflite-ref", "fail", "litert-activation-range-overflow"),
    "sub-golden-wrap.json": ("tflite-ref", "fail", "sub-output-multiplier-gt1"),
    "sub-htp-high-zero-point.json": ("htp", "fail", "qnn-htp-sub-high-zero-point"),
    "sub-htp-rank5-relu-segfault.json": ("htp", "crash", "qnn-htp-rank5-relu-segfault"),
    "sub-htp-scale-ratio-2lsb.json": ("htp", "fail", "qnn-htp-sub-input-scale-ratio"),
    "sub-htp-scale-ratio-wrong.json": ("htp", "fail", "qnn-htp-sub-input-scale-ratio"),
    "sum-float32-tie.json": ("tflite-ref", "fail", "litert-ref-sum-int8-as-uint8"),
    "quantize-float-beyond-int32-neg.json": ("tflite-ref", "fail", "litert-ref-quantize-float-beyond-int32"),
    "quantize-float-beyond-int32-pos.json": ("tflite-ref", "fail", "litert-ref-quantize-float-beyond-int32"),
}
#: a file written by hand without the runtime's output: LiteRT's reference, as its finding states it
GOT = {"dw-requant-overflow.json": [[0, 1]]}


class Replay(Target):
    """What the runtime returned for the file: its ``got``, or its crash."""

    def __init__(self, name: str, status: str, got):
        self.name, self.status, self.got = name, status, got

    def versions(self):
        return {}

    def run_one(self, case, timing) -> Outcome:
        if self.got is None:
            return Outcome.error("worker process killed by a signal (replayed)", status=self.status)
        return Outcome.ok([np.asarray(g).reshape(s.shape).astype(np.int64) for g, s in zip(self.got, case.outputs)])


def test_every_hunt_file_is_listed():
    assert sorted(p.name for p in DATA.glob("*.json")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_hunt_file_gets_one_verdict_as_a_case_file_and_in_the_hunt(name):
    target, status, finding = EXPECTED[name]
    doc = json.loads((DATA / name).read_text())
    case = load_case(DATA / name)
    replay = Replay(target, status, GOT.get(name, doc.get("got")))
    # as a case file (the plugin's judge: pytest --target=... --case-file=...)
    judge = Judge(scheme="tflite-ref-double", policy=load_policy(None), waivers=Waivers(), goldens=Goldens(),
                  run_id="t", seed=0)
    with np.errstate(all="ignore"):
        v, _ = judge(case, target, replay.run_one(case, None), {})
    assert (v.status.value, v.finding) == (status, finding), v.reason
    if status == "pass":
        return
    # in the hunt (its own run and record of the same case)
    h = Hunter(target, replay, HuntOptions(isolation="none"))
    try:
        hv, o = h.run_case(case)
        groups: dict = {}
        g = h._record(groups, case, hv, o, 0.0, 0)
    finally:
        h.close()
    assert (g.status, g.finding, g.known) == (status, finding, True)


def test_pytest_case_file_on_htp_is_the_known_finding_the_hunt_gave(pytester):
    """The issue's example, on the real runtime: HTP's SUB at output zero point 127, scale 4."""
    ok, why = get_target("htp").availability()
    if not ok:
        pytest.skip(f"htp: {why}")
    run, folder = run_inprocess(pytester, "--target=htp", f"--case-file={DATA / 'sub-htp-high-zero-point.json'}", "-q")
    assert run.returncode == 0 and "1 xfailed" in run.stdout, run.stdout[-2000:]
    rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    assert [(r["status"], r.get("finding")) for r in rows] == [("fail", "qnn-htp-sub-high-zero-point")]


def test_a_model_layer_with_a_hunt_file_s_values_gets_its_finding():
    """A whole-model run's layer that fails its own tolerance is explained by the finding whose
    region holds for the layer's case, as the judge does for a case (suite/models/verdicts.py)."""
    from suite.models.verdicts import _layer_finding
    case = load_case(DATA / "mean-htp-huge-multiplier.json")
    case.variant = "model"   # a harvested layer's variant: the region decides, not the variant
    assert _layer_finding(case, "htp", 255.0).id == "qnn-htp-mean-huge-multiplier"
    assert _layer_finding(case, "ort", 255.0) is None
