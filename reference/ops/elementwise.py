"""Elementwise family: ADD, SUB, MUL, MAXIMUM, MINIMUM, the six comparisons,
QUANTIZE, DEQUANTIZE, ARG_MAX, ARG_MIN.

Every function takes ``(case, scheme)`` and returns ``[output]``. Binary ops
broadcast with NumPy's rules (LiteRT's BroadcastBinaryOpSimple gives the same
result). Under a fixed scheme the arithmetic is LiteRT's reference kernel
(tflite/kernels/*.cc and kernels/internal/reference/*.h); under a float scheme
it is dequantize -> float op in ``scheme.ftype`` -> ``scheme.quantize_real``.
"""

from __future__ import annotations

import numpy as np

from suite.core.dtypes import DTYPES
from suite.core.errors import QconformError

from reference import arith
from reference.common import act_range, binary_operands, q, qrange, scale, zp
from reference.registry import register

ADD_LEFT_SHIFT = 20        # add.cc / sub.cc Prepare: 8-bit inputs are shifted left by 20 ...
ADD_LEFT_SHIFT_16 = 15     # ... 16-bit ones by 15 (65535 << 15 still fits in int32)
COMPARE_LEFT_SHIFT = 8     # comparisons.cc: ComparisonQuantized's left_shift


def _left_shift(out) -> int:
    return ADD_LEFT_SHIFT_16 if DTYPES[out.dtype].bits == 16 else ADD_LEFT_SHIFT


def _ratio(scheme, num: float, den: float) -> float:
    """num / den in the scheme's multiplier precision (double for LiteRT's int8 kernels)."""
    return float(scheme.real_multiplier(num, den=den))


# --------------------------------------------------------------------------- ADD / SUB

def add_sub_params(sa: float, sb: float, so: float, scheme, left_shift: int = ADD_LEFT_SHIFT) -> dict:
    """The quantized multipliers of LiteRT's ADD/SUB Prepare (left_shift 20 for 8-bit, 15 for 16-bit).

    twice_max = 2 * max(s1, s2); input multipliers s_i / twice_max (both <= 0.5) and the
    output multiplier twice_max / (2^left_shift * s_out) are each QuantizeMultiplier'd from
    a double. ``out_gt1`` tells the output multiplier is >= 1: LiteRT's ADD aborts in
    QuantizeMultiplierSmallerThanOneExp, SUB takes QuantizeMultiplierGreaterThanOne.
    """
    single = scheme.single_rounding
    twice_max = 2.0 * max(sa, sb)
    m1, s1 = arith.quantize_multiplier(_ratio(scheme, sa, twice_max), single)
    m2, s2 = arith.quantize_multiplier(_ratio(scheme, sb, twice_max), single)
    # (1 << left_shift) * output scale is a float32 product (exact: a power-of-two scaling)
    den = float(np.float32(np.float32(1 << left_shift) * np.float32(so)))
    real_out = _ratio(scheme, twice_max, den)
    mo, shift_o = arith.quantize_multiplier(real_out, single)
    return {"m1": int(m1), "s1": int(s1), "m2": int(m2), "s2": int(s2), "mo": int(mo),
            "so": int(shift_o), "real_out": real_out, "out_gt1": real_out >= 1.0}


def _add_sub(case, scheme, sign: int):
    """LiteRT ADD (reference_integer_ops::AddFunc) / SUB (reference_ops::SubElementwise).

    u_i = MBQM_<1((q_i - z_i) * 2^20, m_i, s_i) (2^15 for 16-bit types, as LiteRT's int16);
    raw = u_1 +- u_2 (SUB subtracts the scaled input 2, its multiplier stays positive);
    out = clamp(MBQM(raw, m_o, s_o) + z_o) to the fused activation's range. With an output multiplier > 1 (only SUB accepts one) the golden
    applies it as MultiplyByQuantizedMultiplier does, with a left shift; LiteRT's double-
    rounding build instead passes the positive shift to RoundingDivideByPOT (undefined
    behaviour, a known finding).
    """
    a, b = binary_operands(case)
    out = case.outputs[0]
    lo, hi = act_range(case, out)
    qa, qb = q(a) - zp(a), q(b) - zp(b)
    sa, sb, so = scale(a), scale(b), scale(out)
    if scheme.is_fixed:
        shift = _left_shift(out)
        p = add_sub_params(sa, sb, so, scheme, shift)
        single, up = scheme.single_rounding, scheme.half_up_shift
        u1 = arith.mbqm_smaller_than_one_exp(qa << shift, p["m1"], p["s1"], single, up)
        u2 = arith.mbqm_smaller_than_one_exp(qb << shift, p["m2"], p["s2"], single, up)
        raw = arith.wrap_int32(u1 + sign * u2)
        if p["so"] > 0:
            res = arith.mbqm(raw, p["mo"], p["so"], single, up)
        else:
            res = arith.mbqm_smaller_than_one_exp(raw, p["mo"], p["so"], single, up)
        return [np.clip(res + zp(out), lo, hi)]
    # float schemes: dequantize, add / subtract, requantize
    ft = scheme.ftype
    x = ft(sa) * qa.astype(ft) + ft(sign) * ft(sb) * qb.astype(ft)
    return [scheme.quantize_real(x / ft(so), zp(out), lo, hi)]


@register("ADD", rounding="fixed-double")
def add(case, scheme):
    return _add_sub(case, scheme, +1)


@register("SUB", rounding="fixed-double")
def sub(case, scheme):
    return _add_sub(case, scheme, -1)


# --------------------------------------------------------------------------- MUL

def mul_real_multiplier(sa: float, sb: float, so: float, scheme) -> float:
    """MUL's real multiplier. LiteRT (mul.cc) forms s1 * s2 / s_out in float32, then widens it."""
    if scheme.is_fixed and scheme.multiplier_precision == "double":
        return float(np.float32(np.float32(np.float32(sa) * np.float32(sb)) / np.float32(so)))
    return float(scheme.real_multiplier(sa, sb, den=so))


@register("MUL", rounding="fixed-double")
def mul(case, scheme):
    """LiteRT int8 MUL (reference_integer_ops::MulElementwise).

    out = clamp(MBQM((q1 - z1) * (q2 - z2), m, s) + z_o) with (m, s) = QuantizeMultiplier of
    the float32 expression s1 * s2 / s_out. Float schemes: float(product) * multiplier.
    """
    a, b = binary_operands(case)
    out = case.outputs[0]
    lo, hi = act_range(case, out)
    prod = (q(a) - zp(a)) * (q(b) - zp(b))
    real = mul_real_multiplier(scale(a), scale(b), scale(out), scheme)
    if scheme.is_fixed and max(DTYPES[a.dtype].bits, DTYPES[b.dtype].bits) > 8:
        # 16-bit codes: the product can pass int32 (LiteRT has no such kernel); the golden
        # applies the same multiplier and roundings to the exact int64 product
        m, sh = arith.quantize_multiplier(real, scheme.single_rounding)
        res = mbqm_wide(prod, int(m), int(sh), scheme.single_rounding, scheme.half_up_shift)
        return [np.clip(res + zp(out), lo, hi)]
    return [scheme.requantize(prod, real, zp(out), lo, hi)]


def _mul_shift_floor(x, m: int, c, k: int) -> np.ndarray:
    """floor((x * m + c) / 2^k) exactly for 0 <= x < 2^47, 0 <= m < 2^31, 0 <= c < 2^k, 16 <= k <= 62.

    x = h * 2^16 + l: x*m + c = h*m*2^16 + (l*m + c), and floor((A*2^16 + Y) / 2^k) =
    floor((A + floor(Y / 2^16)) / 2^(k-16)); every term stays below 2^63.
    """
    x = arith.as_i64(x)
    h, l = x >> 16, x & 0xFFFF
    y = l * m + arith.as_i64(c)
    return (h * m + (y >> 16)) >> (k - 16)


def mbqm_wide(x, m: int, shift: int, single_rounding: bool = False, half_up: bool = False) -> np.ndarray:
    """MultiplyByQuantizedMultiplier on an int64 x (|x| < 2^47 / 2^max(shift, 0)), no int32 wrap.

    Double rounding: SRDHM(x * 2^max(shift,0), m) (round half toward +inf, as
    trunc((x*m +- nudge) / 2^31)) then RDBPOT by max(-shift, 0). Single rounding:
    floor((x*m + 2^(30-shift)) / 2^(31-shift)). Equal to arith.mbqm wherever that does not wrap
    (``half_up`` as there).
    """
    x = arith.as_i64(x)
    if single_rounding:
        k = 31 - shift
        # floor((x*m + r) / 2^k) for negative x: -ceil((|x|*m - r) / 2^k)
        #                                         = -floor((|x|*m - r + 2^k - 1) / 2^k)
        r = 1 << (k - 1)
        pos = _mul_shift_floor(np.abs(x), m, r, k)
        neg = -_mul_shift_floor(np.abs(x), m, (1 << k) - 1 - r, k)
        return np.where(x >= 0, pos, neg)
    xs = x << max(shift, 0)
    mag = np.abs(xs)
    # ab >= 0: floor((ab + 2^30) / 2^31); ab < 0: -floor((|ab| + 2^30 - 1) / 2^31)
    hi = np.where(xs >= 0, _mul_shift_floor(mag, m, 1 << 30, 31),
                  -_mul_shift_floor(mag, m, (1 << 30) - 1, 31))
    return arith.rdbpot(hi, max(-shift, 0), half_up)


# --------------------------------------------------------------------------- MAXIMUM / MINIMUM

def _max_min(case, scheme, fn):
    """LiteRT MAXIMUM/MINIMUM on int8: the larger/smaller raw code, no requantization.

    The spec requires both inputs and the output to share one (scale, zero point), so the
    code order is the real order and the result needs no rounding under any scheme.
    """
    a, b = binary_operands(case)
    res = fn(q(a), q(b))
    if scheme.exact:
        return [res.astype(np.float64)]
    return [res]


@register("MAXIMUM", rounding="none")
def maximum(case, scheme):
    return _max_min(case, scheme, np.maximum)


@register("MINIMUM", rounding="none")
def minimum(case, scheme):
    return _max_min(case, scheme, np.minimum)


# --------------------------------------------------------------------------- comparisons

_COMPARE = {
    "LESS": np.less, "LESS_EQUAL": np.less_equal, "GREATER": np.greater,
    "GREATER_EQUAL": np.greater_equal, "EQUAL": np.equal, "NOT_EQUAL": np.not_equal,
}


def real_values_exact(t) -> np.ndarray:
    """(q - z) * s in float64, exact: |q - z| has at most 17 bits, a float32 scale 24."""
    s, z = t.broadcast_qparams()
    return (q(t) - z).astype(np.float64) * s.astype(np.float32).astype(np.float64)


@register(*_COMPARE, rounding="none")
def compare(case, scheme):
    """The comparison of the inputs' real values, per the spec: op((q1 - z1) * s1, (q2 - z2) * s2).

    Inputs with different scales and zero points are compared as the reals they stand for
    (scale as stored, float32), exactly: no rounding of either side, so two inputs are EQUAL
    only when their real values are identical. This is the spec's meaning and the golden
    under every scheme (a comparison has no requantization to vary).

    LiteRT's kernel (comparisons.cc, ComparisonWithScaling) instead compares
    MBQM_<1((q - z) * 2^8, m_i, s_i), each input rounded on its own to a grid of 1/256 in
    real units (see :func:`litert_compare_operand`): reals closer than that can compare
    equal, and equal reals at different scales can round apart. Those cases are the known
    finding ``comparison-resolution``.
    """
    a, b = binary_operands(case)
    if a.quantized and b.quantized:
        ra, rb = real_values_exact(a), real_values_exact(b)
    else:
        ra, rb = q(a), q(b)
    res = _COMPARE[case.op](ra, rb)
    if scheme.exact:
        return [res.astype(np.float64)]
    return [res]


def litert_compare_operand(codes, zero_point: int, s: float, single_rounding: bool = False) -> np.ndarray:
    """What LiteRT's comparison kernel compares for one input: MBQM_<1((q - z) * 2^8, m, shift).

    (m, shift) = QuantizeMultiplier(s) (double; scales >= 1 make LiteRT abort or misbehave).
    Used by the generator to build (and avoid) the cases where LiteRT and the spec
    disagree, and by the tests; never as the golden.
    """
    m, sh = arith.quantize_multiplier(np.float64(np.float32(s)), single_rounding)
    d = arith.as_i64(codes) - int(zero_point)
    return arith.mbqm_smaller_than_one_exp(d << COMPARE_LEFT_SHIFT, m, sh, single_rounding)


# --------------------------------------------------------------------------- QUANTIZE

@register("QUANTIZE", rounding=("fixed-double", "float-round"))
def quantize(case, scheme):
    """QUANTIZE: float32 -> int8 (affine quantization) or int8 -> int8 (requantization).

    float32 input, LiteRT reference (AffineQuantize): (int32)std::round(x / (float)s) + zp,
    clamped; the quotient is a float32 division, rounded half away from zero. Float schemes
    divide in their float type and round their way (ONNX QuantizeLinear: half to even).
    int8 input (reference_ops::Requantize): (m, shift) = QuantizeMultiplier((double)s_in /
    (double)s_out); out = clamp(MBQM(q - z_in, m, shift) + z_out).
    """
    x = case.inputs[0]
    out = case.outputs[0]
    lo, hi = qrange(out)
    so, zo = scale(out), zp(out)
    if x.dtype == "float32":
        if np.isnan(np.asarray(x.data, np.float32)).any():   # (+-inf saturate below; NaN has no code)
            raise QconformError("NaN input: the spec gives it no quantized code", field="inputs[0].data",
                                rule="finite or infinite float32 inputs")
        if scheme.exact:
            return [np.asarray(x.data, np.float64) / np.float64(np.float32(so)) + zo]
        if scheme.is_fixed:
            with np.errstate(over="ignore"):   # (a quotient beyond float32 is inf: it saturates)
                v = np.asarray(x.data, np.float32) / np.float32(so)       # float32 division
            r = arith.round_half_away(v.astype(np.float64))
        else:
            ft = scheme.ftype
            with np.errstate(over="ignore"):
                v = np.asarray(x.data).astype(ft) / ft(np.float32(so))
            r = scheme.round(v)
        # clamp in float before the integer conversion (LiteRT's int cast of a huge
        # quotient is undefined; generated cases stay far from it)
        r = np.clip(np.asarray(r, np.float64) + zo, lo, hi)
        return [r.astype(np.int64)]
    real = _ratio(scheme, scale(x), so)
    return [scheme.requantize(q(x) - zp(x), real, zo, lo, hi)]


# --------------------------------------------------------------------------- DEQUANTIZE

@register("DEQUANTIZE", rounding="none")
def dequantize(case, scheme):
    """DEQUANTIZE: int8 -> float32, (float)((double)s * (q - zp)) in LiteRT's reference.

    The product of a float32 scale and |q - zp| <= 255 is exact in double, so the result is
    the exact real value rounded once to float32 (round to nearest even). ONNX's
    DequantizeLinear, float32(q - zp) * s, rounds the same exact product once: it is the
    same value. Per-axis input: each slice with its own scale and zero point.
    """
    x = case.inputs[0]
    exact = real_values_exact(x)
    if scheme.exact:
        return [exact]
    return [exact.astype(np.float32)]


# --------------------------------------------------------------------------- ARG_MAX / ARG_MIN

def _arg(case, scheme, fn):
    """Index of the largest (smallest) value along ``axis``; ties: the first index wins.

    LiteRT (reference_ops::ArgMinMax) compares the raw codes with std::greater/std::less and
    keeps the first extreme. A per-tensor scale is positive, so the code order is the real
    order: the same indices as the spec's argmax of real values. np.argmax/argmin return
    the first occurrence too.
    """
    x = case.inputs[0]
    a = np.asarray(case.inputs[1].data).ravel() if len(case.inputs) > 1 and case.inputs[1].data is not None \
        else np.zeros(0)
    rank = len(x.shape)
    if a.size != 1 or not -rank <= int(a[0]) < rank:
        raise QconformError(f"must hold one axis in [-{rank}, {rank - 1}] for a rank-{rank} input "
                            f"(got {a.tolist()})", field="inputs[1].data", rule=f"{case.op} axis")
    axis = int(a[0]) % rank
    res = fn(q(x), axis=axis)
    if scheme.exact:
        return [res.astype(np.float64)]
    return [res]


@register("ARG_MAX", rounding="none")
def arg_max(case, scheme):
    return _arg(case, scheme, np.argmax)


@register("ARG_MIN", rounding="none")
def arg_min(case, scheme):
    return _arg(case, scheme, np.argmin)
