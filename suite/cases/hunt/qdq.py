"""Spaces of ONNX QuantizeLinear / DequantizeLinear (table onnx-qdq): every quantized type, per tensor,
per axis or blocked (any block size, a last block cut short), the axis written negative or left to
its default, scales over 2^-30..2^8."""

from __future__ import annotations

import math

import numpy as np

from suite.core.case import Case, Tensor
from suite.core.dtypes import DTYPES

from .draw import Draw, codes, dim, fit, scale, table_rule
from .elementwise import reals, specials
from .space import space


def _quantized(d: Draw, tr) -> tuple[Tensor, dict, np.ndarray, np.ndarray]:
    """The quantized tensor (no data yet), its attrs, and its scales and zero points per element."""
    dtype = d.pick(tr.dtypes)
    lo, hi = DTYPES[dtype].qmin, DTYPES[dtype].qmax
    gran = d.pick(tr.granularity)
    rank = d.int(1 if gran == "per-tensor" else 2, 5)
    shp = fit([dim(d, 65) for _ in range(rank)], 4096)
    attrs: dict = {}
    axis, block, sshape = 0, 0, None
    if gran != "per-tensor":
        axis = d.int(0, rank - 1)
        shp[axis] = max(shp[axis], 2)
        if gran == "blocked":
            block = d.int(1, max(1, shp[axis]))
            sshape = list(shp)
            sshape[axis] = -(-shp[axis] // block)
            attrs["block_size"] = block
        how = d.int(0, 2)
        if how == 0:
            attrs["axis"] = axis - rank
        elif how == 1 or axis != tr.axis_default:
            attrs["axis"] = axis
    n = 1 if gran == "per-tensor" else (shp[axis] if sshape is None else math.prod(sshape))
    rng = np.random.default_rng(d.int(0, 2 ** 32 - 1))
    spread = d.pick([0, 0, 2, 8, 24])    # octaves between the scales of one tensor
    s = (scale(d, -30, 8) * 2.0 ** rng.uniform(-spread / 2, spread / 2, size=n)).astype(np.float32)
    zs = np.array([d.int(lo, hi) for _ in range(min(n, 2))], np.int64)   # one zero point, or two mixed
    z = zs[rng.integers(0, zs.size, size=n)]
    t = Tensor(dtype, tuple(shp), None, [float(v) for v in s], [int(v) for v in z], axis, None,
               tuple(sshape) if sshape else None)
    se, ze = t.broadcast_qparams(block or None) if n > 1 else (s.reshape(()), z.reshape(()))
    return t, attrs, np.broadcast_to(se, shp), np.broadcast_to(ze, shp)


@space("QuantizeLinear")
def quantize_linear(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    y, attrs, s, z = _quantized(d, r.outputs[0])
    lo, hi = DTYPES[y.dtype].qmin, DTYPES[y.dtype].qmax
    # x / s + z around [lo, hi]: reals drawn for a unit scale and zero point 0, then mapped
    unit = reals(d, y.shape, 1.0, 0, lo, hi).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        x = specials(d, ((unit - z) * s).astype(np.float32))
    return Case(op=op, inputs=[Tensor("float32", tuple(y.shape), x)], outputs=[y], attrs=attrs, spec=r.table)


@space("DequantizeLinear")
def dequantize_linear(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    x, attrs, s, z = _quantized(d, r.inputs[0])
    lo, hi = DTYPES[x.dtype].qmin, DTYPES[x.dtype].qmax
    x.data = codes(d, x.shape, lo, hi, int(z.flat[0])).astype(DTYPES[x.dtype].storage)
    return Case(op=op, inputs=[x], outputs=[Tensor("float32", tuple(x.shape))], attrs=attrs, spec=r.table)
