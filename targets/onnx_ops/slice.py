"""ONNX mappings of the first slice of operators."""

from __future__ import annotations

import numpy as np

from suite.errors import Unsupported

from ..onnx_model import NCHW_TO_NHWC, NHWC_TO_NCHW, Builder, hw_attrs, onnx_op

@onnx_op("ADD", "SUB", "MUL")
def _binary(b: Builder):
    x = b.dq_input(0)
    y = b.dq_input(1)
    op_type = {"ADD": "Add", "SUB": "Sub", "MUL": "Mul"}[b.case.op]
    b.q_output(b.activation(b.node1(op_type, [x, y])))


@onnx_op("QUANTIZE")
def _quantize(b: Builder):
    b.q_output(b.dq_input(0))


@onnx_op("DEQUANTIZE")
def _dequantize(b: Builder):
    b.q_output(b.dq_input(0))


@onnx_op("CONV_2D")
def _conv(b: Builder):
    c = b.case
    w = c.inputs[1]
    kh, kw = w.shape[1], w.shape[2]
    stride, dil, pads = hw_attrs(c, (kh, kw))
    x = b.dq_input(0, NHWC_TO_NCHW)
    wf = b.dq_input(1, (0, 3, 1, 2))   # OHWI -> OIHW
    ins = [x, wf]
    if len(c.inputs) > 2 and c.inputs[2].data is not None:
        ins.append(b.dq_input(2))
    y = b.node1("Conv", ins, strides=list(stride), dilations=list(dil), pads=pads,
                kernel_shape=[kh, kw])
    o = c.outputs[0].shape
    b.q_output(b.activation(y), perm_out=NCHW_TO_NHWC, model_shape=[o[0], o[3], o[1], o[2]])


@onnx_op("DEPTHWISE_CONV_2D")
def _dwconv(b: Builder):
    c = b.case
    w = c.inputs[1]                     # [1, H, W, C*M]
    kh, kw = w.shape[1], w.shape[2]
    cin = c.inputs[0].shape[3]
    stride, dil, pads = hw_attrs(c, (kh, kw))
    x = b.dq_input(0, NHWC_TO_NCHW)
    wf = b.dq_input(1, (3, 0, 1, 2))    # 1HWO -> O1HW
    ins = [x, wf]
    if len(c.inputs) > 2 and c.inputs[2].data is not None:
        ins.append(b.dq_input(2))
    y = b.node1("Conv", ins, strides=list(stride), dilations=list(dil), pads=pads,
                kernel_shape=[kh, kw], group=int(cin))
    o = c.outputs[0].shape
    b.q_output(b.activation(y), perm_out=NCHW_TO_NHWC, model_shape=[o[0], o[3], o[1], o[2]])


@onnx_op("FULLY_CONNECTED")
def _fc(b: Builder):
    c = b.case
    x_t, w_t = c.inputs[0], c.inputs[1]
    n_in = w_t.shape[1]
    x = b.dq_input(0)
    if len(x_t.shape) != 2 or c.attrs.get("keep_num_dims"):
        if c.attrs.get("keep_num_dims"):
            raise Unsupported("keep_num_dims FULLY_CONNECTED has no mapping yet")
        shape = b.const(np.array([-1, n_in], np.int64), "shape")
        x = b.node1("Reshape", [x, shape])
    wf = b.dq_input(1)
    ins = [x, wf]
    if len(c.inputs) > 2 and c.inputs[2].data is not None:
        ins.append(b.dq_input(2))
    y = b.node1("Gemm", ins, transB=1)
    b.q_output(b.activation(y))


@onnx_op("AVERAGE_POOL_2D", "MAX_POOL_2D")
def _pool(b: Builder):
    c = b.case
    a = c.attrs
    k = (int(a["filter_height"]), int(a["filter_width"]))
    stride, _, pads = hw_attrs(c, k)
    x = b.dq_input(0, NHWC_TO_NCHW)
    if c.op == "AVERAGE_POOL_2D":
        y = b.node1("AveragePool", [x], kernel_shape=list(k), strides=list(stride), pads=pads,
                    count_include_pad=0)
    else:
        y = b.node1("MaxPool", [x], kernel_shape=list(k), strides=list(stride), pads=pads)
    o = c.outputs[0].shape
    b.q_output(b.activation(y), perm_out=NCHW_TO_NHWC, model_shape=[o[0], o[3], o[1], o[2]])


@onnx_op("SOFTMAX")
def _softmax(b: Builder):
    x = b.dq_input(0)
    beta = float(b.case.attrs.get("beta", 1.0))
    if beta != 1.0:
        x = b.node1("Mul", [x, b.const(np.array(beta, np.float32), "beta")])
    b.q_output(b.node1("Softmax", [x], axis=-1))


@onnx_op("LOGISTIC")
def _logistic(b: Builder):
    b.q_output(b.node1("Sigmoid", [b.dq_input(0)]))


@onnx_op("TANH")
def _tanh(b: Builder):
    b.q_output(b.node1("Tanh", [b.dq_input(0)]))


@onnx_op("RESHAPE")
def _reshape(b: Builder):
    x = b.dq_input(0)
    shape = b.const(np.asarray(b.case.outputs[0].shape, np.int64), "shape")
    b.q_output(b.node1("Reshape", [x, shape]))


@onnx_op("CONCATENATION")
def _concat(b: Builder):
    c = b.case
    xs = [b.dq_input(i) for i in range(len(c.inputs))]
    axis = int(c.attrs.get("axis", 0))
    b.q_output(b.activation(b.node1("Concat", xs, axis=axis)))
