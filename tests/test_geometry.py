"""SAME / VALID geometry measured on LiteRT itself, not on the golden.

``suite/core/geometry.py`` (``out_size``, ``pad_before``, ``conv_geometry``) is shared by the
golden (reference/ops/conv.py) and the ONNX target (targets/onnx_ops/conv.py); pooling has its
own code on each side (``reference.ops.pool.pool_geometry``, ``targets.onnx_model.same_pads``
via ``hw_attrs``), and the ONNX TRANSPOSE_CONV builder computes its pads inline. A padding bug
in a shared piece would hide in both the judge and the judged, so every one of them is checked
here against the LiteRT interpreter (BUILTIN_REF kernels, so no XNNPACK delegation), never
against each other.

How LiteRT's geometry is observed: one float32 .tflite per operator family, built with the
project's own flatbuffer builder (targets.batching.build_tflite_batch, i.e. one
targets.tflite_model subgraph per configuration and one interpreter for all). The spatial axis
under test (H or W) has size n; the batch holds n examples, example p being one-hot at
position p. So

* the output shape after allocation is LiteRT's output size (or LiteRT rejects the model);
* CONV_2D / DEPTHWISE_CONV_2D / TRANSPOSE_CONV use kernel taps 1, 2, 4, ... (2^j): a nonzero
  output of example p at position o is exactly 2^j for the one tap j that read (wrote) p,
  which pins LiteRT's leading padding: lead = o*s + j*d - p (transpose: p*s + j - o);
* MAX_POOL_2D outputs 1 where p lies in the (clipped) window of output o: the leading pads
  that reproduce LiteRT's output are those consistent with it (the pad is unobservable only
  where every window is clipped on both sides).

Grid: n 1..9, kernel 1..5, stride 1..3, dilation 1..3 (conv), SAME / VALID, both axes.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert.interpreter")
onnx = pytest.importorskip("onnx")

from reference import golden
from reference.ops.pool import pool_geometry  # the golden's pooling geometry
from suite.core.case import Case, Tensor
from suite.core.errors import QconformError
from suite.core.geometry import conv_geometry, out_size, pad_before
from targets import onnx_model
from targets.batching import build_tflite_batch

NS = range(1, 10)
KS = range(1, 6)
STRIDES = range(1, 4)
DILATIONS = range(1, 4)
PADDINGS = ("SAME", "VALID")
AXES = ("h", "w")
CONV_OPS = ("CONV_2D", "DEPTHWISE_CONV_2D")

CONV_GRID = list(product(AXES, KS, STRIDES, DILATIONS, PADDINGS))   # 180 per op
POOL_GRID = list(product(AXES, KS, STRIDES, PADDINGS))              # 60 (filter 1..5)
TCONV_GRID = list(product(AXES, KS, STRIDES, PADDINGS))             # 60 (no dilation)


# --------------------------------------------------------------------------- tensors and shapes

def _f32(a, const: bool) -> Tensor:
    a = np.asarray(a, np.float32)
    return Tensor("float32", a.shape, a, None, None, 0, const=const)


def _i8(a, const: bool, axis: int = 0) -> Tensor:
    a = np.asarray(a, np.int8)
    return Tensor("int8", a.shape, a, [1.0], [0], axis, const=const)


def _i8_spec(shape) -> Tensor:
    return Tensor("int8", tuple(shape), None, [1.0], [0], 0)


def _nhwc(axis: str, batch: int, size: int) -> tuple[int, int, int, int]:
    """[batch, size, 1, 1] (axis h) or [batch, 1, size, 1] (axis w)."""
    return (batch, size, 1, 1) if axis == "h" else (batch, 1, size, 1)


def _hw_attrs(axis: str, **per_axis) -> dict:
    """Options with ``per_axis`` values on the axis under test and 1 on the other one."""
    names = {"stride": ("stride_h", "stride_w"), "dilation": ("dilation_h_factor", "dilation_w_factor"),
             "filter": ("filter_height", "filter_width")}
    attrs = {}
    for key, value in per_axis.items():
        h_name, w_name = names[key]
        attrs[h_name], attrs[w_name] = (value, 1) if axis == "h" else (1, value)
    return attrs


def _taps(k: int) -> np.ndarray:
    return 2.0 ** np.arange(k)


def _one_hot(axis: str, n: int) -> np.ndarray:
    """n examples, example p one-hot at position p of the axis under test."""
    return np.eye(n, dtype=np.float32).reshape(_nhwc(axis, n, n))


def _along(axis: str, y: np.ndarray) -> np.ndarray:
    """[batch, size] view of an NHWC output along the axis under test. An empty output is
    [batch, 0] (LiteRT 2.3's MAX_POOL_2D zeroes both spatial dims when one comes out negative)."""
    if y.size == 0:
        return np.zeros((y.shape[0], 0), y.dtype)
    return y[:, :, 0, 0] if axis == "h" else y[:, 0, :, 0]


# --------------------------------------------------------------------------- LiteRT cases

def _conv_case(op: str, axis: str, k: int, s: int, d: int, padding: str) -> Case:
    w = _taps(k).reshape(_nhwc(axis, 1, k))              # CONV_2D OHWI / DEPTHWISE 1HWO, O = I = 1
    attrs = {"padding": padding, "fused_activation_function": "NONE",
             **_hw_attrs(axis, stride=s, dilation=d)}
    if op == "DEPTHWISE_CONV_2D":
        attrs["depth_multiplier"] = 1
    return Case(op=op, inputs=[_f32(np.zeros(_nhwc(axis, 1, 1)), False), _f32(w, True), _f32([0.0], True)],
                outputs=[Tensor("float32", _nhwc(axis, 1, 1))], attrs=attrs, id=f"{op}-{axis}{k}{s}{d}{padding}")


def _pool_case(axis: str, f: int, s: int, padding: str) -> Case:
    attrs = {"padding": padding, "fused_activation_function": "NONE", **_hw_attrs(axis, stride=s, filter=f)}
    return Case(op="MAX_POOL_2D", inputs=[_f32(np.zeros(_nhwc(axis, 1, 1)), False)],
                outputs=[Tensor("float32", _nhwc(axis, 1, 1))], attrs=attrs, id=f"pool-{axis}{f}{s}{padding}")


def _tconv_case(axis: str, k: int, s: int, padding: str) -> Case:
    """output_shape is a runtime input (a dynamic output), so one subgraph serves every size."""
    w = _taps(k).reshape(_nhwc(axis, 1, k))              # OHWI, O = I = 1
    shape = Tensor("int32", (4,), np.ones(4, np.int32), None, None, 0, const=False)
    attrs = {"padding": padding, **_hw_attrs(axis, stride=s)}
    return Case(op="TRANSPOSE_CONV", inputs=[shape, _f32(w, True), _f32(np.zeros(_nhwc(axis, 1, 1)), False)],
                outputs=[Tensor("float32", _nhwc(axis, 1, 1))], attrs=attrs, id=f"tconv-{axis}{k}{s}{padding}")


@dataclass
class Obs:
    """What LiteRT did for one configuration and size: ``y`` is [example p, output position]
    along the axis under test, ``None`` when LiteRT rejected the model (``error``)."""
    y: np.ndarray | None
    error: str = ""

    @property
    def out(self) -> int | None:
        return None if self.y is None else self.y.shape[1]


class _LiteRT:
    """One interpreter over a batch model of ``cases`` (one subgraph + signature each)."""

    def __init__(self, cases: list[Case]):
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
        built = build_tflite_batch(cases)
        self.it = Interpreter(model_content=built.content, num_threads=1,
                              experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        self.runners = [self.it.get_signature_runner(key) for key in built.keys]

    def run(self, k: int, axis: str, **feeds) -> Obs:
        try:
            y = self.runners[k](**feeds)["output0"]
        except (RuntimeError, ValueError) as e:
            return Obs(None, " ".join(str(e).split())[-160:])
        return Obs(_along(axis, np.array(y)))


def _rejected_in_prepare(o: Obs) -> bool:
    return o.y is None and "failed to prepare" in o.error


# --------------------------------------------------------------------------- models of the ops
# (how a padded convolution / pool / transposed convolution maps a one-hot input; the lead
# pad is the only free parameter, so it is what the comparison with LiteRT pins down)

def _conv_sim(n: int, out: int, k: int, s: int, d: int, lead: int) -> np.ndarray:
    p, o, j = np.arange(n)[:, None, None], np.arange(out)[None, :, None], np.arange(k)[None, None, :]
    return (((o * s - lead + j * d) == p) * _taps(k)).sum(-1)


def _tconv_sim(h: int, out: int, k: int, s: int, lead: int) -> np.ndarray:
    p, o, j = np.arange(h)[:, None, None], np.arange(out)[None, :, None], np.arange(k)[None, None, :]
    return (((p * s - lead + j) == o) * _taps(k)).sum(-1)


def _pool_sim(n: int, out: int, f: int, s: int, lead: int) -> np.ndarray:
    """Max of a one-hot input over clipped windows (a window with no in-range tap keeps the
    float kernel's initial value, the lowest float)."""
    p, o = np.arange(n)[:, None], np.arange(out)[None, :]
    start = o * s - lead
    y = ((p >= start) & (p <= start + f - 1)).astype(np.float64)
    empty = (np.maximum(start, 0) > np.minimum(start + f - 1, n - 1)).repeat(n, axis=0)
    y[empty] = np.finfo(np.float32).min
    return y


def _hits(y: np.ndarray, k: int):
    """(example p, output o, tap j) of every nonzero output (2^j: tap j read / wrote p)."""
    p, o = np.nonzero(y)
    j = np.log2(y[p, o])
    assert np.array_equal(j, np.round(j)) and ((j >= 0) & (j < k)).all(), f"not one tap per output: {y}"
    return p, o, j.astype(int)


def _conv_leads(y: np.ndarray, k: int, s: int, d: int) -> set[int]:
    """The leading pads LiteRT's convolution output implies: output o read p with tap j."""
    p, o, j = _hits(y, k)
    return {int(v) for v in o * s + j * d - p}


def _tconv_leads(y: np.ndarray, k: int, s: int) -> set[int]:
    """The leading pads LiteRT's transposed convolution output implies: p wrote o with tap j."""
    p, o, j = _hits(y, k)
    return {int(v) for v in p * s + j - o}


def _pool_leads(y: np.ndarray, n: int, f: int, s: int) -> set[int]:
    return {c for c in range(-(n + f), n + f + 1) if np.array_equal(_pool_sim(n, y.shape[1], f, s, c), y)}


# --------------------------------------------------------------------------- observations

@pytest.fixture(scope="module")
def conv_obs():
    """{(op, axis, k, s, d, padding, n): Obs}: 2 models (one per op), 180 subgraphs, 9 sizes each."""
    res = {}
    for op in CONV_OPS:
        lite = _LiteRT([_conv_case(op, *g) for g in CONV_GRID])
        for i, (axis, k, s, d, padding) in enumerate(CONV_GRID):
            for n in NS:
                res[op, axis, k, s, d, padding, n] = lite.run(i, axis, input0=_one_hot(axis, n))
    return res


@pytest.fixture(scope="module")
def pool_obs():
    """{(axis, f, s, padding, n): Obs}: 1 model, 60 subgraphs, 9 sizes each."""
    lite = _LiteRT([_pool_case(*g) for g in POOL_GRID])
    return {(*g, n): lite.run(i, g[0], input0=_one_hot(g[0], n)) for i, g in enumerate(POOL_GRID) for n in NS}


@pytest.fixture(scope="module")
def tconv_obs():
    """{(axis, k, s, padding, oh, h): Obs}: 1 model, 60 subgraphs; output sizes oh 1..9, each
    with the input size h the golden demands (out_size(oh)) and its neighbours."""
    lite = _LiteRT([_tconv_case(*g) for g in TCONV_GRID])
    res = {}
    for i, (axis, k, s, padding) in enumerate(TCONV_GRID):
        for oh in NS:
            h0 = out_size(oh, k, s, 1, padding)
            for h in sorted({h0 - 1, h0, h0 + 1, 1}):
                if h >= 1:
                    shape = np.array(_nhwc(axis, h, oh), np.int32)
                    res[axis, k, s, padding, oh, h] = lite.run(i, axis, input0=shape, input2=_one_hot(axis, h))
    return res


def _fail(bad: list[str], what: str):
    if bad:
        pytest.fail(f"{len(bad)} {what}:\n" + "\n".join(bad[:40]), pytrace=False)


# --------------------------------------------------------------------------- conv: out_size, pad_before

@pytest.mark.parametrize("op", CONV_OPS)
def test_conv_out_size_matches_litert(conv_obs, op):
    """out_size == LiteRT's output size wherever LiteRT builds the model (0 included: an empty
    output); LiteRT rejects the model exactly where out_size is negative."""
    bad = []
    for (o_op, axis, k, s, d, padding, n), obs in conv_obs.items():
        if o_op != op:
            continue
        case = _conv_case(op, axis, k, s, d, padding)
        stride, dil, pmode = conv_geometry(case)         # the case options, read as the golden does
        i = 0 if axis == "h" else 1
        ours = out_size(n, k, stride[i], dil[i], pmode)
        where = f"{op} axis={axis} n={n} k={k} s={s} d={d} {padding}"
        if obs.y is None:
            if not (_rejected_in_prepare(obs) and ours < 0):
                bad.append(f"{where}: LiteRT rejects ({obs.error}), out_size={ours}")
        elif obs.out != ours or ours < 0:
            bad.append(f"{where}: LiteRT output size {obs.out}, out_size={ours}")
        if obs.y is not None and padding == "SAME":
            assert obs.out >= 1
    _fail(bad, "output sizes differ from LiteRT")


@pytest.mark.parametrize("op", CONV_OPS)
def test_conv_pad_before_matches_litert(conv_obs, op):
    """pad_before == the leading pad LiteRT applied (read off the tap that hit each one-hot
    position), and a convolution with that pad reproduces LiteRT's whole output."""
    bad, observed = [], 0
    for (o_op, axis, k, s, d, padding, n), obs in conv_obs.items():
        if o_op != op or obs.y is None or obs.out == 0:
            continue
        ours = pad_before(n, k, s, d, out_size(n, k, s, d, padding))
        where = f"{op} axis={axis} n={n} k={k} s={s} d={d} {padding}"
        leads = _conv_leads(obs.y, k, s, d)
        if len(leads) > 1:
            bad.append(f"{where}: LiteRT's output implies several leading pads {sorted(leads)}")
        elif leads and leads != {ours}:
            bad.append(f"{where}: LiteRT leading pad {leads.pop()}, pad_before={ours}")
        elif not np.array_equal(_conv_sim(n, obs.out, k, s, d, ours), obs.y):
            bad.append(f"{where}: a convolution with leading pad {ours} does not give LiteRT's output {obs.y.tolist()}")
        observed += bool(leads)
    _fail(bad, "leading pads differ from LiteRT")
    assert observed >= 600, f"only {observed} configurations revealed LiteRT's pad: the probe is too weak"


def test_conv_valid_no_output(conv_obs):
    """Where VALID leaves no output, LiteRT either rejects the model in Prepare (its
    ComputeOutSize is negative) or builds a zero-size output (ComputeOutSize == 0); out_size
    then returns that very value, and the golden's _check_out_hw refuses both (< 1)."""
    rejected = empty = 0
    for (op, axis, k, s, d, padding, n), obs in conv_obs.items():
        if out_size(n, k, s, d, padding) >= 1:
            continue
        assert padding == "VALID" and (k - 1) * d + 1 > n
        if obs.y is None:
            assert _rejected_in_prepare(obs), obs.error
            rejected += 1
        else:
            assert obs.out == 0
            empty += 1
        case = _conv_case(op, axis, k, s, d, padding)      # the same case in int8, to the golden
        w_axis = 0 if op == "CONV_2D" else 3
        case.inputs = [_i8(np.zeros(_nhwc(axis, 1, n)), False), _i8(case.inputs[1].data, True, w_axis),
                       Tensor("int32", (1,), np.zeros(1, np.int32), [1.0], [0], 0, const=True)]
        case.outputs = [_i8_spec(_nhwc(axis, 1, 1))]
        with pytest.raises(QconformError, match="smaller than the dilated kernel"):
            golden(case, "tflite-ref-double")
    assert rejected and empty


def test_onnx_conv_pads_match_litert(conv_obs):
    """The ONNX target's Conv (targets/onnx_ops/conv.py, _conv_pads): its leading pad is
    LiteRT's, and ONNX's own output-size rule (onnx shape inference) on its pads gives
    LiteRT's size, so an ONNX Conv with those pads reproduces LiteRT's output."""
    from onnx import shape_inference
    bad = []
    for (op, axis, k, s, d, padding, n), obs in conv_obs.items():
        if obs.y is None or obs.out < 1:
            continue
        lite = _conv_case(op, axis, k, s, d, padding)
        w_axis = 0 if op == "CONV_2D" else 3
        case = Case(op=op, inputs=[_i8_spec(_nhwc(axis, 1, n)), _i8(lite.inputs[1].data, True, w_axis)],
                    outputs=[_i8_spec(_nhwc(axis, 1, obs.out))], attrs=lite.attrs, id="onnx")
        m = shape_inference.infer_shapes(onnx.load_from_string(onnx_model.build(case).content))
        node = next(nd for nd in m.graph.node if nd.op_type == "Conv")
        attrs = {a.name: list(a.ints) for a in node.attribute if a.ints}
        i = 0 if axis == "h" else 1                       # NCHW spatial index
        lead = attrs.get("pads", [0, 0, 0, 0])[i]
        onnx_out = _inferred_dim(m, node.output[0], 2 + i)
        where = f"{op} axis={axis} n={n} k={k} s={s} d={d} {padding}"
        if onnx_out != obs.out or not np.array_equal(_conv_sim(n, onnx_out, k, s, d, lead), obs.y):
            bad.append(f"{where}: ONNX pads {attrs.get('pads')} (output size {onnx_out}), "
                       f"LiteRT output size {obs.out}, output {obs.y.tolist()}")
    _fail(bad, "ONNX Conv geometries differ from LiteRT")


def _inferred_dim(m, name: str, dim: int) -> int:
    for vi in list(m.graph.value_info) + list(m.graph.output):
        if vi.name == name:
            return vi.type.tensor_type.shape.dim[dim].dim_value
    raise AssertionError(f"onnx shape inference left {name} without a shape")


# --------------------------------------------------------------------------- MAX_POOL_2D

def test_golden_pool_geometry_matches_litert(pool_obs):
    """reference.ops.pool.pool_geometry: LiteRT's output size, and a leading pad that
    reproduces LiteRT's windows; it raises where LiteRT leaves no output."""
    bad, observed = [], 0
    for (axis, f, s, padding, n), obs in pool_obs.items():
        case = _pool_case(axis, f, s, padding)
        where = f"MAX_POOL_2D axis={axis} n={n} f={f} s={s} {padding}"
        try:
            ours = pool_geometry(case, n, f, s, axis)
        except QconformError as e:
            ours = e
        if obs.y is None or obs.out == 0:
            if not isinstance(ours, QconformError):
                bad.append(f"{where}: LiteRT gives no output ({obs.error or 'size 0'}), pool_geometry={ours}")
            continue
        if isinstance(ours, QconformError):
            bad.append(f"{where}: LiteRT output size {obs.out}, pool_geometry raises {ours}")
            continue
        out, lead = ours
        leads = _pool_leads(obs.y, n, f, s)
        if out != obs.out:
            bad.append(f"{where}: LiteRT output size {obs.out}, pool_geometry {out}")
        elif lead not in leads:
            bad.append(f"{where}: LiteRT's windows fit leading pads {sorted(leads)}, pool_geometry {lead}")
        observed += len(leads) == 1
    _fail(bad, "pool geometries differ from LiteRT")
    assert observed >= 300, f"only {observed} configurations revealed LiteRT's pool pad"


def test_pool_valid_no_output(pool_obs):
    """VALID with the window larger than the input: LiteRT's MAX_POOL_2D builds a zero-size
    output (it does not reject the model); the golden refuses such a case."""
    for (axis, f, s, padding, n), obs in pool_obs.items():
        if padding == "VALID" and f > n:
            assert obs.y is not None and obs.out == 0, (axis, f, s, n, obs.error)
        else:
            assert obs.y is not None and obs.out >= 1, (axis, f, s, padding, n, obs.error)


def test_onnx_pool_pads_match_litert(pool_obs):
    """The ONNX target's MaxPool (targets/onnx_ops/pool.py via onnx_model.hw_attrs / same_pads):
    ONNX's output size on its pads is LiteRT's, and its windows are LiteRT's."""
    from onnx import shape_inference
    bad = []
    for (axis, f, s, padding, n), obs in pool_obs.items():
        if obs.y is None or obs.out < 1:
            continue
        lite = _pool_case(axis, f, s, padding)
        case = Case(op="MAX_POOL_2D", inputs=[_i8_spec(_nhwc(axis, 1, n))],
                    outputs=[_i8_spec(_nhwc(axis, 1, obs.out))], attrs=lite.attrs, id="onnx")
        m = shape_inference.infer_shapes(onnx.load_from_string(onnx_model.build(case).content))
        node = next(nd for nd in m.graph.node if nd.op_type in ("MaxPool", "GlobalMaxPool"))
        attrs = {a.name: list(a.ints) for a in node.attribute if a.ints}
        i = 0 if axis == "h" else 1
        lead = attrs.get("pads", [0, 0, 0, 0])[i]
        onnx_out = _inferred_dim(m, node.output[0], 2 + i)
        where = f"MAX_POOL_2D axis={axis} n={n} f={f} s={s} {padding}"
        if node.op_type == "GlobalMaxPool":
            ok = onnx_out == obs.out == 1 and (obs.y == 1).all()
        else:
            ok = onnx_out == obs.out and np.array_equal(_pool_sim(n, onnx_out, f, s, lead), obs.y)
        if not ok:
            bad.append(f"{where}: ONNX {node.op_type} pads {attrs.get('pads')} (output size {onnx_out}), "
                       f"LiteRT output size {obs.out}, windows {obs.y.tolist()}")
    _fail(bad, "ONNX pool geometries differ from LiteRT")


# --------------------------------------------------------------------------- TRANSPOSE_CONV

def test_transpose_conv_geometry_matches_litert(tconv_obs):
    """TRANSPOSE_CONV: LiteRT accepts an input size h exactly when h == out_size(oh, ...) (the
    golden's rule, reference/ops/conv.py), and its leading pad is pad_before(oh, k, s, 1, h)."""
    bad, observed = [], 0
    for (axis, k, s, padding, oh, h), obs in tconv_obs.items():
        case = _tconv_case(axis, k, s, padding)
        stride, _, pmode = conv_geometry(case)
        i = 0 if axis == "h" else 1
        want_h = out_size(oh, k, stride[i], 1, pmode)
        where = f"TRANSPOSE_CONV axis={axis} out={oh} in={h} k={k} s={s} {padding}"
        if obs.y is None:
            if h == want_h:
                bad.append(f"{where}: LiteRT rejects ({obs.error}), out_size(out)={want_h} == in")
            continue
        if h != want_h:
            bad.append(f"{where}: LiteRT accepts it, out_size(out)={want_h} != in")
            continue
        assert obs.out == oh
        ours = pad_before(oh, k, stride[i], 1, h)
        leads = _tconv_leads(obs.y, k, s)
        if len(leads) > 1 or (leads and leads != {ours}):
            bad.append(f"{where}: LiteRT leading pad(s) {sorted(leads)}, pad_before={ours}")
        elif not np.array_equal(_tconv_sim(h, oh, k, s, ours), obs.y):
            bad.append(f"{where}: a transposed convolution with leading pad {ours} does not give "
                       f"LiteRT's output {obs.y.tolist()}")
        observed += bool(leads)
    _fail(bad, "TRANSPOSE_CONV geometries differ from LiteRT")
    assert observed >= 200, f"only {observed} configurations revealed LiteRT's transpose pad"


def test_onnx_transpose_conv_pads_match_litert(tconv_obs):
    """The ONNX target's ConvTranspose (pads and output_padding computed in
    targets/onnx_ops/conv.py itself): ONNX's output size is LiteRT's and a ConvTranspose with
    its leading pad reproduces LiteRT's output."""
    from onnx import shape_inference
    bad = []
    for (axis, k, s, padding, oh, h), obs in tconv_obs.items():
        if obs.y is None:
            continue
        lite = _tconv_case(axis, k, s, padding)
        shape = Tensor("int32", (4,), np.array(_nhwc(axis, 1, oh), np.int32), None, None, 0, const=True)
        case = Case(op="TRANSPOSE_CONV",
                    inputs=[shape, _i8(lite.inputs[1].data, True), _i8_spec(_nhwc(axis, 1, h))],
                    outputs=[_i8_spec(_nhwc(axis, 1, oh))], attrs=lite.attrs, id="onnx")
        m = shape_inference.infer_shapes(onnx.load_from_string(onnx_model.build(case).content))
        node = next(nd for nd in m.graph.node if nd.op_type == "ConvTranspose")
        attrs = {a.name: list(a.ints) for a in node.attribute if a.ints}
        i = 0 if axis == "h" else 1
        lead = attrs.get("pads", [0, 0, 0, 0])[i]
        onnx_out = _inferred_dim(m, node.output[0], 2 + i)
        if onnx_out != oh or not np.array_equal(_tconv_sim(h, oh, k, s, lead), obs.y):
            bad.append(f"TRANSPOSE_CONV axis={axis} out={oh} in={h} k={k} s={s} {padding}: ONNX pads "
                       f"{attrs.get('pads')} output_padding {attrs.get('output_padding')} (output size "
                       f"{onnx_out}), LiteRT output {obs.y.tolist()}")
    _fail(bad, "ONNX ConvTranspose geometries differ from LiteRT")
