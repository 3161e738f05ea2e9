"""``qemu``: an emulated aarch64 board on this host (QEMU user mode), as a device.

``qemu:ROOTFS`` (``qemu:`` alone: the board of scripts/setup-arm64.sh) runs the device's
commands with the board's own aarch64 binaries, each under ``qemu-aarch64-static -cpu CPU -L
ROOTFS``: the device runner's Python is ROOTFS's ``/usr/bin/python3`` with the aarch64 wheels
(``site_packages``) on its path, so the runtimes under test are the real aarch64 builds of
LiteRT and ONNX Runtime. No binfmt registration and no chroot: QEMU looks library and file
paths up in ROOTFS first and falls back to this host's, so the workspaces are plain folders
here (push, pull and cleanup are the local transport's). Everything else is the device path
of any board: batches, the probe, timeouts, crashes, retries.

The device is marked emulated in its facts (``emulated``, ``emulator``, ``emulated_cpu``): its
latencies are QEMU's, not an ARM core's, and the reports keep them apart and out of latency
comparisons. Settings: ``qemu`` (the binary, QEMU >= 8), ``cpu`` (default neoverse-n1),
``site_packages``, and the common ones (``python`` is a path inside ROOTFS).
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Sequence
from typing import Any

from targets.transport.base import QEMU_CPU_DEFAULT, QEMU_X86_CPU_DEFAULT, CommandResult, DeviceSpec
from targets.transport.local import LocalTransport

#: QEMU 7.2 (Debian 12) crashes onnxruntime at import (the host's /proc/cpuinfo shows through) and
#: gives wrong XNNPACK int8 results with -cpu max; 8.1 emulates an aarch64 /proc/cpuinfo
QEMU_MIN = (8, 1)
_VERSION = re.compile(r"version (\d+)\.(\d+)(?:\.(\d+))?")
_versions: dict[tuple[str, float], tuple[str, tuple[int, ...] | None]] = {}


def qemu_version(binary: str) -> tuple[str, tuple[int, ...] | None]:
    """(the first line of ``binary --version``, its version numbers or None), once per binary."""
    try:
        key = (binary, os.stat(binary).st_mtime)
    except OSError as e:
        return f"cannot run {binary}: {e.strerror}", None
    if key not in _versions:
        try:
            out = subprocess.run([binary, "--version"], check=False, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                 timeout=20)
            line = (out.stdout.strip().splitlines() or [out.stderr.strip()])[0]
        except (OSError, subprocess.SubprocessError) as e:
            return f"cannot run {binary}: {e}", None
        m = _VERSION.search(line)
        _versions[key] = (line, tuple(int(x) for x in m.groups() if x is not None) if m else None)
    return _versions[key]


def _emulated_facts(qemu: str | None, cpu: str, soc: str) -> dict[str, Any]:
    """The device facts of a CPU emulated by QEMU user mode (the ARM64 board, qemu-x86)."""
    line, version = qemu_version(qemu)
    return {"emulated": "yes", "emulator": f"{line}, user mode", "emulated_cpu": cpu,
            "soc": f"{soc} (emulated by QEMU {'.'.join(map(str, version or ()))})"}


def _usable(binary: str, cpu: str, too_old: str) -> tuple[bool, str]:
    """(whether ``binary`` is a QEMU >= QEMU_MIN, why)."""
    line, version = qemu_version(binary)
    if version is None:
        return False, f"{binary} is not a QEMU binary ({line})"
    if version[:2] < QEMU_MIN:
        return False, f"{binary} is {line}: {too_old}"
    return True, f"QEMU {'.'.join(map(str, version))} user mode, -cpu {cpu}"


class QemuTransport(LocalTransport):
    kind = "qemu"
    #: seconds the probe may take: each runtime's first import under emulation takes seconds (numpy
    #: alone 2-4 s on a busy 2-core host), where a real device's takes a fraction of one
    probe_budget = 120.0

    def __init__(self, spec: DeviceSpec):
        super().__init__(spec)
        self.default_root = tempfile.gettempdir()   # (the address is the root file system, not a workspace root)
        self.default_python = "/usr/bin/python3"
        self.rootfs = spec.get("rootfs")
        self.qemu = spec.get("qemu")
        self.site = spec.get("site_packages")
        self.cpu = spec.get("cpu") or QEMU_CPU_DEFAULT

    def available(self) -> tuple[bool, str]:
        return _usable(self.qemu, self.cpu, f"QEMU older than {'.'.join(map(str, QEMU_MIN))} crashes onnxruntime and "
                                            f"miscomputes XNNPACK; scripts/setup-arm64.sh takes QEMU 10 from Debian 13")

    def facts(self) -> dict[str, Any]:
        return _emulated_facts(self.qemu, self.cpu, self.cpu)

    def guest_program(self, name: str) -> str | None:
        """The host path of the board's program ``name`` (absolute: inside ROOTFS; else in its PATH)."""
        if name.startswith("/"):
            candidates = [name]
        else:
            candidates = [f"/usr/bin/{name}", f"/usr/sbin/{name}"]
        for c in candidates:
            path = os.path.join(self.rootfs, c.lstrip("/"))
            if os.path.isfile(path):
                return path
        return None

    def environ(self) -> dict[str, str]:
        """This process's environment less what would make the board's Python read this host's
        packages (PYTHONHOME, PYTHONPATH, the user site) or QEMU take other settings."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONHOME", "PYTHONPATH", "PYTHONSTARTUP", "VIRTUAL_ENV") and not k.startswith("QEMU_")}
        env.update(PYTHONPATH=self.site, PYTHONNOUSERSITE="1")
        return env

    def run(self, argv: Sequence[str], timeout: float, env: dict[str, str] | None = None,
            cwd: str | None = None, grace: float = 15.0) -> CommandResult:
        program = self.guest_program(str(argv[0]))
        if program is None:
            self.round_trips += 1
            return CommandResult(127, "", f"{argv[0]}: not found in the board's root file system {self.rootfs}")
        return super().run([self.qemu, "-cpu", self.cpu, "-L", self.rootfs, program, *map(str, argv[1:])],
                           timeout, env=env, cwd=cwd, grace=grace)


class QemuX86Transport(LocalTransport):
    """``qemu-x86:?cpu=MODEL``: this host's own Python, packages and runtimes under ``qemu-x86_64
    -cpu MODEL`` (user mode), so the runtimes dispatch as on that CPU (Haswell: AVX2 without
    AVX-512 or VNNI; Nehalem: SSE4.2), whatever this host's CPU. The device runner reads the ISA
    with CPUID, which QEMU emulates (its /proc/cpuinfo is this host's). Emulated, as ``qemu:``."""

    kind = "qemu-x86"
    probe_budget = QemuTransport.probe_budget

    def __init__(self, spec: DeviceSpec):
        super().__init__(spec)
        self.qemu = spec.get("qemu")
        self.cpu = spec.get("cpu") or QEMU_X86_CPU_DEFAULT

    def available(self) -> tuple[bool, str]:   # (measured with QEMU 10 only; Debian 12's is 7.2)
        return _usable(self.qemu, self.cpu, f"qemu-x86 wants QEMU >= {'.'.join(map(str, QEMU_MIN))}; "
                                            f"scripts/setup-arm64.sh keeps Debian 13's QEMU 10 beside the ARM64 board")

    def facts(self) -> dict[str, Any]:
        return _emulated_facts(self.qemu, self.cpu, f"x86-64 {self.cpu}")

    def environ(self) -> dict[str, str]:
        return {k: v for k, v in os.environ.items() if not k.startswith("QEMU_")}

    def run(self, argv: Sequence[str], timeout: float, env: dict[str, str] | None = None,
            cwd: str | None = None, grace: float = 15.0) -> CommandResult:
        # (QEMU warns on stderr of each CPUID feature TCG lacks, e.g. Haswell's hle and rtm)
        return super().run([self.qemu, "-cpu", self.cpu, *map(str, argv)], timeout, env=env, cwd=cwd, grace=grace)
