"""``qconform certify --verify CERT [--key FILE] [--tolerance FILE] [--waivers FILE ...]``.

Checks a certificate (``certificate.json`` of a ``pytest --certify`` run, or its run folder)
against the suite at this checkout: its HMAC-SHA256 signature (the per-user key of
suite/core/keyed.py, or ``--key FILE``: any edit of any field breaks it), the suite commit, and
the digests recomputed here: every case regenerated from the certificate's seed, cases per op and
ops (sha256 each, sorted by case id), the tolerance file (the suite's default one, or the file
given with ``--tolerance``), the spec tables, the findings file and the waiver files (given with
``--waivers``). Reading the certificate is reading data: a bounded read of a regular file, parsed
as JSON; it never imports, runs or opens anything it names.

Exit status: 0 verified; 1 it does not match (a digest differs, the signature does not verify,
or something cannot be checked here, e.g. a case set from case files); 2 unreadable (no such
file, not a regular file, over 64 MiB, not JSON, not a ``qconform-certificate/2``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from reports.certify import (FORMAT, case_list_digest, read_certificate, sha256_file, signature_ok,
                             suite_digests)
from reports.runinfo import git_info
from suite.cases.generate import generate, generator_ops
from suite.core.errors import QconformError
from suite.core.tolerance import DEFAULT_FILE

VERIFIED, MISMATCH, UNREADABLE = 0, 1, 2


def register(sub):
    p = sub.add_parser("certify", help="verify a certificate against this checkout",
                       description=__doc__.split("\n\n")[1],
                       epilog="exit status: 0 verified, 1 mismatch or forged, 2 unreadable")
    p.add_argument("--verify", required=True, metavar="CERT", help="certificate.json (or the run folder holding it)")
    p.add_argument("--key", default=None, metavar="FILE",
                   help="key file the certificate was signed with (default: the per-user key)")
    p.add_argument("--tolerance", default=None, metavar="FILE",
                   help="the tolerance file of a certificate made with one of the user's")
    p.add_argument("--waivers", action="append", default=[], metavar="FILE", help="the waiver files it used")
    p.set_defaults(func=run)


def _cases(cs: dict) -> tuple[bool, str]:
    """Whether the certificate's case list is the one the suite generates here from its options."""
    listed = cs.get("list")
    if not isinstance(listed, list) or not all(isinstance(x, list) and len(x) == 2 for x in listed):
        return False, "no case list"
    if case_list_digest(listed) != cs.get("sha256"):
        return False, "its sha256 is not the digest of its own case list"
    if cs.get("unlisted") or cs.get("digest_mismatch"):
        return False, f"rows of cases outside the run's list: {cs.get('unlisted')} {cs.get('digest_mismatch')}"
    if cs.get("case_files"):
        return False, "cases from case files: not regenerable from a seed (compare the files' sha256 by hand)"
    seed, n, ops = cs.get("seed"), cs.get("cases_per_op"), cs.get("ops")
    if not isinstance(seed, int) or not isinstance(n, int) or not (ops is None or isinstance(ops, list)):
        return False, f"seed {seed!r}, cases per op {n!r}, ops {ops!r}: not the options of a generated run"
    known = generator_ops()
    here = sorted([c.id, c.sha256()] for c in generate([op for op in (ops or known) if op in known], n, seed))
    if cs.get("filtered"):
        want = dict(map(tuple, here))
        bad = [i for i, d in listed if want.get(i) != d]
        return (not bad, f"{len(listed)} cases (a filtered run), all as generated here" if not bad
                else f"{len(bad)} case(s) differ from those generated here, e.g. {bad[:3]}")
    if here != listed:
        diff = sum(a != b for a, b in zip(here, listed)) + abs(len(here) - len(listed))
        return False, f"{diff} of {len(here)} generated cases differ (seed {seed}, {n} per op)"
    return True, f"{len(here)} cases regenerated (seed {seed}, {n} per op), every sha256 equal"


def _file_check(name: str, want, given: list[str]) -> tuple[bool, str]:
    for f in given:
        if Path(f).is_file() and sha256_file(f) == want:
            return True, f"{name}: {f} matches"
    return False, f"{name}: sha256 {want} (give the file with the option; none given matches)"


def verify(cert: dict, key=None, tolerance=None, waivers=()) -> list[tuple[bool, str]]:
    """(ok, what) per check of ``cert`` against this checkout."""
    out = [signature_ok(cert, key)]
    commit = (git_info() or {}).get("commit")
    cc = (cert.get("git") or {}).get("commit") if isinstance(cert.get("git"), dict) else None
    dirty = " (certified from a checkout with uncommitted changes: the commit does not name all of its code)" \
        if isinstance(cert.get("git"), dict) and cert["git"].get("dirty") else ""
    out.append((bool(cc) and cc == commit, f"suite commit {cc} (this checkout: {commit}){dirty}"))
    cs = cert.get("case_set") if isinstance(cert.get("case_set"), dict) else {}
    ok, why = _cases(cs)
    out.append((ok, f"case set: {why}"))
    d = suite_digests()
    tp = cert.get("tolerance_policy") if isinstance(cert.get("tolerance_policy"), dict) else {}
    if tp.get("default"):
        out.append((tp.get("sha256") == d["default_tolerance"],
                    f"tolerance: the suite's default {DEFAULT_FILE.name}, sha256 {d['default_tolerance']}"))
    else:
        out.append(_file_check("tolerance", tp.get("sha256"), [tolerance] if tolerance else []))
    out.append((cert.get("spec_tables") == d["spec_tables"], "spec tables: " + ", ".join(
        f"{k} {v[:12]}" for k, v in d["spec_tables"].items())))
    fd = cert.get("findings") if isinstance(cert.get("findings"), dict) else {}
    out.append((fd.get("sha256") == d["findings"], f"findings file sha256 {d['findings']}"))
    wf = ((cert.get("waivers") or {}).get("files") or {}) if isinstance(cert.get("waivers"), dict) else {}
    for name, sha in (wf.items() if isinstance(wf, dict) else ()):
        out.append(_file_check(f"waivers {name}", sha, list(waivers)))
    return out


def run(args) -> int:
    try:
        cert = read_certificate(args.verify)
    except QconformError as e:
        print(f"qconform certify: unreadable: {e}", file=sys.stderr)
        return UNREADABLE
    if cert.get("format") != FORMAT:
        print(f"qconform certify: {args.verify}: not a {FORMAT} (format {cert.get('format')!r})", file=sys.stderr)
        return UNREADABLE
    checks = verify(cert, args.key, args.tolerance, args.waivers)
    for ok, what in checks:
        print(f"{'ok      ' if ok else 'MISMATCH'}  {what}")
    good = all(ok for ok, _ in checks)
    print(f"qconform certify: {args.verify}: " + ("VERIFIED against this checkout" if good else
                                                   "does NOT match this checkout (or was edited)"))
    return VERIFIED if good else MISMATCH
