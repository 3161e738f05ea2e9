"""results.jsonl: one JSON row per (case, target), appended and flushed as the run goes.

Rows are written with a single ``write`` on a file opened for appending, so
several pytest-xdist workers can share one file, and a run killed with SIGKILL
loses at most the case in flight. Readers skip a torn last line.

A row's ``status`` is the value of a :class:`suite.core.verdict.Status`. The same
(case_id, target, device) may have several rows (a test run again, a resumed run): the
last one counts. The report reads the file twice and holds no row list: :func:`index_rows`
finds the last row of each, :func:`rows_at` reads just those (:func:`iter_last_rows`).

Every report artefact is written atomically (:func:`write_atomic`, :func:`atomic`): into
``<name>.tmp`` beside it, then renamed over it; on any error the tmp file is removed and
the error names the artefact's path.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from suite.core.verdict import ORDER

RESULTS = "results.jsonl"


class ResultWriter:
    def __init__(self, report_dir: str | os.PathLike, truncate: bool = False):
        self.dir = Path(report_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / RESULTS
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
        if truncate:
            flags |= os.O_TRUNC
        self._fd = os.open(self.path, flags, 0o644)

    def append(self, row: dict[str, Any]) -> bytes:
        """Write one row (one line); returns the line."""
        line = (json.dumps(row, separators=(",", ":"), default=_default) + "\n").encode()
        os.write(self._fd, line)   # one write per row: atomic with O_APPEND, survives kill -9
        return line

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (set, tuple)):
        return list(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


# ----------------------------------------------------------------------------- reading

def _file(path: str | os.PathLike) -> Path:
    p = Path(path)
    return p / RESULTS if p.is_dir() else p


def scan(path: str | os.PathLike) -> Iterator[tuple[int, dict[str, Any]]]:
    """(byte offset, row) of every complete row of a results.jsonl (or of the one in a folder)."""
    p = _file(path)
    if not p.exists():
        return
    offset = 0
    with open(p, "rb") as f:
        for raw in f:
            at, offset = offset, offset + len(raw)
            row = _parse(raw)
            if row is not None:
                yield at, row


def _parse(raw: bytes) -> dict[str, Any] | None:
    raw = raw.strip()
    if not raw:
        return None
    try:
        row = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None   # a line torn by a killed run
    return row if isinstance(row, dict) else None


def iter_rows(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """Every complete row, in file order (repeats included); torn lines skipped."""
    for _, row in scan(path):
        yield row


def row_key(row: dict[str, Any]) -> tuple:
    return (row.get("case_id"), row.get("target"), row.get("device"))


def index_rows(path: str | os.PathLike, tag: Callable[[dict], Any] | None = None) -> dict[tuple, tuple[int, Any]]:
    """{row_key: (byte offset of its last row, ``tag(that row)``)}, in the order of the keys'
    first rows: a first pass over the file that keeps one small entry per key, not the rows."""
    index: dict[tuple, tuple[int, Any]] = {}
    for at, row in scan(path):
        index[row_key(row)] = (at, tag(row) if tag is not None else None)   # a known key keeps its place
    return index


def rows_at(path: str | os.PathLike, offsets: Iterable[int]) -> Iterator[dict[str, Any]]:
    """The rows starting at ``offsets`` (from :func:`index_rows`), one at a time."""
    with open(_file(path), "rb") as f:
        for at in offsets:
            f.seek(at)
            row = _parse(f.readline())
            if row is not None:
                yield row


def iter_last_rows(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """The last row of each (case_id, target, device), in the order of their first rows (streamed)."""
    index = index_rows(path)
    if index:
        yield from rows_at(path, (at for at, _ in index.values()))


def read_rows(path: str | os.PathLike, dedupe: bool = True) -> list[dict[str, Any]]:
    """All rows as a list (small files, tests); with ``dedupe`` the last row of each
    (case_id, target, device) wins, in the order of their first rows."""
    return list(iter_last_rows(path) if dedupe else iter_rows(path))


def last_of_each(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last row of each (case_id, target, device), in the order of their first rows."""
    last = {row_key(r): r for r in rows}   # a known key keeps its place, takes the later row
    return list(last.values())


def count_statuses(counts: dict[str, int]) -> dict[str, int]:
    """``counts`` (status value -> rows) without zeros, in :data:`suite.core.verdict.ORDER`
    (unknown values after)."""
    known = [s.value for s in ORDER]
    order = known + [s for s in counts if s not in known]
    return {s: counts[s] for s in order if counts.get(s)}


# ----------------------------------------------------------------------------- atomic writes

def tmp_of(path: str | os.PathLike) -> Path:
    """Where an artefact is written before it takes its name: ``<path>.tmp``."""
    p = Path(path)
    return p.with_name(p.name + ".tmp")


def naming(e: BaseException, path: str | os.PathLike) -> BaseException:
    """``e``; an OSError with an errno as one that names ``path`` (the artefact, not its tmp file)."""
    if isinstance(e, OSError) and e.errno is not None and e.filename != str(path):
        return OSError(e.errno, e.strerror, str(path))
    return e


@contextlib.contextmanager
def atomic(path: str | os.PathLike) -> Iterator[Path]:
    """Yields ``<path>.tmp`` to write; renamed over ``path`` when the block ends without error,
    removed when it raises (:func:`naming` the error)."""
    tmp = tmp_of(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        err = naming(e, path)
        if err is e:
            raise
        raise err from e


def write_atomic(path: str | os.PathLike, data: str | bytes) -> Path:
    """Write ``data`` (text: UTF-8) to ``path`` atomically; returns ``path``."""
    p = Path(path)
    with atomic(p) as tmp, open(tmp, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)
    return p


def write_json(path: str | os.PathLike, obj: Any) -> Path:
    return write_atomic(path, json.dumps(obj, indent=2, default=_default) + "\n")
