"""LiteRT geometry and case options, shared by the golden, the targets and the generators.

The case's ``attrs`` are whatever JSON a user wrote: each reader here gives one QconformError
naming the field and the rule, never a ValueError from deep inside a golden or a model builder.
``out_size`` and ``pad_before`` are LiteRT's ComputeOutSize and ComputePadding (tested against
LiteRT itself in tests/test_geometry.py), so the golden and the targets take padding from one
place that is checked against the runtime, not from each other.
"""

from __future__ import annotations

import math

import numpy as np

from suite.core.errors import QconformError


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
    try:   # (an integer beyond the float range is not finite either)
        ok = (_is_int(v) or isinstance(v, (float, np.floating))) and math.isfinite(float(v))
    except OverflowError:
        ok = False
    if not ok:
        raise QconformError(f"must be a finite number (got {v!r})", field=f"attrs.{name}",
                            rule=f"{case.op} option")
    return float(v)


def padding(case) -> str:
    p = case.attrs.get("padding", "SAME")   # LiteRT schema default (Padding enum 0)
    if p not in ("SAME", "VALID"):
        raise QconformError(f"must be SAME or VALID (got {p!r})", field="attrs.padding",
                            rule=f"{case.op} option")
    return p


def conv_geometry(case):
    """(stride_hw, dilation_hw, padding) of a CONV_2D / DEPTHWISE_CONV_2D / TRANSPOSE_CONV case."""
    stride = (attr_int(case, "stride_h", 1, lo=1), attr_int(case, "stride_w", 1, lo=1))
    if case.op == "TRANSPOSE_CONV":
        dil = (1, 1)
    else:
        dil = (attr_int(case, "dilation_h_factor", 1, lo=1), attr_int(case, "dilation_w_factor", 1, lo=1))
    return stride, dil, padding(case)


def out_size(n: int, k: int, s: int, d: int, padding: str) -> int:
    """LiteRT ComputeOutSize (TensorFlow's GetWindowedOutputSize), C integer division included:
    a VALID kernel wider than the input gives 0 (LiteRT builds an empty output) or a negative
    size (CONV_2D / DEPTHWISE_CONV_2D then fail in Prepare), never a usable one; callers
    reject anything < 1."""
    eff = (k - 1) * d + 1
    if padding == "SAME":
        return (n + s - 1) // s
    num = n + s - eff
    return num // s if num >= 0 else -(-num // s)   # C's int division truncates toward zero


def pad_before(n: int, k: int, s: int, d: int, out: int) -> int:
    """LiteRT ComputePadding: the leading (top/left) padding; the rest goes after."""
    eff = (k - 1) * d + 1
    return max((out - 1) * s + eff - n, 0) // 2
