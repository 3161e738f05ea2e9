"""Transports: device strings, quoting, and the four verbs on local, ssh (a throwaway sshd)
and adb (the real adb client against the stand-in server in tests/standins)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from suite.core.errors import QconformError
from targets.transport import (TransportError, make_transport, parse_device, parse_device_list,
                               shell_command)
from tests.standins.conftest_fixtures import fake_adb, sshd  # noqa: F401  (fixtures)

NASTY = ["a b", "it's", 'say "hi"', "x; rm -rf /tmp/never", "$HOME", "`id`", "tab\there", "*", "-n"]
NASTY_DIR = "ws 'q'; \"d\" $x"


# ----------------------------------------------------------------------------- device strings

def test_parse_device_kinds_and_settings():
    s = parse_device("ssh:me@board:2222?python=/opt/py%20env/bin/python3&root=/data/qc")
    assert (s.kind, s.address, s.label) == ("ssh", "me@board:2222", "ssh:me@board:2222")
    assert s.options == {"python": "/opt/py env/bin/python3", "root": "/data/qc"}
    assert parse_device("adb:R58M12345").label == "adb:R58M12345"
    assert parse_device("local").label == "local"
    assert parse_device("local:/tmp/dev a?name=board-a").label == "board-a"
    specs = parse_device_list(["ssh:a,ssh:b?python=x", "adb:S1"])
    assert [d.label for d in specs] == ["ssh:a", "ssh:b", "adb:S1"]


@pytest.mark.parametrize("text, words", [
    ("telnet:host", "unknown device kind"), ("ssh:", "names no host"), ("adb:", "names no serial"),
    ("ssh:-oProxyCommand=x", "must not start with '-'"), ("adb:a b", "adb serial"),
    ("ssh:h?colour=red", "unknown setting 'colour'"), ("ssh:h?retries=-1", "must be >= 0"),
])
def test_bad_device_strings_are_one_clear_error(text, words):
    with pytest.raises(QconformError) as e:
        s = parse_device(text)
        s.float_opt("retries", 0)
    assert words in str(e.value) and "--device" in str(e.value)


def test_same_device_twice_is_rejected():
    with pytest.raises(QconformError, match="given twice"):
        parse_device_list(["ssh:a", "ssh:a"])


def test_shell_command_keeps_every_token_whole():
    """The string handed to a device shell runs exactly the argv, whatever it holds."""
    cmd = shell_command(["printf", "%s\\n", *NASTY], env={"QC_X": "v a l'"}, cwd="/")
    out = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True).stdout
    assert out.splitlines() == NASTY
    cmd = shell_command(["sh", "-c", 'printf "%s" "$QC_X"'], env={"QC_X": "v a l'; x"})
    assert subprocess.run(["sh", "-c", cmd], capture_output=True, text=True).stdout == "v a l'; x"


# ----------------------------------------------------------------------------- the verbs

def _exercise(t, tmp_path: Path, root_name: str = NASTY_DIR):
    """push / run / pull / cleanup with a workspace and files whose names need quoting."""
    src = tmp_path / "src"
    (src / "sub dir").mkdir(parents=True)
    (src / "a.bin").write_bytes(bytes(range(256)) * 10)
    (src / "sub dir" / "it's; b.txt").write_text("hello\n")
    ws = f"{t.root}/{root_name}"
    t.push(src, ws)
    res = t.run(["printf", "%s\n", *NASTY], timeout=30, cwd=ws)
    assert res.rc == 0 and res.stdout.splitlines() == NASTY
    res = t.run(["cat", "sub dir/it's; b.txt"], timeout=30, cwd=ws)
    assert (res.rc, res.stdout) == (0, "hello\n")
    res = t.run(["sh", "-c", "exit 7"], timeout=30)
    assert res.rc == 7 and not res.timed_out
    back = tmp_path / "back"
    t.pull(ws, back)
    assert (back / "a.bin").read_bytes() == (src / "a.bin").read_bytes()
    assert (back / "sub dir" / "it's; b.txt").read_text() == "hello\n"
    t.cleanup(ws)
    empty = tmp_path / "empty"
    t.pull(ws, empty)                       # a workspace that is gone pulls as nothing
    assert list(empty.iterdir()) == []
    res = t.run(["sleep", "60"], timeout=2)
    assert res.timed_out or res.rc in (124, 137)          # stopped: `sleep 60` itself exits 0


def test_local_transport(tmp_path):
    t = make_transport(f"local:{tmp_path / 'device root'}")
    _exercise(t, tmp_path)
    assert t.round_trips >= 7


def test_ssh_transport(sshd, tmp_path):
    root = tmp_path / "ssh root 'r'; x"
    t = make_transport(sshd.device(root=str(root)))
    try:
        _exercise(t, tmp_path)
        # ssh's own failure is a TransportError, not an exit code
        bad = make_transport(sshd.device(root=str(root)).replace("qc-test-device", "qc-nowhere"))
        with pytest.raises(TransportError):
            bad.run(["true"], timeout=10)
    finally:
        t.close()


def test_adb_transport_with_real_client_and_stand_in(fake_adb, tmp_path):
    t = make_transport(f"adb:QCFAKE01?server={fake_adb.socket_spec}")
    _exercise(t, tmp_path)
    assert any("shell,v2" in line for line in fake_adb.log)      # exit codes through shell protocol v2
    # an offline device is a TransportError; `adb reconnect offline` brings it back
    fake_adb.set_state("QCFAKE01", "offline")
    with pytest.raises(TransportError, match="offline"):
        t.run(["true"], timeout=10)
    t.reconnect()
    assert t.run(["true"], timeout=10).rc == 0
    assert "host:reconnect-offline" in fake_adb.log
    missing = make_transport(f"adb:NOSUCH?server={fake_adb.socket_spec}")
    with pytest.raises(TransportError, match="not found"):
        missing.run(["true"], timeout=10)
