"""Shared fixtures of the project's own tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# pandas and pyarrow's pandas bridge imported up front: pytester's in-process runs restore
# sys.modules afterwards, and a pandas first imported inside one would be dropped while pyarrow
# keeps its classes, so a later pd.read_parquet fails (isinstance against a re-imported pandas).
import pandas  # noqa: F401,E402
import pyarrow.pandas_compat  # noqa: F401,E402

ROOT = Path(__file__).resolve().parent.parent

TESTS_INI = ROOT / "tests" / "pytest.ini"


def pytest_configure(config):
    """Isolate the project's tests from the user's caches and key. Only for a session
    configured by tests/pytest.ini: pytest also loads this file for a suite run whose
    ``--report-dir DIR`` (a space, DIR existing) it took for a test path before the
    plugin's options were known (no ini file then, so it loads the ``test*`` folders'
    conftests); that run must keep the user's caches."""
    if config.inipath is None or Path(config.inipath).resolve() != TESTS_INI:
        return
    import tempfile
    # The project's tests must not fill the user's QNN context cache (~/.cache/qconform/qnn):
    # every test process and the suite runs they start share one throwaway cache folder.
    if "QCONFORM_CACHE_DIR" not in os.environ:
        os.environ["QCONFORM_CACHE_DIR"] = tempfile.mkdtemp(prefix="qconform-test-cache-")
    # Nor its build of the golden's C dot product (~/.cache/qconform/native).
    if "QCONFORM_NATIVE_DIR" not in os.environ:
        os.environ["QCONFORM_NATIVE_DIR"] = tempfile.mkdtemp(prefix="qconform-test-native-")
    # Nor its golden cache (~/.cache/qconform/golden): the suite runs the tests start compute
    # their goldens afresh (a test that wants the cache gives --golden-cache itself).
    os.environ.setdefault("QCONFORM_GOLDEN_CACHE", "off")
    # Nor start a worker for every local runtime to witness their failures (a test that wants
    # the witnesses from outside the run gives --witness-cases itself).
    os.environ.setdefault("QCONFORM_WITNESS_CASES", "0")
    # Nor make or read the user's cache key (~/.cache/qconform/key).
    if "QCONFORM_KEY_FILE" not in os.environ:
        os.environ["QCONFORM_KEY_FILE"] = str(Path(tempfile.mkdtemp(prefix="qconform-test-key-")) / "key")
    # Nor the user's certificate signing key (~/.config/qconform/certify-ed25519.pem).
    if "QCONFORM_CERTIFY_KEY" not in os.environ:
        os.environ["QCONFORM_CERTIFY_KEY"] = str(Path(tempfile.mkdtemp(prefix="qconform-test-sign-")) / "k.pem")
    # The suite runs and commands the tests start are Python processes that import the whole
    # suite: where PYTHONDONTWRITEBYTECODE is set (CI images often set it) each compiled every
    # module anew, and pytest rewrote the plugin's asserts anew (1.4 s a run; `pytest tests`
    # 4 min 12-16 s against 3 min 42 s): they keep their bytecode in __pycache__ instead.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    # The suite runs the tests start keep their order and seeds: pytest-randomly (dev extra) only
    # where a test asks for it (tests/test_ci_plugins.py); in-process runs: tests/inprocess.py.
    if "-p no:randomly" not in os.environ.get("PYTEST_ADDOPTS", ""):
        os.environ["PYTEST_ADDOPTS"] = " ".join(filter(None, [os.environ.get("PYTEST_ADDOPTS"), "-p no:randomly"]))


def run_folder(report_dir: Path) -> Path:
    """The folder of the last run under ``--report-dir`` ``report_dir`` (its runs/<run id>/), or
    ``report_dir`` itself when it is a run folder (a --resume)."""
    report_dir = Path(report_dir)
    if (report_dir / "run.json").exists() and not (report_dir / "runs").exists():
        return report_dir
    runs = sorted((report_dir / "runs").glob("*"), key=lambda p: p.stat().st_mtime) if (report_dir / "runs").exists() else []
    return runs[-1] if runs else report_dir / "runs" / "none"


def rows_written(rd: Path) -> list[dict]:
    """Every row of ``rd``/results.jsonl as written, in order (repeats kept, no torn-line
    tolerance: unlike reports.results.read_rows, which a test must not trust blindly)."""
    import json
    return [json.loads(line) for line in (rd / "results.jsonl").read_text().splitlines() if line.strip()]


@pytest.fixture
def run_suite(tmp_path):
    """Run the conformance suite in a subprocess; returns (CompletedProcess, the run's folder:
    <report_dir>/runs/<run id>, the newest there)."""
    def _run(*args: str, report_dir: Path | None = None, timeout: float = 600, env: dict | None = None):
        rd = report_dir or (tmp_path / "report")
        # "--opt=PATH": an existing folder given as a separate word outside the project would be
        # taken by pytest for a test path while it picks its rootdir (see README, "Paths")
        resume = any(a.startswith("--resume") for a in args)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
               *([] if resume else [f"--report-dir={rd}"]), *args]
        e = dict(os.environ)
        e.update(env or {})
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=e)
        return proc, run_folder(rd)
    return _run


@pytest.fixture
def qconform_cli():
    """Run the qconform command line in a subprocess."""
    def _run(*args: str, timeout: float = 300, cwd: Path | None = None):
        cmd = [sys.executable, "-m", "suite", *args]
        return subprocess.run(cmd, cwd=cwd or ROOT, capture_output=True, text=True, timeout=timeout)
    return _run


@pytest.fixture
def qconform_main(capsys):
    """The qconform command line in this process (suite.cli.main; no interpreter start-up), for
    commands that start no runtime: a CompletedProcess, as qconform_cli gives."""
    from suite.cli import main

    def _run(*args: str):
        capsys.readouterr()   # what came before
        try:
            code = main(list(args))
        except SystemExit as e:   # argparse's usage errors
            code = 0 if e.code is None else e.code if isinstance(e.code, int) else 1
        out = capsys.readouterr()
        return subprocess.CompletedProcess(["qconform", *args], code, out.out, out.err)
    return _run
