"""``qconform merge RUN... -o DIR``: one run folder of the shards of a run (reports/merge.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from reports.junit import JUNIT
from reports.merge import merge
from reports.summary import certificate_failures, totals, verdict_line
from suite.harness.folder import new_run_id
from suite.harness.shard import run_group


def register(sub):
    p = sub.add_parser("merge", help="one run folder of the shards of a run (pytest --shard=K/N)",
                       description="Merge the run folders of `pytest --shard=K/N` (K = 1..N, each on its own host) "
                                   "into one run folder: rows, summary, index.html, certificate, run.json listing each "
                                   "shard's host, commit and devices, and junit.xml (one JUnit file of the whole run). Checks every "
                                   "shard whole before writing anything: refuses an incomplete shard, rows of another "
                                   "run or its certificate's counts, shards of different run groups, commits, case "
                                   "sets, policies or versions, a dirty checkout, a missing or duplicate shard, a "
                                   "file a shard links to. Exit status: 0 no new failure, 1 failures, 2 refused.")
    p.add_argument("runs", nargs="+", metavar="RUN", help="a shard's run folder (or its report folder: its latest)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="the merged run's folder (new or empty)")
    p.add_argument("--run-group", default=None, metavar="ID",
                   help="the run group every shard must be of (pytest --run-group; default: $QCONFORM_RUN_GROUP, "
                        "else the CI's run id, e.g. GITHUB_RUN_ID; none in the environment: the shards' own, one)")
    p.add_argument("--allow-dirty", action="store_true",
                   help="merge shards run from a checkout with uncommitted changes (git.dirty; refused by default)")
    p.set_defaults(func=run)


def run(args) -> int:
    report, doc = merge(args.runs, args.output, new_run_id(), run_group=run_group(args.run_group),
                        allow_dirty=args.allow_dirty)
    for e in report.errors:
        print(f"qconform: could not write {e}", file=sys.stderr)
    if not any(s.get("run_group") for s in doc["shards"]):
        print("qconform: note: the shards name no run group (pytest --run-group, or a CI run id in the environment): "
              "nothing but their case set, commit and versions ties them to one run", file=sys.stderr)
    for s in doc["shards"]:
        host = (s.get("host") or {}).get("hostname")
        print(f"shard {s['shard']}: run {s['run_id']} on {host}, commit {str((s.get('git') or {}).get('commit'))[:12]}")
    t = totals(report.summary) if report.summary else None
    line = verdict_line(t) if t else "no results"
    cert_bad = certificate_failures(report.certificate)   # (a non-conformant certified op fails the merge too)
    for c in cert_bad:
        print(f"certificate NON-CONFORMANT: {c}")
    bad = doc.get("exit_status") not in (0, 5) or bool(t and (t["new"] or t["groups_new"])) or bool(cert_bad)
    print(f"merged run {args.output}: {line}; JUnit: {Path(args.output) / JUNIT}")
    return 1 if bad or report.errors else 0
