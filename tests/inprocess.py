"""Conformance runs inside the test process (pytester), as issue #13 asks: the plugin is an
installed entry point, so ``pytester.runpytest_inprocess`` loads it in the inner session, and
``--target`` & co. add suite/test_conformance.py by themselves (the run starts in pytester's
temporary folder, as ``pytest --target=X`` from any folder does).

Every run is checked to leave nothing behind in this process: no child process (a target's
worker), no thread, no file descriptor on the report folder (a run folder's lock, results.jsonl),
no SIGTERM handler of its own, no object kept out of the cycle collector (gc.freeze).

A module using :func:`run_inprocess` declares ``pytest_plugins = "pytester"``.
"""

from __future__ import annotations

import gc
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_folder


def children() -> set[int]:
    """The live (not zombie) child processes of this process."""
    me, out = os.getpid(), set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == me and fields[0] != "Z":
            out.add(int(pid))
    return out


def open_under(folder: Path) -> list[str]:
    """This process's file descriptors open on files under ``folder``."""
    folder = str(Path(folder).resolve())
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target == folder or target.startswith(folder + os.sep):
            out.append(f"{fd} -> {target}")
    return out


@dataclass
class InProcessRun:
    """What a finished in-process run gave, with the names of a subprocess.CompletedProcess."""

    result: pytest.RunResult
    returncode: int
    stdout: str
    stderr: str


def run_inprocess(pytester: pytest.Pytester, *args: str, report_dir: Path | None | bool = None,
                  plugins=(), cacheprovider: bool = False) -> tuple[InProcessRun, Path]:
    """``pytest *args`` in this process (``-p no:cacheprovider`` unless ``cacheprovider``;
    ``--report-dir=report_dir``, by default a folder in pytester's, unless ``report_dir`` is False
    or ``--resume=RUN_DIR`` is given); returns the run and its folder (RUN_DIR, else the newest
    under the report dir, as the run_suite fixture does)."""
    pytester.syspathinsert(ROOT)   # the tests.* targets, whatever the import mode
    rd = Path(report_dir) if report_dir not in (None, False, True) else pytester.path / "report"
    resumed = [Path(a.split("=", 1)[1]) for a in args if a.startswith("--resume=")]
    named = [Path(a.split("=", 1)[1]) for a in args if a.startswith("--report-dir=")]
    given = report_dir is False or bool(named)
    rd = named[-1] if named else rd
    # (the dev extra's pytest-randomly reorders and reseeds; pytest-rerunfailures leaves a server thread)
    full = [*([] if cacheprovider else ["-p", "no:cacheprovider"]), "-p", "no:randomly", "-p", "no:rerunfailures",
            "-W", "ignore::pytest.PytestAssertRewriteWarning",   # (the suite's packages, imported already)
            *([] if resumed or given else [f"--report-dir={rd}"]), *args]
    kids, threads, sigterm = children(), set(threading.enumerate()), signal.getsignal(signal.SIGTERM)
    frozen = gc.get_freeze_count()
    result = pytester.runpytest_inprocess(*full, plugins=list(plugins))
    assert signal.getsignal(signal.SIGTERM) == sigterm, "the run left its SIGTERM handler"
    assert gc.get_freeze_count() == frozen, "the run left objects frozen (suite/plugin.py _settle_gc)"
    left = children() - kids
    assert not left, f"the run left child processes {sorted(left)}"
    extra = [t.name for t in set(threading.enumerate()) - threads if t.is_alive()]
    assert not extra, f"the run left threads {extra}"
    for folder in {rd, *resumed}:
        opened = open_under(folder)
        assert not opened, f"the run left files open: {opened}"
    run = InProcessRun(result, int(result.ret), result.stdout.str(), result.stderr.str())
    return run, run_folder(resumed[0] if resumed else rd)
