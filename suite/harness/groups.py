"""The verdict of a whole (op, target) as a pytest item of its own: ``<OP>:<target>::test_group``.

An (op, target) is judged whole by reports.causes.judge_group (its bias under the tolerance
policy, the scheme its target declares; the certificate's ``op_failures`` are the same
verdicts). The report judges it from results.jsonl at the end of the run; the item judges it
the same way (reports.summary.Summary) from the rows this process wrote for the group (and, with
--resume, the rows recorded before), so JUnit, ``-x``, ``--lf`` and the terminal count it, and a
run that exits 1 for a bias has a failed test that says so.

Only an (op, target) with such a rule gets the item: its target declares an ``expected_scheme``,
or a tolerance rule with bias keys can apply to one of its output dtypes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from reports.results import RESULTS, scan
from reports.summary import Summary

GROUP_TEST = "test_group"


def has_group_rule(op: str, target: str, dtypes, policy, expected_scheme: str | None) -> bool:
    """Whether (op, target) has a rule that judges it whole. Versions are not known the same way
    on every xdist worker (each must collect the same items), so a rule bounded by versions counts
    as applying; among the others the last match is the one that applies."""
    if expected_scheme:
        return True
    for dtype in dtypes if policy is not None else ():
        last = None
        for r in policy.rules:
            if not replace(r, versions={}).matches(op, target, dtype, {}):
                continue
            if r.versions and _judges_bias(r):
                return True
            if not r.versions:
                last = r
        if last is not None and _judges_bias(last):
            return True
    return False


def _judges_bias(rule) -> bool:
    return rule.max_mean_err_lsb is not None or rule.bias_alpha is not None


class GroupRows:
    """The last row of each (case, device) of each (op, target) this process judged, until the
    group is judged; then only its verdict (memory flat in the cases: issue #32)."""

    def __init__(self):
        self.rows: dict[tuple[str, str], dict[tuple, dict]] = defaultdict(dict)
        self._judged: dict[tuple[str, str], tuple[int, list[dict]]] = {}

    def add(self, row: dict) -> None:
        key = (row.get("op"), row.get("target"))
        if key[0] is not None and key[1] is not None and key not in self._judged:
            self.rows[key][(row.get("case_id"), row.get("device"))] = row

    def judged(self, op: str, target: str) -> bool:
        return (op, target) in self._judged

    def case_ids(self, op: str, target: str) -> set:
        return {k[0] for k in self.rows.get((op, target), {})}

    def preload(self, folder: str | Path, run_id: str, offset: int) -> None:
        """A resumed run's rows recorded in results.jsonl's first ``offset`` bytes."""
        if offset > 0:
            for _, row in scan(Path(folder) / RESULTS, limit=offset):
                if row.get("run_id") == run_id:
                    self.add(row)

    def judge(self, op: str, target: str, policy, versions: dict, expected: str | None) -> tuple[int, list[dict]]:
        """(distinct cases judged, the group's failures as reports.causes.judge_group gives them).
        The rows are dropped; the verdict stays: the test run again (pytest-rerunfailures) gets the same."""
        if (op, target) in self._judged:
            return self._judged[(op, target)]
        rows = self.rows.pop((op, target), {})
        s = Summary(policy, {target: versions}, {target: expected} if expected else {})
        for r in rows.values():
            s.add(r)
        s.pair_table()
        out = self._judged[(op, target)] = (len({k[0] for k in rows}), s.verdicts.get((op, target), []))
        return out


def after_their_cases(items: list) -> None:
    """Each group item right after the last item of its (op, target) class (a plugin such as
    pytest-randomly may have shuffled them), in place."""
    groups = {id(it.parent): it for it in items if it.name == GROUP_TEST}
    if not groups:
        return
    last = {id(it.parent): i for i, it in enumerate(items) if it.name != GROUP_TEST}
    out: list = []
    for i, it in enumerate(items):
        if it.name == GROUP_TEST and id(it.parent) in last:
            continue
        out.append(it)
        g = groups.get(id(it.parent))
        if g is not None and last.get(id(it.parent)) == i:
            out.append(g)
    items[:] = out
