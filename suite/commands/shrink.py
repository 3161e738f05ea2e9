"""``qconform shrink CASE.json --target X``: the smallest sub-case that still fails on X."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

from reference.schemes import kernel_schemes
from suite.core.case import load_case
from suite.core.errors import QconformError
from suite.core.spec import check_case
from suite.harness.shrink import make_judge, shrink, shrunk_document


def register(sub):
    p = sub.add_parser("shrink", help="reduce a failing case to a smaller one that still fails",
                       description="Run a failing case (e.g. a failure file from <report-dir>/failures/) on a target, "
                                   "then search smaller sub-cases (fewer elements, smaller shapes, same values) that "
                                   "still fail, and save the smallest as a case file with got and want.")
    p.add_argument("case", metavar="CASE.json", help="the failing case file")
    p.add_argument("--target", help="the target it fails on (default: the failure file's 'target')")
    p.add_argument("-o", "--output", metavar="FILE", help="where the shrunk case goes (default <CASE>.shrunk.json)")
    p.add_argument("--tolerance", metavar="FILE", help="tolerance policy (default suite/core/tolerances.toml)")
    p.add_argument("--scheme", help="requantization scheme of the golden (default tflite-ref-double)")
    p.add_argument("--any-mismatch", action="store_true",
                   help="shrink while any element differs (default: while the verdict is a failure)")
    p.add_argument("--max-runs", type=int, default=200, metavar="N", help="target runs at most (default 200)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                   help="per-run time limit of a target in a worker process (default 60): a hang is a timeout")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def run(args) -> int:
    src = Path(args.case)
    case = load_case(src)
    problems = check_case(case)
    if problems:
        pr = problems[0]
        raise QconformError(f"{pr.message} [{pr.clause}]", source=str(src), field=pr.field,
                            rule="the case must follow its spec table")
    target = args.target
    if not target:
        try:
            target = json.loads(src.read_text()).get("target")
        except (OSError, ValueError):
            target = None
    if not target:
        raise QconformError("name the target (--target X): the case file does not say", field="--target")
    if args.max_runs < 1:
        raise QconformError(f"must be >= 1 (got {args.max_runs})", field="--max-runs")
    if args.scheme is not None:   # else every sub-case "does not fail": the golden raises on an unknown name
        if args.scheme not in kernel_schemes():
            raise QconformError(f"unknown or non-kernel scheme '{args.scheme}' (known: "
                                f"{', '.join(kernel_schemes())})", field="--scheme")
    if not args.timeout > 0:
        raise QconformError(f"must be > 0 seconds (got {args.timeout})", field="--timeout")
    judge = make_judge(target, args.tolerance, args.scheme, args.any_mismatch, timeout=args.timeout)
    log = (lambda s: None) if args.quiet else (lambda s: print(f"  {s}", file=sys.stderr))
    try:
        res = shrink(case, judge, max_runs=args.max_runs, log=log)
    finally:
        judge.close()   # the isolation worker (a crash or hang ends only it) and the target
    out = Path(args.output) if args.output else src.with_name(src.stem.removesuffix(".shrunk") + ".shrunk.json")
    doc = shrunk_document(res, target)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    os.replace(tmp, out)
    print(f"{case.id} on {target}: {res.before} -> {res.after} elements "
          f"(output {list(case.outputs[0].shape)} -> {list(res.case.outputs[0].shape)}) in {res.runs} runs; "
          f"still {res.judgement.status}: {res.judgement.reason}")
    print(f"wrote {out}")
    print(f"reproduce: pytest --target={shlex.quote(target)} --case-file={shlex.quote(str(out))} "
          f"--report-dir=/tmp/qconform-repro")
    return 0
