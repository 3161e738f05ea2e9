"""Harvest a quantized .onnx model, QDQ or QOperator, into a :class:`suite.core.graph.Graph`
(LiteRT layouts: NHWC).

A QDQ model holds float operators between DequantizeLinear and QuantizeLinear nodes. The graph's
tensors are the quantized ones: the outputs of QuantizeLinear nodes (named as in the model) and
the float graph inputs. Each QuantizeLinear whose input a float operator computes closes a
*region*: the float operators back to the DequantizeLinear nodes (or float constants) feeding
them. A region of one operator the suite's tables state becomes a case:

* Conv: CONV_2D (group 1) or DEPTHWISE_CONV_2D (group = channels), weights OIHW -> OHWI / 1HWO;
  pads that LiteRT's SAME cannot state pad the case's input with its zero point (VALID);
* Gemm / MatMul with constant weights: FULLY_CONNECTED ([out, in]); MatMul of two activations:
  BATCH_MATMUL; Add, Mul: ADD, MUL; GlobalAveragePool: MEAN over H, W; MaxPool: MAX_POOL_2D;
  Reshape, Flatten: RESHAPE (when NCHW and NHWC order the elements alike); Relu, Clip(0, 6): RELU, RELU6;
  Softmax: SOFTMAX (output (1/256, -128) only); the QuantizeLinear of a float graph input:
  QuantizeLinear (``onnx-qdq``).

Any other region made of :data:`reference.graph.FLOAT_OPS` becomes a ``float`` layer: ONNX's
own QDQ semantics (dequantize, the float op in float32, quantize), which the graph golden runs but
no spec table states, so it is no case. The rest is not covered, each node with its reason.

QOperator nodes (QLinearConv, QLinearMatMul, com.microsoft QGemm and QLinear*: :data:`_QOPS`) are
read as the float op they quantize with their inputs' and output's (scale, zero point) and go
through the same mappers (a case), else a float layer of their contrib definition (dequantize, the
float op, quantize). Ops that move codes (Reshape, MaxPool, Split, ... on a quantized tensor) keep
its quantization. Dynamic quantization (DynamicQuantizeLinear, ConvInteger / MatMulInteger sums,
DynamicQuantizeLSTM) and weight-only quantization are named not covered with that reason.
"""

from __future__ import annotations

import math
import re

import numpy as np

from reference.graph import FLOAT_OPS
from suite.core.case import ELEMENTS_MAX, Case, Tensor
from suite.core.errors import QconformError
from suite.core.geometry import out_size, pad_before
from suite.core.graph import CASE, FLOAT, Graph, Layer, file_digest
from suite.core.spec import check_case, table
from suite.core.userfile import read_bytes
from targets.onnx_model import load_onnx

NCHW_TO_NHWC = (0, 2, 3, 1)
_DT = {np.dtype(np.int8): "int8", np.dtype(np.uint8): "uint8", np.dtype(np.int16): "int16",
       np.dtype(np.uint16): "uint16", np.dtype(np.int32): "int32"}


class NotCovered(Exception):
    pass


#: what mapping a node can raise: NotCovered, or a node unlike its op's definition (a missing
#: attribute or input, a scalar where a list belongs): named not covered, never a traceback
_MALFORMED = (NotCovered, KeyError, IndexError, ValueError, TypeError)


def _why(e: Exception) -> str:
    return str(e) if isinstance(e, NotCovered) else f"the node is not as its op is defined ({type(e).__name__}: {e})"


def read_onnx(path: str):
    """(ModelProto, raw bytes) of the ``--model`` file, read once through the bounded reader. A
    tensor with external data (an initializer, a Constant's value, in any subgraph) is refused:
    onnx would open the file the model names, not one the command line gave."""
    onnx = load_onnx()
    raw = read_bytes(path, "model", "--model", "model")
    try:
        m = onnx.load_model_from_string(raw)
    except Exception as e:  # noqa: BLE001 (onnx raises many types: one error naming the file)
        raise QconformError(f"not a readable ONNX model: {type(e).__name__}: {e}", source=path) from None
    hit = _external(m.graph, "graph", onnx.TensorProto.EXTERNAL)
    if hit:
        raise QconformError(f"tensor {hit[1][:100]!r} keeps its data in another file (external data)",
                            source=path, field=hit[0],
                            rule="a model's tensors are inside the model file (a file the model names is not read)")
    return m, raw


def _external(g, where: str, external: int) -> tuple[str, str] | None:
    """(field, tensor name) of the first tensor of graph ``g`` or its subgraphs whose data is
    in another file; None if there is none."""
    for k, t in enumerate(g.initializer):
        if t.data_location == external:
            return f"{where}.initializer[{k}].data_location", t.name
    for k, s in enumerate(g.sparse_initializer):
        if external in (s.values.data_location, s.indices.data_location):
            return f"{where}.sparse_initializer[{k}]", s.values.name
    for k, n in enumerate(g.node):
        for j, a in enumerate(n.attribute):
            here = f"{where}.node[{k}].attribute[{j}]"
            tensors = [a.t, *a.tensors, a.sparse_tensor.values, a.sparse_tensor.indices,
                       *(x for s in a.sparse_tensors for x in (s.values, s.indices))]
            if any(t.data_location == external for t in tensors):
                return here, n.name or (n.output[0] if n.output else "")
            subs = ([(f"{here}.g", a.g)] if a.HasField("g") else []) + \
                [(f"{here}.graphs[{i}]", sg) for i, sg in enumerate(a.graphs)]
            for w, sg in subs:
                hit = _external(sg, w, external)
                if hit:
                    return hit
    return None


class _Model:
    """The model's constants, producers and shapes, and each tensor's quantization."""

    def __init__(self, path: str, input_shapes: dict[str, tuple[int, ...]] | None = None):
        onnx = load_onnx()
        m, raw = read_onnx(path)
        self.digest = file_digest(raw)
        self.path = path
        _set_input_shapes(m.graph, input_shapes or {}, path)
        _check_graph(m.graph, path)
        try:
            shadow = _shape_model(onnx, m)
            inferred = onnx.shape_inference.infer_shapes(shadow) if shadow is not None else None
        except Exception:  # noqa: BLE001 (a malformed contrib node: its outputs' shapes stay unknown)
            inferred = None
        try:
            if inferred is None:
                m = inferred = onnx.shape_inference.infer_shapes(m)
        except Exception as e:  # noqa: BLE001 (onnx raises many types: one error naming the file)
            raise QconformError(f"not a readable ONNX model: {type(e).__name__}: {e}", source=path) from None
        self.m, self.g = m, m.graph
        nh = onnx.numpy_helper
        try:
            self.inits = {i.name: nh.to_array(i) for i in self.g.initializer}
        except Exception as e:  # noqa: BLE001 (data shorter than its dims, an unknown type: one error)
            raise QconformError(f"an initializer cannot be read: {type(e).__name__}: {str(e)[:200]}", source=path,
                                field="graph.initializer", rule="an initializer's data matches its dims") from None
        for n in self.g.node:
            if n.op_type == "Constant":
                self.inits[n.output[0]] = nh.to_array(onnx.helper.get_attribute_value(n.attribute[0]))
        self.nodes = [n for n in self.g.node if n.op_type != "Constant"]
        _check_scales(self.g, self.inits, path)
        self.producer = {o: n for n in self.nodes for o in n.output}
        self.shapes = {}
        for vi in list(self.g.input) + list(inferred.graph.value_info) + list(self.g.output):
            dims = vi.type.tensor_type.shape.dim
            self.shapes[vi.name] = tuple(d.dim_value if d.HasField("dim_value") else -1 for d in dims)
        self.attr = onnx.helper.get_attribute_value

    def attrs(self, node) -> dict:
        return {a.name: self.attr(a) for a in node.attribute}

    def qparams(self, node) -> tuple[np.ndarray, np.ndarray, int]:
        """(scale, zero point, axis) of a QuantizeLinear / DequantizeLinear node."""
        s = np.asarray(self.inits[node.input[1]], np.float32)
        z = np.asarray(self.inits[node.input[2]]) if len(node.input) > 2 and node.input[2] else np.zeros((), np.uint8)
        return s, z, int(self.attrs(node).get("axis", 1))

    def resolve(self, name: str):
        """What a float operator's input is: ("act", graph tensor, Tensor), ("qconst", codes, Tensor),
        ("const", float array), ("float", name of a float operator's output) or ("input", name)."""
        if name in self.inits:
            return ("const", np.asarray(self.inits[name]))
        p = self.producer.get(name)
        if p is None:
            return ("input", name)
        if p.op_type != "DequantizeLinear":
            return ("float", name)
        src = p.input[0]
        s, z, axis = self.qparams(p)
        dt = _DT.get(z.dtype)
        if dt is None:
            raise NotCovered(f"DequantizeLinear of {z.dtype} codes")
        if src in self.inits:
            return _qconst(np.asarray(self.inits[src]), dt, s, z, axis)
        if s.size > 1:
            raise NotCovered("a per-axis quantized activation")
        return ("act", src, Tensor(dt, self.graph_shape(src), None, [float(s.ravel()[0])], [int(z.ravel()[0])]))

    def graph_shape(self, name: str) -> tuple[int, ...]:
        shape = self.shapes.get(name)
        if shape is None or any(d < 0 for d in shape):
            raise NotCovered(f"tensor {name} has no static shape (fix the model's input shape first)")
        if math.prod(shape) > ELEMENTS_MAX:   # (an inferred shape, e.g. of an Expand: bounded before any case holds it)
            raise QconformError(f"tensor {name!r} has shape {list(shape)}: more than {ELEMENTS_MAX} elements",
                                source=self.path, field=f"value_info {name}", rule="at most 2^26 elements a tensor")
        return tuple(shape[p] for p in NCHW_TO_NHWC) if len(shape) == 4 else tuple(shape)


def _shape_model(onnx, m):
    """For onnx's shape inference, which knows no com.microsoft op: the model with each QOperator
    contrib node replaced by its float op between Casts (the contrib ops' outputs have their float
    op's shape); large initializers become typed graph inputs (their shapes, not their data).
    None if the model has no such node."""
    h = onnx.helper
    todo = [n for n in m.graph.node if n.op_type in _QOPS and n.domain == "com.microsoft"]
    if not todo:
        return None
    inits = {i.name: i for i in m.graph.initializer}
    g = h.make_graph([], m.graph.name, list(m.graph.input), list(m.graph.output),
                     [i for i in m.graph.initializer if math.prod(i.dims) <= 64])
    known = {i.name for i in g.input} | {i.name for i in g.initializer}
    g.input.extend(h.make_tensor_value_info(i.name, i.data_type, list(i.dims)) for i in m.graph.initializer
                   if i.name not in known)
    for k, n in enumerate(m.graph.node):
        if n.op_type not in _QOPS or n.domain != "com.microsoft":
            g.node.append(n)
            continue
        equiv, triples, (_, yz), _ = _QOPS[n.op_type]
        if triples is None:
            triples = [(i, i + 1, i + 2) for i in range(2, len(n.input), 3)]
        xs = []
        for j, (xi, _, _) in enumerate(triples):
            if xi < len(n.input) and n.input[xi]:
                xs.append(f"__qc{k}_{j}")
                g.node.append(h.make_node("Cast", [n.input[xi]], [xs[-1]], to=1))
        attrs = {a.name: h.get_attribute_value(a) for a in n.attribute if a.name not in ("channels_last", "opset")}
        zt = inits.get(n.input[yz]) if len(n.input) > yz else None
        g.node.append(h.make_node(equiv, xs, [f"__qc{k}_y"], **attrs))
        g.node.append(h.make_node("Cast", [f"__qc{k}_y"], [n.output[0]], to=zt.data_type if zt is not None else 2))
    shadow = h.make_model(g, opset_imports=list(m.opset_import), ir_version=m.ir_version)
    return shadow


def _set_input_shapes(g, shapes: dict[str, tuple[int, ...]], path: str) -> None:
    """``--model-input-shape NAME=D0,D1,..``: each named graph input gets those dimensions (its
    rank and fixed dimensions kept); then every graph input must have static dimensions: a
    symbolic one (``dim_param``, e.g. an image width) is one error naming the input and the option."""
    inits = {i.name for i in g.initializer}
    ins = [(k, vi) for k, vi in enumerate(g.input) if vi.name not in inits]
    unknown = sorted(set(shapes) - {vi.name for _, vi in ins})
    if unknown:
        raise QconformError(f"names no input of the model: {', '.join(unknown)} (inputs: "
                            f"{', '.join(vi.name for _, vi in ins)})", source=path, field="--model-input-shape",
                            rule="NAME is one of the model's inputs")
    for k, vi in ins:
        dims = vi.type.tensor_type.shape.dim
        want = shapes.get(vi.name)
        if want is not None:
            if len(want) != len(dims):
                raise QconformError(f"input {vi.name!r} has rank {len(dims)}, --model-input-shape gives "
                                    f"{len(want)} dimensions", source=path, field="--model-input-shape",
                                    rule="one dimension per axis of the input")
            for a, (d, v) in enumerate(zip(dims, want)):
                if d.HasField("dim_value") and d.dim_value != v:
                    raise QconformError(f"input {vi.name!r} axis {a} is fixed at {d.dim_value} in the model, "
                                        f"--model-input-shape gives {v}", source=path, field="--model-input-shape",
                                        rule="a fixed dimension keeps its size")
                d.ClearField("dim_param")
                d.dim_value = v
            if math.prod(want) > ELEMENTS_MAX:
                raise QconformError(f"input {vi.name!r} shape {list(want)} has more than {ELEMENTS_MAX} elements",
                                    source=path, field="--model-input-shape", rule="at most 2^26 elements")
            continue
        if not vi.type.tensor_type.HasField("shape"):
            raise QconformError(f"input {vi.name!r} has no shape: give it with --model-input-shape "
                                f"{vi.name}=D0,D1,...", source=path, field=f"graph.input[{k}]",
                                rule="the harvest needs static input shapes")
        sym = [(a, d.dim_param or "?") for a, d in enumerate(dims) if not d.HasField("dim_value")]
        if sym:
            shown = ",".join(str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in dims)
            raise QconformError(f"input {vi.name!r} has the symbolic dimension(s) "
                                f"{', '.join(f'{p!r} (axis {a})' for a, p in sym)}: give its shape with "
                                f"--model-input-shape {vi.name}={shown} (each name a size)", source=path,
                                field=f"graph.input[{k}]", rule="the harvest needs static input shapes")


def parse_input_shapes(values) -> dict[str, tuple[int, ...]]:
    """``NAME=D0,D1,...`` values (repeatable; NAME may hold '=') -> {NAME: dims}."""
    out: dict[str, tuple[int, ...]] = {}
    for v in values or ():
        name, eq, dims = str(v).rpartition("=")
        try:
            shape = tuple(int(d) for d in dims.split(","))
        except ValueError:
            shape = ()
        if not eq or not name or not shape or any(d < 1 for d in shape):
            raise QconformError(f"{v!r} is not NAME=D0,D1,... (positive integer dimensions)",
                                field="--model-input-shape", rule="NAME=D0,D1,... e.g. input=1,3,224,224")
        if name in out:
            raise QconformError(f"input {name!r} is given twice", field="--model-input-shape",
                                rule="one shape per input")
        out[name] = shape
    return out


def _check_scales(g, inits: dict, path: str) -> None:
    """Every QuantizeLinear / DequantizeLinear scale a constant of finite values > 0 (as float32): a
    scale of 0 would make the golden divide by zero and judge a target against NaN."""
    for k, n in enumerate(g.node):
        if n.op_type not in ("QuantizeLinear", "DequantizeLinear") or len(n.input) < 2 or n.input[1] not in inits:
            continue
        try:
            s = np.asarray(inits[n.input[1]], np.float64)
            s32 = s.astype(np.float32)
        except (TypeError, ValueError):
            s = s32 = np.array([np.nan])
        if s.size == 0 or not np.all(np.isfinite(s32)) or not np.all(s32 > 0):
            bad = s.ravel()[~(np.isfinite(s32.ravel()) & (s32.ravel() > 0))] if s.size else s.ravel()
            raise QconformError(f"scale '{n.input[1][:80]}' of {n.op_type} node '{(n.name or str(k))[:80]}' holds "
                                f"{bad[:4].tolist() if bad.size else 'no value'}", source=path,
                                field=f"graph.node[{k}].input[1]", rule="a quantization scale is a finite float32 > 0")


def _check_graph(g, path: str) -> None:
    """What the harvest relies on, checked before use (one QconformError naming the field): a graph
    with nodes (an empty or 0-byte file parses as an empty model), nodes in topological order as
    ONNX requires (so no cycle), graph inputs with dimensions >= 0 and at most ELEMENTS_MAX elements."""
    def bad(fld, msg, rule):
        raise QconformError(msg, source=path, field=fld, rule=rule)

    if not len(g.node):
        bad("graph.node", "is empty: not an ONNX model, or one without operators", "an ONNX model with a graph")
    known = {""} | {i.name for i in g.initializer} | {i.name for i in g.input}
    for k, n in enumerate(g.node):
        for j, name in enumerate(n.input):
            if name not in known:
                bad(f"graph.node[{k}].input[{j}]", f"'{name[:80]}' of node '{n.name or n.op_type}' is made by no node "
                    f"before it (a cycle, or nodes out of order)", "nodes in topological order (ONNX IR)")
        known.update(n.output)
    for i, vi in enumerate(g.input):
        dims = [d.dim_value for d in vi.type.tensor_type.shape.dim if d.HasField("dim_value")]
        if any(d < 0 for d in dims) or math.prod(dims) > ELEMENTS_MAX:
            bad(f"graph.input[{i}]", f"'{vi.name[:80]}' has shape {dims[:10]}",
                f"dimensions >= 0, at most {ELEMENTS_MAX} (2^26) elements")


def harvest(path: str, input_shapes: dict[str, tuple[int, ...]] | None = None) -> Graph:
    """The graph of a quantized .onnx model, QDQ or QOperator (case inputs hold zeros until
    suite.models.harvest.fill). ``input_shapes`` sets symbolic input dimensions."""
    mdl = _Model(path, input_shapes)
    stem = re.sub(r"[^A-Za-z0-9._~+-]", "_", path.rsplit("/", 1)[-1].rsplit(".", 1)[0]).lstrip(".")[:60] or "model"
    h = _Harvest(mdl, stem)
    inputs = [i.name for i in mdl.g.input if i.name not in mdl.inits]
    for vi in mdl.g.input:
        if vi.name in mdl.inits:
            continue
        dt = _ELEM.get(vi.type.tensor_type.elem_type, "float32")
        h.specs[vi.name] = Tensor(dt, mdl.graph_shape(vi.name))
        if len(h.specs[vi.name].shape) == 4:
            h.layout[vi.name] = NCHW_TO_NHWC
    for n in mdl.nodes:
        h.node(n)
    h.weight_only()
    h.float_rest()
    outputs = []
    for o in mdl.g.output:
        p = mdl.producer.get(o.name)
        src = p.input[0] if p is not None and p.op_type == "DequantizeLinear" else o.name
        if src in h.specs and h.specs[src].scale is not None:
            outputs.append(src)
    return Graph(name=path.rsplit("/", 1)[-1], digest=mdl.digest, format="onnx", inputs=inputs,
                 outputs=outputs, specs=h.specs, layers=h.layers, layout=h.layout, not_covered=h.not_covered,
                 path=str(path), model_inputs={n: n for n in inputs},
                 form="qoperator" if any(n.op_type in _QOPS or n.op_type in _INTEGER or n.op_type in _DYNAMIC
                                         for n in mdl.nodes) else "qdq")


#: QOperator nodes: the float op each quantizes (its mapper and float semantics), the (x, scale,
#: zero point) input triples, the (y_scale, y_zero_point) positions and the int32 bias position.
#: ONNX's QLinearConv / QLinearMatMul and ONNX Runtime's com.microsoft ops; the contrib ops are each
#: specified as dequantize, the float op, quantize (QLinearAdd: C = quantize(A' + B')).
_QOPS = {
    "QLinearConv": ("Conv", [(0, 1, 2), (3, 4, 5)], (6, 7), 8),
    "QLinearMatMul": ("MatMul", [(0, 1, 2), (3, 4, 5)], (6, 7), None),
    "QGemm": ("Gemm", [(0, 1, 2), (3, 4, 5)], (7, 8), 6),
    "QLinearAdd": ("Add", [(0, 1, 2), (3, 4, 5)], (6, 7), None),
    "QLinearMul": ("Mul", [(0, 1, 2), (3, 4, 5)], (6, 7), None),
    "QLinearAveragePool": ("AveragePool", [(0, 1, 2)], (3, 4), None),
    "QLinearGlobalAveragePool": ("GlobalAveragePool", [(0, 1, 2)], (3, 4), None),
    "QLinearLeakyRelu": ("LeakyRelu", [(0, 1, 2)], (3, 4), None),
    "QLinearSigmoid": ("Sigmoid", [(0, 1, 2)], (3, 4), None),
    "QLinearSoftmax": ("Softmax", [(0, 1, 2)], (3, 4), None),
    "QLinearConcat": ("Concat", None, (0, 1), None),   # Y_scale, Y_zero_point, then (X, scale, zp) per input
}
#: ops that move quantized codes without requantizing (ONNX's int8/uint8 kernels; the QOperator
#: form keeps them on the codes): the output has the input's quantization
_DIRECT = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "MaxPool", "Split")
_PASS_THROUGH = _DIRECT + ("Gather", "Pad", "Resize", "Slice", "Expand", "Tile", "DepthToSpace", "SpaceToDepth",
                           "Identity")
_DYNAMIC = {
    "DynamicQuantizeLinear": "dynamic quantization: the scale and zero point are computed at run time from the "
                             "tensor's min and max, so no fixed quantization to state as a case",
    "DynamicQuantizeLSTM": "dynamic quantization: an LSTM with int8 weights whose input is quantized at run time "
                           "inside the op; no spec table has an LSTM",
    "DynamicQuantizeMatMul": "dynamic quantization: a MatMul whose input is quantized at run time inside the op "
                             "and whose output is float",
    "MatMulIntegerToFloat": "dynamic quantization: int8 sums scaled to a float output, no requantized code",
    "MatMulNBits": "weight-only quantization: N-bit weights dequantized inside the op, float activations "
                   "and output: no quantized layer",
    "GatherBlockQuantized": "weight-only quantization: block-quantized weights dequantized inside the op, float "
                            "output",
}
_INTEGER = ("ConvInteger", "MatMulInteger")
_ELEM = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32"}


class _Equiv:
    """A QOperator node seen as the float op it quantizes (its attributes and tensors as they are)."""

    def __init__(self, node, op_type: str):
        self.node, self.op_type = node, op_type
        self.input, self.output, self.attribute, self.name = node.input, node.output, node.attribute, node.name


class _Harvest:
    """The graph being built, node by node in topological order."""

    def __init__(self, mdl: _Model, stem: str):
        self.mdl, self.stem = mdl, stem
        self.specs: dict[str, Tensor] = {}
        self.layout: dict[str, tuple[int, ...]] = {}
        self.layers: list[Layer] = []
        self.not_covered: dict[str, list[str]] = {}
        self.seen: set[int] = set()   # nodes in a layer or named not covered

    def name(self, n) -> str:
        return node_name(self.mdl.nodes, n)

    def miss(self, op: str, node: str, why: str) -> None:
        self.not_covered.setdefault(op, []).append(f"{node}: {why}")

    def coded(self, t: str) -> bool:
        """Whether tensor ``t`` holds quantized codes the graph knows (a graph tensor, not a float one)."""
        sp = self.specs.get(t)
        return sp is not None and sp.scale is not None and sp.dtype != "float32"

    def add_spec(self, out: str, spec: Tensor) -> None:
        self.specs[out] = spec
        if len(spec.shape) == 4:
            self.layout[out] = NCHW_TO_NHWC

    def node(self, n) -> None:
        op = n.op_type
        if op == "QuantizeLinear":
            return self.quantize_linear(n)
        if op == "DequantizeLinear":
            return
        if op in _QOPS:
            return self.qop(n)
        if op in _DYNAMIC:
            self.seen.add(id(n))
            return self.miss(op, self.name(n), _DYNAMIC[op])
        if op in _INTEGER:
            self.seen.add(id(n))
            return self.miss(op, self.name(n), _integer_reason(self.mdl, n))
        if n.input and self.coded(n.input[0]):
            return self.on_codes(n)
        if n.domain == "com.microsoft" and (op.startswith("Q") or "Quant" in op):
            self.seen.add(id(n))
            return self.miss(op, self.name(n), f"no spec op is mapped from com.microsoft {op}")

    # ------------------------------------------------------------------ QDQ: QuantizeLinear closes a region

    def quantize_linear(self, q) -> None:
        mdl = self.mdl
        out = q.output[0]
        try:
            s, z, _ = mdl.qparams(q)
        except KeyError as e:
            self.seen.add(id(q))
            return self.miss("QuantizeLinear", self.name(q), f"its scale or zero point {e} is not a constant")
        region = []
        try:
            region = _region(mdl, q.input[0])
            self.seen.update(id(n) for n in region)
            if z.dtype not in _DT:
                raise NotCovered(f"QuantizeLinear to {z.dtype} codes")
            ospec = Tensor(_DT[z.dtype], mdl.graph_shape(out), None, [float(s.ravel()[0])], [int(z.ravel()[0])])
            if s.size > 1:
                raise NotCovered("a per-axis quantized activation")
        except _MALFORMED as e:
            model_op = "+".join(n.op_type for n in region) or "QuantizeLinear"
            node = "+".join(self.name(n) for n in region) or self.name(q)
            return self.miss(model_op, node, _why(e))
        self.add_spec(out, ospec)
        k = len(self.layers)
        model_op = "+".join(n.op_type for n in region) or "QuantizeLinear"
        node = "+".join(self.name(n) for n in region) or self.name(q)
        try:
            self.layers.append(_case_layer(mdl, region, q, ospec, k, self.stem, node, model_op))
            return
        except _MALFORMED as e:
            why = _why(e)
        try:
            self.layers.append(_float_layer(mdl, region, q, ospec, k, node, model_op))
        except _MALFORMED as e:
            self.miss(model_op, node, f"{why}; as a float layer: {_why(e)}")

    # ------------------------------------------------------------------ QOperator nodes

    def qop(self, n) -> None:
        mdl = self.mdl
        self.seen.add(id(n))
        equiv, triples, (ys, yz), bias = _QOPS[n.op_type]
        node, k = self.name(n), len(self.layers)
        out = n.output[0]
        try:
            if len(n.input) <= yz or not n.input[ys]:
                raise NotCovered(f"{n.op_type} with a float output (no y_scale): nothing requantizes")
            y_s, y_z = _q_param(mdl, n.input[ys], "y_scale"), _q_param(mdl, n.input[yz], "y_zero_point", "uint8")
            if y_z.dtype not in _DT or y_z.dtype == np.int32:
                raise NotCovered(f"a {y_z.dtype} output")
            if y_s.size > 1:
                raise NotCovered("a per-axis quantized output")
            ospec = Tensor(_DT[y_z.dtype], mdl.graph_shape(out), None, [float(y_s.ravel()[0])],
                           [int(y_z.ravel()[0])])
        except _MALFORMED as e:
            return self.miss(n.op_type, node, _why(e))
        self.add_spec(out, ospec)
        if mdl.attrs(n).get("channels_last", 0):
            return self.miss(n.op_type, node, "channels_last: an NHWC input in the model, the graph golden reads "
                                              "4-D ONNX tensors as NCHW")
        try:
            if triples is None:   # QLinearConcat
                if (len(n.input) - 2) % 3 or len(n.input) < 5:
                    raise NotCovered("its inputs after Y_scale, Y_zero_point are not (X, scale, zero point) triples")
                triples = [(i, i + 1, i + 2) for i in range(2, len(n.input), 3)]
            ins = [self.q_input(n, *t, axis=_weight_axis(mdl, n, j)) for j, t in enumerate(triples)]
            if bias is not None and len(n.input) > bias and n.input[bias]:
                ins.append(_bias(mdl, n.input[bias], ins))
        except _MALFORMED as e:
            return self.miss(n.op_type, node, _why(e))
        self.layer_of(_Equiv(n, equiv), ins, ospec, out, k, node, n.op_type)

    def q_input(self, n, xi: int, si: int, zi: int, axis: int):
        """("act", name, Tensor) or ("qconst", codes, Tensor) of a QOperator node's (x, scale, zp)."""
        mdl = self.mdl
        x = n.input[xi]
        s = _q_param(mdl, n.input[si], "scale")
        have = self.specs.get(x)
        zdt = "uint8" if x not in mdl.inits else None
        if x in mdl.inits:
            codes = np.asarray(mdl.inits[x])
            zdt = _DT.get(codes.dtype)
        elif have is not None:
            zdt = have.dtype
        z = _q_param(mdl, n.input[zi], "zero_point", zdt or "uint8") if zi < len(n.input) else \
            np.zeros(s.shape, np.dtype(zdt or "uint8"))
        dt = _DT.get(z.dtype)
        if dt is None or dt == "int32":
            raise NotCovered(f"{z.dtype} codes")
        if z.size != s.size and z.size != 1:
            raise NotCovered("scale and zero point of different sizes")
        zs = np.broadcast_to(z, s.shape)
        if x in mdl.inits:
            return _qconst(np.asarray(mdl.inits[x]), dt, s, zs, axis)
        if s.size > 1:
            raise NotCovered("a per-axis quantized activation")
        if have is None:
            raise NotCovered(f"its input {x} is no quantized tensor of the graph")
        if have.dtype != dt:
            raise NotCovered(f"its input {x} holds {have.dtype} codes, its zero point is {dt}")
        if have.scale is None:   # an integer graph input: the first QOperator reading it gives its quantization
            self.specs[x] = have = Tensor(dt, have.shape, None, [float(s.ravel()[0])], [int(z.ravel()[0])])
        if (have.scale[0], have.zero_point[0]) != (float(s.ravel()[0]), int(z.ravel()[0])):
            raise NotCovered(f"its input {x} is read with another scale or zero point than it was written with")
        return ("act", x, Tensor(dt, have.shape, None, list(have.scale), list(have.zero_point)))

    def layer_of(self, n, ins, ospec: Tensor, out: str, k: int, node: str, model_op: str) -> None:
        """A case of the spec op the (equivalent float) node maps to, else a float layer of its ONNX
        semantics (dequantize, the float op in float32, quantize), else not covered with both reasons."""
        mdl = self.mdl
        try:
            fn = _MAPPERS.get(n.op_type)
            if fn is None:
                raise NotCovered(f"no spec table has an int8 {n.op_type}")
            op, inputs, names, attrs, pads = fn(mdl, n, ins, ospec, out)
            self.layers.append(_finish(Case(op, inputs, [ospec], attrs), names, pads, out, k, self.stem, node,
                                       model_op))
            return
        except _MALFORMED as e:
            why = _why(e)
        try:
            self.layers.append(_float_node(mdl, n, ins, ospec, out, k, node, model_op))
        except _MALFORMED as e:
            self.miss(model_op, node, f"{why}; as a float layer: {_why(e)}")

    def on_codes(self, n) -> None:
        """An op on quantized codes (no DequantizeLinear before it: the QOperator form's Reshape,
        MaxPool, Split, ...): each output keeps the input's quantization."""
        mdl = self.mdl
        self.seen.add(id(n))
        node = self.name(n)
        src = self.specs[n.input[0]]
        if n.op_type not in _PASS_THROUGH:
            return self.miss(n.op_type, node, f"{n.op_type} on quantized codes: no spec op is mapped from it")
        outs = []
        for o in n.output:
            try:
                spec = Tensor(src.dtype, mdl.graph_shape(o), None, src.scale, src.zero_point)
            except NotCovered as e:
                return self.miss(n.op_type, node, str(e))
            self.add_spec(o, spec)
            outs.append((o, spec))
        if n.op_type not in _DIRECT or src.scale is None:
            return self.miss(n.op_type, node, f"{n.op_type} on quantized codes: no spec op is mapped from it")
        ins = [("act", n.input[0], Tensor(src.dtype, src.shape, None, src.scale, src.zero_point))] + \
              [mdl.resolve(i) if i else None for i in n.input[1:]]
        for o, spec in outs:
            self.layer_of(n, ins, spec, o, len(self.layers), node + (f":{o}" if len(outs) > 1 else ""), n.op_type)

    # ------------------------------------------------------------------ weight-only quantization

    def weight_only(self) -> None:
        """A DequantizeLinear of a constant whose float op is in no layer: the weights are stored
        quantized, the op computes in float (weight-only quantization), named, not dropped."""
        mdl = self.mdl
        consumers: dict[str, list] = {}
        for n in mdl.nodes:
            for i in n.input:
                consumers.setdefault(i, []).append(n)
        for d in mdl.nodes:
            if d.op_type != "DequantizeLinear" or d.input[0] not in mdl.inits:
                continue
            for c in consumers.get(d.output[0], []):
                if id(c) in self.seen or c.op_type in ("QuantizeLinear", "DequantizeLinear"):
                    continue
                self.seen.add(id(c))
                self.miss(c.op_type, self.name(c), f"weight-only quantization: its input {d.input[0]} is stored "
                          f"quantized and dequantized to float (DequantizeLinear of a constant), its activations "
                          f"and output are float: no quantized layer computes it")



    def float_rest(self) -> None:
        """Every other node that computes (not a Q/DQ, nor graph plumbing): a float op outside any
        quantized region, named not covered, so no node of the model drops out of its coverage."""
        for n in self.mdl.nodes:
            if id(n) not in self.seen and n.op_type not in _NOT_COMPUTING:
                self.seen.add(id(n))
                self.miss(n.op_type, self.name(n), "a float op outside any quantized region (its inputs are not "
                          "quantized codes): no quantized layer computes it")


#: nodes that are no computation of the model's: quantization boundaries and graph plumbing
_NOT_COMPUTING = ("QuantizeLinear", "DequantizeLinear", "Constant", "Shape", "Identity")


def _qconst(codes: np.ndarray, dt: str, s: np.ndarray, z: np.ndarray, axis: int) -> tuple:
    """("qconst", codes, Tensor) of quantized constant codes (per-axis along ``axis`` where the
    scale has more than one value)."""
    qdim = axis % codes.ndim if s.size > 1 else 0
    return ("qconst", codes, Tensor(dt, codes.shape, codes, [float(v) for v in s.ravel()],
                                    [int(v) for v in z.ravel()], qdim))

def _q_param(mdl: _Model, name: str, what: str, zdt: str = "uint8") -> np.ndarray:
    """A QOperator node's scale or zero point: a constant (else the quantization is not fixed)."""
    if not name:
        return np.zeros((), np.dtype(zdt))
    if name not in mdl.inits:
        raise NotCovered(f"its {what} {name} is not a constant (a graph input or computed): no fixed quantization")
    v = np.asarray(mdl.inits[name])
    return v.astype(np.float32) if what.endswith("scale") else v


def _weight_axis(mdl: _Model, n, j: int) -> int:
    """The axis of a per-channel quantized constant operand j (the output channels)."""
    if n.op_type == "QLinearConv":
        return 0
    if n.op_type == "QGemm" and j == 1:
        return 0 if mdl.attrs(n).get("transB", 0) else 1
    return -1


def _bias(mdl: _Model, name: str, ins) -> tuple:
    """QLinearConv / QGemm's int32 bias: scale x_scale * w_scale (per output channel), zero point 0."""
    if name not in mdl.inits:
        raise NotCovered("the bias is not a constant")
    b = np.asarray(mdl.inits[name])
    if b.dtype != np.int32 or ins[0][0] != "act" or ins[1][0] != "qconst":
        raise NotCovered("the bias is not int32, or the input or weights are not quantized as a bias needs")
    sx = np.float32(ins[0][2].scale[0])
    sw = np.asarray(ins[1][2].scale, np.float32)
    sb = (sx * sw).astype(np.float32)
    if sb.size == 1 and b.size > 1:
        sb = np.full(b.size, sb.ravel()[0], np.float32)
    return ("qconst", b, Tensor("int32", b.shape, b, [float(v) for v in sb.ravel()], [0] * sb.size, 0))


def _integer_reason(mdl: _Model, n) -> str:
    fed = [mdl.producer.get(i) for i in n.input[:1]]
    dyn = any(p is not None and p.op_type == "DynamicQuantizeLinear" for p in fed)
    what = "convolution" if n.op_type == "ConvInteger" else "matrix product"
    return (f"{n.op_type} outputs the int32 sums, not a requantized code: every spec table's {what} requantizes "
            f"to an 8-bit output, so no case states it (the model scales the sums to float itself)"
            + ("; dynamic quantization: its input is quantized at run time by DynamicQuantizeLinear" if dyn else ""))


def node_name(nodes: list, n) -> str:
    """A node's name, or ``<op type>#<position>`` for a node without one."""
    return n.name or f"{n.op_type}#{next(i for i, x in enumerate(nodes) if x is n)}"


def _region(mdl: _Model, name: str) -> list:
    """The float operators computing ``name`` back to quantized tensors and constants, in order
    (empty: a QuantizeLinear of a graph input or of a DequantizeLinear)."""
    found, todo = [], [name]
    while todo:
        t = todo.pop()
        p = mdl.producer.get(t)
        if p is None or p.op_type in ("DequantizeLinear", "QuantizeLinear") or p in found:
            continue
        found.append(p)
        todo.extend(i for i in p.input if i and i not in mdl.inits)
    order = {id(n): i for i, n in enumerate(mdl.nodes)}
    return sorted(found, key=lambda n: order[id(n)])


# --------------------------------------------------------------------------- case layers

def _case_layer(mdl: _Model, region: list, q, ospec: Tensor, k: int, stem: str, node: str, model_op: str) -> Layer:
    if not region:   # QuantizeLinear of a float graph input
        kind = mdl.resolve(q.input[0])
        if kind[0] != "input":
            raise NotCovered("a requantization (QuantizeLinear of a DequantizeLinear)")
        x = Tensor("float32", mdl.graph_shape(q.input[0]), np.zeros(mdl.graph_shape(q.input[0]), np.float32))
        case = Case("QuantizeLinear", [x], [ospec], {}, spec="onnx-qdq")
        return _finish(case, [q.input[0]], None, q.output[0], k, stem, node, model_op)
    if len(region) != 1:
        raise NotCovered(f"{len(region)} float operators between quantized tensors")
    n = region[0]
    fn = _MAPPERS.get(n.op_type)
    if fn is None:
        raise NotCovered(f"no spec table has an int8 {n.op_type}")
    ins = [mdl.resolve(i) if i else None for i in n.input]
    op, inputs, names, attrs, pads = fn(mdl, n, ins, ospec, q.input[0])
    return _finish(Case(op, inputs, [ospec], attrs), names, pads, q.output[0], k, stem, node, model_op)


def _finish(case: Case, names, pads, out: str, k: int, stem: str, node: str, model_op: str) -> Layer:
    acts = [t for t, nm in zip(case.inputs, names) if nm is not None] + list(case.outputs)
    if case.spec == "litert-int8" and acts and all(t.dtype == "uint8" for t in acts):
        # uint8 activations: the qnn table's rows (the one table with uint8 activations)
        if case.op not in table("qnn").ops:
            raise NotCovered(f"uint8 activations: the qnn table (the spec table with uint8 activations) has no "
                             f"{case.op}, the litert-int8 table holds int8 activations")
        case.spec = "qnn"
    case.id = f"{stem}.L{k:03d}.{case.op}"[:128]
    case.variant, case.index = "model", k
    case.clause = f"{case.spec}/{case.op}"
    case.description = f"{stem} layer {k}: {node} ({model_op})"
    bad = check_case(case)
    if bad:
        raise NotCovered(f"the case breaks its spec table: {bad[0]}")
    return Layer(index=k, node=node, op=case.op, kind=CASE, inputs=names, outputs=[out], case=case,
                 pads=pads, model_op=model_op)


def _act(x, what: str):
    if x is None or x[0] != "act":
        raise NotCovered(f"{what} is not a quantized activation")
    t = x[2]
    return Tensor(t.dtype, t.shape, np.zeros(t.shape, np.int8 if t.dtype == "int8" else np.uint8),
                  t.scale, t.zero_point), x[1]


def _conv(mdl, n, ins, ospec, out):
    a = mdl.attrs(n)
    x, xname = _act(ins[0], "the input")
    if ins[1] is None or ins[1][0] != "qconst":
        raise NotCovered("the weights are not quantized constants")
    w = ins[1][2]
    if w.data.ndim != 4 or len(x.shape) != 4:
        raise NotCovered("not a 2-D convolution")
    m, cg, kh, kw = w.data.shape
    c = x.shape[3]
    group = int(a.get("group", 1))
    if w.per_axis and w.quantized_dimension != 0:
        raise NotCovered("weights quantized along another axis than the output channels")
    if group == 1:
        op, wd, qdim, extra = "CONV_2D", w.data.transpose(0, 2, 3, 1), 0, {}
    elif group == c == m and cg == 1:
        op, wd, qdim, extra = "DEPTHWISE_CONV_2D", w.data.transpose(1, 2, 3, 0), 3, {"depth_multiplier": 1}
    else:
        raise NotCovered(f"a grouped convolution (group {group} of {c} channels)")
    wt = Tensor(w.dtype, wd.shape, np.ascontiguousarray(wd), w.scale, w.zero_point, qdim if w.per_axis else 0)
    inputs, names = [x, wt], [xname, None]
    if len(ins) > 2 and ins[2] is not None:
        if ins[2][0] != "qconst":
            raise NotCovered("the bias is not a quantized constant")
        inputs.append(ins[2][2])
        names.append(None)
    strides = list(a.get("strides", [1, 1]))
    dil = list(a.get("dilations", [1, 1]))
    auto = a.get("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto != "NOTSET":
        raise NotCovered(f"auto_pad {auto}")
    pads = list(a.get("pads", [0, 0, 0, 0]))
    padding, pad_nhwc = _padding(x.shape[1:3], (kh, kw), strides, dil, pads)
    if pad_nhwc is not None:   # the input padded with its zero point, then VALID: the same sums
        x.shape = tuple(d + b + e for d, (b, e) in zip(x.shape, pad_nhwc))
        x.data = np.zeros(x.shape, x.data.dtype)
    attrs = {"padding": padding, "stride_h": strides[0], "stride_w": strides[1], "dilation_h_factor": dil[0],
             "dilation_w_factor": dil[1], **extra, "fused_activation_function": "NONE"}
    return op, inputs, names, attrs, [pad_nhwc, None, None][:len(inputs)] if pad_nhwc else None


def _padding(in_hw, k_hw, strides, dil, pads):
    """("SAME" | "VALID", None) when LiteRT's padding states ONNX's pads, else ("VALID", the NHWC pads)."""
    t, left, b, r = pads
    same = []
    for n, k, s, d in zip(in_hw, k_hw, strides, dil):
        o = out_size(n, k, s, d, "SAME")
        before = pad_before(n, k, s, d, o)
        total = max((o - 1) * s + (k - 1) * d + 1 - n, 0)
        same.append((before, total - before))
    if [(t, b), (left, r)] == same:
        return "SAME", None
    if not any(pads):
        return "VALID", None
    return "VALID", [(0, 0), (t, b), (left, r), (0, 0)]


def _binary(op):
    def fn(mdl, n, ins, ospec, out):
        inputs, names = [], []
        for x in ins:
            if x is not None and x[0] == "act":
                t, name = _act(x, "an input")
            elif x is not None and x[0] == "qconst":
                t, name = _const_operand(x[2]), None
            else:
                raise NotCovered("an input is a float constant or tensor, not quantized")
            inputs.append(t)
            names.append(name)
        return op, inputs, names, {"fused_activation_function": "NONE"}, None
    return fn


def _const_operand(t: Tensor) -> Tensor:
    d = t.data
    if d.ndim == 4:
        d = d.transpose(NCHW_TO_NHWC)
    elif d.size != 1:
        raise NotCovered(f"a constant operand of shape {list(d.shape)} (broadcast along NCHW)")
    return Tensor(t.dtype, d.shape, np.ascontiguousarray(d), t.scale, t.zero_point, 0, const=True)


def _gap(mdl, n, ins, ospec, out):
    x, name = _act(ins[0], "the input")
    if len(x.shape) != 4:
        raise NotCovered("not a 4-D input")
    axis = Tensor("int32", (2,), np.array([1, 2], np.int32))
    return "MEAN", [x, axis], [name, None], {"keep_dims": True}, None


def _max_pool(mdl, n, ins, ospec, out):
    a = mdl.attrs(n)
    x, name = _act(ins[0], "the input")
    kh, kw = a["kernel_shape"]
    strides = list(a.get("strides", [1, 1]))
    if a.get("ceil_mode", 0) or any(d != 1 for d in a.get("dilations", [1, 1])):
        raise NotCovered("ceil_mode or dilations")
    padding, explicit = _padding(x.shape[1:3], (kh, kw), strides, [1, 1], list(a.get("pads", [0, 0, 0, 0])))
    if explicit is not None:
        raise NotCovered("pads LiteRT's SAME cannot state")
    return "MAX_POOL_2D", [x], [name], {"padding": padding, "stride_h": strides[0], "stride_w": strides[1],
                                        "filter_height": kh, "filter_width": kw,
                                        "fused_activation_function": "NONE"}, None


def _reshape_layout(mdl, n) -> None:
    """A reshape is the same in NCHW and NHWC only where a 4-D side has H * W == 1."""
    src = mdl.shapes.get(n.input[0], ())
    dst = mdl.shapes.get(n.output[0], ())
    if (len(src) == 4 and src[2] * src[3] != 1) or (len(dst) == 4 and dst[2] * dst[3] != 1):
        raise NotCovered("a reshape across the NCHW -> NHWC layout change")


def _reshape(mdl, n, ins, ospec, out):
    x, name = _act(ins[0], "the input")
    _reshape_layout(mdl, n)
    shape = Tensor("int32", (len(ospec.shape),), np.array(ospec.shape, np.int32))
    return "RESHAPE", [x, shape], [name, None], {"new_shape": list(ospec.shape)}, None


def _fc(mdl, n, ins, ospec, out):
    a = mdl.attrs(n) if n.op_type == "Gemm" else {}
    if a.get("transA", 0) or a.get("alpha", 1.0) != 1.0 or a.get("beta", 1.0) != 1.0:
        raise NotCovered("transA, alpha or beta")
    x, name = _act(ins[0], "input A")
    if ins[1] is not None and ins[1][0] == "act" and n.op_type == "MatMul":
        y, yname = _act(ins[1], "input B")
        return "BATCH_MATMUL", [x, y], [name, yname], {"adj_x": False, "adj_y": False}, None
    if ins[1] is None or ins[1][0] != "qconst" or len(x.shape) != 2:
        raise NotCovered("B is not a quantized constant, or A is not 2-D")
    w = ins[1][2]
    trans_b = a.get("transB", 0)
    wd = w.data if trans_b else w.data.T
    out_axis = 0 if trans_b else 1
    if w.per_axis and w.quantized_dimension != out_axis:
        raise NotCovered("weights quantized along the input axis")
    inputs = [x, Tensor(w.dtype, wd.shape, np.ascontiguousarray(wd), w.scale, w.zero_point, 0)]
    names = [name, None]
    if len(ins) > 2 and ins[2] is not None:
        if ins[2][0] != "qconst":
            raise NotCovered("the bias is not a quantized constant")
        inputs.append(ins[2][2])
        names.append(None)
    return "FULLY_CONNECTED", inputs, names, {"fused_activation_function": "NONE", "keep_num_dims": False}, None


def _relu(mdl, n, ins, ospec, out):
    x, name = _act(ins[0], "the input")
    if n.op_type == "Relu":
        return "RELU", [x], [name], {}, None
    lo = _scalar(mdl, n, 1, "min")
    hi = _scalar(mdl, n, 2, "max")
    if (lo, hi) == (0.0, 6.0):
        return "RELU6", [x], [name], {}, None
    raise NotCovered(f"Clip({lo}, {hi}) is neither RELU nor RELU6")


def _scalar(mdl, n, i, attr):
    if len(n.input) > i and n.input[i]:
        v = mdl.inits.get(n.input[i])
        return None if v is None else float(np.asarray(v).ravel()[0])
    return mdl.attrs(n).get(attr)


def _softmax(mdl, n, ins, ospec, out):
    x, name = _act(ins[0], "the input")
    axis = mdl.attrs(n).get("axis", -1) % len(x.shape)
    if axis != len(x.shape) - 1 or len(x.shape) == 4:
        raise NotCovered("softmax along another axis than the last")
    return "SOFTMAX", [x], [name], {"beta": 1.0}, None


def _axis4(axis: int, rank: int) -> int:
    """An ONNX axis in the graph's layout (a 4-D tensor is held NHWC)."""
    a = axis % rank
    return NCHW_TO_NHWC.index(a) if rank == 4 else a


def _concat(mdl, n, ins, ospec, out):
    xs = [_act(x, f"input {i}") for i, x in enumerate(ins)]
    axis = _axis4(int(mdl.attrs(n).get("axis", 0)), len(ospec.shape))
    return ("CONCATENATION", [t for t, _ in xs], [nm for _, nm in xs],
            {"axis": axis, "fused_activation_function": "NONE"}, None)


def _leaky_relu(mdl, n, ins, ospec, out):
    x, name = _act(ins[0], "the input")
    return "LEAKY_RELU", [x], [name], {"alpha": float(mdl.attrs(n).get("alpha", 0.01))}, None


def _max_min(op):
    def fn(mdl, n, ins, ospec, out):
        if len(ins) != 2:
            raise NotCovered(f"{n.op_type} of {len(ins)} inputs ({op} takes two)")
        xs = [_act(x, f"input {i}") for i, x in enumerate(ins)]
        return op, [t for t, _ in xs], [nm for _, nm in xs], {}, None
    return fn


def _logistic(mdl, n, ins, ospec, out):
    x, name = _act(ins[0], "the input")
    return "LOGISTIC", [x], [name], {}, None


def _avg_pool(mdl, n, ins, ospec, out):
    a = mdl.attrs(n)
    x, name = _act(ins[0], "the input")
    if a.get("channels_last", 0):
        raise NotCovered("channels_last (an NHWC input in the model)")
    kh, kw = a["kernel_shape"]
    strides = list(a.get("strides", [1, 1]))
    pads = list(a.get("pads", [0, 0, 0, 0]))
    if a.get("ceil_mode", 0) or any(d != 1 for d in a.get("dilations", [1, 1])):
        raise NotCovered("ceil_mode or dilations")
    if a.get("count_include_pad", 0) and any(pads):
        raise NotCovered("count_include_pad with pads (LiteRT averages the in-bounds taps only)")
    padding, explicit = _padding(x.shape[1:3], (kh, kw), strides, [1, 1], pads)
    if explicit is not None:
        raise NotCovered("pads LiteRT's SAME cannot state")
    return "AVERAGE_POOL_2D", [x], [name], {"padding": padding, "stride_h": strides[0], "stride_w": strides[1],
                                            "filter_height": kh, "filter_width": kw,
                                            "fused_activation_function": "NONE"}, None


def _split(mdl, n, ins, ospec, out):
    """Output k of a Split: SLICE of the input at that output's offset (the codes as they are)."""
    x, name = _act(ins[0], "the input")
    rank = len(x.shape)
    a = mdl.attrs(n)
    axis = int(a.get("axis", 0)) % rank
    k = list(n.output).index(out)
    shapes = [mdl.shapes.get(o, ()) for o in n.output]
    if any(len(sh) != rank or sh[axis] < 0 for sh in shapes):
        raise NotCovered("the split sizes are not static")
    sizes = [sh[axis] for sh in shapes]
    ga = _axis4(axis, rank)
    begin = [0] * rank
    begin[ga] = sum(sizes[:k])
    size = list(ospec.shape)
    return ("SLICE", [x, Tensor("int32", (rank,), np.array(begin, np.int32)),
                      Tensor("int32", (rank,), np.array(size, np.int32))], [name, None, None], {}, None)


def _transpose(mdl, n, ins, ospec, out):
    x, name = _act(ins[0], "the input")
    rank = len(x.shape)
    perm = list(mdl.attrs(n).get("perm", list(range(rank))[::-1]))
    if rank == 4:   # both held NHWC: graph axis i is model axis NCHW_TO_NHWC[i]
        perm = [NCHW_TO_NHWC.index(perm[NCHW_TO_NHWC[i]]) for i in range(4)]
        if len(ospec.shape) != 4:
            raise NotCovered("a transpose to another rank")
    return "TRANSPOSE", [x, Tensor("int32", (rank,), np.array(perm, np.int32))], [name, None], {}, None


_MAPPERS = {"Conv": _conv, "Add": _binary("ADD"), "Mul": _binary("MUL"), "GlobalAveragePool": _gap,
            "MaxPool": _max_pool, "Reshape": _reshape, "Flatten": _reshape, "Squeeze": _reshape,
            "Unsqueeze": _reshape, "Gemm": _fc, "MatMul": _fc, "Relu": _relu, "Clip": _relu, "Softmax": _softmax,
            "Concat": _concat, "LeakyRelu": _leaky_relu, "Max": _max_min("MAXIMUM"), "Min": _max_min("MINIMUM"),
            "Sigmoid": _logistic, "AveragePool": _avg_pool, "Split": _split, "Transpose": _transpose}


# --------------------------------------------------------------------------- float layers

def _float_layer(mdl: _Model, region: list, q, ospec: Tensor, k: int, node: str, model_op: str) -> Layer:
    """Dequantize the region's quantized inputs, its float ops in order (a chain), quantize."""
    acts: list[tuple[str, Tensor]] = []
    steps: list[dict] = []
    prev = None

    def act_index(x) -> int:
        names = [a for a, _ in acts]
        if x[1] not in names:
            acts.append((x[1], x[2]))
        return [a for a, _ in acts].index(x[1])

    if not region:
        x = mdl.resolve(q.input[0])
        if x[0] != "act":
            raise NotCovered("the input is not a quantized tensor")
        act_index(x)
    for n in region:
        if n.op_type not in FLOAT_OPS:
            raise NotCovered(f"the golden states no float {n.op_type}")
        ins = [mdl.resolve(i) if i else None for i in n.input]
        main = None
        st = {"op": n.op_type}
        if n.op_type in _NARY:   # Concat, Max, Min: of quantized tensors, the region's first op
            if steps or any(x is None or x[0] != "act" for x in ins):
                raise NotCovered(f"{n.op_type} of other than quantized tensors")
            st["inputs"] = [act_index(x) for x in ins]
            st.update(_float_attrs(mdl, n))
            steps.append(st)
            prev = n.output[0]
            continue
        for pos, x in enumerate(ins):
            if x is None:
                continue
            if x[0] == "float":
                if x[1] != prev or main is not None:
                    raise NotCovered("float operators that do not form a chain")
                main = "chain"
            elif x[0] == "act":
                if main is None and pos == 0:
                    main = act_index(x)
                else:
                    st["input"] = act_index(x)
            elif x[0] == "const" and n.op_type in ("Div", "Mul", "Add") and np.asarray(x[1]).size == 1:
                st["value"] = float(np.asarray(x[1]).ravel()[0])
            elif x[0] == "const" and n.op_type == "Clip":
                st["min" if pos == 1 else "max"] = float(np.asarray(x[1]).ravel()[0])
            elif x[0] == "const" and n.op_type in _RESHAPES and pos > 0:
                pass   # the target shape: the output's (graph layout)
            else:
                raise NotCovered(f"{n.op_type} input {pos} ({x[0]})")
        if main is None or (main != "chain" and steps) or (main == "chain" and not steps) or \
                (main not in ("chain", 0)):
            raise NotCovered("float operators that do not form a chain from the first input")
        st.update(_float_attrs(mdl, n))
        steps.append(st)
        prev = n.output[0]
    if not acts:
        raise NotCovered("no quantized input")
    return Layer(index=k, node=node, op=model_op, kind=FLOAT, inputs=[a for a, _ in acts], outputs=[q.output[0]],
                 steps=steps, float_inputs=[t for _, t in acts], out=ospec, model_op=model_op)


def _float_attrs(mdl: _Model, n) -> dict:
    a = mdl.attrs(n)
    if n.op_type == "HardSigmoid":
        return {"alpha": float(a.get("alpha", 0.2)), "beta": float(a.get("beta", 0.5))}
    if n.op_type == "Softmax":
        rank = len(mdl.shapes.get(n.input[0], ()))
        axis = int(a.get("axis", -1)) % rank
        return {"axis": NCHW_TO_NHWC.index(axis) if rank == 4 else axis}
    if n.op_type == "MaxPool":
        if a.get("ceil_mode", 0) or any(d != 1 for d in a.get("dilations", [1, 1])):
            raise NotCovered("MaxPool ceil_mode or dilations")
        return {"kernel": list(a["kernel_shape"]), "strides": list(a.get("strides", [1, 1])),
                "pads": [int(p) for p in a.get("pads", [0, 0, 0, 0])]}
    if n.op_type == "Clip" and "min" in a:
        return {"min": float(a["min"]), "max": float(a["max"])}
    if n.op_type == "AveragePool":
        if a.get("ceil_mode", 0) or any(d != 1 for d in a.get("dilations", [1, 1])) or a.get("channels_last", 0):
            raise NotCovered("AveragePool ceil_mode, dilations or channels_last")
        return {"kernel": list(a["kernel_shape"]), "strides": list(a.get("strides", [1, 1])),
                "pads": [int(p) for p in a.get("pads", [0, 0, 0, 0])],
                "count_include_pad": int(a.get("count_include_pad", 0))}
    if n.op_type == "GlobalAveragePool" and a.get("channels_last", 0):
        raise NotCovered("GlobalAveragePool channels_last")
    if n.op_type == "LeakyRelu":
        return {"alpha": float(a.get("alpha", 0.01))}
    if n.op_type == "Concat":
        rank = len(mdl.shapes.get(n.output[0], ()))
        if not rank:
            raise NotCovered("Concat of an unknown rank")
        return {"axis": _axis4(int(a.get("axis", 0)), rank)}
    if n.op_type in _RESHAPES:
        _reshape_layout(mdl, n)
        return {"shape": list(mdl.graph_shape(n.output[0]))}
    if n.op_type == "Transpose":
        rank = len(mdl.shapes.get(n.input[0], ()))
        perm = list(a.get("perm", list(range(rank))[::-1]))
        if rank == 4:
            perm = [NCHW_TO_NHWC.index(perm[NCHW_TO_NHWC[i]]) for i in range(4)]
        return {"perm": perm}
    return {}


_NARY = ("Concat", "Max", "Min")
_RESHAPES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze")


def _float_node(mdl: _Model, n, ins, ospec: Tensor, out: str, k: int, node: str, model_op: str) -> Layer:
    """A float layer of one QOperator (or codes-moving) node: its inputs dequantized, the float op
    its ONNX / contrib specification names, the result quantized (reference/graph.py)."""
    op = n.op_type
    if op not in FLOAT_OPS:
        raise NotCovered(f"the golden states no float {op}" + (" (the op's semantics are integer sums, "
                                                               "requantized)" if op in ("Conv", "MatMul", "Gemm")
                                                               else ""))
    acts = [x for x in ins if x is not None and x[0] == "act"]
    st = {"op": op, **_float_attrs(mdl, n)}
    if op in _NARY:
        if len(acts) != len([x for x in ins if x is not None]):
            raise NotCovered(f"{op} of other than quantized tensors")
        st["inputs"] = list(range(len(acts)))
    elif op in ("Add", "Mul", "Div"):
        if len(ins) != 2 or ins[0] is None or ins[0][0] != "act":
            raise NotCovered(f"{op} whose first input is not a quantized tensor")
        b = ins[1]
        if b is not None and b[0] == "act":
            st["input"] = 1
        elif b is not None and b[0] == "qconst" and b[2].data.size == 1:
            t = b[2]
            st["value"] = float(np.float32(int(t.data.ravel()[0]) - t.zero_point[0]) * np.float32(t.scale[0]))
        else:
            raise NotCovered(f"{op} of a constant that is not a quantized scalar")
    elif not acts or ins[0] is None or ins[0][0] != "act" or len(acts) != 1:
        raise NotCovered("not one quantized input")
    if op == "Split":
        raise NotCovered("the golden states no float Split")
    return Layer(index=k, node=node, op=model_op, kind=FLOAT, inputs=[x[1] for x in acts], outputs=[out],
                 steps=[st], float_inputs=[x[2] for x in acts], out=ospec, model_op=model_op)
