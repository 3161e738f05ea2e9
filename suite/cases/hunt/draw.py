"""Where a hunted case's choices come from, and the helpers every op's space is drawn with.

A space (``suite/cases/hunt/*.py``) builds a case from a :class:`Draw`: every decision (a table,
a rank, a scale's exponent, a data style) is one ``int`` / ``pick`` / ``flag`` call. Under the
hunt the calls are hypothesis draws (:class:`HypothesisDraw`), so hypothesis's targeting can
mutate any one of them toward a larger disagreement; :class:`RandomDraw` makes the same calls
from a NumPy stream (the untargeted baseline docs/hunt.md compares against). Data arrays are not
drawn element by element: a style and a seed are drawn, and NumPy fills the array.
"""

from __future__ import annotations

import math

import numpy as np

from suite.core.case import Tensor
from suite.core.dtypes import DTYPES
from suite.core.spec import OpRule, TensorRule, rule, tables


def _st():
    """hypothesis's strategies, imported by a hunt only (every judged case's params import this
    module: a run and the CLI's --help need not import hypothesis)."""
    from hypothesis import strategies
    return strategies

# extents that sit on and around the tile sizes kernels vectorize by
DIMS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257,
        511, 512, 513, 1023, 1024, 1025)
ACTS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")
STYLES = ("uniform", "near_zp", "high", "low", "extremes", "constant", "few", "sparse")
MIN_SCALE, MAX_SCALE = 2.0 ** -100, 2.0 ** 60   # float32 normals with room for products


class Draw:
    """The choices of one case. ``int(lo, hi)`` is inclusive."""

    def int(self, lo: int, hi: int) -> int:
        raise NotImplementedError

    def pick(self, seq):
        seq = list(seq)
        return seq[self.int(0, len(seq) - 1)]

    def flag(self) -> bool:
        return bool(self.int(0, 1))


class HypothesisDraw(Draw):
    def __init__(self, data):
        self.data = data

    def int(self, lo: int, hi: int) -> int:
        return self.data.draw(_st().integers(int(lo), int(hi)))

    def pick(self, seq):
        return self.data.draw(_st().sampled_from(list(seq)))

    def flag(self) -> bool:
        return self.data.draw(_st().booleans())


class RandomDraw(Draw):
    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def int(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(int(lo), int(hi) + 1))


# ----------------------------------------------------------------------------- the spec tables

def op_tables(op: str) -> list[str]:
    """The spec tables that have ``op`` (LiteRT's first)."""
    names = sorted(tables(), key=lambda n: (n != "litert-int8", n))
    return [n for n in names if op in tables()[n].ops]


def table_rule(d: Draw, op: str) -> OpRule:
    """The op's rule in one of the tables that have it."""
    return rule(op, d.pick(op_tables(op)))


def qrange(tr: TensorRule, dtype: str) -> tuple[int, int]:
    """The codes a tensor of this rule may hold (the rule's range when it has one dtype)."""
    dt = DTYPES[dtype]
    if tr.range is not None and len(tr.dtypes) == 1:
        return int(tr.range[0]), int(tr.range[1])
    return int(dt.qmin), int(dt.qmax)


# ----------------------------------------------------------------------------- scalars

def f32(x: float) -> float:
    return float(np.float32(min(max(float(x), MIN_SCALE), MAX_SCALE)))


def mantissa(d: Draw) -> float:
    """1, a full 23-bit mantissa, a short one (few bits: exact products), or the top of the range."""
    kind = d.int(0, 3)
    if kind == 0:
        return 1.0
    if kind == 1:
        return 1.0 + d.int(1, 2 ** 23 - 1) / 2.0 ** 23
    if kind == 2:
        return 1.0 + d.int(1, 127) / 128.0
    return 2.0 - 2.0 ** -23


def scale(d: Draw, lo: int = -24, hi: int = 4) -> float:
    """A float32 scale mantissa * 2^e, e in [lo, hi]."""
    return f32(mantissa(d) * 2.0 ** d.int(lo, hi))


def rel(d: Draw, base: float, near: int = 3, far: int = 24) -> float:
    """A scale relative to ``base``: the same, a few octaves off, or up to ``far`` octaves off."""
    how = d.int(0, 2)
    if how == 0:
        return f32(base)
    k = d.int(-near, near) if how == 1 else d.int(-far, far)
    return f32(base * mantissa(d) * 2.0 ** k)


def zero_point(d: Draw, tr: TensorRule, dtype: str) -> int:
    if tr.zero_point is not None:
        return int(tr.zero_point)
    lo, hi = qrange(tr, dtype)
    return d.int(lo, hi)


def act(d: Draw) -> str:
    return d.pick(ACTS)


# ----------------------------------------------------------------------------- shapes

def dim(d: Draw, hi: int = 257, lo: int = 1) -> int:
    if d.flag():
        return d.int(lo, max(lo, min(8, hi)))
    return d.pick([x for x in DIMS if lo <= x <= hi] or [lo])


def fit(dims: list[int], cap: int, keep: tuple[int, ...] = ()) -> list[int]:
    """``dims`` with the largest extents halved (those in ``keep`` last) until the product is <= cap."""
    dims = list(dims)
    while math.prod(dims) > cap:
        free = [i for i in range(len(dims)) if i not in keep and dims[i] > 1] or \
               [i for i in range(len(dims)) if dims[i] > 1]
        i = max(free, key=lambda j: dims[j])
        dims[i] = max(1, dims[i] // 2)
    return dims


def shape(d: Draw, rank: int, cap: int = 4096, hi: int = 257) -> list[int]:
    return fit([dim(d, hi) for _ in range(rank)], cap)


def partner(d: Draw, shp: list[int]) -> list[int]:
    """A shape that broadcasts with ``shp``: the same, some extents 1, or fewer leading dims."""
    how = d.int(0, 3)
    if how == 0 or not shp:
        return list(shp)
    out = [1 if d.flag() else x for x in shp]
    if how == 3:
        out = out[d.int(0, len(out)):]
    return out


# ----------------------------------------------------------------------------- data

def codes(d: Draw, shp, lo: int, hi: int, zp: int = 0) -> np.ndarray:
    """Integer codes in [lo, hi] (int64) in one of the data styles."""
    style = d.pick(STYLES)
    rng = np.random.default_rng(d.int(0, 2 ** 32 - 1))
    shp = tuple(int(x) for x in shp)
    zp = int(min(max(zp, lo), hi))
    if style == "near_zp":
        k = d.int(0, 8)
        out = rng.integers(max(lo, zp - k), min(hi, zp + k) + 1, size=shp)
    elif style in ("high", "low"):
        q = (hi - lo) // 4
        out = rng.integers(hi - q, hi + 1, size=shp) if style == "high" else rng.integers(lo, lo + q + 1, size=shp)
    elif style == "extremes":
        out = np.where(rng.random(shp) < 0.5, lo, hi)
    elif style == "constant":
        out = np.full(shp, d.int(lo, hi))
    elif style == "few":
        vals = rng.integers(lo, hi + 1, size=d.int(2, 4))
        out = vals[rng.integers(0, vals.size, size=shp)]
    elif style == "sparse":
        out = np.where(rng.random(shp) < 0.8, zp, rng.integers(lo, hi + 1, size=shp))
    else:
        out = rng.integers(lo, hi + 1, size=shp)
    return np.asarray(out, dtype=np.int64)


def real_values(t) -> np.ndarray:
    s, z = t.broadcast_qparams()
    return (np.asarray(t.data, np.float64) - z) * s


def fitted(d: Draw, real: np.ndarray, lo: int, hi: int) -> tuple[float, int]:
    """Output (scale, zero point) that map the reals' range onto [lo, hi], give or take a little."""
    real = np.asarray(real, np.float64)
    a, b = (min(float(real.min()), 0.0), max(float(real.max()), 0.0)) if real.size else (-1.0, 1.0)
    span = max(b - a, 1e-30)
    s = f32(span / (hi - lo) * 2.0 ** (d.int(-8, 8) / 8))
    return s, int(min(max(round(lo - a / s), lo), hi))


# ----------------------------------------------------------------------------- tensors

def qtensor(dtype: str, shp, data, s: float, z: int, const: bool | None = None) -> Tensor:
    """A per-tensor quantized tensor holding ``data``."""
    shp = tuple(int(x) for x in shp)
    arr = np.asarray(data).astype(np.int64).astype(DTYPES[dtype].storage).reshape(shp)
    return Tensor(dtype, shp, arr, [f32(s)], [int(z)], 0, const)


def activation(d: Draw, tr: TensorRule, shp, s: float | None = None, z: int | None = None,
               dtype: str | None = None) -> Tensor:
    """An activation of rule ``tr``: its dtype, a scale, a zero point and codes (as given, or drawn)."""
    dtype = dtype or d.pick(tr.dtypes)
    s = scale(d) if s is None else s
    z = zero_point(d, tr, dtype) if z is None else z
    lo, hi = qrange(tr, dtype)
    return qtensor(dtype, shp, codes(d, shp, lo, hi, z), s, z)


def out_tensor(dtype: str, shp, s: float | None = None, z: int | None = None) -> Tensor:
    shp = tuple(int(x) for x in shp)
    if s is None:
        return Tensor(dtype, shp, None, None, None, 0)
    return Tensor(dtype, shp, None, [f32(s)], [int(z)], 0)


def param(values, dtype: str = "int32") -> Tensor:
    arr = np.asarray(values, dtype=DTYPES[dtype].storage)
    return Tensor(dtype, tuple(arr.shape), arr, None, None, 0, const=True)


def output(d: Draw, op_rule: OpRule, shp, real: np.ndarray, base: float, far: int = 24) -> Tensor:
    """Output 0 of a requantizing op: the fixed (scale, zero point) of a fixed_output rule, else
    one fitted to the real result, or a scale ``base`` x 2^k (k up to ``far``) and any zero point."""
    tr = op_rule.outputs[0]
    dtype = d.pick(tr.dtypes)
    if op_rule.fixed_output is not None:
        return out_tensor(dtype, shp, *op_rule.fixed_output)
    lo, hi = qrange(tr, dtype)
    if d.flag():
        return out_tensor(dtype, shp, *fitted(d, real, lo, hi))
    return out_tensor(dtype, shp, rel(d, base, 3, far), zero_point(d, tr, dtype))
