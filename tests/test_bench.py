"""Smoke test of ``qconform bench`` (benchmarks/, suite/commands/bench.py) at tiny sizes."""

from __future__ import annotations

import json

import pytest

from benchmarks.cases import OPS, bench_cases
from suite.core.spec import check_case


def test_benchmark_cases_follow_the_spec():
    for scale in (1, 16):
        for c in bench_cases(scale=scale):
            assert check_case(c) == [], c.id
    assert list(dict.fromkeys(c.op for c in bench_cases())) == OPS


def test_golden_benchmark_is_bit_exact_at_small_sizes():
    pytest.importorskip("ai_edge_litert")
    from benchmarks import golden
    rows = golden.run(scale=8, repeats=2, min_time=0.0)
    assert list(dict.fromkeys(r.op for r in rows)) == OPS
    for r in rows:
        assert r.bit_exact, (r.case, r.mismatches)
        assert r.golden_ms > 0 and r.tflite_ref_ms > 0 and r.ratio > 0
    assert "ratio" in golden.table(rows)


def test_bench_command_prints_every_part(qconform_cli, tmp_path):
    pytest.importorskip("ai_edge_litert")
    pytest.importorskip("onnxruntime")
    out = tmp_path / "bench.json"
    p = qconform_cli("bench", "--golden-scale", "16", "--repeats", "2", "--cases-per-op", "2",
                     "--targets", "tflite-ref,ort", "--ops", "ADD,MEAN", "--warm-runs", "1", f"--json={out}",
                     timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    for head in ("golden vs tflite-ref", "cases per second per target", "the default run"):
        assert head in p.stdout
    doc = json.loads(out.read_text())
    assert {r["op"] for r in doc["golden"]} == {"MEAN"}          # --ops: only those with a benchmark case
    assert "no golden benchmark case for ADD" in p.stdout
    modes = {(r["target"], r["mode"].split(" ")[0]) for r in doc["throughput"]}
    assert modes == {("tflite-ref", "off"), ("tflite-ref", "on"), ("ort", "off"), ("ort", "on")}
    suite = doc["suite"]
    assert [r["label"] for r in suite] == ["batched, cold caches", "batched, warm caches, 1/1",
                                           "batched, warm, pipeline off"]
    assert all(r["exit_status"] in (0, 1) for r in suite)
    assert all(r["harness_pct"] is not None and 0 <= r["harness_pct"] <= 100 for r in suite)


def test_bench_rejects_bad_numbers(qconform_cli):
    p = qconform_cli("bench", "--workers", "x")
    assert p.returncode == 2 and "--workers" in p.stderr
