"""Generators for the data movement and shape operators.

RESHAPE, SQUEEZE, CONCATENATION, TRANSPOSE, GATHER, SLICE, STRIDED_SLICE, PAD, PADV2,
SPACE_TO_DEPTH, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, SHAPE.

These operators copy codes, so the common saturation variants mean nothing for them
(``common=False``); each op has zero points at the int8 limits (what PAD-like ops write
into the padding), odd shapes, and its own edges: -1 dims, negative axes and perms,
size-1 dims, ranks up to what LiteRT allows, masks, many inputs. Output shapes are
computed here from the operator's documented semantics (NumPy indexing, reshapes), not
from the golden, so a golden or kernel that gets a shape wrong is caught.
"""

from __future__ import annotations

import numpy as np

from suite.core.case import Case, Tensor
from suite.cases.generate import Gen, generator

# edge variants every movement op has (the Gen helpers give them their meaning)
BASE = {"zp_min": 2, "zp_max": 2, "odd_shape": 2}


def _prod(shape) -> int:
    return int(np.prod(shape, dtype=np.int64)) if len(shape) else 1


def _input(g: Gen, shape, scale: float | None = None, zero_point: int | None = None) -> Tensor:
    """A quantized int8 activation with full-range random codes."""
    return g.activation(list(shape), scale=scale if scale is not None else g.scale(2 ** -8, 2 ** -1),
                        zero_point=zero_point)


def _like(x: Tensor, shape) -> Tensor:
    """An output with the input's scale and zero point (same_scale)."""
    return Tensor(x.dtype, tuple(int(d) for d in shape), None, list(x.scale), list(x.zero_point), 0)


def _clause(op: str, *parts: str) -> str:
    return "/".join(("litert-int8", op) + parts)


def _rank(g: Gen, lo: int, hi: int, high: int | None = None) -> int:
    if g.variant == "high_rank" and high is not None:
        return high
    return g.randint(lo, hi)


# per-rank extent range: a case holds a few hundred to a few thousand elements
_EXTENT = {0: (1, 1), 1: (16, 400), 2: (4, 32), 3: (3, 12), 4: (2, 7), 5: (2, 5), 6: (2, 4)}


def _dims(g: Gen, rank: int, lo: int | None = None, hi: int | None = None) -> list[int]:
    """Random extents for a tensor of ``rank`` (odd_shape: odd extents; size1: half of them 1)."""
    dlo, dhi = _EXTENT.get(rank, (2, 3))
    d = g.dims(rank, dlo if lo is None else lo, dhi if hi is None else hi)
    if g.variant == "size1" and rank:
        for i in g.rng.choice(rank, size=max(1, rank // 2), replace=False):
            d[int(i)] = 1
    return d


def _factor(g: Gen, n: int, rank: int) -> list[int]:
    """n split into ``rank`` random factors."""
    out = [1] * rank
    m, p = n, 2
    primes = []
    while m > 1:
        while m % p == 0:
            primes.append(p)
            m //= p
        p += 1
    for pr in primes:
        out[g.randint(0, rank - 1)] *= pr
    return out


# --------------------------------------------------------------------------- RESHAPE

@generator("RESHAPE", common=False, clause=_clause("RESHAPE", "same_scale"),
           variants={**BASE, "neg_one": 2, "attr_only": 2, "size1": 2, "high_rank": 2, "scalar": 1})
def gen_reshape(g: Gen) -> Case:
    v = g.variant
    if v == "scalar":
        in_shape, new = [1] * g.randint(1, 3), []
    else:
        in_shape = _dims(g, _rank(g, 1, 4, 5))
        new = _factor(g, _prod(in_shape), 5 if v == "high_rank" else g.randint(1, 4))
        if v == "size1":
            new.insert(g.randint(0, len(new)), 1)
    out_shape = list(new)
    spec = list(new)
    if spec and (v == "neg_one" or (v == "random" and g.rng.random() < 0.4)):
        spec[g.randint(0, len(spec) - 1)] = -1
    x = _input(g, in_shape)
    mode = "attr" if v == "attr_only" else ("both" if v == "scalar" else g.choice(["tensor", "tensor", "both"]))
    inputs, attrs = [x], {}
    if mode in ("tensor", "both"):
        inputs.append(g.param(np.asarray(spec, dtype=np.int32).reshape(len(spec))))
    if mode in ("attr", "both"):
        attrs["new_shape"] = spec
    return Case(op="RESHAPE", inputs=inputs, outputs=[_like(x, out_shape)], attrs=attrs,
                description=f"reshape {in_shape} -> {spec} ({mode})")


# --------------------------------------------------------------------------- SQUEEZE

@generator("SQUEEZE", common=False, clause=_clause("SQUEEZE", "same_scale"),
           variants={**BASE, "all": 2, "neg_axis": 2, "high_rank": 2})
def gen_squeeze(g: Gen) -> Case:
    v = g.variant
    rank = _rank(g, 1, 4, 5)
    shape = _dims(g, rank)
    if v == "all" and g.index == 1:
        shape = [1] * rank          # squeezes to a scalar
    else:
        k = g.randint(1, rank)
        ones_at = [int(i) for i in g.rng.choice(rank, size=k, replace=False)]
        rest = _dims(g, max(1, rank - k))      # the remaining extents sized as a tensor of that rank
        it = iter(rest)
        shape = [1 if i in ones_at else next(it) for i in range(rank)]
    ones = [i for i, d in enumerate(shape) if d == 1]
    if v == "all" or (v == "random" and g.rng.random() < 0.25):
        dims: list[int] = []
        drop = set(ones)
    else:
        pick = sorted(int(i) for i in g.rng.choice(ones, size=g.randint(1, len(ones)), replace=False))
        drop = set(pick)
        neg = v == "neg_axis"
        dims = [i - rank if (neg or g.rng.random() < 0.3) else i for i in pick]
    out_shape = [d for i, d in enumerate(shape) if i not in drop]
    x = _input(g, shape)
    return Case(op="SQUEEZE", inputs=[x], outputs=[_like(x, out_shape)], attrs={"squeeze_dims": dims},
                description=f"squeeze {shape} dims {dims or 'all size-1'}")


# --------------------------------------------------------------------------- CONCATENATION

@generator("CONCATENATION", common=False, clause=_clause("CONCATENATION", "same_scale"),
           variants={**BASE, "many_inputs": 3, "neg_axis": 2, "high_rank": 2, "size1": 1, "fused_act": 2})
def gen_concat(g: Gen) -> Case:
    v = g.variant
    rank = _rank(g, 1, 4, 5)
    n = g.randint(6, 10) if v == "many_inputs" else g.randint(2, 4)
    base = _dims(g, rank, *_EXTENT[min(rank + 1, 6)]) if rank > 1 else [1]
    axis = g.randint(0, rank - 1)
    ax_hi = {1: 100, 2: 12}.get(rank, 4)
    s, z = g.scale(2 ** -8, 2 ** -1), g.zero_point()
    xs = []
    for _ in range(n):
        shape = list(base)
        shape[axis] = 1 if v == "size1" else g.randint(1, ax_hi)
        xs.append(_input(g, shape, s, z))
    out_shape = list(base)
    out_shape[axis] = sum(x.shape[axis] for x in xs)
    a = axis - rank if (v == "neg_axis" or (v == "random" and g.rng.random() < 0.3)) else axis
    act = g.choice(["RELU", "RELU6", "RELU_N1_TO_1"]) if v == "fused_act" else "NONE"
    clause = _clause("CONCATENATION", "attrs") if v == "fused_act" else ""
    c = Case(op="CONCATENATION", inputs=xs, outputs=[_like(xs[0], out_shape)],
             attrs={"axis": a, "fused_activation_function": act}, clause=clause,
             description=f"concat {n} inputs of rank {rank} on axis {a}, activation {act}")
    return c


# --------------------------------------------------------------------------- TRANSPOSE

@generator("TRANSPOSE", common=False, clause=_clause("TRANSPOSE", "same_scale"),
           variants={**BASE, "neg_perm": 2, "high_rank": 2, "size1": 2})
def gen_transpose(g: Gen) -> Case:
    v = g.variant
    rank = g.choice([5, 6]) if v == "high_rank" else g.randint(1, 4)
    shape = _dims(g, rank)
    perm = [int(p) for p in g.rng.permutation(rank)]
    neg = v == "neg_perm" or (v == "random" and g.rng.random() < 0.2)
    spec = [p - rank if (neg and g.rng.random() < 0.6) else p for p in perm]
    if neg and rank and all(p >= 0 for p in spec):
        spec[0] -= rank
    x = _input(g, shape)
    out_shape = [shape[p] for p in perm]
    return Case(op="TRANSPOSE", inputs=[x, g.param(np.asarray(spec, np.int32))], outputs=[_like(x, out_shape)],
                description=f"transpose {shape} perm {spec}")


# --------------------------------------------------------------------------- GATHER

@generator("GATHER", common=False, clause=_clause("GATHER", "same_scale"),
           variants={**BASE, "batch_dims": 4, "neg_axis": 2, "scalar_index": 1, "high_rank": 1})
def gen_gather(g: Gen) -> Case:
    v = g.variant
    bd = 0
    if v == "random" and g.rng.random() < 0.15:
        v = "batch_dims"
    if v == "batch_dims":
        rank = g.randint(2, 4)
        shape = _dims(g, rank)
        bd = g.randint(1, min(2, rank - 1))
        axis = g.randint(bd, rank - 1)
        idx_shape = shape[:bd] + [g.randint(1, 4) for _ in range(g.randint(0, 1))]
    else:
        rank = 4 if v == "high_rank" else g.randint(1, 3)
        shape = _dims(g, rank)
        axis = g.randint(0, rank - 1)
        idx_rank = 0 if v == "scalar_index" else (3 if v == "high_rank" else g.randint(1, 2))
        idx_shape = [g.randint(1, 4) for _ in range(idx_rank)]
    n = shape[axis]
    idx = g.rng.integers(0, n, size=tuple(idx_shape)).astype(np.int32)
    out_shape = shape[:axis] + idx_shape[bd:] + shape[axis + 1:]
    a = axis - rank if (v == "neg_axis" or (v == "random" and g.rng.random() < 0.3)) else axis
    bd_attr = bd - len(idx_shape) if (bd and len(idx_shape) > bd and g.index % 2 == 1) else bd
    x = _input(g, shape)
    clause = _clause("GATHER", "indices") if v in ("batch_dims", "scalar_index") else ""
    return Case(op="GATHER", inputs=[x, g.param(idx)], outputs=[_like(x, out_shape)],
                attrs={"axis": a, "batch_dims": bd_attr}, clause=clause,
                description=f"gather {shape} axis {a} batch_dims {bd_attr} indices {idx_shape}")


# --------------------------------------------------------------------------- SLICE

@generator("SLICE", common=False, clause=_clause("SLICE", "same_scale"),
           variants={**BASE, "size_neg1": 2, "high_rank": 2, "full": 1, "size1": 1})
def gen_slice(g: Gen) -> Case:
    v = g.variant
    rank = _rank(g, 1, 4, 5)
    shape = _dims(g, rank)
    begin, size, out_shape = [], [], []
    for n in shape:
        if v == "full":
            b, s = 0, n
        else:
            b = g.randint(0, n - 1)
            s = g.randint(1, n - b)
        out_shape.append(s)
        neg = v == "size_neg1" or (v == "random" and g.rng.random() < 0.25)
        if neg:
            out_shape[-1] = n - b
            s = -1
        begin.append(b)
        size.append(s)
    x = _input(g, shape)
    return Case(op="SLICE", inputs=[x, g.param(np.asarray(begin, np.int32)), g.param(np.asarray(size, np.int32))],
                outputs=[_like(x, out_shape)], description=f"slice {shape} begin {begin} size {size}")


# --------------------------------------------------------------------------- STRIDED_SLICE

def _axis_spec(g: Gen, n: int, neg_stride: bool, allow_shrink: bool, offset: bool):
    """(begin, end, stride, begin_bit, end_bit, shrink_bit, python_index) for one axis of extent n.

    Every non-shrunk axis selects at least one element. Negative begin/end values and
    out-of-range ends (clamped by the kernel) are drawn on purpose.
    """
    if allow_shrink and g.rng.random() < 0.25:
        b = g.randint(0, n - 1)
        bv = b - n if g.rng.random() < 0.4 else b
        return bv, bv + 1, 1, 0, 0, 1, bv
    if offset:
        st = g.choice([1, 1, 2, 3])
        b = g.randint(0, n - 1)
        size = g.randint(1, n - b)
        bv = b - n if g.rng.random() < 0.3 else b
        return bv, size, st, 0, 0, 0, slice(b, b + size, st)
    if neg_stride:
        st = -g.choice([1, 1, 2, 3])
        b = g.randint(0, n - 1)
        e = g.randint(-1, b - 1)                       # exclusive, -1 = past the front
        bm = g.rng.random() < 0.2
        em = g.rng.random() < 0.2
        bv = (b - n if g.rng.random() < 0.3 else b) if not bm else g.randint(-3, 3)
        if em:
            ev = g.randint(-3, 3)
        elif e == -1:
            ev = -n - 1 - g.randint(0, 2)              # clamps to -1
        else:
            ev = e - n if g.rng.random() < 0.3 else e
        py = slice(None if bm else b, None if (em or e == -1) else e, st)
        return bv, ev, st, int(bm), int(em), 0, py
    st = g.choice([1, 1, 1, 2, 3])
    b = g.randint(0, n - 1)
    e = g.randint(b + 1, n)
    bm = g.rng.random() < 0.2
    em = g.rng.random() < 0.2
    bv = (b - n if g.rng.random() < 0.3 else b) if not bm else g.randint(-3, 3)
    if em:
        ev = g.randint(-3, 3)
    elif e == n:
        ev = n + g.randint(0, 2)                       # clamps to n
    else:
        ev = e - n if g.rng.random() < 0.3 else e
    return bv, ev, st, int(bm), int(em), 0, slice(None if bm else b, None if em else e, st)


@generator("STRIDED_SLICE", common=False, clause=_clause("STRIDED_SLICE", "same_scale"),
           variants={**BASE, "neg_stride": 3, "shrink": 2, "ellipsis": 2, "new_axis": 2, "offset": 2,
                     "short_spec": 1, "high_rank": 2})
def gen_strided_slice(g: Gen) -> Case:
    """Cases whose expected shape comes from NumPy basic indexing with the same slice spec.

    ``random`` cases mix the edge variants' forms in: a fifth of them use an ellipsis,
    new axes, offset or a short spec."""
    v = g.variant
    if v == "random":
        r = g.rng.random()
        v = "ellipsis" if r < 0.06 else "new_axis" if r < 0.12 else "offset" if r < 0.16 else \
            "short_spec" if r < 0.20 else "random"
    rank = _rank(g, 1, 4, 5)
    shape = _dims(g, rank)
    x = _input(g, shape)
    begin, end, strides, py = [], [], [], []
    bm = em = sm = el = na = 0
    offset = v == "offset"
    if v == "ellipsis":
        count = g.randint(1, rank)                      # spec entries, one of them the ellipsis
        pos = g.randint(0, count - 1)
        covered = rank - (count - 1)
        dim = 0
        for k in range(count):
            if k == pos:
                begin.append(0), end.append(0), strides.append(1)
                el |= 1 << k
                py.append(Ellipsis)
                dim += covered
                continue
            b, e, st, bb, eb, sb, p = _axis_spec(g, shape[dim], g.rng.random() < 0.3, True, False)
            begin.append(b), end.append(e), strides.append(st), py.append(p)
            bm |= bb << k
            em |= eb << k
            sm |= sb << k
            dim += 1
    else:
        n_new = g.randint(1, 2) if v == "new_axis" else 0
        count = rank + n_new
        new_pos = set(int(i) for i in g.rng.choice(count, size=n_new, replace=False)) if n_new else set()
        if v == "short_spec":
            count = g.randint(1, max(1, rank - 1))
        dim = 0
        for k in range(count):
            if k in new_pos:
                begin.append(0), end.append(1), strides.append(1)
                na |= 1 << k
                py.append(None)
                continue
            neg = v == "neg_stride" or (v in ("random", "high_rank") and g.rng.random() < 0.25)
            allow_shrink = v == "shrink" or (v not in ("neg_stride",) and g.rng.random() < 0.5)
            b, e, st, bb, eb, sb, p = _axis_spec(g, shape[dim], neg and not offset, allow_shrink, offset)
            begin.append(b), end.append(e), strides.append(st), py.append(p)
            bm |= bb << k
            em |= eb << k
            sm |= sb << k
            dim += 1
        if v == "shrink" and not sm:
            k = next(k for k in range(count) if k not in new_pos)
            d = sum(1 for j in range(k) if j not in new_pos)
            b = g.randint(0, shape[d] - 1)
            begin[k], end[k], strides[k], py[k] = b, b + 1, 1, b
            bm &= ~(1 << k)
            em &= ~(1 << k)
            sm |= 1 << k
    ref = np.zeros(shape, dtype=np.int8)[tuple(py)]
    out_shape = list(ref.shape)
    attrs = {"begin_mask": bm, "end_mask": em, "ellipsis_mask": el, "new_axis_mask": na,
             "shrink_axis_mask": sm, "offset": offset}
    params = [g.param(np.asarray(a, np.int32)) for a in (begin, end, strides)]
    return Case(op="STRIDED_SLICE", inputs=[x] + params, outputs=[_like(x, out_shape)], attrs=attrs,
                description=f"strided slice {shape} begin {begin} end {end} strides {strides} masks "
                            f"b{bm} e{em} el{el} na{na} s{sm}{' offset' if offset else ''}")


# --------------------------------------------------------------------------- PAD, PADV2

def _paddings(g: Gen, rank: int) -> np.ndarray:
    if g.variant == "image_style":
        p = np.zeros((4, 2), np.int32)
        p[1:3] = g.rng.integers(0, 4, size=(2, 2))
        return p
    if g.variant == "no_pad":
        return np.zeros((rank, 2), np.int32)
    p = g.rng.integers(0, 4, size=(rank, 2)).astype(np.int32)
    p[g.rng.random((rank, 2)) < 0.3] = 0
    return p


def _pad_case(g: Gen, op: str) -> Case:
    v = g.variant
    rank = 4 if v == "image_style" else _rank(g, 1, 4, 5)
    shape = _dims(g, rank)
    pads = _paddings(g, rank)
    x = _input(g, shape)
    out_shape = [d + int(a) + int(b) for d, (a, b) in zip(shape, pads)]
    inputs = [x, g.param(pads)]
    desc = f"pad {shape} by {pads.tolist()}"
    clause = ""
    if op == "PADV2" and v != "no_const":
        z = x.zero_point[0]
        if v == "const_extreme":
            val = -128 if g.index % 2 == 0 else 127
        elif v == "const_zp":
            val = z
        else:
            val = g.randint(-128, 127)
        cshape = (1,) if g.rng.random() < 0.5 else ()
        inputs.append(Tensor("int8", cshape, np.full(cshape, val, np.int8), list(x.scale), list(x.zero_point), 0))
        desc += f" with constant code {val}"
        clause = _clause(op, "constant_values")
    else:
        desc += " with the zero point"
        clause = _clause(op, "same_scale")
    return Case(op=op, inputs=inputs, outputs=[_like(x, out_shape)], clause=clause, description=desc)


@generator("PAD", common=False, variants={**BASE, "image_style": 2, "high_rank": 2, "no_pad": 1, "size1": 1})
def gen_pad(g: Gen) -> Case:
    return _pad_case(g, "PAD")


@generator("PADV2", common=False,
           variants={**BASE, "no_const": 2, "const_extreme": 2, "const_zp": 1, "image_style": 1, "high_rank": 2})
def gen_padv2(g: Gen) -> Case:
    return _pad_case(g, "PADV2")


# --------------------------------------------------------------------------- SPACE_TO_DEPTH

@generator("SPACE_TO_DEPTH", common=False, clause=_clause("SPACE_TO_DEPTH", "same_scale"),
           variants={**BASE, "block1": 1, "large_block": 1})
def gen_space_to_depth(g: Gen) -> Case:
    v = g.variant
    b = 1 if v == "block1" else (4 if v == "large_block" else g.randint(2, 3))
    n, ho, wo, c = g.dims(4, 1, 5)
    n = min(n, 2)
    c = c + 3 if c < 3 else c
    shape = [n, ho * b, wo * b, c]
    x = _input(g, shape)
    return Case(op="SPACE_TO_DEPTH", inputs=[x], outputs=[_like(x, [n, ho, wo, c * b * b])],
                attrs={"block_size": b}, description=f"space_to_depth {shape} block {b}")


# --------------------------------------------------------------------------- SPACE_TO_BATCH_ND, BATCH_TO_SPACE_ND

def _blocks(g: Gen, spatial: int) -> list[int]:
    return [g.randint(1, 3) for _ in range(spatial)]


@generator("SPACE_TO_BATCH_ND", common=False, clause=_clause("SPACE_TO_BATCH_ND", "same_scale"),
           variants={**BASE, "rank3": 2, "pad": 3})
def gen_space_to_batch(g: Gen) -> Case:
    v = g.variant
    spatial = 1 if v == "rank3" else 2
    block = _blocks(g, spatial)
    if v == "pad" and max(block) == 1:
        block[0] = 2
    n, c = g.randint(1, 2), g.dims(1, 1, 12)[0]
    sp, pads, out_sp = [], [], []
    for bk in block:
        k = g.dims(1, 1, 5)[0]
        total = bk * k
        pad_total = g.randint(0, min(bk * k - 1, 2 * bk)) if (v == "pad" or g.rng.random() < 0.5) else 0
        if v == "pad" and pad_total == 0 and total > 1:
            pad_total = 1
        pt = g.randint(0, pad_total)
        sp.append(total - pad_total)
        pads.append([pt, pad_total - pt])
        out_sp.append(k)
    shape = [n] + sp + [c]
    x = _input(g, shape)
    out_shape = [n * _prod(block)] + out_sp + [c]
    return Case(op="SPACE_TO_BATCH_ND",
                inputs=[x, g.param(np.asarray(block, np.int32)), g.param(np.asarray(pads, np.int32))],
                outputs=[_like(x, out_shape)], description=f"space_to_batch {shape} block {block} paddings {pads}")


@generator("BATCH_TO_SPACE_ND", common=False, clause=_clause("BATCH_TO_SPACE_ND", "same_scale"),
           variants={**BASE, "rank3": 2, "crops": 3})
def gen_batch_to_space(g: Gen) -> Case:
    v = g.variant
    spatial = 1 if v == "rank3" else 2
    block = _blocks(g, spatial)
    if v == "crops" and max(block) == 1:
        block[0] = 2
    n, c = g.randint(1, 2), g.dims(1, 1, 12)[0]
    sp, crops, out_sp = [], [], []
    for bk in block:
        h = g.dims(1, 1, 5)[0]
        full = h * bk
        ct_total = g.randint(0, min(full - 1, 2 * bk)) if (v == "crops" or g.rng.random() < 0.5) else 0
        if v == "crops" and ct_total == 0 and full > 1:
            ct_total = 1
        top = g.randint(0, ct_total)
        sp.append(h)
        crops.append([top, ct_total - top])
        out_sp.append(full - ct_total)
    shape = [n * _prod(block)] + sp + [c]
    x = _input(g, shape)
    return Case(op="BATCH_TO_SPACE_ND",
                inputs=[x, g.param(np.asarray(block, np.int32)), g.param(np.asarray(crops, np.int32))],
                outputs=[_like(x, [n] + out_sp + [c])],
                description=f"batch_to_space {shape} block {block} crops {crops}")


# --------------------------------------------------------------------------- SHAPE

@generator("SHAPE", common=False, clause=_clause("SHAPE", "output0"),
           variants={**BASE, "int64": 2, "high_rank": 2, "size1": 1})
def gen_shape(g: Gen) -> Case:
    v = g.variant
    rank = _rank(g, 1, 4, 5)
    shape = _dims(g, rank)
    ot = "int64" if v == "int64" else g.choice(["int32", "int64"]) if v == "random" else "int32"
    x = _input(g, shape)
    out = Tensor(ot, (rank,), None, None, None, 0)
    return Case(op="SHAPE", inputs=[x], outputs=[out], attrs={"out_type": ot},
                description=f"shape of {shape} as {ot}")
