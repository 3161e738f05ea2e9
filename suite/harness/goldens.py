"""Goldens kept between runs: data only, keyed by case and golden source, authenticated.

A run that meets a case an earlier run already judged reads the case's goldens instead of
computing them again. The store only keeps what the harness computed with
``reference.golden(case, scheme)``; it never computes, and it never unpickles anything.

Layout: ``<folder>/<golden_version()>/<digest[:2]>/<digest>.qg``, one file per case (its
digest, ``Case.digest()``) holding every scheme computed so far for that case. Each array
``<scheme>/<k>`` is output ``k`` of the golden under ``scheme`` (any shape, 0-d and empty
included; dtype kinds b, i, u, f, c only: object, string, void and time dtypes are refused).

An entry file (:func:`_encode`, :func:`_decode`) is three parts, read with one ``os.read``:

1. the line :data:`MAGIC` (``qconform-goldens/3``);
2. a one-line JSON header ``{"mac": HEX, "arrays": [[name, dtype.str, shape, offset, nbytes],
   ...]}`` (arrays in sorted name order), padded with spaces so that the line (its ``\\n``
   included) ends at a multiple of :data:`ALIGN` bytes from the start of the file;
3. the payload: each array's raw bytes in C order, the first at offset 0 of the payload, each
   next one at the first multiple of :data:`ALIGN` after the previous one's end (zero bytes
   between), nothing after the last.

``mac`` is the HMAC-SHA256 (hex) under the user's key (:mod:`suite.core.keyed`) of
:func:`mac_parts`: :data:`FORMAT`, the golden version, the digest, a manifest (for each array
in sorted name order its name, ``dtype.str`` and shape: ``"2,3"``, ``""`` for 0-d), then each
array's raw bytes. The MAC is checked after the layout (a file that is not well formed is
damaged, not forged); the header's offsets are not in it, as they are implied by the rest.

The arrays handed out are read-only views of the bytes read (a copy only where a view would
not be aligned for its dtype). An entry that cannot be read or is not exactly as above
(wrong magic, a malformed header, a dtype not kept, sizes or offsets that do not add up,
names that are not exactly outputs 0..n-1 of each scheme) is *damaged*; one whose MAC does not
verify (forged, written under another user's key, copied from another case, or stale) is
*forged*. Either is ignored: :meth:`GoldenStore.get` returns None, the harness computes the
golden again and :meth:`GoldenStore.put` replaces the file. Each distinct problem is kept once
in ``GoldenStore.problems`` for the harness to print; nothing here warns or raises about the
disk. Entries of earlier formats (``.npz``, format 2) are never read: :data:`FORMAT` is part
of the version, so they sit in older version folders, pruned like any other.

The version (:func:`golden_version`) hashes the golden's source (``reference/**/*.py`` and
``*.c``, ``suite/core/*.py``), NumPy's version and :data:`FORMAT`: any change to the golden's
code starts a new version folder; when one is created, version folders of the same cache
unused for :data:`PRUNE_AFTER_S` (7 days) are removed (a store marks its version folder used
when it opens it).

Writes go to a private temporary file in the entry's folder, then ``os.replace``: two
processes writing the same case never leave a torn file (the last writer wins). A full or
read-only disk, or a folder that cannot be made, only adds a line to ``problems``.

Folder: ``--golden-cache DIR``, else ``$QCONFORM_GOLDEN_CACHE``, else
``~/.cache/qconform/golden``; ``off`` turns it off (:func:`folder_of`).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import stat
import tempfile
import time
from pathlib import Path

import numpy as np

from suite.core.keyed import FileRefused, KeyProblem, mac, read_regular, user_key, verify

FORMAT = "qconform-goldens/3 qg+hmac-sha256"   # in the version and in every entry's MAC
MAGIC = b"qconform-goldens/3\n"    # an entry file's first line
SUFFIX = ".qg"
ALIGN = 16                         # the payload and each array in it start at a multiple of this
ROOT = Path(__file__).resolve().parents[2]
ENV = "QCONFORM_GOLDEN_CACHE"
PRUNE_AFTER_S = 7 * 86400          # version folders unused this long go when a new one is made
MAX_ENTRY_BYTES = 1 << 30          # a bigger entry file is not read (it is not one of ours)
KINDS = "biufc"                    # dtype kinds kept: bool, signed, unsigned, float, complex

_DIGEST = re.compile(r"[0-9a-f]{2,128}")
_SCHEME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}")
_NAME = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.+-]{0,127})/(0|[1-9][0-9]{0,8})")   # <scheme>/<k>
_DTYPE_STR = re.compile(r"[<>|][biufc][0-9]{1,2}")
_VERSION_DIR = re.compile(r"[0-9a-f]{24}")


def folder_of(option: str | None) -> Path | None:
    """The cache folder of ``--golden-cache`` (the option, else ``$QCONFORM_GOLDEN_CACHE``,
    else ``~/.cache/qconform/golden``); None when the value is ``off``."""
    val = option or os.environ.get(ENV) or str(Path.home() / ".cache" / "qconform" / "golden")
    return None if val.strip().lower() == "off" else Path(val).expanduser()


def golden_files() -> list[Path]:
    """The files the golden is made of: ``reference/**/*.py`` and ``*.c`` and ``suite/core/*.py``
    (the golden imports core modules), sorted by their path from the project root."""
    ref = [p for p in (ROOT / "reference").rglob("*")
           if p.suffix in (".py", ".c") and "__pycache__" not in p.parts and p.is_file()]
    core = [p for p in (ROOT / "suite" / "core").glob("*.py") if p.is_file()]
    return sorted(ref + core, key=lambda p: p.relative_to(ROOT).as_posix())


_VERSION: str | None = None   # computed once per process


def golden_version() -> str:
    """SHA-256 (24 hex digits) of :data:`FORMAT`, NumPy's version and each of
    :func:`golden_files` (path and bytes), every part length-prefixed."""
    global _VERSION
    if _VERSION is None:
        h = hashlib.sha256()
        for part in [FORMAT.encode(), f"numpy {np.__version__}".encode()]:
            _feed(h, part)
        for p in golden_files():
            _feed(h, p.relative_to(ROOT).as_posix().encode())
            _feed(h, p.read_bytes())
        _VERSION = h.hexdigest()[:24]
    return _VERSION


def _feed(h, data: bytes) -> None:
    h.update(len(data).to_bytes(8, "big"))
    h.update(data)


# ----------------------------------------------------------------------------- entries

class _Bad(Exception):
    """An entry file that must be ignored; ``problem`` is its line for ``problems``."""

    def __init__(self, problem: str):
        super().__init__(problem)
        self.problem = problem


def _raw(a: np.ndarray) -> np.ndarray:
    """The array's bytes in C order, as a contiguous uint8 array (no copy when already C)."""
    if not a.flags.c_contiguous:
        a = np.array(a, order="C")
    return a.reshape(-1).view(np.uint8)


def _shape_text(shape) -> str:
    return ",".join(str(n) for n in shape)


def mac_parts(version: str, digest: str, arrays: dict[str, np.ndarray]) -> list:
    """What an entry's MAC covers (:func:`suite.core.keyed.mac` of these parts):
    :data:`FORMAT`, the golden version, the case digest, the manifest (one line
    ``<name> <dtype.str> <shape>`` per array in sorted name order, shape as ``"2,3"``, ``""``
    for 0-d) and then each array's raw bytes (C order) in the same order."""
    names = sorted(arrays)
    manifest = "\n".join(f"{n} {arrays[n].dtype.str} {_shape_text(arrays[n].shape)}" for n in names)
    return [FORMAT, version, digest, manifest, *(_raw(arrays[n]) for n in names)]


def _flatten(goldens: dict[str, list[np.ndarray]]) -> dict[str, np.ndarray]:
    """``{scheme: [outputs]}`` as ``{"<scheme>/<k>": array}``; a bad scheme name or output
    is the caller's error (ValueError / TypeError)."""
    arrays: dict[str, np.ndarray] = {}
    for scheme, outputs in goldens.items():
        if not isinstance(scheme, str) or not _SCHEME.fullmatch(scheme):
            raise ValueError(f"scheme name {scheme!r} cannot name a golden entry "
                             "(letters, digits, '_', '.', '+', '-')")
        if isinstance(outputs, np.ndarray) or not isinstance(outputs, (list, tuple)):
            raise TypeError(f"the goldens of scheme {scheme!r} must be a list of arrays, "
                            f"not {type(outputs).__name__}")
        for k, out in enumerate(outputs):
            a = np.asarray(out)
            if a.dtype.kind not in KINDS:
                raise TypeError(f"golden {scheme}/{k} has dtype {a.dtype}: only numeric arrays are kept")
            arrays[f"{scheme}/{k}"] = a
    return arrays


def _aligned(n: int) -> int:
    """``n`` rounded up to a multiple of :data:`ALIGN`."""
    return n + (-n % ALIGN)


def _encode(arrays: dict[str, np.ndarray], tag: str) -> bytes:
    """The bytes of the entry file holding ``arrays`` (``{"<scheme>/<k>": array}``, numeric)
    with the MAC ``tag`` (see the module docstring)."""
    records: list = []
    chunks: list = []
    end = 0
    for name in sorted(arrays):
        a = arrays[name]
        raw = _raw(a)
        off = _aligned(end)
        if off > end:
            chunks.append(bytes(off - end))
        chunks.append(raw)
        records.append([name, a.dtype.str, list(a.shape), off, raw.nbytes])
        end = off + raw.nbytes
    line = MAGIC + json.dumps({"mac": tag, "arrays": records}, separators=(",", ":")).encode("ascii")
    line += b" " * (-(len(line) + 1) % ALIGN) + b"\n"
    return b"".join([line, *chunks])


_DTYPES: dict[str, np.dtype] = {}   # dtype.str -> dtype, for the dtypes kept


def _dtype_of(text) -> np.dtype | None:
    """The dtype whose ``.str`` is ``text`` if it is one of the kinds kept, else None."""
    if type(text) is not str:
        return None
    dt = _DTYPES.get(text)
    if dt is None:
        if not _DTYPE_STR.fullmatch(text):
            return None
        try:
            dt = np.dtype(text)
        except (TypeError, ValueError):
            return None
        if dt.kind not in KINDS or dt.hasobject or dt.str != text:
            return None
        _DTYPES[text] = dt
    return dt


def _decode(path: str, data: bytes) -> tuple[object, dict[str, list[np.ndarray]], list]:
    """``(mac, goldens, parts)`` of the entry file ``data``: the MAC as written (unchecked),
    ``{scheme: [read-only outputs]}`` and what its MAC must cover (:func:`mac_parts` after
    the version and digest). Raises :class:`_Bad` (damaged) when ``data`` is not exactly an
    entry as the module docstring describes. Nothing is unpickled: only numeric dtypes are
    made, from raw bytes."""
    def bad(why: str) -> _Bad:
        return _Bad(f"damaged golden entry at {path}: {why}")

    if not data.startswith(MAGIC):
        raise bad(f"not a golden entry file (no {MAGIC[:-1].decode()} line)")
    nl = data.find(b"\n", len(MAGIC))
    if nl < 0:
        raise bad("no header line")
    start = nl + 1                        # the payload
    if start % ALIGN:
        raise bad("the header is not padded")
    try:
        head = json.loads(data[len(MAGIC):nl])
    except (ValueError, RecursionError) as e:    # UnicodeDecodeError is a ValueError
        raise bad(f"the header is not JSON ({type(e).__name__})") from None
    if type(head) is not dict or head.keys() != {"mac", "arrays"} or type(head["arrays"]) is not list:
        raise bad("the header is not {mac, arrays}")
    size = len(data) - start
    view = memoryview(data)
    per: dict[str, dict[int, np.ndarray]] = {}
    lines: list[str] = []
    raws: list = []
    end = 0
    last = ""
    for rec in head["arrays"]:
        if type(rec) is not list or len(rec) != 5:
            raise bad("an array record is not [name, dtype, shape, offset, nbytes]")
        name, dts, shape, off, n = rec
        m = _NAME.fullmatch(name) if type(name) is str else None
        if m is None:
            raise bad(f"array name {str(name)[:80]!r} is not <scheme>/<k>")
        if name <= last:
            raise bad(f"array {name} out of order or twice")
        last = name
        dt = _DTYPES.get(dts) if type(dts) is str else None
        if dt is None and (dt := _dtype_of(dts)) is None:
            raise bad(f"array {name} has dtype {str(dts)[:40]!r}: only numeric arrays are kept")
        if type(shape) is not list or len(shape) > 64:
            raise bad(f"array {name} has shape {str(shape)[:80]}")
        for d in shape:
            if type(d) is not int or d < 0:
                raise bad(f"array {name} has shape {str(shape)[:80]}")
        count = math.prod(shape)
        if type(n) is not int or n != count * dt.itemsize:
            raise bad(f"array {name}: {str(n)[:40]} bytes do not hold {dt.str} of shape {tuple(shape)}")
        at = end + (-end % ALIGN)
        if type(off) is not int or off != at:
            raise bad(f"array {name} at offset {str(off)[:40]}, not {at}")
        if at + n > size:
            raise bad(f"truncated: array {name} ends at byte {at + n} of a payload of {size}")
        end = at + n
        try:
            if count:
                a = np.frombuffer(data, dt, count, start + at)       # read-only: data is bytes
                if len(shape) != 1:
                    a = a.reshape(shape)
                if not a.flags.aligned:
                    a = a.copy()
                    a.flags.writeable = False
            else:
                a = np.zeros(shape, dt)
                a.flags.writeable = False
        except ValueError as e:      # an empty shape NumPy cannot make (too many or too big dimensions)
            raise bad(f"array {name} has shape {str(shape)[:80]}: {str(e)[:80]}") from None
        per.setdefault(m[1], {})[int(m[2])] = a
        lines.append(f"{name} {dts} {','.join(map(str, shape))}")
        raws.append(view[start + at:start + end])
    if not per:
        raise bad("no arrays")
    if end != size:
        raise bad(f"{size - end} bytes after the last array")
    goldens: dict[str, list[np.ndarray]] = {}
    for scheme, by_k in per.items():
        if max(by_k) != len(by_k) - 1:           # the k are distinct: exactly 0..n-1
            raise bad(f"the outputs of scheme {scheme} are not 0..n-1")
        goldens[scheme] = [by_k[k] for k in range(len(by_k))]
    return head["mac"], goldens, ["\n".join(lines), *raws]


def _read_file(path: str) -> bytes | None:
    """The bytes of the entry file at ``path`` (None if there is none); raises :class:`_Bad`
    when it cannot be opened or read, is not a regular file (a symbolic link is not
    followed) or is bigger than :data:`MAX_ENTRY_BYTES`."""
    try:
        return read_regular(path, MAX_ENTRY_BYTES)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except FileRefused as e:
        why = f"{e.size} bytes, more than an entry holds" if e.size is not None else "not a regular file"
        raise _Bad(f"damaged golden entry at {path}: {why}") from None
    except OSError as e:
        raise _Bad(f"damaged golden entry at {path}: cannot be opened or read ({e.strerror or e})") from None


def _write_fd(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd``."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


# ----------------------------------------------------------------------------- the store

class GoldenStore:
    """The goldens of earlier runs in ``folder`` (see the module docstring).

    ``key``: the MAC key; None reads the user's key (:func:`suite.core.keyed.user_key`, which
    creates it on first use). When the key file is unsafe the store is off: :meth:`get`
    returns None, :meth:`put` does nothing, and ``problems`` says why.

    ``problems``: one line per distinct problem met (key unsafe, damaged entry at PATH, forged
    entry at PATH, cannot write PATH), in the order met; ``hits`` and ``misses`` count
    :meth:`get` calls of a store that is on.
    """

    def __init__(self, folder: Path, key: bytes | None = None):
        self.folder = Path(folder)
        self.version = golden_version()
        self.problems: list[str] = []
        self._seen: set[str] = set()
        self.hits = 0
        self.misses = 0
        self._vdir = self.folder / self.version
        self._vdir_s = os.fspath(self._vdir)
        self._vdir_ready = False
        if key is None:
            try:
                key = user_key()
            except KeyProblem as e:
                self._problem(f"golden cache off: key unsafe: {e}")
        elif not isinstance(key, (bytes, bytearray)) or not key:
            raise ValueError("GoldenStore: key must be non-empty bytes (or None for the user's key)")
        self._key = bytes(key) if key is not None else None
        if self._key is not None:
            try:
                os.utime(self._vdir)      # mark the version folder used (see _prune)
            except OSError:
                pass

    @property
    def enabled(self) -> bool:
        return self._key is not None

    def path_of(self, digest: str) -> Path:
        """The entry file of a case digest (lowercase hex)."""
        return Path(self._path(digest))

    def get(self, digest: str) -> dict[str, list[np.ndarray]] | None:
        """Every scheme's golden outputs kept for the case ``digest``, verified (read-only
        arrays); None when there are none, the store is off, or the entry is damaged or
        forged (a problem)."""
        path = self._path(digest)
        if self._key is None:
            return None
        got = self._verified(digest, path)
        if got is None:
            self.misses += 1
        else:
            self.hits += 1
        return got

    def put(self, digest: str, goldens: dict[str, list[np.ndarray]]) -> None:
        """Keep ``goldens`` (scheme -> outputs) of the case ``digest``, with the schemes already
        kept for it (a scheme given here replaces the kept one). Never raises for the disk:
        a failed write is a line in ``problems``. A bad scheme name or a non-numeric output
        raises ValueError / TypeError (the caller's mistake)."""
        path = self._path(digest)
        new = _flatten(goldens)
        if self._key is None or not new:
            return
        old = self._verified(digest, path) or {}
        arrays = _flatten({s: outs for s, outs in old.items() if s not in goldens})
        arrays.update(new)
        self._write(path, _encode(arrays, mac(self._key, *mac_parts(self.version, digest, arrays))))

    # ---- internals
    def _path(self, digest: str) -> str:
        if not isinstance(digest, str) or not _DIGEST.fullmatch(digest):
            raise ValueError(f"not a case digest: {digest!r}")
        return os.path.join(self._vdir_s, digest[:2], digest + SUFFIX)

    def _problem(self, line: str) -> None:
        if line not in self._seen:
            self._seen.add(line)
            self.problems.append(line)

    def _verified(self, digest: str, path: str) -> dict[str, list[np.ndarray]] | None:
        try:
            data = _read_file(path)
            if data is None:
                return None
            tag, goldens, parts = _decode(path, data)
        except _Bad as bad:
            self._problem(bad.problem)
            return None
        if not verify(self._key, tag, FORMAT, self.version, digest, *parts):
            self._problem(f"forged golden entry at {path}: its MAC does not verify under this user's key "
                          "(ignored; computed again)")
            return None
        return goldens

    def _write(self, path: str, data: bytes) -> None:
        tmp = None
        try:
            self._ready()
            folder, name = os.path.split(path)
            try:
                os.mkdir(folder, 0o700)
            except FileExistsError:
                pass
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
            try:
                _write_fd(fd, data)
            finally:
                os.close(fd)
            os.replace(tmp, path)
            tmp = None
        except OSError as e:
            self._problem(f"cannot write golden entry {path}: {e.strerror or e}")
        finally:
            if tmp is not None:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass

    def _ready(self) -> None:
        """Make the version folder (and the cache folder); a store that makes it prunes the
        version folders of the cache unused for PRUNE_AFTER_S."""
        if self._vdir_ready:
            return
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            os.mkdir(self._vdir, 0o700)
            made = True
        except FileExistsError:
            made = False
        self._vdir_ready = True
        if made:
            self._prune()

    def _prune(self) -> None:
        now = time.time()
        try:
            entries = list(os.scandir(self.folder))
        except OSError:
            return
        for e in entries:
            if e.name == self.version or not _VERSION_DIR.fullmatch(e.name):
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) and now - st.st_mtime > PRUNE_AFTER_S:
                shutil.rmtree(e.path, ignore_errors=True)
