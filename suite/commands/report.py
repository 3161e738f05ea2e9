"""``qconform report RUN_DIR``: rebuild summary, results.parquet and index.html from results.jsonl alone."""

from __future__ import annotations

import sys
from pathlib import Path

from reports import write_reports
from reports.html import INDEX
from reports.results import RESULTS, write_atomic
from reports.summary import to_text
from suite.core.errors import QconformError


def register(sub):
    p = sub.add_parser("report", help="rebuild a run's summary, results.parquet and index.html",
                       description="Rebuild summary.csv/.md, results.parquet and the self-contained index.html of "
                                   "a run from its results.jsonl alone (also for an interrupted run). run.json and "
                                   "certificate.json are used when present, never required.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="the run's report directory (holds results.jsonl)")
    p.add_argument("-o", "--output", metavar="HTML", help="also write the HTML here (besides RUN_DIR/index.html)")
    p.set_defaults(func=run)


def run(args) -> int:
    d = Path(args.run_dir)
    if not (d / RESULTS).exists():
        raise QconformError(f"no {RESULTS} here", source=str(d), field="RUN_DIR",
                            rule="a run directory holds results.jsonl")
    report = write_reports(d)
    if not report.counts:
        raise QconformError(f"{RESULTS} holds no complete result", source=str(d / RESULTS), field="RUN_DIR")
    if args.output and d / INDEX in report.written:
        out = Path(args.output)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            report.written.append(write_atomic(out, (d / INDEX).read_bytes()))
        except OSError as e:
            report.errors.append(f"{out}: {type(e).__name__}: {e}")
    print(to_text(report.summary))
    for e in report.errors:
        print(f"qconform: could not write {e}", file=sys.stderr)
    print(f"{sum(report.counts.values())} results; wrote " + ", ".join(str(p) for p in report.written),
          file=sys.stderr)
    return 1 if report.errors else 0
