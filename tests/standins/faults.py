"""Fault helpers for the device tests: a device 'python' that misbehaves, killing a process tree."""

from __future__ import annotations

import os
import shlex
import stat
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def fault_python(folder: Path, mode: str, tag: str) -> str:
    """An executable 'python' for a device whose runtime hangs or crashes on case ``tag``, is
    slow, stalls after some cases, or lacks modules (tests/standins/fault_python.py)."""
    path = Path(folder) / f"python-{mode}-{tag.replace(':', '_').replace(',', '_')}"
    state = shlex.quote(str(path) + ".state")
    path.write_text(f"#!/bin/sh\nQC_FAULT_STATE={state} exec {shlex.quote(sys.executable)} "
                    f"{shlex.quote(str(HERE / 'fault_python.py'))} {mode} {shlex.quote(tag)} \"$@\"\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return str(path)


def kill_tree(pids: list[int]) -> None:
    """SIGKILL the given processes and all their descendants (processes this test started)."""
    import signal
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    todo, seen = list(pids), []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo.extend(children.get(p, []))
    for p in seen:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
