"""The isolation worker: one target in its own process (``python -m suite.harness.worker``).

Started by :mod:`suite.harness.isolation`. It talks to its parent over its original stdin
and stdout with length-prefixed pickle frames (pipes only: nothing here is read from disk);
file descriptors 0 and 1 are then pointed at /dev/null and stderr, so whatever a native
runtime prints can never corrupt the protocol. Messages::

    parent -> worker   ("init", {"module", "qualname", "name", "options"}, sys_path, parent_pid)
                       ("run", cases, alone, timing, fork)   # a batch (each case pickled on its own): its first `alone` alone
                       ("close",)
    worker -> parent   ("ready", versions) | ("unavailable", why) | ("init_error", text)
                       ("start", t)                      # starting the next batch (time.monotonic())
                       ("outcomes", [Outcome, ...], busy_s)
                       ("died", exit_code, log_offset)   # the batch's forked process died (see below)

The worker creates the target and asks its ``availability()`` before it says ``ready``: the
runtime is imported here, never in the parent to learn whether the target can run (a target
that cannot says ``unavailable`` with why, and ends).

Batches run in the order they came, each as soon as the last is done: the parent may send
several ahead. A reader thread takes every message off the pipe as it arrives, so the parent
never waits to send while the worker writes outcomes it has not read yet. ``busy_s`` is the
worker's own time on the batch; ``t`` lets the parent time a batch from its start (one
system-wide monotonic clock). A worker runs at a lower priority than its parent
(:data:`WORKER_NICE`), in a process group of its own. The worker dies with its parent
(``PR_SET_PDEATHSIG`` on Linux), so a killed run leaves no stray process behind.

A batch sent with ``fork`` (a case a finding says crashes the target: suite/harness/run.py) runs
in a child forked from the worker, its runtime already imported, which sends the outcomes back
over a pipe and exits (``os._exit``). If it dies first, the worker says so (``died``: the child's exit
code, -signal as Popen gives it, and where in the worker's stderr the child's began) and goes
on: the parent makes that case's ``crash`` as it does for a dead worker, with no restart. Only on
Linux (elsewhere the batch runs in the worker, as any); the child is this thread alone (the reader
thread and any runtime thread pool are not in it: the suite's native targets run one thread).
"""

from __future__ import annotations

import ctypes
import faulthandler
import importlib
import os
import pickle
import queue
import signal
import struct
import sys
import threading
import time
import warnings

from targets.base import Outcome, run_in_parts

_HEAD = struct.Struct("<Q")
MAX_FRAME = 1 << 34
WORKER_NICE = 10
CAN_FORK = hasattr(os, "fork") and sys.platform.startswith("linux")


def send(fd: int, obj) -> None:
    """Write one frame (8-byte little-endian length + pickle) to ``fd``."""
    body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    data = memoryview(_HEAD.pack(len(body)) + body)
    while data:
        data = data[os.write(fd, data):]


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        b = os.read(fd, min(n - got, 1 << 20))
        if not b:
            return None
        chunks.append(b)
        got += len(b)
    return b"".join(chunks)


def recv(fd: int):
    """Read one frame from ``fd`` (blocking); None at end of file."""
    head = _read_exact(fd, _HEAD.size)
    if head is None:
        return None
    (n,) = _HEAD.unpack(head)
    if n > MAX_FRAME:
        raise ValueError(f"frame of {n} bytes")
    body = _read_exact(fd, n)
    return None if body is None else pickle.loads(body)


def _die_with_parent(parent_pid: int) -> None:
    """Be killed when the parent goes away, even while a kernel hangs (Linux: PDEATHSIG)."""
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)   # PR_SET_PDEATHSIG
        except Exception:
            pass
    if os.getppid() != parent_pid:   # the parent died before prctl took effect
        os._exit(3)


def _yield_to_parent(nice: int | None = None) -> None:
    """Run below the parent's priority: the parent judges every outcome and runs pytest, the
    run's critical path, while a worker only runs ahead of it. (On Python >= 3.11 the worker stays
    in its parent's session, hence in its Linux autogroup, where nice values count: the run as a
    whole keeps its share of a shared machine.) ``nice``: the target's own (``worker_nice``), at
    least 1 below the parent."""
    try:
        os.nice(WORKER_NICE if nice is None else min(max(1, nice), 19))
    except OSError:
        pass


def _make_target(spec: dict):
    obj = importlib.import_module(spec["module"])
    for part in spec["qualname"].split("."):
        obj = getattr(obj, part)
    t = obj(**spec.get("options", {}))
    if spec.get("name"):
        t.name = spec["name"]
    return t


def _guarded(fn):
    try:
        return fn()
    except Exception as e:
        return Outcome.from_exception(e)
    except BaseException as e:   # SystemExit and friends: the kernel tried to end the process
        return Outcome.error(f"target raised {type(e).__name__}({e}) (it tried to end the process)",
                             status="crash")


def _versions(target) -> dict:
    try:
        return {str(k): str(v) for k, v in dict(target.versions()).items()}
    except Exception as e:
        return {"error": f"{type(e).__name__}: {e}"}


def _send_outcomes(out_fd: int, outs: list, busy: float) -> None:
    try:
        send(out_fd, ("outcomes", outs, busy))
    except Exception:   # an outcome that cannot be pickled: that case's error, the others kept
        fixed = []
        for o in outs:
            try:
                pickle.dumps(o)
                fixed.append(o)
            except Exception as e:
                fixed.append(Outcome.error(f"the target's outcome cannot be transferred from the worker: "
                                           f"{type(e).__name__}: {e}"[:2000]))
        send(out_fd, ("outcomes", fixed, busy))


def _forked(target, cases, timing, alone: int):
    """The batch run in a child forked from this process: its ("outcomes", ...) message, ("died",
    exit code, log offset) if it ended without one, or None if no child could be forked."""
    sys.stderr.flush()
    try:
        since = os.lseek(2, 0, os.SEEK_CUR)   # the child's stderr starts here in the worker's log
    except OSError:
        since = 0
    r, w = os.pipe()
    worker = os.getpid()
    try:
        with warnings.catch_warnings():   # (3.12+ warns of fork with threads: the child uses only this one)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:   # the child: this batch, its outcomes, gone (no atexit, no cleanup of the worker's state)
        code = 70
        try:
            os.close(r)
            _die_with_parent(worker)
            t0 = time.perf_counter()
            outs = run_in_parts(target, cases, timing, alone, _guarded)
            _send_outcomes(w, outs, time.perf_counter() - t0)
            code = 0
        finally:
            os._exit(code)
    os.close(w)
    try:
        msg = recv(r)
    except Exception:   # (a torn or oversized frame: it died writing it)
        msg = None
    finally:
        os.close(r)
    _, status = os.waitpid(pid, 0)
    if isinstance(msg, tuple) and msg and msg[0] == "outcomes":
        return msg
    return ("died", os.waitstatus_to_exitcode(status), since)


def main() -> int:
    in_fd, out_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)           # native prints go to the worker's log (stderr), never into the protocol
    faulthandler.enable(file=sys.stderr, all_threads=False)
    msg = recv(in_fd)
    if not msg or msg[0] != "init":
        return 2
    _, spec, sys_path, parent_pid = msg
    _die_with_parent(int(parent_pid))
    _yield_to_parent(spec.get("nice"))
    for p in reversed(sys_path):
        if p not in sys.path:
            sys.path.insert(0, p)
    try:
        target = _make_target(spec)
        ok, why = target.availability()
    except BaseException as e:
        send(out_fd, ("init_error", f"{type(e).__name__}: {e}"[:2000]))
        return 1
    if not ok:
        send(out_fd, ("unavailable", str(why)[:2000]))
        return 1
    send(out_fd, ("ready", _versions(target)))
    inbox: queue.SimpleQueue = queue.SimpleQueue()

    def read() -> None:
        while True:
            msg = recv(in_fd)
            inbox.put(msg)
            if msg is None or msg[0] == "close":
                return
    threading.Thread(target=read, name="qconform-worker-inbox", daemon=True).start()
    while True:
        msg = inbox.get()
        if msg is None or msg[0] == "close":
            break
        _, cases, alone, timing, *fork = msg
        cases = [pickle.loads(c) if isinstance(c, bytes) else c for c in cases]   # (each pickled once: isolation.pickled)
        send(out_fd, ("start", time.monotonic()))
        reply = _forked(target, cases, timing, alone) if fork and fork[0] and CAN_FORK else None
        if reply is not None:
            send(out_fd, reply)
            continue
        t0 = time.perf_counter()
        outs = run_in_parts(target, cases, timing, alone, _guarded)
        _send_outcomes(out_fd, outs, time.perf_counter() - t0)
    try:
        target.close()
    except Exception:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
