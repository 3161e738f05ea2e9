"""The registry of the ops' spaces, and a hunted case's id."""

from __future__ import annotations

from collections.abc import Callable

from suite.core.case import Case

from .draw import Draw

Space = Callable[[Draw, str], Case]
_SPACES: dict[str, Space] = {}


def space(*ops: str):
    """Register ``fn(d, op) -> Case`` as the space of ``ops``."""
    def deco(fn):
        for op in ops:
            _SPACES[op] = fn
        return fn
    return deco


def hunt_ops() -> list[str]:
    return list(_SPACES)


def draw_case(d: Draw, op: str, index: int) -> Case:
    """Case ``index`` of a hunt of ``op``: id ``<OP>-hunt-<index>``, variant ``hunt``."""
    case = _SPACES[op](d, op)
    case.op, case.variant, case.index = op, "hunt", index
    case.id = f"{op}-hunt-{index:03d}"
    if not case.clause:
        case.clause = f"{case.spec}/{op}"
    return case
