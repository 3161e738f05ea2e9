"""Faults on the way to a device: a device dead or misconfigured at start (one error from its
probe), a connection cut mid-batch (ssh and adb), a device that never comes back (its retry
budget for the run spent once, then ``infra`` at once), a runner that hangs or crashes on one case.

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
from suite.core.errors import QconformError
from targets import get_target
from targets.base import Timing
from targets.remote import RemoteTarget, device_targets
from targets.transport import parse_device
from tests.inprocess import run_inprocess
from tests.standins.faults import fault_python, kill_tree
from tests.conftest import rows_written as _rows

pytest_plugins = ["pytester", "tests.standins.conftest_fixtures"]   # + the device fixtures: sshd, fake_adb, dead_host

PY = __import__("sys").executable
TIMING = Timing(warmup=0, repeats=2)


def _finished(root: Path) -> int:
    return len(list(root.glob("*/out/c*.json")))


def _htp_available():
    ok, why = get_target("htp").availability()
    if not ok:
        pytest.skip(f"htp is not available here: {why}")


def test_ssh_cut_mid_batch_completes_with_retries(sshd, run_suite, tmp_path):
    """The ssh session is killed on the server while the runner is half-way through a batch:
    the runner stalls after 3 cases (the first time only), the test then kills the session's
    sshd processes and the runner. The 3 finished cases are kept, the rest run again, once."""
    _htp_available()
    root = tmp_path / "device root"
    stall = fault_python(tmp_path, "stall", "3:1")     # one case at a time (merge=0)
    dev = sshd.device(python=stall, root=str(root), merge="0")
    cut = threading.Event()

    def cutter():
        while not cut.is_set():
            if _finished(root) >= 3:                       # 3 cases done, the runner waits: cut now
                kill_tree(sshd.session_pids())              # sshd's per-connection processes + the runner
                cut.set()
                return
            time.sleep(0.01)

    th = threading.Thread(target=cutter, daemon=True)
    th.start()
    try:
        proc, rd = run_suite("--target=htp", "--ops", "ADD", "--cases-per-op", "8", "--repeats", "3",
                             "--latency-cases", "0", f"--device={dev}", report_dir=tmp_path / "rep")
    finally:
        stopped = cut.is_set()
        cut.set()
        th.join()
    assert stopped, proc.stdout[-3000:] + proc.stderr[-2000:]
    rows = _rows(rd)
    ids = collections.Counter(r["case_id"] for r in rows)
    assert ids and max(ids.values()) == 1, ids                 # nothing duplicated
    assert len(ids) >= 8                                        # nothing lost (8 + QNN extras)
    assert not [r for r in rows if r["status"] in ("infra", "error", "crash", "timeout")], \
        proc.stdout[-3000:]
    # the 3 cases finished before the cut were kept from the partial pull; the rest ran again once
    assert sorted(r["retries"] for r in rows) == [0] * 3 + [1] * (len(rows) - 3)
    assert proc.returncode in (0, 1)


def test_adb_drop_mid_batch_is_retried(fake_adb, tmp_path):
    """The stand-in drops the device (offline) after 3 finished cases: reconnect offline, retry the rest."""
    cases = generate(["ADD", "MUL"], 5, 0)
    fake_adb.drop_after(3, "*/out/c*.json")
    stall = fault_python(tmp_path, "stall", "3:1")    # cases one by one; 3, then wait for the cut
    r = RemoteTarget("ort", f"adb:QCFAKE01?server={fake_adb.socket_spec}&python={stall}", max_batch=1)
    outs = r.run(cases, TIMING)
    local = get_target("ort").run(cases, TIMING)
    assert [o.status for o in outs] == [o.status for o in local]
    for a, b in zip(local, outs):
        if a.status == "ok":
            assert all(np.array_equal(x, y) for x, y in zip(a.outputs, b.outputs))
    assert fake_adb.devices["QCFAKE01"].drops == 1 and fake_adb.devices["QCFAKE01"].dropped_after == [3]
    assert "host:reconnect-offline" in fake_adb.log
    assert [o.info["retries"] for o in outs] == [0] * 3 + [1] * (len(cases) - 3)
    assert r.transport.reconnects == 1


def test_adb_device_that_keeps_dropping_gives_infra_not_fail(fake_adb, run_suite, tmp_path):
    """Bounded retries: what still fails is `infra` (pytest ERROR), every case exactly once.

    Deterministic: every run of the runner finishes 2 cases and then waits (stall 2) until the
    stand-in, which drops the device once 2 results exist, cuts it and kills it (the whole
    session: GNU `timeout` puts the runner in a process group of its own). So each of the
    2 attempts (retries=1) keeps exactly 2 cases, however fast or slow the host is."""
    fake_adb.drop_after(2, "*/out/c*.json", times=100)
    stall = fault_python(tmp_path, "stall", "2")      # LiteRT cases one by one; 2, then wait for the cut
    dev = f"adb:QCFAKE01?server={fake_adb.socket_spec}&python={stall}&retries=1"
    proc, rd = run_suite("--target=tflite-ref", "--ops", "ADD", "--cases-per-op", "8", f"--device={dev}",
                         "--latency-cases", "0", report_dir=tmp_path / "rep")
    rows = _rows(rd)
    ids = collections.Counter(r["case_id"] for r in rows)
    assert max(ids.values()) == 1 and len(ids) >= 8
    assert fake_adb.devices["QCFAKE01"].dropped_after == [2, 2]   # what the two cuts left
    sent = [r for r in rows if r["status"] != "unsupported"]     # (LiteRT has no 16-bit ADD: never sent)
    status = collections.Counter(r["status"] for r in sent)
    assert status == {"pass": 4, "infra": len(sent) - 4} and len(sent) > 6, proc.stdout[-3000:]
    passed = [r for r in rows if r["status"] == "pass"]
    assert sorted(r["retries"] for r in passed) == [0, 0, 1, 1]   # 2 kept per attempt
    infra = [r for r in rows if r["status"] == "infra"]
    assert all("adb:QCFAKE01" in r["reason"] and "gave up after 2 failed attempt" in r["reason"] for r in infra)
    assert all("\n" not in r["reason"] and len(r["reason"]) <= 400 for r in infra)   # one short line each
    assert all(r["retries"] == 1 for r in infra)
    assert proc.returncode == 1 and "infra" in proc.stdout and " error" in proc.stdout


# ----------------------------------------------------------------------------- the probe at start

def _usage_error(proc, *words):
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 4 and len(lines) == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr and "ERROR at setup" not in proc.stdout
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def test_unreachable_ssh_device_is_one_error_before_any_case(pytester, dead_host):
    """16 cases on a dead ssh device (closing every connection, or silent until ssh's connect
    timeout): one connection attempt, one usage error naming the device, nothing run."""
    dev = f"ssh:root@127.0.0.1:{dead_host.port}?config=none&connect_timeout=1"
    proc, rd = run_inprocess(pytester, "--target=ort", "--ops", "ADD", "--cases-per-op", "16", f"--device={dev}")
    _usage_error(proc, f"ERROR: {dev}: field '--device': the device does not answer: ssh root@127.0.0.1",
                 "within 30 s")
    assert dead_host.accepts == 1
    assert not rd.parent.exists()          # no run folder, no rows


@pytest.mark.parametrize("target, package, hidden", [
    ("tflite", "ai-edge-litert", "ai_edge_litert,tflite_runtime"),
    ("tflite-ref", "ai-edge-litert", "ai_edge_litert,tflite_runtime"),
    ("ort", "onnxruntime", "onnxruntime"),
    ("htp", "onnxruntime-qnn", "onnxruntime_qnn"),   # (onnxruntime there, without QNN)
])
def test_missing_runtime_on_the_device_names_the_package(tmp_path, target, package, hidden):
    py = fault_python(tmp_path, "without", hidden)
    spec = parse_device(f"local:{tmp_path / 'dev'}?python={py}")
    with pytest.raises(QconformError) as e:
        device_targets([target], spec, [spec])
    msg = str(e.value)
    assert f"{target} needs " in msg and f"pip install {package} for that python" in msg, msg
    assert f"the device's python ({py})" in msg and "?python=" in msg and "\n" not in msg
    assert not list((tmp_path / "dev").iterdir())            # the probe's workspace removed


def test_missing_runtime_through_ssh_is_one_usage_error(sshd, pytester, tmp_path):
    py = fault_python(tmp_path, "without", "ai_edge_litert,tflite_runtime")
    dev = sshd.device(python=py, root=str(tmp_path / "r"))
    proc, rd = run_inprocess(pytester, "--target=tflite", "--ops", "ADD", "--cases-per-op", "16",
                             f"--device={dev}")
    _usage_error(proc, "ERROR: ssh:qc-test-device?", "tflite needs litert", "No module named 'ai_edge_litert'",
                 "pip install ai-edge-litert", py)
    assert not rd.parent.exists()


def test_device_python_that_cannot_run_the_runner_is_one_error(tmp_path):
    spec = parse_device(f"local:{tmp_path / 'dev'}?python=/nonexistent/python3")
    with pytest.raises(QconformError, match=r"the device's python \(/nonexistent/python3\) cannot run the "
                                            r"device runner \(exit 127.*NumPy.*\?python="):
        device_targets(["ort"], spec, [spec])


# ----------------------------------------------------------------------------- a device dying mid-run

def _one_short_line(outs):
    assert all("\n" not in o.reason and len(o.reason) <= 400 for o in outs if o.status == "infra")


def test_device_that_dies_mid_run_is_given_up_at_once(fake_adb, tmp_path):
    """The device drops after 2 cases and never comes back: one reconnect (bounded by `wait`), then
    the batch (its 2 results are on the lost device) and every later batch are `infra`, the later
    ones with no request to the device at all."""
    cases = generate(["ADD"], 4, 0)[:8]
    fake_adb.drop_after(2, "*/out/c*.json", revive=False)
    stall = fault_python(tmp_path, "stall", "2")      # cases one by one; 2, then wait for the cut
    r = RemoteTarget("ort", f"adb:QCFAKE01?server={fake_adb.socket_spec}&python={stall}&wait=1", max_batch=1)
    first = r.run(cases[:5], TIMING)
    assert [o.status for o in first] == ["infra"] * 5, [o.reason for o in first]
    assert fake_adb.devices["QCFAKE01"].dropped_after == [2]
    assert r.transport.reconnects == 1 and fake_adb.log.count("host:reconnect-offline") == 1
    assert all("device adb:QCFAKE01: reconnect failed" in o.reason for o in first)
    asked = len(fake_adb.log)
    later = r.run(cases[5:], TIMING)
    assert {o.status for o in later} == {"infra"} and len(fake_adb.log) == asked     # not even one request
    assert all("device adb:QCFAKE01, earlier in this run: reconnect failed" in o.reason for o in later)
    assert [o.info["batch_round_trips"] for o in later] == [0] * len(later)
    _one_short_line(first + later)


def test_retry_budget_is_for_the_whole_run_not_per_batch(fake_adb, tmp_path):
    """retries=1: the first batch's drop is retried; the second batch's drop spends the run's
    budget (a per-batch budget would retry it), so its unfinished case and the third batch are
    `infra`, the third without a request to the device."""
    cases = generate(["ADD"], 4, 0)[:9]
    fake_adb.drop_after(2, "*/out/c*.json", times=2)
    stall = fault_python(tmp_path, "stall", "2:2")    # the first 2 runs that reach a 3rd case stall
    r = RemoteTarget("ort", f"adb:QCFAKE01?server={fake_adb.socket_spec}&python={stall}&retries=1",
                     max_batch=1)
    one = r.run(cases[:3], TIMING)
    assert [o.status for o in one] == ["ok"] * 3 and [o.info["retries"] for o in one] == [0, 0, 1]
    two = r.run(cases[3:6], TIMING)
    assert [o.status for o in two] == ["ok", "ok", "infra"], [o.reason for o in two]
    assert "gave up after 2 failed attempt(s) in this run" in two[2].reason
    assert fake_adb.devices["QCFAKE01"].dropped_after == [2, 2] and r.transport.reconnects == 2
    asked = len(fake_adb.log)
    three = r.run(cases[6:], TIMING)
    assert {o.status for o in three} == {"infra"} and len(fake_adb.log) == asked
    assert all("earlier in this run: gave up after 2 failed attempt(s)" in o.reason for o in three)
    _one_short_line(one + two + three)


@pytest.mark.parametrize("dead_host", ["close"], indirect=True)
def test_unreachable_ssh_device_mid_run_is_infra_at_once(dead_host):
    """Without the probe (the target used directly): the first batch spends one reconnect; the
    next makes no connection attempt."""
    cases = generate(["ADD"], 3, 0)
    r = RemoteTarget("ort", f"ssh:nobody@127.0.0.1:{dead_host.port}?config=none&retries=1&wait=1"
                            f"&connect_timeout=2")
    try:
        outs = r.run(cases, TIMING)
        tried = dead_host.accepts
        again = r.run(cases, TIMING)
    finally:
        r.close()
    assert {o.status for o in outs} == {"infra"} and tried >= 2           # the push, the reconnect's tries
    assert "reconnect failed" in outs[0].reason and "ssh nobody@127.0.0.1" in outs[0].reason
    assert [o.info["retries"] for o in outs] == [0] * len(cases)
    assert {o.status for o in again} == {"infra"} and dead_host.accepts == tried
    _one_short_line(outs + again)


@pytest.mark.parametrize("merged", [True, False])
def test_hanging_runner_is_killed_at_its_timeout(tmp_path, merged):
    """The case in flight is `timeout`; the cases after it are run again and pass. A merged
    batch that hangs gives no verdict: its cases are run again alone, which finds the case."""
    cases = generate(["ADD"], 5, 0)
    py = fault_python(tmp_path, "hang", "c0001")
    r = RemoteTarget("ort", f"local:{tmp_path / 'dev'}?python={py}&timeout=6", max_batch=256 if merged else 1)
    outs = r.run(cases, TIMING)
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
