"""Small targets used by the project's tests of the harness (not shipped as targets)."""

from __future__ import annotations

import numpy as np

from targets.base import Outcome, Target, Timing


class OffByOne(Target):
    """The golden, off by 2 LSB on element 0 of output 0 of every case whose index is odd.

    (2 LSB: beyond the default 1 LSB tolerance of an unknown target.)"""

    name = "off-by-one"

    def run_one(self, case, timing: Timing) -> Outcome:
        from reference import golden
        outs = [np.array(o) for o in golden(case)]
        if case.index % 2 == 1 and outs[0].size:
            from suite.core.dtypes import DTYPES
            flat = outs[0].reshape(-1)
            v = int(flat[0])   # 2 codes away, within the output dtype's range (uint8 0 must not wrap to 254)
            flat[0] = v - 2 if v - 2 >= DTYPES[case.outputs[0].dtype].qmin else v + 2
        return Outcome.ok(outs, [1.0])


class Refuses(Target):
    """Says every MUL case is unsupported, runs ADD through the golden."""

    name = "refuses"

    def unsupported(self, case):
        return "MUL is not implemented by this kernel" if case.op == "MUL" else None

    def run_one(self, case, timing: Timing) -> Outcome:
        from reference import golden
        return Outcome.ok(golden(case), [1.0])


class Raises(Target):
    """Raises on every case: an error verdict, not a failure."""

    name = "raises"

    def run_one(self, case, timing: Timing) -> Outcome:
        raise RuntimeError("kernel exploded")


class WrongShape(Target):
    name = "wrong-shape"

    def run_one(self, case, timing: Timing) -> Outcome:
        return Outcome.ok([np.zeros((1, 2, 3, 4, 5), np.int8)], [1.0])
