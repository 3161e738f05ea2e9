"""A team's own int8 CONV_2D kernel written in Python/NumPy, as a qconform target.

Run it::

    pytest --target=examples.kernels.python_conv:PythonConvTarget --ops CONV_2D \\
        --tolerance examples/kernels/bit-exact.toml

It is deliberately independent of the suite's golden (nothing from ``reference/``):
it is the kind of bit-exact model a hardware team writes of its own fixed-point
pipeline, and the suite is what tells whether it matches the LiteRT int8 spec.
The arithmetic is LiteRT's reference ConvPerChannel: int32 accumulation of
w * (x - z_in) over in-bounds taps plus bias (wrapping), a per-channel multiplier
QuantizeMultiplier((double)s_in * s_w[c] / s_out), MultiplyByQuantizedMultiplier
with two roundings, + z_out, clamp to the fused activation's range.
"""

from __future__ import annotations

import numpy as np

from targets.base import Outcome, Target, Timing


def quantize_multiplier(real: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """real ~= m * 2^(shift - 31), m in [2^30, 2^31): frexp, round half away, carry."""
    q, e = np.frexp(real)
    m = np.floor(np.abs(q) * 2.0 ** 31 + 0.5).astype(np.int64) * np.sign(q).astype(np.int64)
    e = e.astype(np.int64)
    carry = m == 2 ** 31
    m, e = np.where(carry, m // 2, m), np.where(carry, e + 1, e)
    tiny = e < -31
    return np.where(tiny | (real == 0), 0, m), np.where(tiny | (real == 0), 0, e)


def multiply_by_quantized_multiplier(x: np.ndarray, m: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(x << left, m), right), int64 lanes."""
    left, right = np.maximum(shift, 0), np.maximum(-shift, 0)
    x = ((x << left) + 2 ** 31) % 2 ** 32 - 2 ** 31                  # the int32 multiply wraps
    ab = x * m
    nudge = np.where(ab >= 0, 2 ** 30, 1 - 2 ** 30)
    num = ab + nudge
    high = np.where(num >= 0, num >> 31, -((-num) >> 31))              # C division truncates
    high = np.where((x == -2 ** 31) & (m == -2 ** 31), 2 ** 31 - 1, high)
    mask = (np.int64(1) << right) - 1
    threshold = (mask >> 1) + (high < 0)
    return (high >> right) + ((high & mask) > threshold)


def padding_before(n: int, k: int, stride: int, dil: int, padding: str) -> tuple[int, int]:
    eff = (k - 1) * dil + 1
    out = (n + stride - 1) // stride if padding == "SAME" else (n - eff + stride) // stride
    return out, max(((out - 1) * stride + eff - n) // 2, 0)


def activation_bounds(act: str, scale: float, zp: int) -> tuple[int, int]:
    def quant(f):
        v = float(np.float32(f) / np.float32(scale))
        return zp + int(np.sign(v) * np.floor(abs(v) + 0.5))
    lo, hi = -128, 127
    if act in ("RELU", "RELU6", "RELU_N1_TO_1"):
        lo = max(lo, quant(-1.0 if act == "RELU_N1_TO_1" else 0.0))
    if act in ("RELU6", "RELU_N1_TO_1"):
        hi = min(hi, quant(6.0 if act == "RELU6" else 1.0))
    return lo, hi


def conv2d_int8(x, z_in, w, bias, s_in, s_w, s_out, z_out, stride, dil, padding, act) -> np.ndarray:
    """The kernel: NHWC int8 input, OHWI int8 filter (grouped when C_in = groups * C_w)."""
    n, h, wd, cin = x.shape
    o, kh, kw, cw = w.shape
    groups = cin // cw
    oh, pt = padding_before(h, kh, stride[0], dil[0], padding)
    ow, pl = padding_before(wd, kw, stride[1], dil[1], padding)
    xs = x.astype(np.int64) - z_in
    # pad with zeros (= z_in before the shift): out-of-image taps contribute nothing
    need_h, need_w = (oh - 1) * stride[0] + (kh - 1) * dil[0] + 1, (ow - 1) * stride[1] + (kw - 1) * dil[1] + 1
    xp = np.zeros((n, max(need_h, pt + h), max(need_w, pl + wd), cin), np.int64)
    xp[:, pt:pt + h, pl:pl + wd, :] = xs
    acc = np.zeros((n, oh, ow, o), np.int64)
    og = o // groups
    wl = w.astype(np.int64)
    for g in range(groups):
        for ky in range(kh):
            for kx in range(kw):
                y0, x0 = ky * dil[0], kx * dil[1]
                patch = xp[:, y0:y0 + (oh - 1) * stride[0] + 1:stride[0],
                           x0:x0 + (ow - 1) * stride[1] + 1:stride[1], g * cw:(g + 1) * cw]
                acc[..., g * og:(g + 1) * og] += patch @ wl[g * og:(g + 1) * og, ky, kx, :].T
    if bias is not None:
        acc += bias.astype(np.int64)
    acc = (acc + 2 ** 31) % 2 ** 32 - 2 ** 31                            # int32 accumulator wraps
    s_w = np.broadcast_to(np.asarray(s_w, np.float32).astype(np.float64), (o,))
    m, shift = quantize_multiplier(np.float64(np.float32(s_in)) * s_w / np.float64(np.float32(s_out)))
    out = multiply_by_quantized_multiplier(acc, m, shift) + z_out
    lo, hi = activation_bounds(act, s_out, z_out)
    return np.clip(out, lo, hi).astype(np.int8)


class PythonConvTarget(Target):
    name = "python-conv"
    description = "an int8 CONV_2D kernel in NumPy (examples/kernels/python_conv.py)"
    expected_scheme = "tflite-ref-double"

    def unsupported(self, case):
        if case.op != "CONV_2D":
            return f"this kernel implements CONV_2D only, not {case.op}"
        kinds = [t.dtype for t in case.inputs[:2]] + [case.outputs[0].dtype]
        if kinds != ["int8", "int8", "int8"]:
            return f"int8 input/filter/output only (got {'/'.join(kinds)})"
        return None

    def run_one(self, case, timing: Timing) -> Outcome:
        x_t, w_t, out_t = case.inputs[0], case.inputs[1], case.outputs[0]
        a = case.attrs
        bias = None
        if len(case.inputs) > 2 and case.inputs[2].data is not None:
            bias = np.asarray(case.inputs[2].data).reshape(-1)
        args = (np.asarray(x_t.data).reshape(x_t.shape), int(x_t.zero_point[0]),
                np.asarray(w_t.data).reshape(w_t.shape), bias, x_t.scale[0], w_t.scale, out_t.scale[0],
                int(out_t.zero_point[0]), (int(a.get("stride_h", 1)), int(a.get("stride_w", 1))),
                (int(a.get("dilation_h_factor", 1)), int(a.get("dilation_w_factor", 1))),
                a.get("padding", "VALID"), a.get("fused_activation_function", "NONE") or "NONE")
        out, samples = timing.measure(lambda: conv2d_int8(*args))
        return Outcome.ok([out], samples)
