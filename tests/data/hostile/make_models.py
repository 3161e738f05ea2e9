"""Writes the hostile models of tests/data/hostile/ (small: run once, the files are committed).

Each is a one-op model made valid by the suite's own builders, then damaged in one field."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).parent


def tflite_models() -> dict[str, bytes]:
    from ai_edge_litert import schema_py_generated as S

    from suite.cases.generate import make_case
    from targets import tflite_model
    case = make_case("CONV_2D", "basic", 0, seed=0)

    def damaged(fn) -> bytes:
        m = S.ModelT.InitFromPackedBuf(tflite_model.build(case).content, 0)
        fn(m)
        return tflite_model.serialize(m)

    sg = lambda m: m.subgraphs[0]  # noqa: E731
    const = lambda m: next(t for t in sg(m).tensors if t.buffer and m.buffers[t.buffer].data is not None and len(m.buffers[t.buffer].data))  # noqa: E731
    return {
        "buffer-index.tflite": damaged(lambda m: setattr(sg(m).tensors[0], "buffer", 9999)),
        "tensor-index.tflite": damaged(lambda m: setattr(sg(m).operators[0], "inputs",
                                                         [9999, *list(sg(m).operators[0].inputs)[1:]])),
        "opcode-index.tflite": damaged(lambda m: setattr(sg(m).operators[0], "opcodeIndex", 77)),
        "short-buffer.tflite": damaged(lambda m: setattr(m.buffers[const(m).buffer], "data",
                                                         m.buffers[const(m).buffer].data[:3])),
        "negative-dim.tflite": damaged(lambda m: setattr(sg(m).tensors[sg(m).inputs[0]], "shape", [1, -5, 4, 3])),
        "huge-input.tflite": damaged(lambda m: setattr(sg(m).tensors[sg(m).inputs[0]], "shape",
                                                       [1, 100000, 100000, 10])),
    }


def onnx_models() -> dict[str, bytes]:
    import onnx
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    # a -> b -> a: each node's input is the other's output
    cycle = helper.make_graph([helper.make_node("Add", ["x", "b"], ["a"], name="n0"),
                               helper.make_node("Relu", ["a"], ["b"], name="n1"),
                               helper.make_node("Identity", ["b"], ["y"], name="n2")], "cycle", [x], [y])
    model = helper.make_model(cycle, opset_imports=[helper.make_opsetid("", 13)])
    return {"empty.onnx": b"", "cycle.onnx": model.SerializeToString()}


if __name__ == "__main__":
    for name, data in {**tflite_models(), **onnx_models()}.items():
        (HERE / name).write_bytes(data)
        print(name, len(data), file=sys.stderr)
