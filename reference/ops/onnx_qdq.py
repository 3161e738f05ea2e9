"""ONNX QuantizeLinear and DequantizeLinear (spec table ``onnx-qdq``).

The ONNX definition fixes the arithmetic (float32 division by the scale, round
half to even, saturate; DequantizeLinear one float32 multiply), so every kernel
scheme computes the same codes; only the ``exact`` scheme differs: it returns
the unrounded value (x / scale + zero point in float64, unclamped) or the float64
product, for labelling ties.
"""

from __future__ import annotations

import numpy as np

from reference import onnx_ops
from suite.core.geometry import attr_int
from reference.registry import register


def qparams(case, t) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(scale float32, zero point int64, axis, block_size) of a quantized ONNX Q/DQ tensor.

    Shapes as ONNX holds them: a scalar (per-tensor), 1-D (per-axis) or ``scale_shape``
    (blocked); the axis is the tensor's (normalized) quantized_dimension.
    """
    s = np.asarray(t.scale, dtype=np.float32)
    z = np.asarray(t.zero_point, dtype=np.int64)
    block = 0 if case.attrs.get("block_size") is None else attr_int(case, "block_size", 0, lo=0)
    if t.scale_shape is not None:
        return s.reshape(t.scale_shape), z.reshape(t.scale_shape), t.quantized_dimension, block
    if len(s) == 1:
        return s.reshape(()), z.reshape(()), t.quantized_dimension, 0
    return s, z, t.quantized_dimension, 0


@register("QuantizeLinear", rounding="float-half-even")
def quantize_linear(case, scheme):
    x, y = case.inputs[0], case.outputs[0]
    s, z, axis, block = qparams(case, y)
    data = np.asarray(x.data, dtype=np.float32)
    if scheme.exact:
        sx = onnx_ops.expand_param(s.astype(np.float64), data.shape, axis, block)
        zx = onnx_ops.expand_param(z, data.shape, axis, block)
        return [data.astype(np.float64) / sx + zx]
    return [onnx_ops.quantize_linear(data, s, z, axis=axis, block_size=block, dtype=y.dtype)]


@register("DequantizeLinear", rounding="none")
def dequantize_linear(case, scheme):
    x = case.inputs[0]
    s, z, axis, block = qparams(case, x)
    codes = np.asarray(x.data, dtype=np.int64)
    if scheme.exact:
        return [onnx_ops.dequantize_linear(codes, s.astype(np.float64), z, axis=axis, block_size=block)]
    return [onnx_ops.dequantize_linear(codes, s, z, axis=axis, block_size=block)]
