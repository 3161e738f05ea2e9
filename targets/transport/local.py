"""``local``: this host as the device (a folder as its file system, commands without a shell).

Useful to run the device runner exactly as a board would, and as the reference the
ssh and adb transports are compared with. ``local:/folder`` puts workspaces under
/folder (default: the system temp folder).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

from targets.transport.base import CommandResult, DeviceSpec, Transport, TransportError


class LocalTransport(Transport):
    kind = "local"

    def __init__(self, spec: DeviceSpec):
        super().__init__(spec)
        self.default_root = spec.address or tempfile.gettempdir()
        self.default_python = sys.executable

    def push(self, local_dir: Path, remote_dir: str, timeout: float | None = None) -> None:
        self.round_trips += 1
        try:
            Path(remote_dir).parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(local_dir, remote_dir, dirs_exist_ok=True)
        except OSError as e:
            raise TransportError(f"local push to {remote_dir} failed: {e}") from None

    def run(self, argv: Sequence[str], timeout: float, env: dict[str, str] | None = None,
            cwd: str | None = None, grace: float = 15.0) -> CommandResult:
        self.round_trips += 1
        full_env = self.environ()
        full_env.update(env or {})
        t0 = time.perf_counter()
        try:
            p = subprocess.Popen([str(a) for a in argv], cwd=cwd, env=full_env, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            return CommandResult(127, "", f"cannot start {argv[0]}: {e}", False, 0.0)
        try:
            out, err = p.communicate(timeout=timeout)
            return CommandResult(p.returncode, out.decode(errors="replace"), err.decode(errors="replace"),
                                 False, time.perf_counter() - t0)
        except subprocess.TimeoutExpired:
            _kill_group(p)
            out, err = p.communicate()
            return CommandResult(None, out.decode(errors="replace"), err.decode(errors="replace"), True,
                                 time.perf_counter() - t0)

    def environ(self) -> dict[str, str]:
        """The environment of a command run on the device: this process's."""
        return dict(os.environ)

    def pull(self, remote_dir: str, local_dir: Path) -> None:
        self.round_trips += 1
        try:
            shutil.copytree(remote_dir, local_dir, dirs_exist_ok=True)
        except FileNotFoundError:
            Path(local_dir).mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise TransportError(f"local pull of {remote_dir} failed: {e}") from None

    def cleanup(self, remote_dir: str, timeout: float | None = None) -> None:
        self.round_trips += 1
        shutil.rmtree(remote_dir, ignore_errors=True)


def _kill_group(p: subprocess.Popen) -> None:
    """Kill the process started with start_new_session=True and everything it started."""
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            p.kill()
        except ProcessLookupError:
            pass
