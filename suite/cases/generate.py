"""Deterministic, seeded generation of operator cases from the spec tables.

Each operator has a generator (``suite/cases/generators/*.py``, registered with
``@generator``) and a set of named variants: edge variants with a fixed number
of cases each (saturation at both ends, zero points at the dtype limits, odd
shapes, ...) and ``random`` taking the rest. A case's random stream depends only
on (seed, op, variant, index), so raising ``--cases-per-op`` adds cases without
changing the earlier ones, and ids are stable: ``CONV_2D-sat_hi-001``.
"""

from __future__ import annotations

import importlib
import pkgutil
import zlib
from dataclasses import dataclass, field
from typing import Callable, Iterable

import numpy as np

from reference import arith
from suite.cases import generators as _generators_pkg
from suite.core.case import Case, Tensor
from suite.core.dtypes import DTYPES
from suite.core.spec import tables

DEFAULT_CASES_PER_OP = 30
DEFAULT_SEED = 0

# Edge variants every quantized op gets unless it opts out.
COMMON_VARIANTS = {"sat_hi": 2, "sat_lo": 2, "zp_min": 2, "zp_max": 2, "odd_shape": 2}


@dataclass
class OpGenerator:
    op: str
    fn: Callable[["Gen"], Case]
    variants: dict[str, int]
    clause: str = ""

    def plan(self, n: int) -> list[tuple[str, int]]:
        """(variant, index) pairs for n cases: edge variants first, then random.

        With fewer cases than edge variants the edges are taken one each, round-robin.
        """
        edges = [(v, k) for v, k in self.variants.items() if v != "random"]
        out: list[tuple[str, int]] = []
        rounds = max((k for _, k in edges), default=0)
        for r in range(rounds):
            for v, k in edges:
                if r < k and len(out) < n:
                    out.append((v, r))
        i = 0
        while len(out) < n:
            out.append(("random", i))
            i += 1
        return out


_GENERATORS: dict[str, OpGenerator] = {}
_EXTRA: dict[str, list[OpGenerator]] = {}   # op -> extra generators (fixed variants, e.g. QNN dtypes)
_VARIANT_OWNER: dict[tuple[str, str], OpGenerator] = {}
_loaded = False


def generator(op: str, variants: dict[str, int] | None = None, common: bool = True, clause: str = "",
              extra: bool = False):
    """Register ``fn(g: Gen) -> Case`` as the generator of ``op``.

    ``variants`` adds op-specific edge variants (name -> number of cases); the
    common edge variants are included unless ``common=False``. With ``extra=True``
    the generator adds its variants (fixed counts, no ``random``) to the op's main
    generator, e.g. cases of another spec table such as QNN's uint8/uint16.
    """
    def deco(fn):
        v = dict(COMMON_VARIANTS) if common and not extra else {}
        v.update(variants or {})
        g = OpGenerator(op, fn, v, clause)
        if extra:
            _EXTRA.setdefault(op, []).append(g)
        else:
            _GENERATORS[op] = g
        for name in v:
            _VARIANT_OWNER[(op, name)] = g
        return fn
    return deco


def _load():
    global _loaded
    if _loaded:
        return
    for m in sorted(pkgutil.iter_modules(_generators_pkg.__path__), key=lambda m: m.name):
        importlib.import_module(f"{_generators_pkg.__name__}.{m.name}")
    _loaded = True


def generator_ops() -> list[str]:
    """Operators with a generator, in spec-table order (LiteRT int8 first, then other tables)."""
    _load()
    ops = list(_GENERATORS) + [op for op in _EXTRA if op not in _GENERATORS]
    order: dict[str, int] = {}
    for t in sorted(tables().values(), key=lambda t: (t.name != "litert-int8", t.name)):
        for op in t.ops:
            order.setdefault(op, len(order))
    return sorted(ops, key=lambda op: (order.get(op, len(order)), ops.index(op)))


def get_generator(op: str) -> OpGenerator:
    _load()
    return _GENERATORS[op]


def stream(seed: int, *keys: str | int) -> np.random.Generator:
    """A random stream fixed by the seed and the keys (stable across processes)."""
    words = [int(seed) & 0xFFFFFFFF]
    for k in keys:
        words.append(zlib.crc32(str(k).encode()) if not isinstance(k, int) else int(k) & 0xFFFFFFFF)
    return np.random.default_rng(words)


def _plan(op: str, n: int) -> list[tuple[str, int]]:
    """The main generator's plan for n cases, then every extra generator's fixed variants."""
    out = _GENERATORS[op].plan(n) if op in _GENERATORS else []
    for g in _EXTRA.get(op, []):
        out += [(v, i) for v, k in g.variants.items() for i in range(k)]
    return out


def make_case(op: str, variant: str, index: int, seed: int = DEFAULT_SEED) -> Case:
    _load()
    gen = _VARIANT_OWNER.get((op, variant)) or get_generator(op)
    g = Gen(op=op, variant=variant, index=index, seed=seed, rng=stream(seed, op, variant, index))
    case = gen.fn(g)
    case.op = op
    case.variant = variant
    case.index = index
    case.id = case_id(op, variant, index)
    if not case.clause:
        case.clause = g.clause or gen.clause or f"{case.spec}/{op}"
    return case


def case_id(op: str, variant: str, index: int) -> str:
    return f"{op}-{variant}-{index:03d}"


def generate(ops: Iterable[str] | None = None, cases_per_op: int = DEFAULT_CASES_PER_OP,
             seed: int = DEFAULT_SEED) -> list[Case]:
    _load()
    ops = list(ops) if ops is not None else generator_ops()
    cases: list[Case] = []
    for op in ops:
        for variant, index in _plan(op, cases_per_op):
            cases.append(make_case(op, variant, index, seed))
    return cases


def plan_ids(ops: Iterable[str] | None = None, cases_per_op: int = DEFAULT_CASES_PER_OP) -> list[tuple[str, str, int]]:
    """(op, variant, index) of the cases ``generate`` would make, without making them."""
    _load()
    ops = list(ops) if ops is not None else generator_ops()
    return [(op, v, i) for op in ops for v, i in _plan(op, cases_per_op)]


# --------------------------------------------------------------------------- helpers

def f32(x: float) -> float:
    """A float32-exact Python float (scales are float32 in every runtime)."""
    return float(np.float32(x))


@dataclass
class Gen:
    """What a generator gets: its random stream, its variant, and helpers."""

    op: str
    variant: str
    index: int
    seed: int
    rng: np.random.Generator
    clause: str = ""
    notes: list[str] = field(default_factory=list)

    # ---- scalars
    def scale(self, lo: float = 2.0 ** -10, hi: float = 0.5) -> float:
        """A log-uniform float32-exact scale in [lo, hi]."""
        return f32(np.exp(self.rng.uniform(np.log(lo), np.log(hi))))

    def zero_point(self, dtype: str = "int8") -> int:
        d = DTYPES[dtype]
        if self.variant == "zp_min":
            return d.qmin
        if self.variant == "zp_max":
            return d.qmax
        span = d.qmax - d.qmin
        return int(self.rng.integers(d.qmin + span // 8, d.qmax - span // 8 + 1))

    def choice(self, seq):
        return seq[int(self.rng.integers(0, len(seq)))]

    def randint(self, lo: int, hi: int) -> int:
        """An integer in [lo, hi] inclusive."""
        return int(self.rng.integers(lo, hi + 1))

    # ---- shapes
    def dims(self, rank: int, lo: int = 1, hi: int = 8) -> list[int]:
        if self.variant == "odd_shape":
            return [self.choice([1, 3, 5, 7, 9, 13]) for _ in range(rank)]
        return [self.randint(lo, hi) for _ in range(rank)]

    # ---- data
    def codes(self, shape, dtype: str = "int8", zero_point: int = 0, lo: int | None = None,
              hi: int | None = None) -> np.ndarray:
        """Random codes of a quantized activation.

        ``sat_hi`` draws from the top of the range (large positive reals) and ``sat_lo`` from
        the bottom, so outputs saturate at both ends; others are uniform.
        """
        d = DTYPES[dtype]
        lo = d.qmin if lo is None else lo
        hi = d.qmax if hi is None else hi
        if self.variant == "sat_hi":
            lo = max(lo, min(hi, zero_point + (hi - zero_point) // 2))
        elif self.variant == "sat_lo":
            hi = min(hi, max(lo, zero_point - (zero_point - lo) // 2))
        return self.rng.integers(lo, hi + 1, size=tuple(shape)).astype(d.storage)

    def activation(self, shape, scale: float | None = None, zero_point: int | None = None,
                   dtype: str = "int8", data: np.ndarray | None = None) -> Tensor:
        s = self.scale() if scale is None else f32(scale)
        z = self.zero_point(dtype) if zero_point is None else int(zero_point)
        if data is None:
            data = self.codes(shape, dtype, z)
        return Tensor(dtype, tuple(int(x) for x in shape), np.asarray(data).astype(DTYPES[dtype].storage),
                      [s], [z], 0)

    def weights(self, shape, axis: int, per_axis: bool = True, scales: list[float] | None = None,
                lo: int = -127, hi: int = 127) -> Tensor:
        n = shape[axis]
        if scales is None:
            if per_axis:
                if self.variant == "perchannel_wide":
                    # scales spread over 2^12: a kernel that shares one multiplier fails
                    scales = [f32(2.0 ** self.rng.uniform(-14, -2)) for _ in range(n)]
                else:
                    base = np.exp(self.rng.uniform(np.log(2.0 ** -9), np.log(2.0 ** -4)))
                    scales = [f32(base * 2.0 ** self.rng.uniform(-1.5, 1.5)) for _ in range(n)]
            else:
                scales = [self.scale(2.0 ** -9, 2.0 ** -4)]
        data = self.rng.integers(lo, hi + 1, size=tuple(shape)).astype(np.int8)
        return Tensor("int8", tuple(shape), data, [f32(s) for s in scales], [0] * len(scales),
                      axis if len(scales) > 1 else 0, const=True)

    def bias(self, input_scale: float, weight: Tensor, n: int, magnitude: float = 2.0 ** 12) -> Tensor:
        """An int32 bias with scale input_scale * weight_scale[c] and zero point 0."""
        ws = weight.scale
        scales = [f32(np.float32(input_scale) * np.float32(s)) for s in ws]   # one per weight scale
        data = self.rng.integers(-int(magnitude), int(magnitude) + 1, size=(n,)).astype(np.int32)
        return Tensor("int32", (n,), data, scales, [0] * len(scales), 0, const=True)

    def param(self, values, dtype: str = "int32") -> Tensor:
        arr = np.asarray(values, dtype=DTYPES[dtype].storage)
        return Tensor(dtype, tuple(arr.shape), arr, None, None, 0, const=True)

    def output(self, shape, scale: float, zero_point: int, dtype: str = "int8") -> Tensor:
        return Tensor(dtype, tuple(int(x) for x in shape), None, [f32(scale)], [int(zero_point)], 0)

    def output_qparams(self, real: np.ndarray, dtype: str = "int8") -> tuple[float, int]:
        """Output (scale, zero point) fitted to the real values an op produces.

        The range of the values is mapped onto the dtype's range (with a little room);
        ``sat_hi``/``sat_lo`` shrink the scale 2x so outputs clip at the ends, and
        ``zp_min``/``zp_max`` pin the zero point at the dtype's limits.
        """
        d = DTYPES[dtype]
        real = np.asarray(real, dtype=np.float64)
        lo, hi = (float(real.min()), float(real.max())) if real.size else (-1.0, 1.0)
        full = max(hi - lo, 1e-6)
        if self.variant == "zp_min":
            # zero point at qmin: only reals >= 0 are representable
            span = max(hi, 0.25 * full)
            return f32(span / (d.qmax - d.qmin) * 1.05), d.qmin
        if self.variant == "zp_max":
            # zero point at qmax: only reals <= 0 are representable
            span = max(-lo, 0.25 * full)
            return f32(span / (d.qmax - d.qmin) * 1.05), d.qmax
        lo, hi = min(lo, 0.0), max(hi, 0.0)
        span = max(hi - lo, 1e-6)
        s = span / (d.qmax - d.qmin) * self.rng.uniform(0.9, 1.3)
        if self.variant in ("sat_hi", "sat_lo"):
            s /= 2.0
        s = f32(s)
        z = int(np.clip(np.round(d.qmin - lo / s), d.qmin, d.qmax))
        if self.variant in ("sat_hi", "sat_lo"):
            z = int(np.clip(round((d.qmin + d.qmax) / 2), d.qmin, d.qmax))
        return s, z


def rounding_inputs(g: Gen, kind: str, m: int, s: int, lo: int, hi: int, count: int) -> np.ndarray | None:
    """``count`` integers x in [lo, hi] (drawn with ``g``) that MultiplyByQuantizedMultiplier(x, m, s)
    makes interesting: kind "tie": x * m * 2^(s-31) is exactly k + 1/2; "ties": such a tie that the
    default build rounds away from zero (its final RoundingDivideByPOT decides it, not
    SaturatingRoundingDoublingHighMul, which rounds negative ties up), half of them below zero
    where [lo, hi] has both; kind "dbl_vs_single": the two-step (default build) and one-step
    (TFLITE_SINGLE_ROUNDING) results differ away from a tie. None if [lo, hi] holds none."""
    x = np.arange(lo, hi + 1, dtype=np.int64)
    total = 31 - s
    tie = np.mod(x * m, np.int64(1) << total) == (np.int64(1) << (total - 1))
    if kind == "tie":
        pick = x[tie]
    elif kind == "ties":
        away = (x * m >> total) + (x > 0)          # floor of the tie, + 1 above zero
        pick = x[tie & (arith.mbqm_double(x, m, s) == away)]
        neg, pos = pick[pick < 0], pick[pick > 0]
        if neg.size and pos.size:
            half = count // 2
            return np.concatenate([neg[g.rng.integers(0, neg.size, size=half)],
                                   pos[g.rng.integers(0, pos.size, size=count - half)]])
    else:
        pick = x[(arith.mbqm_double(x, m, s) != arith.mbqm_single(x, m, s)) & ~tie]
    if pick.size == 0:
        return None
    return pick[g.rng.integers(0, pick.size, size=count)]


def real_values(t: Tensor) -> np.ndarray:
    """Dequantized values of a generated tensor (for fitting output parameters)."""
    s, z = t.broadcast_qparams()
    return (np.asarray(t.data, dtype=np.float64) - z) * s
