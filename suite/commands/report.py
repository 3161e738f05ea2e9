"""``qconform report RUN_DIR``: rebuild summary, results.parquet and index.html from results.jsonl alone."""

from __future__ import annotations

import sys
from pathlib import Path

from suite.core.errors import QconformError


def register(sub):
    p = sub.add_parser("report", help="rebuild a run's summary, results.parquet and index.html",
                       description="Rebuild summary.csv/.md, results.parquet and the self-contained index.html of "
                                   "a run from its results.jsonl alone (also for an interrupted run). run.json and "
                                   "certificate.json are used when present, never required.")
    p.add_argument("run_dir", metavar="RUN_DIR", help="the run's report directory (holds results.jsonl)")
    p.add_argument("-o", "--output", metavar="HTML", help="write the HTML here instead of RUN_DIR/index.html")
    p.set_defaults(func=run)


def run(args) -> int:
    from reports.html import build_html
    from reports.results import RESULTS, read_rows
    from reports.runinfo import write_parquet
    from reports.summary import to_text, write_summaries
    d = Path(args.run_dir)
    if not (d / RESULTS).exists():
        raise QconformError(f"no {RESULTS} here", source=str(d), field="RUN_DIR",
                            rule="a run directory holds results.jsonl")
    rows = read_rows(d)
    if not rows:
        raise QconformError(f"{RESULTS} holds no complete result", source=str(d / RESULTS), field="RUN_DIR")
    df = write_summaries(d, rows)
    written = [d / "summary.csv", d / "summary.md", write_parquet(d, rows)]
    out = Path(args.output) if args.output else d / "index.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(build_html(d, rows), encoding="utf-8")
    tmp.replace(out)
    written.append(out)
    print(to_text(df))
    print(f"{len(rows)} results; wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
    return 0
