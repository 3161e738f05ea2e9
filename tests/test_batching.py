"""Batching in the targets (targets/batching.py): many cases in one model give the same
verdicts and outputs as one model per case; a failing batch is bisected down to the case."""

from __future__ import annotations

import collections

import numpy as np
import pytest

from suite.cases.generate import generate
from targets import get_target
from targets.base import Outcome, Timing
from targets.batching import (BatchFailed, BatchStats, ContextCache, bisect, case_of_node, merge_onnx,
                              placement_by_case)
from tests.conftest import rows_written as _rows

FAST = Timing(warmup=0, repeats=1)
# ops with several variants, a const/param input, a variadic one and a one-node ONNX graph
OPS = ["ADD", "CONV_2D", "FULLY_CONNECTED", "SOFTMAX", "MEAN", "CONCATENATION", "DEQUANTIZE", "SHAPE"]


def _available(name: str, **options):
    t = get_target(name, **options)
    ok, why = t.availability()
    if not ok:
        pytest.skip(f"{name} unavailable: {why}")
    return t


def _by_op(cases):
    groups: dict[str, list] = {}
    for c in cases:
        groups.setdefault(c.op, []).append(c)
    return groups


def _same(a: Outcome, b: Outcome) -> bool:
    if a.status != b.status:
        return False
    if a.status != "ok":
        return True
    return len(a.outputs) == len(b.outputs) and all(
        x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a.outputs, b.outputs))


def _compare_batched_to_single(batched_target, single_target, cases):
    single = {c.id: single_target.run([c], FAST)[0] for c in cases}
    for cs in _by_op(cases).values():
        outs = batched_target.run(cs, FAST)
        assert len(outs) == len(cs)
        for c, o in zip(cs, outs):
            assert _same(o, single[c.id]), (c.id, o.status, o.reason, single[c.id].status, single[c.id].reason)
    return single


@pytest.mark.parametrize("name", ["tflite", "tflite-ref"])
def test_litert_batch_equals_one_model_per_case(name):
    t = _available(name)
    cases = [c for c in generate(OPS, 6, 3) if not t.unsupported(c)]
    _compare_batched_to_single(t, get_target(name), cases)
    st = t.batch_stats
    assert st.batches >= 1 and st.cases >= len(cases) // 2
    # each case of a batch is invoked on its own subgraph: its latency is its own
    o = t.run([c for c in cases if c.op == "ADD"], Timing(warmup=1, repeats=3))[0]
    assert o.status == "ok" and len(o.latency_us) == 3 and o.info["latency_scope"] == "case"


def test_ort_batch_equals_one_model_per_case():
    t = _available("ort")
    cases = generate(OPS, 6, 3)
    _compare_batched_to_single(t, get_target("ort"), cases)
    outs = t.run([c for c in cases if c.op == "CONV_2D"], Timing(warmup=1, repeats=5))
    ok = [o for o in outs if o.status == "ok"]
    assert ok and all(o.latency_us == [] and o.info["latency_scope"] == "batch"
                      and o.info["batch_size"] == len(outs) and o.info["batch_p50_us"] > 0 for o in ok)
    # --batch-size 1: one case per run() is timed on its own
    one = t.run([cases[0]], Timing(warmup=1, repeats=3))[0]
    assert one.info["latency_scope"] == "case" and len(one.latency_us) == 3


def test_htp_runs_no_case_alone_for_a_simulators_latency(monkeypatch):
    """On an x86-64 host the HTP is QNN's simulator: its run time is no HTP's latency."""
    from targets import htp
    monkeypatch.setattr(htp.platform, "machine", lambda: "x86_64")
    assert htp.HtpTarget().latency_cases == 0
    monkeypatch.setattr(htp.platform, "machine", lambda: "aarch64")   # a Snapdragon device's HTP
    assert htp.HtpTarget().latency_cases is None


def test_htp_batch_equals_one_session_per_case_and_the_context_cache_is_reused(tmp_path):
    _available("htp")
    cache = tmp_path / "qnn"
    cases = generate(["ADD", "CONV_2D", "DEQUANTIZE", "SHAPE", "RELU"], 4, 5)
    batched = get_target("htp", cache_dir=str(cache))
    single = _compare_batched_to_single(batched, get_target("htp", cache_dir="off"), cases)
    # one-node graphs (DEQUANTIZE: a lone DequantizeLinear) run alone; constant-folded cases
    # (SHAPE) are unsupported in a batch as alone
    assert all(single[c.id].status == "unsupported" for c in cases if c.op == "SHAPE")
    assert batched.batch_stats.cache_misses >= 1 and list(cache.glob("*.onnx"))
    # a second run (new target instance) loads the compiled contexts instead of compiling
    again = get_target("htp", cache_dir=str(cache))
    _compare_batched_to_single(again, get_target("htp", cache_dir="off"), cases)
    assert again.batch_stats.cache_hits >= 1
    assert again.batch_stats.cache_misses <= batched.batch_stats.cache_misses - again.batch_stats.cache_hits + 1


def test_a_case_the_runtime_rejects_is_isolated_by_bisection(monkeypatch):
    """One bad case in a batch: its own verdict and reason, everyone else's verdict intact, and
    O(log N) extra sessions."""
    t = _available("ort")
    from targets import onnx_model
    cases = [c for c in generate(["ADD"], 16, 1) if c.variant != "qnn_u8"][:16]
    bad = cases[5].id
    real_build = onnx_model.build

    def build(case):
        m = real_build(case)
        if case.id == bad:   # a node no runtime knows: ONNX Runtime refuses the model
            import onnx
            p = onnx.load_from_string(m.content)
            p.graph.node[-1].op_type = "NoSuchOperator"
            m.content = p.SerializeToString()
        return m

    monkeypatch.setattr(onnx_model, "build", build)
    outs = t.run(cases, FAST)
    for c, o in zip(cases, outs):
        if c.id == bad:
            assert o.status == "unsupported" and "ONNX Runtime rejected the model" in o.reason
        else:
            assert o.status == "ok", (c.id, o.reason)
    assert t.batch_stats.failed <= 2 * 4 + 1        # log2(16) levels
    assert t.batch_stats.sessions <= 2 * 2 * 4 + 2


def test_bisect_gives_every_item_its_own_outcome_in_log_attempts():
    attempts = []

    def attempt(items):
        attempts.append(len(items))
        if 13 in items:
            raise BatchFailed("13 spoils the batch")
        return [Outcome.ok([np.array(i)]) for i in items]

    st = BatchStats()
    def single(i):
        return Outcome.unsupported("13 alone") if i == 13 else Outcome.ok([np.array(i)])

    outs = bisect(list(range(64)), attempt, single, st)
    assert [o.status for o in outs] == ["unsupported" if i == 13 else "ok" for i in range(64)]
    assert [int(o.outputs[0]) for i, o in enumerate(outs) if i != 13] == [i for i in range(64) if i != 13]
    assert len(attempts) <= 2 * 6 + 1 and st.cases >= 64 - 7


def test_merge_prefixes_every_case_and_placement_maps_nodes_back():
    _available("ort")
    from targets import onnx_model
    import onnxruntime as ort
    cases = generate(["ADD"], 3, 0)[:3]
    batch = merge_onnx(cases, [onnx_model.build(c) for c in cases])
    assert batch.prefixes == ["c0_", "c1_", "c2_"]
    assert batch.output_names() == ["c0_out0", "c1_out0", "c2_out0"]
    assert case_of_node("c12_n3", ["x"] * 13) == 12 and case_of_node("Transpose_token_1", ["x"]) is None
    so = ort.SessionOptions()
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    sess = ort.InferenceSession(batch.content, so, providers=["CPUExecutionProvider"])
    per = placement_by_case(sess, batch.prefixes)
    assert len(per) == 3 and all(p.get("CPUExecutionProvider") for p in per)
    outs = batch.split(sess.run(batch.output_names(), batch.feeds()))
    for c, got in zip(cases, outs):
        assert got[0].shape == tuple(c.outputs[0].shape)


def test_context_cache_files(tmp_path):
    cache = ContextCache(tmp_path / "c")
    key = cache.key(b"model", "v1")
    assert key != cache.key(b"model", "v2") and cache.lookup(key) == (None, None, None)
    dump = cache.dump_path(key)
    dump.write_bytes(b"ctx")
    assert cache.store(key, dump, {"placement": [{"QNNExecutionProvider": ["Add"]}]})
    ctx, meta, fail = cache.lookup(key)
    assert ctx.read_bytes() == b"ctx" and meta["placement"][0]["QNNExecutionProvider"] == ["Add"] and fail is None
    cache.store_failure(key, "QNN says no")
    assert cache.lookup(key)[2]["reason"] == "QNN says no"
    cache.forget(key)
    assert cache.lookup(key) == (None, None, None)


def test_xdist_keeps_each_op_target_group_on_one_worker(run_suite, tmp_path):
    """With -n 2 (the plugin then asks for --dist loadscope; the suite's tests are one class per
    (op, target)), each group runs whole, as batches, on one worker; each case once; and the
    verdicts are those of a run without xdist."""
    pytest.importorskip("xdist")
    args = ("--target=tflite-ref,ort", "--ops", "ADD,MUL,RELU", "--cases-per-op", "3")
    proc, rd = run_suite(*args, "-n", "2", "-vv", report_dir=tmp_path / "xdist")
    assert proc.returncode in (0, 1), proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "LoadScopeScheduling" in proc.stdout
    one, rd1 = run_suite(*args, report_dir=tmp_path / "one")
    assert one.returncode == proc.returncode, one.stdout[-2000:] + one.stderr[-2000:]
    rows = _rows(rd)
    pairs = collections.Counter((r["case_id"], r["target"]) for r in rows)
    assert max(pairs.values()) == 1, [p for p, n in pairs.items() if n > 1][:5]   # each case once
    workers: dict[tuple, set] = collections.defaultdict(set)
    for r in rows:
        workers[(r["op"], r["target"])].add(r["worker"])
    assert set(workers) == {(op, t) for op in ("ADD", "MUL", "RELU") for t in ("tflite-ref", "ort")}
    assert all(len(w) == 1 for w in workers.values()), workers
    assert {w for ws in workers.values() for w in ws} == {"gw0", "gw1"}          # both worked
    assert {(r["case_id"], r["target"]): r["status"] for r in rows} == \
        {(r["case_id"], r["target"]): r["status"] for r in _rows(rd1)}
    assert all(r["worker"] is None for r in _rows(rd1))
