"""Whether a target can run here is asked where it runs (issue #32): a target that runs in a
worker process answers its ``availability()`` there, so the pytest process imports no runtime to
learn it; the default targets' answers are waited for only when the tests are made, and one that
cannot run here is left out and named with why, as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from suite.harness.isolation import Isolated
from suite.harness.witnesses import Outside
from targets.base import Timing
from tests.avail_targets import Recording
from tests.conftest import ROOT, rows_written
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"

TARGET = "tests.avail_targets:Recording"


@pytest.fixture
def run(pytester):
    return lambda *args, **kw: run_inprocess(pytester, *args, **kw)


def _askers(log) -> list[int]:
    return [int(x) for x in log.read_text().split()] if log.exists() else []


def test_a_worker_targets_availability_is_asked_in_its_worker_not_here(run, tmp_path, monkeypatch):
    log = tmp_path / "asked"
    monkeypatch.setenv("QCONFORM_AVAILABILITY_LOG", str(log))
    proc, rd = run(f"--target=ref,{TARGET}", "--ops", "ADD", "--cases-per-op", "2")
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert _askers(log) and os.getpid() not in _askers(log)   # (this process is the run's pytest process)
    info = json.loads((rd / "run.json").read_text())
    assert info["targets"]["recording"]["versions"] == {"helper": "1.0"} and info["unavailable_targets"] == {}
    assert {r["target"] for r in rows_written(rd)} == {"ref", "recording"}


def test_a_named_target_its_worker_finds_unavailable_is_one_usage_error_before_any_folder(run, tmp_path,
                                                                                          monkeypatch):
    log = tmp_path / "asked"
    monkeypatch.setenv("QCONFORM_AVAILABILITY_LOG", str(log))
    monkeypatch.setenv("QCONFORM_AVAILABILITY_NO", "no such accelerator here")
    proc, rd = run(f"--target={TARGET}", "--ops", "ADD", "--cases-per-op", "2", report_dir=tmp_path / "r")
    assert proc.returncode == 4 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert f"target '{TARGET}' is not available on this machine: no such accelerator here" in proc.stderr
    assert _askers(log) and os.getpid() not in _askers(log)
    assert not (tmp_path / "r").exists()   # (nothing written: the run never started)


def test_a_worker_that_finds_its_target_unavailable_says_why_once(tmp_path, monkeypatch):
    monkeypatch.setenv("QCONFORM_AVAILABILITY_NO", "told so")
    ex = Isolated(Recording(), timeout=30.0)
    try:
        assert ex.availability() == (False, "told so")
        from suite.cases.generate import generate
        cases = generate(["ADD"], 2, 0)
        for c in cases:   # (a witness's use: each batch gets why, no worker started again for it)
            (o,) = ex.run([c], Timing(warmup=0, repeats=1), alone=1)
            assert o.status == "error" and o.reason == "the target is not available here: told so"
        assert ex.stats["workers_started"] == 0 and ex.worker is None
    finally:
        ex.close()


def test_a_default_target_found_unavailable_by_its_worker_is_a_witness_again():
    out = Outside(["ref", "tflite", "ort", "tosa"], 10.0, names=None)
    assert "tosa" not in out.names
    out.readmit("tosa")
    assert out.names[-1] == "tosa" and "ref" not in out.names


PROBE = '''
import json, os, sys
from pathlib import Path
RUNTIMES = ("ai_edge_litert", "onnxruntime", "onnx", "openvino", "tflite_micro")
OUT = Path(os.environ["QC_PROBE_OUT"])
def _run_json():
    (run,) = (Path(os.environ["QC_PROBE_REPORT"]) / "runs").iterdir()
    return json.loads((run / "run.json").read_text())
def pytest_sessionstart(session):
    d = _run_json()
    OUT.joinpath("start.json").write_text(json.dumps({n: t["versions"] for n, t in d["targets"].items()}))
def pytest_collection_finish(session):
    OUT.joinpath("runtimes.json").write_text(json.dumps(sorted(m for m in RUNTIMES if m in sys.modules)))
'''


def test_the_default_run_imports_no_runtime_here_and_names_an_unavailable_default_target(tmp_path):
    """The default targets (one made unavailable: no TOSA tools venv); the pytest process imports
    none of the runtimes, run.json's start document waits for no worker, the unavailable target is
    left out and named with why in the terminal and run.json, as before."""
    (tmp_path / "qc_probe.py").write_text(PROBE)
    report = tmp_path / "report"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]), "QC_PROBE_OUT": str(tmp_path),
           "QC_PROBE_REPORT": str(report), "QCONFORM_TOSA_VENV": str(tmp_path / "no-tosa")}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "qc_probe",
                           f"--report-dir={report}", "--ops", "ADD", "--cases-per-op", "1"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert json.loads((tmp_path / "runtimes.json").read_text()) == []
    start = json.loads((tmp_path / "start.json").read_text())
    assert start["ref"] and start["tflite"] is None   # (ref runs here; tflite's worker had not been asked)
    why = f"no TOSA tools venv at {tmp_path / 'no-tosa'}"
    assert f"  target tosa: unavailable ({why}" in proc.stdout
    (run,) = (report / "runs").iterdir()
    info = json.loads((run / "run.json").read_text())
    assert info["unavailable_targets"]["tosa"].startswith(why) and "tosa" not in info["targets"]
    assert "tosa" not in info["options"]["targets"] and info["targets"]["ref"]["versions"]
    assert all(t["versions"] for t in info["targets"].values())   # (every worker's, by the end)
    assert "tosa" not in {r["target"] for r in rows_written(run)} and info["planned"] == len(rows_written(run))


def test_a_targets_worker_runs_at_its_own_niceness(tmp_path, monkeypatch):
    """A target's ``worker_nice`` is its worker's niceness above the pytest process's (openvino's
    batches are the ones the run waits on most); a target without one, the workers' default."""
    from suite.harness.worker import WORKER_NICE
    from targets.openvino import OpenvinoTarget
    from tests.avail_targets import Niced
    log = tmp_path / "nice"
    monkeypatch.setenv("QCONFORM_AVAILABILITY_LOG", str(log))
    base, seen = os.nice(0), []
    for nice in (3, None):
        t = Niced()
        t.worker_nice = nice
        log.unlink(missing_ok=True)
        ex = Isolated(t, timeout=30.0)
        try:
            assert ex.availability()[0] is True
        finally:
            ex.close()
        seen.append(int(log.read_text().split()[-1]))
    assert seen == [min(base + 3, 19), min(base + WORKER_NICE, 19)]
    assert OpenvinoTarget.worker_nice is not None and OpenvinoTarget.worker_nice < WORKER_NICE
