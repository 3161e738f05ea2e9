"""The transport interface, its results and errors, and ``--device`` strings.

Shared by the transports (:mod:`targets.transport.local`, ``.ssh``, ``.adb``) and
re-exported by :mod:`targets.transport`, which documents them and picks one
(:func:`targets.transport.make_transport`).
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence
from urllib.parse import parse_qsl

from suite.core.errors import QconformError

KINDS = ("local", "ssh", "adb", "qemu", "qemu-x86")

#: bounds of the numeric settings (seconds, attempts): a value outside is a usage error at start
TIMEOUT_MAX_S = 86400.0
WAIT_MAX_S = 3600.0
RETRIES_MAX = 10
CONNECT_TIMEOUT_MAX_S = 300

_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?|[+-]?(inf|infinity|nan)", re.ASCII | re.IGNORECASE)
_WHOLE = re.compile(r"[0-9]+", re.ASCII)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_USER = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.$-]*", re.ASCII)
_HOST = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*|\[[0-9A-Fa-f:.]+(%[A-Za-z0-9_.-]+)?\]", re.ASCII)
#: a QEMU CPU model, optionally with properties (``neoverse-n1``, ``max,sve=off``)
_QEMU_CPU = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(,[A-Za-z0-9_-]+=[A-Za-z0-9_.-]+)*", re.ASCII)

#: the emulated board of ``qemu:`` (scripts/setup-arm64.sh builds it): rootfs/, qemu-aarch64-static,
#: site-packages/; ``qemu:`` without a ROOTFS names this board's rootfs
ARM64_BOARD = os.environ.get("QCONFORM_ARM64_DIR") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "qconform", "arm64")
QEMU_CPU_DEFAULT = "neoverse-n1"
#: ``qemu-x86:``'s default CPU: AVX2 without AVX-512 or VNNI
QEMU_X86_CPU_DEFAULT = "Haswell"


class _Bad(ValueError):
    """A setting's value broke its rule (the message says how)."""


def _number(text: str, lo: float, hi: float, *, whole: bool = False, lo_open: bool = False) -> float | int:
    if not _NUMBER.fullmatch(text):
        raise _Bad("is not a number")
    x = float(text)
    if not ((x > lo if lo_open else x >= lo) and x <= hi):   # NaN fails both
        raise _Bad(f"must be {'>' if lo_open else '>='} {lo:g} and <= {hi:g}")
    if whole:
        if not _WHOLE.fullmatch(text.lstrip("+")):
            raise _Bad("must be a whole number")
        return int(text)
    return x


def _text(text: str) -> str:
    if not text:
        raise _Bad("must not be empty")
    if _CONTROL.search(text):
        raise _Bad("must not hold control characters")
    return text


def _host_file(text: str) -> str:
    _text(text)
    path = os.path.expanduser(text)
    if not os.path.isfile(path):
        raise _Bad(f"names no file on this host ({path})")
    return path


def _ssh_config(text: str) -> str:
    return text if text == "none" else _host_file(text)


def _flag(text: str) -> int:
    if text not in ("0", "1"):
        raise _Bad("must be 0 or 1")
    return int(text)


def _port(text: str) -> int:
    return int(_number(text, 1, 65535, whole=True))


def _host_dir(text: str) -> str:
    _text(text)
    path = os.path.abspath(os.path.expanduser(text))
    if not os.path.isdir(path):
        raise _Bad(f"names no folder on this host ({path})")
    return path


def _qemu_cpu(text: str) -> str:
    if not _QEMU_CPU.fullmatch(text):
        raise _Bad("is not a QEMU CPU model (e.g. neoverse-n1, cortex-a76, max,sve=off)")
    return text


def _adb_socket(text: str) -> str:
    scheme, _, rest = _text(text).partition(":")
    if scheme == "tcp":
        host, _, port = rest.rpartition(":")
        _port(port)
        if host and not _HOST.fullmatch(host):
            raise _Bad(f"names a bad host '{host}'")
    elif scheme not in ("localfilesystem", "localabstract", "localreserved") or not rest:
        raise _Bad("must be tcp:[HOST:]PORT or localfilesystem:PATH")
    return text


#: every setting: the kinds that take it, its check (text -> typed value, or _Bad), its rule
SETTINGS: dict[str, tuple[tuple[str, ...], Callable[[str], Any], str]] = {
    "python": (KINDS, _text, "a path to the device's Python, not empty"),
    "root": (KINDS, _text, "a folder on the device, not empty"),
    "name": (KINDS, _text, "a label, not empty"),
    "timeout": (KINDS, lambda v: _number(v, 0, TIMEOUT_MAX_S, lo_open=True),
                f"seconds per batch, > 0 and <= {TIMEOUT_MAX_S:g}"),
    "retries": (KINDS, lambda v: _number(v, 0, RETRIES_MAX, whole=True),
                f"failed attempts the run may retry on this device, a whole number from 0 to {RETRIES_MAX}"),
    "wait": (KINDS, lambda v: _number(v, 0, WAIT_MAX_S, lo_open=True),
             f"seconds a reconnect may take, > 0 and <= {WAIT_MAX_S:g}"),
    "merge": (KINDS, _flag, "0 or 1"),
    "config": (("ssh",), _ssh_config, "an ssh_config file on this host (or none)"),
    "identity": (("ssh",), _host_file, "a key file on this host"),
    "port": (("ssh",), _port, "a whole number from 1 to 65535"),
    "ssh": (("ssh",), _text, "the ssh client, not empty"),
    "connect_timeout": (("ssh",), lambda v: _number(v, 1, CONNECT_TIMEOUT_MAX_S, whole=True),
                        f"whole seconds from 1 to {CONNECT_TIMEOUT_MAX_S}"),
    "adb": (("adb",), _text, "the adb client, not empty"),
    "server": (("adb",), _adb_socket, "tcp:[HOST:]PORT or localfilesystem:PATH"),
    "qemu": (("qemu", "qemu-x86"), _host_file, "the qemu-aarch64 binary (qemu-x86: the qemu-x86_64 one), a file on "
             "this host (QEMU >= 8.1)"),
    "cpu": (("qemu", "qemu-x86"), _qemu_cpu, "a QEMU CPU model, e.g. neoverse-n1 or cortex-a76 (qemu:), Haswell or "
            "Nehalem (qemu-x86:)"),
    "site_packages": (("qemu",), _host_dir, "the folder of the board's Python packages, on this host"),
}

#: settings every device string may carry, and those of one kind
COMMON_KEYS = {k for k, (kinds, _, _) in SETTINGS.items() if kinds == KINDS}
KIND_KEYS = {kind: {k for k, (kinds, _, _) in SETTINGS.items() if kinds != KINDS and kind in kinds}
             for kind in KINDS}


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
    """A parsed and checked ``--device`` value (:func:`parse_device`)."""

    kind: str
    address: str                      # '' or a folder for local, [user@]host[:port] for ssh, serial for adb,
                                      # the root file system for qemu
    options: dict[str, str] = field(default_factory=dict)     # the settings as written
    text: str = ""
    values: dict[str, Any] = field(default_factory=dict)      # the settings, typed and checked
    host: str = ""                    # ssh: the host (IPv6 without brackets), user@ if given
    port: int | None = None           # ssh: from host:port or ?port=

    @property
    def label(self) -> str:
        """How the device is named in results rows and reports."""
        if self.options.get("name"):
            return self.options["name"]
        if self.kind == "qemu-x86":   # two CPU models are two devices
            return f"qemu-x86:{self.get('cpu')}"
        return f"{self.kind}:{self.address}" if self.address else self.kind

    def opt(self, key: str, default=None):
        return self.options.get(key, default)

    def get(self, key: str, default=None):
        """A setting as checked by :func:`parse_device` (int / float / str), or ``default``."""
        return self.values.get(key, default)


def _oneline(text: str) -> str:
    return text.encode("unicode_escape").decode() if _CONTROL.search(text) else text


def _fail(raw: str, message: str, rule: str) -> QconformError:
    return QconformError(message, source=_oneline(raw), field="--device", rule=rule)


def _ssh_address(raw: str, address: str) -> tuple[str, int | None]:
    """``[user@]host[:port]`` -> (``[user@]host``, port); IPv6 as ``[addr]`` or ``[addr]:port``."""
    user, at, hostport = address.rpartition("@")
    if at and not _USER.fullmatch(user):
        raise _fail(raw, f"ssh user '{user}' is not a user name", "[user@]host[:port]")
    port_text = None
    if hostport.startswith("["):
        host, close, rest = hostport.partition("]")
        host += close
        if rest:
            if not rest.startswith(":"):
                raise _fail(raw, f"'{hostport}' is not [IPv6]:port", "[user@]host[:port]")
            port_text = rest[1:]
    else:
        host, colon, port_text = hostport.partition(":")
        if not colon:
            port_text = None
    if not _HOST.fullmatch(host):
        raise _fail(raw, f"ssh host '{host}' is not a host name, an IPv4 address or an [IPv6] address",
                    "[user@]host[:port]")
    port = None
    if port_text is not None:
        try:
            port = _port(port_text)
        except _Bad as e:
            raise _fail(raw, f"port '{port_text}' in '{address}' {e}", "port: a whole number from 1 to 65535") \
                from None
    return (f"{user}@" if at else "") + host.strip("[]"), port


def parse_device(text: str) -> DeviceSpec:
    """Parse and check one ``--device`` value whole: the kind, the address (ssh: host and port
    1-65535), every setting known for the kind, typed and bounded (:data:`SETTINGS`), each once.
    Anything else is one QconformError naming the device string, the setting and the rule."""
    raw = text.strip()
    if not raw:
        raise QconformError("empty device", field="--device", rule="kind:address")
    head, sep, query = raw.partition("?")
    kind, _, address = head.partition(":")
    kind = kind.strip().lower()
    if kind not in KINDS:
        raise QconformError(f"unknown device kind '{_oneline(kind)}' in '{_oneline(raw)}' (known: "
                            f"{', '.join(KINDS)}; e.g. ssh:user@host, adb:SERIAL, local, qemu:ROOTFS)", field="--device",
                            rule="kind:address")
    options: dict[str, str] = {}
    values: dict[str, Any] = {}
    if sep:
        try:
            pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
        except ValueError:
            raise _fail(raw, f"bad settings '?{_oneline(query)}' (expected key=value&key=value)",
                        "?key=value settings") from None
        allowed = sorted(k for k, (kinds, _, _) in SETTINGS.items() if kind in kinds)
        for k, v in pairs:
            if k not in allowed:
                raise _fail(raw, f"unknown setting '{_oneline(k)}' for a {kind} device (known: "
                                 f"{', '.join(allowed)})", "known settings")
            if k in options:
                raise _fail(raw, f"setting '{k}' given twice", "each setting once")
            _, check, rule = SETTINGS[k]
            try:
                values[k] = check(v)
            except _Bad as e:
                raise _fail(raw, f"setting '{k}={_oneline(v)}' {e}", f"{k}: {rule}") from None
            options[k] = v
    if kind in ("ssh", "adb") and not address:
        example = "ssh:user@host" if kind == "ssh" else "adb:SERIAL"
        raise _fail(raw, f"'{_oneline(raw)}' names no {'host' if kind == 'ssh' else 'serial'} (e.g. {example})",
                    "kind:address")
    if _CONTROL.search(address):
        raise _fail(raw, "the address holds control characters", "kind:address")
    spec = DeviceSpec(kind, address, options, raw, values)
    if kind == "ssh":
        if address.startswith("-"):
            raise _fail(raw, f"ssh host '{address}' must not start with '-'", "a host name")
        spec.host, spec.port = _ssh_address(raw, address)
        if "port" in values:
            if spec.port is not None and spec.port != values["port"]:
                raise _fail(raw, f"two ports: '{address}' and port={options['port']}", "one port")
            spec.port = values["port"]
    if kind == "adb" and (address.startswith("-") or any(ch.isspace() for ch in address)):
        raise _fail(raw, f"adb serial '{address}' must not start with '-' or hold spaces", "an adb serial")
    if kind == "qemu":
        _qemu_board(raw, spec)
    if kind == "qemu-x86":
        _qemu_x86(raw, spec)
    return spec


def _qemu_x86(raw: str, spec: DeviceSpec) -> None:
    """``qemu-x86:``: this host's own Python and runtimes under ``qemu-x86_64 -cpu MODEL``; the QEMU
    binary is ?qemu=, else the one scripts/setup-arm64.sh keeps beside the board, else on PATH."""
    if spec.address:
        raise _fail(raw, f"'{_oneline(raw)}' names an address: qemu-x86 runs this host's programs (qemu-x86:?cpu=MODEL)",
                    "qemu-x86:?cpu=MODEL")
    qemu = spec.get("qemu") or next(
        (p for p in (os.path.join(ARM64_BOARD, "qemu-x86_64-static"), shutil.which("qemu-x86_64-static"),
                     shutil.which("qemu-x86_64")) if p and os.path.isfile(p)), None)
    if qemu is None:
        raise _fail(raw, "no qemu-x86_64 binary: run `bash scripts/setup-arm64.sh` (it keeps QEMU's beside the board) "
                    "or name one (?qemu=/path/to/qemu-x86_64)", "qemu: the qemu-x86_64 binary, a file on this host")
    spec.values.update(qemu=qemu, cpu=spec.get("cpu") or QEMU_X86_CPU_DEFAULT)


def _qemu_board(raw: str, spec: DeviceSpec) -> None:
    """``qemu:[ROOTFS]``: the root file system, its Python, the QEMU binary and the packages folder
    must be there (defaults: the board of scripts/setup-arm64.sh); the first missing one is the error."""
    build = "build the board with `bash scripts/setup-arm64.sh`, or name it"
    rootfs = os.path.abspath(os.path.expanduser(spec.address or os.path.join(ARM64_BOARD, "rootfs")))
    board = os.path.dirname(rootfs)
    if not os.path.isdir(rootfs):
        raise _fail(raw, f"no root file system at {rootfs}: {build} (qemu:ROOTFS)", "qemu:ROOTFS, an aarch64 root "
                    "file system on this host")
    python = spec.get("python") or "/usr/bin/python3"
    if not os.path.isfile(os.path.join(rootfs, python.lstrip("/"))):
        raise _fail(raw, f"the root file system {rootfs} has no {python}", "python: a path inside ROOTFS")
    qemu = spec.get("qemu") or os.path.join(board, "qemu-aarch64-static")
    if not os.path.isfile(qemu):
        raise _fail(raw, f"no QEMU binary at {qemu}: {build} (?qemu=/path/to/qemu-aarch64-static)",
                    "qemu: the qemu-aarch64 binary, a file on this host (QEMU >= 8)")
    site = spec.get("site_packages") or os.path.join(board, "site-packages")
    if not os.path.isdir(site):
        raise _fail(raw, f"no packages folder at {site}: {build} (?site_packages=/path/to/folder)",
                    "site_packages: the folder of the board's Python packages, on this host")
    spec.values.update(rootfs=rootfs, qemu=qemu, site_packages=site, cpu=spec.get("cpu") or QEMU_CPU_DEFAULT,
                       python=python)


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
    """Base class: push / run / pull / cleanup, reconnect, close. Counts round trips.

    ``failures`` and ``given_up`` are the device's retry budget for the whole run (the targets
    of one device share its transport; :mod:`targets.remote` spends it)."""

    kind = "base"
    default_root = "/tmp"
    default_python = "python3"

    def __init__(self, spec: DeviceSpec):
        self.spec = spec
        self.round_trips = 0
        self.reconnects = 0
        self.failures = 0                  # failed attempts on this device so far in the run
        self.given_up: str | None = None   # why the run stopped using the device, once it did

    @property
    def label(self) -> str:
        return self.spec.label

    @property
    def root(self) -> str:
        return self.spec.get("root") or self.default_root

    @property
    def python(self) -> str:
        return self.spec.get("python") or self.default_python

    def workspace(self, name: str) -> str:
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)
        return posixpath.join(self.root, safe)

    def available(self) -> tuple[bool, str]:
        return True, self.kind

    def facts(self) -> dict[str, Any]:
        """Device facts the transport knows and the device cannot tell (an emulator's own)."""
        return {}

    # ---- the four verbs (``timeout``: seconds on the host's clock; None: the transport's default)
    def push(self, local_dir: Path, remote_dir: str, timeout: float | None = None) -> None:
        raise NotImplementedError

    def run(self, argv: Sequence[str], timeout: float, env: dict[str, str] | None = None,
            cwd: str | None = None, grace: float = 15.0) -> CommandResult:
        """``timeout`` is enforced on the device; the host gives up ``grace`` seconds later."""
        raise NotImplementedError

    def pull(self, remote_dir: str, local_dir: Path) -> None:
        raise NotImplementedError

    def cleanup(self, remote_dir: str, timeout: float | None = None) -> None:
        raise NotImplementedError

    # ---- connection
    def reconnect(self, wait_s: float = 30.0) -> None:
        """Re-establish the connection after a TransportError (raises TransportError if it cannot)."""
        self.reconnects += 1

    def close(self) -> None:
        pass
