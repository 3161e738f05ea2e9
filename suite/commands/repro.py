"""``qconform repro FAILURE.json [--target T]``: judge one failure file again, exactly as its run did.

The failure file's ``judged`` section says how its run judged it: the scheme, the tolerance policy
(found by its SHA-256: the built-in policy, or the tolerance.toml of the run folder the file is
in), the device and the time limit (suite/harness/repro.py). The case runs on the target in a
worker process (a crash or hang is a verdict), in a private temporary folder; the verdict is
printed with got, want and the worst element. Exit status 1 while it still fails (or is no longer
judged: unsupported), 0 when it passes now, with the runtime versions that changed since. A
setting that would judge it more leniently is refused (exit 2). ``--target`` another target:
the same case judged there under the same scheme and policy (a comparison). The case runs alone:
a failure that came from its batch-mates in the run (a kernel reading memory they left) can pass
here, and the pass says so, with the pytest command that judges it among them.
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
from suite.core.case import expand_case_paths, load_case
from suite.core.errors import QconformError
from suite.harness.repro import differences, digest_of, own_settings, read_judged
from suite.harness.shrink import make_judge


def register(sub):
    p = sub.add_parser("repro", help="judge a failure file again, as strictly as its run did (exit 1: still fails)",
                       description="Run a failure file (<run folder>/failures/<target>/<case>.json) on its target "
                                   "under the scheme, tolerance policy, device and time limit that judged it; print "
                                   "got, want and the worst element. Exit 1 while it fails, 0 once it passes. "
                                   "Several files or a failures/ folder: one line each, one worker per target.")
    p.add_argument("cases", nargs="+", metavar="FAILURE.json", help="failure files (or folders of them)")
    p.add_argument("--target", help="the target (default: the failure file's, if built in)")
    p.add_argument("--device", help="the device (a failure file never selects one: give the one it names)")
    p.add_argument("--tolerance", metavar="FILE", help="the tolerance policy, if neither the built-in one nor "
                                                         "its run folder's copy has the sha256 the file quotes")
    p.add_argument("--json", action="store_true", help="one JSON document per file")
    p.set_defaults(func=run)


def _settings(src: Path, args) -> tuple:
    """(case, judged, (target, device, tolerance, scheme, timeout)) of one failure file, or refused."""
    case = load_case(src)
    judged = read_judged(src)
    if judged is None:
        raise QconformError("has no judged section: it is a case file, not a failure file (run it with "
                            "pytest --target=T --case-file=FILE)", source=str(src), field="judged",
                            rule="qconform repro judges a failure file as its run did")
    target, device, tolerance = own_settings(judged, src, target=args.target, device=args.device,
                                             tolerance=args.tolerance)
    scheme, timeout = judged.get("scheme"), judged.get("timeout")
    if scheme not in kernel_schemes():
        raise QconformError(f"unknown scheme {json.dumps(scheme)}", source=str(src), field="judged.scheme",
                            rule="a failure file as qconform writes it")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf"):
        raise QconformError(f"must be a number of seconds > 0 (got {json.dumps(timeout)})", source=str(src),
                            field="judged.timeout", rule="a failure file as qconform writes it")
    if target == judged.get("target"):   # a rerun: exactly as strict as the run that failed it, or refused
        diff = differences(judged, scheme=scheme, tolerance_digest=digest_of(tolerance), device=device,
                           timeout=float(timeout))
        if diff:
            raise QconformError(f"would be judged with {'; '.join(diff)}", source=str(src), field="judged",
                                rule="a failure is reproduced under the settings that judged it")
    return case, judged, (target, device, tolerance, scheme, float(timeout))


def run(args) -> int:
    t0 = time.perf_counter()
    paths = expand_case_paths(args.cases)
    todo = [(p, *_settings(p, args)) for p in paths]   # every file checked before anything runs
    groups: dict[tuple, list] = {}
    for item in todo:
        groups.setdefault(item[3], []).append(item)
    home = tempfile.mkdtemp(prefix="qconform-repro-")   # private (0700): whatever the run writes
    cwd = os.getcwd()
    docs = []
    try:
        os.chdir(home)
        for (target, device, tolerance, scheme, timeout), items in groups.items():
            judge = make_judge(target, tolerance, scheme, timeout=timeout, device=device)
            try:
                for src, case, judged, _ in items:
                    t1 = time.perf_counter()
                    j = judge(case)
                    docs.append(_doc(src, case, judged, target, j, dict(judge.versions()), scheme, tolerance,
                                     device, timeout, time.perf_counter() - (t0 if len(todo) == 1 else t1)))
                    if not args.json:
                        _print(docs[-1], len(todo) == 1)
            finally:
                judge.close()
    finally:
        os.chdir(cwd)
        shutil.rmtree(home, ignore_errors=True)
    if args.json:
        print(json.dumps(docs if len(docs) > 1 else docs[0], indent=1))
    elif len(docs) > 1:
        fixed = sum(d["fixed"] for d in docs)
        print(f"{len(docs)} failure files: {len(docs) - fixed} still fail, {fixed} fixed")
    return 0 if all(d["fixed"] for d in docs) else 1


def _doc(src, case, judged, target, j, now, scheme, tolerance, device, timeout, seconds) -> dict:
    own = target == judged.get("target")
    was = {str(k): str(v) for k, v in (judged.get("versions") or {}).items()} if own else {}
    changed = {k: [was.get(k), now.get(k)] for k in sorted(set(was) | set(now)) if was.get(k) != now.get(k)}
    return {"file": str(src), "case": case.id, "op": case.op, "target": target, "status": j.status, "was": judged.get("status"),
            "own": own, "fixed": j.status == "pass", "message": j.message or j.reason, "finding": j.finding,
            "scheme": scheme, "tolerance": tolerance, "device": device, "timeout": timeout, "versions": now,
            "versions_changed": changed, "seconds": round(seconds, 2)}


def _print(d: dict, one: bool) -> None:
    head = "FIXED" if d["fixed"] else ("STILL FAILS" if d["status"] == d["was"] or not d["own"] else
                                       f"NOW {d['status'].upper()} (was {d['was']})")
    print(f"{head}: {d['message'] or d['status']}")
    if d["versions_changed"]:
        print("  versions changed since: " + ", ".join(f"{k} {a or '-'} -> {b or '-'}"
                                                       for k, (a, b) in d["versions_changed"].items()))
    elif d["fixed"] and d["own"]:
        print("  no runtime version changed since")
    if d["fixed"]:   # (a kernel reading memory its batch-mates left, e.g. tflm's SPACE_TO_BATCH_ND padding)
        print(f"  it ran alone in a fresh worker; its run may have batched it with other cases: "
              f"pytest --target={d['target']} --ops {d['op']} judges it among them")
    if one:
        print(f"judged as its run: scheme {d['scheme']}, tolerance {d['tolerance']}, time limit {d['timeout']:g} s"
              + (f", device {d['device']}" if d["device"] else "") + f" ({d['seconds']:g} s)", file=sys.stderr)
