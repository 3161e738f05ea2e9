"""Smoke test of ``qconform bench`` (suite/bench/, suite/commands/bench.py) at tiny sizes; no
assertion on speed."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from reference import golden as reference_golden
from suite.bench import golden, no_memo, suite_run
from suite.bench.cases import OPS, bench_cases
from suite.cases.generate import generate
from suite.core.spec import check_case
from suite.core.tolerance import load_policy
from suite.core.waivers import load_waivers
from suite.harness import judge
from suite.harness.goldens import GoldenStore
from targets.base import Outcome

SCHEME = "tflite-ref-double"
LABELS = ["cold", "default", "--item=case", "--ahead 0", "--golden-cache off", "no golden memo", "goldens cold",
          "goldens cold, no golden memo"]
#: the variants the end-to-end test runs (--suite-variants; a variant's baseline comes along)
RUN = ["cold", "default", "--item=case", "goldens cold", "goldens cold, no golden memo"]


def test_benchmark_cases_follow_the_spec():
    for scale in (1, 16):
        for c in bench_cases(scale=scale):
            assert check_case(c) == [], c.id
    assert list(dict.fromkeys(c.op for c in bench_cases())) == OPS


def test_golden_benchmark_is_bit_exact_at_small_sizes():
    pytest.importorskip("ai_edge_litert")
    rows = golden.run(scale=8, repeats=2, min_time=0.0)
    assert list(dict.fromkeys(r.op for r in rows)) == OPS
    for r in rows:
        assert r.bit_exact, (r.case, r.mismatches)
        assert r.golden_ms > 0 and r.tflite_ref_ms > 0 and r.ratio > 0
    assert "ratio" in golden.table(rows)


def _judge_twice(goldens: judge.Goldens, cases, patched: bool) -> None:
    """Judge ``cases`` on two targets, as a run does (a target's cases, then the next target's)."""
    j = judge.Judge(scheme=SCHEME, policy=load_policy(None), waivers=load_waivers([]), goldens=goldens,
                    run_id="bench-test", seed=0)
    if patched:
        no_memo.patch()
    try:
        for target in ("a", "b"):
            for c in cases:
                want = reference_golden(c, SCHEME)
                v, _ = j(c, target, Outcome("ok", outputs=[w.copy() for w in want]), {})
                assert v.row["case_digest"] == c.digest()
        goldens.flush()
    finally:
        no_memo.unpatch()


class _CountingStore(GoldenStore):
    def __init__(self, folder):
        super().__init__(folder)
        self.gets, self.puts = 0, []

    def get(self, digest):
        self.gets += 1
        return super().get(digest)

    def put(self, digest, goldens):
        self.puts.append((digest, sorted(goldens)))
        return super().put(digest, goldens)


def test_no_memo_drops_only_the_memo_between_targets(tmp_path, monkeypatch):
    monkeypatch.setenv("QCONFORM_KEY_FILE", str(tmp_path / "key"))
    cases = generate(["ADD"], 2, 0)
    runs = {}
    for patched in (False, True):
        for rnd in ("cold", "warm"):   # the store empty, then filled by the first round
            store = _CountingStore(tmp_path / f"store-{patched}")
            g = judge.Goldens(store)
            _judge_twice(g, cases, patched)
            runs[patched, rnd] = (g.computed, store.gets, store.puts)
    n = len(cases)
    with_memo, without = runs[False, "cold"], runs[True, "cold"]
    assert with_memo[0] > 0 and without[0] == 2 * with_memo[0]   # each golden computed again for target b
    assert with_memo[1] == n and without[1] == 2 * n            # one store read per case, then per judgement
    assert without[2] == with_memo[2] and len(with_memo[2]) == n   # the same writes: one per case
    assert runs[False, "warm"][:1] == runs[True, "warm"][:1] == (0,)   # warm: every golden from the store
    assert runs[False, "warm"][2] == runs[True, "warm"][2] == []
    assert judge.Judge.__call__ is no_memo._ORIGINAL_CALL          # unpatched after


def test_outcome_line_leaves_out_the_duration():
    out = "....\nFAILED x\n1 failed, 7107 passed, 311 skipped, 110 xfailed, 1 error in 17.66s\n"
    assert suite_run.outcome_line(out) == "1 failed, 7107 passed, 311 skipped, 110 xfailed, 1 error"
    assert suite_run.outcome_line("== 3 passed, 2 warnings in 1.00s (0:00:01) ==") == "3 passed, 2 warnings"


def test_bench_command_prints_every_part(qconform_cli, tmp_path):
    pytest.importorskip("ai_edge_litert")
    pytest.importorskip("onnxruntime")
    out = tmp_path / "bench.json"
    p = qconform_cli("bench", "--golden-scale", "16", "--repeats", "2", "--cases-per-op", "2",
                     "--targets", "tflite-ref,ort", "--ops", "ADD,MEAN", "--warm-runs", "1", "--own-rounds", "1",
                     "--suite-variants=--item=case;goldens cold, no golden memo", f"--json={out}",
                     timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    for head in ("golden vs tflite-ref", "cases per second per target", "the default run"):
        assert head in p.stdout
    assert "WARNING" not in p.stdout, p.stdout[-3000:]
    doc = json.loads(out.read_text())
    assert {r["op"] for r in doc["golden"]} == {"MEAN"}          # --ops: only those with a benchmark case
    assert "no golden benchmark case for ADD" in p.stdout
    modes = {(r["target"], r["mode"].split(" ")[0]) for r in doc["throughput"]}
    assert modes == {("tflite-ref", "off"), ("tflite-ref", "on"), ("ort", "off"), ("ort", "on")}
    suite = doc["suite"]
    rows = suite["variants"]
    assert [r["label"] for r in rows] == RUN
    for label in RUN:
        assert label in p.stdout
    assert suite["outcomes_identical"] and suite["mismatches"] == []
    runs = [run for r in rows for run in r["runs"]]
    assert len(runs) == len(RUN) and all(len(r["runs"]) == 1 for r in rows)
    # (--item=case: pytest counts its items, one per case; run.json counts the same rows)
    assert len({run["outcome"] for run in runs if "--item" not in run["command"]}) == 1 and "passed" in runs[0]["outcome"]
    assert len({json.dumps(run["counts"], sort_keys=True) for run in runs}) == 1 and runs[0]["counts"]
    assert all(run["exit_status"] in (0, 1) for run in runs)
    cmd = suite["default_command"]
    assert "--target=tflite-ref,ort" in cmd and "--ops" in cmd and "--cases-per-op" in cmd
    byl = {r["label"]: r for r in rows}
    assert byl["goldens cold, no golden memo"]["args"] == ["--golden-cache=<an empty folder>", "-p", "suite.bench.no_memo"]
    assert byl["--item=case"]["args"] == ["--item", "case"]
    for r in rows:
        assert r["median_s"] > 0 and r["min_s"] <= r["median_s"] <= r["max_s"]
        assert r["pct_vs_default"] is not None
        assert r["runs"][0]["cost"]["rows"] == runs[0]["cost"]["rows"] > 0
    assert set(suite["own_s"]) == {"tflite-ref", "ort"} and all(x > 0 for x in suite["own_s"].values())
    assert set(suite["wall_over_own"]) == set(RUN) and "wall / own time" in p.stdout
    # the floor as the run plans the cases too (3 of each group alone)
    assert set(suite["own_planned_s"]) == {"tflite-ref", "ort"} and set(suite["wall_over_own_planned"]) == set(RUN)
    assert "as the run plans them" in p.stdout
    for k in ("load_before", "load_after"):
        assert len(doc[k]) == 3


def test_bench_runs_keep_the_user_cache(tmp_path):
    env = suite_run.bench_env(tmp_path)
    assert env["QCONFORM_NATIVE_DIR"].startswith(str(tmp_path))
    assert env["QCONFORM_KEY_FILE"].startswith(str(tmp_path))
    cmd = suite_run.command(suite_run.DEFAULT, tmp_path, tmp_path / "r")
    assert f"--cache-dir={tmp_path / 'qnn'}" in cmd and f"--golden-cache={tmp_path / 'golden'}" in cmd
    assert not any(a.startswith("--target") for a in cmd)   # the default run: every available default target
    assert os.environ.get("QCONFORM_NATIVE_DIR") != env["QCONFORM_NATIVE_DIR"]


def test_bench_rejects_bad_numbers(qconform_main):
    p = qconform_main("bench", "--workers", "x")
    assert p.returncode == 2 and "--workers" in p.stderr
    p = qconform_main("bench", "--suite", "--warm-runs", "0")
    assert p.returncode == 2 and "--warm-runs" in p.stderr


def test_own_time_plans_a_group_as_the_run_does():
    """suite/bench/throughput.py's plan of a group is Run._submit_group's: in case-id order, the first
    latency cases alone (with the first batch), then batches."""
    from types import SimpleNamespace
    from suite.bench.throughput import _parts
    cases = [SimpleNamespace(id=f"c{i:03d}") for i in range(10, 0, -1)]
    parts = _parts(cases, None, 4, 3)
    assert [([c.id for c in cs], alone) for cs, alone in parts] == [
        (["c001", "c002", "c003", "c004", "c005", "c006", "c007"], 3), (["c008", "c009", "c010"], 0)]
    assert [len(cs) for cs, alone in _parts(cases, None, 4, None)] == [4, 4, 2]
    assert _parts(cases[:2], None, 4, 3) == [(sorted(cases[:2], key=lambda c: c.id), 2)]
    # a target that runs fewer alone (tflite: each case timed inside its batch) is planned with fewer
    assert [alone for _, alone in _parts(cases, SimpleNamespace(latency_cases=0), 4, 3)] == [0, 0, 0]


def test_suite_variants_can_be_chosen():
    with pytest.raises(ValueError, match="unknown variant"):
        suite_run.run_variants(only=["--no-such"], warm_runs=0)


def test_every_suite_variant_and_its_arguments():
    """(The end-to-end test above runs some of them.)"""
    by = {v.label: suite_run._variant_args(v) for v in suite_run.VARIANTS}
    assert ["cold", *by] == LABELS
    assert by["--ahead 0"] == ["--ahead", "0"]
    assert by["--golden-cache off"] == ["--golden-cache=off"]
    assert by["no golden memo"] == ["-p", "suite.bench.no_memo"]
    assert by["goldens cold, no golden memo"] == ["--golden-cache=<an empty folder>", "-p", "suite.bench.no_memo"]
    cache = Path("/tmp/qc-cache")
    cmd = suite_run.command(suite_run.VARIANTS[3], cache, cache / "r")
    assert "--golden-cache=off" in cmd
