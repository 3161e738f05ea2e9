"""The source documents' worked examples of quantized data types.

* LiteRT 8-bit spec (seeds/001): per-axis quantization of a [4, 3, 2, 1] tensor with
  scale [1, 2, 3], zero_point [1, 2, 3], quantized_dimension 1: t[:, i] uses scale[i] and
  zero_point[i].
* SNPE (seeds/000), packed 4-bit: "the lower nibble stores the first value while the
  higher nibble stores the second value": (10, 4) packs to 0100 1010.
"""

from __future__ import annotations

import numpy as np
import pytest

from reference.common import dequantize
from suite.core.case import Tensor
from suite.core.dtypes import DTYPES, dtype, pack_int4, unpack_int4


# ----------------------------------------------------------------- per-axis (LiteRT spec)

def _per_axis_tensor(data) -> Tensor:
    return Tensor("int8", (4, 3, 2, 1), np.asarray(data, np.int8).reshape(4, 3, 2, 1),
                  [1.0, 2.0, 3.0], [1, 2, 3], quantized_dimension=1)


def test_per_axis_qparams_broadcast_along_the_quantized_dimension():
    t = _per_axis_tensor(np.zeros(24))
    s, z = t.broadcast_qparams()
    assert s.shape == (1, 3, 1, 1) and z.shape == (1, 3, 1, 1)
    assert s.ravel().tolist() == [1.0, 2.0, 3.0]
    assert z.ravel().tolist() == [1, 2, 3]


def test_per_axis_dequantize_uses_each_slices_scale_and_zero_point():
    # every code 10: t[:, 0] = (10 - 1) * 1 = 9, t[:, 1] = (10 - 2) * 2 = 16, t[:, 2] = (10 - 3) * 3 = 21
    t = _per_axis_tensor(np.full(24, 10))
    real = dequantize(t)
    assert real.shape == (4, 3, 2, 1)
    assert np.all(real[:, 0] == 9) and np.all(real[:, 1] == 16) and np.all(real[:, 2] == 21)
    # distinct codes: element [b, i, h, 0] = (q - zp[i]) * scale[i]
    codes = np.arange(24) - 12
    t = _per_axis_tensor(codes)
    q = codes.reshape(4, 3, 2, 1)
    want = np.stack([(q[:, i] - (i + 1)) * (i + 1.0) for i in range(3)], axis=1)
    assert np.array_equal(dequantize(t), want)


def test_per_tensor_qparams_are_scalars():
    t = Tensor("int8", (2, 2), np.array([[0, 1], [2, 3]], np.int8), [0.5], [1])
    s, z = t.broadcast_qparams()
    assert s.shape == () and z.shape == ()
    assert dequantize(t).tolist() == [[-0.5, 0.0], [0.5, 1.0]]


# ----------------------------------------------------------------- packed 4-bit (SNPE)

def test_pack_int4_snpe_example_first_value_in_low_nibble():
    # unpacked (0000 1010, 0000 0100) -> packed 0100 1010: 10 low, 4 high
    assert pack_int4(np.array([10, 4])).tolist() == [0b01001010]
    # the same bits as signed int4: 1010 is -6
    assert pack_int4(np.array([-6, 4])).tolist() == [0b01001010]


def test_unpack_int4_sign_extends_signed_values():
    packed = np.array([0b01001010], np.uint8)
    assert unpack_int4(packed, 2, signed=False).tolist() == [10, 4]
    assert unpack_int4(packed, 2, signed=True).tolist() == [-6, 4]
    # -8 (1000), 7 (0111), -1 (1111): 0x78, then 0x0F for the odd tail
    p = pack_int4(np.array([-8, 7, -1]))
    assert p.tolist() == [0x78, 0x0F]
    assert unpack_int4(p, 3, signed=True).tolist() == [-8, 7, -1]
    assert unpack_int4(p, 3, signed=True).dtype == np.int8
    assert unpack_int4(p, 3, signed=False).dtype == np.uint8


def test_pack_int4_odd_tail_leaves_high_nibble_zero():
    assert pack_int4(np.array([1, 2, 3])).tolist() == [0x21, 0x03]
    assert unpack_int4(np.array([0x21, 0x03], np.uint8), 3, signed=False).tolist() == [1, 2, 3]
    # a per-channel row of 27 values takes ceil(27 / 2) = 14 bytes (SNPE's (3,3,3,32) example)
    assert pack_int4(np.zeros(27, np.int8)).size == 14


@pytest.mark.parametrize("signed, lo, hi", [(True, -8, 7), (False, 0, 15)])
def test_int4_round_trip_over_the_whole_range(signed, lo, hi):
    vals = np.arange(lo, hi + 1)
    vals = np.concatenate([vals, vals[::-1], vals[:5]])      # 37 values: odd count
    assert unpack_int4(pack_int4(vals), vals.size, signed).tolist() == vals.tolist()


def test_dtype_ranges():
    assert (DTYPES["int4"].qmin, DTYPES["int4"].qmax) == (-8, 7)
    assert (DTYPES["uint4"].qmin, DTYPES["uint4"].qmax) == (0, 15)
    assert (DTYPES["int8"].qmin, DTYPES["int8"].qmax) == (-128, 127)
    assert (DTYPES["int16"].qmin, DTYPES["int16"].qmax) == (-32768, 32767)
    assert DTYPES["float32"].qmin is None and not DTYPES["bool"].is_int
    with pytest.raises(KeyError, match="int3"):
        dtype("int3")
