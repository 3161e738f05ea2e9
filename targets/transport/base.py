"""The transport interface, its results and errors, and ``--device`` strings.

Shared by the transports (:mod:`targets.transport.local`, ``.ssh``, ``.adb``) and
re-exported by :mod:`targets.transport`, which documents them and picks one
(:func:`targets.transport.make_transport`).
"""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence
from urllib.parse import parse_qsl

from suite.core.errors import QconformError

KINDS = ("local", "ssh", "adb")

#: settings every device string may carry
COMMON_KEYS = {"python", "root", "name", "timeout", "retries", "wait", "merge"}
KIND_KEYS = {
    "local": set(),
    "ssh": {"config", "identity", "port", "ssh", "connect_timeout"},
    "adb": {"adb", "server"},
}


class TransportError(Exception):
    """The device or the connection failed (not the command): an infrastructure error."""


@dataclass
class CommandResult:
    rc: int | None              # None when killed at the timeout
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    seconds: float = 0.0
    data: bytes = b""           # raw stdout, for verbs that stream files

    def tail(self, n: int = 600) -> str:
        text = (self.stderr.strip() or self.stdout.strip())
        return text[-n:]


@dataclass
class DeviceSpec:
    """A parsed ``--device`` value."""

    kind: str
    address: str                      # '' for local, [user@]host[:port] for ssh, serial for adb
    options: dict[str, str] = field(default_factory=dict)
    text: str = ""

    @property
    def label(self) -> str:
        """How the device is named in results rows and reports."""
        if self.options.get("name"):
            return self.options["name"]
        return f"{self.kind}:{self.address}" if self.address else self.kind

    def opt(self, key: str, default=None):
        return self.options.get(key, default)

    def float_opt(self, key: str, default: float) -> float:
        v = self.options.get(key)
        if v is None:
            return default
        try:
            x = float(v)
        except ValueError:
            raise QconformError(f"'{key}={v}' is not a number", source=self.text, field="--device",
                                rule=f"{key} is a number") from None
        if not x >= 0:   # NaN too
            raise QconformError(f"'{key}={v}' must be >= 0", source=self.text, field="--device")
        return x


def parse_device(text: str) -> DeviceSpec:
    """Parse one ``--device`` value; QconformError naming the rule on anything malformed."""
    raw = text.strip()
    if not raw:
        raise QconformError("empty device", field="--device", rule="kind:address")
    head, sep, query = raw.partition("?")
    kind, _, address = head.partition(":")
    kind = kind.strip().lower()
    if kind not in KINDS:
        raise QconformError(f"unknown device kind '{kind}' in '{raw}' (known: {', '.join(KINDS)}; "
                            f"e.g. ssh:user@host, adb:SERIAL, local)", field="--device",
                            rule="kind:address")
    options: dict[str, str] = {}
    if sep:
        try:
            pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
        except ValueError:
            raise QconformError(f"bad settings '?{query}' (expected key=value&key=value)",
                                source=raw, field="--device", rule="?key=value settings") from None
        allowed = COMMON_KEYS | KIND_KEYS[kind]
        for k, v in pairs:
            if k not in allowed:
                raise QconformError(f"unknown setting '{k}' for a {kind} device (known: "
                                    f"{', '.join(sorted(allowed))})", source=raw, field="--device",
                                    rule="known settings")
            options[k] = v
    if kind in ("ssh", "adb") and not address:
        example = "ssh:user@host" if kind == "ssh" else "adb:SERIAL"
        raise QconformError(f"'{raw}' names no {'host' if kind == 'ssh' else 'serial'} (e.g. {example})",
                            field="--device", rule="kind:address")
    if kind == "ssh" and address.startswith("-"):
        raise QconformError(f"ssh host '{address}' must not start with '-'", field="--device",
                            rule="a host name")
    if kind == "adb" and (address.startswith("-") or any(ch.isspace() for ch in address)):
        raise QconformError(f"adb serial '{address}' must not start with '-' or hold spaces",
                            field="--device", rule="an adb serial")
    spec = DeviceSpec(kind, address, options, raw)
    for key in ("timeout", "retries", "wait", "connect_timeout"):   # numbers: checked now, not per case
        spec.float_opt(key, 0.0)
    return spec


def parse_device_list(values: Sequence[str] | None) -> list[DeviceSpec]:
    """``--device`` values (repeatable, comma lists) -> specs, duplicates rejected."""
    out: list[DeviceSpec] = []
    for v in values or []:
        for part in _split_commas(v):
            spec = parse_device(part)
            if any(s.label == spec.label for s in out):
                raise QconformError(f"device '{spec.label}' given twice", field="--device",
                                    rule="each device once (add ?name=... to tell two apart)")
            out.append(spec)
    if values and not out:
        raise QconformError("no device given", field="--device", rule="kind:address")
    return out


def _split_commas(v: str) -> list[str]:
    # a comma inside the ?settings belongs to the value, so split only before a 'kind:'
    parts, cur = [], ""
    for piece in v.split(","):
        if cur and piece.strip().split(":", 1)[0].lower() in KINDS:
            parts.append(cur)
            cur = piece
        else:
            cur = piece if not cur else cur + "," + piece
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


def shell_command(argv: Sequence[str], env: dict[str, str] | None = None, cwd: str | None = None,
                  timeout_s: float | None = None) -> str:
    """The POSIX shell string that runs ``argv`` exactly: every token quoted.

    ``cd CWD && env K=V... [timeout -k 5 T] argv...; exit $?``; the device-side
    ``timeout`` kills a hung command even when the connection is gone. The shell must
    stay the session's process (no ``exec``, and not a lone last command, which bash
    execs in its place), so a command killed by a signal (a runtime's SIGSEGV, which
    ``timeout`` passes on by dying of it) comes back as the exit status 128+n, not as
    the death of the session, which ssh reports as its own failure (255).
    """
    words: list[str] = []
    if env:
        words += ["env"] + [f"{k}={v}" for k, v in env.items()]
    if timeout_s is not None:
        # TERM first (timeout itself survives it and exits 124), KILL 5 s later if still alive;
        # `timeout -s KILL` would kill timeout too, and ssh reports that as its own failure (255)
        words += ["timeout", "-k", "5", str(max(1, int(round(timeout_s))))]
    words += [str(a) for a in argv]
    cmd = " ".join(shlex.quote(w) for w in words)
    if cwd:
        cmd = f"cd {shlex.quote(cwd)} && {cmd}"
    return cmd + "; exit $?"   # not the last command: bash cannot exec it in place of the shell


#: exit codes of a command stopped by the device-side `timeout` (124; 137 when KILL was needed)
REMOTE_TIMEOUT_RCS = (124, 137)


class Transport:
    """Base class: push / run / pull / cleanup, reconnect, close. Counts round trips."""

    kind = "base"
    default_root = "/tmp"
    default_python = "python3"

    def __init__(self, spec: DeviceSpec):
        self.spec = spec
        self.round_trips = 0
        self.reconnects = 0

    @property
    def label(self) -> str:
        return self.spec.label

    @property
    def root(self) -> str:
        return self.spec.opt("root") or self.default_root

    @property
    def python(self) -> str:
        return self.spec.opt("python") or self.default_python

    def workspace(self, name: str) -> str:
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
        return posixpath.join(self.root, safe)

    def available(self) -> tuple[bool, str]:
        return True, self.kind

    # ---- the four verbs
    def push(self, local_dir: Path, remote_dir: str) -> None:
        raise NotImplementedError

    def run(self, argv: Sequence[str], timeout: float, env: dict[str, str] | None = None,
            cwd: str | None = None) -> CommandResult:
        raise NotImplementedError

    def pull(self, remote_dir: str, local_dir: Path) -> None:
        raise NotImplementedError

    def cleanup(self, remote_dir: str) -> None:
        raise NotImplementedError

    # ---- connection
    def reconnect(self, wait_s: float = 30.0) -> None:
        """Re-establish the connection after a TransportError (raises TransportError if it cannot)."""
        self.reconnects += 1

    def close(self) -> None:
        pass
