"""``qconform targets``: each target, whether it is available here, why, and its versions."""

from __future__ import annotations

import json

from targets import get_target, known_names


def register(sub):
    p = sub.add_parser("targets", help="list targets, available or not, and why")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def run(args) -> int:
    rows = []
    for name in known_names():
        try:
            t = get_target(name)
            ok, why = t.availability()
            vers = t.versions() if ok else {}
            desc = t.description
        except Exception as e:  # a broken runtime must not hide the other targets
            ok, why, vers, desc = False, f"{type(e).__name__}: {e}", {}, ""
        rows.append({"target": name, "available": ok, "reason": why, "versions": vers, "description": desc})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    w = max(len(r["target"]) for r in rows)
    for r in rows:
        mark = "available  " if r["available"] else "unavailable"
        vers = ", ".join(f"{k} {v}" for k, v in r["versions"].items())
        detail = vers if r["available"] else r["reason"]
        print(f"{r['target']:<{w}}  {mark}  {r['description']}")
        print(f"{'':<{w}}               {detail}")
    return 0
