"""The case model and the case file format (``qconform-case/1``).

A case is one operator invocation: the LiteRT builtin operator name, its
options, its input tensors with data and quantization, and the quantization
of its outputs. Case files are JSON; see README.md for the contract.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from suite.core.dtypes import DTYPES
from suite.core.errors import QconformError
from suite.core.spec import known_ops, output_problem, tables, with_defaults
from suite.core.userfile import read_text

FORMAT = "qconform-case/1"

#: a case id names its failure file and its test id: safe characters, not hidden, not too long
#: (the characters and length suite/harness/folder.py's safe_name keeps: the file name is the id)
ID_CHARS = "A-Za-z0-9._~+-"
ID_MAX = 120
DIM_MAX = (1 << 31) - 1   # a dimension or index LiteRT can hold (int32)
ELEMENTS_MAX = 1 << 26    # elements of one tensor
ID_RULE = f"a case id is 1 to {ID_MAX} of [{ID_CHARS}], not starting with '.'"
_ID = re.compile(f"[{ID_CHARS}]{{1,{ID_MAX}}}")


def id_problem(case_id: str) -> str | None:
    """Why ``case_id`` is not a valid case id (None: it is)."""
    shown = json.dumps(case_id if len(case_id) <= 40 else case_id[:40] + "...")
    bad = "".join(sorted({ch for ch in case_id if not _ID.fullmatch(ch)}))
    if bad:
        return f"{shown} has the character(s) {json.dumps(bad[:10])}"
    if not case_id:
        return "is empty"
    if len(case_id) > ID_MAX:
        return f"{shown} is {len(case_id)} characters long"
    if case_id.startswith("."):
        return f"{shown} starts with '.'"
    return None


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list) -> dict:
    """json's object_pairs_hook: a key given twice is an error (json keeps the last silently)."""
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set = set()
        for k, _ in pairs:
            if k in seen:
                raise _DuplicateKey(k)
            seen.add(k)
    return d


def _finite(x) -> bool:
    """math.isfinite, False (not OverflowError) for an int beyond the float range."""
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


@dataclass
class Tensor:
    """A tensor of a case. Outputs carry no data; non-quantized tensors no scale."""

    dtype: str
    shape: tuple[int, ...]
    data: np.ndarray | None = None
    scale: list[float] | None = None
    zero_point: list[int] | None = None
    quantized_dimension: int = 0
    const: bool | None = None   # None: as the spec table's role says
    scale_shape: tuple[int, ...] | None = None  # blocked scale: its shape (scale/zero_point flat, row-major)

    @property
    def quantized(self) -> bool:
        return self.scale is not None

    @property
    def per_axis(self) -> bool:
        return self.scale is not None and len(self.scale) > 1

    @property
    def size(self) -> int:
        return math.prod(self.shape)   # (a Python product: np.prod costs microseconds per call)

    def scale_array(self) -> np.ndarray:
        return np.asarray(self.scale, dtype=np.float64)

    def zp_array(self) -> np.ndarray:
        return np.asarray(self.zero_point, dtype=np.int64)

    def broadcast_qparams(self, block_size: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Scale and zero point shaped to broadcast against the data (blocked: needs block_size)."""
        s, z = self.scale_array(), self.zp_array()
        if self.scale_shape is not None:
            if not block_size:
                raise ValueError("a blocked scale (scale_shape) needs the case's block_size to expand")
            ax, d = self.quantized_dimension, self.shape[self.quantized_dimension]
            idx = np.arange(d) // int(block_size)
            return (s.reshape(self.scale_shape).take(idx, axis=ax),
                    z.reshape(self.scale_shape).take(idx, axis=ax))
        if len(s) == 1:
            return s.reshape(()), z.reshape(())
        shape = [1] * len(self.shape)
        shape[self.quantized_dimension] = len(s)
        return s.reshape(shape), z.reshape(shape)

    def to_dict(self, with_data: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {"dtype": self.dtype, "shape": list(self.shape)}
        if with_data and self.data is not None:
            flat = np.asarray(self.data).ravel()
            d["data"] = flat.tolist() if self.dtype != "float32" else [float(v) for v in flat]
        if self.scale is not None:
            d["scale"] = [float(s) for s in self.scale]
            d["zero_point"] = [int(z) for z in self.zero_point]
            d["quantized_dimension"] = int(self.quantized_dimension)
            if self.scale_shape is not None:
                d["scale_shape"] = [int(x) for x in self.scale_shape]
        if self.const is not None:
            d["const"] = bool(self.const)
        return d

    def spec(self) -> "Tensor":
        """The same tensor without data (what an output descriptor holds)."""
        return Tensor(self.dtype, tuple(self.shape), None,
                      None if self.scale is None else list(self.scale),
                      None if self.zero_point is None else list(self.zero_point),
                      self.quantized_dimension, self.const,
                      None if self.scale_shape is None else tuple(self.scale_shape))


@dataclass(repr=False)
class Case:
    op: str
    inputs: list[Tensor]
    outputs: list[Tensor]
    attrs: dict[str, Any] = field(default_factory=dict)
    id: str = ""
    variant: str = "file"
    index: int = 0
    clause: str = ""           # the spec clause(s) this case exercises
    spec: str = "litert-int8"  # the spec table the case is checked against
    description: str = ""
    source: str | None = None  # the file it was read from, if any

    def __repr__(self) -> str:   # (a test's parameter in pytest plugins' reports: not its arrays)
        return f"Case({self.id or self.op})"

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"format": FORMAT, "id": self.id, "op": self.op,
                             "spec": self.spec, "variant": self.variant, "index": self.index}
        if self.clause:
            d["clause"] = self.clause
        if self.description:
            d["description"] = self.description
        d["attrs"] = _jsonable(self.attrs)
        d["inputs"] = [t.to_dict() for t in self.inputs]
        d["outputs"] = [t.to_dict(with_data=False) for t in self.outputs]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"), sort_keys=False) + "\n"

    def digest(self) -> str:
        """A content digest: op, attrs, spec, tensors and data (not the id or variant): the first
        16 hex digits of :meth:`sha256`."""
        return self.sha256()[:16]

    def sha256(self) -> str:
        """The full sha256 (64 hex digits) of what :meth:`digest` covers (certificates quote it)."""
        h = hashlib.sha256()
        head = {"op": self.op, "spec": self.spec, "attrs": _jsonable(self.attrs),
                "inputs": [t.to_dict(with_data=False) for t in self.inputs],
                "outputs": [t.to_dict(with_data=False) for t in self.outputs]}
        h.update(json.dumps(head, sort_keys=True).encode())
        for t in self.inputs:
            if t.data is not None:
                arr = np.ascontiguousarray(t.data)
                h.update(arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes())
        return h.hexdigest()

    def n_output_elements(self) -> int:
        return sum(t.size for t in self.outputs)


def _jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


# --------------------------------------------------------------------------- loading

def save_case(case: Case, path: str | os.PathLike) -> Path:
    """Write a case file atomically (a partly written file never replaces a good one)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(case.to_json())
    os.replace(tmp, path)
    return path


def load_case(path: str | os.PathLike) -> Case:
    """Read and validate one case file; raises QconformError naming the field and rule."""
    path = Path(path)
    src = str(path)
    text = read_text(path, "case file")
    try:
        obj = json.loads(text, object_pairs_hook=_no_duplicates)
    except _DuplicateKey as e:
        raise QconformError(f"key {json.dumps(e.args[0])} is given twice in one object", source=src,
                            field=e.args[0], rule="each key once") from None
    except json.JSONDecodeError as e:
        raise QconformError(f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}",
                            source=src, rule="a case file is a JSON object") from None
    except (ValueError, RecursionError) as e:   # a number of > 4300 digits, nesting beyond the stack
        raise QconformError(f"not valid JSON: {str(e).split(';')[0]}", source=src,
                            rule="a case file is a JSON object") from None
    case = case_from_dict(obj, source=src)
    if not case.id:
        why = id_problem(path.stem)
        if why:
            raise QconformError(f"is not given and the file name's stem {why}: give an \"id\"",
                                source=src, field="id", rule=ID_RULE)
        case.id = path.stem
    return case


def expand_case_paths(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Files as given, folders as every ``*.json`` below them (sorted), minus golden outputs."""
    out: list[Path] = []
    for p in paths:
        p = Path(p)
        try:
            is_dir, exists = p.is_dir(), p.exists()
        except (OSError, ValueError) as e:   # a name too long, a NUL byte
            raise QconformError(f"cannot read: {e}", source=str(p)[:200], field="--case-file") from None
        if is_dir:
            found = sorted(q for q in p.rglob("*.json") if not q.name.endswith((".golden.json", ".result.json")))
            if not found:   # else a run of nothing: pytest's silent status 5
                raise QconformError("holds no case files (*.json)", source=str(p), field="--case-file",
                                    rule="a folder of case files")
            out.extend(found)
        elif exists:
            out.append(p)
        else:
            raise QconformError("no such file or folder", source=str(p), field="--case-file")
    return out


def case_from_dict(obj: Any, source: str = "<case>") -> Case:
    v = _Validator(source)
    if not isinstance(obj, dict):
        v.fail("", "a case file must hold a JSON object", "top-level object")
    fmt = obj.get("format")
    if fmt != FORMAT:
        v.fail("format", f"must be \"{FORMAT}\" (got {json.dumps(fmt)})", "format tag")
    op = obj.get("op")
    if not isinstance(op, str) or not op:
        v.fail("op", "must be a LiteRT builtin operator name such as \"CONV_2D\"", "op name")
    spec_name = obj.get("spec", "litert-int8")
    if not isinstance(spec_name, str) or spec_name not in tables():
        v.fail("spec", f"unknown spec table {json.dumps(spec_name)} (known: {', '.join(tables())})",
               "spec table name")
    known = known_ops()
    if op not in known:
        v.fail("op", f"unknown operator \"{op}\"", "op must be one of the spec tables' operators")
    attrs = obj.get("attrs", {})
    if not isinstance(attrs, dict):
        v.fail("attrs", "must be a JSON object of the op's options", "attrs object")
    inputs_raw = obj.get("inputs")
    if not isinstance(inputs_raw, list) or not inputs_raw:
        v.fail("inputs", "must be a non-empty list of tensors", "inputs list")
    outputs_raw = obj.get("outputs")
    if not isinstance(outputs_raw, list) or not outputs_raw:
        v.fail("outputs", "must be a non-empty list of tensors", "outputs list")
    inputs = [v.tensor(t, f"inputs[{i}]", need_data=True) for i, t in enumerate(inputs_raw)]
    outputs = [v.tensor(t, f"outputs[{i}]", need_data=False) for i, t in enumerate(outputs_raw)]
    for key in ("id", "variant", "clause", "description"):
        if key in obj and not isinstance(obj[key], str):
            v.fail(key, "must be a string", "string field")
    if "id" in obj:
        why = id_problem(obj["id"])
        if why:
            v.fail("id", why, ID_RULE)
    index = obj.get("index", 0)
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index <= DIM_MAX:
        v.fail("index", f"must be an integer in [0, {DIM_MAX}] (got {str(index)[:40]})", "integer field")
    attrs = with_defaults(op, spec_name, attrs)   # one value for the golden and every target
    case = Case(op=op, inputs=inputs, outputs=outputs, attrs=attrs, id=obj.get("id", ""),
                variant=obj.get("variant", "file"), index=index, clause=obj.get("clause", ""),
                spec=spec_name, description=obj.get("description", ""), source=source)
    big = output_problem(case)   # (with or without the spec check: what the op computes is bounded)
    if big:
        v.fail(big[0], big[1], "what an op computes is bounded by its inputs (suite/core/spec.py OUTPUT_FLOOR)")
    return case


class _Validator:
    def __init__(self, source: str):
        self.source = source

    def fail(self, fld: str, msg: str, rule: str | None = None):
        raise QconformError(msg, source=self.source, field=fld or None, rule=rule)

    def tensor(self, t: Any, where: str, need_data: bool) -> Tensor:
        if not isinstance(t, dict):
            self.fail(where, "must be a JSON object {dtype, shape, ...}", "tensor object")
        dt = t.get("dtype")
        if not isinstance(dt, str) or dt not in DTYPES:
            self.fail(f"{where}.dtype", f"unknown dtype {json.dumps(dt)} (known: {', '.join(DTYPES)})",
                      "dtype name")
        info = DTYPES[dt]
        shape = t.get("shape")
        if (not isinstance(shape, list)
                or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
            self.fail(f"{where}.shape", "must be a list of non-negative integers", "shape")
        if any(d > DIM_MAX for d in shape):
            self.fail(f"{where}.shape", f"a dimension above {DIM_MAX} (got {shape})"[:200], "dimension <= 2^31 - 1")
        if len(shape) > 8:
            self.fail(f"{where}.shape", f"rank {len(shape)} is above the supported 8", "rank <= 8")
        size = math.prod(shape)
        if size > ELEMENTS_MAX:
            self.fail(f"{where}.shape", f"{size} elements is above the supported 2^26", "size limit")
        extent = math.prod(max(d, 1) for d in shape)   # (an empty tensor's other dimensions are bounded too)
        if extent > ELEMENTS_MAX:
            self.fail(f"{where}.shape", f"{shape} spans {extent} elements, its empty dimensions counted as 1: "
                      "above the supported 2^26", "size limit")
        data = None
        if "data" in t and not need_data:
            self.fail(f"{where}.data", "an output's values are what the golden computes: a case gives none "
                      "(a failure file keeps a target's as \"got\" and the golden's as \"want\")", "outputs carry no data")
        if "data" in t:
            raw = t["data"]
            if not isinstance(raw, list):
                self.fail(f"{where}.data", "must be a flat list of numbers (row-major)", "flat data list")
            if len(raw) != size:
                self.fail(f"{where}.data", f"has {len(raw)} values but shape {shape} holds {size}",
                          "len(data) == product(shape)")
            data = self._data(raw, info, f"{where}.data").reshape(shape)
        elif need_data:
            self.fail(f"{where}.data", "is missing: every input needs its values", "inputs carry data")
        scale = t.get("scale")
        zp = t.get("zero_point")
        qdim = t.get("quantized_dimension", 0)
        sshape = t.get("scale_shape")
        if sshape is not None and scale is None:
            self.fail(f"{where}.scale_shape", "is given without scale", "scale_shape with scale")
        if scale is None and zp is not None:
            self.fail(f"{where}.scale", "is missing while zero_point is given", "scale with zero_point")
        if scale is not None:
            if not info.is_int:
                self.fail(f"{where}.scale", f"a {dt} tensor is not quantized: omit scale", "quantized dtypes")
            if not isinstance(scale, list) or not scale:
                self.fail(f"{where}.scale", "must be a non-empty list of numbers", "scale list")
            for i, s in enumerate(scale):
                if isinstance(s, bool) or not isinstance(s, (int, float)) or not _finite(s) or s <= 0:
                    self.fail(f"{where}.scale[{i}]", f"must be a finite number > 0 (got {json.dumps(s)})",
                              "scale > 0")
                if s > 3.4028234663852886e38:   # float32 max: every runtime stores scales as float32
                    self.fail(f"{where}.scale[{i}]", f"{s:g} is beyond the float32 range", "scale is a finite float32")
                if np.float32(s) == 0:   # below the smallest float32: a runtime would store a zero scale
                    self.fail(f"{where}.scale[{i}]", f"{s:g} is 0 as a float32", "scale is a finite float32")
            if zp is None:
                self.fail(f"{where}.zero_point", "is missing (give one per scale)", "zero_point with scale")
            if not isinstance(zp, list) or len(zp) != len(scale):
                self.fail(f"{where}.zero_point",
                          f"must be a list as long as scale ({len(scale)})", "len(zero_point) == len(scale)")
            for i, z in enumerate(zp):
                if isinstance(z, bool) or not isinstance(z, int):
                    self.fail(f"{where}.zero_point[{i}]", f"must be an integer (got {json.dumps(z)})",
                              "integer zero point")
                if not (info.qmin <= z <= info.qmax):
                    self.fail(f"{where}.zero_point[{i}]",
                              f"{z} is outside the {dt} range [{info.qmin}, {info.qmax}]",
                              "zero point within the dtype's range")
            if isinstance(qdim, bool) or not isinstance(qdim, int):
                self.fail(f"{where}.quantized_dimension", "must be an integer", "integer dimension")
            if not (0 <= qdim < max(len(shape), 1)):   # (a scalar's per-tensor scale: dimension 0)
                self.fail(f"{where}.quantized_dimension",
                          f"{qdim} is not a dimension of shape {shape}", "0 <= dim < rank")
            if sshape is not None:
                self._scale_shape(sshape, shape, qdim, len(scale), where)
            elif len(scale) > 1:
                if not shape:
                    self.fail(f"{where}.scale", f"has {len(scale)} per-axis values but the tensor is a scalar",
                              "per-axis length == shape[quantized_dimension]")
                if shape[qdim] != len(scale):
                    self.fail(f"{where}.scale",
                              f"has {len(scale)} per-axis values but dimension {qdim} of {shape} is {shape[qdim]}",
                              "per-axis length == shape[quantized_dimension]")
        const = t.get("const")
        if const is not None and not isinstance(const, bool):
            self.fail(f"{where}.const", "must be true or false", "boolean")
        return Tensor(dt, tuple(shape), data,
                      None if scale is None else [float(s) for s in scale],
                      None if zp is None else [int(z) for z in zp],
                      int(qdim) if scale is not None else 0, const,
                      None if sshape is None else tuple(int(d) for d in sshape))

    def _scale_shape(self, sshape, shape, qdim: int, n: int, where: str) -> None:
        """A blocked scale: the input's shape with ceil(D/B) on quantized_dimension (docs/case-format.md)."""
        f = f"{where}.scale_shape"
        if (not isinstance(sshape, list)
                or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in sshape)):
            self.fail(f, "must be a list of positive integers", "scale_shape")
        if len(sshape) != len(shape):
            self.fail(f, f"has rank {len(sshape)}, the tensor has rank {len(shape)}",
                      "a blocked scale has the tensor's rank")
        if not (0 <= qdim < len(shape)):
            self.fail(f"{where}.quantized_dimension", f"{qdim} is not a dimension of shape {shape}",
                      "0 <= dim < rank")
        if math.prod(sshape) != n:
            self.fail(f"{where}.scale", f"has {n} values but scale_shape {sshape} holds {math.prod(sshape)}",
                      "len(scale) == product(scale_shape)")
        for i, (a, b) in enumerate(zip(sshape, shape)):
            if i != qdim and a != b:
                self.fail(f, f"dimension {i} is {a}, the tensor's is {b} (only quantized_dimension "
                          f"{qdim} is blocked)", "scale_shape equals shape off the blocked axis")
        if sshape[qdim] > shape[qdim]:
            self.fail(f, f"has {sshape[qdim]} blocks on dimension {qdim} of size {shape[qdim]}",
                      "blocks <= dimension size")

    def _data(self, raw: list, info, where: str) -> np.ndarray:
        if info.name == "float32":
            for i, x in enumerate(raw):
                if isinstance(x, bool) or not isinstance(x, (int, float)):
                    self.fail(f"{where}[{i}]", f"must be a number (got {json.dumps(x)})", "numeric data")
                if isinstance(x, int) and not _finite(x):
                    self.fail(f"{where}[{i}]", "is beyond the float range", "numeric data")
            return np.asarray(raw, dtype=np.float64).astype(np.float32)
        if info.name == "bool":
            for i, x in enumerate(raw):
                if not isinstance(x, bool) and x not in (0, 1):
                    self.fail(f"{where}[{i}]", f"must be true/false (got {json.dumps(x)})", "boolean data")
            return np.asarray(raw, dtype=np.bool_)
        for i, x in enumerate(raw):
            if isinstance(x, bool) or not isinstance(x, int):
                self.fail(f"{where}[{i}]", f"must be an integer (got {json.dumps(x)})", "integer data")
        arr = np.asarray(raw, dtype=object) if raw else np.zeros(0, np.int64)
        if raw:
            lo, hi = min(raw), max(raw)
            if lo < info.qmin or hi > info.qmax:
                bad = next(i for i, x in enumerate(raw) if x < info.qmin or x > info.qmax)
                self.fail(f"{where}[{bad}]", f"{raw[bad]} is outside the {info.name} range "
                          f"[{info.qmin}, {info.qmax}]", "values within the dtype's range")
            arr = np.asarray(raw, dtype=np.int64)
        return arr.astype(info.storage)
