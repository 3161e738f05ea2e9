"""A case described by named numbers: what a finding's region is a function of.

:func:`case_params` is a pure function of the case (a generated case, a case file, a hunted or
shrunk case, a model's layer alike): the effective requantization multiplier, the accumulator's
size, the smallest scale, the row's sum of exps, ... (``PARAMS`` names them all: a finding's
``where`` in suite/core/findings.toml may use any of them; the judge evaluates it on every case).
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
from reference.common import act_range, qrange
from suite.core.case import Case
from suite.core.geometry import out_size, pad_before

from .elementwise import COMPARISONS

PARAMS = {
    "table": "the spec table of the case",
    "dtype": "input 0's dtype (the input activation's for TRANSPOSE_CONV; the quantized tensor's for ONNX Q/DQ)",
    "out_dtype": "output 0's dtype",
    "rank": "input 0's rank", "out_rank": "output 0's rank",
    "elements": "elements of output 0",
    "act": "the fused activation (NONE without one)",
    "zp_in": "input 0's zero point", "zp_out": "output 0's zero point",
    "s_in_log2": "log2 of input 0's scale", "s_out_log2": "log2 of output 0's scale",
    "broadcast": "the two inputs have different shapes",
    "out_mult_log2": "log2 of the output multiplier: ADD/SUB 2 max(s1, s2) / (2^20 s_out) (LiteRT's), "
                     "MUL s1 s2 / s_out, one-input ops s_in / s_out",
    "in_ratio_log2": "log2(s_input1 / s_input0)",
    "min_scale_log2": "log2 of the smaller input scale", "max_scale_log2": "log2 of the larger input scale",
    "same_scale": "both inputs have one scale",
    "reduce_n": "elements reduced into each output", "all_axes": "every axis reduced", "keep_dims": "keep_dims",
    "depth": "length of the last axis (softmax, L2 normalization)",
    "exp_sum_log2": "log2 of the largest row sum of exp(beta s (x - max)) (SOFTMAX)",
    "mult_min_log2": "log2 of the smallest s_in s_w[c] / s_out", "mult_max_log2": "log2 of the largest one",
    "w_spread_log2": "log2 of the largest over the smallest weight scale",
    "w_dtype": "the weights' dtype", "per_axis": "per-channel weight scales", "bias": "a bias is given",
    "acc_log2": "log2 of the largest |accumulator + bias| (31: at the int32 limit)",
    "shifted_acc_log2": "log2 of the largest |accumulator + bias| x 2^(left shift of its multiplier) (>= 31: "
                        "beyond int32 in LiteRT's MultiplyByQuantizedMultiplier)",
    "k": "reduction length of the conv/matrix op",
    "pad_end_last": "end padding on the last dimension", "pad_end_outer": "end padding on another dimension",
    "axis_last": "the op's axis is the last dimension", "idx_rank": "rank of GATHER's indices",
    "batch_dims": "GATHER's batch_dims", "n_inputs": "number of inputs",
    "granularity": "per-tensor, per-axis or blocked (ONNX Q/DQ)",
    "act_inside": "both bounds of the fused activation's clamp lie strictly inside the output's code range (false "
                  "without an activation, or when a bound is at or beyond its end)",
    "batch_last2_gt1": "BATCH_MATMUL: the last two dimensions of the broadcast batch shape are both > 1",
    "quot_log2": "log2 of the largest |x / s_out| of a float32 input (QUANTIZE; inf for an infinite x)",
}

CONV = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV", "BATCH_MATMUL")


def _log2(x: float) -> float:
    return math.log2(x) if x > 0 else -math.inf


def _main_input(case: Case):
    return case.inputs[2] if case.op == "TRANSPOSE_CONV" else case.inputs[0]


def case_params(case: Case) -> dict:
    x, o = _main_input(case), case.outputs[0]
    p: dict = {"table": case.spec, "dtype": x.dtype, "out_dtype": o.dtype, "rank": len(x.shape),
               "out_rank": len(o.shape),
               "elements": o.size, "act": case.attrs.get("fused_activation_function", "NONE")}
    if x.quantized:
        p.update(zp_in=int(x.zero_point[0]), s_in_log2=_log2(x.scale[0]))
    if o.quantized:
        p.update(zp_out=int(o.zero_point[0]), s_out_log2=_log2(o.scale[0]))
        (lo, hi), (qlo, qhi) = act_range(case, o), qrange(o)
        p["act_inside"] = p["act"] != "NONE" and qlo < lo and hi < qhi
    op = case.op
    if op in ("ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM") + COMPARISONS:
        a, b = case.inputs[0], case.inputs[1]
        sa, sb = a.scale[0], b.scale[0]
        p.update(broadcast=tuple(a.shape) != tuple(b.shape), in_ratio_log2=_log2(sb / sa),
                 min_scale_log2=_log2(min(sa, sb)), max_scale_log2=_log2(max(sa, sb)), same_scale=sa == sb)
        if op in ("ADD", "SUB"):
            p["out_mult_log2"] = _log2(2 * max(sa, sb) / (2 ** 20 * o.scale[0]))
        elif op == "MUL":
            p["out_mult_log2"] = _log2(sa * sb / o.scale[0])
    elif op in CONV:
        p.update(_conv_params(case))
    elif op in ("SOFTMAX", "LOG_SOFTMAX", "L2_NORMALIZATION"):
        p["depth"] = int(x.shape[-1]) if x.shape else 1
        if op == "SOFTMAX":
            q = np.asarray(x.data, np.float64).reshape(-1, p["depth"])
            z = float(case.attrs.get("beta", 1.0)) * x.scale[0] * (q - q.max(axis=1, keepdims=True))
            p["exp_sum_log2"] = _log2(float(np.exp(z).sum(axis=1).max()))
    elif op in ("MEAN", "SUM"):
        axes = {int(a) % len(x.shape) for a in np.asarray(case.inputs[1].data).ravel()}
        p.update(reduce_n=math.prod(x.shape[a] for a in axes), all_axes=len(axes) == len(x.shape),
                 keep_dims=bool(case.attrs.get("keep_dims")))
    elif op in ("PAD", "PADV2"):
        pads = np.asarray(case.inputs[1].data).reshape(-1, 2)
        p.update(pad_end_last=bool(pads[-1, 1] > 0), pad_end_outer=bool((pads[:-1, 1] > 0).any()))
    elif op in ("GATHER", "CONCATENATION"):
        p["axis_last"] = int(case.attrs.get("axis", 0)) % len(x.shape) == len(x.shape) - 1
        p["n_inputs"] = len(case.inputs)
        if op == "GATHER":
            p.update(idx_rank=len(case.inputs[1].shape), batch_dims=int(case.attrs.get("batch_dims", 0)))
    elif op == "QUANTIZE" and x.dtype == "float32" and o.quantized:
        with np.errstate(all="ignore"):
            q = np.abs(np.asarray(x.data, np.float64) / np.float64(np.float32(o.scale[0])))
        p["quot_log2"] = _log2(float(np.nanmax(q, initial=0.0)))
    elif case.spec == "onnx-qdq":
        q = case.outputs[0] if op == "QuantizeLinear" else x
        p["dtype"] = q.dtype
        p["granularity"] = "blocked" if q.scale_shape else "per-axis" if len(q.scale) > 1 else "per-tensor"
    if x.quantized and o.quantized and "out_mult_log2" not in p and op not in CONV:
        p["out_mult_log2"] = _log2(x.scale[0] / o.scale[0])
    return p


def _conv_params(case: Case) -> dict:
    x = _main_input(case)
    if case.op == "BATCH_MATMUL":
        w, scales = case.inputs[1], [case.inputs[1].scale[0]]
        batch = np.broadcast_shapes(tuple(x.shape[:-2]), tuple(w.shape[:-2]))
    else:
        w = case.inputs[1]
        scales = list(w.scale)
    mult = np.asarray(scales, np.float64) * x.scale[0] / case.outputs[0].scale[0]
    acc = _accumulators(case)
    bias = next((t for t in case.inputs[2:] if t.dtype == "int32" and t.quantized and t.data is not None), None)
    if bias is not None and case.op != "BATCH_MATMUL":
        acc = acc + np.asarray(bias.data, np.int64)
    peak = float(np.abs(acc).max()) if acc.size else 0.0
    # |acc| times the left shift LiteRT's MultiplyByQuantizedMultiplier gives it in int32 (2^(e+1)
    # for a multiplier m = f 2^e, 1/2 <= f < 1 ... i.e. 2^(floor(log2 m) + 1) when m >= 1/2), per channel
    flat = np.abs(acc.reshape(-1, acc.shape[-1])).max(axis=0) if acc.size else np.zeros(1)
    m = mult if mult.size == flat.size else np.full(flat.shape, mult.max())
    with np.errstate(divide="ignore"):
        shift = np.maximum(np.floor(np.log2(m)) + 1, 0)
    shifted = float((flat * 2.0 ** shift).max())
    k = {"CONV_2D": lambda: math.prod(w.shape[1:]), "DEPTHWISE_CONV_2D": lambda: math.prod(w.shape[1:3]),
         "FULLY_CONNECTED": lambda: w.shape[1], "TRANSPOSE_CONV": lambda: math.prod(w.shape[1:]),
         "BATCH_MATMUL": lambda: x.shape[-2] if case.attrs.get("adj_x") else x.shape[-1]}[case.op]()
    return {"w_dtype": w.dtype, "mult_min_log2": _log2(float(mult.min())), "mult_max_log2": _log2(float(mult.max())),
            "w_spread_log2": _log2(max(scales) / min(scales)), "per_axis": len(scales) > 1,
            "bias": bias is not None, "acc_log2": _log2(peak), "shifted_acc_log2": _log2(shifted), "k": int(k),
            **({"batch_last2_gt1": len(batch) >= 2 and min(batch[-2:]) > 1} if case.op == "BATCH_MATMUL" else {})}


def _accumulators(case: Case) -> np.ndarray:
    """The op's int64 accumulators without bias, channels last (the golden's own functions)."""
    op, a = case.op, case.attrs
    x = _main_input(case)
    xd, z = np.asarray(x.data), int(x.zero_point[0])
    if op == "BATCH_MATMUL":
        b = case.inputs[1]
        am = np.swapaxes(xd, -1, -2) if a.get("adj_x") else xd
        bm = np.swapaxes(np.asarray(b.data), -1, -2) if a.get("adj_y") else np.asarray(b.data)
        return batch_matmul_acc(am, z, bm, int(b.zero_point[0]))
    w = np.asarray(case.inputs[1].data)
    if op == "FULLY_CONNECTED":
        return fc_acc(xd.reshape(-1, w.shape[1]), z, w)
    oh, ow = case.outputs[0].shape[1:3]
    if op == "TRANSPOSE_CONV":
        stride = (int(a["stride_h"]), int(a["stride_w"]))
        h, wd = x.shape[1:3]
        pads = (pad_before(oh, w.shape[1], stride[0], 1, h), pad_before(ow, w.shape[2], stride[1], 1, wd))
        return transpose_conv_acc(xd, z, w, stride, pads, (oh, ow))
    stride = (int(a["stride_h"]), int(a["stride_w"]))
    dil = (int(a.get("dilation_h_factor", 1)), int(a.get("dilation_w_factor", 1)))
    h, wd = x.shape[1:3]
    kh, kw = w.shape[1:3]
    pads = (pad_before(h, kh, stride[0], dil[0], out_size(h, kh, stride[0], dil[0], a["padding"])),
            pad_before(wd, kw, stride[1], dil[1], out_size(wd, kw, stride[1], dil[1], a["padding"])))
    if op == "CONV_2D":
        return conv_acc(xd, z, w, stride, dil, pads, (oh, ow), x.shape[3] // w.shape[3])
    return depthwise_acc(xd, z, w, int(a.get("depth_multiplier", 1)), stride, dil, pads, (oh, ow))
