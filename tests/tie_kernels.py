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

``VendorFC``, ``VendorFCHalfUp``, ``VendorFCTowardZero``, ``VendorFCTruncate``: FULLY_CONNECTED written
from the docs, not from the golden (the issue's vendor kernel), rounding half away from zero, half up,
ties toward zero, every fraction toward zero.
"""

from __future__ import annotations

import numpy as np

from reference import golden
from reports.causes import TIE_EPS
from suite.core.dtypes import DTYPES
from targets.base import Outcome, Target, Timing
from tests.bias_targets import HalfUp as HalfUpGolden


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


class Correct(HalfUpGolden):
    """(bias_targets.HalfUp's runtime facts; its outputs are the golden's, ties moved by ``move``)"""

    name = "tie-correct"
    description = "the golden's own rounding (test kernel)"
    expected_scheme = "tflite-ref-double"

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


# ----------------------------------------------------------------------------- a vendor's FULLY_CONNECTED

def _half_away(v):
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


ROUNDINGS = {
    "away": _half_away,                                       # std::round: LiteRT's reference kernel
    "up": lambda v: np.floor(v + 0.5),                        # ties toward +inf
    "toward_zero": lambda v: np.sign(v) * np.ceil(np.abs(v) - 0.5),   # ties toward zero
    "truncate": np.trunc,                                      # every fraction toward zero
}


class VendorFC(Target):
    """A FULLY_CONNECTED kernel written from the docs (docs/arithmetic.md: ``float-round``), not
    from the golden: int32 accumulator, double multiplier s_in * s_w[c] / s_out, one rounding
    (``rounding``), zero point, clamp to the fused activation's range."""

    name = "vendor-fc"
    description = "a vendor's FULLY_CONNECTED, std::round in double (test kernel)"
    isolate = False
    expected_scheme = "tflite-ref-double"
    rounding = "away"

    def unsupported(self, case):
        return None if case.op == "FULLY_CONNECTED" and case.outputs[0].dtype == "int8" else "FULLY_CONNECTED int8 only"

    def run_one(self, case, timing: Timing) -> Outcome:
        x_t, w_t, out = case.inputs[0], case.inputs[1], case.outputs[0]
        o, k = w_t.shape
        x = np.asarray(x_t.data, np.int64).reshape(-1, k) - x_t.zero_point[0]
        w = np.asarray(w_t.data, np.int64).reshape(o, k) - (0 if len(w_t.scale) > 1 else w_t.zero_point[0])
        acc = x @ w.T
        if len(case.inputs) > 2 and case.inputs[2].data is not None:
            acc = acc + np.asarray(case.inputs[2].data, np.int64)
        s_w = np.asarray(w_t.scale, np.float32).astype(np.float64)
        real = np.float64(np.float32(x_t.scale[0])) * s_w / np.float64(np.float32(out.scale[0]))
        v = np.clip(ROUNDINGS[self.rounding](acc * real), -2 ** 31, 2 ** 31 - 1).astype(np.int64)
        s, z = np.float32(out.scale[0]), out.zero_point[0]
        lo, hi = -128, 127
        act = case.attrs.get("fused_activation_function", "NONE")
        bounds = {"RELU": (0.0, None), "RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0)}.get(act, (None, None))
        if bounds[0] is not None:
            lo = max(lo, z + int(_half_away(np.float32(bounds[0]) / s)))
        if bounds[1] is not None:
            hi = min(hi, z + int(_half_away(np.float32(bounds[1]) / s)))
        y = np.clip(v + z, lo, hi).astype(np.int8).reshape(out.shape)
        return Outcome.ok([y], [10.0])


class VendorFCHalfUp(VendorFC):
    name = "vendor-fc-half-up"
    rounding = "up"


class VendorFCTowardZero(VendorFC):
    name = "vendor-fc-toward-zero"
    rounding = "toward_zero"


class VendorFCTruncate(VendorFC):
    name = "vendor-fc-truncate"
    rounding = "truncate"
