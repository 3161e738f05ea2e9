"""Test targets for the bias and declared-scheme checks (``--target=tests.bias_targets:Class``).

``HalfUp``        the golden under ``arm-half-up-double``: LiteRT's kernels, but every
                  MultiplyByQuantizedMultiplier's final shift rounds ties toward +inf (as ARM's
                  SRSHL does without gemmlowp's fixup): each error is +1 at a negative tie
``HalfUpClaimsRef``  the same kernel, declaring ``expected_scheme = "tflite-ref-double"``
``TurnsBiased``   "mykernel": the golden, or HalfUp with ``QCONFORM_BIASED=1``
"""

from __future__ import annotations

import numpy as np

from reference import golden, has_golden
from targets.base import Outcome, Target, Timing


class HalfUp(Target):
    name = "half-up"
    description = "LiteRT's arithmetic with ties of the final shift toward +inf (test target)"
    isolate = False
    scheme = "arm-half-up-double"

    def unsupported(self, case):
        return None if has_golden(case.op) else f"no golden for {case.op}"

    def run_one(self, case, timing: Timing) -> Outcome:
        return Outcome.ok([np.array(o, copy=True) for o in golden(case, self.scheme)], [10.0])


class HalfUpClaimsRef(HalfUp):
    name = "half-up-claims-ref"
    expected_scheme = "tflite-ref-double"


class TurnsBiased(HalfUp):
    """A user kernel that turns biased: the golden (``tflite-ref-double``) unless
    ``QCONFORM_BIASED=1``, then :class:`HalfUp`'s ties up (a "night" whose kernel changed)."""
    name = "mykernel"
    description = "the golden, or with QCONFORM_BIASED=1 ties toward +inf (test target)"

    def run_one(self, case, timing: Timing) -> Outcome:
        import os
        scheme = self.scheme if os.environ.get("QCONFORM_BIASED") == "1" else "tflite-ref-double"
        return Outcome.ok([np.array(o, copy=True) for o in golden(case, scheme)], [10.0])
