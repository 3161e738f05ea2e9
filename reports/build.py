"""The end of a run and ``qconform report RUN_DIR``: every report artefact from results.jsonl.

:func:`write_reports` reads the rows twice and never holds them all:

1. a first pass finds the row of each (case, target, device) (reports.results: one each, of
   one run id) and the shape of each row (results.parquet's columns);
2. a second pass streams those rows, once, through what each artefact keeps of them:
   the summary's per-group counters (:class:`reports.summary.Summary`), the page's
   histograms and failing cases (:class:`reports.html.Page`), the certificate's entries
   (:class:`reports.certify.Certifier`), the waiver checks, the status counts and costs,
   and results.parquet, written a row group at a time (:class:`reports.parquet.ParquetSink`).

Then it writes summary.csv, summary.md, results.parquet, the certificate (with ``certify``),
index.html and run.json (when the caller gives the run's document). Each artefact is written
atomically; one that cannot be written is one line in :attr:`Report.errors` and the others
are written all the same.
"""

from __future__ import annotations

import contextlib
import csv
import io
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from reports import attest
from reports.certify import CERT_JSON, Certifier, WaiverCheck, non_conformant, read_certificate, write_certificate
from reports.crossdevice import CrossDevice, cross_lines
from reports.witness import Unwitnessed
from reports.history import Reading
from reports.groups import read_optional
from reports.history import html_section as history_section
from reports.html import INDEX, Page, render
from reports.parquet import PARQUET, ParquetSink, Shapes
from reports.diff import diff_runs
from reports.results import (
    RESULTS,
    count_statuses,
    index_rows,
    rows_at,
    scan,
    write_atomic,
    write_json,
)
from reports.runinfo import RUN_JSON, TOLERANCE_COPY, missing_rows, read_run_info, with_results, write_run_info
from reports.since import headline as since_headline
from reports.since import html_section as since_html
from reports.since import markdown_section as since_markdown
from reports.models import markdown_section as model_markdown
from reports.summary import SUMMARY_CSV, SUMMARY_MD, Summary, fit, markdown_file, to_csv
from suite.core.findings import brief, why
from suite.core.errors import QconformError
from suite.core.text import clean_tree
from suite.core.tolerance import DEFAULT_FILE, load_policy
from suite.core.verdict import Status

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Report:
    summary: list[dict]                  # the per-(op, target) summary rows, as summary.csv has them
    written: list[Path] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)   # "<artefact>: <Type>: <message>", one per artefact not written
    certificate: dict | None = None
    waiver_problems: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)   # status value -> rows
    #: failures of whole (op, target)s (reports.causes.judge_group: bias, declared scheme), each
    #: {op, target, kind, dtype, text, finding}; one without a finding fails the run
    groups: list[dict] = field(default_factory=list)
    #: per (op, target) run on several devices: the cases whose outputs differ bit-wise (reports/crossdevice.py)
    cross: list[dict] = field(default_factory=list)
    #: planned results (run.json's ``planned``) without a row: such a run is INCOMPLETE, never PASS
    missing: int = 0
    since: str | None = None   # the comparison with --baseline, one line (reports/since.py)


class _Tally:
    """Rows per status, judging cost, devices: for run.json and Report.counts."""

    def __init__(self):
        self.counts: dict[str, int] = {}
        self.rows = 0
        self.devices: set[str] = set()
        self.isa: dict[str, list[str]] = {}   # device -> its ISA flags (the rows' device_isa)

    def add(self, r: dict) -> None:
        s = r.get("status", Status.ERROR.value)   # (a row without one: an error)
        self.counts[s] = self.counts.get(s, 0) + 1
        self.rows += 1
        if r.get("device"):
            self.devices.add(str(r["device"]))
            if r.get("device_isa") is not None:
                self.isa[str(r["device"])] = str(r["device_isa"]).split()


def _error(what: str, e: BaseException) -> str:
    return f"{what}: {type(e).__name__}: {e}"


def _policy(run_dir, info: dict | None):
    """The tolerance policy the run judged with: its folder's byte copy (tolerance.toml), else the
    suite's when the run used the suite's. run.json is data: a path in it is never opened."""
    copy = Path(run_dir) / TOLERANCE_COPY
    if copy.exists() or copy.is_symlink():
        return load_policy(copy)
    options = (info or {}).get("options") or {}
    named = options.get("tolerance_file") or (options.get("tolerance") or {}).get("file")
    if named and str(named) != str(DEFAULT_FILE):
        raise QconformError(f"names the tolerance file {str(named)[:200]} and the run folder holds no copy of it "
                            f"({TOLERANCE_COPY}); a path in run.json is not opened", source=str(Path(run_dir) / "run.json"),
                            field="options.tolerance_file", rule="a run folder carries its tolerance policy")
    return load_policy(None)


def _versions(info: dict | None) -> dict[str, dict[str, str]]:
    return {t: v.get("versions") or {} for t, v in ((info or {}).get("targets") or {}).items()}


def _expected(info: dict | None) -> dict[str, str]:
    """{target: the scheme it declares} (run.json's targets' expected_scheme)."""
    return {t: v["expected_scheme"] for t, v in ((info or {}).get("targets") or {}).items() if v.get("expected_scheme")}


def write_reports(run_dir: str | Path, *, policy=None, waivers=None, certify: bool = False,
                  run_info: dict | None = None, parquet_in_child: bool = False, baseline=None,
                  certify_cases: list | None = None, certify_key=None,
                  certify_waiver_files: dict | None = None, parquet_writer: subprocess.Popen | None = None) -> Report:
    """Write summary.csv, summary.md, results.parquet, index.html (and, with ``certify``,
    certificate.md/.json) of ``run_dir``/results.jsonl; and run.json when ``run_info`` is given
    (the run's document, reports.runinfo.run_info), with the counts and costs of the rows added.
    Without ``run_info`` the page takes the folder's run.json, if any. No rows: run.json and the
    certificate only.

    ``policy``: the suite.core.tolerance.Policy the certificate quotes (default: the run's
    tolerance file, else the suite's); ``waivers``: the run's suite.core.waivers.Waivers.
    ``certify_cases``: the run's cases as [[id, sha256], ...], ``certify_key``: what signs the
    certificate (reports/attest.py): a loaded ``Signer``, a private key file, or None (the user's
    key). A non-conformant certified (op, target) makes run.json's exit status 1. ``parquet_in_child``: results.parquet is written by ``python -m reports.parquet`` in a process
    of its own, alongside (see reports/parquet.py): ``parquet_writer``, started earlier for ``run_dir``
    by :func:`parquet_child` ``when_told`` (its imports done), told now, else a new one. ``baseline``: a run folder; the report opens with
    what is new since it (reports/since.py). Never raises for an artefact: see :attr:`Report.errors`.
    """
    d = Path(run_dir)
    child = None
    if parquet_in_child and (d / RESULTS).exists():
        child = (_tell(parquet_writer) if parquet_writer is not None else None) or parquet_child(d)
    else:
        dismiss(parquet_writer)
    try:
        run_info = clean_tree(run_info)   # (its text is shown by every report: suite/core/text.py)
        info = run_info if run_info is not None else clean_tree(read_run_info(d))
        report = Report(summary=[])
        failed: dict[str, Exception] = {}   # what broke: the artefacts made of it are not written

        # pass 1: the last row of each (case, target, device) and the shapes of the rows (results.parquet's
        # columns). A results.jsonl holds one row a pair (reports/results.py refuses a repeat), so when
        # results.parquet is written elsewhere one pass, in file order, feeds the same rows
        shapes = Shapes()
        one_pass = parquet_in_child
        index = {} if one_pass else index_rows(d, shapes.tag)
        offsets = [at for at, _ in index.values()]

        # what each artefact keeps of the rows, fed one row at a time in pass 2
        try:
            judged = policy or _policy(d, info)
        except Exception as e:  # noqa: BLE001 (no group verdicts: one error line, the artefacts all the same)
            judged = None
            report.errors.append(_error("group verdicts (bias, declared schemes)", e))
        summary, page, tally, check = Summary(judged, _versions(info), _expected(info)), Page(), _Tally(), WaiverCheck()
        cross = CrossDevice()
        unwitnessed = Unwitnessed()   # golden values no runtime of the run reproduces (reports/witness.py)
        reading = Reading()   # the run's states, for the History section (reports/history.py)
        feeds = {"summary": summary.add, "page": page.add, "tally": tally.add, "waivers": check.add, "cross": cross.add,
                 "witness": unwitnessed.add, "history": reading.add}
        parquet = certifier = None
        try:
            if offsets and not parquet_in_child:
                parquet = ParquetSink(d / PARQUET, shapes.columns(tag for _, tag in index.values()))
                feeds["parquet"] = parquet.add
        except Exception as e:  # noqa: BLE001 (one artefact's error line; the others are written)
            failed["parquet"] = e
        try:
            if certify:
                certifier = Certifier(judged or _policy(d, info), _versions(info), waivers, certify_cases,
                                      certify_waiver_files)
                feeds["certificate"] = certifier.add
        except Exception as e:  # noqa: BLE001
            failed["certificate"] = e
        del index, shapes

        rows = 0
        for row in (r for _, r in scan(d)) if one_pass else rows_at(d, offsets) if offsets else ():   # pass 2
            rows += 1
            for name, add in list(feeds.items()):
                try:
                    add(row)
                except Exception as e:  # noqa: BLE001
                    failed[name] = e
                    del feeds[name]
        if parquet is not None and "parquet" in failed:
            parquet.abort()

        def attempt(what: str, needs: tuple[str, ...], write) -> None:
            """Write one artefact (``write()`` gives its path): else one error line, its own or that of
            what it is made of."""
            err = next((failed[n] for n in needs if n in failed), None)
            if err is None:
                try:
                    report.written.append(write())
                    return
                except Exception as e:  # noqa: BLE001
                    err = e
            report.errors.append(_error(what, err))

        report.counts = count_statuses(tally.counts)
        report.waiver_problems = check.problems(waivers)
        if "summary" not in failed:
            try:
                summary.incomplete = incomplete(info, tally.rows if "tally" not in failed else None)
                summary.pair_table()   # judges each (op, target) whole: summary.verdicts
                report.groups = [{"op": k[0], "target": k[1], **f} for k, fs in summary.verdicts.items() for f in fs]
            except Exception as e:  # noqa: BLE001
                failed["summary"] = e
        report.missing = missing_rows(info, tally.rows) if "tally" not in failed else 0
        if run_info is None and info and "tally" not in failed:   # (rebuilt: the verdict counts the rows there are, not run.json's)
            info = {**info, "cost": {**(info.get("cost") or {}), "rows": tally.rows}}
        cert = None
        if certify and certifier is not None and "certificate" not in failed:
            try:   # (an incomplete run's certificate keeps its partial groups' failures: it never certifies better)
                cert = report.certificate = certifier.certificate(
                    info, summary.partial if summary.incomplete else summary.verdicts, summary.incomplete)
            except Exception as e:  # noqa: BLE001
                failed["certificate"] = e
        if run_info is not None and run_info.get("exit_status") == 0 and non_conformant(cert):
            info = run_info = {**run_info, "exit_status": 1}   # a non-conformant certificate fails the run
        if run_info is not None and run_info.get("exit_status") == 0 and any(not g["finding"] for g in report.groups):
            info = run_info = {**run_info, "exit_status": 1}   # as the plugin sets pytest's (suite/plugin.py)
        elif run_info is not None and run_info.get("exit_status") == 0 and report.missing:
            info = run_info = {**run_info, "exit_status": 2}   # (pytest's "interrupted": suite/plugin.py)
        if run_info is not None:
            if "tally" not in failed:
                info = with_results(run_info, counts=report.counts, rows=tally.rows, devices=list(tally.devices),
                                    isa=tally.isa)
            attempt(RUN_JSON, (), lambda: write_run_info(d, info))
        if certify and cert is not None:   # (signed once run.json has its exit status: the certificate quotes it)
            try:
                signer = certify_key if isinstance(certify_key, attest.Signer) else attest.signing_key(certify_key)
            except Exception as e:  # noqa: BLE001 (a key that cannot be read: no certificate, one error line)
                failed["certificate"] = e
            attempt(CERT_JSON, ("certificate",), lambda: write_certificate(d, cert, signer)[0])
        elif certify and "certificate" in failed:
            attempt(CERT_JSON, ("certificate",), lambda: None)
        elif (d / CERT_JSON).exists():   # a certified run's page, rebuilt (the signed payload's rendering)
            with contextlib.suppress(OSError, ValueError, QconformError):
                cert = read_certificate(d)
        if not rows:
            dismiss(child)   # (a writer told of an empty results.jsonl: its pipes closed, waited for)
            return report
        try:
            report.summary = summary.table()
        except Exception as e:  # noqa: BLE001
            failed["summary"] = e
        try:   # (a table that cannot be made is one error line; summary.md and index.html are written without it)
            report.cross = cross.table() if "cross" not in failed else []
        except Exception as e:  # noqa: BLE001
            failed["cross"] = e
        if "cross" in failed:
            report.errors.append(_error("the cross-device table", failed["cross"]))
        attempt(SUMMARY_CSV, ("summary",), lambda: write_atomic(d / SUMMARY_CSV, to_csv(report.summary)))
        # ---- new since the baseline (#22): compared once summary.csv and the certificate are written
        since = since_error = None
        if baseline is not None:
            try:
                since = diff_runs(baseline, d)
                report.since = since_headline(since)
            except Exception as e:  # noqa: BLE001 (the report says why, and is written all the same)
                since_error = f"{type(e).__name__}: {e}"
                report.errors.append(_error("the comparison with the baseline", e))
        sections = ((since_html(since, since_error), since_markdown(since, since_error)) if baseline is not None
                    else (None, None))   # (the page and summary.md say there is none)
        try:   # the History section: earlier runs of the same case set beside this one (reports/history.py)
            past = history_section(d, reading=reading if "history" not in failed else None, info=info)
        except Exception as e:  # noqa: BLE001 (one error line; the page is written without it)
            past = None
            report.errors.append(_error("the history section", e))
        # ----
        new = (None, None) if "page" in failed else (page.new.first(), page.new.n)   # (the page's error is index.html's)
        review = unwitnessed.cases() if "witness" not in failed else []
        attempt(SUMMARY_MD, ("summary",), lambda: write_atomic(d / SUMMARY_MD, markdown_file(
            report.summary, info, *new, cross=report.cross, review=review, since=sections[1], models=_model_md(d),
            certificate=cert)))
        if child is None:
            attempt(PARQUET, ("parquet",), lambda: parquet.close())
        attempt(INDEX, ("summary", "page"), lambda: write_atomic(
            d / INDEX, render(page, report.summary, summary.pair_table(), info, cert, _models(d), cross=report.cross,
                              review=review, since=sections[0], history=past)))
        if child is not None:
            attempt(PARQUET, (), lambda: _parquet_done(child, d))
        return report
    except BaseException:   # (the writer told to convert ends with the report that told it)
        if child is not None:
            child.kill()
            dismiss(child)
        raise


def _csv(d: Path, name: str) -> list[dict] | None:
    """The rows of the run folder's ``name`` (a regular file, bounded: reports.groups.read_optional), if any."""
    text = read_optional(d / name, name)
    return None if text is None else list(csv.DictReader(io.StringIO(text, newline="")))


def _models(d: Path) -> tuple[list[dict], list[dict]] | None:
    """models.csv and layers.csv of a ``--model`` run (suite/models/verdicts.py), if it wrote them."""
    models, layers = _csv(d, "models.csv"), _csv(d, "layers.csv")
    return None if models is None or layers is None else (models, layers)


def _model_md(d: Path) -> str | None:
    """summary.md's Models section (reports/models.py) of a ``--model`` run."""
    models = _models(d)
    return None if models is None else model_markdown(models[0], _csv(d, "outputs.csv") or [])


def parquet_child(d: str | Path, when_told: bool = False) -> subprocess.Popen | None:
    """``python -m reports.parquet`` writing ``d``/results.parquet; ``when_told``: it imports what it
    needs now and converts when :func:`write_reports` tells it (stdin), or exits when stdin closes."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    try:
        return subprocess.Popen([sys.executable, "-m", "reports.parquet", *(["--when-told"] if when_told else []),
                                 str(d)], stdin=subprocess.PIPE if when_told else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    except OSError:
        return None


def dismiss(child: subprocess.Popen | None) -> None:
    """A ``when_told`` child not needed after all: it ends without writing (its pipes closed)."""
    if child is None:
        return
    with contextlib.suppress(OSError, ValueError, AttributeError):
        child.stdin.close()
    child.stdin = None
    try:
        child.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()


def _tell(child: subprocess.Popen) -> subprocess.Popen | None:
    """Tell a waiting child to convert (None if it is gone: a new one is started)."""
    try:
        child.stdin.write("go\n")
        child.stdin.close()
        child.stdin = None   # (communicate() would flush it)
        return child
    except (OSError, ValueError):
        dismiss(child)
        return None


def _parquet_done(child: subprocess.Popen, d: Path) -> Path:
    out, err = child.communicate()
    if child.returncode != 0:
        raise RuntimeError(err.strip().splitlines()[-1] if err.strip() else f"exit status {child.returncode}")
    return d / PARQUET


def incomplete(info: dict | None, rows: int | None) -> str | None:
    """Why the run of run.json ``info`` with ``rows`` rows is incomplete (its group verdicts are then
    no verdicts), or None. A report rebuilt without run.json (results.jsonl alone) is judged as it is."""
    if not info:
        return None
    if info.get("interrupted") or not info.get("finished"):
        return "the run did not finish"
    if info.get("exit_status") == 2:
        return "the run was interrupted"
    missing = missing_rows(info, rows) if rows is not None else 0
    if missing:
        return f"{missing} of {info['planned']} planned results have no row"
    return None


def terminal_lines(report: Report | None, width: int = 10_000) -> list[tuple[str, dict]]:
    """Lines (and terminal markup) to print after the summary table: one per finding, each within
    ``width`` (the terminal's; summary.md has them whole)."""
    return [(fit(line, width), markup) for line, markup in _terminal_lines(report, width)]


def _where(pairs: list[str], room: int) -> str:
    """The (op, target)s of a finding, or the first and how many more when they take over ``room``."""
    text = ", ".join(pairs)
    return text if len(text) <= room or len(pairs) == 1 else f"{pairs[0]} and {len(pairs) - 1} more"


def _terminal_lines(report: Report | None, width: int) -> list[tuple[str, dict]]:
    if report is None:
        return []
    lines: list[tuple[str, dict]] = []
    for p in report.waiver_problems:
        lines.append((f"WAIVER: {p}", {"red": True, "bold": True}))
    if report.certificate:
        for o in report.certificate["ops"]:
            ids = ", ".join(f["case_id"] for f in o["failing"][:10])
            more = f" (+{len(o['failing']) - 10} more)" if len(o["failing"]) > 10 else ""
            lines.append((f"certificate: {o['op']} ({o['spec']}) on {o['target']}: {o['verdict']}"
                          + (f": {o.get('reason')}" if o["verdict"] == "non-conformant" and o.get("reason") else "")
                          + (f"; failing: {ids}{more}" if ids else ""),
                          {"red": o["verdict"] == "non-conformant", "green": o["verdict"] == "bit-exact"}))
    known: dict[str, list[str]] = {}
    for g in report.groups:   # (op, target)s failing as a whole: each new one, the known ones per finding
        if g["finding"]:   # (a farm judges each device: the same (op, target) once per device)
            where = known.setdefault(g["finding"], [])
            if f"{g['op']} on {g['target']}" not in where:
                where.append(f"{g['op']} on {g['target']}")
        else:
            lines.append((f"{g['kind'].upper()}: {g['op']} on {g['target']}: {g['text']}: the run fails",
                          {"red": True, "bold": True}))
    for fid, where in known.items():
        lines.append((f"known finding {fid} (as a whole: bias or declared scheme): {_where(where, width // 3)}: "
                      f"{brief(why(fid) or '?')}", {"yellow": True}))
    cases: dict[str, list[str]] = {}   # the findings of failing cases, each with its reason (#24)
    for r in report.summary or []:
        if int(r.get("failed_known") or 0) + int(r.get("errors_known") or 0):
            for fid in filter(None, str(r.get("findings") or "").split(",")):
                if fid not in known:
                    cases.setdefault(fid, []).append(f"{r['op']} on {r['target']}")
    for fid, where in cases.items():
        lines.append((f"known finding {fid}: {_where(list(dict.fromkeys(where)), width // 3)}: "
                      f"{brief(why(fid) or '?')}", {"yellow": True}))
    lines += [(line, {"yellow": True}) for line in cross_lines(report.cross)]
    if report.since:
        lines.append((report.since, {"bold": True}))
    for e in report.errors:
        lines.append((f"qconform: could not write {e}", {"red": True}))
    written = [Path(p).name for p in report.written]
    if written:
        lines.append((f"also written: {', '.join(written)}", {}))
    return lines
