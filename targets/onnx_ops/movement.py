"""ONNX QDQ mappings of the data movement and shape operators.

RESHAPE -> Reshape, SQUEEZE -> Squeeze, CONCATENATION -> Concat, TRANSPOSE -> Transpose,
GATHER -> Gather (Reshape + Gather when batch_dims > 0), SLICE / STRIDED_SLICE -> Slice
(+ Reshape when the op inserts or removes axes), PAD / PADV2 -> Pad, SPACE_TO_DEPTH -> SpaceToDepth
(the harness permutes the data NHWC <-> NCHW), SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND ->
Pad/Reshape/Transpose/Reshape(/Slice), SHAPE -> Shape (+ Cast for int32).

Every quantized input is DequantizeLinear'd and the output QuantizeLinear'd with the
same (scale, zero point), so the float graph in between moves values that requantize
to the same codes; ONNX Runtime's QDQ passes drop such pairs around data movement ops
and run them on int8 directly. Constant parameters (shapes, perms, indices, paddings)
are initializers, translated here from LiteRT's conventions to ONNX's.
"""

from __future__ import annotations

import numpy as np

from suite.core.dtypes import DTYPES
from suite.core.errors import Unsupported

from targets.onnx_model import NCHW_TO_NHWC, NHWC_TO_NCHW, Builder, onnx_op


def _i64(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def _param(b: Builder, i: int) -> np.ndarray:
    t = b.case.inputs[i]
    return np.asarray(t.data, dtype=np.int64).reshape(t.shape)


def _out_shape(b: Builder) -> list[int]:
    return [int(d) for d in b.case.outputs[0].shape]


@onnx_op("RESHAPE")
def _reshape(b: Builder):
    """Reshape to LiteRT's requested shape; -1 kept (ONNX infers it the same way). A 0 means
    'copy the input dim' in ONNX but an empty dim in LiteRT, so shapes with 0 use the
    resolved output shape."""
    c = b.case
    x = b.dq_input(0)
    st = c.inputs[1] if len(c.inputs) > 1 else None
    if st is not None and st.data is not None and len(st.shape) == 1 and st.dtype == "int32":
        spec = [int(v) for v in np.asarray(st.data).ravel()]
    else:
        spec = [int(v) for v in c.attrs.get("new_shape", _out_shape(b))]
        if spec == [0]:
            spec = []
    if 0 in spec:
        spec = _out_shape(b)
    b.q_output(b.node1("Reshape", [x, b.const(_i64(spec), "shape")]))


@onnx_op("SQUEEZE")
def _squeeze(b: Builder):
    """Squeeze with LiteRT's squeeze_dims as ONNX axes (negative allowed in both); no axes
    squeezes every size-1 dim in both."""
    x = b.dq_input(0)
    dims = [int(d) for d in (b.case.attrs.get("squeeze_dims") or [])]
    ins = [x] + ([b.const(_i64(dims), "axes")] if dims else [])
    b.q_output(b.node1("Squeeze", ins))


@onnx_op("CONCATENATION")
def _concat(b: Builder):
    c = b.case
    xs = [b.dq_input(i) for i in range(len(c.inputs))]
    axis = int(c.attrs.get("axis", 0))
    b.q_output(b.activation(b.node1("Concat", xs, axis=axis)))


@onnx_op("TRANSPOSE")
def _transpose(b: Builder):
    """Transpose; LiteRT's negative perm entries (counted from the end) made non-negative."""
    x = b.dq_input(0)
    rank = len(b.case.inputs[0].shape)
    perm = [int(p) + rank if p < 0 else int(p) for p in _param(b, 1).ravel()]
    b.q_output(b.node1("Transpose", [x], perm=perm))


@onnx_op("GATHER")
def _gather(b: Builder):
    """Gather along ``axis``. ONNX Gather has no batch_dims; with batch_dims > 0 the input is
    flattened (Reshape [-1]) and one Gather takes every output element at its flat offset
    ((b * P + p) * A + idx[b, i]) * R + r. The flattened tensor gets its own Q/DQ pair at
    the input's scale (exact): without it ONNX Runtime 1.31's QDQ propagation inserts a
    QuantizeLinear with a uint8 zero point between Reshape and Gather and rejects the model.
    Alternatives tried on QNN HTP: GatherND and GatherElements are rejected, Flatten ->
    Gather fails to finalize (QNN_COMMON_ERROR_MEM_ALLOC).
    """
    c = b.case
    x_t = c.inputs[0]
    rank = len(x_t.shape)
    idx = _param(b, 1)
    axis = int(c.attrs.get("axis", 0))
    bd = int(c.attrs.get("batch_dims", 0))
    if bd < 0:
        bd += idx.ndim
    x = b.dq_input(0)
    if bd == 0:
        y = b.node1("Gather", [x, b.const(idx.astype(np.int32), "indices")], axis=axis)
    else:
        # out[B, P, I, R] = x[B, P, idx[B, I], R]: flatten x and gather each output element
        # at its flat offset ((b * P + p) * A + idx[b, i]) * R + r (indices are constants)
        a = axis + rank if axis < 0 else axis
        bsz = int(np.prod(x_t.shape[:bd]))
        psz = int(np.prod(x_t.shape[bd:a]))
        asz = int(x_t.shape[a])
        rsz = int(np.prod(x_t.shape[a + 1:]))
        isz = int(np.prod(idx.shape[bd:]))
        bi = np.arange(bsz).reshape(bsz, 1, 1, 1)
        pi = np.arange(psz).reshape(1, psz, 1, 1)
        ii = idx.reshape(bsz, 1, isz, 1)
        ri = np.arange(rsz).reshape(1, 1, 1, rsz)
        flat = ((bi * psz + pi) * asz + ii) * rsz + ri
        flat = flat.reshape(_out_shape(b)).astype(np.int32)
        xf = b.node1("Reshape", [x, b.const(_i64([-1]), "shape")])
        s, z, _ = b.qparams(x_t)    # explicit Q/DQ at the input's own scale: exact
        xf = b.node1("DequantizeLinear", [b.node1("QuantizeLinear", [xf, s, z]), s, z])
        y = b.node1("Gather", [xf, b.const(flat, "indices")], axis=0)
    b.q_output(y)


@onnx_op("SLICE")
def _slice(b: Builder):
    """Slice with starts = begin, ends = begin + size (size -1: the dim's end)."""
    shape = b.case.inputs[0].shape
    begin = _param(b, 1).ravel()
    size = _param(b, 2).ravel()
    ends = [int(n) if s == -1 else int(bg + s) for bg, s, n in zip(begin, size, shape)]
    x = b.dq_input(0)
    y = b.node1("Slice", [x, b.const(_i64(begin), "starts"), b.const(_i64(ends), "ends"),
                          b.const(_i64(range(len(shape))), "axes")])
    b.q_output(y)


def _tf_slice_spec(case):
    """TensorFlow strided-slice semantics -> per input dim (start, end, step) in ONNX's
    conventions, and whether axes are inserted or removed (new_axis / shrink_axis).

    Spec entries are read left to right: an ellipsis entry stands for the input dims no
    other entry names; a new_axis entry inserts a size-1 dim and names no input dim; a
    shrink entry keeps index begin; begin/end masks take the whole extent in the stride's
    direction; with ``offset`` end is a size counted from the start. Input dims after the
    last entry are taken whole.
    """
    a = case.attrs
    shape = list(case.inputs[0].shape)
    rank = len(shape)
    begin = np.asarray(case.inputs[1].data, np.int64).ravel()
    end = np.asarray(case.inputs[2].data, np.int64).ravel()
    strides = np.asarray(case.inputs[3].data, np.int64).ravel()
    em, nm = int(a.get("ellipsis_mask", 0)), int(a.get("new_axis_mask", 0))
    bm, endm, sm = int(a.get("begin_mask", 0)), int(a.get("end_mask", 0)), int(a.get("shrink_axis_mask", 0))
    offset = bool(a.get("offset", False))
    count = begin.size
    named = sum(1 for k in range(count) if not (em >> k) & 1 and not (nm >> k) & 1)
    if sum((em >> k) & 1 for k in range(count)) > 1:
        raise Unsupported("STRIDED_SLICE with more than one ellipsis")
    starts, ends, steps = [], [], []
    reshaped = False
    dim = 0

    def whole(n):
        starts.append(0), ends.append(n), steps.append(1)

    for k in range(count):
        if (em >> k) & 1:
            for _ in range(rank - named):
                whole(shape[dim])
                dim += 1
            continue
        if (nm >> k) & 1:
            reshaped = True
            continue
        n = shape[dim]
        bg, e, st = int(begin[k]), int(end[k]), int(strides[k])
        if (sm >> k) & 1:
            s0 = bg + n if bg < 0 else bg
            starts.append(s0), ends.append(s0 + 1), steps.append(1)
            reshaped = True
        else:
            if (bm >> k) & 1:
                s0 = 0 if st > 0 else n - 1
            else:
                s0 = bg
            if offset:
                r = s0 + n if s0 < 0 else s0
                e = r + e
            if (endm >> k) & 1:
                e = n if st > 0 else -n - 1
            elif st < 0 and e < -n:
                e = -n - 1
            starts.append(s0), ends.append(e), steps.append(st)
        dim += 1
    while dim < rank:
        whole(shape[dim])
        dim += 1
    return starts, ends, steps, reshaped


@onnx_op("STRIDED_SLICE")
def _strided_slice(b: Builder):
    """Slice over every input dim, then Reshape to the output shape when the op inserts
    (new_axis_mask) or removes (shrink_axis_mask) dims: both are the op's own semantics."""
    starts, ends, steps, reshaped = _tf_slice_spec(b.case)
    rank = len(b.case.inputs[0].shape)
    x = b.dq_input(0)
    y = b.node1("Slice", [x, b.const(_i64(starts), "starts"), b.const(_i64(ends), "ends"),
                          b.const(_i64(range(rank)), "axes"), b.const(_i64(steps), "steps")])
    if reshaped:
        y = b.node1("Reshape", [y, b.const(_i64(_out_shape(b)), "shape")])
    b.q_output(y)


def _scalar_dq(b: Builder, i: int) -> str:
    """Input ``i`` (a one-element quantized constant) as a dequantized scalar."""
    t = b.case.inputs[i]
    code = np.asarray(t.data).ravel()
    if code.size != 1:
        raise Unsupported(f"constant_values has {code.size} elements")
    raw = b.const(np.array(code[0], dtype=np.asarray(t.data).dtype), "pad_value")
    s, z, _ = b.qparams(t)
    return b.node1("DequantizeLinear", [raw, s, z])


@onnx_op("PAD", "PADV2")
def _pad(b: Builder):
    """Pad (constant mode), pads = [begins..., ends...]. PAD (and PADV2 without a constant)
    leaves constant_value out: ONNX's default real 0 quantizes to the zero point, which is
    LiteRT's pad value; PADV2's constant is its dequantized code. (QNN HTP mishandles the
    default with a negative zero point: finding qnn-htp-pad-value.)"""
    c = b.case
    p = _param(b, 1)
    x = b.dq_input(0)
    ins = [x, b.const(_i64(np.concatenate([p[:, 0], p[:, 1]])), "pads")]
    if c.op == "PADV2" and len(c.inputs) > 2 and c.inputs[2].data is not None:
        ins.append(_scalar_dq(b, 2))
    b.q_output(b.node1("Pad", ins, mode="constant"))


@onnx_op("SPACE_TO_DEPTH")
def _space_to_depth(b: Builder):
    """SpaceToDepth on NCHW data. ONNX orders output channels (bh, bw, c), which is LiteRT's
    out_d = c + (bh * block + bw) * C."""
    bs = int(b.case.attrs["block_size"])
    x = b.dq_input(0, NHWC_TO_NCHW)
    y = b.node1("SpaceToDepth", [x], blocksize=bs)
    o = _out_shape(b)
    b.q_output(y, perm_out=NCHW_TO_NHWC, model_shape=[o[0], o[3], o[1], o[2]])


def _blocks(b: Builder):
    """Input shape as 4-D (a 3-D NHC input is NH1C), block (bh, bw), paddings/crops [[t, b], [l, r]]."""
    shape = list(b.case.inputs[0].shape)
    block = [int(v) for v in _param(b, 1).ravel()]
    pc = [[int(u), int(v)] for u, v in _param(b, 2).reshape(-1, 2)]
    if len(shape) == 3:
        shape = [shape[0], shape[1], 1, shape[2]]
        block, pc = block + [1], pc + [[0, 0]]
    return shape, block, pc


@onnx_op("SPACE_TO_BATCH_ND")
def _space_to_batch(b: Builder):
    """SPACE_TO_BATCH_ND's own definition as ONNX ops, in at most 5 dims (QNN HTP rejects
    6-D Reshape/Transpose): Pad H and W with real 0, Reshape [N*Ho, bh, Wo, bw, C] (n and ho
    stay adjacent), Transpose to [bh, bw, N*Ho, Wo, C], Reshape to the output
    [bh*bw*N, Ho, Wo, C] (or [.., Ho, C] for a 3-D NHC input, handled as NH1C)."""
    (n, h, w, c), (bh, bw), ((pt, pb), (pl, pr)) = _blocks(b)
    x_rank = len(b.case.inputs[0].shape)
    y = b.dq_input(0)
    if pt or pb or pl or pr:
        begins = [0, pt, pl, 0] if x_rank == 4 else [0, pt, 0]
        ends = [0, pb, pr, 0] if x_rank == 4 else [0, pb, 0]
        # real 0 given explicitly as the dequantized zero point: with Pad's default value
        # QNN HTP pads with 127 when the zero point is negative (see PAD)
        x_t = b.case.inputs[0]
        s, z, _ = b.qparams(x_t)
        zero = b.node1("DequantizeLinear", [b.const(np.array(x_t.zero_point[0], DTYPES[x_t.dtype].storage), "zp_code"), s, z])
        y = b.node1("Pad", [y, b.const(_i64(begins + ends), "pads"), zero], mode="constant")
    ho, wo = (h + pt + pb) // bh, (w + pl + pr) // bw
    y = b.node1("Reshape", [y, b.const(_i64([n * ho, bh, wo, bw, c]), "shape")])
    y = b.node1("Transpose", [y], perm=[1, 3, 0, 2, 4])
    y = b.node1("Reshape", [y, b.const(_i64(_out_shape(b)), "shape")])
    b.q_output(y)


@onnx_op("BATCH_TO_SPACE_ND")
def _batch_to_space(b: Builder):
    """BATCH_TO_SPACE_ND's own definition as ONNX ops, in at most 5 dims (QNN HTP rejects
    6-D Reshape/Transpose): Reshape
    [bh, bw, N*H, W, C] (n and h stay adjacent), Transpose to [N*H, bh, W, bw, C], Reshape
    [N, H*bh, W*bw, C], Slice off the crops (a 3-D NHC input is handled as NH1C)."""
    (nb, h, w, c), (bh, bw), ((ct, cb), (cl, cr)) = _blocks(b)
    x_rank = len(b.case.inputs[0].shape)
    n = nb // (bh * bw)
    y = b.dq_input(0)
    y = b.node1("Reshape", [y, b.const(_i64([bh, bw, n * h, w, c]), "shape")])
    y = b.node1("Transpose", [y], perm=[2, 0, 3, 1, 4])
    full = [n, h * bh, w * bw, c] if x_rank == 4 else [n, h * bh, c]
    y = b.node1("Reshape", [y, b.const(_i64(full), "shape")])
    if ct or cb or cl or cr:
        starts, ends, axes = [ct], [h * bh - cb], [1]
        if x_rank == 4:
            starts, ends, axes = starts + [cl], ends + [w * bw - cr], axes + [2]
        y = b.node1("Slice", [y, b.const(_i64(starts), "starts"), b.const(_i64(ends), "ends"),
                              b.const(_i64(axes), "axes")])
    b.q_output(y)


@onnx_op("SHAPE")
def _shape(b: Builder):
    """Shape of the (int8) input, int64 in ONNX; Cast to int32 when out_type is int32.

    The input has static dims (as LiteRT computes SHAPE in Prepare), so ONNX Runtime
    constant-folds the whole graph: on ``htp`` no node reaches QNN. With symbolic input
    dims QNN HTP cannot run Shape (session creation fails with CPU fallback disabled).
    """
    x = b.raw_input(0)
    y = b.node1("Shape", [x])
    if b.case.outputs[0].dtype == "int32":
        y = b.node1("Cast", [y], to=int(b.onnx.TensorProto.INT32))
    b.q_output(y)
