"""Reading the files users hand the suite: TOML (tolerances, waivers, device profiles), case and
failure files, run folders' run.json, encodings, certificates, models.

One place turns every way a file can be unreadable into one QconformError that names the file,
the option it came from and the rule: only a regular file is read (a FIFO, a device such as
/dev/zero or a folder is refused without blocking: the open does not wait for a FIFO's writer),
and never more than its kind's bound in :data:`LIMITS`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (spec.py and findings.py take tomllib from here)
    import tomli as tomllib  # type: ignore

from suite.core import keyed
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


def read_bytes(path: str | Path, what: str, option: str | None = None, kind: str = "case",
               limit: int | None = None) -> bytes:
    """The bytes of the regular file ``path`` (a symbolic link is followed: a linked case file is a
    case file), at most ``LIMITS[kind]`` (or ``limit``), read by :func:`suite.core.keyed.read_regular`;
    else one QconformError (``what`` names the file in messages, ``option`` the option or field it
    came from)."""
    src, limit = str(path), LIMITS[kind] if limit is None else limit
    try:
        return keyed.read_regular(path, limit, follow=True)
    except keyed.FileRefused as e:
        raise QconformError(f"{what}: {e.why}", source=src[:300], field=option,
                            rule=f"a regular file of at most {limit:,} bytes") from None
    except (OSError, ValueError) as e:   # ValueError: a NUL in the name
        raise QconformError(f"cannot read {what}: {getattr(e, 'strerror', None) or e}", source=src[:300],
                            field=option) from None


def read_text(path: str | Path, what: str, option: str | None = None, kind: str = "case") -> str:
    """:func:`read_bytes` as UTF-8 text."""
    try:
        return read_bytes(path, what, option, kind).decode("utf-8")
    except UnicodeDecodeError:
        raise QconformError(f"{what} is not UTF-8 text", source=str(path), field=option, rule="UTF-8 text") from None


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
