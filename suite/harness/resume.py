"""Resuming an interrupted run: ``pytest --resume RUN_DIR``.

A run writes ``run.json`` when it starts and appends one ``results.jsonl`` row per
(case, target) as each verdict is reached (one ``write`` per row, so ``kill -9``
loses at most the case in flight). Resuming:

1. reads ``RUN_DIR/run.json``; options missing from the command line (``--seed``,
   ``--cases-per-op``, ``--scheme``, ``--ops``, ``--target``, ``--case-file``) are
   taken from it, options given must equal the run's (else one clear error: a
   different seed or case count would make the same case ids mean other cases); run.json is
   data, so targets other than the built-in ones (they import code) and case files (files to
   open) are never taken from it: the command line must give them;
2. cuts a torn last line off ``results.jsonl`` (a row half written when the run died),
   so the next row starts on a line of its own;
3. deselects every (case, target) pair already recorded (read from the file's first
   ``offset`` bytes, the same for every pytest-xdist worker) and appends the rest,
   under the original ``run_id``;
4. rebuilds the summaries from all rows: the report equals an uninterrupted run's, and
   the exit status counts the recorded failures too.

Resume is exact for local targets and single-device runs. With several devices, a pair
counts as recorded once as many rows as devices exist for it.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reports.results import RESULTS, scan
from reports.runinfo import load_run_json
from suite.core.errors import QconformError
from targets import BUILTIN

#: (run.json options key, RunConfig attribute, command-line option)
CHECKED = (("seed", "seed", "--seed"), ("cases_per_op", "cases_per_op", "--cases-per-op"),
           ("scheme", "scheme", "--scheme"), ("ops", "ops", "--ops"), ("targets", "targets", "--target"),
           ("case_files", "case_files", "--case-file"))
DEFAULT_SCHEME = "tflite-ref-double"


@dataclass
class Resume:
    dir: Path
    run_id: str
    started: str | None
    options: dict[str, Any]
    offset: int = 0                  # bytes of results.jsonl recorded before this session
    skipped: int = 0                 # tests deselected as recorded


def open_run(run_dir: str, report_dir: str | None = None) -> Resume:
    """Check RUN_DIR is a run's report folder; QconformError (field --resume) if not."""
    d = Path(run_dir)
    if not d.is_dir():
        raise QconformError("no such run directory", source=str(d), field="--resume",
                            rule="--resume takes the report folder of an earlier run")
    p = d / "run.json"
    if not p.exists() and not p.is_symlink():
        raise QconformError("has no run.json: not the report folder of a run (or the run never started)",
                            source=str(d), field="--resume", rule="--resume takes the report folder of an earlier run")
    no_links(d)
    info = load_run_json(d, "--resume")
    opts = info["options"]
    if not isinstance(info.get("run_id"), str) or not info["run_id"]:
        raise QconformError("lacks run_id / options", source=str(p), field="--resume",
                            rule="run.json as qconform writes it (qconform-run/1)")
    if report_dir is not None and Path(report_dir).resolve() != d.resolve():
        raise QconformError(f"--report-dir {report_dir} differs from the run being resumed", field="--resume",
                            rule="a resumed run reports into RUN_DIR (omit --report-dir)")
    return Resume(d, info["run_id"], info.get("started"), opts)


#: entries a run folder holds at most (the walk that looks for links is bounded too)
MAX_ENTRIES = 1_000_000


def no_links(d: Path) -> None:
    """One QconformError if the run folder ``d`` (named on the command line) holds a symbolic link,
    a FIFO or a device anywhere below it: a resumed run reads and appends to results.jsonl, writes
    failures/ and run.json, and must never read or write through a link to a file outside it."""
    stack, seen = [d], 0
    while stack:
        here = stack.pop()
        try:
            entries = list(os.scandir(here))
        except OSError as e:
            raise QconformError(f"cannot be read: {e.strerror or e}", source=str(here), field="--resume") from None
        for e in entries:
            seen += 1
            if seen > MAX_ENTRIES:
                raise QconformError(f"holds more than {MAX_ENTRIES:,} entries", source=str(d), field="--resume",
                                    rule="a run folder as qconform writes it")
            if e.is_symlink() or not (e.is_dir(follow_symlinks=False) or e.is_file(follow_symlinks=False)):
                kind = "a symbolic link" if e.is_symlink() else "not a regular file or a folder (a FIFO, a device)"
                raise QconformError(f"is {kind}", source=e.path, field="--resume",
                                    rule="a run folder holds only files and folders: a resumed run never reads "
                                         "or writes through a link")
            if e.is_dir(follow_symlinks=False):
                stack.append(Path(e.path))


def _given(argv: list[str], opt: str) -> bool:
    return any(a == opt or a.startswith(opt + "=") for a in argv)


def fill_options(res: Resume, option, argv: list[str]) -> None:
    """Set the options the command line leaves out to the resumed run's values."""
    o = res.options
    if not _given(argv, "--seed") and isinstance(o.get("seed"), int):
        option.seed = o["seed"]
    if not _given(argv, "--cases-per-op") and isinstance(o.get("cases_per_op"), int):
        option.cases_per_op = o["cases_per_op"]
    if not _given(argv, "--scheme") and isinstance(o.get("scheme"), str) and o["scheme"] != DEFAULT_SCHEME:
        option.scheme = o["scheme"]
    if not _given(argv, "--ops") and isinstance(o.get("ops"), list) and o["ops"]:
        option.ops = [",".join(map(str, o["ops"]))]
    # run.json is data: a target that is not built in (module:Class, an entry point) would import
    # code, a case file is a file to open; those the command line must name itself
    if not _given(argv, "--target") and isinstance(o.get("targets"), list) and o["targets"]:
        names = [str(x) for x in o["targets"]]
        foreign = [n for n in names if n not in BUILTIN]
        if foreign:
            _refuse(res, "targets", foreign[0], shlex.quote(f"--target={','.join(names)}"),
                    "not a built-in target (it would import code)")
        option.target = [",".join(names)]
    if not _given(argv, "--case-file") and isinstance(o.get("case_files"), list) and o["case_files"]:
        files = [str(x) for x in o["case_files"]]
        _refuse(res, "case_files", files[0], " ".join(shlex.quote(f"--case-file={f}") for f in files),
                "a file named by run.json")


def _refuse(res: Resume, key: str, value: str, give: str, why: str) -> None:
    raise QconformError(f"options.{key} holds {json.dumps(value)}: {why}; give it on the command line: "
                        f"pytest {shlex.quote(f'--resume={res.dir}')} {give}", source=str(res.dir / "run.json"),
                        field=f"options.{key}", rule="a run folder never selects code to run or a file to read")


def check_config(res: Resume, rc) -> None:
    """One QconformError if this session would not run the same cases as the resumed run."""
    o = res.options
    diffs = []
    for key, attr, opt in CHECKED:
        was = o.get(key)
        now = getattr(rc, attr)
        if key == "scheme":
            was, now = was or DEFAULT_SCHEME, now or DEFAULT_SCHEME
        if key in ("ops", "targets", "case_files"):
            was, now = _as_list(was), _as_list(now)
        if was != now:
            diffs.append(f"{opt} {_show(now)} (the run had {_show(was)})")
    if diffs:
        raise QconformError("cannot resume with different options: " + "; ".join(diffs)
                            + " (leave them out to take the run's)", source=str(res.dir), field="--resume",
                            rule="a resumed run keeps the seed, cases-per-op, scheme, ops, targets and case files")


def _as_list(v) -> list:
    return list(v) if isinstance(v, (list, tuple)) else ([] if v is None else [v])


def _show(v) -> str:
    if isinstance(v, list):
        return ",".join(map(str, v)) or "(none)"
    return str(v)


def repair_tail(report_dir: Path) -> int:
    """Cut a torn last line off results.jsonl; returns the file's size afterwards (0 if absent)."""
    p = Path(report_dir) / RESULTS
    try:
        size = p.lstat().st_size
    except OSError:
        return 0
    if size == 0:
        return 0
    try:
        return _cut_torn_line(p, size)
    except OSError as e:   # (a read-only folder, a full disk)
        raise QconformError(f"cannot write: {e.strerror or e}", source=str(p), field="--resume",
                            rule="a resumed run writes into its run folder") from None


def _cut_torn_line(p: Path, size: int) -> int:
    # (O_NOFOLLOW: a link planted since open_run looked is not followed to what it names)
    with os.fdopen(os.open(p, os.O_RDWR | getattr(os, "O_NOFOLLOW", 0)), "rb+") as f:
        f.seek(max(0, size - 1))
        if f.read(1) == b"\n":
            return size
        # find the last newline: everything after it is a torn row
        pos, block = size, 1 << 16
        keep = 0
        while pos > 0:
            start = max(0, pos - block)
            f.seek(start)
            chunk = f.read(pos - start)
            k = chunk.rfind(b"\n")
            if k >= 0:
                keep = start + k + 1
                break
            pos = start
        f.truncate(keep)
        f.flush()
        os.fsync(f.fileno())
        return keep


def recorded(report_dir: Path, run_id: str, offset: int) -> dict[tuple[str, str], int]:
    """(case_id, target) -> number of distinct rows (devices) recorded in the first ``offset`` bytes
    (read by reports.results: bounded, each pair once, one run id)."""
    seen: dict[tuple, set] = {}
    if offset <= 0:
        return {}
    for _, row in scan(Path(report_dir) / RESULTS, limit=offset):
        if row.get("run_id") != run_id:
            continue
        seen.setdefault((str(row.get("case_id")), str(row.get("target"))), set()).add(row.get("device"))
    return {k: len(v) for k, v in seen.items()}
