"""The golden's C int8 dot product (reference/native.py): the FULLY_CONNECTED goldens it gives
are those of the NumPy path, bit for bit, and without it (no compiler, switched off, a build
that fails its check) the golden takes the NumPy path and says why."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from reference import golden, native
from reference.ops import conv as C
from reference.schemes import SCHEMES
from suite.core.case import Case
from suite.cases.generate import get_generator, make_case

from tests.test_golden_conv import act, out, weights, wrap_case

_CC = (os.environ.get("CC") or "cc").split()[0]
needs_cc = pytest.mark.skipif(shutil.which(_CC) is None, reason=f"no C compiler ({_CC}) on this machine")


@pytest.fixture
def fresh_native(monkeypatch, tmp_path):
    """native with nothing loaded and its own build folder; reset again afterwards."""
    monkeypatch.setenv(native.ENV_DIR, str(tmp_path / "native"))
    monkeypatch.delenv(native.ENV_SWITCH, raising=False)   # (a user's QCONFORM_NATIVE=off)
    native._reset()
    yield monkeypatch
    native._reset()


def fc_cases():
    """Every generated FULLY_CONNECTED case (30 per seed, two seeds), the 70000-term case whose
    int32 accumulator wraps, and gemv shapes from 1 to 8 rows with extreme zero points."""
    cases = [make_case("FULLY_CONNECTED", v, i, seed=s)
             for s in (0, 11) for v, i in get_generator("FULLY_CONNECTED").plan(30)]
    cases.append(wrap_case())
    rng = np.random.default_rng(3)
    for rows, z_in, per_channel in ((1, -128, False), (2, 127, True), (5, 0, False), (8, -1, True)):
        k, o = 1024, 300
        xd = rng.integers(-128, 128, (rows, k)).astype(np.int8)
        wd = rng.integers(-127, 128, (o, k)).astype(np.int8)
        wd[0] = -127
        xd[0] = 127 if z_in < 0 else -128          # the largest |x - z_in| in row 0
        scales = list(rng.uniform(2 ** -9, 2 ** -6, o)) if per_channel else [2 ** -8]
        cases.append(Case("FULLY_CONNECTED", [act(xd, 2 ** -4, z_in), weights(wd, scales)],
                          [out((rows, o), 2 ** -1, 3)],
                          {"fused_activation_function": "NONE", "keep_num_dims": False},
                          id=f"gemv-{rows}-{z_in}"))
    w = weights(rng.integers(-127, 128, (40, 96)), [2 ** -8])
    w.zero_point = [-3]                             # off the spec; the per-tensor kernel applies it
    cases.append(Case("FULLY_CONNECTED", [act(rng.integers(-128, 128, (2, 96)), 2 ** -4, 9), w],
                      [out((2, 40), 2 ** -2, 0)], {"fused_activation_function": "NONE"}, id="gemv-zw"))
    return cases


@needs_cc
def test_c_dot_gives_the_numpy_goldens_bit_for_bit(fresh_native):
    cases = fc_cases()
    calls = []
    real = native.dot_i8
    fresh_native.setattr(native, "dot_i8", lambda w, d: calls.append(d.shape[0]) or real(w, d))
    on = {(c.id, s): golden(c, s)[0] for c in cases for s in SCHEMES}
    assert native.status().startswith("on"), native.status()
    assert len(calls) >= len(SCHEMES) * 5 and {1, 2, 5, 8} <= set(calls), calls
    fresh_native.setenv(native.ENV_SWITCH, "off")
    native._reset()
    off = {(c.id, s): golden(c, s)[0] for c in cases for s in SCHEMES}
    assert native.status().startswith("off")
    for key, want in off.items():
        got = on[key]
        assert got.dtype == want.dtype and np.array_equal(got, want), (key, np.flatnonzero(got != want)[:1])


@needs_cc
def test_c_dot_sums_exactly_past_the_int32_runs(fresh_native):
    rng = np.random.default_rng(1)
    w = rng.integers(-128, 128, (3, 200_001)).astype(np.int8)
    d = rng.integers(-255, 256, (2, 200_001)).astype(np.int16)
    w[1], d[0] = -128, -255                           # 200,001 * 32640: past 2^32, 4 int32 runs
    got = native.dot_i8(w, d)
    assert got[0, 1] == 200_001 * 32640
    assert np.array_equal(got, d.astype(np.int64) @ w.astype(np.int64).T)
    with pytest.raises(TypeError, match="int8"):
        native.dot_i8(w.astype(np.uint8), d)
    assert native.status().startswith("on") and native.cache_dir() in Path(native.status()[4:-1]).parents
    assert len(list(native.cache_dir().glob("*.ok"))) == 1


def test_without_a_compiler_the_golden_takes_the_numpy_path(fresh_native):
    fresh_native.setenv("CC", "/nonexistent/cc")
    c = wrap_case()
    assert native.dot_i8(np.zeros((1, 1), np.int8), np.zeros((1, 1), np.int16)) is None
    assert native.status().startswith("unavailable") and "/nonexistent/cc" in native.status()
    with pytest.raises(TypeError, match="int8"):         # bad arguments are an error either way
        native.dot_i8(np.zeros((1, 1), np.uint8), np.zeros((1, 1), np.int16))
    assert golden(c)[0].item() == -121                 # the wrapped accumulator, as with the C sums
    assert np.array_equal(C.fc_acc(np.full((1, 5), 3, np.int8), -2, np.full((2, 5), -7, np.int8)),
                          np.full((1, 2), -175))


@needs_cc
def test_a_build_that_disagrees_with_numpy_is_not_used(fresh_native, tmp_path):
    bad = tmp_path / "bad.c"              # right on the probe's 3 terms, wrong from 1000 terms on
    bad.write_text(native.SOURCE.read_text().replace("out[b * O + o] = total;",
                                                     "out[b * O + o] = total + (K > 1000);"))
    fresh_native.setattr(native, "SOURCE", bad)
    assert native.dot_i8(np.ones((1, 1), np.int8), np.ones((1, 1), np.int16)) is None
    assert native.status().startswith("disabled"), native.status()
    assert golden(wrap_case())[0].item() == -121


@needs_cc
def test_a_build_that_crashes_is_probed_in_another_process(fresh_native, tmp_path):
    bad = tmp_path / "trap.c"             # an illegal instruction, as code for another CPU would be
    bad.write_text(native.SOURCE.read_text().replace("out[b * O + o] = total;", "__builtin_trap();"))
    fresh_native.setattr(native, "SOURCE", bad)
    assert native.dot_i8(np.ones((1, 1), np.int8), np.ones((1, 1), np.int16)) is None
    assert native.status().startswith("unavailable") and "probe" in native.status(), native.status()
    assert not list((tmp_path / "native").glob("*.so"))      # nothing kept to load next time
    assert golden(wrap_case())[0].item() == -121


def test_the_golden_cache_key_covers_the_c_source():
    from suite.harness.goldens import golden_files
    assert native.SOURCE.resolve() in [p.resolve() for p in golden_files()]
