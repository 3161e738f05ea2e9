"""ONNX quantization operators as plain NumPy functions (NCHW, as ONNX defines them).

These are the golden's building blocks for the ``onnx-qdq`` spec table and the
functions ``tests/test_onnx_backend_cases.py`` holds against the onnx package's own
node test cases. Every function takes and returns NumPy arrays; integer results
are returned as int64 codes (the caller casts to the storage type).

Arithmetic, from the ONNX operator definitions:

* QuantizeLinear: ``y = saturate(round_half_even(x / y_scale) + y_zero_point)``; the
  division happens in the scale's float type (float32: one correctly rounded
  float32 division). Granularity follows the scale's shape: scalar (per-tensor),
  1-D (per-axis along ``axis``), same rank as x (blocked along ``axis``, each scale
  repeated ``block_size`` times, the last block cut short).
* DequantizeLinear: ``y = (x - x_zero_point) * x_scale``; the integer difference is
  exact, converted to the scale's float type, one rounded multiply.
* QLinearMatMul / QLinearConv: exact integer accumulation of
  ``(a - a_zp) * (b - b_zp)`` (+ bias), then scaled by ``a_scale * b_scale / y_scale``,
  rounded half to even, ``+ y_zp``, saturated. The spec leaves the precision of
  the scaling open; ``precision="float32"`` forms the multiplier in float32 left to
  right and multiplies float32(acc) by it (ONNX Runtime's MLAS requantization),
  ``"float64"`` does the same in float64 (the onnx reference evaluator promotes
  int32 x float32 to float64).
* MatMulInteger / ConvInteger: the exact accumulation, wrapped to int32 (the spec
  allows overflow only in the 32-bit accumulator).
* DynamicQuantizeLinear: uint8, range [min(0, min x), max(0, max x)] in float32,
  ``scale = range / 255`` (1.0 when the range is empty, as ONNX Runtime and the
  reference do), ``zp = saturate(round(0 - min / scale))``,
  ``y = saturate(round(x / scale) + zp)``, ties to even everywhere.

float8 / float4 element types are not modelled (no integer codes).
"""

from __future__ import annotations

import itertools

import numpy as np

from suite.core.errors import QconformError

#: integer element types of ONNX quantization (name -> (qmin, qmax))
INT_RANGES: dict[str, tuple[int, int]] = {
    "int2": (-2, 1), "uint2": (0, 3),
    "int4": (-8, 7), "uint4": (0, 15),
    "int8": (-128, 127), "uint8": (0, 255),
    "int16": (-32768, 32767), "uint16": (0, 65535),
    "int32": (-(2**31), 2**31 - 1),
}


def qrange(dtype: str) -> tuple[int, int]:
    try:
        return INT_RANGES[dtype]
    except KeyError:
        raise QconformError(f"{dtype!r} is not an ONNX integer quantization type "
                            f"(known: {', '.join(INT_RANGES)})", field="dtype",
                            rule="ONNX integer element types") from None


def _dtype_of(arr, default: str) -> str:
    if arr is None:
        return default
    name = np.asarray(arr).dtype.name
    return name if name in INT_RANGES else default


def normalize_axis(axis: int, rank: int, field: str = "axis") -> int:
    """ONNX axis in [-r, r-1] -> [0, r-1]."""
    if not -rank <= axis < rank:
        raise QconformError(f"axis {axis} is outside [-{rank}, {rank - 1}] for a rank-{rank} input",
                            field=field, rule="axis in [-r, r-1]")
    return axis % rank


def expand_param(p, x_shape, axis: int = 1, block_size: int = 0, field: str = "scale") -> np.ndarray:
    """A scale or zero point broadcast to ``x_shape`` (per-tensor, per-axis or blocked)."""
    p = np.asarray(p)
    rank = len(x_shape)
    if p.size == 1 and block_size == 0:
        return p.reshape(())
    if p.ndim == 1 and block_size == 0:
        ax = normalize_axis(axis, rank)
        if p.shape[0] != x_shape[ax]:
            raise QconformError(f"per-axis {field} has {p.shape[0]} values but axis {ax} of "
                                f"{list(x_shape)} has {x_shape[ax]}", field=field,
                                rule="per-axis length == x.shape[axis]")
        shape = [1] * rank
        shape[ax] = p.shape[0]
        return p.reshape(shape)
    # blocked
    if block_size <= 0:
        raise QconformError(f"a {field} of shape {list(p.shape)} is blocked and needs block_size > 0",
                            field="block_size", rule="blocked quantization needs block_size")
    if p.ndim != rank:
        raise QconformError(f"blocked {field} has rank {p.ndim}, x has rank {rank}", field=field,
                            rule="blocked scale has the input's rank")
    ax = normalize_axis(axis, rank)
    want = list(x_shape)
    want[ax] = -(-x_shape[ax] // block_size)
    if list(p.shape) != want:
        raise QconformError(f"blocked {field} has shape {list(p.shape)}, expected {want} "
                            f"(x {list(x_shape)}, axis {ax}, block_size {block_size})", field=field,
                            rule="blocked scale shape = x shape with ceil(D_axis / block_size) on the axis")
    return np.repeat(p, block_size, axis=ax).take(np.arange(x_shape[ax]), axis=ax)


def _float_type(scale) -> type:
    s = np.asarray(scale)
    return s.dtype.type if s.dtype.kind == "f" else np.float32


# --------------------------------------------------------------------------- Q / DQ

def quantize_linear(x, y_scale, y_zero_point=None, axis: int = 1, block_size: int = 0,
                    dtype: str | None = None) -> np.ndarray:
    """ONNX QuantizeLinear: saturate(round_half_even(x / y_scale) + y_zero_point), int64 codes.

    ``dtype`` names the output type; by default the zero point's type, else uint8.
    """
    x = np.asarray(x)
    dtype = dtype or _dtype_of(y_zero_point, "uint8")
    lo, hi = qrange(dtype)
    ft = _float_type(y_scale)
    s = expand_param(np.asarray(y_scale).astype(ft), x.shape, axis, block_size, "y_scale")
    z = 0 if y_zero_point is None else expand_param(np.asarray(y_zero_point).astype(np.int64), x.shape,
                                                     axis, block_size, "y_zero_point")
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        q = x.astype(ft) / s
    if np.isnan(q).any():
        raise QconformError("x / y_scale is NaN: the integer result is undefined", field="x",
                            rule="finite inputs")
    r = np.clip(np.rint(q.astype(np.float64)), -(2.0**40), 2.0**40).astype(np.int64)
    return np.clip(r + z, lo, hi)


def dequantize_linear(x, x_scale, x_zero_point=None, axis: int = 1, block_size: int = 0) -> np.ndarray:
    """ONNX DequantizeLinear: (x - x_zero_point) * x_scale in the scale's float type."""
    x = np.asarray(x).astype(np.int64)
    ft = _float_type(x_scale)
    s = expand_param(np.asarray(x_scale).astype(ft), x.shape, axis, block_size, "x_scale")
    z = 0 if x_zero_point is None else expand_param(np.asarray(x_zero_point).astype(np.int64), x.shape,
                                                     axis, block_size, "x_zero_point")
    return ((x - z).astype(ft) * s).astype(ft)


def dynamic_quantize_linear(x) -> tuple[np.ndarray, np.float32, np.int64]:
    """ONNX DynamicQuantizeLinear (uint8): (y codes, y_scale float32, y_zero_point)."""
    x = np.asarray(x, dtype=np.float32)
    qmin, qmax = 0, 255
    xmin = np.float32(min(0.0, float(x.min()))) if x.size else np.float32(0)
    xmax = np.float32(max(0.0, float(x.max()))) if x.size else np.float32(0)
    if xmax == xmin:
        scale = np.float32(1.0)
    else:
        scale = np.float32(np.float32(xmax - xmin) / np.float32(qmax - qmin))
    zp_f = np.float32(np.float32(qmin) - np.float32(xmin / scale))
    zp = int(np.rint(np.clip(zp_f, qmin, qmax)))
    y = np.clip(np.rint((x / scale).astype(np.float64)).astype(np.int64) + zp, qmin, qmax)
    return y, scale, np.int64(zp)


# --------------------------------------------------------------------------- integer matmul / conv

def _exact_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """numpy.matmul of int64 arrays, exact (float64 BLAS while |sum| < 2^53 is guaranteed)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    k = a.shape[-1] if a.ndim else 1
    bound = (int(np.abs(a).max(initial=0)) * int(np.abs(b).max(initial=0))) * max(k, 1)
    if bound < 2**53:
        return np.rint(np.matmul(a.astype(np.float64), b.astype(np.float64))).astype(np.int64)
    return np.matmul(a, b)


def _wrap_int32(x: np.ndarray) -> np.ndarray:
    return ((np.asarray(x, dtype=np.int64) + 2**31) & 0xFFFFFFFF) - 2**31


def _row_param(p, a_shape) -> np.ndarray:
    """A per-tensor or per-row parameter of matmul input a, shaped to broadcast with a's rows."""
    p = np.asarray(p)
    if p.size == 1:
        return p.reshape(())
    if p.ndim == 1:
        return p.reshape(-1, 1)
    return p


def _col_param(p, b_shape) -> np.ndarray:
    """A per-tensor or per-column parameter of matmul input b (or of the output)."""
    p = np.asarray(p)
    if p.size == 1:
        return p.reshape(())
    if p.ndim == 1:
        return p.reshape(1, -1)
    return p


def matmul_integer(a, b, a_zero_point=None, b_zero_point=None) -> np.ndarray:
    """ONNX MatMulInteger: (a - a_zp) @ (b - b_zp), accumulated exactly, wrapped to int32."""
    a = np.asarray(a).astype(np.int64)
    b = np.asarray(b).astype(np.int64)
    if a_zero_point is not None:
        a = a - _row_param(np.asarray(a_zero_point).astype(np.int64), a.shape)
    if b_zero_point is not None:
        b = b - _col_param(np.asarray(b_zero_point).astype(np.int64), b.shape)
    return _wrap_int32(_exact_matmul(a, b))


def requantize(acc, multiplier_factors, y_zero_point, dtype: str, precision: str = "float32") -> np.ndarray:
    """Integer accumulator -> output codes: round_half_even(acc * (s_a * s_b / s_y)) + zp, saturated.

    ``multiplier_factors`` = (s_a, s_b, s_y), arrays broadcastable to acc, combined left
    to right in ``precision`` (float32 or float64); acc is converted to the same type.
    """
    ft = np.float32 if precision == "float32" else np.float64
    sa, sb, sy = (np.asarray(f).astype(ft) for f in multiplier_factors)
    m = (sa * sb).astype(ft) / sy
    v = np.asarray(acc, dtype=np.int64).astype(ft) * m.astype(ft)
    lo, hi = qrange(dtype)
    r = np.clip(np.rint(v.astype(np.float64)), -(2.0**40), 2.0**40).astype(np.int64)
    return np.clip(r + np.asarray(y_zero_point).astype(np.int64), lo, hi)


def qlinear_matmul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point,
                   precision: str = "float32", dtype: str | None = None) -> np.ndarray:
    """ONNX QLinearMatMul: per-tensor or per-row a, per-tensor or per-column b; int64 codes.

    ``dtype`` is the output type (default: y_zero_point's NumPy type).
    """
    acc = _exact_matmul(np.asarray(a).astype(np.int64) - _row_param(np.asarray(a_zero_point).astype(np.int64), np.shape(a)),
                        np.asarray(b).astype(np.int64) - _col_param(np.asarray(b_zero_point).astype(np.int64), np.shape(b)))
    dtype = dtype or _dtype_of(y_zero_point, _dtype_of(a, "uint8"))
    return requantize(acc, (_row_param(a_scale, np.shape(a)), _col_param(b_scale, np.shape(b)),
                            _col_param(y_scale, acc.shape)),
                      _col_param(y_zero_point, acc.shape), dtype, precision)


def conv_pads(in_spatial, kernel, strides, dilations, pads=None, auto_pad: str = "NOTSET") -> list[int]:
    """ONNX pads [x1_begin, x2_begin, ..., x1_end, x2_end, ...] after resolving auto_pad."""
    n = len(in_spatial)
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else (auto_pad or "NOTSET")
    if auto_pad == "NOTSET":
        return list(pads) if pads is not None else [0] * (2 * n)
    if auto_pad == "VALID":
        return [0] * (2 * n)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise QconformError(f"unknown auto_pad {auto_pad!r}", field="auto_pad",
                            rule="NOTSET, VALID, SAME_UPPER or SAME_LOWER")
    begin, end = [], []
    for d, k, s, dl in zip(in_spatial, kernel, strides, dilations):
        out = -(-d // s)
        total = max((out - 1) * s + (k - 1) * dl + 1 - d, 0)
        small, big = total // 2, total - total // 2
        begin.append(small if auto_pad == "SAME_UPPER" else big)
        end.append(big if auto_pad == "SAME_UPPER" else small)
    return begin + end


def _conv_acc(x: np.ndarray, w: np.ndarray, group: int, pads, strides, dilations) -> np.ndarray:
    """Exact int64 N-D convolution of zero-point-free codes x [N, C, *S] and w [M, C/g, *K].

    Padding adds zeros (the zero point, once subtracted). One vectorized
    contraction per kernel tap (taps are few).
    """
    n_sp = x.ndim - 2
    N, C = x.shape[:2]
    M, Cg = w.shape[:2]
    ksz = w.shape[2:]
    if C != Cg * group or M % group:
        raise QconformError(f"x has {C} channels, w is {list(w.shape)} with group {group}",
                            field="group", rule="C == C/group * group and M % group == 0")
    pad_width = [(0, 0), (0, 0)] + [(pads[i], pads[i + n_sp]) for i in range(n_sp)]
    xp = np.pad(x, pad_width)
    out_sp = [(xp.shape[2 + i] - ((ksz[i] - 1) * dilations[i] + 1)) // strides[i] + 1 for i in range(n_sp)]
    if any(o <= 0 for o in out_sp):
        raise QconformError(f"the kernel {list(ksz)} does not fit the padded input {list(xp.shape[2:])}",
                            field="w", rule="output size >= 1")
    Mg = M // group
    xg = xp.reshape((N, group, Cg) + xp.shape[2:])
    wg = w.reshape((group, Mg, Cg) + tuple(ksz))
    acc = np.zeros((N, group, Mg) + tuple(out_sp), dtype=np.int64)
    for tap in itertools.product(*[range(k) for k in ksz]):
        sl = tuple(slice(tap[i] * dilations[i], tap[i] * dilations[i] + (out_sp[i] - 1) * strides[i] + 1,
                         strides[i]) for i in range(n_sp))
        patch = xg[(slice(None), slice(None), slice(None)) + sl]          # [N, g, Cg, *out]
        wt = wg[(slice(None), slice(None), slice(None)) + tap]            # [g, Mg, Cg]
        acc += np.einsum("ngc...,gmc->ngm...", patch, wt, optimize=True)
    return acc.reshape((N, M) + tuple(out_sp))


def _conv_geometry(x, w, pads, strides, dilations, auto_pad, kernel_shape):
    n_sp = x.ndim - 2
    ksz = list(w.shape[2:]) if kernel_shape is None else list(kernel_shape)
    strides = list(strides) if strides is not None else [1] * n_sp
    dilations = list(dilations) if dilations is not None else [1] * n_sp
    pads = conv_pads(x.shape[2:], ksz, strides, dilations, pads, auto_pad or "NOTSET")
    return pads, strides, dilations


def conv_integer(x, w, x_zero_point=None, w_zero_point=None, pads=None, strides=None, dilations=None,
                 group: int = 1, auto_pad: str = "NOTSET", kernel_shape=None) -> np.ndarray:
    """ONNX ConvInteger: conv of (x - x_zp) and (w - w_zp[m]), exact, wrapped to int32."""
    x = np.asarray(x).astype(np.int64)
    w = np.asarray(w).astype(np.int64)
    if x_zero_point is not None:
        x = x - int(np.asarray(x_zero_point).reshape(-1)[0])
    if w_zero_point is not None:
        wz = np.asarray(w_zero_point).astype(np.int64).reshape(-1)
        w = w - (wz.reshape((-1,) + (1,) * (w.ndim - 1)) if wz.size > 1 else wz[0])
    pads, strides, dilations = _conv_geometry(x, w, pads, strides, dilations, auto_pad, kernel_shape)
    return _wrap_int32(_conv_acc(x, w, int(group), pads, strides, dilations))


def qlinear_conv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B=None,
                 pads=None, strides=None, dilations=None, group: int = 1, auto_pad: str = "NOTSET",
                 kernel_shape=None, precision: str = "float32", dtype: str | None = None) -> np.ndarray:
    """ONNX QLinearConv: per-tensor x/y, per-tensor or per-output-channel w, int32 bias; int64 codes.

    ``dtype`` is the output type (default: y_zero_point's NumPy type).
    """
    x_arr = np.asarray(x)
    xi = x_arr.astype(np.int64) - int(np.asarray(x_zero_point).reshape(-1)[0])
    wi = np.asarray(w).astype(np.int64)
    wz = np.asarray(w_zero_point).astype(np.int64).reshape(-1)
    wi = wi - (wz.reshape((-1,) + (1,) * (wi.ndim - 1)) if wz.size > 1 else wz[0])
    pads, strides, dilations = _conv_geometry(xi, wi, pads, strides, dilations, auto_pad, kernel_shape)
    acc = _conv_acc(xi, wi, int(group), pads, strides, dilations)
    chan = (1, -1) + (1,) * (acc.ndim - 2)
    if B is not None:
        acc = acc + np.asarray(B).astype(np.int64).reshape(chan)
    ws = np.asarray(w_scale).reshape(-1)
    ws = ws.reshape(chan) if ws.size > 1 else ws.reshape(())
    dtype = dtype or _dtype_of(y_zero_point, _dtype_of(x_arr, "uint8"))
    return requantize(acc, (np.asarray(x_scale).reshape(()), ws, np.asarray(y_scale).reshape(())),
                      np.asarray(y_zero_point).reshape(()), dtype, precision)


__all__ = ["INT_RANGES", "qrange", "normalize_axis", "expand_param", "quantize_linear",
           "dequantize_linear", "dynamic_quantize_linear", "matmul_integer", "qlinear_matmul", "conv_pads",
           "conv_integer", "qlinear_conv", "requantize"]

