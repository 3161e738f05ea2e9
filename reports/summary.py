"""Per (op, target) summary tables: summary.csv, summary.md and the terminal table.

:class:`Summary` takes the rows one at a time (:meth:`Summary.add`) and keeps per group only
counters, sums and the group's latency values; :meth:`Summary.table` gives one dict per
(op, target) (and device, when a farm run has any), every dict with the same columns in the
same order. That list is what :func:`to_csv`, :func:`to_markdown` and :func:`to_text` print.
"""

from __future__ import annotations

import copy
import csv
import io
import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from reports import witness
from reports.causes import BiasTally, SchemeTally, judge_group
from reports.runinfo import missing_rows
from reports.since import markdown_section as since_section
from reports.runinfo import machines
from suite.core.findings import why
from suite.core.text import md_cell, md_code
from suite.core.verdict import ERRORS, Status

COLUMNS = ["op", "target", "cases", "passed", "failed", "unsupported", "errors", "bit_exact_pct",
           "max_abs_lsb", "mean_err_lsb", "p50_latency_us"]
#: failures and errors apart: "known" = explained by a finding (suite/core/findings.toml) or covered
#: by a waiver, "new" = the rest, what fails the run. Always the table's last columns.
KNOWN_COLUMNS = ["failed_new", "failed_known", "errors_new", "errors_known"]
SUMMARY_CSV = "summary.csv"
SUMMARY_MD = "summary.md"

_RAN = frozenset({Status.PASS.value, Status.FAIL.value, Status.WAIVED.value})   # compared with the golden
_ERRORS = frozenset(s.value for s in ERRORS)


def _number(v: Any) -> float | None:
    """A JSON number (a bool too) as a float; None for anything else, NaN and overflow."""
    if not isinstance(v, (int, float)):
        return None
    try:
        f = float(v)
    except OverflowError:
        return None
    return None if math.isnan(f) else f


class Group:
    """The accumulators of one group's summary row."""

    def __init__(self):
        self.statuses: dict[Any, int] = {}
        self.ran = 0                 # rows compared with the golden (pass, fail, waived)
        self.exact = 0               # of which without a mismatch
        self.elements = 0.0
        self.mismatches = 0.0
        self.sum_err = 0.0
        self.max_abs: float | None = None
        self.latency: list[float] = []   # each row's p50, for the group's median
        self.emulated: list[float] = []  # those of emulated devices: apart, never compared with real ones
        self.findings: set[str] = set()
        self.prefer: str | None = None   # the run's scheme (the first row's): best_scheme's tie-break
        self.schemes = SchemeTally()
        self.bias = BiasTally()
        self.known = dict.fromkeys(KNOWN_COLUMNS, 0)

    def add(self, row: dict) -> None:
        s = row.get("status")
        self.statuses[s] = self.statuses.get(s, 0) + 1
        kind = failure_kind(row)
        if kind is not None:
            self.known[kind] += 1
        lat = _number(row.get("p50_us"))
        if lat is not None:
            (self.emulated if emulated(row) else self.latency).append(lat)
        if row.get("finding"):
            self.findings.add(row["finding"])
        if self.prefer is None and row.get("scheme"):
            self.prefer = row["scheme"]
        if s not in _RAN:
            return
        self.ran += 1
        mism = _number(row.get("mismatches")) or 0.0
        self.exact += mism == 0
        self.elements += _number(row.get("elements")) or 0.0
        self.mismatches += mism
        self.sum_err += _number(row.get("sum_err_lsb")) or 0.0
        mx = _number(row.get("max_abs_lsb"))
        if mx is not None and (self.max_abs is None or mx > self.max_abs):
            self.max_abs = mx
        self.schemes.add(row)
        self.bias.add(row)

    def row(self, key: dict[str, Any]) -> dict[str, Any]:
        """The summary row: ``key`` (op, target[, device]) and the group's columns."""
        n = self.statuses.get
        r = dict(key)
        r["cases"] = sum(self.statuses.values())
        r["passed"] = n(Status.PASS.value, 0)
        r["failed"] = n(Status.FAIL.value, 0)
        r["unsupported"] = n(Status.UNSUPPORTED.value, 0)
        r["errors"] = sum(c for s, c in self.statuses.items() if s in _ERRORS)
        r["crashes"] = n(Status.CRASH.value, 0)
        r["timeouts"] = n(Status.TIMEOUT.value, 0)
        r["infra_errors"] = n(Status.INFRA.value, 0)
        r["waived"] = n(Status.WAIVED.value, 0)
        e = self.elements
        r["bit_exact_pct"] = round(100.0 * (e - self.mismatches) / e, 3) if e else None
        r["exact_cases_pct"] = round(100.0 * self.exact / self.ran, 2) if self.ran else None
        r["max_abs_lsb"] = self.max_abs
        r["mean_err_lsb"] = round(self.sum_err / e, 5) if e else None
        r["p50_latency_us"] = round(float(np.median(self.latency)), 2) if self.latency else None
        if self.emulated:   # the emulator's time on this host, not the board's: labelled, kept apart
            r["p50_emulated_us"] = round(float(np.median(self.emulated)), 2)
        if self.findings:
            r["findings"] = ",".join(sorted(self.findings))
        r.update(self.schemes.columns(self.prefer))
        r.update(self.bias.columns())
        r.update(self.known)
        return r


def emulated(row: dict) -> bool:
    """Whether the row's device is emulated (``qemu:``: its latencies are the emulator's)."""
    return str(row.get("device_emulated") or "").lower() in ("yes", "true", "1")


def failure_kind(row: dict) -> str | None:
    """The :data:`KNOWN_COLUMNS` column a failing or erring row counts in (a waived row: as what
    it was before its waiver); None for the others."""
    s, known = row.get("status"), bool(row.get("finding"))
    if s == Status.WAIVED.value:
        s, known = row.get("waived_status") or Status.FAIL.value, True
    what = "failed" if s == Status.FAIL.value else "errors" if s in _ERRORS else None
    return what and f"{what}_{'known' if known else 'new'}"


def _device(row: dict) -> str:
    d = row.get("device")
    return "" if d is None or (isinstance(d, float) and math.isnan(d)) else d


class Summary:
    """Rows in, one summary row per (op, target) out; per (op, target, device) when any row has a
    device (a farm run). Groups are in the order of their first rows; rows without an op or a
    target are left out.

    Each group is also judged whole (reports.causes.judge_group: its bias under ``policy``, a
    suite.core.tolerance.Policy, with the targets' ``versions``; the scheme each target declares in
    ``expected``, {target: scheme}); :attr:`verdicts` keeps the failures of each (op, target)."""

    def __init__(self, policy=None, versions: dict | None = None, expected: dict | None = None):
        self.groups: dict[tuple, Group] = {}   # (op, target, device)
        self.pairs: dict[tuple, Group] = {}    # (op, target): the matrix of a farm run counts every device
        self.devices = False
        self.policy, self.versions, self.expected = policy, versions or {}, expected or {}
        self.verdicts: dict[tuple, list[dict]] = {}   # (op, target) -> judge_group's failures (pair_table)
        self._first: dict[tuple, str] = {}   # (op, target, case id) -> the first device it ran on
        self.repeated: set[tuple] = set()    # (op, target)s with a case on two devices or more
        #: why the run is incomplete (interrupted, planned results without a row), else None: then no
        #: (op, target) is judged whole (a partial group's bias is no verdict), each is marked
        #: ``group_incomplete`` instead, never failing nor passing
        self.incomplete: str | None = None
        #: an incomplete run's would-be failures per (op, target), each text saying so (the certificate
        #: keeps them: a certificate of part of a run is never the better for it)
        self.partial: dict[tuple, list[dict]] = {}

    def add(self, row: dict) -> None:
        op, target = row.get("op"), row.get("target")
        if op is None or target is None:
            return
        dev = _device(row)
        self.devices = self.devices or bool(dev)
        if dev and self._first.setdefault((op, target, row.get("case_id")), dev) != dev:
            self.repeated.add((op, target))
        g = self.groups.get((op, target, dev))
        if g is None:
            g = self.groups[(op, target, dev)] = Group()
        g.add(row)
        # (op, target)'s rows without a device are its no-device group's: one Group for both, each row
        # added once, until a row with a device comes (then the pair gets its own copy)
        p = self.pairs.get((op, target))
        if p is None:
            self.pairs[(op, target)] = g if not dev else copy.deepcopy(g)
        elif p is not g:
            if p is self.groups.get((op, target, "")):
                p = self.pairs[(op, target)] = copy.deepcopy(p)
            p.add(row)

    def table(self) -> list[dict[str, Any]]:
        """The summary: per (op, target[, device]), as summary.csv has it."""
        if self.devices:
            return _columns([self._row(g, {"op": k[0], "target": k[1], "device": k[2]})
                             for k, g in self.groups.items()])
        return self.pair_table()

    def pair_table(self) -> list[dict[str, Any]]:
        """Per (op, target), every device together."""
        return _columns([self._row(g, {"op": k[0], "target": k[1]}) for k, g in self.pairs.items()])

    def _row(self, g: Group, key: dict[str, Any]) -> dict[str, Any]:
        r = g.row(key)
        cols, failures = judge_group(key["op"], key["target"], g.bias, g.schemes, self.policy,
                                     self.versions.get(key["target"]), self.expected.get(key["target"]), g.prefer)
        if "device" not in key and (key["op"], key["target"]) in self.repeated:
            cols, failures = self._per_device(key["op"], key["target"], cols)
        if self.incomplete:
            if "device" not in key:
                self.partial[(key["op"], key["target"])] = [
                    {**f, "text": f"{f['text']} (on partial rows: {self.incomplete})"} for f in failures]
            partial = "; ".join(f["text"] for f in failures)
            cols = {**cols, "group_failure": None, "group_known": None,
                    "group_incomplete": f"not judged as a whole: {self.incomplete}"
                                        + (f" (its partial rows: {partial})" if partial else "")}
            failures = []
        r.update(cols)
        known = sorted({f["finding"] for f in failures if f["finding"]} - set((r.get("findings") or "").split(",")))
        if known:
            r["findings"] = ",".join(filter(None, [r.get("findings"), *known]))
        if "device" not in key:
            self.verdicts[(key["op"], key["target"])] = failures
        return r


    def _per_device(self, op: str, target: str, pooled: dict) -> tuple[dict, list[dict]]:
        """The verdict of an (op, target) whose cases ran on several devices: each device's rows judged
        on their own (pooled, every case would count once per device, and a device's bias could hide
        in another's rows); a failure on one device fails the (op, target)."""
        failures, signs = [], ""
        for (o, t, dev), g in self.groups.items():
            if (o, t) == (op, target):
                c, fs = judge_group(op, target, g.bias, g.schemes, self.policy, self.versions.get(target),
                                    self.expected.get(target), g.prefer)
                failures += [{**f, "text": f"on {dev}: {f['text']}"} for f in fs]
                signs += "".join(x for x in c["bias"] if x not in signs)
        cols = {**pooled, "bias": signs,
                "scheme_mismatch": pooled["scheme_mismatch"] if any(f["kind"] == "scheme" for f in failures) else None,
                "group_failure": "; ".join(f["text"] for f in failures if not f["finding"]) or None,
                "group_known": "; ".join(f"{f['text']} [known finding {f['finding']}]" for f in failures
                                         if f["finding"]) or None}
        return cols, failures


def _columns(rows: list[dict]) -> list[dict]:
    """Every row with the same columns: the group keys and :data:`COLUMNS` first, then the others
    in the order they first appear, :data:`KNOWN_COLUMNS` last; a column a row lacks is None there."""
    keys = [k for k in ("op", "target", "device") if rows and k in rows[0]]
    seen = dict.fromkeys(keys + [c for c in COLUMNS if c not in keys])
    for r in rows:
        seen.update(dict.fromkeys(c for c in r if c not in KNOWN_COLUMNS))
    seen.update(dict.fromkeys(KNOWN_COLUMNS if rows else ()))
    return [{c: r.get(c) for c in seen} for r in rows]


def summarize(rows: Iterable[dict]) -> list[dict[str, Any]]:
    """The summary table of ``rows`` (:meth:`Summary.table`)."""
    s = Summary()
    for r in rows:
        s.add(r)
    return s.table()


def totals(summary: list[dict]) -> dict[str, int]:
    """The run's counts, from its summary rows: cases, passed, unsupported, waived and
    :data:`KNOWN_COLUMNS` summed; ``new`` and ``known`` (failures and errors together),
    ``findings`` (known, not waived) and ``pairs_new``: the (op, target)s with a new one."""
    t = {c: sum(int(r.get(c) or 0) for r in summary) for c in ("cases", "passed", "unsupported", "waived", *KNOWN_COLUMNS)}
    t["new"], t["known"] = t["failed_new"] + t["errors_new"], t["failed_known"] + t["errors_known"]
    t["findings"] = t["known"] - t["waived"]
    t["pairs_new"] = len({(r["op"], r["target"]) for r in summary if _new(r)})
    t["groups_new"] = len({(r["op"], r["target"]) for r in summary if r.get("group_failure")})   # judge_group
    return t


def _new(r: dict) -> int:
    return int(r.get("failed_new") or 0) + int(r.get("errors_new") or 0)


def _n(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def verdict_line(t: dict[str, int]) -> str:
    """"2 new failures (1 fail, 1 error) in 2 (op, target)s; 110 known (findings), 0 waived"."""
    head = (f"{_n(t['new'], 'new failure')} ({_n(t['failed_new'], 'fail')}, {_n(t['errors_new'], 'error')}) "
            f"in {_n(t['pairs_new'], '(op, target)')}") if t["new"] else "no new failures"
    if t.get("groups_new"):   # (op, target)s whose cases pass but whose whole fails: bias, declared scheme
        head = ("no new failing cases" if not t["new"] else head) + (
            f"; {_n(t['groups_new'], '(op, target)')} failing as a whole (bias or declared scheme)")
    return f"{head}; {t['findings']} known (findings), {t['waived']} waived"


def case_counts(t: dict[str, int]) -> str:
    """"1506 results: 1400 passed, 60 unsupported, 40 failing, 6 errors": every (case, target)'s
    outcome counted, whatever pytest counts (one item per (op, target) by default: --item=group)."""
    errors = t["errors_new"] + t["errors_known"]
    parts = [f"{t['passed']} passed"] + [f"{n} {what}" for n, what in (
        (t["unsupported"], "unsupported"), (t["failed_new"] + t["failed_known"], "failing")) if n]
    parts += [_n(errors, "error")] if errors else []
    return f"{_n(t['cases'], 'result')}: {', '.join(parts)}"


#: the verdicts that certify an (op, target) (reports/certify.py)
CONFORMANT = ("bit-exact", "conformant within tolerance")


def certificate_failures(cert: dict | None) -> list[str]:
    """The certified (op, target)s that are non-conformant, each with its reason (reports/certify.py);
    and a certificate that certifies nothing (every (op, target) unsupported) says so: no pass."""
    if cert is None:
        return []
    ops = [o for o in cert.get("ops") or [] if isinstance(o, dict)]
    out = [f"{o.get('op')} ({o.get('spec')}) on {o.get('target')}: {o.get('reason') or 'see certificate.md'}"
           for o in ops if o.get("verdict") == "non-conformant"]
    if not any(o.get("verdict") in CONFORMANT for o in ops):
        out.append("no (op, target) is certified conformant (each unsupported, or none in the certificate)")
    if cert.get("incomplete"):   # (a partial run certifies nothing: its verdicts are of the rows it wrote)
        out.append(f"the run is incomplete: {cert['incomplete']}")
    return out


def terminal_verdict(t: dict[str, int], *, runxfail: bool = False, known_groups: int = 0,
                     exit_status: int = 0) -> tuple[str, bool]:
    """The terminal's last qconform line and whether it is red: :func:`verdict_line`, agreeing
    with pytest's outcome: under ``--runxfail`` the known failures (cases, and (op, target)s as a
    whole) fail the run as pytest reports them; any other non-zero exit status is said too."""
    line, bad = verdict_line(t), bool(t["new"] or t.get("groups_new"))
    if runxfail and (t["known"] or known_groups):
        parts = [_n(t["known"], "known failing case")] + ([_n(known_groups, "known (op, target)") + " as a whole"]
                                                             if known_groups else [])
        return f"FAIL under --runxfail: {' and '.join(parts)} fail here; {line}", True
    if exit_status not in (0, 5) and not bad:
        return f"{line}; pytest's exit status is {exit_status}", True
    return line, bad


def verdict(t: dict[str, int], run_info: dict | None, certificate: dict | None = None) -> tuple[str, str]:
    """The run in one word and a line: FAIL (a new failure, a non-conformant certified (op, target),
    or pytest's exit status was not 0),
    INCOMPLETE (no run.json, the run did not finish, or planned results have no row: what ran so
    far is no PASS) or PASS."""
    line = verdict_line(t)
    status = (run_info or {}).get("exit_status")
    bad = certificate_failures(certificate)
    if bad:
        return "FAIL", f"certificate: NON-CONFORMANT: {'; '.join(bad)}; {line}"
    if t["new"] or t.get("groups_new"):
        return "FAIL", line
    if not run_info or not run_info.get("finished") or run_info.get("interrupted"):
        return "INCOMPLETE", f"the run did not finish; {line}"
    missing = missing_rows(run_info, (run_info.get("cost") or {}).get("rows") or 0)
    if missing:   # every planned case needs its row before the run can pass
        return "INCOMPLETE", f"{missing} of {run_info['planned']} planned results have no row; {line}"
    if status == 2:
        return "INCOMPLETE", f"the run did not finish; {line}"
    if status not in (0, None):
        return "FAIL", f"pytest's exit status was {status} (see its output: e.g. known failures under --runxfail); {line}"
    return "PASS", line


def with_failures(summary: list[dict], known: bool = True) -> list[dict]:
    """The rows with a new failure or error, then (``known``) those with known ones only."""
    return ([r for r in summary if _new(r)]
            + [r for r in summary if known and not _new(r) and (r.get("failed_known") or r.get("errors_known"))])


#: the terminal's columns of the rows with failures
FAILING_COLUMNS = ["op", "target", "device", "cases", "passed", "failed_new", "errors_new", "failed_known",
                   "errors_known", "waived", "unsupported", "bit_exact_pct", "max_abs_lsb", "best_scheme", "findings"]


def worst_text(row: dict) -> str:
    """A failing row's worst element: "out 0 [0, 3, 1, 2]: got 17, want 15 (+2 LSB, cause: scheme x)"
    (a row judged before rows had one: its first mismatch, so named)."""
    if row.get("worst_index") is None:
        if row.get("first_index") is None:
            return ""
        return (f"first mismatch out {row.get('first_output')} {row['first_index']}: got {row.get('got')}, "
                f"want {row.get('want')}")
    why = [f"{row['worst_err_lsb']:+d} LSB"] if isinstance(row.get("worst_err_lsb"), int) else []
    why += [f"cause: {row['worst_cause']}"] if row.get("worst_cause") else []
    return (f"out {row.get('worst_output')} {row['worst_index']}: got {row.get('worst_got')}, want "
            f"{row.get('worst_want')}" + (f" ({', '.join(why)})" if why else ""))


def fit(text: str, width: int) -> str:
    """``text`` within ``width`` characters, cut at a word's end with "..." (details: summary.md)."""
    if len(text) <= width:
        return text
    cut = text[:max(width - 3, 1)]
    at = max(cut.rfind(" "), cut.rfind(","))
    return (cut[:at] if at > width // 2 else cut).rstrip(" ,;:") + "..."


def _ids(text: str, room: int) -> str:
    """Comma-separated ids within ``room`` characters: the first ones whole, then "+N" for the rest
    (an id longer than the room is cut with "...")."""
    ids = [i for i in text.split(",") if i]
    if len(text) <= room or not ids:
        return text
    for k in range(len(ids) - 1, 0, -1):
        head = ",".join(ids[:k]) + f",+{len(ids) - k}"
        if len(head) <= room:
            return head
    more = f",+{len(ids) - 1}" if len(ids) > 1 else ""
    keep = max(room - len(more) - 3, 4)
    return ids[0][:keep] + "..." + more


def compact_table(summary: list[dict], width: int) -> str:
    """The terminal's table of the (op, target)s with failures: a header, then one line each,
    each within ``width`` (its findings cut last): new and known failures (errors included)."""
    device = any(r.get("device") for r in summary)
    waived = any(r.get("waived") for r in summary)   # (a column of zeros is left out: room for the findings)
    cols = ["op", "target", *(["device"] if device else []), "cases", "new", "known", *(["waived"] if waived else []),
            "max_lsb", "findings"]
    cells = [cols] + [[str(r["op"]), str(r["target"]), *([str(r.get("device") or "")] if device else []),
                       str(r.get("cases") or 0), str(_new(r)),
                       str(int(r.get("failed_known") or 0) + int(r.get("errors_known") or 0)),
                       *([str(r.get("waived") or 0)] if waived else []), fmt(r.get("max_abs_lsb")),
                       ",".join(filter(None, str(r.get("findings") or "").split(",")))] for r in summary]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols) - 1)]
    out = []
    for k, row in enumerate(cells):
        head = "  ".join(v.rjust(w) if k and _numeric(v) else v.ljust(w) for v, w in zip(row, widths))
        out.append(fit(f"{head}  {_ids(row[-1], width - len(head) - 2)}".rstrip(), width))
        if k == 0:
            out.append(fit("  ".join("-" * w for w in widths + [len("findings")]), width))
    return "\n".join(out)


def columns_of(summary: list[dict]) -> list[str]:
    return list(summary[0]) if summary else list(COLUMNS)


def to_csv(summary: list[dict]) -> str:
    """summary.csv: empty cells for missing values, floats as Python writes them."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    cols = columns_of(summary)
    w.writerow(cols)
    for r in summary:
        w.writerow(["" if r[c] is None else repr(r[c]) if isinstance(r[c], float) else r[c] for c in cols])
    return out.getvalue()


def to_markdown(summary: list[dict]) -> str:
    if not summary:
        return "(no results)\n"
    cols = columns_of(summary)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for r in summary:
        lines.append("| " + " | ".join(_md(r[c]) for c in cols) + " |")
    return "\n".join(lines) + "\n"


#: summary.md lists at most this many new failures (index.html and results.jsonl have them all)
MD_NEW_CAP = 100


def _md(v) -> str:
    return md_cell(fmt(v))


def markdown_file(summary: list[dict], run_info: dict | None = None, new: list[dict] | None = None,
                  n_new: int | None = None, cross: list[dict] | None = None, review: list[dict] | None = None,
                  since: str | None = None, models: str | None = None, certificate: dict | None = None) -> str:
    """summary.md: the verdict (a non-conformant ``certificate`` fails it), a ``--model`` run's Models section (``models``: reports/models.py), the new failures (``new``: their rows, as reports.html.Page keeps
    them, ``n_new`` of them in all; and their (op, target)s), the cross-device table (``cross``:
    reports.crossdevice), then the whole table."""
    word, line = verdict(totals(summary), run_info, certificate)
    out = [f"# qconform summary\n\n**{word}: {line}**\n"]
    if summary:
        out.append(f"Cases: {case_counts(totals(summary))}.\n")
    where = machines(run_info)
    out += [f"- {_md(m)}" for m in where] + ([""] if where else [])
    out.append(since or since_section(None))   # new since the baseline, or that there is none (#22)
    if models:
        out.append(models)
    if new:
        out.append("## New failures\n" if since is None else   # (with a baseline: new or still failing)
                   "## Failures no known finding explains (new and still failing)\n")
        out.append("| case | target | status | max_abs_lsb | worst element | witnesses | reason | reproduce |\n"
                   "|---|---|---|---|---|---|---|---|")
        out += ["| " + " | ".join(_md(v) for v in (
            r.get("case_id"), r.get("target"), r.get("status"), r.get("max_abs_lsb"), worst_text(r),
            witness.row_text(r) or None,   # (reports/witness.py)
            r.get("reason"))) + f" | {md_code(r['repro']) if r.get('repro') else ''} |" for r in new[:MD_NEW_CAP]]
        more = (n_new or len(new)) - min(len(new), MD_NEW_CAP)
        out.append(f"\n{more} more: index.html and results.jsonl list them all.\n" if more > 0 else "")
    bad = with_failures(summary, known=False)
    if bad:
        cols = [c for c in FAILING_COLUMNS if c in columns_of(summary)]
        out.append("## (op, target)s with new failures\n\n" + to_markdown([{c: r.get(c) for c in cols} for r in bad]))
    whole = [r for r in summary if r.get("group_failure")]   # reports.causes.judge_group
    if whole:
        out.append("## (op, target)s failing as a whole (bias, declared scheme)\n\n"
                   + "".join(f"- {r['op']} on {r['target']}: {_md(r['group_failure'])}\n" for r in whole))
    unjudged = [r for r in summary if r.get("group_incomplete")]
    if unjudged:
        out.append("## (op, target)s not judged as a whole: the run is incomplete\n\n"
                   + "".join(f"- {r['op']} on {r['target']}: {_md(r['group_incomplete'])}\n" for r in unjudged))
    if review:   # ---- golden values no runtime reproduces (reports/witness.py)
        out.append(f"## Golden values for review: {len(review)} cases that two runtimes or more ran, none bit-exact\n\n"
                   + to_markdown(review[:MD_NEW_CAP]))
    known = known_findings(summary)   # (#24: each finding with its reason, where people read)
    if known:
        out.append("## Known findings (why these failures are expected)\n\n"
                   + "".join(f"- **{fid}** ({_md(', '.join(where))}): {_md(why(fid) or 'not in findings.toml')}\n"
                             for fid, where in known.items()))
    if cross:
        out.append("## Same cases on other devices: outputs that differ bit-wise\n\n"
                   "`differ`: cases whose outputs are not bit-identical across the devices, of `compared`; "
                   "`worst_delta_lsb`: the worst case's max |difference| between devices (`lo..hi` where the "
                   "golden bounds it); `status_differs`: cases with another status on another device.\n\n"
                   + to_markdown(cross))
    if any(r.get("p50_emulated_us") is not None for r in summary):
        out.append("`p50_emulated_us`: latencies on an emulated device (QEMU on this host), not the board's; "
                   "never in `p50_latency_us` nor compared with it.\n")
    out.append("## Every (op, target)\n\n" + to_markdown(summary))
    return "\n".join(out)


def known_findings(summary: list[dict]) -> dict[str, list[str]]:
    """{finding id: the "op on target"s it explains} over the summary's rows (a case's or a whole
    (op, target)'s), in the order they come."""
    out: dict[str, list[str]] = {}
    for r in summary:
        for fid in filter(None, str(r.get("findings") or "").split(",")):
            where = out.setdefault(fid, [])
            if f"{r['op']} on {r['target']}" not in where:
                where.append(f"{r['op']} on {r['target']}")
    return out


def to_text(summary: list[dict], columns: list[str] | None = None) -> str:
    """A fixed-width table for the terminal."""
    if not summary:
        return "(no results)"
    cols = columns or [c for c in columns_of(summary)
                       if c in COLUMNS or c in ("device", "p50_emulated_us", "best_scheme", "best_scheme_exact_pct",
                                                *KNOWN_COLUMNS)]
    cells = [list(cols)] + [[fmt(r.get(c)) for c in cols] for r in summary]
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    out = []
    for k, row in enumerate(cells):
        out.append("  ".join(v.rjust(w) if k and _numeric(v) else v.ljust(w) for v, w in zip(row, widths)))
        if k == 0:
            out.append("  ".join("-" * w for w in widths))
    return "\n".join(out)


def _numeric(v: str) -> bool:
    try:
        float(v)
        return True
    except ValueError:
        return False


def fmt(v) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float) and math.isinf(v):
        return str(v)
    if isinstance(v, float):
        if v == int(v) and abs(v) < 1e15:
            return str(int(v))
        return f"{v:.4g}" if abs(v) < 1e-2 else f"{v:.3f}".rstrip("0").rstrip(".")
    return str(v)
