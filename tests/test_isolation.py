"""Process isolation: crashes, hangs and garbage become crash / timeout / error verdicts of exactly
the cases that caused them, and every other case still runs (tests/fault_targets.py)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from suite.cases.generate import generate
from suite.harness.isolation import Isolator, check_outcome, check_outcomes, spec_of
from suite.harness.runner import Run, RunConfig
from targets.base import Outcome, Timing
from tests.conftest import ROOT
from tests.fault_targets import EXPECTED, BatchedFaulty, Faulty, InProcessFaulty
from tests.conftest import rows_written as _rows


def _run(target, cases, tmp_path, **cfg):
    """Every case through Run.verdict (the plugin's path, without pytest); returns the verdicts."""
    name = target.name
    cfg.setdefault("latency_cases", 0)   # whole batches from the first case on (no single-case latency runs)
    run = Run(RunConfig(targets=[name], report_dir=str(tmp_path / "rep"), **cfg), targets={name: target})
    run.plan([(c, name) for c in cases])
    try:
        return {c.id: run.verdict(c, name) for c in cases}, run
    finally:
        run.close()


# ----------------------------------------------------------------------------- the "done when"

def test_segfault_hang_and_wrong_shape_get_exactly_their_verdicts(run_suite):
    cases = generate(["ADD"], 12, 0)
    ids = [c.id for c in cases]
    plan = {ids[2]: "segv", ids[5]: "hang", ids[8]: "shape"}
    proc, rd = run_suite("--target=tests.fault_targets:Faulty", "--ops", "ADD", "--cases-per-op", "12",
                         "--timeout", "2", env={"QCONFORM_FAULTS": json.dumps(plan)})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    rows = {r["case_id"]: r for r in _rows(rd)}
    assert sorted(rows) == sorted(ids)                          # nothing lost, nothing twice
    want = {ids[2]: "crash", ids[5]: "timeout", ids[8]: "error"}
    assert {i: r["status"] for i, r in rows.items() if r["status"] != "pass"} == want
    assert rows[ids[2]]["signal"] == "SIGSEGV" and "Segmentation fault" in rows[ids[2]]["reason"]
    assert "no result within 2 s" in rows[ids[5]]["reason"]
    assert "shape [1, 2, 3, 4, 5]" in rows[ids[8]]["reason"]
    # pytest's own outcome: ERROR (not failed, not skipped), the message says which verdict
    assert f"{len(ids) - 3} passed, 3 errors" in proc.stdout
    assert "crash: worker process killed by SIGSEGV" in proc.stdout
    assert "timeout: no result within 2 s" in proc.stdout
    assert "error: target returned garbage" in proc.stdout
    # the crash and the hang each replaced the worker; the garbage did not
    pids = [rows[i]["pid"] for i in ids if rows[i]["status"] == "pass"]
    assert len(set(pids)) == 3 and os.getpid() not in pids


@pytest.mark.parametrize("cls", [Faulty, BatchedFaulty])
def test_every_fault_kind_gets_its_verdict(cls, tmp_path, monkeypatch):
    cases = generate(["ADD"], 30, 0)
    kinds = list(EXPECTED)
    assert len(cases) >= len(kinds) + 5
    plan = {c.id: k for c, k in zip(cases[1::2] + cases[2::2], kinds)}
    assert sorted(plan.values()) == sorted(kinds)
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps(plan))
    verdicts, run = _run(cls(), cases, tmp_path, timeout=2.0, batch_size=64)
    for c in cases:
        v = verdicts[c.id]
        status, words = EXPECTED.get(plan.get(c.id), ("pass", ""))
        assert (v.status, plan.get(c.id)) == (status, plan.get(c.id)), v.message()
        assert words in v.reason or (words == "LSB" and v.status == "fail"), v.reason
    rows = {r["case_id"]: r for r in _rows(tmp_path / "rep")}
    assert len(rows) == len(cases)
    dead = sum(EXPECTED[k][0] == "crash" and k != "sysexit" for k in kinds)   # sysexit is caught
    # a batched target's first crash kills the whole batch, which is then re-run case by case
    assert run.stats["isolation_crashes"] == dead + (cls is BatchedFaulty)
    assert run.stats["isolation_timeouts"] == 2


def test_worker_is_reused_across_batches(tmp_path, monkeypatch):
    monkeypatch.setenv("QCONFORM_FAULTS", "{}")
    cases = generate(["ADD", "MUL"], 6, 0)
    verdicts, run = _run(Faulty(), cases, tmp_path, batch_size=4)
    assert all(v.status == "pass" for v in verdicts.values())
    pids = {v.row["pid"] for v in verdicts.values()}
    assert len(pids) == 1 and os.getpid() not in pids
    assert run.stats["isolation_workers_started"] == 1


def test_isolation_none_and_isolate_false_run_in_process(tmp_path, monkeypatch):
    cases = generate(["ADD"], 6, 0)
    plan = {cases[1].id: "shape", cases[3].id: "raise", cases[4].id: "nan"}
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps(plan))
    for target, cfg in ((Faulty(), {"isolation": "none"}), (InProcessFaulty(), {})):
        verdicts, run = _run(target, cases, tmp_path / target.name / str(cfg), **cfg)
        assert {i: v.status for i, v in verdicts.items() if v.status != "pass"} == {
            cases[1].id: "error", cases[3].id: "error", cases[4].id: "error"}
        assert {v.row["pid"] for v in verdicts.values() if v.status == "pass"} == {os.getpid()}
        assert run.stats.get("isolation_workers_started", 0) == 0


def test_batched_hang_is_rerun_one_case_at_a_time(tmp_path, monkeypatch):
    cases = generate(["ADD"], 5, 0)[:5]
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps({cases[0].id: "hang"}))
    verdicts, run = _run(BatchedFaulty(), cases, tmp_path, timeout=1.0)
    assert [verdicts[c.id].status for c in cases] == ["timeout"] + ["pass"] * 4
    # the batch's limit scales with its size (5 x 1 s), the single re-run has the per-case limit
    assert "no result within 1 s while running this case" in verdicts[cases[0].id].reason
    assert run.stats["isolation_timeouts"] == 2


def test_target_that_cannot_start_in_a_worker_is_an_error_per_case(tmp_path):
    class Local(Faulty):   # defined in a function: a worker cannot import it -> runs in process
        name = "local"
    assert spec_of(Local()) is None
    iso = Isolator(Faulty())
    iso.spec = dict(iso.spec, module="tests.no_such_module")
    outs = iso.run(generate(["ADD"], 3, 0)[:3], Timing(0, 1))
    iso.close()
    assert [o.status for o in outs] == ["error"] * 3
    assert all("could not create the target" in o.reason and "no_such_module" in o.reason for o in outs)


def test_check_outcomes_names_what_is_wrong():
    assert check_outcome([1, 2]).reason == "target returned list instead of an Outcome"
    assert "unknown status 'great'" in check_outcome(Outcome("great")).reason
    assert "not a list of arrays" in check_outcome(Outcome("ok", outputs=np.zeros(3))).reason
    assert check_outcome(Outcome.ok([np.zeros(2, np.int8)])).status == "ok"
    outs = check_outcomes([Outcome.ok([np.zeros(1)])], 2)
    assert [o.status for o in outs] == ["error", "error"] and "1 outcomes for 2 cases" in outs[0].reason
    assert "NoneType for 1 cases" in check_outcomes(None, 1)[0].reason
    # latency samples that are no time (NaN, inf) are dropped: they would break the summaries' medians
    assert check_outcome(Outcome.ok([np.zeros(1)], [2.0, float("inf"), float("nan"), 3.0])).latency_us == [2.0, 3.0]


def test_nan_in_a_float32_output_is_garbage():
    """NaN where float32 values are due (DEQUANTIZE) is an ``error``, not a distance in ULP."""
    from suite.core.case import Tensor
    from suite.core.compare import compare
    spec = [Tensor("float32", (3,))]
    want = [np.array([1.0, 2.0, 3.0], np.float32)]
    assert "NaN" in compare(want, [np.array([1.0, np.nan, 3.0], np.float32)], spec).garbage
    one_ulp = compare(want, [np.array([1.0, np.nextafter(np.float32(2), np.float32(3)), 3.0], np.float32)], spec)
    assert one_ulp.garbage is None and (one_ulp.mismatches, one_ulp.max_abs_lsb) == (1, 1.0)
    # a comparison's bool output: 2 is no answer at all (error), 0 for 1 a wrong one (fail)
    spec, want = [Tensor("bool", (2,))], [np.array([True, False])]
    assert "bool range" in compare(want, [np.array([2, 0], np.int8)], spec).garbage
    assert compare(want, [np.array([0, 0], np.int8)], spec).mismatches == 1


def test_worker_dies_with_its_parent(tmp_path):
    """A run killed with SIGKILL leaves no worker behind, even one hung in a kernel."""
    script = (
        "import json, os, sys, threading\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from suite.cases.generate import generate\n"
        "from suite.isolation import Isolator\n"
        "from targets.base import Timing\n"
        "from tests.fault_targets import Faulty\n"
        "c = generate(['ADD'], 1, 0)\n"
        "os.environ['QCONFORM_FAULTS'] = json.dumps({c[0].id: 'hang'})\n"
        "iso = Isolator(Faulty(), timeout=600)\n"
        "w = iso._worker()\n"
        "print(w.pid, flush=True)\n"
        "iso.run(c, Timing(0, 1))\n"
    )
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    pid = int(p.stdout.readline())
    time.sleep(1.0)   # the worker is now hung in the case
    assert _alive(pid)
    p.send_signal(signal.SIGKILL)
    p.wait()
    deadline = time.time() + 10
    while _alive(pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            state = next(l for l in f if l.startswith("State:"))
        return "Z" not in state.split()[1]
    except (OSError, StopIteration):
        return False


def test_isolation_and_timeout_options_are_checked(run_suite):
    proc, _ = run_suite("--target=ref", "--ops", "ADD", "--isolation", "threads")
    assert proc.returncode == 4 and "--isolation" in proc.stderr and "Traceback" not in proc.stderr
    proc, _ = run_suite("--target=ref", "--ops", "ADD", "--timeout", "0")
    assert proc.returncode == 4 and "--timeout" in proc.stderr and "Traceback" not in proc.stderr


# ----------------------------------------------------------------------------- several parts in one message

def _parts(cases, size):
    return [(cases[i:i + size], 0) for i in range(0, len(cases), size)]


def test_parts_in_one_message_a_crash_in_one_part_is_that_case_and_the_rest_go_to_a_fresh_worker(monkeypatch):
    cases = generate(["ADD"], 12, 0)[:12]
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps({cases[5].id: "segv", cases[9].id: "hang"}))
    iso = Isolator(BatchedFaulty(), timeout=1.0)   # (tiny ADD cases: a hung part of 4 costs 4 s)
    seen = []
    try:
        outs = iso.run_parts(_parts(cases, 4), Timing(), on_outcome=lambda k, i, o: seen.append((k, i)))
    finally:
        iso.close()
    flat = [o for part in outs for o in part]
    assert [o.status for o in flat] == ["ok"] * 5 + ["crash"] + ["ok"] * 3 + ["timeout"] + ["ok"] * 2
    assert "SIGSEGV" in flat[5].reason and "no result within" in flat[9].reason
    assert sorted(seen) == [(k, i) for k in range(3) for i in range(4)]
    pids = [o.info.get("pid") for o in flat]
    assert pids[0] == pids[3] != pids[4]   # part 1 crashed as a batch: its cases ran one at a time
    assert iso.stats["crashes"] == 2 and iso.stats["timeouts"] == 2   # batch + case, each


def test_submitted_parts_wait_in_the_worker_and_run_on_go_or_are_dropped(monkeypatch):
    from suite.harness.isolation import Worker
    monkeypatch.setenv("QCONFORM_FAULTS", "{}")
    cases = generate(["ADD", "MUL"], 4, 0)
    a, b = _parts(cases[:6], 3), _parts(cases[6:10], 2)
    kinds = []
    send = Worker.send
    monkeypatch.setattr(Worker, "send", lambda self, msg: kinds.append(msg[0]) or send(self, msg))
    iso = Isolator(BatchedFaulty(), timeout=10.0)
    try:
        iso.run_parts(_parts(cases[:1], 1), Timing())          # a ready, idle worker
        assert iso.submit(a, Timing()) is True
        assert iso.submit(a, Timing()) is True                 # again: the second replaces the first
        got_a = iso.run_parts(a, Timing())
        assert kinds[-1] == "go"
        assert iso.submit(b, Timing()) is True
        got_a2 = iso.run_parts(a, Timing())                     # other parts: b is dropped, a sent
        assert kinds[-1] == "parts"
        got_b = iso.run_parts(b, Timing())                      # b was dropped: sent again
        assert kinds[-1] == "parts"
        import select
        fd = iso.worker.proc.stdout.fileno()
        assert not iso.worker._buf and select.select([fd], [], [], 0.3)[0] == []   # nothing ran twice
    finally:
        iso.close()
    for got, parts in ((got_a, a), (got_a2, a), (got_b, b)):
        assert [[o.status for o in p] for p in got] == [["ok"] * len(cs) for cs, _ in parts]
    assert iso.stats["workers_started"] == 1


def test_parts_of_a_streaming_target_pass_each_outcome_on_as_it_exists(monkeypatch):
    # a per-case target streams its outcomes: the ones before a hang are judged (and their rows
    # written) while the hang's timeout runs, not after it
    cases = generate(["ADD"], 4, 0)[:4]
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps({cases[3].id: "hang"}))
    iso = Isolator(Faulty(), timeout=1.5)
    t0 = time.monotonic()
    seen = []
    try:
        outs = iso.run_parts([(cases[:2], 0), (cases[2:], 0)], Timing(),
                             on_outcome=lambda k, i, o: seen.append((k, i, o.status, time.monotonic() - t0)))
    finally:
        iso.close()
    assert [(k, i, s) for k, i, s, _ in seen] == [(0, 0, "ok"), (0, 1, "ok"), (1, 0, "ok"), (1, 1, "timeout")]
    assert [[o.status for o in p] for p in outs] == [["ok", "ok"], ["ok", "timeout"]]
    assert seen[3][3] - seen[2][3] > 1.0   # case 2 came as soon as it was done, before the hang's timeout
