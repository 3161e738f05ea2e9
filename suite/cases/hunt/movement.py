"""Spaces of the data movement ops: RESHAPE, SQUEEZE, CONCATENATION, TRANSPOSE, GATHER, SLICE, STRIDED_SLICE,
PAD, PADV2, SPACE_TO_DEPTH, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, SHAPE.

Ranks 1 to 6, negative axes and perms, size-1 extents, every option; output shapes from NumPy's own
semantics of the same operation (an indexing, a reshape), never from the golden."""

from __future__ import annotations

import math

import numpy as np

from suite.core.case import Case, Tensor
from suite.core.dtypes import DTYPES

from .draw import Draw, act, activation, dim, fit, out_tensor, param, shape, table_rule
from .space import space

CAP = 4096


def _x(d: Draw, r, shp) -> Tensor:
    return activation(d, r.inputs[0], shp)


def _like(x: Tensor, shp) -> Tensor:
    return out_tensor(x.dtype, shp, x.scale[0], x.zero_point[0])


def _dims(d: Draw, rank: int) -> list[int]:
    """Extents of a tensor of ``rank``, size 1 often (what squeeze, broadcasts and reshapes meet)."""
    return fit([1 if d.int(0, 3) == 0 else dim(d, 65) for _ in range(rank)], CAP)


@space("RESHAPE")
def reshape(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    src = _dims(d, d.int(1, 6))
    total = math.prod(src)
    new = [1] * d.int(0, 6)
    p, m = 2, total
    while m > 1:                      # the prime factors, each to one of the new dims
        while m % p == 0:
            if new:
                new[d.int(0, len(new) - 1)] *= p
            m //= p
        p += 1
    if not new and total != 1:
        new = [total]
    written = list(new)
    if written and d.flag():
        written[d.int(0, len(written) - 1)] = -1
    x = _x(d, r, src)
    how = d.pick(["tensor", "attr", "both"])
    inputs, attrs = [x], {}
    if how != "attr":
        inputs.append(param(np.asarray(written, np.int32).reshape(len(written))))
    if how != "tensor":
        attrs["new_shape"] = written
    return Case(op=op, inputs=inputs, outputs=[_like(x, new)], attrs=attrs, spec=r.table)


@space("SQUEEZE")
def squeeze(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    rank = d.int(1, 6)
    shp = _dims(d, rank)
    ones = [i for i, n in enumerate(shp) if n == 1]
    if not ones:
        shp[d.int(0, rank - 1)] = 1
        ones = [i for i, n in enumerate(shp) if n == 1]
    dims = [] if d.int(0, 3) == 0 else sorted({d.pick(ones) for _ in range(d.int(1, len(ones)))})
    drop = set(ones) if not dims else set(dims)
    written = [i - rank if d.flag() else i for i in dims]
    x = _x(d, r, shp)
    return Case(op=op, inputs=[x], outputs=[_like(x, [n for i, n in enumerate(shp) if i not in drop])],
                attrs={"squeeze_dims": written}, spec=r.table)


@space("CONCATENATION")
def concatenation(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    rank = d.int(1, 6)
    base = _dims(d, rank)
    axis = d.int(0, rank - 1)
    k = d.int(1, 10)
    first = _x(d, r, base)
    xs = [first]
    for _ in range(k - 1):
        shp = list(base)
        shp[axis] = dim(d, 65)
        xs.append(activation(d, r.inputs[0], shp, s=first.scale[0], z=first.zero_point[0], dtype=first.dtype))
    out = list(base)
    out[axis] = sum(t.shape[axis] for t in xs)
    attrs = {"axis": axis - rank if d.flag() else axis, "fused_activation_function": act(d)}
    return Case(op=op, inputs=xs, outputs=[_like(first, out)], attrs=attrs, spec=r.table)


@space("TRANSPOSE")
def transpose(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    rank = d.int(1, 6)
    shp = _dims(d, rank)
    rest, perm = list(range(rank)), []
    while rest:
        perm.append(rest.pop(d.int(0, len(rest) - 1)))
    written = [p - rank if d.flag() else p for p in perm]
    x = _x(d, r, shp)
    return Case(op=op, inputs=[x, param(np.asarray(written, np.int32))], outputs=[_like(x, [shp[p] for p in perm])],
                spec=r.table)


@space("GATHER")
def gather(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    rank = d.int(1, 5)
    shp = _dims(d, rank)
    bd = d.int(0, min(2, rank - 1))
    axis = d.int(bd, rank - 1)
    idx_shape = shp[:bd] + [dim(d, 9) for _ in range(d.int(0, 3))]
    rng = np.random.default_rng(d.int(0, 2 ** 32 - 1))
    idx = rng.integers(0, shp[axis], size=tuple(idx_shape)).astype(np.int32)
    if idx.size and d.flag():   # sorted, or all one index
        idx = np.sort(idx, axis=None).reshape(idx.shape) if d.flag() else np.full(idx.shape, idx.flat[0], np.int32)
    out = shp[:axis] + idx_shape[bd:] + shp[axis + 1:]
    x = _x(d, r, shp)
    bd_written = bd - len(idx_shape) if bd and len(idx_shape) > bd and d.flag() else bd
    attrs = {"axis": axis - rank if d.flag() else axis, "batch_dims": bd_written}
    return Case(op=op, inputs=[x, param(idx)], outputs=[_like(x, out)], attrs=attrs, spec=r.table)


@space("SLICE")
def slice_(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    shp = _dims(d, d.int(1, 6))
    begin, size, out = [], [], []
    for n in shp:
        b = d.int(0, n - 1)
        s = d.int(1, n - b)
        if d.int(0, 3) == 0:
            s, out_n = -1, n - b
        else:
            out_n = s
        begin.append(b), size.append(s), out.append(out_n)
    x = _x(d, r, shp)
    return Case(op=op, inputs=[x, param(begin), param(size)], outputs=[_like(x, out)], spec=r.table)


def _axis(d: Draw, n: int, shrink_ok: bool):
    """(begin, end, stride, begin_mask, end_mask, shrink, the Python index) of one axis of extent n;
    begin/end written negative or past the end at times (the kernel clamps them)."""
    if shrink_ok and d.int(0, 4) == 0:
        b = d.int(0, n - 1)
        bw = b - n if d.flag() else b
        return bw, bw + 1, 1, 0, 0, 1, bw
    st = d.pick([1, 1, 1, 2, 3, -1, -2, -3])
    bm, em = d.int(0, 4) == 0, d.int(0, 4) == 0
    if st > 0:
        b = d.int(0, n - 1)
        e = d.int(b + 1, n)
        bw = d.int(-3, 3) if bm else (b - n if d.flag() else b)
        ew = d.int(-3, 3) if em else (n + d.int(0, 2) if e == n else (e - n if d.flag() else e))
        return bw, ew, st, int(bm), int(em), 0, slice(None if bm else b, None if em else e, st)
    b = d.int(0, n - 1)
    e = d.int(-1, b - 1)               # exclusive; -1: past the front
    bw = d.int(-3, 3) if bm else (b - n if d.flag() else b)
    ew = d.int(-3, 3) if em else (-n - 1 - d.int(0, 2) if e == -1 else (e - n if d.flag() else e))
    return bw, ew, st, int(bm), int(em), 0, slice(None if bm else b, None if (em or e == -1) else e, st)


@space("STRIDED_SLICE")
def strided_slice(d: Draw, op: str) -> Case:
    """Begin/end/stride per axis with every mask: begin, end, shrink, new_axis and an ellipsis; a
    spec shorter than the rank; ``offset`` (end as a size from begin)."""
    r = table_rule(d, op)
    rank = d.int(1, 5)
    shp = _dims(d, rank)
    offset = d.int(0, 5) == 0
    count = rank if offset or d.int(0, 4) else d.int(1, rank)   # entries that index a dimension
    kinds = ["axis"] * count
    if not offset and count < rank and d.int(0, 2) == 0:
        # an ellipsis covers the dims the spec leaves out (at least one: the golden's rule)
        kinds.insert(d.int(0, count), "ellipsis")
    elif not offset and d.int(0, 4) == 0:
        for _ in range(d.int(1, 2)):
            kinds.insert(d.int(0, len(kinds)), "new")
    begin, end, strides, py = [], [], [], []
    masks = dict.fromkeys(("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask"), 0)
    at = 0
    for k, kind in enumerate(kinds):
        if kind == "ellipsis":
            begin.append(0), end.append(0), strides.append(1), py.append(Ellipsis)
            masks["ellipsis_mask"] |= 1 << k
            at += rank - count
        elif kind == "new":
            begin.append(0), end.append(1), strides.append(1), py.append(None)
            masks["new_axis_mask"] |= 1 << k
        elif offset:
            n = shp[at]
            b = d.int(0, n - 1)
            size = d.int(1, n - b)
            st = d.pick([1, 1, 2, 3])
            begin.append(b - n if d.flag() else b), end.append(size), strides.append(st)
            py.append(slice(b, b + size, st))
            at += 1
        else:
            bw, ew, st, bm, em, sm, p = _axis(d, shp[at], True)
            begin.append(bw), end.append(ew), strides.append(st), py.append(p)
            masks["begin_mask"] |= bm << k
            masks["end_mask"] |= em << k
            masks["shrink_axis_mask"] |= sm << k
            at += 1
    x = _x(d, r, shp)
    out = list(np.zeros(shp, np.int8)[tuple(py)].shape)
    attrs = {**masks, "offset": offset}
    params = [param(np.asarray(v, np.int32)) for v in (begin, end, strides)]
    return Case(op=op, inputs=[x] + params, outputs=[_like(x, out)], attrs=attrs, spec=r.table)


@space("PAD", "PADV2")
def pad(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    rank = d.int(1, 5)   # (the golden's rule: LiteRT pads ranks up to 5)
    shp = _dims(d, rank)
    pads = np.array([[d.pick([0, 0, 1, 2, 3, 7, 16]) for _ in range(2)] for _ in range(rank)], np.int32)
    x = _x(d, r, shp)
    inputs = [x, param(pads)]
    if op == "PADV2" and d.int(0, 3) > 0:
        v = d.int(DTYPES[x.dtype].qmin, DTYPES[x.dtype].qmax) if d.flag() else int(x.zero_point[0])
        cshape = (1,) if d.flag() else ()
        inputs.append(Tensor(x.dtype, cshape, np.full(cshape, v).astype(x.data.dtype), list(x.scale),
                             list(x.zero_point), 0))
    out = [n + int(a) + int(b) for n, (a, b) in zip(shp, pads)]
    return Case(op=op, inputs=inputs, outputs=[_like(x, out)], spec=r.table)


@space("SPACE_TO_DEPTH")
def space_to_depth(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    b = d.int(1, 5)
    n, ho, wo, c = fit([d.int(1, 2), dim(d, 17), dim(d, 17), dim(d, 65)], max(1, CAP // (b * b)))
    x = _x(d, r, [n, ho * b, wo * b, c])
    return Case(op=op, inputs=[x], outputs=[_like(x, [n, ho, wo, c * b * b])], attrs={"block_size": b},
                spec=r.table)


@space("SPACE_TO_BATCH_ND", "BATCH_TO_SPACE_ND")
def batch_space(d: Draw, op: str) -> Case:
    """One or two spatial dims, blocks 1..4, paddings (crops) up to a block each side."""
    r = table_rule(d, op)
    spatial = d.int(1, 2)
    block = [d.int(1, 4) for _ in range(spatial)]
    n, c = d.int(1, 3), dim(d, 33)
    inner, edges, small = [], [], []
    for bk in block:
        k = dim(d, 17)
        total = bk * k
        cut = d.int(0, min(total - 1, 2 * bk))
        top = d.int(0, cut)
        edges.append([top, cut - top])
        inner.append(total - cut)
        small.append(k)
    if op == "SPACE_TO_BATCH_ND":   # [n, padded-away spatial, c] -> [n * prod(block), spatial / block, c]
        in_shape, out_shape = [n] + inner + [c], [n * math.prod(block)] + small + [c]
    else:                           # [n * prod(block), h, c] -> [n, h * block - crops, c]
        in_shape, out_shape = [n * math.prod(block)] + small + [c], [n] + inner + [c]
    x = _x(d, r, in_shape)
    return Case(op=op, inputs=[x, param(block), param(edges)], outputs=[_like(x, out_shape)], spec=r.table)


@space("SHAPE")
def shape_op(d: Draw, op: str) -> Case:
    r = table_rule(d, op)
    shp = shape(d, d.int(1, 6), cap=CAP)
    x = _x(d, r, shp)
    ot = d.pick(r.outputs[0].dtypes)
    return Case(op=op, inputs=[x], outputs=[out_tensor(ot, [len(shp)])], attrs={"out_type": ot}, spec=r.table)
