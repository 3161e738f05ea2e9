"""docs/arithmetic.md is the golden's own per-op rounding table (issue #23): both of its tables
equal reference.registry's data, and each path holds for the goldens."""

from __future__ import annotations

import re

import numpy as np
import pytest

from reference import golden
from reference.registry import ROUNDING_PATHS, golden_ops, rounding_paths
from suite.cases.generate import generate, generator_ops
from tests.conftest import ROOT

DOC = ROOT / "docs" / "arithmetic.md"


def _rows(section: str) -> list[list[str]]:
    text = DOC.read_text().split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    return [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in text.splitlines()
            if ln.startswith("|") and not ln.startswith("| ---")][1:]


def test_the_doc_tables_are_the_registry():
    paths = {k.strip("`"): v for k, v in _rows("Paths")}
    assert paths == ROUNDING_PATHS
    ops = {op: tuple(re.findall(r"`([^`]+)`", v)) for op, v in _rows("Per op")}
    assert ops == rounding_paths()
    assert set(ops) == set(golden_ops()) and all(ops.values())


def test_reports_doc_names_no_false_identity():
    text = (ROOT / "docs" / "reports.md").read_text()
    assert "`caffe-d2` = `tflite-ref-double`" not in text


@pytest.fixture(scope="module")
def cases():
    return [c for c in generate([op for op in generator_ops() if op in rounding_paths()], 4)]


def _same(c, a: str, b: str) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(golden(c, a), golden(c, b)))


def test_each_path_holds_for_the_goldens(cases):
    paths = rounding_paths()
    fc_differs = False
    for c in cases:
        p = paths[c.op]
        if p == ("none",):     # nothing rounds: every scheme gives the same codes
            assert _same(c, "tflite-ref-double", "caffe-d1") and _same(c, "tflite-ref-double", "xnnpack-fp32"), c.id
        elif "fixed-double" in p:   # MultiplyByQuantizedMultiplier, two roundings: SNPS-Caffe D2's arithmetic
            assert _same(c, "tflite-ref-double", "caffe-d2"), c.id
        if c.op == "FULLY_CONNECTED" and not _same(c, "tflite-ref-double", "caffe-d2"):
            fc_differs = True
    assert fc_differs     # float-round: std::round in double, not MBQM
