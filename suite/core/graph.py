"""A quantized model as data: its layers in topological order, each a case or a QDQ float step.

The harvest (suite/models/) reads a .tflite or QDQ .onnx model into a :class:`Graph`; the graph
golden (reference/graph.py) runs it op by op with the per-op golden functions, so it never reads
a model file itself. Tensors are named as in the model and held in the cases' layouts (LiteRT's:
NHWC activations); ``Graph.layout`` gives, per tensor, the permutation from the model's layout
(ONNX: NCHW) to the graph's, so a runtime's tensor can be compared with the golden's.

A layer is one of:

* ``case``: an operator of a spec table with its golden (``Layer.case``: constants with their
  data, runtime inputs with the data of the harvest's inference); ``Layer.inputs[i]`` names the
  graph tensor of ``case.inputs[i]`` (None: a constant of the case). ``Layer.pads[i]``, if
  given, pads that tensor with its zero point first (an explicit ONNX padding that LiteRT's
  SAME cannot state becomes a padded input and VALID);
* ``float``: a runtime's documented QDQ semantics for an op no spec table holds: dequantize
  each input (ONNX DequantizeLinear), the float ops of ``Layer.steps`` in float32, quantize
  the result (ONNX QuantizeLinear) with ``Layer.out``'s parameters.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from suite.core.case import Case, Tensor

CASE, FLOAT = "case", "float"


@dataclass
class Layer:
    index: int                      # position in the graph's topological order
    node: str                       # the model's node (ONNX) or operator (LiteRT "op<k>") name
    op: str                         # the suite's op (case) or the model's op(s) (float)
    kind: str                       # CASE or FLOAT
    inputs: list[str | None]        # graph tensor of each input (None: a constant of the case)
    outputs: list[str]
    case: Case | None = None
    pads: list[list[tuple[int, int]] | None] | None = None   # per input: (before, after) per dimension
    steps: list[dict[str, Any]] = field(default_factory=list)  # float: [{"op": ..., **attrs}], in order
    float_inputs: list[Tensor] = field(default_factory=list)  # float: each input's quantization (no data)
    out: Tensor | None = None       # float: the output's quantization
    model_op: str = ""              # the model's own op type(s), e.g. "Conv" for a DEPTHWISE_CONV_2D


@dataclass
class Graph:
    name: str                       # the model file's name
    digest: str                     # sha256 of the model file
    format: str                     # "tflite" | "onnx"
    inputs: list[str]               # graph input tensors (in the graph's layout)
    outputs: list[str]
    specs: dict[str, Tensor]        # every graph tensor: dtype, shape (graph layout), quantization
    layers: list[Layer]
    layout: dict[str, tuple[int, ...]] = field(default_factory=dict)   # model layout -> graph layout
    model_inputs: dict[str, str] = field(default_factory=dict)   # graph input -> the model's feed name
    not_covered: dict[str, list[str]] = field(default_factory=dict)   # model op -> [node: why]
    path: str = ""
    form: str = ""                  # onnx: "qdq", or "qoperator" (QLinear* / integer ops in place of Q/DQ pairs)
    #: tensors no layer computes that layers read (the output of an op not covered, a state variable
    #: read): tensor -> why; fed seeded data in their quantization (and, where a target runs the whole
    #: model, the target's own values of them), so one op not covered costs one layer
    cuts: dict[str, str] = field(default_factory=dict)
    #: cut -> where the harvest's data of it came from (captured on a reference runtime, or seeded)
    cut_inputs: dict[str, str] = field(default_factory=dict)
    stateful: bool = False          # state variables: the whole model runs over several invocations
    operators: int = 0              # the model's operators (subgraph 0 / graph nodes); 0: not counted
    invocations: int = 1            # --model-inputs N: the whole model on N seeded inputs per target

    def layer_of(self, tensor: str) -> Layer | None:
        return next((ly for ly in self.layers if tensor in ly.outputs), None)

    def cases(self) -> list[Case]:
        return [ly.case for ly in self.layers if ly.kind == CASE]

    def coverage(self) -> dict[str, Any]:
        """Layers harvested as cases, golden-only float layers and not-covered ops, with counts."""
        by_op: dict[str, int] = {}
        for ly in self.layers:
            if ly.kind == CASE:
                by_op[ly.op] = by_op.get(ly.op, 0) + 1
        floats: dict[str, int] = {}
        for ly in self.layers:
            if ly.kind == FLOAT:
                floats[ly.op] = floats.get(ly.op, 0) + 1
        return {"cases": sum(by_op.values()), "cases_by_op": by_op, "float_layers": floats,
                "not_covered": {op: len(v) for op, v in self.not_covered.items()},
                "not_covered_nodes": self.not_covered}


def file_digest(raw: bytes) -> str:
    """The digest of a model file, of the bytes it was parsed from (not read a second time)."""
    return hashlib.sha256(raw).hexdigest()
