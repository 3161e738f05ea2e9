"""`qconform shrink`: smaller failing cases whose outputs are exactly a window of the original."""

from __future__ import annotations

import json

import numpy as np
import pytest

from reference import golden, has_golden
from suite.core.case import load_case, save_case
from suite.core.errors import QconformError
from suite.cases.generate import make_case
from suite.harness.shrink import Judgement, elements, shrink, window_case
from suite.core.spec import check_case

BUG = "tests.helper_targets:SaturationBug"


def _needs(op):
    if not has_golden(op):
        pytest.skip(f"no golden for {op} yet")


def _window(arr, win):
    return np.asarray(arr)[tuple(slice(a, b) for a, b in win)]


def _random_windows(shape, rng, n):
    for _ in range(n):
        win = []
        for d in shape:
            a = int(rng.integers(0, d))
            win.append((a, int(rng.integers(a + 1, d + 1))))
        yield win


@pytest.mark.parametrize("op,variants", [
    ("CONV_2D", ["random", "strided", "dilated", "odd_shape", "perchannel_wide", "zp_min"]),
    ("DEPTHWISE_CONV_2D", ["random", "depth_multiplier", "strided", "odd_shape"]),
    ("FULLY_CONNECTED", ["random", "per_tensor", "keep_num_dims", "rank3"]),
    ("ADD", ["random", "broadcast"]),
    ("MUL", ["broadcast"]),
    ("AVERAGE_POOL_2D", ["random"]),
])
def test_a_window_case_computes_exactly_that_window(op, variants):
    """The golden of every sub-case equals the same window of the original golden."""
    _needs(op)
    from suite.cases.generate import get_generator
    known = get_generator(op).variants
    rng = np.random.default_rng(7)
    checked = 0
    for v in variants:
        if v != "random" and v not in known:
            continue
        for idx in range(2):
            case = make_case(op, v, idx)
            full = golden(case)[0]
            for win in _random_windows(case.outputs[0].shape, rng, 6):
                if op == "DEPTHWISE_CONV_2D":   # whole depth-multiplier groups
                    m = case.inputs[1].shape[3] // case.inputs[0].shape[3]
                    a, b = win[3]
                    win[3] = ((a // m) * m, -(-b // m) * m)
                sub = window_case(case, win)
                if sub is None:
                    continue
                assert not check_case(sub), (case.id, win, check_case(sub))
                np.testing.assert_array_equal(golden(sub)[0], _window(full, win), err_msg=f"{case.id} {win}")
                checked += 1
    assert checked >= 5


def test_shrink_cli_reduces_a_failing_conv_to_a_quarter(tmp_path, qconform_cli):
    _needs("CONV_2D")
    from tests.helper_targets import SaturationBug
    from targets.base import Timing
    t = SaturationBug()
    case = None
    for v in ("sat_hi", "random", "zp_min"):
        for i in range(3):
            c = make_case("CONV_2D", v, i)
            o = t.run_one(c, Timing(0, 1))
            if not np.array_equal(o.outputs[0], golden(c)[0]) and c.outputs[0].size >= 8:
                case = c
                break
        if case:
            break
    assert case is not None, "no CONV_2D case saturates"
    src = save_case(case, tmp_path / f"{case.id}.json")
    out = tmp_path / "small.json"
    p = qconform_cli("shrink", str(src), "--target", BUG, "-o", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    small = load_case(out)
    doc = json.loads(out.read_text())
    assert elements(small) * 4 <= elements(case), (elements(small), elements(case))
    assert small.outputs[0].size * 4 <= case.outputs[0].size
    assert doc["shrunk_from"] == case.id and doc["target"] == BUG and doc["got"] and doc["want"]
    assert not check_case(small)
    # it still fails on the target, and its golden is the window of the original one
    o = t.run_one(small, Timing(0, 1))
    assert not np.array_equal(o.outputs[0], golden(small)[0])
    np.testing.assert_array_equal(golden(small)[0], _window(golden(case)[0], doc["shrink"]["window"]))
    assert "reproduce: pytest --target=" in p.stdout


def test_shrink_halves_when_no_single_element_fails():
    """A bug that needs two saturated outputs together: the search halves dimensions instead."""
    _needs("ADD")
    case = next(c for c in (make_case("ADD", "sat_hi", i) for i in range(2))
                if int((golden(c)[0] == 127).sum()) >= 4)

    tried_one = []

    def judge(c):
        sat = golden(c)[0] == 127
        n = int(sat.sum())
        tried_one.append(c.outputs[0].size == 1)
        # errors at the saturated elements: the search first tries each alone (and none fails alone)
        return Judgement(n >= 2, "fail" if n >= 2 else "pass", golden(c), errors=[sat.astype(np.int64)],
                         reason=f"{n} saturated")
    res = shrink(case, judge)
    assert any(tried_one)
    assert (golden(res.case)[0] == 127).sum() >= 2
    assert res.case.outputs[0].size < case.outputs[0].size
    assert res.steps and res.runs <= 200


def test_shrink_refuses_a_passing_case():
    _needs("ADD")
    case = make_case("ADD", "random", 0)
    with pytest.raises(QconformError, match="does not fail"):
        shrink(case, lambda c: Judgement(False, "pass"))


#: htp's failing ops that had no shrinker (issue #34), each shrunk by slicing its inputs
SLICED = ["PAD", "PADV2", "MEAN", "SQUEEZE", "BATCH_MATMUL", "TRANSPOSE_CONV", "GATHER", "CONCATENATION",
          "TRANSPOSE", "STRIDED_SLICE", "SUM", "SPACE_TO_BATCH_ND"]


@pytest.mark.parametrize("op", SLICED)
def test_every_op_shrinks_by_slicing_its_inputs(op):
    """A failure that persists in every valid sub-case shrinks; each sub-case the search keeps
    follows its spec table and its outputs are the golden's shape on its sliced inputs."""
    _needs(op)
    case = make_case(op, "random", 0)
    seen = []

    def judge(c):
        assert not check_case(c), check_case(c)
        assert [tuple(np.shape(g)) for g in golden(c)] == [tuple(o.shape) for o in c.outputs]
        seen.append(elements(c))
        return Judgement(True, "fail", reason="always")
    res = shrink(case, judge)
    assert res.after < res.before and res.steps, (op, res.before, res.after)
    # a failure that needs the whole input is left whole: only failing sub-cases are kept
    big = shrink(case, lambda c: Judgement(elements(c) == elements(case), "fail"))
    assert big.after == big.before


def test_shrink_cli_errors(tmp_path, qconform_main):
    _needs("ADD")
    src = save_case(make_case("ADD", "random", 0), tmp_path / "a.json")
    p = qconform_main("shrink", str(src))
    assert p.returncode == 2 and "--target" in p.stderr
    p = qconform_main("shrink", str(src), "--target", "ref")
    assert p.returncode == 2 and "does not fail" in p.stderr and "Traceback" not in p.stderr


def test_shrink_of_a_crashing_case_survives_the_crash(tmp_path):
    """A crash failure file (segfault in the kernel) shrinks like any failure: the target runs in a
    worker process, so each crash is the judgement of that sub-case, not the end of `qconform shrink`."""
    import os
    import subprocess
    import sys
    from tests.conftest import ROOT
    _needs("ADD")
    case = make_case("ADD", "random", 0)
    src = save_case(case, tmp_path / "crash.json")
    out = tmp_path / "small.json"
    env = dict(os.environ, QCONFORM_FAULTS=json.dumps({case.id: "segv"}))   # sub-cases keep the id
    p = subprocess.run([sys.executable, "-m", "suite", "shrink", str(src), "--target", "tests.fault_targets:Faulty",
                        "--max-runs", "6", "-o", str(out)], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads(out.read_text())
    assert doc["shrink"]["verdict"] == "crash" and "SIGSEGV" in doc["shrink"]["reason"]
    assert elements(load_case(out)) < elements(case)
