"""``ref``: the golden itself, as a target (a sanity check of the harness)."""

from __future__ import annotations

import numpy as np

from reference import golden, has_golden
from targets.base import Outcome, Target, Timing


class RefTarget(Target):
    name = "ref"
    description = "the suite's own NumPy golden (sanity target)"
    isolate = False   # the golden (NumPy; its C dot product is probed in a separate process first): in the pytest process

    def versions(self):
        return {"numpy": np.__version__}

    def unsupported(self, case):
        return None if has_golden(case.op) else f"no golden for {case.op}"

    def run_one(self, case, timing: Timing) -> Outcome:
        scheme = self.options.get("scheme")
        outs, samples = Timing(warmup=0, repeats=1).measure(lambda: golden(case, scheme))
        return Outcome.ok(outs, samples)
