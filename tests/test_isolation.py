"""Process isolation (suite/harness/isolation.py, suite/harness/worker.py): crashes, hangs and
garbage become crash / timeout / error verdicts of exactly the cases that caused them, every
other case still runs, and outcomes stay with their cases while batches are queued ahead in
the worker (tests/fault_targets.py)."""

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
from suite.harness.folder import RunFolder, new_run_id
from suite.harness.isolation import InProcess, Isolated, executor_for, spec_of
from suite.harness.judge import MEMO_BYTES_SEQUENTIAL
from suite.harness.options import checked
from suite.harness.run import Run
from targets.base import Outcome, Timing, check_outcome, check_outcomes
from tests.conftest import ROOT
from tests.conftest import rows_written as _rows
from tests.fault_targets import EXPECTED, BatchedFaulty, Faulty, InProcessFaulty, OtherBatchedFaulty
from tests.inprocess import run_inprocess

TIMING = Timing(warmup=0, repeats=1)

pytest_plugins = "pytester"


def _run(target, cases, tmp_path, **options):
    """Every case through Run.verdict (the plugin's path, without pytest): (verdicts by case id,
    the closed Run with its stats, the run folder)."""
    name = target.name
    options.setdefault("latency_cases", 0)   # whole batches from the first case on
    folder = RunFolder.create(tmp_path / "rep", new_run_id())
    run = Run(checked(targets=[name], **options), folder, {name: target}, folder.path.name)
    try:
        run.plan([(c, name) for c in cases])
        return {c.id: run.verdict(c, name) for c in cases}, run, folder.path
    finally:
        run.close()


def _drain(ex, n_cases: int):
    """next() until ``n_cases`` outcomes came back: [(cases, outcomes), ...] as returned."""
    got, seen = [], 0
    while seen < n_cases:
        cases, outs = ex.next()
        assert len(outs) == len(cases)                 # never "N outcomes for M cases"
        got.append((cases, outs))
        seen += len(cases)
    assert seen == n_cases
    return got


# ----------------------------------------------------------------------------- end to end

def test_segfault_hang_and_wrong_shape_get_exactly_their_verdicts(pytester, monkeypatch):
    ids = sorted(c.id for c in generate(["ADD"], 12, 0))   # a group runs in case-id order
    plan = {ids[2]: "segv", ids[5]: "hang", ids[8]: "shape"}
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps(plan))   # (read in the target's worker processes)
    proc, rd = run_inprocess(pytester, "--target=tests.fault_targets:Faulty", "--ops", "ADD", "--cases-per-op", "12",
                             "--case-timeout", "2")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-2000:]
    rows = {r["case_id"]: r for r in _rows(rd)}
    assert sorted(rows) == sorted(ids) and len(_rows(rd)) == len(ids)   # nothing lost, nothing twice
    want = {ids[2]: "crash", ids[5]: "timeout", ids[8]: "error"}
    assert {i: r["status"] for i, r in rows.items() if r["status"] != "pass"} == want
    assert rows[ids[2]]["signal"] == "SIGSEGV" and "Segmentation fault" in rows[ids[2]]["reason"]
    assert "no result within 2 s" in rows[ids[5]]["reason"]
    assert "shape [1, 2, 3, 4, 5]" in rows[ids[8]]["reason"]
    assert all(r["ran_case"] == i for i, r in rows.items() if r["status"] == "pass")
    # pytest's own outcome: ERROR (not failed, not skipped), the message says which verdict
    assert "2 passed, 3 errors" in proc.stdout   # ADD:faulty::test_cases and test_group; each error its own
    assert f"{len(ids)} results: {len(ids) - 3} passed, 3 errors" in proc.stdout
    assert "crash: worker process killed by SIGSEGV" in proc.stdout
    assert "timeout: no result within 2 s" in proc.stdout
    assert "error: target returned garbage" in proc.stdout
    # the batch crashed (its cases then ran one at a time), the lone crash and the hang each
    # replaced the worker; the garbage did not: the passing cases ran in 3 processes
    pids = [rows[i]["pid"] for i in ids if rows[i]["status"] == "pass"]
    assert len(set(pids)) == 3 and os.getpid() not in pids


# ----------------------------------------------------------------------------- every fault kind

@pytest.mark.parametrize("batch_size", [1, 64])
def test_every_fault_kind_gets_its_verdict(batch_size, tmp_path, monkeypatch):
    """batch_size 1: one-case batches, several queued ahead in the worker; 64: one batch, which
    the first crash splits into one-case batches."""
    cases = generate(["ADD"], 30, 0)
    kinds = list(EXPECTED)
    assert len(cases) >= len(kinds) + 5
    plan = {c.id: k for c, k in zip(cases[1::2] + cases[2::2], kinds)}
    assert sorted(plan.values()) == sorted(kinds)
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps(plan))
    verdicts, run, rd = _run(BatchedFaulty(), cases, tmp_path, timeout=2.0, batch_size=batch_size)
    for c in cases:
        v = verdicts[c.id]
        status, words = EXPECTED.get(plan.get(c.id), ("pass", ""))
        assert (v.status.value, plan.get(c.id)) == (status, plan.get(c.id)), v.message
        assert words in v.reason or (words == "LSB" and v.status == "fail"), v.reason
    rows = _rows(rd)
    assert sorted(r["case_id"] for r in rows) == sorted(c.id for c in cases)   # each once
    assert all(r["ran_case"] == r["case_id"] for r in rows if r["status"] == "pass" and r["case_id"] not in plan)
    assert {r["case_id"]: r["status"] for r in rows} == {i: v.status.value for i, v in verdicts.items()}
    dead = sum(EXPECTED[k][0] == "crash" and k != "sysexit" for k in kinds)   # sysexit is caught
    assert run.stats["crashes:batched-faulty"] == dead
    assert run.stats["timeouts:batched-faulty"] == 2
    assert run.stats["batches_split:batched-faulty"] == (1 if batch_size > 1 else 0)


def test_worker_is_reused_across_batches(tmp_path, monkeypatch):
    monkeypatch.setenv("QCONFORM_FAULTS", "{}")
    cases = generate(["ADD", "MUL"], 6, 0)
    verdicts, run, _ = _run(Faulty(), cases, tmp_path, batch_size=4)
    assert len(cases) >= 12 and all(v.status == "pass" for v in verdicts.values())
    pids = {v.row["pid"] for v in verdicts.values()}
    assert len(pids) == 1 and os.getpid() not in pids
    assert run.stats["workers_started:faulty"] == 0          # never replaced
    assert run.stats["busy_s:faulty"] > 0                    # the worker did the work


def test_isolation_none_and_isolate_false_run_in_process(tmp_path, monkeypatch):
    cases = generate(["ADD"], 6, 0)
    plan = {cases[1].id: "shape", cases[3].id: "raise", cases[4].id: "nan"}
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps(plan))
    assert isinstance(executor_for(Faulty(), "none"), InProcess)
    assert isinstance(executor_for(InProcessFaulty(), "process"), InProcess)
    for k, (target, options) in enumerate(((Faulty(), {"isolation": "none"}), (InProcessFaulty(), {}))):
        verdicts, run, _ = _run(target, cases, tmp_path / str(k), batch_size=4, **options)
        assert {i: v.status.value for i, v in verdicts.items() if v.status != "pass"} == {
            cases[1].id: "error", cases[3].id: "error", cases[4].id: "error"}
        assert {v.row["pid"] for v in verdicts.values() if v.status == "pass"} == {os.getpid()}
        assert not any(name.startswith(("workers_started", "crashes", "timeouts")) for name in run.stats)


# ----------------------------------------------------------------------------- a batch of several cases

def test_batched_hang_is_rerun_one_case_at_a_time(tmp_path, monkeypatch):
    cases = generate(["ADD"], 5, 0)[:5]
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps({cases[0].id: "hang"}))
    verdicts, run, _ = _run(BatchedFaulty(), cases, tmp_path, timeout=1.0)
    assert [verdicts[c.id].status.value for c in cases] == ["timeout"] + ["pass"] * 4
    # the batch's limit scales with its size (5 x 1 s); the case alone has the per-case limit
    assert "no result within 1 s" in verdicts[cases[0].id].reason
    assert run.stats["batches_split:batched-faulty"] == 1
    assert run.stats["timeouts:batched-faulty"] == 1          # only the guilty case's, alone
    assert all(verdicts[c.id].row["ran_case"] == c.id for c in cases[1:])


def test_batched_crash_is_rerun_one_case_at_a_time(tmp_path, monkeypatch):
    cases = sorted(generate(["ADD"], 6, 0)[:6], key=lambda c: c.id)   # a group runs in case-id order
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps({cases[3].id: "abort"}))
    verdicts, run, rd = _run(BatchedFaulty(), cases, tmp_path, timeout=5.0)
    assert [verdicts[c.id].status.value for c in cases] == ["pass"] * 3 + ["crash"] + ["pass"] * 2
    assert "SIGABRT" in verdicts[cases[3].id].reason and verdicts[cases[3].id].row["signal"] == "SIGABRT"
    # the cases before the crash were run again alone (their batch's outcomes died with the
    # worker): by the worker that then crashed; the cases after it by a fresh one
    pids = [verdicts[c.id].row["pid"] for c in cases if c is not cases[3]]
    assert pids[0] == pids[1] == pids[2] != pids[3] == pids[4]
    assert run.stats["batches_split:batched-faulty"] == 1 and run.stats["crashes:batched-faulty"] == 1
    assert len(_rows(rd)) == len(cases)


def test_batches_queued_ahead_keep_outcomes_with_their_cases(monkeypatch):
    """Regression: batches sent ahead to the worker, a crash in the 2nd and a hang in the 3rd.
    Every batch comes back in queue order, every outcome with its own case (once a reply was
    read for the wrong batch: "target returned 36 outcomes for 30 cases")."""
    cases = generate(["ADD", "MUL"], 5, 0)
    sizes = [3, 5, 2, 4]
    assert len(cases) >= sum(sizes)
    batches, k = [], 0
    for n in sizes:
        batches.append(cases[k:k + n])
        k += n
    segv, hang = batches[1][2], batches[2][1]
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps({segv.id: "segv", hang.id: "hang"}))
    ex = executor_for(BatchedFaulty(), "process", timeout=1.5)
    assert isinstance(ex, Isolated)
    try:
        for b in batches:
            ex.submit(b, 0, TIMING)
        got = _drain(ex, sum(sizes))
    finally:
        ex.close()
    order = [c.id for cs, _ in got for c in cs]
    assert order == [c.id for b in batches for c in b]            # queue order, each case once
    # batch 1 whole; the crashed batch 2 one case at a time; batch 3 (queued in the worker that
    # crashed) again as a batch, which hung, so one case at a time; batch 4 whole
    assert [len(cs) for cs, _ in got] == [3] + [1] * 5 + [1] * 2 + [4]
    status = {c.id: o.status for cs, outs in got for c, o in zip(cs, outs)}
    assert {i: s for i, s in status.items() if s != "ok"} == {segv.id: "crash", hang.id: "timeout"}
    for cs, outs in got:
        for c, o in zip(cs, outs):
            if o.status == "ok":
                assert o.info["ran_case"] == c.id
    assert ex.stats["batches_split"] == 2 and ex.stats["crashes"] == 1 and ex.stats["timeouts"] == 1


def test_run_with_batches_queued_ahead_and_crashes_in_them(tmp_path, monkeypatch):
    """The same through Run (the plugin's path): many small batches of two ops, crashes in
    the 2nd and 3rd batch and in a later one: every verdict and row is its own case's."""
    cases = generate(["ADD", "MUL"], 8, 0)
    faults = {cases[5].id: "segv", cases[9].id: "exit", cases[len(cases) - 2].id: "abort"}
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps(faults))
    verdicts, run, rd = _run(BatchedFaulty(), cases, tmp_path, timeout=5.0, batch_size=4)
    assert {i: v.status.value for i, v in verdicts.items() if v.status != "pass"} == \
        {i: "crash" for i in faults}
    rows = _rows(rd)
    assert sorted(r["case_id"] for r in rows) == sorted(c.id for c in cases)
    assert all(r["ran_case"] == r["case_id"] for r in rows if r["status"] == "pass")
    assert run.stats["crashes:batched-faulty"] == 3


def test_timeout_counts_from_the_batch_start_not_from_the_queue(monkeypatch):
    """Four one-case batches of 1 s each are queued at once under a 2.5 s limit: the last waits
    3 s in the worker's queue, yet none is a timeout (each is timed from its own start, which
    the worker reports). A case that hangs still is one."""
    cases = generate(["ADD"], 5, 0)[:5]
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps({cases[4].id: "hang"}))
    monkeypatch.setenv("QCONFORM_FAULT_DELAY", "1.0")
    ex = executor_for(Faulty(), "process", timeout=2.5)
    try:
        ex.versions()                                 # the worker is up before the clock matters
        for c in cases:
            ex.submit([c], 0, TIMING)
        got = _drain(ex, len(cases))
    finally:
        ex.close()
    assert [o.status for _, outs in got for o in outs] == ["ok"] * 4 + ["timeout"]
    assert len({outs[0].info["pid"] for _, outs in got[:4]}) == 1   # one worker ran them in turn


def test_target_that_cannot_start_in_a_worker_is_an_error_per_case(monkeypatch):
    class Local(Faulty):   # defined in a function: a worker cannot import it -> runs in process
        name = "local"
    assert spec_of(Local()) is None and isinstance(executor_for(Local(), "process"), InProcess)
    monkeypatch.setenv("QCONFORM_FAULTS", "{}")
    cases = generate(["ADD"], 3, 0)[:3]
    for how, status, words in (("raise", "error", "could not create the target: RuntimeError: the runtime "
                                                  "is missing here"),
                               ("exit", "crash", "exited with status 9 while creating the target")):
        target = Faulty()                                 # created here as usual ...
        monkeypatch.setenv("QCONFORM_FAULT_INIT", how)    # ... but not in its worker
        ex = executor_for(target, "process", timeout=5.0)
        try:
            ex.submit(cases[:2], 0, TIMING)
            ex.submit(cases[2:], 0, TIMING)
            got = _drain(ex, 3)
            assert "error" in ex.versions()
        finally:
            ex.close()
            monkeypatch.delenv("QCONFORM_FAULT_INIT")
        outs = [o for _, os_ in got for o in os_]
        assert [o.status for o in outs] == [status] * 3, [o.reason for o in outs]
        assert all(words in o.reason for o in outs), outs[0].reason


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


def test_worker_dies_with_its_parent():
    """A run killed with SIGKILL leaves no worker behind, even one hung in a kernel."""
    script = (
        "import json, os, sys, time\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from suite.cases.generate import generate\n"
        "from suite.harness.isolation import executor_for\n"
        "from targets.base import Timing\n"
        "from tests.fault_targets import Faulty\n"
        "c = generate(['ADD'], 1, 0)[:1]\n"
        "os.environ['QCONFORM_FAULTS'] = json.dumps({c[0].id: 'hang'})\n"
        "ex = executor_for(Faulty(), 'process', 600)\n"
        "ex.submit(c, 0, Timing(0, 1))\n"
        "ev = ex.worker.recv(time.monotonic() + 120)\n"     # ("start", t): the worker is in the case
        "print(ex.worker.proc.pid, ev[0], flush=True)\n"
        "time.sleep(3600)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    pid, what = p.stdout.readline().split()
    pid = int(pid)
    assert what == "start" and _alive(pid)
    p.send_signal(signal.SIGKILL)
    p.wait()
    deadline = time.monotonic() + 60
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            state = next(ln for ln in f if ln.startswith("State:"))
        return "Z" not in state.split()[1]
    except (OSError, StopIteration):
        return False


def test_isolation_and_timeout_options_are_checked(pytester):
    proc, _ = run_inprocess(pytester, "--target=ref", "--ops", "ADD", "--isolation", "threads")
    assert proc.returncode == 4 and "--isolation" in proc.stderr and "Traceback" not in proc.stderr
    for bad in ("0", "-1", "inf", "nan"):
        proc, _ = run_inprocess(pytester, "--target=ref", "--ops", "ADD", "--case-timeout", bad)
        assert proc.returncode == 4 and "--case-timeout" in proc.stderr and "Traceback" not in proc.stderr, bad


def test_sequential_run_keeps_one_target_worker_at_a_time(tmp_path, monkeypatch):
    """A --model run (Run(sequential=True)): its targets run one after another, and a target's worker
    ends when the target has nothing left to run, so the runtimes' working memory is not held side
    by side (#29: 8 targets' workers were 750 MB of efficientnet_lite0's 1.1 GB run)."""
    monkeypatch.setenv("QCONFORM_FAULTS", "{}")
    cases = sorted(generate(["ADD"], 2, 0), key=lambda c: c.id)[:2]
    a, b = BatchedFaulty(), OtherBatchedFaulty()
    folder = RunFolder.create(tmp_path / "rep", new_run_id())
    run = Run(checked(targets=[a.name, b.name], latency_cases=0, batch_size=1), folder, {a.name: a, b.name: b},
              folder.path.name, sequential=True)
    try:
        ex_a, ex_b = run.executors[a.name], run.executors[b.name]
        assert run.goldens.memo_bytes == MEMO_BYTES_SEQUENTIAL   # (a case's goldens come back a whole model later)
        run.plan([(c, t) for t in (a.name, b.name) for c in cases], lazy=True)
        assert run.verdict(cases[0], a.name).status.value == "pass"
        assert ex_a.worker is not None and not ex_b._sent   # a runs; nothing handed to b yet
        proc = ex_a.worker.proc
        assert run.verdict(cases[1], a.name).status.value == "pass"
        assert ex_a.worker is None and proc.poll() is not None   # a has nothing left: its worker ended
        assert [run.verdict(c, b.name).status.value for c in cases] == ["pass", "pass"]
        assert ex_b.worker is None
        # a case asked for again (a group test's missing case): a new worker, ended after it
        run.plan([(cases[0], a.name)])
        assert run.verdict(cases[0], a.name).status.value == "pass" and ex_a.worker is None
    finally:
        run.close()
