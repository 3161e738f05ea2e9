"""``qconform targets``: each target, whether it is available here, why, and its versions.

Each target is probed in a process of its own, all at once (importing a runtime costs seconds;
a broken one crashes only its probe). The answer is kept in the user's cache
($QCONFORM_CACHE_DIR, else ~/.cache/qconform; ``targets-<key>.json``) under a key of everything
it depends on: the Python, every installed distribution and its version, the target modules'
files, the TOSA tools' venv and the environment variables the targets read. Installing or
upgrading anything makes a new key, so a cached answer is never stale; ``--refresh`` probes anew.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from importlib.metadata import distributions
from pathlib import Path

import targets
from targets.tosa import venv

#: environment variables a target's availability or versions depend on
_ENV = ("QCONFORM_TOSA_VENV", "QCONFORM_CACHE_DIR", "QCONFORM_NATIVE_DIR", "PATH", "LD_LIBRARY_PATH")
_MAX_CACHE = 1 << 20   # bytes of a cache file read at most


def register(sub):
    p = sub.add_parser("targets", help="list targets, available or not, and why")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--refresh", action="store_true", help="probe every target anew (not from the cache)")
    p.set_defaults(func=run)


def probe(name: str) -> dict:
    """One target's row (in a probe process)."""
    try:
        t = targets.get_target(name)
        ok, why = t.availability()
        vers = {str(k): str(v) for k, v in dict(t.versions()).items()} if ok else {}
        desc = t.description
    except Exception as e:  # a broken runtime must not hide the other targets
        ok, why, vers, desc = False, f"{type(e).__name__}: {e}", {}, ""
    return {"target": name, "available": bool(ok), "reason": str(why), "versions": vers, "description": str(desc)}


def cache_key() -> str:
    """What the probes' answers depend on, hashed (see the module docstring)."""
    h = hashlib.sha256(sys.version.encode())
    h.update(json.dumps(sorted({(d.metadata["Name"] or "", d.version) for d in distributions()})).encode())
    root = Path(__file__).resolve().parents[2]
    for f in sorted((root / "targets").rglob("*.py")):
        st = f.stat()
        h.update(f"{f.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}".encode())
    for p in ("bin/python", "bin/tosa-opt"):
        try:
            st = (venv() / p).stat()
            h.update(f"{p}:{st.st_size}:{st.st_mtime_ns}".encode())
        except OSError:
            h.update(f"{p}:-".encode())
    h.update(json.dumps([os.environ.get(k) for k in _ENV]).encode())
    return h.hexdigest()[:32]


def _cache_file(key: str) -> Path:
    base = Path(os.environ.get("QCONFORM_CACHE_DIR") or Path.home() / ".cache" / "qconform")
    return base / f"targets-{key}.json"


def _cached(path: Path, names: list[str]) -> list[dict] | None:
    """The rows kept under this key, or None (no file, not ours, not readable as rows of these names)."""
    try:
        if not path.is_file() or path.is_symlink() or path.stat().st_size > _MAX_CACHE:
            return None
        rows = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError):
        return None
    ok = isinstance(rows, list) and [r.get("target") if isinstance(r, dict) else None for r in rows] == names
    if not ok or not all(isinstance(r.get("versions"), dict) and isinstance(r.get("available"), bool) for r in rows):
        return None
    return rows


def _store(path: Path, rows: list[dict]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(rows))
        os.replace(tmp, path)
    except OSError:
        pass   # (no cache: the next call probes again)


def rows(refresh: bool = False) -> tuple[list[dict], bool]:
    """Every target's row, and whether it came from the cache."""
    names = targets.known_names()
    path = _cache_file(cache_key())
    if not refresh:
        got = _cached(path, names)
        if got is not None:
            return got, True
    with ProcessPoolExecutor(max_workers=max(1, len(names))) as pool:   # each runtime imported on its own
        out = list(pool.map(probe, names))
    _store(path, out)
    return out, False


def run(args) -> int:
    out, _ = rows(args.refresh)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    w = max(len(r["target"]) for r in out)
    for r in out:
        mark = "available  " if r["available"] else "unavailable"
        vers = ", ".join(f"{k} {v}" for k, v in r["versions"].items())
        detail = vers if r["available"] else r["reason"]
        print(f"{r['target']:<{w}}  {mark}  {r['description']}")
        print(f"{'':<{w}}               {detail}")
    return 0
