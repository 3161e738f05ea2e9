"""Nonlinear activations: SOFTMAX, LOG_SOFTMAX, LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU, RELU, RELU6.

Under a fixed scheme each golden reproduces what LiteRT's ``BUILTIN_REF`` resolver runs
for int8 (tflite/kernels/activations.cc, register_ref.cc):

* SOFTMAX: ``reference_ops::Softmax``, the gemmlowp fixed-point pipeline (Q5.26 input
  differences, ``exp_on_negative_values``, Q12.19 sum, ``GetReciprocal``). Only the
  optimized registration uses the float lookup table.
* LOG_SOFTMAX: ``reference_integer_ops::LogSoftmax`` (same Q5.26 exp, a fixed-point log
  of the sum, output in Q4 steps of 1/16 with zero point 127).
* LOGISTIC / TANH: a 256-entry table built at prepare in float32 (``LUTPopulateInt8``),
  eval is a lookup.
* HARD_SWISH: ``reference_ops::HardSwish`` (int16 internals, 16-bit multipliers).
* LEAKY_RELU: ``reference_ops::QuantizeLeakyRelu`` (identity and alpha multipliers).
* RELU / RELU6: ``ReluX`` (one multiplier, then the activation clamp).

The gemmlowp fixed-point functions (``fp_*``) are re-implemented below; they take int64
arrays holding int32 values (whole tensors at once) or Python ints (one row's scalar).
With int8 input, (LOG_)SOFTMAX's per-element exp depends only on the difference to the
row maximum: it is computed once for the 256 possible differences and gathered.
Under a float scheme each op is computed on the dequantized input in ``scheme.ftype``
and finished with ``scheme.quantize_real`` (what ONNX Runtime and QNN do: DQ -> op -> Q).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from suite.core.dtypes import DTYPES
from suite.core.errors import QconformError

from reference import arith
from reference.common import q, qrange, scale, zp
from suite.core.geometry import attr_float
from reference.registry import register

I32_MIN, I32_MAX = arith.INT32_MIN, arith.INT32_MAX


# --------------------------------------------------------------------------- gemmlowp fixed point
#
# A Qm value is an int32 raw r meaning r / 2^(31 - m). Products of two raws are
# SaturatingRoundingDoublingHighMul; sums are plain int32 adds. The functions below are
# written without branches so that they take Python ints (a row's scalar) and int64
# arrays (whole tensors) alike: a comparison is 0/1 and selects by multiplication.

def _fx(value: float, frac_bits: int = 31) -> int:
    """A fixed-point constant: round(value * 2^frac_bits) (how gemmlowp's constants are made)."""
    return int(round(value * 2.0 ** frac_bits))


# exp(x) on [-1/4, 0): Taylor expansion around -1/8
_EXP_M1_8 = _fx(math.exp(-1.0 / 8.0))
_ONE_THIRD = _fx(1.0 / 3.0)
# barrel shifter: bit k of the remaining multiple of 1/4 multiplies by exp(-2^k)
_EXP_BARREL = [(k, _fx(math.exp(-(2.0 ** k)))) for k in (-2, -1, 0, 1, 2, 3, 4)]
# Newton-Raphson division constants (Q2.29)
_C48_17 = _fx(48.0 / 17.0, 29)
_CNEG32_17 = _fx(-32.0 / 17.0, 29)
# log constants (Q0.31)
_LOG_2 = _fx(math.log(2.0))
_SQRT_SQRT_HALF = _fx(math.sqrt(math.sqrt(0.5)))
_SQRT_HALF = _fx(math.sqrt(0.5))
_ONE_QUARTER = _fx(0.25)
_ALPHA_N = _fx(11.0 / 240.0 * math.sqrt(math.sqrt(2.0)))
_ALPHA_D = _fx(1.0 / 20.0 * math.sqrt(math.sqrt(2.0)))
_ALPHA_I = _fx(2.0 / math.sqrt(math.sqrt(2.0)) - math.sqrt(math.sqrt(2.0)))
_ALPHA_F = _fx(1.0 / 4.0 * math.sqrt(math.sqrt(2.0)))
_M31 = (1 << 31) - 1


def _wrap(x):
    """C int32 wrap-around of an int (or int64 array)."""
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _clamp32(x):
    if isinstance(x, np.ndarray):
        return np.clip(x, I32_MIN, I32_MAX)
    return min(max(x, I32_MIN), I32_MAX)


def _select(cond, a, b):
    """cond ? a : b, elementwise for arrays."""
    if isinstance(cond, np.ndarray):
        return np.where(cond, a, b)
    return a if cond else b


def _mul(a, b):
    """FixedPoint operator*: SaturatingRoundingDoublingHighMul of two int32 raws.

    gemmlowp adds 2^30 (a*b >= 0) or 1 - 2^30 (a*b < 0) and divides by 2^31 truncating;
    for either sign that is floor((a*b + 2^30) / 2^31), round half toward +inf. Only
    INT32_MIN * INT32_MIN reaches 2^31; it saturates to INT32_MAX.
    """
    r = (a * b + (1 << 30)) >> 31
    return r - (r > I32_MAX)


def _rdbpot(x, exponent):
    """gemmlowp RoundingDivideByPOT: x / 2^exponent, ties away from zero.

    gemmlowp adds 1 to x >> e when the remainder exceeds 2^(e-1) - 1 + [x < 0]; that is
    (x + 2^(e-1) - [x < 0]) >> e for e >= 1, and x for e = 0.
    """
    if isinstance(exponent, (int, np.integer)):
        if exponent == 0:
            return x
        return (x + (1 << (int(exponent) - 1)) - (x < 0)) >> exponent
    half = (1 << exponent) >> 1
    return (x + half - (x < 0) * (half > 0)) >> exponent


def _sat_shl(x, exponent):
    """SaturatingRoundingMultiplyByPOT(Param) with exponent >= 0: x * 2^exponent saturated to
    int32 (gemmlowp's thresholds select exactly the products outside the int32 range)."""
    return _clamp32(x << exponent)


def _rounding_half_sum(a, b):
    """gemmlowp RoundingHalfSum: (a + b + sign(a + b)) / 2 truncated, i.e. (s + [s >= 0]) >> 1."""
    s = a + b
    return (s + (s >= 0)) >> 1


def _clz32(x):
    """CountLeadingZeros of a uint32 held as a non-negative int (or int64 array); 32 for 0."""
    if isinstance(x, np.ndarray):
        _, e = np.frexp(x.astype(np.float64))   # exact below 2^53: e is the bit length
        return 32 - e.astype(np.int64)
    return 32 - int(x).bit_length()


def fp_exp_on_negative_values(a, integer_bits: int):
    """gemmlowp exp_on_negative_values: exp(a) for a <= 0 in Q(integer_bits), result Q0.31.

    a mod 1/4 goes through a 4th-order polynomial around -1/8; the whole quarters are
    applied bit by bit (exp(-1/4), exp(-1/2), ... exp(-16)); a == 0 gives Q0.31 one.
    """
    frac = 31 - integer_bits
    quarter = 1 << (frac - 2)
    a_mod = (a & (quarter - 1)) - quarter                # in [-1/4, 0)
    x = _sat_shl(a_mod, integer_bits) + (1 << 28)        # Rescale<0>, then + 1/8
    x2 = _mul(x, x)
    x3 = _mul(x2, x)
    x4 = _mul(x2, x2)
    poly = _rdbpot(_mul(_rdbpot(x4, 2) + x3, _ONE_THIRD) + x2, 1)
    result = _EXP_M1_8 + _mul(_EXP_M1_8, x + poly)
    remainder = a_mod - a
    for k, mult in _EXP_BARREL:
        if integer_bits > k:
            result = _select(((remainder >> (frac + k)) & 1) == 1, _mul(result, mult), result)
    if integer_bits > 5:
        result = _select(a < -(1 << (36 - integer_bits)), 0, result)    # below -32: zero
    return _select(a == 0, I32_MAX, result)


def fp_one_over_one_plus_x(a):
    """gemmlowp one_over_one_plus_x_for_x_in_0_1: 1/(1+a) for a in [0, 1) Q0.31, result Q0.31.

    Newton-Raphson on the half denominator, start 48/17 - 32/17 d, three steps, in Q2.29.
    """
    half_den = _rounding_half_sum(a, I32_MAX)
    x = _C48_17 + _mul(half_den, _CNEG32_17)
    for _ in range(3):
        x = x + _sat_shl(_mul(x, (1 << 29) - _mul(half_den, x)), 2)
    return _sat_shl(x, 1)


def fp_get_reciprocal(x, integer_digits: int):
    """LiteRT GetReciprocal: (1/x as Q0.31 scaled into [1/2, 1], num_bits_over_unit)."""
    ux = x & 0xFFFFFFFF
    hp1 = _clz32(ux)
    shifted_minus_one = _wrap(((ux << hp1) & 0xFFFFFFFF) - (1 << 31))
    return fp_one_over_one_plus_x(shifted_minus_one), integer_digits - hp1


def fp_log_x_ge_1(x, input_integer_bits: int = 12, output_integer_bits: int = 5):
    """LiteRT log_x_for_x_greater_than_or_equal_to_1_impl: log(x) for x in Q(input) -> Q(output).

    The input is renormalized by its leading zeros (and by sqrt(1/2)), the exponent part
    times log(2) plus a rational approximation of the mantissa's log, in Q(output+1).
    """
    acc_bits = output_integer_bits + 1
    z_a = x
    shifted_quarter = _rdbpot(_ONE_QUARTER, acc_bits)
    hp1 = _clz32(z_a & 0xFFFFFFFF)
    r_a_tmp = _sat_shl(z_a, hp1 - 1)
    r_a_raw = _sat_shl(_mul(r_a_tmp, _SQRT_HALF), 1)
    z_a_pow_2_adj = _clamp32(_sat_shl(input_integer_bits - hp1, 31 - acc_bits) + shifted_quarter)
    z_b = _mul(z_a, _SQRT_HALF)
    z_b_headroom = _clz32(z_b & 0xFFFFFFFF) - 1
    r_b_raw = _sat_shl(z_a, z_b_headroom)
    z_b_pow_2_adj = _clamp32(_sat_shl(input_integer_bits - z_b_headroom, 31 - acc_bits) - shifted_quarter)
    r = _select(r_b_raw < r_a_raw, r_b_raw, r_a_raw)                                  # min
    z_pow_2_adj = _select(z_b_pow_2_adj > z_a_pow_2_adj, z_b_pow_2_adj, z_a_pow_2_adj)  # max
    p = _rounding_half_sum(r, _SQRT_SQRT_HALF)
    qv = _wrap(r - _SQRT_SQRT_HALF)
    qv = _wrap(qv + qv)
    common_sq = _mul(qv, qv)
    num = _wrap(_mul(qv, r) + _mul(_mul(qv, common_sq), _ALPHA_N))
    denom_minus_one = _wrap(_mul(p, _wrap(_ALPHA_I + qv + _mul(_ALPHA_D, common_sq))) + _mul(_ALPHA_F, qv))
    recip = fp_one_over_one_plus_x(denom_minus_one)
    num_scaled = _rdbpot(num, acc_bits)
    total = _wrap(_mul(z_pow_2_adj, _LOG_2) + _mul(num_scaled, recip))
    return _sat_shl(total, acc_bits - output_integer_bits)


def _per_row(fn, values: np.ndarray, *args):
    """fn over a column of row values: Python ints for a handful of rows (NumPy's per-call
    cost dominates there), one vectorized call otherwise. Returns arrays shaped like values
    (Python ints for a single row: they broadcast the same way)."""
    if values.size == 1:
        return fn(int(values.flat[0]), *args)
    if values.size <= 16:
        res = [fn(int(v), *args) for v in values.ravel()]
        if isinstance(res[0], tuple):
            return tuple(np.array(col, dtype=np.int64).reshape(values.shape) for col in zip(*res))
        return np.array(res, dtype=np.int64).reshape(values.shape)
    return fn(values, *args)


# --------------------------------------------------------------------------- helpers

def _mbqm(x, m: int, shift: int, single: bool, half_up: bool = False):
    """MultiplyByQuantizedMultiplier for a Python-int multiplier and shift (ints or arrays x):
    double rounding RDBPOT(SRDHM(x * 2^max(shift, 0), m), max(-shift, 0)) (the left shift wraps
    like C int32; ``half_up``: the RDBPOT's ties toward +inf); single rounding
    (x * m + 2^(30 - shift)) >> (31 - shift)."""
    if single:
        return (x * m + (1 << (30 - shift))) >> (31 - shift)
    if shift > 0:
        x = _wrap(x << shift)
    if half_up:
        return arith.rdbpot(_mul(x, m), max(-shift, 0), half_up=True)
    return _rdbpot(_mul(x, m), max(-shift, 0))


def _fixed_multiplier_precision(scheme) -> bool:
    return scheme.multiplier_precision == "float"


def _dequantized(t, ft) -> np.ndarray:
    """(q - z) * s in the float type ft (how DequantizeLinear computes, float32 by default)."""
    return (q(t) - zp(t)).astype(ft) * ft(scale(t))


def _finish_float(case, scheme, y, lo: int | None = None, hi: int | None = None) -> list:
    """y (a real result in scheme.ftype) -> output codes: y / s_out, then scheme.quantize_real."""
    out = case.outputs[0]
    qlo, qhi = qrange(out)
    ft = scheme.ftype
    return [scheme.quantize_real(np.asarray(y, dtype=ft) / ft(scale(out)), zp(out),
                                 qlo if lo is None else lo, qhi if hi is None else hi)]


def _ncodes(dtype: str) -> int:
    """How many codes an integer dtype has (256 for 8-bit, 65536 for 16-bit)."""
    _require(dtype in ("int8", "uint8", "int16", "uint16"), "inputs[0].dtype",
             f"{dtype} input is not an 8- or 16-bit integer type", "integer activations")
    return DTYPES[dtype].qmax - DTYPES[dtype].qmin + 1


def _require(cond: bool, field: str, msg: str, rule: str) -> None:
    if not cond:
        raise QconformError(msg, field=field, rule=rule)


# --------------------------------------------------------------------------- SOFTMAX

_SCALED_DIFF_INTEGER_BITS = 5      # Q5.26 input differences
_ACCUM_INTEGER_BITS = 12           # Q12.19 sum of exps


@functools.lru_cache(maxsize=512)
def softmax_params(beta: float, input_scale: float, single: bool, float_multiplier: bool = False):
    """PreprocessSoftmaxScaling + CalculateInputRadius: (multiplier, left_shift, diff_min).

    real = min(beta * s_in * 2^26, 2^31 - 1) in double (2^30 - 1 in the single-rounding
    build), QuantizeMultiplierGreaterThanOne; diff_min = -floor(31 * 2^26 / 2^left_shift).
    ``float_multiplier`` forms beta * s_in in float32 (the caffe-f2 scheme).
    """
    b, s = np.float32(beta), np.float32(input_scale)
    prod = float(np.float32(b * s)) if float_multiplier else float(b) * float(s)
    cap = (2.0 ** 30 - 1.0) if single else (2.0 ** 31 - 1.0)
    real = min(prod * 2.0 ** (31 - _SCALED_DIFF_INTEGER_BITS), cap)
    _require(real > 1.0, "inputs[0].scale",
             f"beta * input scale = {prod:.9g} is below 2^-26: LiteRT's softmax multiplier must exceed 1",
             "QuantizeMultiplierGreaterThanOne(beta * s_in * 2^26)")
    m, ls = arith.quantize_multiplier(real, single)
    m, ls = int(m), int(ls)
    radius = math.floor(((1 << _SCALED_DIFF_INTEGER_BITS) - 1) * 2.0 ** (31 - _SCALED_DIFF_INTEGER_BITS)
                        / 2.0 ** ls)
    return m, ls, -radius


@functools.lru_cache(maxsize=512)
def _exp_table(m: int, ls: int, diff_min: int, single: bool, n: int = 256):
    """The per-difference quantities of (LOG_)SOFTMAX, for d = -k, k = 0..n-1 (n codes: 256 for
    8-bit input, 65536 for 16-bit).

    (scaled, e, part): scaled = MBQM_>1(d, m, ls) in Q5.26, e = exp_on_negative_values(scaled)
    in Q0.31 and part = Rescale<12>(e) = RDBPOT(e, 12) in Q12.19; e and part are 0 where
    d < diff_min (the kernel skips those). The kernel computes these per element; every
    element's value is one of these n.
    """
    d = -np.arange(n, dtype=np.int64)
    live = d >= diff_min
    scaled = _mbqm(np.where(live, d, 0), m, ls, single) * live      # MBQM_>1 (shift >= 0)
    e = fp_exp_on_negative_values(scaled, _SCALED_DIFF_INTEGER_BITS) * live
    part = _rdbpot(e, _ACCUM_INTEGER_BITS)
    for t in (scaled, e, part):
        t.setflags(write=False)
    return scaled, e, part


def softmax_exp_sums(codes, beta: float, input_scale: float, single: bool = False,
                     dtype: str = "int8") -> np.ndarray:
    """The reference kernel's Q12.19 sum of exps of each row of codes (int64, one per row).

    LiteRT's reference SOFTMAX aborts once a sum reaches 2^28 (512.0); generators keep below.
    """
    m, ls, diff_min = softmax_params(float(beta), float(input_scale), single)
    x = np.asarray(codes, dtype=np.int64)
    _, _, part_t = _exp_table(m, ls, diff_min, single, _ncodes(dtype))
    return part_t[x.max(axis=-1, keepdims=True) - x].sum(axis=-1)


def _softmax_fixed(case, scheme) -> np.ndarray:
    inp, out = case.inputs[0], case.outputs[0]
    beta = attr_float(case, "beta", 1.0)
    single = scheme.single_rounding
    m, ls, diff_min = softmax_params(beta, scale(inp), single, _fixed_multiplier_precision(scheme))
    _, e_t, part_t = _exp_table(m, ls, diff_min, single, _ncodes(inp.dtype))
    k = np.array(inp.data, dtype=np.int64)                 # a copy: modified in place
    np.subtract(k.max(axis=-1, keepdims=True), k, out=k)  # -(q - max), 0..255
    total = part_t[k].sum(axis=-1, keepdims=True)          # Q12.19 sum of exps
    _require(bool(total.max() <= I32_MAX), "inputs[0].shape",
             "a row's sum of exps overflows LiteRT's Q12.19 accumulator (4096 or more maxima)",
             "sum of exps < 2^31")
    recip, over = _per_row(fp_get_reciprocal, total, _ACCUM_INTEGER_BITS)
    lo, hi = qrange(out)
    # the kernel checks 0 <= over + 31 - bits <= 31, i.e. aborts once the sum reaches 512;
    # the arithmetic is continued here unchanged (int64 holds the wider shift)
    shift = over + 31 - DTYPES[out.dtype].bits
    # RDBPOT(SRDHM(recip, e), shift) with recip, e >= 0 (both round half up), in place:
    # ((recip * e + 2^30) >> 31 + 2^(shift-1)) >> shift
    r = e_t[k]
    r *= recip
    r += 1 << 30
    r >>= 31
    r += (1 << shift) >> 1
    r >>= shift
    r += lo
    return np.minimum(r, hi, out=r)                       # skipped elements: e = 0 -> lo


@register("SOFTMAX", rounding="fixed-exp")
def softmax(case, scheme):
    """SOFTMAX over the last axis, output (1/256, -128).

    Fixed schemes: LiteRT reference_ops::Softmax (int8): per row, d = q - max; d below
    diff_min -> -128; else x = MBQM_>1(d) in Q5.26, e = exp_on_negative_values(x) (Q0.31),
    sum of RDBPOT(e, 12) (Q12.19, int32), GetReciprocal(sum) -> (r, k),
    out = RDBPOT(SRDHM(r, e), k + 23) - 128, clamped.
    Float schemes: softmax((q - z) * (s * beta)) in scheme.ftype, then quantize.
    """
    if scheme.is_fixed:
        return [_softmax_fixed(case, scheme)]
    ft = scheme.ftype
    inp = case.inputs[0]
    # beta folded into the dequantization scale, as the ONNX mapping does: (q - z) * f32(s * beta)
    sb = np.float32(np.float32(scale(inp)) * np.float32(attr_float(case, "beta", 1.0)))
    x = (q(inp) - zp(inp)).astype(ft) * ft(sb)
    ex = np.exp(x - x.max(axis=-1, keepdims=True))
    y = ex / ex.sum(axis=-1, keepdims=True, dtype=ft)
    return _finish_float(case, scheme, y)


# --------------------------------------------------------------------------- LOG_SOFTMAX

@functools.lru_cache(maxsize=512)
def log_softmax_params(input_scale: float, single: bool, float_multiplier: bool = False):
    """PreprocessLogSoftmaxScalingExp (beta = 1): (m, left_shift, reverse_m, reverse_shift, diff_min).

    reverse = 2^(31 - left_shift) / m through QuantizeMultiplierSmallerThanOneExp
    (reverse_shift <= 0, a right shift when used).
    """
    m, ls, diff_min = softmax_params(1.0, input_scale, single, float_multiplier)
    _require(ls >= 2, "inputs[0].scale",
             f"input scale {input_scale:.9g} is too small: LiteRT's log-softmax reverse multiplier "
             f"2^(31-{ls})/m must be below 1", "QuantizeMultiplierSmallerThanOneExp")
    rev_real = float(1 << (31 - ls)) / float(m)
    rm, rs = arith.quantize_multiplier(rev_real, single)
    return m, ls, int(rm), int(rs), diff_min


def _log_softmax_fixed(case, scheme) -> np.ndarray:
    inp, out = case.inputs[0], case.outputs[0]
    _require(inp.dtype == "int8" and out.dtype == "int8", "inputs[0].dtype",
             f"LiteRT's reference LOG_SOFTMAX integer kernel is int8 -> int8 (got {inp.dtype} -> {out.dtype})",
             "reference_integer_ops::LogSoftmax: int8")
    single = scheme.single_rounding
    m, ls, rm, rs, diff_min = log_softmax_params(scale(inp), single, _fixed_multiplier_precision(scheme))
    scaled_t, _, part_t = _exp_table(m, ls, diff_min, single, _ncodes(inp.dtype))
    k = np.array(inp.data, dtype=np.int64)                 # a copy: modified in place
    np.subtract(k.max(axis=-1, keepdims=True), k, out=k)  # -(q - max), 0..255
    total = part_t[k].sum(axis=-1, keepdims=True)          # < 4096 * 2^19 for rows < 4096
    _require(bool(total.max() <= I32_MAX), "inputs[0].shape",
             "a row's sum of exps overflows LiteRT's Q12.19 accumulator (4096 or more maxima)",
             "sum of exps < 2^31")
    log_sum = _per_row(fp_log_x_ge_1, total, _ACCUM_INTEGER_BITS, _SCALED_DIFF_INTEGER_BITS)
    cut = np.maximum(diff_min - 1, _mbqm(_wrap(log_sum + I32_MIN), rm, rs, single, scheme.half_up_shift))
    # RDBPOT(scaled - log_sum, 22) + 127, clamped, in place; kept where d = -k > cut
    r = scaled_t[k]
    r -= log_sum
    neg = r < 0
    r += 1 << (31 - _SCALED_DIFF_INTEGER_BITS - 4 - 1)
    r -= neg
    r >>= 31 - _SCALED_DIFF_INTEGER_BITS - 4
    r += 127
    np.clip(r, -128, 127, out=r)
    np.putmask(r, k >= -cut, -128)
    return r


@register("LOG_SOFTMAX", rounding="fixed-exp")
def log_softmax(case, scheme):
    """LOG_SOFTMAX over the last axis, output (16/256, 127).

    Fixed schemes: LiteRT reference_integer_ops::LogSoftmax: Q5.26 differences and exp as
    SOFTMAX (beta = 1), log of the Q12.19 sum in Q5.26 (log_x_for_x_greater_than_or_equal_to_1),
    cutoff max(diff_min - 1, MBQM(log_sum + INT32_MIN, reverse)), kept d (strictly above the
    cutoff) give RDBPOT(x - log_sum, 22) + 127, clamped; the rest -128.
    Float schemes: x - max - log(sum exp(x - max)) in scheme.ftype, then quantize.
    """
    if scheme.is_fixed:
        return [_log_softmax_fixed(case, scheme)]
    ft = scheme.ftype
    x = _dequantized(case.inputs[0], ft)
    sh = x - x.max(axis=-1, keepdims=True)
    y = sh - np.log(np.exp(sh).sum(axis=-1, keepdims=True, dtype=ft))
    return _finish_float(case, scheme, y)


# --------------------------------------------------------------------------- LOGISTIC, TANH

def _expf(x: np.ndarray) -> np.ndarray:
    """float32 exp, correctly rounded (exp in double, rounded once to float32).

    Stands for C's expf; glibc's expf agrees except within ~1e-6 ULP of a float32
    rounding boundary (its error bound is 0.502 ULP).
    """
    with np.errstate(over="ignore"):
        return np.exp(np.asarray(x, dtype=np.float32).astype(np.float64)).astype(np.float32)


def _tanhf(x: np.ndarray) -> np.ndarray:
    """float32 tanh, correctly rounded (tanh in double, rounded once to float32).

    Stands for C's tanhf. glibc before 2.41 (fdlibm's tanhf) is off by one ULP on a
    few percent of inputs; that changes a table entry only when tanh(x) * 128 lies
    within an ULP of a half-way point.
    """
    return np.tanh(np.asarray(x, dtype=np.float32).astype(np.float64)).astype(np.float32)


def sigmoid_f32(x) -> np.ndarray:
    """1.0f / (1.0f + expf(-x)) in float32, as LiteRT's LOGISTIC table transform writes it."""
    x = np.asarray(x, dtype=np.float32)
    one = np.float32(1.0)
    with np.errstate(over="ignore"):
        return (one / (one + _expf(-x))).astype(np.float32)


def lut_int8(transform, input_scale: float, input_zp: int, output_scale: float, output_zp: int,
             dtype: str = "int8") -> np.ndarray:
    """LiteRT LUTPopulateInt8 (int8 or uint8): the entry of code v at index v - qmin.

    d = s_in * (v - z_in) (float32); f = transform(d); r = roundf(f * (1 / s_out)) with
    1 / s_out formed in float32; entry = clamp((int)(r + z_out), qmin, qmax).
    """
    _require(dtype in ("int8", "uint8"), "inputs[0].dtype",
             f"LiteRT's LOGISTIC/TANH table covers 8-bit codes, not {dtype}", "LUTPopulateInt8: int8 or uint8")
    lo, hi = DTYPES[dtype].qmin, DTYPES[dtype].qmax
    v = np.arange(lo, hi + 1, dtype=np.int64)
    d = (np.float32(input_scale) * (v - input_zp).astype(np.float32)).astype(np.float32)
    f = transform(d)
    inv = np.float32(np.float32(1.0) / np.float32(output_scale))
    r = arith.round_half_away((f * inv).astype(np.float32)).astype(np.float32)
    quant = (r + np.float32(output_zp)).astype(np.float32).astype(np.int64)
    return np.clip(quant, lo, hi)


def _table_op(case, scheme, transform, float_fn):
    inp, out = case.inputs[0], case.outputs[0]
    if scheme.is_fixed:
        table = lut_int8(transform, scale(inp), zp(inp), scale(out), zp(out), inp.dtype)
        return [table[q(inp) - DTYPES[inp.dtype].qmin]]
    ft = scheme.ftype
    return _finish_float(case, scheme, float_fn(_dequantized(inp, ft)))


@register("LOGISTIC", rounding="float-table")
def logistic(case, scheme):
    """LOGISTIC, output (1/256, -128): LiteRT's float32 table of 1/(1 + expf(-d)) (fixed
    schemes); sigmoid of the dequantized input in scheme.ftype (float schemes)."""
    ft = scheme.ftype

    def sigmoid(x):
        with np.errstate(over="ignore"):
            return ft(1) / (ft(1) + np.exp(-x))
    return _table_op(case, scheme, sigmoid_f32, sigmoid)


@register("TANH", rounding="float-table")
def tanh(case, scheme):
    """TANH, output (1/128, 0): LiteRT's float32 table of tanhf(d) (fixed schemes); tanh of the
    dequantized input in scheme.ftype (float schemes)."""
    return _table_op(case, scheme, _tanhf, np.tanh)


# --------------------------------------------------------------------------- HARD_SWISH

def _wrap16(x) -> np.ndarray:
    x = arith.as_i64(x)
    return ((x + 2 ** 15) & 0xFFFF) - 2 ** 15


def _srdhm16(a, b) -> np.ndarray:
    """gemmlowp SaturatingRoundingDoublingHighMul on int16: (a*b + nudge) / 2^15 truncating."""
    a, b = arith.as_i64(a), arith.as_i64(b)
    ab = a * b
    num = ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    r = np.where(num >= 0, num >> 15, -((-num) >> 15))
    return np.where((a == -32768) & (b == -32768), 32767, _wrap16(r))


def _sdhm16(a, b) -> np.ndarray:
    """LiteRT SaturatingDoublingHighMul (int16): a*b / 2^15 truncating toward zero."""
    a, b = arith.as_i64(a), arith.as_i64(b)
    ab = a * b
    r = np.where(ab >= 0, ab >> 15, -((-ab) >> 15))
    return np.where((a == -32768) & (b == -32768), 32767, _wrap16(r))


def _rdbpot16(x, exponent: int) -> np.ndarray:
    """gemmlowp RoundingDivideByPOT instantiated on int16 (mask and threshold are int16)."""
    x = arith.as_i64(x)
    mask = int(_wrap16((1 << exponent) - 1))
    remainder = _wrap16(x & mask)
    threshold = _wrap16((mask >> 1) + (x < 0))
    return _wrap16(_wrap16(x >> exponent) + (remainder > threshold))


def _sat_shl16(x, amount: int) -> np.ndarray:
    return np.clip(arith.as_i64(x) * (1 << amount), -32768, 32767)


def _int16_multiplier(real) -> tuple[int, int]:
    """QuantizeMultiplier then DownScaleInt32ToInt16Multiplier: (m16, exponent)."""
    m, e = arith.quantize_multiplier(real)
    m, e = int(m), int(e)
    m16 = 32767 if m >= I32_MAX - (1 << 15) else (m + (1 << 15)) >> 16
    return m16, e


def hard_swish_params(input_scale: float, output_scale: float) -> dict:
    """HardSwishPrepare: 16-bit output and reluish multipliers, formed in float32.

    hires = s_in / 128; output = hires / s_out; reluish = hires / (3 / 32768).
    """
    f = np.float32
    hires = f(f(1.0 / 128.0) * f(input_scale))
    out_real = f(hires / f(output_scale))
    reluish_real = f(hires / f(3.0 / 32768.0))
    om, oe = _int16_multiplier(float(out_real))
    rm, re_ = _int16_multiplier(float(reluish_real))
    _require(oe <= 0, "outputs[0].scale",
             f"input_scale / (128 * output_scale) = {float(out_real):.9g} must be below 1",
             "HardSwishPrepare: output_multiplier_exponent <= 0")
    return {"out_m": om, "out_e": oe, "relu_m": rm, "relu_e": re_}


def _hard_swish_fixed(case) -> np.ndarray:
    inp, out = case.inputs[0], case.outputs[0]
    p = hard_swish_params(scale(inp), scale(out))
    v = _wrap16(q(inp) - zp(inp))
    hires = _wrap16(v * 128)
    preshift_out = _srdhm16(hires, p["out_m"])
    r = hires
    if p["relu_e"] > 0:
        r = _sat_shl16(r, p["relu_e"] - 1)
    r = _srdhm16(r, p["relu_m"])
    if p["relu_e"] > 0:
        r = _sat_shl16(r, 1)
    if p["relu_e"] < 0:
        r = _rdbpot16(r, -p["relu_e"])
    r = (r + (1 << 15)) >> 1
    pre = _sdhm16(r, preshift_out)
    o = _wrap16(_rdbpot16(pre, -p["out_e"]) + zp(out))
    lo, hi = qrange(out)
    return np.clip(o, lo, hi)


@register("HARD_SWISH", rounding="fixed-int16")
def hard_swish(case, scheme):
    """HARD_SWISH: x * relu6(x + 3) / 6.

    Fixed schemes: LiteRT reference_ops::HardSwish: v = (q - z) * 128 (int16); the output
    branch SRDHM16(v, m_out); the "reluish" branch rescales v so that 3.0 is 2^15
    (saturating left shift by e - 1, SRDHM16, saturating shift by 1; or RDBPOT16 for e < 0),
    maps [-1, 1] to [0, 1] ((r + 2^15) >> 1); the product is a truncating doubling high mul,
    then RDBPOT16 by -e_out, + z_out, clamp. (No MultiplyByQuantizedMultiplier: both builds agree.)
    Float schemes: x * min(max(x + 3, 0), 6) / 6 in scheme.ftype, then quantize.
    """
    if scheme.is_fixed:
        return [_hard_swish_fixed(case)]
    ft = scheme.ftype
    x = _dequantized(case.inputs[0], ft)
    y = x * np.minimum(np.maximum(x + ft(3), ft(0)), ft(6)) / ft(6)
    return _finish_float(case, scheme, y)


# --------------------------------------------------------------------------- LEAKY_RELU, RELU, RELU6

@register("LEAKY_RELU", rounding="fixed-double")
def leaky_relu(case, scheme):
    """LEAKY_RELU: x for x >= 0, alpha * x otherwise.

    Fixed schemes: LiteRT QuantizeLeakyRelu: identity multiplier s_in / s_out and alpha
    multiplier s_in * alpha / s_out (float32 expressions, QuantizeMultiplier); v = q - z_in;
    v >= 0: z_out + MBQM(v, identity); v < 0: z_out + sign(alpha) * MBQM(v, |alpha mult|);
    clamp to the int8 range.
    Float schemes: where(x >= 0, x, alpha * x) in scheme.ftype, then quantize.
    """
    inp, out = case.inputs[0], case.outputs[0]
    alpha = np.float32(attr_float(case, "alpha", 0.2))
    lo, hi = qrange(out)
    f = np.float32
    if scheme.is_fixed:
        single = scheme.single_rounding
        ident = float(f(f(scale(inp)) / f(scale(out))))
        amult = float(f(f(f(scale(inp)) * alpha) / f(scale(out))))
        mi, si = arith.quantize_multiplier(ident, single)
        ma, sa = arith.quantize_multiplier(abs(amult), single)
        v = q(inp) - zp(inp)
        pos = arith.mbqm(v, mi, si, single, scheme.half_up_shift)
        neg = arith.mbqm(v, ma, sa, single, scheme.half_up_shift) * (-1 if amult < 0 else 1)
        return [np.clip(zp(out) + np.where(v >= 0, pos, neg), lo, hi)]
    ft = scheme.ftype
    x = _dequantized(inp, ft)
    return _finish_float(case, scheme, np.where(x >= 0, x, ft(alpha) * x))


def _relu_x(case, scheme, act_max: float | None):
    """ReluX: z_out + MBQM(q - z_in, s_in / s_out), clamped to
    [max(-128, z_out + roundf(0 / s_out)), min(127, z_out + roundf(act_max / s_out))]."""
    inp, out = case.inputs[0], case.outputs[0]
    f = np.float32
    so = f(scale(out))
    qlo, qhi = qrange(out)
    lo = max(qlo, zp(out) + int(arith.round_half_away(f(0.0) / so)))
    hi = qhi if act_max is None else min(qhi, zp(out) + int(arith.round_half_away(f(act_max) / so)))
    if scheme.is_fixed:
        single = scheme.single_rounding
        real = float(f(f(scale(inp)) / so))
        m, s = arith.quantize_multiplier(real, single)
        return [np.clip(zp(out) + arith.mbqm(q(inp) - zp(inp), m, s, single, scheme.half_up_shift), lo, hi)]
    ft = scheme.ftype
    x = _dequantized(inp, ft)
    y = np.maximum(x, ft(0)) if act_max is None else np.minimum(np.maximum(x, ft(0)), ft(act_max))
    return _finish_float(case, scheme, y)


@register("RELU", rounding="fixed-double")
def relu(case, scheme):
    """RELU: max(x, 0) (LiteRT ReluX, see _relu_x)."""
    return _relu_x(case, scheme, None)


@register("RELU6", rounding="fixed-double")
def relu6(case, scheme):
    """RELU6: min(max(x, 0), 6) (LiteRT ReluX, see _relu_x)."""
    return _relu_x(case, scheme, 6.0)
