"""The wall time of a whole pytest run of the suite, and its harness share.

Runs ``python -m pytest -q --target=... --report-dir=<tmp>`` in a subprocess (the default
run: every spec op, the default cases, targets tflite, tflite-ref, ort, htp), measures its
wall time from outside (interpreter start-up included) and reads the run's ``timing.json``
(suite/timing.py: target time per target, harness share). ``workers`` > 0 adds ``-n N``
(pytest-xdist; each (op, target) group stays on one worker). The QNN context cache is a
fresh folder per call unless ``cache_dir`` is given (give the same folder twice to measure
a second, warm run).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TARGETS = "tflite,tflite-ref,ort,htp"


@dataclass
class SuiteRow:
    label: str
    workers: int
    exit_status: int
    wall_s: float                 # measured from outside (python start to exit)
    inner_wall_s: float | None    # the plugin's wall (configure -> session finish)
    harness_pct: float | None
    tests: str
    timing: dict | None = None

    def as_dict(self):
        return asdict(self)


def run_suite(label: str = "default run", targets: str = DEFAULT_TARGETS, workers: int = 0,
              cases_per_op: int | None = None, ops: list[str] | None = None, cache_dir: str | None = None,
              extra: list[str] | None = None, timeout: float = 3600) -> SuiteRow:
    with tempfile.TemporaryDirectory(prefix="qconform-bench-run-") as tmp:
        report = Path(tmp) / "report"
        # the golden cache and the golden's C build go with the QNN context cache: cold with it,
        # warm with it, off with it (the build then in this run's own folder)
        cache = Path(cache_dir or Path(tmp) / "qnn")
        golden = "off" if cache_dir == "off" else cache / "golden"
        native = Path(tmp) / "native" if cache_dir == "off" else cache / "native"
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--target={targets}",
               f"--report-dir={report}", f"--cache-dir={cache}", f"--golden-cache={golden}"]
        if workers:
            cmd += ["-n", str(workers)]
        if cases_per_op:
            cmd += ["--cases-per-op", str(cases_per_op)]
        if ops:
            cmd += ["--ops", ",".join(ops)]
        cmd += list(extra or [])
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, QCONFORM_NATIVE_DIR=str(native)))
        wall = time.perf_counter() - t0
        last = [ln for ln in p.stdout.splitlines() if " in " in ln and ("passed" in ln or "failed" in ln)]
        try:
            timing = json.loads((report / "timing.json").read_text())
        except (OSError, ValueError):
            timing = None
    return SuiteRow(label, workers, p.returncode, round(wall, 2),
                    timing.get("wall_s") if timing else None, timing.get("harness_pct") if timing else None,
                    last[-1].strip("= ") if last else (p.stdout.strip().splitlines() or ["?"])[-1], timing)


def table(rows: list[SuiteRow]) -> str:
    head = f"{'run':<28} {'-n':>3} {'wall s':>8} {'in-run s':>9} {'harness %':>10}  tests"
    lines = [head, "-" * len(head)]
    for r in rows:
        inner = f"{r.inner_wall_s:.1f}" if r.inner_wall_s is not None else "-"
        hp = f"{r.harness_pct:.1f}" if r.harness_pct is not None else "-"
        lines.append(f"{r.label:<28} {r.workers:>3} {r.wall_s:>8.1f} {inner:>9} {hp:>10}  {r.tests}")
    return "\n".join(lines)
