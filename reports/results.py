"""results.jsonl: one JSON row per (case, target), appended and flushed as the run goes.

Rows are written with a single ``write`` on a file opened for appending, so
several pytest-xdist workers can share one file, and a run killed with SIGKILL
loses at most the case in flight. Readers skip a torn last line (one without its newline:
``--resume`` cuts it off); every other line must be a row as written (:func:`parse_row`:
JSON, a ``status`` of :class:`suite.core.verdict.Status`, finite numbers), else one
QconformError names the file and the line. Every string read is cleaned of control and
undecodable characters (suite/core/text.py) before any report sees it.

A row's ``status`` is the value of a :class:`suite.core.verdict.Status`. Every reader takes the
file through :func:`numbered`: a regular file (never through a link, never a FIFO or device),
bounded in bytes, line length and rows, each (case_id, target, device) once and all rows of one
``run_id`` (a second row of a pair, or a row of another run, would let a later row replace a
verdict: refused, naming the line). The report reads the file twice and holds no row list:
:func:`index_rows` finds each row, :func:`rows_at` reads just those (:func:`iter_last_rows`).

Every report artefact is written atomically (:func:`write_atomic`, :func:`atomic`): into
``<name>.tmp`` beside it, then renamed over it; on any error the tmp file is removed and
the error names the artefact's path.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import math

import numpy as np

from suite.core.errors import QconformError
from suite.core.text import clean_tree
from suite.core.verdict import ORDER, Status

RESULTS = "results.jsonl"


class ResultWriter:
    def __init__(self, report_dir: str | os.PathLike, truncate: bool = False):
        self.dir = Path(report_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / RESULTS
        # (O_NOFOLLOW: a results.jsonl planted as a link is never written through to what it names)
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
        if truncate:
            flags |= os.O_TRUNC
        self._fd = os.open(self.path, flags, 0o644)

    def append(self, row: dict[str, Any]) -> bytes:
        """Write one row (one line), its text cleaned (suite/core/text.py); returns the line."""
        line = (json.dumps(row, separators=(",", ":"), default=_default) + "\n").encode()
        if b"\\u" in line:   # (ASCII JSON: a control, undecodable or other non-ASCII character is escaped)
            line = (json.dumps(clean_tree(row), separators=(",", ":"), default=_default) + "\n").encode()
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


#: bounds of a results.jsonl: its size, one line (a row), its rows (each costs the readers an index entry)
MAX_BYTES = 2 << 30
MAX_LINE = 4 << 20
MAX_ROWS = 4_000_000
_RULE = (f"a regular file (not a link, FIFO or device) of at most {MAX_BYTES:,} bytes, {MAX_ROWS:,} rows "
         f"and {MAX_LINE:,} bytes a line, each (case, target, device) once, all of one run_id")


def open_results(path: str | os.PathLike, limit: int = MAX_BYTES):
    """The results.jsonl ``path`` (or the one in a folder) opened to read, or None if there is none:
    a regular file of at most ``limit`` bytes, judged on the very file opened (O_NOFOLLOW: a link in
    the run folder is not followed to what it names; O_NONBLOCK: a FIFO does not block the open);
    else one QconformError naming it."""
    p = _file(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError as e:   # ELOOP: a symbolic link (O_NOFOLLOW)
        why = "is a symbolic link" if os.path.islink(p) else f"cannot be read: {e.strerror or e}"
        raise QconformError(why, source=str(p), rule=_RULE) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise QconformError("is not a regular file", source=str(p), rule=_RULE)
        if st.st_size > limit:
            raise QconformError(f"holds {st.st_size:,} bytes, more than {limit:,}", source=str(p), rule=_RULE)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _bad(p: Path, n: int, why: str) -> QconformError:
    return QconformError(f"line {n} {why}", source=str(p), rule=_RULE)


def numbered(path: str | os.PathLike, limit: int | None = None) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(line number, byte offset, row) of every complete row of a results.jsonl (or of the one in a
    folder), in its first ``limit`` bytes (all of them if None), read under :data:`MAX_BYTES`,
    :data:`MAX_LINE` and :data:`MAX_ROWS`. A row whose (case_id, target, device) has a row already,
    or whose ``run_id`` is not the first row's, is refused like a corrupt line: the file is the
    record of one run, each pair judged once (a re-run of a test writes no second row:
    suite/harness/run.py), so no later row may replace an earlier verdict. QconformError naming
    the file and line; a torn last line is skipped."""
    p = _file(path)
    f = open_results(p)
    if f is None:
        return
    seen: dict[tuple, int] = {}
    run_id = None
    with f:
        offset, rows = 0, 0
        for n in itertools.count(1):
            if limit is not None and offset >= limit:
                return
            raw = f.readline(MAX_LINE + 1)
            if not raw:
                return
            at, offset = offset, offset + len(raw)
            if len(raw) > MAX_LINE:
                raise _bad(p, n, f"is longer than {MAX_LINE:,} bytes")
            try:
                row = _parse(raw)
            except ValueError as e:
                if not raw.endswith(b"\n"):   # the last line, torn by a killed run: no row yet
                    return
                raise QconformError(f"line {n} is not a result row: {e}", source=str(p),
                                    rule="one JSON row per line as qconform writes it; a corrupt run is not "
                                         "reported or compared") from None
            if row is None:
                continue
            rows += 1
            if rows > MAX_ROWS:
                raise _bad(p, n, f"is row {rows:,}: more than {MAX_ROWS:,}")
            rid = row.get("run_id")
            if rid is not None:
                if run_id is None:
                    run_id = rid
                elif rid != run_id:
                    raise _bad(p, n, f"is a row of run {str(rid)[:60]!r}, not of {str(run_id)[:60]!r}")
            key = row_key(row)
            if key in seen:
                raise _bad(p, n, f"repeats the (case, target, device) {key[0][:80]}:{key[1][:60]}"
                                 f"{'@' + str(key[2])[:60] if key[2] else ''} of line {seen[key]}")
            seen[key] = n
            yield n, at, row


def scan(path: str | os.PathLike, limit: int | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """(byte offset, row) of every complete row (:func:`numbered`)."""
    for _, at, row in numbered(path, limit):
        yield at, row


#: fields every row has, and the numeric ones (a number or null, finite, within int64 if whole)
REQUIRED = ("case_id", "target", "status")
NUMERIC = ("index", "elements", "mismatches", "max_abs_lsb", "mean_err_lsb", "sum_err_lsb", "pos_err", "neg_err",
           "tie_up", "tie_down", "tie_toward_zp", "toward_zp_err",
           "p50_us", "p90_us", "min_us", "spread_us", "latency_n", "seconds")
_STATUSES = frozenset(s.value for s in Status)


def _not_finite(token):
    raise ValueError(f"{token} is not a finite number")


def _finite_float(text: str) -> float:
    x = float(text)
    if not math.isfinite(x):
        raise ValueError(f"{text} is not a finite number")
    return x


#: one decoder for every row (json.loads with these hooks would build one per call)
_DECODER = json.JSONDecoder(parse_constant=_not_finite, parse_float=_finite_float)


def _loads(raw: bytes | str) -> Any:
    """json.loads(raw, parse_constant=..., parse_float=...), its steps, with :data:`_DECODER`."""
    if isinstance(raw, (bytes, bytearray)):
        raw = raw.decode(json.detect_encoding(raw), "surrogatepass")
    elif raw.startswith("\ufeff"):
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", raw, 0)
    return _DECODER.decode(raw)


def parse_row(raw: bytes | str) -> dict[str, Any] | None:
    """One results.jsonl line as a row (None for a blank line); ValueError saying what is wrong."""
    raw = raw.strip()
    if not raw:
        return None
    try:
        row = _loads(raw)
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8 ({e.reason} at byte {e.start})") from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON ({e.msg}, column {e.colno})") from None
    if not isinstance(row, dict):
        raise ValueError(f"a JSON {type(row).__name__}, not an object")
    for k in REQUIRED:
        if not isinstance(row.get(k), str) or not row[k]:
            raise ValueError(f"field '{k}' is missing or not a string")
    for k in ("device", "run_id"):
        if row.get(k) is not None and not isinstance(row[k], str):
            raise ValueError(f"field '{k}' is not a string")
    if row["status"] not in _STATUSES:
        raise ValueError(f"status {row['status'][:40]!r} is none of {', '.join(sorted(_STATUSES))}")
    for k in NUMERIC:
        v = row.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or abs(v) >= 2 ** 63):
            raise ValueError(f"field '{k}' is {str(v)[:40]!r}, not a finite number")
    if isinstance(raw, bytes) and b"\\u" not in raw and b"\xc2" not in raw and b"\x7f" not in raw:
        return row   # (no escaped or C1 character: nothing to clean)
    return clean_tree(row)


_parse = parse_row


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
    f = open_results(path)
    if f is None:
        return
    with f:
        for at in offsets:
            f.seek(at)
            row = _parse(f.readline(MAX_LINE + 1))
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
