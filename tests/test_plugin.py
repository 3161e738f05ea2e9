"""The pytest plugin end to end: options, verdicts, messages, results and summaries."""

from __future__ import annotations

import csv
import json
import shlex
import subprocess
import sys

from suite.core.case import save_case
from suite.cases.generate import make_case
from tests.conftest import ROOT
from tests.conftest import rows_written as _rows

SUMMARY_COLUMNS = ["op", "target", "cases", "passed", "failed", "unsupported", "errors", "bit_exact_pct",
                   "max_abs_lsb", "mean_err_lsb", "p50_latency_us"]


def test_ref_run_writes_results_and_summary(run_suite):
    proc, rd = run_suite("--target=ref", "--ops", "ADD,MUL", "--cases-per-op", "4", "-k", "not qnn")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "8 passed" in proc.stdout
    assert "qconform: per-op x target summary" in proc.stdout
    rows = _rows(rd)
    assert len(rows) == 8 and all(r["status"] == "pass" and r["bit_exact"] for r in rows)
    with open(rd / "summary.csv") as f:
        table = list(csv.DictReader(f))
    assert list(table[0])[: len(SUMMARY_COLUMNS)] == SUMMARY_COLUMNS
    assert {(r["op"], r["target"], r["cases"], r["bit_exact_pct"]) for r in table} == {
        ("ADD", "ref", "4", "100.0"), ("MUL", "ref", "4", "100.0")}
    assert (rd / "summary.md").read_text().startswith("# qconform summary")


def test_header_names_targets_and_versions(run_suite):
    proc, _ = run_suite("-v", "--target=ref", "--ops", "ADD", "--cases-per-op", "1")   # -q -v: header shown
    assert "target ref: numpy" in proc.stdout


def test_unknown_target_is_one_usage_error(run_suite):
    proc, _ = run_suite("--target=nope", "--ops", "ADD")
    assert proc.returncode == 4
    assert "unknown target 'nope'" in proc.stderr and "Traceback" not in proc.stderr


def test_unknown_op_and_bad_numbers_are_usage_errors(run_suite):
    proc, _ = run_suite("--target=ref", "--ops", "CONV_9D")
    assert proc.returncode == 4 and "--ops" in proc.stderr
    proc, _ = run_suite("--target=ref", "--cases-per-op", "0")
    assert proc.returncode == 4 and "--cases-per-op" in proc.stderr
    # "exact" gives unrounded reals: a run judged against them would fail every case
    proc, _ = run_suite("--target=ref", "--ops", "ADD", "--scheme", "exact")
    assert proc.returncode == 4 and "--scheme" in proc.stderr and "not a kernel scheme" in proc.stderr


def test_k_selects_one_case(run_suite):
    proc, rd = run_suite("--target=ref", "--ops", "ADD", "--cases-per-op", "20", "-k", "ADD-sat_hi-001:ref")
    assert proc.returncode == 0 and "1 passed" in proc.stdout
    assert [r["case_id"] for r in _rows(rd)] == ["ADD-sat_hi-001"]


def test_failure_message_and_reproduction(run_suite, tmp_path):
    proc, rd = run_suite("--target=tests.spine_targets:OffByOne", "--ops", "ADD", "--cases-per-op", "12")
    assert proc.returncode == 1
    rows = _rows(rd)
    failed = [r for r in rows if r["status"] == "fail"]
    assert failed and all(r["index"] % 2 == 1 for r in failed)
    assert all(r["status"] == "pass" for r in rows if r["index"] % 2 == 0)
    r = failed[0]
    assert r["first_index"] is not None and r["got"] - r["want"] in (-2, 2) and r["max_abs_lsb"] == 2
    # the message names the case id, first index, got vs want and the reproduction command
    assert f"{r['case_id']} on tests.spine_targets:OffByOne" in proc.stdout
    assert f"got {r['got']}, want {r['want']}" in proc.stdout
    assert "reproduce: pytest --target=tests.spine_targets:OffByOne --case-file=" in proc.stdout
    # the saved failure reproduces on its own
    repro = shlex.split(r["repro"])
    assert repro[0] == "pytest"
    out = subprocess.run([sys.executable, "-m", *repro[:-1], f"--report-dir={tmp_path / 'repro'}", "-q",
                          "-p", "no:cacheprovider"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1 and "1 failed" in out.stdout, out.stdout + out.stderr
    saved = json.loads(open(r["failure_file"]).read())
    assert "got" in saved and "want" in saved


def test_unsupported_error_and_garbage_verdicts_are_distinct(run_suite):
    proc, rd = run_suite("--target=tests.spine_targets:Refuses", "--ops", "ADD,MUL", "--cases-per-op", "3",
                         "-k", "not qnn")
    assert proc.returncode == 0
    assert "3 passed, 3 skipped" in proc.stdout
    rows = _rows(rd)
    assert {r["status"] for r in rows if r["op"] == "MUL"} == {"unsupported"}
    assert all("MUL is not implemented" in r["reason"] for r in rows if r["op"] == "MUL")

    proc, rd = run_suite("--target=tests.spine_targets:Raises", "--ops", "ADD", "--cases-per-op", "2",
                         "-k", "not qnn")
    assert "2 errors" in proc.stdout and proc.returncode == 1
    assert {r["status"] for r in _rows(rd)} == {"error"}
    assert "kernel exploded" in proc.stdout

    proc, rd = run_suite("--target=tests.spine_targets:WrongShape", "--ops", "ADD", "--cases-per-op", "2",
                         "-k", "not qnn")
    assert {r["status"] for r in _rows(rd)} == {"error"}
    assert "shape" in _rows(rd)[0]["reason"]


def test_case_file_folder_run_and_bad_file(run_suite, tmp_path):
    d = tmp_path / "cases"
    save_case(make_case("ADD", "random", 1), d / "a.json")
    save_case(make_case("MUL", "broadcast", 0), d / "sub" / "b.json")
    proc, rd = run_suite("--target=ref", f"--case-file={d}")
    assert proc.returncode == 0 and "2 passed" in proc.stdout, proc.stdout + proc.stderr
    assert sorted(r["case_id"] for r in _rows(rd)) == ["ADD-random-001", "MUL-broadcast-000"]
    (d / "c.json").write_text('{"format": "qconform-case/1", "op": "ADD"}')
    proc, _ = run_suite("--target=ref", f"--case-file={d}")
    assert proc.returncode == 4
    assert "c.json: field 'inputs'" in proc.stderr and "Traceback" not in proc.stderr


def test_project_tests_do_not_touch_the_default_report(tmp_path):
    # `pytest tests/...` is not a conformance run: no report directory is prepared
    # (run from tmp_path, where a default report dir, reports/latest, would appear; the test file by
    # its absolute path: a relative one is not found there and pytest stops before any plugin hook)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          str(ROOT / "tests" / "test_tolerance.py"), "--rootdir", str(ROOT)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert not (tmp_path / "reports").exists()
