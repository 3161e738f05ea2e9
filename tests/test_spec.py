"""The spec table as data, and case checks against it."""

from __future__ import annotations

import numpy as np
import pytest

from suite.core import spec
from suite.cases.generate import generate, generator_ops, get_generator, make_case

SPEC_DOC_OPS = [
    "ADD", "AVERAGE_POOL_2D", "CONCATENATION", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED",
    "L2_NORMALIZATION", "LOGISTIC", "MAX_POOL_2D", "MUL", "RESHAPE", "RESIZE_BILINEAR", "SOFTMAX",
    "SPACE_TO_DEPTH", "TANH", "PAD", "GATHER", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "TRANSPOSE",
    "MEAN", "SUB", "SUM", "SQUEEZE", "LOG_SOFTMAX", "MAXIMUM", "ARG_MAX", "MINIMUM", "LESS", "PADV2",
    "GREATER", "GREATER_EQUAL", "LESS_EQUAL", "SLICE", "EQUAL", "NOT_EQUAL", "SHAPE", "QUANTIZE",
]


def test_table_holds_every_operator_of_the_spec_document():
    t = spec.table("litert-int8")
    spec_rows = [op for op, r in t.ops.items() if r.source == "spec"]
    assert sorted(spec_rows) == sorted(SPEC_DOC_OPS)


def test_weights_are_symmetric_per_axis_with_the_documented_dimension():
    assert spec.rule("CONV_2D").inputs[1].axis == 0
    assert spec.rule("DEPTHWISE_CONV_2D").inputs[1].axis == 3
    assert spec.rule("FULLY_CONNECTED").inputs[1].axis == 0
    for op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
        w = spec.rule(op).inputs[1]
        assert (w.range, w.zero_point, w.granularity) == ((-127, 127), 0, "per-axis")
        b = spec.rule(op).inputs[2]
        assert (b.dtypes, b.zero_point, b.bias_scale) == (("int32",), 0, "input0_scale * input1_scale")


@pytest.mark.parametrize("op,scale,zp", [
    ("LOGISTIC", 1 / 256, -128), ("SOFTMAX", 1 / 256, -128), ("TANH", 1 / 128, 0),
    ("L2_NORMALIZATION", 1 / 128, 0), ("LOG_SOFTMAX", 16 / 256, 127)])
def test_fixed_output_quantization(op, scale, zp):
    assert spec.rule(op).fixed_output == (scale, zp)


def test_same_scale_ops():
    same = {op for op, r in spec.table().ops.items() if r.same_scale}
    for op in ("AVERAGE_POOL_2D", "CONCATENATION", "MAX_POOL_2D", "RESHAPE", "RESIZE_BILINEAR",
               "SPACE_TO_DEPTH", "PAD", "GATHER", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "TRANSPOSE",
               "SQUEEZE", "MAXIMUM", "MINIMUM", "PADV2", "SLICE"):
        assert op in same, op
    for op in ("ADD", "MUL", "SUB", "MEAN", "SUM", "CONV_2D", "QUANTIZE"):
        assert op not in same, op


# ----------------------------------------------------------------------------- check_case

def _conv_case():
    return make_case("CONV_2D", "random", 0)     # random CONV_2D cases always carry a bias


def _add_case():
    return make_case("ADD", "random", 0)


def test_a_generated_case_conforms():
    assert spec.check_case(_add_case()) == []


def test_zero_point_outside_activation_range_is_a_violation():
    c = _add_case()
    c.inputs[0].dtype = "uint8"   # int8 required
    v = spec.check_case(c)
    assert v and "dtype" in v[0].field and "litert-int8/ADD" in v[0].clause


def test_weight_zero_point_must_be_zero():
    c = _conv_case()
    c.inputs[1].zero_point = [1] * len(c.inputs[1].zero_point)
    v = spec.check_case(c)
    assert any("weight/zero_point" in x.clause for x in v), v


def test_weight_value_minus_128_is_a_violation():
    c = _conv_case()
    c.inputs[1].data = c.inputs[1].data.copy()
    c.inputs[1].data.flat[0] = -128
    v = spec.check_case(c)
    assert any("weight/range" in x.clause for x in v), v


def test_bias_scale_must_be_input_scale_times_weight_scale():
    c = _conv_case()
    assert len(c.inputs) == 3 and spec.check_case(c) == []
    c.inputs[2].scale = [s * 1.5 for s in c.inputs[2].scale]
    v = spec.check_case(c)
    assert any("bias/scale" in x.clause for x in v), v


def test_fixed_output_violation_names_the_clause():
    c = _add_case()
    c.op = "LOGISTIC"
    c.inputs = c.inputs[:1]
    c.attrs = {}
    c.outputs[0].scale = [0.01]
    c.outputs[0].shape = c.inputs[0].shape
    v = spec.check_case(c)
    assert any(x.clause == "litert-int8/LOGISTIC/fixed_output" for x in v), v


def test_same_scale_violation():
    c = _add_case()
    c.op = "MAXIMUM"
    c.attrs = {}
    v = spec.check_case(c)
    assert any(x.clause == "litert-int8/MAXIMUM/same_scale" for x in v), v


def test_unknown_attr_is_a_violation():
    c = _add_case()
    c.attrs["stride_w"] = 2
    v = spec.check_case(c)
    assert any("attrs" == x.field for x in v)


# ----------------------------------------------------------------------------- generation

@pytest.mark.parametrize("op", generator_ops())
def test_every_generated_case_follows_its_spec_table(op):
    plan = get_generator(op).plan(40)
    for variant, index in plan:
        c = make_case(op, variant, index, seed=3)
        problems = spec.check_case(c)
        assert not problems, f"{c.id}: {problems[0]}"


@pytest.mark.parametrize("op", generator_ops())
def test_generation_is_deterministic_and_ids_are_stable(op):
    a = generate([op], 12, seed=5)
    b = generate([op], 12, seed=5)
    assert [c.id for c in a] == [c.id for c in b]
    assert [c.digest() for c in a] == [c.digest() for c in b]
    # more cases per op only adds cases: the first ones keep their ids and contents
    more = {c.id: c.digest() for c in generate([op], 20, seed=5)}
    for c in a:
        assert more[c.id] == c.digest()
    other = generate([op], 12, seed=6)
    assert [c.digest() for c in a] != [c.digest() for c in other]


def test_default_generation_has_at_least_30_cases_per_op_and_unique_ids():
    cases = generate(None, 30, seed=0)
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids))
    for op in generator_ops():
        assert sum(c.op == op for c in cases) >= 30, op


def test_edge_variants_hit_the_ends():
    cases = generate(["ADD"], 30, seed=0)
    zps = {c.variant: c.outputs[0].zero_point[0] for c in cases}
    assert zps["zp_min"] == -128 and zps["zp_max"] == 127
    from reference import golden
    hi = np.concatenate([golden(c)[0].ravel() for c in cases if c.variant == "sat_hi"])
    lo = np.concatenate([golden(c)[0].ravel() for c in cases if c.variant == "sat_lo"])
    assert (hi == 127).any() and (lo == -128).any()
    odd = [c for c in cases if c.variant == "odd_shape"]
    assert all(all(d % 2 == 1 for d in c.inputs[0].shape) for c in odd)
