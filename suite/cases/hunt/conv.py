"""Spaces of the convolution / matrix family: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV,
BATCH_MATMUL.

Weights per tensor or per channel, with channel scales spread over up to 24 octaves; the output
scale fitted to the accumulators or anywhere 32 octaves around s_in * s_w (multipliers from tiny to
far above 1); a bias absent, small, of any magnitude up to 2^31, or set against the accumulators so
they end next to +-2^31; reductions from one tap to 64k.
"""

from __future__ import annotations

import math

import numpy as np

from reference.ops.conv import (
    batch_matmul_acc,
    conv_acc,
    depthwise_acc,
    fc_acc,
    transpose_conv_acc,
)
from suite.core.case import Case, Tensor
from suite.core.dtypes import DTYPES
from suite.core.geometry import out_size, pad_before
from suite.core.spec import OpRule

from .draw import (
    Draw,
    act,
    activation,
    codes,
    dim,
    f32,
    fit,
    output,
    param,
    qrange,
    scale,
    table_rule,
)
from .space import space

INT32 = (-(2 ** 31), 2 ** 31 - 1)
IN_CAP, W_CAP, MAC_CAP = 1 << 17, 1 << 17, 1 << 24


def _weights(d: Draw, r: OpRule, shp, axis: int) -> Tensor:
    """Weights of the op's rule: per channel (spread over 0..24 octaves) or one scale."""
    tr = r.inputs[1]
    dtype = d.pick(tr.dtypes)
    lo, hi = qrange(tr, dtype)
    n = shp[axis]
    per_axis = n > 1 and d.int(0, 3) > 0
    base = scale(d, -16, 0)
    spread = d.pick([0, 1, 4, 12, 24]) if per_axis else 0
    rng = np.random.default_rng(d.int(0, 2 ** 32 - 1))
    scales = [f32(base * 2.0 ** rng.uniform(-spread / 2, spread / 2)) for _ in range(n if per_axis else 1)]
    data = codes(d, shp, lo, hi, 0).astype(DTYPES[dtype].storage)
    return Tensor(dtype, tuple(int(x) for x in shp), data, scales, [0] * len(scales), axis if per_axis else 0,
                  const=True)


def _bias(d: Draw, r: OpRule, s_in: float, w: Tensor, acc: np.ndarray) -> Tensor | None:
    """None (no bias), small, any magnitude up to 2^31, or per channel set so the accumulator's
    largest (or smallest) value ends within 2^10 of the int32 limit."""
    tr = next((t for t in r.inputs if t.role == "bias"), None)
    n = acc.shape[-1]
    how = d.pick(["none", "small", "wide", "limit"] if tr is not None and tr.optional else ["small", "wide", "limit"])
    if tr is None or how == "none":
        return None
    rng = np.random.default_rng(d.int(0, 2 ** 32 - 1))
    if how == "small":
        b = rng.integers(-(1 << 12), 1 << 12, size=n)
    elif how == "wide":
        m = 1 << d.int(0, 31)
        b = rng.integers(-m, m, size=n)
    else:
        flat = acc.reshape(-1, n)
        up = rng.random(n) < 0.5
        gap = d.int(0, 1024)
        b = np.where(up, INT32[1] - gap - flat.max(axis=0), INT32[0] + gap - flat.min(axis=0))
    b = np.clip(b, *INT32).astype(np.int32)
    scales = [f32(np.float32(s_in) * np.float32(s)) for s in w.scale]
    return Tensor("int32", (n,), b, scales, [0] * len(scales), 0, const=True)


def _finish(d: Draw, r: OpRule, op: str, x: Tensor, w: Tensor, acc: np.ndarray, out_shape, attrs: dict,
            first: list[Tensor] | None = None) -> Case:
    """Bias, output quantization (fitted, or 32 octaves around s_in * s_w) and the case."""
    s_in = x.scale[0]
    b = _bias(d, r, s_in, w, acc)
    total = acc + (b.data.astype(np.int64) if b is not None else 0)
    real = total * s_in * np.asarray(w.scale, np.float64)
    out = output(d, r, out_shape, real, s_in * float(np.median(w.scale)), far=32)
    inputs = (first or []) + ([x, w] if op != "TRANSPOSE_CONV" else [w, x]) + ([b] if b is not None else [])
    return Case(op=op, inputs=inputs, outputs=[out], attrs=attrs, spec=r.table)


def _geometry(d: Draw) -> tuple:
    kh, kw = d.int(1, 7), d.int(1, 7)
    stride = (d.int(1, 4), d.int(1, 4))
    dil = (d.pick([1, 1, 1, 2, 3, 4]), d.pick([1, 1, 1, 2, 3, 4]))
    return kh, kw, stride, dil, d.pick(["SAME", "VALID"])


def _spatial(d: Draw, n: int, c: int, kh: int, kw: int, dil) -> tuple[int, int]:
    h, w = fit([dim(d, 129), dim(d, 129)], max(1, IN_CAP // (n * c)))
    return max(h, (kh - 1) * dil[0] + 1), max(w, (kw - 1) * dil[1] + 1)


@space("CONV_2D")
def conv_2d(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    kh, kw, stride, dil, padding = _geometry(d)
    groups = d.pick([1, 1, 1, 2, 3, 4])
    n = d.int(1, 2)
    cw, og = fit([dim(d, 257), dim(d, 129)], max(1, W_CAP // (kh * kw * groups)))
    cin, cout = cw * groups, og * groups
    h, w = _spatial(d, n, cin, kh, kw, dil)
    oh, ow = out_size(h, kh, stride[0], dil[0], padding), out_size(w, kw, stride[1], dil[1], padding)
    while n * oh * ow * cout * kh * kw * cw > MAC_CAP:   # smaller images until the MACs fit
        hw = (max((kh - 1) * dil[0] + 1, h // 2), w) if h >= w else (h, max((kw - 1) * dil[1] + 1, w // 2))
        if hw == (h, w):
            break
        h, w = hw
        oh, ow = out_size(h, kh, stride[0], dil[0], padding), out_size(w, kw, stride[1], dil[1], padding)
    x = activation(d, r.inputs[0], [n, h, w, cin])
    wt = _weights(d, r, [cout, kh, kw, cw], 0)
    pads = (pad_before(h, kh, stride[0], dil[0], oh), pad_before(w, kw, stride[1], dil[1], ow))
    acc = conv_acc(np.asarray(x.data), x.zero_point[0], np.asarray(wt.data), stride, dil, pads, (oh, ow), groups)
    attrs = {"padding": padding, "stride_w": stride[1], "stride_h": stride[0], "dilation_w_factor": dil[1],
             "dilation_h_factor": dil[0], "fused_activation_function": act(d)}
    return _finish(d, r, op, x, wt, acc, (n, oh, ow, cout), attrs)


@space("DEPTHWISE_CONV_2D")
def depthwise(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    kh, kw, stride, dil, padding = _geometry(d)
    mult = d.pick([1, 1, 1, 2, 3, 4])
    c = dim(d, 257)
    n = d.int(1, 2)
    h, w = _spatial(d, n, c, kh, kw, dil)
    oh, ow = out_size(h, kh, stride[0], dil[0], padding), out_size(w, kw, stride[1], dil[1], padding)
    x = activation(d, r.inputs[0], [n, h, w, c])
    wt = _weights(d, r, [1, kh, kw, c * mult], 3)
    pads = (pad_before(h, kh, stride[0], dil[0], oh), pad_before(w, kw, stride[1], dil[1], ow))
    acc = depthwise_acc(np.asarray(x.data), x.zero_point[0], np.asarray(wt.data), mult, stride, dil, pads,
                        (oh, ow))
    attrs = {"padding": padding, "stride_w": stride[1], "stride_h": stride[0], "dilation_w_factor": dil[1],
             "dilation_h_factor": dil[0], "depth_multiplier": mult, "fused_activation_function": act(d)}
    return _finish(d, r, op, x, wt, acc, (n, oh, ow, c * mult), attrs)


@space("FULLY_CONNECTED")
def fully_connected(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    k = dim(d, 1025) if d.flag() else d.pick([2048, 4096, 8192, 16384, 65536])
    o = dim(d, 257)
    k, o = fit([k, o], W_CAP * 2, keep=(0,))
    lead = fit([dim(d, 65) for _ in range(d.int(1, 3))], max(1, IN_CAP // k))
    keep = len(lead) > 1 and d.flag()
    x = activation(d, r.inputs[0], lead + [k])
    wt = _weights(d, r, [o, k], 0)
    batch = math.prod(lead)
    acc = fc_acc(np.asarray(x.data).reshape(batch, k), x.zero_point[0], np.asarray(wt.data))
    out_shape = lead + [o] if keep else [batch, o]
    attrs = {"fused_activation_function": act(d), "keep_num_dims": keep}
    return _finish(d, r, op, x, wt, acc, out_shape, attrs)


@space("TRANSPOSE_CONV")
def transpose_conv(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    kh, kw = d.int(1, 7), d.int(1, 7)
    stride = (d.int(1, 4), d.int(1, 4))
    padding = d.pick(["SAME", "VALID"])
    n = d.int(1, 2)
    c, o = fit([dim(d, 129), dim(d, 129)], max(1, W_CAP // (kh * kw)))
    oh, ow = fit([dim(d, 65), dim(d, 65)], max(1, MAC_CAP // (n * o * kh * kw * c)))
    oh, ow = max(oh, kh), max(ow, kw)
    h, w = out_size(oh, kh, stride[0], 1, padding), out_size(ow, kw, stride[1], 1, padding)
    x = activation(d, r.inputs[2], [n, h, w, c])
    wt = _weights(d, r, [o, kh, kw, c], 0)
    pads = (pad_before(oh, kh, stride[0], 1, h), pad_before(ow, kw, stride[1], 1, w))
    acc = transpose_conv_acc(np.asarray(x.data), x.zero_point[0], np.asarray(wt.data), stride, pads, (oh, ow))
    attrs = {"padding": padding, "stride_w": stride[1], "stride_h": stride[0], "fused_activation_function": act(d)}
    return _finish(d, r, op, x, wt, acc, (n, oh, ow, o), attrs, first=[param([n, oh, ow, o])])


@space("BATCH_MATMUL")
def batch_matmul(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    m, k, n = fit([dim(d, 257), dim(d, 1025), dim(d, 257)], W_CAP * 2)
    batch = [d.int(1, 4) for _ in range(d.int(0, 3))]
    ba = [1 if d.int(0, 3) == 0 else x for x in batch]
    bb = [1 if d.int(0, 3) == 0 else x for x in batch][d.int(0, len(batch)) if d.int(0, 3) == 0 else 0:]
    while math.prod(np.broadcast_shapes(tuple(ba), tuple(bb))) * m * k * n > MAC_CAP and max(m, k, n) > 1:
        m, k, n = fit([m, k, n], max(1, m * k * n // 2))
    adj_x, adj_y = d.flag(), d.flag()
    a = activation(d, r.inputs[0], ba + ([k, m] if adj_x else [m, k]))
    b = activation(d, r.inputs[1], bb + ([n, k] if adj_y else [k, n]))
    am = np.swapaxes(np.asarray(a.data), -1, -2) if adj_x else np.asarray(a.data)
    bm = np.swapaxes(np.asarray(b.data), -1, -2) if adj_y else np.asarray(b.data)
    acc = batch_matmul_acc(am, a.zero_point[0], bm, b.zero_point[0])
    real = acc * float(a.scale[0]) * float(b.scale[0])
    out = output(d, r, acc.shape, real, a.scale[0] * b.scale[0], far=32)
    return Case(op=op, inputs=[a, b], outputs=[out], attrs={"adj_x": adj_x, "adj_y": adj_y}, spec=r.table)
