"""Fixtures for the device tests: a throwaway sshd, the stand-in adb server, a dead ssh host.

Registered by the test modules that use them (``pytest_plugins``); the fault helpers are in
:mod:`tests.standins.faults`."""

from __future__ import annotations

import shutil

import pytest

from tests.standins.dead_host import DeadHost
from tests.standins.fake_adb_server import FakeAdbServer
from tests.standins.sshd import sshd_missing, start_sshd


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


@pytest.fixture(params=["close", "silent"])
def dead_host(request):
    """A loopback port that takes ssh connections and counts them: closing each at once, or
    never answering (tests/standins/dead_host.py)."""
    host = DeadHost(request.param)
    yield host
    host.stop()
