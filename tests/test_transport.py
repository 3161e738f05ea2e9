"""Transports: device strings, quoting, and the four verbs on local, ssh (a throwaway sshd)
and adb (the real adb client against the stand-in server in tests/standins)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from suite.core.errors import QconformError
from targets.transport import (TransportError, make_transport, parse_device, parse_device_list,
                               shell_command)
from tests.inprocess import run_inprocess

pytest_plugins = ["pytester", "tests.standins.conftest_fixtures"]   # + the device fixtures: sshd, fake_adb, dead_host

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
    ("ssh:h?colour=red", "unknown setting 'colour'"), ("adb:S?port=22", "unknown setting 'port'"),
    ("ssh:h?retries=1&retries=2", "setting 'retries' given twice"),
])
def test_bad_device_strings_are_one_clear_error(text, words):
    with pytest.raises(QconformError) as e:
        parse_device(text)
    assert words in str(e.value) and "--device" in str(e.value) and "\n" not in str(e.value)


# every field of a device string checked whole at start: (string, what the message says, the rule)
BAD_FIELDS = [
    ("ssh:host:notaport", "port 'notaport' in 'host:notaport' is not a number", "1 to 65535"),
    ("ssh:host:99999", "port '99999' in 'host:99999' must be >= 1 and <= 65535", "1 to 65535"),
    ("ssh:host:0", "port '0'", "1 to 65535"),
    ("ssh:host:", "port ''", "1 to 65535"),
    ("ssh:host:22.5", "port '22.5' in 'host:22.5' must be a whole number", "1 to 65535"),
    ("ssh:host?port=65536", "setting 'port=65536' must be >= 1 and <= 65535", "port: a whole number"),
    ("ssh:host:22?port=2222", "two ports", "one port"),
    ("ssh:bad host", "ssh host 'bad host'", "[user@]host[:port]"),
    ("ssh:me me@host", "ssh user 'me me'", "[user@]host[:port]"),
    ("ssh:host?retries=inf", "setting 'retries=inf' must be >= 0 and <= 10", "retries: "),
    ("ssh:host?retries=1e9", "setting 'retries=1e9' must be >= 0 and <= 10", "from 0 to 10"),
    ("ssh:host?retries=nan", "setting 'retries=nan' must be >= 0 and <= 10", "from 0 to 10"),
    ("ssh:host?retries=-1", "setting 'retries=-1' must be >= 0 and <= 10", "from 0 to 10"),
    ("ssh:host?retries=1.5", "setting 'retries=1.5' must be a whole number", "from 0 to 10"),
    ("ssh:host?retries=%D9%A3", "is not a number", "from 0 to 10"),     # an Arabic-Indic 3: int() takes it
    ("ssh:host?timeout=inf", "setting 'timeout=inf' must be > 0 and <= 86400", "timeout: seconds"),
    ("ssh:host?timeout=0", "setting 'timeout=0' must be > 0", "timeout: seconds"),
    ("ssh:host?timeout=1e9", "setting 'timeout=1e9' must be > 0 and <= 86400", "timeout: seconds"),
    ("ssh:host?timeout=soon", "setting 'timeout=soon' is not a number", "timeout: seconds"),
    ("ssh:host?wait=nan", "setting 'wait=nan' must be > 0 and <= 3600", "wait: seconds"),
    ("ssh:host?wait=-inf", "setting 'wait=-inf' must be > 0", "wait: seconds"),
    ("ssh:host?merge=yes", "setting 'merge=yes' must be 0 or 1", "merge: 0 or 1"),
    ("ssh:host?connect_timeout=0", "setting 'connect_timeout=0' must be >= 1 and <= 300", "connect_timeout: "),
    ("ssh:host?python=", "setting 'python=' must not be empty", "python: "),
    ("local?root=", "setting 'root=' must not be empty", "root: "),
    ("local?name=", "setting 'name=' must not be empty", "name: "),
    ("local?python=py%0Athon", "must not hold control characters", "python: "),
    ("ssh:host?identity=/nonexistent/id_key", "names no file on this host (/nonexistent/id_key)", "identity: "),
    ("ssh:host?config=/nonexistent/ssh_config", "names no file on this host", "config: "),
    ("adb:S?server=tcp:127.0.0.1:99999", "setting 'server=tcp:127.0.0.1:99999' must be >= 1", "server: "),
    ("adb:S?server=usb", "must be tcp:[HOST:]PORT", "server: "),
]


@pytest.mark.parametrize("text, says, rule", BAD_FIELDS)
def test_every_field_is_checked_at_parse(text, says, rule):
    """One error naming the device string, the field (--device, and the setting or the part of
    the address) and the rule, on one line."""
    with pytest.raises(QconformError) as e:
        parse_device(text)
    msg = str(e.value)
    assert e.value.source == text and e.value.field == "--device", msg
    assert msg.startswith(f"{text}: field '--device': ") and says in msg and rule in msg and "\n" not in msg, msg


def test_settings_are_typed():
    s = parse_device("ssh:me@board:2222?retries=0&timeout=0.5&wait=5&merge=0&connect_timeout=3")
    assert (s.host, s.port, s.label) == ("me@board", 2222, "ssh:me@board:2222")
    assert s.values == {"retries": 0, "timeout": 0.5, "wait": 5.0, "merge": 0, "connect_timeout": 3}
    assert isinstance(s.get("retries"), int) and s.get("absent", 7) == 7
    assert (parse_device("ssh:[::1]:2200").host, parse_device("ssh:[::1]:2200").port) == ("::1", 2200)
    assert parse_device("ssh:board?port=22").port == parse_device("ssh:board:22?port=22").port == 22
    assert parse_device("ssh:board").port is None
    assert parse_device("ssh:h?retries=10&timeout=86400&wait=3600").values == \
        {"retries": 10, "timeout": 86400.0, "wait": 3600.0}
    assert parse_device("adb:S?server=tcp:5037").get("server") == "tcp:5037"


@pytest.mark.parametrize("text, words", [
    ("ssh:host:notaport", "port 'notaport'"), ("ssh:host:99999", "port '99999'"),
    ("ssh:host?retries=1e9", "'retries=1e9'"), ("ssh:host?retries=inf", "'retries=inf'"),
    ("ssh:host?retries=nan", "'retries=nan'"), ("ssh:host?retries=-1", "'retries=-1'"),
    ("ssh:host?timeout=inf", "'timeout=inf'"),
])
def test_bad_device_string_is_a_usage_error(pytester, text, words):
    """pytest refuses the command line at start: status 4, one line, nothing run or created."""
    proc, rd = run_inprocess(pytester, "--target=ort", "--ops", "ADD", "--cases-per-op", "2", f"--device={text}")
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 4 and len(lines) == 1, proc.stdout + proc.stderr
    assert lines[0].startswith(f"ERROR: {text}: field '--device': ") and words in lines[0], lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr and not rd.parent.exists()


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
