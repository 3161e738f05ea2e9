"""``qconform diff BASELINE_DIR RUN_DIR``: the regression table of a run against a baseline.

Exit status: 0 no regression, 1 regressed (a nightly job gates on it), 2 bad input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from reports.diff import diff_runs, to_markdown, to_text, write_csv
from suite.core.errors import QconformError


def register(sub):
    p = sub.add_parser("diff", help="regressions of a run against a baseline run (exit 1 if any)",
                       description="Compare two report directories case by case: cases that passed and now fail, "
                                   "more mismatching elements, larger max |error|, new unsupported cases, cases "
                                   "gone missing, and per op and target bit-exact % drops, max |error| growth and "
                                   "latency regressions beyond both the threshold and the runs' recorded spread. "
                                   "Prints the table, writes diff.json and diff.csv (to RUN_DIR unless -o), and "
                                   "exits 1 when anything regressed.")
    p.add_argument("baseline", metavar="BASELINE_DIR")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--latency-threshold", type=float, default=10.0, metavar="PCT",
                   help="latency regression threshold in percent (default 10)")
    p.add_argument("--markdown", metavar="FILE", help="also write the diff as Markdown (for a pull-request comment)")
    p.add_argument("-o", "--output-dir", metavar="DIR", help="where diff.json and diff.csv go (default RUN_DIR)")
    p.add_argument("--allow-missing", action="store_true",
                   help="cases of the baseline absent from the run do not count as a regression")
    p.set_defaults(func=run)


def run(args) -> int:
    if args.latency_threshold < 0:
        raise QconformError(f"must be >= 0 (got {args.latency_threshold})", field="--latency-threshold")
    d = diff_runs(args.baseline, args.run_dir, args.latency_threshold, args.allow_missing)
    out = Path(args.output_dir) if args.output_dir else Path(args.run_dir)
    if out.is_file():
        out = out.parent
    out.mkdir(parents=True, exist_ok=True)
    (out / "diff.json").write_text(json.dumps(d.as_dict(), indent=2) + "\n")
    write_csv(d, out / "diff.csv")
    if args.markdown:
        Path(args.markdown).write_text(to_markdown(d))
    sys.stdout.write(to_text(d))
    return 1 if d.regressed else 0
