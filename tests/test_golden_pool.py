"""Goldens of AVERAGE_POOL_2D, MAX_POOL_2D, MEAN, SUM, L2_NORMALIZATION, RESIZE_BILINEAR.

Expectations are worked out by hand from the reference kernels' documented arithmetic
(see the docstrings of reference/ops/pool.py); the last tests run generated cases through
LiteRT's reference kernels (the ``tflite-ref`` target) and demand bit-exactness.
"""

from __future__ import annotations

import numpy as np
import pytest

from reference import golden
from reference.ops.pool import inv_sqrt_multiplier, mean_multiplier
from suite.core.case import Case, Tensor
from suite.core.errors import QconformError
from suite.cases.generate import generate, make_case
from suite.core.spec import check_case

OPS = ["AVERAGE_POOL_2D", "MAX_POOL_2D", "MEAN", "SUM", "L2_NORMALIZATION", "RESIZE_BILINEAR"]


def act(data, s=0.5, z=0):
    a = np.asarray(data, np.int8)
    return Tensor("int8", a.shape, a, [float(np.float32(s))], [int(z)], 0)


def param(values):
    a = np.asarray(values, np.int32)
    return Tensor("int32", a.shape, a, None, None, 0, const=True)


def out(shape, s=0.5, z=0):
    return Tensor("int8", tuple(shape), None, [float(np.float32(s))], [int(z)], 0)


def g(case, scheme=None):
    return golden(case, scheme)[0]


def pool(op, data, f, stride=1, padding="VALID", act_fn="NONE", s=0.5, z=0):
    a = np.asarray(data)                      # one 2-D plane -> NHWC [1, H, W, 1]
    x = act(a.reshape((1,) + a.shape + (1,)), s, z)
    h, w = x.shape[1:3]
    oh = (h + stride - 1) // stride if padding == "SAME" else (h - f[0] + stride) // stride
    ow = (w + stride - 1) // stride if padding == "SAME" else (w - f[1] + stride) // stride
    return Case(op, [x], [out((1, oh, ow, x.shape[3]), s, z)], id=f"{op}-unit",
                attrs={"padding": padding, "stride_h": stride, "stride_w": stride, "filter_height": f[0],
                       "filter_width": f[1], "fused_activation_function": act_fn})


# ----------------------------------------------------------------------------- pooling

def test_average_pool_ties_round_half_away_in_every_fixed_scheme():
    # windows [2, 3] and [-2, -3]: averages +-2.5; the kernel's (sum +- n/2) / n gives +-3
    c = pool("AVERAGE_POOL_2D", [[2, 3, -2, -3]], (1, 2), stride=2)
    assert g(c).ravel().tolist() == [3, -3]
    assert g(c, "tflite-ref-single").ravel().tolist() == [3, -3]     # no requantization: same build
    assert g(c, "ort-fp32-rne").ravel().tolist() == [2, -2]          # float path, ties to even
    assert g(c, "exact").ravel().tolist() == [2.5, -2.5]


def test_average_pool_excludes_padding():
    # 3x3 SAME over [[1..3], [4..6], [7..9]]: corner (1+2+4+5)/4 = 3, edge (1..6)/6 = 3.5 -> 4,
    # centre 45/9 = 5
    c = pool("AVERAGE_POOL_2D", [[1, 2, 3], [4, 5, 6], [7, 8, 9]], (3, 3), padding="SAME")
    assert g(c)[0, :, :, 0].tolist() == [[3, 4, 4], [5, 5, 6], [6, 7, 7]]


def test_average_pool_filter_larger_than_input_and_activation_clamp():
    # 5x5 SAME over a 2x2 input: every window holds all 4 codes, mean (10+20+30+41)/4 = 25.25;
    # RELU6 at scale 0.5 clamps to zp + round(6 / 0.5) = 12
    c = pool("AVERAGE_POOL_2D", [[10, 20], [30, 41]], (5, 5), padding="SAME")
    assert g(c).ravel().tolist() == [25] * 4
    c = pool("AVERAGE_POOL_2D", [[10, 20], [30, 41]], (5, 5), padding="SAME", act_fn="RELU6")
    assert g(c).ravel().tolist() == [12] * 4


def test_max_pool_never_picks_padding():
    c = pool("MAX_POOL_2D", [[-100, -90], [-80, -70]], (3, 3), padding="SAME")
    assert g(c)[0, :, :, 0].tolist() == [[-70, -70], [-70, -70]]
    c = pool("MAX_POOL_2D", [[-100, -90], [-80, -70]], (1, 1), stride=2)
    assert g(c).ravel().tolist() == [-100]


def test_pool_bad_padding_is_one_clear_error():
    c = pool("AVERAGE_POOL_2D", [[1, 2]], (1, 2))
    c.attrs["padding"] = "FULL"
    with pytest.raises(QconformError, match="padding"):
        g(c)


# ----------------------------------------------------------------------------- MEAN / SUM

def reduce_case(op, data, axes, out_shape, keep=False, s_in=0.5, z_in=0, s_out=0.5, z_out=0):
    return Case(op, [act(data, s_in, z_in), param(axes)], [out(out_shape, s_out, z_out)],
                attrs={"keep_dims": keep}, id=f"{op}-unit")


def test_mean_multiplier_fold():
    # ratio 1: QuantizeMultiplier -> (2^30, 1); N = 2: k = 1, m' = 2^31 / 2 = 2^30, shift' = 0
    assert [int(v) for v in mean_multiplier(2**30, 1, 2)] == [2**30, 0]
    # ratio 2^-23 -> (2^30, -22); N = 1536: k = min(10, 32, 31 - 22 = 9) = 9,
    # m' = 2^39 / 1536 = 357913941 (truncated), shift' = -31
    assert [int(v) for v in mean_multiplier(2**30, -22, 1536)] == [357913941, -31]


def test_mean_ties_follow_srdhm_then_rdbpot():
    # ratio 1, N = 2: MBQM(sum, 2^30, 0) = SRDHM(sum, 2^30): 1.5 -> 2, -1.5 -> -1 (ties toward +inf)
    c = reduce_case("MEAN", [[1, 2], [-1, -2]], [1], (2,))
    assert g(c).tolist() == [2, -1]
    assert g(c, "tflite-ref-single").tolist() == [2, -1]
    assert g(c, "ort-fp32-rne").tolist() == [2, -2]
    assert g(c, "exact").tolist() == [1.5, -1.5]
    # ratio 1/2, N = 2 -> (2^30, -1): sums 2, -2, 5 are 0.5, -0.5, 1.25.
    # double: SRDHM then RDBPOT(., 1) -> 1, -1, 2 (1.25 -> SRDHM 3 -> RDBPOT 2: double rounding);
    # single: (x * 2^30 + 2^31) >> 32 -> 1, 0, 1
    c = reduce_case("MEAN", [[1, 1], [-1, -1], [2, 3]], [-1], (3,), s_out=1.0)
    assert g(c).tolist() == [1, -1, 2]
    assert g(c, "tflite-ref-single").tolist() == [1, 0, 1]


def test_mean_4d_spatial_keep_dims_takes_the_general_path():
    # 1x1x2x1 [-1, -2], axes {1, 2}, keep_dims: the general QuantizedMeanOrSum gives -1
    # (-1.5 rounds toward +inf); the optimized-only 4-D kernel (MBQM then (x - N/2) / N) would give -2
    c = reduce_case("MEAN", np.array([-1, -2]).reshape(1, 1, 2, 1), [1, 2], (1, 1, 1, 1), keep=True)
    assert g(c).ravel().tolist() == [-1]


def test_mean_negative_and_duplicate_axes():
    # axes [-1, 2, -3] of a [2, 3, 4] tensor resolve to {2, 0}: N = 8, sums -36, -4, 28 ->
    # -4.5, -0.5, 3.5. Ratio 1 -> (2^30, 1), k = 3 -> (2^30, -2): SRDHM halves exactly (even
    # sums), RDBPOT(., 2) rounds the ties away from zero -> -5, -1, 4
    data = np.arange(24).reshape(2, 3, 4) - 12
    c = reduce_case("MEAN", data, [-1, 2, -3], (3,))
    assert g(c).tolist() == [-5, -1, 4]
    c.inputs[1] = param([3])
    with pytest.raises(QconformError, match="axis"):
        g(c)


def test_sum_follows_the_spec_formula():
    # sum (q - z_in) * s_in / s_out + z_out: rows [1, 2, 3, 10] and [-1, -2, -3, -10]
    c = reduce_case("SUM", [[1, 2, 3, 10], [-1, -2, -3, -10]], [1], (2,))
    assert g(c).tolist() == [16, -16]
    # s_in 0.1, z_in 3, s_out 0.25, z_out -5: (16 - 12) * 0.4 = 1.6 -> 2 - 5 = -3;
    # (-16 - 12) * 0.4 = -11.2 -> -11 - 5 = -16
    c = reduce_case("SUM", [[1, 2, 3, 10], [-1, -2, -3, -10]], [1], (2,), s_in=0.1, z_in=3, s_out=0.25, z_out=-5)
    assert g(c).tolist() == [-3, -16]


# ----------------------------------------------------------------------------- L2_NORMALIZATION

def l2_case(data, z=0):
    a = np.asarray(data)
    return Case("L2_NORMALIZATION", [act(a, 0.1, z)], [out(a.shape, 1 / 128, 0)],
                attrs={"fused_activation_function": "NONE"}, id="L2-unit")


def test_inv_sqrt_multiplier():
    # acc = 4: normalized to 2^28 (shift 11 - 13 = -2), Newton gives 1 in Q3.28, the negative
    # shift is folded in: multiplier ~ 2^30, shift 0 -> 2^30 * 2^-31 = 1/2
    m, s = inv_sqrt_multiplier(np.array([4]))
    assert s[0] == 0 and abs(int(m[0]) - 2**30) <= 8
    # acc <= 1 -> (INT32_MAX, 0)
    m, s = inv_sqrt_multiplier(np.array([0, 1]))
    assert m.tolist() == [2**31 - 1] * 2 and s.tolist() == [0, 0]
    acc = np.array([2, 3, 25, 1000, 65025, 2**20 + 7, 2**29 - 1, 2**29, 2**30 + 12345, 2**31 - 1])
    m, s = inv_sqrt_multiplier(acc)
    approx = m * 2.0 ** (s - 31)
    assert np.allclose(approx, 1 / np.sqrt(acc), rtol=1e-5)


def test_l2_normalization_rows():
    # [3, 4]: 3/5 * 128 = 76.8 -> 77, 4/5 * 128 = 102.4 -> 102; all-zero-point row -> 0;
    # acc = 1 ([z, z+1]): multiplier INT32_MAX, shift 7 -> 128 clamps to 127;
    # [-5]: -128 (exact -1)
    c = l2_case([[3, 4], [0, 0], [0, 1], [-5, 0]])
    assert g(c).tolist() == [[77, 102], [0, 0], [0, 127], [-128, 0]]
    assert g(c, "exact")[0].tolist() == pytest.approx([76.8, 102.4])
    c = l2_case([[10], [-10], [7]], z=7)       # single-element rows: +-1 -> 127 / -128, zero -> 0
    assert g(c).ravel().tolist() == [127, -128, 0]


# ----------------------------------------------------------------------------- RESIZE_BILINEAR

def resize_case(row, new_w, ac=False, hp=False):
    x = act(np.asarray(row).reshape(1, 1, -1, 1))
    return Case("RESIZE_BILINEAR", [x, param([1, new_w])], [out((1, 1, new_w, 1))],
                attrs={"align_corners": ac, "half_pixel_centers": hp}, id="RB-unit")


def test_resize_bilinear_10_bit_coordinates_and_rounding():
    # [0, 3] -> 4, no flags: scale_10 = (2048 + 2) / 4 = 512; x = 1 sits half way: 1.5 -> 2
    assert g(resize_case([0, 3], 4)).ravel().tolist() == [0, 2, 3, 3]
    # [0, -3]: -1.5 -> -2 in the default build (half away), -1 with single rounding (half up)
    c = resize_case([0, -3], 4)
    assert g(c).ravel().tolist() == [0, -2, -3, -3]
    assert g(c, "tflite-ref-single").ravel().tolist() == [0, -1, -3, -3]
    assert g(c, "exact").ravel().tolist() == [0, -1.5, -3, -3]
    # align_corners: scale_10 = (1024 + 1) / 3 = 341: 3 * 341 / 1024 = 0.999 -> 1, 1.998 -> 2, 2.997 -> 3
    assert g(resize_case([0, 3], 4, ac=True)).ravel().tolist() == [0, 1, 2, 3]
    # half_pixel: v = 512 x - 256: -256 clamps to pixel 0; 0.75 -> 1, 2.25 -> 2; the last clamps to 3
    assert g(resize_case([0, 3], 4, hp=True)).ravel().tolist() == [0, 1, 2, 3]


def test_resize_bilinear_rejects_both_flags():
    with pytest.raises(QconformError, match="half_pixel_centers"):
        g(resize_case([0, 3], 4, ac=True, hp=True))


# ----------------------------------------------------------------------------- generators

def litert_cases(ops, n):
    """Generated cases of the litert-int8 table (other tables add extra variants to some ops)."""
    return [c for c in generate(ops, n) if c.spec == "litert-int8"]


def test_generated_cases_follow_the_spec_table():
    for c in litert_cases(OPS, 40):
        assert not check_case(c), (c.id, [str(v) for v in check_case(c)])
        assert c.clause.startswith("litert-int8/") and c.description


@pytest.mark.parametrize("op,variant,index", [(op, "tie", i) for op in ("AVERAGE_POOL_2D", "MEAN", "SUM")
                                              for i in range(3)])
def test_tie_variants_land_on_half(op, variant, index):
    c = make_case(op, variant, index)
    e = g(c, "exact").ravel()
    assert np.all(np.abs(e - np.floor(e) - 0.5) < 1e-9), c.id


@pytest.mark.parametrize("op", ["MEAN", "SUM"])
def test_dbl_vs_single_variants_differ(op):
    for i in range(2):
        c = make_case(op, "dbl_vs_single", i)
        e = g(c, "exact").ravel()
        assert np.all(np.abs(e - np.floor(e) - 0.5) > 1e-9)          # not ties
        assert np.all(g(c) != g(c, "tflite-ref-single")), c.id


def test_resize_tie_variant_hits_ties():
    for i in range(2):
        e = g(make_case("RESIZE_BILINEAR", "tie", i), "exact").ravel()
        assert np.mean(np.abs(e - np.floor(e) - 0.5) < 1e-9) > 0.25


# ----------------------------------------------------------------------------- against LiteRT

def _run_ref(cases):
    pytest.importorskip("ai_edge_litert")
    from targets.base import Timing
    from targets.tflite import TfliteRefTarget
    t = TfliteRefTarget()
    return [t.safe_run_one(c, Timing(warmup=0, repeats=1)) for c in cases]


def _first_mismatch(case, got, want):
    bad = np.argwhere(np.asarray(got).reshape(want.shape) != want)
    if bad.size == 0:
        return None
    i = tuple(int(v) for v in bad[0])
    return (f"{case.id}: {len(bad)}/{want.size} elements differ; first at index {list(i)}: "
            f"got {int(np.asarray(got).reshape(want.shape)[i])}, want {int(want[i])}")


@pytest.mark.parametrize("op", [o for o in OPS if o != "SUM"])
def test_bit_exact_against_tflite_ref(op):
    cases = litert_cases([op], 16)
    for c, o in zip(cases, _run_ref(cases)):
        assert o.status == "ok", f"{c.id}: {o.status}: {o.reason}"
        msg = _first_mismatch(c, o.outputs[0], g(c))
        assert msg is None, msg


def test_sum_finding_still_holds_on_tflite_ref():
    """suite/core/findings.toml litert-ref-sum-int8-as-uint8: LiteRT's reference SUM reads int8 as
    uint8. If this starts failing, LiteRT fixed it: drop the finding."""
    c = reduce_case("SUM", [[1, 2, 3, 10], [-1, -2, -3, -10]], [1], (2,))
    (o,) = _run_ref([c])
    assert o.status == "ok", o.reason
    # the finding's arithmetic: row 2 read as uint8 is 255 + 254 + 253 + 246 = 1008, clamped to
    # 255, stored as int8 -1 (the golden, i.e. the spec: [16, -16])
    assert o.outputs[0].tolist() == [16, -1]
    # cases whose codes and results are all non-negative agree with the golden
    c = reduce_case("SUM", [[1, 2, 3, 10], [5, 6, 7, 8]], [1], (2,))
    (o,) = _run_ref([c])
    assert o.outputs[0].tolist() == g(c).tolist() == [16, 26]


def test_bad_options_and_output_shapes_are_one_clear_error():
    c = pool("AVERAGE_POOL_2D", [[1, 2], [3, 4]], (1, 2))
    c.attrs["filter_height"] = "2"
    with pytest.raises(QconformError) as e:
        g(c)
    assert e.value.field == "attrs.filter_height"
    # MEAN of [2, 3, 4] over axis 2: [2, 3], not the same count of values in another order
    c = reduce_case("MEAN", np.zeros((2, 3, 4)), [2], (3, 2))
    with pytest.raises(QconformError, match=r"\[2, 3\]"):
        g(c)
