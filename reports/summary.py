"""Per (op, target) summary tables: summary.csv, summary.md and the terminal table."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from reports.results import ERROR_STATUSES, FAIL, PASS, UNSUPPORTED, WAIVED, read_rows
from reports.causes import summary_columns

COLUMNS = ["op", "target", "cases", "passed", "failed", "unsupported", "errors", "bit_exact_pct",
           "max_abs_lsb", "mean_err_lsb", "p50_latency_us"]


def summarize(rows: Iterable[dict], cache: "ReportCache | None" = None):
    """A pandas DataFrame with one row per (op, target) (and device, when remote), groups in the
    order of their first rows. ``cache``: groups already summarized while the run went on
    (:class:`ReportCache`); one is used only if it holds this very group (the same row objects)."""
    import pandas as pd

    rows = list(rows)
    if not rows:
        return pd.DataFrame(columns=COLUMNS)
    rows = [r for r in rows if r.get("op") is not None and r.get("target") is not None]   # (groupby's dropna)
    keys = ["op", "target"] + (["device"] if any(_device(r) for r in rows) else [])
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault(tuple(_device(r) if k == "device" else r.get(k) for k in keys), []).append(r)
    out = [(cache.get(keys, key, grp) if cache is not None else None) or group_summary(keys, key, grp)
           for key, grp in groups.items()]
    res = pd.DataFrame(out)
    lead = keys + [c for c in COLUMNS if c not in keys]
    rest = [c for c in res.columns if c not in lead]
    return res[lead + rest]


def _device(r: dict) -> str:
    d = r.get("device")
    return "" if d is None or (isinstance(d, float) and d != d) else d


def _numbers(grp: list[dict], col: str, missing: float = float("nan")):
    """A column of the group as float64, ``missing`` where it is not a number (pandas'
    to_numeric with errors="coerce", then fillna)."""
    import numpy as np
    out = np.empty(len(grp))
    for i, r in enumerate(grp):
        v = r.get(col)
        try:
            out[i] = float(v) if isinstance(v, (int, float)) else missing   # (JSON numbers; else NaN)
        except OverflowError:
            out[i] = missing
        if out[i] != out[i]:
            out[i] = missing
    return out


def group_summary(keys: list[str], key: tuple, grp: list[dict]) -> dict:
    """The summary row of one group (its rows ``grp``, in run order)."""
    import numpy as np
    r = dict(zip(keys, key))
    status = np.array([g.get("status") for g in grp], dtype=object)
    ran = np.isin(status, [PASS, FAIL, WAIVED])
    elements_all = _numbers(grp, "elements", 0.0)
    mism_all = _numbers(grp, "mismatches", 0.0)
    elements = float(elements_all[ran].sum())
    mism = float(mism_all[ran].sum())
    r["cases"] = len(grp)
    r["passed"] = int((status == PASS).sum())
    r["failed"] = int((status == FAIL).sum())
    r["unsupported"] = int((status == UNSUPPORTED).sum())
    r["errors"] = int(np.isin(status, list(ERROR_STATUSES)).sum())
    for s_, col in (("crash", "crashes"), ("timeout", "timeouts"), ("infra", "infra_errors")):
        r[col] = int((status == s_).sum())
    r["waived"] = int((status == WAIVED).sum())
    r["bit_exact_pct"] = round(100.0 * (elements - mism) / elements, 3) if elements else None
    n_ran = int(ran.sum())
    r["exact_cases_pct"] = round(100.0 * float((mism_all[ran] == 0).sum()) / n_ran, 2) if n_ran else None
    mx = _numbers(grp, "max_abs_lsb")[ran]
    mx = mx[~np.isnan(mx)]
    r["max_abs_lsb"] = float(mx.max()) if mx.size else None
    r["mean_err_lsb"] = (round(float(_numbers(grp, "sum_err_lsb", 0.0)[ran].sum()) / elements, 5)
                         if elements else None)
    lat = _numbers(grp, "p50_us")
    lat = lat[~np.isnan(lat)]
    r["p50_latency_us"] = round(float(np.median(lat)), 2) if lat.size else None
    found = sorted({g["finding"] for g in grp if g.get("finding")})
    if found:
        r["findings"] = ",".join(found)
    # best_scheme (+ exact %) and mismatch-cause counts from the rows' scheme_exact / causes
    prefer = next((g["scheme"] for g in grp if g.get("scheme")), None)
    r.update(summary_columns([g for g, ok in zip(grp, ran) if ok], prefer))
    return r


class ReportCache:
    """What the report needs of each row, made while the run goes on (the judge thread), so the
    end only puts it together: :meth:`add` each row as it is written. It keeps the row flattened
    for results.parquet (``flat``, by ``id`` of the row: reports.runinfo.rows_frame), and
    summarizes an (op, target) group once it has as many rows as the plan gives it
    (``expected``: (op, target) -> count). :func:`summarize` takes a cached row only for a group
    of the very same row objects (a test run again, a resumed run: computed then) and only
    without a device column (a farm run groups by device too)."""

    def __init__(self, expected: dict[tuple, int]):
        self._expected = dict(expected)
        self._rows: dict[tuple, list[dict]] = {}
        self._done: dict[tuple, tuple[list[int], dict]] = {}
        self.flat: dict[int, dict] = {}

    def add(self, row: dict) -> None:
        from reports.runinfo import flat_row
        self.flat[id(row)] = flat_row(row)
        key = (row.get("op"), row.get("target"))
        grp = self._rows.setdefault(key, [])
        grp.append(row)
        if len(grp) == self._expected.get(key):
            self._done[key] = ([id(g) for g in grp], group_summary(["op", "target"], key, grp))

    def get(self, keys: list[str], key: tuple, grp: list[dict]) -> dict | None:
        got = self._done.get(key) if len(keys) == 2 else None
        if got is None or len(got[0]) != len(grp) or any(i != id(g) for i, g in zip(got[0], grp)):
            return None
        return dict(got[1])


def to_markdown(df) -> str:
    if df is None or len(df) == 0:
        return "(no results)\n"
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(_fmt(r[c]) for c in cols) + " |")
    return "\n".join(lines) + "\n"


def to_text(df, columns: list[str] | None = None) -> str:
    """A fixed-width table for the terminal."""
    if df is None or len(df) == 0:
        return "(no results)"
    cols = columns or [c for c in df.columns if c in COLUMNS or c in ("device", "best_scheme", "best_scheme_exact_pct")]
    cells = [[c for c in cols]] + [[_fmt(r[c]) for c in cols] for _, r in df.iterrows()]
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


def _fmt(v) -> str:
    import math
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return str(v)
    if isinstance(v, float):
        if v == int(v) and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.4g}" if abs(v) < 1e-2 else f"{v:.3f}".rstrip("0").rstrip(".")
    return str(v)


def write_summaries(report_dir: str | Path, rows: list[dict] | None = None, df=None):
    """summary.csv and summary.md of ``rows`` (default: the folder's results.jsonl); ``df``: their
    :func:`summarize` table when the caller has it already."""
    report_dir = Path(report_dir)
    if df is None:
        df = summarize(read_rows(report_dir) if rows is None else rows)
    df.to_csv(report_dir / "summary.csv", index=False)
    (report_dir / "summary.md").write_text("# qconform summary\n\n" + to_markdown(df))
    return df
