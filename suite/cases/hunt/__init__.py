"""The hunt's search space: every operator's parameters as its spec tables allow them.

Each op has a *space* (``@space``, one per op family in this package): a function that builds
one case from a :class:`~suite.cases.hunt.draw.Draw` (every choice a draw that hypothesis can
mutate), over the whole space the tables allow: every table that has the op, its dtypes and
ranges, scales and their ratios over many octaves, zero points anywhere in range, per-channel
spreads, shapes and ranks with extents at tile boundaries, the op's options, data in several
styles. None of the generators' named edge variants is used: the hunt has to find the corners
itself. :func:`params` describes a case by named numbers (the effective requantization
multiplier, the accumulator's size, ...): what a finding's ``where`` matches
(suite/core/findings.toml), for every case the judge judges.
"""

from __future__ import annotations

from . import activation, conv, elementwise, movement, pool, qdq  # noqa: F401 (each registers its spaces)
from .draw import Draw, HypothesisDraw, RandomDraw, op_tables
from .params import PARAMS
from .params import case_params as params
from .space import draw_case, hunt_ops, space

__all__ = ["PARAMS", "Draw", "HypothesisDraw", "RandomDraw", "draw_case", "hunt_ops", "op_tables", "params",
           "space"]
