"""A module a hostile failure file or run.json names as its target: importing it leaves a marker."""
import os
from pathlib import Path

from targets.base import Outcome, Target

Path(os.environ.get("QC_MARKER", "qc-marker")).write_text("imported")


class Kernel(Target):
    name = "qc-kernel"

    def run_one(self, case, timing):
        return Outcome.unsupported("a marker, not a kernel")
