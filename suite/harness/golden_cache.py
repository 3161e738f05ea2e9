"""Goldens (and generated case sets) kept between runs, so a nightly with the same cases
computes none of them again.

One file per version of the golden: ``<folder>/<version>.pkl`` holds
``{(case digest, scheme): [output arrays]}``. The version is the SHA-256 of the golden's
own source (every ``reference/**/*.py`` and ``*.c``, and ``suite/dtypes.py``, the only suite module it
reads), the NumPy version and this file's format, and the case digest hashes every byte of
the case: an entry is exactly what the current code computes for that very case, and any
change to the golden's code starts a new file. Only goldens that were computed are stored
(never a target's output); a golden that raised is computed again each time.

Folder: ``--golden-cache DIR``, else ``$QCONFORM_GOLDEN_CACHE``, else
``~/.cache/qconform/golden``; ``off`` turns it off. The file is read at the first golden
of a run and written at its end (atomically) when the run computed new goldens; a file
that cannot be read or fails its checksum is ignored (and replaced). A run keeps at most
``MAX_BYTES`` of new goldens, and the file at most that much: past it, the last run's.

The same folder keeps the generated case sets (:func:`cached_cases`): the default cases of
a seed, ``--cases-per-op`` and op list, under the version of the generator's code, so a run
that changes nothing reads its ~1,500 cases (4 MB) in 0.04 s instead of making them in 0.4 s.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

FORMAT = "qconform-golden-cache/1"   # also in the version hash
MAX_BYTES = 128 << 20
ROOT = Path(__file__).resolve().parents[2]


def folder_of(option: str | None) -> Path | None:
    """The cache folder for ``--golden-cache`` (None: off)."""
    val = option or os.environ.get("QCONFORM_GOLDEN_CACHE") or str(Path.home() / ".cache" / "qconform" / "golden")
    return None if val.strip().lower() == "off" else Path(val).expanduser()


def golden_files() -> list[Path]:
    """The files the golden is made of: ``reference/**/*.py``, its C file(s) and ``suite/dtypes.py``."""
    return sorted(p for p in (ROOT / "reference").rglob("*") if p.suffix in (".py", ".c")
                  and "__pycache__" not in p.parts) + [ROOT / "suite" / "core" / "dtypes.py"]


_VERSIONS: dict[str, str] = {}   # name -> version, computed once per process


def _files_version(name: str, head: str, files) -> str:
    """SHA-256 (24 hex digits) of ``head`` and each file's path (from the project root) and bytes;
    ``files()`` is called once per process, the result kept under ``name``."""
    if name not in _VERSIONS:
        h = hashlib.sha256(head.encode())
        for p in files():
            h.update(str(p.relative_to(ROOT)).encode() + b"\0" + p.read_bytes() + b"\0")
        _VERSIONS[name] = h.hexdigest()[:24]
    return _VERSIONS[name]


def version() -> str:
    """The golden's version: its source, NumPy's version and this format."""
    import numpy as np
    return _files_version("golden", f"{FORMAT}\0numpy {np.__version__}\0", golden_files)


def _nbytes(arrays) -> int:
    return sum(getattr(a, "nbytes", 0) for a in arrays)


MAGIC = FORMAT.encode() + b"\n"


def _read(path: Path, magic: bytes) -> dict:
    """The dict a cache file holds; {} if it is absent, damaged or of another format. The file is
    ``magic``, the SHA-256 of the payload (hex, one line) and the payload (a pickle): a damaged
    file fails the checksum before anything is unpickled."""
    try:
        raw = path.read_bytes()
    except OSError:
        return {}
    head = len(magic) + 65
    if not raw.startswith(magic) or len(raw) < head:
        return {}
    digest, payload = raw[len(magic):head - 1], raw[head:]
    if hashlib.sha256(payload).hexdigest().encode() != digest:
        return {}
    try:
        goldens = pickle.loads(payload)
    except Exception:
        return {}
    return goldens if isinstance(goldens, dict) else {}


class _Store:
    """Entries kept between runs in one file: read at the first lookup, written at :meth:`save`
    when this run added some: the file as it is on disk then (another process may have added to
    it) plus this run's, or this run's alone past ``limit`` (counted by ``size(value)``)."""

    def __init__(self, path: Path, magic: bytes, limit: int, size):
        self.path, self._magic, self._limit, self._size = path, magic, limit, size
        self._old: dict | None = None
        self._stat = None   # the file's (inode, size, mtime) when self._old was read
        self._new: dict = {}
        self._new_size = 0
        self.hits = 0

    def _file_stat(self):
        try:
            st = self.path.stat()
        except OSError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def _load(self) -> dict:
        self._stat = self._file_stat()
        self._old = _read(self.path, self._magic)
        return self._old

    def _lookup(self, key):
        if self._old is None:
            self._load()
        hit = self._old.get(key)
        if hit is not None:
            self.hits += 1
        return hit

    def _keep(self, key, value) -> None:
        n = self._size(value)
        if self._new_size + n <= self._limit:
            self._new[key] = value
            self._new_size += n

    def save(self) -> Path | None:
        if not self._new:
            return None
        # the file as it is now: read again only if another process replaced it since
        old = self._old if self._old is not None and self._file_stat() == self._stat else self._load()
        size_old = sum(self._size(v) for v in old.values())
        keep = {**old, **self._new} if size_old + self._new_size <= self._limit else dict(self._new)
        if not _write(self.path, self._magic, keep):
            return None
        self._old, self._new, self._new_size = keep, {}, 0
        self._stat = self._file_stat()
        return self.path


class GoldenCache(_Store):
    """Goldens under (case digest, scheme), in ``<version>.pkl``; at most MAX_BYTES of outputs."""

    def __init__(self, folder: Path):
        super().__init__(Path(folder) / f"{version()}.pkl", MAGIC, MAX_BYTES, _nbytes)

    def get(self, digest: str, scheme: str):
        return self._lookup((digest, scheme))

    def put(self, digest: str, scheme: str, outputs) -> None:
        """Keep a golden this run computed."""
        self._keep((digest, scheme), [a.copy() for a in outputs])


def _write(path: Path, magic: bytes, obj) -> bool:
    """``obj`` pickled into ``path`` atomically, after ``magic`` and the payload's SHA-256."""
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(magic + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
        os.replace(tmp, path)
        return True
    except OSError:
        return False


# ----------------------------------------------------------------------------- cause analyses

ANALYSIS_MAGIC = b"qconform-analysis-cache/1\n"   # also in the analysis version
MAX_ANALYSES = 200_000   # entries in the file, at most (50 B for an exact result to ~1 KB: ~10-200 MB)


def analysis_version() -> str:
    """The cause analysis' version: the golden's (every scheme's golden is an input), the
    analysis and comparison code (``reports/causes.py``, ``suite/compare.py``)."""
    return _files_version("analysis", f"{ANALYSIS_MAGIC!r}\0{version()}\0",
                          lambda: [ROOT / "reports" / "causes.py", ROOT / "suite" / "core" / "compare.py"])


class AnalysisCache(_Store):
    """Cause analyses kept between runs (``Run._analyse``): the analysis of a result is a function
    of the case, the run's scheme and the target's errors (got - want) alone, so it is kept under
    (case digest, scheme, SHA-256 of the errors) in ``analysis-<version>.pkl`` next to the goldens.
    A target whose outputs did not change since the last run costs no analysis; any other output
    is analysed afresh."""

    def __init__(self, folder: Path):
        super().__init__(Path(folder) / f"analysis-{analysis_version()}.pkl", ANALYSIS_MAGIC, MAX_ANALYSES,
                         lambda fields: 1)

    @staticmethod
    def key(digest: str, scheme: str, errors) -> tuple[str, str, str]:
        import numpy as np
        h = hashlib.sha256()
        for e in errors:
            h.update(f"{e.dtype.str}{e.shape}".encode() + b"\0")
            h.update(np.ascontiguousarray(e))   # (the bytes of e.tobytes(), without a copy when contiguous)
        return digest, scheme, h.hexdigest()

    def get(self, key):
        return self._lookup(key)

    def put(self, key, fields: dict) -> None:
        self._keep(key, fields)


# ----------------------------------------------------------------------------- generated case sets

CASES_FORMAT = "qconform-case-set/1"
CASES_MAGIC = CASES_FORMAT.encode() + b"\n"
CASE_SETS_KEPT = 8   # case-set files kept in the folder (the most recently written)


def cases_version() -> str:
    """The case generator's version: every ``suite/**/*.py``, the spec tables and the golden's
    source (``reference/**/*.py`` and ``*.c``), NumPy's version (its random generators) and this format."""
    import numpy as np
    return _files_version("cases", f"{CASES_FORMAT}\0numpy {np.__version__}\0",
                          lambda: sorted(p for d in ("suite", "reference") for p in (ROOT / d).rglob("*")
                                         if p.is_file() and p.suffix in (".py", ".c", ".toml", ".json")
                                         and "__pycache__" not in p.parts))


def cached_cases(folder: Path | None, ops: list[str] | None, cases_per_op: int, seed: int, generate):
    """``generate()`` (the default case set of ``ops`` (None: every op with a generator),
    ``cases_per_op`` and ``seed``), read from
    ``folder`` when an earlier run of the same generator code made the same set, else made and
    stored there (atomically, with a checksum like the goldens). The file is named by the
    generator's version and the arguments, and holds them too: a file of anything else, a
    damaged or unreadable one, is ignored and replaced."""
    if folder is None:
        return generate()
    key = [CASES_FORMAT, cases_version(), None if ops is None else list(ops), int(cases_per_op), int(seed)]
    name = hashlib.sha256(repr(key).encode()).hexdigest()[:24]
    path = Path(folder) / f"cases-{name}.pkl"
    got = _read(path, CASES_MAGIC)
    if got.get("key") == key and isinstance(got.get("cases"), list):
        return got["cases"]
    cases = generate()
    if _write(path, CASES_MAGIC, {"key": key, "cases": cases}):
        try:
            old = sorted(Path(folder).glob("cases-*.pkl"), key=lambda p: p.stat().st_mtime, reverse=True)
            for p in old[CASE_SETS_KEPT:]:
                p.unlink()
        except OSError:
            pass
    return cases
