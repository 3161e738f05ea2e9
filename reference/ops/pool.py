"""Pooling, reductions, normalization, resize: AVERAGE_POOL_2D, MAX_POOL_2D, MEAN, SUM,
L2_NORMALIZATION, RESIZE_BILINEAR.

Under a fixed scheme each golden reproduces LiteRT's int8 reference kernel
(``tflite/kernels/internal/reference/...``) as registered by BUILTIN_REF; under a
float scheme it dequantizes, runs the float operator in ``scheme.ftype`` and
finishes with ``scheme.quantize_real``; under ``exact`` it returns the unrounded
result in output LSB (zero point added, unclamped).
"""

from __future__ import annotations

import numpy as np

from suite.core.errors import QconformError

from reference import arith
from reference.common import act_range, q, qrange, scale, zp
from suite.core.geometry import attr_int
from reference.registry import register

INT32_MAX = arith.INT32_MAX


def _bad(case, field: str, message: str, rule: str):
    raise QconformError(message, source=case.id or case.op, field=field, rule=rule)


def _div_round_half_away(acc, n):
    """C's ``acc > 0 ? (acc + n/2) / n : (acc - n/2) / n`` (truncating division, n > 0).

    Computed as sign(acc) * floor((|acc| + n/2) / n). With A = |acc| + n/2 < 2^24 the float32
    quotient is exact enough for floor (a non-integer A/n is >= 1/n away from the next
    integer, the rounding error is below A/n * 2^-24 < 1/n), likewise float64 below 2^53;
    beyond that, int64 floor division."""
    acc, n = np.asarray(acc), np.asarray(n)
    big = int(np.abs(acc).max(initial=0)) + int(n.max(initial=0))
    if big < 2**53:
        ft = np.float32 if big < 2**24 else np.float64
        a = acc if acc.dtype == ft else acc.astype(ft)
        mag = np.abs(a)
        mag += (n // 2).astype(ft)
        mag /= n.astype(ft)
        np.floor(mag, out=mag)
        np.copysign(mag, a, out=mag)          # acc <= 0 -> -floor((|acc| + n/2) / n); 0 stays 0
        return mag.astype(np.int32 if ft is np.float32 else np.int64)
    acc, n = acc.astype(np.int64), n.astype(np.int64)
    mag = (np.abs(acc) + n // 2) // n
    return np.where(acc > 0, mag, -mag)


# ----------------------------------------------------------------------------- pooling

def pool_geometry(case, in_size: int, filt: int, stride: int, dim: str) -> tuple[int, int]:
    """(output size, leading padding) of one spatial dimension, as LiteRT's
    ComputePaddingHeightWidth: SAME -> ceil(in / stride), VALID -> (in - f + stride) / stride;
    padding = max((out - 1) * stride + f - in, 0) / 2 (the odd extra goes after)."""
    pad_mode = case.attrs.get("padding", "SAME")   # LiteRT schema default (Padding enum 0)
    if filt < 1:
        _bad(case, f"attrs.filter_{'height' if dim == 'h' else 'width'}", f"must be >= 1 (got {filt})",
             "pool window sizes are positive")
    if stride < 1:
        _bad(case, f"attrs.stride_{dim}", f"must be >= 1 (got {stride})", "pool strides are positive")
    if pad_mode == "SAME":
        out = (in_size + stride - 1) // stride
    elif pad_mode == "VALID":
        out = (in_size - filt + stride) // stride
    else:
        _bad(case, "attrs.padding", f"must be SAME or VALID (got {pad_mode!r})", "LiteRT Padding enum")
    if out < 1:
        _bad(case, "attrs.padding", f"VALID window {filt} does not fit the input size {in_size}",
             "VALID needs filter <= input")
    total = max((out - 1) * stride + filt - in_size, 0)
    return out, total // 2


def _pool_setup(case):
    x, out = case.inputs[0], case.outputs[0]
    if len(x.shape) != 4:
        _bad(case, "inputs[0].shape", f"must be NHWC (rank 4), got {list(x.shape)}", "pooling input is 4-D")
    fh, fw = attr_int(case, "filter_height", 1), attr_int(case, "filter_width", 1)
    sh, sw = _pool_strides(case)
    n, h, w, c = x.shape
    oh, ph = pool_geometry(case, h, fh, sh, "h")
    ow, pw = pool_geometry(case, w, fw, sw, "w")
    if tuple(out.shape) != (n, oh, ow, c):
        _bad(case, "outputs[0].shape", f"is {list(out.shape)}, the pool gives {[n, oh, ow, c]}",
             "output shape = pooled input shape")
    ys = np.arange(oh) * sh - ph          # window origins (may be negative: padding)
    xs = np.arange(ow) * sw - pw
    return (fh, fw), (ys, xs), (h, w)


def _window_sums(codes, dtype, fill: int, combine, taps_hw, starts, strides, hw):
    """Reduce every pooling window with ``combine`` (np.add / np.maximum) in ``dtype``,
    separably: over the window's rows, then its columns (a loop over the taps, each step a
    whole tensor). Out-of-bounds taps read ``fill``."""
    (fh, fw), (ys, xs), (sh, sw), (h, w) = taps_hw, starts, strides, hw
    pt, pl = int(max(-ys[0], 0)), int(max(-xs[0], 0))
    pb, pr = int(max(ys[-1] + fh - h, 0)), int(max(xs[-1] + fw - w, 0))
    n, _, _, c = codes.shape
    padded = np.full((n, pt + h + pb, pl + w + pr, c), fill, dtype)
    padded[:, pt:pt + h, pl:pl + w] = codes
    oh, ow = len(ys), len(xs)
    r0, c0 = int(ys[0]) + pt, int(xs[0]) + pl

    def rows(dy):
        return padded[:, r0 + dy:r0 + dy + (oh - 1) * sh + 1:sh]

    acc = rows(0) if fh == 1 else combine(rows(0), rows(1))
    for dy in range(2, fh):
        combine(acc, rows(dy), out=acc)

    def cols(dx):
        return acc[:, :, c0 + dx:c0 + dx + (ow - 1) * sw + 1:sw]

    res = cols(0).copy() if fw == 1 else combine(cols(0), cols(1))
    for dx in range(2, fw):
        combine(res, cols(dx), out=res)
    return res


def _pool_strides(case):
    return attr_int(case, "stride_h", 1), attr_int(case, "stride_w", 1)


@register("AVERAGE_POOL_2D", rounding="int-div-round")
def average_pool_2d(case, scheme):
    """reference_integer_ops::AveragePool (int8): the sum of the raw codes over the window's
    in-bounds taps (padding excluded), divided by their count with (sum +- n/2) / n
    truncating (half away from zero), clamped to the fused activation range. No
    requantization: input and output share scale and zero point (same build for
    both rounding schemes). Window sums are exact: float32 integers while |sum| < 2^24,
    int64 beyond."""
    x, out = case.inputs[0], case.outputs[0]
    taps, starts, hw = _pool_setup(case)
    (fh, fw), (ys, xs), (h, w) = taps, starts, hw
    lo, hi = act_range(case, out)
    # float32 holds every window sum exactly while |sum| <= max|code| * taps < 2^24
    qlo, qhi = qrange(x)
    dtype = np.float32 if max(-qlo, qhi) * fh * fw < 2**24 else np.int64
    acc = _window_sums(np.asarray(x.data), dtype, 0, np.add, taps, starts, _pool_strides(case), hw)
    cnt_h = np.clip(ys + fh, 0, h) - np.clip(ys, 0, h)
    cnt_w = np.clip(xs + fw, 0, w) - np.clip(xs, 0, w)
    count = (cnt_h[:, None] * cnt_w[None, :])[None, :, :, None]
    if scheme.is_fixed:
        return [np.clip(_div_round_half_away(acc, count), lo, hi)]
    if scheme.exact:
        return [acc / count.astype(np.float64)]
    ft = scheme.ftype
    real = (acc - count * zp(x)).astype(ft) * ft(scale(x)) / count.astype(ft)   # mean of dequantized values
    return [scheme.quantize_real(real / ft(scale(out)), zp(out), lo, hi)]


@register("MAX_POOL_2D", rounding="none")
def max_pool_2d(case, scheme):
    """reference_integer_ops::MaxPool (int8): the largest raw code over the window's in-bounds
    taps (the kernel starts from -128, so padding with -128 changes nothing), clamped to the
    fused activation range. Every scheme gives the same codes (max commutes with the
    monotonic quantization)."""
    x, out = case.inputs[0], case.outputs[0]
    taps, starts, hw = _pool_setup(case)
    lo, hi = act_range(case, out)
    codes = np.asarray(x.data)
    best = _window_sums(codes, codes.dtype, qrange(x)[0], np.maximum, taps, starts, _pool_strides(case), hw)
    res = np.clip(best, lo, hi)                 # lo, hi lie in the code range: stays int8
    return [res.astype(np.float64)] if scheme.exact else [res]


# ----------------------------------------------------------------------------- reductions

def _axes(case) -> tuple[int, ...]:
    """The reduced dimensions: negative axes wrapped, duplicates dropped (ResolveAxis)."""
    rank = len(case.inputs[0].shape)
    if len(case.inputs) < 2 or case.inputs[1].data is None:
        _bad(case, "inputs[1]", "the axis tensor is missing", "MEAN/SUM take an axis input")
    out = []
    for v in np.asarray(case.inputs[1].data).ravel().tolist():
        a = int(v) + rank if int(v) < 0 else int(v)
        if not 0 <= a < rank:
            _bad(case, "inputs[1].data", f"axis {v} is outside [-{rank}, {rank})", "valid reduction axis")
        if a not in out:
            out.append(a)
    return tuple(out)


def _reduce_setup(case):
    x, out = case.inputs[0], case.outputs[0]
    axes = _axes(case)
    keep = bool(case.attrs.get("keep_dims", False))
    shape = x.shape
    want = tuple(1 if i in axes else d for i, d in enumerate(shape)) if keep else \
        tuple(d for i, d in enumerate(shape) if i not in axes)
    if tuple(out.shape) != want:
        _bad(case, "outputs[0].shape", f"is {list(out.shape)}, the reduction gives {list(want)}",
             "output shape = input shape without (or with size-1) reduced axes")
    n = int(np.prod([shape[a] for a in axes], dtype=np.int64)) if axes else 1
    total = q(x).sum(axis=axes, keepdims=True) if axes else q(x)
    return x, out, total, n


def mean_multiplier(m, shift, n):
    """QuantizedMeanOrSum's folding of 1/n into (m, shift): k = min(floor(log2 n), 32, 31 + shift);
    m' = (m * 2^k) / n (int64, truncating); shift' = shift - k."""
    m, shift = np.asarray(m, np.int64), np.asarray(shift, np.int64)
    k = np.minimum(np.minimum(int(n).bit_length() - 1, 32), 31 + shift)
    k = np.maximum(k, 0)
    return (m << k) // n, shift - k


def _reduce_quantized(case, scheme, divide: bool):
    x, out, total, n = _reduce_setup(case)
    lo, hi = qrange(out)
    z_in, z_out = zp(x), zp(out)
    s_in, s_out = scale(x), scale(out)
    shifted = total - z_in * n            # sum (q - z_in)
    if scheme.exact:
        return [shifted * (s_in / s_out) / (n if divide else 1) + z_out]
    if scheme.is_fixed:
        real = scheme.real_multiplier(s_in, den=s_out)          # (double)s_in / (double)s_out
        m, s = arith.quantize_multiplier(real, scheme.single_rounding)
        if divide:
            m, s = mean_multiplier(m, s, n)
        res = arith.mbqm(arith.wrap_int32(shifted), m, s, scheme.single_rounding, scheme.half_up_shift) + z_out
        return [np.clip(res, lo, hi)]
    ft = scheme.ftype
    real = shifted.astype(ft) * ft(s_in)
    if divide:
        real = real / ft(n)
    return [scheme.quantize_real(real / ft(s_out), z_out, lo, hi)]


@register("MEAN", rounding="fixed-double")
def mean(case, scheme):
    """reference_ops::QuantizedMeanOrSum(compute_sum=false), the path BUILTIN_REF's MEAN takes
    for int8 for every rank, axis set and keep_dims (including the 4-D keep_dims {1, 2}
    shape, which only the optimized registration special-cases): m, shift =
    QuantizeMultiplier(s_in / s_out) (double); 1/N folded into the multiplier
    (see :func:`mean_multiplier`); out = MBQM(sum q - z_in * N, m', shift') + z_out, clamped."""
    return _reduce_quantized(case, scheme, divide=True)


@register("SUM", rounding="fixed-double")
def reduce_sum(case, scheme):
    """The spec's SUM: sum (q - z_in) * s_in / s_out + z_out, rounded and clamped, with
    LiteRT's QuantizedMeanOrSum(compute_sum=true) arithmetic on int8 codes: MBQM(sum q -
    z_in * N, m, shift) + z_out, m, shift = QuantizeMultiplier(s_in / s_out). (LiteRT 2.3's
    reference registration reads int8 data as uint8: see suite/core/findings.toml.)"""
    return _reduce_quantized(case, scheme, divide=False)


# ----------------------------------------------------------------------------- L2 norm

def _sat_mul_pot(x, exponent: int):
    """gemmlowp SaturatingRoundingMultiplyByPOT<exponent> on int32 values."""
    x = np.asarray(x, np.int64)
    if exponent == 0:
        return x
    if exponent < 0:
        return arith.rdbpot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    res = arith.wrap_int32(x << exponent)
    res = np.where(x > threshold, INT32_MAX, res)
    return np.where(x < -threshold, arith.INT32_MIN, res)


def inv_sqrt_multiplier(acc):
    """GetInvSqrtQuantizedMultiplierExp(acc, kReverseShift): (multiplier, left shift) with
    multiplier * 2^(shift - 31) ~= 1 / sqrt(acc), vectorized over int32 ``acc``.

    acc <= 1 -> (INT32_MAX, 0). Otherwise acc is normalized by pairs of bits into
    [2^27, 2^29) (right shift starts at 11), then 5 Newton-Raphson steps
    x <- 1.5 x - (acc/2) x^3 run in gemmlowp Q3.28 fixed point (SRDHM products,
    saturating rescales), times sqrt(2)/2 in Q0.31; a negative shift is folded into
    the multiplier."""
    a = np.asarray(acc, np.int64)
    small = a <= 1
    a = np.where(small, 2, a)
    shift = np.full(a.shape, 11, np.int64)
    while True:
        big = a >= (1 << 29)
        if not big.any():
            break
        a = np.where(big, a // 4, a)
        shift += big
    log2 = np.frexp(a.astype(np.float64))[1] - 1            # floor(log2 a), exact
    clz = 31 - log2
    pairs = (clz - 1) // 2 - 1
    shift = shift - pairs
    a = a << (2 * pairs)
    srdhm = arith.srdhm
    x_in = a >> 1                                           # F3 raw
    half_in = _sat_mul_pot(x_in, -1)
    half_three = (1 << 28) + (1 << 27)
    x = np.full(a.shape, 1 << 28, np.int64)                 # F3::One()
    for _ in range(5):
        x3 = _sat_mul_pot(srdhm(srdhm(x, x), x), 6)         # Rescale<3>(x*x*x): F9 -> F3
        x = _sat_mul_pot(arith.wrap_int32(srdhm(half_three, x) - srdhm(half_in, x3)), 3)
    x = srdhm(x, 1518500250)                                # * sqrt(2)/2 (F0)
    neg = shift < 0
    x = np.where(neg, arith.wrap_int32(x << np.where(neg, -shift, 0)), x)
    shift = np.where(neg, 0, shift)
    return np.where(small, INT32_MAX, x), np.where(small, 0, -shift)


@register("L2_NORMALIZATION", rounding="fixed-double")
def l2_normalization(case, scheme):
    """reference_integer_ops::L2Normalization (int8, output (1/128, 0)): per row of the last
    axis acc = sum (q - z)^2 (int32), (m, shift) = GetInvSqrtQuantizedMultiplierExp(acc)
    (:func:`inv_sqrt_multiplier`), out = MBQM(q - z, m, shift + 7) clamped to [-128, 127].
    Float schemes: x / sqrt(max(sum x^2, 1e-6)) on dequantized x (LiteRT's float kernel)."""
    x, out = case.inputs[0], case.outputs[0]
    if not x.shape:
        _bad(case, "inputs[0].shape", "must have at least one dimension", "L2_NORMALIZATION input rank >= 1")
    lo, hi = qrange(out)
    d = q(x) - zp(x)
    if scheme.exact:
        ss = (d * d).sum(axis=-1, keepdims=True).astype(np.float64)
        norm = np.sqrt(ss)
        return [np.where(norm > 0, d / np.where(norm > 0, norm, 1.0), 0.0) / scale(out) + zp(out)]
    if scheme.is_fixed:
        acc = arith.wrap_int32((d * d).sum(axis=-1, keepdims=True))
        m, s = inv_sqrt_multiplier(acc)
        res = arith.mbqm(d, m, s + 7, scheme.single_rounding, scheme.half_up_shift) + zp(out)
        return [np.clip(res, lo, hi)]
    ft = scheme.ftype
    xr = d.astype(ft) * ft(scale(x))
    ss = (xr * xr).sum(axis=-1, keepdims=True, dtype=ft)
    y = xr / np.sqrt(np.maximum(ss, ft(1e-6)))
    return [scheme.quantize_real(y / ft(scale(out)), zp(out), lo, hi)]


# ----------------------------------------------------------------------------- resize

def _resize_setup(case):
    x, out = case.inputs[0], case.outputs[0]
    if len(x.shape) != 4:
        _bad(case, "inputs[0].shape", f"must be NHWC (rank 4), got {list(x.shape)}", "RESIZE_BILINEAR input is 4-D")
    if len(case.inputs) < 2 or case.inputs[1].data is None or np.asarray(case.inputs[1].data).size != 2:
        _bad(case, "inputs[1]", "size must hold two values [new_height, new_width]", "RESIZE_BILINEAR size is [2]")
    oh, ow = (int(v) for v in np.asarray(case.inputs[1].data).ravel())
    if oh < 1 or ow < 1:
        _bad(case, "inputs[1].data", f"output size {[oh, ow]} must be positive", "size >= 1")
    ac = bool(case.attrs.get("align_corners", False))
    hp = bool(case.attrs.get("half_pixel_centers", False))
    if ac and hp:
        _bad(case, "attrs.half_pixel_centers", "cannot be true together with align_corners",
             "LiteRT: if half_pixel_centers is true, align_corners must be false")
    n, h, w, c = x.shape
    if tuple(out.shape) != (n, oh, ow, c):
        _bad(case, "outputs[0].shape", f"is {list(out.shape)}, size gives {[n, oh, ow, c]}",
             "output shape = [N, new_height, new_width, C]")
    return x, out, (h, w), (oh, ow), ac, hp


def _interp_integer(in_size: int, out_size: int, ac: bool, hp: bool):
    """ComputeInterpolationValuesInteger for every output index: (scaled value in 1/1024,
    lower index, upper index). scale_10 = (1024 * in + out / 2) / out, or with align_corners
    (1024 * (in - 1) + (out - 1) / 2) / (out - 1); half-pixel adds scale_10 / 2 - 512;
    lower = max(v / 1024, 0), upper = min((v + 1023) / 1024, in - 1) (C truncation)."""
    if ac and out_size > 1:
        s10 = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    else:
        s10 = ((1 << 10) * in_size + out_size // 2) // out_size
    v = np.arange(out_size, dtype=np.int64) * s10
    if hp:
        v = v + s10 // 2 - (1 << 9)

    def cdiv(a, b):                  # C division, truncating toward zero
        return np.where(a >= 0, a // b, -((-a) // b))
    lower = np.minimum(np.maximum(cdiv(v, 1 << 10), 0), in_size - 1)   # (min: never reached for sane sizes)
    upper = np.minimum(cdiv(v + (1 << 10) - 1, 1 << 10), in_size - 1)
    upper = np.maximum(upper, 0)
    return v, lower, upper


def _interp_float(in_size: int, out_size: int, ac: bool, hp: bool, ft):
    """ComputeInterpolationValues (float reference): scale = in / out (or (in-1)/(out-1) with
    align_corners), v = (i + 0.5) * scale - 0.5 with half-pixel else i * scale, in ``ft``."""
    sc = ft(in_size) / ft(out_size)
    if ac and out_size > 1:
        sc = ft(in_size - 1) / ft(out_size - 1)
    i = np.arange(out_size).astype(ft)
    v = (i + ft(0.5)) * sc - ft(0.5) if hp else i * sc
    v = v.astype(ft)
    lower = np.maximum(np.floor(v).astype(np.int64), 0)
    upper = np.minimum(np.ceil(v).astype(np.int64), in_size - 1)
    return v, lower, upper


@register("RESIZE_BILINEAR", rounding="shift-round")
def resize_bilinear(case, scheme):
    """reference_ops::ResizeBilinearInteger (int8; quantization ignored, same scale in and
    out): 10-bit fixed-point source coordinates (:func:`_interp_integer`), the four
    neighbours weighted by (1024 - dy)(1024 - dx), dy(1024 - dx), ... and summed in int64
    at 2^20; default build: (sum + (sum > 0 ? 2^19 : -2^19)) / 2^20 truncating (half
    away from zero); TFLITE_SINGLE_ROUNDING and ``half_up_shift``: (sum + 2^19) >> 20 (half up).
    ``exact``: sum / 2^20.
    Float schemes: the float reference kernel (in/out scale, floor/ceil neighbours) in
    ``scheme.ftype`` on dequantized values, then ``scheme.quantize_real``."""
    x, out, (h, w), (oh, ow), ac, hp = _resize_setup(case)
    codes = q(x)
    if scheme.is_fixed or scheme.exact:
        vy, y0, y1 = _interp_integer(h, oh, ac, hp)
        vx, x0, x1 = _interp_integer(w, ow, ac, hp)
        dy = (vy - (y0 << 10))[None, :, None, None]
        dx = (vx - (x0 << 10))[None, None, :, None]
        top, bot = codes[:, y0], codes[:, y1]                       # (N, OH, W, C)
        acc = ((top[:, :, x0] * ((1 << 10) - dx) + top[:, :, x1] * dx) * ((1 << 10) - dy)
               + (bot[:, :, x0] * ((1 << 10) - dx) + bot[:, :, x1] * dx) * dy)
        if scheme.exact:
            return [acc / float(1 << 20)]
        if scheme.single_rounding or scheme.half_up_shift:   # a rounding shift: ties up
            return [(acc + (1 << 19)) >> 20]
        mag = (np.abs(acc) + (1 << 19)) >> 20                      # (acc +- 2^19) / 2^20, truncating
        return [np.where(acc > 0, mag, -mag)]
    ft = scheme.ftype
    vy, y0, y1 = _interp_float(h, oh, ac, hp, ft)
    vx, x0, x1 = _interp_float(w, ow, ac, hp, ft)
    real = (codes - zp(x)).astype(ft) * ft(scale(x))
    fy = (vy - y0.astype(ft)).astype(ft)[None, :, None, None]
    fx = (vx - x0.astype(ft)).astype(ft)[None, None, :, None]
    one = ft(1)
    top, bot = real[:, y0], real[:, y1]
    val = (top[:, :, x0] * (one - fy) * (one - fx) + bot[:, :, x0] * fy * (one - fx)
           + top[:, :, x1] * (one - fy) * fx + bot[:, :, x1] * fy * fx)
    lo, hi = qrange(out)
    return [scheme.quantize_real(val.astype(ft) / ft(scale(out)), zp(out), lo, hi)]
