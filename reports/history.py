"""``qconform history REPORT_DIR``: every run folder under a report directory, run by run.

It reads each run's results.jsonl (through reports.results, whose reader checks the rows), or
the few columns it needs of results.parquet when that is at least as new (pyarrow; much faster),
and run.json (a regular file, size-bounded), nothing else. Runs are grouped by **case set**: the set of
(case id, case digest) they ran (seed, ops, cases per op, case files, model all change it); runs of
another case set are a series of their own, never mixed. Within a series, oldest first (run.json's
``started``, then the time run.json was last written):

* per (case, target, device), its state run by run: ``pass``, ``fail`` (failing, no known finding
  explains it: fail, error, crash, timeout, infra), ``known`` (failing under a known finding),
  ``waived``, ``unsupported``, ``-`` (not in that run);
* per **group verdict** (an (op, target) judged whole: bias, declared scheme, certification;
  reports/groups.py reads them from the run's summary.csv and certificate.json), its state run by
  run: ``fail``, ``known``, ``pass`` (the run judged its groups and this one was not bad), ``-``;
* per run its **build**: the suite's commit (and whether dirty), its version and every target's
  runtime versions (run.json), and its exit status; a run whose build differs from the run
  before it is marked as a build change, with what changed;
* **failing since**: the first run of its current failing streak (``fail`` up to the newest run),
  for cases and group verdicts alike, with the build change it began at, if it began at one;
* **flaky**: at least two flips between passing and failing within the last ``last`` runs,
  counting only flips between two runs of the same build (a verdict that changes with the build is
  the build's, not flaky: shown as such);
* per run: new failures (failing there, not in the run before) and the pass rate (passed of the
  results that ran: not unsupported), drawn as a small SVG (reports/plots.py trend_svg).
"""

from __future__ import annotations

import base64
import csv
import functools
import hashlib
import html as _html
import io
import json
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reports.groups import CERTIFIED, label, read_group_verdicts
from reports.plots import trend_svg
from reports.parquet import PARQUET
from reports.results import MAX_ROWS, RESULTS, iter_rows, open_results
from reports.runinfo import RUN_JSON, load_run_json
from suite.core.errors import QconformError
from suite.core.verdict import ERRORS, Status

_BAD = frozenset({Status.FAIL.value} | {s.value for s in ERRORS})
LAST = 10   # runs a flaky case is looked for in


def state(row: dict) -> str:
    s = row.get("status")
    if s in _BAD:
        return "known" if row.get("finding") else "fail"
    return s if s in ("pass", "waived", "unsupported") else "fail"   # (an unknown status counts as failing)


@dataclass
class RunPoint:
    run_id: str
    folder: Path
    started: str
    order: tuple                              # (started, run.json's mtime): runs started in one second apart
    states: dict[tuple, str]                  # (case id, target, device) -> state
    info: dict
    groups: dict[tuple, str] | None = None    # (op, target, device, kind) -> fail / known; None: not judged
    group_text: dict[tuple, str] = field(default_factory=dict)   # its label ("bias on ADD/x (+0.3 LSB)")

    @functools.cached_property   # (asked per run for every case a series holds: Series.flaky)
    def build(self) -> str:
        """The build the run tested: the suite's commit (dirty or not), its version and each target's
        runtime versions, as one comparable text."""
        return build_key(self.info)

    @property
    def exit_status(self):
        return self.info.get("exit_status")

    def group_state(self, key: tuple) -> str:
        if self.groups is None:
            return "-"
        return self.groups.get(key, "pass")

    @property
    def pass_pct(self) -> float | None:
        ran = [s for s in self.states.values() if s != "unsupported"]
        return round(100.0 * sum(s == "pass" for s in ran) / len(ran), 3) if ran else None


@dataclass
class Series:
    """The runs of one case set, oldest first."""

    digest: str
    runs: list[RunPoint] = field(default_factory=list)

    def describe(self) -> str:
        o = (self.runs[-1].info.get("options") or {}) if self.runs else {}
        ops = o.get("ops")
        return (f"case set {self.digest[:12]}: seed {o.get('seed')}, {o.get('cases_per_op')} cases per op, "
                f"ops {', '.join(ops) if ops else 'all'}"
                + (f", case files {', '.join(map(str, o['case_files']))}" if o.get("case_files") else "")
                + (f", model {o['model']}" if o.get("model") else ""))

    def keys(self) -> list[tuple]:
        seen: dict[tuple, None] = {}
        for r in self.runs:
            seen.update(dict.fromkeys(r.states))
        return list(seen)

    def row(self, key: tuple) -> list[str]:
        return [r.states.get(key, "-") for r in self.runs]

    def group_keys(self) -> list[tuple]:
        seen: dict[tuple, None] = {}
        for r in self.runs:
            seen.update(dict.fromkeys(r.groups or ()))
        return list(seen)

    def group_row(self, key: tuple) -> list[str]:
        return [r.group_state(key) for r in self.runs]

    def new_failures(self) -> list[int]:
        """Per run: its cases and group verdicts failing there, not in the run before."""
        out, before, gbefore = [], {}, {}
        for r in self.runs:
            g = r.groups or {}
            out.append(sum(1 for k, s in r.states.items() if s == "fail" and before.get(k) != "fail")
                       + sum(1 for k, s in g.items() if s == "fail" and gbefore.get(k) != "fail"))
            before, gbefore = r.states, g
        return out

    def build_changes(self) -> list[str | None]:
        """Per run: what changed in the build since the run before (None: the same build, or the first run)."""
        out: list[str | None] = [None]
        for a, b in zip(self.runs, self.runs[1:]):
            out.append(None if a.build == b.build else build_change(a.info, b.info))
        return out

    def _since(self, i: int) -> dict[str, Any]:
        change = self.build_changes()[i] if i > 0 else None
        return {"since": self.runs[i].run_id, "runs": len(self.runs) - i, "build_change": change,
                "commit": build_of(self.runs[i].info)["commit"]}

    def failing_since(self) -> list[dict[str, Any]]:
        """The cases failing in the newest run, each with the first run of its streak (and the build
        change it began at, if any)."""
        out = []
        newest = self.runs[-1]
        for key, s in newest.states.items():
            if s != "fail":
                continue
            i = len(self.runs) - 1
            while i > 0 and self.runs[i - 1].states.get(key) == "fail":
                i -= 1
            out.append({"case": key[0], "target": key[1], "device": key[2], **self._since(i),
                        "states": self.row(key)})
        return sorted(out, key=lambda x: (-x["runs"], str(x["case"]), str(x["target"])))

    def groups_failing_since(self) -> list[dict[str, Any]]:
        """The group verdicts (bias, declared scheme, certification) failing in the newest run, each
        with the first run of its streak."""
        out = []
        newest = self.runs[-1]
        for key, s in (newest.groups or {}).items():
            if s != "fail":
                continue
            i = len(self.runs) - 1
            while i > 0 and self.runs[i - 1].group_state(key) == "fail":
                i -= 1
            out.append({"op": key[0], "target": key[1], "device": key[2], "kind": key[3],
                        "label": newest.group_text.get(key) or f"{key[3]} on {key[0]}/{key[1]}", **self._since(i),
                        "states": self.group_row(key)})
        return sorted(out, key=lambda x: (-x["runs"], str(x["op"]), str(x["target"]), str(x["kind"])))

    def _flips(self, window: list[RunPoint], states: list[str]) -> tuple[int, int]:
        """(flips between two runs of one build, changes at a build change) of a state sequence."""
        seq = [(r.build, g == "pass") for r, g in zip(window, states) if g in ("pass", "fail", "known")]
        flips = sum(1 for (ba, a), (bb, b) in zip(seq, seq[1:]) if a != b and ba == bb)
        changes = sum(1 for (ba, a), (bb, b) in zip(seq, seq[1:]) if a != b and ba != bb)
        return flips, changes

    def flaky(self, last: int = LAST) -> list[dict[str, Any]]:
        """Cases and group verdicts whose state flipped between passing and failing at least twice in
        the last ``last`` runs between runs of the same build (commit and runtime versions)."""
        out = []
        window = self.runs[-last:]
        for key in self.keys():
            states = [r.states.get(key, "-") for r in window]
            flips, changes = self._flips(window, states)
            if flips >= 2:
                out.append({"case": key[0], "target": key[1], "device": key[2], "flips": flips,
                            "build_changes": changes, "states": states})
        for key in self.group_keys():
            states = [r.group_state(key) for r in window]
            flips, changes = self._flips(window, states)
            if flips >= 2:
                out.append({"case": f"{key[3]} on {key[0]}", "target": key[1], "device": key[2], "flips": flips,
                            "build_changes": changes, "states": states})
        return sorted(out, key=lambda x: (-x["flips"], str(x["case"]), str(x["target"])))


def build_of(info: dict) -> dict[str, Any]:
    """The build a run tested, from its run.json: commit, dirty, suite version, targets' versions."""
    git = info.get("git") if isinstance(info.get("git"), dict) else {}
    targets = info.get("targets") if isinstance(info.get("targets"), dict) else {}
    return {"commit": git.get("commit"), "dirty": git.get("dirty"), "suite": info.get("suite_version"),
            "versions": {str(t): (v or {}).get("versions") if isinstance(v, dict) else None
                         for t, v in sorted(targets.items())}}


def build_key(info: dict) -> str:
    return json.dumps(build_of(info), sort_keys=True, default=str)


def build_text(info: dict) -> str:
    """"3da495de3871 (dirty) ort onnxruntime=1.2 ..." for a run's line."""
    b = build_of(info)
    commit = str(b["commit"] or "no-commit")[:12] + (" (dirty)" if b["dirty"] else "")
    vers = []
    for t, v in b["versions"].items():
        if isinstance(v, dict):
            vers.append(f"{t} " + ",".join(f"{k}={x}" for k, x in sorted(v.items())))
    return commit + (" " + "; ".join(vers) if vers else "")


def build_change(before: dict, after: dict) -> str:
    """What changed between two runs' builds: "commit 3da495de -> 5e1f...; ort onnxruntime 1.0 -> 1.1"."""
    a, b = build_of(before), build_of(after)
    out = []
    if a["commit"] != b["commit"] or a["dirty"] != b["dirty"]:
        out.append(f"commit {str(a['commit'])[:12]}{'+dirty' if a['dirty'] else ''} -> "
                   f"{str(b['commit'])[:12]}{'+dirty' if b['dirty'] else ''}")
    if a["suite"] != b["suite"]:
        out.append(f"suite {a['suite']} -> {b['suite']}")
    for t in sorted(set(a["versions"]) | set(b["versions"])):
        va, vb = a["versions"].get(t) or {}, b["versions"].get(t) or {}
        if va == vb:
            continue
        if not isinstance(va, dict) or not isinstance(vb, dict):
            out.append(f"{t} {va} -> {vb}")
            continue
        for k in sorted(set(va) | set(vb)):
            if va.get(k) != vb.get(k):
                out.append(f"{t} {k} {va.get(k, '-')} -> {vb.get(k, '-')}")
    return "; ".join(out) or "build changed"


def _group_states(folder: Path) -> tuple[dict[tuple, str] | None, dict[tuple, str]]:
    """A run's group verdicts ((op, target, device, kind) -> fail / known; None: it has no
    summary.csv, its groups were not judged) and their labels."""
    verdicts = read_group_verdicts(folder)
    if verdicts is None:
        return None, {}
    states = {k: ("known" if v["known"] else "fail") for k, v in verdicts.items()
              if k != CERTIFIED and (v["failing"] or v["known"])}
    return states, {k: label(k, verdicts[k]) for k in states}


def _run_json(folder: Path) -> dict:
    if not (folder / RUN_JSON).is_file():
        raise QconformError("no run.json", source=str(folder), rule="a run folder holds run.json")
    return load_run_json(folder, options=False)


_COLUMNS = ("case_id", "target", "device", "status", "finding", "case_digest")
MAX_PARQUET = 1 << 30
#: what results.parquet's metadata may promise before a value is decoded: its rows (as many as a
#: results.jsonl may hold), its columns, and the bytes of each column chunk read (the string
#: columns are read as dictionaries, each bounded before its values are shared by the rows)
MAX_PARQUET_COLUMNS = 4096
MAX_CHUNK_BYTES = 256 << 20
_BATCH = 1 << 16


class _Distrusted(Exception):
    """results.parquet is not to be trusted after all (read results.jsonl)."""


def _parquet_rows(folder: Path):
    """The rows' few columns from results.parquet, a batch at a time: 30x faster than parsing
    results.jsonl. None (read results.jsonl) without pyarrow, or when the file is missing, older
    than results.jsonl (a resumed run appended since), a link, too large, or its metadata promises
    more rows, columns or decoded bytes than :data:`reports.results.MAX_ROWS`,
    :data:`MAX_PARQUET_COLUMNS`, :data:`MAX_CHUNK_BYTES` allow, or it lacks these columns; the
    iterator raises :class:`_Distrusted` for values that are not strings."""
    p, src = folder / PARQUET, folder / RESULTS
    try:
        st = p.lstat()
        if (not stat.S_ISREG(st.st_mode) or st.st_mtime_ns < src.lstat().st_mtime_ns or st.st_size > MAX_PARQUET):
            return None
        import pyarrow.parquet as pq   # optional (the report extra)
        f = pq.ParquetFile(open_results(p, MAX_PARQUET))   # (a regular file, not through a link)
        meta = f.metadata
        names = set(f.schema_arrow.names)
        if (meta.num_rows > MAX_ROWS or meta.num_columns > MAX_PARQUET_COLUMNS
                or not {"case_id", "target", "status", "case_digest"} <= names):
            return None
        columns = [c for c in _COLUMNS if c in names]
        where = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            if rg.num_rows > MAX_ROWS:
                return None
            for c in columns:
                i = where.get(c)
                if i is None or rg.column(i).total_uncompressed_size > MAX_CHUNK_BYTES:
                    return None
        # read again with the columns kept as their dictionaries, each checked (_strings) before
        # its values are shared by the rows: a 1 KB file's 10 KB value on 20,000 rows would
        # otherwise be 200 MB of strings
        f = pq.ParquetFile(open_results(p, MAX_PARQUET), read_dictionary=columns)
    except Exception:  # noqa: BLE001 (any reason not to trust it: results.jsonl is the record)
        return None

    def rows():
        try:
            for batch in f.iter_batches(batch_size=_BATCH, columns=columns, use_pandas_metadata=False):
                cols = {c: _strings(batch.column(c)) for c in batch.schema.names}
                for i in range(batch.num_rows):
                    yield {c: cols[c][i] if c in cols else None for c in _COLUMNS}
        except _Distrusted:
            raise
        except Exception as e:  # noqa: BLE001
            raise _Distrusted() from e
    return rows()


#: the longest value a History column may hold (ids, statuses, findings, digests are short)
MAX_VALUE = 4096


def _strings(arr) -> list:
    """A column of a batch as Python strings (None for nulls), each distinct value made once: a
    dictionary column's values (bounded in bytes and length) shared by its rows; _Distrusted for
    anything else but strings."""
    import pyarrow as pa
    if pa.types.is_dictionary(arr.type):
        d = arr.dictionary
        if d.nbytes > MAX_CHUNK_BYTES or not (pa.types.is_string(d.type) or pa.types.is_large_string(d.type)):
            raise _Distrusted()
        values = d.to_pylist()
        if any(v is None or len(v) > MAX_VALUE for v in values):
            raise _Distrusted()
        return [None if i is None else values[i] for i in arr.indices.to_pylist()]
    if not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type) or pa.types.is_null(arr.type)):
        raise _Distrusted()
    if arr.nbytes > MAX_CHUNK_BYTES:
        raise _Distrusted()
    out = arr.to_pylist()
    if any(v is not None and len(v) > MAX_VALUE for v in out):
        raise _Distrusted()
    return out


class Reading:
    """One run's states and case set, taken a row at a time (a later row of the same key replaces
    the earlier): by :func:`read_run`, or by reports.build while it writes the run's reports."""

    def __init__(self):
        self.states: dict[tuple, str] = {}
        self.cases: dict[tuple, str] = {}   # (of the key's last row: all rows or the last ones, one set)

    def add(self, r: dict) -> None:
        key = (r.get("case_id"), r.get("target"), r.get("device"))
        self.states[key] = state(r)
        self.cases[key] = f"{r.get('case_id')}:{r.get('case_digest')}"

    def point(self, folder: Path, info: dict | None = None) -> tuple[RunPoint, str]:
        """The run's RunPoint (with its run.json, ``info`` if read already) and the digest of its case set."""
        info = info if info is not None else _run_json(folder)
        digest = hashlib.sha256("\n".join(sorted(set(self.cases.values()))).encode()).hexdigest()
        rid = str(info.get("run_id") or folder.name)
        started = str(info.get("started") or "")
        order = (started, (folder / RUN_JSON).stat().st_mtime_ns)
        return RunPoint(rid, folder, started, order, self.states, info), digest


def read_run(folder: Path, parquet: bool = True) -> tuple[RunPoint, str]:
    """One run folder: its states and the digest of its case set (``parquet``: from results.parquet
    when it can)."""
    info = _run_json(folder)   # (no run.json: not a run, before its rows are read)
    rows = _parquet_rows(folder) if parquet else None
    reading = Reading()
    if rows is not None:
        try:
            for r in rows:
                reading.add(r)
        except _Distrusted:
            reading, rows = Reading(), None
    if rows is None:
        for r in iter_rows(folder / RESULTS):
            reading.add(r)
    point, digest = reading.point(folder, info)
    point.groups, point.group_text = _group_states(folder)
    return point, digest


def run_folders(report_dir: str | Path) -> list[Path]:
    """The run folders under ``report_dir`` (its runs/<run id>/ holding results.jsonl; a folder that
    is itself a runs/ folder is read as such)."""
    d = Path(report_dir)
    if not d.is_dir():
        raise QconformError("not a folder", source=str(d), field="REPORT_DIR",
                            rule="a report directory (--report-dir): runs/<run id>/ under it")
    runs = d / "runs" if (d / "runs").is_dir() else d
    return sorted(p for p in runs.iterdir() if p.is_dir() and not p.is_symlink() and (p / RESULTS).is_file())


def history(report_dir: str | Path, skip_unfinished: bool = True, newest: int | None = None,
            parquet: bool = True, known: dict[Path, tuple[RunPoint, str]] | None = None
            ) -> tuple[list[Series], list[str]]:
    """The series of ``report_dir``'s runs (the largest first) and notes (runs left out, and why);
    ``newest``: only the newest so many run folders (by run id: a start time); ``known``: runs
    already read (folder -> read_run's answer), not read again."""
    by: dict[str, Series] = {}
    notes = []
    known = known or {}
    for folder in run_folders(report_dir)[-newest if newest else None:]:
        try:
            point, digest = known.get(folder.resolve()) or read_run(folder, parquet)
        except QconformError as e:
            notes.append(f"{folder.name} left out: {e}")
            continue
        if skip_unfinished and (point.info.get("interrupted") or not point.info.get("finished")):
            notes.append(f"{point.run_id} left out: it did not finish")
            continue
        if (point.info.get("options") or {}).get("filtered"):
            notes.append(f"{point.run_id} left out: filtered (-k, --lf, a deselection): part of its cases")
            continue
        by.setdefault(digest, Series(digest)).runs.append(point)
    for s in by.values():
        s.runs.sort(key=lambda r: r.order)
    return sorted(by.values(), key=lambda s: (-len(s.runs), s.runs[-1].run_id)), notes


def to_text(series: list[Series], notes: list[str], last: int = LAST, show: int = 50) -> str:
    L = [f"qconform history: {sum(len(s.runs) for s in series)} runs in {len(series)} case set"
         f"{'' if len(series) == 1 else 's'} (runs of different case sets are kept apart)"]
    L += [f"note: {n}" for n in notes]
    for s in series:
        L += ["", s.describe() + f" ({len(s.runs)} runs)",
              f"  {'#':>3} {'run':<28} {'commit':<13} {'exit':>4} {'results':>8} {'pass %':>7} {'failing':>8} "
              f"{'groups':>6} {'new':>5}"]
        for i, (r, k, ch) in enumerate(zip(s.runs, s.new_failures(), s.build_changes()), 1):
            failing = sum(1 for x in r.states.values() if x == "fail")
            gfail = "-" if r.groups is None else sum(1 for x in r.groups.values() if x == "fail")
            pct = "n/a" if r.pass_pct is None else f"{r.pass_pct:.2f}"
            commit = str(build_of(r.info)["commit"] or "?")[:12] + ("+" if build_of(r.info)["dirty"] else "")
            if i == 1:
                L.append(f"      build: {build_text(r.info)}")
            elif ch:
                L.append(f"      build change: {ch}")
            L.append(f"  {i:>3} {r.run_id:<28} {commit:<13} {str(r.exit_status):>4} {len(r.states):>8} {pct:>7} "
                     f"{failing:>8} {gfail:>6} {k:>5}")
        gs = s.groups_failing_since()
        L += ["", f"  group verdicts failing in the newest run ({len(gs)}):"]
        for x in gs[:show]:
            L.append(f"    {x['label']}  failing since {x['since']} ({x['runs']} run{'s' if x['runs'] > 1 else ''})"
                     + (f", at build change {x['build_change']}" if x["build_change"] else "") + ": "
                     + " ".join(x["states"]))
        since = s.failing_since()
        L += ["", f"  failing in the newest run ({len(since)}):"]
        for x in since[:show]:
            where = f"{x['case']}:{x['target']}" + (f"@{x['device']}" if x["device"] else "")
            L.append(f"    {where}  failing since {x['since']} ({x['runs']} run{'s' if x['runs'] > 1 else ''})"
                     + (f", at build change {x['build_change']}" if x["build_change"] else "") + ": "
                     + " ".join(x["states"]))
        if len(since) > show:
            L.append(f"    ... {len(since) - show} more (history.csv has every one)")
        fl = s.flaky(last)
        L += ["", f"  flaky in the last {min(last, len(s.runs))} runs ({len(fl)}; flips between runs of one build "
                  f"only: a change with the build is the build's):"]
        for x in fl[:show]:
            L.append(f"    {x['case']}:{x['target']}  {x['flips']} flips" +
                     (f" (+{x['build_changes']} at build changes)" if x["build_changes"] else "") + ": "
                     + " ".join(x["states"]))
    return "\n".join(L) + "\n"


def to_csv(s: Series) -> str:
    """Per (case, target, device) its state run by run (one column per run id)."""
    out = io.StringIO()
    w = csv.writer(out)
    w.writerow(["case_id", "target", "device", *(r.run_id for r in s.runs)])
    for key in s.keys():
        w.writerow([key[0], key[1], key[2] or "", *s.row(key)])
    for key in s.group_keys():   # group verdicts: "<kind> on <op>" in the case column
        w.writerow([f"{key[3]} on {key[0]}", key[1], key[2] or "", *s.group_row(key)])
    return out.getvalue()


def as_dict(series: list[Series], notes: list[str], last: int = LAST) -> dict[str, Any]:
    return {"format": "qconform-history/1", "notes": notes, "series": [{
        "case_set": s.digest, "describe": s.describe(),
        "runs": [{"run_id": r.run_id, "folder": str(r.folder), "started": r.started, "results": len(r.states),
                  "pass_pct": r.pass_pct, "new_failures": k, "exit_status": r.exit_status, "build": build_of(r.info),
                  "build_change": ch, "groups_failing": None if r.groups is None else
                  sorted(r.group_text[g] for g, v in r.groups.items() if v == "fail")}
                 for r, k, ch in zip(s.runs, s.new_failures(), s.build_changes())],
        "failing_since": s.failing_since(), "groups_failing_since": s.groups_failing_since(),
        "flaky": s.flaky(last)} for s in series]}


def svg(s: Series) -> bytes:
    return trend_svg([r.run_id for r in s.runs], s.new_failures(), [r.pass_pct for r in s.runs])


def html_section(run_folder: str | Path, last: int = LAST, reading: Reading | None = None,
                 info: dict | None = None) -> str | None:
    """index.html's History section of the run in ``run_folder``: its series under the same report
    directory (<dir>/runs/<run id>), when earlier runs are there; None otherwise. ``reading``: the
    run's own rows, already taken (reports.build), so its results.jsonl is not read again."""
    folder = Path(run_folder).resolve()
    if folder.parent.name != "runs":
        return None
    # (the earlier runs from their results.parquet where it can, read_run: parsing each one's results.jsonl
    # cost more than the rest of the report; reading Parquet imports pyarrow, not pandas)
    try:
        point, digest = reading.point(folder, info) if reading is not None else read_run(folder)
        series, _ = history(folder.parent.parent, newest=last, known={folder: (point, digest)})
    except QconformError:
        return None
    s = next((x for x in series if x.digest == digest), None)
    if s is None or len(s.runs) < 2:
        return None
    s.runs = [r for r in s.runs if r.order <= point.order]
    e = _html.escape
    out = ['<h2 id="history-section">History</h2>',
           f"<p>{len(s.runs)} runs of this case set among the newest {last} under {e(str(folder.parent.parent))} (oldest first; "
           f"<code>qconform history {e(str(folder.parent.parent))}</code> shows every one).</p>",
           f'<img id="history-trend" alt="trend" src="data:image/svg+xml;base64,{base64.b64encode(svg(s)).decode()}"/>']
    since = s.failing_since()
    if since:
        out.append('<table class="full" id="failing-since"><thead><tr><th>case</th><th>target</th><th>failing since'
                   "</th><th>runs</th><th>states, oldest first</th></tr></thead><tbody>" + "".join(
                       f"<tr><td>{e(str(x['case']))}</td><td>{e(str(x['target']))}</td><td>{e(x['since'])}</td>"
                       f"<td>{x['runs']}</td><td>{e(' '.join(x['states'][-last:]))}</td></tr>" for x in since[:200])
                   + "</tbody></table>")
    else:
        out.append('<p id="failing-since-none">No case fails in this run.</p>')
    fl = s.flaky(last)
    out.append(f'<p id="flaky">Flaky in the last {min(last, len(s.runs))} runs: '
               + (", ".join(e(f"{x['case']}:{x['target']} ({x['flips']} flips)") for x in fl[:50]) or "none") + "</p>")
    return "".join(out)
