"""Regressions between two runs: ``qconform diff BASELINE_DIR RUN_DIR``.

First the two runs must compare: the same seed, cases (cases per op; the set of (case id,
case_digest)), ops, targets, devices, tolerance policy, scheme and runtime versions per target.
A result compared across another set-up can pass or fail for that reason alone, so any
difference refuses the diff (exit 2) unless ``--allow-different FIELD`` names it; then the
difference heads the report. No result to compare (no (case id, target, device) in both with the
same case content) always refuses.

Results are matched by (case id, target, device). Per case, a regression is:

``now failing``      it did not fail before (pass, waived, unsupported) and now fails or errors,
                     unexplained (one a known finding explains is listed as a new known finding);
``no longer known``  it failed under a known finding before and now fails unexplained;
``more mismatches``  more elements differ from the golden than before (exact -> inexact included);
``max err grew``     its max |error| in LSB grew;
``now unsupported``  it ran before and now is unsupported;
``missing``          it was in the baseline and is not in the run, though the run has its case,
                     target and device (``--allow-missing`` accepts it).

Per (op, target) as a whole, the group verdicts each run wrote (reports/groups.py: bias, declared
scheme, certification): new ones are a regression and head the verdict line ("REGRESSED: new
group verdict: bias on ADD/mykernel (+0.0165 LSB, p 1.2e-94); 0 new failures, ..."); fixed and
still-failing ones are listed.

A failure under the same known finding in both runs is not a regression, whatever its size; a
failure that a known finding explains now and did not before is listed as a new known finding,
not a regression: the run itself calls it known. The per-(op, target) accuracy below leaves out the
cases a finding explains in either run.

Per (op, target), over the cases both runs compared: a bit-exact % drop and a max |error|
growth. Latency (reports/latency.py): the per-case p50s of the cases timed in both runs, a
one-sided Mann-Whitney U test (scipy) with p < 0.05, AND the median moved by more than 20 % AND
by more than 5 us; only between runs on the same device facts (this host's machine, CPU model,
count and ISA extensions; a device's own facts from run.json), never on an emulated device (QEMU's time).
Latency changes are listed, slower and faster; they gate only with ``latency_gate``
(``--latency-gate``): a run timed beside another job is slower without any regression.
Improvements are listed too but never gate.

Two runs on different devices, one device per target each (``--allow-different devices``, e.g.
this host against ``--device=qemu:``): results are matched by (case id, target), the run's device
against the baseline's, and the diff carries the cross-device table (reports/crossdevice.py):
per (op, target), the cases whose outputs differ bit-wise between the two devices.
"""

from __future__ import annotations

import csv
import io
import math
import statistics
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from reports.crossdevice import COLUMNS as CROSS_COLUMNS
from reports.crossdevice import CrossDevice
from reports.groups import compare as compare_verdicts
from reports.groups import read_group_verdicts
from reports.junit import case_repro
from reports.results import RESULTS, read_rows, row_key, write_atomic
from reports.runinfo import RUN_JSON, load_run_json
from reports.summary import emulated
from suite.core.errors import QconformError
from suite.core.verdict import ERRORS, Status

BAD = frozenset({Status.FAIL.value} | {s.value for s in ERRORS})
UNSUPPORTED = Status.UNSUPPORTED.value
#: what ``--allow-different`` may name
FIELDS = ("seed", "cases", "ops", "targets", "devices", "tolerance", "scheme", "versions")
FEW = 5   # ids shown of a longer list


def _few(items, n: int = FEW) -> str:
    items = list(items)
    if not items:
        return "none"
    return ", ".join(map(str, items[:n])) + (f", ... ({len(items) - n} more)" if len(items) > n else "")


@dataclass
class Difference:
    """One way the two runs' set-ups differ. ``field``: the name ``--allow-different`` takes."""

    field: str
    what: str
    baseline: str
    run: str
    allowed: bool = False

    def __str__(self) -> str:
        name = self.field if self.what == self.field else f"{self.field} ({self.what})"
        return f"{name}: baseline {self.baseline}; run {self.run}"


@dataclass
class Run:
    """A run folder as given and as read."""

    given: str
    folder: Path
    info: dict
    rows: list[dict]

    @property
    def name(self) -> str:
        rid = self.info.get("run_id") or self.folder.name
        commit = (self.info.get("git") or {}).get("commit")
        return f"{self.given} (run {rid}" + (f", git {commit[:10]}" if commit else "") + ")"


def run_folder(d: str | Path, what: str) -> Path:
    """The run folder ``d`` names (a ``latest`` link or a report directory resolved to the run it
    points at now), checked to hold results.jsonl and run.json."""
    p = Path(d)
    if p.is_dir() and not (p / RESULTS).exists() and (p / "latest").is_dir():
        p = p / "latest"
    folder = p.resolve()
    if not (folder / RESULTS).is_file():
        raise QconformError(f"no {RESULTS} here", source=str(d), field=what,
                            rule="a run folder (<report-dir>/runs/<run id>, or a latest link) holds results.jsonl")
    if not (folder / RUN_JSON).is_file():
        raise QconformError(f"no {RUN_JSON} here", source=str(folder), field=what,
                            rule="a run folder holds run.json: without it the runs' set-ups cannot be compared")
    return folder


def open_run(d: str | Path, what: str) -> Run:
    """The run folder ``d``: a runs/<run id> folder, a ``latest`` link, or a report directory
    (its ``latest``). It must hold results.jsonl and run.json: without run.json nothing says
    how the run was made, so it cannot be checked against the other."""
    folder = run_folder(d, what)
    rows = read_rows(folder / RESULTS)
    if not rows:
        raise QconformError(f"{RESULTS} holds no results", source=str(folder / RESULTS), field=what)
    return Run(str(d), folder, load_run_json(folder, what), rows)


def _num(v) -> float | None:
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) else f


def _label(r: dict) -> str:
    dev = f"@{r['device']}" if r.get("device") else ""
    return f"{r.get('case_id')}:{r.get('target')}{dev}"


def _plural(k: int, word: str) -> str:
    return f"{k} {word}{'' if k == 1 else 's'}"


def _tolerance(o: dict) -> tuple[str | None, str | None]:
    """(SHA-256 of the policy file's bytes or None where run.json predates it, the file or None)."""
    t = o.get("tolerance") if isinstance(o.get("tolerance"), dict) else {}
    return o.get("tolerance_digest"), o.get("tolerance_file") or t.get("file")


def _targets(r: Run, names: set) -> str:
    gone = r.info.get("unavailable_targets") or {}
    return (", ".join(sorted(map(str, names))) or "none") + (
        " (unavailable: " + "; ".join(f"{k}: {v}" for k, v in gone.items()) + ")" if gone else "")


def _versions(r: Run, target: str) -> dict:
    return ((r.info.get("targets") or {}).get(target) or {}).get("versions") or {}


#: what a device says of itself (targets/device_runner.py, device_facts): the "devices" difference, not a version
_DEVICE_FACTS = frozenset({"device", "hostname", "machine", "python", "cpus", "os", "build", "soc", "soc_family", "model",
                           "numpy", "emulated", "emulator", "emulated_cpu", "probe_error"})
#: this host's tools that build the models a device runs (a device run does not record them)
_HOST_TOOLS = frozenset({"onnx", "opset"})


def _runtime_versions(v: dict) -> dict:
    """A target's versions on a device read as on this host, to compare a host run with a device run:
    the device's own facts left out, ``litert: "ai-edge-litert 2.3.0"`` read as ``ai-edge-litert: 2.3.0``."""
    out = {}
    for k, val in v.items():
        if k in _DEVICE_FACTS:
            continue
        if k == "litert" and " " in str(val):
            k, val = str(val).split(" ", 1)
        out[k] = val
    return out


def setup_differences(b: Run, n: Run, base: dict[tuple, dict], new: dict[tuple, dict]) -> tuple[list[Difference], list[str]]:
    """How the set-ups of baseline ``b`` and run ``n`` differ (``base``/``new``: their rows by
    (case id, target, device)), and notes on what could not be checked or may mislead."""
    out: list[Difference] = []
    notes: list[str] = []
    bo, no = b.info["options"], n.info["options"]

    def same(fld: str, what: str, x, y) -> None:
        if x != y:
            out.append(Difference(fld, what, str(x), str(y)))

    same("seed", "seed", bo.get("seed"), no.get("seed"))
    same("cases", "cases per op", bo.get("cases_per_op"), no.get("cases_per_op"))
    bc = {r.get("case_id"): r.get("case_digest") for r in base.values()}
    nc = {r.get("case_id"): r.get("case_digest") for r in new.values()}
    only_b, only_n = sorted(bc.keys() - nc.keys(), key=str), sorted(nc.keys() - bc.keys(), key=str)
    if only_b or only_n:
        out.append(Difference("cases", "case ids", f"{len(bc)} case ids, {len(only_b)} only here: {_few(only_b)}",
                              f"{len(nc)} case ids, {len(only_n)} only here: {_few(only_n)}"))
    other = sorted((c for c in bc.keys() & nc.keys() if bc[c] != nc[c]), key=str)
    if other:
        out.append(Difference("cases", "case content: the same id with another case_digest",
                              f"{len(other)} of {len(bc.keys() & nc.keys())} common ids differ: "
                              + _few((f"{c} {bc[c]}" for c in other), 3), _few((f"{c} {nc[c]}" for c in other), 3)))
    same("ops", "ops", ", ".join(sorted({str(r.get("op")) for r in base.values()})),
         ", ".join(sorted({str(r.get("op")) for r in new.values()})))
    bt, nt = {r.get("target") for r in base.values()}, {r.get("target") for r in new.values()}
    if bt != nt:
        out.append(Difference("targets", "targets", _targets(b, bt), _targets(n, nt)))
    both = sorted(bt & nt, key=str)
    bdev, ndev = defaultdict(set), defaultdict(set)
    for rows, devs in ((base, bdev), (new, ndev)):
        for t, dev in {(k[1], k[2]) for k in rows}:
            devs[t].add(dev or "local")
    odd = [t for t in both if bdev[t] != ndev[t]]
    if odd:
        out.append(Difference("devices", "devices per target", "; ".join(f"{t}: {', '.join(sorted(bdev[t]))}" for t in odd),
                              "; ".join(f"{t}: {', '.join(sorted(ndev[t]))}" for t in odd)))

    (bd, bf), (nd, nf) = _tolerance(bo), _tolerance(no)
    if bd and nd:
        if bd != nd:
            out.append(Difference("tolerance", "tolerance policy: SHA-256 of the file", f"{bd[:16]} ({bf or 'built-in default'})",
                                  f"{nd[:16]} ({nf or 'built-in default'})"))
    else:
        lacking = " and the ".join(w for w, x in (("baseline's", bd), ("run's", nd)) if not x)
        notes.append(f"tolerance policy compared by file name: the {lacking} run.json "
                     f"{'have' if not (bd or nd) else 'has'} no options.tolerance_digest "
                     "(an edited file under the same name shows only where a result's tolerance_lsb changed)")
        if bf != nf:
            out.append(Difference("tolerance", "tolerance file", bf or "built-in default", nf or "built-in default"))
    # the tolerance each result was judged with, whatever run.json says
    moved = [(bb, nn) for k, nn in new.items() if (bb := base.get(k)) is not None
             and bb.get("case_digest") == nn.get("case_digest")
             and None not in (_num(bb.get("tolerance_lsb")), _num(nn.get("tolerance_lsb")))
             and _num(bb.get("tolerance_lsb")) != _num(nn.get("tolerance_lsb"))]
    if moved:
        out.append(Difference("tolerance", "tolerance_lsb of the same results",
                              f"{_plural(len(moved), 'result')}, " + _few(f"{_label(x)} {_num(x['tolerance_lsb']):g} LSB" for x, _ in moved),
                              _few(f"{_label(y)} {_num(y['tolerance_lsb']):g} LSB" for _, y in moved)))
    same("scheme", "scheme", bo.get("scheme"), no.get("scheme"))
    vb, vn = [], []
    for t in both:
        x, y = _versions(b, t), _versions(n, t)
        if t in odd:   # another device: the runtimes' releases, not the device facts ("devices" says those)
            x, y = _runtime_versions(x), _runtime_versions(y)
        for comp in sorted(x.keys() | y.keys()):
            if t in odd and comp in _HOST_TOOLS and (comp not in x or comp not in y):
                continue
            if x.get(comp) != y.get(comp):
                vb.append(f"{t} {comp} {x.get(comp) or '(none)'}")
                vn.append(f"{t} {comp} {y.get(comp) or '(none)'}")
    if vb:   # an upgrade night is the one that most needs a diff: compared, the upgrade heading it
        out.append(Difference("versions", "runtime versions (an upgrade: compared)", "; ".join(vb), "; ".join(vn),
                              allowed=True))
        notes.append("runtime upgrade: " + "; ".join(f"{x} -> {y.rsplit(' ', 1)[-1]}" for x, y in zip(vb, vn)))

    for r, who in ((b, "baseline"), (n, "run")):
        if r.info.get("interrupted") or not r.info.get("finished"):
            notes.append(f"the {who} did not finish ({'interrupted' if r.info.get('interrupted') else 'run.json has no finish time'})")
        if r.info["options"].get("filtered"):
            notes.append(f"the {who} was filtered (-k, --lf, a deselection): it holds part of its cases")
    return out, notes


#: what decides a latency besides the kernel: the host's (local targets) or the device's own facts
_HOST_FACTS = ("machine", "cpu_model", "cpu_count", "isa")
_TIMING_FACTS = ("machine", "cpus", "soc", "soc_family", "model", "emulated", "emulated_cpu")


def device_facts(r: Run, target: str, device: str) -> dict:
    """The facts a latency of ``target`` (on ``device``, "" for this host) depends on, from run.json."""
    if not device:
        host = r.info.get("host") or {}
        return {k: host.get(k) for k in _HOST_FACTS}
    v = _versions(r, target)
    return {k: v.get(k) for k in _TIMING_FACTS}


@dataclass
class Diff:
    baseline: str
    run: str
    run_folder: str = ""                                  # the run's folder, resolved
    setup: list[Difference] = field(default_factory=list)  # set-up differences, allowed or not
    notes: list[str] = field(default_factory=list)
    cases: list[dict] = field(default_factory=list)      # one entry per regressed case
    still: list[dict] = field(default_factory=list)      # failing in both, no known finding explains it now
    groups: list[dict] = field(default_factory=list)     # one entry per regressed (op, target)
    improved: list[dict] = field(default_factory=list)
    findings: list[dict] = field(default_factory=list)   # failures a known finding explains now, not before
    changed: list[str] = field(default_factory=list)     # same id, other content: not compared
    missing: list[str] = field(default_factory=list)
    new: int = 0
    compared: int = 0
    no_common: str | None = None                         # why nothing was compared
    latency_threshold_pct: float = 20.0
    latency_min_us: float = 5.0
    latency_p: float = 0.05
    latency_gate: bool = False                           # latency changes gate (else listed only)
    latency: list[dict] = field(default_factory=list)    # (op, target)s significantly slower or faster
    verdicts: dict[str, list[dict]] = field(default_factory=dict)   # group verdicts: new, fixed, still, known
    allow_missing: bool = False
    cross: list[dict] = field(default_factory=list)      # runs on two devices: outputs that differ bit-wise

    @property
    def refused(self) -> str | None:
        """Why the runs do not compare (None: they do)."""
        bad = list(dict.fromkeys(x.field for x in self.setup if not x.allowed))
        if bad:
            return ", ".join(bad) + (" differs" if len(bad) == 1 else " differ")
        if not self.compared:
            return self.no_common or "no result compared"
        return None

    @property
    def slower(self) -> list[dict]:
        return [x for x in self.latency if x["latency"] == "slower"]

    @property
    def regressed(self) -> bool:
        return bool(self.cases or self.groups or (self.missing and not self.allow_missing)
                    or (self.latency_gate and self.slower) or self.verdicts.get("new"))

    @property
    def exit_status(self) -> int:
        return 2 if self.refused else 1 if self.regressed else 0

    def verdict(self) -> str:
        if self.refused:
            return f"NOT COMPARABLE: {self.refused}"
        if not self.regressed:
            return f"NO REGRESSION ({_plural(self.compared, 'result')} compared)"
        k = sum(1 for c in self.cases if c["new_failure"])
        parts = [_plural(k, "new failure")]
        nv = self.verdicts.get("new") or []
        if nv:   # what a case count hides (a biased kernel passes case by case), named first
            parts.insert(0, f"new group verdict{'s' if len(nv) > 1 else ''}: " + _few((v["label"] for v in nv), 3))
        if len(self.cases) > k:
            parts.append(f"{_plural(len(self.cases) - k, 'other regressed case')}")
        if self.groups:
            parts.append(_plural(len(self.groups), "regressed op/target group"))
        if self.latency_gate and self.slower:
            parts.append(f"{_plural(len(self.slower), 'op/target group')} slower (--latency-gate)")
        if self.missing and not self.allow_missing:
            parts.append(f"{len(self.missing)} missing")
        head = f"{parts.pop(0)}; " if nv else ""
        return f"REGRESSED: {head}{', '.join(parts)} ({_plural(self.compared, 'result')} compared)"

    def as_dict(self) -> dict[str, Any]:
        return {"format": "qconform-diff/2", "baseline": self.baseline, "run": self.run,
                "verdict": self.verdict(), "exit_status": self.exit_status, "not_comparable": self.refused,
                "setup_differences": [asdict(x) for x in self.setup], "notes": self.notes,
                "regressed": self.regressed, "compared": self.compared, "new_in_run": self.new,
                "latency_threshold_pct": self.latency_threshold_pct, "latency_min_us": self.latency_min_us,
                "latency_p": self.latency_p, "latency_gate": self.latency_gate, "latency_changes": self.latency,
                "case_regressions": self.cases, "group_regressions": self.groups, "group_verdicts": self.verdicts,
                "improvements": self.improved, "new_known_findings": self.findings, "still_failing": self.still,
                "changed_cases": self.changed, "missing": self.missing, "cross_devices": self.cross}


def diff_runs(baseline: str | Path, run: str | Path, latency_threshold_pct: float = 20.0,
              allow_missing: bool = False, allow_different=(), *, latency_min_us: float = 5.0,
              latency_p: float = 0.05, latency_gate: bool = False, latency=None) -> Diff:
    """The diff of ``run`` against ``baseline``; ``allow_different``: names of :data:`FIELDS`
    whose difference is reported, not refused. ``Diff.exit_status`` is the verdict. ``latency``:
    reports.latency.latency_change (None: latencies not compared, as a run's own report does
    without importing scipy); latency changes gate only with ``latency_gate``."""
    for f in allow_different:
        if f not in FIELDS:
            raise QconformError(f"unknown field {f!r}", field="--allow-different", rule=f"one of {', '.join(FIELDS)}")
    rb, rn = open_run(baseline, "BASELINE_DIR"), open_run(run, "RUN_DIR")
    base, new = {row_key(r): r for r in rb.rows}, {row_key(r): r for r in rn.rows}
    d = Diff(rb.name, rn.name, str(rn.folder), latency_threshold_pct=latency_threshold_pct, allow_missing=allow_missing,
             latency_min_us=latency_min_us, latency_p=latency_p, latency_gate=latency_gate)
    d.setup, d.notes = setup_differences(rb, rn, base, new)
    for x in d.setup:
        x.allowed = x.allowed or x.field in allow_different
    if any(not x.allowed for x in d.setup):
        return d
    if any(x.field == "devices" for x in d.setup) and _one_device_each(base) and _one_device_each(new):
        cross = CrossDevice()
        for rows, side in ((base, "baseline"), (new, "run")):
            for r in rows.values():
                cross.add(r, f"{r.get('device') or 'this host'} ({side})")
        d.cross = cross.table()
        d.notes.append("results matched across devices by (case id, target): the run's device against the "
                       "baseline's")
        base = {(k[0], k[1], None): r for k, r in base.items()}
        new = {(k[0], k[1], None): r for k, r in new.items()}
    d.new = sum(1 for k in new if k not in base)
    run_cases = {k[0] for k in new}
    run_places = {(k[1], k[2]) for k in new}
    pairs: dict[tuple[str, str, str], list[tuple[dict, dict]]] = defaultdict(list)
    for k, b in base.items():
        n = new.get(k)
        if n is None:
            # a case, target or device the run does not have at all is a set-up difference, listed above
            if k[0] in run_cases and (k[1], k[2]) in run_places:
                d.missing.append(_label(b))
            continue
        if b.get("case_digest") != n.get("case_digest"):
            d.changed.append(_label(b))
            continue
        d.compared += 1
        pairs[(b.get("op"), b.get("target"), b.get("device") or "")].append((b, n))
        kinds, better = [], []
        bs, ns = b.get("status"), n.get("status")
        bf, nf = b.get("finding"), n.get("finding")
        new_failure = False
        if ns in BAD and bs not in BAD and not nf:   # (explained by a finding now: listed below, not red)
            kinds.append(f"now failing ({bs} -> {ns})")
            new_failure = True
        elif ns in BAD and bs in BAD and bf and not nf:
            kinds.append(f"no longer explained by known finding {bf} ({bs} -> {ns})")
            new_failure = True
        elif bs in BAD and ns not in BAD and ns != UNSUPPORTED:
            better.append(f"fixed ({bs} -> {ns})")
        if ns in BAD and bs in BAD and not nf and not new_failure:
            d.still.append({"case": n.get("case_id"), "op": n.get("op"), "target": n.get("target"),
                            "device": n.get("device"), "status_before": bs, "status_now": ns,
                            "repro": case_repro(rn.info, n)})
        if ns == UNSUPPORTED and bs != UNSUPPORTED:
            kinds.append(f"now unsupported ({n.get('reason', '')})")
        bm, nm = _num(b.get("mismatches")), _num(n.get("mismatches"))
        # a failure a known finding explains is judged by the finding, not by its size: a runtime
        # with a nondeterministic bug (TFLM's SPACE_TO_BATCH_ND padding) would make every night red
        if nf:
            bm = nm = None
        if bm is not None and nm is not None:
            if nm > bm:
                kinds.append(f"more mismatches ({bm:g} -> {nm:g} of {_num(n.get('elements')) or 0:g})")
            elif nm < bm:
                better.append(f"fewer mismatches ({bm:g} -> {nm:g})")
        be, ne = _num(b.get("max_abs_lsb")), _num(n.get("max_abs_lsb"))
        if be is not None and ne is not None and ne > be and not nf:
            kinds.append(f"max err grew ({be:g} -> {ne:g} LSB)")
        entry = {"case": n.get("case_id"), "op": n.get("op"), "target": n.get("target"),
                 "device": n.get("device"), "status_before": bs, "status_now": ns}
        if nf and nf != bf:
            d.findings.append({**entry, "finding": nf, "finding_before": bf})
        if kinds:
            d.cases.append({**entry, "new_failure": new_failure, "what": kinds, "repro": case_repro(rn.info, n)})
        elif better:
            d.improved.append({**entry, "what": better})
    if not d.compared:
        common = len(base.keys() & new.keys())
        d.no_common = ("no common results: no (case id, target, device) is in both runs" if not common else
                       f"no common results: the {common} (case id, target, device) in both runs all hold "
                       "other case content (case_digest)")
        return d
    emulated_pairs = other_scope = 0
    other_facts: set[tuple] = set()
    timed_targets: set[str] = set()   # targets with a case timed in both runs, and those with a group of none
    untimed: set[str] = set()
    for (op, target, device), all_ps in pairs.items():
        kinds = []
        real = [(b, n) for b, n in all_ps if not (emulated(b) or emulated(n))]   # emulated latencies: never compared
        emulated_pairs += len(all_ps) - len(real)
        # the group's accuracy over the cases no known finding explains in either run (as per case)
        ps = [(b, n) for b, n in all_ps if not (b.get("finding") or n.get("finding"))]
        be = sum(int(_num(b.get("elements")) or 0) for b, n in ps if _num(b.get("elements")) and _num(n.get("elements")))
        bm = sum(int(_num(b.get("mismatches")) or 0) for b, n in ps if _num(b.get("elements")) and _num(n.get("elements")))
        ne = sum(int(_num(n.get("elements")) or 0) for b, n in ps if _num(b.get("elements")) and _num(n.get("elements")))
        nm = sum(int(_num(n.get("mismatches")) or 0) for b, n in ps if _num(b.get("elements")) and _num(n.get("elements")))
        entry: dict[str, Any] = {"op": op, "target": target, "device": device or None, "cases": len(all_ps)}
        if be and ne:
            bp, np_ = 100.0 * (be - bm) / be, 100.0 * (ne - nm) / ne
            entry.update(bit_exact_pct_before=round(bp, 3), bit_exact_pct_now=round(np_, 3))
            if np_ < bp:
                kinds.append(f"bit-exact % dropped ({bp:.3f} -> {np_:.3f})")
        bmax = [x for x in (_num(b.get("max_abs_lsb")) for b, _ in ps) if x is not None]
        nmax = [x for x in (_num(n.get("max_abs_lsb")) for _, n in ps) if x is not None]
        if bmax and nmax and max(nmax) > max(bmax):
            kinds.append(f"max |err| grew ({max(bmax):g} -> {max(nmax):g} LSB)")
        both = [(b, n, b50, n50) for b, n in real
                if (b50 := _num(b.get("p50_us"))) is not None and (n50 := _num(n.get("p50_us"))) is not None]
        timed = [(b50, n50) for b, n, b50, n50 in both
                 if b.get("latency_scope") == n.get("latency_scope")]   # (a case alone vs its nodes in a batch)
        other_scope += len(both) - len(timed)
        if real:
            (timed_targets if both else untimed).add(target)
        if timed and latency is not None:
            if device_facts(rb, target, device) != device_facts(rn, target, device):
                other_facts.add((target, device))
            else:
                lat = latency([x for x, _ in timed], [y for _, y in timed], latency_threshold_pct,
                                     latency_min_us, latency_p)
                # the spread the runs recorded: the median per-case standard deviation of the timed repeats
                for side, rows in (("before", [b for b, _ in real]), ("now", [n for _, n in real])):
                    sp = [x for r in rows if (x := _num(r.get("spread_us"))) is not None
                          and (_num(r.get("latency_n")) or 2) >= 2]   # (one sample has no spread)
                    lat[f"spread_us_{side}"] = round(statistics.median(sp), 3) if sp else None
                entry.update(lat)
                if lat["latency"] != "same":
                    d.latency.append(dict(entry))
        if kinds:
            d.groups.append({**entry, "what": kinds})
    bv, nv = read_group_verdicts(rb.folder), read_group_verdicts(rn.folder)
    if nv is None:   # no "no regression" while a verdict of the run is unknown
        raise QconformError("no summary.csv, or a run whose groups were not judged (it did not finish): the run's "
                            "group verdicts (bias, declared scheme) are unknown",
                            source=str(rn.folder), field="RUN_DIR", rule="`qconform report RUN_DIR` writes it")
    if bv is None:
        d.notes.append("no group verdicts in the baseline (no summary.csv, or it did not finish): the run's failing "
                       "ones count as new")
    d.verdicts = compare_verdicts(bv, nv, {(k[0], k[1]) for k in pairs})
    if other_facts:
        t, dev = sorted(other_facts)[0]
        d.notes.append(f"latencies not compared on {_plural(len(other_facts), 'target')} whose device facts differ "
                       f"(e.g. {t}{'@' + dev if dev else ''}: baseline {device_facts(rb, t, dev)}; "
                       f"run {device_facts(rn, t, dev)})")
    untimed -= timed_targets
    if untimed and latency_gate:   # gated, and nothing of these timed in both runs: named
        d.notes.append(f"--latency-gate: no latency compared on {', '.join(sorted(untimed))}: no case of theirs has "
                       "one in both runs (latency_scope batch: a simulator's or reference model's time is no "
                       "device's, or a batch not timed case by case)")
    if other_scope:
        d.notes.append(f"latencies not compared for {_plural(other_scope, 'result')} timed another way in each run "
                       "(latency_scope: a case alone, its nodes in a batch)")
    if emulated_pairs:
        d.notes.append(f"latencies not compared for {_plural(emulated_pairs, 'result')} on an emulated device "
                       "(the emulator's time, not the board's)")
    d.cases.sort(key=lambda c: (not c["new_failure"], c["op"] or "", c["target"] or "", c["case"] or ""))
    return d


def latency_text(g: dict) -> str:
    """"latency +19.4% (14.39 -> 17.18 us, median of 3 cases' p50; spread 8.10 / 7.30 us; U test p 0.05)"."""
    b, n = g["p50_us_before"], g["p50_us_now"]
    pct = f"{100.0 * (n - b) / b:+.1f}%" if b else "n/a"

    def us(x):
        return "n/a" if x is None else f"{x:.2f}"
    p = g.get("latency_p")
    return (f"latency {pct} ({b:.2f} -> {n:.2f} us, median of {g['latency_cases']} cases' p50; spread "
            f"{us(g.get('spread_us_before'))} / {us(g.get('spread_us_now'))} us; U test p {'n/a' if p is None else f'{p:.2g}'})")


_VERDICT_HEADS = (("new", "new group verdicts"), ("fixed", "fixed group verdicts"),
                  ("still", "still-failing group verdicts"))


def _verdict_lines(d: Diff, indent: str) -> list[str]:
    """The group verdicts (bias, declared scheme, certification): new, fixed, still failing."""
    L = []
    for key, head in _VERDICT_HEADS:
        vs = d.verdicts.get(key) or []
        if vs:
            L += ["", f"{head} ({len(vs)}):"]
            L += [f"{indent}{v['label']}: {v['text']}" + (f" (now: {v['now']})" if key == "fixed" else "") for v in vs]
    return L


def _one_device_each(rows: dict[tuple, dict]) -> bool:
    """Whether every target of the run ran on one device (then two runs compare device against device)."""
    devs: dict[Any, set] = defaultdict(set)
    for k in rows:
        devs[k[1]].add(k[2])
    return all(len(v) == 1 for v in devs.values())


def _cross_text(d: Diff) -> list[str]:
    rows = [r for r in d.cross if r["differ"] or r["status_differs"]]
    if not d.cross:
        return []
    L = ["", f"outputs that differ bit-wise between the devices ({len(rows)} of {len(d.cross)} (op, target)s):"]
    L += [f"  {r['op']:<20} {r['target']:<12} {r['differ']}/{r['compared']} differ, {r['status_differs']} other status"
          + (f"; worst {r['worst_case']}: {r['worst_delta_lsb']} LSB apart (max |err| {r['worst_max_err_lsb']})"
             if r["worst_case"] else "") for r in rows]
    return L


def _setup_lines(d: Diff) -> list[str]:
    """What heads a report after the verdict: the set-up differences and the notes."""
    L = []
    if d.setup:
        allowed = sorted({x.field for x in d.setup if x.allowed} - {"versions"})   # (an upgrade: always compared)
        L.append("set-up differs" + (f" (compared anyway: --allow-different {', '.join(allowed)})" if allowed else "") + ":")
        L += [f"  {x}" + (" [allowed]" if x.allowed else " [refused]") for x in d.setup]
        refused = list(dict.fromkeys(x.field for x in d.setup if not x.allowed))
        if refused:
            L.append("a result compared across another set-up can pass or fail for that reason alone; to compare anyway: "
                     + " ".join(f"--allow-different {f}" for f in refused))
    L += [f"note: {n}" for n in d.notes]
    return L


def to_text(d: Diff) -> str:
    L = [d.verdict(), *_setup_lines(d), f"baseline {d.baseline}", f"run      {d.run}"]
    if d.setup and any(not x.allowed for x in d.setup):
        return "\n".join(L) + "\n"
    L.append(f"{d.compared} results compared, {d.new} new in run, {len(d.missing)} missing, "
             f"{len(d.changed)} changed content (not compared)")
    if d.cases:
        L += ["", f"regressed cases ({len(d.cases)}):"]
        for c in d.cases:
            L.append(f"  {c['case']}:{c['target']}  " + "; ".join(c["what"]))
            if c.get("repro"):
                L.append(f"      reproduce: {c['repro']}")
    L += _verdict_lines(d, "  ")
    if d.groups:
        L += ["", "regressions per op and target:"]
        for g in d.groups:
            L.append(f"  {g['op']:<20} {g['target']:<16} " + "; ".join(g["what"]))
    if d.latency:
        gate = "gating: --latency-gate" if d.latency_gate else "listed, not gating (--latency-gate gates)"
        L += ["", f"latency changes beyond {d.latency_threshold_pct:g}% and {d.latency_min_us:g} us, "
                  f"U test p < {d.latency_p:g} ({gate}):"]
        L += [f"  {g['op']:<20} {g['target']:<16} {g['latency']}: {latency_text(g)}" for g in d.latency]
    if d.missing:
        L += ["", f"missing from the run ({len(d.missing)}){' [allowed]' if d.allow_missing else ''}:"]
        L += [f"  {m}" for m in d.missing[:50]] + ([f"  ... {len(d.missing) - 50} more"] if len(d.missing) > 50 else [])
    if d.changed:
        L += ["", f"changed case content, not compared ({len(d.changed)}): {_few(d.changed, 10)}"]
    if d.findings:
        L += ["", f"new known findings ({len(d.findings)}):"]
        L += [f"  {c['case']}:{c['target']}  {c['finding']} ({c['status_before']} -> {c['status_now']}"
              + (f", was {c['finding_before']})" if c["finding_before"] else ")") for c in d.findings[:50]]
    if d.improved:
        L += ["", f"improved ({len(d.improved)}):"]
        L += [f"  {c['case']}:{c['target']}  " + "; ".join(c["what"]) for c in d.improved[:50]]
    L += _cross_text(d)
    if not d.refused:
        L += ["", d.verdict()]
    return "\n".join(L) + "\n"


def to_markdown(d: Diff) -> str:
    def esc(s: Any) -> str:
        return str(s if s is not None else "").replace("|", "\\|")
    icon = "⛔" if d.refused else "❌" if d.regressed else "✅"
    L = [f"### {icon} {d.verdict()}", ""]
    if d.setup:
        allowed = sorted({x.field for x in d.setup if x.allowed} - {"versions"})   # (an upgrade: always compared)
        L.append("**Set-up differs**" + (f" (allowed: `--allow-different {', '.join(allowed)}`)" if allowed else "") + ":")
        L += [f"- {esc(x)}" + (" (allowed)" if x.allowed else " (**refused**)") for x in d.setup]
        L.append("")
    L += [f"- note: {esc(n)}" for n in d.notes] + ([""] if d.notes else [])
    L += [f"qconform diff: baseline `{esc(d.baseline)}`, run `{esc(d.run)}`", ""]
    if d.setup and any(not x.allowed for x in d.setup):
        return "\n".join(L)
    L += [(f"{d.compared} results compared; {len(d.cases)} cases regressed; {len(d.groups)} op/target groups "
           f"regressed; {len(d.missing)} missing; {len(d.findings)} new known findings; {len(d.improved)} improved."), ""]
    if d.cases:
        L += ["| case | target | regression | reproduce |", "|---|---|---|---|"]
        L += [f"| `{esc(c['case'])}` | {esc(c['target'])} | {esc('; '.join(c['what']))} | "
              f"{('`' + esc(c['repro']) + '`') if c.get('repro') else ''} |" for c in d.cases]
        L.append("")
    for key, head in _VERDICT_HEADS:
        vs = d.verdicts.get(key) or []
        if vs:
            L += [f"**{head[0].upper() + head[1:]}** ({len(vs)}):", ""]
            L += [f"- {esc(v['label'])}: {esc(v['text'])}" for v in vs]
            L.append("")
    if d.groups:
        L += ["| op | target | regression |", "|---|---|---|"]
        L += [f"| {esc(g['op'])} | {esc(g['target'])} | {esc('; '.join(g['what']))} |" for g in d.groups]
        L.append("")
    if d.latency:
        L += [f"Latency changes ({'gating' if d.latency_gate else 'listed, not gating'}):", "",
              "| op | target | change |", "|---|---|---|"]
        L += [f"| {esc(g['op'])} | {esc(g['target'])} | {g['latency']}: {esc(latency_text(g))} |" for g in d.latency]
        L.append("")
    if d.missing:
        L += [f"Missing from the run{' (allowed)' if d.allow_missing else ''}: "
              + ", ".join(f"`{m}`" for m in d.missing[:30]) + (" ..." if len(d.missing) > 30 else ""), ""]
    if d.changed:
        L += [f"Changed case content, not compared ({len(d.changed)}): " + esc(_few(d.changed, 10)), ""]
    if d.findings:
        L += [f"New known findings ({len(d.findings)}): "
              + ", ".join(f"`{esc(c['case'])}:{esc(c['target'])}` {esc(c['finding'])}" for c in d.findings[:30]), ""]
    if d.cross:
        L += ["Outputs that differ bit-wise between the devices:", "",
              "| " + " | ".join(CROSS_COLUMNS) + " |", "|" + "---|" * len(CROSS_COLUMNS)]
        L += ["| " + " | ".join(esc(r[c]) for c in CROSS_COLUMNS) + " |" for r in d.cross]
        L.append("")
    return "\n".join(L)


def write_csv(d: Diff, path: str | Path) -> Path:
    """diff.csv (atomically): one line per set-up difference, per regressed (op, target) and per
    regressed or missing case."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["level", "op", "target", "device", "case", "regression"])
    for x in d.setup:
        w.writerow(["setup", "", "", "", "", f"{x} [{'allowed' if x.allowed else 'refused'}]"])
    for g in d.groups:
        w.writerow(["op", g["op"], g["target"], g.get("device") or "", "", "; ".join(g["what"])])
    for key, _ in _VERDICT_HEADS:
        for v in d.verdicts.get(key) or []:
            w.writerow([f"group verdict {key}", v["op"], v["target"], v.get("device") or "", "", f"{v['kind']}: {v['text']}"])
    for g in d.latency:
        w.writerow(["latency", g["op"], g["target"], g.get("device") or "", "", f"{g['latency']}: {latency_text(g)}"])
    for c in d.cases:
        w.writerow(["case", c["op"], c["target"], c.get("device") or "", c["case"], "; ".join(c["what"])])
    if not d.allow_missing:
        for m in d.missing:
            w.writerow(["case", "", "", "", m, "missing"])
    return write_atomic(path, out.getvalue())
