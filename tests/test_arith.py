"""Unit tests of reference/arith.py, the integer building blocks of the golden.

Every expected value is derived by hand from the algorithm LiteRT / gemmlowp document
(quantization_util.cc QuantizeMultiplier, gemmlowp SaturatingRoundingDoublingHighMul and
RoundingDivideByPOT, common.h MultiplyByQuantizedMultiplier); the derivation is in the
comment next to it.
"""

from __future__ import annotations

import numpy as np
import pytest

from reference import arith
from reference.ops.conv import mbqm as conv_mbqm
from suite.core.errors import QconformError

INT32_MIN, INT32_MAX = -(2 ** 31), 2 ** 31 - 1


def qm(d, single=False):
    m, s = arith.quantize_multiplier(d, single)
    return int(m), int(s)


# ----------------------------------------------------------------- QuantizeMultiplier

@pytest.mark.parametrize("d, want", [
    (0.5, (2 ** 30, 0)),                    # frexp(0.5) = (0.5, 0): m = 0.5 * 2^31
    (1.0, (2 ** 30, 1)),                    # frexp(1) = (0.5, 1)
    (0.75, (1610612736, 0)),                # 0.75 * 2^31
    (0.375, (1610612736, -1)),              # frexp = (0.75, -1)
    (0.5 + 2.0 ** -32, (2 ** 30 + 1, 0)),   # q * 2^31 = 2^30 + 0.5: rounded half away -> 2^30 + 1
    (1 - 2.0 ** -31, (2 ** 31 - 1, 0)),     # q * 2^31 = 2^31 - 1 exactly: no carry
    (3.0, (1610612736, 2)),                 # frexp(3) = (0.75, 2)
])
def test_quantize_multiplier_values(d, want):
    assert qm(d) == want


def test_quantize_multiplier_carry_when_mantissa_rounds_to_2_pow_31():
    # 1 - 2^-33: q = 1 - 2^-33, q * 2^31 = 2^31 - 1/4 rounds to 2^31 -> halved, exponent + 1
    assert qm(1 - 2.0 ** -33) == (2 ** 30, 1)
    # 1 - 2^-32: q * 2^31 = 2^31 - 1/2, a tie, rounded away from zero -> 2^31 -> carry too
    assert qm(1 - 2.0 ** -32) == (2 ** 30, 1)
    # the same mantissa at another exponent keeps the carry: 2^-5 * (1 - 2^-33)
    assert qm(2.0 ** -5 * (1 - 2.0 ** -33)) == (2 ** 30, -4)


def test_quantize_multiplier_tiny_and_zero():
    assert qm(0.0) == (0, 0)
    # 2^-32 = 0.5 * 2^-31: shift -31 is still allowed
    assert qm(2.0 ** -32) == (2 ** 30, -31)
    # 2^-33 and 1.5 * 2^-33 have exponent -32 < -31: flushed to (0, 0)
    assert qm(2.0 ** -33) == (0, 0)
    assert qm(1.5 * 2.0 ** -33) == (0, 0)


def test_quantize_multiplier_single_rounding_caps_the_shift_at_30():
    assert qm(2.0 ** 29, single=True) == (2 ** 30, 30)         # frexp -> (0.5, 30): kept
    assert qm(2.0 ** 30, single=True) == (INT32_MAX, 30)       # exponent 31 -> capped
    assert qm(2.0 ** 31, single=True) == (INT32_MAX, 30)
    assert qm(2.0 ** 30) == (2 ** 30, 31)                      # the double build does not cap


def test_quantize_multiplier_is_vectorized():
    m, s = arith.quantize_multiplier(np.array([0.5, 0.375, 0.0, 2.0 ** -33]))
    assert m.tolist() == [2 ** 30, 1610612736, 0, 0]
    assert s.tolist() == [0, -1, 0, 0]


# ----------------------------------------------------------------- SRDHM

@pytest.mark.parametrize("a, b, want", [
    (2 ** 30, 2 ** 30, 2 ** 29),       # 2^60 / 2^31 exactly
    (1, 2 ** 30, 1),                   # 0.5 -> 1 (ties toward +inf)
    (-1, 2 ** 30, 0),                  # -0.5 -> 0 (toward +inf, not away from zero)
    (3, 2 ** 30, 2),                   # 1.5 -> 2
    (-3, 2 ** 30, -1),                 # -1.5 -> -1
    (-5, 2 ** 30, -2),                 # -2.5 -> -2
    (-3, 3 * 2 ** 29, -2),             # -2.25 -> -2
    (INT32_MIN, INT32_MAX, -INT32_MAX),  # -2^31 (2^31 - 1) / 2^31 = -(2^31 - 1), exact
])
def test_srdhm(a, b, want):
    assert int(arith.srdhm(a, b)) == want


def test_srdhm_saturates_only_int32_min_squared():
    assert int(arith.srdhm(INT32_MIN, INT32_MIN)) == INT32_MAX
    # INT32_MAX^2 / 2^31 = 2^31 - 2 + 2^-31, rounds to 2^31 - 2: no saturation needed
    assert int(arith.srdhm(INT32_MAX, INT32_MAX)) == INT32_MAX - 1


# ----------------------------------------------------------------- RDBPOT

@pytest.mark.parametrize("x, e, want", [
    (5, 1, 3), (-5, 1, -3),            # +-2.5 -> +-3 (away from zero)
    (3, 1, 2), (-3, 1, -2),            # +-1.5 -> +-2
    (6, 2, 2), (-6, 2, -2),            # +-1.5
    (-7, 2, -2), (-5, 2, -1),          # -1.75 -> -2, -1.25 -> -1
    (-1, 1, -1), (1, 1, 1),            # +-0.5 -> +-1
    (12345, 0, 12345), (-12345, 0, -12345),
    (-(2 ** 30), 31, -1),              # -0.5 -> -1
])
def test_rdbpot(x, e, want):
    assert int(arith.rdbpot(x, e)) == want


@pytest.mark.parametrize("x, e, want", [
    (5, 1, 3), (-5, 1, -2),            # +-2.5 -> 3, -2 (ties toward +inf: ARM's SRSHL)
    (3, 1, 2), (-3, 1, -1),            # +-1.5 -> 2, -1
    (-6, 2, -1), (6, 2, 2),            # -1.5 -> -1, +1.5 -> 2
    (-7, 2, -2), (-5, 2, -1),          # -1.75 -> -2, -1.25 -> -1: off ties as gemmlowp
    (-1, 1, 0), (-(2 ** 30), 31, 0),   # -0.5 -> 0
    (-12345, 0, -12345),
])
def test_rdbpot_half_up(x, e, want):
    assert int(arith.rdbpot(x, e, half_up=True)) == want


def test_mbqm_half_up_moves_only_negative_ties():
    # 0.375 = (0.75 * 2^31, -1): -4 and -12 give the ties -1.5 and -4.5 after SRDHM
    m, s = qm(0.375)
    x = np.array([-4, -12, 4, 12, -3])
    assert arith.mbqm_double(x, m, s, half_up=True).tolist() == [-1, -4, 2, 5, -1]
    assert arith.mbqm(x, m, s, False, True).tolist() == [-1, -4, 2, 5, -1]
    assert arith.mbqm_smaller_than_one_exp(x, m, s, False, True).tolist() == [-1, -4, 2, 5, -1]
    assert arith.mbqm(x, m, s, True, True).tolist() == arith.mbqm_single(x, m, s).tolist()   # one step: ties up already


# ----------------------------------------------------------------- MBQM, double vs single

def test_mbqm_double_vs_single_away_from_a_tie():
    # x * m / 2^32 = 260026.3829...: SRDHM rounds x*m/2^31 = 520052.766 to 520053, which
    # RoundingDivideByPOT(., 1) sees as the tie 260026.5 and rounds up; one rounding gives 260026
    x, m, s = 1029429, 1084877938, -1
    assert int(arith.mbqm_double(x, m, s)) == 260027
    assert int(arith.mbqm_single(x, m, s)) == 260026
    assert int(arith.mbqm(x, m, s)) == 260027
    assert int(arith.mbqm(x, m, s, single_rounding=True)) == 260026


def test_mbqm_ratio_0_375_ties():
    # QuantizeMultiplier(0.375) = (0.75 * 2^31, -1). -4 * 0.375 = -1.5 and -12 * 0.375 = -4.5:
    # double: SRDHM gives -3 / -9 exactly, RDBPOT(., 1) rounds away -> -2 / -5;
    # single: (x*m + 2^31) >> 32 rounds the ties up -> -1 / -4
    m, s = qm(0.375)
    x = np.array([-4, -12, 4, 12, -3])
    assert arith.mbqm_double(x, m, s).tolist() == [-2, -5, 2, 5, -1]
    assert arith.mbqm_single(x, m, s).tolist() == [-1, -4, 2, 5, -1]


def test_mbqm_double_rounding_error_of_three_quarters():
    # multiplier 0.25 = (2^30, -1), x = 1: exact 0.25. SRDHM(1, 2^30) = 0.5 -> 1 (tie up),
    # RDBPOT(1, 1) = 0.5 -> 1 (tie away): double rounding returns 1; single returns 0
    assert int(arith.mbqm_double(1, 2 ** 30, -1)) == 1
    assert int(arith.mbqm_single(1, 2 ** 30, -1)) == 0


def test_mbqm_left_shift_saturates_where_litert_wraps():
    # shift > 0: LiteRT's int32 multiply wraps 2^28 * 2^4 = 2^32 to 0; the spec's product is
    # 2^32 * 0.5 = 2^31, so the shift saturates: SRDHM(INT32_MAX, 2^30) = 2^30
    assert int(arith.mbqm_double(2 ** 28, 2 ** 30, 4)) == 2 ** 30
    assert int(arith.mbqm_double(-(2 ** 28), 2 ** 30, 4)) == -(2 ** 30)
    assert int(arith.mbqm_double(-1, 2 ** 30, 40)) == -(2 ** 30)         # beyond int64's shift width
    assert int(arith.mbqm_greater_than_one(2 ** 30, 2 ** 30, 3)) == 2 ** 30
    assert int(conv_mbqm(np.array([2 ** 28]), 2 ** 30, 4)[0]) == 2 ** 30  # the conv golden's own copy
    # multiplier 1.0 = (2^30, 1): x -> 2x -> SRDHM(2x, 2^30) = x
    assert arith.mbqm_double(np.array([-7, 0, 99]), 2 ** 30, 1).tolist() == [-7, 0, 99]


def test_mbqm_greater_than_one_and_smaller_than_one_exp():
    m, s = qm(3.0)                                  # (0.75 * 2^31, 2)
    assert arith.mbqm_greater_than_one(np.array([5, -5]), m, s).tolist() == [15, -15]
    m, s = qm(0.375)
    assert arith.mbqm_smaller_than_one_exp(np.array([-4, 4]), m, s).tolist() == [-2, 2]


def test_wrap_int32():
    assert arith.wrap_int32(np.array([2 ** 31, -(2 ** 31) - 1, 5])).tolist() == [INT32_MIN, INT32_MAX, 5]


def test_round_helpers():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4, -2.6])
    assert arith.round_half_away(x).tolist() == [1, 2, 3, -1, -2, -3, 2, -3]
    assert arith.round_half_even(x).tolist() == [0, 2, 2, -0.0, -2, -2, 2, -3]


def test_round_half_away_is_std_round_in_float32():
    # roundf(0.49999997f) = 0, but 0.49999997f + 0.5f is 1.0f (the sum rounds to even);
    # roundf(8388609.0f) = 8388609 (an integer), but 8388609 + 0.5 rounds to 8388610 in float32;
    # 4194304.5f is a real tie (float32 holds halves up to 2^23): away from zero
    x = np.array([0.49999997, -0.49999997, 8388609.0, -8388609.0, 4194304.5, -4194304.5], np.float32)
    r = arith.round_half_away(x)
    assert r.dtype == np.float32
    assert r.tolist() == [0.0, -0.0, 8388609.0, -8388609.0, 4194305.0, -4194305.0]
    assert arith.round_half_away(np.array([np.inf, -np.inf])).tolist() == [np.inf, -np.inf]


# ----------------------------------------------------------------- activation_range

def test_activation_range():
    assert arith.activation_range("NONE", 0.1, -5, -128, 127) == (-128, 127)
    assert arith.activation_range(None, 0.1, -5, -128, 127) == (-128, 127)
    assert arith.activation_range("RELU", 0.1, -5, -128, 127) == (-5, 127)
    # 6 / 0.1f = 59.9999991 in float32 is 60.0: -5 + 60
    assert arith.activation_range("RELU6", 0.1, -5, -128, 127) == (-5, 55)
    # 1 / 0.02f = 49.99999925 -> float32 50.0
    assert arith.activation_range("RELU_N1_TO_1", 0.02, 10, -128, 127) == (-40, 60)
    # 1 / 0.4f is 2.5 in float32: std::round goes away from zero -> +-3 (half-even would give 2)
    assert arith.activation_range("RELU_N1_TO_1", 0.4, 0, -128, 127) == (-3, 3)
    # bounds beyond the type clamp to it
    assert arith.activation_range("RELU6", 0.01, 100, -128, 127) == (100, 127)
    assert arith.activation_range("RELU_N1_TO_1", 0.001, 0, -128, 127) == (-128, 127)


def test_activation_range_rejects_unknown():
    # a case file's option: one clear error naming the field, not a bare ValueError
    with pytest.raises(QconformError, match="TANH") as e:
        arith.activation_range("TANH", 0.1, 0, -128, 127)
    assert e.value.field == "attrs.fused_activation_function"
