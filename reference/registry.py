"""The golden's operator registry: one reference function per operator."""

from __future__ import annotations

import importlib
import math
import pkgutil
from typing import Callable

import numpy as np

from suite.core.dtypes import DTYPES
from suite.core.errors import QconformError

from reference import ops as _ops_pkg
from reference.arith import int_range
from reference.schemes import Scheme, get_scheme

GoldenFn = Callable[..., list]
_OPS: dict[str, GoldenFn] = {}
_ROUNDING: dict[str, tuple[str, ...]] = {}
_loaded = False

#: how an op's golden (its LiteRT reference kernel, default build) turns exact arithmetic into
#: output codes: what a kernel must follow to be bit-exact (docs/arithmetic.md is this table)
ROUNDING_PATHS = {
    "fixed-double": "fixed point, two roundings: MultiplyByQuantizedMultiplier = SaturatingRoundingDoublingHighMul "
                    "(its nudge rounds negative ties up) then RoundingDivideByPOT (ties away from zero)",
    "float-round": "one rounding in double precision: (int32)std::round(value * real multiplier), ties away from zero",
    "int-div-round": "integer division rounding half away from zero: (sum +- count / 2) / count, truncating",
    "shift-round": "10-bit fixed-point interpolation weights, one rounding shift by 20 (sum +- 2^19) / 2^20, "
                   "ties away from zero",
    "float-table": "a table of the function in float32 over the 256 input codes, roundf (ties away from zero)",
    "fixed-int16": "an int16 fixed-point pipeline: SaturatingRoundingDoublingHighMul / RoundingDivideByPOT on "
                   "16 bits and a truncating doubling high mul",
    "fixed-exp": "gemmlowp fixed-point exp / log with MultiplyByQuantizedMultiplier inside, then a rounding shift",
    "float-half-even": "float32 value / scale, rounded half to even (ONNX QuantizeLinear)",
    "none": "no rounding: codes copied, selected, compared as exact reals, or float outputs",
}


def register(*ops: str, rounding: str | tuple[str, ...] = ()):
    """Decorator: ``@register("ADD", rounding="fixed-double")`` makes ``fn(case, scheme) -> [outputs]``
    the golden of ADD; ``rounding`` names its path(s) in :data:`ROUNDING_PATHS`."""
    paths = (rounding,) if isinstance(rounding, str) else tuple(rounding)
    unknown = [r for r in paths if r not in ROUNDING_PATHS]
    if unknown:
        raise ValueError(f"unknown rounding path(s) {unknown} of {ops}")

    def deco(fn):
        for op in ops:
            _OPS[op] = fn
            _ROUNDING[op] = paths
        return fn
    return deco


def rounding_paths() -> dict[str, tuple[str, ...]]:
    """{op: the rounding path(s) of its golden}, every op with a golden."""
    _load()
    return dict(sorted(_ROUNDING.items()))


def _load():
    global _loaded
    if _loaded:
        return
    for m in sorted(pkgutil.iter_modules(_ops_pkg.__path__), key=lambda m: m.name):
        importlib.import_module(f"{_ops_pkg.__name__}.{m.name}")
    _loaded = True


def golden_ops() -> list[str]:
    _load()
    return sorted(_OPS)


def has_golden(op: str) -> bool:
    _load()
    return op in _OPS


def golden(case, scheme: str | Scheme | None = None) -> list[np.ndarray]:
    """The exact outputs of ``case`` under ``scheme`` (default: LiteRT reference, double rounding).

    Each output is returned as an array of the output tensor's dtype and shape.
    """
    _load()
    fn = _OPS.get(case.op)
    if fn is None:
        raise KeyError(f"no golden for operator {case.op}")
    sch = get_scheme(scheme)
    outs = fn(case, sch)
    _check_outputs(case, outs)
    if sch.exact:
        return [np.asarray(o, dtype=np.float64).reshape(spec.shape) for o, spec in zip(outs, case.outputs)]
    result = []
    for o, spec in zip(outs, case.outputs):
        arr = np.asarray(o)
        info = DTYPES[spec.dtype]
        if info.qmin is not None and arr.size and not _holds_only(arr.dtype, info.qmin, info.qmax):
            assert arr.min() >= info.qmin and arr.max() <= info.qmax, (case.op, spec.dtype)
        arr = arr.astype(info.storage, copy=False)
        result.append(arr if arr.shape == tuple(spec.shape) else arr.reshape(spec.shape))
    return result


def _holds_only(dt: np.dtype, qmin: int, qmax: int) -> bool:
    """Every value of integer type ``dt`` lies in [qmin, qmax] (then no range check is needed)."""
    if dt.kind not in "iu":
        return False
    lo, hi = int_range(dt)
    return qmin <= lo and hi <= qmax


def _check_outputs(case, outs) -> None:
    """The case declares as many outputs as the op makes, each of the size the op computes (and
    of its very shape when the ranks agree), or one QconformError naming the field: never a
    reshape error, and never a silent reshape of the golden into a shape the kernel would not give.
    (A golden may hand back a different rank, e.g. the keep-dims sum of a MEAN without keep_dims.)"""
    if len(outs) != len(case.outputs):
        raise QconformError(f"{case.op} has {len(outs)} output(s), the case declares {len(case.outputs)}",
                            field="outputs", rule=f"{case.op} outputs")
    for i, (o, spec) in enumerate(zip(outs, case.outputs)):
        got = o.shape if isinstance(o, np.ndarray) else np.shape(o)
        if got == tuple(spec.shape):
            continue
        want = tuple(int(d) for d in spec.shape)
        n_got, n_want = math.prod(got), math.prod(want)
        if len(got) == len(want) and got != want:
            msg = f"must be {list(got)} as {case.op} computes it from the inputs and options (got {list(want)})"
        elif n_got != n_want:
            msg = f"{list(want)} holds {n_want} values, {case.op} computes {n_got} from the inputs and options"
        else:
            continue
        raise QconformError(msg, field=f"outputs[{i}].shape", rule=f"{case.op} output shape")
