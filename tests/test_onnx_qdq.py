"""ONNX QuantizeLinear / DequantizeLinear: the seed's rules, the spec table, case files, generators."""

from __future__ import annotations

import numpy as np
import pytest

from reference import golden, onnx_ops
from reference.ops.onnx_qdq import qparams
from suite.core.case import Case, Tensor, case_from_dict, load_case, save_case
from suite.core.dtypes import DTYPES
from suite.core.errors import QconformError
from suite.cases.generate import generate, get_generator, plan_ids
from suite.core.spec import SPEC_DIR, check_case, table

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore

# The seed's saturation ranges (shared/seeds/002_*), written out once more on purpose.
SEED_RANGES = {"uint16": (0, 65535), "int16": (-32768, 32767), "uint8": (0, 255), "int8": (-128, 127),
               "uint4": (0, 15), "int4": (-8, 7)}


# ------------------------------------------------------------------ the seed's rules

@pytest.mark.parametrize("dtype", list(SEED_RANGES))
def test_saturation_ranges(dtype):
    lo, hi = SEED_RANGES[dtype]
    assert onnx_ops.qrange(dtype) == (lo, hi)
    assert (DTYPES[dtype].qmin, DTYPES[dtype].qmax) == (lo, hi)
    with open(SPEC_DIR / "onnx-qdq.toml", "rb") as f:
        assert tuple(tomllib.load(f)["saturation"][dtype]) == (lo, hi)
    zp = (lo + hi + 1) // 2
    x = np.array([-1e30, (lo - zp) - 0.75, (lo - zp) - 0.5, lo - zp, 0.0, hi - zp, (hi - zp) + 0.5,
                  (hi - zp) + 0.75, 1e30], np.float32)
    y = onnx_ops.quantize_linear(x, np.float32(1.0), np.array(zp), dtype=dtype)
    assert y.tolist() == [lo, lo, lo, lo, zp, hi, hi, hi, hi]


def test_round_half_to_even():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997, 0.50000006], np.float32)
    y = onnx_ops.quantize_linear(x, np.float32(1.0), np.int8(0), dtype="int8")
    assert y.tolist() == [-2, -2, 0, 0, 2, 2, 4, 0, 1]
    # x / scale is rounded before the zero point is added: 0.5 -> 0, + 1 = 1 (not round(1.5) = 2)
    assert onnx_ops.quantize_linear(np.float32([0.5, 1.5]), np.float32(1.0), np.uint8(1)).tolist() == [1, 3]
    # the division happens in float32: 3 * 0.1f / 0.1f is exactly 3.0 in float32
    s = np.float32(0.1)
    assert onnx_ops.quantize_linear(np.float32([np.float32(2.5) * s]), s, np.int8(0), dtype="int8").tolist() == [2]


def test_seed_formula_per_tensor_per_axis_blocked():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 11.0
    # per-tensor
    assert np.array_equal(onnx_ops.quantize_linear(x, np.float32(2), np.uint8(100)),
                          np.clip(np.rint(x / 2) + 100, 0, 255))
    # per-axis along 1 (1-D scale of length D1), the same along -2
    s = np.float32([1, 2, 4])
    z = np.int8([0, 1, -1])
    want = np.clip(np.rint(x / s.reshape(1, 3, 1)) + z.reshape(1, 3, 1), -128, 127)
    assert np.array_equal(onnx_ops.quantize_linear(x, s, z, axis=1, dtype="int8"), want)
    assert np.array_equal(onnx_ops.quantize_linear(x, s, z, axis=-2, dtype="int8"), want)
    # blocked along the last axis, D = 4, B = 3: scale shape (2, 3, 2), last block holds one element
    sb = np.float32(np.arange(1, 13).reshape(2, 3, 2))
    zb = np.zeros((2, 3, 2), np.int16)
    y = onnx_ops.quantize_linear(x, sb, zb, axis=2, block_size=3, dtype="int16")
    full = np.concatenate([np.repeat(sb[..., :1], 3, axis=2), sb[..., 1:]], axis=2)
    assert np.array_equal(y, np.rint(x / full))
    back = onnx_ops.dequantize_linear(y, sb, zb, axis=2, block_size=3)
    assert back.dtype == np.float32 and np.array_equal(back, (y * full).astype(np.float32))


def test_bad_granularity_is_one_clear_error():
    x = np.zeros((2, 4), np.float32)
    with pytest.raises(QconformError, match="blocked scale shape"):
        onnx_ops.quantize_linear(x, np.ones((2, 3), np.float32), axis=1, block_size=2)
    with pytest.raises(QconformError, match="per-axis"):
        onnx_ops.quantize_linear(x, np.ones(3, np.float32), axis=1)
    with pytest.raises(QconformError, match="axis"):
        onnx_ops.quantize_linear(x, np.ones(2, np.float32), axis=2)


# ------------------------------------------------------------------ table, case files, spec checks

def _blocked_case(block=3, axis=-1, scale_shape=(2, 2)) -> Case:
    y = Tensor("int4", (2, 5), None, [0.5] * int(np.prod(scale_shape)), [0] * int(np.prod(scale_shape)),
               1, None, tuple(scale_shape))
    x = Tensor("float32", (2, 5), np.linspace(-3, 3, 10, dtype=np.float32).reshape(2, 5))
    return Case(op="QuantizeLinear", inputs=[x], outputs=[y], attrs={"axis": axis, "block_size": block},
                spec="onnx-qdq", id="blocked")


def test_table_lists_both_ops_and_every_type():
    t = table("onnx-qdq")
    assert set(t.ops) == {"QuantizeLinear", "DequantizeLinear"}
    assert set(t.ops["QuantizeLinear"].outputs[0].dtypes) == set(SEED_RANGES)
    assert set(t.ops["DequantizeLinear"].inputs[0].granularity) == {"per-tensor", "per-axis", "blocked"}


def test_blocked_case_round_trips_through_a_case_file(tmp_path):
    c = _blocked_case()
    assert check_case(c) == []
    p = save_case(c, tmp_path / "c.json")
    back = load_case(p)
    assert back.outputs[0].scale_shape == (2, 2) and back.digest() == c.digest()
    assert np.array_equal(golden(back)[0], golden(c)[0])
    # the last block of each row holds 5 - 3 = 2 elements
    s, _ = back.outputs[0].broadcast_qparams(block_size=3)
    assert s.shape == (2, 5)


def test_case_files_without_scale_shape_are_unchanged():
    d = {"format": "qconform-case/1", "op": "ADD", "inputs": [
        {"dtype": "int8", "shape": [2], "data": [1, 2], "scale": [0.5], "zero_point": [0]},
        {"dtype": "int8", "shape": [2], "data": [1, 2], "scale": [0.5], "zero_point": [0]}],
        "outputs": [{"dtype": "int8", "shape": [2], "scale": [1.0], "zero_point": [0]}]}
    c = case_from_dict(d)
    assert c.inputs[0].scale_shape is None and "scale_shape" not in c.inputs[0].to_dict()


@pytest.mark.parametrize("change,field", [
    ({"scale_shape": [2, 2, 1]}, "scale_shape"),
    ({"scale_shape": [2, 3]}, "scale"),
    ({"scale_shape": [1, 4]}, "scale_shape"),
    ({"scale_shape": [2, 6], "scale": [0.5] * 12, "zero_point": [0] * 12}, "scale_shape"),
    ({"scale_shape": [2, 0]}, "scale_shape"),
])
def test_bad_scale_shape_names_the_field(change, field):
    d = _blocked_case().to_dict()
    d["outputs"][0].update(change)
    with pytest.raises(QconformError, match=f"outputs\\[0\\]\\.{field}"):
        case_from_dict(d)


@pytest.mark.parametrize("attrs,clause", [
    ({"axis": 1, "block_size": 2}, "block_size"),      # ceil(5/2) = 3 blocks, scale has 2
    ({"axis": 0, "block_size": 3}, "axis"),            # the scale is blocked along dimension 1
    ({"axis": 1}, "block_size"),                       # blocked without block_size
    ({"axis": 5, "block_size": 3}, "axis"),            # out of range
])
def test_spec_check_names_the_blocked_rule(attrs, clause):
    c = _blocked_case()
    c.attrs = attrs
    problems = check_case(c)
    assert problems and any(p.clause.endswith(clause) for p in problems), problems


def test_block_size_without_a_blocked_scale_is_refused():
    c = _blocked_case()
    y = c.outputs[0]
    y.scale_shape, y.scale, y.zero_point = None, [0.5], [0]
    assert any(p.clause.endswith("block_size") for p in check_case(c))


def test_litert_tables_refuse_blocked_scales():
    w = Tensor("int8", (2, 4), np.zeros((2, 4), np.int8), [0.1] * 4, [0] * 4, 1, True, (2, 2))
    a = Tensor("int8", (3, 4), np.zeros((3, 4), np.int8), [0.1], [0])
    c = Case(op="FULLY_CONNECTED", inputs=[a, w], outputs=[Tensor("int8", (3, 2), None, [0.1], [0])])
    assert any("blocked" in str(p) for p in check_case(c))


# ------------------------------------------------------------------ generators

def test_generated_cases_follow_the_table_and_cover_every_type_and_granularity():
    cases = generate(["QuantizeLinear", "DequantizeLinear"], 30)
    assert all(check_case(c) == [] for c in cases), [(c.id, check_case(c)) for c in cases if check_case(c)]
    for op in ("QuantizeLinear", "DequantizeLinear"):
        seen = {(c.outputs[0].dtype if op == "QuantizeLinear" else c.inputs[0].dtype,
                 c.description.split(" ", 1)[1]) for c in cases if c.op == op}
        want = {(d, g) for d in SEED_RANGES for g in ("per-tensor", "per-axis", "blocked")}
        assert want <= seen, want - seen


def test_generator_edges_do_what_they_say():
    cases = {c.id: c for c in generate(["QuantizeLinear"], 40)}
    ties = [c for c in cases.values() if c.variant == "ties"]
    assert ties
    for c in ties:
        s, z, axis, block = qparams(c, c.outputs[0])
        q = c.inputs[0].data / onnx_ops.expand_param(s, c.inputs[0].shape, axis, block)
        assert np.all(q - np.floor(q) == 0.5)
    sat = [golden(c)[0] for c in cases.values() if c.variant == "sat_hi"]
    assert sat and all((g == DTYPES[c.outputs[0].dtype].qmax).mean() > 0.2
                       for g, c in zip(sat, [c for c in cases.values() if c.variant == "sat_hi"]))
    tails = [c for c in cases.values() if c.variant == "block_tail"]
    assert tails
    for c in tails:
        y = c.outputs[0]
        assert y.shape[y.quantized_dimension] % c.attrs["block_size"] != 0
    negs = [c for c in cases.values() if c.variant == "neg_axis"]
    assert negs and all(c.attrs["axis"] < 0 for c in negs)


def test_generation_is_deterministic():
    a = [c.digest() for c in generate(["DequantizeLinear"], 12)]
    b = [c.digest() for c in generate(["DequantizeLinear"], 12)]
    assert a == b
    assert ("DequantizeLinear", "u4_block", 0) in plan_ids(["DequantizeLinear"], 30)
    assert "ties" in get_generator("QuantizeLinear").variants


# ------------------------------------------------------------------ 4-bit graph I/O through onnxruntime

def test_int4_graph_input_and_output_round_trip():
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper, numpy_helper
    from targets.onnx_model import ortvalue_4bit, run_session
    vals = np.array([[-8, -1, 0], [1, 6, 7], [3, -5, 2]], np.int8)   # odd count: 9 values
    s = numpy_helper.from_array(np.array(1.0, np.float32), "s")
    z = helper.make_tensor("z", TensorProto.INT4, [], [0])
    dq = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["f"])
    q = helper.make_node("QuantizeLinear", ["f", "s", "z"], ["y"])
    g = helper.make_graph([dq, q], "g", [helper.make_tensor_value_info("x", TensorProto.INT4, [3, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.INT4, [3, 3]),
                           helper.make_tensor_value_info("f", TensorProto.FLOAT, [3, 3])], [s, z])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    so = ort.SessionOptions()
    # with optimizations on, onnxruntime 1.31 folds the int4 DQ -> Q pair into an Identity
    # that has no int4 kernel and refuses the model; the round trip is what is tested here
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    y, f = run_session(sess, ["y", "f"], {"x": ortvalue_4bit(vals, "int4")})
    assert f.tolist() == vals.astype(np.float32).tolist()
    assert y.dtype == np.int8 and y.tolist() == vals.tolist()
