"""The target interface: what a runtime, device or kernel implements to be tested.

A target is a class with a ``name``, registered in ``targets/__init__.py`` (or
loaded as ``--target=module:Class``). The suite calls, in order:

``availability()``  -> (ok, reason): can it run on this machine at all?
``versions()``      -> {component: version} for the report header and run.json
``unsupported(case)`` -> None, or the reason it cannot express this case
``run(cases, timing)`` -> one :class:`Outcome` per case, in order

Only ``run_one`` (or ``run``) must be written; the rest have defaults. The module
holding a target class must import without the target's runtime: the runtime is
imported in one small loader function per runtime (e.g. ``targets.onnx_model.load_onnx``),
which ``availability()`` and every other use call, so a missing runtime makes only that
target unavailable. Everything else (the project's modules, the standard library,
NumPy) is imported at module level.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from suite.core.errors import Unsupported
from suite.core.verdict import OUTCOME_STATUSES


@dataclass
class Timing:
    """How latency is measured: warm-up invocations, then timed ones."""

    warmup: int = 1
    repeats: int = 5

    def measure(self, invoke: Callable[[], Any]) -> tuple[Any, list[float]]:
        """Run ``invoke`` warm-up + repeat times; returns the last result and µs per timed run."""
        result = None
        for _ in range(self.warmup):
            result = invoke()
        samples = []
        for _ in range(max(1, self.repeats)):
            t0 = time.perf_counter_ns()
            result = invoke()
            samples.append((time.perf_counter_ns() - t0) / 1000.0)
        return result, samples


@dataclass
class Outcome:
    """What a target returned for one case.

    status: ``ok`` (outputs present), ``unsupported`` (cannot express the case),
    ``error`` (raised, or returned garbage), ``crash`` / ``timeout`` (the worker died
    or hung), ``infra`` (the device or transport failed, not the kernel).
    """

    status: str
    outputs: list[np.ndarray] | None = None
    latency_us: list[float] = field(default_factory=list)
    reason: str = ""
    info: dict[str, Any] = field(default_factory=dict)   # e.g. where each node ran

    @classmethod
    def ok(cls, outputs, latency_us=None, **info) -> "Outcome":
        return cls("ok", [np.asarray(o) for o in outputs], list(latency_us or []), "", info)

    @classmethod
    def unsupported(cls, reason: str) -> "Outcome":
        return cls("unsupported", reason=reason)

    @classmethod
    def error(cls, reason: str, status: str = "error") -> "Outcome":
        return cls(status, reason=reason)

    @classmethod
    def from_exception(cls, e: BaseException) -> "Outcome":
        """The ``error`` outcome of a target call that raised ``e`` (its type and message)."""
        return cls.error(f"{type(e).__name__}: {e}".strip()[:2000])


class Target:
    """Base class of every target. Override ``run_one`` (or ``run`` to batch)."""

    name: str = "target"
    description: str = ""
    #: a short label of the arithmetic the target is expected to follow (documentation)
    expected_scheme: str | None = None
    #: run in a worker process (suite/isolation.py), so a crash or hang is a verdict, not the
    #: end of the run; False only for pure-Python targets and targets that isolate themselves
    isolate: bool = True
    #: at most this many cases of an (op, target) group run alone for their latency
    #: (--latency-cases); None: as many as the option says
    latency_cases: int | None = None
    #: how much lower than the pytest process's its worker process runs (os.nice; None: the
    #: workers' default, suite/harness/worker.py WORKER_NICE); a target whose batches the run waits
    #: on most sets less, so its worker gets more of a shared CPU than the other workers
    worker_nice: int | None = None
    #: a case a finding says crashes the target runs in a fork of its worker (the runtime loaded),
    #: so the worker is not restarted; False for a target that runs its runtime in a process of its
    #: own (a fork would share that process's pipes)
    fork_crashes: bool = True

    def __init__(self, **options: Any):
        self.options = options

    # ---- discovery
    def availability(self) -> tuple[bool, str]:
        return True, "built in"

    def versions(self) -> dict[str, str]:
        return {}

    # ---- per case
    def unsupported(self, case) -> str | None:
        """Cheap static check: the reason this target cannot express ``case``, or None."""
        return None

    def run_one(self, case, timing: Timing) -> Outcome:
        raise NotImplementedError

    def run(self, cases: Sequence, timing: Timing) -> list[Outcome]:
        """Run a batch of cases. The default runs them one at a time through ``run_one``."""
        return [self.safe_run_one(c, timing) for c in cases]

    def safe_run_one(self, case, timing: Timing) -> Outcome:
        why = self.unsupported(case)
        if why:
            return Outcome.unsupported(why)
        try:
            return self.run_one(case, timing)
        except Unsupported as e:
            return Outcome.unsupported(e.reason)
        except Exception as e:  # a target raising is an error verdict, not a crash of the suite
            return Outcome.from_exception(e)

    def close(self) -> None:
        """Release sessions, connections, devices."""


def _guard(fn):
    try:
        return fn()
    except Exception as e:
        return Outcome.from_exception(e)


def run_in_parts(target: "Target", cases: Sequence, timing: Timing, alone: int = 0,
                 guarded: Callable = _guard) -> list:
    """The outcomes of a batch: the first ``alone`` cases each through ``target.run([case])``
    (latency cases, each its own model), the rest through one ``target.run``. A call that raises
    or does not give one outcome per case is repeated one case at a time, so every verdict stays
    the case's own. ``guarded(fn)`` makes each call (default: an exception is that call's error
    outcome). Used by the runner for in-process targets and by the isolation worker."""
    def part(cs):
        got = guarded(lambda: target.run(cs, timing))
        if isinstance(got, (list, tuple)) and len(got) == len(cs):
            return list(got)
        out = []
        for c in cs:
            r = guarded(lambda: target.run([c], timing))
            if isinstance(r, (list, tuple)) and len(r) == 1:
                out.append(r[0])
            elif isinstance(r, Outcome):
                out.append(r)
            else:
                out.append(Outcome.error(f"target returned {type(r).__name__} for one case, "
                                         f"not a list of one Outcome"))
        return out

    cases = list(cases)
    outs = [o for c in cases[:alone] for o in part([c])]
    if cases[alone:]:
        outs += part(cases[alone:])
    return outs


def check_outcome(o: Any) -> Outcome:
    """``o`` if it is a well-formed Outcome, else an ``error`` outcome saying what was wrong."""
    if not isinstance(o, Outcome):
        return Outcome.error(f"target returned {type(o).__name__} instead of an Outcome")
    if o.status not in OUTCOME_STATUSES:
        return Outcome.error(f"target returned an Outcome with unknown status {o.status!r}")
    if not isinstance(o.info, dict):
        o.info = {}
    if o.status == "ok":
        if not isinstance(o.outputs, (list, tuple)):
            return Outcome.error(f"target returned outputs of type {type(o.outputs).__name__}, "
                                 f"not a list of arrays")
        try:
            o.outputs = [np.asarray(x) for x in o.outputs]
        except Exception as e:
            return Outcome.error(f"target returned outputs that are not arrays: {type(e).__name__}: {e}")
        try:   # a NaN or infinite sample is no time (and would break the summaries' medians)
            o.latency_us = [x for x in (float(v) for v in (o.latency_us or [])) if math.isfinite(x)]
        except (TypeError, ValueError, OverflowError):
            o.latency_us = []
    return o


def check_outcomes(outs: Any, n: int) -> list[Outcome]:
    """Exactly ``n`` checked outcomes (a wrong count is an error for every case)."""
    if not isinstance(outs, (list, tuple)) or len(outs) != n:
        got = f"{len(outs)} outcomes" if isinstance(outs, (list, tuple)) else type(outs).__name__
        return [Outcome.error(f"target returned {got} for {n} cases") for _ in range(n)]
    return [check_outcome(o) for o in outs]


def latency_stats(samples: Sequence[float]) -> dict[str, float | None]:
    if not samples:
        return {"p50_us": None, "p90_us": None, "min_us": None, "spread_us": None, "n": 0}
    xs = sorted(float(x) for x in samples)
    n = len(xs)
    p90 = xs[min(n - 1, int(round(0.9 * (n - 1))))]
    median = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    mean = math.fsum(xs) / n   # (statistics.pstdev is exact in Fractions: 70 µs a case)
    spread = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / n) if n > 1 else 0.0
    return {"p50_us": median, "p90_us": p90, "min_us": xs[0], "spread_us": spread, "n": n}
