"""Goldens kept between runs, so a nightly with the same cases computes none of them again.

One file per version of the golden: ``<folder>/<version>.pkl`` holds
``{(case digest, scheme): [output arrays]}``. The version is the SHA-256 of the golden's
own source (every ``reference/**/*.py`` and ``suite/dtypes.py``, the only suite module it
reads), the NumPy version and this file's format, and the case digest hashes every byte of
the case: an entry is exactly what the current code computes for that very case, and any
change to the golden's code starts a new file. Only goldens that were computed are stored
(never a target's output); a golden that raised is computed again each time.

Folder: ``--golden-cache DIR``, else ``$QCONFORM_GOLDEN_CACHE``, else
``~/.cache/qconform/golden``; ``off`` turns it off. The file is read at the first golden
of a run and written at its end (atomically) when the run computed new goldens; a file
that cannot be read or fails its checksum is ignored (and replaced). A run keeps at most
``MAX_BYTES`` of new goldens, and the file at most that much: past it, the last run's.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path
from typing import Any

FORMAT = "qconform-golden-cache/1"   # also in the version hash
MAX_BYTES = 128 << 20
ROOT = Path(__file__).resolve().parent.parent


def folder_of(option: str | None) -> Path | None:
    """The cache folder for ``--golden-cache`` (None: off)."""
    val = option or os.environ.get("QCONFORM_GOLDEN_CACHE") or str(Path.home() / ".cache" / "qconform" / "golden")
    return None if val.strip().lower() == "off" else Path(val).expanduser()


_VERSION: str | None = None


def version() -> str:
    """The golden's version: its source, NumPy's version and this format."""
    global _VERSION
    if _VERSION is None:
        import numpy as np
        h = hashlib.sha256(f"{FORMAT}\0numpy {np.__version__}\0".encode())
        files = sorted((ROOT / "reference").rglob("*.py")) + [ROOT / "suite" / "dtypes.py"]
        for p in files:
            h.update(str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes() + b"\0")
        _VERSION = h.hexdigest()[:24]
    return _VERSION


def _nbytes(arrays) -> int:
    return sum(getattr(a, "nbytes", 0) for a in arrays)


MAGIC = b"qconform-golden-cache/1\n"


def _read(path: Path) -> dict:
    """The goldens of a cache file; {} if it is absent, damaged or of another format. The file is
    MAGIC, the SHA-256 of the payload (hex, one line) and the payload (a pickle): a damaged file
    fails the checksum before anything is unpickled."""
    try:
        raw = path.read_bytes()
    except OSError:
        return {}
    head = len(MAGIC) + 65
    if not raw.startswith(MAGIC) or len(raw) < head:
        return {}
    digest, payload = raw[len(MAGIC):head - 1], raw[head:]
    if hashlib.sha256(payload).hexdigest().encode() != digest:
        return {}
    try:
        goldens = pickle.loads(payload)
    except Exception:
        return {}
    return goldens if isinstance(goldens, dict) else {}


class GoldenCache:
    def __init__(self, folder: Path):
        self.path = Path(folder) / f"{version()}.pkl"
        self._old: dict[tuple[str, str], Any] | None = None
        self._new: dict[tuple[str, str], Any] = {}
        self._new_bytes = 0
        self.hits = 0

    def _load(self) -> dict:
        if self._old is None:
            self._old = _read(self.path)
        return self._old

    def get(self, digest: str, scheme: str):
        hit = self._load().get((digest, scheme))
        if hit is not None:
            self.hits += 1
        return hit

    def put(self, digest: str, scheme: str, outputs) -> None:
        """Keep a golden this run computed (up to MAX_BYTES of them)."""
        n = _nbytes(outputs)
        if self._new_bytes + n <= MAX_BYTES:
            self._new[(digest, scheme)] = [a.copy() for a in outputs]
            self._new_bytes += n

    def save(self) -> Path | None:
        """Write the file when this run computed new goldens: the file as it is now on disk (another
        process may have added to it) plus this run's, or this run's alone past MAX_BYTES."""
        if not self._new:
            return None
        old = _read(self.path)
        size_old = sum(_nbytes(v) for v in old.values())
        goldens = {**old, **self._new} if size_old + self._new_bytes <= MAX_BYTES else dict(self._new)
        payload = pickle.dumps(goldens, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
            os.replace(tmp, self.path)
        except OSError:
            return None
        self._old, self._new, self._new_bytes = goldens, {}, 0
        return self.path
