"""reports.write_reports: streamed from results.jsonl (memory flat in the number of rows), the last
row of each (case, target, device) counted, results.parquet in row groups of one schema, every
artefact written atomically (one error line per artefact that cannot be written, no tmp file left)."""

from __future__ import annotations

import errno
import json
from reports.certify import read_certificate
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reports import Report, write_reports
from reports.results import ResultWriter, index_rows, iter_last_rows, iter_rows, read_rows
from suite.core.errors import QconformError
from reports.summary import summarize, to_csv, to_text
from tests.conftest import ROOT

ARTEFACTS = ("summary.csv", "summary.md", "results.parquet", "index.html")


def _row(i: int, op: str = "ADD", target: str = "t", status: str = "pass", **kw) -> dict:
    """A row as the harness writes it: a pass, or 3 LSB off on 2 of 50 elements."""
    bad = status in ("fail", "waived")
    r = {"run_id": "r1", "case_id": f"{op}-x-{i:05d}", "op": op, "variant": "x", "index": i, "spec": "litert-int8",
         "target": target, "device": None, "status": status, "reason": "3 LSB off" if bad else "",
         "case_digest": f"d{i}", "scheme": "tflite-ref-double", "out_dtype": "int8", "bit_exact": not bad,
         "elements": 50, "mismatches": 2 if bad else 0, "max_abs_lsb": 3.0 if bad else 0.0,
         "mean_err_lsb": 0.12 if bad else 0.0, "sum_err_lsb": 6.0 if bad else 0.0,
         "first_output": 0 if bad else None, "first_index": [0, i % 7] if bad else None,
         "got": 5 if bad else None, "want": 2 if bad else None, "p50_us": 10.0 + i % 13, "spread_us": 0.5,
         "scheme_exact": {"tflite-ref-double": 48 if bad else 50, "xnnpack-fp32": 50},
         "harness_s": 0.001, "analysis_s": 0.0005}
    if bad:
        r.update(causes={"unexplained": 2}, err_hist={"3": 2}, repro=f"pytest --case-file=f{i}.json")
    if status == "unsupported":
        r.update(elements=None, mismatches=None, max_abs_lsb=None, sum_err_lsb=None, bit_exact=None,
                 scheme_exact=None, reason="no kernel")
    r.update(kw)
    return r


def _write(d: Path, rows) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    w = ResultWriter(d, truncate=True)
    for r in rows:
        w.append(r)
    w.close()
    return d


def _rows(n: int) -> list[dict]:
    ops, targets = ("ADD", "MUL", "CONV_2D"), ("a", "b")
    out = []
    for i in range(n):
        status = "fail" if i % 11 == 3 else "unsupported" if i % 17 == 5 else "pass"
        out.append(_row(i // 6, ops[i % 3], targets[(i // 3) % 2], status))
    return out


# ----------------------------------------------------------------------------- each pair once, one run

def test_each_case_once_in_the_order_of_the_rows(tmp_path):
    rows = [_row(0), _row(1), _row(2, target="u"), _row(3)]
    d = _write(tmp_path / "run", rows)
    with open(d / "results.jsonl", "a") as f:
        f.write('{"run_id":"r1","case_id":"ADD-x-00004","op":"AD')            # a torn last line
    assert read_rows(d) == rows == list(iter_last_rows(d))
    assert list(index_rows(d)) == [(r["case_id"], r["target"], None) for r in rows]
    rep = write_reports(d)
    assert rep.counts == {"pass": 4} and not rep.errors


@pytest.mark.parametrize("extra, words", [
    (_row(0, status="pass"), "line 3 repeats the (case, target, device) ADD-x-00000:t of line 1"),
    ({**_row(5), "run_id": "other"}, "line 3 is a row of run 'other', not of 'r1'"),
])
def test_a_second_row_of_a_pair_or_a_row_of_another_run_is_refused(tmp_path, extra, words):
    """The probe of issue #33: a fail followed by its pass again (or a baseline's rows under another
    run id) once made the last row win: diff said NO REGRESSION."""
    d = _write(tmp_path / "run", [_row(0, status="fail"), _row(1), extra])
    for read in (read_rows, index_rows, lambda x: list(iter_last_rows(x)), lambda x: list(iter_rows(x))):
        with pytest.raises(QconformError) as e:
            read(d)
        assert words in str(e.value) and "results.jsonl" in str(e.value)


# ----------------------------------------------------------------------------- the artefacts

def test_write_reports_writes_every_artefact_and_run_json(tmp_path):
    from reports.runinfo import read_run_info, run_info
    d = _write(tmp_path / "run", _rows(300))
    doc = run_info(run_id="r1", options={"seed": 0}, targets={"a": {"versions": {"x": "1"}}}, unavailable={},
                   started="2026-01-01T00:00:00", command=["pytest"], finished="2026-01-01T00:00:10", exit_status=1)
    rep = write_reports(d, run_info=doc)
    assert isinstance(rep, Report) and not rep.errors and rep.certificate is None
    assert sorted(p.name for p in rep.written) == sorted(ARTEFACTS + ("run.json",))
    info = read_run_info(d)
    assert info["format"] == "qconform-run/1" and info["counts"] == rep.counts and info["cost"]["rows"] == 300
    assert info["cost"]["wall_s"] == 10.0 and info["suite_version"] and info["host"]["python"]
    assert sum(rep.counts.values()) == 300 and list(rep.counts) == ["pass", "fail", "unsupported"]
    # summary.csv is the summary, the terminal table shows it
    assert (d / "summary.csv").read_text() == to_csv(rep.summary)
    assert len(rep.summary) == 6 and "bit_exact_pct" in to_text(rep.summary).splitlines()[0]
    assert not list(d.glob("*.tmp"))


def test_certify_writes_the_certificate(tmp_path):
    from suite.core.tolerance import load_policy
    d = _write(tmp_path / "run", _rows(60))
    rep = write_reports(d, certify=True, policy=load_policy())
    assert not rep.errors and {"certificate.json"} <= {p.name for p in rep.written} and (d / "certificate.md").exists()
    cert = read_certificate(d)
    assert cert == json.loads(json.dumps(rep.certificate))
    verdicts = {(o["op"], o["target"]): o["verdict"] for o in cert["ops"]}
    assert verdicts[("ADD", "a")] == "non-conformant" and len(verdicts) == 6
    assert 'id="certificate"' in (d / "index.html").read_text()


def test_failing_cases_table_is_capped_with_a_line_saying_how_many_more(tmp_path, monkeypatch):
    import reports.html as h
    monkeypatch.setattr(h, "FAILING_CAP", 5)
    rows = [_row(i, status="fail", max_abs_lsb=float(i % 9)) for i in range(40)]
    rows[17]["causes"] = {"tie": 2}                                   # explained: sorts after the rest
    text = h.build_html(rows, {"run_id": "r1", "finished": "x"})
    table = text[text.index('id="new-failures"'):text.index("</table>", text.index('id="new-failures"'))]
    assert table.count("<tr>") == 1 + 5                                 # header + the capped rows
    assert "35 more new failures are not listed" in text
    # the 5 listed: unexplained first, then largest max |error|, then case id (the order of a full sort)
    want = sorted(rows, key=lambda r: (-int(r["causes"].get("unexplained", 0) > 0), -r["max_abs_lsb"],
                                       r["case_id"]))[:5]
    listed = [cid for cid in (r["case_id"] for r in rows) if cid in table]
    assert sorted(listed) == sorted(r["case_id"] for r in want)


def test_parquet_in_row_groups_has_one_schema_and_every_row(tmp_path, monkeypatch):
    import pandas as pd
    import pyarrow.parquet as pq

    import reports.parquet as P
    rows = _rows(250)
    rows[-1]["late_field"] = {"k": 1}                                   # a column only the last row has
    rows[3]["got"] = [1, 2]                                             # a list among ints: JSON text
    small, big = _write(tmp_path / "small", rows), _write(tmp_path / "big", rows)
    monkeypatch.setattr(P, "ROW_GROUP", 40)
    monkeypatch.setattr(P, "BATCH", 10)
    assert not write_reports(small).errors
    monkeypatch.setattr(P, "ROW_GROUP", 10_000)
    assert not write_reports(big).errors
    f = pq.ParquetFile(small / "results.parquet")
    assert f.metadata.num_row_groups == 7 and f.metadata.num_rows == 250
    a, b = pd.read_parquet(small / "results.parquet"), pd.read_parquet(big / "results.parquet")
    assert a.equals(b) and list(a.columns) == list(b.columns)
    assert a["late_field.k"].isna().sum() == 249 and a["got"].iloc[3] == "[1,2]" and a["got"].iloc[14] == "5"
    assert a["index"].dtype == "int64" and a["elements"].dtype == "float64"


def test_no_rows_writes_no_table(tmp_path):
    d = _write(tmp_path / "run", [])
    rep = write_reports(d)
    assert rep.summary == [] and rep.counts == {} and rep.written == [] and not rep.errors


# ----------------------------------------------------------------------------- atomic writes

def test_an_artefact_that_cannot_be_written_is_one_error_line_and_leaves_nothing(tmp_path, monkeypatch):
    """A full disk at the rename: each artefact reports its own error, naming its path; no tmp file is left
    and no artefact exists half written."""
    d = _write(tmp_path / "run", _rows(50))
    real = os.replace

    def full(src, dst):
        if Path(dst).name in ("summary.md", "results.parquet", "index.html"):
            raise OSError(errno.ENOSPC, "No space left on device", str(src))
        return real(src, dst)
    monkeypatch.setattr(os, "replace", full)
    rep = write_reports(d)
    assert [p.name for p in rep.written] == ["summary.csv"]
    assert len(rep.errors) == 3, rep.errors
    for name in ("summary.md", "results.parquet", "index.html"):
        line = next(e for e in rep.errors if e.startswith(f"{name}: "))
        assert line == f"{name}: OSError: [Errno {errno.ENOSPC}] No space left on device: '{d / name}'"
        assert not (d / name).exists()
    assert sorted(p.name for p in d.iterdir()) == ["results.jsonl", "summary.csv"]


def test_a_read_only_folder_gives_one_line_per_artefact(tmp_path, monkeypatch):
    import builtins
    d = _write(tmp_path / "run", _rows(20))
    real = builtins.open

    def read_only(file, mode="r", *a, **kw):   # (root ignores file modes: the error a read-only folder gives)
        if any(c in mode for c in "wax+") and Path(file).parent == d:
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real(file, mode, *a, **kw)
    monkeypatch.setattr(builtins, "open", read_only)
    rep = write_reports(d)
    assert rep.written == [] and len(rep.errors) == len(ARTEFACTS)
    for name, line in zip(ARTEFACTS, rep.errors):
        assert line == f"{name}: PermissionError: [Errno {errno.EACCES}] Permission denied: '{d / name}'"
    assert sorted(p.name for p in d.iterdir()) == ["results.jsonl"]


def test_a_broken_row_fails_only_what_is_made_of_it(tmp_path):
    rows = _rows(30)
    rows[7]["scheme_exact"] = {"xnnpack-fp32": "many"}                 # int("many"): the summary cannot count it
    d = _write(tmp_path / "run", rows)
    rep = write_reports(d)
    assert {e.split(":")[0] for e in rep.errors} == {"summary.csv", "summary.md", "index.html"}
    assert all("ValueError" in e for e in rep.errors)
    assert [p.name for p in rep.written] == ["results.parquet"] and rep.counts["pass"]


# ----------------------------------------------------------------------------- memory

def _many_rows(src: Path, dst: Path, n: int) -> None:
    """``n`` rows: the rows of ``src`` again and again, each repeat with new case ids."""
    lines = [line for line in src.read_text().splitlines() if line.strip()]
    with open(dst, "w") as f:
        k = rep = 0
        while k < n:
            for line in lines[: n - k]:
                r = json.loads(line)
                r["case_id"] = f"{r['case_id']}~{rep}"
                f.write(json.dumps(r, separators=(",", ":")) + "\n")
            k += min(len(lines), n - k)
            rep += 1


def test_44000_rows_stay_far_below_300_mb(tmp_path):
    """The report holds no row list: a 44,000-row run (~1 KB rows with per-scheme counts and error
    histograms) in a process whose peak RSS stays under 300 MB (the numpy, pyarrow and pandas imports
    take about 110 MB of it; the reports before this design took about 600 MB)."""
    seed = tmp_path / "seed"
    rows = []
    for i in range(600):
        status = "fail" if i % 9 == 4 else "unsupported" if i % 23 == 1 else "pass"
        r = _row(i, ("ADD", "CONV_2D", "SOFTMAX", "MAX_POOL_2D")[i % 4], ("tflite", "ort", "htp")[i % 3], status)
        if r["scheme_exact"]:
            r["scheme_exact"].update({s: 50 for s in ("tflite-ref-single", "ort-fp32-rne", "onnx-ref", "caffe-d1")})
        r["clause"] = f"litert-int8/{r['op']}/output0/range"
        r["time"] = "2026-11-25T23:26:16"
        rows.append(r)
    _write(seed, rows)
    d = tmp_path / "big"
    d.mkdir()
    _many_rows(seed / "results.jsonl", d / "results.jsonl", 44_000)
    # the child's own peak: VmHWM of its own memory (ru_maxrss, even RUSAGE_SELF in the child, keeps the
    # peak of the process it was forked from, this big test process, across exec; RUSAGE_CHILDREN here
    # would count other tests' children)
    code = ("import os, sys, resource; sys.path.insert(0, sys.argv[1]); from reports import write_reports; "
            "r = write_reports(sys.argv[2]); assert not r.errors, r.errors; "
            "assert sum(r.counts.values()) == 44000, r.counts; "
            "st = '/proc/self/status'; "
            "hwm = [l.split()[1] for l in open(st) if l.startswith('VmHWM:')] if os.path.exists(st) else []; "
            "print(hwm[0] if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    p = subprocess.run([sys.executable, "-c", code, str(ROOT), str(d)], check=False, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    peak_mb = int(p.stdout) / 1024   # kB
    print(f"\nwrite_reports on 44,000 rows: peak RSS {peak_mb:.0f} MB")
    assert peak_mb < 300
    assert (d / "index.html").exists() and len((d / "summary.csv").read_text().splitlines()) == 1 + 12
