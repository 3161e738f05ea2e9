"""#29: ONNX Runtime's QLinearAdd (MLAS, AVX2) rounds HardSwish's x + 3 of a quantize_static model
1 LSB low wherever x is at its zero point: a real model's ADD group bias, explained by the finding
ort-qlinearadd-scale-ratios (tests/data/ort-qlinearadd-folded-tie.json)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from reference.registry import golden
from suite.core.case import load_case
from suite.core.findings import match
from targets import get_target
from targets.base import Timing
from targets.device_runner import isa_flags

CASE = Path(__file__).parent / "data" / "ort-qlinearadd-folded-tie.json"
f32 = np.float32


def _mlas_avx2(case) -> np.ndarray:
    """The finding's arithmetic: float32 scale ratios, the zero points and a scalar operand folded
    into one float32 constant, fused multiply-adds on the raw codes, round half to even."""
    a, b, c = case.inputs[0], case.inputs[1], case.outputs[0]
    r_a, r_b = f32(f32(a.scale[0]) / f32(c.scale[0])), f32(f32(b.scale[0]) / f32(c.scale[0]))
    fixed = f32(f32(c.zero_point[0]) - f32(f32(r_a * f32(a.zero_point[0])) + f32(r_b * f32(b.zero_point[0]))))
    fixed = f32(np.float64(fixed) + np.float64(r_b) * float(np.asarray(b.data).reshape(-1)[0]))   # (b a scalar)
    y = f32(np.asarray(a.data, np.float64) * np.float64(r_a) + np.float64(fixed))
    return np.clip(np.rint(y), -128, 127).astype(np.int64)


def test_the_spec_rounds_the_sum_at_x_zero_point_up_mlas_down():
    case = load_case(CASE)
    a, b, c = case.inputs[0], case.inputs[1], case.outputs[0]
    at_zp = np.asarray(a.data).ravel() == a.zero_point[0]
    assert at_zp.sum() == 9 and np.asarray(b.data).size == 1
    # exactly, 3.0 is 127.49999703 output steps (the float32 scales are not 3/127 and 6/255) ...
    steps = Fraction(b.scale[0]) * int(np.asarray(b.data).ravel()[0]) / Fraction(c.scale[0])
    assert Fraction(255, 2) - Fraction(1, 10**5) < steps < Fraction(255, 2)
    # ... which the spec's arithmetic rounds to 128 (code 0), under its default and ort-fp32-rne alike
    for scheme in (None, "ort-fp32-rne"):
        assert (golden(case, scheme)[0].ravel()[at_zp] == 0).all()
    # and the finding's MLAS arithmetic to 127 (code -1), equal to the golden elsewhere
    mlas = _mlas_avx2(case).ravel()
    assert (mlas[at_zp] == -1).all()
    np.testing.assert_array_equal(mlas[~at_zp], golden(case, "ort-fp32-rne")[0].ravel()[~at_zp])


def test_the_finding_explains_ort_add_bias_low_on_avx2():
    avx2, small = frozenset({"avx2", "fma"}), {"mean_err_lsb": -0.012, "max_abs_lsb": 1.0}   # the classifier's
    assert match("ADD", "ort", "*", "bias-", isa=avx2, params=small).id == "ort-qlinearadd-scale-ratios"
    assert match("ADD", "ort", "*", "bias+", isa=avx2, params=small) is None   # a bias upward is new
    # its region is a small bias of 1-LSB near-ties: a larger one, or errors beyond 1 LSB, are new
    assert match("ADD", "ort", "*", "bias-", isa=avx2, params={**small, "mean_err_lsb": -0.2}) is None
    assert match("ADD", "ort", "*", "bias-", isa=avx2, params={**small, "max_abs_lsb": 2.0}) is None
    assert match("ADD", "ort", "*", "bias-", isa=avx2) is None   # (no group: no region to hold)


def test_onnx_runtime_gives_the_findings_value():
    if "avx2" not in isa_flags():
        pytest.skip("the finding's ISA: AVX2")
    pytest.importorskip("onnxruntime")
    case = load_case(CASE)
    (o,) = get_target("ort").run([case], Timing(0, 1))
    assert o.status == "ok", o.reason
    np.testing.assert_array_equal(np.asarray(o.outputs[0]).astype(np.int64).ravel(), _mlas_avx2(case).ravel())
