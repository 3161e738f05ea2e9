"""Certification: ``pytest --target=X --certify`` writes ``certificate.md`` and ``certificate.json``.

Per (target, spec table, op) a verdict, from that op's rows (cases of another spec table, such
as QNN's uint8/uint16 cases, get their own verdict and never blur the LiteRT int8 one):

``non-conformant``               some case failed (beyond tolerance) or errored, crashed, timed out;
``unsupported``                  no case could run on the target;
``bit-exact``                    every case that ran is exact, element for element, and none is waived;
``conformant within tolerance``  every case that ran passed (or is waived), some not bit-exact.

Cases the target could not run are counted (``unsupported``) next to any verdict. With
each verdict: the tolerance profile used (the rule of the tolerance policy that matched
op x dtype x target x runtime version, and the policy's own version), the counts, the
failing case ids with their reproduction commands, the waived ones with their waiver,
and a digest of the op's case set (sha256 over sorted ``case_id:case_digest`` lines), so
two certificates can be compared: same digest, same cases, same data.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from reports.results import ERROR_STATUSES, FAIL, PASS, UNSUPPORTED, WAIVED, write_json

FORMAT = "qconform-certificate/1"
VERDICTS = ("bit-exact", "conformant within tolerance", "non-conformant", "unsupported")
CERT_MD = "certificate.md"
CERT_JSON = "certificate.json"


def case_set_digest(rows: list[dict]) -> str:
    """sha256 (first 16 hex) over the sorted ``case_id:case_digest`` lines of ``rows``' cases."""
    lines = sorted({f"{r.get('case_id')}:{r.get('case_digest')}" for r in rows})
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def verdict_of(rows: list[dict]) -> tuple[str, dict[str, int]]:
    st = [r.get("status") for r in rows]
    counts = {"cases": len(rows), "passed": st.count(PASS), "failed": st.count(FAIL),
              "errors": sum(st.count(s) for s in ERROR_STATUSES), "unsupported": st.count(UNSUPPORTED),
              "waived": st.count(WAIVED),
              "bit_exact": sum(1 for r in rows if r.get("status") in (PASS, WAIVED) and r.get("bit_exact"))}
    ran = counts["cases"] - counts["unsupported"]
    if counts["failed"] or counts["errors"]:
        v = "non-conformant"
    elif ran == 0:
        v = "unsupported"
    elif counts["bit_exact"] == ran and not counts["waived"]:
        v = "bit-exact"
    else:
        v = "conformant within tolerance"
    return v, counts


def build_certificate(rows: list[dict], policy, versions: dict[str, dict[str, str]], waivers=None,
                      run_info: dict | None = None) -> dict[str, Any]:
    """The certificate document of a run's rows (see the module docstring)."""
    groups: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r.get("target"), r.get("spec") or "", r.get("op"))].append(r)
    ops = []
    for (target, spec, op), rs in groups.items():
        verdict, counts = verdict_of(rs)
        vers = versions.get(target, {})
        tol = []
        for dtype in sorted({str(r.get("out_dtype")) for r in rs if r.get("out_dtype")}):
            t = policy.lookup(op, target, dtype, vers)
            rule = t.rule
            tol.append({"dtype": dtype, "max_abs_lsb": t.max_abs_lsb, "max_mismatch_pct": t.max_mismatch_pct,
                        "rule": None if rule is None else rule.index,
                        "rule_versions": {} if rule is None else dict(rule.versions),
                        "reason": "" if rule is None else rule.reason})
        failing = [{"case_id": r.get("case_id"), "status": r.get("status"), "max_abs_lsb": r.get("max_abs_lsb"),
                    "mismatches": r.get("mismatches"), "elements": r.get("elements"),
                    "causes": r.get("causes"), "reason": r.get("reason"), "repro": r.get("repro"),
                    "failure_file": r.get("failure_file")}
                   for r in rs if r.get("status") in (FAIL,) + ERROR_STATUSES]
        waived = [{"case_id": r.get("case_id"), "waiver": r.get("waiver"), "reason": r.get("reason"),
                   "repro": r.get("repro")} for r in rs if r.get("status") == WAIVED]
        elements = sum(int(r.get("elements") or 0) for r in rs if r.get("elements") is not None)
        mism = sum(int(r.get("mismatches") or 0) for r in rs if r.get("elements") is not None)
        ops.append({"target": target, "spec": spec, "op": op, "verdict": verdict, "counts": counts,
                    "bit_exact_pct": round(100.0 * (elements - mism) / elements, 3) if elements else None,
                    "max_abs_lsb": max((float(r["max_abs_lsb"]) for r in rs if r.get("max_abs_lsb") is not None),
                                       default=None),
                    "tolerance": tol, "case_digest": case_set_digest(rs), "failing": failing, "waived": waived})
    problems = waiver_problems(rows, waivers)
    info = run_info or {}
    return {
        "format": FORMAT, "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "run_id": info.get("run_id") or next((r.get("run_id") for r in rows), None),
        "suite_version": info.get("suite_version"), "git": info.get("git"),
        "targets": {t: versions.get(t, {}) for t in dict.fromkeys(r.get("target") for r in rows)},
        "tolerance_policy": {"source": policy.source, "version": policy.version},
        "case_set": {"digest": case_set_digest(rows), "cases": len({r.get("case_id") for r in rows}),
                     "seed": (info.get("options") or {}).get("seed"),
                     "cases_per_op": (info.get("options") or {}).get("cases_per_op")},
        "ops": ops,
        "waivers": [w.as_dict() for w in (waivers.items if waivers else [])],
        "waiver_problems": problems,
    }


def waiver_problems(rows: list[dict], waivers=None) -> list[str]:
    """Loud lines: expired waivers (used or not), waived cases that now pass, version mismatches."""
    out = []
    for r in rows:
        if r.get("waiver_expired"):
            out.append(f"EXPIRED waiver {r['waiver_expired']}: {r['case_id']} on {r['target']} fails "
                       f"({r.get('status')}) and is no longer waived")
        if r.get("waiver_unneeded"):
            out.append(f"waived case {r['case_id']} on {r['target']} now PASSES: remove waiver {r['waiver_unneeded']}")
        if r.get("waiver_version_mismatch"):
            out.append(f"waiver {r['waiver_version_mismatch']} does not cover this runtime version: "
                       f"{r['case_id']} on {r['target']} fails")
    used = {r.get("waiver_expired") for r in rows}
    for w in (waivers.expired() if waivers else []):
        if w.id not in used:
            out.append(f"EXPIRED waiver {w.id} ({w.case} on {w.target}, expired {w.expires}): remove or renew it")
    return out


def to_markdown(cert: dict[str, Any]) -> str:
    L = ["# qconform certificate", ""]
    L.append(f"Run `{cert.get('run_id')}`, {cert.get('date')}; suite {cert.get('suite_version')}, "
             f"git {((cert.get('git') or {}).get('commit') or '?')[:12]}"
             f"{' (dirty)' if (cert.get('git') or {}).get('dirty') else ''}.")
    tp = cert["tolerance_policy"]
    L.append(f"Tolerance policy `{tp['source']}` version {tp['version'] or '?'}; "
             f"case set digest `{cert['case_set']['digest']}` ({cert['case_set']['cases']} cases, "
             f"seed {cert['case_set']['seed']}, {cert['case_set']['cases_per_op']} per op).")
    L.append("")
    for t, v in cert["targets"].items():
        L.append(f"- target **{t}**: " + (", ".join(f"{k} {x}" for k, x in v.items()) or "(no versions)"))
    if cert["waiver_problems"]:
        L += ["", "## WAIVER PROBLEMS", ""] + [f"- **{p}**" for p in cert["waiver_problems"]]
    L += ["", "## Verdicts", "", "| target | spec | op | verdict | cases | passed | bit-exact | failed | errors | "
          "unsupported | waived | bit-exact % | max abs LSB | tolerance | case digest |",
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for o in cert["ops"]:
        c = o["counts"]
        tol = "; ".join(f"{t['dtype']}: <= {t['max_abs_lsb']:g} LSB (rule {t['rule']}"
                        + (f", versions {t['rule_versions']}" if t["rule_versions"] else "") + ")"
                        for t in o["tolerance"]) or "-"
        L.append(f"| {o['target']} | {o['spec']} | {o['op']} | **{o['verdict']}** | {c['cases']} | {c['passed']} | "
                 f"{c['bit_exact']} | {c['failed']} | {c['errors']} | {c['unsupported']} | {c['waived']} | "
                 f"{'-' if o['bit_exact_pct'] is None else o['bit_exact_pct']} | "
                 f"{'-' if o['max_abs_lsb'] is None else format(o['max_abs_lsb'], 'g')} | "
                 f"{tol} | `{o['case_digest']}` |")
    bad = [(o, f) for o in cert["ops"] for f in o["failing"]]
    if bad:
        L += ["", "## Failing cases", ""]
        for o, f in bad:
            L.append(f"- `{f['case_id']}` on {o['target']}: {f['status']}, {f.get('reason') or ''}")
            if f.get("repro"):
                L.append(f"  - reproduce: `{f['repro']}`")
    waived = [(o, w) for o in cert["ops"] for w in o["waived"]]
    if waived:
        L += ["", "## Waived cases", ""]
        L += [f"- `{w['case_id']}` on {o['target']}: {w['reason']}" for o, w in waived]
    return "\n".join(L) + "\n"


def write_certificate(report_dir: str | Path, cert: dict[str, Any]) -> tuple[Path, Path]:
    import os
    d = Path(report_dir)
    pj = d / CERT_JSON
    write_json(pj, cert)
    pm = d / CERT_MD
    tmp = pm.with_name(pm.name + ".tmp")
    tmp.write_text(to_markdown(cert))
    os.replace(tmp, pm)
    return pm, pj


def read_certificate(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if p.is_dir():
        p = p / CERT_JSON
    return json.loads(p.read_text())
