"""The graph golden: a whole quantized model, op by op, with the per-op golden functions.

:func:`run_graph` takes a :class:`suite.core.graph.Graph` (what the harvest read from a model)
and its inputs, and runs its layers in topological order: a ``case`` layer through
:func:`reference.golden` under the scheme given (the same function and scheme a single case is
judged with), a ``float`` layer by its runtime's documented QDQ semantics (ONNX
DequantizeLinear, the float op in float32, QuantizeLinear: :mod:`reference.onnx_ops`). It
returns every tensor of the graph. :func:`layer_golden` is one layer on inputs given (a
target's own tensors, for the layer's own error).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from reference import onnx_ops
from reference.registry import golden
from suite.core.dtypes import DTYPES
from suite.core.errors import QconformError
from suite.core.graph import CASE, Graph, Layer


def run_graph(graph: Graph, feeds: dict[str, np.ndarray], scheme=None,
              stop: int | None = None) -> dict[str, np.ndarray]:
    """Every tensor of ``graph`` (graph layout) for the graph inputs ``feeds``, layers in order
    (up to layer index ``stop``, excluded, if given)."""
    env = {name: np.asarray(feeds[name]) for name in graph.inputs}
    env.update({name: np.asarray(feeds[name]) for name in graph.cuts if name in feeds})   # (seeded or a target's)
    for ly in graph.layers[:stop]:
        missing = [t for t in ly.inputs if t is not None and t not in env]
        if missing:
            raise QconformError(f"layer {ly.index} ({ly.node}) needs tensor(s) {', '.join(missing)} that no "
                                f"earlier layer computes", field="layers", rule="topological order")
        outs = layer_golden(ly, [None if t is None else env[t] for t in ly.inputs], scheme)
        env.update(zip(ly.outputs, outs))
    return env


def layer_golden(ly: Layer, inputs: list[np.ndarray | None], scheme=None) -> list[np.ndarray]:
    """The outputs of layer ``ly`` on ``inputs`` (one array per graph input of the layer, None
    for the case's constants), in the graph's layout."""
    if ly.kind == CASE:
        return golden(with_inputs(ly, inputs), scheme)
    return [_float_layer(ly, [x for x in inputs if x is not None])]


def with_inputs(ly: Layer, inputs: list[np.ndarray | None]):
    """The layer's case with the given tensors as its runtime inputs (padded as the layer says)."""
    case = ly.case
    new = []
    for i, (t, x) in enumerate(zip(case.inputs, inputs)):
        if x is None:
            new.append(t)
            continue
        pad = ly.pads[i] if ly.pads else None
        if pad is not None:
            x = np.pad(np.asarray(x), pad, constant_values=int(t.zero_point[0]))
        arr = np.asarray(x).astype(DTYPES[t.dtype].storage, copy=False)
        if arr.shape != tuple(t.shape):
            raise QconformError(f"layer {ly.index} ({ly.node}) input {i} has shape {list(arr.shape)}, its case "
                                f"{list(t.shape)}", field=f"inputs[{i}]", rule="a layer's inputs keep their shapes")
        new.append(dataclasses.replace(t, data=arr))
    return dataclasses.replace(case, inputs=new)


# --------------------------------------------------------------------------- QDQ float layers

def _float_layer(ly: Layer, xs: list[np.ndarray]) -> np.ndarray:
    vals = []
    for x, q in zip(xs, ly.float_inputs):
        if q.scale is None:
            vals.append(np.asarray(x, dtype=np.float32))
        else:
            s, z = _qparams(q)
            vals.append(onnx_ops.dequantize_linear(x, s, z, axis=q.quantized_dimension))
    y = vals[0]
    for st in ly.steps:
        y = _STEPS[st["op"]](y, vals, st)
    o = ly.out
    s, z = _qparams(o)
    return onnx_ops.quantize_linear(y.astype(np.float32), s, z, axis=o.quantized_dimension,
                                    dtype=o.dtype).astype(DTYPES[o.dtype].storage)


def _qparams(t) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(t.scale, dtype=np.float32)
    z = np.asarray(t.zero_point, dtype=np.int64)
    return (s.reshape(()), z.reshape(())) if s.size == 1 else (s, z)


def _const(st) -> np.float32:
    return np.float32(st["value"])


def _hard_sigmoid(y, vals, st):
    a, b = np.float32(st.get("alpha", 0.2)), np.float32(st.get("beta", 0.5))
    return np.clip(a * y + b, np.float32(0), np.float32(1)).astype(np.float32)


def _max_pool(y, vals, st):
    """NHWC max pool with ONNX pads [top, left, bottom, right] (padding never wins a max)."""
    kh, kw = st["kernel"]
    sh, sw = st["strides"]
    t, left, b, r = st.get("pads", (0, 0, 0, 0))
    yp = np.pad(y, ((0, 0), (t, b), (left, r), (0, 0)), constant_values=-np.inf)
    oh, ow = (yp.shape[1] - kh) // sh + 1, (yp.shape[2] - kw) // sw + 1
    out = np.full((y.shape[0], oh, ow, y.shape[3]), -np.inf, np.float32)
    for i in range(kh):
        for j in range(kw):
            out = np.maximum(out, yp[:, i:i + (oh - 1) * sh + 1:sh, j:j + (ow - 1) * sw + 1:sw, :])
    return out


def _softmax(y, vals, st):
    ax = st.get("axis", -1)
    e = np.exp(y - y.max(axis=ax, keepdims=True), dtype=np.float32)
    return (e / e.sum(axis=ax, keepdims=True, dtype=np.float32)).astype(np.float32)


def _avg_pool(y, vals, st):
    """NHWC average pool with ONNX pads [top, left, bottom, right]; count_include_pad 0 divides by
    the in-bounds taps, 1 by the whole window (ONNX AveragePool)."""
    kh, kw = st["kernel"]
    sh, sw = st["strides"]
    t, left, b, r = st.get("pads", (0, 0, 0, 0))
    yp = np.pad(y, ((0, 0), (t, b), (left, r), (0, 0)))
    ones = np.pad(np.ones((1,) + y.shape[1:3] + (1,), np.float32), ((0, 0), (t, b), (left, r), (0, 0)))
    if st.get("count_include_pad", 0):
        ones = np.ones_like(ones)
    oh, ow = (yp.shape[1] - kh) // sh + 1, (yp.shape[2] - kw) // sw + 1
    acc = np.zeros((y.shape[0], oh, ow, y.shape[3]), np.float32)
    cnt = np.zeros((1, oh, ow, 1), np.float32)
    for i in range(kh):
        for j in range(kw):
            acc = acc + yp[:, i:i + (oh - 1) * sh + 1:sh, j:j + (ow - 1) * sw + 1:sw, :]
            cnt = cnt + ones[:, i:i + (oh - 1) * sh + 1:sh, j:j + (ow - 1) * sw + 1:sw, :]
    return (acc / cnt).astype(np.float32)


def _nary(fn):
    def step(y, vals, st):
        out = vals[st["inputs"][0]]
        for i in st["inputs"][1:]:
            out = fn(out, vals[i])
        return out.astype(np.float32)
    return step


_STEPS = {
    "HardSigmoid": _hard_sigmoid,
    "Div": lambda y, vals, st: (y / (_const(st) if "value" in st else vals[st["input"]])).astype(np.float32),
    "Mul": lambda y, vals, st: (y * (_const(st) if "value" in st else vals[st["input"]])).astype(np.float32),
    "Add": lambda y, vals, st: (y + (_const(st) if "value" in st else vals[st["input"]])).astype(np.float32),
    "Relu": lambda y, vals, st: np.maximum(y, np.float32(0)),
    "Clip": lambda y, vals, st: np.clip(y, np.float32(st.get("min", -np.inf)), np.float32(st.get("max", np.inf))),
    "Sigmoid": lambda y, vals, st: (np.float32(1) / (np.float32(1) + np.exp(-y, dtype=np.float32))).astype(np.float32),
    "MaxPool": _max_pool,
    "Softmax": _softmax,
    "GlobalAveragePool": lambda y, vals, st: np.mean(y, axis=(1, 2), keepdims=True, dtype=np.float32),
    "AveragePool": _avg_pool,
    "LeakyRelu": lambda y, vals, st: np.where(y >= 0, y, np.float32(st.get("alpha", 0.01)) * y).astype(np.float32),
    "Concat": lambda y, vals, st: np.concatenate([vals[i] for i in st["inputs"]], axis=st["axis"]),
    "Max": _nary(np.maximum),
    "Min": _nary(np.minimum),
    "Reshape": lambda y, vals, st: y.reshape(st["shape"]),
    "Flatten": lambda y, vals, st: y.reshape(st["shape"]),
    "Squeeze": lambda y, vals, st: y.reshape(st["shape"]),
    "Unsqueeze": lambda y, vals, st: y.reshape(st["shape"]),
    "Transpose": lambda y, vals, st: np.transpose(y, st["perm"]),
}
FLOAT_OPS = tuple(_STEPS)
