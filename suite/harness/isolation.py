"""Where a target's batches run: in this process, or in a worker process of its own.

Targets that run native code (``isolate = True``, the default: LiteRT, ONNX Runtime,
onnxruntime-qnn, a team's own kernel) run in one worker process each
(``python -m suite.harness.worker``), reused across batches, so every way a case can go
wrong becomes the verdict of *that* case:

* the worker dies (SIGSEGV, SIGABRT, ``exit()`` in a kernel) -> ``crash``, with the signal
  and the tail of the worker's stderr (faulthandler's Python stack included);
* no outcomes within ``timeout`` seconds per case -> ``timeout``; the worker (its whole
  process group) is killed;
* either inside a batch of several cases cannot be attributed, so that batch is run again
  one case at a time, a fresh worker after each crash;
* a case a finding says crashes the target (submitted with ``fork``) runs in a child forked
  from the worker: its death is the same ``crash`` and the worker goes on (no restart);
* a worker that finds the target unavailable here (its ``availability()``) says why once: the
  run leaves the target out (suite/plugin.py ``_settle``), a witness answers it for each case;
* a worker that cannot create the target -> ``error`` for the batch, with why; one that does
  not create it within ``START_TIMEOUT`` (a constructor that hangs) -> ``timeout while
  starting`` for every case of that target, waited for once: the run goes on.

The worker is started when the run is set up, so it imports its runtime while the cases are
made and collected; its first message says whether the target can run here (its
``availability()``, asked there: :meth:`Isolated.availability`) and carries its versions.
Batches are queued (:meth:`Isolated.submit`) and taken in order (:meth:`Isolated.next`); up to ``AHEAD`` of
them are in the worker at once, so it runs the next ones while this process judges and
reports the last (docs/performance.md: what this saves). A worker runs at a lower priority
than this process (suite/harness/worker.py ``WORKER_NICE``): on a 2-core machine eight workers
running ahead would otherwise take the CPU from the pytest process, which every verdict waits on.
"""

from __future__ import annotations

import os
import pickle
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, OrderedDict, deque
from pathlib import Path
from typing import Any, Sequence

from suite.core.errors import signal_name
from targets.base import Outcome, Timing, check_outcomes, run_in_parts

from . import worker as protocol

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 120.0         # seconds for a worker to start and create its target
CLOSE_TIMEOUT = 5.0
AHEAD = 4                     # batches handed to a worker before their tests ask (--ahead)


def spec_of(target) -> dict[str, Any] | None:
    """How a worker re-creates ``target``: its importable class and options; None if it cannot."""
    cls = type(target)
    if cls.__module__ in ("__main__", "__mp_main__") or "<locals>" in cls.__qualname__:
        return None
    options = dict(getattr(target, "options", {}) or {})
    try:
        protocol.pickle.dumps(options)
    except Exception:
        return None
    nice = getattr(target, "worker_nice", None)
    return {"module": cls.__module__, "qualname": cls.__qualname__, "name": getattr(target, "name", None),
            "options": options, "nice": nice if isinstance(nice, int) and not isinstance(nice, bool) else None}


def in_worker(target, isolation: str = "process") -> bool:
    """Whether ``target``'s batches run in a worker process under ``--isolation``: a native target
    that can be re-created there."""
    return isolation == "process" and getattr(target, "isolate", True) and spec_of(target) is not None


def executor_for(target, isolation: str = "process", timeout: float = 60.0,
                 ahead: int = AHEAD, start: bool = True) -> "InProcess | Isolated":
    """How ``target``'s batches run under ``--isolation``: a worker process for a native target
    that can be re-created there (``ahead`` batches handed to it before they are asked for),
    else this process. ``start``: its worker starts now (else when first needed)."""
    if in_worker(target, isolation):
        return Isolated(target, timeout, ahead, start)
    return InProcess(target)


class InProcess:
    """A pure-Python target (``ref``, ``isolate = False``) or ``--isolation none``."""

    def __init__(self, target):
        self.alone = 0   # of the last batch next() gave: how many of its first cases ran each alone
        self.target = target
        self._todo: deque = deque()
        self.stats: Counter = Counter()

    def versions(self) -> dict[str, str]:
        try:
            return {str(k): str(v) for k, v in dict(self.target.versions()).items()}
        except Exception as e:
            return {"error": f"{type(e).__name__}: {e}"}

    def known_versions(self) -> dict[str, str]:
        """(In this process: known without waiting.)"""
        return self.versions()

    #: (a known crash ends this process all the same: --isolation none gives no protection)
    forks = False

    def submit(self, cases: Sequence, alone: int, timing: Timing, fork: bool = False) -> None:
        self._todo.append((list(cases), alone, timing))

    def next(self) -> tuple[list, list[Outcome]]:
        """The next queued batch, run now: (cases, one outcome per case)."""
        cases, alone, timing = self._todo.popleft()
        self.alone = alone   # (its first `alone` cases ran each alone: what a failure's batch was)
        t0 = time.perf_counter()
        outs = check_outcomes(run_in_parts(self.target, cases, timing, alone), len(cases))
        self.stats["busy_s"] += time.perf_counter() - t0
        return cases, outs

    def run(self, cases: Sequence, timing: Timing, alone: int = 0) -> list[Outcome]:
        self.submit(cases, alone, timing)
        return self.next()[1]

    def close(self) -> None:
        try:
            self.target.close()
        except Exception:
            pass

    def release(self) -> None:
        """(Isolated ends an idle worker; this process keeps its target.)"""


#: bytes of pickled cases kept (:func:`pickled`): an op's cases go to every target's worker in turn
PICKLE_MEMO_BYTES = 16 << 20
_pickled: OrderedDict[int, tuple[Any, bytes]] = OrderedDict()
_pickled_bytes = 0


def pickled(case) -> bytes:
    """``case`` pickled, made once for all the workers it goes to (the last cases' are kept)."""
    global _pickled_bytes
    e = _pickled.get(id(case))
    if e is not None and e[0] is case:
        _pickled.move_to_end(id(case))
        return e[1]
    b = pickle.dumps(case, protocol=pickle.HIGHEST_PROTOCOL)
    old = _pickled.pop(id(case), None)
    _pickled_bytes -= len(old[1]) if old else 0
    _pickled[id(case)] = (case, b)
    _pickled_bytes += len(b)
    while _pickled_bytes > PICKLE_MEMO_BYTES and len(_pickled) > 1:
        _pickled_bytes -= len(_pickled.popitem(last=False)[1][1])
    return b


#: a process group of the worker's own (killed whole), in this process's session (Python >= 3.11;
#: 3.10 has no ``process_group``: a session of its own, whose Linux autogroup sets it apart)
_OWN_GROUP = {"process_group": 0} if sys.version_info >= (3, 11) else {"start_new_session": True}


class Worker:
    """One worker process hosting one target instance; its first message is read by :meth:`ready`."""

    def __init__(self, spec: dict[str, Any]):
        fd, path = tempfile.mkstemp(prefix="qconform-worker-", suffix=".log")
        os.unlink(path)   # an anonymous file: the worker's stderr, read back on a crash
        self.log_fd = fd
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env.setdefault("PYTHONFAULTHANDLER", "1")
        env.setdefault("OPENBLAS_NUM_THREADS", "1")   # NumPy's BLAS threads would only spin beside the runtime
        self.proc = subprocess.Popen([sys.executable, "-m", "suite.harness.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=fd, env=env, **_OWN_GROUP)
        self._buf = bytearray()
        self.send(("init", spec, list(sys.path), os.getpid()))
        self._ready = None
        self._deadline: float | None = None   # for its first message: START_TIMEOUT from the first ask

    def ready(self, within: float | None = None):
        """("ready", versions) | ("unavailable", why) | ("init_error", why) | "timeout" | "dead"
        (waited for once); None if it is not in within ``within`` seconds (asked again later)."""
        if self._ready is None:
            if self._deadline is None:
                self._deadline = time.monotonic() + START_TIMEOUT
            ev = self.recv(self._deadline if within is None else min(self._deadline, time.monotonic() + within))
            if ev == "timeout" and time.monotonic() < self._deadline:
                return None
            self._ready = "dead" if isinstance(ev, tuple) and ev[0] == "bad" else ev
        return self._ready

    def send(self, msg) -> bool:
        try:
            protocol.send(self.proc.stdin.fileno(), msg)
            return True
        except (OSError, ValueError):
            return False

    def recv(self, deadline: float):
        """The next message (a tuple), ("bad", why) for an unreadable one, "timeout" (nothing
        by ``deadline``, a time.monotonic() value) or "dead"."""
        fd = self.proc.stdout.fileno()
        head = protocol._HEAD.size
        while True:
            if len(self._buf) >= head:
                (n,) = protocol._HEAD.unpack_from(self._buf)
                if n > protocol.MAX_FRAME:   # garbage in the pipe, not a frame's length
                    return ("bad", f"a frame of {n} bytes")
                if len(self._buf) >= head + n:
                    body = bytes(self._buf[head:head + n])
                    del self._buf[:head + n]
                    try:
                        msg = protocol.pickle.loads(body)
                    except Exception as e:
                        return ("bad", f"{type(e).__name__}: {e}")
                    return msg if isinstance(msg, tuple) and msg else ("bad", type(msg).__name__)
            if select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    return "dead"
                self._buf += chunk
            elif time.monotonic() >= deadline:
                return "timeout"

    def log_tail(self, limit: int = 1500, since: int = 0) -> str:
        """What the worker last wrote to stderr (from offset ``since``): on a crash, faulthandler's
        report from its first line ("Fatal Python error: ...") down the innermost frames (the
        kernel's, not the harness's, which a deep stack would otherwise push out); else the last lines."""
        try:
            size = os.fstat(self.log_fd).st_size
            start = max(0, since, size - 16 * limit)
            raw = os.pread(self.log_fd, max(0, size - start), start)
        except OSError:
            return ""
        noise = ("Extension modules:", "Current thread", "Stack (most recent", "Thread 0x")
        lines = [ln.strip() for ln in raw.decode("utf-8", "replace").splitlines()
                 if ln.strip() and not ln.startswith(noise) and "suite/harness/worker.py" not in ln
                 and "<frozen runpy>" not in ln]
        fatal = [i for i, ln in enumerate(lines) if ln.startswith("Fatal Python error")]
        if fatal:
            return " | ".join(lines[fatal[-1]:fatal[-1] + 10])[:1200]
        return " | ".join(lines[-10:])[-1200:]

    def exit_status(self) -> tuple[str, dict[str, Any]]:
        """How the (dead) worker ended: text and row info (signal or exit status)."""
        try:
            rc = self.proc.wait(timeout=CLOSE_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = self.proc.wait()
        return ended("worker process", rc)

    def kill(self) -> None:
        """Kill the worker and anything it started (its own process group)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass

    def close(self, graceful: bool = True) -> None:
        if graceful and self.proc.poll() is None and self.send(("close",)):
            try:
                self.proc.wait(timeout=CLOSE_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        os.close(self.log_fd)


def ended(who: str, rc: int) -> tuple[str, dict[str, Any]]:
    """How a process ended (``rc``: its exit code, -signal for a signal): text and row info."""
    if rc < 0:
        return f"{who} killed by {signal_name(-rc)} (signal {-rc})", {"signal": signal_name(-rc)}
    return f"{who} exited with status {rc}", {"exit_status": rc}


def crashed(how: str, info: dict[str, Any], tail: str, then: str = "") -> Outcome:
    """The ``crash`` outcome of the case a process died running (``how``, ``info``: :func:`ended`)."""
    o = Outcome.error(f"{how} while running this case{then}" + (f"; stderr: {tail}" if tail else ""),
                      status="crash")
    o.info.update(info)
    return o


class Isolated:
    """A target whose batches run in its worker process: one outcome per case, always."""

    def __init__(self, target, timeout: float, ahead: int = AHEAD, start: bool = True):
        self.alone = 0   # of the last batch next() gave: how many of its first cases ran each alone
        self.spec = spec_of(target)
        #: a one-case batch submitted with ``fork`` runs in a fork of the worker (worker.py), for
        #: a target whose runtime runs in the worker (not ``tosa``, whose runner is a process already)
        self.forks = bool(getattr(target, "fork_crashes", True)) and protocol.CAN_FORK
        self.timeout = float(timeout)
        self.ahead = ahead
        # starts now (imports its runtime meanwhile), or when first needed (_live)
        self.worker: Worker | None = Worker(self.spec) if start else None
        self._versions: dict[str, str] | None = None
        self._todo: deque = deque()   # batches (cases, alone, timing, fork) not yet in the worker
        self._sent: deque = deque()   # batches in the worker, in order
        self._hung: Outcome | None = None   # the target's constructor hung: every case's verdict
        self.unavailable: str | None = None  # why the target cannot run here, as its worker said
        self.stats: Counter = Counter()

    def availability(self, waiting=None) -> tuple[bool, str]:
        """Whether the target can run here, as its worker found when it started (its
        ``availability()``, asked there: the runtime is never imported here to learn it);
        waited for. ``waiting`` is called every 0.05 s meanwhile (it raises to stop waiting). A
        worker that could not create the target says so in every case's verdict instead."""
        while waiting is not None and self.worker is not None and self.worker.ready(0.05) is None:
            waiting()
        self._live()
        return (False, self.unavailable) if self.unavailable is not None else (True, "")

    def versions(self) -> dict[str, str]:
        """The target's versions, as its worker reported them when it started."""
        if self._versions is None:
            w = self._live()
            self._versions = dict(w.ready()[1]) if isinstance(w, Worker) else {"error": w.reason}
        return self._versions

    def known_versions(self) -> dict[str, str] | None:
        """The versions if its worker has said them yet (None: not waited for)."""
        return self._versions

    def _live(self) -> "Worker | Outcome":
        """The ready worker (a new one if the last died), or the Outcome of why none could start."""
        if self._hung is not None:   # (not waited for again: START_TIMEOUT once per target)
            return self._hung
        if self.unavailable is not None:
            return Outcome.error(f"the target is not available here: {self.unavailable}")
        # a new worker if the last died after it said ready (one that ends once it has said why it
        # cannot start, or dies starting, is read first)
        w = self.worker
        if w is None or (isinstance(w._ready, tuple) and w._ready[0] == "ready" and w.proc.poll() is not None):
            self._discard()
            self.worker = Worker(self.spec)
            self.stats["workers_started"] += 1
        w = self.worker
        ev = w.ready()
        if isinstance(ev, tuple) and ev[0] == "ready":
            if self._versions is None:
                self._versions = dict(ev[1])
            return w
        self._discard()
        if ev == "timeout":
            self._hung = Outcome.error(f"timeout while starting: the worker did not create the target within "
                                       f"{START_TIMEOUT:g} s", status="timeout")
            return self._hung
        if isinstance(ev, tuple) and ev[0] == "unavailable":
            self.unavailable = str(ev[1])
            return Outcome.error(f"the target is not available here: {self.unavailable}")
        if isinstance(ev, tuple) and ev[0] == "init_error":
            return Outcome.error(f"the worker could not create the target: {ev[1]}")
        how, info = w.exit_status()
        tail = w.log_tail()
        o = Outcome.error(f"{how} while creating the target" + (f"; stderr: {tail}" if tail else ""),
                          status="crash")
        o.info.update(info)
        return o

    def _discard(self) -> None:
        if self.worker is not None:
            self.worker.close(graceful=False)
            self.worker = None

    def submit(self, cases: Sequence, alone: int, timing: Timing, fork: bool = False) -> None:
        """Queue a batch (its first ``alone`` cases each run on their own; ``fork``: one case a
        finding says crashes the target, run in a fork of the worker, which a crash then spares)."""
        cases = list(cases)
        self._todo.append((cases, alone, timing, bool(fork and self.forks and len(cases) == 1)))
        self._feed()

    def _feed(self, limit: int | None = None) -> Outcome | None:
        """Hand queued batches to the worker, up to ``limit`` (default: ``ahead``) in it; the
        Outcome of why no worker could start, if none could."""
        while self._todo and len(self._sent) < (self.ahead if limit is None else limit):
            if self._sent and self.worker.proc.poll() is not None:
                return None   # it died running what it was sent: next() reads what it finished
            w = self._live()
            if isinstance(w, Outcome):
                return w
            if not self._sent:   # idle: its log (read back on a crash) starts afresh
                os.ftruncate(w.log_fd, 0)
            batch = self._todo.popleft()
            self._sent.append(batch)
            w.send(("run", [pickled(c) for c in batch[0]], *batch[1:]))   # a dead worker is found by next()
        return None

    def next(self) -> tuple[list, list[Outcome]]:
        """The next batch's (cases, one outcome per case), in the order they were queued."""
        failed = self._feed(max(1, self.ahead))
        if failed is not None:   # no worker: the next batch gets why
            cases, self.alone = self._todo.popleft()[0], 0
            return cases, [Outcome(failed.status, reason=failed.reason, info=dict(failed.info)) for _ in cases]
        cases, alone, timing, forked = self._sent[0]
        self.alone = alone   # (its first `alone` cases ran each alone: what a failure's batch was)
        if forked:
            self.stats["forked"] += 1
        w = self.worker
        deadline = time.monotonic() + START_TIMEOUT   # until it says it started this batch
        while True:
            ev = w.recv(deadline)
            if isinstance(ev, tuple) and len(ev) == 2 and ev[0] == "start" and isinstance(ev[1], (int, float)):
                deadline = float(ev[1]) + self.timeout * len(cases)
                continue
            break
        if isinstance(ev, tuple) and ev[0] == "outcomes" and len(ev) == 3:
            self._sent.popleft()
            busy = ev[2]
            self.stats["busy_s"] += float(busy) if isinstance(busy, (int, float)) else 0.0
            self._feed()
            return cases, check_outcomes(ev[1], len(cases))
        if (isinstance(ev, tuple) and ev[0] == "died" and len(ev) == 3 and len(cases) == 1
                and all(isinstance(x, int) for x in ev[1:])):   # the forked case died: the worker goes on
            self._sent.popleft()
            self.stats["crashes"] += 1
            self._feed()
            return cases, [crashed(*ended("process forked from the worker", ev[1]), w.log_tail(since=ev[2]))]
        # the batch in flight failed: the worker goes, the batches sent after it are queued again
        self._sent.popleft()
        self._todo.extendleft(reversed(self._sent))
        self._sent.clear()
        if len(cases) > 1:   # a crash, hang or garbage inside a batch: whose? one case at a time
            self._discard()
            self.stats["batches_split"] += 1
            self._todo.extendleft(reversed([([c], 1, timing, False) for c in cases]))
            return self.next()
        if isinstance(ev, tuple):   # a message that is not the outcomes: the protocol is broken
            self._discard()
            return cases, [Outcome.error(f"unreadable reply from the isolation worker: {ev[:2]!r}"[:500])]
        if ev == "timeout":
            self.stats["timeouts"] += 1
            self._discard()
            o = Outcome.error(f"no result within {self.timeout:g} s; the worker was killed and replaced "
                              f"(--case-timeout)", status="timeout")
            o.info["timeout_s"] = self.timeout
            return cases, [o]
        self.stats["crashes"] += 1
        how, info = w.exit_status()
        tail = w.log_tail()
        self._discard()
        return cases, [crashed(how, info, tail, "; the worker was restarted")]

    def run(self, cases: Sequence, timing: Timing, alone: int = 0) -> list[Outcome]:
        """One batch now (nothing else queued): its outcomes."""
        self.submit(cases, alone, timing)
        return self.next()[1]

    def release(self) -> None:
        """End the worker if it holds no batch and none waits (its memory back; a later batch
        starts a new one, _live)."""
        if self.worker is not None and not self._sent and not self._todo:
            self.worker.close(graceful=True)
            self.worker = None

    def close(self) -> None:
        """End the worker: gracefully when idle, killed when batches are still in it."""
        if self.worker is not None:
            self.worker.close(graceful=not self._sent)
            self.worker = None
        self._sent.clear()
        self._todo.clear()
