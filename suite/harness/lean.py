"""The lean test protocol: the plugin reports each conformance test itself.

A conformance test's body is the suite's own (suite/test_conformance.py): look up the
verdict, then pass, fail, skip (``unsupported``), xfail (a known finding or a waiver) or
error (``error``/``crash``/``timeout``/``infra``). Through pytest's full protocol each test
also costs fixture set-up and tear-down, three output-capture swaps of file descriptors and
a dozen hook calls: about 0.6 ms a test, 4 s of the default run's 6,024 tests, in the one
Python thread that also judges the targets' outcomes.

With ``--test-protocol lean`` (the default) :func:`run_item` makes, for each conformance
test, the reports pytest's own protocol makes for it (``pytest_runtest_logstart``, the
setup / call / teardown ``TestReport``\\ s through ``pytest_runtest_logreport``,
``pytest_runtest_logfinish``): the same outcomes, messages, skip locations, ``wasxfail``
reasons, ``user_properties`` (JUnit XML) and durations, so the terminal, ``-x`` /
``--maxfail``, ``--junitxml``, ``--lf`` and pytest-xdist see the same run. What it skips are
the per-test hooks of set-up and call (``pytest_runtest_setup`` / ``_call`` /
``_makereport``): a plugin that needs them gets them with ``--test-protocol pytest``;
``--pdb``, ``--trace``, ``--runxfail`` and a test carrying a skip / skipif / xfail /
usefixtures mark (added by a user's plugin or conftest) take pytest's protocol anyway. Every
other test (the project's own, a user's) always runs through pytest's protocol.
"""

from __future__ import annotations

import time

from _pytest.reports import TestReport

from reports.results import ERROR_STATUSES

PROPERTIES = ("status", "bit_exact", "max_abs_lsb", "mismatches", "elements", "p50_us", "repro")


def properties(v) -> list[tuple[str, object]]:
    """The verdict's JUnit XML properties (``qconform.<field>``)."""
    return [(f"qconform.{k}", v.row[k]) for k in PROPERTIES if v.row.get(k) is not None]


def xfail_reason(v) -> str | None:
    """Why a verdict is an expected failure (a waiver or a known finding), else None."""
    if v.status == "waived":
        return f"waived: {v.reason}"
    if v.finding is not None:
        return f"known finding {v.finding.id} ({v.status}): {v.finding.reason}"
    return None


def _failed(item, message: str):
    """The report of ``pytest.fail(message, pytrace=False)`` in the test, as pytest makes it
    (a "Failed: ..." crash line for the terminal and JUnit XML, no traceback)."""
    import pytest
    from _pytest._code import ExceptionInfo
    try:
        raise pytest.fail.Exception(message, pytrace=False)
    except pytest.fail.Exception as e:
        return item.repr_failure(ExceptionInfo.from_exception(e))


def is_conformance_item(item) -> bool:
    """A conformance test the lean protocol may report: the suite's ``test_case`` with no
    skip / skipif / xfail mark of anyone's (those take pytest's own protocol, which evaluates them)."""
    cs = getattr(item, "callspec", None)
    if not (getattr(item, "originalname", None) == "test_case" and cs is not None
            and cs.params.get("qc_pair") is not None):
        return False
    return not any(m.name in ("skip", "skipif", "xfail", "usefixtures") for m in item.iter_markers())


def _teardown(item, nextitem) -> None:
    """Tear down what pytest's protocol left set up for the tests up to ``nextitem``: a test before
    this one that took pytest's protocol (a marked conformance test) keeps its module set up
    for its successor, and pytest's next own set-up (another module's test) expects it gone.
    Nothing to do in a run of lean tests alone."""
    state = item.session._setupstate
    if getattr(state, "stack", None):
        state.teardown_exact(nextitem)


def run_item(item, nextitem, run) -> bool:
    """Report one conformance test as pytest's protocol would; True (the item is done)."""
    ihook = item.ihook
    ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    keywords = {k: 1 for k in item.keywords}

    def report(when: str, outcome: str, longrepr, start: float, stop: float, **extra) -> TestReport:
        rep = TestReport(item.nodeid, item.location, keywords, outcome, longrepr, when,
                         duration=stop - start, start=start, stop=stop,
                         user_properties=list(item.user_properties), **extra)
        ihook.pytest_runtest_logreport(report=rep)
        return rep

    case, target = item.callspec.params["qc_pair"]
    t0, w0 = time.perf_counter(), time.time()
    try:
        v = run.verdict(case, target)
    except Exception as e:   # a harness bug: ERROR at set-up with its traceback, as the fixture would
        from _pytest._code import ExceptionInfo
        w1 = time.time()
        report("setup", "failed", item.repr_failure(ExceptionInfo.from_exception(e)), w0, w1)
        _teardown(item, nextitem)
        report("teardown", "passed", None, w1, w1)
        ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True
    item.user_properties.extend(properties(v))
    w1 = w0 + (time.perf_counter() - t0)
    why = xfail_reason(v)
    if v.status in ERROR_STATUSES and why is None:      # the target could not give an outcome
        report("setup", "failed", v.message(), w0, w1)
    else:
        report("setup", "passed", None, w0, w1)
        if v.status == "pass":
            report("call", "passed", None, w1, w1)
        elif why is not None:
            report("call", "skipped", v.message(), w1, w1, wasxfail=why)
        elif v.status == "unsupported":
            path, line = item.reportinfo()[:2]
            report("call", "skipped", (str(path), (line or 0) + 1,
                                       f"Skipped: unsupported on {v.target}: {v.reason}"), w1, w1)
        else:
            report("call", "failed", _failed(item, v.message()), w1, w1)
    _teardown(item, nextitem)
    report("teardown", "passed", None, w1, w1)
    ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
