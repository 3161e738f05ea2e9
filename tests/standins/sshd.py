"""A throwaway OpenSSH server on 127.0.0.1 for the ssh transport tests.

``start_sshd(folder)`` generates a host key and a user key in ``folder``, writes an
sshd_config that accepts only that key on a free loopback port, starts
``/usr/sbin/sshd -D`` as a child process, and writes an ssh_config with a host
alias (``qc-test-device``) so the transport is reached as
``ssh:qc-test-device?config=<folder>/ssh_config``. ``stop()`` ends that process
(by its pid) and nothing else. Needs the ``openssh-server`` package (``.ci/run``
installs it); :func:`sshd_missing` says why the tests skip when it is absent.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

SSHD = "/usr/sbin/sshd"
HOST_ALIAS = "qc-test-device"


def sshd_missing() -> str | None:
    """Why an sshd cannot be started here, or None."""
    if not os.path.exists(SSHD):
        return f"{SSHD} is absent (apt-get install -y openssh-server)"
    if shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        return "the OpenSSH client (ssh, ssh-keygen) is absent (apt-get install -y openssh-client)"
    if not os.path.isdir("/run/sshd"):
        try:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)   # sshd's privilege-separation folder
        except OSError as e:
            return f"/run/sshd is missing and cannot be created ({e.strerror})"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Sshd:
    folder: Path
    port: int
    proc: subprocess.Popen
    ssh_config: Path

    def device(self, **settings: str) -> str:
        """A --device string reaching this server (settings URL-encoded)."""
        opts = {"config": str(self.ssh_config)}
        opts.update(settings)
        return f"ssh:{HOST_ALIAS}?" + "&".join(f"{k}={quote(str(v), safe='/')}" for k, v in opts.items())

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def session_pids(self) -> list[int]:
        """Pids of this server's per-connection processes (children of the listener)."""
        out = []
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == self.proc.pid:
                out.append(int(d.name))
        return out


def start_sshd(folder: Path) -> Sshd:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("host_ed25519", "id_ed25519"):
        key = folder / name
        if not key.exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"qconform-test-{name}",
                            "-f", str(key)], check=True, stdin=subprocess.DEVNULL)
    (folder / "authorized_keys").write_text((folder / "id_ed25519.pub").read_text())
    os.chmod(folder / "authorized_keys", 0o600)
    port = _free_port()
    user = getpass.getuser()
    cfg = folder / "sshd_config"
    cfg.write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {folder / 'host_ed25519'}",
        f"AuthorizedKeysFile {folder / 'authorized_keys'}", f"PidFile {folder / 'sshd.pid'}",
        "StrictModes no", "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
        "PermitRootLogin prohibit-password", "MaxSessions 64", "MaxStartups 64", "LogLevel ERROR",
        "PrintMotd no", "",
    ]))
    host_pub = (folder / "host_ed25519.pub").read_text().split()
    (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub[0]} {host_pub[1]}\n")
    ssh_config = folder / "ssh_config"
    ssh_config.write_text("\n".join([
        f"Host {HOST_ALIAS}", "  HostName 127.0.0.1", f"  Port {port}", f"  User {user}",
        f"  IdentityFile {folder / 'id_ed25519'}", "  IdentitiesOnly yes",
        f"  UserKnownHostsFile {folder / 'known_hosts'}", "  StrictHostKeyChecking yes",
        "  HostKeyAlias [127.0.0.1]:" + str(port), "  LogLevel ERROR", "",
    ]))
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(cfg)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=open(folder / "sshd.log", "wb"))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited {proc.returncode}: {(folder / 'sshd.log').read_text()[-800:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return Sshd(folder, port, proc, ssh_config)
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("sshd did not start listening within 10 s")
