"""The two htp failures of the default run (issue #24), as minimal case files in tests/data: each is
its finding on htp (a known failure, not a new one)."""

from __future__ import annotations

import pytest

from targets import get_target
from tests.conftest import ROOT, rows_written

DATA = ROOT / "tests" / "data"


def test_the_htp_cases_are_their_findings(run_suite):
    ok, why = get_target("htp").availability()
    if not ok:
        pytest.skip(f"htp: {why}")
    proc, rd = run_suite("--target=htp", f"--case-file={DATA / 'htp-dw-clip-one-end.json'}",
                         f"--case-file={DATA / 'htp-bmm-rank5-batch.json'}", timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:]
    rows = {r["case_id"]: r for r in rows_written(rd)}
    dw, bmm = rows["DEPTHWISE_CONV_2D-htp-clip-one-end"], rows["BATCH_MATMUL-htp-rank5-batch"]
    assert dw["status"] == "fail" and dw["finding"] == "qnn-htp-clip-one-end", dw
    assert dw["worst_got"] == 91 and dw["worst_want"] == 64   # 1.27 unclamped; RELU_N1_TO_1's bound is 64
    assert bmm["status"] == "error" and bmm["finding"] == "qnn-htp-batch-matmul-rank5", bmm
    assert "QNN_COMMON_ERROR_GENERAL" in bmm["reason"]
