"""Harvest a QDQ .onnx model into a :class:`suite.core.graph.Graph` (LiteRT layouts: NHWC).

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
from suite.core.spec import check_case
from suite.core.userfile import read_bytes
from targets.onnx_model import load_onnx

NCHW_TO_NHWC = (0, 2, 3, 1)
_DT = {np.dtype(np.int8): "int8", np.dtype(np.uint8): "uint8", np.dtype(np.int16): "int16",
       np.dtype(np.uint16): "uint16", np.dtype(np.int32): "int32"}


class NotCovered(Exception):
    pass


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

    def __init__(self, path: str):
        onnx = load_onnx()
        m, raw = read_onnx(path)
        self.digest = file_digest(raw)
        try:
            m = onnx.shape_inference.infer_shapes(m)
        except Exception as e:  # noqa: BLE001 (onnx raises many types: one error naming the file)
            raise QconformError(f"not a readable ONNX model: {type(e).__name__}: {e}", source=path) from None
        _check_graph(m.graph, path)
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
        self.producer = {o: n for n in self.nodes for o in n.output}
        self.shapes = {}
        for vi in list(self.g.input) + list(self.g.value_info) + list(self.g.output):
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
            codes = np.asarray(self.inits[src])
            qdim = axis % codes.ndim if s.size > 1 else 0
            return ("qconst", codes, Tensor(dt, codes.shape, codes, [float(v) for v in s.ravel()],
                                            [int(v) for v in z.ravel()], qdim))
        if s.size > 1:
            raise NotCovered("a per-axis quantized activation")
        return ("act", src, Tensor(dt, self.graph_shape(src), None, [float(s.ravel()[0])], [int(z.ravel()[0])]))

    def graph_shape(self, name: str) -> tuple[int, ...]:
        shape = self.shapes.get(name)
        if shape is None or any(d < 0 for d in shape):
            raise NotCovered(f"tensor {name} has no static shape (fix the model's input shape first)")
        return tuple(shape[p] for p in NCHW_TO_NHWC) if len(shape) == 4 else tuple(shape)


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


def harvest(path: str) -> Graph:
    """The graph of a QDQ .onnx model (case inputs hold zeros until suite.models.harvest.fill)."""
    mdl = _Model(path)
    stem = re.sub(r"[^A-Za-z0-9._~+-]", "_", path.rsplit("/", 1)[-1].rsplit(".", 1)[0]).lstrip(".")[:60] or "model"
    specs: dict[str, Tensor] = {}
    layout: dict[str, tuple[int, ...]] = {}
    inputs = [i.name for i in mdl.g.input if i.name not in mdl.inits]
    for name in inputs:
        specs[name] = Tensor("float32", mdl.graph_shape(name))
        if len(specs[name].shape) == 4:
            layout[name] = NCHW_TO_NHWC
    layers: list[Layer] = []
    not_covered: dict[str, list[str]] = {}
    for q in mdl.nodes:
        if q.op_type != "QuantizeLinear":
            continue
        out = q.output[0]
        s, z, _ = mdl.qparams(q)
        try:
            ospec = Tensor(_DT[z.dtype], mdl.graph_shape(out), None, [float(s.ravel()[0])], [int(z.ravel()[0])])
            if s.size > 1:
                raise NotCovered("a per-axis quantized activation")
            region = _region(mdl, q.input[0])
        except (NotCovered, KeyError) as e:
            not_covered.setdefault("QuantizeLinear", []).append(f"{node_name(mdl.nodes, q)}: {e}")
            continue
        specs[out] = ospec
        if len(ospec.shape) == 4:
            layout[out] = NCHW_TO_NHWC
        k = len(layers)
        model_op = "+".join(n.op_type for n in region) or "QuantizeLinear"
        node = "+".join(node_name(mdl.nodes, n) for n in region) or node_name(mdl.nodes, q)
        try:
            layers.append(_case_layer(mdl, region, q, ospec, k, stem, node, model_op))
            continue
        except NotCovered as e:
            why = str(e)
        try:
            layers.append(_float_layer(mdl, region, q, ospec, k, node, model_op))
        except NotCovered as e:
            not_covered.setdefault(model_op, []).append(f"{node}: {why}; as a float layer: {e}")
    outputs = []
    for o in mdl.g.output:
        p = mdl.producer.get(o.name)
        src = p.input[0] if p is not None and p.op_type == "DequantizeLinear" else o.name
        if src in specs:
            outputs.append(src)
    return Graph(name=path.rsplit("/", 1)[-1], digest=mdl.digest, format="onnx", inputs=inputs,
                 outputs=outputs, specs=specs, layers=layers, layout=layout, not_covered=not_covered,
                 path=str(path), model_inputs={n: n for n in inputs})


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
        return _finish(case, [q.input[0]], None, q, k, stem, node, model_op)
    if len(region) != 1:
        raise NotCovered(f"{len(region)} float operators between quantized tensors")
    n = region[0]
    fn = _MAPPERS.get(n.op_type)
    if fn is None:
        raise NotCovered(f"no spec table has an int8 {n.op_type}")
    ins = [mdl.resolve(i) if i else None for i in n.input]
    op, inputs, names, attrs, pads = fn(mdl, n, ins, ospec)
    return _finish(Case(op, inputs, [ospec], attrs), names, pads, q, k, stem, node, model_op)


def _finish(case: Case, names, pads, q, k: int, stem: str, node: str, model_op: str) -> Layer:
    case.id = f"{stem}.L{k:03d}.{case.op}"[:128]
    case.variant, case.index = "model", k
    case.clause = f"{case.spec}/{case.op}"
    case.description = f"{stem} layer {k}: {node} ({model_op})"
    bad = check_case(case)
    if bad:
        raise NotCovered(f"the case breaks its spec table: {bad[0]}")
    return Layer(index=k, node=node, op=case.op, kind=CASE, inputs=names, outputs=[q.output[0]], case=case,
                 pads=pads, model_op=model_op)


def _act(x, what: str):
    if x is None or x[0] != "act":
        raise NotCovered(f"{what} is not a quantized activation")
    t = x[2]
    return Tensor(t.dtype, t.shape, np.zeros(t.shape, np.int8 if t.dtype == "int8" else np.uint8),
                  t.scale, t.zero_point), x[1]


def _conv(mdl, n, ins, ospec):
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
    def fn(mdl, n, ins, ospec):
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


def _gap(mdl, n, ins, ospec):
    x, name = _act(ins[0], "the input")
    if len(x.shape) != 4:
        raise NotCovered("not a 4-D input")
    axis = Tensor("int32", (2,), np.array([1, 2], np.int32))
    return "MEAN", [x, axis], [name, None], {"keep_dims": True}, None


def _max_pool(mdl, n, ins, ospec):
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


def _reshape(mdl, n, ins, ospec):
    x, name = _act(ins[0], "the input")
    src = mdl.shapes.get(n.input[0], ())
    dst = mdl.shapes.get(n.output[0], ())
    if (len(src) == 4 and src[2] * src[3] != 1) or (len(dst) == 4 and dst[2] * dst[3] != 1):
        raise NotCovered("a reshape across the NCHW -> NHWC layout change")
    shape = Tensor("int32", (len(ospec.shape),), np.array(ospec.shape, np.int32))
    return "RESHAPE", [x, shape], [name, None], {"new_shape": list(ospec.shape)}, None


def _fc(mdl, n, ins, ospec):
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


def _relu(mdl, n, ins, ospec):
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


def _softmax(mdl, n, ins, ospec):
    x, name = _act(ins[0], "the input")
    axis = mdl.attrs(n).get("axis", -1) % len(x.shape)
    if axis != len(x.shape) - 1 or len(x.shape) == 4:
        raise NotCovered("softmax along another axis than the last")
    return "SOFTMAX", [x], [name], {"beta": 1.0}, None


_MAPPERS = {"Conv": _conv, "Add": _binary("ADD"), "Mul": _binary("MUL"), "GlobalAveragePool": _gap,
            "MaxPool": _max_pool, "Reshape": _reshape, "Flatten": _reshape, "Gemm": _fc, "MatMul": _fc, "Relu": _relu, "Clip": _relu,
            "Softmax": _softmax}


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
    return {}
