"""The golden's operator registry: one reference function per operator."""

from __future__ import annotations

import importlib
import pkgutil
from typing import Callable

import numpy as np

from .schemes import Scheme, get_scheme

GoldenFn = Callable[..., list]
_OPS: dict[str, GoldenFn] = {}
_loaded = False


def register(*ops: str):
    """Decorator: ``@register("ADD")`` makes ``fn(case, scheme) -> [outputs]`` the golden of ADD."""
    def deco(fn):
        for op in ops:
            _OPS[op] = fn
        return fn
    return deco


def _load():
    global _loaded
    if _loaded:
        return
    from . import ops as pkg
    for m in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        importlib.import_module(f"{pkg.__name__}.{m.name}")
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
    from suite.dtypes import DTYPES
    if sch.exact:
        return [np.asarray(o, dtype=np.float64).reshape(spec.shape) for o, spec in zip(outs, case.outputs)]
    result = []
    for o, spec in zip(outs, case.outputs):
        arr = np.asarray(o)
        info = DTYPES[spec.dtype]
        if info.qmin is not None and arr.size:
            assert arr.min() >= info.qmin and arr.max() <= info.qmax, (case.op, spec.dtype)
        result.append(arr.astype(info.storage).reshape(spec.shape))
    return result
