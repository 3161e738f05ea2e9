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
    import numpy as np
    import pandas as pd

    rows = list(rows)
    if not rows:
        return pd.DataFrame(columns=COLUMNS)
    cols = ["op", "target", "device", "status", "elements", "mismatches", "max_abs_lsb", "sum_err_lsb",
            "p50_us", "finding", "scheme"]
    df = pd.DataFrame({c: [r.get(c) for r in rows] for c in cols})   # only what the table needs
    for c in ("elements", "mismatches", "max_abs_lsb", "sum_err_lsb", "p50_us"):
        df[c] = pd.to_numeric(df[c], errors="coerce")
    df["device"] = df["device"].fillna("")
    keys = ["op", "target"] + (["device"] if (df["device"] != "").any() else [])
    ran = df["status"].isin([PASS, FAIL, WAIVED]).to_numpy()
    status = df["status"].to_numpy()
    elements_all = df["elements"].fillna(0).to_numpy()
    mism_all = df["mismatches"].fillna(0).to_numpy()
    sum_err_all = df["sum_err_lsb"].fillna(0).to_numpy()
    max_abs_all = df["max_abs_lsb"].to_numpy()
    p50_all = df["p50_us"].to_numpy()
    out = []
    for key, idx in df.groupby(keys, sort=False).indices.items():
        key = key if isinstance(key, tuple) else (key,)
        r = dict(zip(keys, key))
        st = status[idx]
        ridx = idx[ran[idx]]
        elements = float(elements_all[ridx].sum())
        mism = float(mism_all[ridx].sum())
        r["cases"] = int(len(idx))
        r["passed"] = int((st == PASS).sum())
        r["failed"] = int((st == FAIL).sum())
        r["unsupported"] = int((st == UNSUPPORTED).sum())
        r["errors"] = int(np.isin(st, list(ERROR_STATUSES)).sum())
        for s_, col in (("crash", "crashes"), ("timeout", "timeouts"), ("infra", "infra_errors")):
            r[col] = int((st == s_).sum())
        r["waived"] = int((st == WAIVED).sum())
        r["bit_exact_pct"] = round(100.0 * (elements - mism) / elements, 3) if elements else None
        r["exact_cases_pct"] = (round(100.0 * float((mism_all[ridx] == 0).sum()) / len(ridx), 2)
                                if len(ridx) else None)
        mx = max_abs_all[ridx]
        mx = mx[~np.isnan(mx)]
        r["max_abs_lsb"] = float(mx.max()) if mx.size else None
        r["mean_err_lsb"] = round(float(sum_err_all[ridx].sum()) / elements, 5) if elements else None
        lat = p50_all[idx]
        lat = lat[~np.isnan(lat)]
        r["p50_latency_us"] = round(float(np.median(lat)), 2) if lat.size else None
        found = sorted({rows[i]["finding"] for i in idx if rows[i].get("finding")})
        if found:
            r["findings"] = ",".join(found)
        # best_scheme (+ exact %) and mismatch-cause counts from the rows' scheme_exact / causes
        prefer = next((rows[i]["scheme"] for i in idx if rows[i].get("scheme")), None)
        r.update(summary_columns([rows[i] for i in ridx], prefer))
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
    if isinstance(v, float) and math.isinf(v):
        return str(v)
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
