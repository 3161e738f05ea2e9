"""Generators for the convolution / matrix family: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED,
TRANSPOSE_CONV, BATCH_MATMUL.

Every op shares one set of variant recipes (:func:`_recipe`); the op generator draws the shapes
and options and builds the tensors from the recipe:

* common edges: ``sat_hi`` / ``sat_lo`` (inputs near one end, weights mostly positive, output
  scale halved: outputs clip), ``zp_min`` / ``zp_max`` (input and output zero points at the
  int8 limits), ``odd_shape`` (odd sizes everywhere).
* ``tie``: s_in and s_out powers of two and s_w[c] = odd * 2^-k * s_out / s_in, so every real
  multiplier is exactly odd / 2^k (k = 1..3) in float32 and double alike; with small data
  1/2^k of the outputs land exactly on +-n.5 before the last rounding step.
* ``dbl_vs_single``: multipliers in [1/8, 1/2) (right shift 1..2) and small accumulators, where
  MultiplyByQuantizedMultiplier's two roundings and the single-rounding build disagree on a
  large share of the outputs away from ties.
* ``acc_extreme``: a reduction of ~66k saturated products (x - z_in = 255, |w| = 127), bias set
  so channel accumulators sit a few hundred counts inside +-2^31 (they do not wrap).
* ``mult_extreme``: index 0: multipliers near 2^-31 (the smallest QuantizeMultiplier keeps)
  with extreme accumulators; index 1: multipliers 2^3..2^12 (left shifts) on tiny accumulators.
* op-specific: ``perchannel_wide`` (channel scales over 2^12), ``per_tensor``, ``no_bias``,
  ``strided``, ``dilated``, ``grouped``, ``depth_multiplier``, ``rank3`` / ``keep_num_dims``,
  ``adj``, ``broadcast``.

Output scales of the other variants are fitted to the exact real outputs (the golden's own
integer accumulators give them), so outputs use the int8 range.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from suite.core.geometry import out_size, pad_before
from reference.ops.conv import (batch_matmul_acc, conv_acc, depthwise_acc, fc_acc,
                                transpose_conv_acc)

from suite.core.case import Case, Tensor
from suite.cases.generate import Gen, f32, generator
from suite.core.spec import rule

ACTS = ["NONE", "NONE", "RELU", "RELU6", "RELU_N1_TO_1"]

# reduction length of acc_extreme: K * 255 * 127 just below 2^31
BIG_K = 66_000


# --------------------------------------------------------------------------- recipes

@dataclass
class Recipe:
    """How a variant draws codes and scales (None: the ordinary way)."""

    mults: np.ndarray | None = None   # real multipliers per output channel (fixes s_w from s_in, s_out)
    s_in: float | None = None
    s_out: float | None = None
    x_dev: tuple[int, int] | None = None   # input codes = z_in + [lo, hi]
    x_max: bool = False                    # inputs 127 with z_in = -128 (x - z_in = 255)
    w_range: tuple[int, int] = (-127, 127)
    w_signs: bool = False                  # each output channel all +127 or all -127
    near_limit: bool = False               # bias puts channel accumulators next to +-2^31
    big: bool = False                      # the op uses its ~66k-long reduction shape
    bias_mag: int = 2 ** 12
    even: bool = False                     # even weights and bias (BATCH_MATMUL: even b - z_b)


def _is_big(g: Gen) -> bool:
    """Whether the variant needs the op's ~66k-long reduction (extreme accumulators)."""
    return g.variant == "acc_extreme" or (g.variant == "mult_extreme" and g.index % 2 == 0)


def _recipe(g: Gen, n_out: int) -> Recipe:
    v = g.variant
    r = Recipe()
    if v in ("tie", "ties"):
        a = g.randint(3, 8)
        d = a + g.randint(2, 9)
        r.s_in, r.s_out = 2.0 ** -a, 2.0 ** -d
        ks = g.rng.integers(1, 4, size=n_out)
        odd = np.array([2 * g.randint(0, 2 ** (int(k) - 1) - 1) + 1 for k in ks])
        # ties: 1/4 on even accumulators: SaturatingRoundingDoublingHighMul halves them exactly
        # (it would round an odd one, negative ties up, and make double-rounding differences
        # away from ties), and the final RoundingDivideByPOT breaks every tie (acc = 2 mod 4,
        # half the outputs) away from zero
        r.mults = odd / 2.0 ** ks if v == "tie" else np.full(n_out, 0.25)
        r.x_dev, r.w_range, r.bias_mag = (-6, 6), (-3, 3), 24
        if v == "ties":   # a small bias keeps a channel's outputs on both sides of zero
            r.even, r.bias_mag = True, 4
    elif v == "dbl_vs_single":
        r.s_in, r.s_out = g.scale(2 ** -8, 2 ** -3), g.scale(2 ** -8, 2 ** -3)
        r.mults = g.rng.uniform(0.125, 0.5, size=n_out)
        r.x_dev, r.w_range, r.bias_mag = (-10, 10), (-7, 7), 40
    elif v == "acc_extreme":
        r.x_max, r.w_signs, r.near_limit, r.big = True, True, True, True
    elif v == "mult_extreme":
        r.s_in, r.s_out = g.scale(2 ** -8, 2 ** -3), g.scale(2 ** -8, 2 ** -3)
        if g.index % 2 == 0:
            r.mults = 2.0 ** g.rng.uniform(-31, -27, size=n_out)
            r.x_max, r.w_signs, r.big, r.bias_mag = True, True, True, 0
        else:
            r.mults = 2.0 ** g.rng.uniform(3, 12, size=n_out)
            r.x_dev, r.w_range, r.bias_mag = (-1, 1), (-1, 1), 0
    elif v == "sat_hi" or v == "sat_lo":
        r.w_range = (-20, 127)
    return r


def _input(g: Gen, r: Recipe, shape, dtype: str = "int8") -> Tensor:
    if r.x_max:
        return g.activation(shape, scale=r.s_in, zero_point=-128,
                            data=np.full(tuple(shape), 127, np.int8))
    t = g.activation(shape, scale=r.s_in)
    if r.x_dev is not None:
        z = t.zero_point[0]
        dev = g.rng.integers(r.x_dev[0], r.x_dev[1] + 1, size=tuple(shape))
        if r.x_dev == (-1, 1):   # mostly exactly at the zero point
            dev = dev * (g.rng.random(tuple(shape)) < 0.15)
        t.data = np.clip(z + dev, -128, 127).astype(np.int8)
    return t


def _weight_codes(g: Gen, r: Recipe, shape, axis: int) -> np.ndarray:
    if r.w_signs:
        n = shape[axis]
        signs = np.where(np.arange(n) % 2 == 0, 1, -1)
        if n > 2:
            signs[2:] = g.rng.choice([-1, 1], size=n - 2)
        bshape = [1] * len(shape)
        bshape[axis] = n
        return np.broadcast_to(127 * signs.reshape(bshape), tuple(shape)).astype(np.int8)
    lo, hi = r.w_range
    if r.even:
        return (2 * g.rng.integers(-(-lo // 2), hi // 2 + 1, size=tuple(shape))).astype(np.int8)
    return g.rng.integers(lo, hi + 1, size=tuple(shape)).astype(np.int8)


def _weights(g: Gen, r: Recipe, shape, axis: int, per_axis: bool, s_in: float, s_out: float | None) -> Tensor:
    data = _weight_codes(g, r, shape, axis)
    if r.mults is not None:
        m = r.mults if per_axis else r.mults[:1]
        scales = [f32(mc * s_out / s_in) for mc in m]
    else:
        scales = g.weights(shape, axis, per_axis).scale
    return Tensor("int8", tuple(int(d) for d in shape), data, [f32(s) for s in scales],
                  [0] * len(scales), axis if len(scales) > 1 else 0, const=True)


def _bias(g: Gen, r: Recipe, s_in: float, w: Tensor, n: int, acc: np.ndarray | None = None) -> Tensor:
    """The bias: random, or (near_limit) chosen so that channel 0's accumulator is a few
    hundred below 2^31 - 1 and channel 1's a few hundred above -2^31."""
    b = g.bias(s_in, w, n, magnitude=max(r.bias_mag, 1))
    if r.bias_mag == 0:
        b.data = np.zeros(n, np.int32)
    if r.even:
        b.data = (b.data & ~np.int32(1)).astype(np.int32)
    if r.near_limit and acc is not None:
        flat = acc.reshape(-1, n)
        hi_c, lo_c = flat.max(axis=0), flat.min(axis=0)
        data = b.data.astype(np.int64)
        data[0] = (2 ** 31 - 1 - g.randint(0, 500)) - int(hi_c[0])
        if n > 1:
            data[1] = (-(2 ** 31) + g.randint(0, 500)) - int(lo_c[1])
        b.data = data.astype(np.int32)
    return b


def _output(g: Gen, r: Recipe, shape, real: np.ndarray) -> Tensor:
    if r.s_out is not None:
        return g.output(shape, r.s_out, g.zero_point())
    s, z = g.output_qparams(real)
    return g.output(shape, s, z)


def _real(acc: np.ndarray, s_in: float, w: Tensor) -> np.ndarray:
    """Real outputs of an accumulator whose last axis is the output channel."""
    return acc.astype(np.float64) * s_in * np.asarray(w.scale, np.float64)


def _act(g: Gen) -> str:
    return g.choice(ACTS) if g.variant == "random" else "NONE"


def _clause(op: str, *parts: str) -> str:
    r = rule(op)
    return "; ".join(r.clause(*p.split("/")) for p in parts)


def _per_axis(g: Gen) -> bool:
    if g.variant == "per_tensor":
        return False
    if g.variant in ("perchannel_wide", "acc_extreme", "mult_extreme", "tie", "ties", "dbl_vs_single"):
        return True
    return g.rng.random() < 0.8


def _geometry(g: Gen, k_lo: int = 1, k_hi: int = 5):
    """(kh, kw, stride, dilation, padding) for the variant."""
    v = g.variant
    if v == "odd_shape":
        kh, kw = g.choice([1, 3, 5]), g.choice([1, 3, 5])
    else:
        kh, kw = g.randint(k_lo, k_hi), g.randint(k_lo, k_hi)
        if g.rng.random() < 0.5:
            kw = kh
    stride = (g.randint(1, 3), g.randint(1, 3)) if v == "strided" else \
        ((g.randint(1, 2), g.randint(1, 2)) if v == "random" else (1, 1))
    dil = (g.randint(2, 3), g.randint(1, 3)) if v == "dilated" else \
        ((g.choice([1, 1, 2]), g.choice([1, 1, 2])) if v == "random" else (1, 1))
    if v == "random" and max(dil) > 1 and max(stride) > 1 and g.rng.random() < 0.8:
        stride = (1, 1)   # models rarely combine the two (TF's own convolutions refuse it)
    padding = g.choice(["SAME", "VALID"])
    return kh, kw, stride, dil, padding


def _spatial(g: Gen, kh: int, kw: int, dil, lo: int = 3, hi: int = 12) -> tuple[int, int]:
    if g.variant == "odd_shape":
        h, w = g.choice([5, 7, 9, 13]), g.choice([5, 7, 9, 13])
    else:
        lo = max(lo, 8) if g.variant == "ties" else lo     # outputs enough for 64 ties a side
        h, w = g.randint(lo, hi), g.randint(lo, hi)
    # room for at least one VALID output
    return max(h, (kh - 1) * dil[0] + 1), max(w, (kw - 1) * dil[1] + 1)


def _chan(g: Gen, lo: int = 1, hi: int = 16) -> int:
    if g.variant == "ties":
        lo = max(lo, hi // 2)
    return g.choice([1, 3, 5, 7, 9, 13]) if g.variant == "odd_shape" else g.randint(lo, hi)


# --------------------------------------------------------------------------- CONV_2D

CONV_VARIANTS = {"perchannel_wide": 2, "tie": 2, "dbl_vs_single": 2, "acc_extreme": 1, "mult_extreme": 2,
                 "strided": 1, "dilated": 1, "per_tensor": 1, "no_bias": 1, "grouped": 1}


@generator("CONV_2D", variants=CONV_VARIANTS)
def gen_conv_2d(g: Gen) -> Case:
    v = g.variant
    kh, kw, stride, dil, padding = _geometry(g)
    cout = _chan(g)
    if _is_big(g):     # one 3x3 VALID output over ~66k taps
        kh = kw = 3
        stride, dil, padding = (1, 1), (1, 1), "VALID"
        n, h, w, cin, cw, cout = 1, 3, 3, -(-BIG_K // 9), -(-BIG_K // 9), 3
    else:
        n = 2 if (v == "random" and g.rng.random() < 0.2) else 1
        h, w = _spatial(g, kh, kw, dil)
        cw = _chan(g, 1, 12)
        groups = g.randint(2, 3) if v == "grouped" else 1
        cin = cw * groups
        if groups > 1:
            cout = groups * g.randint(1, 4)
    r = _recipe(g, cout)
    x = _input(g, r, (n, h, w, cin))
    s_in = x.scale[0]
    wt = _weights(g, r, (cout, kh, kw, cw), 0, _per_axis(g), s_in, r.s_out)
    oh, ow = out_size(h, kh, stride[0], dil[0], padding), out_size(w, kw, stride[1], dil[1], padding)
    pads = (pad_before(h, kh, stride[0], dil[0], oh), pad_before(w, kw, stride[1], dil[1], ow))
    acc = conv_acc(np.asarray(x.data), x.zero_point[0], np.asarray(wt.data), stride, dil, pads, (oh, ow),
                   cin // cw)
    inputs = [x, wt]
    if v != "no_bias":
        b = _bias(g, r, s_in, wt, cout, acc)
        acc = acc + b.data.astype(np.int64)
        inputs.append(b)
    out = _output(g, r, (n, oh, ow, cout), _real(acc, s_in, wt))
    attrs = {"padding": padding, "stride_w": stride[1], "stride_h": stride[0],
             "dilation_w_factor": dil[1], "dilation_h_factor": dil[0], "fused_activation_function": _act(g)}
    c = Case(op="CONV_2D", inputs=inputs, outputs=[out], attrs=attrs)
    c.clause = _clause("CONV_2D", "weight/granularity", "bias/scale" if len(inputs) > 2 else "inputs")
    c.description = (f"{v}: {n}x{h}x{w}x{cin} * {cout}x{kh}x{kw}x{cw} {padding} stride {stride} dilation {dil}"
                     f"{' groups ' + str(cin // cw) if cin != cw else ''}, "
                     f"{'per-axis' if wt.per_axis else 'per-tensor'} weights")
    return c


# --------------------------------------------------------------------------- DEPTHWISE_CONV_2D

# "no_bias": LiteRT 2.3.0's optimized int8 DEPTHWISE_CONV_2D kernel (default and
# BUILTIN_WITHOUT_DEFAULT_DELEGATES resolvers) segfaults on a model without a bias; the worker
# process of the tflite target dies and the case is a `crash`, labelled by the known finding
# litert-opt-dwconv-no-bias-segfault (suite/core/findings.toml). The reference kernel is exact.
DW_VARIANTS = {"perchannel_wide": 2, "tie": 2, "dbl_vs_single": 2, "acc_extreme": 1, "mult_extreme": 2,
               "strided": 1, "dilated": 1, "per_tensor": 1, "depth_multiplier": 2, "no_bias": 1}


@generator("DEPTHWISE_CONV_2D", variants=DW_VARIANTS)
def gen_depthwise(g: Gen) -> Case:
    v = g.variant
    kh, kw, stride, dil, padding = _geometry(g)
    c_in = _chan(g)
    mult = g.randint(2, 4) if v == "depth_multiplier" else (g.choice([1, 1, 1, 2]) if v == "random" else 1)
    n = 1
    if _is_big(g):
        kh = kw = 257                      # 66049 taps per output
        stride, dil, padding = (1, 1), (1, 1), "VALID"
        h, w, c_in, mult = 257, 257, 2, 1
    else:
        h, w = _spatial(g, kh, kw, dil)
    co = c_in * mult
    r = _recipe(g, co)
    x = _input(g, r, (n, h, w, c_in))
    s_in = x.scale[0]
    wt = _weights(g, r, (1, kh, kw, co), 3, _per_axis(g), s_in, r.s_out)
    oh, ow = out_size(h, kh, stride[0], dil[0], padding), out_size(w, kw, stride[1], dil[1], padding)
    pads = (pad_before(h, kh, stride[0], dil[0], oh), pad_before(w, kw, stride[1], dil[1], ow))
    acc = depthwise_acc(np.asarray(x.data), x.zero_point[0], np.asarray(wt.data), mult, stride, dil, pads,
                        (oh, ow))
    inputs = [x, wt]
    if v != "no_bias":
        b = _bias(g, r, s_in, wt, co, acc)
        acc = acc + b.data.astype(np.int64)
        inputs.append(b)
    out = _output(g, r, (n, oh, ow, co), _real(acc, s_in, wt))
    attrs = {"padding": padding, "stride_w": stride[1], "stride_h": stride[0],
             "dilation_w_factor": dil[1], "dilation_h_factor": dil[0], "depth_multiplier": mult,
             "fused_activation_function": _act(g)}
    c = Case(op="DEPTHWISE_CONV_2D", inputs=inputs, outputs=[out], attrs=attrs)
    c.clause = _clause("DEPTHWISE_CONV_2D", "weight/granularity",
                       "bias/scale" if len(inputs) > 2 else "inputs")
    c.description = (f"{v}: {n}x{h}x{w}x{c_in} * 1x{kh}x{kw}x{co} (multiplier {mult}) {padding} "
                     f"stride {stride} dilation {dil}, {'per-axis' if wt.per_axis else 'per-tensor'} weights")
    return c


# --------------------------------------------------------------------------- FULLY_CONNECTED

FC_VARIANTS = {"perchannel_wide": 2, "tie": 2, "dbl_vs_single": 2, "acc_extreme": 1, "mult_extreme": 2,
               "per_tensor": 1, "no_bias": 1, "rank3": 1, "keep_num_dims": 2}


@generator("FULLY_CONNECTED", variants=FC_VARIANTS)
def gen_fully_connected(g: Gen) -> Case:
    v = g.variant
    o = 3 if _is_big(g) else _chan(g, 1, 48)
    r = _recipe(g, o)
    # the spec lists FULLY_CONNECTED's bias as per-tensor; with per-axis weights LiteRT takes a
    # per-axis bias (scale input_scale * weight_scale[c]), which the spec table allows
    per_axis = v not in ("per_tensor", "acc_extreme") and (v in ("perchannel_wide", "tie", "ties", "dbl_vs_single",
                                                               "mult_extreme", "no_bias") or g.rng.random() < 0.5)
    if r.big:
        k, lead = BIG_K, (1,)
    else:
        k = _chan(g, 1, 64)
        if v in ("rank3", "keep_num_dims"):
            lead = (g.randint(1, 3), g.randint(1, 4))
        elif v == "odd_shape":
            lead = (g.choice([1, 3, 5]),)
        elif v == "ties":
            lead = (g.randint(6, 10),)
        else:
            lead = (g.randint(1, 6),)
    keep = v == "keep_num_dims" or (v == "random" and g.rng.random() < 0.2)
    x = _input(g, r, lead + (k,))
    s_in = x.scale[0]
    wt = _weights(g, r, (o, k), 0, per_axis, s_in, r.s_out)
    batch = int(np.prod(lead))
    acc = fc_acc(np.asarray(x.data).reshape(batch, k), x.zero_point[0], np.asarray(wt.data))
    inputs = [x, wt]
    if v != "no_bias" and not (per_axis and g.rng.random() < 0.25):
        b = _bias(g, r, s_in, wt, o, acc)
        acc = acc + b.data.astype(np.int64)
        inputs.append(b)
    out_shape = lead + (o,) if keep else (batch, o)
    out = _output(g, r, out_shape, _real(acc, s_in, wt))
    attrs = {"fused_activation_function": _act(g), "keep_num_dims": keep}
    c = Case(op="FULLY_CONNECTED", inputs=inputs, outputs=[out], attrs=attrs)
    c.clause = _clause("FULLY_CONNECTED", "weight/granularity",
                       "bias/granularity" if len(inputs) > 2 else "inputs")
    c.description = (f"{v}: {list(lead) + [k]} x [{o}, {k}]^T, keep_num_dims={keep}, "
                     f"{'per-axis' if per_axis else 'per-tensor'} weights, "
                     f"{'bias' if len(inputs) > 2 else 'no bias'}")
    return c


# --------------------------------------------------------------------------- TRANSPOSE_CONV

TC_VARIANTS = {"perchannel_wide": 2, "tie": 2, "dbl_vs_single": 2, "acc_extreme": 1, "mult_extreme": 2,
               "strided": 2, "per_tensor": 1, "no_bias": 1}


@generator("TRANSPOSE_CONV", variants=TC_VARIANTS)
def gen_transpose_conv(g: Gen) -> Case:
    v = g.variant
    o = 3 if _is_big(g) else _chan(g, 1, 12)
    r = _recipe(g, o)
    padding = g.choice(["SAME", "VALID"])
    if r.big:         # one pixel, 1x1 kernel over ~66k channels
        kh = kw = 1
        stride, padding = (1, 1), "VALID"
        n, oh, ow, c = 1, 1, 1, BIG_K
    else:
        n = 1
        if v == "odd_shape":
            kh, kw = g.choice([1, 3, 5]), g.choice([1, 3, 5])
        else:
            kh = g.randint(1, 5)
            kw = kh if g.rng.random() < 0.6 else g.randint(1, 5)
        stride = (g.randint(2, 3), g.randint(1, 3)) if v == "strided" else \
            ((g.randint(1, 3), g.randint(1, 3)) if v == "random" else (1, 1))
        oh = g.choice([5, 7, 9, 13]) if v == "odd_shape" else g.randint(2, 14)
        ow = g.choice([5, 7, 9, 13]) if v == "odd_shape" else g.randint(2, 14)
        oh, ow = max(oh, kh), max(ow, kw)
        c = _chan(g, 1, 10)
    h, w = out_size(oh, kh, stride[0], 1, padding), out_size(ow, kw, stride[1], 1, padding)
    x = _input(g, r, (n, h, w, c))
    s_in = x.scale[0]
    wt = _weights(g, r, (o, kh, kw, c), 0, _per_axis(g), s_in, r.s_out)
    pads = (pad_before(oh, kh, stride[0], 1, h), pad_before(ow, kw, stride[1], 1, w))
    acc = transpose_conv_acc(np.asarray(x.data), x.zero_point[0], np.asarray(wt.data), stride, pads, (oh, ow))
    shape_t = g.param([n, oh, ow, o])
    inputs = [shape_t, wt, x]
    if v != "no_bias":
        b = _bias(g, r, s_in, wt, o, acc)
        acc = acc + b.data.astype(np.int64)
        inputs.append(b)
    out = _output(g, r, (n, oh, ow, o), _real(acc, s_in, wt))
    attrs = {"padding": padding, "stride_w": stride[1], "stride_h": stride[0],
             "fused_activation_function": _act(g)}
    cs = Case(op="TRANSPOSE_CONV", inputs=inputs, outputs=[out], attrs=attrs)
    cs.clause = _clause("TRANSPOSE_CONV", "weight/granularity", "bias/scale" if len(inputs) > 3 else "inputs")
    cs.description = (f"{v}: {n}x{h}x{w}x{c} -> {n}x{oh}x{ow}x{o}, kernel {kh}x{kw} {padding} stride {stride}, "
                      f"{'per-axis' if wt.per_axis else 'per-tensor'} weights")
    return cs


# --------------------------------------------------------------------------- BATCH_MATMUL

BMM_VARIANTS = {"tie": 2, "dbl_vs_single": 2, "acc_extreme": 1, "mult_extreme": 2, "adj": 2, "broadcast": 3}


@generator("BATCH_MATMUL", variants=BMM_VARIANTS)
def gen_batch_matmul(g: Gen) -> Case:
    v = g.variant
    r = _recipe(g, 1)
    adj_x = adj_y = False
    if r.big:
        batch_a, batch_b, m, k, n = (), (), 1, 65_790, 2
    else:
        m, k, n = _chan(g, 1, 16), _chan(g, 1, 24), _chan(g, 1, 16)
        rank = g.randint(2, 5) if v in ("random", "broadcast") else g.randint(2, 4)
        batch = [_chan(g, 1, 3) for _ in range(rank - 2)]
        batch_a, batch_b = list(batch), list(batch)
        if v == "broadcast":
            batch_b = [d if g.rng.random() < 0.5 else 1 for d in batch]
            batch_a = [d if g.rng.random() < 0.5 else 1 for d in batch]
            if batch_b and g.rng.random() < 0.4:
                batch_b = batch_b[g.randint(1, len(batch_b)):]     # lower rank
            if g.rng.random() < 0.5:
                batch_a, batch_b = batch_b, batch_a
        if v in ("adj", "random"):
            adj_x, adj_y = bool(g.rng.random() < 0.5), bool(g.rng.random() < 0.5)
            if v == "adj" and not (adj_x or adj_y):
                adj_x = adj_y = True
        batch_a, batch_b = tuple(batch_a), tuple(batch_b)
    # a plays the input, b the "weights" (both activations: per-tensor, any zero point)
    a_shape = batch_a + ((k, m) if adj_x else (m, k))
    b_shape = batch_b + ((n, k) if adj_y else (k, n))
    if r.big:         # (a - z_a) = 255 everywhere; b's columns all 127 / all -128 with z_b = 0
        a = g.activation(a_shape, scale=r.s_in or g.scale(2 ** -8, 2 ** -3), zero_point=-128,
                         data=np.full(a_shape, 127, np.int8))
        bd = np.empty(b_shape, np.int8)
        bd[:, 0], bd[:, 1] = 127, -128
        b_scale = f32(r.mults[0] * r.s_out / a.scale[0]) if r.mults is not None else g.scale(2 ** -8, 2 ** -3)
        b = g.activation(b_shape, scale=b_scale, zero_point=0, data=bd)
    elif r.mults is not None:
        a = _input(g, r, a_shape)
        b_scale = f32(r.mults[0] * r.s_out / a.scale[0])
        b = _input(g, Recipe(s_in=b_scale, x_dev=r.x_dev), b_shape)
        if r.even:    # (b - z_b) even, so every accumulator is
            z = b.zero_point[0]
            b.data = np.clip(z + 2 * (np.asarray(b.data, np.int64) - z), -128 + ((z + 128) % 2),
                             127 - ((127 - z) % 2)).astype(np.int8)
    else:
        a = _input(g, r, a_shape)
        b = _input(g, r, b_shape)
    a_m = np.swapaxes(np.asarray(a.data), -1, -2) if adj_x else np.asarray(a.data)
    b_m = np.swapaxes(np.asarray(b.data), -1, -2) if adj_y else np.asarray(b.data)
    acc = batch_matmul_acc(a_m, a.zero_point[0], b_m, b.zero_point[0])
    out_shape = tuple(np.broadcast_shapes(batch_a, batch_b)) + (m, n)
    if r.s_out is not None:
        out = g.output(out_shape, r.s_out, g.zero_point())
    else:
        s, z = g.output_qparams(acc.astype(np.float64) * a.scale[0] * b.scale[0])
        out = g.output(out_shape, s, z)
    cs = Case(op="BATCH_MATMUL", inputs=[a, b], outputs=[out], attrs={"adj_x": adj_x, "adj_y": adj_y})
    cs.clause = _clause("BATCH_MATMUL", "input0/granularity", "input1/granularity")
    cs.description = f"{v}: {list(a_shape)} x {list(b_shape)} adj_x={adj_x} adj_y={adj_y}"
    return cs


# --------------------------------------------------------------------------- ties (every op above)

# ``ties``: the ``tie`` recipe with every multiplier odd / 2, so about half the outputs are exact
# ties, on both sides of the zero point: cases added to the default run (beyond --cases-per-op) so
# that a kernel breaking ties one way is refused on the op alone (tests/test_tie_power.py)
for _op, _fn in (("CONV_2D", gen_conv_2d), ("DEPTHWISE_CONV_2D", gen_depthwise),
                 ("FULLY_CONNECTED", gen_fully_connected), ("TRANSPOSE_CONV", gen_transpose_conv),
                 ("BATCH_MATMUL", gen_batch_matmul)):
    generator(_op, variants={"ties": 2}, extra=True)(_fn)
