"""ONNX QDQ mappings of the elementwise family.

ADD/SUB/MUL/MAXIMUM/MINIMUM: DequantizeLinear on each input, the float op
(Add/Sub/Mul/Max/Min, NumPy broadcasting like LiteRT), the fused activation
(Relu/Clip), QuantizeLinear. Comparisons: DQ inputs -> Less/LessOrEqual/Greater/
GreaterOrEqual/Equal -> bool output; NOT_EQUAL has no ONNX operator and is
Not(Equal). QUANTIZE: (DQ ->) QuantizeLinear; DEQUANTIZE: DequantizeLinear.
ARG_MAX/ARG_MIN: DQ -> ArgMax/ArgMin (keepdims=0, first index on ties); ONNX
indices are int64, so an int32 output gets a Cast.
"""

from __future__ import annotations

from targets.onnx_model import Builder, GraphOutput, onnx_op

_BINARY = {"ADD": "Add", "SUB": "Sub", "MUL": "Mul", "MAXIMUM": "Max", "MINIMUM": "Min"}
_COMPARE = {"LESS": "Less", "LESS_EQUAL": "LessOrEqual", "GREATER": "Greater",
            "GREATER_EQUAL": "GreaterOrEqual", "EQUAL": "Equal"}


@onnx_op(*_BINARY)
def _binary(b: Builder):
    x = b.dq_input(0)
    y = b.dq_input(1)
    b.q_output(b.activation(b.node1(_BINARY[b.case.op], [x, y])))


@onnx_op(*_COMPARE, "NOT_EQUAL")
def _compare(b: Builder):
    x = b.dq_input(0)
    y = b.dq_input(1)
    if b.case.op == "NOT_EQUAL":
        r = b.node1("Not", [b.node1("Equal", [x, y])])
    else:
        r = b.node1(_COMPARE[b.case.op], [x, y])
    _raw_output(b, r)


@onnx_op("QUANTIZE")
def _quantize(b: Builder):
    b.q_output(b.dq_input(0))


@onnx_op("DEQUANTIZE")
def _dequantize(b: Builder):
    _raw_output(b, b.dq_input(0))


@onnx_op("ARG_MAX", "ARG_MIN")
def _arg(b: Builder):
    c = b.case
    x = b.dq_input(0)
    axis = int(c.inputs[1].data.ravel()[0])
    op_type = "ArgMax" if c.op == "ARG_MAX" else "ArgMin"
    r = b.node1(op_type, [x], axis=axis, keepdims=0, select_last_index=0)
    if c.outputs[0].dtype != "int64":
        r = b.node1("Cast", [r], to=b._elem(c.outputs[0].dtype))
    _raw_output(b, r)


def _raw_output(b: Builder, value: str, j: int = 0) -> None:
    """Make ``value`` graph output ``j`` directly (a non-quantized output needs no node)."""
    o = b.case.outputs[j]
    name = f"out{j}"
    # rename the producing node's output instead of adding an Identity
    for n in b.nodes:
        for k, out in enumerate(n.output):
            if out == value:
                n.output[k] = name
    b.graph_outputs.append(b.helper.make_tensor_value_info(name, b._elem(o.dtype), list(o.shape)))
    b.outputs.append(GraphOutput(name, None))

