"""Generators for ONNX QuantizeLinear / DequantizeLinear (spec table ``onnx-qdq``).

Variants: one per quantized type x granularity (``u8_tensor``, ``i4_block``, ...),
``ties`` (x / scale exactly k + 0.5, odd and even zero points), ``block_tail``
(blocked along an axis that the block size does not divide), ``neg_axis`` (the
axis option written negative), and the common edges: ``sat_hi`` / ``sat_lo``
(values beyond either end of the type), ``zp_min`` / ``zp_max`` (zero points at
the type's limits), ``odd_shape``. ``random`` mixes everything.
"""

from __future__ import annotations

import numpy as np

from suite.core.case import Case, Tensor
from suite.core.dtypes import DTYPES
from suite.cases.generate import Gen, generator

QTYPES = ["uint8", "int8", "uint16", "int16", "uint4", "int4"]
SHORT = {"uint8": "u8", "int8": "i8", "uint16": "u16", "int16": "i16", "uint4": "u4", "int4": "i4"}
GRANS = {"tensor": "per-tensor", "axis": "per-axis", "block": "blocked"}
COMBOS = {f"{SHORT[d]}_{g}": (d, g) for d in QTYPES for g in GRANS}


def _plan(g: Gen) -> tuple[str, str]:
    """(dtype, granularity key) of this case."""
    if g.variant in COMBOS:
        return COMBOS[g.variant]
    dtype = g.choice(QTYPES)
    if g.variant == "block_tail":
        return dtype, "block"
    if g.variant == "neg_axis":
        return dtype, g.choice(["axis", "block"])
    return dtype, g.choice(list(GRANS))


def _layout(g: Gen, gran: str):
    """shape, quantized dimension, block size, scale shape, attrs."""
    lo_rank = 1 if gran == "tensor" else 2
    rank = g.randint(lo_rank, 4)
    shape = g.dims(rank, 1, 6)
    attrs: dict = {}
    if gran == "tensor":
        return shape, 0, 0, None, attrs
    axis = g.randint(0, rank - 1)
    if gran == "axis":
        shape[axis] = max(shape[axis], 2)
        scale_shape = None
        block = 0
    else:
        if g.variant == "block_tail":
            block = g.randint(2, 4)
            d = block * g.randint(1, 3) + g.randint(1, block - 1)   # D % B != 0
        else:
            d = g.randint(3, 12) if g.variant != "odd_shape" else g.choice([3, 5, 7, 9, 13])
            block = g.randint(2, max(2, d - 1))
        shape[axis] = d
        scale_shape = list(shape)
        scale_shape[axis] = -(-d // block)
        attrs["block_size"] = block
    if g.variant == "neg_axis" or (g.variant == "random" and g.rng.random() < 0.3):
        attrs["axis"] = axis - rank
    elif axis == 1 and g.rng.random() < 0.5:
        pass   # ONNX's default axis is 1: leave it out
    else:
        attrs["axis"] = axis
    return shape, axis, block, scale_shape, attrs


def _scales(g: Gen, n: int, ties: bool) -> np.ndarray:
    """n float32 scales; ``ties``: few significant bits (m * 2^e, m odd < 64) so that
    x = (k + 0.5) * scale is exact in float32 for every k of a 16-bit type (< 2^24)."""
    if ties:
        m = 2 * g.rng.integers(0, 32, size=n) + 1
        e = g.rng.integers(-14, -4, size=n)
        return (m * np.exp2(e.astype(np.float64))).astype(np.float32)
    return np.exp(g.rng.uniform(np.log(2.0**-12), np.log(0.25), size=n)).astype(np.float32)


def _zero_points(g: Gen, n: int, dtype: str) -> np.ndarray:
    d = DTYPES[dtype]
    if g.variant == "zp_min":
        return np.full(n, d.qmin, np.int64)
    if g.variant == "zp_max":
        return np.full(n, d.qmax, np.int64)
    span = d.qmax - d.qmin
    return g.rng.integers(d.qmin + span // 8, d.qmax - span // 8 + 1, size=n).astype(np.int64)


def _expand(p: np.ndarray, shape, axis: int, block: int, scale_shape) -> np.ndarray:
    """A flat per-tensor / per-axis / blocked parameter broadcast to ``shape``."""
    if p.size == 1:
        return np.broadcast_to(p.reshape(()), shape)
    if scale_shape is None:
        bshape = [1] * len(shape)
        bshape[axis] = p.size
        return np.broadcast_to(p.reshape(bshape), shape)
    idx = np.arange(shape[axis]) // block
    return p.reshape(scale_shape).take(idx, axis=axis)


def _qtensor(g: Gen, dtype: str, gran: str, ties: bool = False):
    shape, axis, block, scale_shape, attrs = _layout(g, gran)
    n = 1 if gran == "tensor" else (shape[axis] if gran == "axis" else int(np.prod(scale_shape)))
    s = _scales(g, n, ties)
    z = _zero_points(g, n, dtype)
    t = Tensor(dtype, tuple(shape), None, [float(v) for v in s], [int(v) for v in z],
               axis if gran != "tensor" else 0, None, tuple(scale_shape) if scale_shape else None)
    return t, attrs, _expand(s, shape, axis, block, scale_shape), _expand(z, shape, axis, block, scale_shape)


@generator("QuantizeLinear", variants={**{k: 1 for k in COMBOS}, "ties": 3, "block_tail": 2, "neg_axis": 2},
           clause="onnx-qdq/QuantizeLinear")
def gen_quantize_linear(g: Gen) -> Case:
    dtype, gran = _plan(g)
    ties = g.variant == "ties"
    y, attrs, s, z = _qtensor(g, dtype, gran, ties)
    d = DTYPES[dtype]
    shape = y.shape
    lo, hi = d.qmin - z, d.qmax - z          # codes before the zero point, per element
    if ties:
        # x / scale = k + 0.5 exactly, k spanning the type (both parities, some saturating)
        k = g.rng.integers(lo - 2, hi + 2, size=shape)
        t = k.astype(np.float64) + 0.5
        g.clause = "onnx-qdq/QuantizeLinear/rounding"
    elif g.variant == "sat_hi":
        t = g.rng.uniform(hi - 0.25 * (hi - lo), hi + (hi - lo), size=shape)
        g.clause = "onnx-qdq/QuantizeLinear/saturation"
    elif g.variant == "sat_lo":
        t = g.rng.uniform(lo - (hi - lo), lo + 0.25 * (hi - lo), size=shape)
        g.clause = "onnx-qdq/QuantizeLinear/saturation"
    else:
        t = g.rng.uniform(lo - 3, hi + 3, size=shape)
        g.clause = f"onnx-qdq/QuantizeLinear/{GRANS[gran]}"
    x = (t * s.astype(np.float64)).astype(np.float32)
    if ties:
        q = x / s   # float32 division, as the spec computes it
        assert np.all(q.astype(np.float64) == t), "tie construction must be exact"
    x_t = Tensor("float32", tuple(shape), x)
    return Case(op="QuantizeLinear", inputs=[x_t], outputs=[y], attrs=attrs, spec="onnx-qdq",
                description=f"{dtype} {GRANS[gran]}")


@generator("DequantizeLinear", variants={**{k: 1 for k in COMBOS}, "extremes": 2, "block_tail": 2,
                                         "neg_axis": 2},
           clause="onnx-qdq/DequantizeLinear")
def gen_dequantize_linear(g: Gen) -> Case:
    dtype, gran = _plan(g)
    x, attrs, s, z = _qtensor(g, dtype, gran)
    d = DTYPES[dtype]
    if g.variant == "extremes":
        codes = np.where(g.rng.random(x.shape) < 0.5, d.qmin, d.qmax)
    else:
        codes = g.codes(x.shape, dtype, int(z.flat[0]) if z.size else 0)
    x.data = np.asarray(codes).astype(d.storage).reshape(x.shape)
    g.clause = f"onnx-qdq/DequantizeLinear/{GRANS[gran]}"
    return Case(op="DequantizeLinear", inputs=[x], outputs=[Tensor("float32", tuple(x.shape))], attrs=attrs,
                spec="onnx-qdq", description=f"{dtype} {GRANS[gran]}")

