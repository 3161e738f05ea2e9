"""``qconform witness CASE.json [...] [--target T,...] [--scheme NAME]``: run saved cases on every
available target and say which give the golden's value and which agree with each other.

Each target runs in its worker process, as in a run (a crash is that case's ``crash``). For each
case: the golden under the scheme, then per target its status and, where it gave outputs, its
max |error| in LSB against the golden and the targets that gave the very same outputs. Exit
status 0; 1 when no target reproduced the golden of some case that two or more ran (review it).
"""

from __future__ import annotations

import json

from reference import golden
from reports import witness
from suite.core.case import expand_case_paths, load_case
from suite.core.compare import compare
from suite.core.errors import QconformError
from suite.harness.isolation import executor_for
from suite.harness.judge import _digest   # the rows' out_digest, so the two agree
from targets import BUILTIN, get_target, parse_target_list
from targets.base import Timing

#: targets a witness run never picks by itself (the golden itself; a device needing options)
_NOT_BY_DEFAULT = {"ref", "netrun"}


def register(sub):
    p = sub.add_parser("witness", help="run saved cases on every available target: who gives the golden's value",
                       description="Run case files (failure files too) on every available target (or --target) "
                                   "and print, per case, each target's status, its max |error| against the "
                                   "golden and which targets give the same outputs.")
    p.add_argument("cases", nargs="+", help="case files or folders of them")
    p.add_argument("--target", action="append", help="targets (comma-separated; default: every available one)")
    p.add_argument("--scheme", default=None, help="the golden's scheme (default tflite-ref-double)")
    p.add_argument("--case-timeout", "--timeout", dest="timeout", type=float, default=60.0,
                   help="seconds per case before a target is killed")
    p.add_argument("--json", action="store_true", help="one JSON document instead of the table")
    p.set_defaults(func=run)


def _targets(names: list[str]) -> dict:
    out, skipped = {}, []
    for n in names or [n for n in BUILTIN if n not in _NOT_BY_DEFAULT]:
        t = get_target(n)
        ok, why = t.availability()
        if ok:
            out[n] = t
        elif names:
            raise QconformError(f"target {n} is not available: {why}", field="--target")
        else:
            skipped.append(n)
    if not out:
        raise QconformError("no target is available (qconform targets says why)", field="--target")
    return out


def run(args) -> int:
    paths = expand_case_paths(args.cases)
    if not paths:
        raise QconformError("no case files found", field="cases")
    cases = [load_case(p) for p in paths]
    wants = [golden(c, args.scheme) for c in cases]
    targets = _targets(parse_target_list(args.target))
    timing = Timing(warmup=0, repeats=1)
    results: dict[str, list] = {}
    for name, t in targets.items():
        ex = executor_for(t, "process", args.timeout, 1)
        try:
            for c in cases:
                ex.submit([c], 1, timing)
            results[name] = [ex.next()[1][0] for _ in cases]
        finally:
            ex.close()
    docs, review = [], False
    for i, c in enumerate(cases):
        per, seen = {}, {}
        for name in targets:
            o = results[name][i]
            entry = {"status": o.status, "reason": o.reason[:300] if o.status != "ok" else ""}
            if o.status == "ok":
                cmp = compare(wants[i], o.outputs, c.outputs)
                if not cmp.garbage:
                    digest = _digest(o.outputs)
                    entry.update(max_abs_lsb=cmp.max_abs_lsb, bit_exact=cmp.bit_exact, digest=digest)
                    seen[name] = (cmp.bit_exact, digest)
                else:
                    entry.update(status="error", reason=f"garbage: {cmp.garbage}")
            per[name] = entry
        for name, e in per.items():
            if "digest" in e:
                e["same_as"] = witness.split(seen, name, e["digest"])[1]
        golden_w = sorted(n for n, (exact, _) in seen.items() if exact and n not in witness.NOT_WITNESSES)
        flag = not golden_w and len([n for n in seen if n not in witness.NOT_WITNESSES]) >= 2
        review = review or flag
        docs.append({"case": c.id, "source": c.source, "golden_witnesses": golden_w, "review": flag, "targets": per})
    if args.json:
        print(json.dumps(docs, indent=1, default=str))
    else:
        for d in docs:
            print(f"{d['case']} ({d['source']}): golden's value given by {', '.join(d['golden_witnesses']) or 'no target'}"
                  + ("  REVIEW: no runtime reproduces the golden" if d["review"] else ""))
            for name, e in d["targets"].items():
                if "digest" in e:
                    same = f"; same outputs as {', '.join(e['same_as'])}" if e["same_as"] else ""
                    what = "bit-exact" if e["bit_exact"] else f"max |err| {e['max_abs_lsb']:g} LSB"
                    print(f"  {name:12s} {what}{same}")
                else:
                    print(f"  {name:12s} {e['status']}: {e['reason']}")
    return 1 if review else 0

