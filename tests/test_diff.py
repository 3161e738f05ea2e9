"""`qconform diff`: regressions between two runs, exit status for a nightly gate."""

from __future__ import annotations

import json

import pytest

from reports.diff import diff_runs
from reports.results import ResultWriter, read_rows
from tests.helper_targets import flipped

FLIP = "--target=tests.helper_targets:FlipOneLsb"
ARGS = ("--ops", "ADD,MUL", "--cases-per-op", "5")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A baseline, an identical re-run, a run one LSB off on some cases, and a slower run."""
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT
    base = tmp_path_factory.mktemp("diff")

    def run(name, **env):
        rd = base / name
        e = dict(os.environ)
        e.update(env)
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--report-dir", str(rd), FLIP, *ARGS]
        p = subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True, timeout=600, env=e)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]   # 1 LSB is within the default tolerance
        latest = rd / "latest"   # where each run has a folder of its own in --report-dir
        return latest.resolve() if latest.is_dir() else rd
    return {"base": run("base", QCONFORM_FLIP_EVERY="0"), "same": run("same", QCONFORM_FLIP_EVERY="0"),
            "worse": run("worse", QCONFORM_FLIP_EVERY="3"),
            "slower": run("slower", QCONFORM_FLIP_EVERY="0", QCONFORM_LATENCY_SCALE="2")}


def test_identical_runs_exit_0(runs, qconform_cli, tmp_path):
    p = qconform_cli("diff", str(runs["base"]), str(runs["same"]), "-o", str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "no regression" in p.stdout
    d = json.loads((tmp_path / "diff.json").read_text())
    assert d["regressed"] is False and d["compared"] == len(read_rows(runs["base"]))


def test_one_lsb_worse_exits_1_and_names_exactly_those_cases(runs, qconform_cli, tmp_path):
    md = tmp_path / "diff.md"
    p = qconform_cli("diff", str(runs["base"]), str(runs["worse"]), "-o", str(tmp_path), "--markdown", str(md))
    assert p.returncode == 1, p.stdout + p.stderr
    rows = read_rows(runs["worse"])
    expected = {r["case_id"] for r in rows if r["status"] != "unsupported" and flipped(r["case_id"], 3)}
    assert expected, "the flip target must damage some of these cases"
    d = json.loads((tmp_path / "diff.json").read_text())
    assert {c["case"] for c in d["case_regressions"]} == expected
    for c in d["case_regressions"]:
        assert any(w.startswith("more mismatches") for w in c["what"])
        assert any(w.startswith("max err grew (0 -> 1") for w in c["what"])
    assert {g["op"] for g in d["group_regressions"]} == {c["op"] for c in d["case_regressions"]}
    for cid in expected:
        assert cid in p.stdout and cid in md.read_text()
    assert "regressed" in md.read_text() and (tmp_path / "diff.csv").exists()


def test_latency_regression_beyond_threshold_and_spread(runs, qconform_cli, tmp_path):
    p = qconform_cli("diff", str(runs["base"]), str(runs["slower"]), "-o", str(tmp_path))
    assert p.returncode == 1, p.stdout
    d = json.loads((tmp_path / "diff.json").read_text())
    assert d["case_regressions"] == []
    assert d["group_regressions"] and all(w.startswith("latency +100.0%") for g in d["group_regressions"]
                                          for w in g["what"])
    # a threshold above the slow-down accepts it
    p = qconform_cli("diff", str(runs["base"]), str(runs["slower"]), "-o", str(tmp_path),
                     "--latency-threshold", "150")
    assert p.returncode == 0, p.stdout


def _write(d, rows):
    d.mkdir(parents=True, exist_ok=True)
    w = ResultWriter(d, truncate=True)
    for r in rows:
        w.append(r)
    w.close()
    return d


def _row(cid, status="pass", mism=0, maxe=0.0, digest="d", **kw):
    r = {"case_id": cid, "op": cid.split("-")[0], "target": "t", "status": status, "case_digest": digest,
         "elements": 10, "mismatches": mism, "max_abs_lsb": maxe, "p50_us": 10.0, "spread_us": 1.0}
    r.update(kw)
    return r


def test_diff_kinds(tmp_path):
    base = _write(tmp_path / "a", [_row("ADD-x-000"), _row("ADD-x-001"), _row("ADD-x-002"), _row("ADD-x-003"),
                                   _row("ADD-x-004", "fail", 5, 3.0), _row("ADD-x-005", digest="old")])
    run = _write(tmp_path / "b", [_row("ADD-x-000"), _row("ADD-x-001", "fail", 2, 2.0),
                                  _row("ADD-x-002", "unsupported", None, None, reason="no kernel"),
                                  _row("ADD-x-004"), _row("ADD-x-005", digest="new"), _row("ADD-x-006")])
    d = diff_runs(base, run)
    kinds = {c["case"]: c["what"] for c in d.cases}
    assert set(kinds) == {"ADD-x-001", "ADD-x-002"}
    assert kinds["ADD-x-001"][0].startswith("now failing (pass -> fail)")
    assert kinds["ADD-x-002"][0].startswith("now unsupported")
    assert d.missing == ["ADD-x-003:t"] and d.changed == ["ADD-x-005:t"] and d.new == 1
    assert [c["case"] for c in d.improved] == ["ADD-x-004"]
    assert d.regressed
    assert diff_runs(base, run, allow_missing=True).regressed   # the failing case still gates


def test_diff_bad_input(tmp_path, qconform_cli):
    p = qconform_cli("diff", str(tmp_path / "nope"), str(tmp_path))
    assert p.returncode == 2 and "results.jsonl" in p.stderr and "Traceback" not in p.stderr
