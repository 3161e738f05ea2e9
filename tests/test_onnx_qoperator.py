"""Every quantized ONNX form (#29): QOperator nodes (QLinearConv, QLinearMatMul and ONNX Runtime's
com.microsoft QLinear* ops) as the spec ops they equal or as float layers of their specification,
Concat / LeakyRelu / Max / Min / Split in QDQ regions, dynamic and weight-only quantization named
in coverage, and symbolic input dimensions: one usage error, or ``--model-input-shape``.

The models are small ones the tests build (onnx.helper, or ONNX Runtime's quantizers on a tiny
float model), the PP-OCR classifier ONNX Runtime's quantizer writes in the QOperator form
(tests/model_zoo.py), and onnx's own ``test_qlinearconv`` backend case."""

from __future__ import annotations

import numpy as np
import pytest

from reference.graph import layer_golden, run_graph
from suite.core.errors import QconformError
from suite.core.graph import CASE
from suite.models.harvest import harvest_model, model_feeds
from suite.models.onnx import parse_input_shapes
from suite.models.runner import can_run, run_model
from suite.models.verdicts import model_feeds as to_model_feeds
from suite.models.verdicts import to_graph_layout
from tests import model_zoo
from tests.inprocess import run_inprocess

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime.quantization")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper as nh  # noqa: E402

pytest_plugins = "pytester"
SCHEME = "ort-fp32-rne"
TINY_OPS = ["Conv", "LeakyRelu", "AveragePool", "MaxPool", "Concat", "Max", "Min", "Sigmoid", "Split", "Add", "Mul",
            "GlobalAveragePool", "Flatten", "MatMul"]


def _tiny_float(path, width=8) -> None:
    """Conv, LeakyRelu, both pools, Concat, Max, Min, Sigmoid, Split, Add, Mul, GlobalAveragePool,
    Flatten, MatMul: each op ONNX Runtime's QOperator quantizer has a QLinear form for, and some it has not."""
    rng = np.random.default_rng(0)
    inits = [nh.from_array(rng.normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32), "w1"),
             nh.from_array(rng.normal(0, 0.1, (4,)).astype(np.float32), "b1"),
             nh.from_array(rng.normal(0, 0.3, (8, 5)).astype(np.float32), "w2"),
             nh.from_array(np.array([4, 4], np.int64), "split")]
    nodes = [h.make_node("Conv", ["x", "w1", "b1"], ["a"], pads=[1, 1, 1, 1]),
             h.make_node("LeakyRelu", ["a"], ["b"], alpha=0.1),
             h.make_node("AveragePool", ["b"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("MaxPool", ["b"], ["q"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("Concat", ["p", "q"], ["r"], axis=1),
             h.make_node("Max", ["p", "q"], ["mx"]),
             h.make_node("Min", ["p", "q"], ["mn"]),
             h.make_node("Sigmoid", ["mx"], ["sg"]),
             h.make_node("Split", ["r", "split"], ["r1", "r2"], axis=1),
             h.make_node("Add", ["r1", "sg"], ["ad"]),
             h.make_node("Mul", ["r2", "mn"], ["mu"]),
             h.make_node("Concat", ["ad", "mu"], ["cc"], axis=1),
             h.make_node("GlobalAveragePool", ["cc"], ["gp"]),
             h.make_node("Flatten", ["gp"], ["f"]),
             h.make_node("MatMul", ["f", "w2"], ["y"])]
    w = width if isinstance(width, int) else "width"
    g = h.make_graph(nodes, "tiny", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, w])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 5])], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), str(path))


def _quantized(tmp, fmt: str):
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(1)
            self.it = iter([{"x": rng.uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.it, None)

    src, dst = tmp / "tiny.f32.onnx", tmp / f"tiny.{fmt}.onnx"
    _tiny_float(src)
    quantize_static(str(src), str(dst), Reader(), quant_format=getattr(QuantFormat, fmt), op_types_to_quantize=TINY_OPS)
    return dst


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("tiny")
    return {fmt: _quantized(tmp, fmt) for fmt in ("QOperator", "QDQ")}


def _own_errors(graph, seed=1) -> dict:
    """Per layer: max |ORT CPU - the layer's golden on ORT's own inputs of it| in LSB."""
    feeds = model_feeds(graph, None, seed)
    tensors = [o for ly in graph.layers for o in ly.outputs]
    got, why = run_model(graph.path, "ort", to_model_feeds(graph, feeds), tensors)
    assert got is not None, why
    got = {**to_graph_layout(graph, got), **feeds}
    own = {}
    for ly in graph.layers:
        want = layer_golden(ly, [None if t is None else got[t] for t in ly.inputs], SCHEME)[0]
        own[(ly.index, ly.op)] = int(np.abs(got[ly.outputs[0]].astype(int) - want.astype(int)).max())
    return own


def test_qoperator_model_from_ort_quantizer_is_layers_of_spec_ops_and_ort_is_their_golden(tiny):
    """quantize_static(QOperator) writes QLinearConv, QLinearLeakyRelu, QLinearAveragePool, QLinearConcat,
    QLinearSigmoid, QLinearAdd, QLinearMul, QLinearGlobalAveragePool, QLinearMatMul, and MaxPool, Split and
    Flatten on the codes: each is a case of the spec op it equals or (its scales differ from what the
    spec op requires) a float layer of its contrib specification; nothing is left out, and under
    ort-fp32-rne every layer's golden on ORT's own inputs is ORT's output to the bit."""
    g = harvest_model(tiny["QOperator"], scheme=SCHEME)
    m = onnx.load(str(tiny["QOperator"]))
    qops = {n.op_type for n in m.graph.node if n.op_type.startswith("QLinear")}
    assert {"QLinearConv", "QLinearLeakyRelu", "QLinearConcat", "QLinearSigmoid", "QLinearAveragePool",
            "QLinearMatMul", "QLinearAdd", "QLinearMul", "QLinearGlobalAveragePool"} <= qops
    cov = g.coverage()
    assert not g.not_covered, g.not_covered
    assert cov["cases_by_op"] == {"CONV_2D": 1, "LEAKY_RELU": 1, "MAX_POOL_2D": 1, "SLICE": 2, "ADD": 1, "MUL": 1,
                                  "MEAN": 1, "RESHAPE": 1, "FULLY_CONNECTED": 1, "QuantizeLinear": 1}
    assert cov["float_layers"] == {"QLinearAveragePool": 1, "QLinearConcat": 2, "QLinearSigmoid": 1, "Max": 1, "Min": 1}
    by_node = {ly.model_op: ly for ly in g.layers}
    assert by_node["QLinearMatMul"].case.op == "FULLY_CONNECTED" and by_node["QLinearConv"].case.op == "CONV_2D"
    own = _own_errors(g)
    assert len(own) == 17 and not {k: v for k, v in own.items() if v}, own
    # the QNN EP takes the QDQ form only: htp is judged by its cases, not a whole-model error
    assert g.form == "qoperator" and "QOperator form" in can_run("onnx", "htp", g.form)
    assert can_run("onnx", "ort", g.form) is None and can_run("onnx", "htp", "qdq") is None


def test_qdq_concat_leaky_relu_max_min_split_from_ort_quantizer(tiny):
    """The same float model in QDQ: LeakyRelu is LEAKY_RELU, each Split output a SLICE; Concat, Max
    and Min whose inputs ORT's quantizer gave different scales are float layers (CONCATENATION,
    MAXIMUM and MINIMUM hold one scale)."""
    g = harvest_model(tiny["QDQ"], scheme=SCHEME)
    assert g.form == "qdq"
    cov = g.coverage()
    assert not g.not_covered, g.not_covered
    assert cov["cases_by_op"]["LEAKY_RELU"] == 1 and cov["cases_by_op"]["SLICE"] == 2
    assert cov["float_layers"] == {"Concat": 2, "Max": 1, "Min": 1, "Sigmoid": 1}
    own = _own_errors(g)
    # QDQ AveragePool (one scale in and out: AVERAGE_POOL_2D) is the one layer ORT rounds otherwise
    assert {k for k, v in own.items() if v} <= {k for k in own if k[1] == "AVERAGE_POOL_2D"}, own


def _qdq_shared_scale(path) -> None:
    """A hand-made QDQ model whose Concat, Max, Min and Split keep one scale and zero point, and a LeakyRelu."""
    s, z = nh.from_array(np.array(0.05, np.float32), "s"), nh.from_array(np.array(3, np.int8), "z")
    s2, z2 = nh.from_array(np.array(0.03, np.float32), "s2"), nh.from_array(np.array(-20, np.int8), "z2")
    split = nh.from_array(np.array([2, 2], np.int64), "split")

    def q(x, y, sc="s", zp="z"):
        return h.make_node("QuantizeLinear", [x, sc, zp], [y])

    def dq(x, y, sc="s", zp="z"):
        return h.make_node("DequantizeLinear", [x, sc, zp], [y])

    nodes = [q("x", "xq"), dq("xq", "xd"),
             h.make_node("LeakyRelu", ["xd"], ["l"], alpha=0.2), q("l", "lq", "s2", "z2"),
             h.make_node("Split", ["xd", "split"], ["p0", "p1"], axis=1), q("p0", "p0q"), q("p1", "p1q"),
             dq("p0q", "p0d"), dq("p1q", "p1d"),
             h.make_node("Max", ["p0d", "p1d"], ["mx"]), q("mx", "mxq"),
             h.make_node("Min", ["p0d", "p1d"], ["mn"]), q("mn", "mnq"),
             dq("mxq", "mxd"), dq("mnq", "mnd"),
             h.make_node("Concat", ["mxd", "mnd"], ["c"], axis=1), q("c", "cq"),
             dq("cq", "y"), dq("lq", "y2", "s2", "z2")]
    g = h.make_graph(nodes, "qdq", [h.make_tensor_value_info("x", T.FLOAT, [1, 4, 3, 5])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 3, 5]),
                      h.make_tensor_value_info("y2", T.FLOAT, [1, 4, 3, 5])], [s, z, s2, z2, split])
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), str(path))


def test_qdq_regions_of_one_scale_map_to_concatenation_maximum_minimum_slice(tmp_path):
    p = tmp_path / "shared.onnx"
    _qdq_shared_scale(p)
    g = harvest_model(p, scheme=SCHEME)
    assert not g.not_covered and all(ly.kind == CASE for ly in g.layers)
    assert [ly.op for ly in g.layers] == ["QuantizeLinear", "LEAKY_RELU", "SLICE", "SLICE", "MAXIMUM", "MINIMUM",
                                          "CONCATENATION"]
    cat = g.layers[-1].case
    assert cat.attrs["axis"] == 3 and cat.outputs[0].shape == (1, 3, 5, 4)   # NCHW axis 1 held NHWC
    sl = g.layers[3].case   # the second Split output: channels 2..3, in NHWC
    assert sl.inputs[1].data.tolist() == [0, 0, 0, 2] and sl.inputs[2].data.tolist() == [1, 3, 5, 2]
    assert not {k: v for k, v in _own_errors(g).items() if v}


def test_uint8_qoperator_layers_take_the_qnn_table_where_it_has_the_op(tmp_path):
    """uint8 activations: CONV_2D, DEPTHWISE_CONV_2D, ADD, ... are cases of the qnn table (the one
    with uint8 activations); an op it lacks with no float form is named not covered with that reason."""
    x = nh.from_array(np.array(0.02, np.float32), "xs")
    xz = nh.from_array(np.array(128, np.uint8), "xz")
    rng = np.random.default_rng(0)
    w = nh.from_array(rng.integers(-127, 128, (4, 3, 1, 1)).astype(np.int8), "w")
    dw = nh.from_array(rng.integers(-127, 128, (4, 1, 3, 3)).astype(np.int8), "dw")
    ws, wz = nh.from_array(np.full(4, 0.01, np.float32), "ws"), nh.from_array(np.zeros(4, np.int8), "wz")
    ys, yz = nh.from_array(np.array(0.05, np.float32), "ys"), nh.from_array(np.array(120, np.uint8), "yz")
    nodes = [h.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             h.make_node("QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["c"]),
             h.make_node("QLinearConv", ["c", "ys", "yz", "dw", "ws", "wz", "ys", "yz"], ["d"], group=4,
                         pads=[1, 1, 1, 1]),
             h.make_node("QLinearAdd", ["c", "ys", "yz", "d", "ys", "yz", "xs", "xz"], ["a"], domain="com.microsoft"),
             h.make_node("QLinearMatMul", ["a", "xs", "xz", "a", "xs", "xz", "ys", "yz"], ["m"]),
             h.make_node("DequantizeLinear", ["m", "ys", "yz"], ["y"])]
    g = h.make_graph(nodes, "u8", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 6, 6])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 6, 6])], [x, xz, w, dw, ws, wz, ys, yz])
    p = tmp_path / "u8.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("com.microsoft", 1)]), str(p))
    graph = harvest_model(p, scheme=SCHEME)
    assert [(ly.op, ly.case.spec) for ly in graph.layers] == [
        ("QuantizeLinear", "onnx-qdq"), ("CONV_2D", "qnn"), ("DEPTHWISE_CONV_2D", "qnn"), ("ADD", "qnn")]
    assert graph.layers[1].case.inputs[0].dtype == "uint8"
    (why,) = graph.not_covered["QLinearMatMul"]   # of two activations: BATCH_MATMUL, no uint8 row
    assert "uint8 activations" in why and "has no BATCH_MATMUL" in why and "no float" in why, why


# ------------------------------------------------------------------ dynamic and weight-only quantization

def test_dynamic_quantization_and_a_symbolic_width(tmp_path):
    """quantize_dynamic (ConvInteger, MatMulInteger fed by DynamicQuantizeLinear) on a model with a
    symbolic input width: without a shape one error naming the input and the option; with
    --model-input-shape every dynamic node named not covered with the reason, no layer made up."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    src, dst = tmp_path / "sym.f32.onnx", tmp_path / "sym.dyn.onnx"
    _tiny_float(src, width="width")
    quantize_dynamic(str(src), str(dst), op_types_to_quantize=["Conv", "MatMul"], weight_type=QuantType.QUInt8)
    with pytest.raises(QconformError) as e:
        harvest_model(dst)
    msg = str(e.value)
    assert e.value.field == "graph.input[0]" and "'x'" in msg and "'width' (axis 3)" in msg
    assert "--model-input-shape x=1,3,8,width" in msg
    g = harvest_model(dst, input_shapes=parse_input_shapes(["x=1,3,8,8"]))
    assert not g.layers and g.specs["x"].shape == (1, 8, 8, 3)
    nc = g.not_covered
    dynamic = {"ConvInteger", "MatMulInteger", "DynamicQuantizeLinear"}
    assert dynamic <= set(nc), nc
    assert all("dynamic quantization" in why for op in dynamic for why in nc[op])
    # the model's float ops the dynamic quantization left float are named too: no node drops out of coverage
    assert all("a float op outside any quantized region" in why for op in set(nc) - dynamic for why in nc[op])
    computing = [n for n in onnx.load(str(dst)).graph.node if n.op_type not in ("Constant", "Shape", "Identity")]
    assert sum(len(v) for v in nc.values()) == len(computing)
    assert "outputs the int32 sums, not a requantized code" in nc["ConvInteger"][0]
    with pytest.raises(QconformError, match="fixed at 3 in the model"):
        harvest_model(dst, input_shapes={"x": (1, 4, 8, 8)})
    with pytest.raises(QconformError, match="names no input of the model: y"):
        harvest_model(dst, input_shapes={"y": (1, 5)})
    for bad in ("x", "x=1,3,0,8", "=1,2", "x=1,a"):
        with pytest.raises(QconformError, match="NAME=D0,D1"):
            parse_input_shapes([bad])


def test_weight_only_quantization_is_named(tmp_path):
    """int8 weights dequantized to float for a float MatMul (no quantized activation): named
    weight-only in coverage, not dropped."""
    wq = nh.from_array(np.arange(-6, 6, dtype=np.int8).reshape(4, 3), "wq")
    s, z = nh.from_array(np.array(0.1, np.float32), "s"), nh.from_array(np.array(0, np.int8), "z")
    nodes = [h.make_node("DequantizeLinear", ["wq", "s", "z"], ["w"]), h.make_node("MatMul", ["x", "w"], ["y"])]
    g = h.make_graph(nodes, "wo", [h.make_tensor_value_info("x", T.FLOAT, [2, 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [2, 3])], [wq, s, z])
    p = tmp_path / "wo.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), str(p))
    graph = harvest_model(p)
    (why,) = graph.not_covered["MatMul"]
    assert "weight-only quantization" in why and "wq" in why and not graph.layers


def test_symbolic_dimension_is_a_usage_error_and_the_option_sets_it(tmp_path, pytester):
    """pytest --model on a model with a symbolic width: status 4, one line naming the input and the
    option, no INTERNALERROR; --model-input-shape makes it run."""
    p = tmp_path / "sym.onnx"
    _tiny_float(tmp_path / "sym.f32.onnx", width="width")
    from onnxruntime.quantization import QuantFormat, quantize_static
    from onnxruntime.quantization import CalibrationDataReader

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter([{"x": np.random.default_rng(0).uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32)}])

        def get_next(self):
            return next(self.it, None)

    quantize_static(str(tmp_path / "sym.f32.onnx"), str(p), Reader(), quant_format=QuantFormat.QOperator,
                    op_types_to_quantize=TINY_OPS)
    proc, _ = run_inprocess(pytester, f"--model={p}", "--target=ref")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 4 and len(lines) == 1 and "INTERNALERROR" not in proc.stdout + proc.stderr, \
        proc.stdout + proc.stderr
    assert "input 'x'" in lines[0] and "--model-input-shape x=1,3,8,width" in lines[0]
    proc, rd = run_inprocess(pytester, f"--model={p}", "--model-input-shape=x=1,3,8,8", "--target=ref",
                             "--ops=CONV_2D")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout
    proc, _ = run_inprocess(pytester, "--model-input-shape=x=1,3,8,8", "--target=ref")
    assert proc.returncode == 4 and "give --model" in proc.stderr, proc.stdout + proc.stderr


# ------------------------------------------------------------------ onnx's own test_qlinearconv

def _qlinearconv_case(monkeypatch):
    """onnx's test_qlinearconv node and data (onnx.backend.test.case.node.qlinearconv, its export()
    run alone: collect_testcases runs every op's export) as the one-node model its expect() makes."""
    from onnx.backend.test.case.node import qlinearconv
    got = []
    monkeypatch.setattr(qlinearconv, "expect", lambda node, inputs, outputs, name, **kw: got.append(
        (node, inputs, outputs, name)))
    qlinearconv.QLinearConv.export()
    node, ins, outs, name = next(c for c in got if c[3] == "test_qlinearconv")
    vis = [h.make_tensor_value_info(n, nh.from_array(np.asarray(v)).data_type, np.shape(v))
           for n, v in zip(node.input, ins)]
    out = h.make_tensor_value_info(node.output[0], T.UINT8, np.shape(outs[0]))
    model = h.make_model(h.make_graph([node], name, vis, [out]), opset_imports=[h.make_opsetid("", 10)])
    return model, ins


def test_onnx_backend_test_qlinearconv_harvests(tmp_path, monkeypatch):
    """onnx's test_qlinearconv as shipped (every tensor a graph input) and with its test data as
    constants: the QLinearConv node is named, with what keeps it from a case (its scale is no
    constant; its uint8 weights with zero point 255, where every spec table's weights are
    symmetric int8)."""
    model, ins = _qlinearconv_case(monkeypatch)
    p = tmp_path / "test_qlinearconv.onnx"
    onnx.save(model, str(p))
    g = harvest_model(p)
    (why,) = g.not_covered["QLinearConv"]
    assert "is not a constant" in why and not g.layers
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi, v in zip(list(m.graph.input)[1:], ins[1:]):
        m.graph.initializer.append(nh.from_array(np.asarray(v), vi.name))
    del m.graph.input[1:]
    p2 = tmp_path / "test_qlinearconv_frozen.onnx"
    onnx.save(m, str(p2))
    g = harvest_model(p2)
    (why,) = g.not_covered["QLinearConv"]
    assert "qnn/CONV_2D" in why and "weight" in why and "float layer" in why, why
    assert g.specs["x"].dtype == "uint8" and g.specs["x"].scale is not None


# ------------------------------------------------------------------ the PP-OCR classifier, QOperator

@pytest.fixture(scope="module")
def cls_qop():
    p = model_zoo.cls_qoperator_onnx()
    if p is None:
        pytest.skip(f"not installed: {model_zoo.missing(model_zoo.ONNX_PACKAGES)} (bash scripts/setup.sh --dev)")
    return harvest_model(p, scheme=SCHEME)


def test_real_qoperator_model_every_layer_checked_and_ort_is_its_golden_but_qlinear_add(cls_qop):
    """PP-OCR's classifier quantized by quantize_static(QOperator): all 146 quantized layers are
    cases or float layers (none not covered); under ort-fp32-rne ORT CPU is every layer's golden to
    the bit but QLinearAdd (1 LSB, as in the QDQ model: MLAS folds the zero points)."""
    g = cls_qop
    m = onnx.load(g.path)
    qnodes = [n for n in m.graph.node if n.op_type.startswith(("QLinear", "QGemm"))]
    assert len(qnodes) == 108 and not g.not_covered
    cov = g.coverage()
    assert cov["cases"] == 111 and sum(cov["float_layers"].values()) == 35
    assert cov["cases_by_op"]["CONV_2D"] == 42 and cov["cases_by_op"]["DEPTHWISE_CONV_2D"] == 11
    assert cov["cases_by_op"]["SOFTMAX"] == 1 and cov["cases_by_op"]["FULLY_CONNECTED"] == 1
    own = _own_errors(g)
    off = {k: v for k, v in own.items() if v}
    assert off and max(off.values()) == 1 and {op for _, op in off} == {"ADD"}, off
    feeds = model_feeds(g, None, 1)
    chain = run_graph(g, feeds, SCHEME)
    assert set(g.outputs) <= set(chain)


def test_ddddocr_common_old_with_its_width_set_names_every_dynamic_node():
    """ddddocr 1.6.1's common_old.onnx (``pip install --no-deps ddddocr==1.6.1``; skipped without it):
    its symbolic width is one error; set, its ConvInteger, MatMulInteger, DynamicQuantizeLSTM and
    DynamicQuantizeLinear nodes are each named, none a traceback."""
    p = model_zoo._data_file("ddddocr", "common_old.onnx")
    if p is None:
        pytest.skip("ddddocr 1.6.1 is not installed (pip install --no-deps ddddocr==1.6.1)")
    with pytest.raises(QconformError, match="'input1' has the symbolic dimension"):
        harvest_model(p)
    g = harvest_model(p, input_shapes={"input1": (1, 1, 64, 256)})
    assert {k: len(v) for k, v in g.not_covered.items()} == {"ConvInteger": 21, "MatMulInteger": 1,
                                                             "DynamicQuantizeLSTM": 1, "DynamicQuantizeLinear": 22}
    assert not g.layers


def test_a_malformed_qoperator_node_is_named_never_a_traceback(tmp_path):
    """A QLinearAveragePool without its kernel_shape, a QLinearConcat of a dangling triple: each named
    not covered (the node is not as its op is defined), the rest of the model harvested."""
    xs, xz = nh.from_array(np.array(0.02, np.float32), "xs"), nh.from_array(np.array(0, np.int8), "xz")
    nodes = [h.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             h.make_node("QLinearAveragePool", ["xq", "xs", "xz", "xs", "xz"], ["p"], domain="com.microsoft"),
             h.make_node("QLinearConcat", ["xs", "xz", "xq", "xs"], ["c"], axis=1, domain="com.microsoft"),
             h.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["y"])]
    g = h.make_graph(nodes, "bad", [h.make_tensor_value_info("x", T.FLOAT, [1, 2, 4, 4])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 2, 4, 4])], [xs, xz])
    p = tmp_path / "bad.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("com.microsoft", 1)]), str(p))
    graph = harvest_model(p)
    assert [ly.op for ly in graph.layers] == ["QuantizeLinear"]
    assert set(graph.not_covered) == {"QLinearAveragePool", "QLinearConcat"}, graph.not_covered
    assert all(why for whys in graph.not_covered.values() for why in whys)


def test_pytest_model_runs_the_real_qoperator_model_on_ort(cls_qop, pytester):
    """``pytest --model`` on the QOperator classifier: ort runs it whole and every one of its 146
    layers has its row (checked: its own error on ORT's inputs), each within its tolerance. (htp,
    whose QNN EP takes the QDQ form only, is judged by its cases: the QOperator test above.)"""
    import csv
    proc, rd = run_inprocess(pytester, f"--model={cls_qop.path}", "--target=ort", "--ops=SOFTMAX",
                             "--scheme=ort-fp32-rne")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(rd / "models.csv", newline="") as f:
        rows = {r["target"]: r for r in csv.DictReader(f)}
    with open(rd / "layers.csv", newline="") as f:
        layers = [r for r in csv.DictReader(f) if r["target"] == "ort"]
    row = rows["ort"]
    assert row["whole_model"] == "ran" and row["layers"] == "146" and row["verdict"] == "pass", row
    assert len(layers) == 146 and all(r["source"] == "model" and r["status"] in ("exact", "within-tolerance")
                                      for r in layers)


def test_a_cut_in_an_onnx_model_is_fed_what_ort_computed_there(tmp_path):
    """#29: the QLinearConv after a Pad on the codes (not covered): its case's input is the Pad's
    output as ONNX Runtime computed it in the whole model (border at the zero point, the inside
    the golden's first convolution), in the graph's NHWC layout; the case says so."""
    rng = np.random.default_rng(0)
    xs, xz = nh.from_array(np.array(0.02, np.float32), "xs"), nh.from_array(np.array(3, np.int8), "xz")
    w = nh.from_array(rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8), "w")
    ws, wz = nh.from_array(np.full(4, 0.01, np.float32), "ws"), nh.from_array(np.zeros(4, np.int8), "wz")
    ys, yz = nh.from_array(np.array(0.05, np.float32), "ys"), nh.from_array(np.array(-7, np.int8), "yz")
    w2 = nh.from_array(rng.integers(-127, 128, (4, 4, 1, 1)).astype(np.int8), "w2")
    pads = nh.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")
    nodes = [h.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             h.make_node("QLinearConv", ["xq", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["c"]),
             h.make_node("Pad", ["c", "pads", "yz"], ["p"]),
             h.make_node("QLinearConv", ["p", "ys", "yz", "w2", "ws", "wz", "ys", "yz"], ["d"]),
             h.make_node("DequantizeLinear", ["d", "ys", "yz"], ["y"])]
    g = h.make_graph(nodes, "cut", [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 6, 6])],
                     [h.make_tensor_value_info("y", T.FLOAT, [1, 4, 6, 6])], [xs, xz, w, ws, wz, ys, yz, w2, pads])
    p = tmp_path / "cut.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), str(p))
    graph = harvest_model(p, scheme=SCHEME)
    assert list(graph.not_covered) == ["Pad"] and list(graph.cuts) == ["p"]
    assert graph.cut_inputs["p"] == "captured on ort: the whole model on the harvest's inputs (seed 0)"
    x = graph.layers[-1].case.inputs[0].data.astype(np.int64)   # NHWC
    c = run_graph(graph, model_feeds(graph, None, 0), SCHEME)["c"].astype(np.int64)
    assert (x[:, 0] == -7).all() and (x[:, -1] == -7).all() and (x[:, :, 0] == -7).all() and (x[:, :, -1] == -7).all()
    assert np.abs(x[:, 1:-1, 1:-1] - c).max() <= 1


def test_an_inferred_tensor_beyond_the_element_bound_is_one_error(tmp_path):
    """A 200-byte model whose Expand makes a [1, 4096, 65536] tensor (2^28 elements) before a
    QLinearSigmoid: one error naming the file and the tensor, before any case holds it."""
    sc = [nh.from_array(np.array(v, np.float32), n) for v, n in ((0.1, "s"), (0.1, "so"))]
    zp = [nh.from_array(np.array(0, np.int8), n) for n in ("z", "zo")]
    shape = nh.from_array(np.array([1, 4096, 65536], np.int64), "shape")
    nodes = [h.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]), h.make_node("Expand", ["xq", "shape"], ["e"]),
             h.make_node("QLinearSigmoid", ["e", "s", "z", "so", "zo"], ["y"], domain="com.microsoft")]
    g = h.make_graph(nodes, "big", [h.make_tensor_value_info("x", T.FLOAT, [1, 1, 1])],
                     [h.make_tensor_value_info("y", T.INT8, None)], initializer=[*sc, *zp, shape])
    p = tmp_path / "big.onnx"
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13), h.make_opsetid("com.microsoft", 1)]), str(p))
    with pytest.raises(QconformError, match="more than 67108864 elements") as e:
        harvest_model(p)
    assert e.value.source == str(p) and "'e'" in str(e.value)
