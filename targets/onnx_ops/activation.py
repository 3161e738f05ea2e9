"""ONNX QDQ mappings of the activations: SOFTMAX, LOG_SOFTMAX, LOGISTIC, TANH, HARD_SWISH,
LEAKY_RELU, RELU, RELU6.

Each model is DequantizeLinear -> one float operator -> QuantizeLinear. LiteRT's axis for
(LOG_)SOFTMAX is the last one, as is ONNX's default (opset >= 13).
"""

from __future__ import annotations

import numpy as np

from suite.core.dtypes import DTYPES

from targets.onnx_model import Builder, onnx_op


def _dq_scaled(b: Builder, factor: float) -> str:
    """Input 0 dequantized with its scale multiplied by ``factor`` (float32), so a constant
    factor (SOFTMAX's beta) needs no float node of its own: (q - z) * (s * beta)."""
    t = b.case.inputs[0]
    raw = b.raw_input(0)
    s = b.const(np.array(np.float32(t.scale[0]) * np.float32(factor), np.float32), "s")
    z = b.const(np.array(t.zero_point[0], DTYPES[t.dtype].storage), "z")
    return b.node1("DequantizeLinear", [raw, s, z])


@onnx_op("SOFTMAX")
def _softmax(b: Builder):
    beta = float(np.float32(b.case.attrs.get("beta", 1.0)))
    x = b.dq_input(0) if beta == 1.0 else _dq_scaled(b, beta)
    b.q_output(b.node1("Softmax", [x], axis=-1))


@onnx_op("LOG_SOFTMAX")
def _log_softmax(b: Builder):
    # QNN HTP validates LogSoftmax only with a uint8 output (int8 fails with error 3110): the
    # result is quantized to uint8 (same scale, zero point + 128) and converted to the int8
    # output by a DQ/Q pair, which is exact (every uint8 code v is the int8 code v - 128).
    y = b.node1("LogSoftmax", [b.dq_input(0)], axis=-1)
    o = b.case.outputs[0]
    if o.dtype == "int8":
        s = b.const(np.array(o.scale[0], np.float32), "s")
        zu = b.const(np.array(o.zero_point[0] + 128, np.uint8), "zu")
        y = b.node1("DequantizeLinear", [b.node1("QuantizeLinear", [y, s, zu]), s, zu])
    b.q_output(y)


@onnx_op("LOGISTIC")
def _logistic(b: Builder):
    b.q_output(b.node1("Sigmoid", [b.dq_input(0)]))


@onnx_op("TANH")
def _tanh(b: Builder):
    b.q_output(b.node1("Tanh", [b.dq_input(0)]))


@onnx_op("HARD_SWISH")
def _hard_swish(b: Builder):
    # ONNX HardSwish: x * max(0, min(1, x / 6 + 1/2)) = x * relu6(x + 3) / 6
    b.q_output(b.node1("HardSwish", [b.dq_input(0)]))


@onnx_op("LEAKY_RELU")
def _leaky_relu(b: Builder):
    # PRelu with a constant slope: QNN HTP refuses LeakyRelu on int8 (its Prelu with the alpha
    # attribute fails validation, error 3110) but runs PRelu with a quantized slope. The slope
    # is the int8 code sign(alpha) with scale |alpha| (exactly alpha; 0 for alpha = 0).
    alpha = np.float32(b.case.attrs.get("alpha", 0.2))
    code = np.array([0 if alpha == 0 else (1 if alpha > 0 else -1)], np.int8)
    slope = b.node1("DequantizeLinear", [b.const(code, "slope"),
                                         b.const(np.array(abs(alpha) if alpha != 0 else 1.0, np.float32), "s"),
                                         b.const(np.array(0, np.int8), "z")])
    b.q_output(b.node1("PRelu", [b.dq_input(0), slope]))


@onnx_op("RELU")
def _relu(b: Builder):
    b.q_output(b.node1("Relu", [b.dq_input(0)]))


@onnx_op("RELU6")
def _relu6(b: Builder):
    lo = b.const(np.array(0.0, np.float32), "lo")
    hi = b.const(np.array(6.0, np.float32), "hi")
    b.q_output(b.node1("Clip", [b.dq_input(0), lo, hi]))
