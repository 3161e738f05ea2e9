"""Elementwise binary arithmetic: ADD, SUB, MUL."""

from __future__ import annotations

import numpy as np

from .. import arith
from ..common import act_range, q, scale, zp
from ..registry import register


def _add_sub(case, scheme, sign: int):
    a, b = case.inputs[0], case.inputs[1]
    out = case.outputs[0]
    lo, hi = act_range(case, out)
    qa, qb = q(a) - zp(a), q(b) - zp(b)
    sa, sb, so = scale(a), scale(b), scale(out)
    if scheme.is_fixed:
        # LiteRT PrepareGeneralSubOp / add.cc: inputs rescaled to twice the larger
        # input scale at 2^20, summed, then rescaled to the output.
        left_shift = 20
        twice_max = 2.0 * max(sa, sb)
        m1, s1 = arith.quantize_multiplier(sa / twice_max, scheme.single_rounding)
        m2, s2 = arith.quantize_multiplier(sb / twice_max, scheme.single_rounding)
        mo, so_ = arith.quantize_multiplier(twice_max / (float(np.float32((1 << left_shift) * np.float32(so)))),
                                            scheme.single_rounding)
        u1 = arith.mbqm_smaller_than_one_exp(qa << left_shift, m1, s1, scheme.single_rounding)
        u2 = arith.mbqm_smaller_than_one_exp(qb << left_shift, m2, s2, scheme.single_rounding)
        raw = u1 + sign * u2
        if so_ > 0:
            res = arith.mbqm(raw, mo, so_, scheme.single_rounding)
        else:
            res = arith.mbqm_smaller_than_one_exp(raw, mo, so_, scheme.single_rounding)
        return [np.clip(res + zp(out), lo, hi)]
    # float schemes: dequantize, operate, requantize
    ft = scheme.ftype
    x = ft(sa) * qa.astype(ft) + ft(sign) * ft(sb) * qb.astype(ft)
    return [scheme.quantize_real(x / ft(so), zp(out), lo, hi)]


@register("ADD")
def add(case, scheme):
    return _add_sub(case, scheme, +1)


@register("SUB")
def sub(case, scheme):
    return _add_sub(case, scheme, -1)


@register("MUL")
def mul(case, scheme):
    a, b = case.inputs[0], case.inputs[1]
    out = case.outputs[0]
    lo, hi = act_range(case, out)
    prod = (q(a) - zp(a)) * (q(b) - zp(b))
    # LiteRT: real multiplier s1 * s2 / s_out formed in float32
    real = float(np.float32(np.float32(scale(a)) * np.float32(scale(b))) / np.float32(scale(out)))
    if scheme.is_fixed and scheme.multiplier_precision == "double":
        return [scheme.requantize(prod, real, zp(out), lo, hi)]
    return [scheme.requantize(prod, scheme.real_multiplier(scale(a), scale(b), den=scale(out)), zp(out), lo, hi)]
