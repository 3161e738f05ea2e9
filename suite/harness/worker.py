"""The isolation worker: hosts one target in its own process (``python -m suite.worker``).

Started by :mod:`suite.isolation`. It talks to its parent over its original stdin
and stdout with length-prefixed pickle frames (:func:`send` / :func:`recv`); the
file descriptors 0 and 1 are then pointed at /dev/null and stderr, so whatever a
native runtime prints can never corrupt the protocol. Messages, parent -> worker::

    ("init", {"module", "qualname", "name", "options"}, sys_path, parent_pid)
    ("batch", cases, timing)                # one case at a time, one outcome each
    ("parts", [(cases, alone), ...], timing[, gated])   # whole batches back to back: one
                                            # "outcomes" reply per part, in order; alone: its first
                                            # cases each run on their own; gated: read now, run on
    ("go",)                                 # this next message (any other drops the gated parts)
    ("close",)

and worker -> parent::

    ("ready", pid) | ("init_error", text)
    ("outcome", i, Outcome, busy_s)         # "batch": as each case finishes, in order
    ("outcomes", [Outcome, ...], busy_s)    # "parts": a whole part (a target that overrides run())

``busy_s`` is the time the worker spent on the case (the part) itself: the target's own
time, as opposed to the messages and the parent's harness (suite/timing.py).

For a "batch" the worker calls ``target.safe_run_one`` per case and reports each
outcome as soon as it exists, so when the process dies the parent knows which case
was in flight. For each of the "parts" it calls ``target.run`` (through
``targets.base.run_in_parts``: one case at a time if the batch raises, as the in-process
runner does) and reports the list.
The worker dies with its parent (``PR_SET_PDEATHSIG`` on Linux, and a watchdog
thread), so a killed run leaves no stray process behind.
"""

from __future__ import annotations

import faulthandler
import os
import pickle
import struct
import sys
import threading
import time

_HEAD = struct.Struct("<Q")
MAX_FRAME = 1 << 34


def send(fd: int, obj) -> None:
    """Write one frame (8-byte little-endian length + pickle) to ``fd``."""
    body = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    data = memoryview(_HEAD.pack(len(body)) + body)
    while data:
        n = os.write(fd, data)
        data = data[n:]


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
    if body is None:
        return None
    return pickle.loads(body)


def _die_with_parent(parent_pid: int) -> None:
    """Exit when the parent goes away, even while a kernel hangs (Linux: PDEATHSIG)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)   # PR_SET_PDEATHSIG
        except Exception:
            pass
    if os.getppid() != parent_pid:
        os._exit(3)

    def watch():
        while True:
            time.sleep(1.0)
            if os.getppid() != parent_pid:
                os._exit(3)
    threading.Thread(target=watch, name="qconform-parent-watch", daemon=True).start()


def _make_target(spec: dict):
    import importlib
    mod = importlib.import_module(spec["module"])
    obj = mod
    for part in spec["qualname"].split("."):
        obj = getattr(obj, part)
    t = obj(**spec.get("options", {}))
    if spec.get("name"):
        try:
            t.name = spec["name"]
        except Exception:
            pass
    return t


def _transferable(o, pickle_error: Exception):
    from targets.base import Outcome
    return Outcome.error(f"the target's outcome cannot be transferred from the worker: "
                         f"{type(pickle_error).__name__}: {pickle_error}"[:2000])


def _guarded(fn):
    from targets.base import Outcome
    try:
        return fn()
    except Exception as e:
        return Outcome.from_exception(e)
    except BaseException as e:   # SystemExit and friends: the kernel tried to end the process
        return Outcome.error(f"target raised {type(e).__name__}({e}) (it tried to end the process)",
                             status="crash")


def _stream(out_fd: int, target, cases, timing) -> None:
    """One case at a time, each outcome sent as soon as it exists."""
    for i, c in enumerate(cases):
        t0 = time.perf_counter()
        o = _guarded(lambda: target.safe_run_one(c, timing))
        busy = time.perf_counter() - t0
        try:
            send(out_fd, ("outcome", i, o, busy))
        except Exception as e:   # pickling failed before anything was written
            send(out_fd, ("outcome", i, _transferable(o, e), busy))


def _part(out_fd: int, target, cases, timing, alone: int) -> None:
    """One part through ``target.run``, its outcomes sent together."""
    from targets.base import run_in_parts
    t0 = time.perf_counter()
    outs = run_in_parts(target, cases, timing, alone, _guarded)
    busy = time.perf_counter() - t0
    try:
        send(out_fd, ("outcomes", outs, busy))
    except Exception:
        fixed = []
        for o in outs:
            try:
                pickle.dumps(o)
                fixed.append(o)
            except Exception as e:
                fixed.append(_transferable(o, e))
        send(out_fd, ("outcomes", fixed, busy))


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
    for p in reversed(sys_path):
        if p not in sys.path:
            sys.path.insert(0, p)
    try:
        target = _make_target(spec)
    except BaseException as e:
        send(out_fd, ("init_error", f"{type(e).__name__}: {e}"[:2000]))
        return 1
    send(out_fd, ("ready", os.getpid()))
    gated = None
    while True:
        msg = recv(in_fd)
        if msg is None or msg[0] == "close":
            break
        if msg[0] == "go":
            msg, gated = gated, None
            if msg is None:   # a protocol error: end, so that the parent sees it at once (not a timeout)
                print("qconform worker: 'go' with no cases waiting", file=sys.stderr)
                return 3
        else:
            gated = None
            if msg[0] == "parts" and len(msg) > 3 and msg[3]:
                gated = msg   # unpickled while another target runs; started by "go"
                continue
        if msg[0] == "batch":
            _stream(out_fd, target, msg[1], msg[2])
        elif msg[0] == "parts":   # the next part starts as soon as the last one's reply is written
            for cases, alone in msg[1]:
                _part(out_fd, target, cases, msg[2], alone)
    try:
        target.close()
    except Exception:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
