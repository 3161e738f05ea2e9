"""The suite beside the pytest plugins CI environments hold (issue #22): pytest-timeout,
pytest-rerunfailures, pytest-randomly, pytest-html, allure-pytest, pytest-json-report and
pytest-cov (the dev extra), all loaded and switched on, give the verdicts of a plain run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from reports.results import iter_last_rows
from tests.conftest import ROOT, rows_written, run_folder

#: (plugin name for -p, module) of each plugin (pytest-html needs pytest-metadata's)
PLUGINS = (("timeout", "pytest_timeout"), ("rerunfailures", "pytest_rerunfailures"), ("randomly", "pytest_randomly"),
           ("metadata", "pytest_metadata"), ("html", "pytest_html"), ("allure_pytest", "allure_pytest"), ("pytest_jsonreport", "pytest_jsonreport"),
           ("pytest_cov", "pytest_cov"))
SLICE = ("--target=ref,tests.spine_targets:OffByOne,tests.bias_targets:HalfUp", "--ops", "ADD",
         "--cases-per-op", "15")


def _pytest(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """pytest with the qconform plugin and only the plugins ``args`` load (-p)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    cmd = [sys.executable, "-m", "pytest", "-p", "qconform", "-p", "no:cacheprovider", "-q", *args]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def _run(tmp, name: str, *extra: str) -> tuple[subprocess.CompletedProcess, dict, dict]:
    """A suite run with only the plugins given (-p): (process, status of each (case, target),
    outcome of each JUnit testcase)."""
    xml = tmp / f"{name}.xml"
    proc = _pytest(*SLICE, f"--report-dir={tmp / name}", f"--junitxml={xml}", *extra)
    rows = {(r["case_id"], r["target"]): r["status"] for r in iter_last_rows(run_folder(tmp / name))}
    tests = {}
    for c in ET.parse(xml).getroot().iter("testcase"):
        kind = next((x.tag for x in c if x.tag in ("failure", "error", "skipped")), "passed")
        tests[f"{c.get('classname')}::{c.get('name')}"] = kind
    return proc, rows, tests


@pytest.mark.parametrize("mode", ["case", "group"])
def test_the_popular_plugins_switched_on_give_the_verdicts_of_a_plain_run(tmp_path, mode):
    """With one item per (op, target) (--item=group) too; Allure follows items, so its per-case
    results need --item=case."""
    for _, module in PLUGINS:
        pytest.importorskip(module)
    plain, rows, tests = _run(tmp_path, "plain", f"--item={mode}")
    assert plain.returncode == 1, plain.stdout[-3000:] + plain.stderr[-3000:]
    flags = [a for name, _ in PLUGINS for a in ("-p", name)]
    on = ("--timeout=300", "--reruns=1", "--randomly-seed=12345", f"--html={tmp_path / 'r.html'}",
          f"--alluredir={tmp_path / 'allure'}", "--json-report", f"--json-report-file={tmp_path / 'r.json'}",
          "--cov=suite.commands", "--cov-report=")
    both, rows2, tests2 = _run(tmp_path, "plugins", *flags, *on, f"--item={mode}")
    assert both.returncode == 1, both.stdout[-3000:] + both.stderr[-3000:]
    assert rows2 == rows and tests2 == tests
    assert {t for t, k in tests.items() if k == "failure" and t.endswith("test_group")} == {
        "suite.test_conformance.ADD:half-up::test_group"}
    assert any(k == "failure" and "off-by-one" in t for t, k in tests.items())
    # each plugin did its part
    assert (tmp_path / "r.html").exists() and any((tmp_path / "allure").iterdir())
    # the group failure carries its properties and reproduction command (JUnit)
    group = next(c for c in ET.parse(tmp_path / "plugins.xml").getroot().iter("testcase")
                 if c.get("name") == "test_group" and "half-up" in c.get("classname"))
    props = {p.get("name"): p.get("value") for p in group.iter("property")}
    assert props["qconform.op"] == "ADD" and props["qconform.target"] == "half-up"
    assert props["qconform.repro"].startswith("pytest --target=tests.bias_targets:HalfUp --ops=ADD --seed=")   # (as --target gave it)
    assert "reproduce: pytest --target=tests.bias_targets:HalfUp" in group.find("failure").get("message") + (group.find("failure").text or "")
    assert json.loads((tmp_path / "r.json").read_text())["exitcode"] == 1
    if mode == "group":   # (Allure: a result per item)
        return
    # Allure: labels, attachments, and the case parameter as its id (not the repr of its arrays)
    results = [json.loads(f.read_text()) for f in (tmp_path / "allure").glob("*-result.json")]
    failing = [r for r in results if r["status"] == "failed" and "off-by-one" in r["name"]]
    assert failing
    labels = {x["name"]: x["value"] for x in failing[0]["labels"]}
    assert labels["op"] == "ADD" and labels["target"] == "off-by-one" and labels["variant"]
    assert {a["name"] for a in failing[0]["attachments"]} >= {"case, got and want", "reproduce"}
    params = [p["value"] for r in results for p in r.get("parameters", []) if p["name"] == "qc_case"]
    assert params and all(len(v) < 60 and "array" not in v for v in params)
    # --reruns=1 ran no numeric verdict again (a fail, a bias): no row written twice
    assert len(rows_written(run_folder(tmp_path / "plugins"))) == len(rows_written(run_folder(tmp_path / "plain")))
    order = [(r["case_id"], r["target"]) for r in rows_written(run_folder(tmp_path / "plain"))]
    assert [(r["case_id"], r["target"]) for r in rows_written(run_folder(tmp_path / "plugins"))] != order  # shuffled


def test_pytest_randomly_keeps_each_operators_tests_together(tmp_path):
    """pytest-randomly shuffles the (op, target) groups and their cases; the suite then brings each
    operator's tests together (a stable sort, which pytest-randomly provides for), so a bad
    verdict's witnesses, the op's other targets, are at the head of their queues."""
    pytest.importorskip("pytest_randomly")

    def collected(*extra: str) -> list[str]:
        proc = _pytest("--collect-only", "--target=ref,tflite-ref", "--ops", "ADD,MUL,SUB", "--cases-per-op", "4",
                       f"--report-dir={tmp_path}", *extra, timeout=300)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return [ln for ln in proc.stdout.splitlines() if "::test_" in ln]

    plain = collected()
    for seed in (1, 2, 3):
        ids = collected("-p", "randomly", f"--randomly-seed={seed}")
        assert sorted(ids) == sorted(plain) and ids != plain   # the same tests, shuffled
        ops = [i.split("::")[1].split(":")[0] for i in ids]
        runs = [op for k, op in enumerate(ops) if k == 0 or ops[k - 1] != op]
        assert sorted(runs) == ["ADD", "MUL", "SUB"], runs   # each op once: its tests together


def test_reruns_never_run_a_numeric_verdict_again_but_a_crash_may(tmp_path):
    """pytest-rerunfailures --reruns=2: the mismatches (OffByOne) and the bias (HalfUp's test_group) are
    judged once; the crashing case (Faulty, segv) is run three times (a rerun is of an item: --item=case)."""
    pytest.importorskip("pytest_rerunfailures")
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env.update(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", QCONFORM_FAULTS=json.dumps({"ADD-sat_lo-000": "segv"}))
    cmd = [sys.executable, "-m", "pytest", "-p", "qconform", "-p", "rerunfailures", "-p", "no:cacheprovider", "-q",
           "--reruns=2", "-rR", "--target=tests.spine_targets:OffByOne,tests.bias_targets:HalfUp,tests.fault_targets:Faulty",
           "--ops", "ADD", "--cases-per-op", "15", f"--report-dir={tmp_path}", "--item=case"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = rows_written(run_folder(tmp_path))
    per: dict = {}
    for r in rows:
        per[(r["case_id"], r["target"])] = per.get((r["case_id"], r["target"]), 0) + 1
    assert any(r["status"] == "fail" and r["target"] == "off-by-one" for r in rows)
    assert all(n == 1 for n in per.values())   # every verdict once (a test asked again writes no second row)
    reran = [ln for ln in proc.stdout.splitlines() if ln.startswith("RERUN")]
    # only the crash was run again; the mismatches and the bias were not
    assert reran and all("ADD-sat_lo-000:faulty" in ln for ln in reran), proc.stdout[-3000:]
