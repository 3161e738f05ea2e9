"""Data movement and shape operators: RESHAPE, SQUEEZE, CONCATENATION, TRANSPOSE, GATHER,
SLICE, STRIDED_SLICE, PAD, PADV2, SPACE_TO_DEPTH, BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, SHAPE.

These kernels copy int8 codes: the spec requires every quantized input and the output
to share scale and zero point, so no requantization happens and the golden is the same
under every scheme (under ``exact`` the codes come back as float64). What the golden
does reproduce exactly is each LiteRT kernel's index arithmetic: how it resolves -1
dims, negative axes, masks, paddings, block shapes, and which code padding writes
(the output zero point, i.e. real 0, unless PADV2 gives a constant).

Every function checks the case's declared output shape against the shape the kernel
computes and raises :class:`QconformError` (naming the field and the rule) when a case
asks for something the kernel rejects, instead of guessing.
"""

from __future__ import annotations

import numpy as np

from suite.core.errors import QconformError

from reference.common import act_range, q
from suite.core.geometry import attr_int, attr_ints
from reference.registry import register


# --------------------------------------------------------------------------- helpers

def _bad(case, field: str, message: str, rule: str):
    return QconformError(f"{case.op}: {message}", source=case.id or None, field=field, rule=rule)


def _codes(t) -> np.ndarray:
    """A tensor's codes as int64, in its shape."""
    return q(t).reshape(t.shape)


def _param(case, i: int, name: str) -> np.ndarray:
    """The int64 values of constant parameter input ``i`` (shape kept)."""
    if i >= len(case.inputs) or case.inputs[i].data is None:
        raise _bad(case, f"inputs[{i}]", f"missing {name}", f"{case.op} takes {name} as input {i}")
    t = case.inputs[i]
    return np.asarray(t.data, dtype=np.int64).reshape(t.shape)


def _same_qparams(case, indices=None) -> None:
    """Pure copies are only valid when inputs and output share (scale, zero point)."""
    out = case.outputs[0]
    idx = range(len(case.inputs)) if indices is None else indices
    for i in idx:
        t = case.inputs[i]
        if t.data is None or not t.quantized:
            continue
        if not (np.float32(t.scale[0]) == np.float32(out.scale[0]) and t.zero_point[0] == out.zero_point[0]):
            raise _bad(case, f"inputs[{i}].scale",
                       f"(scale, zero_point) = ({t.scale[0]:.9g}, {t.zero_point[0]}) differs from the output's "
                       f"({out.scale[0]:.9g}, {out.zero_point[0]})",
                       "inputs and output share scale and zero point (same_scale)")


def _result(case, arr: np.ndarray) -> list[np.ndarray]:
    """[arr] after checking it has the case's declared output shape."""
    want = tuple(int(d) for d in case.outputs[0].shape)
    if tuple(arr.shape) != want:
        e = _bad(case, "outputs[0].shape", f"the kernel computes output shape {list(arr.shape)}, "
                 f"the case declares {list(want)}", "output shape as the LiteRT kernel computes it")
        e.computed_shape = tuple(int(d) for d in arr.shape)   # (qconform shrink's sub-cases take it)
        raise e
    return [arr]


def _axis(case, axis: int, rank: int, field: str) -> int:
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise _bad(case, field, f"axis {axis} is out of range for rank {rank}", "-rank <= axis < rank")
    return a


# --------------------------------------------------------------------------- RESHAPE

def reshape_target_shape(case) -> list[int]:
    """reshape.cc GetOutputShape + ResolveOutputShape: the shape tensor when it is a 1-D
    int32 vector, else the ``new_shape`` option ([0] meaning a scalar); at most one -1,
    inferred from the element count."""
    x = case.inputs[0]
    st = case.inputs[1] if len(case.inputs) > 1 else None
    if st is not None and st.data is not None and len(st.shape) == 1 and st.dtype == "int32":
        new = [int(v) for v in np.asarray(st.data).ravel()]
    else:
        if "new_shape" not in case.attrs:
            raise _bad(case, "attrs.new_shape", "no 1-D int32 shape input and no new_shape option",
                       "RESHAPE takes its shape from input 1 or the new_shape option")
        new = attr_ints(case, "new_shape")
        if new == [0]:
            new = []   # legacy models: [0] means a scalar
    n_in = int(np.prod(x.shape, dtype=np.int64))
    stretch = [i for i, v in enumerate(new) if v == -1]
    if len(stretch) > 1 or any(v < -1 for v in new):
        raise _bad(case, "shape", f"shape {new} has more than one -1 or a negative dimension",
                   "at most one -1, other dimensions >= 0")
    known = int(np.prod([v for v in new if v != -1], dtype=np.int64))
    if stretch:
        nz_in = int(np.prod([d for d in x.shape if d != 0], dtype=np.int64))
        nz_out = int(np.prod([v for v in new if v not in (0, -1)], dtype=np.int64))
        new[stretch[0]] = 0 if (n_in == 0 and known != 0) else nz_in // nz_out
        known = int(np.prod(new, dtype=np.int64))
    if known != n_in:
        raise _bad(case, "shape", f"shape {new} holds {known} elements, the input {n_in}",
                   "input and output element counts are equal")
    return new


@register("RESHAPE", rounding="none")
def reshape(case, scheme):
    """reshape.cc: a memcpy of the codes into the resolved shape."""
    _same_qparams(case, [0])
    return _result(case, _codes(case.inputs[0]).reshape(reshape_target_shape(case)))


# --------------------------------------------------------------------------- SQUEEZE

@register("SQUEEZE", rounding="none")
def squeeze(case, scheme):
    """squeeze.cc: drop the listed size-1 dims (negative ones counted from the end), or
    every size-1 dim when ``squeeze_dims`` is empty or absent."""
    _same_qparams(case)
    x = _codes(case.inputs[0])
    dims = attr_ints(case, "squeeze_dims")
    if x.ndim > 8:
        raise _bad(case, "inputs[0].shape", f"rank {x.ndim}", "SQUEEZE input rank <= 8")
    if not dims:
        drop = {i for i, d in enumerate(x.shape) if d == 1}
    else:
        drop = set()
        for d in dims:
            a = d + x.ndim if d < 0 else d
            if not (0 <= a < x.ndim and x.shape[a] == 1):
                raise _bad(case, "attrs.squeeze_dims", f"dimension {d} of shape {list(x.shape)} is not a size-1 dim",
                           "every squeeze_dims entry names a size-1 dimension")
            drop.add(a)
    shape = [d for i, d in enumerate(x.shape) if i not in drop]
    return _result(case, x.reshape(shape))


# --------------------------------------------------------------------------- CONCATENATION

@register("CONCATENATION", rounding="none")
def concatenation(case, scheme):
    """concatenation.cc (int8): every input shares the output's scale/zero point, so the
    codes are copied along ``axis`` (negative: counted from the end).

    LiteRT's Prepare rejects any fused activation other than NONE; the golden applies
    the option's documented meaning, a clamp to the activation's range, which is a
    no-op for NONE.
    """
    _same_qparams(case)
    xs = [_codes(t) for t in case.inputs]
    rank = xs[0].ndim
    if rank == 0:
        raise _bad(case, "inputs[0].shape", "scalar inputs", "non-constant CONCATENATION inputs have rank >= 1")
    axis = _axis(case, attr_int(case, "axis", 0), rank, "attrs.axis")
    for i, x in enumerate(xs[1:], 1):
        if x.ndim != rank or any(a != b for d, (a, b) in enumerate(zip(x.shape, xs[0].shape)) if d != axis):
            raise _bad(case, f"inputs[{i}].shape", f"{list(x.shape)} does not match {list(xs[0].shape)} "
                       f"outside axis {axis}", "inputs agree on every dimension but axis")
    y = np.concatenate(xs, axis=axis)
    lo, hi = act_range(case, case.outputs[0])
    return _result(case, np.clip(y, lo, hi))


# --------------------------------------------------------------------------- TRANSPOSE

@register("TRANSPOSE", rounding="none")
def transpose(case, scheme):
    """transpose.cc: output dim i is input dim perm[i]; -rank <= perm[i] < rank (negative
    entries counted from the end)."""
    _same_qparams(case, [0])
    x = _codes(case.inputs[0])
    perm = _param(case, 1, "perm").ravel()
    if perm.size != x.ndim:
        raise _bad(case, "inputs[1]", f"perm has {perm.size} entries for rank {x.ndim}", "len(perm) == rank")
    p = [int(v) + x.ndim if v < 0 else int(v) for v in perm]
    if sorted(p) != list(range(x.ndim)) or any(not (-x.ndim <= v < x.ndim) for v in perm):
        raise _bad(case, "inputs[1]", f"perm {perm.tolist()} is not a permutation of rank {x.ndim}",
                   "perm is a permutation, -rank <= perm[i] < rank")
    return _result(case, np.transpose(x, p))


# --------------------------------------------------------------------------- GATHER

@register("GATHER", rounding="none")
def gather(case, scheme):
    """gather.cc + reference_ops::Gather: out[batch, outer, i, inner] =
    in[batch, outer, idx[batch, i], inner]; negative axis counts from the input's rank,
    negative batch_dims from the indices' rank; indices must lie in [0, axis_size)."""
    _same_qparams(case, [0])
    x = _codes(case.inputs[0])
    idx = _param(case, 1, "indices")
    axis = _axis(case, attr_int(case, "axis", 0), x.ndim, "attrs.axis")
    bd = attr_int(case, "batch_dims", 0)
    if bd < 0:
        bd += idx.ndim
    if not (0 <= bd <= axis and bd < x.ndim and bd <= idx.ndim) or x.shape[:bd] != idx.shape[:bd]:
        raise _bad(case, "attrs.batch_dims", f"batch_dims {case.attrs.get('batch_dims', 0)} with axis {axis}, "
                   f"input {list(x.shape)}, indices {list(idx.shape)}",
                   "0 <= batch_dims <= axis, leading batch dims of input and indices equal")
    n = x.shape[axis]
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise _bad(case, "inputs[1].data", f"indices must lie in [0, {n}) (got [{idx.min()}, {idx.max()}])",
                   "0 <= index < input.shape[axis]")
    batch = int(np.prod(x.shape[:bd], dtype=np.int64))
    outer = int(np.prod(x.shape[bd:axis], dtype=np.int64))
    inner = int(np.prod(x.shape[axis + 1:], dtype=np.int64))
    coord = int(np.prod(idx.shape[bd:], dtype=np.int64))
    x4 = x.reshape(batch, outer, n, inner)
    i2 = idx.reshape(batch, coord)
    y = x4[np.arange(batch)[:, None, None], np.arange(outer)[None, :, None], i2[:, None, :]]   # [b, o, c, inner]
    shape = list(x.shape[:axis]) + list(idx.shape[bd:]) + list(x.shape[axis + 1:])
    return _result(case, y.reshape(shape))


# --------------------------------------------------------------------------- SLICE

@register("SLICE", rounding="none")
def slice_(case, scheme):
    """slice.cc: out = in[begin : begin + size] per dim; size -1 takes the rest of the dim."""
    _same_qparams(case, [0])
    x = _codes(case.inputs[0])
    begin = _param(case, 1, "begin").ravel()
    size = _param(case, 2, "size").ravel()
    if begin.size != x.ndim or size.size != x.ndim:
        raise _bad(case, "inputs[1]", f"begin/size have {begin.size}/{size.size} entries for rank {x.ndim}",
                   "len(begin) == len(size) == rank")
    sl = []
    for d in range(x.ndim):
        b, s, n = int(begin[d]), int(size[d]), x.shape[d]
        if s == -1:
            s = n - b
        if b < 0 or s < 0 or b + s > n:
            raise _bad(case, "inputs[2]", f"dim {d}: begin {begin[d]}, size {size[d]} for extent {n}",
                       "0 <= begin, size == -1 or begin + size <= dim")
        sl.append(slice(b, b + s))
    return _result(case, x[tuple(sl)])


# --------------------------------------------------------------------------- STRIDED_SLICE

def _bit(mask: int, i: int) -> bool:
    return bool((int(mask) >> i) & 1)


def strided_slice_plan(case):
    """LiteRT strided_slice.cc BuildStridedSliceParams: the effective (expanded) input shape
    and per effective axis (start, stop, stride, shrink), plus the output shape as
    ResizeOutputTensor computes it.

    Ellipsis expands to the dims the spec does not list; new_axis inserts a size-1 dim
    (ignored where ellipsis is also set); dims after the listed ones are full ranges.
    Start/stop follow reference_ops::StartForAxis/EndForAxis (negative indices +size,
    clamp to [0, size] or [-1, size-1] by the stride's sign, masks override after the
    clamp; shrink: stop = start + 1; ``offset``: stop = start + end).
    """
    x = case.inputs[0]
    a = case.attrs
    begin = _param(case, 1, "begin").ravel()
    end = _param(case, 2, "end").ravel()
    strides = _param(case, 3, "strides").ravel()
    if not (begin.size == end.size == strides.size):
        raise _bad(case, "inputs[2]", "begin, end and strides differ in length",
                   "len(begin) == len(end) == len(strides)")
    em, nm = attr_int(case, "ellipsis_mask", 0, lo=0), attr_int(case, "new_axis_mask", 0, lo=0)
    bm, endm, sm = (attr_int(case, k, 0, lo=0) for k in ("begin_mask", "end_mask", "shrink_axis_mask"))
    offset = bool(a.get("offset", False))
    in_shape = list(x.shape)
    in_dims, count = len(in_shape), int(begin.size)

    num_add = sum(1 for i in range(count) if not _bit(em, i) and _bit(nm, i))
    eff = in_dims + num_add
    eff_ell, eff_new = 0, 0
    ell_start, expanded = eff, 0
    i = 0
    while i < eff:
        if _bit(em, i):
            ell_start = i
            ell_end = max(i + 1, min(i + 1 + num_add + in_dims - count, eff))
            expanded = ell_end - ell_start - 1
            while i < ell_end:
                eff_ell |= 1 << i
                i += 1
            continue
        if _bit(nm, i - expanded):
            eff_new |= 1 << i
        i += 1

    def _dim(j: int) -> int:
        if not 0 <= j < in_dims:
            raise _bad(case, "attrs", "masks and begin/end/strides do not map onto the input's dimensions",
                       "ellipsis/new_axis masks consistent with the input rank")
        return in_shape[j]

    start = [0] * eff
    stop = [0] * eff
    stride = [1] * eff
    pbm = pem = psm = 0
    shape = [0] * eff
    added_ell = added_axes = 0
    for i in range(eff):
        if _bit(eff_ell, i):
            added_ell = max(0, i - ell_start)
            pbm |= 1 << i
            pem |= 1 << i
            shape[i] = _dim(i - added_axes)
        elif _bit(eff_new, i):
            start[i], stop[i] = 0, 1
            shape[i] = 1
            added_axes += 1
        elif i >= count + expanded:
            pbm |= 1 << i
            pem |= 1 << i
            shape[i] = _dim(i - added_axes)
        else:
            o = i - added_ell
            start[i], stop[i], stride[i] = int(begin[o]), int(end[o]), int(strides[o])
            if _bit(bm, o):
                pbm |= 1 << i
            if _bit(endm, o):
                pem |= 1 << i
            if _bit(sm, o):
                psm |= 1 << i
            shape[i] = _dim(i - added_axes)

    def clamp(v, lo, hi):
        return hi if v > hi else lo if v < lo else v

    axes = []      # (start, stop, stride, shrink) per effective axis
    out_shape = []
    for i in range(eff):
        n, st = shape[i], stride[i]
        if st == 0:
            raise _bad(case, "inputs[3]", "a stride is 0", "strides != 0")
        b = start[i] + n if start[i] < 0 else start[i]
        b = clamp(b, 0, n) if st > 0 else clamp(b, -1, n - 1)
        if _bit(pbm, i):
            b = 0 if st > 0 else n - 1
        shrink = _bit(psm, i)
        if shrink:
            e = b if b >= n else b + 1
        else:
            e = stop[i] + (b if offset else 0)
            e = e + n if e < 0 else e
            e = clamp(e, 0, n) if st > 0 else clamp(e, -1, n - 1)
            if _bit(pem, i):
                e = n if st > 0 else -1
        axes.append((b, e, st, shrink))
        if shrink:
            continue
        # ResizeOutputTensor: the extent is stop - start, or end[i] itself with offset
        # (indexed by the effective axis, as the kernel does); C++ truncating division.
        if offset:
            if i >= end.size:
                raise _bad(case, "attrs.offset", "offset with ellipsis/new_axis or a short end vector",
                           "offset slices list every dimension")
            dim = int(end[i])
        else:
            dim = e - b
        if (dim < 0) != (st < 0):
            dim = 0
        elif st < 0:
            dim = _trunc_div(dim + 1, st) + 1
        else:
            dim = 0 if dim == 0 else _trunc_div(dim - 1, st) + 1
        out_shape.append(int(dim))
    return shape, axes, out_shape


def _trunc_div(a: int, b: int) -> int:
    """C++ integer division (truncation toward zero)."""
    qv = abs(a) // abs(b)
    return qv if (a >= 0) == (b > 0) else -qv


@register("STRIDED_SLICE", rounding="none")
def strided_slice(case, scheme):
    """strided_slice.cc + reference_ops::StridedSlice: for each effective axis the indices
    start, start + stride, ... while (< stop for stride > 0, > stop for stride < 0);
    shrunk axes keep one index and are dropped from the output."""
    _same_qparams(case, [0])
    x = _codes(case.inputs[0])
    shape, axes, out_shape = strided_slice_plan(case)
    xe = x.reshape(shape)
    index = [np.arange(b, e, st, dtype=np.int64) for b, e, st, _ in axes]
    if any(ix.size and (ix.min() < 0 or ix.max() >= n) for ix, n in zip(index, shape)):
        raise _bad(case, "inputs[1]", "the slice reads outside the input", "indices within the input")
    y = xe[np.ix_(*index)] if index else xe
    kept = [ix.size for ix, (_, _, _, sh) in zip(index, axes) if not sh]
    if kept != out_shape or any(ix.size != 1 for ix, (_, _, _, sh) in zip(index, axes) if sh):
        raise _bad(case, "inputs[2]", f"the kernel writes {kept} elements per axis into an output of shape "
                   f"{out_shape}", "begin/end/offset select as many elements as the output holds")
    return _result(case, y.reshape(out_shape))


# --------------------------------------------------------------------------- PAD, PADV2

def _pad(case, value: int):
    x = _codes(case.inputs[0])
    pads = _param(case, 1, "paddings")
    if x.ndim > 5:
        raise _bad(case, "inputs[0].shape", f"rank {x.ndim}", "PAD input rank <= 5")
    if pads.shape != (x.ndim, 2) or (pads.size and pads.min() < 0):
        raise _bad(case, "inputs[1]", f"paddings {pads.tolist()} for rank {x.ndim}",
                   "paddings is [rank, 2] with non-negative entries")
    return _result(case, np.pad(x, [(int(a), int(b)) for a, b in pads], mode="constant", constant_values=value))


@register("PAD", rounding="none")
def pad(case, scheme):
    """pad.cc: pads with the output zero point (real 0)."""
    _same_qparams(case, [0])
    return _pad(case, int(case.outputs[0].zero_point[0]))


@register("PADV2", rounding="none")
def padv2(case, scheme):
    """pad.cc PADV2: pads with the code of ``constant_values`` (one element, same scale and
    zero point as the output), or with the output zero point when it is absent."""
    _same_qparams(case, [i for i in (0, 2) if i < len(case.inputs)])
    if len(case.inputs) > 2 and case.inputs[2].data is not None:
        c = np.asarray(case.inputs[2].data).ravel()
        if c.size != 1:
            raise _bad(case, "inputs[2]", f"constant_values has {c.size} elements", "constant_values is one value")
        return _pad(case, int(c[0]))
    return _pad(case, int(case.outputs[0].zero_point[0]))


# --------------------------------------------------------------------------- SPACE_TO_DEPTH

@register("SPACE_TO_DEPTH", rounding="none")
def space_to_depth(case, scheme):
    """reference_ops::SpaceToDepth (NHWC): out[n, h, w, (bh * b + bw) * C + c] =
    in[n, h * b + bh, w * b + bw, c]."""
    _same_qparams(case)
    x = _codes(case.inputs[0])
    b = attr_int(case, "block_size", 0)
    if x.ndim != 4 or b <= 0 or x.shape[1] % b or x.shape[2] % b:
        raise _bad(case, "attrs.block_size", f"block_size {b} for input {list(x.shape)}",
                   "4-D input, block_size > 0 divides H and W")
    n, h, w, c = x.shape
    y = x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5).reshape(n, h // b, w // b, b * b * c)
    return _result(case, y)


# --------------------------------------------------------------------------- BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND

def _block_params(case, x, second: str):
    """Block shape and [spatial, 2] paddings/crops of a 3-D (NHC) or 4-D (NHWC) input, as 4-D."""
    if x.ndim not in (3, 4):
        raise _bad(case, "inputs[0].shape", f"rank {x.ndim}", "input rank 3 (NHC) or 4 (NHWC)")
    spatial = x.ndim - 2
    block = _param(case, 1, "block_shape")
    pc = _param(case, 2, second)
    if block.shape != (spatial,) or pc.shape != (spatial, 2):
        raise _bad(case, "inputs[1]", f"block_shape {list(block.shape)}, {second} {list(pc.shape)} for rank {x.ndim}",
                   f"block_shape is [{spatial}], {second} is [{spatial}, 2]")
    if block.min() <= 0 or pc.min() < 0:
        raise _bad(case, "inputs[1]", f"block_shape {block.tolist()}, {second} {pc.tolist()}",
                   f"block_shape > 0, {second} >= 0")
    if spatial == 1:
        block = np.array([block[0], 1])
        pc = np.array([[pc[0, 0], pc[0, 1]], [0, 0]])
    return [int(v) for v in block], [[int(a), int(b)] for a, b in pc]


@register("SPACE_TO_BATCH_ND", rounding="none")
def space_to_batch_nd(case, scheme):
    """reference_ops::SpaceToBatchND: pad H and W with the output zero point, then
    out[(sh * bw + sw) * N + n, h, w, c] = padded[n, h * bh + sh, w * bw + sw, c].
    A 3-D NHC input is treated as NH1C."""
    _same_qparams(case)
    x = _codes(case.inputs[0])
    (bh, bw), ((pt, pb), (pl, pr)) = _block_params(case, x, "paddings")
    x4 = x if x.ndim == 4 else x[:, :, None, :]
    n, h, w, c = x4.shape
    hp, wp = h + pt + pb, w + pl + pr
    if hp % bh or wp % bw:
        raise _bad(case, "inputs[2]", f"padded spatial dims {hp}x{wp} not multiples of block {bh}x{bw}",
                   "padded spatial dims are multiples of block_shape")
    xp = np.pad(x4, [(0, 0), (pt, pb), (pl, pr), (0, 0)], constant_values=int(case.outputs[0].zero_point[0]))
    y = xp.reshape(n, hp // bh, bh, wp // bw, bw, c).transpose(2, 4, 0, 1, 3, 5)
    y = y.reshape(bh * bw * n, hp // bh, wp // bw, c)
    if x.ndim == 3:
        y = y[:, :, 0, :]
    return _result(case, y)


@register("BATCH_TO_SPACE_ND", rounding="none")
def batch_to_space_nd(case, scheme):
    """reference_ops::BatchToSpaceND: out[n, h * bh + sh - crop_top, w * bw + sw - crop_left, c] =
    in[(sh * bw + sw) * N + n, h, w, c], cropped. A 3-D NHC input is treated as NH1C."""
    _same_qparams(case)
    x = _codes(case.inputs[0])
    (bh, bw), ((ct, cb), (cl, cr)) = _block_params(case, x, "crops")
    x4 = x if x.ndim == 4 else x[:, :, None, :]
    nb, h, w, c = x4.shape
    if nb % (bh * bw) or ct + cb > h * bh or cl + cr > w * bw:
        raise _bad(case, "inputs[1]", f"batch {nb}, block {bh}x{bw}, crops {[[ct, cb], [cl, cr]]} for {h}x{w}",
                   "batch divisible by prod(block_shape), crops within the output")
    n = nb // (bh * bw)
    y = x4.reshape(bh, bw, n, h, w, c).transpose(2, 3, 0, 4, 1, 5).reshape(n, h * bh, w * bw, c)
    y = y[:, ct:h * bh - cb, cl:w * bw - cr, :]
    if x.ndim == 3:
        y = y[:, :, 0, :]
    return _result(case, y)


# --------------------------------------------------------------------------- SHAPE

@register("SHAPE", rounding="none")
def shape(case, scheme):
    """shape.cc: the input's dimensions as a 1-D int32 or int64 tensor (``out_type``)."""
    out = case.outputs[0]
    ot = str(case.attrs.get("out_type", out.dtype)).lower()
    if ot not in ("int32", "int64") or ot != out.dtype:
        raise _bad(case, "attrs.out_type", f"out_type {case.attrs.get('out_type')!r} with output dtype {out.dtype}",
                   "out_type is int32 or int64 and matches the output dtype")
    return _result(case, np.asarray(case.inputs[0].shape, dtype=np.int64).reshape(-1))
