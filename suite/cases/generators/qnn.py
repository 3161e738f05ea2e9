"""QNN-style cases (spec table ``qnn``): uint8 / uint16 activations, int8 per-channel weights.

Every scale and zero point comes from the SNPE encoding algorithm
(:mod:`suite.encodings`) applied to real-valued data, as a QNN model's would:
activations are drawn as reals from a random range (sometimes one-signed, as after a
ReLU), encoded at 8 or 16 bits and quantized; weights are real, encoded symmetric
per output channel; the bias is quantized at input_scale * weight_scale[c]; the output
encoding is fitted to the op's real result (computed in float64 from the quantized
inputs). Variants ``qnn_u8`` and ``qnn_u16`` (3 cases each) are extra variants of
the ops' main generators. Accumulations stay far below 2^31 (K <= 72 for conv/FC).
"""

from __future__ import annotations

import numpy as np

from reference import onnx_ops

from suite.core.case import Case, Tensor
from suite.core.encodings import Encoding, bias_encodings, compute_encoding, per_channel_encodings, quantize_per_channel
from suite.cases.generate import Gen, generator

VARIANTS = {"qnn_u8": 3, "qnn_u16": 3}


def _bits(g: Gen) -> int:
    return 16 if g.variant == "qnn_u16" else 8


def _real_range(g: Gen) -> tuple[float, float]:
    """A random real range: both signs, non-negative (post-ReLU) or non-positive."""
    kind = g.choice(["both", "both", "both", "pos", "neg"])
    a = float(np.exp(g.rng.uniform(np.log(0.05), np.log(8.0))))
    b = float(np.exp(g.rng.uniform(np.log(0.05), np.log(8.0))))
    if kind == "pos":
        return g.rng.uniform(0.0, 0.3) * a, a
    if kind == "neg":
        return -a, -g.rng.uniform(0.0, 0.3) * a
    return -a, b


def _enc_tensor(enc: Encoding, shape, codes=None, const=None) -> Tensor:
    dtype, s, z = enc.qparams(signed=False)
    return Tensor(dtype, tuple(int(d) for d in shape), codes if codes is None else codes.astype(np.int64).astype(
        np.uint16 if dtype == "uint16" else np.uint8), [s], [z], 0, const)


def activation(g: Gen, shape, bits: int) -> tuple[Tensor, np.ndarray]:
    """A quantized activation from real data; returns (tensor, its dequantized values)."""
    lo, hi = _real_range(g)
    real = g.rng.uniform(lo, hi, size=tuple(shape))
    enc = compute_encoding(real, bitwidth=bits)
    t = _enc_tensor(enc, shape, enc.quantize(real))
    return t, dequantized(t)


def dequantized(t: Tensor) -> np.ndarray:
    """(q - z) * s with the tensor's float32 scale, in float64."""
    s, z = t.broadcast_qparams()
    return (np.asarray(t.data, np.float64) - z) * s


def output(real: np.ndarray, bits: int, shape=None) -> Tensor:
    """The output tensor whose encoding is fitted to the op's real result."""
    enc = compute_encoding(real, bitwidth=bits)
    return _enc_tensor(enc, real.shape if shape is None else shape)


def weights(g: Gen, shape, axis: int = 0) -> tuple[Tensor, np.ndarray]:
    """int8 symmetric per-channel weights from real ones; returns (tensor, int codes)."""
    real = g.rng.normal(0.0, 1.0, size=tuple(shape)) * np.exp(g.rng.uniform(np.log(0.02), np.log(0.5)))
    encs = per_channel_encodings(real, axis, bitwidth=8)
    codes = quantize_per_channel(real, encs, axis)
    t = Tensor("int8", tuple(shape), codes.astype(np.int8), [float(np.float32(e.scale)) for e in encs],
               [0] * len(encs), axis, True)
    return t, codes.astype(np.int64)


def bias(g: Gen, x: Tensor, w: Tensor, n: int) -> Tensor:
    """int32 bias: real values quantized at input_scale * weight_scale[c] (zero point 0)."""
    encs = bias_encodings(x.scale[0], w.scale)
    real = g.rng.normal(0.0, 0.5, size=n)
    codes = np.array([int(np.rint(r / e.scale)) for r, e in zip(real, encs)], np.int64)
    codes = np.clip(codes, -(2**31), 2**31 - 1)
    return Tensor("int32", (n,), codes.astype(np.int32), [e.scale for e in encs], [0] * n, 0, True)


def _case(g: Gen, op: str, inputs, out, attrs) -> Case:
    g.clause = f"qnn/{op}/uint{_bits(g)}"
    return Case(op=op, inputs=inputs, outputs=[out], attrs=attrs, spec="qnn",
                description=f"QNN HTP uint{_bits(g)} activations, encodings from real ranges")


# --------------------------------------------------------------------------- ops

@generator("CONV_2D", variants=VARIANTS, extra=True, clause="qnn/CONV_2D")
def gen_conv(g: Gen) -> Case:
    bits = _bits(g)
    n, h, w_, cin = 1, g.randint(3, 9), g.randint(3, 9), g.randint(1, 8)
    kh, kw = g.choice([1, 3, 3]), g.choice([1, 3, 3])
    cout = g.randint(1, 8)
    stride = (g.randint(1, 2), g.randint(1, 2))
    padding = g.choice(["SAME", "VALID"])
    x, xr = activation(g, (n, h, w_, cin), bits)
    w, wq = weights(g, (cout, kh, kw, cin), 0)
    b = bias(g, x, w, cout)
    # real result: exact integer conv (NCHW / OIHW, LiteRT SAME padding) times the scales
    oh = -(-h // stride[0]) if padding == "SAME" else (h - kh) // stride[0] + 1
    ow = -(-w_ // stride[1]) if padding == "SAME" else (w_ - kw) // stride[1] + 1
    pads = [0, 0, 0, 0]
    if padding == "SAME":
        th, tw = max((oh - 1) * stride[0] + kh - h, 0), max((ow - 1) * stride[1] + kw - w_, 0)
        pads = [th // 2, tw // 2, th - th // 2, tw - tw // 2]
    xq = np.asarray(x.data, np.int64).transpose(0, 3, 1, 2)
    acc = onnx_ops.conv_integer(xq, wq.transpose(0, 3, 1, 2), np.array(x.zero_point[0]), None,
                                pads=pads, strides=list(stride))
    acc = acc.astype(np.int64) + np.asarray(b.data, np.int64).reshape(1, -1, 1, 1)
    real = acc * (np.float64(x.scale[0]) * np.asarray(w.scale, np.float64)).reshape(1, -1, 1, 1)
    real = real.transpose(0, 2, 3, 1)
    act = g.choice(["NONE", "NONE", "RELU"])
    if act == "RELU":
        real = np.maximum(real, 0.0)
    out = output(real, bits)
    attrs = {"padding": padding, "stride_w": stride[1], "stride_h": stride[0], "dilation_w_factor": 1,
             "dilation_h_factor": 1, "fused_activation_function": act}
    return _case(g, "CONV_2D", [x, w, b], out, attrs)


@generator("FULLY_CONNECTED", variants=VARIANTS, extra=True, clause="qnn/FULLY_CONNECTED")
def gen_fc(g: Gen) -> Case:
    bits = _bits(g)
    batch, k, o = g.randint(1, 4), g.randint(1, 64), g.randint(1, 16)
    x, xr = activation(g, (batch, k), bits)
    w, wq = weights(g, (o, k), 0)
    b = bias(g, x, w, o)
    acc = (np.asarray(x.data, np.int64) - x.zero_point[0]) @ wq.T + np.asarray(b.data, np.int64)
    real = acc * (np.float64(x.scale[0]) * np.asarray(w.scale, np.float64))
    out = output(real, bits)
    return _case(g, "FULLY_CONNECTED", [x, w, b], out,
                 {"fused_activation_function": "NONE", "keep_num_dims": False})


def _binary(g: Gen, op: str) -> Case:
    bits = _bits(g)
    rank = g.randint(1, 4)
    sa = [g.randint(1, 6) for _ in range(rank)]
    sb = [d if g.rng.random() < 0.7 else 1 for d in sa]
    a, ar = activation(g, sa, bits)
    b, br = activation(g, sb, bits)
    real = ar + br if op == "ADD" else ar * br
    out = output(real, bits)
    return _case(g, op, [a, b], out, {"fused_activation_function": "NONE"})


@generator("ADD", variants=VARIANTS, extra=True, clause="qnn/ADD")
def gen_add(g: Gen) -> Case:
    return _binary(g, "ADD")


@generator("MUL", variants=VARIANTS, extra=True, clause="qnn/MUL")
def gen_mul(g: Gen) -> Case:
    return _binary(g, "MUL")


@generator("AVERAGE_POOL_2D", variants=VARIANTS, extra=True, clause="qnn/AVERAGE_POOL_2D")
def gen_avgpool(g: Gen) -> Case:
    bits = _bits(g)
    n, h, w_, c = 1, g.randint(2, 9), g.randint(2, 9), g.randint(1, 8)
    fh, fw = g.randint(1, min(3, h)), g.randint(1, min(3, w_))
    sh, sw = g.randint(1, 2), g.randint(1, 2)
    padding = g.choice(["SAME", "VALID"])
    x, _ = activation(g, (n, h, w_, c), bits)
    oh = -(-h // sh) if padding == "SAME" else (h - fh) // sh + 1
    ow = -(-w_ // sw) if padding == "SAME" else (w_ - fw) // sw + 1
    out = Tensor(x.dtype, (n, oh, ow, c), None, list(x.scale), list(x.zero_point), 0)   # same scale
    attrs = {"padding": padding, "stride_w": sw, "stride_h": sh, "filter_width": fw, "filter_height": fh,
             "fused_activation_function": "NONE"}
    return _case(g, "AVERAGE_POOL_2D", [x], out, attrs)


@generator("SOFTMAX", variants=VARIANTS, extra=True, clause="qnn/SOFTMAX")
def gen_softmax(g: Gen) -> Case:
    bits = _bits(g)
    rank = g.randint(1, 3)
    shape = [g.randint(1, 4) for _ in range(rank - 1)] + [g.randint(2, 32)]
    x, _ = activation(g, shape, bits)
    dtype = "uint16" if bits == 16 else "uint8"
    out = Tensor(dtype, tuple(shape), None, [2.0 ** -bits], [0], 0)   # [0, 1) in 2^bits steps
    return _case(g, "SOFTMAX", [x], out, {"beta": 1.0})
