"""What suite/core/findings.toml and tolerances.toml say of runtimes, checked against the runtimes
themselves (issue #14: a finding's text must be what the runtime does)."""

from __future__ import annotations

import numpy as np
import pytest

from reference import golden
from suite.core.case import Case, Tensor, load_case
from suite.core.findings import findings
from suite.core.tolerance import load_policy
from targets import get_target
from targets.base import Timing
from tests.conftest import ROOT


def _fc(weights: np.ndarray, wdtype: str) -> Case:
    return Case(op="FULLY_CONNECTED", attrs={}, id="fc-u8-int8w", spec="qnn", inputs=[
        Tensor("uint8", (1, 4), np.array([[200, 50, 128, 255]], np.uint8), [0.02], [128]),
        Tensor(wdtype, (2, 4), weights, [0.01], [0]),
    ], outputs=[Tensor("uint8", (1, 2), None, [0.01], [128])])


def _run(target: str, case: Case) -> np.ndarray:
    t = get_target(target)
    ok, why = t.availability()
    if not ok:
        pytest.skip(f"{target}: {why}")
    o = t.run_one(case, Timing(0, 1))
    assert o.status == "ok", o.reason
    return np.asarray(o.outputs[0]).ravel()


@pytest.mark.parametrize("target", ["tflite-ref", "tflite"])
def test_litert_fc_reads_int8_weights_as_uint8(target):
    w = np.array([[10, -20, 30, -40], [-5, 6, -70, 80]], dtype=np.int8)
    got = _run(target, _fc(w, "int8"))
    as_uint8 = golden(_fc((w.astype(np.int64) % 256).astype(np.uint8), "uint8"))[0].ravel()
    spec = golden(_fc(w, "int8"))[0].ravel()
    assert spec.tolist() == [72, 255] and got.tolist() == as_uint8.tolist() == [255, 255]
    text = next(f for f in findings() if f.id == "litert-ref-fc-uint8-int8-weights").reason
    assert "w mod 256" in text and "[255, 255]" in text and "[72, 255]" in text and "zeros" not in text


def test_resize_bilinear_float_coordinates_are_tolerated_up_to_3_lsb():
    case = load_case(ROOT / "tests" / "data" / "resize-bilinear-coord10-min.json")
    ref = golden(case)[0].ravel()
    # the reference's unrounded value: 10-bit coordinates put output 9 at 115.52 (true bilinear: 114.46)
    assert ref[9] == 116 and golden(case, "exact")[0].ravel()[9] == 115.5234375
    assert _run("tflite-ref", case).tolist() == ref.tolist()   # the golden is LiteRT's reference
    policy = load_policy()
    for target in ("tflite", "ort"):
        got = _run(target, case)
        assert got[9] == 114 and np.abs(got.astype(int) - ref.astype(int)).max() == 2
        tol = policy.lookup("RESIZE_BILINEAR", target, "int8")
        assert tol.max_abs_lsb == 3 and "1/1024" in tol.rule.reason
    assert policy.lookup("RESIZE_BILINEAR", "tflite-ref", "int8").max_abs_lsb == 0
    worst = load_case(ROOT / "tests" / "data" / "resize-bilinear-coord10-3lsb.json")
    for target in ("tflite", "ort"):   # the worst the generator's sizes give: 3 LSB, still within the rule
        assert np.abs(_run(target, worst).astype(int) - golden(worst)[0].ravel().astype(int)).max() == 3
