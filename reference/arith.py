"""Integer building blocks of quantized kernels, vectorized over NumPy int64 arrays.

Every function takes and returns int64 arrays holding int32-range values unless
stated, so a whole tensor (and per-channel multipliers) is processed at once.
Names follow gemmlowp / LiteRT so the code can be read side by side with them.
"""

from __future__ import annotations

import numpy as np

from suite.core.errors import QconformError

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

_INT_RANGES: dict = {}


def int_range(dt) -> tuple[int, int]:
    """(min, max) of an integer dtype, as Python ints (memoized: np.iinfo costs a microsecond)."""
    r = _INT_RANGES.get(dt)
    if r is None:
        info = np.iinfo(dt)
        r = _INT_RANGES[dt] = (int(info.min), int(info.max))
    return r


def as_i64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.int64)


def wrap_int32(x) -> np.ndarray:
    """Two's-complement wrap of int64 values into int32 range (C int32 arithmetic)."""
    x = as_i64(x)
    return ((x + 2**31) & 0xFFFFFFFF) - 2**31


def saturating_left_shift(x, left) -> np.ndarray:
    """int32 values times 2^left, saturated to int32: MultiplyByQuantizedMultiplier's left shift
    as the spec computes it (the real product, clamped). LiteRT's C kernels multiply in int32,
    which wraps (undefined behaviour; the finding litert-requant-left-shift-overflow); a value it
    saturates is >= 2^31, and times a multiplier >= 1/2 still clamps any 8- or 16-bit output."""
    x, left = as_i64(x), as_i64(left)
    # |x| <= 2^31, so a shift of 31 already takes any x != 0 to |x| >= 2^31 without int64 overflow
    return np.clip(x << np.minimum(left, 31), INT32_MIN, INT32_MAX)


def round_half_away(x) -> np.ndarray:
    """std::round: to nearest, ties away from zero (float in, float out, same float type).

    Not floor(x + 0.5): that sum rounds in x's own type, so 0.49999997f + 0.5f gives 1.0f
    and an odd float32 integer in [2^23, 2^24) plus 0.5 rounds up to the next even one.
    x - trunc(x) is exact, so the tie test is too.
    """
    x = np.asarray(x)
    t = np.trunc(x)
    with np.errstate(invalid="ignore"):          # inf - inf: an infinity stays itself
        return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


def round_half_even(x) -> np.ndarray:
    """rint / nearbyint in the default mode: to nearest, ties to even."""
    return np.rint(np.asarray(x))


def f32(x) -> np.ndarray | np.float32:
    """Round to float32 (how a runtime holds scales)."""
    return np.float32(x) if np.isscalar(x) else np.asarray(x, dtype=np.float32)


# ----------------------------------------------------------------- multipliers

def quantize_multiplier(d, single_rounding: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """LiteRT QuantizeMultiplier: real multiplier -> (int32 multiplier, shift).

    real ~= m * 2^(shift - 31), m in [2^30, 2^31) for d > 0. frexp gives q in [0.5, 1)
    and exponent e; m = round(q * 2^31) half away from zero; m == 2^31 -> m /= 2, e += 1;
    e < -31 -> (0, 0). The single-rounding build caps the shift at 30.
    """
    d = np.asarray(d, dtype=np.float64)
    q, e = np.frexp(d)
    m = round_half_away(q * float(2**31)).astype(np.int64)
    e = e.astype(np.int64)
    full = m == 2**31
    m = np.where(full, m // 2, m)
    e = np.where(full, e + 1, e)
    small = e < -31
    m = np.where(small, 0, m)
    e = np.where(small, 0, e)
    if single_rounding:
        big = e > 30
        m = np.where(big, INT32_MAX, m)
        e = np.where(big, 30, e)
    zero = d == 0
    m = np.where(zero, 0, m)
    e = np.where(zero, 0, e)
    return m, e


# ----------------------------------------------------------------- rounding steps

def srdhm(a, b) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul on int32 values.

    (a*b + nudge) / 2^31 truncating, nudge = 2^30 if a*b >= 0 else 1 - 2^30 (ties
    toward +inf); only INT32_MIN * INT32_MIN saturates (to INT32_MAX).
    """
    a, b = as_i64(a), as_i64(b)
    ab = a * b
    nudge = np.where(ab >= 0, 2**30, 1 - 2**30)
    num = ab + nudge
    # C integer division truncates toward zero
    q = np.where(num >= 0, num >> 31, -((-num) >> 31))
    overflow = (a == INT32_MIN) & (b == INT32_MIN)
    return np.where(overflow, INT32_MAX, q)


def rdbpot(x, exponent, half_up: bool = False) -> np.ndarray:
    """gemmlowp RoundingDivideByPOT: x / 2^exponent, ties away from zero.

    ``half_up``: ties toward +inf instead, (x + 2^(exponent-1)) >> exponent, as ARM's rounding
    shifts (SRSHL / SRSHR, NEON ``vrshlq_s32`` / ``vrshrq_n_s32``) do without gemmlowp's fixup
    of negative values: -2.5 -> -2 where gemmlowp gives -3.
    """
    x, exponent = as_i64(x), as_i64(exponent)
    if half_up:
        return (x + ((np.int64(1) << exponent) >> 1)) >> exponent
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def mbqm_double(x, m, shift, half_up: bool = False) -> np.ndarray:
    """MultiplyByQuantizedMultiplier, default build (two rounding steps).

    RDBPOT(SRDHM(x * 2^max(shift, 0), m), max(-shift, 0)); the left shift saturates
    (:func:`saturating_left_shift`). ``half_up``: the final shift rounds ties toward +inf
    (see :func:`rdbpot`); SRDHM already does (it is ARM's SQRDMULH).
    """
    x, m, shift = as_i64(x), as_i64(m), as_i64(shift)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    return rdbpot(srdhm(saturating_left_shift(x, left), m), right, half_up)


def mbqm_single(x, m, shift) -> np.ndarray:
    """MultiplyByQuantizedMultiplier with TFLITE_SINGLE_ROUNDING: one step, ties up.

    (x*m + 2^(30-shift)) >> (31-shift) in int64.
    """
    x, m, shift = as_i64(x), as_i64(m), as_i64(shift)
    total = 31 - shift
    rnd = np.int64(1) << (total - 1)
    return (x * m + rnd) >> total


def mbqm(x, m, shift, single_rounding: bool = False, half_up: bool = False) -> np.ndarray:
    """MultiplyByQuantizedMultiplier of either build (``half_up``: see :func:`mbqm_double`)."""
    return mbqm_single(x, m, shift) if single_rounding else mbqm_double(x, m, shift, half_up)


def mbqm_smaller_than_one_exp(x, m, shift, single_rounding: bool = False, half_up: bool = False) -> np.ndarray:
    """MultiplyByQuantizedMultiplierSmallerThanOneExp (double build: RDBPOT(SRDHM(x, m), -shift))."""
    if single_rounding:
        return mbqm_single(x, m, shift)
    return rdbpot(srdhm(x, m), -as_i64(shift), half_up)


def mbqm_greater_than_one(x, m, shift, single_rounding: bool = False) -> np.ndarray:
    """MultiplyByQuantizedMultiplierGreaterThanOne (double build: SRDHM(x * 2^shift, m))."""
    if single_rounding:
        return mbqm_single(x, m, shift)
    return srdhm(saturating_left_shift(x, shift), m)


# ----------------------------------------------------------------- activations

_ACT_RANGES = {
    "NONE": (None, None),
    "RELU": (0.0, None),
    "RELU6": (0.0, 6.0),
    "RELU_N1_TO_1": (-1.0, 1.0),
}


def activation_range(act: str, scale: float, zero_point: int, qmin: int, qmax: int) -> tuple[int, int]:
    """CalculateActivationRangeQuantized: clamp bounds of a fused activation.

    Bounds are zero_point + std::round(v / scale) with v / scale in float32.
    """
    act = act or "NONE"
    if not isinstance(act, str) or act not in _ACT_RANGES:
        raise QconformError(f"unknown fused_activation_function {act!r} (known: {', '.join(_ACT_RANGES)})",
                            field="attrs.fused_activation_function", rule="NONE, RELU, RELU6 or RELU_N1_TO_1")
    lo_v, hi_v = _ACT_RANGES[act]
    if lo_v is None and hi_v is None:
        return qmin, qmax
    s = np.float32(scale)

    def q(v):
        return int(zero_point + round_half_away(np.float32(v) / s))

    lo = qmin if lo_v is None else max(qmin, q(lo_v))
    hi = qmax if hi_v is None else min(qmax, q(hi_v))
    return lo, hi
