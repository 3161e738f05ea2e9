"""``qconform shrink FAILURE.json``: the smallest sub-case that still fails, judged as the run did.

A failure file carries what judged it (its ``judged`` section, suite/harness/repro.py): the
target, device, scheme, tolerance policy and time limit are taken from there, and an option that
contradicts them is refused. A plain case file needs ``--target`` (and takes the defaults)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from reference.schemes import DEFAULT_SCHEME, kernel_schemes
from suite.core.case import load_case
from suite.core.errors import QconformError
from suite.core.spec import check_case
from suite.core.tolerance import DEFAULT_FILE
from suite.harness.folder import write_whole
from suite.harness.repro import JUDGED, differences, digest_of, own_settings, read_judged, pytest_command, repro_command
from suite.harness.shrink import make_judge, shrink, shrunk_document


def register(sub):
    p = sub.add_parser("shrink", help="reduce a failing case to a smaller one that still fails",
                       description="Run a failing case (e.g. a failure file from <report-dir>/failures/) on a target, "
                                   "then search smaller sub-cases (fewer elements, smaller shapes, same values) that "
                                   "still fail, and save the smallest as a case file with got and want.")
    p.add_argument("case", metavar="CASE.json", help="the failing case file")
    p.add_argument("--target", help="the target it fails on (default: the failure file's)")
    p.add_argument("--device", help="the device it runs on (default: the failure file's)")
    p.add_argument("-o", "--output", metavar="FILE", help="where the shrunk case goes (default <CASE>.shrunk.json)")
    p.add_argument("--tolerance", metavar="FILE", help="tolerance policy (default: the failure file's, else "
                                                         "suite/core/tolerances.toml)")
    p.add_argument("--scheme", help="requantization scheme of the golden (default: the failure file's, else "
                                    "tflite-ref-double)")
    p.add_argument("--any-mismatch", action="store_true",
                   help="shrink while any element differs (default: while the verdict is a failure)")
    p.add_argument("--max-runs", type=int, default=200, metavar="N", help="target runs at most (default 200)")
    p.add_argument("--case-timeout", "--timeout", dest="timeout", type=float, default=None, metavar="SECONDS",
                   help="per-run time limit of a target in a worker process (default: the failure file's, "
                        "else 60): a hang is a timeout")
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
    judged = read_judged(src)
    target, device, tolerance = args.target, args.device, args.tolerance
    if judged is not None:   # only what runs and reads nothing the command line did not name
        target, device, tolerance = own_settings(judged, src, target=target, device=device, tolerance=tolerance)
    if not target:
        raise QconformError("name the target (--target X): the case file does not say", field="--target")
    if args.max_runs < 1:
        raise QconformError(f"must be >= 1 (got {args.max_runs})", field="--max-runs")
    own = judged is not None and judged.get("target") == target   # a rerun: judged as the run did
    scheme = args.scheme or (str(judged.get("scheme")) if own else DEFAULT_SCHEME)
    timeout = args.timeout if args.timeout is not None else (_seconds(judged.get("timeout"), src) if own else 60.0)
    if scheme not in kernel_schemes():   # else every sub-case "does not fail": the golden raises on an unknown name
        raise QconformError(f"unknown or non-kernel scheme '{scheme}' (known: {', '.join(kernel_schemes())})",
                            field="--scheme")
    if not 0 < timeout < float("inf"):
        raise QconformError(f"must be a finite number of seconds > 0 (got {timeout})", field="--timeout")
    if own:
        try:
            digest = digest_of(tolerance)
        except OSError as e:
            raise QconformError(f"cannot read the tolerance policy it was judged under: {e.strerror}",
                                source=str(tolerance), field="--tolerance",
                                rule=f"give --tolerance FILE with sha256 {(judged.get('tolerance') or {}).get('sha256')}") from None
        diff = differences(judged, scheme=scheme, tolerance_digest=digest, device=device, timeout=timeout)
        if diff:
            raise QconformError(f"would be judged with {'; '.join(diff)}", source=str(src), field="judged",
                                rule="a failure is shrunk under the settings that judged it")
    judge = make_judge(target, tolerance, scheme, args.any_mismatch, timeout=timeout, device=device)
    log = (lambda s: None) if args.quiet else (lambda s: print(f"  {s}", file=sys.stderr))
    try:
        res = shrink(case, judge, max_runs=args.max_runs, log=log)
    finally:
        judge.close()   # the isolation worker (a crash or hang ends only it) and the target
    out = Path(args.output) if args.output else src.with_name(src.stem.removesuffix(".shrunk") + ".shrunk.json")
    doc = shrunk_document(res, target)
    if own:   # the shrunk case is judged as the failure was: the same strict repro
        doc[JUDGED] = {**judged, "status": res.judgement.status}
    write_whole(out, (json.dumps(doc, separators=(",", ":")) + "\n").encode())
    print(f"{case.id} on {target}: {res.before} -> {res.after} elements "
          f"(output {list(case.outputs[0].shape)} -> {list(res.case.outputs[0].shape)}) in {res.runs} runs; "
          f"still {res.judgement.status}: {res.judgement.reason}")
    print(f"wrote {out}")
    judged_as = doc.get(JUDGED) or {"target": target, "device": device, "scheme": scheme, "timeout": timeout,
                                    "tolerance": {"file": tolerance or str(DEFAULT_FILE)}}
    print(f"reproduce: {(repro_command if own else pytest_command)(judged_as, out)}")
    return 0


def _seconds(v, src) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise QconformError(f"must be a number of seconds (got {json.dumps(v)})", source=str(src),
                            field="judged.timeout", rule="a failure file as qconform writes it")
    return float(v)
