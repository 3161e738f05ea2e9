"""``adb``: an Android device through the system ``adb`` client (Debian's ``adb`` package).

Why the real client and not a Python adb library: it is what device labs already
run (one adb server shared by every tool on the host, authorization keys in
~/.android, USB and TCP devices alike), its sync protocol copies folders both
ways, and ``adb reconnect offline`` recovers a device without killing the server
that parallel runs share. Each verb is one ``adb -s SERIAL ...`` invocation:

* push:    ``adb push LOCAL_DIR REMOTE_DIR`` (sync protocol: no shell, any path)
* run:     ``adb shell 'cd DIR && env K=V timeout -k 5 T argv...'`` (every token
  quoted; the exit code comes back through shell protocol v2, adb >= 1.0.35 / Android 7)
* pull:    ``adb pull REMOTE_DIR LOCAL_TMP`` then moved into place
* cleanup: ``adb shell rm -rf DIR``

A failure of adb itself (device offline / not found / unauthorized, closed,
protocol fault, no server) raises :class:`TransportError`; ``reconnect`` runs
``adb reconnect offline`` and ``adb wait-for-device`` (bounded). Settings:
``adb`` (client path), ``server`` (``ADB_SERVER_SOCKET``, e.g. ``tcp:127.0.0.1:5037``),
and the common ``wait`` (seconds to wait for the device after a reconnect).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Sequence

from targets.transport.base import CommandResult, DeviceSpec, Transport, TransportError, shell_command

IO_TIMEOUT_S = 300.0

#: what adb prints when the device or the server, not the command, failed
ADB_FAILURE = re.compile(
    r"^(adb: )?error: (device (offline|unauthorized|still authorizing|'[^']*' not found|not found)|closed|"
    r"protocol fault|no devices/emulators found|more than one device|cannot connect to daemon|"
    r"failed to get feature set|connection reset)|^\* (cannot start server|daemon not running)",
    re.MULTILINE)


class AdbTransport(Transport):
    kind = "adb"
    default_root = "/data/local/tmp"
    default_python = "python3"

    def __init__(self, spec: DeviceSpec):
        super().__init__(spec)
        self.serial = spec.address

    def available(self) -> tuple[bool, str]:
        exe = self.spec.get("adb", "adb")
        if shutil.which(exe) is None:
            return False, f"the adb client '{exe}' is not installed (apt-get install adb)"
        return True, f"adb client {exe}"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.spec.get("server"):
            env["ADB_SERVER_SOCKET"] = self.spec.get("server")
        return env

    def _adb(self, args: Sequence[str], timeout: float, serial: bool = True) -> CommandResult:
        self.round_trips += 1
        argv = [self.spec.get("adb", "adb")] + (["-s", self.serial] if serial else []) + list(args)
        t0 = time.perf_counter()
        try:
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 env=self._env(), start_new_session=True)
        except OSError as e:
            raise TransportError(f"cannot start adb: {e}") from None
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            return CommandResult(None, out.decode(errors="replace"), err.decode(errors="replace"), True,
                                 time.perf_counter() - t0)
        res = CommandResult(p.returncode, out.decode(errors="replace"), err.decode(errors="replace"), False,
                            time.perf_counter() - t0)
        if p.returncode != 0 and ADB_FAILURE.search(res.stderr + "\n" + res.stdout):
            raise TransportError(f"adb {self.serial}: {res.tail(300)}")
        return res

    # ---- verbs
    def push(self, local_dir: Path, remote_dir: str, timeout: float | None = None) -> None:
        res = self._adb(["push", str(local_dir), remote_dir], timeout or IO_TIMEOUT_S)
        if res.timed_out or res.rc != 0:
            raise TransportError(f"adb push to {remote_dir} failed ({'timeout' if res.timed_out else res.rc}): "
                                 f"{res.tail(300)}")

    def run(self, argv: Sequence[str], timeout: float, env: dict[str, str] | None = None,
            cwd: str | None = None, grace: float = 15.0) -> CommandResult:
        cmd = shell_command(argv, env=env, cwd=cwd, timeout_s=timeout)
        return self._adb(["shell", cmd], timeout + grace)

    def pull(self, remote_dir: str, local_dir: Path) -> None:
        local_dir = Path(local_dir)
        local_dir.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix="qcpull", dir=local_dir.parent))
        try:
            dest = tmp / "got"   # does not exist yet: adb creates it with the folder's contents
            res = self._adb(["pull", remote_dir, str(dest)], IO_TIMEOUT_S)
            said = res.stderr + res.stdout
            if not res.timed_out and res.rc != 0 and ("does not exist" in said
                                                      or "No such file or directory" in said):
                return   # nothing there (yet): an empty pull
            if res.timed_out or res.rc != 0:
                raise TransportError(f"adb pull of {remote_dir} failed ({'timeout' if res.timed_out else res.rc}): "
                                     f"{res.tail(300)}")
            if dest.is_dir():
                shutil.copytree(dest, local_dir, dirs_exist_ok=True)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def cleanup(self, remote_dir: str, timeout: float | None = None) -> None:
        self._adb(["shell", f"rm -rf -- {shlex.quote(remote_dir)}"], timeout or 60.0)

    # ---- connection
    def reconnect(self, wait_s: float | None = None) -> None:
        """``adb reconnect offline`` (not kill-server: other runs share it), then wait for the device."""
        super().reconnect(wait_s or 0)
        wait_s = self.spec.get("wait", wait_s or 30.0)
        try:
            self._adb(["reconnect", "offline"], 20.0, serial=False)
        except TransportError:
            pass
        try:
            res = self._adb(["wait-for-device"], wait_s)
        except TransportError as e:
            raise TransportError(f"adb {self.serial}: not back after reconnect: {e}") from None
        if res.timed_out or res.rc != 0:
            raise TransportError(f"adb {self.serial}: not back within {wait_s:g} s after `adb reconnect offline`")
        res = self._adb(["get-state"], 20.0)
        if res.stdout.strip() != "device":
            raise TransportError(f"adb {self.serial}: state '{res.stdout.strip()}' after reconnect")
