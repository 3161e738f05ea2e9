"""Power where it matters (issue #23): every requantizing op's default cases hold at least 64
exact ties on each side of the zero point (counted with the golden's ``exact`` scheme, which
labels ties), so that a kernel breaking ties one way fails the sign test with p < 1e-12 on
that op alone; and ``--certify`` refuses such kernels (tests/tie_kernels.py) while it certifies
the correct one."""

from __future__ import annotations

import json
from reports.certify import read_certificate

import pytest

from suite.cases.generate import generate
from suite.core import spec
from suite.core.tolerance import sign_test_p
from tests.conftest import ROOT
from tests.tie_kernels import tie_split
from tests.inprocess import run_inprocess

pytest_plugins = "pytester"

#: every op whose golden rounds a rescaled result to the nearest code with ties away from zero
#: (docs/arithmetic.md); RELU and RELU6 clamp every result below the zero point, so they have
#: positive ties only
REQUANTIZING = ["ADD", "SUB", "MUL", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV",
                "BATCH_MATMUL", "AVERAGE_POOL_2D", "MEAN", "SUM", "QUANTIZE", "LEAKY_RELU", "RESIZE_BILINEAR"]
ONE_SIDED = ["RELU", "RELU6"]
MIN_TIES = 64


@pytest.fixture(scope="module")
def ties():
    """{op: (positive ties, negative ties)} over the default run's cases (30 per op, seed 0)."""
    out = {}
    for c in generate(REQUANTIZING + ONE_SIDED):
        p, n = tie_split(c)
        a = out.get(c.op, (0, 0))
        out[c.op] = (a[0] + p, a[1] + n)
    return out


@pytest.mark.parametrize("op", REQUANTIZING)
def test_default_cases_hold_64_ties_a_side(ties, op):
    pos, neg = ties[op]
    assert pos >= MIN_TIES and neg >= MIN_TIES, (op, pos, neg)
    # a kernel rounding half up moves every negative tie +1, one rounding toward zero every tie
    assert sign_test_p(neg, 0) < 1e-12 and sign_test_p(0, pos + neg) < 1e-12


@pytest.mark.parametrize("op", ONE_SIDED)
def test_clamped_ops_hold_64_positive_ties(ties, op):
    assert ties[op][0] >= MIN_TIES and ties[op][1] == 0, ties[op]


def test_ties_cases_follow_their_spec_table():
    cases = [c for c in generate(REQUANTIZING) if c.variant == "ties"]
    assert {c.op for c in cases} == {"MUL", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "TRANSPOSE_CONV",
                                     "BATCH_MATMUL", "MEAN", "SUM", "LEAKY_RELU"}
    for c in cases:
        assert spec.check_case(c) == [], c.id


def test_ties_cases_are_added_beyond_cases_per_op():
    # the op's 30 come first, unchanged; the ``ties`` cases are extras (as QNN's are)
    from suite.cases.generate import case_id, get_generator
    ids = [c.id for c in generate(["FULLY_CONNECTED"], 30)]
    assert ids[:30] == [case_id("FULLY_CONNECTED", v, i) for v, i in get_generator("FULLY_CONNECTED").plan(30)]
    assert "FULLY_CONNECTED-ties-000" in ids[30:] and "FULLY_CONNECTED-ties-001" in ids[30:]
    assert len(ids) == 38


# ----------------------------------------------------------------------------- certify

def _certify(pytester, targets, ops, *extra):
    run, rd = run_inprocess(pytester, "--target=" + ",".join(f"tests.tie_kernels:{t}" for t in targets),
                            "--ops", ",".join(ops), "--certify", *extra)
    cert = read_certificate(rd)
    return run, {(o["target"], o["op"]): o for o in cert["ops"] if o["spec"] == "litert-int8"}


# one op of each requantizing family: elementwise, conv (FULLY_CONNECTED, the issue's), pool, reduce,
# quantize, activation, resize; each at the default 30 cases per op. The tie-breaking kernels are
# the golden with its ties moved; the vendor's FULLY_CONNECTED is written from the docs.
FAMILIES = ["FULLY_CONNECTED", "ADD", "CONV_2D", "AVERAGE_POOL_2D", "MEAN", "QUANTIZE", "LEAKY_RELU",
            "RESIZE_BILINEAR"]
BIT_EXACT = f"--tolerance={ROOT / 'examples' / 'kernels' / 'bit-exact.toml'}"
VENDOR = {"HalfUp": "VendorFCHalfUp", "TowardZero": "VendorFCTowardZero", "Correct": "VendorFC"}
NAMES = {"HalfUp": ("tie-half-up", "vendor-fc-half-up"), "TowardZero": ("tie-toward-zero", "vendor-fc-toward-zero"),
         "Correct": ("tie-correct", "vendor-fc")}


@pytest.mark.parametrize("kernel", ["HalfUp", "TowardZero", "Correct"])
def test_certify_refuses_one_way_tie_breaking_in_every_family(pytester, kernel):
    run, ops = _certify(pytester, [kernel, VENDOR[kernel]], FAMILIES, *([BIT_EXACT] if kernel == "Correct" else []))
    moved, vendor = NAMES[kernel]
    judged = [(moved, op) for op in FAMILIES] + [(vendor, "FULLY_CONNECTED")]
    assert set(judged) <= set(ops)
    for key in judged:
        o = ops[key]
        t = o["toward_zero_point"]
        if kernel == "Correct":
            assert o["verdict"] == "bit-exact", (key, o)
        elif kernel == "HalfUp":    # every negative tie +1: biased above the golden
            assert o["verdict"] == "non-conformant" and o["bias"]["p"] < 1e-12, (key, o)
            assert any("biased +" in w for w in o["op_failures"]), (key, o["op_failures"])
        else:    # balanced above / below, but every tie shrinks: the certificate's own rule
            assert o["verdict"] == "non-conformant" and t["away"] == 0 and sign_test_p(t["toward"], 0) < 1e-12, (key, o)
            assert any("shrink toward the zero point" in w for w in o["op_failures"]), (key, o["op_failures"])
    # (the run fails too: biased, or the declared scheme beaten by >= 20 elements)
    assert run.returncode == (0 if kernel == "Correct" else 1)


def test_vendor_fully_connected_is_conformant_under_the_default_tolerance(pytester):
    run, ops = _certify(pytester, ["VendorFC"], ["FULLY_CONNECTED"])
    o = ops[("vendor-fc", "FULLY_CONNECTED")]
    assert run.returncode == 0 and o["verdict"] in ("bit-exact", "conformant within tolerance"), o


# ----------------------------------------------------------------------------- the certificate's rules

def _entry(*rows):
    from reports.certify import read_certificate, _Entry
    e = _Entry()
    for r in rows:
        e.add({"status": "pass", "case_id": "c", "case_digest": "d", "out_dtype": "int8", "pos_err": 0, "neg_err": 0,
               **r})
    return e


def test_a_declared_scheme_losing_only_on_ties_is_refused():
    run = "tflite-ref-double"
    ties_only = _entry({"elements": 100, "mismatches": 3, "causes": {"tie": 3},
                        "scheme_exact": {run: 97, "xnnpack-fp32": 100}})
    best, why = ties_only.tie_scheme_failure(run, run)
    assert best == "xnnpack-fp32" and "every one a rounding tie" in why
    assert ties_only.tie_scheme_failure("ort-fp32-rne", run)[1] is None      # declared another scheme: the run's rule
    mixed = _entry({"elements": 100, "mismatches": 3, "causes": {"tie": 2, "scheme": 1},
                    "scheme_exact": {run: 97, "xnnpack-fp32": 100}})
    assert mixed.tie_scheme_failure(run, run)[1] is None                      # not only ties: the gap rule (20)
    exact = _entry({"elements": 100, "mismatches": 0, "scheme_exact": {run: 100, "xnnpack-fp32": 100}})
    assert exact.tie_scheme_failure(run, run) == (run, None)


def test_outputs_shrinking_toward_the_zero_point_are_refused():
    from suite.core.tolerance import load_policy
    tol = load_policy().lookup("ADD", "x", "int8")
    shrink = _entry({"elements": 1000, "mismatches": 30, "toward_zp_err": 30, "pos_err": 15, "neg_err": 15})
    assert "shrink toward the zero point" in shrink.shrink_failure(tol)
    even = _entry({"elements": 1000, "mismatches": 30, "toward_zp_err": 16, "pos_err": 15, "neg_err": 15})
    assert even.shrink_failure(tol) is None
    few = _entry({"elements": 1000, "mismatches": 19, "toward_zp_err": 19, "pos_err": 10, "neg_err": 9})
    assert few.shrink_failure(tol) is None                                     # below bias_min_mismatches (20)
