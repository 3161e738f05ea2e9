"""--resume: a run killed with SIGKILL halfway, then resumed, reports exactly what an uninterrupted
run reports (same rows, no duplicates, same summary, same exit status)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import ROOT, run_folder
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"

PLAN = {"ADD-tie-000": "segv", "ADD-activation-000": "off", "MUL-zp_min-000": "shape",
        "MUL-tie-000": "unsupported"}
ARGS = ("--target=tests.fault_targets:Faulty", "--ops", "ADD,MUL", "--cases-per-op", "10")
#: what a row says about its case; the rest (time, pid, latency, harness_s) differs between runs
SAME = ("case_id", "target", "op", "variant", "status", "case_digest", "bit_exact", "max_abs_lsb", "mismatches",
        "elements", "signal", "reason", "scheme", "seed", "run_id")


def _raw_rows(rd):
    return [json.loads(l) for l in (rd / "results.jsonl").read_text().splitlines() if l.strip()]


def _view(rows):
    return sorted(tuple(str(r.get(k)) for k in SAME if k != "run_id") for r in rows)


def _pytest(*args, env_extra=None, **kw):
    env = dict(os.environ, QCONFORM_FAULTS=json.dumps(PLAN), **(env_extra or {}))
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    return cmd, env


def test_killed_run_resumed_equals_an_uninterrupted_run(tmp_path):
    # (subprocesses: a run killed with SIGKILL, its target's worker process left to die with it)
    # the uninterrupted run
    cmd, env = _pytest(f"--report-dir={tmp_path / 'full'}", *ARGS)
    ref = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert ref.returncode == 1, ref.stdout + ref.stderr
    full = run_folder(tmp_path / "full")
    want = _raw_rows(full)
    n = len(want)
    assert n >= 30 and {r["status"] for r in want} == {"pass", "fail", "error", "crash", "unsupported"}

    # the same run, slowed down, killed with SIGKILL once about half of its rows are written
    # (one case a batch, none sent ahead: rows come one by one, never the rest in one burst past the kill)
    cmd, env = _pytest(f"--report-dir={tmp_path / 'part'}", *ARGS, "--batch-size=1", "--ahead=0",
                       env_extra={"QCONFORM_FAULT_DELAY": "0.15"})
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while time.time() < deadline and p.poll() is None:
        results = list((tmp_path / "part").glob("runs/*/results.jsonl"))
        if results and len(results[0].read_bytes().splitlines()) >= n // 2:
            break
        time.sleep(0.05)
    assert p.poll() is None, "the run ended before it could be killed"
    p.send_signal(signal.SIGKILL)
    p.wait()
    part = run_folder(tmp_path / "part")
    got_before = len(_raw_rows(part))
    assert n // 2 <= got_before < n

    # resume: only the run folder is given; options come from its run.json
    cmd, env = _pytest(f"--resume={part}", ARGS[0])   # a module:Class target: named again
    res = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 1, res.stdout + res.stderr    # the recorded crash/fail count too
    assert f"resumed {part}: {got_before} result(s) were recorded already" in res.stdout
    assert f"; {n} results: " in res.stdout                # the verdict counts the recorded rows too

    rows = _raw_rows(part)
    keys = [(r["case_id"], r["target"]) for r in rows]
    assert len(keys) == len(set(keys)) == n                # no duplicates, nothing lost
    assert len({r["run_id"] for r in rows}) == 1           # one run
    assert _view(rows) == _view(want)
    assert (part / "summary.csv").read_text() == (full / "summary.csv").read_text()
    assert json.loads((part / "run.json").read_text())["counts"] == json.loads((full / "run.json").read_text())["counts"]


@pytest.fixture
def run(pytester):
    """``pytest *args`` in this process; returns (run, its run folder)."""
    return lambda *args, **kw: run_inprocess(pytester, *args, **kw)


def test_torn_last_row_is_cut_and_its_case_run_again(run):
    proc, rd = run("--target=ref", "--ops", "ADD", "--cases-per-op", "4")
    assert proc.returncode == 0
    rows = _raw_rows(rd)
    data = (rd / "results.jsonl").read_bytes()
    last = data.rstrip(b"\n").rsplit(b"\n", 1)[1]
    (rd / "results.jsonl").write_bytes(data[: len(data) - len(last) - 1] + last[:40])   # a half-written row
    proc, rd2 = run(f"--resume={rd}")
    assert proc.returncode == 0 and rd2 == rd, proc.stdout + proc.stderr
    proc.result.assert_outcomes(passed=1)   # the (op, target)'s test_cases: the torn row's case
    assert f"; {len(rows)} results: {len(rows)} passed" in proc.stdout
    text = (rd / "results.jsonl").read_bytes()
    assert text.endswith(b"\n") and all(json.loads(l) for l in text.splitlines())
    assert sorted(r["case_id"] for r in _raw_rows(rd)) == sorted(r["case_id"] for r in rows)
    assert {r["run_id"] for r in _raw_rows(rd)} == {rows[0]["run_id"]}


def test_a_complete_run_resumed_runs_nothing_and_keeps_its_status(run):
    proc, rd = run("--target=tests.spine_targets:OffByOne", "--ops", "ADD", "--cases-per-op", "4")
    assert proc.returncode == 1
    before = (rd / "results.jsonl").read_bytes()
    proc2, _ = run(f"--resume={rd}", "--target=tests.spine_targets:OffByOne")
    assert proc2.returncode == 1, proc2.stdout + proc2.stderr     # its failures are still failures
    assert (rd / "results.jsonl").read_bytes() == before
    proc2.result.assert_outcomes(deselected=1, passed=1)   # test_cases (no case left); test_group, from the recorded rows


def test_resume_refuses_other_options_and_non_run_folders(run, tmp_path):
    proc, rd = run("--target=ref", "--ops", "ADD", "--cases-per-op", "2", "--seed", "5")
    assert proc.returncode == 0
    for args, words in [(("--seed", "6"), "--seed 6 (the run had 5)"),
                        (("--cases-per-op", "3"), "--cases-per-op 3 (the run had 2)"),
                        (("--scheme", "ort-fp32-rne"), "--scheme ort-fp32-rne (the run had tflite-ref-double)"),
                        (("--ops", "MUL"), "--ops MUL (the run had ADD)")]:
        p, _ = run(f"--resume={rd}", *args)
        assert p.returncode == 4, p.stdout + p.stderr
        assert words in p.stderr and "field '--resume'" in p.stderr and "Traceback" not in p.stderr
    (tmp_path / "empty").mkdir()
    p, _ = run(f"--resume={tmp_path / 'empty'}")
    assert p.returncode == 4 and "has no run.json" in p.stderr
    p, _ = run(f"--resume={tmp_path / 'nope'}")
    assert p.returncode == 4 and "no such run directory" in p.stderr
    p, _ = run(f"--resume={rd}", f"--report-dir={tmp_path / 'elsewhere'}")
    assert p.returncode == 4 and "differs from the run being resumed" in p.stderr
    (rd / "run.json").write_text("{not json")
    p, _ = run(f"--resume={rd}")
    assert p.returncode == 4 and "run.json is not valid JSON" in p.stderr and "Traceback" not in p.stderr
