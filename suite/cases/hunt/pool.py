"""Spaces of pooling, reductions and resizing: AVERAGE_POOL_2D, MAX_POOL_2D, MEAN, SUM, RESIZE_BILINEAR."""

from __future__ import annotations

import numpy as np

from suite.core.case import Case

from .draw import (
    Draw,
    act,
    activation,
    dim,
    fit,
    out_tensor,
    output,
    param,
    real_values,
    shape,
    table_rule,
)
from .space import space


def _pool_out(n: int, f: int, s: int, padding: str) -> int:
    return (n + s - 1) // s if padding == "SAME" else (n - f + s) // s


@space("AVERAGE_POOL_2D", "MAX_POOL_2D")
def pool(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    n, h, w, c = fit([d.int(1, 3), dim(d, 129), dim(d, 129), dim(d, 257)], 32768, keep=(1, 2))
    padding = d.pick(["SAME", "VALID"])
    fh = h if d.int(0, 3) == 0 else d.int(1, 9)     # a quarter: the whole height (global pooling)
    fw = w if d.int(0, 3) == 0 else d.int(1, 9)
    if padding == "VALID":
        fh, fw = min(fh, h), min(fw, w)
    sh, sw = d.int(1, 4), d.int(1, 4)
    x = activation(d, r.inputs[0], [n, h, w, c])
    oh, ow = _pool_out(h, fh, sh, padding), _pool_out(w, fw, sw, padding)
    out = out_tensor(x.dtype, [n, oh, ow, c], x.scale[0], x.zero_point[0])
    attrs = {"padding": padding, "stride_w": sw, "stride_h": sh, "filter_width": fw, "filter_height": fh,
             "fused_activation_function": act(d)}
    return Case(op=op, inputs=[x], outputs=[out], attrs=attrs, spec=r.table)


@space("MEAN", "SUM")
def reduce(d: Draw, op: str) -> Case:
    """Any non-empty set of axes (written negative or not), keep_dims either way, reductions up
    to 16k elements."""
    r = table_rule(d, op)
    rank = d.int(1, 5)
    shp = shape(d, rank, cap=16384, hi=4096)
    axes = sorted({d.int(0, rank - 1) for _ in range(d.int(1, rank))})
    written = [a - rank if d.flag() else a for a in axes]
    keep = d.flag()
    x = activation(d, r.inputs[0], shp)
    red = real_values(x).sum(axis=tuple(axes), keepdims=keep)
    n = int(np.prod([shp[a] for a in axes]))
    out_shape = list(red.shape)
    out = output(d, r, out_shape, red / n if op == "MEAN" else red, x.scale[0], far=28)
    return Case(op=op, inputs=[x, param(written)], outputs=[out], attrs={"keep_dims": keep}, spec=r.table)


@space("RESIZE_BILINEAR")
def resize(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    n, h, w, c = fit([d.int(1, 3), dim(d, 65), dim(d, 65), dim(d, 65)], 16384, keep=(1, 2))
    oh, ow = fit([dim(d, 129), dim(d, 129)], max(1, 65536 // (n * c)))
    ac, hp = d.pick([(False, False), (True, False), (False, True)])
    x = activation(d, r.inputs[0], [n, h, w, c])
    out = out_tensor(x.dtype, [n, oh, ow, c], x.scale[0], x.zero_point[0])
    return Case(op=op, inputs=[x, param([oh, ow])], outputs=[out],
                attrs={"align_corners": ac, "half_pixel_centers": hp}, spec=r.table)
