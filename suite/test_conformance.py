"""The conformance tests users run: one test per (case, target).

Parametrized by the plugin (``suite/plugin.py``): ids are ``<op>-<variant>-<index>:<target>``.
"""

import pytest


def test_case(qc_verdict):
    v = qc_verdict
    if v.status == "unsupported":
        pytest.skip(f"unsupported on {v.target}: {v.reason}")
    if v.status != "pass":   # waived and known findings carry an xfail mark (suite/plugin.py)
        pytest.fail(v.message(), pytrace=False)
