"""Goldens of the data movement and shape operators.

RESHAPE, SQUEEZE, CONCATENATION, TRANSPOSE, GATHER, SLICE, STRIDED_SLICE, PAD, PADV2,
SPACE_TO_DEPTH, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, SHAPE.

Expectations are worked out by hand from the LiteRT kernels' documented index arithmetic
(see the docstrings of reference/ops/movement.py, and TensorFlow's op documentation for
the examples); the last tests run generated cases through LiteRT's reference kernels (the
``tflite-ref`` target) and demand bit-exactness.
"""

from __future__ import annotations

import numpy as np
import pytest

from reference import golden
from suite.core.case import Case, Tensor
from suite.core.errors import QconformError
from suite.cases.generate import generate, make_case
from suite.core.spec import check_case

OPS = ["RESHAPE", "SQUEEZE", "CONCATENATION", "TRANSPOSE", "GATHER", "SLICE", "STRIDED_SLICE", "PAD",
       "PADV2", "SPACE_TO_DEPTH", "BATCH_TO_SPACE_ND", "SPACE_TO_BATCH_ND", "SHAPE"]
S = 0.25


def act(data, z=0, s=S):
    a = np.asarray(data, np.int8)
    return Tensor("int8", a.shape, a, [float(np.float32(s))], [int(z)], 0)


def param(values):
    a = np.asarray(values, np.int32)
    return Tensor("int32", a.shape, a, None, None, 0, const=True)


def out(shape, z=0, s=S):
    return Tensor("int8", tuple(shape), None, [float(np.float32(s))], [int(z)], 0)


def case(op, inputs, out_shape, z=0, **attrs):
    return Case(op, inputs, [out(out_shape, z)], attrs=attrs, id=f"{op}-unit")


def g(c, scheme=None):
    return golden(c, scheme)[0]


# ----------------------------------------------------------------------------- shapes

def test_reshape_infers_minus_one_and_prefers_the_shape_tensor():
    x = act(np.arange(24).reshape(2, 3, 4))
    c = case("RESHAPE", [x, param([4, -1])], (4, 6), new_shape=[99, 99])   # tensor wins over attr
    assert g(c).tolist() == np.arange(24).reshape(4, 6).tolist()
    c = case("RESHAPE", [x], (6, 4), new_shape=[-1, 4])                     # attr only
    assert g(c).shape == (6, 4)


def test_reshape_legacy_zero_attr_means_scalar_and_bad_shapes_are_errors():
    c = case("RESHAPE", [act([[[7]]])], (), new_shape=[0])
    assert g(c).shape == () and int(g(c)) == 7
    with pytest.raises(QconformError, match="more than one -1"):
        g(case("RESHAPE", [act(np.zeros((2, 3))), param([-1, -1])], (6,)))
    with pytest.raises(QconformError, match="output shape"):                # declared shape disagrees
        g(case("RESHAPE", [act(np.zeros((2, 3))), param([3, -1])], (2, 3)))


def test_squeeze_negative_dims_and_all():
    x = act(np.arange(6).reshape(1, 2, 1, 3, 1))
    assert g(case("SQUEEZE", [x], (1, 2, 3), squeeze_dims=[-3, 4])).shape == (1, 2, 3)
    assert g(case("SQUEEZE", [x], (2, 3), squeeze_dims=[])).tolist() == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(QconformError, match="not a size-1"):
        g(case("SQUEEZE", [x], (1, 1, 3, 1), squeeze_dims=[1]))


def test_shape_int32_and_int64():
    x = act(np.zeros((2, 1, 5)))
    for ot in ("int32", "int64"):
        c = Case("SHAPE", [x], [Tensor(ot, (3,), None, None, None, 0)], attrs={"out_type": ot}, id="s")
        got = golden(c)[0]
        assert got.tolist() == [2, 1, 5] and got.dtype == np.dtype(ot)
    with pytest.raises(QconformError, match="out_type"):
        golden(Case("SHAPE", [x], [Tensor("int32", (3,), None, None, None, 0)], attrs={"out_type": "int64"}))


# ----------------------------------------------------------------------------- concat / transpose / gather

def test_concatenation_negative_axis_and_same_scale_rule():
    a, b = act([[1, 2], [3, 4]], z=5), act([[9], [8]], z=5)
    assert g(case("CONCATENATION", [a, b], (2, 3), z=5, axis=-1)).tolist() == [[1, 2, 9], [3, 4, 8]]
    bad = act([[9], [8]], z=6)
    with pytest.raises(QconformError, match="same_scale"):
        g(case("CONCATENATION", [a, bad], (2, 3), z=5, axis=1))


def test_concatenation_fused_activation_clamps():
    # RELU at zero point -10: codes below -10 (negative reals) become -10; RELU6 at scale
    # 0.25: 6 / 0.25 = 24 -> upper bound -10 + 24 = 14
    a = act([[-128, -11, -10, 0, 14, 15, 127]], z=-10)
    assert g(case("CONCATENATION", [a, a], (2, 7), z=-10, axis=0, fused_activation_function="RELU"))[0].tolist() \
        == [-10, -10, -10, 0, 14, 15, 127]
    assert g(case("CONCATENATION", [a, a], (2, 7), z=-10, axis=0, fused_activation_function="RELU6"))[0].tolist() \
        == [-10, -10, -10, 0, 14, 14, 14]


def test_transpose_negative_perm():
    x = act(np.arange(24).reshape(2, 3, 4))
    got = g(case("TRANSPOSE", [x, param([-1, 0, -2])], (4, 2, 3)))
    assert got.tolist() == np.arange(24).reshape(2, 3, 4).transpose(2, 0, 1).tolist()


def test_gather_axis_and_batch_dims_by_hand():
    x = act([[1, 2, 3], [4, 5, 6]])
    # axis 1, indices [[2, 0]]: out[i, 0, j] = x[i, idx[0, j]]
    assert g(case("GATHER", [x, param([[2, 0]])], (2, 1, 2), axis=1)).tolist() == [[[3, 1]], [[6, 4]]]
    # batch_dims 1: out[b, j] = x[b, idx[b, j]]; -1 counts from the indices' rank (2)
    for bd in (1, -1):
        c = case("GATHER", [x, param([[2, 0], [1, 1]])], (2, 2), axis=1, batch_dims=bd)
        assert g(c).tolist() == [[3, 1], [5, 5]]
    # scalar index drops the axis
    assert g(case("GATHER", [x, param(1)], (3,), axis=0)).tolist() == [4, 5, 6]
    with pytest.raises(QconformError, match=r"\[0, 3\)"):
        g(case("GATHER", [x, param([3])], (2, 1), axis=1))


# ----------------------------------------------------------------------------- slices

def test_slice_size_minus_one_takes_the_rest():
    x = act(np.arange(20).reshape(4, 5))
    assert g(case("SLICE", [x, param([1, 2]), param([2, -1])], (2, 3))).tolist() == [[7, 8, 9], [12, 13, 14]]
    with pytest.raises(QconformError, match="begin"):
        g(case("SLICE", [x, param([3, 0]), param([2, 1])], (2, 1)))


def ss(x, begin, end, strides, out_shape, **masks):
    return case("STRIDED_SLICE", [x, param(begin), param(end), param(strides)], out_shape, **masks)


def test_strided_slice_negative_stride_and_clamped_ends():
    x = act(np.arange(10))
    assert g(ss(x, [8], [1], [-3], (3,))).tolist() == [8, 5, 2]
    assert g(ss(x, [-1], [-100], [-4], (3,))).tolist() == [9, 5, 1]       # end clamps to -1: past the front
    assert g(ss(x, [0], [0], [-1], (10,), begin_mask=1, end_mask=1)).tolist() == list(range(9, -1, -1))
    assert g(ss(x, [2], [50], [3], (3,))).tolist() == [2, 5, 8]           # end clamps to 10


def test_strided_slice_masks_match_numpy_indexing():
    a = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5) - 60
    x = act(a)
    # shrink dim 0 at -1, ellipsis over dims 1-2, then dim 3 reversed by 2: x[-1, ..., ::-2]
    c = ss(x, [-1, 0, 0], [0, 0, 0], [1, 1, -2], (3, 4, 3), shrink_axis_mask=1, ellipsis_mask=2, end_mask=4,
           begin_mask=4)
    assert g(c).tolist() == a[-1, ..., ::-2].tolist()
    # new axis in front and in the middle: x[None, 1:, None, :2]
    c = ss(x, [0, 1, 0, 0], [1, 2, 1, 2], [1, 1, 1, 1], (1, 1, 1, 2, 4, 5), new_axis_mask=0b0101)
    assert g(c).tolist() == a[None, 1:2, None, :2].tolist()
    # short spec: dims after the listed ones are taken whole
    assert g(ss(x, [1], [2], [1], (1, 3, 4, 5))).tolist() == a[1:2].tolist()


def test_strided_slice_offset_counts_end_from_begin():
    x = act(np.arange(10))
    assert g(ss(x, [-7], [4], [2], (2,), offset=True)).tolist() == [3, 5]   # x[3:3+4:2]


# ----------------------------------------------------------------------------- padding and blocks

def test_pad_writes_the_zero_point_padv2_the_constant():
    x = act([[1, 2]], z=-7)
    assert g(case("PAD", [x, param([[1, 0], [0, 2]])], (2, 4), z=-7)).tolist() == [[-7, -7, -7, -7], [1, 2, -7, -7]]
    cv = act(np.array(100), z=-7)
    c = case("PADV2", [x, param([[0, 0], [1, 1]]), cv], (1, 4), z=-7)
    assert g(c).tolist() == [[100, 1, 2, 100]]
    c = case("PADV2", [x, param([[0, 0], [1, 0]])], (1, 3), z=-7)         # no constant: zero point
    assert g(c).tolist() == [[-7, 1, 2]]
    with pytest.raises(QconformError, match="non-negative"):
        g(case("PAD", [x, param([[0, 0], [-1, 0]])], (1, 1), z=-7))


def test_space_to_depth_channel_order():
    # [1, 2, 2, 2] with channels (a, b): out depth = (bh * 2 + bw) * C + c
    x = act(np.array([[[1, 10], [2, 20]], [[3, 30], [4, 40]]]).reshape(1, 2, 2, 2))
    c = case("SPACE_TO_DEPTH", [x], (1, 1, 1, 8), block_size=2)
    assert g(c).ravel().tolist() == [1, 10, 2, 20, 3, 30, 4, 40]


def test_space_to_batch_pads_with_zero_point_and_batch_to_space_inverts():
    # TensorFlow's example: [1, 2, 2, 1] = [[1, 2], [3, 4]], block [2, 2] -> batches 1, 2, 3, 4
    x = act(np.array([1, 2, 3, 4]).reshape(1, 2, 2, 1), z=9)
    c = case("SPACE_TO_BATCH_ND", [x, param([2, 2]), param([[0, 0], [0, 0]])], (4, 1, 1, 1), z=9)
    assert g(c).ravel().tolist() == [1, 2, 3, 4]
    # pad W by 2 on the left: padded rows [9, 9, 1, 2] / [9, 9, 3, 4]; batch (sh, sw) takes
    # rows sh::2 and columns sw::2
    c = case("SPACE_TO_BATCH_ND", [x, param([2, 2]), param([[0, 0], [2, 0]])], (4, 1, 2, 1), z=9)
    assert g(c)[:, 0, :, 0].tolist() == [[9, 1], [9, 2], [9, 3], [9, 4]]
    # 3-D NHC input: block [2] on H
    x3 = act(np.array([1, 2, 3, 4]).reshape(1, 4, 1), z=9)
    c = case("SPACE_TO_BATCH_ND", [x3, param([2]), param([[1, 1]])], (2, 3, 1), z=9)
    assert g(c)[:, :, 0].tolist() == [[9, 2, 4], [1, 3, 9]]
    # BATCH_TO_SPACE_ND undoes it, crops remove the padding
    y = act(g(case("SPACE_TO_BATCH_ND", [x, param([2, 2]), param([[0, 0], [2, 0]])], (4, 1, 2, 1), z=9)), z=9)
    c = case("BATCH_TO_SPACE_ND", [y, param([2, 2]), param([[0, 0], [2, 0]])], (1, 2, 2, 1), z=9)
    assert g(c).ravel().tolist() == [1, 2, 3, 4]


# ----------------------------------------------------------------------------- schemes and generated cases

def test_every_scheme_gives_the_same_codes():
    c = make_case("STRIDED_SLICE", "random", 3)
    want = g(c)
    for scheme in ("tflite-ref-single", "caffe-f2", "xnnpack-fp32", "ort-fp32-rne", "onnx-ref"):
        assert np.array_equal(g(c, scheme), want), scheme
    assert np.array_equal(g(c, "exact"), want.astype(np.float64))


def litert_cases(ops, n):
    return [c for c in generate(ops, n) if c.spec == "litert-int8"]


def test_generated_cases_follow_the_spec_table_and_declare_the_kernel_shape():
    for c in litert_cases(OPS, 40):
        assert not check_case(c), (c.id, [str(v) for v in check_case(c)])
        assert c.clause.startswith("litert-int8/") and c.description
        assert g(c).shape == tuple(c.outputs[0].shape), c.id      # the golden re-derives the shape


def test_zero_point_variants_pin_the_pad_value():
    for op in ("PAD", "SPACE_TO_BATCH_ND"):
        for v, z in (("zp_min", -128), ("zp_max", 127)):
            c = make_case(op, v, 0)
            assert c.inputs[0].zero_point == [z] and c.outputs[0].zero_point == [z], c.id


# ----------------------------------------------------------------------------- against LiteRT

def _run(cases, target="tflite-ref"):
    pytest.importorskip("ai_edge_litert")
    from targets import get_target
    from targets.base import Timing
    t = get_target(target)
    return [t.safe_run_one(c, Timing(warmup=0, repeats=1)) for c in cases]


def _first_mismatch(case, got, want):
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"{case.id}: output shape {list(got.shape)}, want {list(want.shape)}"
    bad = np.argwhere(got != want)
    if bad.size == 0:
        return None
    i = tuple(int(v) for v in bad[0])
    return (f"{case.id}: {len(bad)}/{want.size} elements differ; first at index {list(i)}: "
            f"got {int(got[i])}, want {int(want[i])}")


@pytest.mark.parametrize("op", OPS)
def test_bit_exact_against_tflite_ref(op):
    cases = [c for c in litert_cases([op], 16) if c.variant != "fused_act"]
    for c, o in zip(cases, _run(cases)):
        assert o.status == "ok", f"{c.id}: {o.status}: {o.reason}"
        msg = _first_mismatch(c, o.outputs[0], g(c))
        assert msg is None, msg


def test_litert_rejects_concatenation_with_a_fused_activation():
    c = make_case("CONCATENATION", "fused_act", 0)
    (o,) = _run([c])
    assert o.status == "unsupported" and "activation" in o.reason, o.reason


def test_xnnpack_concatenation_finding_still_holds():
    """suite/core/findings.toml xnnpack-concat-ignores-activation: the default (XNNPACK) path runs
    a CONCATENATION with a fused activation and ignores it. If this fails, drop the finding."""
    c = make_case("CONCATENATION", "fused_act", 1)
    (o,) = _run([c], "tflite")
    assert o.status == "ok", o.reason
    raw = np.concatenate([np.asarray(t.data) for t in c.inputs], axis=int(c.attrs["axis"]))
    assert np.array_equal(o.outputs[0], raw) and not np.array_equal(raw, g(c))


def test_option_of_the_wrong_type_is_one_clear_error():
    x = act([[1, 2, 3], [4, 5, 6]])
    for attrs, field in [({"axis": "1"}, "attrs.axis"), ({"axis": 1, "batch_dims": 0.5}, "attrs.batch_dims")]:
        with pytest.raises(QconformError) as e:
            g(case("GATHER", [x, param([0])], (2, 1), **attrs))
        assert e.value.field == field
    with pytest.raises(QconformError) as e:
        g(ss(act(np.arange(10)), [0], [5], [1], (5,), new_axis_mask=-1))
    assert e.value.field == "attrs.new_axis_mask"
    with pytest.raises(QconformError) as e:
        g(case("SQUEEZE", [act(np.zeros((1, 2)))], (2,), squeeze_dims=["0"]))
    assert e.value.field == "attrs.squeeze_dims"
