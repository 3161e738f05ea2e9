"""Saved case files as a run's cases (``pytest --case-file``): read and checked where they enter."""

from __future__ import annotations

from pathlib import Path

from reference import golden, has_golden
from suite.core.case import ID_MAX, Case, expand_case_paths, id_problem, load_case
from suite.core.errors import QconformError
from suite.core.spec import check_case


def load_case_files(paths: list[str], scheme: str | None = None) -> list[Case]:
    """Load and check case files (files or folders); QconformError naming the first bad one.

    Each case must follow its spec table, and its golden must be computable under ``scheme``:
    options the golden refuses (``attrs.padding``, ...) are this file's error here, before any
    target runs, not an error charged to the target. Two files with the same case id: the later
    one's id gets ``~<file stem>`` (``~<n>`` if that would not be a valid id)."""
    cases = []
    seen: set[str] = set()
    for p in expand_case_paths(paths):
        c = load_case(p)
        problems = check_case(c)
        if problems:
            pr = problems[0]
            raise QconformError(f"{pr.message} [{pr.clause}]", source=str(p), field=pr.field,
                                rule="the case must follow its spec table")
        check_golden(c, p, scheme)
        if c.id in seen:
            c.id = _unique(c.id, Path(p).stem, seen)
        seen.add(c.id)
        cases.append(c)
    return cases


def _unique(case_id: str, stem: str, seen: set[str]) -> str:
    """``<id>~<file stem>``, or ``<id>~<n>`` when that is taken or not a valid id."""
    new, n = f"{case_id}~{stem}", 2
    while new in seen or id_problem(new):
        new, n = f"{case_id[:ID_MAX - 12]}~{n}", n + 1
    return new


def check_golden(case: Case, path, scheme: str | None = None) -> None:
    """The golden of ``case`` computes (its cost is that of judging the case once), or this
    file's QconformError: the golden's own (the field and the rule it names), or what else it
    raised (a case the spec checks let through, e.g. shapes that do not broadcast)."""
    if not has_golden(case.op):
        return
    try:
        golden(case, scheme)
    except QconformError as e:
        raise QconformError(e.detail, source=str(path), field=e.field, rule=e.rule) from None
    except Exception as e:
        raise QconformError(f"the golden cannot compute this case: {type(e).__name__}: {str(e)[:300]}",
                            source=str(path), rule="the golden computes the case") from None
