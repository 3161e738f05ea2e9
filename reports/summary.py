"""Per (op, target) summary tables: summary.csv, summary.md and the terminal table."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from .results import ERROR_STATUSES, FAIL, PASS, UNSUPPORTED, WAIVED, read_rows
from .causes import summary_columns

COLUMNS = ["op", "target", "cases", "passed", "failed", "unsupported", "errors", "bit_exact_pct",
           "max_abs_lsb", "mean_err_lsb", "p50_latency_us"]


def summarize(rows: Iterable[dict]):
    """A pandas DataFrame with one row per (op, target) (and device, when remote)."""
    import pandas as pd

    rows = list(rows)
    if not rows:
        return pd.DataFrame(columns=COLUMNS)
    df = pd.DataFrame(rows)
    for col, default in [("device", None), ("elements", 0), ("mismatches", 0), ("max_abs_lsb", None),
                         ("sum_err_lsb", 0.0), ("p50_us", None), ("reason", "")]:
        if col not in df:
            df[col] = default
    df["device"] = df["device"].fillna("")
    keys = ["op", "target"] + (["device"] if (df["device"] != "").any() else [])
    ran = df["status"].isin([PASS, FAIL, WAIVED])
    out = []
    for key, g in df.groupby(keys, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        r = dict(zip(keys, key))
        gr = g[ran.loc[g.index]]
        elements = float(gr["elements"].fillna(0).sum())
        mism = float(gr["mismatches"].fillna(0).sum())
        r["cases"] = int(len(g))
        r["passed"] = int((g["status"] == PASS).sum())
        r["failed"] = int((g["status"] == FAIL).sum())
        r["unsupported"] = int((g["status"] == UNSUPPORTED).sum())
        r["errors"] = int(g["status"].isin(ERROR_STATUSES).sum())
        for st, col in (("crash", "crashes"), ("timeout", "timeouts"), ("infra", "infra_errors")):
            r[col] = int((g["status"] == st).sum())
        r["waived"] = int((g["status"] == WAIVED).sum())
        r["bit_exact_pct"] = round(100.0 * (elements - mism) / elements, 3) if elements else None
        r["exact_cases_pct"] = (round(100.0 * float((gr["mismatches"].fillna(0) == 0).sum()) / len(gr), 2)
                                if len(gr) else None)
        r["max_abs_lsb"] = float(gr["max_abs_lsb"].max()) if len(gr) and gr["max_abs_lsb"].notna().any() else None
        r["mean_err_lsb"] = round(float(gr["sum_err_lsb"].fillna(0).sum()) / elements, 5) if elements else None
        lat = g["p50_us"].dropna()
        r["p50_latency_us"] = round(float(lat.median()), 2) if len(lat) else None
        if "finding" in g and g["finding"].notna().any():
            r["findings"] = ",".join(sorted(set(g["finding"].dropna())))
        # best_scheme (+ exact %) and mismatch-cause counts from the rows' scheme_exact / causes
        prefer = g["scheme"].dropna().iloc[0] if "scheme" in g and g["scheme"].notna().any() else None
        r.update(summary_columns([rows[i] for i in gr.index], prefer))
        out.append(r)
    res = pd.DataFrame(out)
    lead = keys + [c for c in COLUMNS if c not in keys]
    rest = [c for c in res.columns if c not in lead]
    return res[lead + rest]


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
    if isinstance(v, float):
        if v == int(v) and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.4g}" if abs(v) < 1e-2 else f"{v:.3f}".rstrip("0").rstrip(".")
    return str(v)


def write_summaries(report_dir: str | Path, rows: list[dict] | None = None):
    report_dir = Path(report_dir)
    rows = read_rows(report_dir) if rows is None else rows
    df = summarize(rows)
    df.to_csv(report_dir / "summary.csv", index=False)
    (report_dir / "summary.md").write_text("# qconform summary\n\n" + to_markdown(df))
    return df
