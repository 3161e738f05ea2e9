"""ONNX QuantizeLinear / DequantizeLinear cases (spec table ``onnx-qdq``) as one-node models.

The graph holds the single node under test: QuantizeLinear takes the float32 graph
input and returns the quantized graph output; DequantizeLinear the reverse. Scale
and zero point are initializers of ONNX's shape for the granularity (scalar, 1-D,
or the blocked ``scale_shape``), the zero point in the quantized type (int4/uint4
as packed ONNX tensors); ``axis`` and ``block_size`` are passed as the case writes
them. 4-bit graph inputs/outputs go through ``onnx_model.ortvalue_4bit`` /
``run_session`` (NumPy has no 4-bit type).

QNN's execution provider does not take a partition made of a single Quantize or
Dequantize node, so on ``htp`` these cases report unsupported (the session fails
with CPU fallback disabled).
"""

from __future__ import annotations

import numpy as np

from targets.onnx_model import Builder, GraphOutput, onnx_op


def _qparam_consts(b: Builder, t) -> tuple[str, str]:
    """Scale (float32) and zero point (the tensor's type) initializers, ONNX-shaped."""
    if t.scale_shape is not None:
        shape = list(t.scale_shape)
    elif len(t.scale) == 1:
        shape = []
    else:
        shape = [len(t.scale)]
    s_name, z_name = b.fresh("scale"), b.fresh("zero_point")
    b.inits.append(b.nh.from_array(np.asarray(t.scale, np.float32).reshape(shape), s_name))
    b.inits.append(b.helper.make_tensor(z_name, b._elem(t.dtype), shape, [int(v) for v in t.zero_point]))
    return s_name, z_name


def _attrs(b: Builder, t) -> dict:
    a = b.case.attrs
    out = {}
    if len(t.scale) > 1 or t.scale_shape is not None:
        if "axis" in a:
            out["axis"] = int(a["axis"])
        if t.scale_shape is not None:
            out["block_size"] = int(a["block_size"])
    return out


def _output(b: Builder, name: str, dtype: str, shape) -> None:
    b.graph_outputs.append(b.helper.make_tensor_value_info(name, b._elem(dtype), list(shape)))
    b.outputs.append(GraphOutput(name))


@onnx_op("QuantizeLinear")
def _quantize_linear(b: Builder):
    y = b.case.outputs[0]
    x = b.raw_input(0)
    s, z = _qparam_consts(b, y)
    b.nodes.append(b.helper.make_node("QuantizeLinear", [x, s, z], ["out0"], **_attrs(b, y)))
    _output(b, "out0", y.dtype, y.shape)


@onnx_op("DequantizeLinear")
def _dequantize_linear(b: Builder):
    xt = b.case.inputs[0]
    x = b.raw_input(0)
    s, z = _qparam_consts(b, xt)
    b.nodes.append(b.helper.make_node("DequantizeLinear", [x, s, z], ["out0"], **_attrs(b, xt)))
    _output(b, "out0", "float32", b.case.outputs[0].shape)
