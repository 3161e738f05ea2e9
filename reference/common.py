"""Helpers shared by the per-op golden functions."""

from __future__ import annotations

import math

import numpy as np

from suite.core.dtypes import DTYPES
from suite.core.errors import QconformError

from reference import arith


def q(t) -> np.ndarray:
    """A tensor's codes as int64."""
    return np.asarray(t.data, dtype=np.int64)


def scale(t, i: int = 0) -> float:
    """A tensor's scale as the runtime holds it (float32), widened to a Python float."""
    return float(np.float32(t.scale[i]))


def zp(t, i: int = 0) -> int:
    return int(t.zero_point[i])


def qrange(t) -> tuple[int, int]:
    d = DTYPES[t.dtype]
    return d.qmin, d.qmax


def act_range(case, out) -> tuple[int, int]:
    """Output clamp bounds including the case's fused activation, if any."""
    lo, hi = qrange(out)
    act = case.attrs.get("fused_activation_function", "NONE")
    return arith.activation_range(act, scale(out), zp(out), lo, hi)


def dequantize(t, dtype=np.float64) -> np.ndarray:
    s, z = t.broadcast_qparams()
    return ((q(t) - z) * s.astype(np.float32).astype(dtype)).astype(dtype)


# ----------------------------------------------------------------- the case's options
# A case file's ``attrs`` are whatever JSON the user wrote: a wrong type is one QconformError
# naming the field, never a ValueError / TypeError from deep inside a golden.

def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def attr_int(case, name: str, default: int, lo: int | None = None) -> int:
    """Integer option ``name`` (``default`` when absent), at least ``lo`` if given."""
    v = case.attrs.get(name, default)
    if not _is_int(v) or (lo is not None and v < lo):
        want = "an integer" if lo is None else f"an integer >= {lo}"
        raise QconformError(f"must be {want} (got {v!r})", field=f"attrs.{name}", rule=f"{case.op} option")
    return int(v)


def attr_ints(case, name: str, default=()) -> list[int]:
    """Option ``name`` as a list of integers (absent or null: ``default``)."""
    v = case.attrs.get(name, default)
    v = default if v is None else v
    if not isinstance(v, (list, tuple)) or not all(_is_int(e) for e in v):
        raise QconformError(f"must be a list of integers (got {v!r})", field=f"attrs.{name}",
                            rule=f"{case.op} option")
    return [int(e) for e in v]


def attr_float(case, name: str, default: float) -> float:
    """Finite number option ``name`` (``default`` when absent)."""
    v = case.attrs.get(name, default)
    if not (_is_int(v) or isinstance(v, (float, np.floating))) or not math.isfinite(float(v)):
        raise QconformError(f"must be a finite number (got {v!r})", field=f"attrs.{name}",
                            rule=f"{case.op} option")
    return float(v)
