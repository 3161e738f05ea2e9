"""``qconform golden CASE.json [CASE2.json ...] [-o OUT] [--scheme NAME]``."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

from reference import SCHEMES, golden, has_golden
from reference.schemes import get_scheme
from suite.core.case import expand_case_paths, load_case
from suite.core.errors import QconformError
from suite.core.spec import check_case


def register(sub):
    p = sub.add_parser("golden", help="compute the golden output of case files",
                       description="Write the golden outputs of case files: {\"outputs\": [{dtype, shape, data}]}. "
                                   "With one case, -o names the output file (default: stdout); with several "
                                   "(or a folder), -o names a directory that gets <stem>.golden.json per case.")
    p.add_argument("cases", nargs="+", help="case files or folders of them")
    p.add_argument("-o", "--output", help="output file (one case) or directory (several)")
    p.add_argument("--scheme", default=None, help="requantization scheme (default tflite-ref-double)")
    p.add_argument("--no-spec-check", action="store_true",
                   help="compute even if a case breaks its spec table (default: refuse)")
    p.set_defaults(func=run)


def golden_doc(case, scheme, outs=None) -> dict:
    """The ``qconform-golden/1`` document of a case's golden outputs ``outs`` (default: computed
    now; also ``qconform cases --golden``)."""
    outs = golden(case, scheme) if outs is None else outs
    doc = {"format": "qconform-golden/1", "case_id": case.id, "scheme": scheme or "tflite-ref-double",
           "outputs": []}
    for o, spec in zip(outs, case.outputs):
        arr = np.asarray(o)
        data = arr.ravel().tolist()
        doc["outputs"].append({"dtype": spec.dtype, "shape": list(spec.shape), "data": data})
    return doc


def run(args) -> int:
    if args.scheme is not None:
        try:
            get_scheme(args.scheme)
        except KeyError:
            raise QconformError(f"unknown scheme '{args.scheme}' (known: {', '.join(SCHEMES)})",
                                field="--scheme") from None
    paths = expand_case_paths(args.cases)
    if not paths:
        raise QconformError("no case files found", field="cases")
    many = len(paths) > 1 or any(Path(c).is_dir() for c in args.cases)
    # validate everything first, so a bad file leaves nothing half written
    cases = []
    for p in paths:
        c = load_case(p)
        if not has_golden(c.op):
            raise QconformError(f"the golden has no implementation of {c.op} yet", source=str(p), field="op")
        if not args.no_spec_check:
            problems = check_case(c)
            if problems:
                pr = problems[0]
                raise QconformError(f"{pr.message} [{pr.clause}]", source=str(p), field=pr.field,
                                    rule="the case must follow its spec table (--no-spec-check to compute anyway)")
        try:   # options the golden refuses (attrs.padding, ...) are this file's error
            cases.append((p, c, golden(c, args.scheme)))
        except QconformError as e:
            raise QconformError(e.detail, source=str(p), field=e.field, rule=e.rule) from None
    if many:
        if not args.output:
            raise QconformError("several cases need -o DIRECTORY", field="-o")
        out_dir = Path(args.output)
        out_dir.mkdir(parents=True, exist_ok=True)
        for p, c, outs in cases:
            write_doc(out_dir / f"{Path(p).stem}.golden.json", golden_doc(c, args.scheme, outs))
        print(f"wrote {len(cases)} golden file(s) to {out_dir}", file=sys.stderr)
        return 0
    p, c, outs = cases[0]
    doc = golden_doc(c, args.scheme, outs)
    if args.output:
        write_doc(Path(args.output), doc)
    else:
        json.dump(doc, sys.stdout, separators=(",", ":"))
        sys.stdout.write("\n")
    return 0


def write_doc(path: Path, doc: dict) -> None:
    """Write ``doc`` as compact JSON to ``path``, atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    os.replace(tmp, path)
