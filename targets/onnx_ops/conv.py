"""ONNX QDQ mappings of the convolution / matrix family.

Each model holds the operator under test between its DequantizeLinear / QuantizeLinear nodes
(a fused activation follows as its own Q -> DQ -> Relu / Clip unit, see :func:`_fused`). LiteRT
layouts are converted on the data, recorded on the graph inputs / outputs (and permuted in the
initializers), never as Transpose nodes:

* CONV_2D -> Conv: NHWC -> NCHW, OHWI -> OIHW (per-axis DQ axis 0), ``group`` = C_in / C_w.
* DEPTHWISE_CONV_2D -> Conv with ``group`` = C_in: 1HWO -> O1HW (per-axis axis 3 -> 0); output
  channel c*M + m reads input channel c in both.
* TRANSPOSE_CONV -> ConvTranspose: OHWI -> IOHW (per-axis axis 0 -> 1), explicit ``pads`` and
  ``output_padding`` reproducing LiteRT's padding and output size.
* FULLY_CONNECTED -> Gemm(transB=1) on a [batch, in] input (a higher-rank input is flattened by
  the harness, as LiteRT flattens it); with keep_num_dims the harness reshapes the [batch, out]
  output back to [..., out] (same data; a MatMul + Add form trips an ONNX Runtime 1.31 QDQ bug).
* BATCH_MATMUL -> MatMul; adj_x / adj_y transpose the last two dims of the fed data.

Padding follows LiteRT (suite/core/geometry.py: out_size, pad_before): SAME puts the odd pad row
/ column at the end.
"""

from __future__ import annotations

from suite.core.geometry import conv_geometry, out_size, pad_before

from targets.onnx_model import NCHW_TO_NHWC, NHWC_TO_NCHW, Builder, onnx_op

OHWI_TO_OIHW = (0, 3, 1, 2)
DW_1HWO_TO_O1HW = (3, 0, 1, 2)
OHWI_TO_IOHW = (3, 0, 1, 2)


def _has(c, i: int) -> bool:
    return len(c.inputs) > i and c.inputs[i].data is not None


def _conv_pads(c, kh: int, kw: int):
    """(strides, dilations, ONNX pads [top, left, bottom, right]) of a CONV_2D / DEPTHWISE case."""
    stride, dil, padding = conv_geometry(c)
    _, h, w, _ = c.inputs[0].shape
    pads_before, pads_after = [], []
    for n, k, s, d in ((h, kh, stride[0], dil[0]), (w, kw, stride[1], dil[1])):
        o = out_size(n, k, s, d, padding)
        before = pad_before(n, k, s, d, o)
        total = max((o - 1) * s + (k - 1) * d + 1 - n, 0)
        pads_before.append(before)
        pads_after.append(total - before)
    return list(stride), list(dil), pads_before + pads_after


def _fused(b: Builder, y: str) -> str:
    """The fused activation, as its own QDQ node unit: op -> Q -> DQ -> Relu / Clip (-> Q).

    QNN groups DQ -> op -> Q into one quantized node, so the op's output must be quantized
    (with the output's parameters) before the activation. The extra rounding changes nothing:
    codes map back to themselves and the clip bounds round as LiteRT's activation range does
    (except when a bound / s_out is exactly k + 0.5: half to even vs LiteRT's half away).
    """
    act = b.case.attrs.get("fused_activation_function", "NONE") or "NONE"
    if act == "NONE":
        return y
    s, z, kw = b.qparams(b.case.outputs[0])
    q = b.node1("QuantizeLinear", [y, s, z], **kw)
    return b.activation(b.node1("DequantizeLinear", [q, s, z], **kw))


def _nchw_output(b: Builder, y: str) -> None:
    o = b.case.outputs[0].shape
    b.q_output(_fused(b, y), perm_out=NCHW_TO_NHWC, model_shape=[o[0], o[3], o[1], o[2]])


def _grouped_conv(b: Builder, weight_perm, groups: int) -> None:
    """An ONNX Conv on the NCHW-permuted input with the filter permuted to O(I/g)HW."""
    c = b.case
    _, kh, kw, _ = c.inputs[1].shape
    strides, dils, pads = _conv_pads(c, kh, kw)
    x = b.dq_input(0, NHWC_TO_NCHW)
    w = b.dq_input(1, weight_perm)
    ins = [x, w] + ([b.dq_input(2)] if _has(c, 2) else [])
    y = b.node1("Conv", ins, strides=strides, dilations=dils, pads=pads, kernel_shape=[kh, kw],
                group=int(groups))
    _nchw_output(b, y)


@onnx_op("CONV_2D")
def _conv(b: Builder):
    cw = b.case.inputs[1].shape[3]
    _grouped_conv(b, OHWI_TO_OIHW, b.case.inputs[0].shape[3] // cw)


@onnx_op("DEPTHWISE_CONV_2D")
def _depthwise(b: Builder):
    _grouped_conv(b, DW_1HWO_TO_O1HW, b.case.inputs[0].shape[3])


@onnx_op("TRANSPOSE_CONV")
def _transpose_conv(b: Builder):
    c = b.case
    o, kh, kw, _ = c.inputs[1].shape
    stride, _, _ = conv_geometry(c)
    _, h, w, _ = c.inputs[2].shape
    _, oh, ow, _ = c.outputs[0].shape
    pads_before, pads_after, out_pad = [], [], []
    for n, k, s, on in ((h, kh, stride[0], oh), (w, kw, stride[1], ow)):
        total = (n - 1) * s + k - on          # LiteRT's padding total (a convolution of the output)
        before = max(total, 0) // 2
        pads_before.append(before)
        pads_after.append(max(total, 0) - before)
        out_pad.append(max(-total, 0))        # rows LiteRT leaves to the bias alone
    x = b.dq_input(2, NHWC_TO_NCHW)
    wt = b.dq_input(1, OHWI_TO_IOHW)
    ins = [x, wt] + ([b.dq_input(3)] if _has(c, 3) else [])
    attrs = dict(strides=list(stride), kernel_shape=[kh, kw], pads=pads_before + pads_after)
    if any(out_pad):
        attrs["output_padding"] = out_pad
    y = b.node1("ConvTranspose", ins, **attrs)
    _nchw_output(b, y)


@onnx_op("FULLY_CONNECTED")
def _fully_connected(b: Builder):
    c = b.case
    x_t = c.inputs[0]
    o, k = c.inputs[1].shape
    batch = x_t.size // k
    x = b.dq_input(0)
    if tuple(x_t.shape) != (batch, k):                 # LiteRT flattens the input to [batch, in]
        gi = b.inputs[-1]
        gi.shape = (batch, k)
        vi = b.graph_inputs[-1]
        del vi.type.tensor_type.shape.dim[:]
        for d in (batch, k):
            vi.type.tensor_type.shape.dim.add().dim_value = d
    w = b.dq_input(1)
    ins = [x, w] + ([b.dq_input(2)] if _has(c, 2) else [])
    y = b.node1("Gemm", ins, transB=1)
    b.q_output(_fused(b, y), model_shape=[batch, o])
    # keep_num_dims only changes the output's shape ([..., out] instead of [batch, out]), not its
    # data: the harness reshapes (a MatMul + Add form trips an ONNX Runtime 1.31 QDQ rewrite bug)
    b.outputs[-1].shape = tuple(c.outputs[0].shape)


@onnx_op("BATCH_MATMUL")
def _batch_matmul(b: Builder):
    c = b.case

    def swap_last(i: int):
        r = len(c.inputs[i].shape)
        return tuple(range(r - 2)) + (r - 1, r - 2)

    a = b.dq_input(0, swap_last(0) if c.attrs.get("adj_x") else None)
    m = b.dq_input(1, swap_last(1) if c.attrs.get("adj_y") else None)
    b.q_output(b.node1("MatMul", [a, m]))
