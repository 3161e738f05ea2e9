"""Whether one (op, target) got slower or faster between two runs (``qconform diff``): a
Mann-Whitney U test from scipy. Apart from reports/diff.py so that a run's own report, which
compares with a baseline too (``pytest --baseline``), does not import scipy.stats."""

from __future__ import annotations

import math
import statistics
from typing import Any


def latency_change(before: list[float], now: list[float], min_pct: float, min_us: float, p_max: float) -> dict:
    """Per-case p50 latencies of one (op, target), the same cases in both runs: a Mann-Whitney U test
    (scipy, exact for small samples) of the run's against the baseline's, and whether the change
    counts: ``latency`` "slower" / "faster" only when p < ``p_max`` AND the medians moved by more than
    ``min_pct`` % AND by more than ``min_us``; else "same". One noisy case, or a few us on a
    small kernel, is never a regression."""
    b50, n50 = statistics.median(before), statistics.median(now)
    out: dict[str, Any] = {"p50_us_before": round(b50, 3), "p50_us_now": round(n50, 3), "latency_cases": len(now),
                           "latency": "same", "latency_p": None}
    if len(before) < 2 or len(now) < 2:
        return out
    moved = n50 - b50
    from scipy.stats import mannwhitneyu   # (scipy.stats: a second of CPU to import, the diff's only)
    p = float(mannwhitneyu(now, before, alternative="greater" if moved >= 0 else "less").pvalue)
    out["latency_p"] = p if not math.isnan(p) else None
    if (out["latency_p"] is not None and p < p_max and b50 > 0 and abs(moved) > b50 * min_pct / 100.0
            and abs(moved) > min_us):
        out["latency"] = "slower" if moved > 0 else "faster"
    return out
