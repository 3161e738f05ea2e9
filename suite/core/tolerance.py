"""Tolerance policy: how far from the golden an output may be, per op x dtype x target x version.

A tolerance file (``qconform-tolerance/1``, TOML) is a list of ``[[rule]]`` tables;
each matches op, target and output dtype by glob pattern, optionally only for
given runtime versions, and sets ``max_abs_lsb`` (and optionally
``max_mismatch_pct``). The last matching rule wins, so a file reads from the
general to the specific. The default file is ``suite/core/tolerances.toml``.
"""

from __future__ import annotations

import fnmatch
import math
from dataclasses import dataclass, field
from pathlib import Path


from suite.core.errors import QconformError
from suite.core.userfile import load_toml

FORMAT = "qconform-tolerance/1"
DEFAULT_FILE = Path(__file__).parent / "tolerances.toml"


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

    def matches(self, op: str, target: str, dtype: str, versions: dict[str, str]) -> bool:
        if not (_match(op, self.op) and _match(target, self.target) and _match(dtype, self.dtype)):
            return False
        for comp, pat in self.versions.items():
            if not fnmatch.fnmatchcase(str(versions.get(comp, "")), pat):
                return False
        return True


@dataclass
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


@dataclass
class Policy:
    rules: list[Rule]
    source: str
    version: str = ""

    def lookup(self, op: str, target: str, dtype: str, versions: dict[str, str] | None = None) -> Tolerance:
        versions = versions or {}
        hit = None
        for r in self.rules:
            if r.matches(op, target, dtype, versions):
                hit = r
        if hit is None:
            return Tolerance(0.0, 100.0, None)
        return Tolerance(hit.max_abs_lsb, hit.max_mismatch_pct, hit)

    def as_dict(self) -> dict:
        return {"source": self.source, "version": self.version, "rules": [
            {k: v for k, v in vars(r).items() if k != "index"} for r in self.rules]}


def load_policy(path: str | Path | None = None) -> Policy:
    path = Path(path) if path else DEFAULT_FILE
    src = str(path)
    raw = load_toml(path, "tolerance file", "--tolerance", FORMAT)
    rules_raw = raw.get("rule", [])
    if not isinstance(rules_raw, list) or not rules_raw:
        raise QconformError("needs at least one [[rule]] table", source=src, field="rule", rule="rule list")
    rules = []
    allowed = {"op", "target", "dtype", "versions", "max_abs_lsb", "max_mismatch_pct", "reason"}
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
        vers = r.get("versions", {})
        if not isinstance(vers, dict) or not all(isinstance(v, str) for v in vers.values()):
            raise QconformError("must be a table of component = \"version pattern\"", source=src,
                                field=f"{where}.versions")
        rules.append(Rule(op=r.get("op", "*"), target=r.get("target", "*"), dtype=r.get("dtype", "*"),
                          versions=dict(vers), max_abs_lsb=float(r["max_abs_lsb"]),
                          max_mismatch_pct=float(r.get("max_mismatch_pct", 100.0)),
                          reason=r.get("reason", ""), index=i))
    return Policy(rules, src, str(raw.get("version", "")))
