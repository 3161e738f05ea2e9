"""``--item=group``: one pytest item per (op, target), ``<OP>:<target>::test_cases``, every case still
judged, recorded and reported on its own.

pytest's protocol costs about 0.7 ms an item before any work (docs/performance.md), more than a
target takes for most cases; so the item runs the cases of its (op, target) that this session
selected (``--case-id``, ``--resume``), each judged as ``--item=case`` judges it (Run.verdict: its
row, its failure file, its witnesses). A case that fails or errs is then reported as itself:
pytest's public ``TestReport``, with the node id its own item has under ``--item=case``
(``<OP>:<target>::test_case[<case id>:<target>]``), goes through ``pytest_runtest_logreport``, so
the terminal gives it its own line, the JUnit file its own testcase, and pytest's cache
(``--lf``) its own entry; a passing case is only its row (and, if the cache held it as failed,
a passing report that drops it there); the unsupported cases are reported once per reason they
share (a skipped report under the first one's node id, naming how many and which: pytest keeps
every report to the end of the run). The reports are logged once the item's call phase has ended
(from the plugin's ``pytest_runtest_makereport``), outside output capture; each reported case
counts as one more test collected (pytest's progress percentage counts every node id reported).

``--lf`` / ``--ff`` read pytest's cache (``config.cache``, public): the cases it holds as failed
become per-case items of their own (``test_case[...]``, as under ``--item=case``), which pytest's
own ``--lf`` then selects; the group item runs the rest of its cases.

On a pytest-xdist worker a report must carry its item's node id (xdist checks it); the case's
node id rides along (``qconform_nodeid``) and the controller puts it back when the report
arrives (the plugin's ``pytest_report_from_serializable``).
"""

from __future__ import annotations

import re
import traceback

import pytest

from suite.core.verdict import Outcome, Verdict

from .folder import DiskError

ITEM_MODES = ("case", "group")
GROUP_ITEM = "test_cases"
CASE_ITEM = "test_case"
#: a group item's cases (set when collection is done, dropped when it runs)
CASES = pytest.StashKey[list]()
#: a group item's per-case reports, logged when its call phase has ended
REPORTS = pytest.StashKey[list]()
#: on a pytest-xdist worker: the report's own node id (its item's is the one sent)
NODEID_ATTR = "qconform_nodeid"
#: a case's report (not an item's)
CASE_ATTR = "qconform_case"

_CASE_NODEID = re.compile(r"::" + CASE_ITEM + r"\[(.+):([^:\[\]]+)\]$")


def case_nodeid(class_nodeid: str, case_id: str, target: str) -> str:
    """The node id of (case, target): its item's under --item=case."""
    return f"{class_nodeid}::{CASE_ITEM}[{case_id}:{target}]"


def failed_pairs(config) -> set[tuple[str, str]]:
    """(case id, target) of each case pytest's cache holds as failed (its ``cache/lastfailed``)."""
    cache = getattr(config, "cache", None)
    if cache is None:   # (-p no:cacheprovider)
        return set()
    last = cache.get("cache/lastfailed", {})
    out = set()
    for nodeid in last if isinstance(last, dict) else ():
        m = _CASE_NODEID.search(str(nodeid))
        if m:
            out.add((m.group(1), m.group(2)))
    return out


def class_of(nodeid: str) -> str | None:
    """``<OP>:<target>`` of a conformance test's node id."""
    parts = nodeid.split("::")
    return parts[-2] if len(parts) >= 3 else None


class CaseReports:
    """The reports of one group item's cases."""

    def __init__(self, item, target: str, *, runxfail: bool, on_worker: bool, failed: set, properties):
        self.item, self.target, self.runxfail, self.on_worker = item, target, runxfail, on_worker
        self.failed, self.properties = failed, properties
        path, line, _ = item.location
        self.path, self.line = path, (line or 0) + 1
        self.keywords = {k: 1 for k in item.keywords if k != item.name}
        self.reports: list = []
        self.judged = self.passed = 0
        self.unsupported: dict[str, list[str]] = {}   # reason -> case ids (reported together: unsupported)

    def _make(self, case_id: str, props: list):
        nodeid = case_nodeid(self.item.parent.nodeid, case_id, self.target)
        name = f"{CASE_ITEM}[{case_id}:{self.target}]"
        loc = (self.path, self.line - 1, f"{self.item.parent.name}.{name}")
        kw = self.keywords   # (one dict for the group's reports: pytest only reads it)
        extra = {CASE_ATTR: True, **({NODEID_ATTR: nodeid} if self.on_worker else {})}
        sent = self.item.nodeid if self.on_worker else nodeid

        def rep(when, outcome="passed", longrepr=None, duration=0.0, **more):
            return pytest.TestReport(sent, loc, kw, outcome, longrepr, when, duration=duration,
                                     user_properties=props, **extra, **more)
        return rep

    def add(self, case_id: str, v: Verdict) -> None:
        """The reports of ``v`` (nothing for a pass the cache does not hold as failed)."""
        outcome = v.outcome
        self.judged += 1
        self.passed += outcome is Outcome.PASSED
        if outcome is Outcome.PASSED and (case_id, self.target) not in self.failed:
            return
        if outcome is Outcome.SKIPPED and (case_id, self.target) not in self.failed:
            # not checked, and why: one report per reason (pytest keeps every report to the end:
            # a certification of one kernel on 49 ops reported 48,000 such cases, 5.8 KB each)
            self.unsupported.setdefault(v.reason or "", []).append(case_id)
            return
        props = [(name, v.row[k]) for k, name in self.properties if v.row.get(k) is not None]
        rep = self._make(case_id, props)
        secs = v.seconds or 0.0
        if outcome is Outcome.ERROR:   # as the qc_verdict fixture raises it: an ERROR in setup
            self.reports += [rep("setup", "failed", v.message, secs), rep("teardown")]
            return
        if outcome is Outcome.PASSED:
            call = rep("call", duration=secs)
        elif outcome is Outcome.SKIPPED:
            call = rep("call", "skipped", (self.path, self.line, f"Skipped: unsupported on {v.target}: {v.reason}"),
                       secs)
        elif outcome is Outcome.XFAILED and not self.runxfail:
            call = rep("call", "skipped", None, secs, wasxfail=v.xfail_reason)
        else:   # a failure (with --runxfail, a known one too)
            call = rep("call", "failed", v.message, secs)
        self.reports += [rep("setup"), call, rep("teardown")]

    def add_unsupported(self) -> None:
        """One skipped report for each reason this group's unsupported cases share, under its first
        case's node id, naming how many and which (their rows say it of each)."""
        for reason, ids in self.unsupported.items():
            n = len(ids)
            named = ", ".join(ids[:5]) + (f" and {n - 5} more" if n > 5 else "")
            text = f"Skipped: unsupported on {self.target}: {reason}" + (f" ({n} cases: {named})" if n > 1 else "")
            rep = self._make(ids[0], [("qconform.status", "unsupported"), ("qconform.cases", n)])
            self.reports += [rep("setup"), rep("call", "skipped", (self.path, self.line, text)), rep("teardown")]
        self.unsupported = {}

    def error(self, case_id: str, e: BaseException) -> None:
        """Judging the case raised (a harness bug): its ERROR, with the traceback."""
        text = "".join(traceback.format_exception(e))
        rep = self._make(case_id, [])
        self.reports += [rep("setup", "failed", text), rep("teardown")]


def run_group(item, run, target: str, cases: list, add_row, reports: CaseReports) -> None:
    """Judge each of ``cases`` on ``target`` in the order given (Run.verdict: row, failure file,
    witnesses), hand each row to ``add_row`` (the group verdicts'), and keep each case's reports
    in ``item.stash[REPORTS]``. Nothing of a case stays here once its reports are made."""
    item.stash[REPORTS] = reports.reports
    for case in cases:
        try:
            v = run.verdict(case, target)
        except DiskError:   # the caller's: the run ends
            raise
        except Exception as e:
            reports.error(case.id, e)
            continue
        add_row(v.row)
        reports.add(case.id, v)
        if item.session.shouldstop:
            break
    reports.add_unsupported()
    # its JUnit testcase says what it covered (the other cases have testcases of their own)
    item.user_properties += [("qconform.cases", reports.judged), ("qconform.passed", reports.passed)]


def log_reports(item) -> None:
    """Log a group item's per-case reports (its call phase has ended: nothing captures them)."""
    reports = item.stash.get(REPORTS, None)
    if reports:
        item.stash[REPORTS] = []
        for rep in reports:
            if not getattr(rep, NODEID_ATTR, None):   # (a worker's reports: counted where they arrive)
                count_case(rep, item.session)
            item.ihook.pytest_runtest_logreport(report=rep)


def count_case(rep, session) -> None:
    """A reported case is one more test collected (pytest's progress: node ids reported / collected)."""
    if rep.when == "setup" and getattr(rep, CASE_ATTR, False) and session is not None:
        session.testscollected += 1
