"""A slow pure-Python target for the run-folder tests (not shipped as a target)."""

from __future__ import annotations

import os
import time

import numpy as np

from reference import golden
from targets.base import Outcome, Target, Timing


class Slow(Target):
    """The golden, each case after ``QCONFORM_SLOW_S`` seconds (default 0.2). With
    ``QCONFORM_SLOW_GATE=PATH`` every MUL case waits until PATH exists: a test holds a run
    in the middle (ADD judged, MUL running) for as long as it needs, however busy the machine."""

    name = "slow"
    isolate = False

    def run_one(self, case, timing: Timing) -> Outcome:
        time.sleep(float(os.environ.get("QCONFORM_SLOW_S", "0.2")))
        gate = os.environ.get("QCONFORM_SLOW_GATE")
        if gate and case.op == "MUL":
            deadline = time.monotonic() + 600
            while not os.path.exists(gate) and time.monotonic() < deadline:
                time.sleep(0.02)
        return Outcome.ok([np.array(o) for o in golden(case)], [1.0])
