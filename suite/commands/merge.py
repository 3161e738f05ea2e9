"""``qconform merge RUN... -o DIR``: one run folder of the shards of a run (reports/merge.py)."""

from __future__ import annotations

import sys

from reports.merge import merge
from reports.summary import certificate_failures, totals, verdict_line
from suite.harness.folder import new_run_id


def register(sub):
    p = sub.add_parser("merge", help="one run folder of the shards of a run (pytest --shard=K/N)",
                       description="Merge the run folders of `pytest --shard=K/N` (K = 1..N, each on its own host) "
                                   "into one run folder: rows, summary, index.html, certificate, run.json listing each "
                                   "shard's host and devices. Refuses shards of different case sets, policies or "
                                   "versions, and a missing or duplicate shard. Exit status: 0 every shard complete "
                                   "and no new failure, 1 failures or an incomplete shard, 2 refused.")
    p.add_argument("runs", nargs="+", metavar="RUN", help="a shard's run folder (or its report folder: its latest)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="the merged run's folder (new or empty)")
    p.set_defaults(func=run)


def run(args) -> int:
    report, doc = merge(args.runs, args.output, new_run_id())
    for e in report.errors:
        print(f"qconform: could not write {e}", file=sys.stderr)
    for s in doc["shards"]:
        host = (s.get("host") or {}).get("hostname")
        print(f"shard {s['shard']}: run {s['run_id']} on {host}" + ("" if s["complete"] else " (INCOMPLETE)"))
    t = totals(report.summary) if report.summary else None
    line = verdict_line(t) if t else "no results"
    cert_bad = certificate_failures(report.certificate)   # (a non-conformant certified op fails the merge too)
    for c in cert_bad:
        print(f"certificate NON-CONFORMANT: {c}")
    bad = (doc["interrupted"] or doc.get("exit_status") not in (0, 5) or bool(t and (t["new"] or t["groups_new"]))
           or bool(cert_bad))
    print(f"merged run {args.output}: {line}" + (" (a shard is incomplete: not a pass)" if doc["interrupted"] else ""))
    return 1 if bad or report.errors else 0
