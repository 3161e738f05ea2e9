"""Hostile inputs (issue #21): files people send each other are data. Reading a failure file, a
run folder, a case file, a tolerance file or a model never imports a module, runs a program, opens
a file the command line did not name, hangs on a FIFO, reads without a bound or allocates without
a bound: each is one clear error naming the file and the field. The inputs are in tests/data/hostile/.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from suite.core.errors import QconformError
from tests.conftest import ROOT

HOSTILE = ROOT / "tests" / "data" / "hostile"


def _in(tmp_path: Path, *names: str) -> Path:
    """A working folder holding the hostile files ``names`` and the marker-writing module/program."""
    for n in ("qc_helpers.py", "collect.sh", *names):
        shutil.copy2(HOSTILE / n, tmp_path / n)
    return tmp_path


@pytest.fixture
def qconform(monkeypatch, capsys):
    """``qconform *args`` in this process, in folder ``cwd`` (importable, as the current folder is):
    (exit status, stderr); a module it imported is forgotten afterwards."""
    from suite.cli import main

    def _run(cwd: Path, *args: str) -> tuple[int, str]:
        monkeypatch.chdir(cwd)
        monkeypatch.syspath_prepend(str(cwd))
        monkeypatch.setenv("QC_MARKER", str(cwd / "marker"))
        capsys.readouterr()
        try:
            rc = main(list(args))
        finally:
            sys.modules.pop("qc_helpers", None)
        return rc, capsys.readouterr().err
    return _run


# ----------------------------------------------------------------------------- 1. code from a shared file

@pytest.mark.parametrize("name, field, give", [
    ("failure-module-target.json", "judged.target", "--target=qc_helpers:Kernel"),
    ("failure-ssh-program.json", "judged.device", "--device=ssh:board?ssh=./collect.sh"),
    ("failure-adb-program.json", "judged.device", "--device=adb:SER?adb=./collect.sh"),
    ("failure-tolerance-zero.json", "judged.tolerance.file", "--tolerance=FILE"),
])
def test_shrink_runs_no_code_a_failure_file_names(tmp_path, qconform, name, field, give):
    d = _in(tmp_path, name)
    rc, err = qconform(d, "shrink", name, "-q")
    assert rc == 2, err
    assert not (d / "marker").exists(), "the failure file ran code"
    assert f"field '{field}'" in err and give in err and name in err


def test_the_marker_module_does_run_when_the_command_line_names_it(tmp_path, qconform):
    """The control: the marker module is importable from the working folder, so the test above would
    see its marker had the failure file's target been imported."""
    d = _in(tmp_path, "failure-module-target.json")
    doc = json.loads((d / "failure-module-target.json").read_text())
    del doc["judged"]
    (d / "plain.json").write_text(json.dumps(doc))
    qconform(d, "shrink", "plain.json", "-q", "--target=qc_helpers:Kernel")
    assert (d / "marker").read_text() == "imported"


def _run_json(folder: Path, **options) -> Path:
    folder.mkdir()
    opts = {"seed": 0, "cases_per_op": 2, "ops": ["ADD"], "targets": ["ref"], "case_files": [], **options}
    (folder / "run.json").write_text(json.dumps({"format": "qconform-run/1", "run_id": "r1", "options": opts}))
    return folder


@pytest.mark.parametrize("options, field", [
    ({"targets": ["qc_helpers:Kernel"]}, "options.targets"),
    ({"case_files": ["fifo"]}, "options.case_files"),
])
def test_resume_imports_nothing_and_opens_nothing_run_json_names(tmp_path, monkeypatch, options, field):
    from types import SimpleNamespace

    from suite.harness import resume
    d = _in(tmp_path)
    monkeypatch.syspath_prepend(str(d))
    if options.get("case_files"):
        os.mkfifo(d / "fifo")   # opened, it would hang the run
        options = {"case_files": [str(d / "fifo")]}
    res = resume.open_run(str(_run_json(d / "run", **options)))
    o = SimpleNamespace(seed=None, cases_per_op=None, scheme=None, ops=None, target=None, case_file=None)
    with pytest.raises(QconformError) as e:
        resume.fill_options(res, o, [f"--resume={res.dir}"])
    assert e.value.field == field and "pytest --resume=" in str(e.value) and o.case_file is None
    assert not (d / "marker").exists() and "qc_helpers" not in sys.modules
    resume.fill_options(res, o, [f"--resume={res.dir}", "--target=x", "--case-file=y"])   # given: not taken


def test_a_rerun_of_a_failure_file_never_loads_its_target(tmp_path):
    """`pytest --case-file=FAILURE.json` compares the file's judged target with the run's: a name only."""
    from suite.harness.repro import check_reruns
    d = _in(tmp_path, "failure-module-target.json")
    sys.modules.pop("qc_helpers", None)
    found = check_reruns([str(d / "failure-module-target.json")], targets=["ref"], scheme="tflite-ref-double",
                         tolerance_digest="0" * 64, device=None, timeout=60.0)
    assert found and "qc_helpers" not in sys.modules and not (d / "marker").exists()
    assert not isinstance(found, QconformError)


# ----------------------------------------------------------------------------- 2. bounded, typed reads

def _readers(d: Path):
    """Each reader of a file a user hands the suite, as fn(path) -> anything."""
    from reports.certify import read_certificate
    from suite.cases.files import load_case_files
    from suite.core.case import load_case
    from suite.core.encodings import read_encodings
    from suite.core.tolerance import load_policy
    from suite.core.waivers import load_waivers
    from suite.harness.repro import digest_of
    from suite.models.tflite import read_model
    return {"case": load_case, "case folder": lambda p: load_case_files([str(p.parent)]),
            "tolerance": load_policy, "waivers": lambda p: load_waivers([str(p)]), "encodings": read_encodings,
            "certificate": read_certificate, "tolerance digest": digest_of, "tflite model": read_model}


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "folder"])
def test_every_reader_takes_only_a_regular_file(tmp_path, kind):
    for what, read in _readers(tmp_path).items():
        if kind == "folder" and what == "certificate":
            continue   # (a folder is a run folder: its certificate.json is read)
        d = tmp_path / what.replace(" ", "-")
        d.mkdir()
        p = d / "x.json"
        if kind == "fifo":
            os.mkfifo(p)             # an open that waited for a writer would hang here
        elif kind == "dev-zero":
            p.symlink_to("/dev/zero")
        else:
            p.mkdir()
        with pytest.raises(QconformError) as e:
            read(p)
        assert "not a regular file" in str(e.value) or "a folder" in str(e.value), (what, str(e.value))


def test_a_file_over_its_bound_is_refused_before_it_is_read(tmp_path, monkeypatch):
    from suite.core import userfile
    from suite.core.case import load_case
    from suite.core.tolerance import load_policy
    monkeypatch.setitem(userfile.LIMITS, "case", 1000)
    monkeypatch.setitem(userfile.LIMITS, "toml", 1000)
    big = tmp_path / "big.json"
    big.write_text(" " * 1001)
    with pytest.raises(QconformError, match="more than 1000"):
        load_case(big)
    with pytest.raises(QconformError, match="more than 1000") as e:
        load_policy(big)
    assert e.value.field == "--tolerance"


def test_a_run_folder_whose_run_json_is_a_fifo_is_refused(tmp_path):
    from suite.harness import resume
    (tmp_path / "run").mkdir()
    os.mkfifo(tmp_path / "run" / "run.json")
    with pytest.raises(QconformError, match="FIFO") as e:
        resume.open_run(str(tmp_path / "run"))
    assert e.value.field == "--resume"
