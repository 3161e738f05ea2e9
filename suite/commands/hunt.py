"""``qconform hunt --ops OP,... --target NAME --budget SECONDS -o DIR``: a targeted search for the cases
on which a target disagrees most with the golden (suite/harness/hunt.py, docs/hunt.md).

Each (op, target) gets ``--budget`` seconds; its distinct failures, each shrunk to a small case, go
to ``DIR/<target>/<case id>.json`` (case files with ``hunt`` and ``judged`` sections: the printed
command reruns one under the settings that found it) and ``DIR/hunt.json``. Exit status 1 when a
new failure (one no known finding explains) was found, 0 otherwise."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from reference.schemes import DEFAULT_SCHEME, kernel_schemes
from suite.cases.hunt import hunt_ops
from suite.core.errors import QconformError
from suite.harness.folder import write_whole
from suite.harness.hunt import (
    FINDINGS_ENV,
    Hunter,
    HuntOptions,
    findings_on,
    summary_doc,
)
from suite.harness.options import split_list
from suite.harness.repro import JUDGED, repro_command
from targets import get_target, target_name


def register(sub):
    p = sub.add_parser("hunt", help="search each op's parameter space for cases a target gets wrong",
                       description="A differential search steered toward a larger disagreement between a target "
                                   "and the golden (hypothesis's targeted search over the spec tables' space); the "
                                   "distinct failures, each shrunk, are written as case files. See docs/hunt.md.")
    p.add_argument("--target", action="append", default=[], metavar="NAME[,NAME]", required=True,
                   help="target(s) to hunt on (as pytest --target)")
    p.add_argument("--ops", action="append", default=[], metavar="OP[,OP]",
                   help="operators (default: every operator with a hunt space)")
    p.add_argument("--budget", type=float, default=60.0, metavar="SECONDS",
                   help="seconds per (op, target), searching and shrinking (default 60)")
    p.add_argument("-o", "--output", default="hunt", metavar="DIR", help="where the cases go (default hunt/)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="seed of the search (default 0)")
    p.add_argument("--case-timeout", "--timeout", dest="timeout", type=float, default=10.0, metavar="SECONDS",
                   help="per-case time limit in the target's worker process: a hang is a timeout (default 10)")
    p.add_argument("--scheme", default=None, help=f"requantization scheme of the golden (default {DEFAULT_SCHEME})")
    p.add_argument("--tolerance", metavar="FILE", help="tolerance policy (default suite/core/tolerances.toml)")
    p.add_argument("--findings", choices=["on", "off"], default=None,
                   help=f"off: ignore suite/core/findings.toml, hunt known failures as new ones (default on, "
                        f"or ${FINDINGS_ENV})")
    p.add_argument("--include-known", action="store_true",
                   help="steer toward known findings too (by default they are recognised, reported, not chased)")
    p.add_argument("--max-examples", type=int, default=None, metavar="N",
                   help="end each search after N cases (the same search on any machine)")
    p.add_argument("--no-shrink", action="store_true", help="keep each group's smallest case as found")
    p.add_argument("--search", choices=["targeted", "random"], default="targeted",
                   help="random: the same spaces without targeting (a baseline; default targeted)")
    p.add_argument("-q", "--quiet", action="store_true", help="no line per failure as it is found")
    p.set_defaults(func=run)


def run(args) -> int:
    targets = split_list(args.target)
    ops = split_list(args.ops) or hunt_ops()
    bad = [o for o in ops if o not in hunt_ops()]
    if bad:
        raise QconformError(f"no hunt space for {', '.join(bad)} (known: {', '.join(hunt_ops())})", field="--ops",
                            rule="operators with a hunt space (suite/cases/hunt)")
    for name, v in (("--budget", args.budget), ("--timeout", args.timeout)):
        if not 0 < v < float("inf"):
            raise QconformError(f"must be a finite number of seconds > 0 (got {v})", field=name)
    if args.max_examples is not None and args.max_examples < 1:
        raise QconformError(f"must be >= 1 (got {args.max_examples})", field="--max-examples")
    scheme = args.scheme or DEFAULT_SCHEME
    if scheme not in kernel_schemes():
        raise QconformError(f"unknown or non-kernel scheme '{scheme}' (known: {', '.join(kernel_schemes())})",
                            field="--scheme")
    if args.tolerance and not Path(args.tolerance).is_file():
        raise QconformError("no such file", source=args.tolerance, field="--tolerance")
    opts = HuntOptions(seed=args.seed, budget=args.budget, timeout=args.timeout, scheme=scheme,
                       tolerance_file=args.tolerance, include_known=args.include_known,
                       findings=findings_on(None if args.findings is None else args.findings == "on"),
                       max_examples=args.max_examples, shrink=not args.no_shrink, search=args.search)
    # hunted cases are one-offs: no compiled-model cache (targets.batching.CACHED_TARGETS) unless asked for
    os.environ.setdefault("QCONFORM_CACHE_DIR", "off")
    chosen = {}
    for sel in targets:
        t = get_target(sel)
        ok, why = t.availability()
        if not ok:
            raise QconformError(f"target '{sel}' is not available on this machine: {why}", field="--target")
        chosen[sel] = t
    out = Path(args.output)
    log = (lambda s: None) if args.quiet else (lambda s: print(f"  found: {s}", file=sys.stderr, flush=True))
    hunts, versions, new = [], {}, 0
    for sel, t in chosen.items():
        hunter = Hunter(target_name(sel), t, opts, selector=sel, log=log)
        try:
            versions[hunter.name] = hunter.ex.versions()
            for op in ops:
                res = hunter.hunt(op)
                hunter.write(res, out)
                hunts.append(res)
                new += len(res.new)
                print(res.summary())
                for g in res.new:
                    print(f"      reproduce: {repro_command(json.loads(Path(g.file).read_text())[JUDGED], g.file)}")
                write_whole(out / "hunt.json", (json.dumps(summary_doc(hunts, opts, versions), indent=1) + "\n").encode())
        finally:
            hunter.close()
    print(f"qconform hunt: {new} new distinct failure(s) in {len(hunts)} hunt(s); cases in {out}")
    return 1 if new else 0
