"""--item=group (suite/harness/items.py): one pytest item per (op, target), each case still judged,
recorded and reported on its own; the same rows, summaries and per-case reports as --item=case."""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET

import pytest

from tests.conftest import rows_written
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"

# a target that fails some cases (WrongTarget: 3 LSB off), the golden as a target, a known finding (tflite ADD)
TARGETS = "--target=ref,tests.helper_targets:WrongTarget"
VOLATILE = ("run_id", "time", "seconds", "target_s", "invoke_s", "pid", "failure_file", "repro")


def _rows(rd):
    return {(r["case_id"], r["target"]): {k: v for k, v in r.items() if k not in VOLATILE and "_us" not in k}
            for r in rows_written(rd)}


def _summary(rd):
    with open(rd / "summary.csv") as f:
        return [{k: v for k, v in r.items() if "_us" not in k and "latency" not in k} for r in csv.DictReader(f)]


def _testcases(xml):
    root = ET.parse(xml).getroot()
    return {(t.get("classname"), t.get("name")): sorted(c.tag for c in t if c.tag != "properties")
            for t in root.iter("testcase")}


def _bad_lines(out: str) -> list[str]:
    """The short summary's FAILED / ERROR lines, their node ids (the message: "Failed: " less)."""
    return sorted(ln.split(" - ")[0] for ln in out.splitlines() if ln.startswith(("FAILED ", "ERROR ")))


def test_group_items_give_the_verdicts_reports_and_junit_of_case_items(pytester, tmp_path):
    args = (TARGETS, "--ops=ADD,MEAN", "--cases-per-op=8", "-rfE")
    case, crd = run_inprocess(pytester, *args, "--item=case", f"--junitxml={tmp_path / 'case.xml'}",
                              report_dir=tmp_path / "case")
    group, grd = run_inprocess(pytester, *args, "--item=group", f"--junitxml={tmp_path / 'group.xml'}",
                               report_dir=tmp_path / "group")
    assert case.returncode == group.returncode == 1, group.stdout
    assert _rows(crd) == _rows(grd) and _summary(crd) == _summary(grd)
    # one item per (op, target) ...
    collected = [ln.split()[1] for ln in group.stdout.splitlines() if ln.startswith("collected ")]
    assert collected and int(collected[0]) <= 2 * 2 * 2, group.stdout   # (and a test_group where a bias rule applies)
    # ... and each failing case reported as itself: its line, its message, its JUnit testcase
    bad = _bad_lines(case.stdout)
    assert bad and _bad_lines(group.stdout) == bad
    assert all("::test_case[" in ln for ln in bad)
    failed = {k: v for k, v in _testcases(tmp_path / "case.xml").items() if v}
    assert failed and {k: v for k, v in _testcases(tmp_path / "group.xml").items() if v} == failed
    n_failed = case.result.parseoutcomes()["failed"]
    assert group.result.parseoutcomes()["failed"] == n_failed == len(failed)
    for msg in ("worst at output", "cause: ", "reproduce: ", "witnesses: "):
        assert group.stdout.count(msg) == case.stdout.count(msg) > 0, msg
    verdict = [[ln for ln in p.stdout.splitlines() if ln.startswith("qconform: ")][-1] for p in (case, group)]
    assert verdict[0] == verdict[1]


def test_lf_reruns_exactly_the_failing_cases(pytester, tmp_path):
    args = (TARGETS, "--ops=ADD", "--cases-per-op=8", "--item=group")
    first, rd1 = run_inprocess(pytester, *args, report_dir=tmp_path / "one", cacheprovider=True)
    failing = {(r["case_id"], r["target"]) for r in rows_written(rd1) if r["status"] != "pass"}
    assert first.returncode == 1 and failing
    again, rd2 = run_inprocess(pytester, *args, "--lf", report_dir=tmp_path / "two", cacheprovider=True)
    assert again.returncode == 1
    assert {(r["case_id"], r["target"]) for r in rows_written(rd2)} == failing
    assert again.result.parseoutcomes()["failed"] == len(failing)


@pytest.mark.parametrize("mode", ["case", "group"])
def test_case_id_selects_single_cases(pytester, tmp_path, mode):
    proc, rd = run_inprocess(pytester, "--target=ref", "--ops=ADD,MUL", "--cases-per-op=4", f"--item={mode}",
                             "--case-id=ADD-sat_hi-000,MUL-ties-001")
    assert proc.returncode == 0, proc.stdout
    assert sorted(r["case_id"] for r in rows_written(rd)) == ["ADD-sat_hi-000", "MUL-ties-001"]


def test_case_id_runs_no_group_of_an_op_it_did_not_select(pytester, tmp_path):
    """A target with a group rule (a declared scheme): --case-id of an ADD case leaves FULLY_CONNECTED's
    test_group out, which would otherwise run all of that op's cases to judge it whole (ADD's own
    test_group still judges ADD whole, running its other cases)."""
    proc, rd = run_inprocess(pytester, "--target=tests.tie_kernels:VendorFC", "--ops=ADD,FULLY_CONNECTED",
                             "--cases-per-op=3", "--case-id=ADD-sat_hi-000")
    assert proc.returncode == 0, proc.stdout
    rows = rows_written(rd)
    assert "ADD-sat_hi-000" in {r["case_id"] for r in rows} and {r["op"] for r in rows} == {"ADD"}


def test_a_group_item_resumes_with_the_cases_not_recorded(pytester, tmp_path):
    first, rd = run_inprocess(pytester, "--target=ref", "--ops=ADD", "--cases-per-op=6", "--item=group",
                              report_dir=tmp_path / "r")
    lines = (rd / "results.jsonl").read_text().splitlines(True)
    assert first.returncode == 0 and len(lines) > 5
    (rd / "results.jsonl").write_text("".join(lines[:5]))   # interrupted after 5 rows
    again, _ = run_inprocess(pytester, f"--resume={rd}", "--item=group")
    assert again.returncode == 0, again.stdout
    assert sorted(r["case_id"] for r in rows_written(rd)) == sorted(json.loads(ln)["case_id"] for ln in lines)
