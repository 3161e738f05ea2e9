"""Process isolation: a target's cases run in a worker process, so crashes and hangs become verdicts.

Targets that run native code (``isolate = True`` on the class: LiteRT, ONNX Runtime,
onnxruntime-qnn, and every ``module:Class`` target unless it says otherwise) are
driven through an :class:`Isolator`. It keeps one worker process per target
(``python -m suite.worker``, see :mod:`suite.worker`), reused across batches, and
turns every way a case can go wrong into the verdict of *that* case:

* the worker dies (SIGSEGV, SIGABRT, ``exit()`` in a kernel, ...) -> ``crash`` for the
  case in flight, with the signal (or exit status) and the tail of the worker's
  stderr (faulthandler's Python stack included); a fresh worker takes the rest;
* no outcome within the per-case timeout -> ``timeout``; the worker (its whole
  process group) is killed and replaced;
* a target that overrides ``run()`` (batching cases into one invoke) reports nothing
  until its batch ends: a crash or hang of such a batch cannot be attributed, so the
  batch is run again one case at a time (per-case timeouts, fresh workers);
* a worker that cannot even create the target -> ``error`` for the batch, with why.

What the target returns is checked by :func:`check_outcomes` (also for in-process
targets): anything but one :class:`~targets.base.Outcome` per case becomes ``error``.
Wrong shapes, dtypes and NaNs in the outputs are found by :mod:`suite.compare`.
"""

from __future__ import annotations

import math
import os
import pickle
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from targets.base import Outcome, Target

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_TIMEOUT = 60.0        # seconds per case
START_TIMEOUT = 120.0         # seconds for a worker to start and build its target
CLOSE_TIMEOUT = 5.0
OUTCOME_STATUSES = ("ok", "unsupported", "error", "crash", "timeout", "infra")
_TIMEOUT, _DEAD = "timeout", "dead"


# ----------------------------------------------------------------------------- what may be isolated

def wants_isolation(target) -> bool:
    """Whether ``target`` asks for a worker process (class attribute ``isolate``, default True)."""
    return bool(getattr(target, "isolate", True))


def spec_of(target) -> dict[str, Any] | None:
    """How a worker re-creates ``target``: its importable class and options; None if it cannot."""
    cls = type(target)
    mod, qual = cls.__module__, cls.__qualname__
    if mod in ("__main__", "__mp_main__") or "<locals>" in qual:
        return None
    options = dict(getattr(target, "options", {}) or {})
    try:
        pickle.dumps(options)
    except Exception:
        return None
    return {"module": mod, "qualname": qual, "name": getattr(target, "name", None), "options": options}


def isolator_for(target, isolation: str = "process", timeout: float = DEFAULT_TIMEOUT) -> "Isolator | None":
    """The worker-process runner of ``target`` under ``--isolation`` mode ``isolation``, or None
    when it runs in this process (``none``, ``isolate = False``, or it cannot be re-created)."""
    use = isolation == "process" and wants_isolation(target) and spec_of(target) is not None
    return Isolator(target, timeout=timeout) if use else None


def batches_per_case(target) -> bool:
    """True when the target runs a batch case by case (it does not override ``Target.run``)."""
    run = getattr(type(target), "run", None)
    return run is None or run is Target.run


# ----------------------------------------------------------------------------- checking outcomes

def check_outcome(o: Any) -> Outcome:
    """``o`` if it is a well-formed Outcome, else an ``error`` outcome saying what was wrong."""
    if not isinstance(o, Outcome):
        return Outcome.error(f"target returned {type(o).__name__} instead of an Outcome")
    if o.status not in OUTCOME_STATUSES:
        return Outcome.error(f"target returned an Outcome with unknown status {o.status!r}")
    if not isinstance(o.info, dict):
        o.info = {}
    if o.status == "ok":
        import numpy as np
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


# ----------------------------------------------------------------------------- one worker process

def signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


class Worker:
    """One ``python -m suite.worker`` process hosting one target instance; started at once, its
    first message (ready, or why not) read by :meth:`wait_ready` when it is needed."""

    def __init__(self, spec: dict[str, Any], start_timeout: float = START_TIMEOUT):
        self.log_fd = _anonymous_log()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env.setdefault("PYTHONFAULTHANDLER", "1")
        # NumPy's BLAS threads in a worker only spin-wait beside the runtime under test (about
        # 0.1 s of CPU per worker and run, taken from the other processes on a small machine)
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        self.proc = subprocess.Popen([sys.executable, "-m", "suite.harness.worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log_fd, start_new_session=True,
                                     env=env, close_fds=True)
        _grow_pipe(self.proc.stdout.fileno())
        _grow_pipe(self.proc.stdin.fileno())
        self._buf = bytearray()
        self._closing = False   # asked to close (request_close)
        self.start_timeout = start_timeout
        self.send(("init", spec, list(sys.path), os.getpid()))
        self.ready = None

    def wait_ready(self):
        """The worker's first message ("ready" or why not), waiting for it if not yet read."""
        if self.ready is None:   # the start-up limit counts from now: a worker started early may
            self.ready = self.recv(self.start_timeout)   # have waited long for its first batch
        return self.ready

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, msg) -> bool:
        """Send one frame; False if the worker is gone."""
        from suite.harness.worker import send
        try:
            send(self.proc.stdin.fileno(), msg)
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def recv(self, timeout: float):
        """("msg", obj) | ("bad", text) | _TIMEOUT | _DEAD."""
        from suite.harness.worker import _HEAD
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while True:
            if len(self._buf) >= _HEAD.size:
                (n,) = _HEAD.unpack_from(self._buf)
                if len(self._buf) >= _HEAD.size + n:
                    body = bytes(self._buf[_HEAD.size:_HEAD.size + n])
                    del self._buf[:_HEAD.size + n]
                    try:
                        return ("msg", pickle.loads(body))
                    except Exception as e:
                        return ("bad", f"{type(e).__name__}: {e}")
            left = deadline - time.monotonic()
            if left <= 0:
                return _TIMEOUT
            try:
                r, _, _ = select.select([fd], [], [], left)
            except InterruptedError:
                continue
            if not r:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return _DEAD
            self._buf += chunk

    def clear_log(self) -> None:
        try:
            os.ftruncate(self.log_fd, 0)
        except OSError:
            pass

    def log_tail(self, limit: int = 1500) -> str:
        """The last lines the worker wrote to stderr (faulthandler's stack on a crash)."""
        try:
            size = os.fstat(self.log_fd).st_size
            raw = os.pread(self.log_fd, limit, max(0, size - limit))
        except OSError:
            return ""
        lines = [ln.rstrip() for ln in raw.decode("utf-8", "replace").splitlines()]
        noise = ("Extension modules:", "Current thread", "Stack (most recent", "Thread 0x")
        lines = [ln for ln in lines if ln.strip() and not ln.startswith(noise)
                 and "suite/harness/worker.py" not in ln and "<frozen runpy>" not in ln]
        return " | ".join(ln.strip() for ln in lines[-10:])[-1200:]

    def exit_status(self, wait: float = 5.0) -> tuple[str, dict[str, Any]]:
        """How the (dead) worker ended: text and row info (signal or exit status)."""
        try:
            rc = self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = self.proc.wait()
        if rc < 0:
            name = signal_name(-rc)
            return f"worker process killed by {name} (signal {-rc})", {"signal": name}
        return f"worker process exited with status {rc}", {"exit_status": rc}

    def kill(self) -> None:
        """Kill the worker and anything it started (its own session / process group)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass
        try:
            self.proc.kill()
        except OSError:
            pass

    def request_close(self) -> None:
        """Ask the worker to close its target and exit, without waiting (:meth:`close` waits)."""
        if not self._closing and self.proc.poll() is None:
            self._closing = self.send(("close",))

    def close(self, graceful: bool = True) -> None:
        if graceful and self.proc.poll() is None and (self._closing or self.send(("close",))):
            try:
                self.proc.wait(timeout=CLOSE_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
        self.kill()
        try:
            self.proc.wait(timeout=CLOSE_TIMEOUT)
        except subprocess.TimeoutExpired:
            pass
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        try:
            os.close(self.log_fd)
        except OSError:
            pass


def _grow_pipe(fd: int, size: int = 1 << 20) -> None:
    """Make a pipe hold up to ``size`` bytes (Linux; default 64 KiB), so a worker that replies
    while this process is busy goes on with its next part instead of waiting to be read."""
    try:
        import fcntl
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), size)
    except (OSError, ImportError, ValueError):
        pass


def _seconds(x) -> float:
    """A worker's busy time, as a number of seconds (anything else counts as none)."""
    return float(x) if isinstance(x, (int, float)) and math.isfinite(x) and x >= 0 else 0.0


def _anonymous_log() -> int:
    """A deleted temporary file opened O_APPEND (the worker's stderr; truncated per batch)."""
    import tempfile
    fd, path = tempfile.mkstemp(prefix="qconform-worker-", suffix=".log")
    os.close(fd)
    fd = os.open(path, os.O_RDWR | os.O_APPEND)
    os.unlink(path)
    return fd


# ----------------------------------------------------------------------------- the isolator

class Isolator:
    """Runs one target's batches in a worker process; one outcome per case, always."""

    def __init__(self, target, timeout: float = DEFAULT_TIMEOUT, start_timeout: float = START_TIMEOUT):
        spec = spec_of(target)
        if spec is None:
            raise ValueError(f"target {getattr(target, 'name', target)!r} cannot be re-created in a worker")
        self.spec = spec
        self.timeout = float(timeout)
        self.start_timeout = max(float(start_timeout), self.timeout)
        self.per_case = batches_per_case(target)
        self.worker: Worker | None = None
        self._early: Worker | None = None   # started by prestart(), not yet waited for
        self._starting: Worker | None = None   # being waited for (cancel() kills it too)
        # busy_s: the workers' own time on cases (as they report it; a crash or hang: the wait)
        self.stats = {"workers_started": 0, "worker_start_s": 0.0, "crashes": 0, "timeouts": 0, "busy_s": 0.0}
        self.cancelled = False
        self._ending: list[Worker] = []   # asked to end, not yet waited for (close(wait=False))
        self._gate: tuple | None = None   # (worker, parts) submitted and waiting for "go"

    def cancel(self) -> None:
        """Stop at once (from another thread, e.g. an interrupted pipelined run): the worker is
        killed, so the batch in flight ends, and no new worker starts."""
        self.cancelled = True
        for w in (self.worker, self._early, self._starting):
            if w is not None:
                w.kill()

    def prestart(self) -> None:
        """Start the worker now, without waiting: it imports its runtime and creates the target
        while this process generates and collects the cases. The first batch waits for it."""
        if self.worker is None and self._early is None and not self.cancelled:
            self._early = Worker(self.spec, self.start_timeout)

    # ---- worker lifecycle
    def _worker(self) -> Worker | Outcome:
        """The live worker, starting one if needed; an Outcome if it could not start."""
        if self.cancelled:
            return Outcome.error("the run was stopped before this case ran", status="infra")
        if self.worker is not None and self.worker.proc.poll() is None:
            return self.worker
        self._discard()
        # the start-up counted is the wait for it (a prestarted worker's head start overlapped
        # the harness's own work: counting it too would overlap the target times)
        t0 = time.perf_counter()
        w, self._early = (self._early or Worker(self.spec, self.start_timeout)), None
        self._starting = w
        try:
            ev = w.wait_ready()
        finally:
            self._starting = None
        self.stats["workers_started"] += 1
        self.stats["worker_start_s"] += time.perf_counter() - t0
        if self.cancelled:
            w.close(graceful=False)
            return Outcome.error("the run was stopped before this case ran", status="infra")
        if isinstance(ev, tuple) and ev[0] == "msg" and ev[1][0] == "ready":
            self.worker = w
            return w
        if ev == _TIMEOUT:
            w.close(graceful=False)
            return Outcome.error(f"isolation worker did not start the target within {self.start_timeout:g} s",
                                 status="timeout")
        if isinstance(ev, tuple) and ev[0] == "msg" and ev[1][0] == "init_error":
            w.close()
            return Outcome.error(f"isolation worker could not create the target: {ev[1][1]}")
        how, info = w.exit_status()
        tail = w.log_tail()
        w.close(graceful=False)
        o = Outcome.error(f"{how} while creating the target" + (f"; stderr: {tail}" if tail else ""),
                          status="crash")
        o.info.update(info)
        return o

    def _discard(self) -> None:
        if self.worker is not None:
            self.worker.close(graceful=False)
            self.worker = None

    def close(self, wait: bool = True) -> None:
        """End the worker: it closes its target and exits. With ``wait=False`` it is only asked
        to, and :meth:`reap` waits for it (so several workers end at once, and the report is
        written meanwhile)."""
        if self.worker is not None:
            if not wait:
                self.worker.request_close()
                self._ending.append(self.worker)
            else:
                self.worker.close(graceful=True)
            self.worker = None
        if self._early is not None:
            self._early.close(graceful=False)
            self._early = None
        if wait:
            self.reap()

    def reap(self) -> None:
        """Wait for the workers asked to end by ``close(wait=False)`` (killed after CLOSE_TIMEOUT)."""
        while self._ending:
            self._ending.pop().close(graceful=True)

    # ---- failures of the case in flight
    def _crash(self, w: Worker, what: str) -> Outcome:
        how, info = w.exit_status()
        tail = w.log_tail()
        self.stats["crashes"] += 1
        self._discard()
        o = Outcome.error(f"{how} while running {what}; the worker was restarted"
                          + (f"; stderr: {tail}" if tail else ""), status="crash")
        o.info.update(info)
        return o

    def _timeout(self, seconds: float, what: str) -> Outcome:
        self.stats["timeouts"] += 1
        self._discard()
        o = Outcome.error(f"no result within {seconds:g} s while running {what}; the worker was killed "
                          f"and replaced (--timeout)", status="timeout")
        o.info["timeout_s"] = seconds
        return o

    # ---- running
    def run(self, cases: Sequence, timing, on_outcome=None, alone: int = 0) -> list[Outcome]:
        """One outcome per case, in order; ``on_outcome(i, outcome)`` as soon as each is final.
        The first ``alone`` cases are each run by the target on their own, in the same message."""
        cases = list(cases)
        if not cases:
            return []
        if not self.per_case:   # a whole batch: one part (a crash or hang in it: one case at a time)
            cb = None if on_outcome is None else (lambda k, i, o: on_outcome(i, o))
            return self.run_parts([(cases, alone)], timing, on_outcome=cb)[0]
        outs: list[Outcome | None] = [None] * len(cases)

        def put(i: int, o: Outcome) -> None:
            outs[i] = o
            if on_outcome is not None:
                on_outcome(i, o)

        self._stream(cases, timing, put)
        for i, o in enumerate(outs):
            if o is None:   # never expected: still one outcome per case, passed on like the others
                put(i, Outcome.error("no outcome (internal)"))
        return outs

    def _stream(self, cases: list, timing, put) -> None:
        n = len(cases)
        i = 0
        while i < n:
            w = self._worker()
            if isinstance(w, Outcome):   # no worker: the rest of the batch gets why
                for k in range(i, n):
                    put(k, Outcome(w.status, reason=w.reason, info=dict(w.info)))
                return
            w.clear_log()
            base = i
            if not w.send(("batch", cases[base:], timing)):
                put(i, self._crash(w, "this case (the worker was gone before it started)"))
                i += 1
                continue
            t_last = time.perf_counter()
            while i < n:
                ev = w.recv(self.timeout)
                if ev in (_TIMEOUT, _DEAD):
                    self.stats["busy_s"] += time.perf_counter() - t_last
                if ev == _TIMEOUT:
                    put(i, self._timeout(self.timeout, "this case"))
                    i += 1
                    break
                if ev == _DEAD:
                    put(i, self._crash(w, "this case"))
                    i += 1
                    break
                t_last = time.perf_counter()
                kind, payload = ev
                if kind == "bad" or not (isinstance(payload, tuple) and len(payload) == 4
                                         and payload[0] == "outcome" and payload[1] == i - base):
                    self._discard()
                    put(i, Outcome.error(f"unreadable outcome from the isolation worker: "
                                         f"{payload if kind == 'bad' else type(payload).__name__}"))
                    i += 1
                    break
                self.stats["busy_s"] += _seconds(payload[3])
                put(i, check_outcome(payload[2]))
                i += 1

    def run_parts(self, parts: Sequence, timing, on_outcome=None, while_running=None) -> list[list[Outcome]]:
        """Several batches ``[(cases, alone), ...]`` of this target in one message (the first
        ``alone`` cases of a part each run on their own): the worker runs them back to back and
        replies per part, so it never waits for this process between them. ``on_outcome(k, i,
        outcome)`` once per case, as soon as the outcomes of part ``k`` exist. A crash or hang of
        a part with several cases cannot be attributed, so that part is run again one case at a
        time; the parts after it go to a fresh worker. A streaming (per-case) target gets one
        "batch" message per part instead. ``while_running()`` is called once, as soon as the
        worker has its message (the runner then sends the next targets their cases)."""
        gate, self._gate = self._gate, None
        given, parts = parts, [(list(cs), int(alone)) for cs, alone in parts]
        outs: list[list[Outcome]] = [[] for _ in parts]

        def started() -> None:
            nonlocal while_running
            if while_running is not None:
                fn, while_running = while_running, None
                fn()

        def put(k: int, got: list[Outcome]) -> None:
            outs[k] = got
            if on_outcome is not None:
                for i, o in enumerate(got):
                    on_outcome(k, i, o)

        if self.per_case:   # a streaming target: one message per part already, each outcome
            started()
            for k, (cs, alone) in enumerate(parts):   # passed on as soon as it exists
                cb = None if on_outcome is None else (lambda i, o, k=k: on_outcome(k, i, o))
                outs[k] = self.run(cs, timing, on_outcome=cb, alone=alone)
            return outs
        k = 0
        while k < len(parts):
            w = self._worker()
            if isinstance(w, Outcome):   # no worker: the remaining parts get why
                started()
                for j in range(k, len(parts)):
                    put(j, [Outcome(w.status, reason=w.reason, info=dict(w.info)) for _ in parts[j][0]])
                return outs
            w.clear_log()
            todo = [j for j in range(k, len(parts)) if parts[j][0]]   # an empty part has no reply
            if not todo:
                break
            if gate is not None and gate[0] is w and gate[1] is given and k == 0:
                sent = w.send(("go",))   # submitted earlier: the worker has the cases already
            else:   # (a gated message the worker holds is dropped by this one)
                sent = w.send(("parts", [parts[j] for j in todo], timing))
            gate = None
            started()
            t_last = time.perf_counter()
            for j in todo:
                cs, alone = parts[j]
                n = len(cs)
                ev = w.recv(self.timeout * max(1, n)) if sent else _DEAD
                k = j + 1
                if ev in (_TIMEOUT, _DEAD):
                    self.stats["busy_s"] += time.perf_counter() - t_last
                    what = "this case" if n == 1 else f"a batch of {n} cases"
                    o = (self._timeout(self.timeout * n, what) if ev == _TIMEOUT else self._crash(w, what))
                    if n == 1:
                        put(j, [o])
                    else:   # not attributable: one case at a time, as parts of one message
                        singles = self.run_parts([([c], 0) for c in cs], timing)   # (a fresh worker
                        put(j, [p[0] for p in singles])                           # after each crash)
                    break
                kind, payload = ev
                if kind == "bad" or not (isinstance(payload, tuple) and len(payload) == 3
                                         and payload[0] == "outcomes"):
                    self._discard()
                    text = payload if kind == "bad" else type(payload).__name__
                    put(j, [Outcome.error(f"unreadable outcomes from the isolation worker: {text}")
                            for _ in range(n)])
                    break
                t_last = time.perf_counter()
                self.stats["busy_s"] += _seconds(payload[2])
                put(j, check_outcomes(payload[1], n))
        started()
        return outs

    def submit(self, parts: Sequence, timing) -> bool:
        """Send ``parts`` to the idle, ready worker ahead of time: it unpickles them and waits;
        :meth:`run_parts` with the same ``parts`` object then only says "go". False (nothing
        sent) without such a worker: one still starting, or a streaming (per-case) target.
        Only for an idle worker: one busy with a batch does not read, and both sides would wait."""
        w = self.worker
        if (self.per_case or self.cancelled or w is None or w.proc.poll() is not None
                or not any(cs for cs, _ in parts)):
            return False
        if w.send(("parts", [(list(cs), int(alone)) for cs, alone in parts if cs], timing, True)):
            self._gate = (w, parts)
            return True
        return False
