"""The suite's own error type.

Every problem with something a user wrote (a case file, a tolerance file, an
option) is raised as :class:`QconformError` with the file, the field and the
rule it broke, so the command line and the pytest plugin can print one clear
line instead of a traceback.
"""

from __future__ import annotations

import signal


class QconformError(Exception):
    """A user-facing error: names where (file, field) and which rule failed."""

    def __init__(self, message: str, *, source: str | None = None, field: str | None = None,
                 rule: str | None = None):
        self.source = source
        self.field = field
        self.rule = rule
        self.detail = message
        parts = []
        if source:
            parts.append(str(source))
        if field:
            parts.append(f"field '{field}'")
        prefix = ": ".join(parts)
        text = f"{prefix}: {message}" if prefix else message
        if rule and rule not in message:
            text += f" (rule: {rule})"
        super().__init__(text)


class Unsupported(Exception):
    """Raised by a target that cannot express or run a case; carries the reason."""

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)


def signal_name(num: int) -> str:
    """The name of signal ``num`` ("SIGSEGV"), or "signal N" for a number this platform does
    not name (a dead process's report, from a worker's or a remote tool's exit status)."""
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"
