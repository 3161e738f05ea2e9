"""Certification: ``pytest --target=X --certify`` writes ``certificate.md`` and ``certificate.json``.

Per (target, spec table, op) a verdict, from that op's rows (cases of another spec table, such
as QNN's uint8/uint16 cases, get their own verdict and never blur the LiteRT int8 one):

``non-conformant``               some case failed (beyond tolerance) or errored, crashed, timed out,
                                 or the op as a whole failed: its outputs are biased beyond the
                                 tolerance policy's bound, or better explained by another scheme than
                                 the one the target declares (reports.causes.judge_group);
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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from suite.core.text import md_cell, md_code
from suite.core.verdict import ERRORS, Status

FORMAT = "qconform-certificate/1"
VERDICTS = ("bit-exact", "conformant within tolerance", "non-conformant", "unsupported")
CERT_MD = "certificate.md"
CERT_JSON = "certificate.json"
_PASS, _FAIL, _UNSUPPORTED, _WAIVED = (s.value for s in (Status.PASS, Status.FAIL, Status.UNSUPPORTED,
                                                         Status.WAIVED))
_ERRORS = frozenset(s.value for s in ERRORS)


def _digest(lines: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()[:16]


def _line(r: dict) -> str:
    return f"{r.get('case_id')}:{r.get('case_digest')}"


def case_set_digest(rows: Iterable[dict]) -> str:
    """sha256 (first 16 hex) over the sorted ``case_id:case_digest`` lines of ``rows``' cases."""
    return _digest({_line(r) for r in rows})


class _Entry:
    """The certificate entry of one (target, spec, op), taken a row at a time."""

    def __init__(self):
        self.counts = {"cases": 0, "passed": 0, "failed": 0, "errors": 0, "unsupported": 0, "waived": 0,
                       "bit_exact": 0}
        self.dtypes: set[str] = set()
        self.failing: list[dict] = []
        self.waived: list[dict] = []
        self.elements = 0
        self.mismatches = 0
        self.max_abs: float | None = None
        self.lines: set[str] = set()

    def add(self, r: dict, line: str | None = None) -> None:
        st, c = r.get("status"), self.counts
        c["cases"] += 1
        c["passed"] += st == _PASS
        c["failed"] += st == _FAIL
        c["errors"] += st in _ERRORS
        c["unsupported"] += st == _UNSUPPORTED
        c["waived"] += st == _WAIVED
        c["bit_exact"] += st in (_PASS, _WAIVED) and bool(r.get("bit_exact"))
        if r.get("out_dtype"):
            self.dtypes.add(str(r["out_dtype"]))
        if st == _FAIL or st in _ERRORS:
            self.failing.append({"case_id": r.get("case_id"), "status": st, "max_abs_lsb": r.get("max_abs_lsb"),
                                 "mismatches": r.get("mismatches"), "elements": r.get("elements"),
                                 "causes": r.get("causes"), "reason": r.get("reason"), "repro": r.get("repro"),
                                 "failure_file": r.get("failure_file")})
        elif st == _WAIVED:
            self.waived.append({"case_id": r.get("case_id"), "waiver": r.get("waiver"), "reason": r.get("reason"),
                                "repro": r.get("repro")})
        if r.get("elements") is not None:
            self.elements += int(r.get("elements") or 0)
            self.mismatches += int(r.get("mismatches") or 0)
        if r.get("max_abs_lsb") is not None:
            mx = float(r["max_abs_lsb"])
            self.max_abs = mx if self.max_abs is None else max(self.max_abs, mx)
        self.lines.add(line if line is not None else _line(r))

    def verdict(self) -> str:
        c = self.counts
        ran = c["cases"] - c["unsupported"]
        if c["failed"] or c["errors"]:
            return "non-conformant"
        if ran == 0:
            return "unsupported"
        if c["bit_exact"] == ran and not c["waived"]:
            return "bit-exact"
        return "conformant within tolerance"


def verdict_of(rows: Iterable[dict]) -> tuple[str, dict[str, int]]:
    e = _Entry()
    for r in rows:
        e.add(r)
    return e.verdict(), e.counts


class WaiverCheck:
    """Waiver problems, a row at a time: expired waivers (used or not), waived cases that now
    pass, version mismatches."""

    def __init__(self):
        self.lines: list[str] = []
        self.used: set = set()   # expired waivers that some row names

    def add(self, r: dict) -> None:
        if r.get("waiver_expired"):
            self.lines.append(f"EXPIRED waiver {r['waiver_expired']}: {r['case_id']} on {r['target']} fails "
                              f"({r.get('status')}) and is no longer waived")
        if r.get("waiver_unneeded"):
            self.lines.append(f"waived case {r['case_id']} on {r['target']} now PASSES: remove waiver "
                              f"{r['waiver_unneeded']}")
        if r.get("waiver_version_mismatch"):
            self.lines.append(f"waiver {r['waiver_version_mismatch']} does not cover this runtime version: "
                              f"{r['case_id']} on {r['target']} fails")
        self.used.add(r.get("waiver_expired"))

    def problems(self, waivers=None) -> list[str]:
        out = list(self.lines)
        for w in (waivers.expired() if waivers else []):
            if w.id not in self.used:
                out.append(f"EXPIRED waiver {w.id} ({w.case} on {w.target}, expired {w.expires}): remove or renew it")
        return out


class Certifier:
    """The certificate of a run's rows (see the module docstring), taken a row at a time.
    ``versions``: {target: {component: version}} (run.json's targets' versions)."""

    def __init__(self, policy, versions: dict[str, dict[str, str]], waivers=None):
        self.policy, self.versions, self.waivers = policy, versions, waivers
        self.entries: dict[tuple, _Entry] = {}      # (target, spec, op), in the order of first rows
        self.targets: dict[Any, None] = {}
        self.lines: set[str] = set()
        self.case_ids: set = set()
        self.run_id = None
        self.rows = 0
        self.check = WaiverCheck()

    def add(self, r: dict) -> None:
        if not self.rows:
            self.run_id = r.get("run_id")
        self.rows += 1
        key = (r.get("target"), r.get("spec") or "", r.get("op"))
        e = self.entries.get(key) or self.entries.setdefault(key, _Entry())
        line = _line(r)
        e.add(r, line)
        self.lines.add(line)
        self.case_ids.add(r.get("case_id"))
        self.targets.setdefault(r.get("target"), None)
        self.check.add(r)

    def certificate(self, run_info: dict | None = None, groups: dict | None = None) -> dict[str, Any]:
        """``groups``: {(op, target): the failures of the op as a whole} (reports.summary.Summary's
        verdicts); a bias failure counts for the entries with its output dtype, a scheme one for all."""
        ops = []
        for (target, spec, op), e in self.entries.items():
            whole = [f["text"] + (f" [known finding {f['finding']}]" if f["finding"] else "")
                     for f in (groups or {}).get((op, target), ()) if f["dtype"] is None or f["dtype"] in e.dtypes]
            vers = self.versions.get(target, {})
            tol = []
            for dtype in sorted(e.dtypes):
                t = self.policy.lookup(op, target, dtype, vers)
                rule = t.rule
                tol.append({"dtype": dtype, "max_abs_lsb": t.max_abs_lsb, "max_mismatch_pct": t.max_mismatch_pct,
                            "rule": None if rule is None else rule.index,
                            "rule_versions": {} if rule is None else dict(rule.versions),
                            "reason": "" if rule is None else rule.reason})
            ops.append({"target": target, "spec": spec, "op": op,
                        "verdict": "non-conformant" if whole else e.verdict(), "counts": e.counts, "op_failures": whole,
                        "bit_exact_pct": (round(100.0 * (e.elements - e.mismatches) / e.elements, 3)
                                          if e.elements else None),
                        "max_abs_lsb": e.max_abs, "tolerance": tol, "case_digest": _digest(e.lines),
                        "failing": e.failing, "waived": e.waived})
        info = run_info or {}
        return {
            "format": FORMAT, "date": _dt.datetime.now().isoformat(timespec="seconds"),
            "run_id": info.get("run_id") or self.run_id,
            "suite_version": info.get("suite_version"), "git": info.get("git"),
            "targets": {t: self.versions.get(t, {}) for t in self.targets},
            "tolerance_policy": {"source": self.policy.source, "version": self.policy.version},
            "case_set": {"digest": _digest(self.lines), "cases": len(self.case_ids),
                         "seed": (info.get("options") or {}).get("seed"),
                         "cases_per_op": (info.get("options") or {}).get("cases_per_op")},
            "ops": ops,
            "waivers": [w.as_dict() for w in (self.waivers.items if self.waivers else [])],
            "waiver_problems": self.check.problems(self.waivers),
        }


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
        L.append(f"- target **{md_cell(t)}**: " + (md_cell(", ".join(f"{k} {x}" for k, x in v.items()))
                                                  or "(no versions)"))
    if cert["waiver_problems"]:
        L += ["", "## WAIVER PROBLEMS", ""] + [f"- **{md_cell(p)}**" for p in cert["waiver_problems"]]
    L += ["", "## Verdicts", "", ("| target | spec | op | verdict | cases | passed | bit-exact | failed | errors | "
                                  "unsupported | waived | bit-exact % | max abs LSB | tolerance | case digest |"),
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for o in cert["ops"]:
        c = o["counts"]
        tol = "; ".join(f"{t['dtype']}: <= {t['max_abs_lsb']:g} LSB (rule {t['rule']}"
                        + (f", versions {t['rule_versions']}" if t["rule_versions"] else "") + ")"
                        for t in o["tolerance"]) or "-"
        L.append(f"| {md_cell(o['target'])} | {o['spec']} | {o['op']} | **{o['verdict']}** | {c['cases']} | {c['passed']} | "
                 f"{c['bit_exact']} | {c['failed']} | {c['errors']} | {c['unsupported']} | {c['waived']} | "
                 f"{'-' if o['bit_exact_pct'] is None else o['bit_exact_pct']} | "
                 f"{'-' if o['max_abs_lsb'] is None else format(o['max_abs_lsb'], 'g')} | "
                 f"{md_cell(tol)} | `{o['case_digest']}` |")
    whole = [(o, w) for o in cert["ops"] for w in o.get("op_failures", ())]
    if whole:
        L += ["", "## Failing as a whole (bias, declared scheme)", ""]
        L += [f"- {o['op']} ({o['spec']}) on {md_cell(o['target'])}: {md_cell(w)}" for o, w in whole]
    bad = [(o, f) for o in cert["ops"] for f in o["failing"]]
    if bad:
        L += ["", "## Failing cases", ""]
        for o, f in bad:
            L.append(f"- {md_code(f['case_id'])} on {md_cell(o['target'])}: {f['status']}, "
                     f"{md_cell(f.get('reason') or '')}")
            if f.get("repro"):
                L.append(f"  - reproduce: {md_code(f['repro'])}")
    waived = [(o, w) for o in cert["ops"] for w in o["waived"]]
    if waived:
        L += ["", "## Waived cases", ""]
        L += [f"- {md_code(w['case_id'])} on {md_cell(o['target'])}: {md_cell(w['reason'])}" for o, w in waived]
    return "\n".join(L) + "\n"


def read_certificate(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if p.is_dir():
        p = p / CERT_JSON
    return json.loads(p.read_text())
