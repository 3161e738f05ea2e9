"""Reading the files users hand the suite: TOML (tolerances, waivers, device profiles), case and
failure files, run folders' run.json, encodings, certificates, models.

One place turns every way a file can be unreadable into one QconformError that names the file,
the option it came from and the rule: only a regular file is read (a FIFO, a device such as
/dev/zero or a folder is refused without blocking: the open does not wait for a FIFO's writer),
and never more than its kind's bound in :data:`LIMITS`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (spec.py and findings.py take tomllib from here)
    import tomli as tomllib  # type: ignore

from suite.core.errors import QconformError


MiB = 1 << 20
#: the largest file of each kind the suite reads, in bytes
LIMITS = {
    "toml": 4 * MiB,          # tolerance, waivers, device profiles: hand-written tables
    "case": 256 * MiB,        # a case or failure file (a real model's layer: weights as JSON numbers)
    "run": 64 * MiB,          # a run folder's run.json, a certificate
    "encodings": 256 * MiB,   # an AIMET encodings file
    "model": 2048 * MiB,      # a .tflite or .onnx (protobuf's own limit is 2 GiB)
}
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def read_bytes(path: str | Path, what: str, option: str | None = None, kind: str = "case") -> bytes:
    """The bytes of the regular file ``path``, at most ``LIMITS[kind]``; else one QconformError
    (``what`` names the file in messages, ``option`` the option or field it came from)."""
    src, limit = str(path), LIMITS[kind]
    try:
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError) as e:   # ValueError: a NUL in the name
        raise QconformError(f"cannot read {what}: {getattr(e, 'strerror', None) or e}", source=src[:300],
                            field=option) from None
    try:
        st = os.fstat(fd)   # of the very file opened (a symbolic link is followed to what it names)
        if not stat.S_ISREG(st.st_mode):
            raise QconformError(f"{what} is {_kind(st.st_mode)}, not a regular file", source=src, field=option,
                                rule="a regular file")
        if st.st_size > limit:
            raise QconformError(f"{what} holds {st.st_size} bytes, more than {limit}", source=src, field=option,
                                rule=f"a {kind} file is at most {limit // MiB} MiB")
        chunks, n = [], 0
        while n <= limit:   # a file that grows while read (or /proc's, of size 0) is still bounded
            chunk = os.read(fd, min(limit + 1 - n, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            n += len(chunk)
        if n > limit:
            raise QconformError(f"{what} holds more than {limit} bytes", source=src, field=option,
                                rule=f"a {kind} file is at most {limit // MiB} MiB")
        return b"".join(chunks)
    except OSError as e:
        raise QconformError(f"cannot read {what}: {e.strerror or e}", source=src, field=option) from None
    finally:
        os.close(fd)


def read_text(path: str | Path, what: str, option: str | None = None, kind: str = "case") -> str:
    """:func:`read_bytes` as UTF-8 text."""
    try:
        return read_bytes(path, what, option, kind).decode("utf-8")
    except UnicodeDecodeError:
        raise QconformError(f"{what} is not UTF-8 text", source=str(path), field=option, rule="UTF-8 text") from None


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def load_toml(path: str | Path, what: str, option: str, fmt: str | None = None) -> dict[str, Any]:
    """The parsed TOML of ``path``; ``what`` names the file in messages ("tolerance file"),
    ``option`` the command-line option it came from; ``fmt`` checks the ``format`` tag."""
    src = str(path)
    text = read_bytes(path, what, option, "toml")
    try:
        raw = tomllib.loads(text.decode("utf-8"))
    except UnicodeDecodeError:
        raise QconformError("not UTF-8 text", source=src, rule="TOML syntax") from None
    except tomllib.TOMLDecodeError as e:
        raise QconformError(f"not valid TOML: {e}", source=src, rule="TOML syntax") from None
    except (ValueError, RecursionError) as e:   # a number of > 4300 digits, nesting beyond the stack
        raise QconformError(f"not valid TOML: {str(e).split(';')[0]}", source=src, rule="TOML syntax") from None
    if fmt is not None and raw.get("format") != fmt:
        raise QconformError(f"must be \"{fmt}\" (got {raw.get('format')!r})", source=src,
                            field="format", rule="format tag")
    return raw
