"""The conformance tests users run: one test per (case, target).

Parametrized by the plugin (``suite/plugin.py``): ids are ``<op>-<variant>-<index>:<target>``.
"""

import pytest


def test_case(qc_verdict):
    v = qc_verdict
    if v.status == "unsupported":
        pytest.skip(f"unsupported on {v.target}: {v.reason}")
    if v.status == "waived":
        pytest.xfail(f"waived: {v.reason}")
    if v.status == "fail" and v.finding is not None:
        pytest.xfail(f"known finding {v.finding.id}: {v.finding.reason}")
    if v.status != "pass":
        pytest.fail(v.message(), pytrace=False)
