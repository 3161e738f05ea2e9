"""The pytest plugin end to end, in this process (pytester): options, verdicts, messages,
results and summaries."""

from __future__ import annotations

import csv
import json
import shlex
import subprocess
import sys

import pytest

from suite.core.case import save_case
from suite.cases.generate import generate, make_case
from suite.harness.repro import pytest_command
from tests.conftest import ROOT
from tests.conftest import rows_written as _rows
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"

SUMMARY_COLUMNS = ["op", "target", "cases", "passed", "failed", "unsupported", "errors", "bit_exact_pct",
                   "max_abs_lsb", "mean_err_lsb", "p50_latency_us"]


@pytest.fixture
def run(pytester):
    """``pytest *args`` in this process; returns (run, its run folder)."""
    return lambda *args, **kw: run_inprocess(pytester, *args, **kw)


def test_ref_run_writes_results_and_summary(run):
    proc, rd = run("--target=ref", "--ops", "ADD,MUL", "--cases-per-op", "4")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    n = len(generate(["ADD", "MUL"], 4))
    proc.result.assert_outcomes(passed=2)   # one item per (op, target) (ref: no test_group)
    # nothing failed: no table at the default verbosity, the verdict as the last qconform line, every case counted
    assert "qconform: per-op x target summary" not in proc.stdout
    assert [ln for ln in proc.stdout.splitlines() if ln.startswith("qconform:")][-1] == \
        f"qconform: no new failures; 0 known (findings), 0 waived; {n} results: {n} passed"
    rows = _rows(rd)
    assert len(rows) == n and all(r["status"] == "pass" and r["bit_exact"] for r in rows)
    with open(rd / "summary.csv") as f:
        table = list(csv.DictReader(f))
    assert list(table[0])[: len(SUMMARY_COLUMNS)] == SUMMARY_COLUMNS
    assert {(r["op"], r["target"], r["cases"], r["bit_exact_pct"]) for r in table} == {
        (op, "ref", str(sum(1 for r in rows if r["op"] == op)), "100.0") for op in ("ADD", "MUL")}
    assert (rd / "summary.md").read_text().startswith("# qconform summary")


def test_the_session_keeps_what_it_holds_out_of_the_cycle_collector(run):
    """After collection, and every GC_EVERY tests, the run's objects are frozen (a full collection
    would traverse them all to free almost nothing); run_inprocess checks that nothing stays
    frozen after the run."""
    import gc

    class Seen:
        frozen: list[int] = []

        def pytest_runtest_call(self, item):
            self.frozen.append(gc.get_freeze_count())

    seen = Seen()
    proc, _ = run("--target=ref", "--ops", "ADD", "--cases-per-op", "3", plugins=[seen])
    assert proc.returncode == 0, proc.stdout[-2000:]
    assert seen.frozen and min(seen.frozen) > 1000, seen.frozen


def test_header_names_targets_and_versions(run):
    proc, _ = run("-v", "--target=ref", "--ops", "ADD", "--cases-per-op", "1")
    assert "target ref: numpy" in proc.stdout


def test_unknown_target_is_one_usage_error(run):
    proc, _ = run("--target=nope", "--ops", "ADD")
    assert proc.returncode == 4
    assert "unknown target 'nope'" in proc.stderr and "Traceback" not in proc.stderr


def test_unknown_op_and_bad_numbers_are_usage_errors(run):
    proc, _ = run("--target=ref", "--ops", "CONV_9D")
    assert proc.returncode == 4 and "--ops" in proc.stderr
    proc, _ = run("--target=ref", "--cases-per-op", "0")
    assert proc.returncode == 4 and "--cases-per-op" in proc.stderr
    # "exact" gives unrounded reals: a run judged against them would fail every case
    proc, _ = run("--target=ref", "--ops", "ADD", "--scheme", "exact")
    assert proc.returncode == 4 and "--scheme" in proc.stderr and "not a kernel scheme" in proc.stderr


def test_k_selects_one_case_with_case_items(run):
    proc, rd = run("--target=ref", "--ops", "ADD", "--cases-per-op", "20", "-k", "ADD-sat_hi-001:ref", "--item=case")
    assert proc.returncode == 0
    proc.result.assert_outcomes(passed=1, deselected=proc.result.parseoutcomes()["deselected"])
    assert [r["case_id"] for r in _rows(rd)] == ["ADD-sat_hi-001"]


def test_k_on_a_case_id_says_how_to_select_cases(run):
    proc, _ = run("--target=ref", "--ops", "ADD", "--cases-per-op", "3", "-k", "ADD-sat_hi-001:ref")
    assert proc.returncode == 5   # (pytest's: no test selected)
    assert "-k selects ops and targets; select cases with --case-id ID, or --item=case" in proc.stdout


def test_k_selects_ops_and_targets(run):
    target = "tests.helper_targets:GoldenTarget"
    proc, rd = run(f"--target=ref,{target}", "--ops", "ADD,MUL", "--cases-per-op", "3", "-k", "MUL and not golden")
    assert proc.returncode == 0, proc.stdout
    assert {(r["op"], r["target"]) for r in _rows(rd)} == {("MUL", "ref")}
    assert len(_rows(rd)) == len(generate(["MUL"], 3))


#: what a row says about its case's mismatch (the rest: times, paths, the run id)
MISMATCH = ("case_id", "target", "status", "case_digest", "first_output", "first_index", "got", "want",
            "max_abs_lsb", "mismatches", "elements", "reason")


def test_failure_message_and_reproduction(run, tmp_path):
    proc, rd = run("--target=tests.spine_targets:OffByOne", "--ops", "ADD", "--cases-per-op", "12")
    assert proc.returncode == 1
    rows = _rows(rd)
    failed = [r for r in rows if r["status"] == "fail"]
    assert failed and all(r["index"] % 2 == 1 for r in failed)
    assert all(r["status"] == "pass" for r in rows if r["index"] % 2 == 0)
    proc.result.assert_outcomes(passed=2, failed=len(failed))   # test_cases, test_group; each failing case
    assert [ln for ln in proc.stdout.splitlines() if ln.startswith("qconform:")][-1].endswith(
        f"; {len(rows)} results: {len(rows) - len(failed)} passed, {len(failed)} failing")
    r = failed[0]
    assert r["first_index"] is not None and r["got"] - r["want"] in (-2, 2) and r["max_abs_lsb"] == 2
    # the message names the case id, first index, got vs want and the reproduction command
    assert f"{r['case_id']} on off-by-one" in proc.stdout   # the class's name; the repro selects it by module:Class
    assert (f"worst at output {r['worst_output']} index {r['worst_index']}: got {r['worst_got']}, "
            f"want {r['worst_want']} ({r['worst_err_lsb']:+d} LSB, cause: {r['worst_cause']})") in proc.stdout
    assert f"reproduce: {r['repro']}" in proc.stdout
    assert r["repro"] == f"qconform repro {r['failure_file']} --target=tests.spine_targets:OffByOne"
    saved = json.loads(open(r["failure_file"]).read())
    assert "got" in saved and "want" in saved and saved["got"] != saved["want"]
    # the printed command reproduces the failure on its own: the same mismatch
    p = subprocess.run([sys.executable, "-m", "suite", *shlex.split(r["repro"])[1:]], cwd=ROOT, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 1 and f"got {r['worst_got']}, want {r['worst_want']}" in p.stdout, p.stdout + p.stderr
    # so does the pytest command (the same row; its report folder is ours)
    repro = shlex.split(pytest_command(saved["judged"], r["failure_file"]))
    assert repro[0] == "pytest" and repro[-1].startswith("--report-dir=")
    again, rd2 = run(*repro[1:-1], report_dir=tmp_path / "repro")
    assert again.returncode == 1, again.stdout + again.stderr
    again.result.assert_outcomes(failed=1, passed=2)   # the case; its test_cases and test_group (no bias shown)
    [r2] = _rows(rd2)
    assert {k: r2.get(k) for k in MISMATCH} == {k: r.get(k) for k in MISMATCH}
    assert r2["case_file"] == r["failure_file"]
    assert f"got {r['got']}, want {r['want']}" in again.stdout


def test_unsupported_error_and_garbage_verdicts_are_distinct(run):
    refuses, raises, wrong = (f"tests.spine_targets:{c}" for c in ("Refuses", "Raises", "WrongShape"))
    proc, rd = run(f"--target={refuses},{raises},{wrong}", "--ops", "ADD,MUL", "--cases-per-op", "2", "-rs")
    assert proc.returncode == 1
    rows = _rows(rd)
    names = {refuses: "refuses", raises: "raises", wrong: "wrong-shape"}   # rows: each class's own name
    by = {t: [r for r in rows if r["target"] == name] for t, name in names.items()}
    assert {r["status"] for r in by[refuses] if r["op"] == "ADD"} == {"pass"}
    assert {r["status"] for r in by[refuses] if r["op"] == "MUL"} == {"unsupported"}
    assert all("MUL is not implemented" in r["reason"] for r in by[refuses] if r["op"] == "MUL")
    assert {r["status"] for r in by[raises]} == {"error"} and "kernel exploded" in proc.stdout
    assert {r["status"] for r in by[wrong]} == {"error"} and all("shape" in r["reason"] for r in by[wrong])
    n = {op: len(generate([op], 2)) for op in ("ADD", "MUL")}
    assert all(len(by[t]) == n["ADD"] + n["MUL"] for t in by)
    # pass, skip and error, distinct in pytest's outcome too: the unsupported cases one skip for the
    # reason they share (naming them), each error an error of its own; the passes in each (op, target)'s
    # test_cases (6) beside its test_group (6)
    proc.result.assert_outcomes(passed=12, skipped=1, errors=2 * (n["ADD"] + n["MUL"]))
    skip = next(ln for ln in proc.stdout.splitlines() if "MUL is not implemented" in ln and "SKIPPED" in ln)
    assert f"({n['MUL']} cases: MUL-" in skip
    assert [ln for ln in proc.stdout.splitlines() if ln.startswith("qconform:")][-1].endswith(
        f"; {len(rows)} results: {n['ADD']} passed, {n['MUL']} unsupported, {2 * (n['ADD'] + n['MUL'])} errors")


def test_case_file_folder_run_and_bad_file(run, tmp_path):
    d = tmp_path / "cases"
    save_case(make_case("ADD", "random", 1), d / "a.json")
    save_case(make_case("MUL", "broadcast", 0), d / "sub" / "b.json")
    proc, rd = run("--target=ref", f"--case-file={d}")
    assert proc.returncode == 0 and "2 passed" in proc.stdout, proc.stdout + proc.stderr
    assert sorted(r["case_id"] for r in _rows(rd)) == ["ADD-random-001", "MUL-broadcast-000"]
    (d / "c.json").write_text('{"format": "qconform-case/1", "op": "ADD"}')
    proc, _ = run("--target=ref", f"--case-file={d}")
    assert proc.returncode == 4
    assert "c.json: field 'inputs'" in proc.stderr and "Traceback" not in proc.stderr


def test_project_tests_do_not_touch_the_default_report(pytester):
    # `pytest tests/...` is not a conformance run: no report directory is prepared (the run starts
    # in pytester's folder, where a default report dir, reports/, would appear)
    proc, _ = run_inprocess(pytester, str(ROOT / "tests" / "test_case_file.py"), "--rootdir", str(ROOT),
                            report_dir=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "qconform: run" not in proc.stdout
    assert not (pytester.path / "reports").exists() and not (pytester.path / "report").exists()


def test_runxfail_shows_waived_failures_as_failures(run, tmp_path):
    from suite.cases.generate import case_id, plan_ids
    from tests.helper_targets import flipped
    target = "tests.helper_targets:WrongTarget"
    ids = [case_id(op, v, i) for op, v, i in plan_ids(["ADD"], 5)]
    bad = [c for c in ids if flipped(c)]                       # the cases WrongTarget gets wrong
    assert len(bad) >= 2
    waivers = tmp_path / "w.toml"
    waivers.write_text(f'format = "qconform-waivers/1"\ntarget = "wrong"\n[[waiver]]\ncase = "{bad[0]}"\n'
                       f'reason = "known"\nversions = {{ helper = "1.*" }}\nexpires = 2099-12-31\n')
    args = (f"--target={target}", "--ops", "ADD", "--cases-per-op", "5", f"--waivers={waivers}")
    proc, rd = run(*args)
    assert sorted(r["case_id"] for r in _rows(rd) if r["status"] in ("fail", "waived")) == sorted(bad)
    passed = 2   # the (op, target)'s test_cases and test_group (suite/harness/groups.py)
    proc.result.assert_outcomes(passed=passed, failed=len(bad) - 1, xfailed=1)
    # --runxfail: "report the results of xfail tests as if they were not marked"
    proc, _ = run(*args, "--runxfail")
    proc.result.assert_outcomes(passed=passed, failed=len(bad))
    assert proc.stdout.count("\nreproduce: ") >= len(bad), proc.stdout[-3000:]   # the waived one's too
