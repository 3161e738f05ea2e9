"""Mismatch causes and per-scheme exactness of one (case, target) result.

For every element where a target's output differs from the golden, :func:`analyse`
gives the likely cause, as one label, tried in this order:

``tie``          the exact (unrounded) result sits on k.5 (within ``TIE_EPS`` LSB) and
                 the target returned one of its two neighbours: the kernel broke the
                 tie the other way;
``scheme``       another named requantization scheme (``reference/schemes.py``) gives
                 exactly the target's value: the kernel uses different arithmetic;
``clamp``        the case has a fused activation and the target's value lies outside its
                 range, or the golden clamped the element at one of its bounds (the exact
                 value beyond it) and the target did not return that bound: the kernel
                 skipped the activation's clamp or clamped at another bound;
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

from reference.common import act_range
from reference.registry import ROUNDING_PATHS, rounding_paths
from reference.schemes import get_scheme, kernel_schemes
from suite.core.compare import float_ordinal
from suite.core.dtypes import DTYPES
from suite.core.findings import match
from suite.core.tolerance import sign_test_p

CAUSES = ("tie", "scheme", "clamp", "saturation", "unexplained")
CAUSE_TEXT = {
    "tie": "rounding tie (exact value on k.5)",
    "scheme": "rounding scheme (another scheme gives the target's value)",
    "clamp": "activation clamp (got outside the fused activation's range, or clamped at another bound)",
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
    """The goldens of ``names`` as one integer matrix [schemes, elements] of codes (float32:
    ordinals), the case's outputs raveled one after the other; a scheme without a golden is left
    out (no count rather than a wrong one). Returns (the schemes kept, the matrix). The matrix is
    of the narrowest type that holds every output's codes (int16 for 8- and 16-bit outputs): the
    judge keeps it for the case's other targets, and a real model's layer has 10^5-10^6 elements."""
    kept, rows = [], []
    dt = _stack_dtype(case.outputs)
    for name in names:
        outs = _golden_or_none(golden, name)
        if outs is None:
            continue
        rows.append(np.concatenate([_ordinal(o, s.dtype).ravel().astype(dt) for o, s in zip(outs, case.outputs)]
                                   or [np.zeros(0, dt)]))
        kept.append(name)
    return kept, (np.stack(rows) if rows else np.zeros((0, 0), dt))


def _stack_dtype(specs) -> type:
    """int16 / int32 when every output's codes (float32: int32 ordinals) fit it, else int64."""
    def fits(s, lo, hi):
        if s.dtype == "float32":
            return hi >= 2**31 - 1
        info = DTYPES.get(s.dtype)
        return info is not None and info.qmin is not None and lo <= info.qmin and info.qmax <= hi
    for dt in (np.int16, np.int32):
        i = np.iinfo(dt)
        if all(fits(s, i.min, i.max) for s in specs):
            return dt
    return np.int64


def analyse(case, errors: list[np.ndarray], want: list[np.ndarray],
            golden: Callable[[str], list[np.ndarray]], run_scheme: str,
            schemes: list[str] | None = None, stack=None) -> dict:
    """Per-scheme exact counts, mismatch causes and the error histogram of one result.

    ``errors`` are got - want per output (``Comparison.errors``: LSB, or ULP for float32),
    ``want`` the golden under ``run_scheme``, ``golden(name)`` the (cached) golden under
    another scheme; ``stack(names)``, if given, is :func:`scheme_stack` of this case (the
    runner keeps it for the case's other targets). Returns the row fields ``scheme_exact``
    ({scheme: exactly reproduced elements}), and when anything mismatches ``causes``
    ({label: elements}), ``cause_schemes`` ({scheme: mismatching elements it reproduces}),
    ``err_hist`` and ``worst_cause``: the label of the element with the largest |error| (the first
    of equals, outputs in order: the one a failure message names), "scheme <name>" naming the
    first scheme that gives the target's value. All schemes are compared in one pass over a
    [schemes, elements] matrix.
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
    out: dict = {"scheme_exact": scheme_exact}
    if not n_mism:
        return out
    cause_schemes = {n: int(hits[n]) for n in names if hits.get(n)}
    explained_flat = hit.any(axis=0) if len(kept) else np.zeros(mism_flat.shape, bool)
    explained = [part.reshape(m.shape) for part, m in
                 zip(np.split(explained_flat, np.cumsum([m.size for m in mism])[:-1]), mism)]

    exact = _golden_or_none(golden, "exact")
    counts = dict.fromkeys(CAUSES, 0)
    ties = [0, 0, 0]   # mismatching ties the target broke up, down, toward the zero point
    sizes = [m.size for m in mism]
    worst = int(np.abs(np.concatenate([np.ravel(e) for e in errors])).argmax())
    wk = int(np.searchsorted(np.cumsum(sizes), worst, side="right"))   # its output, and its index there
    wj, worst_cause = worst - sum(sizes[:wk]), None
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
            if tie.any():
                wi = np.asarray(w, dtype=np.int64).reshape(g.shape)
                ties[0] += int((tie & (g > wi)).sum())
                ties[1] += int((tie & (g < wi)).sum())
                if s.zero_point and len(s.zero_point) == 1:
                    z = int(s.zero_point[0])
                    ties[2] += int((tie & (np.abs(g - z) < np.abs(wi - z))).sum())
            left &= ~tie
            worst_cause = "tie" if k == wk and tie.flat[wj] else worst_cause
        sch = left & explained[k]
        counts["scheme"] += int(sch.sum())
        left &= ~sch
        if k == wk and sch.flat[wj]:
            worst_cause = f"scheme {kept[int(hit[:, worst].argmax())]}"
        bounds = _activation_bounds(case, k)
        if bounds is not None:
            lo, hi = bounds
            wi = np.asarray(w, dtype=np.int64).reshape(g.shape)
            clamp = (g < lo) | (g > hi)
            if exact is not None:   # the golden clamped it (exact value rounds beyond the bound)
                x = np.asarray(exact[k], dtype=np.float64).reshape(g.shape)
                clamp |= ((wi == lo) & (lo > info.qmin) & (x < lo - 0.5)) | ((wi == hi) & (hi < info.qmax) & (x > hi + 0.5))
            clamp &= left
            counts["clamp"] += int(clamp.sum())
            left &= ~clamp
            worst_cause = "clamp" if k == wk and clamp.flat[wj] else worst_cause
        if info.qmin is not None:
            wi = _ordinal(w, s.dtype).reshape(g.shape)
            at_limit = (wi == info.qmin) | (wi == info.qmax) | (g == info.qmin) | (g == info.qmax)
            sat = left & at_limit
            counts["saturation"] += int(sat.sum())
            left &= ~sat
            worst_cause = "saturation" if k == wk and sat.flat[wj] else worst_cause
        counts["unexplained"] += int(left.sum())
        worst_cause = "unexplained" if k == wk and left.flat[wj] else worst_cause
    out["causes"] = {k: v for k, v in counts.items() if v}
    if exact is not None:   # (without the exact values no tie is known: no counts rather than zeros)
        out.update(tie_up=ties[0], tie_down=ties[1], tie_toward_zp=ties[2])
    if cause_schemes:
        out["cause_schemes"] = cause_schemes
    out["err_hist"] = error_histogram(errors)
    out["worst_cause"] = worst_cause
    return out


def _activation_bounds(case, k: int) -> tuple[int, int] | None:
    """The clamp bounds of the fused activation on output ``k`` (output 0 of a case with one that
    is not NONE, integer dtype), or None."""
    act = case.attrs.get("fused_activation_function", "NONE")
    if k != 0 or act in (None, "NONE") or DTYPES[case.outputs[0].dtype].qmin is None:
        return None
    try:
        return act_range(case, case.outputs[0])
    except Exception:   # an unknown activation: the golden refused the case already
        return None


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


# ----------------------------------------------------------------------------- whole (op, target)s

#: a target's declared ``expected_scheme`` is called wrong for an (op, target) when another scheme
#: reproduces at least this many more of its elements: a kernel matches a scheme element for
#: element (no noise to test against), and a few elements can agree with another scheme by chance
SCHEME_GAP_MIN = 20
_RAN_UNEXPLAINED = frozenset({"pass", "fail"})   # waived rows and rows with a finding: explained


class BiasTally:
    """The signed errors of a group's rows, per output dtype, a row at a time: the bias columns
    and verdict. Rows with a known finding or a waiver are left out (their deviation is explained
    already), and rows without ``pos_err`` (judged before rows had it: no bias rather than a
    wrong one)."""

    def __init__(self):
        self.parts: dict[str, list] = {}   # dtype -> [sum_err, elements, pos, neg]
        #: dtype -> [ties broken up, down, toward the zero point, rows that had mismatches but no
        #: tie counts] over the mismatching elements (reports.causes.analyse): the bias's mechanism
        self.ties: dict[str, list] = {}
        self.isas: set = set()             # the rows' ISA flags (their CPU's; None: not recorded)
        self.max_abs: dict[str, float] = {}   # dtype -> the largest |error| of a counted row, in LSB

    @property
    def isa(self) -> frozenset[str] | None:
        """The ISA flags of the CPU every row ran on; None unless they are one, recorded."""
        return frozenset(next(iter(self.isas)).split()) if len(self.isas) == 1 and None not in self.isas else None

    def add(self, row: dict) -> bool:
        """Count the row's errors; whether it counted (a bias-free row: no)."""
        self.isas.add(row.get("isa"))
        if (row.get("status") not in _RAN_UNEXPLAINED or row.get("finding") or row.get("pos_err") is None
                or not row.get("elements")):
            return False
        p = self.parts.setdefault(str(row.get("out_dtype")), [0.0, 0, 0, 0])
        p[0] += float(row.get("sum_err_lsb") or 0.0)
        p[1] += int(row["elements"])
        p[2] += int(row["pos_err"])
        p[3] += int(row.get("neg_err") or 0)
        dt = str(row.get("out_dtype"))
        self.max_abs[dt] = max(self.max_abs.get(dt, 0.0), float(row.get("max_abs_lsb") or 0.0))
        t = self.ties.setdefault(str(row.get("out_dtype")), [0, 0, 0, 0])
        if row.get("tie_up") is not None:
            t[0] += int(row["tie_up"])
            t[1] += int(row.get("tie_down") or 0)
            t[2] += int(row.get("tie_toward_zp") or 0)
        elif int(row["pos_err"]) or int(row.get("neg_err") or 0):
            t[3] += 1
        return True

    def mechanism(self, dtype: str, sign: str) -> str | None:
        """What moved the elements of ``dtype`` to the ``sign`` side (:func:`bias_mechanism`), or None
        when a row with mismatches has no tie counts (judged before rows had them)."""
        p, t = self.parts.get(dtype), self.ties.get(dtype)
        if p is None or t is None or t[3]:
            return None
        return bias_mechanism(sign, p[2], p[3], t[0], t[1], t[2])

    def totals(self) -> tuple[float, int, int, int]:
        """(sum of errors, elements, above, below), every dtype together."""
        s, n, pos, neg = (sum(p[i] for p in self.parts.values()) for i in range(4))
        return s, n, pos, neg

    def columns(self) -> dict:
        """``bias_lsb`` (mean signed error) and ``bias_p`` (its sign test), every dtype together."""
        s, n, pos, neg = self.totals()
        if not n:
            return {"bias_lsb": None, "bias_p": None}
        return {"bias_lsb": float(f"{s / n:.4g}"), "bias_p": float(f"{sign_test_p(pos, neg):.3g}")}


def bias_mechanism(sign: str, pos: int, neg: int, up: int, down: int, toward_zp: int) -> str:
    """The rounding rule a bias of ``sign`` comes from, when one fits, with its counts: the mismatching
    elements (``pos`` above, ``neg`` below the golden) and among them the exact ties (exact value on
    k.5) broken ``up``, ``down`` and ``toward_zp`` (toward the zero point: real zero).

    Against the spec's half away from zero a tie can only move toward zero, so: ties only up is
    "toward +inf" (round half up: every negative tie +1), only down "toward -inf", both ways and all
    toward the zero point "toward zero" (round half to even also breaks ties only toward zero, at
    half of them: the counts cannot tell the two apart). When those ties are fewer than half of the
    elements on the bias's side (of all mismatching ones, for toward zero) the text says how many of
    them are (the rest: ties of an intermediate rounding step, as a half-up final shift after
    SaturatingRoundingDoublingHighMul makes, or other arithmetic); with no exact tie, or ties broken
    both ways and not all toward zero, it says the bias is no tie-breaking rule (e.g. a float
    requantization whose near-ties round one way)."""
    ties, n = up + down, pos + neg
    counts = f"{up} up, {down} down, {toward_zp} toward zero"
    if ties and not down and sign == "+":
        rule, side, where = "ties broken toward +inf", pos, " above the golden"
    elif ties and not up and sign == "-":
        rule, side, where = "ties broken toward -inf", neg, " below the golden"
    elif ties and toward_zp == ties and up and down:
        rule, side, where = "ties broken toward zero", n, ""
    else:
        return f"mechanism: not a tie-breaking rule ({ties} of the {n} mismatching elements are exact ties: {counts})"
    if 2 * ties >= side:
        return f"mechanism: {rule} ({counts}, of {n} mismatching elements)"
    return (f"mechanism: {rule} at every exact tie ({counts}), {ties} of the {side} mismatching elements{where}: "
            f"the others are no exact tie (an intermediate rounding step's, or other arithmetic)")


def judge_group(op: str, target: str, bias: BiasTally, schemes: SchemeTally, policy=None,
                versions: dict | None = None, expected: str | None = None,
                prefer: str | None = None) -> tuple[dict, list[dict]]:
    """The verdict of a whole (op, target) from its rows' tallies: (its summary columns, its
    failures). A failure is {kind: "bias" | "scheme", dtype, text, finding: the id of the finding
    that explains it, or None}; one without a finding fails the run.

    ``bias``: per output dtype, the bias bound of the tolerance rule ``policy`` gives for it
    (suite/core/tolerance.py); a finding explains it with status "bias+" or "bias-" (the sign
    matters: a bias that flips is new). ``scheme``: the target declares ``expected`` and another
    scheme reproduces at least :data:`SCHEME_GAP_MIN` more elements; a finding explains it with
    status "scheme". Columns: ``bias`` ("+", "-" or ""), ``expected_scheme``,
    ``expected_scheme_exact_pct``, ``scheme_mismatch`` (the better scheme), ``group_failure`` (the
    texts of the failures that fail the run) and ``group_known`` (those a finding explains)."""
    out: list[dict] = []
    signs = ""
    for dtype, (s, n, pos, neg) in bias.parts.items():
        why = policy.lookup(op, target, dtype, versions or {}).bias_failure(s, n, pos, neg) if policy else None
        if why is not None:
            sign = "+" if s > 0 else "-"
            signs += sign if sign not in signs else ""
            mech = bias.mechanism(dtype, sign)
            why += f", {mech}" if mech else ""   # (not "; ": it separates a group's verdicts)
            # a bias finding's region is the group's: its mean and largest error (a finding that
            # explains a small bias of near-ties must not explain a larger one)
            f = match(op, target, "*", f"bias{sign}", isa=bias.isa,
                      params={"mean_err_lsb": s / n, "max_abs_lsb": bias.max_abs.get(dtype, 0.0)})
            out.append({"kind": "bias", "dtype": dtype, "text": f"{dtype} outputs biased {sign}: {why}",
                        "finding": f.id if f else None})
    cols: dict = {"bias": signs, "expected_scheme": expected, "expected_scheme_exact_pct": None,
                  "scheme_mismatch": None}
    name = _scheme_name(expected)
    if name is not None and schemes.elements and name in schemes.totals:
        have = schemes.totals[name]
        cols["expected_scheme_exact_pct"] = round(100.0 * have / schemes.elements, 3)
        best, best_pct = schemes.best(prefer)
        gap = schemes.totals[best] - have if best else 0
        if best != name and gap >= SCHEME_GAP_MIN:
            cols["scheme_mismatch"] = best
            f = match(op, target, "*", "scheme")
            out.append({"kind": "scheme", "dtype": None, "finding": f.id if f else None,
                        "text": (f"declares expected_scheme {expected} ({cols['expected_scheme_exact_pct']}% of "
                                 f"elements exact) but {best} reproduces {gap} more ({best_pct}%)")})
    cols["group_failure"] = "; ".join(x["text"] for x in out if not x["finding"]) or None
    cols["group_known"] = "; ".join(f"{x['text']} [known finding {x['finding']}]" for x in out if x["finding"]) or None
    return cols, out


def _scheme_name(name: str | None) -> str | None:
    """The scheme ``name`` stands for (aliases resolved); None for no name or a free label."""
    try:
        return get_scheme(name).name if name else None
    except KeyError:
        return None


def rounding_clause(op: str) -> tuple[str, str] | None:
    """(path names, what it does) of ``op``'s golden rounding (reference/registry.py,
    docs/arithmetic.md), or None when the op has none listed."""
    paths = [p for p in rounding_paths().get(op, ()) if p != "none"]
    if not paths:
        return None
    return ", ".join(paths), "; ".join(ROUNDING_PATHS[p] for p in paths)
