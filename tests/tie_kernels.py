"""Kernels that break the golden's rounding ties their own way, for the tie-power tests
(``--target=tests.tie_kernels:HalfUp`` etc.), and the tie count they are judged on.

An exact tie is an element whose unrounded result (the golden's ``exact`` scheme: output LSB,
zero point added) lies on k + 1/2 (within ``reports.causes.TIE_EPS``) and whose golden code is
its away-from-zero neighbour (half away from zero, the spec's rounding; a tie the clamp or a
fused activation decides is no tie of the kernel's rounding). Its sign is that of the result
before the zero point is added: a kernel that rounds half up moves the negative ones +1, one
that rounds half toward zero moves every one 1 toward the zero point.

``Correct``    the golden under the run's default scheme (tflite-ref-double)
``HalfUp``     the golden, with every exact tie rounded toward +inf
``TowardZero`` the golden, with every exact tie rounded toward zero
``HalfEven``   the golden, with every exact tie rounded to the even code (unbiased, other scheme)
"""

from __future__ import annotations

import numpy as np

from reference import golden, has_golden
from reports.causes import TIE_EPS
from suite.core.dtypes import DTYPES
from targets.base import Outcome, Target, Timing


def tie_moves(case) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per output: (golden codes, mask of exact ties, sign of each tie's result before the zero
    point: +1 / -1), for outputs with integer codes."""
    out = []
    want = golden(case)
    exact = golden(case, "exact")
    for w, x, spec in zip(want, exact, case.outputs):
        info = DTYPES[spec.dtype]
        w = np.asarray(w).astype(np.int64)
        if info.qmin is None or not spec.zero_point or len(spec.zero_point) > 1:   # per-tensor outputs only
            out.append((w, np.zeros(w.shape, bool), np.zeros(w.shape, np.int64)))
            continue
        x = np.asarray(x, np.float64).reshape(w.shape)
        z = float(spec.zero_point[0])
        fl = np.floor(x)
        sign = np.where(x - z > 0, 1, -1)
        away = np.where(sign > 0, fl + 1, fl)
        tie = (np.abs(x - fl - 0.5) <= TIE_EPS) & (w == away)
        out.append((w, tie, sign))
    return out


def tie_split(case) -> tuple[int, int]:
    """(positive ties, negative ties) of ``case``'s outputs (module docstring)."""
    pos = neg = 0
    for _, tie, sign in tie_moves(case):
        pos += int((tie & (sign > 0)).sum())
        neg += int((tie & (sign < 0)).sum())
    return pos, neg


class Correct(Target):
    name = "tie-correct"
    description = "the golden's own rounding (test kernel)"
    isolate = False
    expected_scheme = "tflite-ref-double"

    def unsupported(self, case):
        return None if has_golden(case.op) else f"no golden for {case.op}"

    def move(self, w, tie, sign):
        return w

    def run_one(self, case, timing: Timing) -> Outcome:
        outs = []
        for (w, tie, sign), spec in zip(tie_moves(case), case.outputs):
            outs.append(self.move(w, tie, sign).astype(DTYPES[spec.dtype].storage))
        return Outcome.ok(outs, [10.0])


class HalfUp(Correct):
    name = "tie-half-up"
    description = "the golden with every exact tie rounded toward +inf (test kernel)"

    def move(self, w, tie, sign):
        return w + (tie & (sign < 0))


class TowardZero(Correct):
    name = "tie-toward-zero"
    description = "the golden with every exact tie rounded toward zero (test kernel)"

    def move(self, w, tie, sign):
        return w - tie * sign


class HalfEven(Correct):
    name = "tie-half-even"
    description = "the golden with every exact tie rounded to the even code (test kernel)"

    def move(self, w, tie, sign):
        return np.where(tie & (w % 2 != 0), w - sign, w)
