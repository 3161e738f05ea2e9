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
    if v.finding is not None:   # a known runtime bug (suite/findings.toml): shown, labelled, not hidden
        pytest.xfail(f"known finding {v.finding.id} ({v.status}): {v.finding.reason}")
    if v.status != "pass":
        pytest.fail(v.message(), pytrace=False)
