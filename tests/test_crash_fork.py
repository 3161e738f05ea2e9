"""A case a finding says crashes its target runs alone in a fork of the target's worker
(suite/harness/run.py ``_submit``, suite/harness/worker.py ``_forked``): its crash is the same
verdict as a dead worker's, and the worker is not restarted. A crash no finding knows is found
and attributed as before (tests/test_isolation.py)."""

from __future__ import annotations

import json

import pytest

from suite.cases.generate import generate
from suite.core import findings as fmod
from suite.harness import isolation
from suite.harness.isolation import executor_for
from targets.base import Timing
from tests.conftest import rows_written as _rows
from tests.fault_targets import BatchedFaulty, Faulty
from tests.test_isolation import _run

#: ADD's sat_lo cases crash batched-faulty and faulty, says this findings file
FINDINGS = '''format = "qconform-findings/1"
[[finding]]
id = "test-add-sat-lo-crash"
op = "ADD"
target = ["batched-faulty", "faulty"]
variant = "sat_lo"
status = ["crash"]
reason = "a test's kernel dies on ADD's sat_lo cases"
'''


@pytest.fixture
def known(tmp_path, monkeypatch):
    """The findings file above in place of the shipped one (read by the pytest process only)."""
    f = tmp_path / "findings.toml"
    f.write_text(FINDINGS)
    monkeypatch.setattr(fmod, "FILE", f)
    fmod.findings.cache_clear()
    yield
    fmod.findings.cache_clear()


def _cases():
    cases = sorted(generate(["ADD"], 12, 0), key=lambda c: c.id)
    ids = [c.id for c in cases]
    assert "ADD-sat_lo-000" in ids and "ADD-sat_lo-001" in ids and "ADD-tie-000" in ids
    return cases


def _plain(reason: str) -> str:
    """A crash's reason without the words that say which process died and what became of the worker."""
    return reason.replace("process forked from the worker", "worker process").replace("; the worker was restarted", "")


def test_a_known_crash_costs_no_worker_restart_an_unknown_one_still_does(known, tmp_path, monkeypatch):
    # sat_lo-000 aborts (known), sat_lo-001 does not (the finding's hint is wrong for it: it runs in
    # a fork all the same and passes), tie-000 segfaults (no finding: the batch is split, as ever)
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps({"ADD-sat_lo-000": "abort", "ADD-tie-000": "segv"}))
    cases = _cases()
    verdicts, run, rd = _run(BatchedFaulty(), cases, tmp_path, timeout=5.0, batch_size=64)
    v = verdicts["ADD-sat_lo-000"]
    assert (v.status.value, v.finding, v.row["signal"]) == ("crash", "test-add-sat-lo-crash", "SIGABRT"), v.reason
    assert "process forked from the worker killed by SIGABRT (signal 6)" in v.reason
    assert "Fatal Python error: Aborted" in v.reason and "misbehave" in v.reason   # the child's own stack
    u = verdicts["ADD-tie-000"]
    assert (u.status.value, u.finding, u.row["signal"]) == ("crash", None, "SIGSEGV")
    assert "worker process killed by SIGSEGV (signal 11) while running this case; the worker was restarted" in u.reason
    assert {i: x.status.value for i, x in verdicts.items() if x.status != "pass"} == \
        {"ADD-sat_lo-000": "crash", "ADD-tie-000": "crash"}
    assert sorted(r["case_id"] for r in _rows(rd)) == sorted(c.id for c in cases)
    s = run.stats
    assert s["forked:batched-faulty"] == 2 and s["crashes:batched-faulty"] == 2
    # only the unknown crash cost workers: its batch's (split) and its own
    assert s["batches_split:batched-faulty"] == 1 and s["workers_started:batched-faulty"] == 2
    # the case the finding named that did not crash ran in a child process, not in a worker
    worker_pids = {x.row["pid"] for i, x in verdicts.items() if x.status == "pass" and i != "ADD-sat_lo-001"}
    assert verdicts["ADD-sat_lo-001"].status == "pass" and verdicts["ADD-sat_lo-001"].row["pid"] not in worker_pids


@pytest.mark.parametrize("kind", ["segv", "exit"])
def test_a_forked_crash_is_the_verdict_a_dead_worker_gives(kind, known, tmp_path, monkeypatch):
    """The same cases with the fork (Linux) and without it (elsewhere: the batch, split after the
    crash): every row the same, the crash's reason but for the words naming the process."""
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps({"ADD-sat_lo-000": kind}))
    cases = _cases()
    forked, run1, rd1 = _run(Faulty(), cases, tmp_path / "fork", timeout=5.0, batch_size=64)
    monkeypatch.setattr(isolation.protocol, "CAN_FORK", False)
    old, run2, rd2 = _run(Faulty(), cases, tmp_path / "old", timeout=5.0, batch_size=64)
    assert run1.stats["workers_started:faulty"] == 0 and run1.stats["forked:faulty"] == 2
    assert run2.stats["workers_started:faulty"] == 2 and "forked:faulty" not in run2.stats
    a, b = forked["ADD-sat_lo-000"], old["ADD-sat_lo-000"]
    assert a.status == b.status == "crash" and a.finding == b.finding == "test-add-sat-lo-crash"
    assert "the worker was restarted" in b.reason and "process forked from the worker" in a.reason
    assert _plain(a.reason) == _plain(b.reason), (a.reason, b.reason)   # the stderr tail too
    keep = ("status", "finding", "signal", "exit_status", "bit_exact", "out_digest", "max_abs_lsb")
    r1 = {r["case_id"]: {k: r.get(k) for k in keep} for r in _rows(rd1)}
    r2 = {r["case_id"]: {k: r.get(k) for k in keep} for r in _rows(rd2)}
    assert r1 == r2 and len(r1) == len(cases)
    assert r1["ADD-sat_lo-000"]["signal" if kind == "segv" else "exit_status"] == ("SIGSEGV" if kind == "segv" else 7)


def test_a_forked_case_that_hangs_is_a_timeout_and_its_worker_replaced(monkeypatch):
    cases = sorted(generate(["ADD"], 12, 0), key=lambda c: c.id)[:3]
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps({cases[0].id: "hang"}))
    ex = executor_for(Faulty(), "process", timeout=1.0)
    t = Timing(warmup=0, repeats=1)
    try:
        ex.versions()
        ex.submit([cases[0]], 1, t, fork=True)
        ex.submit(cases[1:], 0, t)
        (_, [o]), (_, rest) = ex.next(), ex.next()
    finally:
        ex.close()
    assert o.status == "timeout" and "no result within 1 s" in o.reason
    assert [r.status for r in rest] == ["ok", "ok"] and ex.stats["workers_started"] == 1
