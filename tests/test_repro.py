"""A red result stays red (issue #14): a failure's file and printed command carry everything that
decided its verdict (target, device, scheme, tolerance policy, time limit, versions); run as
printed it fails again, `qconform shrink FAILURE.json` needs no flag, and a rerun that would
judge it more leniently is refused."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

import pytest

from suite.harness.repro import differences, judged_section, pytest_command, repro_command
from tests.conftest import ROOT, rows_written
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"

TARGET = "tests.helper_targets:FlipOneLsb"     # 1 LSB off on some cases: passes the default policy
BIT_EXACT = str(ROOT / "examples" / "kernels" / "bit-exact.toml")


@pytest.fixture
def failed_run(pytester):
    """A run whose failures only the bit-exact policy makes (the review's case)."""
    proc, folder = run_inprocess(pytester, f"--target={TARGET}", "--ops", "ADD", "--cases-per-op", "6",
                                 f"--tolerance={BIT_EXACT}")
    assert proc.returncode == 1, proc.stdout
    rows = [r for r in rows_written(folder) if r["status"] == "fail"]
    assert rows
    return folder, rows[0]


def test_the_printed_repro_fails_as_printed(pytester, failed_run):
    folder, r = failed_run
    saved = json.loads(open(r["failure_file"]).read())
    j = saved["judged"]
    assert j["target"] == TARGET and j["scheme"] == "tflite-ref-double" and j["status"] == "fail"
    assert j["tolerance"]["file"] == str(folder / "tolerance.toml")
    assert (folder / "tolerance.toml").read_bytes() == open(BIT_EXACT, "rb").read()
    assert j["versions"] == {"helper": "1.0"} and j["seed"] == 0 and j["timeout"] == 60
    argv = shlex.split(r["repro"])
    assert argv[:3] == ["qconform", "repro", r["failure_file"]] and argv[3:] == [f"--target={TARGET}"]
    # as printed (a subprocess, as a user runs it): judged under the file's bit-exact policy
    out = subprocess.run([sys.executable, "-m", "suite", *argv[1:]], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 1 and out.stdout.startswith("STILL FAILS"), out.stdout + out.stderr
    assert f"{r['case_id']} on flip-one-lsb" in out.stdout and "got " in out.stdout and "want " in out.stdout
    assert "bit-exact" not in out.stderr and str(folder / "tolerance.toml") in out.stderr
    # the pytest command does as much, in a report folder of its own
    argv = shlex.split(pytest_command(j, r["failure_file"]))
    assert argv[0] == "pytest" and f"--tolerance={j['tolerance']['file']}" in argv
    out = subprocess.run([sys.executable, "-m", *argv[:-1], f"--report-dir={pytester.path / 'repro'}", "-q",
                          "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1 and "1 failed" in out.stdout, out.stdout + out.stderr


def test_a_rerun_more_lenient_than_the_failing_run_is_refused(pytester, failed_run):
    _, r = failed_run
    for extra in ([], ["--scheme=tflite-ref-single", f"--tolerance={BIT_EXACT}"]):
        proc, _ = run_inprocess(pytester, f"--target={TARGET}", f"--case-file={r['failure_file']}", *extra)
        assert proc.returncode == 4, proc.stdout + proc.stderr
        assert "a rerun must be as strict as the run that failed it" in proc.stderr
        assert r["repro"] in proc.stderr   # it says how to reproduce it
    # on another target it is a comparison, not a rerun: judged under that run's own settings
    proc, _ = run_inprocess(pytester, "--target=ref", f"--case-file={r['failure_file']}")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_shrink_needs_no_flag_and_refuses_other_settings(failed_run, tmp_path):
    _, r = failed_run
    out = tmp_path / "shrunk.json"
    target = json.loads(open(r["failure_file"]).read())["judged"]["target"]   # module:Class: named again
    cli = [sys.executable, "-m", "suite", "shrink", r["failure_file"], "-o", str(out), "-q", f"--target={target}"]
    p = subprocess.run(cli, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "still fail" in p.stdout
    shrunk = json.loads(out.read_text())
    assert shrunk["judged"]["tolerance"] == json.loads(open(r["failure_file"]).read())["judged"]["tolerance"]
    assert "--tolerance=" in p.stdout.split("reproduce:")[1] and "qconform repro" in p.stdout
    p = subprocess.run(cli + ["--scheme", "tflite-ref-single"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "judged under tflite-ref-double" in p.stderr, p.stdout + p.stderr
    p = subprocess.run(cli + ["--tolerance", str(ROOT / "suite" / "core" / "tolerances.toml")], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "another tolerance policy" in p.stderr, p.stdout + p.stderr


def test_the_cli_imports_module_class_targets_from_the_current_folder(tmp_path):
    (tmp_path / "mykernels.py").write_text(
        "from tests.helper_targets import WrongTarget\n"
        "class Mine(WrongTarget):\n    pass\n")
    from suite.cases.generate import generate
    from suite.core.case import save_case
    from tests.helper_targets import flipped
    case = next(c for c in generate(["ADD"], 6, 0) if flipped(c.id))   # one the target gets 3 LSB wrong
    path = save_case(case, tmp_path / "case.json")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    qconform = [str(ROOT / ".venv" / "bin" / "qconform")] if (ROOT / ".venv" / "bin" / "qconform").exists() \
        else [sys.executable, "-c", "import sys; from suite.cli import main; sys.exit(main())"]
    p = subprocess.run([*qconform, "shrink", str(path), "--target", "mykernels:Mine", "-q", "--any-mismatch"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert p.returncode == 0 and "still fail" in p.stdout, p.stdout + p.stderr


def test_the_repro_carries_device_and_time_limit_and_refuses_other_ones():
    j = judged_section(target="htp", device="ssh:me@board?python=/opt/py/bin/python3", scheme="tflite-ref-double",
                       tolerance_file="/r/tolerance.toml", tolerance_digest="ab" * 32, timeout=5.0, seed=7,
                       cases_per_op=30, run_id="r", status="timeout", versions={"onnxruntime": "1.32.0"},
                       finding=None, rule=3)
    argv = shlex.split(pytest_command(j, "/r/failures/htp/X.json"))
    assert "--device=ssh:me@board?python=/opt/py/bin/python3" in argv and "--case-timeout=5" in argv
    assert shlex.split(repro_command(j, "/r/failures/htp/X.json")) == [
        "qconform", "repro", "/r/failures/htp/X.json", "--device=ssh:me@board?python=/opt/py/bin/python3",
        "--tolerance=/r/tolerance.toml"]   # (no policy here has the sha256 it quotes: named)
    same = dict(scheme="tflite-ref-double", tolerance_digest="ab" * 32, device=j["device"], timeout=5.0)
    assert differences(j, **same) == []
    assert differences(j, **{**same, "device": None}) and differences(j, **{**same, "timeout": 60.0})
    assert differences(j, **{**same, "tolerance_digest": "cd" * 32}) and differences(j, **{**same, "scheme": "exact"})


def test_a_groups_repro_runs_it_as_the_run_did():
    """A group verdict's command (JUnit property, `qconform diff`) carries what decides its cases
    and its verdict: the model and its inputs, the devices, the waivers, --certify."""
    from reports.junit import case_repro, group_repro
    doc = {"options": {"seed": 3, "cases_per_op": 30, "model": "m.tflite", "model_inputs": "4",
                       "model_input_shape": ["x=1,8"], "devices": ["ssh:a", "ssh:b"], "waivers": ["w.toml"],
                       "certify": True, "tolerance_copy": "run/tolerance.toml", "scheme": "litert"}}
    args = shlex.split(group_repro(doc, "ADD", "tflite"))
    for a in ("--model=m.tflite", "--model-inputs=4", "--model-input-shape=x=1,8", "--device=ssh:a",
              "--device=ssh:b", "--waivers=w.toml", "--certify", "--tolerance=run/tolerance.toml"):
        assert a in args, (a, args)
    # one row's command runs on its own device only
    row = {"op": "ADD", "target": "tflite", "device": "ssh:b", "case_id": "ADD-x-000"}
    args = shlex.split(case_repro(doc, row))
    assert "--device=ssh:b" in args and "--device=ssh:a" not in args and args[-2:] == ["-k", "ADD-x-000:tflite"]
    # a hostile run.json's non-strings are not arguments
    assert "--device" not in group_repro({"options": {"devices": "ssh:a", "waivers": [1]}}, "ADD", "t")
