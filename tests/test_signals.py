"""Issue #21: SIGTERM/SIGINT, however many and whenever, never end a run as PASS.

Two SIGTERMs 10-200 ms apart (what CI runners and ``timeout -k`` send) used to leave run.json
``interrupted: false, exit_status: 0``, summary.md PASS and ``latest`` moved; one right after
run.json was written killed the run silently. Each test here signals a small run at one
moment (a plugin given with ``-p`` sends the signals from inside the run, so the moment is
exact however busy the machine) and checks it ends interrupted: exit 2, run.json
``interrupted: true`` and finished, summary INCOMPLETE, ``latest`` unmoved, no traceback.
And a run that writes fewer rows than it planned is never PASS, signals or not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, rows_written

SENDER = '''
import os, signal, threading, time
import pytest

MOMENT = os.environ["SIG_MOMENT"]
SIGS = [getattr(signal, s) for s in os.environ["SIG_SIGNALS"].split(",")]

def send(sync):
    def go():
        for s in SIGS:
            os.kill(os.getpid(), s)
            time.sleep(0.02)
    if sync:   # nothing raises yet (the run is being set up): every signal is sent at once
        for s in SIGS:
            os.kill(os.getpid(), s)
    else:      # the first raises where the run is: the others come 20 ms apart, from a thread
        threading.Thread(target=go).start()
        time.sleep(1)

@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    if MOMENT == "configure":
        send(True)

def pytest_sessionstart(session):
    if MOMENT == "sessionstart":   # run.json is written: the moment that used to kill the run silently
        send(True)

SEEN = []

def pytest_runtest_setup(item):
    SEEN.append(item)
    if MOMENT == "midrun" and len(SEEN) == 2:   # ADD's cases judged (one item per (op, target)), MUL's to run
        send(False)

if MOMENT == "reports":
    import suite.plugin
    _write = suite.plugin.write_reports
    def write_reports(*a, **k):
        if not getattr(write_reports, "sent", False):
            write_reports.sent = True
            send(True)
        return _write(*a, **k)
    suite.plugin.write_reports = write_reports
'''


def _run(tmp_path, moment: str, signals: str):
    (tmp_path / "sigsend.py").write_text(SENDER)
    report = tmp_path / "reports"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]), "SIG_MOMENT": moment,
           "SIG_SIGNALS": signals, "QCONFORM_SLOW_S": "0.3"}   # (mid-run: the signals come mid-batch)
    target = ["--target=tests.slow_targets:Slow", "--batch-size=2", "--latency-cases=0", "--ops", "ADD,MUL"] \
        if moment == "midrun" else ["--target=ref", "--ops", "ADD"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "sigsend",
                           f"--report-dir={report}", *target, "--cases-per-op", "6"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    runs = sorted((report / "runs").iterdir())
    assert len(runs) == 1, proc.stdout + proc.stderr
    return proc, report, runs[0]


@pytest.mark.parametrize("moment,signals", [
    ("configure", "SIGTERM,SIGTERM"),            # while the run is set up (targets, folder)
    ("sessionstart", "SIGTERM,SIGTERM,SIGINT"),   # right after run.json is written
    ("midrun", "SIGTERM,SIGTERM,SIGTERM"),       # cases judged, others not yet
    ("reports", "SIGTERM,SIGINT"),               # every case judged, the reports being written
])
def test_signals_at_any_moment_end_the_run_interrupted_never_pass(tmp_path, moment, signals):
    proc, report, run = _run(tmp_path, moment, signals)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    info = json.loads((run / "run.json").read_text())
    assert info["interrupted"] is True and info["finished"] and info["exit_status"] == 2
    assert not (report / "latest").exists()
    assert "Traceback" not in out and "INTERNALERROR" not in out
    assert "qconform: " in proc.stdout   # the terminal's summary of what ran
    if moment in ("midrun", "reports"):
        rows = rows_written(run)
        assert rows and info["planned"] >= 6 and info["cost"]["rows"] == len(rows)
        assert (len(rows) < info["planned"]) == (moment == "midrun")
        md = (run / "summary.md").read_text()
        assert "INCOMPLETE" in md and "PASS" not in md
        assert "INCOMPLETE" in (run / "index.html").read_text()
    if moment in ("configure", "sessionstart"):
        assert not (run / "results.jsonl").exists() or not rows_written(run)


def test_a_run_missing_planned_rows_is_incomplete_not_pass(tmp_path):
    """Rows that never reach results.jsonl (here: dropped by a plugin) leave the run INCOMPLETE,
    exit 2, ``latest`` unmoved, however green its tests were; so does `qconform report`."""
    (tmp_path / "droprow.py").write_text(
        "from reports import results\n"
        "_orig = results.ResultWriter.append\n"
        "def append(self, row):\n"
        "    return b'' if row.get('case_id', '').endswith('-001') else _orig(self, row)\n"
        "results.ResultWriter.append = append\n")
    report = tmp_path / "reports"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "droprow",
                           f"--report-dir={report}", "--target=ref", "--ops", "ADD", "--cases-per-op", "4"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out
    (run,) = sorted((report / "runs").iterdir())
    info = json.loads((run / "run.json").read_text())
    missing = sum(1 for line in proc.stdout.splitlines() if "-001:" in line and "PASSED" in line) or None
    assert info["exit_status"] == 2 and info["cost"]["rows"] == len(rows_written(run)) < info["planned"]
    said = f"{info['planned'] - info['cost']['rows']} of {info['planned']} planned results have no row"
    assert said in (run / "summary.md").read_text() and said in out, missing
    assert not (report / "latest").exists()
    rebuilt = subprocess.run([sys.executable, "-m", "suite", "report", str(run)], cwd=ROOT, capture_output=True,
                             text=True, timeout=120)
    assert "INCOMPLETE" in (run / "summary.md").read_text() and "PASS" not in (run / "summary.md").read_text()
    assert rebuilt.returncode == 0, rebuilt.stderr


# ----------------------------------------------------------------------------- a constructor that hangs (issue #33)

def test_sigterm_ends_a_run_whose_target_constructor_hangs_in_the_pytest_process(tmp_path):
    """The target is created in the pytest process while the run is set up (signals are only
    counted then): a constructor that never returns once held SIGTERM off forever."""
    import signal
    import time
    mark = tmp_path / "mark"
    env = {**os.environ, "QCONFORM_FAULT_INIT": "hang", "QCONFORM_FAULT_MARK": str(mark)}
    p = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--target=tests.fault_targets:Faulty", "--ops", "ADD", "--cases-per-op", "2",
                          f"--report-dir={tmp_path / 'r'}"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not mark.exists() and p.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert mark.exists(), p.communicate(timeout=5)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 2, out + err
    assert "the run stops while target 'tests.fault_targets:Faulty' is being created" in err, err


def test_a_target_constructor_that_hangs_is_one_error_after_its_time_limit(monkeypatch, tmp_path):
    from suite.core.errors import QconformError
    from suite.harness import session
    monkeypatch.setattr(session, "CONSTRUCT_TIMEOUT", 0.3)
    monkeypatch.setenv("QCONFORM_FAULT_INIT", "hang")
    monkeypatch.setenv("QCONFORM_FAULT_MARK", str(tmp_path / "mark"))
    import threading
    try:
        with pytest.raises(QconformError) as e:
            session.construct("tests.fault_targets:InProcessFaulty", {})
        assert e.value.field == "--target" and "was not created within 0.3 s" in str(e.value)
    finally:   # (the hung constructor's thread ends: no thread left to the tests after this one)
        (tmp_path / "mark.release").write_text("")
        for t in threading.enumerate():
            if t.name.startswith("qconform-construct-"):
                t.join(10)
