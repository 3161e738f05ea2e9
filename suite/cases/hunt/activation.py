"""Spaces of the activations: RELU, RELU6, LEAKY_RELU, HARD_SWISH, LOGISTIC, TANH, SOFTMAX, LOG_SOFTMAX,
L2_NORMALIZATION."""

from __future__ import annotations

import numpy as np

from suite.core.case import Case

from .draw import (
    Draw,
    act,
    activation,
    dim,
    f32,
    mantissa,
    out_tensor,
    output,
    real_values,
    scale,
    shape,
    table_rule,
)
from .space import space


def _real(op: str, x: np.ndarray, alpha: float) -> np.ndarray:
    if op == "RELU":
        return np.maximum(x, 0)
    if op == "RELU6":
        return np.clip(x, 0, 6)
    if op == "LEAKY_RELU":
        return np.where(x >= 0, x, alpha * x)
    return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0   # HARD_SWISH


@space("RELU", "RELU6", "LEAKY_RELU", "HARD_SWISH")
def requantizing(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    shp = shape(d, d.int(1, 6))
    x = activation(d, r.inputs[0], shp, s=scale(d, -24, 6))
    attrs, alpha = {}, 0.0
    if op == "LEAKY_RELU":
        alpha = d.pick([0.01, 0.1, 0.2, 0.3, 0.5, 0.0, 1.0]) if d.flag() else \
            f32(d.pick([1, -1]) * mantissa(d) * 2.0 ** d.int(-12, 3))
        attrs["alpha"] = float(np.float32(alpha))
    out = output(d, r, shp, _real(op, real_values(x), alpha), x.scale[0], far=24)
    if op == "HARD_SWISH":   # the golden's rule (LiteRT's HardSwishPrepare): s_in / (128 s_out) < 1
        out.scale = [max(out.scale[0], f32(x.scale[0] / 127))]
    return Case(op=op, inputs=[x], outputs=[out], attrs=attrs, spec=r.table)


@space("LOGISTIC", "TANH")
def table_op(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    shp = shape(d, d.int(1, 6))
    x = activation(d, r.inputs[0], shp, s=scale(d, -24, 6))
    return Case(op=op, inputs=[x], outputs=[output(d, r, shp, real_values(x), 1.0)], spec=r.table)


@space("SOFTMAX", "LOG_SOFTMAX")
def softmax(d: Draw, op: str) -> Case:
    """Rows of any length up to 4096 along the last axis; SOFTMAX's beta over many octaves. QNN's
    SOFTMAX output is [0, 1) in 2^bits steps (its table's note)."""
    r = table_rule(d, op)
    depth = dim(d, 4096)
    shp = shape(d, d.int(0, 3), cap=max(1, 8192 // depth)) + [depth]
    x = activation(d, r.inputs[0], shp, s=scale(d, -28, 6))
    attrs = {}
    if op == "SOFTMAX":
        attrs["beta"] = 1.0 if d.flag() else f32(mantissa(d) * 2.0 ** d.int(-8, 6))
        # the golden's rule (LiteRT's softmax multiplier): beta * s_in >= 2^-26
        x.scale = [max(x.scale[0], f32(2.0 ** -26 / attrs["beta"] * (1 + 2.0 ** -20)))]
    else:   # the golden's rule (LiteRT's log-softmax reverse multiplier): s_in >= ~2^-24
        x.scale = [max(x.scale[0], 2.0 ** -24)]
    tr = r.outputs[0]
    if r.fixed_output is not None:
        out = out_tensor(d.pick(tr.dtypes), shp, *r.fixed_output)
    else:
        dtype = x.dtype if x.dtype in tr.dtypes else d.pick(tr.dtypes)
        out = out_tensor(dtype, shp, 2.0 ** -(16 if dtype.endswith("16") else 8), 0)
    return Case(op=op, inputs=[x], outputs=[out], attrs=attrs, spec=r.table)


@space("L2_NORMALIZATION")
def l2_norm(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    depth = dim(d, 4096)
    shp = shape(d, d.int(0, 3), cap=max(1, 8192 // depth)) + [depth]
    x = activation(d, r.inputs[0], shp)
    out = out_tensor(d.pick(r.outputs[0].dtypes), shp, *r.fixed_output)
    return Case(op=op, inputs=[x], outputs=[out], attrs={"fused_activation_function": act(d)}, spec=r.table)
