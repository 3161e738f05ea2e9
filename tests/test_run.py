"""The run (suite/harness/run.py) as the plugin drives it: each test gets its own verdict, whatever
the order it asks in and however often; a harness error is its case's alone; only the tests that
run are planned and run; a pytest that runs no test starts no target; the golden store."""

from __future__ import annotations

import json
import os

import pytest

from suite.cases.generate import generate
from suite.harness import isolation
from suite.harness.folder import RunFolder
from suite.harness.judge import Judge
from suite.harness.options import checked
from suite.harness.run import Run
from suite.plugin import SESSION
from tests.conftest import rows_written as _rows
from tests.fault_targets import Faulty, InProcessFaulty
from tests.inprocess import children, open_under, run_inprocess

pytest_plugins = "pytester"

#: row fields that differ between two runs of the same cases
VOLATILE = {"run_id", "time", "p50_us", "p90_us", "min_us", "spread_us", "failure_file", "repro", "pid", "worker"}


def _same(rows) -> dict:
    return {(r["case_id"], r["target"]): {k: v for k, v in r.items() if k not in VOLATILE} for r in rows}


@pytest.fixture
def started(monkeypatch):
    """The specs of the target worker processes started (in this process) while the test runs."""
    specs = []

    class Counted(isolation.Worker):
        def __init__(self, spec):
            specs.append(spec["qualname"])
            super().__init__(spec)
    monkeypatch.setattr(isolation, "Worker", Counted)
    return specs


# ----------------------------------------------------------------------------- Run, as the plugin drives it

@pytest.fixture(params=[Faulty, InProcessFaulty], ids=["worker-process", "in-process"])
def faulty_run(request, tmp_path, monkeypatch):
    """A Run of tests.fault_targets' Faulty (in its worker process, or in this one) over ADD and MUL
    cases, small batches (a latency single, then pairs); ``off`` names the cases it gets wrong."""
    cases = generate(["ADD", "MUL"], 4, 0)
    off = {cases[1].id, cases[-2].id}
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps({i: "off" for i in off}))
    t = request.param()
    kids = children()
    opts = checked(targets=[t.name], batch_size=2, latency_cases=1, warmup=0, repeats=1)
    run = Run(opts, RunFolder.create(tmp_path / "report", "r1"), {t.name: t}, "r1")
    run.plan([(c, t.name) for c in cases])
    yield run, t.name, cases, off
    run.close()
    assert not children() - kids and not open_under(tmp_path / "report")   # its worker ended, its files closed


def test_tests_asking_out_of_plan_order_get_their_own_verdicts(faulty_run):
    run, name, cases, off = faulty_run
    got = {}
    for c in reversed(cases):   # the last planned case first: every batch runs before its verdict
        v = run.verdict(c, name)
        assert (v.case_id, v.target, v.row["case_id"]) == (c.id, name, c.id)
        got[c.id] = v.status.value
    run.close()
    assert len(cases) > 8 and got == {c.id: "fail" if c.id in off else "pass" for c in cases}
    rows = _rows(run.folder.path)
    assert sorted(r["case_id"] for r in rows) == sorted(c.id for c in cases)   # each case once
    pids = {r["pid"] for r in rows if r["status"] == "pass"}                  # where the target ran
    assert pids == {os.getpid()} if name == InProcessFaulty.name else os.getpid() not in pids


def test_a_failures_batch_is_the_batch_it_ran_in(faulty_run):
    """judged.batch (what `qconform repro` rebuilds): a latency single's is itself, a batched case's
    its batch without the singles that went before it alone."""
    run, name, cases, off = faulty_run
    for c in cases:
        run.verdict(c, name)
    run.close()
    singles = {min(c.id for c in cases if c.op == op) for op in ("ADD", "MUL")}   # (latency_cases=1, by case id)
    files = {r["case_id"]: json.loads(open(r["failure_file"]).read()) for r in _rows(run.folder.path)
             if r.get("failure_file")}
    assert set(files) == off
    for cid, doc in files.items():
        batch = doc["judged"]["batch"]
        assert cid in batch and (batch == [cid] if cid in singles else not singles & set(batch) and len(batch) <= 2)


def test_a_test_asked_again_gets_a_fresh_verdict(faulty_run):
    # e.g. pytest-rerunfailures runs a test again: its pair runs again, it is not waited for forever
    run, name, cases, off = faulty_run
    first = [run.verdict(c, name) for c in cases]
    again = [run.verdict(c, name) for c in (cases[1], cases[2])]
    run.close()
    assert again[0] is not first[1] and again[0].status == first[1].status and again[0].status.value == "fail"
    assert again[1] is not first[2] and again[1].status == first[2].status and again[1].status.value == "pass"
    # the record keeps each pair's first row (results.jsonl holds a pair once: a rerun never replaces a fail)
    ids = [r["case_id"] for r in _rows(run.folder.path)]
    assert ids.count(cases[1].id) == ids.count(cases[2].id) == 1 and len(ids) == len(cases)
    assert "asked again: its row is the first verdict's" in again[0].message


# ----------------------------------------------------------------------------- the plugin's runs

def test_a_harness_error_while_judging_fails_only_that_cases_test(pytester, monkeypatch):
    bad = generate(["ADD"], 4, 0)[1].id
    real = Judge.__call__

    def broken(self, case, target, o, versions):
        if case.id == bad and target == "ref":
            raise RuntimeError("harness bug")
        return real(self, case, target, o, versions)
    monkeypatch.setattr(Judge, "__call__", broken)
    # (ref judges its batch in this process; the golden target's comes from its worker process)
    proc, rd = run_inprocess(pytester, "--target=ref,tests.helper_targets:GoldenTarget", "--ops", "ADD",
                             "--cases-per-op", "4")
    rows = _rows(rd)
    proc.result.assert_outcomes(passed=3, errors=1)   # 2 (op, target)s' test_cases, the golden target's test_group
    [err] = [r for r in proc.result.reprec.getreports("pytest_runtest_logreport") if r.failed]
    assert err.when == "setup" and f"[{bad}:ref]" in err.nodeid and "harness bug" in err.longreprtext
    assert (bad, "ref") not in {(r["case_id"], r["target"]) for r in rows}
    assert (bad, "golden") in {(r["case_id"], r["target"]) for r in rows}   # (the class's name names its rows)
    assert len(rows) == 2 * len(generate(["ADD"], 4, 0)) - 1 and {r["status"] for r in rows} == {"pass"}


def test_collect_only_runs_no_target(pytester, started):
    proc, rd = run_inprocess(pytester, "--target=ref,tests.spine_targets:OffByOne", "--ops", "ADD,MUL",
                             "--cases-per-op", "4", "--co")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "<Class ADD:off-by-one>" in proc.stdout and "<Function test_cases>" in proc.stdout
    assert started == []                                   # no worker process was started
    assert not (rd / "results.jsonl").exists() or not _rows(rd)


@pytest.mark.parametrize("how", ["--markers", "--help", "sessionstart-raises"])
def test_a_pytest_that_runs_no_test_leaves_no_worker(pytester, started, how):
    """--markers and --help configure and end: no target starts. A plugin whose sessionstart raises
    ends the run before any session end: the workers started with the run are ended all the same
    (run_inprocess checks that no child process, thread or open run folder is left)."""
    class Raiser:
        def pytest_sessionstart(self, session):
            raise RuntimeError("a plugin's sessionstart fails")
    raising = how == "sessionstart-raises"
    proc, _ = run_inprocess(pytester, "--target=ref,tests.spine_targets:OffByOne", "--ops", "ADD",
                            "--cases-per-op", "3", *([] if raising else [how]),
                            plugins=[Raiser()] if raising else [])
    if raising:
        assert proc.returncode == 3 and "a plugin's sessionstart fails" in proc.stdout + proc.stderr
        assert started == ["OffByOne"]                     # started with the run, and ended
    else:
        assert proc.returncode == 0 and started == []


def test_last_failed_plans_and_runs_only_the_tests_that_run(pytester, monkeypatch):
    planned = []
    plan = Run.plan
    monkeypatch.setattr(Run, "plan", lambda self, pairs, lazy=False: plan(self, planned.extend(p := list(pairs)) or p, lazy))
    args = ("--target=tests.spine_targets:OffByOne", "--ops", "ADD", "--cases-per-op", "6")
    first, rd1 = run_inprocess(pytester, *args, report_dir=pytester.path / "a", cacheprovider=True)
    assert first.returncode == 1
    failed = {r["case_id"] for r in _rows(rd1) if r["status"] == "fail"}
    assert failed and len(planned) == len(_rows(rd1)) > len(failed)
    planned.clear()
    again, rd2 = run_inprocess(pytester, *args, "--lf", report_dir=pytester.path / "b", cacheprovider=True)
    assert again.returncode == 1
    again.result.assert_outcomes(failed=len(failed), deselected=2)   # the (op, target)'s test_cases and test_group
    assert {c.id for c, _ in planned} == failed and len(planned) == len(failed)
    assert {r["case_id"] for r in _rows(rd2)} == failed and len(_rows(rd2)) == len(failed)
    assert {p.stem for p in (rd2 / "failures").rglob("*.json")} == failed


class _Goldens:
    """Keeps the run's Goldens (suite.harness.judge) when the inner pytest ends."""

    def __init__(self):
        self.goldens = None

    def pytest_unconfigure(self, config):
        self.goldens = config.stash[SESSION].run.goldens


def test_golden_store_gives_the_same_rows_and_computes_nothing_the_second_time(pytester, tmp_path):
    cache = tmp_path / "golden"
    # OffByOne: mismatching rows too, whose analyses (schemes, causes, histograms) take every
    # scheme's golden from the store
    args = ("--target=ref,tests.spine_targets:OffByOne", "--ops", "ADD,CONV_2D", "--cases-per-op", "3")
    runs = []
    for i, store in enumerate((cache, cache, "off")):
        grab = _Goldens()
        proc, rd = run_inprocess(pytester, *args, f"--golden-cache={store}", report_dir=tmp_path / f"r{i}",
                                 plugins=[grab])
        assert proc.returncode == 1, proc.stdout[-3000:]
        runs.append((grab.goldens, _rows(rd)))
    (first, rows1), (second, rows2), (off, rows3) = runs
    assert any(r.get("causes") for r in rows1) and any(r.get("scheme_exact") for r in rows1)
    assert first.computed > len(rows1) // 2 and first.store.hits == 0
    assert list(cache.rglob("*.qg"))                                         # the goldens' files
    assert second.computed == 0 and second.store.hits > 0 and not second.store.problems
    assert off.store is None and off.computed == first.computed
    assert _same(rows1) == _same(rows2) == _same(rows3)
