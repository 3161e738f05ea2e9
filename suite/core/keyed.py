"""The per-user secret key and the HMAC helpers of every on-disk cache.

A cache entry on disk is data, never code, and it carries an HMAC-SHA256 under a secret key
that only this user can read: an entry written by anyone else (another user of a shared
folder, a file copied in, a forger who recomputed a plain checksum) does not verify, so it is
ignored and computed again; it can never change a verdict.

The key is 32 random bytes in one file, by default ``$QCONFORM_KEY_FILE``, else
``~/.cache/qconform/key``. :func:`user_key` creates it on first use (mode 0600, atomically:
the loser of two concurrent creators reads the winner's) and refuses a file that is not safe:
not a regular file (a symlink, a folder, a FIFO), not owned by this user, readable or writable
by group or others, or not exactly 32 bytes long. A refusal raises :class:`KeyProblem` with
the reason; the caller then turns its cache off and says why once (it is data, not a
warning raised here). Nothing in this module repairs or replaces an unsafe key file.

:func:`mac` hashes length-prefixed parts, so the boundary between two parts cannot be moved
(``("ab", "c")`` and ``("a", "bc")`` have different MACs); :func:`verify` compares in constant
time. This module imports only the standard library.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

KEY_ENV = "QCONFORM_KEY_FILE"
KEY_BYTES = 32


class KeyProblem(Exception):
    """The key file cannot be used (the cache that needs it is off); ``reason`` says why."""

    def __init__(self, path: Path, reason: str):
        super().__init__(f"key file {path}: {reason}")
        self.path = Path(path)
        self.reason = reason


def key_path() -> Path:
    """The key file: ``$QCONFORM_KEY_FILE``, else ``~/.cache/qconform/key``."""
    value = os.environ.get(KEY_ENV)
    if value and value.strip():
        return Path(value).expanduser()
    return Path.home() / ".cache" / "qconform" / "key"


def user_key(path: Path | None = None) -> bytes:
    """The user's secret key (32 bytes) from ``path`` (default :func:`key_path`), the file
    created first if it does not exist.

    Raises :class:`KeyProblem` (never returns None) when the file is unsafe or cannot be read
    or created: callers catch it and run with their cache off, reporting ``str(problem)``.
    """
    path = Path(path) if path is not None else key_path()
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    _create_key(path)
    try:
        return _read_key(path)
    except FileNotFoundError:
        raise KeyProblem(path, "vanished right after it was created") from None


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)   # a FIFO planted at the path must not block the open


class FileRefused(OSError):
    """A file :func:`read_regular` does not read: ``why``; ``size`` when it is too big."""

    def __init__(self, why: str, size: int | None = None):
        super().__init__(why)
        self.why, self.size = why, size


def read_regular(path, limit: int, check=None, follow: bool = False) -> bytes:
    """The bytes of the regular file at ``path``, at most ``limit`` of them: a symbolic link is
    not followed (``follow``: it is, to what it names, which must be a regular file), a FIFO never blocks, and ``check(stat)`` (a reason, or None) judges the very
    file opened. Raises FileNotFoundError, :class:`FileRefused` (not a regular file, refused by
    ``check``, bigger than ``limit``: ``size``) or another OSError."""
    fd = os.open(path, os.O_RDONLY | (0 if follow else _NOFOLLOW) | _NONBLOCK)
    try:
        st = os.fstat(fd)           # of the very file opened: no check-then-use race
        why = "is not a regular file" if not stat.S_ISREG(st.st_mode) else (check(st) if check else None)
        if why:
            raise FileRefused(why)
        if st.st_size > limit:
            raise FileRefused(f"{st.st_size} bytes, more than {limit}", st.st_size)
        data, want = b"", st.st_size + 1      # (one byte more: a file grown since fstat shows)
        while len(data) < want:
            chunk = os.read(fd, want - len(data))
            if not chunk:
                break
            data += chunk
        if len(data) > limit:       # grown since fstat
            raise FileRefused(f"more than {limit} bytes", len(data))
        return data
    finally:
        os.close(fd)


def _read_key(path: Path) -> bytes:
    try:
        data = read_regular(path, KEY_BYTES, _unsafe)
    except FileNotFoundError:
        raise
    except FileRefused as e:
        raise KeyProblem(path, f"holds {KEY_BYTES + 1}+ bytes, not {KEY_BYTES}" if e.size is not None
                         else e.why) from None
    except OSError as e:   # ELOOP: a symbolic link (O_NOFOLLOW); EACCES; ...
        if os.path.islink(path):
            raise KeyProblem(path, "is a symbolic link, not a regular file") from None
        raise KeyProblem(path, f"cannot be read: {e.strerror or e}") from None
    if len(data) != KEY_BYTES:
        raise KeyProblem(path, f"holds {len(data)} bytes, not {KEY_BYTES}")
    return data


def _unsafe(st: os.stat_result) -> str | None:
    """Why a key file with this status must not be used, or None."""
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    if uid is not None and st.st_uid != uid:
        return f"is owned by uid {st.st_uid}, not by this user (uid {uid})"
    if st.st_mode & 0o077:
        return (f"has mode {stat.S_IMODE(st.st_mode):04o}: group or others may access it "
                f"(chmod 600 it, or delete it to get a new key)")
    return None


def _create_key(path: Path) -> None:
    """Write a new key at ``path`` unless one appears there first (then keep that one).

    The bytes go to a private temporary file first (O_CREAT|O_EXCL, mode 0600), which is then
    hard-linked to ``path``: the link fails if ``path`` exists, so two creators never mix
    their keys and no reader ever sees a half-written key. Where hard links are not
    supported, ``path`` itself is created with O_CREAT|O_EXCL."""
    try:
        if not path.parent.is_dir():
            path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
    except OSError as e:
        raise KeyProblem(path, f"its folder cannot be created: {e.strerror or e}") from None
    key = secrets.token_bytes(KEY_BYTES)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        _write_new(tmp, key)
    except OSError as e:
        raise KeyProblem(path, f"cannot be created: {e.strerror or e}") from None
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass                        # a concurrent creator won: its key is the key
    except OSError:                 # no hard links here (some network / FUSE file systems)
        try:
            _write_new(path, key)
        except FileExistsError:
            pass
        except OSError as e:
            raise KeyProblem(path, f"cannot be created: {e.strerror or e}") from None
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _write_new(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    try:
        if hasattr(os, "fchmod"):
            os.fchmod(fd, 0o600)   # whatever the umask
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        try:
            os.unlink(path)
        except OSError:
            pass
        raise
    os.close(fd)


# ----------------------------------------------------------------------------- MACs

def _update(h, part) -> None:
    if isinstance(part, str):
        part = part.encode("utf-8")
    n = memoryview(part).nbytes
    h.update(n.to_bytes(8, "big"))
    h.update(part)


def mac(key: bytes, *parts: bytes | str) -> str:
    """HMAC-SHA256 (64 hex digits) under ``key`` of ``parts``, each prefixed by its length
    (8 bytes, big-endian). A part is text (hashed as UTF-8) or any C-contiguous buffer
    (bytes, memoryview, a contiguous NumPy array: hashed without a copy)."""
    if not isinstance(key, (bytes, bytearray)) or not key:
        raise ValueError("mac() needs a non-empty key")
    h = hmac.new(bytes(key), digestmod=hashlib.sha256)
    for p in parts:
        _update(h, p)
    return h.hexdigest()


def verify(key: bytes, expected_hex: str, *parts: bytes | str) -> bool:
    """Whether ``expected_hex`` is :func:`mac` of ``parts`` under ``key`` (constant-time
    comparison; anything that is not a 64-digit hex string is simply False)."""
    if isinstance(expected_hex, bytes):
        try:
            expected_hex = expected_hex.decode("ascii")
        except UnicodeDecodeError:
            return False
    if not isinstance(expected_hex, str) or len(expected_hex) != 64 or not expected_hex.isascii():
        return False
    return hmac.compare_digest(mac(key, *parts), expected_hex.lower())
