"""A pytest plugin for ``qconform bench --suite``: the run without the judge's golden memo.

Loaded with ``-p suite.bench.no_memo`` (in every pytest-xdist worker too: workers get the
controller's ``-p``). It measures what :class:`suite.harness.judge.Goldens` saves by keeping
each case's goldens while its operator is judged, so that the case's other targets reuse them.

The patch (made at ``pytest_configure``, never on import) drops only that in-memory memo:
every judgement (:meth:`Judge.__call__ <suite.harness.judge.Judge.__call__>`: one case on one
target) starts with an empty memo of the operator, so the case's goldens, digest and scheme
stack are looked up again for each of its targets: read from the golden store when it has
them, else computed. Within one judgement the memo still works (the judge asks for the run's
scheme, then the other schemes for the mismatch analysis: without it the same golden would be
computed twice in one verdict, which no design without a memo between targets would do).

The store behaves as without the patch: the operator is unchanged (``Goldens._op``), so the
pending new goldens (``Goldens._new``) are written at the same moments (when the next operator
starts, and at the run's end), one write per case; the same golden is computed again by a later
target of the case (it is not in the store before that write) and replaces an equal array in
``_new``. Only the store's reads grow: one per judgement instead of one per case and operator.
"""

from __future__ import annotations

from suite.harness import judge

_ORIGINAL_CALL = judge.Judge.__call__


def forget(goldens: judge.Goldens) -> None:
    """Drop the operator's memo of goldens (cases, digests, scheme stacks); keep the operator and
    the goldens not yet written to the store."""
    goldens._cases = {}
    goldens._digests.clear()


def _judge_without_memo(self, case, target, o, versions):
    forget(self.goldens)
    return _ORIGINAL_CALL(self, case, target, o, versions)


def patch() -> None:
    judge.Judge.__call__ = _judge_without_memo


def unpatch() -> None:
    judge.Judge.__call__ = _ORIGINAL_CALL


def pytest_configure(config):
    patch()


def pytest_unconfigure(config):
    unpatch()
