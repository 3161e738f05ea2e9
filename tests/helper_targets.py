"""Test targets for the project's own tests (``--target=tests.helper_targets:Class``).

All return the golden's own outputs, possibly damaged in a documented, deterministic
way, and report a deterministic latency (so two runs are identical to the last bit):

``GoldenTarget``   the golden, untouched; latency 10 µs + 1 µs per 100 output elements,
                   times ``QCONFORM_LATENCY_SCALE`` (default 1; e.g. 2 for a "slower" runtime)
``FlipOneLsb``     the golden with the first output element moved by one LSB on the cases
                   that :func:`flipped` selects (``QCONFORM_FLIP_EVERY=N``: crc32(case id) % N
                   == 0, default 3; 0 turns flipping off, so a baseline run can use the same
                   target name)
``WrongTarget``    the first output element moved by 3 LSB on the cases :func:`flipped` selects
                   (every third by default): beyond any default tolerance
``SaturationBug``  outputs at the top of the dtype come out 3 LSB lower (a value-dependent bug,
                   for shrinking)
"""

from __future__ import annotations

import os
import zlib

import numpy as np

from targets.base import Outcome, Target, Timing


def flip_every() -> int:
    return int(os.environ.get("QCONFORM_FLIP_EVERY", "3"))


def flipped(case_id: str, every: int | None = None) -> bool:
    """Whether the helper targets damage this case: crc32(id) % every == 0 (every 0: never)."""
    every = flip_every() if every is None else every
    return every > 0 and zlib.crc32(case_id.encode()) % every == 0


class GoldenTarget(Target):
    name = "golden"
    description = "the golden with a deterministic latency (test target)"

    def versions(self):
        return {"helper": "1.0"}

    def unsupported(self, case):
        from reference import has_golden
        return None if has_golden(case.op) else f"no golden for {case.op}"

    def outputs(self, case) -> list[np.ndarray]:
        from reference import golden
        return [np.array(o, copy=True) for o in golden(case)]

    def run_one(self, case, timing: Timing) -> Outcome:
        outs = self.outputs(case)
        scale = float(os.environ.get("QCONFORM_LATENCY_SCALE", "1"))
        lat = (10.0 + case.n_output_elements() / 100.0) * scale
        return Outcome.ok(outs, [lat] * max(1, timing.repeats))


def _nudge(arr: np.ndarray, dtype: str, lsb: int) -> None:
    """Move the first element by ``lsb`` codes, away from the dtype's top if it is there."""
    from suite.core.dtypes import DTYPES
    info = DTYPES[dtype]
    flat = arr.reshape(-1)
    if not flat.size:
        return
    v = int(flat[0])
    flat[0] = v - lsb if v + lsb > info.qmax else v + lsb


class FlipOneLsb(GoldenTarget):
    name = "flip-one-lsb"
    description = "the golden, one LSB off on a deterministic subset of cases (test target)"

    def outputs(self, case):
        outs = super().outputs(case)
        if flipped(case.id):
            _nudge(outs[0], case.outputs[0].dtype, 1)
        return outs


class WrongTarget(GoldenTarget):
    name = "wrong"
    description = "the golden, 3 LSB off on a deterministic subset of cases (test target)"

    def outputs(self, case):
        outs = super().outputs(case)
        if flipped(case.id):
            _nudge(outs[0], case.outputs[0].dtype, 3)
        return outs


class SaturationBug(GoldenTarget):
    name = "saturation-bug"
    description = "the golden, but outputs at the dtype's maximum come out 3 LSB lower (test target)"

    def outputs(self, case):
        from suite.core.dtypes import DTYPES
        outs = super().outputs(case)
        for o, spec in zip(outs, case.outputs):
            info = DTYPES[spec.dtype]
            if info.qmax is not None:
                o[o == info.qmax] = info.qmax - 3
        return outs
