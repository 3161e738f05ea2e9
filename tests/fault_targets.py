"""Fault-injection targets for the isolation tests (not shipped as targets).

:class:`Faulty` returns the golden for every case except those its plan names, on
which it misbehaves in one of the ways kernels under certification do. The plan maps
case ids to fault kinds; it comes from the ``QCONFORM_FAULTS`` environment variable
(JSON ``{"ADD-tie-000": "segv", ...}``, inherited by the isolation worker) or,
without it, :data:`DEFAULT_PLAN`. :data:`EXPECTED` is the verdict each kind must get.
``QCONFORM_FAULT_DELAY`` (seconds) slows every case down; ``QCONFORM_FAULT_INIT`` makes
creating the target fail: ``raise`` (an exception) or ``exit`` (the process ends with status 9);
``hang_in_worker`` makes it hang in the isolation worker.
Every ``ok`` outcome names the case it was computed for (``ran_case``) and the process
(``pid``), so a test can see that each outcome reached its own case.

:class:`BatchedFaulty` does the same work but overrides ``run()`` (as a target that
builds one model for many cases would), so a crash inside its batch cannot be
attributed until the suite re-runs the batch one case at a time.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np

from suite.core.errors import Unsupported
from targets.base import Outcome, Target, Timing

#: fault kind -> (status the suite must give, text the reason must contain)
EXPECTED: dict[str, tuple[str, str]] = {
    "segv": ("crash", "SIGSEGV"),           # NULL dereference in native code
    "abort": ("crash", "SIGABRT"),          # abort() / failed assert in a kernel
    "fpe": ("crash", "SIGFPE"),             # integer division by zero in a kernel
    "sigkill": ("crash", "SIGKILL"),        # the OOM killer
    "exit": ("crash", "exited with status 7"),   # exit(7) inside a library
    "sysexit": ("crash", "SystemExit"),     # sys.exit() raised by a Python kernel
    "hang": ("timeout", "no result within"),     # blocked in a native call
    "spin": ("timeout", "no result within"),     # busy loop holding the GIL
    "shape": ("error", "shape"),            # output of the wrong shape
    "dtype": ("error", "dtype"),            # strings where int8 codes are due
    "nan": ("error", "non-finite"),         # NaN where integers are due
    "range": ("error", "outside the"),      # int32 values beyond the output dtype
    "count": ("error", "output(s)"),        # two outputs for a one-output op
    "raise": ("error", "kernel exploded"),  # an exception
    "not_outcome": ("error", "instead of an Outcome"),   # a bare list instead of an Outcome
    "unpicklable": ("error", "cannot be transferred"),   # outputs that cannot leave the worker
    "noisy": ("pass", ""),                  # prints to fd 1 and 2, then the right answer
    "off": ("fail", "LSB"),                 # a numeric mismatch: fail, not error
    "unsupported": ("unsupported", "cannot do this one"),
    "pipe": ("error", "unreadable reply"),  # garbage written into the worker's pipe to the suite
    "pipe_frame": ("error", "unreadable reply"),   # the same, framed: a length, then bytes that are no pickle
    "badtext": ("error", "kernel said"),    # an error text with undecodable and control characters
}

DEFAULT_PLAN = {
    "ADD-sat_lo-000": "segv", "ADD-zp_max-000": "hang", "ADD-broadcast-000": "shape",
    "ADD-tie-000": "abort", "ADD-mult_extreme-000": "nan", "ADD-sat_lo-001": "exit",
}


def plan() -> dict[str, str]:
    text = os.environ.get("QCONFORM_FAULTS")
    return json.loads(text) if text else dict(DEFAULT_PLAN)


def _golden(case):
    from reference import golden
    return [np.array(o) for o in golden(case)]


def _write_protocol_pipes(data: bytes) -> None:
    """Write ``data`` into every pipe this process holds open for writing: in the isolation
    worker, its reply pipe to the suite (as a kernel scribbling on a stray descriptor would)."""
    import fcntl
    import stat
    for fd in range(3, 64):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode) and fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY:
                os.write(fd, data)
        except OSError:
            pass


def misbehave(kind: str, case):
    """Do fault ``kind`` on ``case``: returns an Outcome (or whatever garbage the kind returns)."""
    if kind == "segv":
        import ctypes
        ctypes.string_at(0)
    elif kind == "abort":
        os.abort()
    elif kind == "fpe":
        os.kill(os.getpid(), signal.SIGFPE)
    elif kind == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "exit":
        os._exit(7)
    elif kind == "sysexit":
        sys.exit(3)
    elif kind == "hang":
        time.sleep(3600)
    elif kind == "spin":
        while True:
            pass
    elif kind == "raise":
        raise RuntimeError("kernel exploded")
    elif kind == "badtext":   # (a lone surrogate: bytes decoded with surrogateescape)
        raise RuntimeError(b"kernel said \xff\xfe \x1b[31mred\x00 | *bold* <b>x</b>".decode("utf-8", "surrogateescape"))
    elif kind == "pipe":
        _write_protocol_pipes(b"garbage!" * 4)
    elif kind == "pipe_frame":
        _write_protocol_pipes(len(b"garbage!").to_bytes(8, "little") + b"garbage!")
    elif kind == "unsupported":
        raise Unsupported("this kernel cannot do this one")
    outs = _golden(case)
    if kind == "shape":
        return Outcome.ok([np.zeros((1, 2, 3, 4, 5), np.int8)], [1.0])
    if kind == "dtype":
        return Outcome.ok([np.full(outs[0].shape, "x")], [1.0])
    if kind == "nan":
        return Outcome.ok([np.full(outs[0].shape, np.nan, np.float32)], [1.0])
    if kind == "range":
        return Outcome.ok([np.full(outs[0].shape, 1000, np.int32)], [1.0])
    if kind == "count":
        return Outcome.ok([outs[0], outs[0]], [1.0])
    if kind == "not_outcome":
        return outs
    if kind == "unpicklable":
        return Outcome.ok([np.array([lambda: 0], dtype=object)], [1.0])
    if kind == "noisy":
        os.write(1, b"\x00\x01garbage on stdout that is not a protocol frame\n" * 100)
        os.write(2, b"noise on stderr\n")
        print("print() to stdout", flush=True)
        return Outcome.ok(outs, [1.0])
    if kind == "off":
        flat = outs[0].reshape(-1)   # element 0 moved to the far end of the dtype's range
        lo, hi = np.iinfo(flat.dtype).min, np.iinfo(flat.dtype).max
        flat[0] = lo if int(flat[0]) > (int(lo) + int(hi)) // 2 else hi
        return Outcome.ok(outs, [1.0])
    raise ValueError(f"unknown fault kind {kind!r}")


class Faulty(Target):
    """The golden, except on the planned cases (see module docstring)."""

    name = "faulty"

    def __init__(self, **options):
        super().__init__(**options)
        self.plan = plan()
        time.sleep(float(os.environ.get("QCONFORM_FAULT_INIT_DELAY", "0")))   # a runtime slow to start
        init = os.environ.get("QCONFORM_FAULT_INIT")
        if init == "raise":
            raise RuntimeError("the runtime is missing here")
        if init == "exit":
            os._exit(9)
        if init == "hang":   # (in every process, the pytest process too; until MARK.release exists)
            mark = Path(os.environ["QCONFORM_FAULT_MARK"])
            mark.write_text("constructing")
            end = time.monotonic() + 3600
            while time.monotonic() < end and not mark.with_suffix(".release").exists():
                time.sleep(0.05)
        if init == "hang_in_worker" and getattr(sys.modules["__main__"].__spec__, "name", "") == "suite.harness.worker":
            time.sleep(3600)   # (the suite's own process makes it fine: only its worker hangs)
        from reference import golden  # noqa: F401  (imported now, not inside the first case's time limit)

    def run_one(self, case, timing: Timing) -> Outcome:
        time.sleep(float(os.environ.get("QCONFORM_FAULT_DELAY", "0")))   # a slow kernel (resume tests)
        kind = self.plan.get(case.id)
        if kind is not None:
            return misbehave(kind, case)
        # the row shows which process ran it, and for which case
        return Outcome.ok(_golden(case), [1.0], pid=os.getpid(), ran_case=case.id)

    def safe_run_one(self, case, timing: Timing):
        # as Target.safe_run_one, but garbage (a non-Outcome) is passed on for the suite to judge
        if self.plan.get(case.id) == "not_outcome":
            return misbehave("not_outcome", case)
        return super().safe_run_one(case, timing)


class BatchedFaulty(Faulty):
    """Faulty, batching internally: nothing is reported until the whole batch is done."""

    name = "batched-faulty"

    def run(self, cases, timing):
        return [self.safe_run_one(c, timing) for c in cases]


class OtherBatchedFaulty(BatchedFaulty):
    """A second batching target (two whole-batch workers in one run)."""

    name = "batched-faulty-2"


class InProcessFaulty(Faulty):
    """Faulty with ``isolate = False``: runs inside the pytest process (only safe faults)."""

    name = "inprocess-faulty"
    isolate = False


class VersionedFaulty(InProcessFaulty):
    """InProcessFaulty with a runtime version, so a waiver can name it."""

    name = "versioned-faulty"

    def versions(self):
        return {"faulty": "1.0"}
