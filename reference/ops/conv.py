"""Convolution / matrix family: CONV_2D, DEPTHWISE_CONV_2D, FULLY_CONNECTED, TRANSPOSE_CONV,
BATCH_MATMUL.

Every op is an exact integer accumulation followed by a requantization.

Accumulation (all ops): acc = sum of w * (q - z_in) over the in-bounds taps, plus the bias,
held in a C ``int32`` that wraps (LiteRT's reference kernels use an int32 accumulator for
int8; a sum past 2^31 wraps in two's complement). Padding contributes nothing (LiteRT skips
out-of-image taps, which is the same as padding with z_in). The weight zero point is 0 by the
spec; the per-tensor FULLY_CONNECTED and BATCH_MATMUL kernels apply it anyway, and so does
this golden.

The sums are computed with BLAS on float arrays holding *raw* int8 codes, which is exact while
every partial sum stays below 2^24 (float32) or 2^53 (float64): :func:`_float_type` picks the
type from the worst case |K * max|a| * max|b||, and the zero-point terms are added back in
int64 (e.g. sum w*(q - z) = sum w*q - z * sum w). Nothing is rounded before the requantization.
The exception is a FULLY_CONNECTED with a few rows of 8-bit codes and int8 weights, a gemv
that NumPy cannot do faster than LiteRT's kernel: its sums come from a small C int8 dot
product with int32 runs and int64 totals (reference/native.py, reference/native_dot.c), and
from the float path when no C compiler is available; both are exact.

Requantization, scheme by scheme (see reference/schemes.py):

* LiteRT reference kernels (``tflite-ref-double`` / ``tflite-ref-single``):
  - CONV_2D, DEPTHWISE_CONV_2D, TRANSPOSE_CONV (PopulateConvolutionQuantizationParams):
    real_c = (double)s_in * (double)s_w[c] / (double)s_out, per output channel (a per-tensor
    weight scale is broadcast to every channel); out = MBQM(acc, m_c, shift_c) + z_out.
  - BATCH_MATMUL (GetQuantizedConvolutionMultipler): real = (double)(float)(s_a * s_b) /
    (double)s_out (the product is a float32 product); out = MBQM(acc, m, shift) + z_out.
  - FULLY_CONNECTED: the reference kernel requantizes in double (LiteRT since 2025-04,
    "Make the fully_connected ref kernel do requant in float"): out = (int32)std::round(
    (double)acc * ((double)s_in * (double)s_w[c] / (double)s_out)) + z_out, ties away from
    zero, for per-tensor and per-channel weights alike; TFLITE_SINGLE_ROUNDING does not
    change it.
  Then clamp to the fused activation range (CalculateActivationRangeQuantized).
* other fixed-point schemes (``caffe-d1``, ``caffe-d2``, ``caffe-f2``): the multiplier is formed
  as above (double) or as a float32 product/quotient left to right (``multiplier_precision ==
  "float"``; FULLY_CONNECTED per-tensor takes LiteRT's prepare-time form, the one the
  optimized kernels use), then MBQM with one or two roundings.
* float schemes: float(acc) * float multiplier in ``scheme.ftype``, then
  ``scheme.quantize_real`` (XNNPACK / MLAS requantization); ``exact`` returns acc * real +
  z_out unrounded and unclamped (and the accumulator unwrapped).
"""

from __future__ import annotations

import numpy as np

from suite.core.dtypes import DTYPES
from suite.core.errors import QconformError

from reference import arith, native
from reference.common import act_range, qrange, scale, zp
from suite.core.geometry import conv_geometry, out_size, pad_before
from reference.registry import register

_F32_EXACT = 2 ** 24
_F64_EXACT = 2 ** 53
_DW_TAP_LOOP = 49     # DEPTHWISE_CONV_2D kernels up to this many taps loop over the taps
_FC_GEMV_MAX = 4      # FULLY_CONNECTED: up to this many input rows, one gemv each
_FC_NATIVE_MAX = 32   # FULLY_CONNECTED: up to this many input rows, the C int8 dot (reference/native.py;
                      # 1000x1024 weights: 0.036 vs 0.165 ms at 1 row, 0.79 vs 1.30 at 32, even at 128)


# --------------------------------------------------------------------------- accumulation

def _float_type(k: int, amax: int, bmax: int):
    """The cheapest float type in which a k-term sum of products |a| <= amax, |b| <= bmax
    is exact whatever the summation order (None: not even float64 is): every partial sum is
    an integer no larger than k * amax * bmax, and float32 (float64) holds every integer up
    to 2^24 (2^53) exactly."""
    bound = int(k) * int(amax) * int(bmax)
    if bound <= _F32_EXACT:
        return np.float32
    if bound <= _F64_EXACT:
        return np.float64
    return None


def _absmax(a: np.ndarray) -> int:
    """The largest |value| an integer array's dtype holds (int8: 128, uint8: 255, uint16: 65535)."""
    lo, hi = arith.int_range(np.asarray(a).dtype)
    return max(-lo, hi)


def _span(a: np.ndarray) -> int:
    """The largest |q - z| for codes of the array's dtype (int8 / uint8: 255)."""
    lo, hi = arith.int_range(np.asarray(a).dtype)
    return hi - lo


def _wrap(acc: np.ndarray, scheme, bound: int | None = None) -> np.ndarray:
    """The int32 accumulator: wraps like C int32 arithmetic (not under ``exact``).

    ``bound``: a proven bound on |acc| (from the shapes and dtypes); below 2^31 nothing can wrap.
    """
    if scheme.exact or (bound is not None and bound <= arith.INT32_MAX):
        return acc
    return arith.wrap_int32(acc)


def _dev(x: np.ndarray, z: int) -> int:
    """Largest |q - z| for codes of the array's dtype."""
    lo, hi = arith.int_range(x.dtype)
    return max(hi - z, z - lo)


def _acc_bound(k: int, x: np.ndarray, z_in: int, w: np.ndarray, bias: np.ndarray) -> int:
    """Largest |acc| a k-term sum of w * (q - z_in) plus the bias can reach."""
    b = int(np.abs(bias).max()) if bias.size else 0
    return int(k) * _dev(x, z_in) * _absmax(w) + b


def _bias(case, idx: int, n: int) -> np.ndarray:
    """The bias of input ``idx`` as int64 [n], or zeros if the case has none."""
    b = _bias_codes(case, idx, n)
    return np.zeros(n, np.int64) if b is None else b.astype(np.int64)


# --------------------------------------------------------------------------- attributes

def _check_out_hw(case, oh: int, ow: int, padding: str) -> None:
    if oh < 1 or ow < 1:
        raise QconformError(f"input {list(case.inputs[0].shape)} is smaller than the dilated kernel: "
                            f"{padding} padding leaves {oh}x{ow} outputs", field="inputs[0].shape",
                            rule=f"{case.op} input at least the dilated kernel with VALID padding")


def _expect_shape(case, want, what: str) -> None:
    got = tuple(case.outputs[0].shape)
    if got != tuple(want):
        raise QconformError(f"must be {list(want)} for {what} (got {list(got)})",
                            field="outputs[0].shape", rule=f"{case.op} output shape")


def _check_rank(case, i: int, rank: int, name: str) -> None:
    if len(case.inputs[i].shape) != rank:
        raise QconformError(f"{name} must have rank {rank} (got shape {list(case.inputs[i].shape)})",
                            field=f"inputs[{i}].shape", rule=f"{case.op} {name} rank")


# --------------------------------------------------------------------------- accumulators

def _trailing_pads(in_hw, k_hw, stride, dil, pads, out_hw) -> tuple[int, int]:
    """Rows / columns of zero-point padding needed after the input (bottom, right) so that every
    tap of an (out_hw) output with leading pads ``pads`` reads inside the padded input."""
    need = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(out_hw, stride, k_hw, dil)]
    return max(0, need[0] - pads[0] - in_hw[0]), max(0, need[1] - pads[1] - in_hw[1])


def pairs_int16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum_j sat16(a[m, 2j] * b[o, 2j] + a[m, 2j+1] * b[o, 2j+1]) for every (m, o), int64 [M, O]: the
    raw codes' dot products as x86's vpmaddubsw (uint8 x int8) forms them, each sum of two adjacent
    products saturated to [-32768, 32767] before the int32 sum (an odd K ends with a zero pair)."""
    m, k = a.shape
    o = b.shape[0]
    if k % 2:
        a, b = np.pad(a, ((0, 0), (0, 1))), np.pad(b, ((0, 0), (0, 1)))
    a3 = a.astype(np.int32).reshape(m, 1, -1, 2)
    b3 = b.astype(np.int32).reshape(1, o, -1, 2)
    out = np.empty((m, o), np.int64)
    step = max(1, (1 << 22) // max(1, o * (k + 1)))   # rows at a time: a bounded [rows, O, K/2, 2] product
    for r in range(0, m, step):
        pair = (a3[r:r + step] * b3).sum(axis=3)
        out[r:r + step] = np.clip(pair, -32768, 32767).sum(axis=2, dtype=np.int64)
    return out


def _u8s8_pairs(scheme, x_t, w_t) -> bool:
    """Whether ``scheme`` sums these tensors' products as :func:`pairs_int16` (uint8 inputs x int8 weights)."""
    return scheme.int16_pairs and x_t.dtype == "uint8" and w_t.dtype == "int8"


def _pairs_shift(scheme, x_t, w_t, op: str = "FULLY_CONNECTED") -> int | None:
    """The offset taking ``x_t``'s codes to the uint8 operand of :func:`pairs_int16` under ``scheme``
    (0: uint8 as they are; 128: int8 where the scheme shifts them, its zero point alike, so every
    x - z_in is kept), or None: the products are summed exactly. CONV_2D's int8 activations are
    shifted only with zero point 0 (OpenVINO takes those as signed int8 for oneDNN; another zero
    point is subtracted first and the sums are exact: Scheme.pairs_s8_shift)."""
    if _u8s8_pairs(scheme, x_t, w_t):
        return 0
    if (scheme.pairs_s8_shift and x_t.dtype == "int8" and w_t.dtype == "int8"
            and (op != "CONV_2D" or zp(x_t) == 0)):
        return 128
    return None


def conv_acc(x: np.ndarray, z_in: int, w: np.ndarray, stride, dil, pads, out_hw,
             groups: int = 1, int16_pairs: bool = False) -> np.ndarray:
    """CONV_2D accumulator without bias, int64 [N, OH, OW, O]:
    sum over in-bounds (ky, kx, c) of w[o, ky, kx, c] * (x[n, oy*sh - pt + ky*dh, ox*sw - pl + kx*dw,
    g*Cg + c] - z_in), where g is the group of output channel o (grouped conv when
    C_in = groups * C_w). Matches reference_integer_ops::ConvPerChannel (and LiteRT's grouped
    reference path).

    x: raw int8 codes [N, H, W, C_in]; w: [O, KH, KW, C_w] (OHWI); pads: (top, left).
    im2col via strided slices of the input padded with z_in (so padded taps give 0), one
    float BLAS matmul per group (exact, see the module docstring), z_in * sum(w) taken off.
    ``int16_pairs``: the raw products summed as :func:`pairs_int16`, along im2col's (ky, kx, c).
    """
    n, h, wd, cin = x.shape
    o, kh, kw, cw = w.shape
    sh, sw = stride
    dh, dw = dil
    oh, ow = out_hw
    pt, pl = pads
    pb, pr = _trailing_pads((h, wd), (kh, kw), stride, dil, pads, out_hw)
    xp = x
    if pt or pb or pl or pr:
        xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=z_in)
    k = kh * kw * cw
    ft = _float_type(k, _absmax(x), _absmax(w)) or np.int64
    og = o // groups
    out = np.empty((n * oh * ow, o), np.int64)
    wsum = w.reshape(o, k).sum(axis=1, dtype=np.int64)
    for g in range(groups):
        cols = np.empty((n, oh, ow, kh, kw, cw), dtype=ft)
        for ky in range(kh):
            y0 = ky * dh
            for kx in range(kw):
                x0 = kx * dw
                cols[:, :, :, ky, kx, :] = xp[:, y0:y0 + (oh - 1) * sh + 1:sh,
                                              x0:x0 + (ow - 1) * sw + 1:sw, g * cw:(g + 1) * cw]
        if int16_pairs:
            out[:, g * og:(g + 1) * og] = pairs_int16(cols.reshape(-1, k), w[g * og:(g + 1) * og].reshape(og, k))
            continue
        wg = w[g * og:(g + 1) * og].reshape(og, k).astype(ft)
        out[:, g * og:(g + 1) * og] = (cols.reshape(-1, k) @ wg.T).astype(np.int64)
    out -= z_in * wsum
    return out.reshape(n, oh, ow, o)


def depthwise_acc(x: np.ndarray, z_in: int, w: np.ndarray, mult: int, stride, dil, pads,
                  out_hw) -> np.ndarray:
    """DEPTHWISE_CONV_2D accumulator without bias, int64 [N, OH, OW, C*M]: output channel
    c*M + m sums w[0, ky, kx, c*M + m] * (x[n, iy, ix, c] - z_in) over in-bounds taps
    (reference_integer_ops::DepthwiseConvPerChannel). w: [1, KH, KW, C*M] (1HWO)."""
    n, h, wd, c = x.shape
    _, kh, kw, co = w.shape
    sh, sw = stride
    dh, dw = dil
    oh, ow = out_hw
    pt, pl = pads
    pb, pr = _trailing_pads((h, wd), (kh, kw), stride, dil, pads, out_hw)
    taps = kh * kw
    wsum = w.reshape(taps, co).sum(axis=0, dtype=np.int64)
    if taps <= _DW_TAP_LOOP:
        # a few taps: multiply-accumulate whole shifted planes in int32 (exact: |sum| < 2^31)
        it = np.int32 if taps * _absmax(x) * _absmax(w) < 2 ** 31 else np.int64
        xp = np.pad(x.astype(it), ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=z_in)
        if mult > 1:
            xp = np.repeat(xp, mult, axis=3)
        wi = w.reshape(kh, kw, co).astype(it)
        acc = np.zeros((n, oh, ow, co), it)
        for ky in range(kh):
            y0 = ky * dh
            for kx in range(kw):
                x0 = kx * dw
                acc += xp[:, y0:y0 + (oh - 1) * sh + 1:sh, x0:x0 + (ow - 1) * sw + 1:sw, :] * wi[ky, kx]
        return acc.astype(np.int64) - z_in * wsum
    # many taps: per-channel im2col and one batched BLAS matmul over the taps
    ft = _float_type(taps, _absmax(x), _absmax(w)) or np.int64
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr), (0, 0)), constant_values=z_in).astype(ft)
    if mult > 1:
        xp = np.repeat(xp, mult, axis=3)
    view = np.lib.stride_tricks.sliding_window_view(xp, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(1, 2))
    view = view[:, :(oh - 1) * sh + 1:sh, :(ow - 1) * sw + 1:sw, :, ::dh, ::dw]   # [N, OH, OW, CO, KH, KW]
    cols = np.ascontiguousarray(view.transpose(3, 0, 1, 2, 4, 5)).reshape(co, n * oh * ow, taps)
    wf = np.ascontiguousarray(w.reshape(taps, co).T, dtype=ft)[:, :, None]          # [CO, T, 1]
    acc = np.matmul(cols, wf)[:, :, 0].astype(np.int64).T.reshape(n, oh, ow, co)
    return acc - z_in * wsum


def transpose_conv_acc(x: np.ndarray, z_in: int, w: np.ndarray, stride, pads, out_hw) -> np.ndarray:
    """TRANSPOSE_CONV accumulator without bias, int64 [N, OH, OW, O]: every input element
    scatters (x[n, iy, ix, c] - z_in) * w[o, ky, kx, c] to output (iy*sh - pt + ky, ix*sw - pl + kx),
    out-of-range targets dropped (reference_integer_ops::TransposeConv). w: [O, KH, KW, C] (OHWI).

    One BLAS matmul per tap into a buffer wide enough for every target, then cropped.
    """
    n, h, wd, c = x.shape
    o, kh, kw, _ = w.shape
    sh, sw = stride
    oh, ow = out_hw
    pt, pl = pads
    ft = _float_type(kh * kw * c, _span(x), _absmax(w)) or np.int64
    xc = (x.astype(np.int64) - z_in).astype(ft).reshape(-1, c)
    full_h = max((h - 1) * sh + kh, pt + oh)
    full_w = max((wd - 1) * sw + kw, pl + ow)
    buf = np.zeros((n, full_h, full_w, o), ft)
    wf = w.astype(ft)
    for ky in range(kh):
        for kx in range(kw):
            p = (xc @ wf[:, ky, kx, :].T).reshape(n, h, wd, o)
            buf[:, ky:ky + (h - 1) * sh + 1:sh, kx:kx + (wd - 1) * sw + 1:sw, :] += p
    return buf[:, pt:pt + oh, pl:pl + ow, :].astype(np.int64)


def _fc_sums(x2: np.ndarray, z_in: int, w: np.ndarray, z_w: int = 0) -> tuple[np.ndarray, float]:
    """(sums, bound): sum_k (w[o, k] - z_w) * (x[b, k] - z_in) for every (b, o), [B, O], exact,
    and a bound on their magnitude. The sums are int64, or a float array (float32 or float64)
    whose every value is an exact integer; :func:`fc_acc` is the same as int64.

    Up to ``_FC_NATIVE_MAX`` rows of 8-bit codes with int8 weights: the C int8 dot product
    (reference/native.py), exact int64 sums with bound max |sum|.

    Otherwise BLAS on d = x - z_in: every partial sum of w * d is an integer no larger than
    max|w| * sum_k |d[b, k]|, so float32 is exact while that is <= 2^24, float64 while <= 2^53
    (int64 beyond). sum_k |d| is bounded by the dtypes (K * max|q - z_in|) and, when that bound
    is too loose for float32, by the data (summed in float32 while K * max|q - z_in| <= 2^24,
    exact, else in float64). d is formed in float32 directly when that is exact (codes of at
    most 16 bits, |z_in| <= 2^23: |x - z_in| < 2^24). One input row (a GEMV) is
    ``np.dot(w, d)``, which converts the weights and calls gemv in one C call; a few rows convert
    the weights once for one gemv per row; more rows make one gemm. The weight zero point is
    taken off as z_w * sum_k d (in float64 while exact, else in int64).
    """
    b, k = x2.shape
    if (b <= _FC_NATIVE_MAX and w.dtype == np.int8 and x2.dtype.kind in "iu" and x2.dtype.itemsize == 1
            and _dev(x2, int(z_in)) <= 255):
        d16 = x2.astype(np.int16)
        if z_in:
            d16 -= np.int16(z_in)
        r = native.dot_i8(w, d16)
        if r is not None:                          # exact int64 sums; else the NumPy path below
            if z_w:
                r -= int(z_w) * d16.sum(axis=1, dtype=np.int64)[:, None]
            return r, int(np.abs(r).max(initial=0))
    wmax = _absmax(w)
    if x2.dtype.kind in "iu" and x2.dtype.itemsize <= 2 and abs(int(z_in)) <= 2 ** 23:
        d = x2.astype(np.float32)
        if z_in:
            d -= np.float32(z_in)
        dmax = k * _dev(x2, int(z_in))
        if dmax * wmax > _F32_EXACT:
            a = np.abs(d)
            dt = np.float32 if dmax <= _F32_EXACT else np.float64
            dmax = float(a.sum(axis=1, dtype=dt).max(initial=0.0))
    else:
        d = x2.astype(np.int64)
        d -= z_in
        dmax = int(np.abs(d).sum(axis=1).max(initial=0))
    ft = _float_type(1, wmax, dmax)               # partial sums <= wmax * dmax
    zbound = (wmax + abs(int(z_w))) * dmax              # with the weight zero point taken off
    if ft is None:
        acc = d.astype(np.int64) @ w.astype(np.int64).T
        if z_w:
            acc -= z_w * d.astype(np.int64).sum(axis=1)[:, None]
        return acc, zbound
    df = d if d.dtype == ft else d.astype(ft)      # [B, K], exact either way
    if b == 1:
        r = np.dot(w, df[0])[None, :]
    elif b <= _FC_GEMV_MAX:                        # OpenBLAS: a few gemv calls beat a skinny gemm
        wf = w.astype(ft)
        r = np.stack([wf @ df[j] for j in range(b)])
    else:
        r = df @ w.astype(ft).T
    if z_w:
        dsum = df.sum(axis=1, dtype=np.float64)[:, None]           # exact: |sum| <= dmax
        if zbound <= _F64_EXACT:
            r = r.astype(np.float64)
            r -= z_w * dsum
        else:
            r = r.astype(np.int64)
            r -= int(z_w) * dsum.astype(np.int64)
    return r, zbound


def fc_acc(x2: np.ndarray, z_in: int, w: np.ndarray, z_w: int = 0) -> np.ndarray:
    """FULLY_CONNECTED accumulator without bias, int64 [B, O]: sum_k (w[o, k] - z_w) * (x[b, k] - z_in)
    (reference_integer_ops::FullyConnected / FullyConnectedPerChannel); see :func:`_fc_sums`."""
    acc = _fc_sums(x2, z_in, w, z_w)[0]
    return acc if acc.dtype == np.int64 else acc.astype(np.int64)


def batch_matmul_acc(a: np.ndarray, z_a: int, b: np.ndarray, z_b: int) -> np.ndarray:
    """BATCH_MATMUL accumulator, int64 [..., M, N]: sum_k (a[..., m, k] - z_a) * (b[..., k, n] - z_b),
    batch dimensions broadcast (reference_ops::BatchMatMul<int8_t, int32_t>).
    a, b: raw codes, already in [.., M, K] x [.., K, N] order (adj_x / adj_y applied)."""
    k = a.shape[-1]
    ft = _float_type(k, _absmax(a), _absmax(b))
    if ft is None:
        a64, b64 = a.astype(np.int64), b.astype(np.int64)
        return np.matmul(a64 - z_a, b64 - z_b)
    af, bf = a.astype(ft), b.astype(ft)
    acc = np.matmul(af, bf).astype(np.int64)
    # row / column sums: |sum| <= k * 65535, exact in the same float type
    if z_b:
        acc -= z_b * af.sum(axis=-1, keepdims=True).astype(np.int64)
    if z_a:
        acc -= z_a * bf.sum(axis=-2, keepdims=True).astype(np.int64)
    if z_a and z_b:
        acc += k * z_a * z_b
    return acc


# --------------------------------------------------------------------------- requantization

def _is_litert_ref(scheme) -> bool:
    """The scheme models LiteRT's reference kernels themselves (either build)."""
    return scheme.name.startswith("tflite-ref")


def _channel_multiplier(scheme, s_in: float, s_w: np.ndarray, s_out: float) -> np.ndarray:
    """Per-channel real multipliers as PopulateConvolutionQuantizationParams forms them
    ((double)s_in * (double)s_w[c] / (double)s_out), or float32 left to right."""
    return scheme.real_multiplier(s_in, s_w, den=s_out)


def _product_multiplier(scheme, s_a: float, s_b: float, s_out: float) -> np.ndarray:
    """GetQuantizedConvolutionMultipler: (double)(float)(s_a * s_b) / (double)s_out (the scale
    product is a float32 product); the float form is the same expression in float32."""
    prod = np.float32(np.float32(s_a) * np.float32(s_b))
    if scheme.multiplier_precision == "float":
        return np.asarray(np.float32(prod / np.float32(s_out)), dtype=np.float64)
    return np.asarray(np.float64(prod) / np.float64(np.float32(s_out)), dtype=np.float64)


def _requantize(scheme, acc: np.ndarray, real, z_out: int, lo: int, hi: int) -> np.ndarray:
    """MBQM / float requantization of an int accumulator whose last axis is the channel."""
    if scheme.is_fixed and not scheme.exact:
        m, shift = arith.quantize_multiplier(real, scheme.single_rounding)
        out = mbqm(acc, m, shift, scheme.single_rounding, scheme.half_up_shift)
        out += z_out
        return np.clip(out, lo, hi, out=out)
    return scheme.requantize(acc, real, z_out, lo, hi)


def mbqm(x: np.ndarray, m, shift, single_rounding: bool = False, half_up: bool = False) -> np.ndarray:
    """MultiplyByQuantizedMultiplier on int32-range int64 values, m >= 0: the same results as
    ``arith.mbqm`` (tests/test_golden_conv.py compares them) in fewer NumPy passes.

    Double rounding: x' = x * 2^left saturated to int32 (arith.saturating_left_shift);
    SaturatingRoundingDoublingHighMul(x', m) =
    floor((x' * m + 2^30) / 2^31) (nudge 2^30 or 1 - 2^30 then truncation is exactly "round half
    up"; it saturates only for m = INT32_MIN); RoundingDivideByPOT(q, right) = (q + 2^(right-1)
    - [q < 0 and right > 0]) >> right (round half away from zero; ``half_up``: without the
    correction, ties toward +inf).
    Single rounding: (x * m + 2^(30 - shift)) >> (31 - shift).
    """
    x = np.asarray(x, dtype=np.int64)
    m = np.asarray(m, dtype=np.int64)
    shift = np.asarray(shift, dtype=np.int64)
    if single_rounding:
        total = 31 - shift
        q = x * m
        q += np.int64(1) << (total - 1)
        q >>= total
        return q
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    if left.any():
        x = arith.saturating_left_shift(x, left)
    q = x * m
    q += np.int64(1) << 30
    q >>= 31
    corr = None if half_up else (q < 0) & (right > 0)
    q += (np.int64(1) << right) >> 1
    if corr is not None:
        q -= corr
    q >>= right
    return q


def _requantize_double_round(acc: np.ndarray, real: np.ndarray, z_out: int, lo: int, hi: int) -> np.ndarray:
    """LiteRT reference FULLY_CONNECTED: (int32)std::round((double)acc * real) + z_out, clamped.

    std::round ties away from zero. A product beyond int32 has no defined conversion in C
    (x86-64's cvttsd2si gives INT32_MIN: litert-requant-left-shift-overflow); the spec's real
    product is clamped, so it saturates here.
    """
    v = arith.round_half_away(acc.astype(np.float64) * real)
    r = np.clip(v, arith.INT32_MIN, arith.INT32_MAX).astype(np.int64)
    return np.clip(r + z_out, lo, hi)


# --------------------------------------------------------------------------- goldens

def _weight_scales(t, n: int) -> np.ndarray:
    s = np.asarray(t.scale, dtype=np.float32).astype(np.float64)
    if s.size == 1:
        return np.full(n, s[0])
    if s.size != n:
        raise QconformError(f"has {s.size} scales, the op has {n} output channels",
                            field="inputs[1].scale", rule="per-axis weights: one scale per output channel")
    return s


def _check_weight_axis(case, axis: int) -> None:
    w = case.inputs[1]
    if w.per_axis and w.quantized_dimension != axis:
        raise QconformError(f"must be {axis} (the output-channel axis; got {w.quantized_dimension})",
                            field="inputs[1].quantized_dimension", rule=f"{case.op} per-axis weights")


def _finish(case, scheme, acc: np.ndarray, bias: np.ndarray, bound: int, s_in: float, w, s_out: float,
            n_out: int) -> np.ndarray:
    """Accumulator + bias -> output codes for the conv-type ops (per-channel multipliers)."""
    out = case.outputs[0]
    lo, hi = act_range(case, out)
    real = _channel_multiplier(scheme, s_in, _weight_scales(w, n_out), s_out)
    acc += bias
    return _requantize(scheme, _wrap(acc, scheme, bound), real, zp(out), lo, hi)


@register("CONV_2D", rounding="fixed-double")
def conv_2d(case, scheme):
    x_t, w_t = case.inputs[0], case.inputs[1]
    _check_rank(case, 0, 4, "input")
    _check_rank(case, 1, 4, "filter (OHWI)")
    _check_weight_axis(case, 0)
    n, h, wd, cin = x_t.shape
    o, kh, kw, cw = w_t.shape
    if cin % cw or o % (cin // cw):
        raise QconformError(f"input channels {cin} must be a multiple of the filter's {cw} "
                            f"and the {o} output channels a multiple of the groups",
                            field="inputs[1].shape", rule="CONV_2D channels (grouped convolution)")
    groups = cin // cw
    stride, dil, pads, (oh, ow) = _spatial(case, (h, wd), (kh, kw), n, o)
    x = np.asarray(x_t.data).reshape(x_t.shape)
    w = np.asarray(w_t.data).reshape(w_t.shape)
    shift = _pairs_shift(scheme, x_t, w_t, "CONV_2D")
    pairs = shift is not None
    if shift:   # int8 codes as the uint8 x + 128, the zero point (and so the padding) alike
        x = x.astype(np.int16) + shift
    acc = conv_acc(x, zp(x_t) + (shift or 0), w, stride, dil, pads, (oh, ow), groups, pairs)
    bias = _bias(case, 2, o)
    bound = _acc_bound(kh * kw * cw, x, zp(x_t) + (shift or 0), w, bias)
    if pairs:   # (saturated pair sums, each >= -32768: bounded as the products are)
        bound = int(np.abs(acc).max(initial=0)) + int(np.abs(bias).max(initial=0))
    return [_finish(case, scheme, acc, bias, bound, scale(x_t), w_t, scale(case.outputs[0]), o)]


def _spatial(case, in_hw, k_hw, n: int, channels: int):
    """Strides, dilations, LiteRT's leading pads and the output size of a 2-D convolution case
    (checking the case's output shape against them)."""
    stride, dil, padding = conv_geometry(case)
    oh = out_size(in_hw[0], k_hw[0], stride[0], dil[0], padding)
    ow = out_size(in_hw[1], k_hw[1], stride[1], dil[1], padding)
    _check_out_hw(case, oh, ow, padding)
    _expect_shape(case, (n, oh, ow, channels), f"{padding} padding")
    pads = (pad_before(in_hw[0], k_hw[0], stride[0], dil[0], oh),
            pad_before(in_hw[1], k_hw[1], stride[1], dil[1], ow))
    return stride, dil, pads, (oh, ow)


@register("DEPTHWISE_CONV_2D", rounding="fixed-double")
def depthwise_conv_2d(case, scheme):
    x_t, w_t = case.inputs[0], case.inputs[1]
    _check_rank(case, 0, 4, "input")
    _check_rank(case, 1, 4, "filter (1HWO)")
    _check_weight_axis(case, 3)
    n, h, wd, c = x_t.shape
    one, kh, kw, co = w_t.shape
    if one != 1 or co % c:
        raise QconformError(f"filter must be [1, KH, KW, C*M] with C = {c} (got {list(w_t.shape)})",
                            field="inputs[1].shape", rule="DEPTHWISE_CONV_2D filter")
    # LiteRT's int8 kernel takes the multiplier from the shapes (ComputeDepthMultiplier)
    mult = co // c
    stride, dil, pads, (oh, ow) = _spatial(case, (h, wd), (kh, kw), n, co)
    x = np.asarray(x_t.data).reshape(x_t.shape)
    w = np.asarray(w_t.data).reshape(w_t.shape)
    acc = depthwise_acc(x, zp(x_t), w, mult, stride, dil, pads, (oh, ow))
    bias = _bias(case, 2, co)
    bound = _acc_bound(kh * kw, x, zp(x_t), w, bias)
    return [_finish(case, scheme, acc, bias, bound, scale(x_t), w_t, scale(case.outputs[0]), co)]


@register("TRANSPOSE_CONV", rounding="fixed-double")
def transpose_conv(case, scheme):
    shape_t, w_t, x_t = case.inputs[0], case.inputs[1], case.inputs[2]
    _check_rank(case, 1, 4, "filter (OHWI)")
    _check_rank(case, 2, 4, "input")
    _check_weight_axis(case, 0)
    out_shape = [int(v) for v in np.asarray(shape_t.data).ravel()]
    if len(out_shape) != 4:
        raise QconformError(f"must hold 4 values (got {out_shape})", field="inputs[0].data",
                            rule="TRANSPOSE_CONV output_shape")
    _expect_shape(case, out_shape, "the output_shape input")
    n, h, wd, c = x_t.shape
    o, kh, kw, cw = w_t.shape
    if cw != c or out_shape[3] != o or out_shape[0] != n:
        raise QconformError(f"filter {list(w_t.shape)} must be [O, KH, KW, {c}] with O = output "
                            f"channels {out_shape[3]}", field="inputs[1].shape",
                            rule="TRANSPOSE_CONV shapes")
    stride, _, padding = conv_geometry(case)
    oh, ow = out_shape[1], out_shape[2]
    # LiteRT computes the padding as for a convolution of the output back to the input
    if (out_size(oh, kh, stride[0], 1, padding), out_size(ow, kw, stride[1], 1, padding)) != (h, wd):
        raise QconformError(f"input spatial size {[h, wd]} must be the {padding} convolution size of "
                            f"the output {[oh, ow]}", field="inputs[2].shape",
                            rule="TRANSPOSE_CONV output_shape / padding / stride")
    pads = (pad_before(oh, kh, stride[0], 1, h), pad_before(ow, kw, stride[1], 1, wd))
    x = np.asarray(x_t.data).reshape(x_t.shape)
    w = np.asarray(w_t.data).reshape(w_t.shape)
    acc = transpose_conv_acc(x, zp(x_t), w, stride, pads, (oh, ow))
    bias = _bias(case, 3, o)
    bound = _acc_bound(kh * kw * c, x, zp(x_t), w, bias)
    return [_finish(case, scheme, acc, bias, bound, scale(x_t), w_t, scale(case.outputs[0]), o)]


def _bias_codes(case, idx: int, n: int) -> np.ndarray | None:
    """The bias of input ``idx`` as stored ([n], its own dtype), None if the case has none."""
    if len(case.inputs) <= idx or case.inputs[idx].data is None:
        return None
    b = case.inputs[idx]
    if b.size != n:
        raise QconformError(f"bias has {b.size} values, the op has {n} output channels",
                            field=f"inputs[{idx}].shape", rule="one bias per output channel")
    return np.asarray(b.data).reshape(n)


_HALF_DOWN = 0.49999999999999994     # the largest double below 0.5


def _fc_round_double(sums: np.ndarray, bias, real, z_out: int, lo: int, hi: int, storage) -> np.ndarray:
    """LiteRT's reference FULLY_CONNECTED requantization (:func:`_requantize_double_round`) in
    float64 straight from the exact sums (int64 or integer-valued floats), in a few in-place passes. The caller has proven
    |sums + bias| <= INT32_MAX (no int32 wrap) and |acc * real| < 2^31 - 1 for every value (so
    none is clamped to int32 there: |v| <= fl(max|acc| * max|real|), rounding is
    monotone). Then:

    * acc = sums + bias in float64 is exact, and v = acc * real is the kernel's double product;
    * clamp(round(v) + z, lo, hi) == round(clamp(v, lo - z, hi - z)) + z: round is monotone and
      keeps integers, and lo - z, hi - z are integers;
    * std::round on |v| < 2^52: trunc(v + copysign(0.49999999999999994, v)). With 0.5 instead,
      0.49999999999999994 + 0.5 would round up to 1.0; with the largest double below 0.5 every
      tie n + 0.5 still reaches n + 1 (n + 1 - 2^-54 rounds up for n >= 1, ties to even 1.0
      for n = 0), and nothing below a tie does. With z_out = 0 the truncation is the cast to
      the integer storage type itself (float to int conversion truncates toward zero; the
      values lie within lo - 0.5 .. hi + 0.5).
    """
    acc = sums.astype(np.float64) if bias is None else np.add(sums, bias, dtype=np.float64)
    acc *= real
    np.minimum(acc, hi - z_out, out=acc)
    np.maximum(acc, lo - z_out, out=acc)
    acc += np.copysign(_HALF_DOWN, acc)
    if z_out:
        np.trunc(acc, out=acc)
        acc += z_out
    return acc.astype(storage)


@register("FULLY_CONNECTED", rounding="float-round")
def fully_connected(case, scheme):
    x_t, w_t = case.inputs[0], case.inputs[1]
    _check_rank(case, 1, 2, "weights [out, in]")
    _check_weight_axis(case, 0)
    o, k = w_t.shape
    x_size = x_t.size
    if x_size % k:
        raise QconformError(f"input has {x_size} elements, not a multiple of the {k} weight columns",
                            field="inputs[0].shape", rule="FULLY_CONNECTED input size")
    batch = x_size // k
    if case.attrs.get("keep_num_dims"):
        if x_t.shape[-1] != k:
            raise QconformError(f"last input dimension must be {k} with keep_num_dims",
                                field="inputs[0].shape", rule="FULLY_CONNECTED keep_num_dims")
        want = tuple(x_t.shape[:-1]) + (o,)
    else:
        want = (batch, o)
    _expect_shape(case, want, f"keep_num_dims={bool(case.attrs.get('keep_num_dims'))}")
    x2 = np.asarray(x_t.data).reshape(batch, k)
    w = np.asarray(w_t.data).reshape(o, k)
    z_w = 0 if w_t.per_axis else zp(w_t)
    bias = _bias_codes(case, 2, o)
    out = case.outputs[0]
    lo, hi = act_range(case, out)
    s_in, s_out, z_out = scale(x_t), scale(out), zp(out)
    shift = _pairs_shift(scheme, x_t, w_t)
    if shift is not None:   # sum (w - z_w)(x - z_in) with sum w * x as vpmaddubsw forms it
        z_in = zp(x_t) + shift
        x2 = x2.astype(np.int64) + shift
        sums = (pairs_int16(x2, w) - z_in * w.sum(axis=1, dtype=np.int64)[None, :]
                - z_w * x2.sum(axis=1, dtype=np.int64)[:, None] + k * z_in * z_w)
        bound = int(np.abs(sums).max(initial=0))
    else:
        sums, bound = _fc_sums(x2, zp(x_t), w, z_w)
    if bias is not None and bias.size:
        bound += max(int(bias.max()), -int(bias.min()))     # >= every |sums + bias|
    litert = _is_litert_ref(scheme)
    if litert:   # per channel; per tensor the same double expression as one scalar
        if w_t.per_axis:
            real = np.float64(s_in) * _weight_scales(w_t, o) / np.float64(s_out)
            rmax = float(np.abs(real).max(initial=0.0))
        else:
            real = s_in * scale(w_t) / s_out
            rmax = abs(real)
        if ((bias is None or bias.dtype.kind in "iu") and bound <= arith.INT32_MAX
                and bound * rmax < arith.INT32_MAX):   # False for inf / nan
            return [_fc_round_double(sums, bias, real, z_out, lo, hi, DTYPES[out.dtype].storage)]
    acc = sums.astype(np.int64)
    if bias is not None:
        acc += bias.astype(np.int64)
    if litert:
        return [_requantize_double_round(_wrap(acc, scheme, bound), real, z_out, lo, hi)]
    s_w = _weight_scales(w_t, o)
    if w_t.per_axis or not scheme.is_fixed:
        real = _channel_multiplier(scheme, s_in, s_w, s_out)
    else:
        real = _product_multiplier(scheme, s_in, float(s_w[0]), s_out)
    return [_requantize(scheme, _wrap(acc, scheme, bound), real, z_out, lo, hi)]


@register("BATCH_MATMUL", rounding="fixed-double")
def batch_matmul(case, scheme):
    a_t, b_t = case.inputs[0], case.inputs[1]
    for i, t in enumerate((a_t, b_t)):
        if not 2 <= len(t.shape) <= 5:
            raise QconformError(f"rank must be 2..5 (got shape {list(t.shape)})",
                                field=f"inputs[{i}].shape", rule="BATCH_MATMUL rank")
    a = np.asarray(a_t.data).reshape(a_t.shape)
    b = np.asarray(b_t.data).reshape(b_t.shape)
    if case.attrs.get("adj_x"):
        a = np.swapaxes(a, -1, -2)
    if case.attrs.get("adj_y"):
        b = np.swapaxes(b, -1, -2)
    if a.shape[-1] != b.shape[-2]:
        raise QconformError(f"contracted dimensions differ: {a.shape[-1]} vs {b.shape[-2]}",
                            field="inputs[1].shape", rule="BATCH_MATMUL shapes (adj_x / adj_y applied)")
    try:
        batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise QconformError(f"batch dimensions {list(a.shape[:-2])} and {list(b.shape[:-2])} do not "
                            f"broadcast", field="inputs[1].shape", rule="BATCH_MATMUL broadcasting") from None
    _expect_shape(case, tuple(batch) + (a.shape[-2], b.shape[-1]), "BATCH_MATMUL")
    if _u8s8_pairs(scheme, a_t, b_t):   # as FULLY_CONNECTED's, per batch entry
        k, z_a, z_b = a.shape[-1], zp(a_t), zp(b_t)
        ab = np.broadcast_to(a, tuple(batch) + a.shape[-2:]).reshape(-1, *a.shape[-2:])
        bb = np.broadcast_to(b, tuple(batch) + b.shape[-2:]).reshape(-1, *b.shape[-2:])
        acc = np.stack([pairs_int16(ai, bi.T) - z_a * bi.sum(axis=0, dtype=np.int64)[None, :]
                        - z_b * ai.sum(axis=1, dtype=np.int64)[:, None] + k * z_a * z_b
                        for ai, bi in zip(ab, bb)]).reshape(tuple(batch) + (a.shape[-2], b.shape[-1]))
        bound = int(np.abs(acc).max(initial=0))
    else:
        acc = batch_matmul_acc(a, zp(a_t), b, zp(b_t))
        bound = a.shape[-1] * _dev(a, zp(a_t)) * _dev(b, zp(b_t))
    out = case.outputs[0]
    lo, hi = qrange(out)            # BATCH_MATMUL has no fused activation
    if scheme.is_fixed or scheme.exact:
        real = _product_multiplier(scheme, scale(a_t), scale(b_t), scale(out))
    else:
        real = scheme.real_multiplier(scale(a_t), scale(b_t), den=scale(out))
    return [_requantize(scheme, _wrap(acc, scheme, bound), real, zp(out), lo, hi)]
