"""``qconform diff BASELINE_DIR RUN_DIR``: the regression table of a run against a baseline.

Exit status: 0 no regression, 1 regressed (a nightly job gates on it), 2 not comparable (the
set-ups differ and ``--allow-different`` does not name the difference, or no result is in both
runs) or bad input.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from reports.diff import FIELDS, diff_runs, to_markdown, to_text, write_csv
from reports.latency import latency_change
from suite.core.errors import QconformError


def register(sub):
    p = sub.add_parser("diff", help="regressions of a run against a baseline run (exit 1 if any, 2 if not comparable)",
                       description="Compare two run folders (<report-dir>/runs/<run id>, a latest link, or a report "
                                   "directory: its latest run). First the set-ups: seed, cases (cases per op, the "
                                   "case ids and their content digests), ops, targets, devices, tolerance policy and "
                                   "scheme must match, else exit 2 naming what differs "
                                   "(--allow-different FIELD compares anyway, the difference heading the report). "
                                   "Then case by case: cases that passed and now fail, more mismatching elements, "
                                   "larger max |error|, new unsupported cases, cases gone missing, and per op and "
                                   "target bit-exact %% drops, max |error| growth, new, fixed and still-failing group "
                                   "verdicts (bias, declared scheme, certification), and latency changes (a "
                                   "Mann-Whitney U test on the per-case p50s, beyond both --latency-threshold and "
                                   "--latency-min-us, same device facts only; they gate only with --latency-gate). "
                                   "Runtime versions that differ are an upgrade: compared, and named. Prints the "
                                   "verdict first, writes diff.json and diff.csv (to RUN_DIR unless -o). Exit 0 no "
                                   "regression, 1 regressed, 2 not comparable or bad input.")
    p.add_argument("baseline", metavar="BASELINE_DIR")
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument("--latency-threshold", type=float, default=20.0, metavar="PCT",
                   help="smallest latency change listed, in percent of the baseline's median (default 20)")
    p.add_argument("--latency-min-us", type=float, default=5.0, metavar="US",
                   help="smallest latency change listed, in microseconds (default 5)")
    p.add_argument("--latency-p", type=float, default=0.05, metavar="P",
                   help="significance of the Mann-Whitney U test on the per-case p50s (default 0.05)")
    p.add_argument("--latency-gate", action="store_true",
                   help="a significant slow-down fails the diff (exit 1); by default latency changes are listed only")
    p.add_argument("--markdown", metavar="FILE", help="also write the diff as Markdown (for a pull-request comment)")
    p.add_argument("-o", "--output-dir", metavar="DIR", help="where diff.json and diff.csv go (default RUN_DIR)")
    p.add_argument("--allow-missing", action="store_true",
                   help="cases of the baseline absent from the run do not count as a regression")
    p.add_argument("--allow-different", action="append", default=[], choices=FIELDS, metavar="FIELD",
                   help="compare although this part of the set-up differs (repeatable): " + ", ".join(FIELDS)
                        + "; the difference heads the report")
    p.set_defaults(func=run)


def run(args) -> int:
    for name, v in (("--latency-threshold", args.latency_threshold), ("--latency-min-us", args.latency_min_us)):
        if not 0 <= v < float("inf"):   # (NaN compares false: it would pass every latency)
            raise QconformError(f"must be a finite number >= 0 (got {v})", field=name)
    if not 0 < args.latency_p <= 1:
        raise QconformError(f"must be in (0, 1] (got {args.latency_p})", field="--latency-p")
    d = diff_runs(args.baseline, args.run_dir, args.latency_threshold, args.allow_missing, args.allow_different,
                  latency_min_us=args.latency_min_us, latency_p=args.latency_p, latency_gate=args.latency_gate, latency=latency_change)
    out = Path(args.output_dir or d.run_folder)
    out.mkdir(parents=True, exist_ok=True)
    # written whatever the verdict: a diff.md or diff.json left by an earlier diff must not stand for this one
    (out / "diff.json").write_text(json.dumps(d.as_dict(), indent=2) + "\n")
    write_csv(d, out / "diff.csv")
    if args.markdown:
        Path(args.markdown).write_text(to_markdown(d))
    sys.stdout.write(to_text(d))
    return d.exit_status
