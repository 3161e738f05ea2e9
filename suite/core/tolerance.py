"""Tolerance policy: how far from the golden an output may be, per op x dtype x target x version.

A tolerance file (``qconform-tolerance/1``, TOML) is a list of ``[[rule]]`` tables;
each matches op, target and output dtype by glob pattern, optionally only for
given runtime versions, and sets ``max_abs_lsb`` (and optionally
``max_mismatch_pct``). The last matching rule wins, so a file reads from the
general to the specific. The default file is ``suite/core/tolerances.toml``.

A rule may also bound the bias of a whole (op, target, output dtype), judged when the run's
report is written (reports/causes.py, ``judge_group``), over the rows that ran (those with a
known finding or a waiver left out): ``max_mean_err_lsb`` bounds |sum of errors / elements|;
``bias_alpha`` counts a mean error only when a two-sided sign test over the mismatching
elements (above vs below the golden: :func:`sign_test_p`) gives p < ``bias_alpha``; and
``bias_min_mismatches`` asks at least that many mismatching elements before either judges.
``bias_alpha`` without ``max_mean_err_lsb`` bounds the mean at 0: any mean error whose sign is
significant fails. A rule with neither key judges no bias. With both, a bias needs both a size
that matters and significance (the default policy: |mean| > 0.003 LSB and p < 1e-6, over >= 20
mismatching elements; suite/core/tolerances.toml says why): every place that judges a bias, the
run's test_group, the report, ``qconform merge`` and the certificate (whose toward-the-zero-point
rule takes the same three keys: :meth:`Tolerance.shrink_failure`), asks this module.
"""

from __future__ import annotations

import difflib
import fnmatch
import math
from dataclasses import dataclass, field
from pathlib import Path


from suite.core.dtypes import DTYPES
from suite.core.errors import QconformError
from suite.core.spec import known_ops
from suite.core.userfile import load_toml

FORMAT = "qconform-tolerance/1"
DEFAULT_FILE = Path(__file__).parent / "tolerances.toml"
MAX_PATTERN = 200   # characters of a glob pattern


def _finite(x) -> bool:
    """math.isfinite, False (not OverflowError) for an int beyond the float range."""
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


def _match(value: str, patterns) -> bool:
    pats = [patterns] if isinstance(patterns, str) else patterns
    return any(fnmatch.fnmatchcase(value, p) for p in pats)


@dataclass
class Rule:
    op: str | list[str] = "*"
    target: str | list[str] = "*"
    dtype: str | list[str] = "*"
    versions: dict[str, str] = field(default_factory=dict)
    max_abs_lsb: float = 0.0
    max_mismatch_pct: float = 100.0
    reason: str = ""
    index: int = 0
    max_mean_err_lsb: float | None = None     # bias bounds (module docstring)
    bias_alpha: float | None = None
    bias_min_mismatches: int = 0

    def matches(self, op: str, target: str, dtype: str, versions: dict[str, str]) -> bool:
        if not (_match(op, self.op) and _match(target, self.target) and _match(dtype, self.dtype)):
            return False
        for comp, pat in self.versions.items():
            if not fnmatch.fnmatchcase(str(versions.get(comp, "")), pat):
                return False
        return True


@dataclass(frozen=True)   # (Policy.lookup hands the same one to every result of its key)
class Tolerance:
    max_abs_lsb: float
    max_mismatch_pct: float
    rule: Rule | None

    def passes(self, max_abs: float, mismatch_pct: float) -> bool:
        return max_abs <= self.max_abs_lsb and mismatch_pct <= self.max_mismatch_pct

    def describe(self) -> str:
        s = f"|err| <= {self.max_abs_lsb:g} LSB"
        if self.max_mismatch_pct < 100:
            s += f", <= {self.max_mismatch_pct:g}% elements off"
        return s

    def bias_failure(self, sum_err: float, elements: int, pos: int, neg: int) -> str | None:
        """Why the errors of a whole (op, target, dtype) break the rule's bias bound (module
        docstring), or None: ``sum_err`` summed over ``elements``, ``pos`` / ``neg`` elements
        above / below the golden."""
        r = self.rule
        if r is None or (r.max_mean_err_lsb is None and r.bias_alpha is None) or not elements:
            return None
        if pos + neg < max(r.bias_min_mismatches, 1):
            return None
        mean, bound = sum_err / elements, r.max_mean_err_lsb or 0.0
        if abs(mean) <= bound:
            return None
        why = f"mean error {mean:+.3g} LSB over {elements} elements ({pos} above, {neg} below the golden)"
        if r.bias_alpha is not None:
            p = sign_test_p(pos, neg)
            if not p < r.bias_alpha:
                return None
            why += f", sign test p {p:.3g} < {r.bias_alpha:g}"
        if bound:
            why += f", |mean| > {bound:g} LSB"
        return why + f" (tolerance rule {r.index})"

    def shrink_failure(self, toward: int, away: int, elements: int) -> str | None:
        """Why mismatching elements that point at the output zero point (``toward``: |got - zp| <
        |want - zp|) more than away from it break the rule's bias bound, or None: the bound of
        :meth:`bias_failure` on toward / away instead of above / below, its mean the net shrink
        (toward - away) / ``elements`` LSB (each mismatch counted as 1 LSB). A kernel rounding ties
        toward zero is unbiased above / below the golden but shrinks every tie."""
        r = self.rule
        if r is None or r.bias_alpha is None or toward + away < max(r.bias_min_mismatches, 1) or not elements:
            return None
        mean, bound = (toward - away) / elements, r.max_mean_err_lsb or 0.0
        p = sign_test_p(toward, away)
        if not (p < r.bias_alpha and toward > away and mean > bound):
            return None
        return (f"outputs shrink toward the zero point: {toward} mismatching elements toward it, {away} away, "
                f"over {elements} elements (net {mean:.3g} LSB" + (f" > {bound:g}" if bound else "") +
                f"), sign test p {p:.3g} < {r.bias_alpha:g} (tolerance rule {r.index}; certification rule)")


@dataclass
class Policy:
    rules: list[Rule]
    source: str
    version: str = ""

    _looked_up: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def lookup(self, op: str, target: str, dtype: str, versions: dict[str, str] | None = None) -> Tolerance:
        """The last rule matching (op, target, dtype, versions); the answer is kept (a run asks
        once per result, for a few hundred distinct keys; the rules do not change once loaded)."""
        versions = versions or {}
        key = (op, target, dtype, tuple(sorted(versions.items())))
        tol = self._looked_up.get(key)
        if tol is None:
            hit = None
            for r in self.rules:
                if r.matches(op, target, dtype, versions):
                    hit = r
            tol = self._looked_up[key] = (Tolerance(0.0, 100.0, None) if hit is None
                                          else Tolerance(hit.max_abs_lsb, hit.max_mismatch_pct, hit))
        return tol

    def as_dict(self) -> dict:
        return {"source": self.source, "version": self.version, "rules": [
            {k: v for k, v in vars(r).items() if k != "index"} for r in self.rules]}


def sign_test_p(pos: int, neg: int) -> float:
    """Two-sided exact sign test: P(a split at least as uneven as ``pos`` : ``neg``) for errors
    equally likely above and below, 2 * P(X <= min) for X ~ Binomial(pos + neg, 1/2), capped at 1.

    In log space (math.lgamma), the tail summed from its largest term down until the rest is
    negligible: no overflow and no SciPy for any count; a p below ~1e-308 comes out 0.0.
    """
    pos, neg = int(pos), int(neg)
    n, k = pos + neg, min(pos, neg)
    if n == 0 or 2 * k >= n - 1:     # an even split, or off by one: the tail holds half or more
        return 1.0
    log_top = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) - n * math.log(2)
    total = term = 1.0                # P(X = i) / P(X = k), for i = k, k - 1, ..., 0
    for i in range(k, 0, -1):
        term *= i / (n - i + 1)       # P(X = i - 1) / P(X = i) < 1 below the middle
        total += term
        if term < total * 1e-17:
            break
    return min(1.0, math.exp(math.log(2.0) + log_top + math.log(total)))


def _check_patterns(v, known: list[str], what: str, src: str, where: str) -> None:
    """Each pattern of ``v`` matches one of ``known`` at least: a rule for "CONV2D" or "int9"
    would never apply, and the tolerance it meant to set would silently not be set."""
    pats = [v] if isinstance(v, str) else v
    for j, p in enumerate(pats):
        if not any(fnmatch.fnmatchcase(k, p) for k in known):
            close = difflib.get_close_matches(p, known, n=1)
            raise QconformError(f"{p!r} matches no {what}" + (f" (did you mean {close[0]!r}?)" if close else ""),
                                source=src, field=where if isinstance(v, str) else f"{where}[{j}]",
                                rule="a rule's op and dtype patterns match something")


def _check_bias(r: dict, src: str, where: str) -> None:
    """The bias keys of rule ``r`` (module docstring)."""
    def number(key: str) -> bool:
        v = r.get(key)
        return not isinstance(v, bool) and isinstance(v, (int, float)) and _finite(v)
    if "max_mean_err_lsb" in r and not (number("max_mean_err_lsb") and r["max_mean_err_lsb"] >= 0):
        raise QconformError(f"must be a finite number >= 0 (got {r['max_mean_err_lsb']!r})", source=src,
                            field=f"{where}.max_mean_err_lsb", rule="a bound on |mean error| in LSB")
    if "bias_alpha" in r and not (number("bias_alpha") and 0 < r["bias_alpha"] < 1):
        raise QconformError(f"must be a number in (0, 1) (got {r['bias_alpha']!r})", source=src,
                            field=f"{where}.bias_alpha", rule="a significance level, e.g. 1e-6")
    v = r.get("bias_min_mismatches")
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
        raise QconformError(f"must be an integer >= 0 (got {v!r})", source=src,
                            field=f"{where}.bias_min_mismatches", rule="a count of mismatching elements")
    if v is not None and "max_mean_err_lsb" not in r and "bias_alpha" not in r:
        raise QconformError("judges nothing without max_mean_err_lsb or bias_alpha", source=src,
                            field=f"{where}.bias_min_mismatches", rule="bias keys")


def check_target_names(policy: Policy, names) -> None:
    """A rule's target that matches none of ``names`` (the targets known here and the run's own) but
    is close to one is a typo ("tfliet"): one QconformError, else the rule would silently never
    apply. A name close to none may be another machine's own target: kept."""
    names = list(names)
    for r in policy.rules:
        for p in ([r.target] if isinstance(r.target, str) else r.target):
            if any(c in p for c in "*?[") or any(fnmatch.fnmatchcase(n, p) for n in names):
                continue
            close = difflib.get_close_matches(p, names, n=1)
            if close:
                raise QconformError(f"target '{p}' is no target here: did you mean '{close[0]}'?", source=policy.source,
                                    field=f"rule[{r.index}].target", rule="a rule names a target (or a glob of them)")


def load_policy(path: str | Path | None = None) -> Policy:
    path = Path(path) if path else DEFAULT_FILE
    src = str(path)
    raw = load_toml(path, "tolerance file", "--tolerance", FORMAT)
    rules_raw = raw.get("rule", [])
    if not isinstance(rules_raw, list) or not rules_raw:
        raise QconformError("needs at least one [[rule]] table", source=src, field="rule", rule="rule list")
    rules = []
    allowed = {"op", "target", "dtype", "versions", "max_abs_lsb", "max_mismatch_pct", "reason",
               "max_mean_err_lsb", "bias_alpha", "bias_min_mismatches"}
    for i, r in enumerate(rules_raw):
        where = f"rule[{i}]"
        if not isinstance(r, dict):
            raise QconformError("must be a table", source=src, field=where)
        extra = set(r) - allowed
        if extra:
            raise QconformError(f"unknown key(s) {sorted(extra)} (allowed: {sorted(allowed)})",
                                source=src, field=where, rule="known keys")
        for key in ("op", "target", "dtype"):
            v = r.get(key, "*")
            if not (isinstance(v, str) or (isinstance(v, list) and v and all(isinstance(x, str) for x in v))):
                raise QconformError("must be a glob pattern or a list of them", source=src,
                                    field=f"{where}.{key}", rule="pattern")
            if any(len(x) > MAX_PATTERN for x in ([v] if isinstance(v, str) else v)):   # fnmatch is quadratic in '['
                raise QconformError(f"a pattern is longer than {MAX_PATTERN} characters", source=src,
                                    field=f"{where}.{key}", rule="pattern")
        _check_patterns(r.get("op", "*"), known_ops(), "operator of the spec tables", src, f"{where}.op")
        _check_patterns(r.get("dtype", "*"), list(DTYPES), "dtype the suite knows", src, f"{where}.dtype")
        if "reason" in r and not isinstance(r["reason"], str):
            raise QconformError("must be a string", source=src, field=f"{where}.reason")
        if "max_abs_lsb" not in r:
            raise QconformError("is required", source=src, field=f"{where}.max_abs_lsb", rule="rule sets max_abs_lsb")
        for key in ("max_abs_lsb", "max_mismatch_pct"):
            if key in r:
                v = r[key]
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not _finite(v) or v < 0:
                    raise QconformError(f"must be a finite number >= 0 (got {v!r})", source=src,
                                        field=f"{where}.{key}", rule="non-negative tolerance")
        if r.get("max_mismatch_pct", 0) > 100:
            raise QconformError("must be <= 100", source=src, field=f"{where}.max_mismatch_pct")
        _check_bias(r, src, where)
        vers = r.get("versions", {})
        if not isinstance(vers, dict) or not all(isinstance(v, str) and len(v) <= MAX_PATTERN for v in vers.values()):
            raise QconformError(f"must be a table of component = \"version pattern\" (at most {MAX_PATTERN} "
                                f"characters)", source=src, field=f"{where}.versions")
        rules.append(Rule(op=r.get("op", "*"), target=r.get("target", "*"), dtype=r.get("dtype", "*"),
                          versions=dict(vers), max_abs_lsb=float(r["max_abs_lsb"]),
                          max_mismatch_pct=float(r.get("max_mismatch_pct", 100.0)),
                          reason=r.get("reason", ""), index=i,
                          max_mean_err_lsb=None if "max_mean_err_lsb" not in r else float(r["max_mean_err_lsb"]),
                          bias_alpha=None if "bias_alpha" not in r else float(r["bias_alpha"]),
                          bias_min_mismatches=int(r.get("bias_min_mismatches", 0))))
    return Policy(rules, src, str(raw.get("version", "")))
