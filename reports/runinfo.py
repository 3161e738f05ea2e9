"""Run artefacts besides results.jsonl: ``run.json`` (what ran, where, with what) and
``results.parquet`` (the rows as a table).

``run.json`` (``qconform-run/1``) is written when a run starts (``finished`` null) and
rewritten when it ends, so an interrupted run still says what it was::

    run_id, suite_version, git {commit, dirty, branch}, started, finished, exit_status,
    command, options {seed, cases_per_op, ops, targets, scheme, tolerance {file, version},
    warmup, repeats, batch_size, case_files, waivers, certify, report_dir, workers},
    host {hostname, platform, machine, python, cpu_count, cpu_model, numpy},
    targets {name: {description, expected_scheme, versions {component: version}, devices}},
    unavailable_targets {name: reason}, counts {status: n}, cost {...}
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import os
import platform
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from reports.results import statuses_of, write_json

RUN_JSON = "run.json"
PARQUET = "results.parquet"
FORMAT = "qconform-run/1"
ROOT = Path(__file__).resolve().parent.parent


def git_info(root: Path = ROOT) -> dict[str, Any]:
    """Commit, branch and dirty flag of the suite's checkout (None where git is unavailable), as
    at the first call in this process (a run's start and end: three git commands, once)."""
    return dict(_git_info(Path(root)))


@functools.lru_cache(maxsize=8)
def _git_info(root: Path) -> dict[str, Any]:
    def git(*args):
        try:
            p = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
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


def host_info() -> dict[str, Any]:
    import numpy
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "machine": platform.machine(),
            "python": sys.version.split()[0], "cpu_count": os.cpu_count(), "cpu_model": _cpu_model(),
            "numpy": numpy.__version__}


def target_info(run, name: str) -> dict[str, Any]:
    t = run.targets.get(name)
    info: dict[str, Any] = {"description": getattr(t, "description", ""),
                            "expected_scheme": getattr(t, "expected_scheme", None),
                            "versions": run.versions(name)}
    facts = getattr(t, "device_facts", None)   # remote targets: SoC, HTP arch, SDK, driver, ...
    if callable(facts):
        try:
            info["devices"] = facts()
        except Exception as e:
            info["devices"] = {"error": f"{type(e).__name__}: {e}"}
    return info


def build_run_info(run, *, skipped=(), started: str | None = None, finished: str | None = None,
                   exit_status: int | None = None, rows: list[dict] | None = None,
                   workers: int | None = None) -> dict[str, Any]:
    from suite import __version__
    c = run.config
    doc: dict[str, Any] = {
        "format": FORMAT, "run_id": run.run_id, "suite_version": __version__, "git": git_info(),
        "started": started, "finished": finished, "exit_status": exit_status,
        "command": list(sys.argv),
        "options": {"seed": c.seed, "cases_per_op": c.cases_per_op, "ops": c.ops, "targets": list(c.targets),
                    "scheme": c.scheme or "tflite-ref-double",
                    "tolerance": {"file": run.policy.source, "version": run.policy.version},
                    "warmup": c.warmup, "repeats": c.repeats, "batch_size": c.batch_size,
                    "case_files": list(c.case_files), "waivers": list(getattr(c, "waivers", []) or []),
                    "certify": bool(getattr(c, "certify", False)), "report_dir": str(c.report_dir),
                    "workers": workers},
        "host": host_info(),
        "targets": {n: target_info(run, n) for n in c.targets},
        "unavailable_targets": {n: why for n, why in skipped},
    }
    if rows is not None:
        doc["counts"] = {k: v for k, v in statuses_of(rows).items() if v}
        doc["cost"] = cost_of(rows)
        if started and finished:
            wall = (_dt.datetime.fromisoformat(finished) - _dt.datetime.fromisoformat(started)).total_seconds()
            doc["cost"]["wall_s"] = wall
            doc["cost"]["analysis_pct_of_wall"] = round(100 * doc["cost"]["analysis_s"] / wall, 2) if wall else None
        devices = sorted({str(r["device"]) for r in rows if r.get("device")})
        if devices:
            doc["devices_seen"] = devices
    return doc


def cost_of(rows: list[dict]) -> dict[str, Any]:
    """Judging time per row (golden, compare, analysis; not the target's run), of which the
    scheme/cause analysis, summed over rows (all workers)."""
    harness = sum(float(r.get("harness_s") or 0) for r in rows)
    analysis = sum(float(r.get("analysis_s") or 0) for r in rows)
    return {"rows": len(rows), "harness_s": round(harness, 3), "analysis_s": round(analysis, 3),
            "analysis_pct_of_harness": round(100 * analysis / harness, 2) if harness else None}


def write_run_info(report_dir: str | Path, doc: dict[str, Any]) -> Path:
    p = Path(report_dir) / RUN_JSON
    write_json(p, doc)
    return p


def read_run_info(report_dir: str | Path) -> dict[str, Any] | None:
    p = Path(report_dir) / RUN_JSON
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def now() -> str:
    return _dt.datetime.now().isoformat(timespec="seconds")


# ----------------------------------------------------------------------------- parquet

def flat_row(r: dict) -> dict[str, Any]:
    """One row with its dict fields as ``<field>.<key>`` entries (a row of :func:`rows_frame`)."""
    f: dict[str, Any] = {}
    for k, v in r.items():
        if isinstance(v, dict):
            for kk, vv in v.items():
                f[f"{k}.{kk}"] = vv
        else:
            f[k] = v
    return f


def rows_frame(rows: list[dict], flat: dict[int, dict] | None = None):
    """The rows as a flat DataFrame: dict fields become ``<field>.<key>`` columns, lists JSON text.
    ``flat``: rows already flattened (:func:`flat_row`) as the run went, by ``id`` of the row."""
    import pandas as pd
    flat = flat or {}
    df = pd.DataFrame([flat.get(id(r)) or flat_row(r) for r in rows])
    for col in df.columns:
        s = df[col]
        if s.dtype != object:
            continue
        vals = s.dropna()
        kinds = {type(v) for v in vals}
        if kinds <= {str}:
            continue
        if kinds <= {bool}:
            df[col] = s.astype("boolean")
        elif kinds <= {int, float} and kinds:
            df[col] = pd.to_numeric(s, errors="coerce")
        else:   # lists and mixed values: JSON text, one type per column
            df[col] = s.map(lambda v: None if v is None or (isinstance(v, float) and v != v)
                            else json.dumps(v, separators=(",", ":")))
    return df


def write_parquet(report_dir: str | Path, rows: list[dict], flat: dict[int, dict] | None = None) -> Path:
    p = Path(report_dir) / PARQUET
    df = rows_frame(rows, flat)
    tmp = p.with_name(p.name + ".tmp")
    df.to_parquet(tmp, index=False, engine="pyarrow")
    os.replace(tmp, p)
    return p


# ----------------------------------------------------------------------------- plugin hooks

def start_run(run, skipped=(), workers=None) -> dict[str, Any]:
    """At session start (controller): run.json with ``finished`` null, so an interrupted run says what it was."""
    doc = build_run_info(run, skipped=skipped, started=now(), workers=workers)
    try:
        write_run_info(run.report_dir, doc)
    except OSError:
        pass
    return doc


def finish_run(run, rows: list[dict], skipped=(), exit_status: int | None = None, started: str | None = None,
               workers=None, summary=None) -> dict[str, Any]:
    """At session end (controller): run.json, results.parquet, index.html and, with --certify, the certificate.

    Returns {"written": [paths], "errors": [messages], "certificate": doc|None, "waiver_problems": [...]};
    an artefact that cannot be written is reported, never silently skipped. index.html and
    results.parquet are written by child processes (:func:`in_child`) while this one writes the
    rest: summary.csv and summary.md of ``summary`` (the rows' reports.summary.summarize table,
    made before the fork so that the children need not make it again).
    """
    out: dict[str, Any] = {"written": [], "errors": [], "certificate": None, "waiver_problems": []}
    d = Path(run.report_dir)
    info = build_run_info(run, skipped=skipped, started=started, finished=now(), exit_status=exit_status,
                          rows=rows, workers=workers)

    def attempt(what, fn):
        try:
            p = fn()
            out["written"].extend(p if isinstance(p, (list, tuple)) else [p])
        except ChildError as e:   # the child's own exception, already named
            out["errors"].append(f"{what}: {e}")
        except Exception as e:  # reported in the terminal summary
            out["errors"].append(f"{what}: {type(e).__name__}: {e}")

    cert = None
    if getattr(run.config, "certify", False):
        from reports.certify import build_certificate
        try:
            cert = build_certificate(rows, run.policy, {t: run.versions(t) for t in run.config.targets},
                                     run.waivers, info)
            out["certificate"] = cert
        except Exception as e:
            out["errors"].append(f"certificate: {type(e).__name__}: {e}")
    if rows:
        from reports.html import write_html
        cache = getattr(run, "report_cache", None)
        html = _alongside(lambda: write_html(d, rows, info, cert, summary))
        parquet = _alongside(lambda: write_parquet(d, rows, cache.flat if cache is not None else None))
    try:
        attempt("run.json", lambda: write_run_info(d, info))
        try:
            if rows and summary is not None:
                attempt("summary.csv, summary.md", lambda: _write_summaries(d, rows, summary))
        finally:
            if rows:
                attempt("results.parquet", parquet)
        if cert is not None:
            from reports.certify import write_certificate
            attempt("certificate", lambda: write_certificate(d, cert))
        from reports.certify import waiver_problems
        out["waiver_problems"] = waiver_problems(rows, getattr(run, "waivers", None))
    finally:
        if rows:
            attempt("index.html", html)
    return out


def _write_summaries(d: Path, rows: list[dict], summary) -> list[Path]:
    from reports.summary import write_summaries
    write_summaries(d, rows, summary)
    return [d / "summary.csv", d / "summary.md"]


class _Child:
    """A forked child computing one artefact; :meth:`result` waits for it."""

    def __init__(self, pid: int, fd: int):
        self.pid, self.fd = pid, fd

    def result(self) -> Path:
        """The path the child wrote; raises with the child's own error if it failed."""
        chunks = []
        try:
            while True:
                b = os.read(self.fd, 1 << 16)
                if not b:
                    break
                chunks.append(b)
        finally:
            os.close(self.fd)
            _, status = os.waitpid(self.pid, 0)
        try:
            kind, payload = json.loads(b"".join(chunks))
        except ValueError:
            raise ChildError(f"the process writing it ended without a result (wait status {status})") from None
        if kind != "ok":
            raise ChildError(payload)
        return Path(payload)


class ChildError(Exception):
    """What went wrong in a child of :func:`in_child` (its message names the child's exception)."""


def _alongside(fn):
    """``fn`` started in a child (:func:`in_child`); returns what gives its result: the child's
    ``result``, or ``fn`` itself to be called here when no child could be made."""
    child = in_child(fn)
    return child.result if child is not None else fn


def in_child(fn) -> _Child | None:
    """Run ``fn()`` (which returns the path it wrote) in a forked child, alongside this process;
    None where that is not safe (no fork, or other threads alive here: a child of a threaded
    process may inherit a lock held forever), and the caller runs ``fn`` itself."""
    import threading
    if not hasattr(os, "fork") or threading.active_count() > 1:
        return None
    try:
        r, w = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:   # the child: never returns into the caller's code (no pytest, no atexit)
        try:
            os.close(r)
            try:
                msg = ["ok", str(fn())]
            except BaseException as e:
                msg = ["error", f"{type(e).__name__}: {e}"]
            data = memoryview(json.dumps(msg).encode())
            while data:
                data = data[os.write(w, data):]
        finally:
            os._exit(0)
    os.close(w)
    return _Child(pid, r)


def terminal_lines(artefacts: dict[str, Any] | None) -> list[tuple[str, dict]]:
    """Lines (and terminal markup) the plugin prints after the summary table."""
    if not artefacts:
        return []
    lines: list[tuple[str, dict]] = []
    for p in artefacts.get("waiver_problems", []):
        lines.append((f"WAIVER: {p}", {"red": True, "bold": True}))
    cert = artefacts.get("certificate")
    if cert:
        for o in cert["ops"]:
            ids = ", ".join(f["case_id"] for f in o["failing"][:10])
            more = f" (+{len(o['failing']) - 10} more)" if len(o["failing"]) > 10 else ""
            lines.append((f"certificate: {o['op']} ({o['spec']}) on {o['target']}: {o['verdict']}"
                          + (f"; failing: {ids}{more}" if ids else ""),
                          {"red": o["verdict"] == "non-conformant", "green": o["verdict"] == "bit-exact"}))
    for e in artefacts.get("errors", []):
        lines.append((f"qconform: could not write {e}", {"red": True}))
    written = [Path(p).name for p in artefacts.get("written", [])]
    if written:
        lines.append((f"also written: {', '.join(written)}", {}))
    return lines
