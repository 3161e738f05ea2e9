"""``qconform repro FAILURE.json [--target T]``: judge one failure file again, exactly as its run did.

The failure file's ``judged`` section says how its run judged it: the scheme, the tolerance policy
(found by its SHA-256: the built-in policy, or the tolerance.toml of the run folder the file is
in), the device and the time limit (suite/harness/repro.py). The case runs on the target in a
worker process (a crash or hang is a verdict), in a private temporary folder; the verdict is
printed with got, want and the worst element. Exit status 1 while it still fails (or is no longer
judged: unsupported), 0 when it passes now, with the runtime versions that changed since. A
setting that would judge it more leniently is refused (exit 2). ``--target`` another target:
the same case judged there under the same scheme and policy (a comparison). The case runs alone
first. A pass is "fixed" only where it can be: under the runtime versions that failed it, a pass
says the failure depends on what ran before or beside it in the run's worker (a kernel reading
memory it did not write), never fixed (exit 1); under other versions, a case the run judged in a
batch (``judged.batch``) is judged again in that batch, its generated batch-mates made anew from
the run's seed, and is fixed only if it passes there too (a batch of case files' or a model's
cases cannot be made again: exit 1, with the pytest command that judges it among them).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from reference.schemes import kernel_schemes
from suite.cases.generate import case_id, generator_ops, make_case, plan_ids
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
                    j, alone = judge(case), None
                    if j.status == "pass" and target == judged.get("target"):
                        was = {str(k): str(v) for k, v in (judged.get("versions") or {}).items()}
                        if was == {str(k): str(v) for k, v in judge.versions().items()}:
                            alone = ("the same runtime versions failed it in its run: the failure depends on what "
                                     "ran before or beside it in the run's worker (a kernel reading memory it did "
                                     "not write), or the kernel changed without its version")
                        elif judged.get("batch") != [case.id]:
                            batch = _batch_of(case, judged)
                            if isinstance(batch, str):
                                alone = batch
                            else:
                                j = judge(case, batch)
                    docs.append(_doc(src, case, judged, target, j, dict(judge.versions()), scheme, tolerance,
                                     device, timeout, time.perf_counter() - (t0 if len(todo) == 1 else t1), alone))
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


def _batch_of(case, judged: dict) -> list | str:
    """The batch the run judged ``case`` in, made anew (its generated cases from the run's seed), or
    why it cannot be."""
    ids, seed, n = judged.get("batch"), judged.get("seed"), judged.get("cases_per_op")
    if ids is None:
        return "its run did not record the batch it judged it in"
    if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= 10_000:
        return "its run's cases per op are not recorded"
    if not (isinstance(ids, list) and len(ids) <= 4096 and all(isinstance(i, str) for i in ids) and case.id in ids):
        return "its judged.batch is not a list of case ids holding its own"
    if isinstance(seed, bool) or not isinstance(seed, int):
        return "its run's seed is not recorded"
    planned = {case_id(*p) for p in plan_ids([case.op], n)} if case.op in generator_ops() else set()
    try:   # (make_case makes any variant name it is given: the run's plan says which it made)
        generated = case.id in planned and make_case(case.op, case.variant, case.index, seed).digest() == case.digest()
    except Exception:  # noqa: BLE001
        generated = False
    if not generated:
        return "it is not the generated case of its id (a case file's or a model's)"
    batch = []
    for cid in ids:   # <OP>-<variant>-<index:03d>, all of the case's op (a batch is one (op, target)'s)
        variant, _, index = cid[len(case.op) + 1:].rpartition("-") if cid.startswith(case.op + "-") else ("", "", "")
        made = None
        if cid in planned and variant and index.isdigit():
            with contextlib.suppress(Exception):   # (a variant the op's generator does not make: not rebuilt)
                made = make_case(case.op, variant, int(index), seed)
        if made is None or made.id != cid:
            return f"its batch-mate {cid} is no generated case of {case.op} (a case file's or a model's)"
        batch.append(case if cid == case.id else made)
    return batch


def _doc(src, case, judged, target, j, now, scheme, tolerance, device, timeout, seconds, alone=None) -> dict:
    own = target == judged.get("target")
    was = {str(k): str(v) for k, v in (judged.get("versions") or {}).items()} if own else {}
    changed = {k: [was.get(k), now.get(k)] for k in sorted(set(was) | set(now)) if was.get(k) != now.get(k)}
    return {"file": str(src), "case": case.id, "op": case.op, "target": target, "status": j.status, "was": judged.get("status"),
            "own": own, "fixed": j.status == "pass" and alone is None, "passes_alone": alone,
            "message": j.message or j.reason, "finding": j.finding,
            "scheme": scheme, "tolerance": tolerance, "device": device, "timeout": timeout, "versions": now,
            "versions_changed": changed, "seconds": round(seconds, 2)}


def _print(d: dict, one: bool) -> None:
    head = "FIXED" if d["fixed"] else "PASSES ALONE, NOT KNOWN FIXED" if d["passes_alone"] else (
        "STILL FAILS" if d["status"] == d["was"] or not d["own"] else f"NOW {d['status'].upper()} (was {d['was']})")
    print(f"{head}: {d['message'] or d['case'] + ' on ' + d['target'] + ': ' + d['status']}")
    if d["versions_changed"]:
        print("  versions changed since: " + ", ".join(f"{k} {a or '-'} -> {b or '-'}"
                                                       for k, (a, b) in d["versions_changed"].items()))
    elif d["fixed"] and d["own"]:
        print("  no runtime version changed since")
    if d["passes_alone"]:   # (a kernel reading memory its batch-mates left, e.g. tflm's SPACE_TO_BATCH_ND padding)
        print(f"  not reproduced alone, and not known fixed: {d['passes_alone']}; "
              f"pytest --target={d['target']} --ops {d['op']} judges it among the others")
    if one:
        print(f"judged as its run: scheme {d['scheme']}, tolerance {d['tolerance']}, time limit {d['timeout']:g} s"
              + (f", device {d['device']}" if d["device"] else "") + f" ({d['seconds']:g} s)", file=sys.stderr)
