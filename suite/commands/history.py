"""``qconform history REPORT_DIR``: every run under a report directory, run by run (reports/history.py).

Exit status: 0 (a history is information, not a gate: ``qconform diff`` is the gate), 2 bad input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from reports.history import LAST, as_dict, history, svg, to_csv, to_text
from reports.results import write_atomic
from suite.core.errors import QconformError


def register(sub):
    p = sub.add_parser("history", help="every run under a report directory: failing since, flaky cases, trend",
                       description="Read every run folder under REPORT_DIR (REPORT_DIR/runs/<run id>: results.jsonl "
                                   "or results.parquet, run.json, summary.csv and certificate.json only). Runs of "
                                   "different case sets (seed, ops, cases per op, case files, model) are kept apart. "
                                   "Per case set: each run's commit, exit status, results, pass rate, failing group "
                                   "verdicts and new failures, and each build change (commit, runtime versions); the "
                                   "cases and group verdicts (bias, declared scheme, certification) failing in the "
                                   "newest run with the run their failing streak began ('failing since'); flaky cases "
                                   "(at least two pass/fail flips between runs of one build in the last --last runs). "
                                   "With -o: history.json, one history-<n>.csv (every (case, target) "
                                   "run by run) and history-<n>.svg (the trend) per case set.")
    p.add_argument("report_dir", metavar="REPORT_DIR")
    p.add_argument("--last", type=int, default=LAST, metavar="N",
                   help=f"runs in which flaky cases are looked for (default {LAST})")
    p.add_argument("-o", "--output-dir", metavar="DIR", help="write history.json, history-<n>.csv and history-<n>.svg")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.last < 2:
        raise QconformError(f"must be >= 2 (got {args.last})", field="--last", rule="a flip needs two runs")
    series, notes = history(args.report_dir)
    if not series:
        raise QconformError("no finished run folder here" + (f" ({'; '.join(notes)})" if notes else ""),
                            source=str(args.report_dir), field="REPORT_DIR",
                            rule="runs/<run id>/ holding results.jsonl and run.json")
    sys.stdout.write(to_text(series, notes, args.last))
    if args.output_dir:
        out = Path(args.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        write_atomic(out / "history.json", json.dumps(as_dict(series, notes, args.last), indent=2) + "\n")
        for i, s in enumerate(series, 1):
            write_atomic(out / f"history-{i}.csv", to_csv(s))
            write_atomic(out / f"history-{i}.svg", svg(s))
    return 0
