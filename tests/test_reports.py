"""Reports: mismatch causes, best_scheme, run.json, results.parquet, index.html, `qconform report`."""

from __future__ import annotations

import base64
import html
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

from reports.causes import analyse, best_scheme, cause_counts, error_histogram
from reports.results import read_rows
from suite.core.case import Case, Tensor
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _folder(rd: Path) -> Path:
    """A run's report folder: ``--report-dir`` itself, or its latest run where each run has a folder there."""
    latest = rd / "latest"
    return latest.resolve() if latest.is_dir() else rd


# ----------------------------------------------------------------------------- causes (unit)

def _case(n: int) -> Case:
    x = Tensor("int8", (n,), np.zeros(n, np.int8), [0.1], [0])
    out = Tensor("int8", (n,), None, [0.1], [0])
    return Case(op="ADD", inputs=[x, x], outputs=[out], id="ADD-unit-000")


def test_each_mismatch_gets_one_cause():
    case = _case(6)
    want = np.array([11, 20, 127, 5, 7, -3], np.int8)              # under the run's scheme
    got = np.array([10, 21, 126, 9, 7, -2], np.int64)
    exact = np.array([10.5, 20.3, 127.2, 5.1, 7.0, -2.5])          # unrounded, LSB + zp
    other = np.array([11, 21, 127, 5, 7, -3], np.int8)             # "alt" reproduces element 1
    goldens = {"exact": [exact], "alt": [other], "none": [want]}
    res = analyse(case, [got - want.astype(np.int64)], [want], lambda s: goldens[s], "run",
                  schemes=["run", "alt", "none"])
    # element 0: tie (10.5, got the other neighbour); 1: another scheme gives 21; 2: want at 127;
    # 3: 4 LSB off, nothing explains it; 5: tie at -2.5 (got -2, want -3)
    assert res["causes"] == {"tie": 2, "scheme": 1, "saturation": 1, "unexplained": 1}
    assert res["scheme_exact"] == {"run": 1, "alt": 2, "none": 1}
    assert res["cause_schemes"] == {"alt": 1}
    assert res["err_hist"] == {"-1": 2, "1": 2, "4": 1}


def test_a_far_value_on_a_tie_is_not_called_a_tie():
    case = _case(1)
    want, got = np.array([11], np.int8), np.array([14], np.int64)
    res = analyse(case, [got - 11], [want], lambda s: {"exact": [np.array([10.5])]}[s], "run", schemes=["run"])
    assert res["causes"] == {"unexplained": 1}


def _skips_clamp(bound_shift: int | None):
    """An ADD with a fused RELU_N1_TO_1, the golden's codes, and a kernel's: the golden's arithmetic
    without the activation (``bound_shift`` None: the clamp skipped) or clamped at bounds moved
    outward by ``bound_shift`` codes."""
    from reference import golden
    from reference.common import act_range
    x = Tensor("int8", (16,), np.arange(-120, 120, 15, dtype=np.int8), [0.05], [0])
    y = Tensor("int8", (16,), np.full(16, 3, np.int8), [0.05], [0])
    out = Tensor("int8", (16,), None, [0.05], [-10])
    case = Case(op="ADD", inputs=[x, y], outputs=[out], id="ADD-clamp-000",
                attrs={"fused_activation_function": "RELU_N1_TO_1"})
    free = Case(op="ADD", inputs=[x, y], outputs=[out], id="ADD-clamp-000", attrs={"fused_activation_function": "NONE"})
    want = golden(case, "tflite-ref-double")[0]
    got = golden(free, "tflite-ref-double")[0].astype(np.int64)
    if bound_shift is not None:
        lo, hi = act_range(case, out)
        got = np.clip(got, lo - bound_shift, hi + bound_shift)
    return case, want, got, (lambda s: golden(case, s))


@pytest.mark.parametrize("shift", [None, 1])
def test_a_kernel_that_skips_or_moves_the_clamp_is_labelled_clamp(shift):
    """#24: the golden's own ADD without its fused RELU_N1_TO_1 (or with bounds 1 code wider):
    every element it gets wrong is outside the activation's range, labelled clamp, not unexplained."""
    case, want, got, gold = _skips_clamp(shift)
    err = got - want.astype(np.int64)
    assert np.count_nonzero(err) >= 4   # the case does reach past both bounds
    res = analyse(case, [err], [want], gold, "tflite-ref-double")
    assert res["causes"] == {"clamp": int(np.count_nonzero(err))}
    assert res["worst_cause"] == "clamp"


def test_clamped_at_an_inner_bound_is_labelled_clamp():
    """A kernel whose upper bound is 2 codes too low: the golden clamped those elements (their exact
    value beyond the bound), the kernel returned another code: clamp, though got is in range."""
    case, want, got, gold = _skips_clamp(-2)
    err = got - want.astype(np.int64)
    res = analyse(case, [err], [want], gold, "tflite-ref-double")
    assert res["causes"] == {"clamp": int(np.count_nonzero(err))} and res["worst_cause"] == "clamp"


def test_exact_result_has_counts_but_no_causes():
    case = _case(3)
    want = np.array([1, 2, 3], np.int8)
    res = analyse(case, [np.zeros(3, np.int64)], [want], lambda s: [np.array([1, 2, 4], np.int8)], "run",
                  schemes=["run", "alt"])
    assert res == {"scheme_exact": {"run": 3, "alt": 2}}


def test_worst_cause_is_the_label_of_the_largest_error():
    """The element with the largest |error| (the first of equals) gets its label; "scheme" names the scheme."""
    case = _case(3)
    want = np.array([10, 20, 30], np.int8)
    goldens = {"exact": [np.array([10.0, 20.0, 30.0])], "alt": [np.array([10, 25, 31], np.int8)]}
    def worst(got):
        return analyse(case, [np.asarray(got, np.int64) - want], [want], lambda s: goldens[s], "run",
                       schemes=["run", "alt"])["worst_cause"]
    assert worst([11, 25, 30]) == "scheme alt"        # +5 (alt's value) beats an unexplained +1
    assert worst([15, 25, 30]) == "unexplained"       # +5 and +5: the first one
    assert worst([10, 20, 31]) == "scheme alt"


def test_failure_message_names_the_worst_element_and_its_cause():
    """A 1 LSB mismatch first, a 3 LSB one later: the message and the row name the 3 LSB one (its
    index, got, want, error and cause); the row keeps the first mismatch too."""
    from suite.cases.generate import make_case
    from suite.core.tolerance import load_policy
    from suite.core.waivers import load_waivers
    from suite.harness.judge import Goldens, Judge
    from targets.base import Outcome
    case = make_case("ADD", "random", 0)
    goldens = Goldens()
    want = goldens.get(case, "tflite-ref-double")[0]
    got = want.astype(np.int64).ravel()
    inner = [int(i) for i in np.flatnonzero((got > -100) & (got < 100))]   # away from the dtype's limits
    first, worst, tie = inner[0], inner[2], inner[3]
    got[first] += 1
    got[worst] += 3
    got[tie] -= 3                                          # as large: the first of equals is named
    judge = Judge(scheme="tflite-ref-double", policy=load_policy(None), waivers=load_waivers([]), goldens=goldens,
                  run_id="r", seed=0)
    v, _ = judge(case, "some-kernel", Outcome.ok([got.reshape(want.shape).astype(np.int8)], [1.0]), {})
    r = v.row
    index = [int(i) for i in np.unravel_index(worst, want.shape)]
    assert v.status.value == "fail" and r["first_index"] == [int(i) for i in np.unravel_index(first, want.shape)]
    assert (r["worst_output"], r["worst_index"], r["worst_err_lsb"]) == (0, index, 3)
    assert (r["worst_got"], r["worst_want"]) == (int(want.ravel()[worst]) + 3, int(want.ravel()[worst]))
    assert r["worst_cause"] == "unexplained"
    assert (f"3/{want.size} elements off (max |err| 3 LSB, allowed |err| <= 1 LSB); worst at output 0 index "
            f"{index}: got {r['worst_got']}, want {r['worst_want']} (+3 LSB, cause: unexplained)") in v.message


def test_histogram_pools_large_errors():
    h = error_histogram([np.array([0, 1, 1, -40, 99, 16, -17])])
    assert h == {"<-16": 2, "1": 2, "16": 1, ">16": 1}


def test_best_scheme_aggregates_and_prefers_the_run_scheme_on_ties():
    rows = [{"elements": 10, "scheme_exact": {"tflite-ref-double": 8, "tflite-ref-single": 10, "xnnpack-fp32": 10}},
            {"elements": 10, "scheme_exact": {"tflite-ref-double": 10, "tflite-ref-single": 10, "xnnpack-fp32": 9}},
            {"status": "unsupported"}]
    assert best_scheme(rows, "tflite-ref-double") == ("tflite-ref-single", 100.0)
    same = [{"elements": 4, "scheme_exact": {"tflite-ref-double": 4, "tflite-ref-single": 4}}]
    assert best_scheme(same, "tflite-ref-double") == ("tflite-ref-double", 100.0)
    assert cause_counts([{"causes": {"tie": 2}}, {"causes": {"tie": 1, "unexplained": 3}}]) == \
        {"tie": 3, "scheme": 0, "clamp": 0, "saturation": 0, "unexplained": 3}


def test_summary_has_best_scheme_and_cause_columns():
    from reports.summary import summarize
    rows = [{"op": "ADD", "target": "t", "status": "pass", "elements": 10, "mismatches": 2, "max_abs_lsb": 1.0,
             "sum_err_lsb": 0.0, "scheme": "tflite-ref-double", "causes": {"tie": 2},
             "scheme_exact": {"tflite-ref-double": 8, "xnnpack-fp32": 10}}]
    r = summarize(rows)[0]
    assert r["best_scheme"] == "xnnpack-fp32" and r["best_scheme_exact_pct"] == 100.0
    assert r["cause_tie"] == 2 and r["cause_unexplained"] == 0


def test_html_matrix_of_a_farm_run_counts_every_device():
    """Rows of several devices: the op x target cell shows the failure of one, not the last device's pass."""
    from reports.html import build_html
    base = {"run_id": "r", "case_id": "ADD-x-000", "op": "ADD", "target": "htp", "sum_err_lsb": 0, "p50_us": 1.0}
    rows = [dict(base, device="ssh:a", status="fail", elements=10, mismatches=5, max_abs_lsb=3.0),
            dict(base, device="ssh:b", status="pass", elements=10, mismatches=0, max_abs_lsb=0.0)]
    text = build_html(rows, {"run_id": "r", "finished": "x"}, None)
    cell = re.search(r'id="matrix">.*?</table>', text).group(0)
    assert 'class="cell new"' in cell and "1/2" in cell and "1 new" in cell, cell



def test_summary_pairs_count_rows_with_and_without_a_device_once_each():
    """An (op, target)'s pair row shares its no-device group's accumulator until a device's row comes:
    then both still count every row once (rows with no device first, or after)."""
    from reports.summary import Group, Summary
    base = {"run_id": "r", "op": "ADD", "target": "t", "sum_err_lsb": 1.0, "elements": 4, "p50_us": 1.0,
            "pos_err": 1, "neg_err": 0, "out_dtype": "int8", "scheme_exact": {"a": 3}}
    rows = [dict(base, case_id=f"c{i}", device=dev, status=st, mismatches=m, max_abs_lsb=float(m))
            for i, (dev, st, m) in enumerate([(None, "pass", 0), (None, "fail", 2), ("ssh:a", "fail", 3),
                                              (None, "pass", 0), ("ssh:b", "pass", 0)])]
    for order in (rows, rows[::-1], rows[2:] + rows[:2]):
        s = Summary()
        for r in order:
            s.add(r)
        want = Group()
        for r in order:
            want.add(r)
        got = s.pairs[("ADD", "t")]
        assert got is not s.groups[("ADD", "t", "")]
        assert got.row({}) == want.row({}), order
        alone = Group()
        for r in order:
            if not r["device"]:
                alone.add(r)
        assert s.groups[("ADD", "t", "")].row({}) == alone.row({})
    s = Summary()   # no device at all: one accumulator
    for r in rows:
        if not r["device"]:
            s.add(r)
    assert s.pairs[("ADD", "t")] is s.groups[("ADD", "t", "")] and s.pairs[("ADD", "t")].statuses == {"pass": 2, "fail": 1}


# ----------------------------------------------------------------------------- new failures apart from known ones

def _mixed_rows() -> list[dict]:
    """ADD on t: a pass, a new failure, a known one (finding), a waived crash, a new error and a
    known crash; MUL on t: one known failure only."""
    base = {"run_id": "r", "op": "ADD", "target": "t", "sum_err_lsb": 0, "elements": 4, "mismatches": 0,
            "max_abs_lsb": 0.0, "p50_us": 1.0}
    bad = dict(base, status="fail", mismatches=2, max_abs_lsb=3.0, worst_output=0, worst_index=[0, 3], worst_got=7,
               worst_want=4, worst_err_lsb=3, worst_cause="unexplained", causes={"unexplained": 2})
    return [dict(base, case_id="ADD-a-000", status="pass"),
            dict(bad, case_id="ADD-a-001", repro="pytest --target=t --case-file=/runs/x/failures/t/ADD-a-001.json "
                                                 "--report-dir=/tmp/qconform-repro", failure_file="/runs/x/ADD-a-001.json"),
            dict(bad, case_id="ADD-a-002", finding="f-one"),
            dict(base, case_id="ADD-a-003", status="waived", waived_status="crash", waiver="w.toml#0", elements=None),
            dict(base, case_id="ADD-a-004", status="error", reason="kernel exploded", elements=None),
            dict(base, case_id="ADD-a-005", status="crash", finding="f-two", elements=None),
            dict(bad, op="MUL", case_id="MUL-a-000", finding="f-one")]


def test_summary_counts_new_and_known_failures_in_columns_of_their_own():
    from reports.summary import COLUMNS, KNOWN_COLUMNS, summarize, to_csv, totals, verdict_line
    table = summarize(_mixed_rows())
    add, mul = table
    assert [add[c] for c in KNOWN_COLUMNS] == [1, 1, 1, 2]     # known: a finding or a waiver (as what it was)
    assert (add["failed"], add["errors"], add["waived"]) == (2, 2, 1)   # the existing columns, as they were
    assert [mul[c] for c in KNOWN_COLUMNS] == [0, 1, 0, 0]
    cols = list(add)
    assert cols[: len(COLUMNS)] == COLUMNS and cols[-4:] == KNOWN_COLUMNS
    assert to_csv(table).splitlines()[0].endswith(",failed_new,failed_known,errors_new,errors_known")
    t = totals(table)
    assert verdict_line(t) == "2 new failures (1 fail, 1 error) in 1 (op, target); 3 known (findings), 1 waived"
    assert verdict_line(totals([mul])) == "no new failures; 1 known (findings), 0 waived"
    from reports.summary import case_counts   # every (case, target)'s outcome, whatever pytest counts (items)
    assert case_counts(t) == f"{t['cases']} results: {t['passed']} passed" + "".join(
        f", {n} {w}" for n, w in ((t["unsupported"], "unsupported"), (t["failed_new"] + t["failed_known"], "failing"))
        if n) + (f", {t['errors_new'] + t['errors_known']} error" + ("s" if t["errors_new"] + t["errors_known"] > 1 else "")
                 if t["errors_new"] + t["errors_known"] else "")
    assert case_counts({**t, "cases": 1, "passed": 0, "unsupported": 0, "failed_new": 0, "failed_known": 0,
                        "errors_new": 1, "errors_known": 0}) == "1 result: 0 passed, 1 error"


def test_verdict_is_never_a_pass_it_cannot_vouch_for():
    from reports.summary import summarize, totals, verdict
    new, known = totals(summarize(_mixed_rows())), totals(summarize(_mixed_rows()[-1:]))
    done = {"finished": "x", "exit_status": 0}
    assert verdict(new, done)[0] == verdict(new, None)[0] == "FAIL"
    assert verdict(known, done) == ("PASS", "no new failures; 1 known (findings), 0 waived")
    assert verdict(known, None)[0] == verdict(known, {"finished": None})[0] == "INCOMPLETE"
    assert verdict(known, {**done, "interrupted": True})[0] == "INCOMPLETE"
    # pytest failed although no row is a new failure (--runxfail, a harness error in a test): not a PASS
    word, line = verdict(known, {**done, "exit_status": 1})
    assert word == "FAIL" and "exit status was 1" in line


def test_page_opens_with_the_verdict_then_the_new_failures():
    from reports.html import CELLS, build_html
    text = build_html(_mixed_rows(), {"run_id": "r", "finished": "x", "exit_status": 1})
    verdict = re.search(r'<div class="verdict (\w+)" id="verdict">(.*?)</div>', text)
    assert verdict.groups() == ("FAIL", "FAIL: 2 new failures (1 fail, 1 error) in 1 (op, target); 3 known "
                                        "(findings), 1 waived")
    order = [text.index(s) for s in ('id="verdict"', 'id="new-section"', 'id="matrix-section"',
                                     'id="summary-section"', 'id="known-section"')]
    assert order == sorted(order)
    new = re.search(r'id="new-failures".*?</table>', text, re.S).group(0)
    known = re.search(r'id="known-failures".*?</table>', text, re.S).group(0)
    assert "ADD-a-001" in new and "ADD-a-004" in new and "kernel exploded" in new
    assert not {"ADD-a-002", "ADD-a-003", "ADD-a-005", "MUL-a-000"} & set(re.findall(r"[A-Z]+-a-\d+", new))
    assert {"ADD-a-002", "ADD-a-003", "ADD-a-005", "MUL-a-000"} <= set(re.findall(r"[A-Z]+-a-\d+", known))
    # the worst element and its cause, and the command in one copyable block
    assert "out 0 [0, 3]: got 7, want 4 (+3 LSB, cause: unexplained)" in new
    assert ('<code>pytest --target=t --case-file=/runs/x/failures/t/ADD-a-001.json --report-dir=/tmp/qconform-repro'
            '</code><button type="button" class="copy"') in new
    # one matrix, a colour per state and its legend: ADD has new failures, MUL known ones only
    colour = {k: c for k, c, _ in CELLS}
    assert len(set(colour.values())) == len(CELLS)
    matrix = re.search(r'id="matrix">.*?</table>', text, re.S).group(0)
    cells = dict(re.findall(r'<tr><td>(\w+)</td><td class="cell (\w+)"', matrix))
    assert cells == {"ADD": "new", "MUL": "known"}
    assert f'background:{colour["known"]}' in matrix and f'background:{colour["new"]}' in matrix
    legend = re.search(r'<p class="legend">.*?</p>', text, re.S).group(0)
    assert all(f"background:{c}" in legend and html.escape(what) in legend for _, c, what in CELLS)
    assert "matrix-plot" not in text and text.count('id="matrix"') == 1


def test_a_page_without_new_failures_says_pass():
    from reports.html import build_html
    text = build_html(_mixed_rows()[-1:], {"run_id": "r", "finished": "x", "exit_status": 0})
    assert '<div class="verdict PASS" id="verdict">PASS: no new failures; 1 known (findings), 0 waived</div>' in text
    assert "No new failures; the 1 known ones are listed below." in text


def test_an_op_failing_as_a_whole_is_red_and_named_under_the_new_failures():
    """Every case passes but the (op, target) judged whole fails (reports.causes.judge_group: a bias)."""
    from reports.html import Page, render
    from reports.summary import summarize
    rows = _mixed_rows()[:1]
    page = Page()
    page.add(rows[0])
    [pair] = summarize(rows)
    pair["group_failure"] = "int8 outputs biased +: mean error +0.02 LSB"
    text = render(page, [pair], [pair], {"run_id": "r", "finished": "x", "exit_status": 1})
    assert '<div class="verdict FAIL"' in text and 'class="cell new"' in text and "as a whole" in text
    assert text.index("int8 outputs biased +") < text.index('id="matrix-section"')
    pair["group_known"], pair["group_failure"] = pair["group_failure"] + " [known finding f]", None
    text = render(page, [pair], [pair], {"run_id": "r", "finished": "x", "exit_status": 0})
    assert '<div class="verdict PASS"' in text and 'class="cell known"' in text


def test_summary_md_opens_with_the_verdict_and_the_new_failures():
    from reports.html import Page
    from reports.summary import markdown_file, summarize
    rows = _mixed_rows()
    page = Page()
    for r in rows:
        page.add(r)
    md = markdown_file(summarize(rows), {"finished": "x", "exit_status": 1}, page.new.first(), page.new.n)
    lines = md.splitlines()
    assert lines[0] == "# qconform summary"
    assert lines[2] == "**FAIL: 2 new failures (1 fail, 1 error) in 1 (op, target); 3 known (findings), 1 waived**"
    assert lines[4] == "Cases: 7 results: 1 passed, 3 failing, 3 errors."   # every case's outcome
    assert lines[6] == "## New since the baseline" and lines[8].startswith("No baseline given")   # (#22)
    assert lines[10] == "## New failures"
    cases = [ln.split(" | ")[0][2:] for ln in lines[14:16]]
    assert cases == ["ADD-a-001", "ADD-a-004"]
    assert "out 0 [0, 3]: got 7, want 4 (+3 LSB, cause: unexplained)" in lines[14]
    assert md.index("## (op, target)s with new failures") < md.index("## Every (op, target)")
    assert md.split("## Every (op, target)")[1].count("| ADD | t |") == 1   # the whole table is there


def test_terminal_leads_with_new_failures(pytester, tmp_path):
    """-q: the (op, target)s with new failures and the verdict as the last qconform line; default: also
    those with known ones; -v: every (op, target)."""
    from suite.cases.generate import case_id, plan_ids
    from tests.helper_targets import flipped
    bad = [c for c in (case_id(*p) for p in plan_ids(["ADD", "TANH"], 3)) if flipped(c)]
    assert bad == ["ADD-zp_min-000", "ADD-qnn_u8-000", "TANH-zp_min-000"]   # int8 and uint8 outputs: 3 LSB fail
    waived = "TANH-zp_min-000"
    waivers = tmp_path / "w.toml"
    waivers.write_text(f'format = "qconform-waivers/1"\ntarget = "*"\n[[waiver]]\ncase = "{waived}"\n'
                       f'reason = "known"\nversions = {{ helper = "1.*" }}\nexpires = 2099-12-31\n')
    args = ("--target=tests.helper_targets:WrongTarget", "--ops", "ADD,TANH", "--cases-per-op", "3",
            f"--waivers={waivers}")
    last = ("qconform: 2 new failures (2 fails, 0 errors) in 1 (op, target); 0 known (findings), 1 waived; "
            "12 results: 9 passed, 3 failing")
    out = {}
    for flag in ("-q", "", "-v"):
        proc, _ = run_inprocess(pytester, *filter(None, [flag]), *args)
        assert proc.returncode == 1
        out[flag] = proc.stdout
        assert [ln for ln in proc.stdout.splitlines() if ln.startswith("qconform:")][-1] == last
    def table(text):   # the (op) of each row of the summary table
        part = text.split(" qconform: ")[1].split("also written")[0]
        return [ln.split()[0] for ln in part.splitlines()[3:] if ln.strip() and not ln.startswith("every")]
    assert "qconform: (op, target)s with new failures =" in out["-q"] and " new  known " in out["-q"]
    assert table(out["-q"]) == ["ADD"]                         # TANH's one failure is waived
    assert "qconform: (op, target)s with failures, new first =" in out[""] and table(out[""]) == ["ADD", "TANH"]
    assert "qconform: per-op x target summary =" in out["-v"] and "bit_exact_pct" in out["-v"]
    assert "every (op, target): summary.md" in out["-q"] and "every (op, target)" not in out["-v"]


# ----------------------------------------------------------------------------- a real run

@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """One small run: the golden target and a wrong one (3 LSB off on every third case)."""
    import os
    import sys

    from tests.conftest import ROOT
    rd = tmp_path_factory.mktemp("report")
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--report-dir={rd}",
           "--target=ref,tests.helper_targets:WrongTarget", "--ops", "ADD,MUL", "--cases-per-op", "5"]
    proc = subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]   # WrongTarget fails some cases
    return _folder(rd)


def test_rows_carry_scheme_counts_and_causes(run_dir):
    rows = read_rows(run_dir)
    assert rows and all(isinstance(r.get("scheme_exact"), dict) for r in rows if r["status"] != "unsupported")
    bad = [r for r in rows if r["status"] == "fail"]
    assert bad, "WrongTarget must fail some cases"
    for r in bad:
        assert sum(r["causes"].values()) == r["mismatches"]
        assert r["err_hist"] and Path(r["failure_file"]).exists() and r["repro"].startswith("qconform repro ")
    summary = (run_dir / "summary.csv").read_text().splitlines()[0]
    assert "best_scheme" in summary and "best_scheme_exact_pct" in summary and "cause_unexplained" in summary


def test_run_json(run_dir):
    info = json.loads((run_dir / "run.json").read_text())
    assert info["format"] == "qconform-run/1" and info["finished"] and info["exit_status"] == 1
    assert re.fullmatch(r"[0-9a-f]{40}", info["git"]["commit"] or "")
    assert info["options"]["seed"] == 0 and info["options"]["cases_per_op"] == 5
    assert info["options"]["ops"] == ["ADD", "MUL"]
    assert info["targets"]["ref"]["versions"]["numpy"] == np.__version__
    [wrong] = [v for name, v in info["targets"].items() if name != "ref"]   # (named by its spec or its class)
    assert wrong["versions"] == {"helper": "1.0"}
    assert info["host"]["python"] and info["suite_version"]
    assert info["cost"]["rows"] == len(read_rows(run_dir))


def test_results_parquet(run_dir):
    import pandas as pd
    df = pd.read_parquet(run_dir / "results.parquet")
    rows = read_rows(run_dir)
    assert len(df) == len(rows)
    assert {"case_id", "target", "status", "max_abs_lsb", "scheme_exact.tflite-ref-double"} <= set(df.columns)


def test_a_parquet_writer_started_early_writes_when_told_and_nothing_when_dismissed(run_dir, tmp_path):
    """The run starts results.parquet's writer when its tests are planned (its imports then, not at
    the end): told, it writes the same table; dismissed (no report written), it ends writing nothing."""
    import pandas as pd

    from reports.build import dismiss, parquet_child, write_reports
    d = tmp_path / "run"
    shutil.copytree(run_dir, d)
    (d / "results.parquet").unlink()
    child = parquet_child(d, when_told=True)
    dismiss(child)
    assert child.returncode == 0 and not (d / "results.parquet").exists()
    child = parquet_child(d, when_told=True)
    report = write_reports(d, parquet_in_child=True, parquet_writer=child)
    assert child.returncode == 0 and not report.errors and d / "results.parquet" in report.written
    assert pd.read_parquet(d / "results.parquet").equals(pd.read_parquet(run_dir / "results.parquet"))


def _imgs(text: str) -> list[str]:
    return re.findall(r"<img\b[^>]*>", text)


def test_index_html_is_self_contained(run_dir):
    text = (run_dir / "index.html").read_text()
    assert 'id="matrix"' in text and 'id="latency-plot"' in text
    assert 'class="histogram"' in text and 'id="new-failures"' in text and 'id="causes"' in text
    assert "matrix-plot" not in text   # one op x target matrix: the table
    imgs = _imgs(text)
    assert len(imgs) >= 3   # histograms, latency, causes
    for tag in imgs:
        m = re.search(r'src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', tag)
        assert m, f"not an embedded SVG: {tag[:120]}"
        svg = base64.b64decode(m.group(1))
        assert b"<svg" in svg and b"viewBox" in svg               # a chart (reports/plots.py)
        assert not re.search(rb'href="(?!#|data:)', svg)           # the chart refers to nothing outside
    # nothing is fetched from anywhere: no external src/href, no stylesheet or script links
    assert not re.search(r'(src|href)="(https?:)?//', text)
    assert "<link" not in text and not re.search(r"<script[^>]+src=", text)
    # the new failures table lists every failure with its reproduction command
    fails = [r for r in read_rows(run_dir) if r["status"] == "fail"]
    new = re.search(r'id="new-failures".*?</table>', text, re.S).group(0)
    for r in fails:
        assert r["case_id"] in new and html.escape(r["repro"]) in new
    assert "qconform shrink" in new and "sortable" in text


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium on this machine (apt-get install -y chromium)")
def test_index_html_renders_offline_in_chromium(run_dir):
    with tempfile.TemporaryDirectory() as prof:
        proc = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--no-first-run", "--disable-sync", f"--user-data-dir={prof}",
             "--proxy-server=http://127.0.0.1:9", "--virtual-time-budget=5000", "--dump-dom",
             (run_dir / "index.html").as_uri()],
            check=False, capture_output=True, text=True, timeout=120)
    dom = proc.stdout
    assert 'data-loaded="1"' in dom, proc.stderr[-2000:]
    assert 'id="matrix"' in dom

    def width(tag_id=None, cls=None):
        for tag in _imgs(dom):
            if (tag_id and f'id="{tag_id}"' in tag) or (cls and f'class="{cls}"' in tag):
                m = re.search(r'data-w="(\d+)"', tag)
                return int(m.group(1)) if m else 0
        return None
    # each image decoded in the browser (naturalWidth > 0): a histogram, the latency chart
    assert width(cls="histogram") > 100
    assert width("latency-plot") > 100


def test_report_command_rebuilds_an_interrupted_run(run_dir, tmp_path, qconform_cli):
    d = tmp_path / "cut"
    d.mkdir()
    lines = (run_dir / "results.jsonl").read_text().splitlines(keepends=True)
    half = lines[: len(lines) // 2]
    (d / "results.jsonl").write_text("".join(half) + lines[len(half)][:40])   # torn last line
    p = qconform_cli("report", str(d))
    assert p.returncode == 0, p.stderr
    text = (d / "index.html").read_text()
    assert 'id="alert-interrupted"' in text and "No run.json" in text
    assert (d / "summary.csv").exists() and (d / "results.parquet").exists()
    assert text.count("<tr>") > 3
    # a run.json written at the start (finished null) says the run did not finish
    info = json.loads((run_dir / "run.json").read_text())
    info["finished"] = None
    (d / "run.json").write_text(json.dumps(info))
    assert qconform_cli("report", str(d)).returncode == 0
    assert "did not finish" in (d / "index.html").read_text()


def test_report_command_needs_results(tmp_path, qconform_main):
    p = qconform_main("report", str(tmp_path))
    assert p.returncode == 2 and "results.jsonl" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize("mode", ["case", "group"])
def test_junit_xml_carries_properties(tmp_path, pytester, mode):
    xml = tmp_path / "junit.xml"
    proc, rd = run_inprocess(pytester, "--target=ref", "--ops", "ADD", "--cases-per-op", "2", f"--junitxml={xml}",
                             f"--item={mode}")
    assert proc.returncode == 0, proc.stdout[-2000:]
    rd = _folder(rd)
    text = xml.read_text()
    n = len(read_rows(rd))
    if mode == "case":   # a testcase per case, its row's properties
        assert n >= 2 and text.count("<testcase") == n
        assert text.count('name="qconform.status" value="pass"') == n and 'name="qconform.max_abs_lsb"' in text
    else:   # one per (op, target), the cases it judged and passed (a case that does not pass: a testcase of its own)
        assert n >= 2 and text.count("<testcase") == 1
        assert f'name="qconform.cases" value="{n}"' in text and f'name="qconform.passed" value="{n}"' in text
    # the run's own properties, on the <testsuite> (suite/harness/junit.py), as run.json has them
    import xml.etree.ElementTree as ET
    info = json.loads((rd / "run.json").read_text())
    suite = ET.parse(xml).getroot().find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["qconform.run_id"] == info["run_id"] and props["qconform.seed"] == "0"
    assert props["qconform.cases_per_op"] == "2" and props["qconform.scheme"] == "tflite-ref-double"
    assert props["qconform.tolerance_sha256"] == info["options"]["tolerance_digest"]
    assert props["qconform.git_commit"] == info["git"]["commit"]
    assert props["qconform.target.ref.version.numpy"] == info["targets"]["ref"]["versions"]["numpy"]
    assert props["qconform.host.hostname"] == info["host"]["hostname"]


def test_junit_time_is_what_each_case_cost(pytester, tmp_path, monkeypatch):
    """A batch of 4 cases of 0.05 s each: every test's JUnit time is its share of the batch (at least
    0.05 s: a sleep is never shorter), not the whole batch on the first test and 0.000 on the others."""
    import xml.etree.ElementTree as ET
    monkeypatch.setenv("QCONFORM_SLOW_S", "0.05")
    xml = tmp_path / "junit.xml"
    proc, _ = run_inprocess(pytester, "--target=tests.slow_targets:Slow", "--ops", "ADD", "--cases-per-op", "4",
                            "-k", "not qnn", "--ahead=0", f"--junitxml={xml}", "--item=case")   # (a testcase per case)
    assert proc.returncode == 0, proc.stdout[-2000:]
    times = [float(c.get("time")) for c in ET.parse(xml).getroot().iter("testcase") if c.get("name").startswith("test_case[")]
    assert len(times) == 4 and min(times) >= 0.05, times


# ----------------------------------------------------------------------------- the end of a run = qconform report

def test_index_html_at_the_end_of_the_run_is_the_one_built_from_its_rows(run_dir):
    from reports.html import build_html
    info = json.loads((run_dir / "run.json").read_text())
    assert info["counts"] and info["cost"]["rows"] == len(read_rows(run_dir))   # the rows' part of run.json
    here = build_html(read_rows(run_dir), info, None)
    assert (run_dir / "index.html").read_text(encoding="utf-8") == here


def test_report_command_rebuilds_the_same_artefacts(run_dir, tmp_path, qconform_cli):
    """`qconform report` on a copy of a finished run: the same summary, page and table as the run's end."""
    import pandas as pd
    d = tmp_path / "again"
    d.mkdir()
    for name in ("results.jsonl", "run.json"):
        shutil.copy(run_dir / name, d / name)
    p = qconform_cli("report", str(d))
    assert p.returncode == 0, p.stderr
    for name in ("summary.csv", "summary.md", "index.html"):
        assert (d / name).read_bytes() == (run_dir / name).read_bytes(), name
    assert pd.read_parquet(d / "results.parquet").equals(pd.read_parquet(run_dir / "results.parquet"))
    assert "bit_exact_pct" in p.stdout and not list(d.glob("*.tmp"))


# ----------------------------------------------------------------------------- reasons (#24)

def test_known_failures_say_why_in_summary_md_index_html_and_the_terminal():
    """A case explained by a finding: its reason (not only its id) in summary.md, in index.html's
    known-failures table and in the terminal's known lines."""
    from reports.build import Report, terminal_lines
    from reports.html import Page, render
    from reports.summary import markdown_file, summarize
    from suite.core.findings import findings
    f = next(x for x in findings() if x.id == "qnn-htp-pad-value")
    row = {"op": "PAD", "target": "htp", "status": "fail", "case_id": "PAD-x-000", "finding": f.id,
           "reason": f"known finding {f.id}: {f.reason}; max |err| 255 LSB", "elements": 4, "mismatches": 1,
           "max_abs_lsb": 255.0, "sum_err_lsb": 255.0}
    summary = summarize([row])
    md = markdown_file(summary, {"finished": True, "exit_status": 0})
    assert f"**{f.id}** (PAD on htp): {f.reason}" in md
    lines = [line for line, _ in terminal_lines(Report(summary=summary))]
    assert any(line.startswith(f"known finding {f.id}: PAD on htp: QNN HTP") and "pads int8 wrongly" in line
               for line in lines), lines
    page = Page()
    page.add(row)
    text = render(page, summary, summary)
    known = text[text.index('id="known-failures"'):]
    assert html.escape(f.reason) in known[:known.index("</table>")]


def test_a_report_that_raises_ends_the_parquet_writer_it_told(run_dir, tmp_path, monkeypatch):
    """The writer told to convert is ended (killed, its pipes closed, waited for) when the report
    that told it raises: no process left converting after the run reported its error."""
    import reports.build as build
    d = tmp_path / "run"
    shutil.copytree(run_dir, d)
    child = build.parquet_child(d, when_told=True)

    def broken(*a, **k):
        raise RuntimeError("the summary broke")
    monkeypatch.setattr(build, "Summary", broken)
    with pytest.raises(RuntimeError, match="the summary broke"):
        build.write_reports(d, parquet_in_child=True, parquet_writer=child)
    assert child.returncode is not None and child.stdout.closed
