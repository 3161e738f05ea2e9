"""The tosa target's batches (one merged model) and its compiled-flatbuffer cache: a case's
verdict, reason and outputs are the ones it gets alone, and a cache entry is trusted only
when its MAC verifies. Skips (saying why) where the TOSA tools are not installed."""

from __future__ import annotations

import copy
import os
import random
from pathlib import Path

import numpy as np
import pytest

from reference import golden
from suite.cases.generate import make_case
from targets import tosa
from targets.base import Timing


def _target(cache_dir: str) -> tosa.TosaTarget:
    t = tosa.TosaTarget(cache_dir=cache_dir)
    ok, why = t.availability()
    if not ok:
        pytest.skip(f"tosa: {why}")
    return t


def _cases() -> list:
    ids = [("ADD", "random", 0), ("ADD", "random", 1), ("MUL", "random", 0), ("AVERAGE_POOL_2D", "random", 0),
           ("MAX_POOL_2D", "random", 14),       # the converter refuses it, naming its tensor
           ("L2_NORMALIZATION", "random", 0),   # the converter leaves tfl.l2_normalization
           ("SUB", "mult_gt1", 1),              # the reference model: UNPREDICTABLE (names no case)
           ("ADD", "qnn_u8", 0)]                # unsigned: tosa-opt refuses it (runs alone)
    cases = [make_case(*i) for i in ids]
    twin = copy.deepcopy(cases[0])   # same shapes as ADD-random-000, other values: a swap would show
    twin.id = "ADD-twin-000"
    for t in twin.inputs:
        t.data = np.asarray(t.data)[::-1].reshape(np.shape(t.data)).copy()
    return cases + [twin]


def _seen(outcomes) -> list[tuple]:
    return [(o.status, o.reason, [np.asarray(x).tolist() for x in (o.outputs or [])]) for o in outcomes]


def test_a_merged_batch_gives_each_case_what_it_gets_alone(tmp_path):
    t = _target("off")
    try:
        cases = _cases()
        alone = [t.run([c], Timing(0, 1))[0] for c in cases]
        shuffled = cases[:]
        random.Random(7).shuffle(shuffled)
        batch = t.run(shuffled, Timing(0, 1))
    finally:
        t.close()
    by_id = dict(zip((c.id for c in shuffled), batch))
    assert _seen([by_id[c.id] for c in cases]) == _seen(alone)
    assert sum(o.info.get("latency_scope") == "batch" for o in batch) >= 3   # merged (not all run alone)
    assert [o.status for o in alone[4:8]] == ["unsupported"] * 4
    for c, o in zip(cases[:4] + cases[8:], alone[:4] + alone[8:]):   # the spec's values, case by case
        assert o.status == "ok" and [x.tolist() for x in o.outputs] == [w.tolist() for w in golden(c)], c.id
    assert alone[0].outputs[0].tolist() != alone[8].outputs[0].tolist()


def _entries(root: Path) -> list[Path]:
    return sorted((root / "tosa").glob("*.tosa"))


def test_cache_warm_run_matches_cold_and_a_forged_entry_is_compiled_again(tmp_path):
    cases = [make_case("ADD", "random", i) for i in range(3)] + [make_case("MUL", "random", 0),
                                                                 make_case("MAX_POOL_2D", "random", 14)]
    t = _target(str(tmp_path))
    try:
        cold = _seen(t.run(cases, Timing(0, 1)))
        alone = [_seen(t.run([c], Timing(0, 1))) for c in cases]   # one entry per case too
    finally:
        t.close()
    assert tosa.cache_dir(str(tmp_path)) == tmp_path / "tosa" and len(_entries(tmp_path)) >= 5
    warm_t = _target(str(tmp_path))
    asked = []
    real = tosa._Runner.ask
    try:
        tosa._Runner.ask = lambda self, req, timeout: asked.append(bool(req["model"])) or real(self, req, timeout)
        assert _seen(warm_t.run(cases, Timing(0, 1))) == cold
        assert asked and not any(asked)   # every model from the cache: nothing compiled
        # forged: each entry's flatbuffer swapped with another's (their sidecars untouched), a failure
        # recorded for the batch by someone without the key: a cache trusting files without their
        # MAC would run other graphs or call the batch refused
        files = _entries(tmp_path)
        blobs = [f.read_bytes() for f in files]
        for f, b in zip(files, blobs[1:] + blobs[:1]):
            f.write_bytes(b)
        for f in files:
            fail = f.with_suffix(".fail.json")
            fail.write_text('{"format": "%s", "record": {"reason": "forged", "time": 0}, "mac": "%s"}'
                            % (tosa.CACHE_FORMAT, "0" * 64))
        asked.clear()
        forged_t = _target(str(tmp_path))
        assert _seen(forged_t.run(cases, Timing(0, 1))) == cold
        assert [_seen(forged_t.run([c], Timing(0, 1))) for c in cases] == alone
        assert asked and all(asked)   # every one compiled again
        assert any("forged TOSA flatbuffer cache entry" in p for p in forged_t.compiled_cache.problems)
    finally:
        tosa._Runner.ask = real
        warm_t.close()
        if "forged_t" in locals():
            forged_t.close()


def test_cache_folder_follows_the_cache_options(monkeypatch):
    monkeypatch.delenv("QCONFORM_CACHE_DIR", raising=False)
    assert tosa.cache_dir(None) == Path(os.path.expanduser("~/.cache/qconform/tosa"))
    assert tosa.cache_dir("off") is None and tosa.cache_dir("/x/c") == Path("/x/c/tosa")
    monkeypatch.setenv("QCONFORM_CACHE_DIR", "/y")
    assert tosa.cache_dir(None) == Path("/y/tosa") and tosa.cache_dir("none") is None


def test_a_converter_crash_is_its_cases_crash_and_the_rest_of_its_batch_runs():
    t = _target("off")
    try:
        cases = [make_case("TRANSPOSE", "neg_perm", 0), make_case("TRANSPOSE", "random", 0),
                 make_case("ADD", "random", 0)]   # tosa-converter-for-tflite segfaults on the first
        got = t.run(cases, Timing(0, 1))
        again = t.run(cases[:1], Timing(0, 1))[0]   # alone, once the batch has killed the runner
    finally:
        t.close()
    assert [o.status for o in got] == ["crash", "ok", "ok"] and got[0].info["signal"] == "SIGSEGV"
    assert again.status == "crash" and "compile_model" in again.reason   # the runner's own stack
    assert [x.tolist() for x in got[2].outputs] == [w.tolist() for w in golden(cases[2])]


def test_a_targets_latency_cases_caps_the_runs(tmp_path):
    from suite.cases.generate import generate
    from suite.harness.folder import RunFolder
    from suite.harness.options import checked
    from suite.harness.run import Run
    from tests.fault_targets import InProcessFaulty

    t = InProcessFaulty()
    cases = generate(["ADD"], 4, 0)
    seen = {}
    for cap in (None, 0):
        if cap is not None:
            t.latency_cases = cap   # as TosaTarget sets it: no case alone for its latency
        run = Run(checked(targets=[t.name], batch_size=64, latency_cases=3, warmup=0, repeats=1),
                  RunFolder.create(tmp_path / f"r{cap}", "r1"), {t.name: t}, "r1")
        ex, got = run.executors[t.name], []
        real = ex.submit
        ex.submit = lambda cs, alone, timing, real=real, got=got: got.append((len(cs), alone)) or real(cs, alone, timing)
        run.plan([(c, t.name) for c in cases])
        run.close()
        seen[cap] = got
    assert seen == {None: [(len(cases), 3)], 0: [(len(cases), 0)]}
    assert tosa.TosaTarget.latency_cases == 0
