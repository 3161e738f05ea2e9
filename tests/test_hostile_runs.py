"""Issue #21: one kernel's fault costs only its own verdict; corrupt rows are refused where
they are read; a disk that fails is one error; no markdown or control character from a
kernel, a waiver or a row reaches a report as markup. Each probe of the issue, kept."""

from __future__ import annotations

import errno
import json
import math
import re
import shutil

import pytest

from reports import write_reports
from reports.certify import to_markdown as certificate_markdown
from reports.results import RESULTS, ResultWriter, parse_row, read_rows
from reports.summary import markdown_file
from suite import cli
from suite.cases.generate import generate
from suite.core.errors import QconformError
from suite.core.text import clean, md_cell, md_code
from suite.harness import isolation
from suite.harness import resume as resume_mod
from suite.harness.folder import RunFolder, new_run_id
from suite.harness.options import checked
from suite.harness.run import Run
from targets.base import Timing
from tests.fault_targets import BatchedFaulty, Faulty

HOSTILE = b"kernel said \xff\xfe \x1b[31mred\x00 | **bold** [link](http://evil) <img src=x onerror=alert(1)> `c`" \
    .decode("utf-8", "surrogateescape")


def _verdicts(target, cases, tmp_path, **options):
    folder = RunFolder.create(tmp_path / "rep", new_run_id())
    run = Run(checked(targets=[target.name], **options), folder, {target.name: target}, folder.path.name)
    try:
        run.plan([(c, target.name) for c in cases])
        return {c.id: run.verdict(c, target.name) for c in cases}, folder.path
    finally:
        run.close()


# ----------------------------------------------------------------------------- one kernel's fault

def test_garbage_in_the_workers_pipe_is_that_cases_error_only(tmp_path, monkeypatch):
    """A kernel writing into the worker's reply pipe used to make every case of its batch an
    error, the latency cases already run in it included: now the batch is rerun one case at a time."""
    cases = generate(["ADD"], 8, 0)[:8]
    bad = cases[5].id
    monkeypatch.setenv("QCONFORM_FAULTS", json.dumps({bad: "pipe"}))
    verdicts, _ = _verdicts(BatchedFaulty(), cases, tmp_path, latency_cases=3, batch_size=64, timeout=30.0)
    assert {i: v.status.value for i, v in verdicts.items()} == {c.id: "error" if c.id == bad else "pass" for c in cases}
    assert "unreadable reply" in verdicts[bad].reason


def test_a_constructor_that_hangs_in_the_worker_is_waited_for_once(monkeypatch):
    """Every batch of the target gets `timeout while starting`, from one wait: no new worker is
    started (and waited for) per batch, so the run goes on."""
    monkeypatch.setattr(isolation, "START_TIMEOUT", 1.0)
    monkeypatch.setenv("QCONFORM_FAULTS", "{}")
    target = Faulty()
    monkeypatch.setenv("QCONFORM_FAULT_INIT", "hang_in_worker")
    ex = isolation.executor_for(target, "process", timeout=5.0)
    try:
        cases = generate(["ADD"], 3, 0)[:3]
        for c in cases:
            ex.submit([c], 1, Timing(warmup=0, repeats=1))
        outs = [o for _ in cases for o in ex.next()[1]]
        assert "timeout while starting" in ex.versions()["error"]
    finally:
        ex.close()
    assert [o.status for o in outs] == ["timeout"] * 3
    assert all(o.reason.startswith("timeout while starting") for o in outs)
    assert ex.stats["workers_started"] == 0   # the hung one only


def test_undecodable_and_control_characters_never_cost_a_report(tmp_path):
    """A kernel's error text with bytes that are not UTF-8 used to lose summary.md, index.html
    and results.parquet: every artefact is written, with the characters escaped."""
    w = ResultWriter(tmp_path)
    w.append({"case_id": "ADD-x-000", "op": "ADD", "target": "t", "status": "error", "reason": HOSTILE})
    w.append({"case_id": "ADD-x-001", "op": "ADD", "target": "t", "status": "pass", "max_abs_lsb": 0.0,
              "bit_exact": True, "elements": 4, "mismatches": 0})
    w.close()
    assert b"\\u001b" not in (tmp_path / RESULTS).read_bytes()   # cleaned when written
    report = write_reports(tmp_path)
    assert not report.errors
    assert {p.name for p in report.written} >= {"summary.md", "index.html", "results.parquet", "summary.csv"}
    for name in ("summary.md", "index.html", "summary.csv"):
        text = (tmp_path / name).read_text("utf-8")
        assert not any(ord(ch) < 32 and ch not in "\n\t" for ch in text), name
        assert name == "summary.csv" or "\\x1b[31m" in text or "\\x1b\\[31m" in text   # shown, escaped
    assert "[link](http://evil)" not in (tmp_path / "summary.md").read_text()


# ----------------------------------------------------------------------------- corrupt rows

def _run_folder(tmp_path):
    d = tmp_path / "run"
    w = ResultWriter(d)
    for i in range(3):
        w.append({"run_id": "r", "case_id": f"ADD-x-00{i}", "op": "ADD", "target": "ref", "status": "pass",
                  "max_abs_lsb": 0.0, "bit_exact": True, "elements": 4, "mismatches": 0})
    w.close()
    (d / "run.json").write_text(json.dumps({"format": "qconform-run/1", "run_id": "r", "options": {"seed": 0},
                                            "finished": "2026-01-01T00:00:00", "exit_status": 0}))
    return d


CORRUPT = {
    "unknown status": lambda r: {**r, "status": "pwned"},
    "no status": lambda r: {k: v for k, v in r.items() if k != "status"},
    "NaN": lambda r: {**r, "status": "fail", "max_abs_lsb": math.nan},
    "text for a number": lambda r: {**r, "mismatches": "many"},
}


@pytest.mark.parametrize("kind", [*CORRUPT, "garbage line", "1e999"])
def test_diff_and_report_refuse_a_corrupt_run_naming_the_line(tmp_path, capsys, kind):
    base = _run_folder(tmp_path)
    bad = tmp_path / "bad"
    shutil.copytree(base, bad)
    lines = (bad / RESULTS).read_text().splitlines()
    if kind == "garbage line":
        lines[1] = "}{ not a row"
    elif kind == "1e999":
        lines[1] = lines[1].replace('"max_abs_lsb":0.0', '"max_abs_lsb":1e999')
    else:
        lines[1] = json.dumps(CORRUPT[kind](json.loads(lines[1])), allow_nan=True)
    (bad / RESULTS).write_text("\n".join(lines) + "\n")
    for argv in (["report", str(bad)], ["diff", str(base), str(bad), "-o", str(tmp_path / "d")]):
        capsys.readouterr()
        assert cli.main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"{bad / RESULTS}: line 2 is not a result row" in err[0], err
    capsys.readouterr()   # the sound run's rows are read (whatever else diff says of this minimal run.json)
    cli.main(["diff", str(base), str(base), "-o", str(tmp_path / "d")])
    assert "not a result row" not in capsys.readouterr().err


def test_a_torn_last_line_is_still_skipped_and_cut_by_resume(tmp_path):
    d = _run_folder(tmp_path)
    whole = (d / RESULTS).read_bytes()
    (d / RESULTS).write_bytes(whole + b'{"run_id":"r","case_id":"ADD-x-0')   # kill -9 mid-write
    assert len(read_rows(d)) == 3
    assert resume_mod.repair_tail(d) == len(whole) and (d / RESULTS).read_bytes() == whole


def test_parse_row_takes_rows_as_written():
    assert parse_row(b'{"case_id":"a","target":"t","status":"pass","max_abs_lsb":1.5}\n')["max_abs_lsb"] == 1.5
    assert parse_row(b"  \n") is None
    with pytest.raises(ValueError, match="finite"):
        parse_row(b'{"case_id":"a","target":"t","status":"fail","mean_err_lsb":-Infinity}')


def test_a_nan_latency_threshold_is_refused(tmp_path, capsys):
    d = _run_folder(tmp_path)
    assert cli.main(["diff", str(d), str(d), "--latency-threshold", "nan", "-o", str(tmp_path / "d")]) == 2
    assert "--latency-threshold" in capsys.readouterr().err


# ----------------------------------------------------------------------------- disks

def test_resume_into_a_folder_that_cannot_be_written_is_one_error(tmp_path, monkeypatch):
    d = _run_folder(tmp_path)
    (d / RESULTS).write_bytes((d / RESULTS).read_bytes() + b'{"torn')

    def read_only(*a, **k):
        raise OSError(errno.EROFS, "Read-only file system")
    monkeypatch.setattr(resume_mod, "_cut_torn_line", read_only)
    with pytest.raises(QconformError, match="cannot write: Read-only file system") as e:
        resume_mod.repair_tail(d)
    assert str(d / RESULTS) in str(e.value)


# ----------------------------------------------------------------------------- markdown

def test_text_helpers():
    assert clean("a\udcff\x1b[1m\x00\x9b\tb\nc") == "a\\udcff\\x1b[1m\\x00\\x9b\tb\nc"
    assert md_cell("a | *b* [l](u) <i> `c` [0, 3] \\") == "a \\| \\*b\\* [l\\](u) \\<i> \\`c\\` [0, 3] \\\\"
    assert md_code("pytest `x` | y") == "`pytest 'x' \\| y`"


def test_waiver_reason_and_file_name_are_escaped_in_summary_and_certificate():
    waived = {"case_id": "ADD-x-000", "waiver": "w[1](http://evil).toml#0", "reason": HOSTILE, "repro": None}
    cert = {"run_id": "r", "date": "d", "suite_version": "0", "git": {}, "targets": {"t": {}},
            "tolerance_policy": {"source": "s", "version": 1},
            "case_set": {"digest": "x", "cases": 1, "seed": 0, "cases_per_op": 1},
            "waiver_problems": ["EXPIRED waiver w[1](http://evil).toml#0: <script>"], "ops": [
                {"target": "t", "spec": "s", "op": "ADD", "verdict": "v", "counts": dict.fromkeys(
                    ("cases", "passed", "bit_exact", "failed", "errors", "unsupported", "waived"), 0),
                 "tolerance": [], "bit_exact_pct": None, "max_abs_lsb": None, "case_digest": "x",
                 "failing": [{"case_id": "ADD-x-001", "status": "fail", "reason": HOSTILE, "repro": "pytest `rm -rf`"}],
                 "waived": [waived]}]}
    new = [{"case_id": "ADD-x-001", "target": "t", "status": "fail", "reason": clean(HOSTILE),
            "repro": "pytest --x | `y`"}]
    for text in (certificate_markdown(cert), markdown_file([], {"finished": "x", "exit_status": 1}, new, 1)):
        assert not re.search(r"(?<!\\)\]\(http|(?<!\\)<(img|script)", text), text
        assert "\x1b" not in text and "\x00" not in text and "`rm -rf`" not in text
