"""Faults on the way to a device: a connection cut mid-batch (ssh and adb), a device that
never comes back, a runner that hangs or crashes on one case.

The run always completes; retries are counted in the rows; a case is never lost or
duplicated; what the device (not the kernel) failed is ``infra``, a hang ``timeout``,
a crash ``crash``."""

from __future__ import annotations

import collections
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from suite.cases.generate import generate
from targets import get_target
from targets.base import Timing
from targets.remote import RemoteTarget
from tests.standins.conftest_fixtures import fake_adb, fault_python, kill_tree, sshd  # noqa: F401
from tests.conftest import rows_written as _rows

PY = __import__("sys").executable
TIMING = Timing(warmup=0, repeats=2)


def _finished(root: Path) -> int:
    return len(list(root.glob("*/out/c*.json")))


def _htp_available():
    ok, why = get_target("htp").availability()
    if not ok:
        pytest.skip(f"htp is not available here: {why}")


def test_ssh_cut_mid_batch_completes_with_retries(sshd, run_suite, tmp_path):
    """The ssh session is killed on the server while the runner is half-way through a batch."""
    _htp_available()
    root = tmp_path / "device root"
    slow = fault_python(tmp_path, "slow", "0.2")      # cases one by one (merge=0), 0.2 s apart
    dev = sshd.device(python=slow, root=str(root), merge="0")
    cut = threading.Event()

    def cutter():
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not cut.is_set():
            if _finished(root) >= 3:                       # 3 cases done on the device: cut now
                kill_tree(sshd.session_pids())              # sshd's per-connection processes + the runner
                cut.set()
                return
            time.sleep(0.01)

    th = threading.Thread(target=cutter, daemon=True)
    th.start()
    proc, rd = run_suite("--target=htp", "--ops", "ADD", "--cases-per-op", "12", "--repeats", "3",
                         f"--device={dev}", report_dir=tmp_path / "rep")
    cut.set()
    th.join()
    rows = _rows(rd)
    ids = collections.Counter(r["case_id"] for r in rows)
    assert ids and max(ids.values()) == 1, ids                 # nothing duplicated
    assert len(ids) >= 12                                       # nothing lost (12 + QNN extras)
    assert not [r for r in rows if r["status"] in ("infra", "error", "crash", "timeout")], \
        proc.stdout[-3000:]
    retried = [r for r in rows if r["retries"] > 0]
    assert retried and all(r["retries"] == 1 for r in retried)   # the unfinished cases, once
    assert len(retried) < len(rows)                              # finished ones kept from the partial pull
    assert proc.returncode in (0, 1)


def test_adb_drop_mid_batch_is_retried(fake_adb, tmp_path):
    """The stand-in drops the device (offline) after 3 finished cases: reconnect offline, retry the rest."""
    cases = generate(["ADD", "MUL"], 5, 0)
    fake_adb.drop_after(3, "*/out/c*.json")
    slow = fault_python(tmp_path, "slow", "0.2")      # cases one by one, 0.2 s apart
    r = RemoteTarget("ort", f"adb:QCFAKE01?server={fake_adb.socket_spec}&python={slow}", max_batch=1)
    outs = r.run(cases, TIMING)
    local = get_target("ort").run(cases, TIMING)
    assert [o.status for o in outs] == [o.status for o in local]
    for a, b in zip(local, outs):
        if a.status == "ok":
            assert all(np.array_equal(x, y) for x, y in zip(a.outputs, b.outputs))
    assert fake_adb.devices["QCFAKE01"].drops == 1
    assert "host:reconnect-offline" in fake_adb.log
    retries = [o.info["retries"] for o in outs]
    assert retries.count(0) >= 3 and max(retries) == 1
    assert r.transport.reconnects == 1


def test_adb_device_that_keeps_dropping_gives_infra_not_fail(fake_adb, run_suite, tmp_path):
    """Bounded retries: what still fails is `infra` (pytest ERROR), every case exactly once."""
    fake_adb.drop_after(2, "*/out/c*.json", times=100)
    slow = fault_python(tmp_path, "slow", "0.2")      # LiteRT cases run one by one, 0.2 s apart
    dev = f"adb:QCFAKE01?server={fake_adb.socket_spec}&python={slow}&retries=1"
    proc, rd = run_suite("--target=tflite-ref", "--ops", "ADD", "--cases-per-op", "8", f"--device={dev}",
                         "--latency-cases", "0", report_dir=tmp_path / "rep")
    rows = _rows(rd)
    ids = collections.Counter(r["case_id"] for r in rows)
    assert max(ids.values()) == 1 and len(ids) >= 8
    status = collections.Counter(r["status"] for r in rows)
    assert status["fail"] == 0 and status["infra"] > 0 and status["pass"] == 4   # 2 per attempt kept
    infra = [r for r in rows if r["status"] == "infra"]
    assert all("adb:QCFAKE01" in r["reason"] and "gave up after 2 failed attempt" in r["reason"] for r in infra)
    assert all(r["retries"] == 1 for r in infra)
    assert proc.returncode == 1 and "infra" in proc.stdout and " error" in proc.stdout


def test_unreachable_ssh_device_is_infra(tmp_path):
    cases = generate(["ADD"], 3, 0)
    r = RemoteTarget("ort", "ssh:nobody@127.0.0.1?port=9&retries=1&wait=1&connect_timeout=2")
    t0 = time.monotonic()
    outs = r.run(cases, TIMING)
    assert {o.status for o in outs} == {"infra"}
    assert "ssh" in outs[0].reason and time.monotonic() - t0 < 60
    r.close()


@pytest.mark.parametrize("merged", [True, False])
def test_hanging_runner_is_killed_at_its_timeout(tmp_path, merged):
    """The case in flight is `timeout`; the cases after it are run again and pass. A merged
    batch that hangs gives no verdict: its cases are run again alone, which finds the case."""
    cases = generate(["ADD"], 5, 0)
    py = fault_python(tmp_path, "hang", "c0001")
    r = RemoteTarget("ort", f"local:{tmp_path / 'dev'}?python={py}&timeout=6", max_batch=256 if merged else 1)
    t0 = time.monotonic()
    outs = r.run(cases, TIMING)
    assert time.monotonic() - t0 < 90
    assert [o.status for o in outs] == ["ok", "timeout"] + ["ok"] * (len(cases) - 2)
    assert "timeout (6 s per batch)" in outs[1].reason
    first = 1 if merged else 0     # the merged attempt that hung resubmitted everything once
    assert [o.info["retries"] for o in outs] == [first, first] + [first + 1] * (len(cases) - 2)


@pytest.mark.parametrize("merged", [True, False])
def test_crashing_runner_gives_crash_for_that_case_only(tmp_path, merged):
    cases = generate(["ADD"], 5, 0)
    py = fault_python(tmp_path, "crash", "c0002")
    r = RemoteTarget("ort", f"local:{tmp_path / 'dev'}?python={py}", max_batch=256 if merged else 1)
    outs = r.run(cases, TIMING)
    assert [o.status for o in outs] == ["ok", "ok", "crash"] + ["ok"] * (len(cases) - 3)
    assert "died" in outs[2].reason


def test_runner_that_finishes_without_a_result_is_bounded_infra(tmp_path):
    """A runner that prints its completion line but leaves a case without a result: counted as a
    failed attempt (bounded by retries), never resubmitted for ever."""
    cases = generate(["ADD"], 3, 0)[:3]
    r = RemoteTarget("ort", f"local:{tmp_path / 'dev'}?python={PY}&retries=1")
    seen = r.case_done
    r.case_done = lambda out, p: p.tag != "c0001" and seen(out, p)   # c0001's result never arrives
    outs = r.run(cases, TIMING)
    assert [o.status for o in outs] == ["ok", "infra", "ok"]
    assert "left no result" in outs[1].reason and outs[1].info["retries"] == 1


def test_missing_python_on_the_device_is_infra(tmp_path):
    cases = generate(["ADD"], 2, 0)
    r = RemoteTarget("ort", f"local:{tmp_path / 'dev'}?python=/nonexistent/python3&retries=0")
    outs = r.run(cases, TIMING)
    assert {o.status for o in outs} == {"infra"} and "before its first case" in outs[0].reason


def test_runner_crash_through_ssh_is_crash_not_infra(sshd, tmp_path):
    """A runtime dying of SIGSEGV on the device is that case's `crash`: the session survives it
    (ssh would report the death of the session itself as its own failure, exit 255)."""
    cases = generate(["ADD"], 5, 0)
    py = fault_python(tmp_path, "crash", "c0002")
    r = RemoteTarget("ort", sshd.device(python=py, root=str(tmp_path / "r")))
    try:
        outs = r.run(cases, TIMING)
    finally:
        r.close()
    assert [o.status for o in outs] == ["ok", "ok", "crash"] + ["ok"] * (len(cases) - 3)
    assert "exit 139" in outs[2].reason and r.transport.reconnects == 0
