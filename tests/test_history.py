"""`qconform history` and what a report says of earlier runs (issue #22): three runs of one
configuration in one report folder, good, bad, bad (a kernel that broke between the first and the
second): the bad cases are "failing since" the second run, and the third run's index.html (with the
second as its --baseline) shows them as still failing, not new."""

from __future__ import annotations

import json
import re

import pytest

import reports.latency  # noqa: F401  (scipy and numpy.fft loaded before pytester's in-process runs drop modules)
from reports.history import history
from reports.results import read_rows
from tests.helper_targets import flipped
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"

ARGS = ("--target=tests.helper_targets:WrongTarget", "--ops", "ADD,MUL", "--cases-per-op", "4")


def test_failing_since_the_second_run_still_failing_not_new(pytester, tmp_path, qconform_cli, monkeypatch):
    rd = tmp_path / "nightly"

    def run(every, *extra):   # (the helper target reads QCONFORM_FLIP_EVERY: 0 never damages a case)
        monkeypatch.setenv("QCONFORM_FLIP_EVERY", str(every))
        return run_inprocess(pytester, *ARGS, *extra, report_dir=rd)
    good, f1 = run(0)
    assert good.returncode == 0, good.stdout[-2000:]
    bad, f2 = run(2)
    assert bad.returncode == 1, bad.stdout[-2000:]
    bad2, f3 = run(2, f"--baseline={f2}")
    assert bad2.returncode == 1 and len({f1, f2, f3}) == 3
    broken = sorted(r["case_id"] for r in read_rows(f3) if r["status"] == "fail")
    assert broken and all(flipped(c, 2) for c in broken)
    assert broken == sorted(r["case_id"] for r in read_rows(f2) if r["status"] == "fail")
    ids = [json.loads((f / "run.json").read_text())["run_id"] for f in (f1, f2, f3)]

    p = qconform_cli("history", str(rd), "-o", str(tmp_path / "h"))   # (a process of its own: pyarrow)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert out.startswith("qconform history: 3 runs in 1 case set")
    for cid in broken:
        assert re.search(rf"^    {re.escape(cid)}:wrong  failing since {ids[1]} \(2 runs\): pass fail fail$", out, re.M), out
    assert "flaky in the last 3 runs (0;" in out
    doc = json.loads((tmp_path / "h" / "history.json").read_text())
    first = doc["series"][0]
    assert [r["run_id"] for r in first["runs"]] == ids and [r["new_failures"] for r in first["runs"]] == [0, len(broken), 0]
    assert (tmp_path / "h" / "history-1.svg").read_bytes().startswith(b"<?xml")
    assert (tmp_path / "h" / "history-1.csv").read_text().splitlines()[0] == "case_id,target,device," + ",".join(ids)

    page = (f3 / "index.html").read_text()
    since = page.split('id="since-section"')[1].split('id="new-section"')[0]
    assert "0 new failures" in since and f"{len(broken)} still failing" in since
    still = since.split('id="since-still"')[1]
    assert all(cid in still for cid in broken)
    assert 'id="since-new"' not in since or not any(cid in since.split('id="since-new"')[1].split('id="since-still"')[0]
                                                   for cid in broken)
    assert '<h2 id="new-section">Failures no known finding explains (new and still failing)</h2>' in page
    hist = page.split('id="history-section"')[1]
    assert all(f"<td>{cid}</td><td>wrong</td><td>{ids[1]}</td><td>2</td>" in hist for cid in broken)
    # the first run has no history before it; a run without --baseline says there is none
    assert 'id="history-section"' not in (f1 / "index.html").read_text()
    assert "No baseline given" in (f2 / "summary.md").read_text()


def test_flaky_and_case_sets_apart(tmp_path):
    """States written directly: a case that flips pass/fail/pass is flaky; a run of other cases is apart."""
    from tests.test_diff import _row, _write
    seq = ["pass", "fail", "pass", "fail"]
    for i, st in enumerate(seq):
        d = _write(tmp_path / "runs" / f"r{i}", [_row("ADD-x-000", st), _row("ADD-x-001", "fail" if i >= 2 else "pass")])
        doc = json.loads((d / "run.json").read_text())
        (d / "run.json").write_text(json.dumps({**doc, "started": f"2026-01-0{i + 1}T00:00:00"}))
    _write(tmp_path / "runs" / "z", [_row("MUL-x-000")])
    series, notes = history(tmp_path)
    assert [len(s.runs) for s in series] == [4, 1] and notes == []
    s = series[0]
    assert [x["case"] for x in s.flaky()] == ["ADD-x-000"] and s.flaky()[0]["flips"] == 3
    assert [(x["case"], x["since"], x["runs"]) for x in s.failing_since()] == [("ADD-x-001", "r2", 2), ("ADD-x-000", "r3", 1)]
    assert s.new_failures() == [0, 1, 1, 1]


@pytest.mark.parametrize("bound, value", [("MAX_ROWS", 1000), ("MAX_CHUNK_BYTES", 2000)])
def test_a_parquet_promising_too_much_is_not_decoded_results_jsonl_is_read(tmp_path, monkeypatch, bound, value):
    """Issue #33: an 822 KB results.parquet of 30M dictionary-encoded rows grew `history` past 3.7 GB:
    its metadata is judged before a value is decoded (here with smaller bounds: 3000 rows, one
    dictionary value each column), and the run's results.jsonl is read instead."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    import reports.history as h
    from tests.test_diff import _row, _write
    d = _write(tmp_path / "runs" / "r0", [_row("ADD-x-000", "pass")])
    idx = pa.array(np.zeros(3000, np.int32))
    forged = {c: pa.DictionaryArray.from_arrays(idx, pa.array([c * 200 if c != "status" else "fail"]))
              for c in ("case_id", "target", "device", "status", "finding", "case_digest")}
    pq.write_table(pa.table(forged), d / "results.parquet")   # (newer than results.jsonl: it would be trusted)
    assert h._parquet_rows(d) is not None                      # within the default bounds: read
    monkeypatch.setattr(h, bound, value)
    assert h._parquet_rows(d) is None
    point, _ = h.read_run(d)
    assert point.states == {("ADD-x-000", "t", None): "pass"}


def _night(tmp_path, i, version, case_states, bias=False, commit="c" * 40, exit_status=None):
    """Night ``i`` of a simulated week: runtime rt ``version``, ADD-x-00k's states, a bias group verdict."""
    from tests.test_diff import _row, _write
    d = _write(tmp_path / "runs" / f"n{i}", [_row(f"ADD-x-00{k}", st) for k, st in enumerate(case_states)])
    doc = json.loads((d / "run.json").read_text())
    bad = bias or "fail" in case_states
    doc.update(started=f"2026-01-{i + 1:02d}T02:00:00", git={"commit": commit, "dirty": False},
               exit_status=exit_status if exit_status is not None else int(bad), suite_version="0.1.0",
               targets={"t": {"versions": {"rt": version}}})
    (d / "run.json").write_text(json.dumps(doc))
    text = "int8 outputs biased +: mean error +0.321 LSB, sign test p 1e-20" if bias else ""
    (d / "summary.csv").write_text("op,target,cases,group_failure,group_known,bias_lsb,bias_p\n"
                                   f"ADD,t,{len(case_states)},\"{text}\",,{'0.321' if bias else ''},\n")
    return d


def test_a_week_of_builds_history_sees_group_verdicts_builds_and_flaky_within_a_build(tmp_path):
    """good 1.0 -> biased 1.1 -> broken 1.2 -> good 1.3 -> broken and biased 1.4 (three nights, one case
    flipping within it): the bias's and the breakage's first nights are named with their build
    changes; only the flips within build 1.4 are flaky."""
    P, F = "pass", "fail"
    nights = [("1.0", [P, P, P], False), ("1.1", [P, P, P], True), ("1.2", [F, F, P], False),
              ("1.3", [P, P, P], False), ("1.4", [F, F, P], True), ("1.4", [F, P, P], True), ("1.4", [F, F, P], True)]
    for i, (v, states, bias) in enumerate(nights):
        _night(tmp_path, i, v, states, bias)
    series, notes = history(tmp_path)
    assert len(series) == 1 and notes == []
    s = series[0]
    assert s.build_changes() == [None, "t rt 1.0 -> 1.1", "t rt 1.1 -> 1.2", "t rt 1.2 -> 1.3", "t rt 1.3 -> 1.4",
                                 None, None]
    g = s.groups_failing_since()
    assert [(x["kind"], x["since"], x["runs"], x["build_change"]) for x in g] == [("bias+ int8", "n4", 3, "t rt 1.3 -> 1.4")]
    assert g[0]["states"] == ["pass", "fail", "pass", "pass", "fail", "fail", "fail"]
    assert [(x["case"], x["since"], x["build_change"]) for x in s.failing_since()] == [
        ("ADD-x-000", "n4", "t rt 1.3 -> 1.4"), ("ADD-x-001", "n6", None)]
    fl = s.flaky()
    assert [(x["case"], x["flips"], x["build_changes"]) for x in fl] == [("ADD-x-001", 2, 3)]   # not ADD-x-000, nor the bias
    assert s.new_failures() == [0, 1, 2, 0, 3, 0, 1]
    from reports.history import to_text
    text = to_text(series, notes)
    assert "bias on ADD/t (+0.321 LSB, p 1e-20)  failing since n4 (3 runs), at build change t rt 1.3 -> 1.4" in text
    assert "build change: t rt 1.3 -> 1.4" in text and "build: cccccccccccc t rt=1.0" in text
    assert re.search(r"^\s+5 n4\s+cccccccccccc\s+1\s+3\s+33.33\s+2\s+1\s+3$", text, re.M), text


def test_history_of_a_year_of_nights(tmp_path):
    """365 run folders read (results.jsonl, run.json, summary.csv each) into one series."""
    import time
    for i in range(365):
        from tests.test_diff import _row, _write
        d = _write(tmp_path / "runs" / f"r{i:03d}", [_row(f"ADD-x-{k:03d}", "fail" if (i + k) % 97 == 0 else "pass")
                                                     for k in range(20)])
        doc = json.loads((d / "run.json").read_text())
        (d / "run.json").write_text(json.dumps({**doc, "started": f"2026-{1 + i // 31:02d}-{1 + i % 28:02d}T{i % 24:02d}"}))
    t = time.perf_counter()
    series, notes = history(tmp_path)
    took = time.perf_counter() - t
    assert len(series) == 1 and len(series[0].runs) == 365 and not notes
    print(f"history of 365 runs x 20 rows: {took:.2f} s")   # (measured, not asserted: no test asserts speed)


def test_an_incomplete_runs_groups_are_not_judged_never_passing(tmp_path):
    """summary.csv of a run that did not finish says `group_incomplete`: its groups are unknown ("-"),
    not passes that would cut a failing group's streak."""
    from reports.groups import read_group_verdicts
    (tmp_path / "summary.csv").write_text(
        "op,target,group_failure,group_known,group_incomplete\n"
        "ADD,ort,,,not judged as a whole: the run did not finish\n")
    assert read_group_verdicts(tmp_path) is None
    (tmp_path / "summary.csv").write_text("op,target,group_failure,group_known,group_incomplete\nADD,ort,,,\n")
    assert read_group_verdicts(tmp_path) == {}


def test_the_history_section_reads_an_earlier_runs_parquet_only_where_trusted(tmp_path, monkeypatch):
    """index.html's History section reads an earlier run from its results.parquet when that is at
    least as new as its results.jsonl, else from results.jsonl (a stale one, here saying "pass" of a
    case the rows say failed, is not believed): the same section as from results.jsonl alone."""
    import os

    import reports.history as h
    from reports.parquet import write_parquet
    from tests.test_diff import _row, _write
    runs = []
    for i, st in enumerate(["pass", "fail", "fail", "fail"]):
        d = _write(tmp_path / "runs" / f"r{i}", [_row("ADD-x-000", st), _row("ADD-x-001")])
        doc = json.loads((d / "run.json").read_text())
        (d / "run.json").write_text(json.dumps({**doc, "started": f"2026-01-0{i + 1}T00:00:00"}))
        runs.append(d)
    write_parquet(runs[1])
    stale = _write(tmp_path / "stale", [_row("ADD-x-000"), _row("ADD-x-001")])
    write_parquet(stale)
    os.replace(stale / "results.parquet", runs[2] / "results.parquet")
    t = (runs[2] / "results.jsonl").stat().st_mtime_ns - 10**9
    os.utime(runs[2] / "results.parquet", ns=(t, t))
    trusted, real = [], h._parquet_rows

    def spy(folder):
        rows = real(folder)
        if rows is not None:
            trusted.append(folder.name)
        return rows
    monkeypatch.setattr(h, "_parquet_rows", spy)
    section = h.html_section(runs[3])
    assert trusted == ["r1"]
    assert "<td>ADD-x-000</td><td>t</td><td>r1</td><td>3</td>" in section, section
    monkeypatch.setattr(h, "_parquet_rows", lambda folder: None)
    assert h.html_section(runs[3]) == section


def test_an_earlier_runs_parquet_is_never_decoded_into_more_than_it_holds(tmp_path):
    """A results.parquet of 65 KB whose string columns repeat one 4,000-character value on 20,000 rows
    (dictionary-encoded: 324 MB of Python strings once decoded row by row) is read with each
    distinct value made once; one of 10,000 characters is not trusted (results.jsonl is read)."""
    import tracemalloc

    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from reports.history import _Distrusted, _parquet_rows
    for size, trusted in ((4000, True), (10_000, False)):
        d = tmp_path / str(size)
        d.mkdir()
        (d / "results.jsonl").write_text("")
        value = "x" * size
        pq.write_table(pa.table({c: pa.array([value] * 20_000) for c in ("case_id", "target", "status", "case_digest")}),
                       d / "results.parquet", use_dictionary=True, compression="zstd")
        tracemalloc.start()
        try:
            rows = _parquet_rows(d)
            if trusted:
                assert sum(1 for _ in rows) == 20_000
            else:
                with pytest.raises(_Distrusted):
                    list(rows)
            assert tracemalloc.get_traced_memory()[1] < 20e6
        finally:
            tracemalloc.stop()
