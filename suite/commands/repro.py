"""``qconform repro FAILURE.json [--target T]``: judge one failure file again, exactly as its run did.

The failure file's ``judged`` section says how its run judged it: the scheme, the tolerance policy
(found by its SHA-256: the built-in policy, or the tolerance.toml of the run folder the file is
in), the device and the time limit (suite/harness/repro.py). The case runs on the target in a
worker process (a crash or hang is a verdict), in a private temporary folder; the verdict is
printed with got, want and the worst element. Exit status 1 while it still fails (or is no longer
judged: unsupported), 0 when it passes now, with the runtime versions that changed since. A
setting that would judge it more leniently is refused (exit 2). ``--target`` another target:
the same case judged there under the same scheme and policy (a comparison).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from reference.schemes import kernel_schemes
from suite.core.case import load_case
from suite.core.errors import QconformError
from suite.harness.repro import differences, digest_of, own_settings, read_judged
from suite.harness.shrink import make_judge


def register(sub):
    p = sub.add_parser("repro", help="judge a failure file again, as strictly as its run did (exit 1: still fails)",
                       description="Run a failure file (<run folder>/failures/<target>/<case>.json) on its target "
                                   "under the scheme, tolerance policy, device and time limit that judged it; print "
                                   "got, want and the worst element. Exit 1 while it fails, 0 once it passes.")
    p.add_argument("case", metavar="FAILURE.json", help="a failure file")
    p.add_argument("--target", help="the target (default: the failure file's, if built in)")
    p.add_argument("--device", help="the device (a failure file never selects one: give the one it names)")
    p.add_argument("--tolerance", metavar="FILE", help="the tolerance policy, if neither the built-in one nor "
                                                         "its run folder's copy has the sha256 the file quotes")
    p.add_argument("--json", action="store_true", help="one JSON document")
    p.set_defaults(func=run)


def run(args) -> int:
    t0 = time.perf_counter()
    src = Path(args.case)
    case = load_case(src)
    judged = read_judged(src)
    if judged is None:
        raise QconformError("has no judged section: it is a case file, not a failure file (run it with "
                            "pytest --target=T --case-file=FILE)", source=str(src), field="judged",
                            rule="qconform repro judges a failure file as its run did")
    target, device, tolerance = own_settings(judged, src, target=args.target, device=args.device,
                                             tolerance=args.tolerance)
    scheme = judged.get("scheme")
    timeout = judged.get("timeout")
    if scheme not in kernel_schemes():
        raise QconformError(f"unknown scheme {json.dumps(scheme)}", source=str(src), field="judged.scheme",
                            rule="a failure file as qconform writes it")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
        raise QconformError(f"must be a number of seconds > 0 (got {json.dumps(timeout)})", source=str(src),
                            field="judged.timeout", rule="a failure file as qconform writes it")
    own = target == judged.get("target")
    if own:   # a rerun: exactly as strict as the run that failed it, or refused
        diff = differences(judged, scheme=scheme, tolerance_digest=digest_of(tolerance), device=device,
                           timeout=float(timeout))
        if diff:
            raise QconformError(f"would be judged with {'; '.join(diff)}", source=str(src), field="judged",
                                rule="a failure is reproduced under the settings that judged it")
    home = tempfile.mkdtemp(prefix="qconform-repro-")   # private (0700): whatever the run writes
    cwd = os.getcwd()
    try:
        os.chdir(home)
        judge = make_judge(target, tolerance, scheme, timeout=float(timeout), device=device)
        try:
            j = judge(case)
            now = dict(judge.versions())
        finally:
            judge.close()
    finally:
        os.chdir(cwd)
        shutil.rmtree(home, ignore_errors=True)
    was = {str(k): str(v) for k, v in (judged.get("versions") or {}).items()} if own else {}
    changed = {k: (was.get(k), now.get(k)) for k in sorted(set(was) | set(now)) if was.get(k) != now.get(k)}
    fixed = j.status == "pass"
    doc = {"case": case.id, "target": target, "status": j.status, "was": judged.get("status"), "fixed": fixed,
           "message": j.message or j.reason, "finding": j.finding, "scheme": scheme, "tolerance": tolerance,
           "device": device, "timeout": timeout, "versions": now, "versions_changed": changed,
           "seconds": round(time.perf_counter() - t0, 2)}
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        head = "FIXED" if fixed else ("STILL FAILS" if j.status == judged.get("status") or not own else
                                      f"NOW {j.status.upper()} (was {judged.get('status')})")
        print(f"{head}: {j.message or j.reason or j.status}")
        if changed:
            print("versions changed since: " + ", ".join(f"{k} {a or '-'} -> {b or '-'}" for k, (a, b) in changed.items()))
        elif fixed and own:
            print("no runtime version changed since")
        print(f"judged as its run: scheme {scheme}, tolerance {tolerance}, time limit {timeout:g} s"
              + (f", device {device}" if device else "") + f" ({doc['seconds']:g} s)", file=sys.stderr)
    return 0 if fixed else 1
