"""Harvest an int8 .tflite model (the LiteRT schema) into a :class:`suite.core.graph.Graph`.

Every operator of subgraph 0 (LiteRT stores them in execution order) becomes a layer: a case of
the ``litert-int8`` table when the table has the op and the case follows it (its tensors, options
and constants as the model holds them), else a not-covered entry with the reason. Tensors keep
the model's names (a name used twice gets ``#<index>``).
"""

from __future__ import annotations

import math
import re

import numpy as np

from suite.core.case import ELEMENTS_MAX, Case, Tensor
from suite.core.errors import QconformError
from suite.core.graph import CASE, Graph, Layer, file_digest
from suite.core.spec import check_case, rule, table
from suite.core.userfile import read_bytes
from targets import tflite_model

_DTYPES = {v: k for k, v in tflite_model.TENSOR_TYPES.items()}
_NP = {"float32": np.float32, "int32": np.int32, "uint8": np.uint8, "int64": np.int64, "bool": np.bool_,
       "int16": np.int16, "int8": np.int8, "uint16": np.uint16}


def read_model(path: str):
    """(ModelT, raw bytes) with every buffer's bytes inline (a model over 2 GB, or one written by
    ai-edge-quantizer, keeps buffers after the flatbuffer at ``offset``)."""
    S = tflite_model.schema()
    raw = read_bytes(path, "model", "--model", "model")
    try:
        m = S.ModelT.InitFromPackedBuf(raw, 0)
    except Exception as e:  # noqa: BLE001 (a damaged flatbuffer raises anything: one error naming the file)
        raise QconformError(f"not a LiteRT flatbuffer: {type(e).__name__}: {e}", source=path) from None
    for i, b in enumerate(m.buffers or []):
        if b.offset and b.offset > 1:
            if b.offset + (b.size or 0) > len(raw):
                raise QconformError(f"holds bytes {b.offset}..{b.offset + b.size} of a {len(raw)}-byte file",
                                    source=path, field=f"buffers[{i}]", rule="a buffer lies inside the file")
            b.data = np.frombuffer(raw[b.offset:b.offset + b.size], np.uint8)
            b.offset = b.size = 0
    _check_indexes(S, m, path)
    return m, raw


def _check_indexes(S, m, path: str) -> None:
    """Every index and size the harvest reads from the model, checked against the model before
    use (one QconformError naming the field): a subgraph, operator codes, tensor, buffer and
    operand indexes in range, shapes >= 0 and at most ELEMENTS_MAX elements, a constant's buffer
    exactly as long as its shape and type say."""
    def bad(fld, msg, rule):
        raise QconformError(msg, source=path, field=fld, rule=rule)

    if not m.subgraphs:
        bad("subgraphs", "is empty", "a model has a subgraph")
    n_codes, n_bufs = len(m.operatorCodes or []), len(m.buffers or [])
    sg = m.subgraphs[0]
    tensors = sg.tensors or []
    for i, t in enumerate(tensors):
        where = f"subgraphs[0].tensors[{i}]"
        if not 0 <= t.buffer < max(n_bufs, 1):
            bad(f"{where}.buffer", f"is {t.buffer}; the model has {n_bufs} buffers", "an index in range")
        shape = [int(d) for d in (t.shape if t.shape is not None else ())]
        if any(d < 0 for d in shape) or len(shape) > 8:
            bad(f"{where}.shape", f"is {shape[:10]}", "rank <= 8, dimensions >= 0")
        if math.prod(shape) > ELEMENTS_MAX:
            bad(f"{where}.shape", f"is {shape}: {math.prod(shape)} elements", f"at most {ELEMENTS_MAX} (2^26) elements")
        data = m.buffers[t.buffer].data if n_bufs else None
        type_name = _enum_name(S.TensorType, t.type)
        if type_name == str(t.type):   # (no TensorType has this value)
            bad(f"{where}.type", f"is {t.type}, no TensorType of the LiteRT schema", "a known tensor type")
        dt = _DTYPES.get(type_name, "")
        q = t.quantization
        if dt in ("int8", "uint8", "int16", "uint16", "int4") and q is not None and q.scale is not None and len(q.scale):
            s32 = np.asarray(q.scale, np.float32)
            if not np.all(np.isfinite(s32) & (s32 > 0)):
                bad(f"{where}.quantization.scale", f"holds {s32[~(np.isfinite(s32) & (s32 > 0))][:4].tolist()}",
                    "a quantization scale is a finite float32 > 0")
        if data is not None and len(data) and dt in _NP and len(data) != math.prod(shape) * np.dtype(_NP[dt]).itemsize:
            bad(f"buffers[{t.buffer}]", f"holds {len(data)} bytes; tensor {i} ({dt} {shape}) needs "
                f"{math.prod(shape) * np.dtype(_NP[dt]).itemsize}", "a constant's buffer matches its shape")
    n = len(tensors)
    for k, op in enumerate(sg.operators or []):
        if not 0 <= op.opcodeIndex < n_codes:
            bad(f"subgraphs[0].operators[{k}].opcodeIndex", f"is {op.opcodeIndex}; the model has {n_codes} operator codes",
                "an index in range")
        for part in ("inputs", "outputs"):
            for j, ti in enumerate(getattr(op, part) if getattr(op, part) is not None else ()):
                if not -1 <= ti < n or (part == "outputs" and ti < 0):
                    bad(f"subgraphs[0].operators[{k}].{part}[{j}]", f"is {ti}; the subgraph has {n} tensors",
                        "an index in range")
    for part in ("inputs", "outputs"):
        for j, ti in enumerate(getattr(sg, part) if getattr(sg, part) is not None else ()):
            if not 0 <= ti < n:
                bad(f"subgraphs[0].{part}[{j}]", f"is {ti}; the subgraph has {n} tensors", "an index in range")
    for j, ti in enumerate(sg.inputs if sg.inputs is not None else ()):   # (the harvest feeds each one)
        if _DTYPES.get(_enum_name(S.TensorType, tensors[ti].type), "") not in _NP:
            bad(f"subgraphs[0].tensors[{ti}].type", f"model input {j} is of type "
                f"{_enum_name(S.TensorType, tensors[ti].type)}", f"a model input of type {', '.join(_NP)}")


def op_name(S, model, op) -> str:
    oc = model.operatorCodes[op.opcodeIndex]
    code = max(oc.builtinCode, oc.deprecatedBuiltinCode)   # (schema: older models use the deprecated field)
    names = {v: k for k, v in vars(S.BuiltinOperator).items() if not k.startswith("_")}
    return names.get(code, f"builtin {code}")


def tensor_keys(sg) -> list[str]:
    names = [t.name.decode() if isinstance(t.name, bytes) else str(t.name) for t in sg.tensors]
    seen: dict[str, int] = {}
    for n in names:
        seen[n] = seen.get(n, 0) + 1
    return [n if seen[n] == 1 else f"{n}#{i}" for i, n in enumerate(names)]


def _tensor(S, model, t, with_data: bool) -> Tensor:
    dt = _DTYPES.get(_enum_name(S.TensorType, t.type), "")
    if dt not in _NP:
        raise _Skip(f"tensor type {_enum_name(S.TensorType, t.type)}")
    q = t.quantization
    scale = zp = None
    qdim = 0
    if q is not None and q.scale is not None and len(q.scale):
        scale = [float(np.float32(s)) for s in q.scale]
        zp = [int(z) for z in q.zeroPoint]
        qdim = int(q.quantizedDimension)
    shape = tuple(int(d) for d in (t.shape if t.shape is not None else ()))
    data = None
    if with_data:
        buf = model.buffers[t.buffer].data
        data = np.frombuffer(bytes(buf), dtype=_NP[dt]).reshape(shape).copy()
    return Tensor(dt, shape, data, scale, zp, qdim)


class _Skip(Exception):
    pass


def _enum_name(enum, value) -> str:
    return next((k for k, v in vars(enum).items() if v == value and not k.startswith("_")), str(value))


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _attrs(S, op_name_: str, op, allowed: tuple[str, ...]) -> dict:
    opts = op.builtinOptions
    out: dict = {}
    if opts is None:
        return out
    for camel, value in vars(opts).items():
        key = _snake(camel)
        if key not in allowed:
            continue
        if key in tflite_model.ENUM_FIELDS:
            value = _enum_name(getattr(S, tflite_model.ENUM_FIELDS[key]), value)
            if key in ("output_type", "out_type"):
                value = _DTYPES.get(value, value)
        elif isinstance(value, (list, np.ndarray)):
            value = [int(v) for v in value]
        elif isinstance(value, (np.floating, float)):
            value = float(value)
        elif isinstance(value, (np.integer, bool)):
            value = value if isinstance(value, bool) else int(value)
        out[key] = value
    return out


def harvest(path: str, stem: str | None = None) -> Graph:
    """The graph of an int8 .tflite model (runtime inputs of its cases hold zeros until
    :func:`suite.models.harvest.fill` runs the graph golden)."""
    S = tflite_model.schema()
    model, raw = read_model(path)
    sg = model.subgraphs[0]
    keys = tensor_keys(sg)
    stem = stem or _safe(path)
    specs: dict[str, Tensor] = {}
    for i, t in enumerate(sg.tensors):
        try:
            specs[keys[i]] = _tensor(S, model, t, with_data=False)
        except _Skip:
            pass
    litert = table("litert-int8").ops
    layers: list[Layer] = []
    not_covered: dict[str, list[str]] = {}
    cuts: dict[str, str] = {}
    for k, op in enumerate(sg.operators):
        name = op_name(S, model, op)
        node = f"op{k}:{name}"

        def skip(why: str, name=name, node=node, op=op) -> None:
            not_covered.setdefault(name, []).append(f"{node}: {why}")
            for o in op.outputs if op.outputs is not None else ():   # its consumers are fed seeded data
                cuts.setdefault(keys[o], f"the output of {node}, not covered ({why})")

        if name in STATE_OPS:
            if name == "READ_VARIABLE":
                if op.inputs is None or len(op.inputs) < 1 or op.inputs[0] < 0:
                    raise QconformError("a READ_VARIABLE without its variable's handle", source=path,
                                        field=f"subgraphs[0].operators[{k}].inputs[0]",
                                        rule="READ_VARIABLE reads the resource tensor of input 0")
                var = keys[op.inputs[0]]
                skip("state: reads a variable, no arithmetic (its readers are fed seeded data in its "
                     "quantization, or the target's own values where it runs the whole model)")
                for o in op.outputs if op.outputs is not None else ():
                    cuts[keys[o]] = f"state {var} (read by {node})"
            else:
                skip(STATE_OPS[name])
            continue
        if name == "SPLIT_V":
            try:
                layers += _split_v(S, model, sg, keys, k, op, stem)
            except _Skip as e:
                skip(str(e))
            continue
        if name not in litert:
            skip("not in the litert-int8 spec table")
            continue
        inputs, names = [], []
        try:
            ins = list(op.inputs)
            while ins and ins[-1] < 0:   # an absent optional input at the end
                ins.pop()
            for i, ti in enumerate(ins):
                if ti < 0:
                    raise _Skip(f"input {i} is absent in the middle of the inputs")
                t = sg.tensors[ti]
                const = model.buffers[t.buffer].data is not None and len(model.buffers[t.buffer].data) > 0
                tensor = _tensor(S, model, t, with_data=const)
                if not const:
                    tensor.data = np.zeros(tensor.shape, _NP[tensor.dtype])
                r = rule(name).input_rule(i)
                if r is not None and bool(r.const) != const:
                    tensor.const = const
                inputs.append(tensor)
                names.append(None if const else keys[ti])
            outputs = [_tensor(S, model, sg.tensors[o], with_data=False) for o in op.outputs]
        except _Skip as e:
            skip(str(e))
            continue
        case = Case(op=name, inputs=inputs, outputs=outputs, attrs=_attrs(S, name, op, litert[name].attrs),
                    id=f"{stem}.L{k:03d}.{name}"[:128], variant="model", index=k,
                    clause=f"litert-int8/{name}", description=f"{stem} operator {k} ({name})")
        bad = check_case(case)
        if bad:
            skip(f"breaks its spec table: {bad[0]}")
            continue
        layers.append(Layer(index=k, node=node, op=name, kind=CASE, inputs=names,
                            outputs=[keys[o] for o in op.outputs], case=case, model_op=name))
    return Graph(name=path.rsplit("/", 1)[-1], digest=file_digest(raw), format="tflite",
                 inputs=[keys[i] for i in sg.inputs], outputs=[keys[o] for o in sg.outputs], specs=specs,
                 layers=layers, not_covered=not_covered, path=str(path),
                 model_inputs={keys[i]: keys[i] for i in sg.inputs}, cuts=cuts,
                 stateful=any(op_name(S, model, op) in STATE_OPS for op in sg.operators),
                 operators=len(sg.operators))


#: LiteRT's resource-variable operators (a streaming model's state): no arithmetic, each named with why
STATE_OPS = {
    "VAR_HANDLE": "state: a variable's handle, no arithmetic",
    "READ_VARIABLE": "",
    "ASSIGN_VARIABLE": "state: stores a checked layer's output in a variable, no arithmetic",
    "CALL_ONCE": "state: runs the variables' initialization once, no arithmetic",
}


def _split_v(S, model, sg, keys, k: int, op, stem: str) -> list[Layer]:
    """SPLIT_V as one SLICE case per output (the litert-int8 table has SLICE, not SPLIT_V): LiteRT's
    split_v.cc copies each output's run of the input along the axis, which is SLICE's copy of
    (begin, size), codes unchanged; the table's same-scale rule of SLICE holds SPLIT_V to its own
    kernel's (the outputs keep the input's quantization)."""
    ins = list(op.inputs)
    if len(ins) != 3 or any(i < 0 for i in ins):
        raise _Skip(f"has {len(ins)} inputs, SPLIT_V has 3 (input, size_splits, axis)")

    def const(i):
        t = sg.tensors[ins[i]]
        data = model.buffers[t.buffer].data
        if data is None or not len(data):
            raise _Skip(f"input {i} is not a constant (a SLICE's begin and size are)")
        return _tensor(S, model, t, with_data=True).data.reshape(-1).astype(np.int64)

    x = _tensor(S, model, sg.tensors[ins[0]], with_data=False)
    sizes, axis = const(1), int(const(2)[0])
    rank = len(x.shape)
    if not -rank <= axis < rank:
        raise _Skip(f"axis {axis} is outside rank {rank}")
    axis %= rank
    outs = list(op.outputs)
    if len(sizes) != len(outs):
        raise _Skip(f"{len(sizes)} size_splits for {len(outs)} outputs")
    sizes = [int(v) for v in sizes]
    if sizes.count(-1) == 1:
        sizes[sizes.index(-1)] = x.shape[axis] - (sum(sizes) + 1)
    if min(sizes) < 0 or sum(sizes) != x.shape[axis]:
        raise _Skip(f"size_splits {sizes} do not add up to dimension {axis} ({x.shape[axis]})")
    layers, start = [], 0
    for j, (o, n) in enumerate(zip(outs, sizes)):
        begin = [0] * rank
        begin[axis] = start
        size = list(x.shape)
        size[axis] = n
        start += n
        xin = Tensor(x.dtype, x.shape, np.zeros(x.shape, _NP[x.dtype]), x.scale, x.zero_point, x.quantized_dimension)
        case = Case(op="SLICE", inputs=[xin, Tensor("int32", (rank,), np.array(begin, np.int32)),
                                        Tensor("int32", (rank,), np.array(size, np.int32))],
                    outputs=[_tensor(S, model, sg.tensors[o], with_data=False)], attrs={},
                    id=f"{stem}.L{k:03d}.{j}.SPLIT_V"[:128], variant="model", index=k,
                    clause="litert-int8/SLICE", description=f"{stem} operator {k} (SPLIT_V), output {j} as a SLICE")
        bad = check_case(case)
        if bad:
            raise _Skip(f"output {j} as a SLICE breaks its spec table: {bad[0]}")
        layers.append(Layer(index=k, node=f"op{k}:SPLIT_V" + (f"[{j}]" if j else ""), op="SLICE", kind=CASE,
                            inputs=[keys[ins[0]], None, None], outputs=[keys[o]], case=case, model_op="SPLIT_V"))
    return layers


def _safe(path: str) -> str:
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    return re.sub(r"[^A-Za-z0-9._~+-]", "_", stem).lstrip(".")[:60] or "model"
