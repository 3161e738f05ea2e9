"""The elementwise family's golden, generators and their agreement with LiteRT.

Hand-derived expectations come from the kernels' documented algorithms (LiteRT
add.cc/sub.cc/mul.cc/quantize.cc/dequantize.cc/comparisons.cc and the reference
headers); the derivation is written next to each. The last part runs generated cases
through LiteRT's reference kernels (``tflite-ref``) and requires bit-exactness, except
for the known findings, where it checks that LiteRT does what the finding says.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from reference import get_scheme, golden
from reference.ops.elementwise import add_sub_params, litert_compare_operand, real_values_exact
from suite.core import spec
from suite.core.case import Case, Tensor
from suite.cases.hunt import params
from suite.core.findings import match as finding_for
from suite.cases.generate import get_generator, make_case

OPS = ["ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL",
       "EQUAL", "NOT_EQUAL", "QUANTIZE", "DEQUANTIZE", "ARG_MAX", "ARG_MIN"]
COMPARISONS = ["LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"]


def t8(values, s, z, shape=None):
    a = np.asarray(values, np.int8)
    if shape is not None:
        a = a.reshape(shape)
    return Tensor("int8", tuple(a.shape), a, [float(np.float32(s))], [int(z)])


def out8(shape, s, z):
    return Tensor("int8", tuple(shape), None, [float(np.float32(s))], [int(z)])


def binary(op, a, b, so, zo, act="NONE"):
    shape = np.broadcast_shapes(a.shape, b.shape)
    return Case(op=op, inputs=[a, b], outputs=[out8(shape, so, zo)],
                attrs={"fused_activation_function": act}, id=f"{op}-hand")


def g(case, scheme=None):
    return golden(case, scheme)[0].tolist()


# =========================================================================== ADD / SUB

def test_add_ties_per_scheme():
    # s1 = s2 = 0.25, s_out = 0.5: exact result q1 / 2. LiteRT: twice_max = 0.5, input
    # multipliers 0.5 -> (2^30, 0): u = q * 2^19 exactly; output multiplier 2^-20 ->
    # (2^30, -19): RDBPOT(q * 2^18, 19) = q / 2 rounded half away from zero.
    c = binary("ADD", t8([1, -1, 3, -3, 2], 0.25, 0), t8([0] * 5, 0.25, 0), 0.5, 0)
    assert g(c, "exact") == [0.5, -0.5, 1.5, -1.5, 1.0]
    assert g(c) == [1, -1, 2, -2, 1]                      # half away from zero
    assert g(c, "tflite-ref-single") == [1, 0, 2, -1, 1]  # (x*m + 2^49) >> 50: ties up
    assert g(c, "ort-fp32-rne") == [0, 0, 2, -2, 1]       # half to even


def test_sub_negative_tie_and_zero_points():
    # SUB: raw = u1 - u2 with a positive input-2 multiplier. (q1 - 3) - (q2 + 1) over 2
    c = binary("SUB", t8([3, 3, 4, 10], 0.25, 3), t8([0, -1, -1, -1], 0.25, -1), 0.5, 5)
    assert g(c, "exact") == [5 - 0.5, 5.0, 5 + 0.5, 5 + 3.5]
    assert g(c) == [4, 5, 6, 9]
    assert g(c, "tflite-ref-single") == [5, 5, 6, 9]


def test_add_fused_activation_clamps():
    # RELU6 at s_out = 0.05, zp -100: bounds [-100, -100 + round(6 / 0.05f) = 20]
    c = binary("ADD", t8([100, -100, 10], 0.1, 0), t8([100, 0, 0], 0.1, 0), 0.05, -100, act="RELU6")
    # reals 20, -10, 1: codes -100 + 400 -> 20 (RELU6 bound), -100 - 200 -> -100, -100 + 20
    assert g(c) == [20, -100, -80]


def test_add_sub_params_flag_output_multiplier_above_one():
    p = add_sub_params(0.02, 0.02, 0.02 * 2 / 2 ** 20 / 3, get_scheme(None))
    assert p["out_gt1"] and p["so"] > 0
    p = add_sub_params(0.02, 0.01, 0.05, get_scheme(None))
    assert not p["out_gt1"] and (p["m1"], p["s1"]) == (2 ** 30, 0) and (p["m2"], p["s2"]) == (2 ** 30, -1)


# =========================================================================== MUL

def test_mul_double_rounding_of_a_quarter():
    # s1 = s2 = 0.5, s_out = 1: float32 multiplier 0.25 -> (2^30, -1). Products p = 1, 2, -2, -1, 3:
    # double: RDBPOT(SRDHM(p, 2^30), 1): 1 -> 0.5 -> 1 -> 0.5 -> 1 (0.25 becomes 1!),
    # 2 -> 1 -> 1, -2 -> -1 -> -1, -1 -> -0.5 -> 0 -> 0, 3 -> 1.5 -> 2 -> 1.
    # single: (p * 2^30 + 2^31) >> 32 = floor(p / 4 + 1/2): 0, 1, 0, 0, 1.
    c = binary("MUL", t8([1, 1, -1, -1, 3], 0.5, 0), t8([1, 2, 2, 1, 1], 0.5, 0), 1.0, 0)
    assert g(c, "exact") == [0.25, 0.5, -0.5, -0.25, 0.75]
    assert g(c) == [1, 1, -1, 0, 1]
    assert g(c, "tflite-ref-single") == [0, 1, 0, 0, 1]
    assert g(c, "xnnpack-fp32") == [0, 0, 0, 0, 1]


def test_mul_multiplier_is_formed_in_float32():
    # s1 * s2 / s_out in float32 then widened: 0.1f * 0.3f = 0.030000001f, / 0.7f
    from reference.ops.elementwise import mul_real_multiplier
    r = mul_real_multiplier(0.1, 0.3, 0.7, get_scheme(None))
    want = float(np.float32(np.float32(np.float32(0.1) * np.float32(0.3)) / np.float32(0.7)))
    assert r == want and r != float(np.float32(0.1)) * float(np.float32(0.3)) / float(np.float32(0.7))


def t16(values, s, z):
    a = np.asarray(values, np.uint16)
    return Tensor("uint16", a.shape, a, [float(np.float32(s))], [int(z)])


def test_16bit_add_and_mul_do_not_wrap():
    # uint16 ADD shifts left by 15 (LiteRT's 16-bit rule): s = 0.25 + 0.25 -> 0.5 gives q / 2
    # rounded half away (65535 << 20 would have wrapped int32)
    a, b = t16([1, 3, 65535, 65533], 0.25, 0), t16([0, 0, 0, 0], 0.25, 0)
    c = Case(op="ADD", inputs=[a, b], outputs=[Tensor("uint16", (4,), None, [0.5], [0])],
             attrs={"fused_activation_function": "NONE"})
    assert g(c) == [1, 2, 32768, 32767]
    # uint16 MUL: 60000 * 60001 = 3,600,060,000 > 2^31; multiplier 0.25 / 16384 = 2^-16 exactly:
    # 3600060000 / 65536 = 54932.556 -> 54933
    a, b = t16([60000, 2], 0.5, 0), t16([60001, 3], 0.5, 0)
    c = Case(op="MUL", inputs=[a, b], outputs=[Tensor("uint16", (2,), None, [16384.0], [0])],
             attrs={"fused_activation_function": "NONE"})
    assert g(c) == [54933, 0]
    assert g(c, "tflite-ref-single") == [54933, 0]


def test_mbqm_wide_matches_mbqm_without_wrap():
    from reference import arith
    from reference.ops.elementwise import mbqm_wide
    x = np.array([2 ** 32, -(2 ** 32) - 3, 1029429, -7, 0])
    # 2^32 * 0.5 / 2: SRDHM(2^32, 2^30) = 2^31, RDBPOT(2^31, 1) = 2^30
    assert mbqm_wide(x[:1], 2 ** 30, -1).tolist() == [2 ** 30]
    # -(2^32 + 3) / 4 = -1073741824.75: SRDHM -> -2147483649.5 -> -2147483649 (toward +inf),
    # RDBPOT(., 1) = -1073741824.5 -> away -> -1073741825; single rounding: floor(x/4 + 1/2) = -1073741825
    assert mbqm_wide(x[1:2], 2 ** 30, -1).tolist() == [-1073741825]
    assert mbqm_wide(x[1:2], 2 ** 30, -1, single_rounding=True).tolist() == [-1073741825]
    small = x[2:]
    for single in (False, True):
        assert mbqm_wide(small, 1084877938, -1, single).tolist() == \
            arith.mbqm(small, 1084877938, -1, single).tolist()


# =========================================================================== MAXIMUM / MINIMUM

def test_maximum_minimum_raw_codes_with_broadcast():
    a = t8([[1, -3, 7]], 0.1, 2, (1, 3))
    b = t8([2, -4], 0.1, 2, (2, 1))
    c = Case(op="MAXIMUM", inputs=[a, b], outputs=[out8((2, 3), 0.1, 2)])
    assert g(c) == [[2, 2, 7], [1, -3, 7]]
    c.op = "MINIMUM"
    assert g(c) == [[1, -3, 2], [-4, -4, -4]]


# =========================================================================== comparisons

def cmp(op, a, b):
    return Case(op=op, inputs=[a, b], outputs=[Tensor("bool", np.broadcast_shapes(a.shape, b.shape))])


def test_comparisons_compare_real_values_of_float32_scales():
    # 3 * 0.1f = 0.300000004470348 < 0.3f = 0.300000011920929: not equal, LESS
    a, b = t8([3, 1, -2], 0.1, 0), t8([1, 0, 0], 0.3, 0)
    assert g(cmp("EQUAL", a, b)) == [False, False, False]
    assert g(cmp("LESS", a, b)) == [True, False, True]
    assert g(cmp("GREATER_EQUAL", a, b)) == [False, True, False]
    # zero points: (5 - 5) * 0.1 == (-7 + 7) * 0.3
    assert g(cmp("EQUAL", t8([5], 0.1, 5), t8([-7], 0.3, -7))) == [True]
    assert g(cmp("NOT_EQUAL", t8([5], 0.1, 5), t8([-7], 0.3, -7))) == [False]
    assert g(cmp("LESS_EQUAL", t8([5], 0.1, 5), t8([-7], 0.3, -7))) == [True]
    assert g(cmp("GREATER", t8([6], 0.1, 5), t8([-7], 0.3, -7))) == [True]


def test_litert_compare_operand_rounds_to_steps_of_1_over_256():
    # s = 0.001: 256 * s * d = 0.256 d. MBQM((q - z) * 256, QuantizeMultiplier(0.001)):
    # d = +-1 -> +-0.256 -> 0; d = 2 -> 0.512 -> 1; d = -2 -> -1
    ops = litert_compare_operand(np.array([1, -1, 2, -2, 0]), 0, 0.001)
    assert ops.tolist() == [0, 0, 1, -1, 0]
    # so LiteRT calls EQUAL(+-1, 0) true where the spec (the golden) says false
    c = cmp("EQUAL", t8([1, -1], 0.001, 0), t8([0, 0], 0.001, 0))
    assert g(c) == [False, False]
    # equal reals at s = 0.5 + 1/512 (shift 0) and s / 4: 256 * real = -128.5 for d = -1 / -4;
    # SRDHM alone rounds it toward +inf (-128), SRDHM + RDBPOT(., 2) away from zero (-129)
    sa = 0.5 + 1 / 512
    assert litert_compare_operand(np.array([-1]), 0, sa).tolist() == [-128]
    assert litert_compare_operand(np.array([-4]), 0, sa / 4).tolist() == [-129]
    assert g(cmp("EQUAL", t8([-1], sa, 0), t8([-4], sa / 4, 0))) == [True]


# =========================================================================== QUANTIZE / DEQUANTIZE

def quant(x, so, zo):
    return Case(op="QUANTIZE", inputs=[x], outputs=[out8(x.shape, so, zo)])


def test_quantize_float_ties():
    # x / 0.5 = 0.5, 1.5, -0.5, -1.5, 2.5, 300: LiteRT (int)std::round -> away from zero; clamp
    x = Tensor("float32", (6,), np.array([0.25, 0.75, -0.25, -0.75, 1.25, 150.0], np.float32))
    c = quant(x, 0.5, 3)
    assert g(c, "exact") == [3.5, 4.5, 2.5, 1.5, 5.5, 303.0]
    assert g(c) == [4, 5, 2, 1, 6, 127]
    assert g(c, "ort-fp32-rne") == [3, 5, 3, 1, 5, 127]


def test_quantize_uses_a_float32_division():
    # 0.3f / 0.1f in float32 is 3.0 exactly? 0.3f/0.1f = 2.99999995529 -> float32 3.0;
    # 0.35f / 0.1f = 3.49999999 -> float32 3.5 exactly -> rounds away to 4 (float64 would give 3)
    x = Tensor("float32", (2,), np.array([0.3, 0.35], np.float32))
    q64 = np.float64(np.float32(0.35)) / np.float64(np.float32(0.1))
    assert q64 < 3.5 and np.float32(0.35) / np.float32(0.1) == np.float32(3.5)
    assert g(quant(x, 0.1, 0)) == [3, 4]


def test_requantize_ratio_0_375():
    # s_in / s_out = 0.375 -> (0.75 * 2^31, -1). d = -4, -12, 4, 12, -3:
    # double [-2, -5, 2, 5, -1] (ties away), single [-1, -4, 2, 5, -1] (ties up)
    x = t8([-4, -12, 4, 12, -3], 0.375, 0)
    c = quant(x, 1.0, 0)
    assert g(c, "exact") == [-1.5, -4.5, 1.5, 4.5, -1.125]
    assert g(c) == [-2, -5, 2, 5, -1]
    assert g(c, "tflite-ref-single") == [-1, -4, 2, 5, -1]
    # zero points: d = q - z_in, + z_out
    c = quant(t8([-4 + 7, 12 + 7], 0.375, 7), 1.0, -9)
    assert g(c) == [-2 - 9, 5 - 9]


def test_dequantize_rounds_the_exact_product_once():
    # (q - 3) * 0.1f: 1 -> 0.1f; 10 -> 1.0000000149 -> 1.0f; -128 -> -12.8f (0.1f * 2^7, exact)
    x = t8([4, 13, -125], 0.1, 3)
    c = Case(op="DEQUANTIZE", inputs=[x], outputs=[Tensor("float32", (3,))])
    out = golden(c)[0]
    assert out.dtype == np.float32
    assert out.tolist() == [np.float32(0.1), 1.0, np.float32(-12.8)]
    assert golden(c, "exact")[0][1] == 10 * float(np.float32(0.1))


# =========================================================================== ARG_MAX / ARG_MIN

def arg(op, x, axis, out_dtype="int32"):
    shape = [d for i, d in enumerate(x.shape) if i != (axis % len(x.shape))]
    return Case(op=op, inputs=[x, Tensor("int32", (1,), np.array([axis], np.int32), const=True)],
                outputs=[Tensor(out_dtype, tuple(shape))], attrs={"output_type": out_dtype})


def test_arg_max_min_first_index_wins_ties():
    x = t8([1, 5, 5, 7, 7, 2, 3, 1, 1], 0.1, 0, (3, 3))
    assert g(arg("ARG_MAX", x, 1)) == [1, 0, 0]
    assert g(arg("ARG_MAX", x, -1)) == [1, 0, 0]
    assert g(arg("ARG_MIN", x, 1)) == [0, 2, 1]
    # columns [1, 7, 3], [5, 7, 1], [5, 2, 1]
    assert g(arg("ARG_MAX", x, 0)) == [1, 1, 0]
    assert g(arg("ARG_MIN", x, 0, "int64")) == [0, 2, 2]
    assert golden(arg("ARG_MIN", x, 0, "int64"))[0].dtype == np.int64


# =========================================================================== generated cases

@functools.lru_cache(maxsize=None)
def plan(op, n=40):
    return tuple(make_case(op, v, i) for v, i in get_generator(op).plan(n))


@functools.lru_cache(maxsize=None)
def edge_cases(op, variant, n=2):
    return tuple(make_case(op, variant, i) for i in range(n))


@pytest.mark.parametrize("op", OPS)
def test_generated_cases_follow_the_spec_and_carry_a_clause(op):
    for c in plan(op):
        assert not spec.check_case(c), (c.id, spec.check_case(c)[:1])
        assert c.clause.startswith(f"litert-int8/{op}"), c.id


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL"])
def test_tie_cases_hold_exact_ties_that_schemes_round_differently(op):
    for c in edge_cases(op, "tie"):
        ex = golden(c, "exact")[0]
        ties = np.abs(ex - np.floor(ex) - 0.5) == 0
        assert ties.mean() > 0.1, c.id
        assert not np.array_equal(golden(c)[0], golden(c, "ort-fp32-rne")[0]), c.id


@pytest.mark.parametrize("op", ["ADD", "SUB", "MUL", "QUANTIZE"])
def test_dbl_vs_single_cases_differ_everywhere_away_from_ties(op):
    for c in edge_cases(op, "dbl_vs_single"):
        d, s = golden(c)[0], golden(c, "tflite-ref-single")[0]
        ex = golden(c, "exact")[0]
        assert np.all(d != s), c.id
        assert np.all(np.abs(ex - np.floor(ex) - 0.5) > 1e-9), c.id


def test_add_never_asks_litert_for_an_output_multiplier_of_one_or_more():
    # LiteRT's ADD Prepare aborts the process (TFLITE_CHECK_LT in
    # QuantizeMultiplierSmallerThanOneExp) when 2*max(s1,s2)/(2^20*s_out) >= 1
    for c in plan("ADD", 60):
        p = add_sub_params(c.inputs[0].scale[0], c.inputs[1].scale[0], c.outputs[0].scale[0], get_scheme(None))
        assert not p["out_gt1"], c.id
    for c in edge_cases("SUB", "mult_gt1"):
        p = add_sub_params(c.inputs[0].scale[0], c.inputs[1].scale[0], c.outputs[0].scale[0], get_scheme(None))
        assert p["out_gt1"], c.id


def _litert_compare(c):
    a, b = c.inputs
    xa = litert_compare_operand(a.data, a.zero_point[0], a.scale[0])
    xb = litert_compare_operand(b.data, b.zero_point[0], b.scale[0])
    fn = {"LESS": np.less, "LESS_EQUAL": np.less_equal, "GREATER": np.greater,
          "GREATER_EQUAL": np.greater_equal, "EQUAL": np.equal, "NOT_EQUAL": np.not_equal}[c.op]
    return fn(xa, xb)


@pytest.mark.parametrize("op", COMPARISONS)
def test_comparison_cases_split_on_litert_resolution(op):
    for c in plan(op):
        # LiteRT aborts for a scale of exactly 1 and misbehaves above: never generated
        assert all(t.scale[0] < 1 for t in c.inputs), c.id
        same = np.array_equal(_litert_compare(c), golden(c)[0])
        if c.variant == "resolution":
            assert not same, c.id
        else:
            assert same, c.id
    # the equal variant really holds equal reals
    for c in edge_cases(op, "equal"):
        ra, rb = (real_values_exact(t) for t in c.inputs)
        if ra.shape == rb.shape:
            assert (ra == rb).mean() > 0.2, c.id


def test_quantize_tie_cases_land_on_k_point_5():
    for c in edge_cases("QUANTIZE", "tie"):
        x = c.inputs[0].data
        v = x / np.float32(c.outputs[0].scale[0])
        assert np.all(v - np.floor(v) == 0.5), c.id


# =========================================================================== against tflite-ref

@pytest.fixture(scope="module")
def tflite_ref():
    pytest.importorskip("ai_edge_litert")
    from targets import get_target
    from targets.base import Timing
    t = get_target("tflite-ref")
    ok, why = t.availability()
    if not ok:
        pytest.skip(why)

    def run(case):
        o = t.run_one(case, Timing(warmup=0, repeats=1))
        assert o.status == "ok", (case.id, o.reason)
        return np.asarray(o.outputs[0]).reshape(case.outputs[0].shape)
    return run


def assert_bit_exact(case, got, want):
    got, want = np.asarray(got), np.asarray(want)
    if want.dtype == np.float32:
        bad = got.view(np.int32) != want.view(np.int32)
    else:
        bad = got.astype(np.int64) != want.astype(np.int64)
    if bad.any():
        i = np.unravel_index(int(np.flatnonzero(bad)[0]), bad.shape)
        pytest.fail(f"{case.id}: {int(bad.sum())}/{bad.size} off; first mismatch at index {list(map(int, i))}: "
                    f"got {got[i]!r}, want {want[i]!r}")


def test_hand_cases_on_tflite_ref(tflite_ref):
    cases = [
        binary("ADD", t8([1, -1, 3, -3, 2], 0.25, 0), t8([0] * 5, 0.25, 0), 0.5, 0),
        binary("SUB", t8([3, 3, 4, 10], 0.25, 3), t8([0, -1, -1, -1], 0.25, -1), 0.5, 5),
        binary("ADD", t8([100, -100, 10], 0.1, 0), t8([100, 0, 0], 0.1, 0), 0.05, -100, act="RELU6"),
        binary("MUL", t8([1, 1, -1, -1, 3], 0.5, 0), t8([1, 2, 2, 1, 1], 0.5, 0), 1.0, 0),
        quant(Tensor("float32", (6,), np.array([0.25, 0.75, -0.25, -0.75, 1.25, 150.0], np.float32)), 0.5, 3),
        quant(Tensor("float32", (2,), np.array([0.3, 0.35], np.float32)), 0.1, 0),
        quant(t8([-4, -12, 4, 12, -3], 0.375, 0), 1.0, 0),
        Case(op="DEQUANTIZE", inputs=[t8([4, 13, -125], 0.1, 3)], outputs=[Tensor("float32", (3,))]),
        arg("ARG_MAX", t8([1, 5, 5, 7, 7, 2, 3, 1, 1], 0.1, 0, (3, 3)), 1),
        arg("ARG_MIN", t8([1, 5, 5, 7, 7, 2, 3, 1, 1], 0.1, 0, (3, 3)), 0, "int64"),
        cmp("LESS", t8([5, 1, -2], 0.1, 0), t8([1, 0, 0], 0.3, 0)),
    ]
    for i, c in enumerate(cases):
        c.id = f"hand-{i}-{c.op}"
        assert_bit_exact(c, tflite_ref(c), golden(c)[0])


def test_comparison_resolution_finding_on_tflite_ref(tflite_ref):
    # EQUAL(+-1, 0) at scale 0.001 is true in LiteRT, false in the spec
    c = cmp("EQUAL", t8([1, -1, 2], 0.001, 0), t8([0, 0, 0], 0.001, 0))
    assert tflite_ref(c).tolist() == [True, True, False]
    assert g(c) == [False, False, False]
    # 3 * 0.1f < 0.3f by 7e-9: both are 77 on LiteRT's 1/256 grid
    c = cmp("LESS", t8([3], 0.1, 0), t8([1], 0.3, 0))
    assert tflite_ref(c).tolist() == [False] and g(c) == [True]
    # equal reals -0.501953125 at s = 0.5 + 1/512 and s / 4 round to -128 and -129
    sa = 0.5 + 1 / 512
    c = cmp("EQUAL", t8([-1], sa, 0), t8([-4], sa / 4, 0))
    assert tflite_ref(c).tolist() == [False] and g(c) == [True]


@pytest.mark.parametrize("op", OPS)
def test_generated_cases_bit_exact_on_tflite_ref(op, tflite_ref):
    """The first edge cases of every variant plus random ones: bit-exact, or (a known
    finding) LiteRT does exactly what the finding describes."""
    for c in plan(op):
        got = tflite_ref(c)
        want = golden(c)[0]
        if c.variant in ("resolution", "mult_gt1"):   # the variants made to show the findings below
            assert not np.array_equal(got, want), c.id
        if np.array_equal(got, want):
            continue
        f = finding_for(op, "tflite-ref", c.variant, "fail", params(c))   # (its region: of the case)
        if f is None:
            assert_bit_exact(c, got, want)
        elif f.id == "comparison-resolution":
            assert_bit_exact(c, got, _litert_compare(c))
        elif f.id != "sub-output-multiplier-gt1":  # pragma: no cover
            pytest.fail(f"{c.id}: unexpected finding {f.id}")


# =========================================================================== case-file mistakes

def test_output_shape_the_op_does_not_compute_is_one_clear_error():
    from suite.core.errors import QconformError
    a, b = t8(np.arange(6).reshape(2, 3), 0.1, 0), t8(np.arange(6).reshape(2, 3), 0.1, 0)
    for shape in [(2, 3, 2), (3, 2), (6,)]:      # wrong size; right size, other order; other rank
        c = binary("ADD", a, b, 0.2, 0)
        c.outputs[0].shape = shape
        if shape == (6,):
            assert golden(c)[0].shape == (6,)    # a golden of another rank is laid out as declared
            continue
        with pytest.raises(QconformError) as e:
            golden(c)
        assert e.value.field == "outputs[0].shape", str(e.value)
    c = binary("ADD", a, b, 0.2, 0)
    c.outputs.append(out8((2, 3), 0.2, 0))
    with pytest.raises(QconformError, match="1 output"):
        golden(c)


def test_bad_options_and_axes_are_one_clear_error():
    from suite.core.errors import QconformError
    c = binary("ADD", t8([1, 2], 0.1, 0), t8([3, 4], 0.1, 0), 0.2, 0, act="TANH")
    with pytest.raises(QconformError, match="TANH"):
        golden(c)
    x = t8([1, 5, 5, 7, 7, 2, 3, 1, 1], 0.1, 0, (3, 3))
    for axis in (2, -3):
        c = arg("ARG_MAX", x, 0)
        c.inputs[1].data = np.array([axis], np.int32)
        with pytest.raises(QconformError, match=r"\[-2, 1\]") as e:
            golden(c)
        assert e.value.field == "inputs[1].data"


def test_qconform_golden_reports_a_bad_case_in_one_line(tmp_path, capsys):
    from suite.core.case import save_case
    from suite.cli import main
    c = binary("ADD", t8([1, 2, 3], 0.1, 0), t8([3, 4, 5], 0.1, 0), 0.2, 0)
    c.outputs[0].shape = (4,)
    p = save_case(c, tmp_path / "add.json")
    assert main(["golden", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qconform: error:") and "outputs[0].shape" in err and "Traceback" not in err


def test_inputs_that_do_not_broadcast_are_one_clear_error():
    """(found by fuzzing case files: a ValueError from inside the golden before)"""
    from suite.core.errors import QconformError
    for op in ("ADD", "MUL", "MAXIMUM", "LESS"):
        c = binary(op, t8(np.arange(6).reshape(2, 3), 0.1, 0), t8(np.arange(6).reshape(2, 3), 0.1, 0), 0.2, 0)
        c.inputs[1] = t8(np.arange(4).reshape(2, 2), 0.1, 0)
        with pytest.raises(QconformError) as e:
            golden(c)
        assert e.value.field == "inputs[1].shape" and "do not broadcast" in str(e.value)
