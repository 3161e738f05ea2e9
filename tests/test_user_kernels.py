"""A team's own kernels as targets: the worked examples in examples/kernels are certified by
the suite (their CONV_2D cases pass, bit-exact), and a deliberately wrong build of the C
kernel fails with a clear mismatch report."""

from __future__ import annotations

import hashlib

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from examples.kernels.c_conv.target import SOURCE, CConvTarget
from examples.kernels.python_conv import PythonConvTarget
from reports.certify import read_certificate
from suite.cases.generate import generate
from targets import get_target
from targets.base import Timing
from tests.conftest import ROOT
from tests.conftest import rows_written as _rows
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"

C_TARGET = "examples.kernels.c_conv.target:CConvTarget"
PY_TARGET = "examples.kernels.python_conv:PythonConvTarget"
BIT_EXACT = str(ROOT / "examples" / "kernels" / "bit-exact.toml")


@pytest.fixture(scope="module")
def cc():
    exe = shutil.which("cc") or shutil.which("gcc")
    if exe is None:
        pytest.skip("no C compiler (cc) to build examples/kernels/c_conv/conv.c")
    return exe


def _compile(cc, out, *flags):
    """The build a team runs: one shared library from conv.c, called through a C ABI."""
    cmd = [cc, "-shared", "-fPIC", "-O2", *flags, str(SOURCE), "-o", str(out), "-lm"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


@pytest.fixture(scope="module")
def c_lib(cc, tmp_path_factory):
    return _compile(cc, tmp_path_factory.mktemp("cconv") / "libqcconv.so")


@pytest.fixture(scope="module")
def c_lib_buggy(cc, tmp_path_factory):
    return _compile(cc, tmp_path_factory.mktemp("cconv_buggy") / "libqcconv_buggy.so", "-DQC_BUGGY")


def _int8(rows):
    return [r for r in rows if r["out_dtype"] == "int8"]


@pytest.fixture
def run(pytester, monkeypatch):
    """``pytest *args`` in this process, with ``env`` set for it (and its targets' worker processes);
    returns (run, its run folder). (The kernels run in their worker processes, not in this one.)"""
    def _run(*args, env=None, **kw):
        for k, v in (env or {}).items():
            monkeypatch.setenv(k, v)
        return run_inprocess(pytester, *args, **kw)
    return _run


def test_c_kernel_is_certified(c_lib, run):
    proc, rd = run(f"--target={C_TARGET}", "--ops", "CONV_2D", "--cases-per-op", "30",
                         f"--tolerance={BIT_EXACT}", "--certify", env={"QC_CONV_LIB": str(c_lib)})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    # the certificate names the kernel: its module's source and the library QC_CONV_LIB loads, by sha256
    kernel = next(iter(read_certificate(rd)["targets"].values()))["kernel"]
    assert kernel["class"] == C_TARGET and kernel["sources"][0]["path"].endswith("c_conv/target.py")
    assert {"path": str(c_lib), "sha256": hashlib.sha256(Path(c_lib).read_bytes()).hexdigest(),
            "env": "QC_CONV_LIB"} in kernel["libraries"]
    rows = _rows(rd)
    ran = _int8(rows)
    assert len(ran) == 32 and all(r["status"] == "pass" and r["bit_exact"] for r in ran)   # 30 + 2 `ties`
    # what it does not implement is said, not hidden: uint8/uint16 cases are `unsupported`
    assert all(r["status"] == "unsupported" and "int8 input/filter/output only" in r["reason"]
               for r in rows if r["out_dtype"] != "int8")


def test_buggy_c_kernel_fails_with_a_clear_mismatch_report(c_lib_buggy, run):
    proc, rd = run(f"--target={C_TARGET}", "--ops", "CONV_2D", "--cases-per-op", "30",
                         f"--tolerance={BIT_EXACT}", env={"QC_CONV_LIB": str(c_lib_buggy)})
    assert proc.returncode == 1
    failed = [r for r in _int8(_rows(rd)) if r["status"] == "fail"]
    assert len(failed) >= 20
    out = proc.stdout
    assert "elements off (max |err| 1 LSB, allowed |err| <= 0 LSB); worst at output 0 index [" in out
    assert "got " in out and "want " in out and "reproduce: qconform repro " in out
    f = failed[0]
    assert f["max_abs_lsb"] == 1 and f["got"] != f["want"] and f["failure_file"]
    saved = json.loads(open(f["failure_file"]).read())          # a repro bundle: case, want, got
    assert saved["op"] == "CONV_2D" and saved["want"] != saved["got"]


def test_python_kernel_is_certified(run):
    proc, rd = run(f"--target={PY_TARGET}", "--ops", "CONV_2D", "--cases-per-op", "30",
                         f"--tolerance={BIT_EXACT}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ran = _int8(_rows(rd))
    assert len(ran) == 32 and all(r["status"] == "pass" for r in ran)   # 30 + 2 `ties`


def test_kernels_agree_with_litert_reference_itself(c_lib):
    """Not only with the golden: the same codes as LiteRT's own reference kernels."""
    ok, why = get_target("tflite-ref").availability()
    if not ok:
        pytest.skip(why)
    cases = [c for c in generate(["CONV_2D"], 30, 0) if c.inputs[0].dtype == "int8"]
    timing = Timing(warmup=0, repeats=1)
    want = get_target("tflite-ref").run(cases, timing)
    assert sum(w.status == "ok" for w in want) >= len(cases) // 2, [w.reason for w in want]
    for t in (CConvTarget(lib=str(c_lib)), PythonConvTarget()):
        got = t.run(cases, timing)
        for c, w, g in zip(cases, want, got):
            if w.status == "ok":
                assert g.status == "ok" and np.array_equal(w.outputs[0], g.outputs[0]), (t.name, c.id)


def test_entry_point_registration(run_suite, tmp_path):
    """An installed package registers its target under the `qconform.targets` entry-point group.
    (Subprocesses: the package is installed by PYTHONPATH, as a site folder would be.)"""
    dist = tmp_path / "site" / "acme_kernels-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-kernels\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[qconform.targets]\nacme-conv = {PY_TARGET}\n")
    env = {"PYTHONPATH": f"{tmp_path / 'site'}"}
    proc, rd = run_suite("--target=acme-conv", "--ops", "CONV_2D", "--cases-per-op", "6",
                         f"--tolerance={BIT_EXACT}", env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert {r["target"] for r in _rows(rd)} == {"acme-conv"}
    listing = subprocess.run([sys.executable, "-m", "suite", "targets"], cwd=ROOT, capture_output=True,
                             text=True, env={**__import__("os").environ, **env})
    assert "acme-conv" in listing.stdout


def test_c_target_without_its_library_is_one_clear_error(run):
    proc, _ = run(f"--target={C_TARGET}", "--ops", "CONV_2D", env={"QC_CONV_LIB": ""})
    assert proc.returncode == 4 and "QC_CONV_LIB" in proc.stderr and "Traceback" not in proc.stderr


def test_a_target_module_that_raises_is_one_clear_error(tmp_path, monkeypatch):
    """A user's module that fails while importing (not only a missing one) is a QconformError
    naming the module, the exception and where it was raised, not a traceback."""
    from suite.core.errors import QconformError
    from targets import load_class
    (tmp_path / "qc_broken_kernel.py").write_text("import numpy\nundefined_name\n")
    (tmp_path / "qc_bad_syntax_kernel.py").write_text("x = (\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(QconformError, match=r"qc_broken_kernel.*NameError.*qc_broken_kernel\.py:2"):
        load_class("qc_broken_kernel:Kernel")
    with pytest.raises(QconformError, match=r"qc_bad_syntax_kernel.*SyntaxError"):
        load_class("qc_bad_syntax_kernel:Kernel")
