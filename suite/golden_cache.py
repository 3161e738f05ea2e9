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
that cannot be read is ignored (and replaced). At most ``MAX_BYTES`` of goldens are kept:
past that, the file keeps the last run's.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path
from typing import Any

FORMAT = "qconform-golden-cache/1"
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


class GoldenCache:
    def __init__(self, folder: Path):
        self.path = Path(folder) / f"{version()}.pkl"
        self._old: dict[tuple[str, str], Any] | None = None
        self._new: dict[tuple[str, str], Any] = {}
        self.hits = 0

    def _load(self) -> dict:
        if self._old is None:
            self._old = {}
            try:
                with open(self.path, "rb") as f:
                    doc = pickle.load(f)
                if isinstance(doc, dict) and doc.get("format") == FORMAT and isinstance(doc.get("goldens"), dict):
                    self._old = doc["goldens"]
            except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError, AttributeError,
                    ImportError, IndexError, KeyError):
                pass   # absent or unreadable: computed again, and the file rewritten at the end
        return self._old

    def get(self, digest: str, scheme: str):
        hit = self._load().get((digest, scheme))
        if hit is not None:
            self.hits += 1
        return hit

    def put(self, digest: str, scheme: str, outputs) -> None:
        self._new[(digest, scheme)] = [a.copy() for a in outputs]

    def save(self) -> Path | None:
        """Write the file when this run computed new goldens; the path, or None."""
        if not self._new:
            return None
        old = self._load()
        size_new = sum(_nbytes(v) for v in self._new.values())
        size_old = sum(_nbytes(v) for v in old.values())
        goldens = {**old, **self._new} if size_old + size_new <= MAX_BYTES else dict(self._new)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            with open(tmp, "wb") as f:
                pickle.dump({"format": FORMAT, "goldens": goldens}, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.path)
        except OSError:
            return None
        self._old, self._new = goldens, {}
        return self.path
