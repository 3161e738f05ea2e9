"""``qconform certify --verify CERT --public-key FILE [--signature-only] [--kernel-source FILE ...]
[--tolerance FILE] [--waivers FILE ...]``.

Checks a certificate (``certificate.json`` of a ``pytest --certify`` run, or its run folder): first
its signature, with the signer's public key alone (an in-toto Statement in a DSSE envelope, Ed25519:
reports/attest.py), before any other work; then, the payload being the signer's, against the suite
at this checkout: the suite commit, every case regenerated from the certificate's seed, cases per op
and ops (sha256 each, sorted by case id), the tolerance file (the suite's default one, or the file
given with ``--tolerance``), the spec tables, the findings file, the waiver files (``--waivers``)
and the kernel's source files and shared libraries (``--kernel-source``); and last the verdict of
each certified (op, target). Reading the certificate is reading data: a bounded read of a regular
file, strict JSON (a key twice in one object is refused); it never imports, runs or opens anything
it names. certificate.md is a rendering, never trusted: given a run folder, it must be the rendering
of the signed payload.

Exit status: 0 verified and every certified (op, target) conformant; 1 not (the signature does not
verify, no public key or another signer's, a digest differs, something cannot be checked here, or a
verdict is non-conformant); 2 unreadable (no such file, not a regular file, over 64 MiB, not strict
JSON, not a signed ``qconform-certificate/3``).
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from reports import attest
from reports.certify import (CERT_MD, FORMAT, case_list_digest, read_envelope, sha256_file, suite_digests,
                             to_markdown)
from reports.runinfo import git_info
from reports.summary import CONFORMANT
from suite.cases.generate import generate, generator_ops
from suite.core.errors import QconformError
from suite.core.tolerance import DEFAULT_FILE
from suite.core.userfile import read_bytes, read_text

VERIFIED, MISMATCH, UNREADABLE = 0, 1, 2
#: cases per op a certificate's case set is regenerated with, at most (a signed one: still bounded)
MAX_CASES_PER_OP = 10_000


def register(sub):
    p = sub.add_parser("certify", help="verify a certificate (make one with `pytest --certify`)",
                       description=__doc__.split("\n\n")[1],
                       epilog="A certificate is made by a run: pytest --target=X --certify [--certify-key FILE] "
                              "(docs/reports.md). Exit status: 0 verified and conformant, 1 not, 2 unreadable.")
    p.add_argument("--verify", metavar="CERT", help="certificate.json (or the run folder holding it)")
    p.add_argument("--public-key", default=None, metavar="FILE",
                   help="the signer's public key (the .pub of `qconform keygen`; default: your own key's, if any)")
    p.add_argument("--signature-only", action="store_true",
                   help="check the signature alone (authenticity), not the digests and verdicts")
    p.add_argument("--kernel-source", action="append", default=[], metavar="FILE",
                   help="a source file or shared library of the certified kernel, compared with its certified sha256")
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
    if not 0 < n <= MAX_CASES_PER_OP or len(ops or ()) > 1000:
        return False, f"cases per op {n}: not regenerated here (at most {MAX_CASES_PER_OP})"
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


def _certified(cert: dict) -> list[tuple[str, dict]]:
    """(target, {path, sha256}) of each kernel source and library the certificate names."""
    return [(t, f) for t, v in (cert.get("targets") or {}).items() if isinstance(v, dict)
            for f in ((v.get("kernel") or {}).get("sources") or []) + ((v.get("kernel") or {}).get("libraries") or [])
            if isinstance(f, dict)]


def _kernels(cert: dict, given: list[str]) -> list[tuple[bool, str]]:
    """Each kernel file given, against the certified one of its name (or its digest)."""
    certified = _certified(cert)
    out = []
    for g in given:
        try:
            sha = sha256_file_any(g)
        except QconformError as e:
            out.append((False, f"kernel file {g}: {e}"))
            continue
        same = [(t, f) for t, f in certified if f.get("sha256") == sha]
        if same:
            out.append((True, f"kernel file {g}: sha256 equal to the certified {same[0][1].get('path')} of {same[0][0]}"))
            continue
        named = [(t, f) for t, f in certified if Path(str(f.get("path"))).name == Path(g).name]
        if named:
            out.append((False, f"kernel file {g}: CHANGED since it was certified: sha256 {sha[:16]}, certified "
                               f"{str(named[0][1].get('sha256'))[:16]} ({named[0][1].get('path')} of {named[0][0]})"))
        else:
            out.append((False, f"kernel file {g}: not one of the certified kernel files "
                               f"({', '.join(str(f.get('path')) for _, f in certified) or 'none'})"))
    if certified and not given:
        out.append((True, "kernel files: not compared here (give --kernel-source FILE for each of: "
                          + ", ".join(str(f.get("path")) for _, f in certified) + "); their sha256 are signed"))
    return out


def sha256_file_any(path: str) -> str:
    """The sha256 of a kernel file given on the command line (a regular file, bounded)."""
    return hashlib.sha256(read_bytes(path, "kernel file", "--kernel-source", "run", limit=1 << 30)).hexdigest()


def verdicts(cert: dict) -> list[tuple[bool, str]]:
    """One line per certified (op, target): its verdict, and why when non-conformant."""
    out = []
    ops = [o for o in cert.get("ops") or [] if isinstance(o, dict)]
    for o in ops:
        v = o.get("verdict")
        ok = v in CONFORMANT
        why = f": {o.get('reason')}" if not ok and o.get("reason") else ""
        out.append((ok or v == "unsupported",
                    f"verdict: {o.get('op')} ({o.get('spec')}) on {o.get('target')}: {v}{why}"))
    if not any(o.get("verdict") in CONFORMANT for o in ops):   # (all unsupported, or none: nothing certified)
        out.append((False, "verdict: no (op, target) is certified conformant"))
    if cert.get("incomplete"):
        out.append((False, f"verdict: the certified run is incomplete ({cert['incomplete']}): its verdicts are partial"))
    return out


def verify(cert: dict, tolerance=None, waivers=()) -> list[tuple[bool, str]]:
    """(ok, what) per check of ``cert`` (its signature checked already) against this checkout."""
    out = []
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


def _check_md(p: Path, cert: dict) -> tuple[bool, str] | None:
    """A run folder's certificate.md against the rendering of the signed payload (never trusted)."""
    if not p.is_dir() or not (p / CERT_MD).exists():
        return None
    try:
        md = read_text(p / CERT_MD, "certificate page", "--verify", kind="run")
    except QconformError as e:
        return False, f"certificate.md: {e}"
    if md != to_markdown(cert):
        return False, ("certificate.md is NOT the rendering of the signed certificate.json (edited after signing): "
                       "trust only what this command prints")
    return True, "certificate.md: the rendering of the signed certificate.json"


def run(args) -> int:
    if not args.verify:
        print("qconform certify: give --verify CERT --public-key FILE to check a certificate; a certificate is made "
              "by a run: pytest --target=X --certify [--certify-key FILE] (see docs/reports.md)", file=sys.stderr)
        return UNREADABLE
    try:
        env = read_envelope(args.verify)
    except QconformError as e:
        print(f"qconform certify: unreadable: {e}", file=sys.stderr)
        return UNREADABLE
    # ---- the signature, before anything else is read from the certificate
    if args.public_key is None:
        mine = attest.public_path(attest.default_key_path())
        if not mine.is_file():
            print(f"NO KEY    no public key to check the signature with: give --public-key FILE, the signer's public "
                  f"key (it signed as keyid {', '.join(k[:16] for k in env.keyids)}); nothing was checked")
            print(f"qconform certify: {args.verify}: NOT VERIFIED (no public key)")
            return MISMATCH
        args.public_key = str(mine)
    try:
        public = attest.load_public(args.public_key)
    except QconformError as e:
        print(f"NO KEY    {e}; nothing was checked")
        print(f"qconform certify: {args.verify}: NOT VERIFIED (no usable public key)")
        return MISMATCH
    state, why = env.check(public)
    if state != "valid":
        print(f"{'OTHER KEY' if state == 'other key' else 'FORGED   '} {why}")
        print(f"qconform certify: {args.verify}: NOT VERIFIED ("
              + ("signed by another key than the one given)" if state == "other key" else "edited or forged)"))
        return MISMATCH
    try:
        st = env.statement()
    except ValueError as e:
        print(f"qconform certify: {args.verify}: signed, but not a {FORMAT}: {e}", file=sys.stderr)
        return UNREADABLE
    cert = st["predicate"]
    if cert.get("format") != FORMAT:
        print(f"qconform certify: {args.verify}: signed, but not a {FORMAT} (format {cert.get('format')!r})",
              file=sys.stderr)
        return UNREADABLE
    print(f"ok        {why}")
    if args.signature_only:
        print(f"qconform certify: {args.verify}: AUTHENTIC (signature only: digests and verdicts not checked)")
        return VERIFIED
    checks = verify(cert, args.tolerance, args.waivers)
    md = _check_md(Path(args.verify), cert)
    if md is not None:
        checks.append(md)
    checks += _kernels(cert, args.kernel_source)
    checks += verdicts(cert)
    for ok, what in checks:
        print(f"{'ok      ' if ok else 'MISMATCH' if not what.startswith('verdict') else 'FAIL    '}  {what}")
    facts = [c for c in checks if not c[1].startswith("verdict")]
    good_facts, good = all(ok for ok, _ in facts), all(ok for ok, _ in checks)
    unseen = bool(_certified(cert)) and not args.kernel_source   # (named on the verdict line: not checked)
    print(f"qconform certify: {args.verify}: " + (
        "VERIFIED against this checkout, every certified (op, target) conformant"
        + ("; the kernel files NOT compared (give --kernel-source)" if unseen else "") if good else
        "VERIFIED against this checkout, but NON-CONFORMANT (see the verdicts above)" if good_facts else
        "does NOT match this checkout"))
    return VERIFIED if good else MISMATCH
