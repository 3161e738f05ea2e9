"""Build a QDQ ONNX model holding one operator, for the ``ort`` and ``htp`` targets.

Each quantized input is DequantizeLinear'd (constants are initializers: weights
per-axis with their axis, int32 bias), the float operator runs, and each output is
QuantizeLinear'd, so graph inputs and outputs are the quantized codes. Layout
changes (LiteRT's NHWC / OHWI / 1HWO to ONNX's NCHW / OIHW) are done on the data
by the harness, not as extra nodes: :class:`OnnxModel` records the permutation
of every graph input and output.
"""

from __future__ import annotations

import ctypes
import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from suite.core.dtypes import DTYPES, pack_int4, unpack_int4
from suite.core.errors import Unsupported
from suite.core.spec import input_is_const
from targets import onnx_ops as _ops_pkg

OPSET = 21
NHWC_TO_NCHW = (0, 3, 1, 2)
NCHW_TO_NHWC = (0, 2, 3, 1)


# The runtimes, imported on first use: this module (and targets.ort, targets.htp,
# targets.netrun and targets.remote, which import it) must load without them, so that a
# missing onnx or onnxruntime makes those targets unavailable (their availability()
# calls these) instead of breaking the import. Every use goes through these two.

def load_onnx():
    """The ``onnx`` package (its ``helper``, ``numpy_helper``, ``compose`` come with it)."""
    import onnx
    return onnx


def load_onnxruntime():
    """The ``onnxruntime`` package."""
    import onnxruntime
    return onnxruntime


ONNX_TYPES = {
    "float32": "FLOAT", "int32": "INT32", "uint8": "UINT8", "int8": "INT8", "int16": "INT16",
    "uint16": "UINT16", "int64": "INT64", "bool": "BOOL", "int4": "INT4", "uint4": "UINT4",
}


@dataclass
class GraphInput:
    name: str
    case_index: int
    perm: tuple[int, ...] | None = None   # applied to the case data before feeding
    shape: tuple[int, ...] | None = None  # then reshaped to this (e.g. a flattened batch)


@dataclass
class GraphOutput:
    name: str
    perm: tuple[int, ...] | None = None   # applied to the model output to get the case layout
    shape: tuple[int, ...] | None = None  # then reshaped to this (same data, e.g. keep_num_dims)


@dataclass
class OnnxModel:
    content: bytes
    inputs: list[GraphInput]
    outputs: list[GraphOutput]
    op_types: list[str] = field(default_factory=list)

    def feeds(self, case) -> dict[str, np.ndarray]:
        feeds = {}
        for gi in self.inputs:
            t = case.inputs[gi.case_index]
            arr = np.asarray(t.data).astype(DTYPES[t.dtype].storage).reshape(t.shape)
            if gi.perm is not None:
                arr = np.ascontiguousarray(arr.transpose(gi.perm))
            if gi.shape is not None:
                arr = arr.reshape(gi.shape)
            feeds[gi.name] = ortvalue_4bit(arr, t.dtype) if t.dtype in ("int4", "uint4") else arr
        return feeds

    def unpack(self, outs: list[np.ndarray]) -> list[np.ndarray]:
        res = []
        for go, arr in zip(self.outputs, outs):
            arr = np.asarray(arr)
            if go.perm is not None:
                arr = arr.transpose(go.perm)
            if go.shape is not None and arr.size == int(np.prod(go.shape, dtype=np.int64)):
                arr = arr.reshape(go.shape)
            res.append(np.ascontiguousarray(arr))
        return res


def ortvalue_4bit(arr: np.ndarray, dtype: str):
    """An int4/uint4 graph input for onnxruntime (NumPy has no 4-bit type).

    onnxruntime's Python API takes a 4-bit tensor only as an OrtValue built with
    ``OrtValue.ortvalue_from_numpy_with_onnx_type``: the array's shape is the logical
    shape and its buffer is read as packed bytes (element 2i low nibble, 2i+1 high).
    """
    ort, TensorProto = load_onnxruntime(), load_onnx().TensorProto
    packed = pack_int4(arr)
    buf = np.zeros(max(arr.size, packed.size), np.uint8)
    buf[:packed.size] = packed
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
        buf[:arr.size].reshape(arr.shape), TensorProto.INT4 if dtype == "int4" else TensorProto.UINT4)


def run_session(sess, names: list[str], feeds: dict) -> list[np.ndarray]:
    """``sess.run(names, feeds)``, except that int4/uint4 outputs come back unpacked.

    NumPy has no 4-bit type, so ``sess.run`` refuses such outputs; they are fetched as
    OrtValues and their packed bytes unpacked (int8 / uint8 arrays of the logical shape).
    """
    kinds = {o.name: o.type for o in sess.get_outputs()}
    if not any(kinds.get(n) in ("tensor(int4)", "tensor(uint4)") for n in names):
        return sess.run(names, feeds)
    ort = load_onnxruntime()
    ov_feeds = {k: v if isinstance(v, ort.OrtValue) else ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(v))
                for k, v in feeds.items()}
    outs = []
    for n, v in zip(names, sess.run_with_ort_values(names, ov_feeds)):
        if kinds.get(n) in ("tensor(int4)", "tensor(uint4)"):
            shape = tuple(v.shape())
            count = int(np.prod(shape, dtype=np.int64))
            raw = np.frombuffer(ctypes.string_at(v.data_ptr(), v.tensor_size_in_bytes()), np.uint8)
            outs.append(unpack_int4(raw, count, kinds[n] == "tensor(int4)").reshape(shape))
        else:
            outs.append(v.numpy())
    return outs


class Builder:
    """Accumulates nodes, initializers and graph inputs/outputs for one case."""

    def __init__(self, case):
        onnx = load_onnx()
        self.onnx, self.helper, self.nh = onnx, onnx.helper, onnx.numpy_helper
        self.case = case
        self.nodes = []
        self.inits = []
        self.graph_inputs = []
        self.graph_outputs = []
        self.inputs: list[GraphInput] = []
        self.outputs: list[GraphOutput] = []
        self._n = 0

    def fresh(self, stem: str) -> str:
        self._n += 1
        return f"{stem}_{self._n}"

    def const(self, arr: np.ndarray, stem: str = "c") -> str:
        name = self.fresh(stem)
        self.inits.append(self.nh.from_array(np.asarray(arr), name))
        return name

    def node(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs) -> list[str]:
        outs = [self.fresh(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(self.helper.make_node(op_type, inputs, outs, **attrs))
        return outs

    def node1(self, op_type: str, inputs: list[str], **attrs) -> str:
        return self.node(op_type, inputs, 1, **attrs)[0]

    def _elem(self, dtype: str) -> int:
        return getattr(self.onnx.TensorProto, ONNX_TYPES[dtype])

    # ---- inputs
    def raw_input(self, i: int, perm: tuple[int, ...] | None = None) -> str:
        """Input ``i`` as its raw tensor (graph input or initializer), layout permuted."""
        t = self.case.inputs[i]
        if t.dtype not in ONNX_TYPES:
            raise Unsupported(f"ONNX has no type for {t.dtype}")
        shape = list(t.shape)
        if perm is not None:
            shape = [shape[p] for p in perm]
        if input_is_const(self.case, i):
            data = np.asarray(t.data).reshape(t.shape)
            if perm is not None:
                data = data.transpose(perm)
            return self.const(np.ascontiguousarray(data).astype(DTYPES[t.dtype].storage), f"w{i}")
        name = f"in{i}"
        self.graph_inputs.append(self.helper.make_tensor_value_info(name, self._elem(t.dtype), shape))
        self.inputs.append(GraphInput(name, i, perm))
        return name

    def qparams(self, t, axis_map: Callable[[int], int] | None = None) -> tuple[str, str, dict]:
        storage = DTYPES[t.dtype].storage
        if len(t.scale) == 1:
            s = self.const(np.array(t.scale[0], np.float32), "s")
            z = self.const(np.array(t.zero_point[0], storage), "z")
            return s, z, {}
        axis = t.quantized_dimension if axis_map is None else axis_map(t.quantized_dimension)
        s = self.const(np.asarray(t.scale, np.float32), "s")
        z = self.const(np.asarray(t.zero_point).astype(storage), "z")
        return s, z, {"axis": int(axis)}

    def dq_input(self, i: int, perm: tuple[int, ...] | None = None) -> str:
        """Input ``i`` dequantized to float (quantized) or as is (not quantized)."""
        t = self.case.inputs[i]
        raw = self.raw_input(i, perm)
        if not t.quantized:
            return raw
        axis_map = (lambda a: list(perm).index(a)) if perm is not None else None
        s, z, kw = self.qparams(t, axis_map)
        return self.node1("DequantizeLinear", [raw, s, z], **kw)

    # ---- outputs
    def q_output(self, value: str, j: int = 0, perm_out: tuple[int, ...] | None = None,
                 model_shape: list[int] | None = None) -> None:
        """Quantize ``value`` into output ``j``; ``perm_out`` maps the model layout back to the case's."""
        o = self.case.outputs[j]
        if o.dtype not in ONNX_TYPES:
            raise Unsupported(f"ONNX has no type for {o.dtype}")
        name = f"out{j}"
        if o.quantized:
            s, z, kw = self.qparams(o)
            self.nodes.append(self.helper.make_node("QuantizeLinear", [value, s, z], [name], **kw))
        else:
            self.nodes.append(self.helper.make_node("Identity", [value], [name]))
        shape = model_shape if model_shape is not None else list(o.shape)
        self.graph_outputs.append(self.helper.make_tensor_value_info(name, self._elem(o.dtype), shape))
        self.outputs.append(GraphOutput(name, perm_out))

    def activation(self, value: str) -> str:
        act = self.case.attrs.get("fused_activation_function", "NONE") or "NONE"
        if act == "NONE":
            return value
        if act == "RELU":
            return self.node1("Relu", [value])
        bounds = {"RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}.get(act)
        if bounds is None:
            raise Unsupported(f"fused activation {act} has no ONNX mapping")
        lo = self.const(np.array(bounds[0], np.float32), "lo")
        hi = self.const(np.array(bounds[1], np.float32), "hi")
        return self.node1("Clip", [value, lo, hi])

    def model(self) -> OnnxModel:
        h = self.helper
        graph = h.make_graph(self.nodes, self.case.id or "case", self.graph_inputs, self.graph_outputs,
                             self.inits)
        m = h.make_model(graph, opset_imports=[h.make_opsetid("", OPSET)], producer_name="qconform")
        m.ir_version = 10
        return OnnxModel(m.SerializeToString(), self.inputs, self.outputs,
                         [n.op_type for n in self.nodes])


_BUILDERS: dict[str, Callable[[Builder], None]] = {}


def onnx_op(*ops: str):
    def deco(fn):
        for op in ops:
            _BUILDERS[op] = fn
        return fn
    return deco


_loaded = False


def _load():
    global _loaded
    if not _loaded:
        for m in sorted(pkgutil.iter_modules(_ops_pkg.__path__), key=lambda m: m.name):
            importlib.import_module(f"{_ops_pkg.__name__}.{m.name}")
        _loaded = True


def supported_ops() -> list[str]:
    _load()
    return sorted(_BUILDERS)


def build(case) -> OnnxModel:
    _load()
    fn = _BUILDERS.get(case.op)
    if fn is None:
        raise Unsupported(f"no ONNX mapping for {case.op}")
    b = Builder(case)
    fn(b)
    return b.model()


# --------------------------------------------------------------------------- helpers

def same_pads(in_hw, k_hw, stride_hw, dil_hw, padding: str) -> list[int]:
    """ONNX pads [top, left, bottom, right] reproducing LiteRT's SAME/VALID padding."""
    if padding == "VALID":
        return [0, 0, 0, 0]
    before, after = [], []
    for n, k, s, d in zip(in_hw, k_hw, stride_hw, dil_hw):
        eff = (k - 1) * d + 1
        out = (n + s - 1) // s
        total = max((out - 1) * s + eff - n, 0)
        before.append(total // 2)
        after.append(total - total // 2)
    return before + after


def hw_attrs(case, k_hw):
    """(stride, dilation, ONNX pads) of a case with NHWC input 0 and kernel k_hw."""
    a = case.attrs
    stride = (int(a.get("stride_h", 1)), int(a.get("stride_w", 1)))
    dil = (int(a.get("dilation_h_factor", 1)), int(a.get("dilation_w_factor", 1)))
    in_hw = case.inputs[0].shape[1:3]
    pads = same_pads(in_hw, k_hw, stride, dil, a.get("padding", "SAME"))
    return stride, dil, pads


