"""``qconform encodings FILE.json``: an SNPE/AIMET encodings file as the suite's quantization parameters."""

from __future__ import annotations

import json

from suite.core.encodings import read_encodings


def register(sub):
    p = sub.add_parser("encodings", help="show an SNPE/AIMET encodings file as case quantization parameters",
                       description="Read an AIMET-style encodings JSON (activation_encodings / param_encodings; "
                                   "legacy per-tensor lists or \"version\": \"1.0.0\") and print each tensor's "
                                   "dtype, scale, zero point (QNN offset = -zero_point), granularity and notes, "
                                   "as the suite would use them. Scale and offset of legacy entries are recomputed "
                                   "from bitwidth, min and max, as the SNPE converter does.")
    p.add_argument("file", help="encodings JSON file")
    p.add_argument("--axis", type=int, default=0,
                   help="per-channel dimension of per-channel parameters (default 0: a Conv weight's output "
                        "channel in OIHW / OHWI)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def _fmt(values, fmt: str, limit: int = 4) -> str:
    if values is None:
        return "-"
    shown = [format(v, fmt) for v in values[:limit]]
    more = f", ... ({len(values)})" if len(values) > limit else ""
    return shown[0] if len(values) == 1 else "[" + ", ".join(shown) + more + "]"


def run(args) -> int:
    tensors = read_encodings(args.file, axis=args.axis)
    if args.json:
        print(json.dumps([t.as_dict() for t in tensors], indent=2))
        return 0
    rows = [("tensor", "kind", "dtype", "granularity", "scale", "zero_point", "qnn_offset", "min", "max")]
    for t in tensors:
        gran = t.granularity + (f" (axis {t.axis})" if t.axis is not None else "")
        rows.append((t.name, t.kind, t.dtype, gran, _fmt(t.scale, ".9g"), _fmt(t.zero_point, "d"),
                     _fmt(t.qnn_offset, "d"), _fmt([e.min for e in t.encodings] or None, ".6g"),
                     _fmt([e.max for e in t.encodings] or None, ".6g")))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for k, r in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
        if k == 0:
            print("  ".join("-" * w for w in widths))
    notes = [(t.name, n) for t in tensors for n in t.notes]
    if notes:
        print()
        for name, n in notes:
            print(f"note: {name}: {n}")
    if not tensors:
        print("(no encodings in the file)")
    return 0
