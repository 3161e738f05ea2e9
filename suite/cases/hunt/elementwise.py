"""Spaces of the elementwise family: ADD, SUB, MUL, MAXIMUM, MINIMUM, the comparisons, QUANTIZE,
DEQUANTIZE, ARG_MAX, ARG_MIN."""

from __future__ import annotations

import numpy as np

from suite.core.case import Case, Tensor
from suite.core.dtypes import DTYPES

from .draw import (
    Draw,
    act,
    activation,
    out_tensor,
    output,
    param,
    partner,
    qrange,
    real_values,
    rel,
    scale,
    shape,
    table_rule,
    zero_point,
)
from .space import space

COMPARISONS = ("LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL")


def _shapes(d: Draw, cap: int = 4096) -> tuple[list[int], list[int]]:
    a = shape(d, d.int(1, 6), cap)
    b = partner(d, a)
    return (b, a) if d.flag() else (a, b)


def _related(d: Draw, a, b, sign: int = 1) -> None:
    """Maybe make b's real values follow a's (where a code of b holds them): equal (``sign`` 1) or
    negated (-1) exactly, or off by one code; the rest of b stays as drawn."""
    if tuple(a.shape) != tuple(b.shape):
        return
    how = d.pick(["indep", "exact", "near"])
    if how == "indep":
        return
    ra = sign * real_values(a)
    lo, hi = DTYPES[b.dtype].qmin, DTYPES[b.dtype].qmax
    q = np.round(ra / b.scale[0]) + b.zero_point[0]
    if how == "near":
        q = q + np.random.default_rng(d.int(0, 2 ** 32 - 1)).integers(-1, 2, size=q.shape)
    ok = (q >= lo) & (q <= hi)
    if how == "exact":
        ok &= (q - b.zero_point[0]) * np.float64(b.scale[0]) == ra
    b.data = np.where(ok, q, b.data).astype(b.data.dtype)


def _combine(op: str, ra: np.ndarray, rb: np.ndarray) -> np.ndarray:
    return ra + rb if op == "ADD" else ra - rb if op == "SUB" else ra * rb


@space("ADD", "SUB", "MUL")
def binary(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    sa_, sb_ = _shapes(d)
    a = activation(d, r.inputs[0], sa_)
    b = activation(d, r.inputs[1], sb_, s=rel(d, a.scale[0]))
    _related(d, a, b, -1 if op == "ADD" else 1)
    real = _combine(op, real_values(a), real_values(b))
    base = a.scale[0] * b.scale[0] if op == "MUL" else max(a.scale[0], b.scale[0])
    out = output(d, r, np.broadcast_shapes(tuple(sa_), tuple(sb_)), real, base, far=30)
    return Case(op=op, inputs=[a, b], outputs=[out], attrs={"fused_activation_function": act(d)}, spec=r.table)


@space("MAXIMUM", "MINIMUM")
def max_min(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    sa_, sb_ = _shapes(d)
    a = activation(d, r.inputs[0], sa_)
    b = activation(d, r.inputs[1], sb_, s=a.scale[0], z=a.zero_point[0], dtype=a.dtype)
    _related(d, a, b)
    out = out_tensor(a.dtype, np.broadcast_shapes(tuple(sa_), tuple(sb_)), a.scale[0], a.zero_point[0])
    return Case(op=op, inputs=[a, b], outputs=[out], spec=r.table)


@space(*COMPARISONS)
def comparison(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    sa_, sb_ = _shapes(d)
    a = activation(d, r.inputs[0], sa_, s=scale(d, -28, 6))
    b = activation(d, r.inputs[1], sb_, s=rel(d, a.scale[0], 3, 16))
    _related(d, a, b)
    out = out_tensor(d.pick(r.outputs[0].dtypes), np.broadcast_shapes(tuple(sa_), tuple(sb_)))
    return Case(op=op, inputs=[a, b], outputs=[out], spec=r.table)


#: float32 values no quantizer's range reaches: +-inf, NaN (the spec says nothing of it: a case
#: with one is unspecified, suite/harness/hunt.py), -0.0, subnormals, the largest finite ones
SPECIAL_F32 = np.array([np.inf, -np.inf, np.nan, -0.0, 0.0, 1e-45, -1e-45, 1.1754942e-38, -1.1754942e-38,
                        3.4028235e38, -3.4028235e38], np.float32)


def specials(d: Draw, x: np.ndarray) -> np.ndarray:
    """``x`` (float32), or (one draw in three) with some elements replaced by :data:`SPECIAL_F32`."""
    if not d.pick([False, False, True]):
        return x
    rng = np.random.default_rng(d.int(0, 2 ** 32 - 1))
    x = np.array(x, np.float32, copy=True)
    hit = rng.random(x.shape) < d.pick([0.05, 0.3, 1.0])
    x[hit] = SPECIAL_F32[rng.integers(0, SPECIAL_F32.size, size=int(hit.sum()))]
    return x


def reals(d: Draw, shp, s: float, z: int, lo: int, hi: int) -> np.ndarray:
    """float32 values for a quantizer of (s, z) onto [lo, hi]: across the range and past its ends,
    on k + 1/2 steps, one float32 off them, near zero, or far beyond: |x / s| past 2^31 (the int32
    range of a kernel's quotient) up to float32's largest and +-inf."""
    rng = np.random.default_rng(d.int(0, 2 ** 32 - 1))
    shp = tuple(int(x) for x in shp)
    style = d.pick(["span", "ties", "near_ties", "beyond", "near_zero", "beyond_int32"])
    if style == "beyond_int32":
        with np.errstate(over="ignore"):
            sign = np.where(rng.random(shp) < 0.5, -1.0, 1.0)
            return np.asarray(sign * s * 2.0 ** rng.uniform(30.5, 140, size=shp), np.float32)
    k = rng.integers(lo - z - 2, hi - z + 3, size=shp).astype(np.float64)
    if style == "span":
        x = rng.uniform((lo - z - 2) * s, (hi - z + 2) * s, size=shp)
    elif style in ("ties", "near_ties"):
        x = ((k + 0.5) * s).astype(np.float32)
        if style == "near_ties":
            x = np.nextafter(x, np.where(rng.random(shp) < 0.5, np.inf, -np.inf).astype(np.float32))
    elif style == "beyond":
        x = k * s * 2.0 ** rng.uniform(0, 8, size=shp)
    else:
        x = rng.uniform(-4 * s, 4 * s, size=shp)
    return np.asarray(x, np.float32)


@space("QUANTIZE")
def quantize(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    shp = shape(d, d.int(1, 6))
    in_dtype = d.pick(r.inputs[0].dtypes)
    o_tr = r.outputs[0]
    o_dtype = d.pick(o_tr.dtypes)
    lo, hi = qrange(o_tr, o_dtype)
    if in_dtype == "float32":
        s, z = scale(d, -30, 8), zero_point(d, o_tr, o_dtype)
        x = Tensor("float32", tuple(shp), specials(d, reals(d, shp, s, z, lo, hi)))
        out = out_tensor(o_dtype, shp, s, z)
    else:
        x = activation(d, r.inputs[0], shp, dtype=in_dtype)
        out = output(d, r, shp, real_values(x), x.scale[0], far=24)
    return Case(op=op, inputs=[x], outputs=[out], spec=r.table)


@space("DEQUANTIZE")
def dequantize(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    shp = shape(d, d.int(1, 6))
    x = activation(d, r.inputs[0], shp, s=scale(d, -40, 12))
    return Case(op=op, inputs=[x], outputs=[out_tensor(d.pick(r.outputs[0].dtypes), shp)], spec=r.table)


@space("ARG_MAX", "ARG_MIN")
def arg(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    rank = d.int(1, 6)
    shp = shape(d, rank, cap=16384, hi=4096)
    axis = d.int(0, rank - 1)
    x = activation(d, r.inputs[0], shp)
    out_type = d.pick(r.outputs[0].dtypes)
    written = axis - rank if d.flag() else axis
    out = out_tensor(out_type, [n for i, n in enumerate(shp) if i != axis])
    return Case(op=op, inputs=[x, param([written])], outputs=[out], attrs={"output_type": out_type}, spec=r.table)
