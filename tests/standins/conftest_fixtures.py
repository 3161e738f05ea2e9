"""Fixtures for the device tests: a throwaway sshd, the stand-in adb server, fault wrappers."""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import sys
from pathlib import Path

import pytest

from tests.standins.fake_adb_server import FakeAdbServer
from tests.standins.sshd import sshd_missing, start_sshd

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    """A throwaway OpenSSH server on 127.0.0.1 (skips with the reason when sshd is absent)."""
    why = sshd_missing()
    if why:
        pytest.skip(f"no sshd for the ssh transport tests: {why}")
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
def fake_adb(tmp_path):
    """The stand-in adb server with one device QCFAKE01 over a folder (skips without the adb client)."""
    if shutil.which("adb") is None:
        pytest.skip("the adb client is not installed (apt-get install -y adb)")
    folder = tmp_path / "adbdev"
    server = FakeAdbServer({"QCFAKE01": folder}).start()
    server.folder = folder
    yield server
    server.stop()


def fault_python(folder: Path, mode: str, tag: str) -> str:
    """An executable 'python' for a device whose runtime hangs or crashes on case ``tag``, is
    slow, or stalls after some cases (tests/standins/fault_python.py)."""
    path = Path(folder) / f"python-{mode}-{tag.replace(':', '_')}"
    state = shlex.quote(str(path) + ".state")
    path.write_text(f"#!/bin/sh\nQC_FAULT_STATE={state} exec {shlex.quote(sys.executable)} "
                    f"{shlex.quote(str(HERE / 'fault_python.py'))} {mode} {shlex.quote(tag)} \"$@\"\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


def kill_tree(pids: list[int]) -> None:
    """SIGKILL the given processes and all their descendants (processes this test started)."""
    import signal
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    todo, seen = list(pids), []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo.extend(children.get(p, []))
    for p in seen:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
