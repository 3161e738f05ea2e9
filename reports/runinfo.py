"""``run.json`` (``qconform-run/1``): what ran, where, with what. Plain data in, plain data out.

The caller (the pytest plugin) writes it when a run starts (``finished`` null, so an
interrupted run still says what it was) and passes it to ``reports.write_reports`` at the
end, which adds what the rows say and writes it again::

    run_id, suite_version, git {commit, branch, dirty}, started, finished, exit_status,
    interrupted, planned (results a complete run writes; from collection), command, options {seed, cases_per_op, ops, targets, scheme, tolerance {file,
    version}, warmup, repeats, batch_size, case_files, waivers, certify, report_dir, workers},
    host {hostname, platform, machine, python, cpu_count, cpu_model, numpy, isa},
    targets {name: {description, expected_scheme, versions {component: version}, devices}},
    unavailable_targets {name: reason}; at the end: counts {status: n}, cost {...}, devices_seen
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy

from reports.results import write_json
from suite import __version__
from suite.core.errors import QconformError
from suite.core.userfile import read_text

RUN_JSON = "run.json"
TOLERANCE_COPY = "tolerance.toml"   # a run folder's byte copy of the policy it judged with
FORMAT = "qconform-run/1"
ROOT = Path(__file__).resolve().parent.parent


def git_info(root: Path = ROOT) -> dict[str, Any]:
    """Commit, branch and dirty flag of the suite's checkout (None where git is unavailable)."""
    def git(*args):
        try:
            p = subprocess.run(["git", *args], check=False, cwd=root, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return p.stdout.strip() if p.returncode == 0 else None
    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
            "dirty": None if status is None else bool(status)}


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def host_info(isa: list[str] | None = None) -> dict[str, Any]:
    """This host; ``isa``: the ISA extensions the runtimes dispatch on (targets.device_runner.isa_flags),
    sorted."""
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "machine": platform.machine(),
            "python": sys.version.split()[0], "cpu_count": os.cpu_count(), "cpu_model": _cpu_model(),
            "numpy": numpy.__version__, "isa": list(isa) if isa is not None else None}


def now() -> str:
    return _dt.datetime.now().isoformat(timespec="seconds")


def run_info(*, run_id: str, options: dict, targets: dict[str, dict], unavailable: dict[str, str], started: str,
             command: list[str], finished: str | None = None, exit_status: int | None = None,
             interrupted: bool = False, isa: list[str] | None = None) -> dict[str, Any]:
    """The run.json document. ``targets``: name -> {description, expected_scheme,
    versions {component: version}, devices (remote targets)}; ``unavailable``: name -> why."""
    return {
        "format": FORMAT, "run_id": run_id, "suite_version": __version__, "git": git_info(),
        "started": started, "finished": finished, "exit_status": exit_status, "interrupted": bool(interrupted),
        "command": list(command), "options": dict(options), "host": host_info(isa),
        "targets": {name: dict(t) for name, t in targets.items()},
        "unavailable_targets": dict(unavailable),
    }


def with_results(doc: dict[str, Any], *, counts: dict[str, int], rows: int, devices: list[str],
                 isa: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """``doc`` plus what the rows say: ``counts`` per status, the number of rows and the run's
    wall time in ``cost``, the devices seen (farm runs) and each one's ISA flags (``devices_isa``)."""
    out = dict(doc)
    out["counts"] = dict(counts)
    cost: dict[str, Any] = {**(doc.get("cost") or {}), "rows": rows}
    started, finished = doc.get("started"), doc.get("finished")
    if started and finished:
        cost["wall_s"] = (_dt.datetime.fromisoformat(finished) - _dt.datetime.fromisoformat(started)).total_seconds()
    out["cost"] = cost
    if devices:
        out["devices_seen"] = sorted(devices)
    if isa:
        out["devices_isa"] = {d: list(flags) for d, flags in sorted(isa.items())}
    return out


def machines(doc: dict[str, Any] | None) -> list[str]:
    """One line per machine the run used, for a report's header: this host (CPU, ISA flags), then
    each device with its ISA flags (run.json's device facts, or ``devices_isa`` from the rows)."""
    doc = doc or {}
    h = doc.get("host") or {}
    out = []
    if h:
        isa = h.get("isa")
        out.append(f"host {h.get('hostname')}: {h.get('cpu_model')} x {h.get('cpu_count')} ({h.get('machine')}), ISA "
                   + (" ".join(isa) if isa else "none listed" if isa is not None else "not recorded"))
    devices: dict[str, dict] = {}
    for t in (doc.get("targets") or {}).values():
        for label, facts in ((t or {}).get("devices") or {}).items():
            if isinstance(facts, dict) and "isa" in facts:
                devices.setdefault(label, facts)
    for label, isa in (doc.get("devices_isa") or {}).items():
        devices.setdefault(label, {"isa": isa})
    for label, facts in sorted(devices.items()):
        isa = facts.get("isa")
        isa = isa.split() if isinstance(isa, str) else isa or []
        soc = f"{facts['soc']}, " if facts.get("soc") else ""
        out.append(f"device {label}: {soc}ISA {' '.join(isa) or 'none listed'}")
    return out


def missing_rows(doc: dict[str, Any] | None, rows: int) -> int:
    """How many of the run's planned results (``planned``: written once the run's tests are
    collected) have no row among ``rows``; 0 when the plan is unknown."""
    planned = (doc or {}).get("planned")
    if isinstance(planned, bool) or not isinstance(planned, int):
        return 0
    return max(0, planned - rows)


def write_run_info(run_dir: str | Path, doc: dict[str, Any]) -> Path:
    """run.json, atomically."""
    return write_json(Path(run_dir) / RUN_JSON, doc)


def load_run_json(run_dir: str | Path, field: str | None = None, options: bool = True) -> dict[str, Any]:
    """A run folder's run.json, read through the bounded reader (a regular file, at most the
    "run" size of suite/core/userfile.py): a JSON object, with an ``options`` object when
    ``options``; else QconformError naming the file and ``field`` (the command's argument)."""
    p = Path(run_dir) / RUN_JSON
    try:
        doc = json.loads(read_text(p, RUN_JSON, field, "run"))
    except (ValueError, RecursionError) as e:
        raise QconformError(f"run.json is not valid JSON ({str(e)[:200]})", source=str(p), field=field) from None
    if not isinstance(doc, dict):
        raise QconformError("not a JSON object", source=str(p), field=field, rule="run.json (qconform-run/1)")
    if options and not isinstance(doc.get("options"), dict):
        raise QconformError("no options object", source=str(p), field=f"{field}: options" if field else "options",
                            rule="run.json (qconform-run/1) records the run's options")
    return doc


def read_run_info(run_dir: str | Path) -> dict[str, Any] | None:
    """run.json as :func:`load_run_json` reads it, None where it cannot."""
    try:
        return load_run_json(run_dir, options=False)
    except QconformError:
        return None
