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

The certificate stands on its own (``qconform-certificate/2``): suite version and commit, UTC
time, the run's host facts (run.json's ``host``, whole), every target's versions and devices,
the golden scheme, the full sha256 of every case (sorted by case id) and one over them, of the
tolerance file, of the spec tables and of the findings and waiver files; per op the best scheme,
the bias (mean, above / below, sign test p) and the spec clauses covered with case counts. It is
signed (HMAC-SHA256 over its canonical JSON) with the per-user key of suite/core/keyed.py or a
key file named with ``--key``; ``qconform certify --verify`` (suite/commands/certify.py) checks
the signature and recomputes the digests from the suite.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from reports.causes import SCHEME_GAP_MIN, BiasTally, SchemeTally
from suite.core import findings as _findings
from suite.core import keyed
from suite.core.spec import SPEC_DIR
from suite.core.tolerance import DEFAULT_FILE as DEFAULT_TOLERANCE
from suite.core.text import md_cell, md_code
from suite.core.tolerance import sign_test_p
from suite.core.errors import QconformError
from suite.core.userfile import read_bytes, read_text
from suite.core.verdict import ERRORS, Status

FORMAT = "qconform-certificate/2"
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
            return best, (f"declared scheme {declared} misses {missed} element(s), every one a rounding tie, and "
                          f"{best} reproduces {gap} more ({pct}%): ties broken another way (certification rule: "
                          f"a gap >= {TIE_SCHEME_GAP_MIN} made only of ties)")
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
                    key_file: str | Path | None = None) -> dict[str, Any]:
        """``groups``: {(op, target): the failures of the op as a whole} (reports.summary.Summary's
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
            ops.append({"target": target, "spec": spec, "op": op,
                        "verdict": "non-conformant" if whole else e.verdict(), "counts": e.counts, "op_failures": whole,
                        "bit_exact_pct": (round(100.0 * (e.elements - e.mismatches) / e.elements, 3)
                                          if e.elements else None),
                        "max_abs_lsb": e.max_abs, "declared_scheme": declared, "best_scheme": best,
                        "best_scheme_exact_pct": best_pct, "ties_missed": e.schemes.causes.get("tie", 0),
                        "bias": e.bias_fields(), "toward_zero_point": {"toward": e.shrink[0], "away": e.shrink[1]},
                        "clauses": dict(sorted(e.clauses.items())),
                        "tolerance": tol, "case_digest": _digest(e.lines),
                        "failing": e.failing, "waived": e.waived})
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
            "waivers": {"files": {f: ((sha256_file(f) if Path(f).is_file() else None) if read_waivers
                                      else self.waiver_files.get(f)) for f in wfiles},
                        "items": [w.as_dict() for w in (self.waivers.items if self.waivers else [])]},
            "waived": [{"case_id": w["case_id"], "target": o["target"], "waiver": w.get("waiver"),
                        "until": _until(w.get("waiver"), self.waivers)} for o in ops for w in o["waived"]],
            "waiver_problems": self.check.problems(self.waivers),
        }
        return sign(cert, key_file)


def _until(waiver_id, waivers) -> str | None:
    for w in (waivers.items if waivers else []):
        if w.id == waiver_id:
            return w.expires.isoformat()
    return None


# ----------------------------------------------------------------------------- signature

def _canonical(cert: dict) -> bytes:
    body = {k: v for k, v in cert.items() if k != "signature"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode()


def _key(key_file: str | Path | None) -> tuple[bytes, str]:
    """(key, what it is): a key file named by the user (its bytes, at least 16), else the user's
    key (suite/core/keyed.py). Raises keyed.KeyProblem."""
    if key_file is None:
        return keyed.user_key(), "the user's key (suite/core/keyed.py)"
    data = keyed.read_regular(key_file, 1 << 16)
    if len(data) < 16:
        raise keyed.KeyProblem(Path(key_file), f"holds {len(data)} bytes: a key needs at least 16")
    return data, f"key file {Path(key_file).name}"


def sign(cert: dict, key_file: str | Path | None = None) -> dict:
    """``cert`` with ``signature``: HMAC-SHA256 of its canonical JSON (every other field) and of the
    signature's own ``alg`` and ``key``;
    without a usable key the signature says why and nothing can verify it."""
    cert = {k: v for k, v in cert.items() if k != "signature"}
    try:
        key, what = _key(key_file)
        cert["signature"] = {"alg": "HMAC-SHA256", "key": what,
                             "value": keyed.mac(key, _canonical(cert), "HMAC-SHA256", what)}
    except (keyed.KeyProblem, OSError, ValueError) as e:
        cert["signature"] = {"alg": "HMAC-SHA256", "key": None, "value": None, "why": str(e)}
    return cert


def signature_ok(cert: dict, key_file: str | Path | None = None) -> tuple[bool, str]:
    sig = cert.get("signature")
    if not isinstance(sig, dict) or not isinstance(sig.get("value"), str):
        return False, "unsigned" + (f" ({sig.get('why')})" if isinstance(sig, dict) and sig.get("why") else "")
    try:
        key, what = _key(key_file)
    except (keyed.KeyProblem, OSError) as e:
        return False, f"no key to check it with: {e}"
    try:
        body = _canonical(cert)
    except (TypeError, ValueError) as e:
        return False, f"not canonical JSON: {e}"
    if (set(sig) != {"alg", "key", "value"} or sig.get("alg") != "HMAC-SHA256" or not isinstance(sig.get("key"), str)
            or not keyed.verify(key, sig["value"], body, "HMAC-SHA256", sig["key"])):
        return False, f"signature does not match (edited, or signed with another key than {what})"
    return True, f"signature valid ({what})"


def to_markdown(cert: dict[str, Any]) -> str:
    """The human page of a certificate: every field of the JSON, in words and tables."""
    git = cert.get("git") or {}
    cs, tp = cert.get("case_set") or {}, cert.get("tolerance_policy") or {}
    L = ["# qconform certificate", ""]
    L.append(f"Run `{cert.get('run_id')}`, created {cert.get('created_utc')} (UTC); suite {cert.get('suite_version')}, "
             f"git {git.get('commit') or '?'}{' (dirty)' if git.get('dirty') else ''}; golden scheme "
             f"`{(cert.get('golden') or {}).get('scheme')}`.")
    L.append("")
    L.append(f"**Tolerance**: `{tp.get('source')}` version {tp.get('version') or '?'}, sha256 `{tp.get('sha256')}`: "
             f"{tp.get('note')}.")
    L.append(f"**Case set**: {cs.get('cases')} cases, seed {cs.get('seed')}, {cs.get('cases_per_op')} per op, ops "
             f"{cs.get('ops') or 'all'}{', FILTERED (a subset)' if cs.get('filtered') else ''}"
             f"{', case files ' + str(cs.get('case_files')) if cs.get('case_files') else ''}; sha256 over the "
             f"{len(cs.get('list') or [])} case digests, sorted by case id, `{cs.get('sha256')}` "
             f"(every case's sha256 in certificate.json).")
    if cs.get("unlisted") or cs.get("digest_mismatch"):
        L.append(f"**CASES NOT IN THE RUN'S LIST**: {cs.get('unlisted')}; digest differs: {cs.get('digest_mismatch')}")
    L.append("**Spec tables**: " + ", ".join(f"{n} `{d}`" for n, d in (cert.get("spec_tables") or {}).items()) + ".")
    fd = cert.get("findings") or {}
    L.append(f"**Findings** file sha256 `{fd.get('sha256')}`; used: {', '.join(fd.get('used') or []) or 'none'}.")
    L.append(f"**Rules**: {(cert.get('rules') or {}).get('tie_scheme')}; {(cert.get('rules') or {}).get('shrink')}.")
    sig = cert.get("signature") or {}
    L.append(f"**Signature**: {sig.get('alg')} by {sig.get('key') or 'NO KEY (' + str(sig.get('why')) + ')'}: "
             f"`{sig.get('value')}` (check with `qconform certify --verify certificate.json`).")
    L += ["", "## Host", ""]
    L += [f"- {k}: {v}" for k, v in (cert.get("host") or {}).items()]
    L += ["", "## Targets", ""]
    for t, v in (cert.get("targets") or {}).items():
        vers = ", ".join(f"{k} {x}" for k, x in (v.get("versions") or {}).items()) or "(no versions)"
        rest = "; ".join(f"{k}: {x}" for k, x in v.items() if k not in ("versions",) and x not in (None, "", {}, []))
        L.append(f"- **{md_cell(t)}**: {md_cell(vers)}" + (f"; {md_cell(rest)}" if rest else ""))
    if cert.get("waiver_problems"):
        L += ["", "## WAIVER PROBLEMS", ""] + [f"- **{md_cell(p)}**" for p in cert["waiver_problems"]]
    L += ["", "## Verdicts", "", ("| target | spec | op | verdict | cases | passed | bit-exact | failed | errors | "
                                  "unsupported | waived | bit-exact % | max abs LSB | best scheme (declared) | "
                                  "bias: mean, above/below, p | tolerance | case digest |"),
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for o in cert.get("ops") or []:
        c, b = o["counts"], o.get("bias") or {}
        tol = "; ".join(f"{t['dtype']}: <= {t['max_abs_lsb']:g} LSB (rule {t['rule']}"
                        + (f", versions {t['rule_versions']}" if t["rule_versions"] else "")
                        + (f", bias p < {t['bias_alpha']:g}" if t.get("bias_alpha") else "") + ")"
                        for t in o["tolerance"]) or "-"
        bias = "-" if b.get("mean_lsb") is None else f"{b['mean_lsb']:+g}, {b['above']}/{b['below']}, {b['p']:g}"
        L.append(f"| {md_cell(o['target'])} | {o['spec']} | {o['op']} | **{o['verdict']}** | {c['cases']} | {c['passed']} | "
                 f"{c['bit_exact']} | {c['failed']} | {c['errors']} | {c['unsupported']} | {c['waived']} | "
                 f"{'-' if o['bit_exact_pct'] is None else o['bit_exact_pct']} | "
                 f"{'-' if o['max_abs_lsb'] is None else format(o['max_abs_lsb'], 'g')} | "
                 f"{o.get('best_scheme')} {o.get('best_scheme_exact_pct')}% ({o.get('declared_scheme')}) | {bias} | "
                 f"{md_cell(tol)} | `{o['case_digest'][:16]}` |")
    L += ["", "## Spec clauses covered (cases)", ""]
    for o in cert.get("ops") or []:
        L.append(f"- {o['op']} ({o['spec']}) on {o['target']}: "
                 + (", ".join(f"`{k}` {n}" for k, n in (o.get("clauses") or {}).items()) or "none"))
    whole = [(o, w) for o in cert.get("ops") or [] for w in o.get("op_failures", ())]
    if whole:
        L += ["", "## Failing as a whole (bias, declared scheme)", ""]
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
        L += [f"- {md_code(w['case_id'])} on {md_cell(w['target'])}: waiver {md_cell(w['waiver'])}, until "
              f"{md_cell(w['until'])}" for w in cert["waived"]]
    wf = (cert.get("waivers") or {}).get("files") or {}
    if wf:   # (a file's name is the user's: as code, no backtick in it)
        L += ["", "Waiver files: " + ", ".join(f"{md_code(f)} sha256 `{d}`" for f, d in wf.items())]
    return "\n".join(L) + "\n"


def read_certificate(path: str | Path, field: str = "--verify") -> dict[str, Any]:
    """A certificate's JSON (a run folder: its certificate.json): a bounded read of a regular file
    (suite/core/userfile.py), parsed as data; one QconformError naming the file (and ``field``,
    where it came from) otherwise."""
    p = Path(path)
    if p.is_dir():
        p = p / CERT_JSON
    text = read_text(p, "certificate", field, kind="run")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise QconformError(f"certificate is not JSON: {str(e)[:200]}", source=str(p), rule="JSON") from None
    if not isinstance(doc, dict):
        raise QconformError("certificate is not a JSON object", source=str(p), rule="a JSON object")
    return doc
