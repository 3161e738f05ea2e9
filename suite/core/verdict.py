"""Verdict types: the one status enum and the one verdict record of the suite.

Rows (results.jsonl), summaries, pytest outcomes, waivers and certificates all speak
:class:`Status`; nothing decides anything by reading a message's text.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Status(str, enum.Enum):
    """A (case, target) verdict. A ``str`` enum: rows hold the plain value (``"pass"``)."""

    PASS = "pass"                # within the tolerance
    FAIL = "fail"                # a numeric mismatch beyond it
    UNSUPPORTED = "unsupported"  # the target cannot express or run the case (with its reason)
    ERROR = "error"              # the target raised or returned garbage; or the golden failed
    CRASH = "crash"              # the kernel killed its worker process
    TIMEOUT = "timeout"          # the kernel exceeded --case-timeout
    INFRA = "infra"              # the device or transport failed, not the kernel
    WAIVED = "waived"            # a failure covered by a waiver

    def __str__(self) -> str:
        return self.value

    @property
    def is_error(self) -> bool:
        """error / crash / timeout / infra: pytest reports these as ERROR."""
        return self in ERRORS

    @property
    def is_bad(self) -> bool:
        """A failure or an error: fails the run unless a known finding explains it."""
        return self is Status.FAIL or self in ERRORS


ERRORS = frozenset({Status.ERROR, Status.CRASH, Status.TIMEOUT, Status.INFRA})
#: the order tables show statuses in
ORDER = tuple(Status)

#: what a target may return for one case (targets.base.Outcome.status): "ok" (outputs to judge)
#: or a verdict the target decides itself
OUTCOME_STATUSES = ("ok", Status.UNSUPPORTED.value, Status.ERROR.value, Status.CRASH.value,
                    Status.TIMEOUT.value, Status.INFRA.value)


class Outcome(str, enum.Enum):
    """What pytest shows for a verdict."""

    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    XFAILED = "xfailed"
    ERROR = "error"


@dataclass
class Verdict:
    """The judged result of one case on one target.

    ``finding``: the id of a known finding (suite/core/findings.toml) that explains a failure or
    error; ``waiver``: the id of the waiver that turned it into ``waived``; ``golden_error``: the
    golden itself could not be computed (an ``error`` of the suite, not of the target).
    ``row`` is the results.jsonl row; ``message`` what pytest prints for it.
    """

    status: Status
    case_id: str
    op: str
    target: str
    reason: str = ""
    finding: str | None = None
    waiver: str | None = None
    golden_error: bool = False
    message: str = ""
    row: dict[str, Any] = field(default_factory=dict)
    comparison: Any = None   # the suite.core.compare.Comparison behind it (errors per output), if any
    seconds: float | None = None   # what the case cost the run: its share of the wait for its batch, and its judging

    @property
    def known(self) -> bool:
        return self.finding is not None

    @property
    def outcome(self) -> Outcome:
        s = self.status
        if s is Status.PASS:
            return Outcome.PASSED
        if s is Status.UNSUPPORTED:
            return Outcome.SKIPPED
        if s is Status.WAIVED or (s.is_bad and self.known):
            return Outcome.XFAILED
        return Outcome.ERROR if s.is_error else Outcome.FAILED

    @property
    def xfail_reason(self) -> str | None:
        """Why pytest shows it as an expected failure (a waiver or a known finding), else None."""
        if self.outcome is not Outcome.XFAILED:
            return None
        if self.waiver is not None:
            return f"waived ({self.waiver}): {self.reason}"
        return f"{self.status.value}, known finding {self.finding}: {self.reason}"
