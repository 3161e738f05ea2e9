"""Saved case files as a run's cases (``pytest --case-file``): read and checked where they enter."""

from __future__ import annotations

from pathlib import Path

from suite.core.case import Case, expand_case_paths, load_case
from suite.core.errors import QconformError
from suite.core.spec import check_case


def load_case_files(paths: list[str]) -> list[Case]:
    """Load and spec-check case files (files or folders); QconformError naming the first bad one.
    Two files with the same case id: the later one's id gets ``~<file stem>``."""
    cases = []
    seen: set[str] = set()
    for p in expand_case_paths(paths):
        c = load_case(p)
        problems = check_case(c)
        if problems:
            pr = problems[0]
            raise QconformError(f"{pr.message} [{pr.clause}]", source=str(p), field=pr.field,
                                rule="the case must follow its spec table")
        if c.id in seen:
            c.id = f"{c.id}~{Path(p).stem}"
        seen.add(c.id)
        cases.append(c)
    return cases
