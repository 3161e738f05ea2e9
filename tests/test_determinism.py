"""Determinism: the same seed gives byte-identical case files and golden outputs in every process,
whatever the hash seed and the thread settings (no dependence on dict order, hash(), BLAS threads)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, rows_written
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"

ENVS = {
    "a": {"PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
    "b": {"PYTHONHASHSEED": "4242", "OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2", "MKL_NUM_THREADS": "2"},
}


def _write(out: Path, env_extra: dict, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS") and k != "PYTHONHASHSEED"}
    env.update(env_extra)
    cmd = [sys.executable, "-m", "suite", "cases", "-o", str(out), "--golden", *args]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return p


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("args", [("--seed", "7", "--cases-per-op", "4"),
                                  ("--seed", "3", "--cases-per-op", "2", "--scheme", "ort-fp32-rne")])
def test_same_seed_same_bytes_across_processes(tmp_path, args):
    from suite.cases.generate import generate, generator_ops
    seed, n = int(args[1]), int(args[3])
    runs = {k: _write(tmp_path / k, env, *args) for k, env in ENVS.items()}
    da, db = _digests(tmp_path / "a"), _digests(tmp_path / "b")
    assert da == db
    # every operator with a generator, every case, its golden (where the golden exists)
    cases = generate(None, n, seed)
    assert {c.op for c in cases} == set(generator_ops())
    assert {f"{c.id}.json" for c in cases} <= set(da)
    assert sum(name.endswith(".golden.json") for name in da) >= 0.9 * len(cases)
    assert runs["a"].stdout == runs["b"].stdout and runs["a"].stdout.startswith("digest: ")
    # and this process (its own hash seed and threads) generates the same bytes
    for c in cases:
        assert (tmp_path / "a" / f"{c.id}.json").read_text() == c.to_json(), c.id


def _write_here(cli, out: Path, *args: str) -> subprocess.CompletedProcess:
    """``qconform cases -o out --golden *args`` in this process (processes: _write)."""
    p = cli("cases", "-o", str(out), "--golden", *args)
    assert p.returncode == 0, p.stderr
    return p


def test_other_seed_other_cases(qconform_main, tmp_path):
    a = _write_here(qconform_main, tmp_path / "a", "--ops", "ADD,CONV_2D", "--seed", "1", "--cases-per-op", "3")
    b = _write_here(qconform_main, tmp_path / "b", "--ops", "ADD,CONV_2D", "--seed", "2", "--cases-per-op", "3")
    assert a.stdout != b.stdout and a.stdout.startswith("digest: ")
    assert set(_digests(tmp_path / "a")) == set(_digests(tmp_path / "b"))   # same ids, other data


def test_written_cases_run_back_through_case_file(pytester, qconform_main, tmp_path):
    """The files are the suite's case format: `pytest --case-file=DIR` runs them (goldens skipped)."""
    _write_here(qconform_main, tmp_path / "c", "--ops", "ADD", "--cases-per-op", "3")
    proc, rd = run_inprocess(pytester, "--target=ref", f"--case-file={tmp_path / 'c'}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    n = len(list((tmp_path / "c").glob("*.golden.json")))
    proc.result.assert_outcomes(passed=1)   # one item for the (op, target)
    assert f"; {n} results: {n} passed" in proc.stdout and len(rows_written(rd)) == n
    assert n >= 3 and (rd / "results.jsonl").exists()


def test_cases_command_errors(qconform_main, tmp_path):
    p = qconform_main("cases", "-o", str(tmp_path / "x"), "--ops", "CONV_9D")
    assert p.returncode == 2 and p.stderr.startswith("qconform: error: field '--ops'") and "Traceback" not in p.stderr
    p = qconform_main("cases", "-o", str(tmp_path / "x"), "--cases-per-op", "0")
    assert p.returncode == 2 and "field '--cases-per-op'" in p.stderr
