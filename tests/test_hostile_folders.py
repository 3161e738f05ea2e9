"""The second hostile probe (issue #33) on run folders: links, FIFOs, huge lines, repeated rows, rows
of another run, partial groups. Each is refused (or marked) where it enters, naming the file."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from reports.results import read_rows
from suite.core.errors import QconformError
from tests.conftest import ROOT, run_folder


def _pytest(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def _qconform(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "suite.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def biased(tmp_path_factory) -> Path:
    """A finished run of a target biased as a whole (its ADD group fails, its cases pass)."""
    d = tmp_path_factory.mktemp("biased")
    p = _pytest("--target=tests.bias_targets:HalfUp", "--ops", "ADD", "--cases-per-op", "20", f"--report-dir={d}")
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    return run_folder(d)


def _copy(run: Path, to: Path) -> Path:
    shutil.copytree(run, to)
    (to / ".lock").unlink(missing_ok=True)
    return to


# ----------------------------------------------------------------------------- 1. --resume through a link

@pytest.mark.parametrize("name", ["results.jsonl", ".lock", "failures"])
def test_resume_never_writes_through_a_link_in_the_run_folder(tmp_path, biased, name):
    run = _copy(biased, tmp_path / "runs" / "r")
    outside = tmp_path / "outside"
    if name == "failures":
        outside.mkdir()
        (run / name).symlink_to(outside)
    else:
        lines = (run / "results.jsonl").read_bytes().splitlines(keepends=True)
        outside.write_bytes(b"".join(lines[:3]) + b"a secret, no newline")
        (run / name).unlink(missing_ok=True)
        (run / name).symlink_to(outside)
    before = sorted((p.name, p.read_bytes()) for p in [outside] if p.is_file())
    p = _pytest(f"--resume={run}", "--target=tests.bias_targets:HalfUp")
    assert p.returncode == 4, p.stdout[-2000:] + p.stderr[-2000:]
    assert f"{run / name}" in p.stderr + p.stdout and "symbolic link" in p.stderr + p.stdout
    assert sorted((p.name, p.read_bytes()) for p in [outside] if p.is_file()) == before
    if name == "failures":
        assert not any(outside.iterdir())


# ----------------------------------------------------------------------------- 7. one bounded reader

def test_report_refuses_a_fifo_a_device_or_a_link_as_results(tmp_path, biased):
    for i, make in enumerate((os.mkfifo, lambda p: p.symlink_to("/dev/zero"),
                              lambda p: p.symlink_to(biased / "results.jsonl"))):
        run = _copy(biased, tmp_path / f"r{i}")
        (run / "results.jsonl").unlink()
        make(run / "results.jsonl")
        p = _qconform("report", str(run), timeout=60)   # (a FIFO once hung here)
        assert p.returncode == 2 and "results.jsonl" in p.stderr, p.stderr
        assert "is not a regular file" in p.stderr or "is a symbolic link" in p.stderr, p.stderr


def test_a_2_gb_sparse_results_file_is_refused_at_its_first_long_line(tmp_path, biased):
    report_dir = tmp_path / "reports"
    run = _copy(biased, report_dir / "runs" / "a-sparse")
    with open(run / "results.jsonl", "r+b") as f:   # the rows, then 2 GB of holes without a newline
        f.truncate(2_000_000_000)
    for cmd in (("report", str(run)), ("diff", str(biased), str(run))):
        p = _qconform(*cmd)
        assert p.returncode == 2 and "is longer than 4,194,304 bytes" in p.stderr, p.stderr
        assert str(run / "results.jsonl") in p.stderr
    # a sibling run of the History section: left out with a note, not read whole
    from reports.history import history
    _copy(biased, report_dir / "runs" / "b-good")
    series, notes = history(report_dir, parquet=False)
    assert any("a-sparse left out" in n and "is longer than" in n for n in notes), notes
    assert [len(s.runs) for s in series] == [1]


# ----------------------------------------------------------------------------- 16. each pair once, one run

def test_diff_refuses_a_run_whose_failure_is_followed_by_its_pass(tmp_path, biased):
    base = _copy(biased, tmp_path / "base")
    run = _copy(biased, tmp_path / "run")
    rows = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()]
    n = len(rows)
    with open(run / "results.jsonl", "a") as f:   # the first case regressed, then its pass again
        f.write(json.dumps({**rows[0], "status": "fail", "reason": "regressed"}) + "\n")
        f.write(json.dumps(rows[0]) + "\n")
    p = _qconform("diff", str(base), str(run))
    assert p.returncode == 2 and "NO REGRESSION" not in p.stdout, p.stdout + p.stderr
    assert f"line {n + 1} repeats the (case, target, device) {rows[0]['case_id']}" in p.stderr, p.stderr
    # the baseline's rows under another run id
    run2 = _copy(biased, tmp_path / "run2")
    with open(base / "results.jsonl", "a") as f:
        f.write(json.dumps({**rows[1], "run_id": "someone-else", "case_id": "ADD-x-99999"}) + "\n")
    p = _qconform("diff", str(base), str(run2))
    assert p.returncode == 2 and f"line {n + 1} is a row of run 'someone-else'" in p.stderr, p.stderr


def test_resume_still_reads_its_own_rows(tmp_path, biased):
    """What --resume appends is never a repeat: it runs only the pairs without a row."""
    run = _copy(biased, tmp_path / "runs" / "r")
    lines = (run / "results.jsonl").read_bytes().splitlines(keepends=True)
    (run / "results.jsonl").write_bytes(b"".join(lines[:7]) + lines[7][:20])   # killed mid-row
    info = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**info, "finished": None, "interrupted": True}))
    p = _pytest(f"--resume={run}", "--target=tests.bias_targets:HalfUp")
    assert p.returncode == 1, p.stdout[-2000:] + p.stderr[-2000:]
    assert len(read_rows(run)) == len(lines)


# ----------------------------------------------------------------------------- 15. partial groups

@pytest.mark.parametrize("how", ["interrupted", "missing"])
def test_the_groups_of_an_incomplete_run_are_marked_incomplete_never_failing(tmp_path, biased, how):
    run = _copy(biased, tmp_path / "r")
    assert "failing as a whole" in (run / "summary.md").read_text()   # the complete run: its bias fails it
    lines = (run / "results.jsonl").read_bytes().splitlines(keepends=True)
    (run / "results.jsonl").write_bytes(b"".join(lines[:12]))
    info = json.loads((run / "run.json").read_text())
    if how == "interrupted":
        info.update(interrupted=True, exit_status=2)
    else:
        assert info["planned"] == len(lines)
    (run / "run.json").write_text(json.dumps(info))
    p = _qconform("report", str(run))
    assert p.returncode == 0, p.stderr
    md, page = (run / "summary.md").read_text(), (run / "index.html").read_text()
    assert md.startswith("**INCOMPLETE") or "**INCOMPLETE:" in md, md[:500]
    assert "failing as a whole" not in md and "FAIL" not in md.split("\n\n")[0]
    assert "not judged as a whole" in md and "biased +" in md   # marked, its partial numbers said
    assert 'class="verdict INCOMPLETE"' in page and 'id="whole-incomplete"' in page and 'id="whole"' not in page


def test_a_certificate_of_an_incomplete_run_keeps_its_partial_group_failures(tmp_path, biased):
    """The groups are not judged on the page, but a certificate of part of a run is never the
    better for it: what the partial rows showed stays a failure, saying so."""
    from reports import write_reports
    from reports.runinfo import read_run_info
    from suite.core.tolerance import load_policy
    run = _copy(biased, tmp_path / "r")
    lines = (run / "results.jsonl").read_bytes().splitlines(keepends=True)
    (run / "results.jsonl").write_bytes(b"".join(lines[:12]))
    info = {**read_run_info(run), "interrupted": True, "exit_status": 2}
    rep = write_reports(run, certify=True, policy=load_policy(), run_info=info)
    assert not rep.groups and not rep.errors, rep.errors
    ops = [o for o in rep.certificate["ops"] if o["op_failures"]]
    assert ops and all(o["verdict"] == "non-conformant" for o in ops)
    assert all("on partial rows: the run did not finish" in o["op_failures"][0] for o in ops), ops


def test_a_certificate_of_an_incomplete_run_says_so_and_certifies_nothing(tmp_path, biased):
    """Even where its partial rows all passed, a certificate of an interrupted run is incomplete:
    certificate_failures (the run's exit status, --verify) name it."""
    from reports import write_reports
    from reports.runinfo import read_run_info
    from reports.summary import certificate_failures
    from suite.core.tolerance import load_policy
    run = _copy(biased, tmp_path / "r")
    info = {**read_run_info(run), "interrupted": True, "exit_status": 2}
    rep = write_reports(run, certify=True, policy=load_policy(), run_info=info)
    assert rep.certificate["incomplete"] == "the run did not finish"
    assert "the run is incomplete: the run did not finish" in certificate_failures(rep.certificate)
    done = write_reports(run, certify=True, policy=load_policy(), run_info={**info, "interrupted": False,
                                                                            "exit_status": 0})
    assert done.certificate["incomplete"] is None
    assert not any("incomplete" in f for f in certificate_failures(done.certificate))


def test_a_fifo_for_models_csv_is_one_error_not_a_hang(tmp_path, biased):
    """models.csv / layers.csv / outputs.csv are read as bounded regular files, like every file of a run folder."""
    from reports import write_reports
    run = _copy(biased, tmp_path / "r")
    os.mkfifo(run / "models.csv")
    (run / "layers.csv").write_text("model,layer\n")
    rep = write_reports(run)
    assert rep.errors and all("models.csv" in e and "not a regular file" in e for e in rep.errors), rep.errors
