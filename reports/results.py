"""results.jsonl: one JSON row per (case, target), appended and flushed as the run goes.

Rows are written with a single ``write`` on a file opened for appending, so
several pytest-xdist workers can share one file, and a run killed with SIGKILL
loses at most the case in flight. Readers skip a torn last line.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Iterator

RESULTS = "results.jsonl"

# statuses, in the order tables show them
PASS, FAIL, UNSUPPORTED, ERROR, CRASH, TIMEOUT, INFRA, WAIVED = (
    "pass", "fail", "unsupported", "error", "crash", "timeout", "infra", "waived")
ERROR_STATUSES = (ERROR, CRASH, TIMEOUT, INFRA)
STATUSES = (PASS, FAIL, UNSUPPORTED, ERROR, CRASH, TIMEOUT, INFRA, WAIVED)


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
    import numpy as np
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


def iter_rows(path: str | os.PathLike) -> Iterator[dict[str, Any]]:
    """Rows of a results.jsonl (or of the results.jsonl in a folder); torn lines skipped."""
    p = Path(path)
    if p.is_dir():
        p = p / RESULTS
    if not p.exists():
        return
    with open(p, "rb") as f:
        for raw in f:
            raw = raw.strip()
            if not raw:
                continue
            try:
                row = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue   # a line torn by a killed run
            if isinstance(row, dict):
                yield row


def read_rows(path: str | os.PathLike, dedupe: bool = True) -> list[dict[str, Any]]:
    """All rows; with ``dedupe`` the last row of each (case_id, target, device) wins."""
    rows = list(iter_rows(path))
    return last_of_each(rows) if dedupe else rows


def last_of_each(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last row of each (case_id, target, device), in the order of their first rows."""
    seen: dict[tuple, int] = {}
    out: list[dict[str, Any]] = []
    for r in rows:
        key = row_key(r)
        if key in seen:
            out[seen[key]] = r
        else:
            seen[key] = len(out)
            out.append(r)
    return out


def row_key(row: dict[str, Any]) -> tuple:
    return (row.get("case_id"), row.get("target"), row.get("device"))


def write_json(path: str | os.PathLike, obj: Any) -> None:
    p = Path(path)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, default=_default) + "\n")
    os.replace(tmp, p)


def statuses_of(rows: Iterable[dict]) -> dict[str, int]:
    counts = {s: 0 for s in STATUSES}
    for r in rows:
        counts[r.get("status", ERROR)] = counts.get(r.get("status", ERROR), 0) + 1
    return counts
