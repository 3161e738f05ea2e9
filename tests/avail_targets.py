"""A test target that records where its ``availability()`` is asked (issue #32).

``Recording`` is the golden (tests.helper_targets.GoldenTarget); each ``availability()`` call
appends the asking process's id to the file ``QCONFORM_AVAILABILITY_LOG`` names, and says the
target is unavailable, with ``QCONFORM_AVAILABILITY_NO``'s text as why, when that is set.
"""

from __future__ import annotations

import os

from tests.helper_targets import GoldenTarget


class Recording(GoldenTarget):
    name = "recording"
    description = "the golden; records which process asks its availability (test target)"

    def availability(self):
        log = os.environ.get("QCONFORM_AVAILABILITY_LOG")
        if log:
            with open(log, "a") as f:
                f.write(f"{os.getpid()}\n")
        why = os.environ.get("QCONFORM_AVAILABILITY_NO")
        return (False, why) if why else (True, "always")


class Niced(Recording):
    """Recording, whose worker runs at its own niceness; its ``availability()`` writes the
    niceness of the process asking it instead of its id."""
    name = "niced"
    worker_nice = 3

    def availability(self):
        log = os.environ.get("QCONFORM_AVAILABILITY_LOG")
        if log:
            with open(log, "a") as f:
                f.write(f"{os.nice(0)}\n")
        return True, "always"
