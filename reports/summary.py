"""Per (op, target) summary tables: summary.csv, summary.md and the terminal table.

:class:`Summary` takes the rows one at a time (:meth:`Summary.add`) and keeps per group only
counters, sums and the group's latency values; :meth:`Summary.table` gives one dict per
(op, target) (and device, when a farm run has any), every dict with the same columns in the
same order. That list is what :func:`to_csv`, :func:`to_markdown` and :func:`to_text` print.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from reports.causes import SchemeTally
from suite.core.verdict import ERRORS, Status

COLUMNS = ["op", "target", "cases", "passed", "failed", "unsupported", "errors", "bit_exact_pct",
           "max_abs_lsb", "mean_err_lsb", "p50_latency_us"]
SUMMARY_CSV = "summary.csv"
SUMMARY_MD = "summary.md"

_RAN = frozenset({Status.PASS.value, Status.FAIL.value, Status.WAIVED.value})   # compared with the golden
_ERRORS = frozenset(s.value for s in ERRORS)


def _number(v: Any) -> float | None:
    """A JSON number (a bool too) as a float; None for anything else, NaN and overflow."""
    if not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return None if math.isnan(f) else f


class Group:
    """The accumulators of one group's summary row."""

    def __init__(self):
        self.statuses: dict[Any, int] = {}
        self.ran = 0                 # rows compared with the golden (pass, fail, waived)
        self.exact = 0               # of which without a mismatch
        self.elements = 0.0
        self.mismatches = 0.0
        self.sum_err = 0.0
        self.max_abs: float | None = None
        self.latency: list[float] = []   # each row's p50, for the group's median
        self.findings: set[str] = set()
        self.prefer: str | None = None   # the run's scheme (the first row's): best_scheme's tie-break
        self.schemes = SchemeTally()

    def add(self, row: dict) -> None:
        s = row.get("status")
        self.statuses[s] = self.statuses.get(s, 0) + 1
        lat = _number(row.get("p50_us"))
        if lat is not None:
            self.latency.append(lat)
        if row.get("finding"):
            self.findings.add(row["finding"])
        if self.prefer is None and row.get("scheme"):
            self.prefer = row["scheme"]
        if s not in _RAN:
            return
        self.ran += 1
        mism = _number(row.get("mismatches")) or 0.0
        self.exact += mism == 0
        self.elements += _number(row.get("elements")) or 0.0
        self.mismatches += mism
        self.sum_err += _number(row.get("sum_err_lsb")) or 0.0
        mx = _number(row.get("max_abs_lsb"))
        if mx is not None and (self.max_abs is None or mx > self.max_abs):
            self.max_abs = mx
        self.schemes.add(row)

    def row(self, key: dict[str, Any]) -> dict[str, Any]:
        """The summary row: ``key`` (op, target[, device]) and the group's columns."""
        n = self.statuses.get
        r = dict(key)
        r["cases"] = sum(self.statuses.values())
        r["passed"] = n(Status.PASS.value, 0)
        r["failed"] = n(Status.FAIL.value, 0)
        r["unsupported"] = n(Status.UNSUPPORTED.value, 0)
        r["errors"] = sum(c for s, c in self.statuses.items() if s in _ERRORS)
        r["crashes"] = n(Status.CRASH.value, 0)
        r["timeouts"] = n(Status.TIMEOUT.value, 0)
        r["infra_errors"] = n(Status.INFRA.value, 0)
        r["waived"] = n(Status.WAIVED.value, 0)
        e = self.elements
        r["bit_exact_pct"] = round(100.0 * (e - self.mismatches) / e, 3) if e else None
        r["exact_cases_pct"] = round(100.0 * self.exact / self.ran, 2) if self.ran else None
        r["max_abs_lsb"] = self.max_abs
        r["mean_err_lsb"] = round(self.sum_err / e, 5) if e else None
        r["p50_latency_us"] = round(float(np.median(self.latency)), 2) if self.latency else None
        if self.findings:
            r["findings"] = ",".join(sorted(self.findings))
        r.update(self.schemes.columns(self.prefer))
        return r


def _device(row: dict) -> str:
    d = row.get("device")
    return "" if d is None or (isinstance(d, float) and math.isnan(d)) else d


class Summary:
    """Rows in, one summary row per (op, target) out; per (op, target, device) when any row has a
    device (a farm run). Groups are in the order of their first rows; rows without an op or a
    target are left out."""

    def __init__(self):
        self.groups: dict[tuple, Group] = {}   # (op, target, device)
        self.pairs: dict[tuple, Group] = {}    # (op, target): the matrix of a farm run counts every device
        self.devices = False

    def add(self, row: dict) -> None:
        op, target = row.get("op"), row.get("target")
        if op is None or target is None:
            return
        dev = _device(row)
        self.devices = self.devices or bool(dev)
        for groups, key in ((self.groups, (op, target, dev)), (self.pairs, (op, target))):
            g = groups.get(key)
            if g is None:
                g = groups[key] = Group()
            g.add(row)

    def table(self) -> list[dict[str, Any]]:
        """The summary: per (op, target[, device]), as summary.csv has it."""
        if self.devices:
            return _columns([g.row({"op": k[0], "target": k[1], "device": k[2]}) for k, g in self.groups.items()])
        return self.pair_table()

    def pair_table(self) -> list[dict[str, Any]]:
        """Per (op, target), every device together."""
        return _columns([g.row({"op": k[0], "target": k[1]}) for k, g in self.pairs.items()])


def _columns(rows: list[dict]) -> list[dict]:
    """Every row with the same columns: the group keys and :data:`COLUMNS` first, then the others
    in the order they first appear; a column a row lacks is None there."""
    keys = [k for k in ("op", "target", "device") if rows and k in rows[0]]
    seen = dict.fromkeys(keys + [c for c in COLUMNS if c not in keys])
    for r in rows:
        seen.update(dict.fromkeys(r))
    return [{c: r.get(c) for c in seen} for r in rows]


def summarize(rows: Iterable[dict]) -> list[dict[str, Any]]:
    """The summary table of ``rows`` (:meth:`Summary.table`)."""
    s = Summary()
    for r in rows:
        s.add(r)
    return s.table()


def columns_of(summary: list[dict]) -> list[str]:
    return list(summary[0]) if summary else list(COLUMNS)


def to_csv(summary: list[dict]) -> str:
    """summary.csv: empty cells for missing values, floats as Python writes them."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    cols = columns_of(summary)
    w.writerow(cols)
    for r in summary:
        w.writerow(["" if r[c] is None else repr(r[c]) if isinstance(r[c], float) else r[c] for c in cols])
    return out.getvalue()


def to_markdown(summary: list[dict]) -> str:
    if not summary:
        return "(no results)\n"
    cols = columns_of(summary)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for r in summary:
        lines.append("| " + " | ".join(fmt(r[c]) for c in cols) + " |")
    return "\n".join(lines) + "\n"


def markdown_file(summary: list[dict]) -> str:
    """summary.md."""
    return "# qconform summary\n\n" + to_markdown(summary)


def to_text(summary: list[dict], columns: list[str] | None = None) -> str:
    """A fixed-width table for the terminal."""
    if not summary:
        return "(no results)"
    cols = columns or [c for c in columns_of(summary)
                       if c in COLUMNS or c in ("device", "best_scheme", "best_scheme_exact_pct")]
    cells = [list(cols)] + [[fmt(r.get(c)) for c in cols] for r in summary]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    out = []
    for k, row in enumerate(cells):
        out.append("  ".join(v.rjust(w) if k and _numeric(v) else v.ljust(w) for v, w in zip(row, widths)))
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _numeric(v: str) -> bool:
    try:
        float(v)
        return True
    except ValueError:
        return False


def fmt(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return str(v)
    if isinstance(v, float):
        if v == int(v) and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.4g}" if abs(v) < 1e-2 else f"{v:.3f}".rstrip("0").rstrip(".")
    return str(v)
