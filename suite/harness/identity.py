"""What a target is, by digest, for its certificate: ``module:Class``, the sha256 of the source file
of the module named and of the module defining the class, and of every shared library the user
pointed it at (a file named by an environment variable, as ``QC_CONV_LIB``, or by a path attribute
or option of the target, that is an ELF shared object).

Files are read as data (hashed, never loaded), regular files only, in bounded chunks.
"""

from __future__ import annotations

import hashlib
import os
import stat
import sys
from pathlib import Path

#: a shared library bigger than this is named, its digest not taken
LIB_LIMIT = 2 << 30
_ELF = b"\x7fELF"


def _sha256(path: Path, limit: int) -> str | None:
    """The sha256 of the regular file ``path`` (a FIFO or device never opened), or None."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        h = hashlib.sha256()
        while chunk := os.read(fd, 1 << 20):
            h.update(chunk)
        return h.hexdigest()
    finally:
        os.close(fd)


def _is_elf(path: Path) -> bool:
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return False
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except (OSError, ValueError):
        return False
    try:
        return os.read(fd, 4) == _ELF
    finally:
        os.close(fd)


def _shown(path: Path) -> str:
    """``path`` relative to the working folder when it lies in it (how a checkout names it)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def _paths(value) -> list[str]:
    if isinstance(value, Path):
        return [str(value)]
    if isinstance(value, str) and os.sep in value and len(value) < 4096 and "\0" not in value:
        return [value]
    return []


def identity(target, selector: str) -> dict:
    """``target``'s identity (module docstring): {"class", "sources": [{path, sha256}],
    "libraries": [{path, sha256, env?}]}."""
    cls = type(target)
    out: dict = {"class": f"{cls.__module__}:{cls.__qualname__}", "selector": selector, "sources": [],
                 "libraries": []}
    mods = [cls.__module__]
    if ":" in selector:
        mods.insert(0, selector.partition(":")[0])
    seen: set = set()
    for name in mods:
        f = getattr(sys.modules.get(name), "__file__", None)
        if f and f not in seen:
            seen.add(f)
            out["sources"].append({"module": name, "path": _shown(Path(f)), "sha256": _sha256(Path(f), 64 << 20)})
    named: list[tuple[str, str | None]] = []
    for k, v in sorted(os.environ.items()):
        named += [(p, k) for p in _paths(v)]
    attrs = dict(vars(target)) if hasattr(target, "__dict__") else {}
    attrs.update(getattr(target, "options", None) or {})
    for v in attrs.values():
        named += [(p, None) for p in _paths(v)]
    libs: dict[str, dict] = {}
    for p, env in named:
        path = Path(p)
        key = str(path.resolve()) if path.exists() else p
        if key in libs or not (path.name.endswith(".so") or ".so." in path.name) or not _is_elf(path):
            continue
        libs[key] = {"path": _shown(path), "sha256": _sha256(path, LIB_LIMIT), **({"env": env} if env else {})}
    out["libraries"] = list(libs.values())
    return out
