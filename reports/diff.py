"""Regressions between two runs: ``qconform diff BASELINE_DIR RUN_DIR``.

Results are matched by (case id, target, device); a case whose content digest changed
(another seed, another generator) is not compared but listed. Per case, a regression is:

``now failing``      it did not fail before (pass, waived, unsupported) and now fails or errors;
``more mismatches``  more elements differ from the golden than before (exact -> inexact included);
``max err grew``     its max |error| in LSB grew;
``now unsupported``  it ran before and now is unsupported;
``missing``          it was in the baseline and is not in the run (``--allow-missing`` accepts it).

Per (op, target), over the cases both runs compared: a bit-exact % drop, a max |error|
growth, and a latency regression: the median p50 grew by more than the threshold
(default 10 %) AND by more than the run-to-run spread recorded in each run (the median
per-case standard deviation of the timed repeats, baseline + run). Improvements are
listed too but never gate.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reports.results import RESULTS, read_rows, row_key, write_atomic
from suite.core.errors import QconformError
from suite.core.verdict import ERRORS, Status

BAD = frozenset({Status.FAIL.value} | {s.value for s in ERRORS})
UNSUPPORTED = Status.UNSUPPORTED.value


@dataclass
class Diff:
    baseline: str
    run: str
    cases: list[dict] = field(default_factory=list)      # one entry per regressed case
    groups: list[dict] = field(default_factory=list)     # one entry per regressed (op, target)
    improved: list[dict] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)     # same id, other content: not compared
    missing: list[str] = field(default_factory=list)
    new: int = 0
    compared: int = 0
    latency_threshold_pct: float = 10.0
    allow_missing: bool = False

    @property
    def regressed(self) -> bool:
        return bool(self.cases or self.groups or (self.missing and not self.allow_missing))

    def as_dict(self) -> dict[str, Any]:
        return {"format": "qconform-diff/1", "baseline": self.baseline, "run": self.run,
                "regressed": self.regressed, "compared": self.compared, "new_in_run": self.new,
                "latency_threshold_pct": self.latency_threshold_pct,
                "case_regressions": self.cases, "group_regressions": self.groups,
                "improvements": self.improved, "changed_cases": self.changed, "missing": self.missing}


def _num(v) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _rows(d: str | Path, what: str) -> list[dict]:
    p = Path(d)
    f = p / RESULTS if p.is_dir() else p
    if not f.exists():
        raise QconformError(f"no {RESULTS} here", source=str(d), field=what,
                            rule="a run directory holds results.jsonl")
    rows = read_rows(f)
    if not rows:
        raise QconformError(f"{RESULTS} holds no results", source=str(f), field=what)
    return rows


def _label(r: dict) -> str:
    dev = f"@{r['device']}" if r.get("device") else ""
    return f"{r.get('case_id')}:{r.get('target')}{dev}"


def diff_runs(baseline: str | Path, run: str | Path, latency_threshold_pct: float = 10.0,
              allow_missing: bool = False) -> Diff:
    base_rows, new_rows = _rows(baseline, "BASELINE_DIR"), _rows(run, "RUN_DIR")
    base = {row_key(r): r for r in base_rows}
    new = {row_key(r): r for r in new_rows}
    d = Diff(str(baseline), str(run), latency_threshold_pct=latency_threshold_pct, allow_missing=allow_missing)
    d.new = sum(1 for k in new if k not in base)
    pairs: dict[tuple[str, str, str], list[tuple[dict, dict]]] = defaultdict(list)
    for k, b in base.items():
        n = new.get(k)
        if n is None:
            d.missing.append(_label(b))
            continue
        if b.get("case_digest") and n.get("case_digest") and b["case_digest"] != n["case_digest"]:
            d.changed.append(_label(b))
            continue
        d.compared += 1
        pairs[(b.get("op"), b.get("target"), b.get("device") or "")].append((b, n))
        kinds, better = [], []
        bs, ns = b.get("status"), n.get("status")
        if ns in BAD and bs not in BAD:
            kinds.append(f"now failing ({bs} -> {ns})")
        elif bs in BAD and ns not in BAD and ns != UNSUPPORTED:
            better.append(f"fixed ({bs} -> {ns})")
        if ns == UNSUPPORTED and bs != UNSUPPORTED:
            kinds.append(f"now unsupported ({n.get('reason', '')})")
        bm, nm = _num(b.get("mismatches")), _num(n.get("mismatches"))
        if bm is not None and nm is not None:
            if nm > bm:
                kinds.append(f"more mismatches ({bm:g} -> {nm:g} of {_num(n.get('elements')) or 0:g})")
            elif nm < bm:
                better.append(f"fewer mismatches ({bm:g} -> {nm:g})")
        be, ne = _num(b.get("max_abs_lsb")), _num(n.get("max_abs_lsb"))
        if be is not None and ne is not None and ne > be:
            kinds.append(f"max err grew ({be:g} -> {ne:g} LSB)")
        entry = {"case": n.get("case_id"), "op": n.get("op"), "target": n.get("target"),
                 "device": n.get("device"), "status_before": bs, "status_now": ns}
        if kinds:
            d.cases.append({**entry, "what": kinds, "repro": n.get("repro")})
        elif better:
            d.improved.append({**entry, "what": better})

    for (op, target, device), ps in pairs.items():
        kinds = []
        be = sum(int(_num(b.get("elements")) or 0) for b, n in ps if _num(b.get("elements")) and _num(n.get("elements")))
        bm = sum(int(_num(b.get("mismatches")) or 0) for b, n in ps if _num(b.get("elements")) and _num(n.get("elements")))
        ne = sum(int(_num(n.get("elements")) or 0) for b, n in ps if _num(b.get("elements")) and _num(n.get("elements")))
        nm = sum(int(_num(n.get("mismatches")) or 0) for b, n in ps if _num(b.get("elements")) and _num(n.get("elements")))
        entry: dict[str, Any] = {"op": op, "target": target, "device": device or None, "cases": len(ps)}
        if be and ne:
            bp, np_ = 100.0 * (be - bm) / be, 100.0 * (ne - nm) / ne
            entry.update(bit_exact_pct_before=round(bp, 3), bit_exact_pct_now=round(np_, 3))
            if np_ < bp:
                kinds.append(f"bit-exact % dropped ({bp:.3f} -> {np_:.3f})")
        bmax = [x for x in (_num(b.get("max_abs_lsb")) for b, _ in ps) if x is not None]
        nmax = [x for x in (_num(n.get("max_abs_lsb")) for _, n in ps) if x is not None]
        if bmax and nmax and max(nmax) > max(bmax):
            kinds.append(f"max |err| grew ({max(bmax):g} -> {max(nmax):g} LSB)")
        bl = [x for x in (_num(b.get("p50_us")) for b, n in ps if _num(n.get("p50_us")) is not None) if x is not None]
        nl = [x for x in (_num(n.get("p50_us")) for b, n in ps if _num(b.get("p50_us")) is not None) if x is not None]
        if bl and nl:
            b50, n50 = statistics.median(bl), statistics.median(nl)
            bsp = statistics.median([_num(b.get("spread_us")) or 0.0 for b, _ in ps])
            nsp = statistics.median([_num(n.get("spread_us")) or 0.0 for _, n in ps])
            entry.update(p50_us_before=round(b50, 3), p50_us_now=round(n50, 3), spread_us=round(bsp + nsp, 3))
            grew = n50 - b50
            if b50 > 0 and grew > b50 * latency_threshold_pct / 100.0 and grew > bsp + nsp:
                kinds.append(f"latency +{100 * grew / b50:.1f}% ({b50:.2f} -> {n50:.2f} us, spread {bsp + nsp:.2f} us)")
        if kinds:
            d.groups.append({**entry, "what": kinds})
    d.cases.sort(key=lambda c: (c["op"] or "", c["target"] or "", c["case"] or ""))
    return d


def to_text(d: Diff) -> str:
    L = [f"qconform diff: baseline {d.baseline}  run {d.run}",
         (f"{d.compared} results compared, {d.new} new in run, {len(d.missing)} missing, "
          f"{len(d.changed)} changed content (not compared)")]
    if d.groups:
        L += ["", "regressions per op and target:"]
        for g in d.groups:
            L.append(f"  {g['op']:<20} {g['target']:<16} " + "; ".join(g["what"]))
    if d.cases:
        L += ["", f"regressed cases ({len(d.cases)}):"]
        for c in d.cases:
            L.append(f"  {c['case']}:{c['target']}  " + "; ".join(c["what"]))
            if c.get("repro"):
                L.append(f"      reproduce: {c['repro']}")
    if d.missing:
        L += ["", f"missing from the run ({len(d.missing)}){' [allowed]' if d.allow_missing else ''}:"]
        L += [f"  {m}" for m in d.missing[:50]] + ([f"  ... {len(d.missing) - 50} more"] if len(d.missing) > 50 else [])
    if d.changed:
        L += ["", f"changed case content, not compared ({len(d.changed)}): " + ", ".join(d.changed[:10])
              + (" ..." if len(d.changed) > 10 else "")]
    if d.improved:
        L += ["", f"improved ({len(d.improved)}):"]
        L += [f"  {c['case']}:{c['target']}  " + "; ".join(c["what"]) for c in d.improved[:50]]
    L += ["", "REGRESSED" if d.regressed else "no regression"]
    return "\n".join(L) + "\n"


def to_markdown(d: Diff) -> str:
    def esc(s: Any) -> str:
        return str(s if s is not None else "").replace("|", "\\|")
    L = [f"### qconform diff: {'❌ regressed' if d.regressed else '✅ no regression'}", "",
         (f"{d.compared} results compared; {len(d.cases)} cases regressed; {len(d.groups)} op/target groups "
          f"regressed; {len(d.missing)} missing; {len(d.improved)} improved."), ""]
    if d.groups:
        L += ["| op | target | regression |", "|---|---|---|"]
        L += [f"| {esc(g['op'])} | {esc(g['target'])} | {esc('; '.join(g['what']))} |" for g in d.groups]
        L.append("")
    if d.cases:
        L += ["| case | target | regression | reproduce |", "|---|---|---|---|"]
        L += [f"| `{esc(c['case'])}` | {esc(c['target'])} | {esc('; '.join(c['what']))} | "
              f"{('`' + esc(c['repro']) + '`') if c.get('repro') else ''} |" for c in d.cases]
        L.append("")
    if d.missing:
        L += [f"Missing from the run{' (allowed)' if d.allow_missing else ''}: "
              + ", ".join(f"`{m}`" for m in d.missing[:30]) + (" ..." if len(d.missing) > 30 else ""), ""]
    return "\n".join(L)


def write_csv(d: Diff, path: str | Path) -> Path:
    """diff.csv (atomically): one line per regressed (op, target) and per regressed or missing case."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["level", "op", "target", "device", "case", "regression"])
    for g in d.groups:
        w.writerow(["op", g["op"], g["target"], g.get("device") or "", "", "; ".join(g["what"])])
    for c in d.cases:
        w.writerow(["case", c["op"], c["target"], c.get("device") or "", c["case"], "; ".join(c["what"])])
    if not d.allow_missing:
        for m in d.missing:
            w.writerow(["case", "", "", "", m, "missing"])
    return write_atomic(path, out.getvalue())
