"""Where a run's wall time goes: the targets vs the harness (``timing.json``, terminal lines).

Definitions (docs/performance.md):

* **wall**: from the plugin's ``pytest_configure`` to ``pytest_sessionfinish`` in the
  controller (case generation, collection, every test, the summaries; not the Python and
  pytest start-up before it). With ``-n N`` each of the N workers has this wall too.
* **target time** of a target: the time the target itself spends on the cases. For an
  isolated target (suite/isolation.py), the time its worker process reports for each case
  or batch (model building, sessions, invokes; a crash or hang: the wait) plus the worker's
  start-up; the messages to and from it count as harness. For an in-process target, the
  wall time of its ``run()`` (``Run.execute_parts``, judging excluded).
* **invoke time**: the part of it the runtime spends in its own invoke calls (as the targets
  report it: ``info["invoke_s"]``, warm-up included; else the latency samples).
* **harness**: everything else: pytest, generation, golden, comparison, tolerance/cause
  analysis, result writing. ``harness share = 1 - sum(target time) / (wall * processes)``,
  where processes is 1, or the number of xdist workers (their waits count as harness).
  One runner runs the targets one batch at a time, so their times never overlap each other:
  in a pipelined run (suite/pipeline.py), where judging and pytest work alongside the
  targets, the harness share is the share of the wall time in which no target was working.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

TIMING_JSON = "timing.json"
FORMAT = "qconform-timing/1"


def merge(stats: list[dict[str, float]]) -> dict[str, float]:
    """Sum the Run.stats of several processes (xdist workers)."""
    out: dict[str, float] = defaultdict(float)
    for s in stats:
        for k, v in (s or {}).items():
            if isinstance(v, (int, float)):
                out[k] += float(v)
    return dict(out)


def summarize(stats: dict[str, float], wall_s: float, processes: int = 1) -> dict[str, Any]:
    """The timing document: per target cases, target/invoke seconds, cases per second and
    shares of the wall time; the harness share of the whole run."""
    targets: dict[str, dict[str, float]] = {}
    for k, v in stats.items():
        kind, sep, name = k.partition(":")
        if sep and kind in ("cases", "target_wall_s", "invoke_s"):
            targets.setdefault(name, {})[kind] = v
    budget = max(wall_s * max(1, processes), 1e-9)
    rows = {}
    for name, d in sorted(targets.items()):
        cases, tw, inv = int(d.get("cases", 0)), d.get("target_wall_s", 0.0), d.get("invoke_s", 0.0)
        rows[name] = {"cases": cases, "target_s": round(tw, 3), "invoke_s": round(inv, 3),
                      "cases_per_s": round(cases / tw, 1) if tw > 0 else None,
                      "target_pct_of_wall": round(100 * tw / budget, 2),
                      "invoke_pct_of_wall": round(100 * inv / budget, 2),
                      "invoke_pct_of_target": round(100 * inv / tw, 2) if tw > 0 else None}
    target_total = sum(r["target_s"] for r in rows.values())
    harness = max(0.0, budget - target_total)
    return {"format": FORMAT, "wall_s": round(wall_s, 3), "processes": max(1, processes),
            "target_s": round(target_total, 3), "harness_s": round(harness, 3),
            "harness_pct": round(100 * harness / budget, 2),
            "invoke_s": round(sum(r["invoke_s"] for r in rows.values()), 3),
            "collect_s": round(stats.get("collect_s", 0.0), 3),
            "worker_start_s": round(stats.get("isolation_worker_start_s", 0.0), 3),
            "target_wait_s": round(stats.get("target_wait_s", 0.0), 3),
            # the pipeline started on a guessed plan (suite/plugin.py): was it right? (None: no guess)
            "plan_guessed_right": (bool(stats["plan_guessed_right"]) if "plan_guessed_right" in stats else None),
            "harness_parts": harness_parts(stats, harness),
            "targets": rows}


def harness_parts(stats: dict[str, float], harness: float) -> dict[str, Any]:
    """The harness time by part: judging each outcome (golden, of which the default scheme's
    and the analysis' other schemes, comparison, tolerance, cause analysis, the result row),
    the report artefacts at the end (summaries, run.json, parquet, HTML) and the rest
    (pytest's own per-test work, case generation, collection, isolation messages).

    In a pipelined run (suite/pipeline.py) judging runs in its own thread alongside the
    targets, so it is not a part of the harness's wall time: ``judge_overlaps`` says so, and
    ``tests_wait_s`` is how long the tests waited for their verdicts (targets or judge)."""
    judge, report = stats.get("judge_s", 0.0), stats.get("report_s", 0.0)
    overlaps = bool(stats.get("pipelined"))
    return {"judge_s": round(judge, 3), "golden_s": round(stats.get("golden_s", 0.0), 3),
            "analysis_s": round(stats.get("analysis_s", 0.0), 3), "report_s": round(report, 3),
            "golden_cache_hits": int(stats.get("golden_cache_hits", 0)),
            "analysis_cache_hits": int(stats.get("analysis_cache_hits", 0)),
            "judge_overlaps": overlaps, "tests_wait_s": round(stats.get("tests_wait_s", 0.0), 3),
            "pytest_and_rest_s": round(max(0.0, harness - (0.0 if overlaps else judge) - report), 3)}


def write(report_dir: str | Path, doc: dict[str, Any]) -> Path | None:
    p = Path(report_dir) / TIMING_JSON
    try:
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(json.dumps(doc, indent=2) + "\n")
        os.replace(tmp, p)
        return p
    except OSError:
        return None


def read(report_dir: str | Path) -> dict[str, Any] | None:
    try:
        return json.loads((Path(report_dir) / TIMING_JSON).read_text())
    except (OSError, ValueError):
        return None


def _hits(hp: dict[str, Any]) -> str:
    n, a = hp.get("golden_cache_hits") or 0, hp.get("analysis_cache_hits") or 0
    return ((f"; {n} goldens" + (f" and {a} analyses" if a else "") + " read from the golden cache") if n or a
            else "")


def lines(doc: dict[str, Any]) -> list[str]:
    """Terminal lines: the harness share, then one line per target."""
    procs = doc["processes"]
    head = (f"wall {doc['wall_s']:.1f} s" + (f" x {procs} workers" if procs > 1 else "")
            + f"; targets {doc['target_s']:.1f} s (invoke {doc['invoke_s']:.1f} s), "
            f"harness {doc['harness_s']:.1f} s = {doc['harness_pct']:.1f}% of the wall time")
    hp = doc.get("harness_parts") or {}
    if hp and hp.get("judge_overlaps"):
        head += (f"\nharness: report artefacts {hp['report_s']:.1f} s, pytest and the rest "
                 f"{hp['pytest_and_rest_s']:.1f} s; pipelined: judging {hp['judge_s']:.1f} s (golden "
                 f"{hp['golden_s']:.1f} s, cause analysis {hp['analysis_s']:.1f} s{_hits(hp)}) ran alongside the "
                 f"targets, "
                 f"the tests waited {hp['tests_wait_s']:.1f} s for verdicts")
    elif hp:
        head += (f"\nharness: judging {hp['judge_s']:.1f} s (golden {hp['golden_s']:.1f} s, cause analysis "
                 f"{hp['analysis_s']:.1f} s{_hits(hp)}), report artefacts {hp['report_s']:.1f} s, pytest and the rest "
                 f"{hp['pytest_and_rest_s']:.1f} s")
    head += (f"\ncase generation and collection {doc.get('collect_s', 0.0):.1f} s; waits for target worker "
             f"start-up {doc.get('worker_start_s', 0.0):.1f} s (part of the target time); the runner waited "
             f"{doc.get('target_wait_s', 0.0):.1f} s for the targets (their time, messages and thread switches)")
    out = [head, f"{'target':<12} {'cases':>6} {'target s':>9} {'cases/s':>9} {'% wall':>7} "
                 f"{'invoke s':>9} {'% wall':>7}"]
    for name, r in doc["targets"].items():
        cps = f"{r['cases_per_s']:.1f}" if r["cases_per_s"] is not None else "-"
        out.append(f"{name:<12} {r['cases']:>6} {r['target_s']:>9.2f} {cps:>9} {r['target_pct_of_wall']:>7.1f} "
                   f"{r['invoke_s']:>9.3f} {r['invoke_pct_of_wall']:>7.2f}")
    return out
