"""Run folders (issue #13): each run its own folder, `latest` only for complete unfiltered runs,
a folder in use refused, SIGTERM ending a run like Ctrl-C, and a folder that cannot be written
being one error that names it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import ROOT, rows_written
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"


def _cmd(report: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--report-dir={report}", *args]


def _runs(report: Path) -> list[Path]:
    return sorted(p for p in (report / "runs").iterdir() if p.is_dir())


def _leftovers(folder: Path) -> list[Path]:
    """Temporary or empty files a run must never leave behind."""
    return [p for p in folder.rglob("*") if p.is_file() and (p.name.endswith(".tmp") or
                                                              (p.stat().st_size == 0 and p.name != ".lock"))]


def test_two_runs_started_together_each_complete_in_its_own_folder(tmp_path):
    report = tmp_path / "reports"
    env = {**os.environ, "QCONFORM_SLOW_S": "0.02"}
    args = ("--target=tests.slow_targets:Slow", "--ops", "ADD,MUL", "--cases-per-op", "6")
    procs = [subprocess.Popen(_cmd(report, *args), cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out + err
    assert {int(re.findall(r"(\d+) passed", out)[-1]) for out, _ in outs} == {4}   # ADD's, MUL's test_cases, test_group
    n = {int(re.search(r"; (\d+) results: (\d+) passed", out).group(2)) for out, _ in outs}   # every case
    assert len(n) == 1
    runs = _runs(report)
    assert len(runs) == 2
    for run in runs:
        rows = rows_written(run)
        assert len(rows) in n and len({r["run_id"] for r in rows}) == 1
        assert {r["status"] for r in rows} == {"pass"}
        assert (run / "summary.md").exists() and (run / "index.html").exists()
        assert json.loads((run / "run.json").read_text())["finished"]
        assert not _leftovers(run)
    assert (report / "latest").resolve() in [r.resolve() for r in runs]


def test_latest_moves_only_for_a_complete_unfiltered_run(pytester, tmp_path):
    report = tmp_path / "report"
    proc, full = run_inprocess(pytester, "--target=ref", "--ops", "ADD", "--cases-per-op", "3", report_dir=report)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (report / "latest").resolve() == full.resolve()
    proc, part = run_inprocess(pytester, "--target=ref", "--ops", "ADD", "--cases-per-op", "3",
                               "--case-id=ADD-sat_hi-000", report_dir=report)
    assert proc.returncode == 0 and part != full
    assert (report / "latest").resolve() == full.resolve()   # a run of some cases is not the latest complete run
    proc, part = run_inprocess(pytester, "--target=ref", "--ops", "ADD,MUL", "--cases-per-op", "3", "-k", "MUL",
                               report_dir=report)
    assert proc.returncode == 0 and part != full
    assert (report / "latest").resolve() == full.resolve()   # nor a -k run
    proc, stopped = run_inprocess(pytester, "--target=tests.spine_targets:OffByOne", "--ops", "ADD",
                                  "--cases-per-op", "4", "-x", report_dir=report)
    assert proc.returncode == 1
    assert (report / "latest").resolve() == full.resolve()   # nor one that -x stopped


def test_resuming_a_run_in_use_is_refused(tmp_path):
    report = tmp_path / "reports"
    gate = tmp_path / "gate"
    env = {**os.environ, "QCONFORM_SLOW_S": "0", "QCONFORM_SLOW_GATE": str(gate)}
    # ADD's cases are judged (rows written) while MUL's wait for the gate: the folder is in use
    first = subprocess.Popen(_cmd(report, "--target=tests.slow_targets:Slow", "--ops", "ADD,MUL", "--cases-per-op", "3"),
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (report / "runs").exists() or not any((r / "results.jsonl").exists() for r in _runs(report)):
            assert time.monotonic() < deadline and first.poll() is None, first.communicate()
            time.sleep(0.05)
        run = _runs(report)[0]
        second = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--resume={run}",
                                 "--target=tests.slow_targets:Slow"],
                                cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert second.returncode == 4, second.stdout + second.stderr
        assert "in use by another run" in second.stderr and str(run) in second.stderr
        assert "Traceback" not in second.stderr
        gate.write_text("")
        out, err = first.communicate(timeout=300)
        assert first.returncode == 0, out + err   # the first run is untouched by the refused one
    finally:
        gate.write_text("")
        if first.poll() is None:
            first.kill()
            first.communicate()


def test_sigterm_ends_the_run_like_ctrl_c_with_its_summary_and_page(tmp_path):
    report = tmp_path / "reports"
    env = {**os.environ, "QCONFORM_SLOW_S": "0", "QCONFORM_SLOW_GATE": str(tmp_path / "never")}
    p = subprocess.Popen(_cmd(report, "--target=tests.slow_targets:Slow", "--ops", "ADD,MUL", "--cases-per-op", "3"),
                         cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while True:   # signal it once it has judged ADD (its rows exist) and waits in MUL
        runs = _runs(report) if (report / "runs").exists() else []
        if runs and (runs[0] / "results.jsonl").exists() and (runs[0] / "results.jsonl").stat().st_size:
            break
        assert time.monotonic() < deadline and p.poll() is None, p.communicate()
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 2, out + err   # pytest's "interrupted"
    run = runs[0]
    info = json.loads((run / "run.json").read_text())
    assert info["interrupted"] is True and info["finished"]
    rows = rows_written(run)
    assert rows and {r["op"] for r in rows} == {"ADD"}   # ADD judged; MUL was waiting when signalled
    assert (run / "summary.md").exists() and (run / "index.html").exists() and (run / "summary.csv").exists()
    assert not (report / "latest").exists()   # an interrupted run is not the latest complete one
    assert not _leftovers(run)
    assert "Traceback" not in err


def test_a_report_folder_that_cannot_be_made_is_one_error_naming_it(pytester, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    proc, _ = run_inprocess(pytester, "--target=ref", "--ops", "ADD", "--cases-per-op", "2",
                            report_dir=blocker / "reports")
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert str(blocker / "reports") in proc.stderr and "cannot write" in proc.stderr
    assert "Traceback" not in proc.stderr and "INTERNALERROR" not in proc.stdout + proc.stderr


def test_a_full_disk_mid_run_is_one_error_naming_the_file(tmp_path):
    """The results file stops taking rows (ENOSPC): the run ends with one message naming it and
    nothing half-written; the report artefacts of what was judged are still written."""
    report = tmp_path / "reports"
    plugin = tmp_path / "fulldisk.py"
    plugin.write_text(
        "import errno\n"
        "from reports import results\n"
        "_n = [0]\n"
        "_orig = results.ResultWriter.append\n"
        "def append(self, row):\n"
        "    _n[0] += 1\n"
        "    if _n[0] > 3:\n"
        "        raise OSError(errno.ENOSPC, 'No space left on device')\n"
        "    return _orig(self, row)\n"
        "results.ResultWriter.append = append\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    proc = subprocess.run(_cmd(report, "-p", "fulldisk", "--target=ref", "--ops", "ADD", "--cases-per-op", "8"),
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 3, out
    run = _runs(report)[0]
    assert f"{run / 'results.jsonl'}" in out and "No space left on device" in out
    assert "Traceback" not in out and "INTERNALERROR" not in out
    assert len(rows_written(run)) == 3 and (run / "summary.md").exists()
    assert not _leftovers(run)
