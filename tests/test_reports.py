"""Reports: mismatch causes, best_scheme, run.json, results.parquet, index.html, `qconform report`."""

from __future__ import annotations

import base64
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


def test_exact_result_has_counts_but_no_causes():
    case = _case(3)
    want = np.array([1, 2, 3], np.int8)
    res = analyse(case, [np.zeros(3, np.int64)], [want], lambda s: [np.array([1, 2, 4], np.int8)], "run",
                  schemes=["run", "alt"])
    assert res == {"scheme_exact": {"run": 3, "alt": 2}}


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
        {"tie": 3, "scheme": 0, "saturation": 0, "unexplained": 3}


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
    assert 'class="cell failing"' in cell and "1/2" in cell and "1 failed" in cell, cell


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
        assert r["err_hist"] and Path(r["failure_file"]).exists() and r["repro"].startswith("pytest ")
    summary = (run_dir / "summary.csv").read_text().splitlines()[0]
    assert "best_scheme" in summary and "best_scheme_exact_pct" in summary and "cause_unexplained" in summary


def test_run_json(run_dir):
    info = json.loads((run_dir / "run.json").read_text())
    assert info["format"] == "qconform-run/1" and info["finished"] and info["exit_status"] == 1
    assert re.fullmatch(r"[0-9a-f]{40}", info["git"]["commit"] or "")
    assert info["options"]["seed"] == 0 and info["options"]["cases_per_op"] == 5
    assert info["options"]["ops"] == ["ADD", "MUL"]
    assert info["targets"]["ref"]["versions"]["numpy"] == np.__version__
    assert info["targets"]["tests.helper_targets:WrongTarget"]["versions"] == {"helper": "1.0"}
    assert info["host"]["python"] and info["suite_version"]
    assert info["cost"]["rows"] == len(read_rows(run_dir))


def test_results_parquet(run_dir):
    import pandas as pd
    df = pd.read_parquet(run_dir / "results.parquet")
    rows = read_rows(run_dir)
    assert len(df) == len(rows)
    assert {"case_id", "target", "status", "max_abs_lsb", "scheme_exact.tflite-ref-double"} <= set(df.columns)


def _imgs(text: str) -> list[str]:
    return re.findall(r"<img\b[^>]*>", text)


def test_index_html_is_self_contained(run_dir):
    text = (run_dir / "index.html").read_text()
    assert 'id="matrix"' in text and 'id="matrix-plot"' in text and 'id="latency-plot"' in text
    assert 'class="histogram"' in text and 'id="failures"' in text and 'id="causes"' in text
    imgs = _imgs(text)
    assert len(imgs) >= 4
    for tag in imgs:
        m = re.search(r'src="data:image/svg\+xml;base64,([A-Za-z0-9+/=]+)"', tag)
        assert m, f"not an embedded SVG: {tag[:120]}"
        svg = base64.b64decode(m.group(1))
        assert b"<svg" in svg and b"viewBox" in svg               # a chart (reports/plots.py)
        assert not re.search(rb'href="(?!#|data:)', svg)           # the chart refers to nothing outside
    # nothing is fetched from anywhere: no external src/href, no stylesheet or script links
    assert not re.search(r'(src|href)="(https?:)?//', text)
    assert "<link" not in text and not re.search(r"<script[^>]+src=", text)
    # the failing cases table lists every failure with its reproduction command, unexplained first
    fails = [r for r in read_rows(run_dir) if r["status"] == "fail"]
    for r in fails:
        assert r["case_id"] in text
    assert "qconform shrink" in text and "sortable" in text


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
    # each image decoded in the browser (naturalWidth > 0): the matrix, a histogram, the latency chart
    assert width("matrix-plot") > 100
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


def test_report_command_needs_results(tmp_path, qconform_cli):
    p = qconform_cli("report", str(tmp_path))
    assert p.returncode == 2 and "results.jsonl" in p.stderr and "Traceback" not in p.stderr


def test_junit_xml_carries_properties(tmp_path, run_suite):
    xml = tmp_path / "junit.xml"
    proc, rd = run_suite("--target=ref", "--ops", "ADD", "--cases-per-op", "2", f"--junitxml={xml}")
    assert proc.returncode == 0, proc.stdout[-2000:]
    rd = _folder(rd)
    text = xml.read_text()
    n = len(read_rows(rd))
    assert n >= 2 and text.count("<testcase") == n
    assert text.count('name="qconform.status" value="pass"') == n and 'name="qconform.max_abs_lsb"' in text


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
