"""The package's layers and public-API rules (issue #13), checked on every test run."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGES = ("suite", "reference", "targets", "reports")
#: function-local (or guarded) imports are for optional runtimes (a missing one makes only its target
#: unavailable) and optional libraries (pyarrow: reports; allure: the plugin's Allure labels)
RUNTIMES = ("tflite_micro", "openvino", "tosa_converter_for_tflite", "tosa_reference_model", "onnxruntime", "onnxruntime_qnn", "onnx", "ai_edge_litert", "tflite_runtime", "flatbuffers",
            "pyarrow", "tomli", "tomllib", "allure")
#: heavy libraries imported where they are used: `qconform --help`, a command and a run that do not
#: use them do not pay their import (scipy.stats: a second of CPU; hypothesis: half of one; issue #34;
#: pandas: results.parquet's writer, imported before it is told to convert, reports/parquet.py)
HEAVY = ("scipy", "hypothesis", "pandas")
#: a package's names made of a heavy module of its own, imported when first asked for: every run's
#: ``python -m reports.parquet`` child (the run waits for it) needs nothing of reports.build
LAZY_EXPORTS = {("reports/__init__.py", "reports")}
MAX_LOCAL_IMPORTS = 40


def _sources():
    for pkg in PACKAGES:
        yield from sorted((ROOT / pkg).rglob("*.py"))


def _local_imports() -> list[tuple[Path, int, str]]:
    out = []
    for p in _sources():
        for n, line in enumerate(p.read_text().splitlines(), 1):
            m = re.match(r"^(\s+)(?:from\s+(\S+)\s+import|import\s+(\S+))", line)
            if m and not line.strip().startswith("from __future__"):
                out.append((p.relative_to(ROOT), n, (m.group(2) or m.group(3)).split(".")[0]))
    return out


def test_import_linter_contracts_hold():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if lint is None:
        pytest.skip("import-linter is not installed (bash scripts/setup.sh --dev installs it)")
    p = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "0 broken" in p.stdout and "3 kept" in p.stdout, p.stdout


def test_no_private_pytest_or_xdist_api():
    bad = []
    for p in _sources():
        for n, line in enumerate(p.read_text().splitlines(), 1):
            if re.search(r"^\s*(from|import)\s+_pytest\b|\b_split_scope\b|\._setupstate\b|from\s+xdist\.\w+\s+import\s+_",
                         line):
                bad.append(f"{p.relative_to(ROOT)}:{n}: {line.strip()}")
    assert not bad, "\n".join(bad)


def test_function_local_imports_are_few_and_only_for_runtimes():
    found = _local_imports()
    other = [f"{p}:{n}: {mod}" for p, n, mod in found if mod not in RUNTIMES + HEAVY and (str(p), mod) not in LAZY_EXPORTS]
    assert not other, "function-local imports of non-runtime modules (import them at module level):\n" + "\n".join(other)
    assert len(found) <= MAX_LOCAL_IMPORTS, f"{len(found)} function-local imports (at most {MAX_LOCAL_IMPORTS})"
