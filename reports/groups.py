"""Group verdicts of a run folder, and how they changed between two runs (``qconform diff``).

A group verdict judges an (op, target) as a whole, not case by case (reports.causes.judge_group,
reports.certify): its outputs' **bias** under the tolerance policy, the **declared scheme** a
target names and another scheme explains better, and with ``--certify`` its **certification**
(non-conformant or not, per spec table). The run wrote them: ``group_failure`` (fails the run)
and ``group_known`` (a known finding explains it) of summary.csv, and certificate.json's verdicts.
This module reads those two files (regular files, size-bounded) and nothing else.

Each verdict has a key (op, target, device, kind): kind ``bias+ int8``, ``bias- int16``,
``declared scheme``, ``certification litert-int8``; a bias that flips sign is another verdict.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from typing import Any

from reports.certify import CERT_JSON, read_certificate
from reports.summary import SUMMARY_CSV
from suite.core.errors import QconformError
from suite.core.userfile import read_bytes

MAX_BYTES = 64 << 20   # a summary of every op x target x device is far below this
CERTIFIED = (None, None, None, "certified")   # a marker: the run wrote a certificate
_BIAS = re.compile(r"^(?:on (?P<dev>.+?): )?(?P<dtype>\w+) outputs biased (?P<sign>[+-])")
_MEAN = re.compile(r"mean error ([+-]?[0-9.]+(?:e[+-]?[0-9]+)?) LSB")
_P = re.compile(r"sign test p ([0-9.]+(?:e[+-]?[0-9]+)?)")
_SCHEME = re.compile(r"^(?:on (?P<dev>.+?): )?declares expected_scheme")


def read_optional(path: Path, what: str) -> str | None:
    """The text of ``path``; None if there is none. Refuses what is not a regular file or is too large."""
    if not path.exists() and not path.is_symlink():
        return None
    try:
        return read_bytes(path, what, what, limit=MAX_BYTES).decode("utf-8")
    except UnicodeDecodeError:
        raise QconformError("not UTF-8 text", source=str(path), field=what) from None


def _kind(text: str) -> tuple[str, str]:
    """(kind, device) of one judge_group text ("on DEV: int8 outputs biased +: ..." -> ("bias+ int8", DEV))."""
    m = _BIAS.match(text)
    if m:
        return f"bias{m['sign']} {m['dtype']}", m["dev"] or ""
    m = _SCHEME.match(text)
    if m:
        return "declared scheme", m["dev"] or ""
    return text.split(":", 1)[0][:80], ""


def _split(cell: str | None) -> list[str]:
    return [t.strip() for t in (cell or "").split("; ") if t.strip()]


def read_group_verdicts(folder: str | Path) -> dict[tuple, dict[str, Any]] | None:
    """{(op, target, device, kind): {text, known (the finding) or None, failing, bias_lsb, bias_p}}
    of the run folder; None when it has no summary.csv (a run from before group verdicts, or one
    that did not finish) or when its groups were not judged (``group_incomplete``)."""
    folder = Path(folder)
    text = read_optional(folder / SUMMARY_CSV, "summary.csv")
    if text is None:
        return None
    out: dict[tuple, dict[str, Any]] = {}
    for r in csv.DictReader(io.StringIO(text)):
        op, target = r.get("op"), r.get("target")
        if not op or not target:
            continue
        if r.get("group_incomplete"):   # an incomplete run judged no group: not judged, never passing
            return None
        for cell, known in (("group_failure", False), ("group_known", True)):
            for t in _split(r.get(cell)):
                kind, dev = _kind(t)
                finding = None
                if known:
                    m = re.search(r"\[known finding ([^\]]+)\]$", t)
                    finding = m.group(1) if m else "?"
                out[(op, target, dev or r.get("device") or "", kind)] = {
                    "text": t, "known": finding, "failing": not known,
                    "bias_lsb": r.get("bias_lsb") or None, "bias_p": r.get("bias_p") or None}
    if (folder / CERT_JSON).exists() or (folder / CERT_JSON).is_symlink():
        out[CERTIFIED] = {"text": "", "known": None, "failing": False, "bias_lsb": None, "bias_p": None}
        doc = read_certificate(folder / CERT_JSON, CERT_JSON)
        for o in doc.get("ops") or []:
            if isinstance(o, dict) and o.get("verdict") == "non-conformant":
                out[(str(o.get("op")), str(o.get("target")), "", f"certification {o.get('spec') or ''}".strip())] = {
                    "text": "non-conformant" + (": " + "; ".join(map(str, o["op_failures"])) if o.get("op_failures") else ""),
                    "known": None, "failing": True, "bias_lsb": None, "bias_p": None}
    return out


def label(key: tuple, v: dict) -> str:
    """"bias on FULLY_CONNECTED/mykernel (+0.36 LSB, p 1e-290)"; "declared scheme on ADD/x"."""
    op, target, dev, kind = key
    where = f"{op}/{target}" + (f"@{dev}" if dev else "")
    if kind.startswith("bias"):
        # this verdict's own numbers (its dtype's), else the (op, target)'s columns
        mean, p = _MEAN.search(v["text"]), _P.search(v["text"])
        nums = []
        if mean or v.get("bias_lsb") is not None:
            nums.append(f"{float(mean.group(1) if mean else v['bias_lsb']):+.3g} LSB")
        if p or v.get("bias_p") is not None:
            nums.append(f"p {float(p.group(1) if p else v['bias_p']):.2g}")
        return f"bias on {where}" + (f" ({', '.join(nums)})" if nums else "")
    return f"{kind} on {where}"


def compare(base: dict | None, new: dict | None, compared: set[tuple]) -> dict[str, list[dict]]:
    """Group verdicts of the run against the baseline's, for the (op, target)s in ``compared``:
    ``new`` (failing now, not failing before), ``fixed`` (failing before, not now), ``still`` (both)
    and ``known`` (a known finding explains it now). A baseline without group verdicts (None)
    makes every failing one new: nothing shows it was there before."""
    base, new = base or {}, new or {}
    if (CERTIFIED in base) != (CERTIFIED in new):   # certified once only: certification verdicts do not compare
        base, new = ({k: v for k, v in x.items() if not k[3].startswith("certification")} for x in (base, new))
    out: dict[str, list[dict]] = {"new": [], "fixed": [], "still": [], "known": []}
    for key in list(new) + [k for k in base if k not in new]:
        if (key[0], key[1]) not in compared:
            continue
        b, n = base.get(key), new.get(key)
        entry = {"op": key[0], "target": key[1], "device": key[2] or None, "kind": key[3]}
        was, now = bool(b and b["failing"]), bool(n and n["failing"])
        if now:
            out["still" if was else "new"].append({**entry, "label": label(key, n), "text": n["text"]})
        elif was:
            out["fixed"].append({**entry, "label": label(key, b), "text": b["text"],
                                 "now": f"known finding {n['known']}" if n else "gone"})
        elif n:
            out["known"].append({**entry, "label": label(key, n), "text": n["text"], "finding": n["known"]})
    return out
