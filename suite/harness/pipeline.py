"""Pipelined execution: the targets run the planned batches while pytest reports earlier ones.

Without it a run alternates: a test asks for its verdict, the target runs the batch, the
harness judges it, pytest reports the tests, and only then does the next batch start, so
the target processes sit idle while the harness works and the harness waits while they
work. With the plan known (:meth:`suite.runner.Run.plan`: after collection, or guessed before
it and settled at its end, :meth:`Run.settle_plan`), two threads of the pytest process take
the targets' side of the run off the tests' path:

* the **runner** thread walks the plan in test order, a window of whole ops at a time (about
  ``WINDOW_CASES`` cases per target), and hands each target its share of the window at once
  (:meth:`Run.take_part` makes the batches a test would: the same batches, latency singles
  and bisection; :meth:`Run.execute_parts`: one message to an isolated target's worker, which
  keeps the crash and timeout verdicts); while one target runs, the next targets' workers get
  their cases ahead (:meth:`Run.submit`). Each outcome is passed on as soon as it arrives;
* the **judge** thread compares each outcome with the golden and writes its row at once
  (a run killed with ``kill -9`` loses only what was not yet judged, as before);
* a test waits for its own verdict (:meth:`Pipeline.wait`). A test that asks for a pair
  the runner has not reached yet moves that pair to the front.

The native work runs in the targets' worker processes (suite/isolation.py), so on two
cores the targets run on one while pytest and the judge share the other. The runner stays
at most ``LOOKAHEAD`` verdicts ahead of the tests. Used unless ``--pipeline off``,
``--isolation none`` or in an xdist worker (whose future tests are not known); a target
that asks to run in this process (``isolate = False``, e.g. ``ref``) runs in the runner
thread, and an interrupted run waits for its hand-over (all its parts) to end
(docs/performance.md).
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from typing import Any

LOOKAHEAD = 2048          # verdicts judged and not yet asked for, at most
WINDOW_CASES = 256        # a window's ops hold about this many cases per target
_STOP = object()
_FAILED = object()   # judge queue: (_FAILED, [(target, case id)], exception) of a hand-over that raised


def _preload() -> None:
    """Import what the report artefacts need (pandas, pyarrow: ~0.5 s) while the tests wait for
    verdicts, rather than after the last test."""
    try:
        import pandas  # noqa: F401
        import pyarrow.parquet  # noqa: F401
    except Exception:   # a missing extra: the report says so itself
        pass


class Pipeline:
    def __init__(self, run, plan: list[tuple[Any, str]]):
        self.run = run
        self.plan = list(plan)
        self.cv = threading.Condition()
        self.urgent: deque = deque()
        self.judge_q: queue.Queue = queue.Queue()
        self.stopping = False
        self.error: BaseException | None = None
        self.runner_done = False
        self.outstanding: set = set()   # (target, case id) handed to a target, not yet judged
        self._replanned = False
        self.runner = threading.Thread(target=self._guard, args=(self._run_plan,), name="qconform-runner",
                                       daemon=True)
        self.judge = threading.Thread(target=self._guard, args=(self._judge_loop,), name="qconform-judge",
                                      daemon=True)
        run.stats["pipelined"] = 1.0
        self.judge.start()
        self.runner.start()
        self.preload = threading.Thread(target=_preload, name="qconform-preload", daemon=True)
        self.preload.start()

    # ---- threads
    def _guard(self, fn) -> None:
        try:
            fn()
        except BaseException as e:   # a harness bug: raised in the test that waits for it
            with self.cv:
                self.error = self.error or e
                self.cv.notify_all()

    def _next(self, i: int, block: bool = True) -> tuple[list | None, int]:
        """The next hand-over, ``[(target, parts), ...]`` (parts: ``[(cases, alone), ...]``, as
        :meth:`Run.take_part` makes them), and the plan position after it: an urgent pair's
        batch first, else the next window of the plan. The cases are taken off the pending
        lists and marked outstanding in one step, so a waiting test always finds its pair in
        one or the other. Without ``block``: None at once when the tests are LOOKAHEAD behind."""
        pend = self.run._pending
        with self.cv:
            if self._replanned:   # the plan was replaced (Run.settle_plan): from its start
                i, self._replanned = 0, False
            while not self.stopping and not self.urgent and len(self.run._verdicts) >= LOOKAHEAD:
                if not block:
                    return None, i
                self.cv.wait(0.5)
            while not self.stopping and self.urgent:
                case, target, again = self.urgent.popleft()
                if again:   # a test asked again (a re-run): its pair is run again
                    pend[(target, case.op)][case.id] = case
                if case.id in pend.get((target, case.op), ()):   # else batched meanwhile
                    return self._hand([(target, [self.run.take_part(target, case.op, first=case)])]), i
            if self.stopping:
                return None, i
            # a window: the next whole ops of the plan, up to about WINDOW_CASES cases per target
            ops: list[str] = []
            targets: list[str] = []
            count: dict[str, int] = {}
            while i < len(self.plan):
                case, target = self.plan[i]
                if case.id in pend.get((target, case.op), ()):
                    if case.op not in ops:
                        if ops and max(count.values()) >= WINDOW_CASES:
                            break
                        ops.append(case.op)
                    if target not in count:
                        targets.append(target)
                        count[target] = 0
                    count[target] += 1
                i += 1
            jobs = []
            for target in targets:
                parts = []
                for op in ops:
                    while True:
                        cases, alone = self.run.take_part(target, op)
                        if not cases:
                            break
                        parts.append((cases, alone))
                if parts:
                    jobs.append((target, parts))
            return (self._hand(jobs) if jobs else None), i

    def replan(self, pairs: list, wanted: set) -> None:
        """Another plan (a guessed one was wrong: Run.settle_plan): pairs not ``wanted`` leave the
        pending lists, and their verdicts are dropped now and when they come."""
        with self.cv:
            self.plan = list(pairs)
            self._replanned = True
            for (target, _op), pend in self.run._pending.items():
                for cid in [cid for cid in pend if (target, cid) not in wanted]:
                    del pend[cid]
            for key in [k for k in self.run._verdicts if k not in wanted]:
                del self.run._verdicts[key]
            self.cv.notify_all()

    def _hand(self, jobs: list) -> list:
        """Mark the jobs' pairs outstanding (the caller holds the lock)."""
        for target, parts in jobs:
            self.outstanding.update((target, c.id) for cases, _ in parts for c in cases)
        return jobs

    def _run_plan(self) -> None:
        i = 0
        ahead = None   # the next hand-over, taken while the last target of this one runs
        submitted: list = []   # (target, parts) handed to their workers ahead of their turn
        try:
            while True:
                if ahead is not None:
                    jobs, ahead = ahead, None
                else:
                    jobs, i = self._next(i)
                if jobs is None:
                    if self.stopping:
                        return
                    with self.cv:   # the plan is done: serve what tests ask for until the run ends
                        if not self.urgent and not self.stopping:
                            self.cv.wait(0.5)
                        continue
                for n, (target, parts) in enumerate(jobs):   # one target at a time, in plan order
                    if self.stopping:
                        return

                    def ahead_of_turn(n=n, target=target) -> None:
                        """Once this target has its cases: the next hand-over is taken (with the
                        last target of this one), and the other targets' idle workers get their
                        cases (not this target's own worker: it reads nothing until its batch is
                        done). A worker not ready yet is tried again at the next turn."""
                        nonlocal ahead, i
                        if n == len(jobs) - 1:
                            ahead, i = self._next(i, block=False)
                        for later in jobs[n + 1:] + (ahead or []):
                            if later[0] != target and not any(later is x for x in submitted):
                                try:
                                    if self.run.submit(*later):
                                        submitted.append(later)
                                except Exception:   # only a head start: the parts go on their turn
                                    pass
                    submitted = [x for x in submitted if x is not jobs[n]]
                    try:
                        self.run.execute_parts(target, parts, on_outcome=lambda k, j, o, t=target, p=parts:
                                               self.judge_q.put((p[k][0][j], t, o)), while_running=ahead_of_turn)
                    except Exception as e:   # a harness bug: the verdict of the cases not yet judged
                        self.judge_q.put((_FAILED, [(target, c.id) for cases, _ in parts for c in cases], e))
        finally:
            with self.cv:
                self.runner_done = True
                self.cv.notify_all()

    def _judge_loop(self) -> None:
        while True:
            item = self.judge_q.get()
            if item is _STOP:
                return
            if self.stopping:
                continue   # an interrupted run: outcomes of cases nobody will report are dropped
            if item[0] is _FAILED:   # the runner's batch raised: its cases without an outcome
                _, keys, error = item   # get the error as their verdict (raised in their tests)
                with self.cv:
                    for key in keys:
                        if key in self.outstanding:
                            self._settled(key, error)
                    self.cv.notify_all()
                continue
            case, target, o = item
            v = self.run._judged(case, target, o)
            with self.cv:
                self._settled((target, case.id), v)
                self.cv.notify_all()

    def _settled(self, key, verdict) -> None:
        """``key`` is judged (the caller holds the lock): its verdict waits for its test, unless
        it is a pair a wrong guess dropped (Run.settle_plan)."""
        if self.run.wanted(*key):
            self.run._verdicts[key] = verdict
        self.outstanding.discard(key)

    # ---- the tests' side
    def wait(self, case, target: str):
        """The verdict of (case, target), waiting for the runner and the judge to reach it."""
        key = (target, case.id)
        asked = False
        t0 = time.perf_counter()
        with self.cv:
            if not self.run.wanted(target, case.id):   # not in the settled plan, asked anyway: its
                self.run._wanted.add(key)               # verdict and row are kept (else: no verdict)
            while key not in self.run._verdicts:
                if self.error is not None:
                    raise self.error
                if self.runner_done:
                    raise RuntimeError(f"the pipeline's runner ended before {case.id} on {target} ran")
                if not asked:
                    pend = self.run._pending.get((target, case.op), ())
                    if case.id in pend:                       # not reached yet: next
                        self.urgent.append((case, target, False))
                        asked = True
                    elif key not in self.outstanding:         # asked again (a re-run test)
                        self.urgent.append((case, target, True))
                        asked = True
                    self.cv.notify_all()
                self.cv.wait(0.5)
            v = self.run._verdicts.pop(key)
            self.cv.notify_all()
        self.run.stats["tests_wait_s"] += time.perf_counter() - t0
        return v

    def stop(self) -> None:
        """End both threads (and wait for the report's imports, :func:`_preload`). Outcomes not
        yet judged are dropped (their tests never ran). An idle runner ends at once; one inside a
        batch has its isolated targets' workers killed."""
        with self.cv:
            self.stopping = True
            self.cv.notify_all()
        self.runner.join(timeout=0.5)
        if self.runner.is_alive():   # interrupted inside a batch
            for iso in list(self.run._isolators.values()):
                if iso is not None:
                    iso.cancel()
            self.runner.join(timeout=30)   # an in-process target's batch runs to its end
        self.judge_q.put(_STOP)
        self.judge.join(timeout=30)
        # the report needs those imports anyway, and with no other thread alive it can be written
        # by forked children (reports/runinfo.py in_child)
        self.preload.join(timeout=30)

    @property
    def alive(self) -> bool:
        return self.runner.is_alive() or self.judge.is_alive()
