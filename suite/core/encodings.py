"""SNPE / QNN quantization encodings: the encoding algorithm and an encodings-JSON reader.

Source: the Qualcomm Neural Processing SDK (SNPE) quantization pages
(shared/seeds/000_*). An *encoding* of bitwidth ``bw`` maps unsigned codes
``q in [0, 2^bw - 1]`` to reals ``scale * (q + offset)``: ``encoding-min`` is the real
of code 0, ``encoding-max`` the real of the top code, ``offset = -zero_point`` (QNN's
convention: QNN stores ``Qnn_ScaleOffset_t {scale, offset}``).

The quantization algorithm (:func:`compute_encoding`), as the SDK documents it:

1. the true range ``[min, max]`` of the data;
2. a minimum range: ``max = max(max, min + 0.01)`` (the page's requirement list says
   0.0001, its algorithm step says ``min + 0.01``; the step, which AIMET's
   ``TfEncodingAnalyzer::MIN_RANGE = 0.01`` also uses, is what is implemented, and
   ``min_range`` changes it);
3. zero exactly representable, three sign cases: all >= 0 -> ``min = 0`` (zero is
   code 0); all <= 0 -> ``max = 0`` (zero is the top code); both signs -> ``step =
   (max - min) / (2^bw - 1)``, zero's code ``round(-min / step)`` and the range
   shifted so that code is exactly 0.0;
4. quantize: ``q = round((2^bw - 1) * (x - min) / (max - min))`` clamped to the codes.

(AIMET applies step 2 after including zero in the range; the two orders differ only
for a range narrower than 0.01 away from zero.)

Symmetric encodings (per-channel weights; the page: "Per-channel quantization must use
symmetric representation with offset == -2^(bitwidth-1)"): ``step = max|x| /
(2^(bw-1) - 1)``, ``offset = -2^(bw-1)``, i.e. signed codes ``q - 2^(bw-1)`` with zero
point 0 (int8 weights in [-127, 127] for data within the range). Biases are 32-bit:
scale ``input_scale * weight_scale[c]``, offset ``-2^31`` (int32, zero point 0).
Packed 4-bit weights hold two values per byte, the first in the low nibble, packed
along each channel (row) when per-channel.

The reader (:func:`read_encodings`) takes AIMET-style encodings JSON as the SDK's
``--quantization_overrides`` describes it (``activation_encodings`` and
``param_encodings``, each a map of tensor name -> list of encodings, one per channel)
and AIMET's versioned format (``"version": "1.0.0"``, each section a list of
``{name, bw, dtype, enc_type, is_sym, scale: [...], offset: [...]}``; the seed does not
describe it, the layout is AIMET's). As the SDK says, scale and offset of the legacy
format are recomputed from ``bitwidth``, ``min`` and ``max``; a file value that
disagrees is kept in the tensor's notes. Result: per tensor the case quantization
parameters the suite uses (dtype, scale, zero_point, per-channel axis). Activations
become unsigned (uint8 / uint16, as QNN HTP runs them), symmetric parameters signed
(int8 / int4 / int16, zero point 0), 32-bit parameters int32.
"""

from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from suite.core.case import Tensor
from suite.core.dtypes import DTYPES, pack_int4, unpack_int4
from suite.core.errors import QconformError
from suite.core.userfile import read_text

MIN_RANGE = 0.01
FLOAT32_MAX = float(np.finfo(np.float32).max)
INT_BITWIDTHS = (4, 8, 16, 32)
FLOAT_BITWIDTHS = (16, 32)


def _finite(x) -> bool:
    """math.isfinite, False (not OverflowError) for an int beyond the float range."""
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


def _round_half_away(x):
    x = np.asarray(x, dtype=np.float64)
    return np.where(x >= 0, np.floor(x + 0.5), -np.floor(-x + 0.5))


# --------------------------------------------------------------------------- encodings

@dataclass(frozen=True)
class Encoding:
    """One SNPE/QNN encoding: reals ``scale * (q + offset)`` for codes ``q in [0, 2^bitwidth - 1]``."""

    bitwidth: int
    min: float
    max: float
    scale: float
    offset: int
    symmetric: bool = False

    @property
    def steps(self) -> int:
        return 2**self.bitwidth - 1

    @property
    def zero_point(self) -> int:
        """The unsigned zero point (QNN ``offset = -zero_point``)."""
        return -self.offset

    def quantize(self, x) -> np.ndarray:
        """Unsigned codes: round((2^bw - 1) * (x - min) / (max - min)), clamped (ties away from zero)."""
        x = np.asarray(x, dtype=np.float64)
        q = _round_half_away(self.steps * (x - self.min) / (self.max - self.min))
        return np.clip(q, 0, self.steps).astype(np.int64)

    def dequantize(self, q) -> np.ndarray:
        """Reals of unsigned codes: scale * (q + offset)."""
        return self.scale * (np.asarray(q, dtype=np.float64) + self.offset)

    def signed_zero_point(self) -> int:
        """The zero point of the same encoding on signed codes q - 2^(bw-1)."""
        return -self.offset - 2 ** (self.bitwidth - 1)

    def qparams(self, signed: bool) -> tuple[str, float, int]:
        """(case dtype, float32 scale, zero point) on unsigned or signed codes."""
        bw = self.bitwidth
        dtype = f"{'int' if signed else 'uint'}{bw}"
        if dtype not in DTYPES:
            raise QconformError(f"no {'signed' if signed else 'unsigned'} {bw}-bit case dtype", field="bitwidth",
                                rule="case dtypes: int4/uint4/int8/uint8/int16/uint16/int32")
        zp = self.signed_zero_point() if signed else self.zero_point
        return dtype, float(np.float32(self.scale)), int(zp)


def compute_encoding(values=None, *, vmin: float | None = None, vmax: float | None = None,
                     bitwidth: int = 8, symmetric: bool = False, min_range: float = MIN_RANGE) -> Encoding:
    """The SNPE quantization algorithm (module docstring) on data or on a given [vmin, vmax]."""
    if bitwidth not in INT_BITWIDTHS:
        raise QconformError(f"bitwidth {bitwidth} is not supported", field="bitwidth",
                            rule="bitwidth is 4, 8, 16 or 32")
    if values is not None:
        v = np.asarray(values, dtype=np.float64)
        if v.size == 0 or not np.all(np.isfinite(v)):
            raise QconformError("needs at least one finite value (and no NaN/inf)", field="values",
                                rule="finite data")
        lo, hi = float(v.min()), float(v.max())
    else:
        if vmin is None or vmax is None:
            raise QconformError("give values or both min and max", field="min/max", rule="a range")
        lo, hi = float(vmin), float(vmax)
        if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
            raise QconformError(f"[{lo}, {hi}] is not a range", field="min/max", rule="finite min <= max")
    steps = 2**bitwidth - 1
    if symmetric:
        m = max(abs(lo), abs(hi), min_range / 2)
        pos = steps // 2
        scale = m / pos
        offset = -(steps // 2 + 1)
        return Encoding(bitwidth, offset * scale, pos * scale, scale, offset, True)
    hi = max(hi, lo + min_range)                             # 2. minimum range
    if lo >= 0.0:                                            # 3. case 1: all non-negative
        lo = 0.0
    elif hi <= 0.0:                                          #    case 2: all non-positive
        hi = 0.0
    scale = (hi - lo) / steps
    if lo < 0.0 < hi:                                        #    case 3: both signs
        zero = int(np.clip(_round_half_away(-lo / scale), 0, steps))
        offset = -zero
    else:
        offset = int(_round_half_away(lo / scale))
    enc_min = offset * scale
    return Encoding(bitwidth, enc_min, hi - lo + enc_min, scale, offset, False)


def per_channel_encodings(w, axis: int, bitwidth: int = 8, min_range: float = MIN_RANGE) -> list[Encoding]:
    """Symmetric encodings, one per slice of ``w`` along ``axis`` (per-channel weights)."""
    w = np.asarray(w, dtype=np.float64)
    red = tuple(i for i in range(w.ndim) if i != axis % w.ndim)
    amax = np.abs(w).max(axis=red) if red else np.abs(w)
    return [compute_encoding(vmin=-float(a), vmax=float(a), bitwidth=bitwidth, symmetric=True, min_range=min_range)
            for a in np.atleast_1d(amax)]


def quantize_per_channel(w, encs: list[Encoding], axis: int) -> np.ndarray:
    """Signed codes (q - 2^(bw-1)) of weights under per-channel symmetric encodings."""
    w = np.asarray(w, dtype=np.float64)
    moved = np.moveaxis(w, axis, 0)
    out = np.stack([e.quantize(moved[c]) - 2 ** (e.bitwidth - 1) for c, e in enumerate(encs)])
    return np.moveaxis(out, 0, axis)


def bias_encodings(input_scale: float, weight_scales) -> list[Encoding]:
    """32-bit bias encodings: scale = input_scale * weight_scale[c] (float32), offset -2^31."""
    out = []
    for ws in np.atleast_1d(np.asarray(weight_scales, dtype=np.float32)):
        s = float(np.float32(np.float32(input_scale) * ws))
        out.append(Encoding(32, -(2**31) * s, (2**31 - 1) * s, s, -(2**31), True))
    return out


def pack_4bit(codes, axis: int | None = None) -> np.ndarray:
    """Packed 4-bit codes: two per byte, the first in the low nibble.

    ``axis=None`` packs the flat tensor; with an axis (per-channel) each channel's values
    are packed on their own (``ceil(n / 2)`` bytes per channel), giving ``[C, ceil(n/2)]``.
    """
    codes = np.asarray(codes)
    if axis is None:
        return pack_int4(codes)
    rows = np.moveaxis(codes, axis, 0).reshape(codes.shape[axis], -1)
    return np.stack([pack_int4(r) for r in rows])


def unpack_4bit(packed, count: int, signed: bool) -> np.ndarray:
    """Inverse of :func:`pack_4bit`: ``count`` values per row (per channel), sign-extended if ``signed``."""
    p = np.asarray(packed, dtype=np.uint8)
    if p.ndim <= 1:
        return unpack_int4(p, count, signed)
    return np.stack([unpack_int4(r, count, signed) for r in p])


# --------------------------------------------------------------------------- the JSON reader

@dataclass
class TensorQuant:
    """A tensor's quantization as the suite uses it (one entry of an encodings file)."""

    name: str
    kind: str                        # "activation" | "param"
    dtype: str                       # uint8 / int8 / uint16 / int16 / int4 / uint4 / int32, or float16 / float32
    bitwidth: int
    encodings: list[Encoding] = field(default_factory=list)
    symmetric: bool = False
    axis: int | None = None          # per-channel dimension (None: per-tensor)
    notes: list[str] = field(default_factory=list)

    @property
    def quantized(self) -> bool:
        return bool(self.encodings)

    @property
    def granularity(self) -> str:
        if not self.quantized:
            return "float"
        return "per-channel" if len(self.encodings) > 1 else "per-tensor"

    @property
    def scale(self) -> list[float] | None:
        return [float(np.float32(e.scale)) for e in self.encodings] if self.quantized else None

    @property
    def zero_point(self) -> list[int] | None:
        if not self.quantized:
            return None
        signed = not self.dtype.startswith("u")
        return [e.signed_zero_point() if signed else e.zero_point for e in self.encodings]

    @property
    def qnn_offset(self) -> list[int] | None:
        """QNN's offsets for the chosen dtype (offset = -zero_point)."""
        zp = self.zero_point
        return None if zp is None else [-z for z in zp]

    def tensor(self, shape, data=None, const: bool | None = None):
        """A :class:`suite.case.Tensor` with these parameters (per-channel along ``axis``)."""
        if not self.quantized:
            return Tensor("float32", tuple(shape), data, const=const)
        axis = 0 if self.axis is None else self.axis
        if self.granularity == "per-channel" and (len(shape) <= axis or shape[axis] != len(self.encodings)):
            raise QconformError(f"{len(self.encodings)} per-channel encodings do not fit shape {list(shape)} "
                                f"along axis {axis}", field=self.name, rule="one encoding per channel")
        return Tensor(self.dtype, tuple(shape), data, self.scale, self.zero_point,
                      axis if self.granularity == "per-channel" else 0, const)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "dtype": self.dtype, "bitwidth": self.bitwidth,
                "granularity": self.granularity, "axis": self.axis, "symmetric": self.symmetric,
                "scale": self.scale, "zero_point": self.zero_point, "qnn_offset": self.qnn_offset,
                "min": [e.min for e in self.encodings] or None, "max": [e.max for e in self.encodings] or None,
                "notes": list(self.notes)}


SECTIONS = (("activation_encodings", "activation"), ("param_encodings", "param"))


def read_encodings(path: str | os.PathLike, axis: int = 0, min_range: float = MIN_RANGE) -> list[TensorQuant]:
    """Read an encodings JSON file (legacy or versioned); QconformError names file, field and rule.

    ``axis`` is the per-channel dimension given to per-channel parameters (the files do
    not say it; 0 is a Conv weight's output channel in ONNX's OIHW and LiteRT's OHWI).
    """
    src = str(path)
    text = read_text(path, "encodings file", kind="encodings")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise QconformError(f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}", source=src,
                            rule="an encodings file is a JSON object") from None
    except (ValueError, RecursionError) as e:   # a number of > 4300 digits, nesting beyond the stack
        raise QconformError(f"not valid JSON: {str(e).split(';')[0]}", source=src,
                            rule="an encodings file is a JSON object") from None
    return parse_encodings(obj, source=src, axis=axis, min_range=min_range)


def parse_encodings(obj: Any, source: str = "<encodings>", axis: int = 0,
                    min_range: float = MIN_RANGE) -> list[TensorQuant]:
    r = _Reader(source, axis, min_range)
    if not isinstance(obj, dict):
        r.fail("", "an encodings file must hold a JSON object", "top-level object")
    for key, _ in SECTIONS:
        if key not in obj:
            r.fail(key, "is missing", "activation_encodings and param_encodings are both present (may be empty)")
    version = obj.get("version")
    kinds = {type(obj[k]) for k, _ in SECTIONS}
    major = None if version is None else _major(version)
    if version is not None and major is None:
        r.fail("version", f"{json.dumps(version)[:40]} is not a known encodings version (AIMET writes "
               f"\"0.6.1\", \"1.0.0\", ...)", VERSION_RULE)
    if major is not None and major > 1:
        r.fail("version", f"AIMET format {version} is not read here (0.x and 1.x are)", VERSION_RULE)
    if major in (None, 0):   # up to 0.6.1 AIMET's sections are maps (no version: 0.4.0, AIMET says)
        if kinds <= {dict}:
            return [t for key, kind in SECTIONS for t in r.legacy_section(obj[key], key, kind)]
        r.fail("activation_encodings", f"sections are maps of tensor name -> list of encodings in a "
               f"{'file without version' if version is None else f'version {version} file'} (lists "
               f"need \"version\": \"1.0.0\")", "one format per file")
    out = [t for key, kind in SECTIONS for t in r.v1_section(obj[key], key, kind)]
    names = [(t.kind, t.name) for t in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup:
        r.fail(f"{dup[0]}_encodings", f"tensor {dup[1]!r} appears twice", "one entry per tensor")
    return out


#: AIMET's encoding versions are XX.YY.ZZ: 0.x (0.4.0, 0.5.0, 0.6.1) keeps the map sections,
#: 1.x (1.0.0) has lists of named encodings
VERSION_RULE = "AIMET version \"0.x.y\" (map sections) or \"1.x.y\" (list sections)"


def _major(version) -> int | None:
    """The major number of an AIMET version string ("0.6.1" -> 0), None if it is not one."""
    if not isinstance(version, str) or not re.fullmatch(r"\d{1,4}(\.\d{1,4}){1,2}", version):
        return None
    return int(version.split(".")[0])


class _Reader:
    def __init__(self, source: str, axis: int, min_range: float):
        self.source, self.axis, self.min_range = source, axis, min_range

    def fail(self, fld: str, msg: str, rule: str | None = None):
        raise QconformError(msg, source=self.source, field=fld or None, rule=rule)

    # ---- field helpers
    def number(self, e: dict, key: str, where: str, required: bool = True) -> float | None:
        v = e.get(key)
        if v is None:
            if required:
                self.fail(f"{where}.{key}", "is missing", f"{key} is required")
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not _finite(v):
            self.fail(f"{where}.{key}", f"must be a finite number (got {json.dumps(v)})", "numeric field")
        return float(v)

    def integer(self, v, where: str) -> int:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not _finite(v) or v != int(v):
            self.fail(where, f"must be an integer (got {json.dumps(v)})", "integer-valued offset")
        return int(v)

    def flag(self, v, where: str) -> bool:
        if isinstance(v, bool):
            return v
        if isinstance(v, str) and v.lower() in ("true", "false"):
            return v.lower() == "true"
        self.fail(where, f"must be true/false or \"True\"/\"False\" (got {json.dumps(v)})", "boolean")
        return False

    def bitwidth(self, v, where: str, is_float: bool) -> int:
        allowed = FLOAT_BITWIDTHS if is_float else INT_BITWIDTHS
        if isinstance(v, bool) or not isinstance(v, int) or v not in allowed:
            self.fail(where, f"{json.dumps(v)} is not a supported {'float' if is_float else 'integer'} bitwidth",
                      f"bitwidth is {', '.join(map(str, allowed))}")
        return v

    def dtype_kind(self, v, where: str) -> bool:
        """True for float, False for int (default int)."""
        if v is None:
            return False
        if not isinstance(v, str) or v.lower() not in ("int", "float"):
            self.fail(where, f"must be \"int\" or \"float\" (got {json.dumps(v)})", "dtype int|float")
        return v.lower() == "float"

    # ---- building a tensor
    def finish(self, name: str, kind: str, where: str, encs: list[Encoding], bw: int, sym: bool,
               notes: list[str]) -> TensorQuant:
        n = len(encs)
        if kind == "activation" and n > 1:
            self.fail(where, f"has {n} encodings: activations are per-tensor", "activation encodings hold one entry")
        if n > 1:
            for c, e in enumerate(encs):
                if not (sym and e.offset == -(2 ** (bw - 1))):
                    self.fail(f"{where}[{c}]", f"per-channel encoding has offset {e.offset}"
                              f"{'' if sym else ' and is_symmetric False'}",
                              f"per-channel encodings are symmetric with offset -2^(bitwidth-1) = {-(2 ** (bw - 1))}")
        if kind == "activation" and bw != 32:
            signed = False
        else:
            signed = bw == 32 or (sym and all(e.offset == -(2 ** (bw - 1)) for e in encs))
        dtype, _, _ = encs[0].qparams(signed)
        if kind == "activation" and bw not in (8, 16):
            notes.append(f"{bw}-bit activations: QNN HTP runs 8- and 16-bit activations")
        return TensorQuant(name, kind, dtype, bw, encs, sym, self.axis if n > 1 else None, notes)

    # ---- legacy: {name: [ {bitwidth, min, max, scale?, offset?, is_symmetric?, dtype?}, ... ]}
    def legacy_section(self, sec: dict, key: str, kind: str) -> list[TensorQuant]:
        out = []
        for name, lst in sec.items():
            where = f"{key}.{name}"
            if not isinstance(lst, list) or not lst:
                self.fail(where, "must be a non-empty list of encodings (one per channel)", "encoding list")
            encs, notes, bws, syms, floats = [], [], set(), set(), set()
            for i, e in enumerate(lst):
                w = f"{where}[{i}]"
                if not isinstance(e, dict):
                    self.fail(w, "must be a JSON object {bitwidth, min, max, ...}", "encoding object")
                is_float = self.dtype_kind(e.get("dtype"), f"{w}.dtype")
                if "bitwidth" not in e:
                    self.fail(f"{w}.bitwidth", "is missing", "bitwidth is required")
                bw = self.bitwidth(e["bitwidth"], f"{w}.bitwidth", is_float)
                bws.add(bw)
                floats.add(is_float)
                if is_float:
                    continue
                sym = self.flag(e.get("is_symmetric", False), f"{w}.is_symmetric")
                syms.add(sym)
                encs.append(replace(self.legacy_encoding(e, w, bw, notes, i), symmetric=sym))
            if len(bws) > 1 or len(floats) > 1 or len(syms) > 1:
                self.fail(where, "mixes bitwidths, dtypes or symmetry across channels", "one kind of encoding per tensor")
            bw = bws.pop()
            if floats.pop():
                out.append(TensorQuant(name, kind, f"float{bw}", bw, [], False, None,
                                       [f"float{bw}: not quantized (mixed precision)"]))
                continue
            out.append(self.finish(name, kind, where, encs, bw, syms.pop() if syms else False, notes))
        return out

    def legacy_encoding(self, e: dict, w: str, bw: int, notes: list[str], i: int) -> Encoding:
        lo = self.number(e, "min", w, required=False)
        hi = self.number(e, "max", w, required=False)
        scale = self.number(e, "scale", w, required=False)
        off = None if e.get("offset") is None else self.integer(e["offset"], f"{w}.offset")
        if scale is not None and scale <= 0:
            self.fail(f"{w}.scale", f"must be > 0 (got {scale})", "scale > 0")
        if lo is None or hi is None:
            if scale is None or off is None:
                self.fail(f"{w}.min" if lo is None else f"{w}.max", "is missing",
                          "bitwidth, min and max are required (or scale and offset)")
            if scale > FLOAT32_MAX or np.float32(scale) == 0:   # the rules of a versioned file's scale, offset
                self.fail(f"{w}.scale", f"must be a finite float32 number > 0 (got {scale:g})",
                          "scale > 0 and within float32")
            if not -(2**bw) < off <= 0:
                self.fail(f"{w}.offset", f"{off} puts zero outside the {bw}-bit codes",
                          f"-(2^{bw} - 1) <= offset <= 0")
            notes.append(f"[{i}] no min/max: scale and offset taken as given")
            return Encoding(bw, off * scale, (2**bw - 1 + off) * scale, scale, off, False)
        if lo > hi:
            self.fail(f"{w}.min", f"min {lo} is above max {hi}", "min <= max")
        enc = compute_encoding(vmin=lo, vmax=hi, bitwidth=bw, min_range=self.min_range)
        if not enc.scale <= FLOAT32_MAX:   # (max - min) / (2^bw - 1) beyond float32 (or inf)
            self.fail(f"{w}.max", f"the range [{lo:g}, {hi:g}] needs a scale beyond float32",
                      "scale > 0 and within float32")
        if off is not None and off != enc.offset:
            notes.append(f"[{i}] file offset {off} disagrees with min/max (offset {enc.offset}): "
                         f"scale and offset are recomputed from bitwidth, min and max")
        elif scale is not None and not math.isclose(scale, enc.scale, rel_tol=1e-5):
            notes.append(f"[{i}] file scale {scale:.9g} disagrees with min/max (scale {enc.scale:.9g}): "
                         f"recomputed from bitwidth, min and max")
        return enc

    # ---- 1.0.0: [ {name, bw, dtype, enc_type, is_sym, scale: [...], offset: [...]} ]
    def v1_section(self, sec: list, key: str, kind: str) -> list[TensorQuant]:
        if not isinstance(sec, list):
            self.fail(key, "must be a list of encodings in a versioned file", "versioned section")
        out = []
        for i, e in enumerate(sec):
            w = f"{key}[{i}]"
            if not isinstance(e, dict):
                self.fail(w, "must be a JSON object {name, bw, dtype, enc_type, ...}", "encoding object")
            name = e.get("name")
            if not isinstance(name, str) or not name:
                self.fail(f"{w}.name", "must be a non-empty string", "named encodings")
            dt = e.get("dtype", "INT")
            is_float = self.dtype_kind(dt, f"{w}.dtype")
            bw = self.bitwidth(e.get("bw", e.get("bitwidth")), f"{w}.bw", is_float)
            if is_float:
                out.append(TensorQuant(name, kind, f"float{bw}", bw, [], False, None,
                                       [f"float{bw}: not quantized (mixed precision)"]))
                continue
            enc_type = e.get("enc_type", "PER_TENSOR")
            if enc_type not in ("PER_TENSOR", "PER_CHANNEL"):
                self.fail(f"{w}.enc_type", f"{json.dumps(enc_type)} is not supported",
                          "enc_type PER_TENSOR or PER_CHANNEL")
            sym = self.flag(e.get("is_sym", False), f"{w}.is_sym")
            scales, offs = e.get("scale"), e.get("offset")
            if not isinstance(scales, list) or not scales:
                self.fail(f"{w}.scale", "must be a non-empty list of numbers", "scale list")
            if not isinstance(offs, list) or len(offs) != len(scales):
                self.fail(f"{w}.offset", f"must be a list as long as scale ({len(scales)})",
                          "len(offset) == len(scale)")
            if enc_type == "PER_TENSOR" and len(scales) != 1:
                self.fail(f"{w}.scale", f"PER_TENSOR has {len(scales)} values", "PER_TENSOR holds one scale")
            encs = []
            for c, (s, o) in enumerate(zip(scales, offs)):
                if (isinstance(s, bool) or not isinstance(s, (int, float)) or not _finite(s) or s <= 0
                        or s > FLOAT32_MAX or np.float32(s) == 0):
                    self.fail(f"{w}.scale[{c}]", f"must be a finite float32 number > 0 (got {json.dumps(s)})",
                              "scale > 0 and within float32")
                off = self.integer(o, f"{w}.offset[{c}]")
                if not -(2**bw) < off <= 0:
                    self.fail(f"{w}.offset[{c}]", f"{off} puts zero outside the {bw}-bit codes",
                              f"-(2^{bw} - 1) <= offset <= 0")
                encs.append(Encoding(bw, off * float(s), (2**bw - 1 + off) * float(s), float(s), off, sym))
            tq = self.finish(name, kind, w, encs, bw, sym, [])
            if "axis" in e and len(encs) > 1:
                tq.axis = self.integer(e["axis"], f"{w}.axis")
            out.append(tq)
        return out
