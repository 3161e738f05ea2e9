"""Generators for AVERAGE_POOL_2D, MAX_POOL_2D, MEAN, SUM, L2_NORMALIZATION, RESIZE_BILINEAR."""

from __future__ import annotations

import numpy as np

from reference import arith
from reference.ops.pool import mean_multiplier

from suite.core.case import Case
from suite.cases.generate import Gen, f32, generator, real_values, rounding_inputs

ACTS = ["NONE", "NONE", "RELU", "RELU6", "RELU_N1_TO_1"]
T = "litert-int8"


def _clause(op: str, *parts: str) -> str:
    return " ".join(f"{T}/{op}/{p}" for p in parts) if parts else f"{T}/{op}"


# ----------------------------------------------------------------------------- pooling

def _pool_out(n: int, f: int, s: int, padding: str) -> int:
    """LiteRT's pooled size: SAME ceil(n / s), VALID (n - f + s) / s."""
    return (n + s - 1) // s if padding == "SAME" else (n - f + s) // s


def _sat_act(g: Gen, z: int) -> tuple[str, float | None]:
    """For sat_hi / sat_lo: RELU_N1_TO_1 with a scale putting +-1 at ~60% of the codes on the
    saturated side, so the fused clamp bites; (act, scale or None)."""
    room = 127 - z if g.variant == "sat_hi" else z + 128
    if room < 8:
        return "NONE", None
    return "RELU_N1_TO_1", f32(1.0 / (0.6 * room))


def _pool_case(g: Gen, op: str) -> Case:
    v = g.variant
    n = g.randint(1, 2)
    c = g.randint(1, 16)
    padding = g.choice(["SAME", "VALID"])
    clause = []
    if v == "tie":
        # non-overlapping windows of an even number of taps; the last tap of each window is
        # set so that sum == n/2 (mod n): every average is exactly k + 1/2
        fh, fw = g.choice([(1, 2), (2, 1), (2, 2), (2, 4), (4, 4), (3, 2), (2, 3)])
        sh, sw = fh, fw
        oh, ow = g.randint(1, 4), g.randint(1, 4)
        h, w = fh * oh + g.randint(0, fh - 1), fw * ow + g.randint(0, fw - 1)
        padding = "VALID"
    elif v == "big_filter":
        h, w = g.randint(1, 4), g.randint(1, 4)
        fh, fw = h + g.randint(1, 3), w + g.randint(0, 3)
        sh, sw = g.randint(1, 2), g.randint(1, 2)
        padding = "SAME"
        clause.append("padding.same")
    elif v == "global":
        h, w = g.randint(2, 9), g.randint(2, 9)
        fh, fw, sh, sw = h, w, 1, 1
        padding = "VALID"
    elif v == "filter1":
        h, w = g.dims(2, 1, 9)
        fh = fw = 1
        sh, sw = g.randint(1, 3), g.randint(1, 3)
    else:
        h, w = g.dims(2, 1, 10)
        fh, fw = g.randint(1, 4), g.randint(1, 4)
        sh, sw = g.randint(1, 3), g.randint(1, 3)
        if padding == "VALID":
            fh, fw = min(fh, h), min(fw, w)
    shape = [n, h, w, c]
    z = g.zero_point()
    act, s = "NONE", None
    if v in ("sat_hi", "sat_lo"):
        act, s = _sat_act(g, z)
    elif v == "random":
        act = g.choice(ACTS)
    if s is None:
        s = g.scale(2.0 ** -8, 2.0 ** -2)
    x = g.activation(shape, scale=s, zero_point=z)
    if v == "tie":
        oh, ow = (h - fh) // sh + 1, (w - fw) // sw + 1
        data = x.data.astype(np.int64)
        win = data[:, :oh * fh, :ow * fw, :].reshape(n, oh, fh, ow, fw, c).transpose(0, 1, 3, 5, 2, 4)
        win = win.reshape(n, oh, ow, c, fh * fw).copy()
        taps = fh * fw
        rest = win[..., :-1].sum(axis=-1)
        e0 = g.rng.integers(-128, 128 - taps + 1, size=rest.shape)
        win[..., -1] = e0 + np.mod(taps // 2 - (rest + e0), taps)
        win = win.reshape(n, oh, ow, c, fh, fw).transpose(0, 1, 4, 2, 5, 3).reshape(n, oh * fh, ow * fw, c)
        data[:, :oh * fh, :ow * fw, :] = win
        x.data = data.astype(np.int8)
        clause.append("rounding.tie")
    oh, ow = _pool_out(h, fh, sh, padding), _pool_out(w, fw, sw, padding)
    out = g.output([n, oh, ow, c], x.scale[0], x.zero_point[0])
    attrs = {"padding": padding, "stride_w": sw, "stride_h": sh, "filter_width": fw,
             "filter_height": fh, "fused_activation_function": act}
    g.clause = _clause(op, "same_scale", *clause)
    case = Case(op=op, inputs=[x], outputs=[out], attrs=attrs, clause=g.clause)
    case.description = (f"{op} {fh}x{fw} stride {sh}x{sw} {padding} on {shape}, act {act}"
                        + (" (every average a .5 tie)" if v == "tie" else ""))
    return case


@generator("AVERAGE_POOL_2D", variants={"tie": 3, "big_filter": 2, "global": 2, "filter1": 1})
def gen_average_pool(g: Gen) -> Case:
    return _pool_case(g, "AVERAGE_POOL_2D")


@generator("MAX_POOL_2D", variants={"big_filter": 2, "global": 1, "filter1": 1})
def gen_max_pool(g: Gen) -> Case:
    return _pool_case(g, "MAX_POOL_2D")


# ----------------------------------------------------------------------------- MEAN / SUM

def _kernel_multiplier(ratio: float, n: int | None):
    """(m, shift) LiteRT's QuantizedMeanOrSum applies: QuantizeMultiplier(ratio), and for MEAN
    (n given) 1/n folded in with k = min(floor(log2 n), 32, 31 + shift)."""
    m, s = (int(v) for v in arith.quantize_multiplier(ratio))
    if n is not None:
        m, s = (int(v) for v in mean_multiplier(m, s, n))
    return m, s


def _codes_with_sums(g: Gen, sums: np.ndarray, n: int) -> np.ndarray:
    """Rows of n int8 codes with the given row sums (each sum within [-128n, 127n]):
    an even split, then zero-sum noise between random pairs, then shuffled."""
    sums = np.asarray(sums, np.int64)
    base = np.floor_divide(sums, n)
    rem = sums - base * n
    rows = base[:, None] + (np.arange(n)[None, :] < rem[:, None])
    half = n // 2
    if half:
        a, b = rows[:, :half], rows[:, half:2 * half]
        room = np.minimum(127 - a, b + 128)
        d = np.floor(g.rng.random(a.shape) * (room + 1)).astype(np.int64)
        rows[:, :half], rows[:, half:2 * half] = a + d, b - d
    return g.rng.permuted(rows, axis=1)


def _place(rows: np.ndarray, shape: list[int], axes: list[int]) -> np.ndarray:
    """Rows laid out as (kept dims..., reduced dims...) moved back into ``shape``."""
    kept = [i for i in range(len(shape)) if i not in axes]
    perm = kept + list(axes)
    arr = rows.reshape([shape[p] for p in perm])
    return arr.transpose(np.argsort(perm))


def _reduce_shape(g: Gen, op: str) -> tuple[list[int], list[int], list[int], bool]:
    """(shape, resolved axes, axis values as written, keep_dims) for the variant."""
    v = g.variant
    keep = bool(g.rng.random() < 0.5)
    if v in ("spatial", "tie", "ties", "dbl_vs_single") or (v == "large_reduction" and g.index % 2 == 0):
        if v == "large_reduction":
            shape = [1, g.randint(24, 48), g.randint(24, 48), g.randint(1, 3)]
        elif v == "spatial":
            shape = [g.randint(1, 2), g.randint(1, 8), g.randint(1, 8), g.randint(1, 16)]
        elif v == "ties":
            shape = [1, 2, 2, g.randint(96, 128)]
        else:
            shape = [1, g.choice([1, 2]), g.choice([2, 4]), g.randint(8, 48)]
        axes = [1, 2] if g.rng.random() < 0.5 else [2, 1]
        keep = True if v == "spatial" and g.index < 2 else keep
        return shape, sorted(axes), axes, keep
    if v == "large_reduction" or (v == "mult_extreme" and g.index % 3 == 0):
        shape = g.choice([[g.randint(1100, 4096)], [g.randint(2, 4), g.randint(1100, 1500)]])
        axes = [len(shape) - 1]
        return shape, axes, [g.choice([axes[0], -1])], keep
    rank = g.randint(1, 4)
    shape = g.dims(rank, 1, 10)
    if v == "all_axes":
        axes = list(range(rank))
    else:
        k = g.randint(1, rank)
        axes = sorted(int(a) for a in g.rng.choice(rank, size=k, replace=False))
    written = [int(a) for a in g.rng.permutation(axes)]
    if v == "neg_axes":
        written = [a - rank for a in written]
        if g.index % 2 == 1:
            written.append(written[0] + rank)        # the same axis again, written positively
    return shape, axes, written, keep


def _reduce_case(g: Gen, op: str) -> Case:
    v = g.variant
    divide = op == "MEAN"
    shape, axes, written, keep = _reduce_shape(g, op)
    n = int(np.prod([shape[a] for a in axes]))
    out_shape = [1 if i in axes else d for i, d in enumerate(shape)] if keep else \
        [d for i, d in enumerate(shape) if i not in axes]
    groups = int(np.prod(out_shape)) if out_shape else 1
    clause = ["rounding"] if v in ("tie", "ties", "dbl_vs_single") else []
    if v in ("tie", "ties", "dbl_vs_single", "mult_extreme"):
        s_in = g.scale(2.0 ** -8, 2.0 ** -3)
        z_in = g.zero_point()
        room = 1.0 if divide else 2.0 ** int(np.ceil(np.log2(2 * n)))   # SUM: keep sums in range
        if v in ("tie", "ties"):
            s_out = s_in * 2.0 ** g.randint(0, 2) * room              # power-of-two ratio
        elif v == "dbl_vs_single":
            s_out = f32(s_in / float(g.rng.uniform(0.1, 0.9)) * room)
        elif g.index % 3 == 0:
            s_out = f32(s_in * 2.0 ** 23)        # tiny ratio: 31 + shift < log2 N clamps the 1/N fold
        elif g.index % 3 == 1:
            s_in = f32((1 - 2.0 ** -24) * 2.0 ** -5)   # mantissa of all ones: multiplier 2^31 - 2^7
            s_out = 2.0 ** -6 * room
        else:
            s_out = s_in * 4.0 * room
        ratio = float(np.float64(np.float32(s_in)) / np.float64(np.float32(s_out)))
        z_out = g.randint(-16, 16)
        span = 110 - abs(z_out)
        per = n if divide else 1
        lo = max(n * (-128 - z_in), -int(span * per / ratio))
        hi = min(n * (127 - z_in), int(span * per / ratio))
        sums = None
        if v in ("tie", "ties", "dbl_vs_single"):
            m, s = _kernel_multiplier(ratio, n if divide else None)
            sums = rounding_inputs(g, v, m, s, lo, hi, groups)
        if sums is None:
            sums = g.rng.integers(lo, hi + 1, size=groups)
        rows = _codes_with_sums(g, sums + z_in * n, n)
        data = _place(rows, shape, axes).astype(np.int8)
        x = g.activation(shape, scale=s_in, zero_point=z_in, data=data)
        s, z = s_out, z_out
    else:
        x = g.activation(shape, scale=g.scale(2.0 ** -8, 2.0 ** -2))
        red = real_values(x).sum(axis=tuple(axes), keepdims=True)
        real = red / n if divide else red
        s, z = g.output_qparams(real)
        if v == "same_qparams":
            s, z = x.scale[0], x.zero_point[0]
            clause.append("same_scale")
    out = g.output(out_shape, s, z)
    axis = g.param(written)
    g.clause = _clause(op, *(clause or ["arithmetic"]))
    case = Case(op=op, inputs=[x, axis], outputs=[out], attrs={"keep_dims": keep}, clause=g.clause)
    case.description = f"{op} of {shape} over axes {written} (N={n}), keep_dims={keep}" + \
        {"tie": ", every result a .5 tie", "ties": ", every result a .5 tie, half of them below zero", "dbl_vs_single": ", accumulators where 1- and 2-step rounding differ",
         "mult_extreme": f", s_in/s_out = {x.scale[0] / s:.6g}"}.get(v, "")
    return case


REDUCE_VARIANTS = {"spatial": 3, "neg_axes": 2, "all_axes": 2, "large_reduction": 3, "tie": 3,
                   "dbl_vs_single": 2, "mult_extreme": 3}


@generator("MEAN", variants=dict(REDUCE_VARIANTS, same_qparams=1))
def gen_mean(g: Gen) -> Case:
    return _reduce_case(g, "MEAN")


@generator("SUM", variants=dict(REDUCE_VARIANTS))
def gen_sum(g: Gen) -> Case:
    return _reduce_case(g, "SUM")


# ``ties``: ~100 results per case on ties that the final rounding step breaks away from zero, half
# of them negative, added to the default run (beyond --cases-per-op) so that a kernel breaking ties
# one way is refused on the op alone (tests/test_tie_power.py)
generator("MEAN", variants={"ties": 2}, extra=True)(gen_mean)
generator("SUM", variants={"ties": 2}, extra=True)(gen_sum)


# ----------------------------------------------------------------------------- L2_NORMALIZATION

@generator("L2_NORMALIZATION", variants={"zero_rows": 2, "single": 2, "acc_extreme": 2, "large_reduction": 1})
def gen_l2_norm(g: Gen) -> Case:
    v = g.variant
    clause = ["fixed_output"]
    if v == "single":
        shape = g.dims(g.randint(1, 3), 1, 8)[:-1] + [1]
    elif v == "acc_extreme" and g.index == 0:
        shape = [1, 8300]              # 255^2 * 8300 > 2^29: the normalization loop divides by 4
    elif v in ("acc_extreme", "large_reduction"):
        shape = [g.randint(1, 2), g.randint(1000, 2000)]
    else:
        rank = g.randint(1, 4)
        shape = g.dims(rank, 1, 6)[:-1] + [g.randint(1, 32)]
    z = g.zero_point()
    if v == "acc_extreme":
        z = -128 if g.rng.random() < 0.5 else 127
    x = g.activation(shape, scale=g.scale())
    x.zero_point = [z]
    data = np.asarray(x.data, np.int64)
    if v == "acc_extreme":
        data = np.full(shape, 127 if z == -128 else -128, np.int64)
        data[..., ::7] = z                               # a few taps at the zero point
    elif v == "zero_rows":
        rows = data.reshape(-1, shape[-1])
        k = rows.shape[0]
        sel = g.rng.random(k) < 0.5
        rows[sel] = z                                    # acc = 0
        one = ~sel & (g.rng.random(k) < 0.5)
        rows[one] = z
        col = g.rng.integers(0, shape[-1], size=k)
        rows[one, col[one]] = np.clip(z + g.rng.choice([-1, 1], size=k)[one], -128, 127)   # acc = 1
        data = rows.reshape(shape)
        clause.append("zero_row")
    else:
        data = np.asarray(g.codes(shape, zero_point=z), np.int64)
    x.data = data.astype(np.int8)
    out = g.output(shape, 1.0 / 128.0, 0)
    g.clause = _clause("L2_NORMALIZATION", *clause)
    case = Case(op="L2_NORMALIZATION", inputs=[x], outputs=[out],
                attrs={"fused_activation_function": "NONE"}, clause=g.clause)
    case.description = f"L2_NORMALIZATION over the last axis of {shape}, input zero point {z}"
    return case


# ----------------------------------------------------------------------------- RESIZE_BILINEAR

FLAGS = [(False, False), (True, False), (False, True)]   # (align_corners, half_pixel_centers)


@generator("RESIZE_BILINEAR", variants={"align_corners": 2, "half_pixel": 2, "upscale": 2,
                                        "downscale": 2, "size1": 2, "tie": 2})
def gen_resize_bilinear(g: Gen) -> Case:
    v = g.variant
    n, c = g.randint(1, 2), g.randint(1, 4)
    h, w = g.dims(2, 1, 8)
    oh, ow = g.randint(1, 16), g.randint(1, 16)
    ac, hp = g.choice(FLAGS)
    if v == "align_corners":
        ac, hp = True, False
    elif v == "half_pixel":
        ac, hp = False, True
    elif v == "upscale":
        f = g.randint(2, 4)
        h, w = g.randint(1, 5), g.randint(1, 5)
        oh, ow = h * f, w * f
    elif v == "downscale":
        h, w = g.randint(4, 12), g.randint(4, 12)
        oh, ow = g.randint(1, h - 1), g.randint(1, w - 1)
    elif v == "size1":
        if g.index == 0:
            h, w = 1, 1
        else:
            oh, ow = 1, g.randint(1, 8)
    elif v == "tie":
        # 2x along one axis, no flags: every other output is (a + b) / 2 and a + b is odd
        ac, hp = False, False
        h, w = g.randint(1, 6), g.randint(2, 6)
        oh, ow = (h, 2 * w) if g.index == 0 else (2 * h, w)
    x = g.activation([n, h, w, c])
    if v == "tie":
        d = np.asarray(x.data, np.int64)
        axis = 2 if g.index == 0 else 1
        idx = np.arange(d.shape[axis]).reshape([-1 if i == axis else 1 for i in range(4)])
        d = np.clip(2 * np.floor_divide(d, 2) + (idx % 2), -128, 127)
        x.data = d.astype(np.int8)
    out = g.output([n, oh, ow, c], x.scale[0], x.zero_point[0])
    g.clause = _clause("RESIZE_BILINEAR", "same_scale", *(["rounding.tie"] if v == "tie" else []))
    case = Case(op="RESIZE_BILINEAR", inputs=[x, g.param([oh, ow])], outputs=[out],
                attrs={"align_corners": ac, "half_pixel_centers": hp}, clause=g.clause)
    case.description = f"RESIZE_BILINEAR {[h, w]} -> {[oh, ow]}, align_corners={ac}, half_pixel_centers={hp}"
    return case
