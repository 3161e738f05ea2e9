"""Small timing helpers shared by the benchmarks: BLAS thread limits, interleaved medians, quiet
native output."""

from __future__ import annotations

import contextlib
import ctypes
import os
import statistics
import sys
import tempfile
import time
from typing import Callable

import numpy  # noqa: F401  (loads NumPy's OpenBLAS, which the thread limits act on)


def _openblas_libs() -> list[ctypes.CDLL]:
    """The OpenBLAS libraries loaded in this process (NumPy's bundled scipy-openblas and others)."""
    libs, seen = [], set()
    try:
        with open("/proc/self/maps") as f:
            paths = {parts[-1] for parts in (ln.split() for ln in f)
                     if len(parts) >= 6 and "openblas" in parts[-1].lower() and ".so" in parts[-1]}
    except OSError:
        return libs
    for p in sorted(paths):
        if p in seen or not p.startswith("/"):
            continue
        seen.add(p)
        try:
            libs.append(ctypes.CDLL(p))
        except OSError:
            pass
    return libs


_SET = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads", "openblas_set_num_threads64_",
        "openblas_set_num_threads")
_GET = ("scipy_openblas_get_num_threads64_", "scipy_openblas_get_num_threads", "openblas_get_num_threads64_",
        "openblas_get_num_threads")


def _fn(lib, names):
    for n in names:
        f = getattr(lib, n, None)
        if f is not None:
            return f
    return None


def blas_threads() -> int | None:
    """OpenBLAS's current thread count (None: no OpenBLAS found)."""
    for lib in _openblas_libs():
        g = _fn(lib, _GET)
        if g is not None:
            g.restype = ctypes.c_int
            return int(g())
    return None


@contextlib.contextmanager
def single_threaded_blas():
    """Limit OpenBLAS to one thread inside the block (the golden is measured single-threaded)."""
    libs = [(lib, _fn(lib, _SET), _fn(lib, _GET)) for lib in _openblas_libs()]
    before = []
    for lib, s, g in libs:
        if s is None:
            continue
        if g is not None:
            g.restype = ctypes.c_int
            before.append((s, int(g())))
        s(ctypes.c_int(1))
    try:
        yield
    finally:
        for s, n in before:
            s(ctypes.c_int(n))


def interleaved(fns: dict[str, Callable[[], object]], repeats: int, min_time: float = 0.0,
                max_time: float = 30.0) -> dict[str, list[float]]:
    """Time each function once per round, round after round (so a load spike on a shared
    machine hits every side alike), for ``repeats`` rounds or until ``min_time`` seconds of
    the slowest side are collected (at most ``max_time`` in all). Returns seconds per call."""
    samples: dict[str, list[float]] = {k: [] for k in fns}
    t_start = time.perf_counter()
    rounds = 0
    while True:
        for k, f in fns.items():
            t0 = time.perf_counter()
            f()
            samples[k].append(time.perf_counter() - t0)
        rounds += 1
        spent = time.perf_counter() - t_start
        if rounds >= repeats and (max(sum(v) for v in samples.values()) >= min_time or spent >= max_time):
            break
        if spent >= max_time and rounds >= 3:
            break
    return samples


def median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


@contextlib.contextmanager
def quiet_native_output():
    """Send file descriptors 1 and 2 to a temporary file inside the block: the runtimes' native
    logs (ONNX Runtime and QNN print every refused model, QNN to stdout); yields a function
    returning what they wrote."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 1)
        os.dup2(tmp.fileno(), 2)
        text: list[str] = []
        try:
            yield lambda: "".join(text)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            for fd, old in zip((1, 2), saved):
                os.dup2(old, fd)
                os.close(old)
            tmp.seek(0)
            text.append(tmp.read().decode("utf-8", "replace"))
