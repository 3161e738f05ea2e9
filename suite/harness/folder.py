"""Run folders: every run writes its own, ``<root>/runs/<run id>/``.

A run holds an exclusive lock on its folder (``.lock``, flock) while it runs, so a second
run can never write into it (``--resume`` of a running run is refused). When a run ends
complete and unfiltered (no ``-k``, ``--lf``, ``--case-file`` ...), ``<root>/latest`` is
pointed at it (a relative symlink, replaced atomically). Every file is written whole
(a temporary file renamed into place; removed on any error), and a folder that cannot be
written (read-only, full disk) is one :class:`DiskError` naming the path. A new run keeps
``RESERVE`` bytes of the disk (``.reserve``), given back when it ends: a disk that fills up
during the run still takes the end's run.json (finished, exit status) and a small report.
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import json
import os
import re
import secrets
from pathlib import Path
from typing import Any

from reports.results import RESULTS, ResultWriter
from suite.core.errors import QconformError

LOCK = ".lock"
RESERVE = ".reserve"
RESERVE_BYTES = 128 * 1024   # run.json, summary.csv and summary.md of a hundred (op, target)s
_SAFE = re.compile(r"[^A-Za-z0-9._~+-]")


class DiskError(QconformError):
    """The run folder could not be written."""


def disk_error(path: Path, e: OSError) -> DiskError:
    return DiskError(f"cannot write: {e.strerror or e}", source=str(path), field="--report-dir",
                     rule="the run folder must be writable")


def new_run_id() -> str:
    return _dt.datetime.now().strftime("%Y%m%dT%H%M%S") + "-" + secrets.token_hex(3)


def safe_name(text: str, limit: int = 120) -> str:
    """A file name made of ``text``: safe characters only, never '.' or '..', at most ``limit``."""
    name = _SAFE.sub("_", text)[:limit].lstrip(".") or "_"
    return name


class RunFolder:
    """One run's folder. ``create`` a new one, ``resume`` an interrupted one (both locked), or
    ``join`` the folder of the controller (a pytest-xdist worker: rows only, no lock)."""

    def __init__(self, path: Path, lock_fd: int | None = None):
        self.path = Path(path)
        self._lock_fd = lock_fd
        self._writer: ResultWriter | None = None
        self._reserved = False   # this process keeps the folder's RESERVE

    @property
    def root(self) -> Path:
        return self.path.parent.parent

    @classmethod
    def create(cls, root: str | os.PathLike, run_id: str) -> "RunFolder":
        path = Path(root) / "runs" / run_id
        try:
            path.mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            raise QconformError("a run with this id exists already", source=str(path),
                                field="--report-dir", rule="each run writes its own folder") from None
        except OSError as e:
            raise disk_error(path, e) from None
        folder = cls(path, _lock(path))
        try:   # (written, not sparse: the blocks are the run's)
            write_whole(path / RESERVE, bytes(RESERVE_BYTES))
            folder._reserved = True
        except BaseException:
            folder.close()
            raise
        return folder

    @classmethod
    def resume(cls, path: str | os.PathLike) -> "RunFolder":
        path = Path(path)
        folder = cls(path, _lock(path))
        folder._reserved = (path / RESERVE).exists()   # (left by a killed run: given back at this one's end)
        return folder

    @classmethod
    def join(cls, path: str | os.PathLike) -> "RunFolder":
        return cls(Path(path))

    # ---- rows and files
    def append(self, row: dict[str, Any]) -> None:
        """One results.jsonl row, in one write (kill -9 loses at most the row in flight)."""
        try:
            if self._writer is None:
                self._writer = ResultWriter(self.path)
            self._writer.append(row)
        except OSError as e:
            raise disk_error(self.path / RESULTS, e) from None

    def failure_path(self, target: str, case_id: str) -> Path:
        """failures/<target>/<case id>.json, always inside the folder whatever the id holds."""
        return self.path / "failures" / safe_name(target) / (safe_name(case_id) + ".json")

    def write_json(self, path: Path, doc: Any) -> Path:
        """``doc`` as JSON at ``path`` (in this folder), written whole or not at all."""
        write_whole(path, (json.dumps(doc, separators=(",", ":")) + "\n").encode())
        return path

    # ---- the end
    def mark_latest(self) -> None:
        """``<root>/latest`` -> this run (a relative symlink, swapped in atomically). A ``latest``
        folder of the old layout is moved into runs/ first, never deleted."""
        latest = self.root / "latest"
        try:
            if latest.is_dir() and not latest.is_symlink():
                os.replace(latest, self.root / "runs" / f"old-latest-{new_run_id()}")
            tmp = self.root / f".latest-{secrets.token_hex(4)}"
            os.symlink(os.path.relpath(self.path, self.root), tmp)
            os.replace(tmp, latest)
        except OSError as e:
            raise disk_error(latest, e) from None

    def give_back_reserve(self) -> None:
        """Free the space kept for the run's end (the rows are all written by now)."""
        if self._reserved:
            self._reserved = False
            try:
                (self.path / RESERVE).unlink()
            except OSError:
                pass

    def close(self) -> None:
        self.give_back_reserve()
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._lock_fd is not None:
            os.close(self._lock_fd)   # releases the flock
            self._lock_fd = None


def _lock(path: Path) -> int:
    p = path / LOCK
    try:
        fd = os.open(p, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)   # (never through a link)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            raise QconformError("no such run folder", source=str(path), field="--resume") from None
        if e.errno == errno.ELOOP:
            raise QconformError("is a symbolic link", source=str(p), field="--resume",
                                rule="a run folder holds only files and folders") from None
        raise disk_error(p, e) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise QconformError("is in use by another run (it holds the folder's lock)", source=str(path),
                            field="--report-dir", rule="one run writes a run folder at a time") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def write_whole(path: Path, data: bytes) -> None:
    """``data`` into ``path`` through a temporary file renamed into place; DiskError naming the
    path if it cannot be written (the temporary file removed)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException as e:   # (a signal too: no *.tmp left behind)
        try:
            tmp.unlink()
        except OSError:
            pass
        if isinstance(e, OSError):
            raise disk_error(path, e) from None
        raise
