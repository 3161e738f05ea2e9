"""Comparison of a target's outputs with the golden, in LSB of the output codes."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from suite.core.dtypes import DTYPES


@dataclass
class Comparison:
    elements: int = 0
    mismatches: int = 0
    max_abs_lsb: float = 0.0
    sum_err_lsb: float = 0.0
    first_index: tuple[int, ...] | None = None   # first mismatching element (output 0 first)
    first_output: int | None = None
    first_got: float | int | None = None
    first_want: float | int | None = None
    garbage: str | None = None                   # what was wrong if the target returned garbage
    errors: list[np.ndarray] = field(default_factory=list, repr=False)   # got - want per output

    @property
    def bit_exact(self) -> bool:
        return self.garbage is None and self.mismatches == 0

    @property
    def mean_err_lsb(self) -> float:
        return self.sum_err_lsb / self.elements if self.elements else 0.0

    @property
    def exact_pct(self) -> float:
        return 100.0 * (self.elements - self.mismatches) / self.elements if self.elements else 100.0


def float_ordinal(a: np.ndarray) -> np.ndarray:
    """float32 bit patterns mapped to integers whose differences count ULPs."""
    i = np.asarray(a, dtype=np.float32).view(np.int32).astype(np.int64)
    return np.where(i < 0, -(2**31) - i, i)


def compare(want: list[np.ndarray], got: list[np.ndarray] | None, specs) -> Comparison:
    """Element-wise comparison; float32 outputs are measured in ULPs, integers in LSB."""
    c = Comparison()
    if got is None or len(got) != len(want):
        c.garbage = f"expected {len(want)} output(s), got {0 if got is None else len(got)}"
        return c
    for k, (w, g, spec) in enumerate(zip(want, got, specs)):
        g = np.asarray(g)
        w = np.asarray(w)
        if tuple(g.shape) != tuple(w.shape):
            if g.size == w.size and g.size > 0 and _squeezable(g.shape, w.shape):
                g = g.reshape(w.shape)
            else:
                c.garbage = f"output {k}: shape {list(g.shape)}, expected {list(w.shape)}"
                return c
        info = DTYPES[spec.dtype]
        if spec.dtype == "float32":
            if g.dtype.kind != "f":
                c.garbage = f"output {k}: dtype {g.dtype}, expected float32"
                return c
            if np.any(np.isnan(g) & ~np.isnan(w)):   # a NaN is garbage, not a distance in ULP
                c.garbage = f"output {k}: NaN where float32 values are due"
                return c
            gi, wi = float_ordinal(g), float_ordinal(w)
        elif spec.dtype == "bool":
            if g.dtype.kind not in "bui":
                c.garbage = f"output {k}: dtype {g.dtype}, expected bool"
                return c
            gi, wi = g.astype(np.int64), w.astype(np.int64)
            if g.size and (gi.min() < 0 or gi.max() > 1):   # out-of-range codes: garbage, as for integers
                c.garbage = f"output {k}: values outside the bool range (0, 1)"
                return c
        else:
            if g.dtype.kind == "f":
                if not np.all(np.isfinite(g)):
                    c.garbage = f"output {k}: non-finite values where {spec.dtype} codes are due"
                    return c
                if not np.all(g == np.round(g)):
                    c.garbage = f"output {k}: fractional values where {spec.dtype} codes are due"
                    return c
            elif g.dtype.kind not in "iub":
                c.garbage = f"output {k}: dtype {g.dtype}, expected {spec.dtype}"
                return c
            gi, wi = g.astype(np.int64), w.astype(np.int64)
            if g.size and info.qmin is not None and (gi.min() < info.qmin or gi.max() > info.qmax):
                c.garbage = f"output {k}: values outside the {spec.dtype} range"
                return c
        err = gi - wi
        c.errors.append(err)
        c.elements += err.size
        nz = np.flatnonzero(err)
        c.mismatches += int(nz.size)
        if nz.size:   # (else every error is zero: the max and the sum stay as they are)
            c.max_abs_lsb = max(c.max_abs_lsb, float(np.abs(err).max()))
            c.sum_err_lsb += float(err.sum())
        if nz.size and c.first_index is None:
            idx = np.unravel_index(int(nz[0]), err.shape)
            c.first_index = tuple(int(i) for i in idx)
            c.first_output = k
            c.first_got = g.ravel()[nz[0]].item()
            c.first_want = w.ravel()[nz[0]].item()
    return c


def _squeezable(a, b) -> bool:
    return [d for d in a if d != 1] == [d for d in b if d != 1]
