"""QNN-style cases (spec table ``qnn``): encodings from real ranges, spec conformance, golden sanity."""

from __future__ import annotations

import numpy as np
import pytest

import suite.cases.generate as G
from reference import golden, onnx_ops
from suite.core.encodings import compute_encoding
from suite.cases.generators.qnn import dequantized
from suite.core.spec import check_case, table

OPS = ["CONV_2D", "FULLY_CONNECTED", "ADD", "MUL", "AVERAGE_POOL_2D", "SOFTMAX"]
CASES = [(op, v, i) for op in OPS for v in ("qnn_u8", "qnn_u16") for i in range(3)]


def _case(op, v, i):
    return G.make_case(op, v, i)


def real_result(c) -> np.ndarray:
    """The op's real result in output LSB (zero point added, unrounded), in float64, from scratch."""
    op, out = c.op, c.outputs[0]
    if op in ("ADD", "MUL"):
        a, b = dequantized(c.inputs[0]), dequantized(c.inputs[1])
        r = a + b if op == "ADD" else a * b
    elif op == "FULLY_CONNECTED":
        x, w, b = c.inputs
        acc = ((np.asarray(x.data, np.int64) - x.zero_point[0]) @ np.asarray(w.data, np.int64).T
               + np.asarray(b.data, np.int64))
        r = acc * (np.float64(x.scale[0]) * np.asarray(w.scale, np.float64))
    elif op == "CONV_2D":
        x, w, b = c.inputs
        a = c.attrs
        s = (a["stride_h"], a["stride_w"])
        pads = onnx_ops.conv_pads(list(x.shape[1:3]), list(w.shape[1:3]), s, [1, 1], None,
                                  "SAME_UPPER" if a["padding"] == "SAME" else "VALID")
        acc = onnx_ops.conv_integer(np.asarray(x.data, np.int64).transpose(0, 3, 1, 2),
                                    np.asarray(w.data, np.int64).transpose(0, 3, 1, 2),
                                    np.array(x.zero_point[0]), None, pads=pads, strides=list(s))
        acc = acc.astype(np.int64) + np.asarray(b.data, np.int64).reshape(1, -1, 1, 1)
        r = (acc * (np.float64(x.scale[0]) * np.asarray(w.scale, np.float64)).reshape(1, -1, 1, 1))
        r = r.transpose(0, 2, 3, 1)
        if a["fused_activation_function"] == "RELU":
            r = np.maximum(r, 0.0)
    elif op == "AVERAGE_POOL_2D":
        x, a = c.inputs[0], c.attrs
        xr = dequantized(x)
        _, h, w, _ = x.shape
        fh, fw, sh, sw = a["filter_height"], a["filter_width"], a["stride_h"], a["stride_w"]
        oh, ow = out.shape[1:3]
        ph, pw = max((oh - 1) * sh + fh - h, 0) // 2, max((ow - 1) * sw + fw - w, 0) // 2
        r = np.zeros(out.shape)
        for i in range(oh):          # a handful of windows
            for j in range(ow):
                y0, x0 = i * sh - ph, j * sw - pw
                r[:, i, j, :] = xr[:, max(y0, 0):min(y0 + fh, h), max(x0, 0):min(x0 + fw, w), :].mean(axis=(1, 2))
    elif op == "SOFTMAX":
        x = dequantized(c.inputs[0]) * c.attrs.get("beta", 1.0)
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        r = e / e.sum(axis=-1, keepdims=True)
    else:
        raise AssertionError(op)
    return r / np.float64(out.scale[0]) + out.zero_point[0]


@pytest.mark.parametrize("op,variant,index", CASES, ids=[f"{o}-{v}-{i}" for o, v, i in CASES])
def test_qnn_case_follows_the_table(op, variant, index):
    c = _case(op, variant, index)
    assert c.spec == "qnn" and check_case(c) == []
    bits = 16 if variant == "qnn_u16" else 8
    acts = [t for t in c.inputs if t.dtype.startswith("uint")] + [c.outputs[0]]
    assert all(t.dtype == f"uint{bits}" for t in acts)
    if op in ("CONV_2D", "FULLY_CONNECTED"):
        w, b = c.inputs[1], c.inputs[2]
        assert w.dtype == "int8" and set(w.zero_point) == {0} and w.quantized_dimension == 0
        assert int(np.abs(w.data).max()) <= 127          # symmetric: the top code of each channel is +-127
        assert b.dtype == "int32" and np.allclose(b.scale, np.float32(c.inputs[0].scale[0]) * np.float32(w.scale))


@pytest.mark.parametrize("op", ["CONV_2D", "FULLY_CONNECTED", "ADD", "MUL"])
def test_qnn_output_encoding_is_the_snpe_encoding_of_the_real_result(op):
    c = _case(op, "qnn_u16", 0)
    out = c.outputs[0]
    r = (real_result(c) - out.zero_point[0]) * np.float64(out.scale[0])     # back to reals
    e = compute_encoding(r, bitwidth=16)
    assert out.zero_point[0] == e.zero_point and out.scale[0] == pytest.approx(e.scale, rel=1e-6)
    # zero is exact: code zero_point is 0.0
    assert e.dequantize([e.zero_point])[0] == 0.0


@pytest.mark.parametrize("op,variant,index", CASES, ids=[f"{o}-{v}-{i}" for o, v, i in CASES])
def test_float_scheme_golden_is_within_half_an_lsb(op, variant, index):
    """A float-scaled golden rounds the real result: |golden - real| <= 0.5 LSB (+ float32 slack)."""
    c = _case(op, variant, index)
    lo, hi = onnx_ops.qrange(c.outputs[0].dtype)
    want = np.clip(real_result(c), lo, hi)
    got = golden(c, "ort-fp32-rne")[0].astype(np.float64)
    assert np.abs(got - want).max() <= 0.5 + 1e-3


@pytest.mark.parametrize("op,variant,index", CASES, ids=[f"{o}-{v}-{i}" for o, v, i in CASES])
def test_default_scheme_golden_is_within_one_lsb(op, variant, index):
    """The default (LiteRT reference) golden on QNN cases: within 1 LSB of the real result
    (uint16 included: 16-bit ADD shifts, MUL products past int32, 65536-code SOFTMAX)."""
    c = _case(op, variant, index)
    lo, hi = onnx_ops.qrange(c.outputs[0].dtype)
    want = np.clip(real_result(c), lo, hi)
    assert np.abs(golden(c)[0].astype(np.float64) - want).max() <= 1.0


def test_table_is_loaded():
    t = table("qnn")
    assert set(OPS) <= set(t.ops)
    assert t.ops["CONV_2D"].inputs[0].dtypes == ("uint8", "uint16")
    assert t.ops["CONV_2D"].inputs[1].zero_point == 0
