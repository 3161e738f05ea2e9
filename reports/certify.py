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

Certification also refuses an op whose best scheme (the arithmetic reproducing most elements) is
not the declared one (the target's ``expected_scheme``, else the run's scheme) when the declared
one loses only on ties (:data:`TIE_SCHEME_RULE`): a kernel that breaks ties its own way.

The certificate stands on its own (``qconform-certificate/3``): suite version and commit, UTC
time, the run's host facts (run.json's ``host``, whole), every target's versions, devices and
kernel identity (``module:Class``, sha256 of its sources and shared libraries), the golden scheme, the full sha256 of every case (sorted by case id) and one over them, of the
tolerance file, of the spec tables and of the findings and waiver files; per op the best scheme,
the bias (mean, above / below, sign test p), the spec clauses covered with case counts, the
verdict's ``reason`` in words and each case's output digest.

The API (``write_reports`` and ``qconform merge`` use it): :class:`Certifier` takes rows and gives
the certificate (:meth:`Certifier.certificate`, unsigned); :func:`write_certificate` signs it with a
reports.attest.Signer (:func:`seal`: an in-toto Statement in a DSSE envelope, Ed25519) into
certificate.json and renders certificate.md from the signed payload; :func:`read_certificate` reads
one back without trusting it; ``qconform certify --verify`` (suite/commands/certify.py) checks the
signature with the public key alone, then recomputes the digests from the suite.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from reports import attest
from reports.causes import SCHEME_GAP_MIN, BiasTally, SchemeTally, rounding_clause
from reports.results import write_atomic, write_json
from reports.summary import certificate_failures
from suite.core import findings as _findings
from suite.core.spec import SPEC_DIR
from suite.core.tolerance import DEFAULT_FILE as DEFAULT_TOLERANCE
from suite.core.text import md_cell, md_code
from suite.core.tolerance import sign_test_p
from suite.core.errors import QconformError
from suite.core.userfile import read_bytes, read_text
from suite.core.verdict import ERRORS, Status

FORMAT = "qconform-certificate/3"
#: the certificate's own rule on declared schemes, beside the run's (reports.causes.judge_group,
#: a gap of SCHEME_GAP_MIN elements whatever the causes)
TIE_SCHEME_GAP_MIN = 1
TIE_SCHEME_RULE = (f"certification refuses an op whose best scheme is not the declared one (the target's "
                   f"expected_scheme, else the run's scheme) when the declared one loses by >= "
                   f"{TIE_SCHEME_GAP_MIN} element(s) and every element it misses is a rounding tie (cause "
                   f"'tie'): the kernel breaks ties its own way; any other loss counts from "
                   f"{SCHEME_GAP_MIN} elements (the run's declared-scheme rule)")
SHRINK_RULE = ("certification refuses an op whose mismatching elements point at the output zero point (|got - zp| "
               "< |want - zp|) more often than away from it with a sign test p below the tolerance rule's "
               "bias_alpha, over at least its bias_min_mismatches, by a net (toward - away) / elements above its "
               "max_mean_err_lsb (default policy: p < 1e-6, >= 20, > 0.003 LSB): a kernel rounding ties toward "
               "zero is unbiased above / below the golden but shrinks every tie")
VERDICTS = ("bit-exact", "conformant within tolerance", "non-conformant", "unsupported")
CERT_MD = "certificate.md"
CERT_JSON = "certificate.json"
_PASS, _FAIL, _UNSUPPORTED, _WAIVED = (s.value for s in (Status.PASS, Status.FAIL, Status.UNSUPPORTED,
                                                         Status.WAIVED))
_ERRORS = frozenset(s.value for s in ERRORS)


def _digest(lines: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(lines)).encode()).hexdigest()


def _line(r: dict) -> str:
    return f"{r.get('case_id')}:{r.get('case_digest')}"


def case_set_digest(rows: Iterable[dict]) -> str:
    """sha256 over the sorted ``case_id:case_digest`` lines of ``rows``' cases."""
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
        self.schemes = SchemeTally()
        self.bias = BiasTally()              # the op's signed errors (reports/causes.py)
        self.shrink = [0, 0]                 # mismatches toward / away from the zero point
        self.clauses: dict[str, int] = {}    # spec clause -> cases
        self.outputs: list[list] = []        # [case id, out_digest]: what the target gave, per case

    def add(self, r: dict, line: str | None = None) -> None:
        st, c = r.get("status"), self.counts
        self.schemes.add(r)
        if self.bias.add(r) and r.get("mismatches") and r.get("toward_zp_err") is not None:   # (the rows the bias counts)
            self.shrink[0] += int(r["toward_zp_err"])
            self.shrink[1] += int(r["mismatches"]) - int(r["toward_zp_err"])
        for cl in sorted(set(re.split(r"[;\s]+", str(r.get("clause") or "")))):
            if cl:
                self.clauses[cl] = self.clauses.get(cl, 0) + 1
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
        if r.get("out_digest"):
            self.outputs.append([str(r.get("case_id")), str(r["out_digest"])]
                                + ([str(r["device"])] if r.get("device") else []))

    def rounding_words(self, op: str, declared: str | None) -> str | None:
        """The op's rounding in plain words, when its mismatches have one direction (ties up, ties
        toward zero, truncation, ...): what a person reads first; None otherwise."""
        mism, ties = self.mismatches, self.schemes.causes.get("tie", 0)
        _, _, above, below = self.bias.totals()
        toward, away = self.shrink
        if not mism or above + below < mism:
            return None
        all_ties = ties == mism
        if not all_ties and (self.max_abs or 0) > 1:   # (errors beyond a rounding's: not a rounding to name)
            return None
        what = "ties" if all_ties else "mismatching elements"
        count = (f"{ties} of {ties} mismatching elements are rounding ties" if all_ties else
                 f"{mism} mismatching elements ({ties} of them ties)")
        if below == 0:
            head = "rounds ties up (toward +infinity)" if all_ties else "rounds up (toward +infinity) too often"
            how = "every one moved up"
        elif above == 0:
            head = "rounds ties down (toward -infinity)" if all_ties else "rounds down (toward -infinity) too often"
            how = "every one moved down"
        elif toward == mism:
            head = "rounds ties toward zero" if all_ties else "truncates toward zero"
            how = "every one moved toward the zero point"
        elif all_ties:
            head = "breaks ties its own way"
            how = f"{above} moved up, {below} down; {toward} toward the zero point, {away} away"
        else:
            return None
        rule = rounding_clause(op)
        if rule is not None and "away from zero" in rule[1]:
            spec = f"; the spec rounds half away from zero (docs/arithmetic.md, {op}: `{rule[0]}`)"
        elif rule is not None:
            spec = f"; the spec's rounding (docs/arithmetic.md, {op}: `{rule[0]}`): {rule[1]}"
        else:
            spec = f"; the declared scheme is {declared}" if declared else ""
        return f"{head}: {count}, {how}{spec}"

    def bias_fields(self) -> dict:
        s, n, pos, neg = self.bias.totals()
        ties = [sum(t[i] for t in self.bias.ties.values()) for i in range(4)]
        return {"mean_lsb": float(f"{s / n:.4g}") if n else None, "above": pos, "below": neg, "elements": n,
                "p": float(f"{sign_test_p(pos, neg):.3g}") if n else None,
                # the mismatching exact ties by the way they were broken (None: rows without the counts)
                "ties": None if ties[3] else {"up": ties[0], "down": ties[1], "toward_zero": ties[2]}}

    def shrink_failure(self, tol) -> str | None:
        """Why the op's errors point at the zero point too often (:data:`SHRINK_RULE`), or None:
        the tolerance rule's bias bound on toward / away (suite/core/tolerance.py)."""
        if tol is None:
            return None
        _, n, _, _ = self.bias.totals()
        return tol.shrink_failure(self.shrink[0], self.shrink[1], n)

    def tie_scheme_failure(self, declared: str | None, run_scheme: str | None) -> tuple[str | None, str | None]:
        """(best scheme, why the op is refused by TIE_SCHEME_RULE or None)."""
        best, pct = self.schemes.best(declared)
        t = self.schemes
        if not declared or declared != run_scheme or best is None or best == declared or declared not in t.totals:
            return best, None
        gap = t.totals[best] - t.totals[declared]
        missed = t.elements - t.totals[declared]
        if gap >= TIE_SCHEME_GAP_MIN and missed and t.causes.get("tie", 0) == missed:
            return best, (f"closest scheme: {best} reproduces {gap} more element(s) ({pct}%) than the declared "
                          f"{declared}, which misses {missed}, every one a rounding tie (certification rule: a gap "
                          f">= {TIE_SCHEME_GAP_MIN} made only of ties)")
        return best, None

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


def sha256_file(path: str | Path) -> str:
    """The sha256 of a policy, waiver, spec or findings file (TOML: a regular file of its bound)."""
    return hashlib.sha256(read_bytes(path, "file to digest", None, "toml")).hexdigest()


def suite_digests() -> dict[str, Any]:
    """The sha256 of the suite's own inputs at this checkout: its default tolerance file, its spec
    tables and its findings file (what ``certify --verify`` recomputes)."""
    return {"default_tolerance": sha256_file(DEFAULT_TOLERANCE),
            "spec_tables": {p.name: sha256_file(p) for p in sorted(SPEC_DIR.glob("*.toml"))},
            "findings": sha256_file(_findings.FILE)}


def case_list_digest(cases: list[list[str]]) -> str:
    """sha256 over the ``case_id:sha256`` lines of ``cases`` ([[id, sha256], ...]) in their order."""
    return hashlib.sha256("\n".join(f"{i}:{d}" for i, d in cases).encode()).hexdigest()


class Certifier:
    """The certificate of a run's rows (see the module docstring), taken a row at a time.
    ``versions``: {target: {component: version}} (run.json's targets' versions); ``cases``: the
    run's cases as [[case id, full sha256], ...] (the plugin's; a merged run's: its shards')."""

    def __init__(self, policy, versions: dict[str, dict[str, str]], waivers=None,
                 cases: list[list[str]] | None = None, waiver_files: dict[str, str | None] | None = None):
        self.policy, self.versions, self.waivers = policy, versions, waivers
        self.waiver_files = waiver_files or {}   # path -> sha256 known without reading it (a merge's shards')
        self.cases = cases
        self.entries: dict[tuple, _Entry] = {}      # (target, spec, op), in the order of first rows
        self.targets: dict[Any, None] = {}
        self.lines: set[str] = set()
        self.case_ids: set = set()
        self.run_id = None
        self.rows = 0
        self.check = WaiverCheck()
        self.findings: set[str] = set()

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
        if r.get("finding"):
            self.findings.add(str(r["finding"]))

    def _case_set(self, options: dict) -> dict:
        short = {ln.rsplit(":", 1)[0]: ln.rsplit(":", 1)[1] for ln in self.lines}
        cases = sorted([i, d] for i, d in {i: d for i, d in (self.cases or []) if i in short}.items())
        wrong = sorted(i for i, d in cases if short[i] != d[:len(short[i])])
        listed = {i for i, _ in cases}
        return {"cases": len(self.case_ids), "seed": options.get("seed"), "cases_per_op": options.get("cases_per_op"),
                "ops": options.get("ops"), "case_files": list(options.get("case_files") or []),
                "filtered": bool(options.get("filtered")),
                "order": "sorted by case id: [case id, sha256 of the case]",
                "sha256": case_list_digest(cases), "list": cases,
                # rows whose case the run's list lacks, or whose digest differs from it: never hidden
                "unlisted": sorted(str(i) for i in self.case_ids if i not in listed), "digest_mismatch": wrong,
                "rows_digest": _digest(self.lines)}

    def certificate(self, run_info: dict | None = None, groups: dict | None = None,
                    incomplete: str | None = None) -> dict[str, Any]:
        """The certificate (unsigned: :func:`seal` signs it). ``groups``: {(op, target): the failures of the op as a whole} (reports.summary.Summary's
        verdicts); a bias failure counts for the entries with its output dtype, a scheme one for all."""
        info = run_info or {}
        options = info.get("options") or {}
        run_scheme = options.get("scheme")
        tinfo = info.get("targets") or {}
        ops = []
        for (target, spec, op), e in self.entries.items():
            whole = [f["text"] + (f" [known finding {f['finding']}]" if f["finding"] else "")
                     for f in (groups or {}).get((op, target), ()) if f["dtype"] is None or f["dtype"] in e.dtypes]
            for f in (groups or {}).get((op, target), ()):
                if f.get("finding"):
                    self.findings.add(f["finding"])
            declared = (tinfo.get(target) or {}).get("expected_scheme") or run_scheme
            best, tie_why = e.tie_scheme_failure(declared, run_scheme)
            if tie_why:
                whole.append(tie_why)
            vers = self.versions.get(target, {})
            for dtype in sorted(e.dtypes)[:1]:
                why = e.shrink_failure(self.policy.lookup(op, target, dtype, vers))
                if why:
                    whole.append(why)
            tol = []
            for dtype in sorted(e.dtypes):
                t = self.policy.lookup(op, target, dtype, vers)
                rule = t.rule
                tol.append({"dtype": dtype, "max_abs_lsb": t.max_abs_lsb, "max_mismatch_pct": t.max_mismatch_pct,
                            "rule": None if rule is None else rule.index,
                            "rule_versions": {} if rule is None else dict(rule.versions),
                            "bias_alpha": None if rule is None else rule.bias_alpha,
                            "max_mean_err_lsb": None if rule is None else rule.max_mean_err_lsb,
                            "bias_min_mismatches": None if rule is None else rule.bias_min_mismatches,
                            "reason": "" if rule is None else rule.reason})
            best_pct = (round(100.0 * e.schemes.totals[best] / e.schemes.elements, 3)
                        if best and e.schemes.elements else None)
            if e.verdict() == "unsupported":   # (no case ran: nothing to judge as a whole)
                whole = []
            verdict = "non-conformant" if whole else e.verdict()
            ops.append({"target": target, "spec": spec, "op": op,
                        "verdict": verdict, "reason": _reason(e, op, verdict, whole, declared),
                        "counts": e.counts, "op_failures": whole,
                        "bit_exact_pct": (round(100.0 * (e.elements - e.mismatches) / e.elements, 3)
                                          if e.elements else None),
                        "max_abs_lsb": e.max_abs, "declared_scheme": declared, "best_scheme": best,
                        "best_scheme_exact_pct": best_pct, "ties_missed": e.schemes.causes.get("tie", 0),
                        "bias": e.bias_fields(), "toward_zero_point": {"toward": e.shrink[0], "away": e.shrink[1]},
                        "clauses": dict(sorted(e.clauses.items())),
                        "tolerance": tol, "case_digest": _digest(e.lines),
                        "failing": e.failing, "waived": e.waived, "outputs": sorted(e.outputs)})
        # an (op, spec table) the kernel claims none of, beside the same op's table it runs (QNN's uint8
        # encodings of an int8-only kernel): not claimed, never a verdict of "unsupported"
        ran = {(o["target"], o["op"]) for o in ops if o["verdict"] != "unsupported"}
        not_claimed = [{"target": o["target"], "spec": o["spec"], "op": o["op"], "cases": o["counts"]["cases"]}
                       for o in ops if o["verdict"] == "unsupported" and (o["target"], o["op"]) in ran]
        ops = [o for o in ops if not (o["verdict"] == "unsupported" and (o["target"], o["op"]) in ran)]
        src = Path(self.policy.source) if self.policy.source else DEFAULT_TOLERANCE
        digests = suite_digests()
        # the default policy is its bytes, wherever they were read (a run folder's or a merge's copy)
        tol_sha = sha256_file(src) if src.exists() else options.get("tolerance_digest")
        default_tol = src.exists() and tol_sha == digests["default_tolerance"]
        wfiles = [str(w) for w in (options.get("waivers") or [])]
        # the waiver files are read only when the caller loaded them (--waivers); paths that come
        # from a run.json alone (a merge's shards) are named, not read: their sha256 is what the
        # shards' certificates recorded, if any
        read_waivers = self.waivers is not None
        cert = {
            "format": FORMAT,
            "created_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "run_id": info.get("run_id") or self.run_id,
            "suite_version": info.get("suite_version"), "git": info.get("git"),
            "host": info.get("host"),
            # run.json's facts of each target (versions, declared scheme, devices), whole
            "targets": {t: {**(tinfo.get(t) or {}), "versions": self.versions.get(t, {})} for t in self.targets},
            "golden": {"scheme": run_scheme},
            "case_set": self._case_set(options),
            # why the run is incomplete (it did not finish, rows are missing): its verdicts are partial
            "incomplete": incomplete,
            "tolerance_policy": {"source": self.policy.source, "version": self.policy.version,
                                 "sha256": tol_sha,
                                 "default": default_tol,
                                 "note": ("certified with the suite's DEFAULT tolerance policy (1 LSB on int8 "
                                          "outputs): not a bit-exactness claim" if default_tol else
                                          "certified with a tolerance file of the user's")},
            "spec_tables": digests["spec_tables"],
            "findings": {"sha256": digests["findings"], "used": sorted(self.findings)},
            "rules": {"tie_scheme": TIE_SCHEME_RULE, "shrink": SHRINK_RULE, "tie_scheme_gap_min": TIE_SCHEME_GAP_MIN,
                      "scheme_gap_min": SCHEME_GAP_MIN},
            "ops": ops,
            "not_claimed": not_claimed,
            "waivers": {"files": {f: ((sha256_file(f) if Path(f).is_file() else None) if read_waivers
                                      else self.waiver_files.get(f)) for f in wfiles},
                        "items": [w.as_dict() for w in (self.waivers.items if self.waivers else [])]},
            "waived": [{"case_id": w["case_id"], "target": o["target"], "waiver": w.get("waiver"),
                        "until": _until(w.get("waiver"), self.waivers)} for o in ops for w in o["waived"]],
            "waiver_problems": self.check.problems(self.waivers),
        }
        return cert


def _reason(e: _Entry, op: str, verdict: str, whole: list[str], declared: str | None) -> str:
    """Why the verdict, in words a person reads first (the rounding, then the rule that refused it)."""
    if verdict != "non-conformant":
        c = e.counts
        return {"bit-exact": f"every one of {c['cases'] - c['unsupported']} case(s) that ran is bit-exact",
                "unsupported": "the target ran none of its cases",
                }.get(verdict, f"every case that ran is within the tolerance; {c['cases'] - c['unsupported'] - c['bit_exact']}"
                               f" not bit-exact")
    parts = [w for w in [e.rounding_words(op, declared)] if w]
    if e.failing:
        f = e.failing[0]
        more = f" (and {len(e.failing) - 1} more)" if len(e.failing) > 1 else ""
        parts.append(f"{len(e.failing)} case(s) fail, e.g. {f['case_id']}: {f['status']}"
                     + (f", {str(f['reason'])[:300]}" if f.get("reason") else "") + more)
    parts += whole
    return "; ".join(dict.fromkeys(parts)) or "non-conformant"


def _until(waiver_id, waivers) -> str | None:
    for w in (waivers.items if waivers else []):
        if w.id == waiver_id:
            return w.expires.isoformat()
    return None


# ----------------------------------------------------------------------------- signature

def subjects(cert: dict) -> list[dict]:
    """The in-toto subjects of ``cert``: what was certified, by sha256 (each target's kernel source
    files and shared libraries, the case set)."""
    out = []
    for t, v in (cert.get("targets") or {}).items():
        k = (v or {}).get("kernel") or {}
        for f in list(k.get("sources") or []) + list(k.get("libraries") or []):
            if f.get("sha256"):
                out.append({"name": f"{t}:{f['path']}", "digest": {"sha256": f["sha256"]}})
    cs = cert.get("case_set") or {}
    out.append({"name": "qconform case set", "digest": {"sha256": cs.get("sha256") or _digest([])}})
    return out


def seal(cert: dict, signer) -> dict:
    """The DSSE envelope (certificate.json) of ``cert``, signed by ``signer`` (reports.attest.Signer),
    its fingerprint written into ``cert`` first (``signer``)."""
    cert["signer"] = {"alg": "ed25519", "keyid": signer.keyid,
                      "note": "verify with the signer's public key: qconform certify --verify CERT --public-key FILE"}
    return attest.seal(cert, subjects(cert), signer)


def write_certificate(run_dir: str | Path, cert: dict, signer) -> list[Path]:
    """certificate.json (the signed envelope) and certificate.md (its rendering) in ``run_dir``."""
    d = Path(run_dir)
    envelope = seal(cert, signer)
    write_json(d / CERT_JSON, envelope)
    # rendered from the signed payload itself, as `certify --verify` renders it to compare
    write_atomic(d / CERT_MD, to_markdown(attest.Envelope(envelope).statement()["predicate"]))
    return [d / CERT_JSON, d / CERT_MD]


def non_conformant(cert: dict | None) -> list[str]:
    """One line per certified (op, target) that is non-conformant, with its reason."""
    return certificate_failures(cert)


def _val(v, fmt: str = "") -> str:
    """A value for a rendered cell: '-' for what is not there (never 'None')."""
    if v is None or v == "":
        return "-"
    return format(v, fmt) if fmt else str(v)


def to_markdown(cert: dict[str, Any]) -> str:
    """The human page of a certificate: every field of the JSON, in words and tables. It is a
    rendering, never read back: ``certify --verify`` reads certificate.json's signed payload."""
    git = cert.get("git") or {}
    cs, tp = cert.get("case_set") or {}, cert.get("tolerance_policy") or {}
    L = ["# qconform certificate", ""]
    bad = non_conformant(cert)
    if bad:
        L += ["**NON-CONFORMANT**:", ""] + [f"- {md_cell(b)}" for b in bad] + [""]
    L.append(f"Run `{_val(cert.get('run_id'))}`, created {_val(cert.get('created_utc'))} (UTC); suite "
             f"{_val(cert.get('suite_version'))}, git {git.get('commit') or '?'}{' (dirty)' if git.get('dirty') else ''}; "
             f"golden scheme `{_val((cert.get('golden') or {}).get('scheme'))}`.")
    L.append("")
    sig = cert.get("signer") or {}
    L.append(f"**Signed** with Ed25519 key `{_val(sig.get('keyid'))}` (its fingerprint): certificate.json is an in-toto "
             f"Statement in a DSSE envelope; check it with `qconform certify --verify certificate.json --public-key "
             f"FILE` (the signer's public key). This page is a rendering of it, not signed itself.")
    L.append(f"**Tolerance**: `{_val(tp.get('source'))}` version {tp.get('version') or '?'}, sha256 "
             f"`{_val(tp.get('sha256'))}`: {_val(tp.get('note'))}.")
    L.append(f"**Case set**: {_val(cs.get('cases'))} cases, seed {_val(cs.get('seed'))}, {_val(cs.get('cases_per_op'))} per "
             f"op, ops {cs.get('ops') or 'all'}{', FILTERED (a subset)' if cs.get('filtered') else ''}"
             f"{', case files ' + str(cs.get('case_files')) if cs.get('case_files') else ''}; sha256 over the "
             f"{len(cs.get('list') or [])} case digests, sorted by case id, `{_val(cs.get('sha256'))}` "
             f"(every case's sha256 in certificate.json).")
    if cs.get("unlisted") or cs.get("digest_mismatch"):
        L.append(f"**CASES NOT IN THE RUN'S LIST**: {cs.get('unlisted')}; digest differs: {cs.get('digest_mismatch')}")
    L.append("**Spec tables**: " + ", ".join(f"{n} `{d}`" for n, d in (cert.get("spec_tables") or {}).items()) + ".")
    fd = cert.get("findings") or {}
    L.append(f"**Findings** file sha256 `{_val(fd.get('sha256'))}`; used: {', '.join(fd.get('used') or []) or 'none'}.")
    L.append(f"**Rules**: {_val((cert.get('rules') or {}).get('tie_scheme'))}; "
             f"{_val((cert.get('rules') or {}).get('shrink'))}.")
    L += ["", "## Host", ""]
    L += [f"- {md_cell(k)}: {md_cell(_val(v))}" for k, v in (cert.get("host") or {}).items()]
    L += ["", "## Targets", ""]
    for t, v in (cert.get("targets") or {}).items():
        vers = ", ".join(f"{k} {x}" for k, x in (v.get("versions") or {}).items()) or "(no versions)"
        rest = "; ".join(f"{k}: {x}" for k, x in v.items()
                         if k not in ("versions", "kernel") and x not in (None, "", {}, []))
        L.append(f"- **{md_cell(t)}**: {md_cell(vers)}" + (f"; {md_cell(rest)}" if rest else ""))
        k = v.get("kernel") or {}
        if k:
            L.append(f"  - kernel `{md_cell(_val(k.get('class')))}`")
            for f in list(k.get("sources") or []) + list(k.get("libraries") or []):
                L.append(f"  - {md_code(str(f.get('path')))} sha256 `{_val(f.get('sha256'))}`"
                         + (f" (named by ${f['env']})" if f.get("env") else ""))
    if cert.get("waiver_problems"):
        L += ["", "## WAIVER PROBLEMS", ""] + [f"- **{md_cell(p)}**" for p in cert["waiver_problems"]]
    L += ["", "## Verdicts", "", ("| target | spec | op | verdict | why | cases | passed | bit-exact | failed | errors | "
                                  "unsupported | waived | bit-exact % | max abs LSB | closest scheme (declared) | "
                                  "bias: mean, above/below, p | tolerance | case digest |"),
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for o in cert.get("ops") or []:
        c, b = o["counts"], o.get("bias") or {}
        tol = "; ".join(f"{t['dtype']}: <= {t['max_abs_lsb']:g} LSB (rule {_val(t['rule'])}"
                        + (f", versions {t['rule_versions']}" if t["rule_versions"] else "")
                        + (f", bias p < {t['bias_alpha']:g}" if t.get("bias_alpha") else "") + ")"
                        for t in o["tolerance"]) or "-"
        bias = "-" if b.get("mean_lsb") is None else f"{b['mean_lsb']:+g}, {b['above']}/{b['below']}, {b['p']:g}"
        best = ("-" if not o.get("best_scheme") else f"{o['best_scheme']} {_val(o.get('best_scheme_exact_pct'))}%")
        L.append(f"| {md_cell(o['target'])} | {o['spec']} | {o['op']} | **{o['verdict']}** | {md_cell(_val(o.get('reason')))} | "
                 f"{c['cases']} | {c['passed']} | "
                 f"{c['bit_exact']} | {c['failed']} | {c['errors']} | {c['unsupported']} | {c['waived']} | "
                 f"{_val(o['bit_exact_pct'])} | {_val(o['max_abs_lsb'], 'g')} | "
                 f"{best} ({_val(o.get('declared_scheme'))}) | {bias} | "
                 f"{md_cell(tol)} | `{o['case_digest'][:16]}` |")
    if cert.get("not_claimed"):
        L += ["", "Not claimed (the target runs the op's other spec table, none of these cases): "
              + ", ".join(f"{n['op']} ({n['spec']}) on {md_cell(n['target'])}" for n in cert["not_claimed"]) + "."]
    L += ["", "## Spec clauses covered (cases)", ""]
    for o in cert.get("ops") or []:
        L.append(f"- {o['op']} ({o['spec']}) on {o['target']}: "
                 + (", ".join(f"`{k}` {n}" for k, n in (o.get("clauses") or {}).items()) or "none"))
    whole = [(o, w) for o in cert.get("ops") or [] for w in o.get("op_failures", ())]
    if whole:
        L += ["", "## Failing as a whole (bias, declared scheme, rounding)", ""]
        L += [f"- {o['op']} ({o['spec']}) on {md_cell(o['target'])}: {md_cell(w)}" for o, w in whole]
    bad = [(o, f) for o in cert.get("ops") or [] for f in o["failing"]]
    if bad:
        L += ["", "## Failing cases", ""]
        for o, f in bad:
            L.append(f"- {md_code(f['case_id'])} on {md_cell(o['target'])}: {f['status']}, "
                     f"{md_cell(f.get('reason') or '')}")
            if f.get("repro"):
                L.append(f"  - reproduce: {md_code(f['repro'])}")
    if cert.get("waived"):
        L += ["", "## Waived cases", ""]
        L += [f"- {md_code(w['case_id'])} on {md_cell(w['target'])}: waiver {md_cell(_val(w['waiver']))}, until "
              f"{md_cell(_val(w['until']))}" for w in cert["waived"]]
    wf = (cert.get("waivers") or {}).get("files") or {}
    if wf:   # (a file's name is the user's: as code, no backtick in it)
        L += ["", "Waiver files: " + ", ".join(f"{md_code(f)} sha256 `{_val(d)}`" for f, d in wf.items())]
    return "\n".join(L) + "\n"


def read_envelope(path: str | Path, field: str = "--verify") -> attest.Envelope:
    """A certificate.json (a run folder: its certificate.json) as a DSSE envelope, nothing in it
    trusted yet: a bounded read of a regular file (suite/core/userfile.py), strict JSON (a key
    twice in one object is refused); one QconformError naming the file otherwise."""
    p = Path(path)
    if p.is_dir():
        p = p / CERT_JSON
    text = read_text(p, "certificate", field, kind="run")
    try:
        return attest.Envelope(attest.strict_loads(text))
    except ValueError as e:
        raise QconformError(f"certificate is not a signed {FORMAT} (a DSSE envelope): {str(e)[:200]}",
                            source=str(p), rule="strict JSON, a DSSE envelope") from None


def read_certificate(path: str | Path, field: str = "--verify") -> dict[str, Any]:
    """The certificate (the Statement's predicate) of a certificate.json, its signature NOT checked
    (a page rebuilt, a merge's shard lists): :func:`read_envelope`, then the payload as strict JSON."""
    env = read_envelope(path, field)
    try:
        cert = env.statement()["predicate"]
    except ValueError as e:
        raise QconformError(f"certificate payload: {str(e)[:200]}", source=str(path), rule="an in-toto Statement") from None
    return cert
