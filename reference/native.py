"""The golden's one piece of C: an exact int8 dot product (reference/native_dot.c).

NumPy has no fast integer dot product: its integer ``dot``/``matmul`` do not use SIMD, and the
float route (convert the int8 weights, then BLAS) streams four bytes a weight twice. For a
FULLY_CONNECTED with one input row that is most of the golden's time (docs/performance.md), so
up to ``reference.ops.conv._FC_NATIVE_MAX`` (32) input rows the golden sums in C: int8 weights times int16 deviations, int32 runs of at
most 65536 terms, int64 totals; every sum exact, whatever the data.

The C file is built on first use with the machine's compiler (``$CC``, else ``cc``;
``-O3 -march=native``) into ``$QCONFORM_NATIVE_DIR`` (default ``~/.cache/qconform/native``),
keyed by the source, the flags and the CPU's feature flags; a new build is first run in a
separate process (code the CPU cannot run ends that process, not this one), then checked
against NumPy's int64 sums on edge values before it is used. Without a compiler, or with ``QCONFORM_NATIVE=off``, or
if the check fails, :func:`dot_i8` returns None and the caller takes its NumPy path; the
outputs are the same either way (tests/test_native.py compares them).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

SOURCE = Path(__file__).with_name("native_dot.c")
FLAGS = ("-O3", "-march=native", "-shared", "-fPIC")
ENV_SWITCH = "QCONFORM_NATIVE"
ENV_DIR = "QCONFORM_NATIVE_DIR"

_fn = None           # the loaded C function
_status = None       # why it is or is not in use (None: not tried yet)


def _cpu_features() -> str:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def cache_dir() -> Path:
    d = os.environ.get(ENV_DIR)
    if d:
        return Path(d)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "qconform" / "native"


# run in a separate process before a new build is loaded here: code this CPU cannot run
# (SIGILL) or a crash ends that process, not the caller's
_PROBE = """import ctypes, sys
f = ctypes.CDLL(sys.argv[1]).qc_dot_i8_i16
w = (ctypes.c_int8 * 6)(-128, 127, 3, -128, 1, 2); d = (ctypes.c_int16 * 3)(-255, 255, 7)
out = (ctypes.c_int64 * 2)()
f(w, d, out, ctypes.c_long(1), ctypes.c_long(2), ctypes.c_long(3))
sys.exit(0 if list(out) == [-128 * -255 + 127 * 255 + 21, -128 * -255 + 255 + 14] else 3)
"""


def _build(src: bytes, cc: list[str], flags: tuple[str, ...]) -> Path:
    key = hashlib.sha256(b"\0".join([src, " ".join(cc).encode(), " ".join(flags).encode(),
                                     platform.machine().encode(), _cpu_features().encode()]))
    lib = cache_dir() / f"qc_dot-{key.hexdigest()[:20]}.so"
    if lib.exists() and lib.with_suffix(".ok").exists():
        return lib
    lib.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=lib.parent)
    os.close(fd)
    try:
        r = subprocess.run([*cc, *flags, "-o", tmp, str(SOURCE)], capture_output=True, text=True,
                           errors="replace", timeout=60)
        if r.returncode:
            raise OSError(f"{' '.join(cc)} {' '.join(flags)} failed: {(r.stderr or r.stdout).strip()[:300]}")
        p = subprocess.run([sys.executable, "-c", _PROBE, tmp], capture_output=True, timeout=60)
        if p.returncode:
            raise OSError(f"the build failed its probe in a separate process (exit status {p.returncode})")
        os.replace(tmp, lib)             # atomic: parallel workers never load a half-written file
        lib.with_suffix(".ok").touch()
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return lib


def _self_check(fn) -> bool:
    """The C sums against NumPy's int64 sums on the extreme values and on odd lengths."""
    rng = np.random.default_rng(7)
    for o, k, b in ((3, 1, 1), (5, 67, 2), (7, 1024, 1), (2, 70000, 1)):
        w = rng.integers(-128, 128, (o, k), dtype=np.int8)
        d = rng.integers(-255, 256, (b, k)).astype(np.int16)
        w[0, :] = -128
        d[0, :] = -255                   # the largest products, every run at its bound
        out = np.empty((b, o), np.int64)
        fn(w.ctypes.data, d.ctypes.data, out.ctypes.data, b, o, k)
        if not np.array_equal(out, d.astype(np.int64) @ w.astype(np.int64).T):
            return False
    return True


def _load():
    global _fn, _status
    if _status is not None:
        return _fn
    if os.environ.get(ENV_SWITCH, "on").strip().lower() in ("off", "0", "no", "false"):
        _status = f"off (${ENV_SWITCH}={os.environ[ENV_SWITCH]})"
        return None
    cc = shlex.split(os.environ.get("CC") or "cc") or ["cc"]
    if shutil.which(cc[0]) is None:
        _status = f"unavailable (no C compiler: {cc[0]!r} not found); NumPy path"
        return None
    try:
        src = SOURCE.read_bytes()
        try:
            path = _build(src, cc, FLAGS)
        except OSError:                  # a compiler without -march=native
            path = _build(src, cc, tuple(f for f in FLAGS if f != "-march=native"))
        fn = ctypes.CDLL(str(path)).qc_dot_i8_i16
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_long] * 3
        if not _self_check(fn):
            _status = f"disabled ({path.name} disagrees with NumPy's int64 sums); NumPy path"
            return None
    except Exception as e:               # never the golden's failure: its NumPy path
        _status = f"unavailable ({type(e).__name__}: {e}); NumPy path"
        return None
    _fn, _status = fn, f"on ({path})"
    return _fn


def status() -> str:
    """Whether the C dot product is in use, and why not (loads it if not tried yet)."""
    _load()
    return _status


def dot_i8(w: np.ndarray, d: np.ndarray) -> np.ndarray | None:
    """sum_k w[o, k] * d[b, k] as int64 [B, O], exact, for int8 w [O, K] and d [B, K] with
    |d| <= 255 in an int16 array; None when the C function is not available."""
    if w.dtype != np.int8 or d.dtype != np.int16 or w.ndim != 2 or d.ndim != 2 or w.shape[1] != d.shape[1]:
        raise TypeError(f"dot_i8 takes int8 [O, K] and int16 [B, K], not {w.dtype} {w.shape} "
                        f"and {d.dtype} {d.shape}")
    fn = _fn if _fn is not None else _load()
    if fn is None:
        return None
    w = np.ascontiguousarray(w)
    d = np.ascontiguousarray(d)
    b, k = d.shape
    o = w.shape[0]
    out = np.empty((b, o), np.int64)
    fn(w.ctypes.data, d.ctypes.data, out.ctypes.data, b, o, k)
    return out


def _reset() -> None:
    """Forget the loaded function (tests switch it off and on)."""
    global _fn, _status
    _fn = _status = None
