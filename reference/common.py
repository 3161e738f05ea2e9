"""Helpers shared by the per-op golden functions."""

from __future__ import annotations


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


def binary_operands(case):
    """The two inputs of an elementwise binary op, checked to broadcast (NumPy's rules, as LiteRT's
    BroadcastBinaryOpSimple): a case whose shapes do not is a QconformError naming the field, not
    a ValueError from inside the golden (the output's shape is checked where the result is laid out)."""
    a, b = case.inputs[0], case.inputs[1]
    try:
        np.broadcast_shapes(tuple(a.shape), tuple(b.shape))
    except ValueError:
        raise QconformError(f"{list(a.shape)} and {list(b.shape)} do not broadcast", field="inputs[1].shape",
                            rule=f"{case.op} inputs broadcast to one shape") from None
    return a, b
