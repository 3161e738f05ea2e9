"""ONNX QDQ mappings of AVERAGE_POOL_2D, MAX_POOL_2D, MEAN, SUM, L2_NORMALIZATION,
RESIZE_BILINEAR. Each model is DequantizeLinear -> the operator -> QuantizeLinear; NHWC
data is permuted by the harness (GraphInput/GraphOutput perms), never by Transpose nodes."""

from __future__ import annotations

import numpy as np

from suite.core.errors import Unsupported

from targets.onnx_model import NCHW_TO_NHWC, NHWC_TO_NCHW, Builder, hw_attrs, onnx_op


def _nchw_out(b: Builder, y: str) -> None:
    o = b.case.outputs[0].shape
    b.q_output(y, perm_out=NCHW_TO_NHWC, model_shape=[o[0], o[3], o[1], o[2]])


@onnx_op("AVERAGE_POOL_2D", "MAX_POOL_2D")
def _pool(b: Builder):
    """AveragePool (count_include_pad=0: padding excluded, as LiteRT) / MaxPool on NCHW.
    LiteRT's SAME padding puts the odd extra row/column after, as ONNX explicit pads can.
    A window covering the whole input with VALID padding becomes GlobalAveragePool /
    GlobalMaxPool (what converters emit). MaxPool takes the fused activation before the pool
    (max commutes with a clamp): ORT 1.31's QDQ rewrite of MaxPool -> Clip/Relu -> Q
    builds an invalid QuantizeLinear (int8 output, uint8 zero point) and rejects the model."""
    c = b.case
    a = c.attrs
    k = (int(a["filter_height"]), int(a["filter_width"]))
    stride, _, pads = hw_attrs(c, k)
    x = b.dq_input(0, NHWC_TO_NCHW)
    avg = c.op == "AVERAGE_POOL_2D"
    h, w = c.inputs[0].shape[1:3]
    if not avg:
        x = b.activation(x)
    if k == (h, w) and not any(pads):
        y = b.node1("GlobalAveragePool" if avg else "GlobalMaxPool", [x])
    elif avg:
        y = b.node1("AveragePool", [x], kernel_shape=list(k), strides=list(stride), pads=pads,
                    count_include_pad=0)
    else:
        y = b.node1("MaxPool", [x], kernel_shape=list(k), strides=list(stride), pads=pads)
    _nchw_out(b, b.activation(y) if avg else y)


def _axes(b: Builder) -> list[int]:
    """The case's axis values, wrapped to non-negative and de-duplicated (ONNX rejects repeats)."""
    rank = len(b.case.inputs[0].shape)
    out = []
    for v in np.asarray(b.case.inputs[1].data).ravel().tolist():
        a = int(v) % rank if rank else 0
        if a not in out:
            out.append(a)
    return sorted(out)


@onnx_op("MEAN", "SUM")
def _reduce(b: Builder):
    """ReduceMean / ReduceSum (opset 18+: axes as an int64 input), keepdims from keep_dims."""
    c = b.case
    x = b.dq_input(0)
    axes = b.const(np.asarray(_axes(b), np.int64), "axes")
    keep = 1 if c.attrs.get("keep_dims", False) else 0
    y = b.node1("ReduceMean" if c.op == "MEAN" else "ReduceSum", [x, axes], keepdims=keep)
    b.q_output(y)


@onnx_op("L2_NORMALIZATION")
def _l2norm(b: Builder):
    """LpNormalization(p=2) over the last axis."""
    c = b.case
    act = c.attrs.get("fused_activation_function", "NONE") or "NONE"
    if act != "NONE":
        raise Unsupported(f"L2_NORMALIZATION with fused {act}: LiteRT itself rejects it, no mapping")
    x = b.dq_input(0)
    b.q_output(b.node1("LpNormalization", [x], axis=-1, p=2))


@onnx_op("RESIZE_BILINEAR")
def _resize(b: Builder):
    """Resize(mode=linear) to explicit sizes on NCHW: align_corners -> "align_corners",
    half_pixel_centers -> "half_pixel", neither -> "asymmetric" (x_in = x_out * in / out)."""
    c = b.case
    a = c.attrs
    ac, hp = bool(a.get("align_corners", False)), bool(a.get("half_pixel_centers", False))
    if ac and hp:
        raise Unsupported("align_corners and half_pixel_centers together (LiteRT rejects it too)")
    mode = "align_corners" if ac else "half_pixel" if hp else "asymmetric"
    n, _, _, ch = c.inputs[0].shape
    oh, ow = (int(v) for v in np.asarray(c.inputs[1].data).ravel())
    x = b.dq_input(0, NHWC_TO_NCHW)
    sizes = b.const(np.array([n, ch, oh, ow], np.int64), "sizes")
    y = b.node1("Resize", [x, "", "", sizes], mode="linear", coordinate_transformation_mode=mode)
    _nchw_out(b, y)
