"""The openvino target's cache of compiled models (targets/openvino.py): a hit imports the
exported model instead of compiling and gives the same outputs; an entry this user's key did not
authenticate is never used; the CPU's ISA is in the key, so another CPU's model is never served.
And the runner's half of it (suite/harness/run.py): a group's batches, hence their merged models
and cache keys, are the same whatever order pytest-randomly runs the tests in. And a batch's
cases are timed by their own nodes (PERF_COUNT), so no case of a group runs alone for its latency."""

from __future__ import annotations

import os
import random

import pytest

from suite.cases.generate import generate
from suite.core import keyed
from suite.harness import run as run_mod
from suite.harness.folder import RunFolder
from suite.harness.options import checked
from targets import get_target, onnx_model
from targets import openvino as ov_target
from targets.base import Timing
from targets.batching import ContextCache

FAST = Timing(warmup=0, repeats=1)


@pytest.fixture(autouse=True)
def own_key_file(tmp_path, monkeypatch):
    """The cache's MAC key under tmp_path, never the user's ~/.cache/qconform/key."""
    monkeypatch.setenv(keyed.KEY_ENV, str(tmp_path / "keys" / "key"))


def _openvino(root):
    t = get_target("openvino", cache_dir=str(root))
    ok, why = t.availability()
    if not ok:
        pytest.skip(f"openvino unavailable: {why}")
    return t


def _cases():
    return generate(["ADD"], 3, 0)[:3]   # one merged model of three cases


def _outputs(outcomes):
    assert all(o.status == "ok" for o in outcomes), [(o.status, o.reason) for o in outcomes]
    return [[(a.dtype, a.shape, a.tobytes()) for a in o.outputs] for o in outcomes]


def _no_compile(monkeypatch):
    def refuse(self, content):
        raise AssertionError("compiled although the cache holds the model")
    monkeypatch.setattr(ov_target.OpenvinoTarget, "_compile", refuse)


def test_a_hit_imports_instead_of_compiling_and_gives_the_same_outputs(tmp_path, monkeypatch):
    root, cases = tmp_path / "ov", _cases()
    cold = _openvino(root)
    first = _outputs(cold.run(cases, FAST))
    assert (cold.batch_stats.cache_misses, cold.batch_stats.cache_hits) == (1, 0)
    assert len(list(root.glob("*.blob"))) == 1
    _no_compile(monkeypatch)
    warm = _openvino(root)   # a new instance: nothing held in memory
    assert _outputs(warm.run(cases, FAST)) == first
    assert (warm.batch_stats.cache_misses, warm.batch_stats.cache_hits) == (0, 1)


def test_a_forged_entry_is_not_used_and_the_model_is_compiled_again(tmp_path, monkeypatch):
    root, cases = tmp_path / "ov", _cases()
    first = _outputs(_openvino(root).run(cases, FAST))
    [blob] = root.glob("*.blob")
    key = blob.stem
    # written under another user's key: garbage as the compiled model, and a refusal of one case
    other = ContextCache(root, os.urandom(32), kind="OpenVINO compiled model", suffix=".blob",
                         fmt=ov_target.BLOB_FORMAT)
    assert other.store_bytes(key, b"not a compiled model", {"cases": 3})
    t = _openvino(root)
    single = t.blob_cache.key(onnx_model.build(cases[0]).content, *t.cache_facts())
    other.store_failure(single, "OpenVINO rejected the model: forged")
    assert _outputs(t.run(cases, FAST)) == first
    assert _outputs(t.run(cases[:1], FAST)) == first[:1]   # the forged refusal is not a verdict
    assert (t.batch_stats.cache_misses, t.batch_stats.cache_hits) == (2, 0)
    assert any("forged" in p and str(root) in p for p in t.blob_cache.problems)
    _no_compile(monkeypatch)   # both compiled again and stored under this user's key
    again = _openvino(root)
    assert _outputs(again.run(cases, FAST)) == first and again.batch_stats.cache_hits == 1


def test_another_cpus_isa_or_openvino_build_is_another_key(tmp_path, monkeypatch):
    root, cases = tmp_path / "ov", _cases()
    t = _openvino(root)
    first = _outputs(t.run(cases, FAST))
    facts = t.cache_facts()
    assert ov_target.load_openvino().get_version() in facts and "isa=" + " ".join(ov_target.isa_flags()) in facts
    # the same cache folder on another CPU (AVX2 without VNNI, or on such a host SSE4.1 alone): compiled
    # there, not imported
    other = ["avx2", "fma", "sse4_1"] if ov_target.isa_flags() != ["avx2", "fma", "sse4_1"] else ["sse4_1"]
    monkeypatch.setattr(ov_target, "isa_flags", lambda: other)
    avx2 = _openvino(root)
    assert "isa=" + " ".join(other) in avx2.cache_facts()
    assert _outputs(avx2.run(cases, FAST)) == first   # (this CPU's compile, under the other key)
    assert (avx2.batch_stats.cache_misses, avx2.batch_stats.cache_hits) == (1, 0)
    assert len(list(root.glob("*.blob"))) == 2


class _Recorder:
    """An executor that records the batches the runner submits (and runs nothing)."""

    def __init__(self):
        self.batches, self.stats = [], {}

    def submit(self, cases, singles, timing):
        self.batches.append(([c.id for c in cases], singles))

    def close(self):
        pass


def test_a_groups_batches_are_the_same_whatever_order_the_tests_run_in(tmp_path, monkeypatch):
    monkeypatch.setattr(run_mod, "executor_for", lambda *a, **k: _Recorder())
    cases = generate(["ADD", "MUL"], 12, 0)
    seen = []
    for seed in range(3):
        order = list(cases)
        random.Random(seed).shuffle(order)   # as pytest-randomly orders the tests
        opts = checked(targets=["openvino"], batch_size=4, latency_cases=2, warmup=0, repeats=1)
        run = run_mod.Run(opts, RunFolder.create(tmp_path / f"r{seed}", f"r{seed}"), {"openvino": None}, f"r{seed}")
        run.plan([(c, "openvino") for c in order])
        seen.append(sorted(run.executors["openvino"].batches))   # (groups come in test order)
        run.close()
    assert seen[0] == seen[1] == seen[2]
    assert sorted(i for ids, _ in seen[0] for i in ids) == sorted(c.id for c in cases)   # each case once
    assert [s for _, s in seen[0] if s] == [2, 2]   # each group's first submission holds its latency singles
    assert all(ids == sorted(ids) for ids, _ in seen[0])


def test_a_batchs_cases_are_timed_by_their_own_nodes(tmp_path):
    t = _openvino(tmp_path / "ov")
    assert t.latency_cases == 0   # no case of a group alone for its latency
    cases = generate(["CONV_2D", "ADD"], 3, 0)
    outs = t.run(cases, Timing(warmup=1, repeats=4))
    ok = [o for o in outs if o.status == "ok"]
    assert len(ok) == len(cases) and t.batch_stats.batches >= 1
    for o in ok:
        assert o.info["latency_scope"] == "nodes" and o.info["batch_size"] == len(cases)
        assert len(o.latency_us) == 4 and all(x >= 0 for x in o.latency_us)   # (whole µs: a small ADD may be 0)
    conv = [o for c, o in zip(cases, outs) if c.op == "CONV_2D"]
    assert conv and all(sorted(o.latency_us)[2] > 0 for o in conv)
    # a case's nodes, not the batch's: each case's time is below the batch's run
    assert all(max(o.latency_us) < o.info["batch_p50_us"] for o in ok)


def test_per_case_split_of_the_profile():
    prof = [("c0_in0", False, 0.0), ("Subtract_1", True, 2.0), ("c0_n3/conv", True, 10.0), ("c0_out0/sink", False, 0.0),
            ("c1_in0", False, 0.0), ("Reorder_9", True, 1.0), ("c1_n0", True, 3.0)]
    assert ov_target.per_case_us(prof, ["c0_", "c1_"]) == [12.0, 4.0]
    # a case's span opening again after another's, or a node run before any span: not split
    assert ov_target.per_case_us(prof + [("c0_n4", True, 1.0)], ["c0_", "c1_"]) is None
    assert ov_target.per_case_us([("Subtract_1", True, 2.0)] + prof, ["c0_", "c1_"]) is None
