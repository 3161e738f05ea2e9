"""The conformance tests users run: one test per (op, target) whose cases are each reported on their
own (``--item=group``, the default), or with ``--item=case`` one per (case, target).

The plugin (suite/plugin.py) makes one class per (op, target) from :class:`Conformance`; its
test_cases runs the group's cases (suite/harness/items.py). With ``--item=case`` it parametrizes
test_case with the op's cases instead; ids are ``<case id>:<target>`` (select with ``-k``, or
``--case-id`` in either mode).
"""

import pytest

from suite.core.verdict import Outcome
from suite.plugin import attach_evidence, known_failure, run_cases, verdict_failed


class Conformance:
    __qconform__ = True

    def test_case(self, qc_verdict, request):
        v = qc_verdict   # an error/crash/timeout/infra verdict is this test's ERROR (the fixture raises)
        attach_evidence(request.config, v.row)
        if v.outcome is Outcome.SKIPPED:
            pytest.skip(f"unsupported on {v.target}: {v.reason}")
        if v.outcome is Outcome.XFAILED:   # with --runxfail: a failure, with its message
            known_failure(request.config, v.xfail_reason, v.message)
        if v.outcome is Outcome.FAILED:
            verdict_failed(v.message)   # (deterministic: pytest-rerunfailures does not run it again)

    def test_cases(self, request):   # --item=group
        run_cases(request)
