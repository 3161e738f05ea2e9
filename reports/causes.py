"""Mismatch causes and per-scheme exactness of one (case, target) result.

For every element where a target's output differs from the golden, :func:`analyse`
gives the likely cause, as one label, tried in this order:

``tie``          the exact (unrounded) result sits on k.5 (within ``TIE_EPS`` LSB) and
                 the target returned one of its two neighbours: the kernel broke the
                 tie the other way;
``scheme``       another named requantization scheme (``reference/schemes.py``) gives
                 exactly the target's value: the kernel uses different arithmetic;
``saturation``   the wanted or the returned code is at a limit of the output dtype;
``unexplained``  none of these: what a kernel team must look at first.

The same pass counts, for every kernel scheme, how many elements of the target's
output that scheme reproduces exactly (``scheme_exact``); the summary turns these into
``best_scheme`` per (op, target). Everything here is vectorized and uses the goldens the
runner already caches per case digest and scheme, so each scheme's golden is computed
once per case whatever the number of targets.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable

import numpy as np

from reference.schemes import kernel_schemes
from suite.core.compare import float_ordinal
from suite.core.dtypes import DTYPES

CAUSES = ("tie", "scheme", "saturation", "unexplained")
CAUSE_TEXT = {
    "tie": "rounding tie (exact value on k.5)",
    "scheme": "rounding scheme (another scheme gives the target's value)",
    "saturation": "saturation (want or got at a dtype limit)",
    "unexplained": "unexplained",
}
#: how close (in output LSB) the exact result must be to k.5 to count as a tie. A fixed-point
#: multiplier is exact to ~2^-31 relative, so a tie of the integer kernel lies within ~1e-6
#: LSB of k.5 for outputs up to ~2^11 LSB before clamping.
TIE_EPS = 1e-6
#: error histogram bins: |err| above this is pooled into "<-N" / ">N"
HIST_LIMIT = 16


def _ordinal(arr: np.ndarray, dtype: str) -> np.ndarray:
    """Codes as int64; float32 values as ordinals whose differences count ULPs (as compare does)."""
    if dtype == "float32":
        return float_ordinal(arr)
    return np.asarray(arr).astype(np.int64)


def error_histogram(errors: Iterable[np.ndarray]) -> dict[str, int]:
    """{error in LSB: count} over the non-zero errors, |err| > HIST_LIMIT pooled (JSON keys)."""
    parts = [np.asarray(e, dtype=np.int64).ravel() for e in errors]
    e = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    e = e[e != 0]
    if not e.size:
        return {}
    out: dict[str, int] = {}
    lo, hi = e < -HIST_LIMIT, e > HIST_LIMIT
    if lo.any():
        out[f"<-{HIST_LIMIT}"] = int(lo.sum())
    mid = e[~(lo | hi)]
    vals, counts = np.unique(mid, return_counts=True)
    out.update({str(int(v)): int(c) for v, c in zip(vals, counts)})
    if hi.any():
        out[f">{HIST_LIMIT}"] = int(hi.sum())
    return out


def _golden_or_none(golden: Callable[[str], list[np.ndarray]], name: str) -> list[np.ndarray] | None:
    """The golden under ``name``; None where it cannot be computed (no count rather than a wrong one)."""
    with contextlib.suppress(Exception):
        return golden(name)
    return None


def scheme_stack(case, golden: Callable[[str], list[np.ndarray]], names: list[str]) -> tuple[list[str], np.ndarray]:
    """The goldens of ``names`` as one int64 matrix [schemes, elements] of codes (float32: ordinals),
    the case's outputs raveled one after the other; a scheme without a golden is left out
    (no count rather than a wrong one). Returns (the schemes kept, the matrix)."""
    kept, rows = [], []
    for name in names:
        outs = _golden_or_none(golden, name)
        if outs is None:
            continue
        rows.append(np.concatenate([_ordinal(o, s.dtype).ravel() for o, s in zip(outs, case.outputs)]
                                   or [np.zeros(0, np.int64)]))
        kept.append(name)
    return kept, (np.stack(rows) if rows else np.zeros((0, 0), np.int64))


def analyse(case, errors: list[np.ndarray], want: list[np.ndarray],
            golden: Callable[[str], list[np.ndarray]], run_scheme: str,
            schemes: list[str] | None = None, stack=None) -> dict:
    """Per-scheme exact counts, mismatch causes and the error histogram of one result.

    ``errors`` are got - want per output (``Comparison.errors``: LSB, or ULP for float32),
    ``want`` the golden under ``run_scheme``, ``golden(name)`` the (cached) golden under
    another scheme; ``stack(names)``, if given, is :func:`scheme_stack` of this case (the
    runner keeps it for the case's other targets). Returns the row fields ``scheme_exact``
    ({scheme: exactly reproduced elements}), and when anything mismatches ``causes``
    ({label: elements}), ``cause_schemes`` ({scheme: mismatching elements it reproduces}) and
    ``err_hist``. All schemes are compared in one pass over a [schemes, elements] matrix.
    """
    names = list(schemes) if schemes is not None else kernel_schemes()
    specs = case.outputs
    got = [_ordinal(w, s.dtype).reshape(np.shape(e)) + e for w, e, s in zip(want, errors, specs)]
    mism = [e != 0 for e in errors]
    n_mism = int(sum(int(m.sum()) for m in mism))

    others = [n for n in names if n != run_scheme]
    kept, mat = stack(others) if stack is not None else scheme_stack(case, golden, others)
    got_flat = np.concatenate([g.ravel() for g in got] or [np.zeros(0, np.int64)])
    mism_flat = np.concatenate([m.ravel() for m in mism] or [np.zeros(0, bool)])
    eq = mat == got_flat if kept else np.zeros((0, got_flat.size), bool)   # [schemes, elements]
    totals = dict(zip(kept, eq.sum(axis=1).tolist()))
    hit = eq & mism_flat if n_mism else None   # [schemes, elements]: reproduces a mismatch
    hits = dict(zip(kept, hit.sum(axis=1).tolist())) if n_mism else {}
    scheme_exact: dict[str, int] = {}
    for name in names:
        if name == run_scheme:
            scheme_exact[name] = int(len(mism_flat) - n_mism)
        elif name in totals:
            scheme_exact[name] = int(totals[name])
    cause_schemes = {n: int(hits[n]) for n in names if hits.get(n)}
    explained_flat = hit.any(axis=0) if n_mism and len(kept) else np.zeros(mism_flat.shape, bool)
    explained = [part.reshape(m.shape) for part, m in
                 zip(np.split(explained_flat, np.cumsum([m.size for m in mism])[:-1]), mism)]
    out: dict = {"scheme_exact": scheme_exact}
    if not n_mism:
        return out

    exact = _golden_or_none(golden, "exact")
    counts = dict.fromkeys(CAUSES, 0)
    for k, (m, g, w, s) in enumerate(zip(mism, got, want, specs)):
        if not m.any():
            continue
        info = DTYPES[s.dtype]
        left = m.copy()
        if exact is not None and info.qmin is not None:
            x = np.asarray(exact[k], dtype=np.float64).reshape(g.shape)
            fl = np.floor(x)
            tie = left & (np.abs(x - fl - 0.5) <= TIE_EPS) & ((g == fl) | (g == fl + 1))
            counts["tie"] += int(tie.sum())
            left &= ~tie
        sch = left & explained[k]
        counts["scheme"] += int(sch.sum())
        left &= ~sch
        if info.qmin is not None:
            wi = _ordinal(w, s.dtype).reshape(g.shape)
            at_limit = (wi == info.qmin) | (wi == info.qmax) | (g == info.qmin) | (g == info.qmax)
            sat = left & at_limit
            counts["saturation"] += int(sat.sum())
            left &= ~sat
        counts["unexplained"] += int(left.sum())
    out["causes"] = {k: v for k, v in counts.items() if v}
    if cause_schemes:
        out["cause_schemes"] = cause_schemes
    out["err_hist"] = error_histogram(errors)
    return out


# ----------------------------------------------------------------------------- aggregation

class SchemeTally:
    """``scheme_exact`` and ``causes`` of a group's rows, added one row at a time: what
    ``best_scheme`` and the ``cause_*`` counts of the summary are made of."""

    def __init__(self):
        self.totals: dict[str, int] = {}
        self.elements = 0
        self.causes = dict.fromkeys(CAUSES, 0)

    def add(self, row: dict) -> None:
        se = row.get("scheme_exact")
        if isinstance(se, dict) and row.get("elements"):
            self.elements += int(row["elements"])
            for name, n in se.items():
                self.totals[name] = self.totals.get(name, 0) + int(n)
        c = row.get("causes")
        if isinstance(c, dict):
            for k, v in c.items():
                if k in self.causes:
                    self.causes[k] += int(v)

    def best(self, prefer: str | None = None) -> tuple[str | None, float | None]:
        """The scheme reproducing the most elements, and its %. Ties go to ``prefer`` (the run's
        scheme), then to the order of ``kernel_schemes()``."""
        if not self.elements or not self.totals:
            return None, None
        order = kernel_schemes()
        rank = {n: i + 1 for i, n in enumerate(order)}
        if prefer:
            rank[prefer] = 0
        name = max(self.totals, key=lambda n: (self.totals[n], -rank.get(n, len(order) + 1)))
        return name, round(100.0 * self.totals[name] / self.elements, 3)

    def columns(self, prefer: str | None = None) -> dict:
        """The summary's extra columns: best scheme and cause counts."""
        name, pct = self.best(prefer)
        cols: dict = {"best_scheme": name, "best_scheme_exact_pct": pct}
        for k, v in self.causes.items():
            cols[f"cause_{k}"] = v
        return cols


def _tally(rows: Iterable[dict]) -> SchemeTally:
    t = SchemeTally()
    for r in rows:
        t.add(r)
    return t


def best_scheme(rows: Iterable[dict], prefer: str | None = None) -> tuple[str | None, float | None]:
    """The scheme reproducing the most elements over ``rows`` (their ``scheme_exact``), and its %."""
    return _tally(rows).best(prefer)


def cause_counts(rows: Iterable[dict]) -> dict[str, int]:
    """Mismatching elements per cause label over ``rows``."""
    return _tally(rows).causes


class HistTally:
    """The rows' ``err_hist`` summed, with the exact elements as bin "0", a row at a time."""

    def __init__(self):
        self.bins: dict[str, int] = {}
        self.zero = 0

    def add(self, row: dict) -> None:
        if row.get("elements") is None:
            return
        self.zero += int(row.get("elements") or 0) - int(row.get("mismatches") or 0)
        h = row.get("err_hist")
        if isinstance(h, dict):
            for k, v in h.items():
                self.bins[k] = self.bins.get(k, 0) + int(v)

    def hist(self) -> dict[str, int]:
        out = dict(self.bins)
        if self.zero:
            out["0"] = out.get("0", 0) + self.zero
        return out


def hist_key_order(key: str) -> float:
    if key.startswith("<"):
        return -1e9
    if key.startswith(">"):
        return 1e9
    return float(key)
