"""Same runtime, other device, other bits: the cross-device table.

A case run on several devices (a farm run, ``--device=local --device=qemu:``; or two saved runs,
``qconform diff --allow-different devices``) is compared across them per (op, target): its
outputs differ when the rows' ``out_digest`` differ (a short SHA-256 of the outputs' dtypes,
shapes and bytes, written by the judge: suite/harness/judge.py). A digest says *whether*, not by
how much: the rows keep no outputs (results.jsonl would grow by every output tensor of every
device). By how much comes from what the rows do keep, each device's error against the one
golden of the case: got_a - got_b = err_a - err_b, so the largest difference ``delta`` is exact
when one device matches the golden bit for bit (delta = the other's max |err|), and otherwise
bounded: max(1, |max_a - max_b|) <= delta <= max_a + max_b (shown as ``lo..hi``). The outputs
themselves of a failing case are in its failure file.

Cases with another status on another device (a pass here, a crash or ``unsupported`` there) are
counted apart (``status_differs``).
"""

from __future__ import annotations

import math
from typing import Any

from suite.core.verdict import Status

COLUMNS = ["op", "target", "devices", "compared", "differ", "status_differs", "worst_case", "worst_delta_lsb",
           "worst_max_err_lsb"]
_RAN = frozenset({Status.PASS.value, Status.FAIL.value, Status.WAIVED.value})


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        return None
    return float(v)


def _fmt(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:g}"


def delta(a: dict, b: dict) -> tuple[float, float] | None:
    """(lo, hi) of max |got_a - got_b| in LSB from two rows of one case; None if the rows cannot tell
    (another scheme or case content, no comparison with the golden)."""
    if a.get("out_digest") == b.get("out_digest"):
        return 0.0, 0.0
    if a.get("scheme") != b.get("scheme") or a.get("case_digest") != b.get("case_digest"):
        return None
    ea, eb = _num(a.get("max_abs_lsb")), _num(b.get("max_abs_lsb"))
    if ea is None or eb is None:
        return None
    if _num(a.get("mismatches")) == 0:
        return eb, eb
    if _num(b.get("mismatches")) == 0:
        return ea, ea
    return max(1.0, abs(ea - eb)), ea + eb


class CrossDevice:
    """Rows in (:meth:`add`), one row per (op, target) with a case run on two or more devices out (:meth:`table`)."""

    _KEEP = ("status", "out_digest", "scheme", "case_digest", "max_abs_lsb", "mismatches")

    def __init__(self):
        self.cases: dict[tuple, dict[str, dict]] = {}   # (op, target, case id) -> device -> what is kept of its row

    def add(self, row: dict, device: str | None = None) -> None:
        """One row; ``device`` names its device in place of the row's (two runs: "X (baseline)")."""
        op, target, case = row.get("op"), row.get("target"), row.get("case_id")
        if op is None or target is None or case is None:
            return
        dev = device or row.get("device") or "this host"
        self.cases.setdefault((op, target, case), {})[str(dev)] = {k: row.get(k) for k in self._KEEP}

    def table(self) -> list[dict[str, Any]]:
        """Per (op, target) with a case on two or more devices: the cases compared (outputs on two
        devices or more), those whose outputs differ bit-wise, those whose status differs, and the
        worst: the case with the largest difference, its delta in LSB and each device's max |err|."""
        groups: dict[tuple, dict[str, Any]] = {}
        for (op, target, case), by_dev in self.cases.items():
            if len(by_dev) < 2:   # (a shard farm runs each (op, target) on one device: nothing to compare)
                continue
            g = groups.setdefault((op, target), {"devices": set(), "compared": 0, "differ": 0, "status": 0,
                                                 "worst": None})
            g["devices"].update(by_dev)
            if len({r["status"] for r in by_dev.values()}) > 1:
                g["status"] += 1
            ran = {d: r for d, r in by_dev.items() if r["status"] in _RAN and r.get("out_digest")}
            if len(ran) < 2:
                continue
            g["compared"] += 1
            if len({r["out_digest"] for r in ran.values()}) < 2:
                continue
            g["differ"] += 1
            devs = sorted(ran)
            spans = [delta(ran[x], ran[y]) for i, x in enumerate(devs) for y in devs[i + 1:]]
            known = [s for s in spans if s is not None]
            span = (max(s[0] for s in known), max(s[1] for s in known)) if known else None
            rank = (span[1], span[0]) if span else (-1.0, -1.0)
            if g["worst"] is None or rank > g["worst"][0]:
                errs = ", ".join(f"{d} {_fmt(e)}" if (e := _num(ran[d].get("max_abs_lsb"))) is not None else f"{d} ?"
                                 for d in devs)
                g["worst"] = (rank, case, span, errs)
        out = []
        for (op, target), g in groups.items():
            w = g["worst"]
            span = w[2] if w else None
            out.append({"op": op, "target": target, "devices": ", ".join(sorted(g["devices"])),
                        "compared": g["compared"], "differ": g["differ"], "status_differs": g["status"],
                        "worst_case": w[1] if w else None,
                        "worst_delta_lsb": (None if not w else "?" if span is None else _fmt(span[0])
                                            if span[0] == span[1] else f"{_fmt(span[0])}..{_fmt(span[1])}"),
                        "worst_max_err_lsb": w[3] if w else None})
        return out


def cross_lines(table: list[dict]) -> list[str]:
    """One terminal line per (op, target) whose outputs differ between devices, after one that
    says how many were compared (so a run on several devices says so even when none differs)."""
    if not table:
        return []
    devices = sorted({d for r in table for d in r["devices"].split(", ")})
    differ = sum(1 for r in table if r["differ"])
    head = (f"cross-device: {len(table)} (op, target)s compared between {', '.join(devices)}: "
            f"{differ} with outputs that differ bit-wise (summary.md: the table)")
    return [head] + [f"cross-device: {r['op']} on {r['target']}: {r['differ']} of {r['compared']} cases differ bit-wise "
                     f"between {r['devices']} (worst {r['worst_case']}: {r['worst_delta_lsb']} LSB apart; max |err| "
                     f"{r['worst_max_err_lsb']})" for r in table if r["differ"]]
