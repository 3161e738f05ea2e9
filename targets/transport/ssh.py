"""``ssh``: a Linux board (or any POSIX host) through the system OpenSSH client.

Every verb is one ``ssh`` invocation over a shared master connection
(ControlMaster, socket in a private temp folder), so a batch costs four short
channel opens, not four TCP+key handshakes:

* push:    a tar stream (built in Python) into ``mkdir -p DIR && tar -x -C DIR``
* run:     ``cd DIR && env K=V timeout -k 5 T argv...`` (every token quoted)
* pull:    ``tar -c -C DIR .`` streamed back and unpacked in Python (data filter)
* cleanup: ``rm -rf DIR``

The device needs a POSIX login shell, ``tar`` and ``timeout``. Exit code 255 is
ssh's own failure (connection refused, cut, authentication) and raises
:class:`TransportError`; ``reconnect`` drops the master and opens a new connection.
Settings: ``config`` (an ssh_config file, ``-F``), ``identity`` (``-i``),
``port`` (``-p``), ``ssh`` (the client binary), ``connect_timeout``.
"""

from __future__ import annotations

import io
import os
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import time
import weakref
from pathlib import Path
from typing import Sequence

from targets.transport.base import CommandResult, DeviceSpec, Transport, TransportError, shell_command

SSH_FAILED = 255
IO_TIMEOUT_S = 300.0
CONNECT_TIMEOUT_S = 10     # ssh's ConnectTimeout (TCP connect and banner) unless ?connect_timeout=


class SshTransport(Transport):
    kind = "ssh"
    default_root = "/tmp"
    default_python = "python3"

    def __init__(self, spec: DeviceSpec):
        super().__init__(spec)
        self.dest = spec.host      # [user@]host, checked by parse_device
        self.port = spec.port
        self._ctl_dir: str | None = None

    # ---- argv
    def available(self) -> tuple[bool, str]:
        exe = self.spec.get("ssh", "ssh")
        if shutil.which(exe) is None:
            return False, f"the OpenSSH client '{exe}' is not installed (apt-get install openssh-client)"
        return True, f"OpenSSH client {exe}"

    def _control_path(self) -> str:
        if self._ctl_dir is None:
            self._ctl_dir = tempfile.mkdtemp(prefix="qcssh")   # 0700; short path (socket length limit)
            # a transport nobody closed still ends its master and removes the folder
            self._finalizer = weakref.finalize(self, _end_master, self.base_argv()[:-2], self.dest,
                                               self._ctl_dir)
        return os.path.join(self._ctl_dir, "mux")

    def base_argv(self, master: bool = True) -> list[str]:
        o = self.spec.values
        argv = [o.get("ssh", "ssh"), "-o", "BatchMode=yes",
                "-o", f"ConnectTimeout={o.get('connect_timeout', CONNECT_TIMEOUT_S)}",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3"]
        if master:
            argv += ["-o", "ControlMaster=auto", "-o", f"ControlPath={self._control_path()}",
                     "-o", "ControlPersist=30"]
        if o.get("config"):
            argv += ["-F", o["config"]]
        if o.get("identity"):
            argv += ["-i", o["identity"]]
        if self.port:
            argv += ["-p", str(self.port)]
        return argv + ["--", self.dest]

    def _ssh(self, remote_cmd: str, timeout: float, stdin: bytes | None = None) -> CommandResult:
        self.round_trips += 1
        argv = self.base_argv() + [remote_cmd]
        t0 = time.perf_counter()
        try:
            p = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as e:
            raise TransportError(f"cannot start ssh: {e}") from None
        try:
            out, err = p.communicate(input=stdin, timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            return CommandResult(None, out.decode(errors="replace"), err.decode(errors="replace"), True,
                                 time.perf_counter() - t0)
        res = CommandResult(p.returncode, out.decode(errors="replace") if len(out) < 1 << 20 else "",
                            err.decode(errors="replace"), False, time.perf_counter() - t0, out)
        if p.returncode == SSH_FAILED:
            raise TransportError(f"ssh {self.dest}: connection failed (exit 255): {res.tail(400)}")
        return res

    # ---- verbs
    def push(self, local_dir: Path, remote_dir: str, timeout: float | None = None) -> None:
        data = _tar_bytes(Path(local_dir))
        q = shlex.quote(remote_dir)
        res = self._ssh(f"mkdir -p -- {q} && exec tar -x -f - -C {q}", timeout or IO_TIMEOUT_S, stdin=data)
        if res.timed_out or res.rc != 0:
            raise TransportError(f"ssh push to {remote_dir} failed ({'timeout' if res.timed_out else res.rc}): "
                                 f"{res.tail(400)}")

    def run(self, argv: Sequence[str], timeout: float, env: dict[str, str] | None = None,
            cwd: str | None = None, grace: float = 15.0) -> CommandResult:
        cmd = shell_command(argv, env=env, cwd=cwd, timeout_s=timeout)
        return self._ssh(cmd, timeout + grace)

    def pull(self, remote_dir: str, local_dir: Path) -> None:
        q = shlex.quote(remote_dir)
        res = self._ssh(f"if [ -d {q} ]; then exec tar -c -f - -C {q} .; fi", IO_TIMEOUT_S)
        if res.timed_out or res.rc != 0:
            raise TransportError(f"ssh pull of {remote_dir} failed ({'timeout' if res.timed_out else res.rc}): "
                                 f"{res.tail(400)}")
        Path(local_dir).mkdir(parents=True, exist_ok=True)
        if res.data:
            _untar_bytes(res.data, Path(local_dir))

    def cleanup(self, remote_dir: str, timeout: float | None = None) -> None:
        self._ssh(f"rm -rf -- {shlex.quote(remote_dir)}", timeout or 60.0)

    # ---- connection
    def _exit_master(self) -> None:
        if self._ctl_dir is None:
            return
        try:
            subprocess.run(self.base_argv()[:-2] + ["-O", "exit", "--", self.dest], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        try:
            os.unlink(self._control_path())
        except OSError:
            pass

    def reconnect(self, wait_s: float = 30.0) -> None:
        """Drop the (possibly dead) master connection and open a new one."""
        super().reconnect(wait_s)
        wait_s = self.spec.get("wait", wait_s)
        self._exit_master()
        deadline = time.monotonic() + wait_s
        delay, last = 0.5, ""
        while True:
            try:   # each try within what is left of the wait (a handshake on a busy host gets 5 s at least)
                res = self._ssh("true", max(5.0, deadline - time.monotonic()))
                if res.rc == 0:
                    return
                last = res.tail(200)
            except TransportError as e:
                last = str(e)
                self._exit_master()
            if time.monotonic() + delay > deadline:
                raise TransportError(f"ssh {self.dest}: could not reconnect within {wait_s:g} s: {last}")
            time.sleep(delay)
            delay = min(delay * 2, 5.0)

    def close(self) -> None:
        self._exit_master()
        if self._ctl_dir is not None:
            shutil.rmtree(self._ctl_dir, ignore_errors=True)
            self._ctl_dir = None
            self._finalizer.detach()


def _end_master(argv: list[str], dest: str, ctl_dir: str) -> None:
    if os.path.exists(os.path.join(ctl_dir, "mux")):
        try:
            subprocess.run(argv + ["-O", "exit", "--", dest], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=10)
        except (OSError, subprocess.SubprocessError):
            pass
    shutil.rmtree(ctl_dir, ignore_errors=True)


def _tar_bytes(folder: Path) -> bytes:
    """A tar stream of the folder's contents (paths relative to it)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for p in sorted(folder.rglob("*")):
            tf.add(p, arcname=p.relative_to(folder).as_posix(), recursive=False)
    return buf.getvalue()


def _untar_bytes(data: bytes, dest: Path) -> None:
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
        tf.extractall(dest, filter="data")
