"""``qconform cases [--ops OP,...] [--cases-per-op N] [--seed S] -o DIR [--golden] [--scheme NAME]``.

Writes the cases a seeded run generates as case files (``DIR/<case id>.json``, the
``qconform-case/1`` format ``pytest --case-file=DIR`` reads back), and with ``--golden``
their golden outputs next to them (``DIR/<case id>.golden.json``, as ``qconform golden``
writes them). The same seed gives byte-identical files on every run, process and machine
(no dependence on thread count, BLAS, dict order or hash seed: tests/test_determinism.py).
Prints one sha256 over all files written (``digest: ...``), to compare runs at a glance.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

from reference import SCHEMES, has_golden
from suite.cases.generate import DEFAULT_CASES_PER_OP, generate, generator_ops
from suite.commands.golden import golden_doc, write_doc
from suite.core.case import save_case
from suite.core.errors import QconformError
from suite.harness.options import MAX_CASES_PER_OP, MAX_SEED


def register(sub):
    p = sub.add_parser("cases", help="write the generated cases of a seed as case files (and goldens)",
                       description="Write the cases a seeded run generates as case files (DIR/<id>.json), "
                                   "optionally with their golden outputs (DIR/<id>.golden.json). "
                                   "The same seed always gives byte-identical files.")
    p.add_argument("--ops", action="append", default=[], metavar="OP[,OP]",
                   help="operators (default: every operator with a generator)")
    p.add_argument("--cases-per-op", type=int, default=None, metavar="N", help="cases per operator (default 30)")
    p.add_argument("--seed", type=int, default=0, metavar="N", help="seed of case generation (default 0)")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="folder to write the files to")
    p.add_argument("--golden", action="store_true", help="also write each case's golden output")
    p.add_argument("--scheme", default=None, help="requantization scheme of the golden (default tflite-ref-double)")
    p.set_defaults(func=run)


def run(args) -> int:
    n = args.cases_per_op if args.cases_per_op is not None else DEFAULT_CASES_PER_OP
    if not 1 <= n <= MAX_CASES_PER_OP:   # the same bound as a run's
        raise QconformError(f"must be in [1, {MAX_CASES_PER_OP:,}] (got {n:,})", field="--cases-per-op",
                            rule=f"at most {MAX_CASES_PER_OP:,} cases per operator")
    if not 0 <= args.seed <= MAX_SEED:
        raise QconformError(f"must be in [0, 2^63 - 1] (got {str(args.seed)[:40]})", field="--seed")
    ops = [x.strip() for v in args.ops for x in v.split(",") if x.strip()]
    known = generator_ops()
    bad = [o for o in ops if o not in known]
    if bad:
        raise QconformError(f"no generator for {', '.join(bad)} (known: {', '.join(known)})", field="--ops",
                            rule="operators with a generator")
    if args.scheme is not None:
        if args.scheme not in SCHEMES:
            raise QconformError(f"unknown scheme '{args.scheme}' (known: {', '.join(SCHEMES)})", field="--scheme")
    out = Path(args.output)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise QconformError(f"cannot create the folder: {e.strerror}", source=str(out), field="-o") from None
    cases = generate(ops or None, n, args.seed)
    written: list[Path] = []
    goldens = 0
    for c in cases:
        written.append(save_case(c, out / f"{c.id}.json"))
        if args.golden:
            if not has_golden(c.op):
                continue
            p = out / f"{c.id}.golden.json"
            write_doc(p, golden_doc(c, args.scheme))
            written.append(p)
            goldens += 1
    h = hashlib.sha256()
    for p in sorted(written, key=lambda q: q.name):
        h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    print(f"digest: {h.hexdigest()}")
    print(f"wrote {len(cases)} case file(s){f' and {goldens} golden(s)' if args.golden else ''} to {out}",
          file=sys.stderr)
    return 0
