"""``index.html``: a self-contained report of one run (no network needed to open it).

Built from results.jsonl alone (plus run.json and certificate.json when present), so
``qconform report RUN_DIR`` rebuilds it for any run, interrupted ones included. The rows
stream through :class:`Page` (what the page shows beyond the summary: counts, error
histograms, the new and the known failing cases, at most :data:`FAILING_CAP` of each, the
unsupported ones grouped by reason) and a :class:`reports.summary.Summary`; :func:`render`
makes the page. Sections, in order: the run's verdict (FAIL / PASS / INCOMPLETE, new failures
apart from known ones), alerts (interrupted run, waiver problems), the new failures with their
worst element, cause and reproduction command, the op x target matrix (one cell colour per
state: new failures, known findings only, within tolerance, bit-exact, no data; a legend), the
summary table, mismatch causes (unexplained first), per-op error histograms in LSB, latency per
op and target, the known failing cases (findings and waivers), unsupported cases, the run's facts.
Charts are SVGs written as text by plots.py (no plotting library), embedded as data URIs; tables
sort by clicking a header. Wide and long tables scroll in a box of their own, so the page is never
wider than the window; a reproduction command stays on one line, selected whole by one click and
copied by its button (no network, no library).
"""

from __future__ import annotations

import base64
import html
import shlex
import json
import math
from collections.abc import Iterable
from typing import Any

from reports import models as model_text
from reports import plots, witness
from reports.since import html_section as since_section
from reports.causes import CAUSE_TEXT, CAUSES, HistTally, hist_key_order
from reports.runinfo import machines
from reports.summary import Summary, failure_kind, fmt, totals, verdict, worst_text
from suite.core.findings import brief, why
from suite.core.verdict import ERRORS, Status

INDEX = "index.html"
#: each failing-cases table (new, known) lists at most this many (unexplained first, then by max |error|)
FAILING_CAP = 2000
_PASS, _WAIVED, _UNSUPPORTED = Status.PASS.value, Status.WAIVED.value, Status.UNSUPPORTED.value
BAD = frozenset({Status.FAIL.value} | {s.value for s in ERRORS})
_FAILING_FIELDS = ("case_id", "target", "status", "max_abs_lsb", "mismatches", "elements", "causes",
                   "first_output", "first_index", "got", "want", "worst_output", "worst_index", "worst_got",
                   "worst_want", "worst_err_lsb", "worst_cause", "finding", "waiver", "reason", "repro",
                   "failure_file",
                   "witnesses_golden", "witnesses_target", "golden_unwitnessed", "witnesses_other",
                   "witnesses_none")   # (reports/witness.py)
#: the matrix's cell states: (class, colour, legend)
CELLS = (("new", "#ec7063", "new failures or errors, or failing as a whole (outlined)"),
         ("known", "#c39bd3", "known failures only (findings, waivers)"),
         ("tolerance", "#f9e79f", "within tolerance, not bit-exact"),
         ("exact", "#a9dfbf", "every element bit-exact"),
         ("nodata", "#eeeeee", "nothing compared (unsupported)"))

# A command's <code> has width 0 and grows into what its row leaves (flex): however long, it never
# widens its table; it stays on one line and scrolls in its own box. Long tables scroll in a .box.
_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.2em 2em;color:#222}
h1{font-size:1.3em;margin:.2em 0}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f2f2f2}table.sortable th{cursor:pointer}table.sortable th:hover{background:#e4e4e4}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td.cell{text-align:center;min-width:6em}td.cell.new{outline:3px solid #000;outline-offset:-3px;font-weight:bold}
.verdict{font-size:1.35em;font-weight:bold;padding:.5em .8em;margin:.5em 0;border-radius:4px;border:2px solid}
.verdict.FAIL{background:#fdecea;border-color:#c0392b;color:#922b21}
.verdict.PASS{background:#e9f7ef;border-color:#27ae60;color:#1e8449}
.verdict.INCOMPLETE{background:#fef5e7;border-color:#e67e22;color:#a04000}
.alert{background:#fdecea;border:2px solid #c0392b;padding:.6em 1em;margin:.6em 0}
.note{background:#fff8e1;border:1px solid #f1c40f;padding:.5em 1em;margin:.6em 0}
code{font-size:12px;background:#f6f6f6;padding:1px 3px}
.cmd{display:flex;align-items:center;gap:6px;margin:2px 0}
.cmd code{width:0;flex:1 1 auto;display:block;white-space:pre;overflow-x:auto;user-select:all;padding:3px 6px;
  border:1px solid #ddd;font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace}
.cmd .muted,.cmd button{flex:none;white-space:nowrap}.cmd button{font-size:11px;padding:2px 8px;cursor:pointer}
td .cmd{width:28em}tr.repro td .cmd{width:auto}
table.full{width:100%}tr.repro td{border-top:none;background:#fafafa}
td.why{min-width:14em}td.why div{max-width:36em;overflow-wrap:anywhere}td.id,.nw{white-space:nowrap}
.worst{min-width:16em}
img{max-width:100%;border:1px solid #eee;margin:4px}
.muted{color:#777}.scroll,.wide{overflow-x:auto;max-width:100%}.wide td{white-space:nowrap}
.box{overflow:auto;max-width:100%;max-height:36em;border:1px solid #ddd}.box table{margin:0}
.box th{position:sticky;top:0;z-index:1}
.legend span.sw{display:inline-block;width:1.1em;height:.9em;border:1px solid #999;vertical-align:middle;margin:0 .3em 0 .9em}
"""

_JS = """
document.addEventListener('click',function(ev){
  var b=ev.target.closest&&ev.target.closest('button.copy');if(!b){return;}
  var code=b.parentElement.querySelector('code'),text=code.textContent,sel=window.getSelection(),r=document.createRange();
  r.selectNodeContents(code);sel.removeAllRanges();sel.addRange(r);
  function said(ok){b.textContent=ok?'copied':'selected: Ctrl-C';setTimeout(function(){b.textContent='copy';},1500);}
  function legacy(){var ok=false;try{ok=document.execCommand('copy');}catch(e){}said(ok);}
  if(navigator.clipboard&&window.isSecureContext){navigator.clipboard.writeText(text).then(function(){said(true);},legacy);}
  else{legacy();}
});
window.addEventListener('load',function(){document.querySelectorAll('img').forEach(function(i){
  i.setAttribute('data-w',i.naturalWidth);});document.body.setAttribute('data-loaded','1');});
document.querySelectorAll('table.sortable').forEach(function(t){
  t.querySelectorAll('th').forEach(function(th,i){
    th.addEventListener('click',function(){
      var tb=t.tBodies[0],rows=Array.from(tb.rows),asc=th.dataset.dir!=='asc';
      t.querySelectorAll('th').forEach(function(h){h.dataset.dir='';});th.dataset.dir=asc?'asc':'desc';
      function key(r){var c=r.cells[i];var v=c.dataset.v!==undefined?c.dataset.v:c.textContent.trim();
        var n=parseFloat(v);return (v!==''&&!isNaN(n)&&isFinite(v))?n:v.toLowerCase();}
      rows.sort(function(a,b){var x=key(a),y=key(b);
        if(typeof x===typeof y){return (x<y?-1:x>y?1:0)*(asc?1:-1);}return (typeof x==='number'?-1:1)*(asc?1:-1);});
      rows.forEach(function(r){tb.appendChild(r);});
    });
  });
});
"""


def _e(v: Any) -> str:
    return html.escape("" if v is None else str(v))


def _img(svg: bytes, alt: str, id_: str | None = None, cls: str | None = None) -> str:
    """An SVG chart as an <img> with a data URI (one document per chart: its ids cannot clash)."""
    b64 = base64.b64encode(svg).decode()
    attrs = f' id="{id_}"' if id_ else ""
    attrs += f' class="{cls}"' if cls else ""
    return f'<img{attrs} alt="{_e(alt)}" src="data:image/svg+xml;base64,{b64}">'


def _table(cols: list[str], rows: list[list[Any]], id_: str | None = None, numeric: set[str] = frozenset(),
           raw: set[str] = frozenset()) -> str:
    out = [f'<table class="sortable"{f" id={chr(34)}{id_}{chr(34)}" if id_ else ""}><thead><tr>']
    out += [f"<th>{_e(c)}</th>" for c in cols]
    out.append("</tr></thead><tbody>")
    for r in rows:
        out.append("<tr>")
        for c, v in zip(cols, r):
            if c in raw:
                out.append(f"<td>{v}</td>")
            elif c in numeric:
                dv = "" if v is None or (isinstance(v, float) and math.isnan(v)) else v
                out.append(f'<td class="num" data-v="{_e(dv)}">{_e(fmt(v))}</td>')
            else:
                out.append(f"<td>{_e(fmt(v) if isinstance(v, float) else v)}</td>")
        out.append("</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _number(v) -> float | None:
    """A summary value as a float; None for a missing or NaN one."""
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def _n(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _state(r: dict) -> str:
    """The matrix cell's state (a :data:`CELLS` class) of a summary row (``group_failure`` /
    ``group_known``: the (op, target) judged whole, reports.causes.judge_group)."""
    pct = _number(r.get("bit_exact_pct"))
    if int(r.get("failed_new") or 0) + int(r.get("errors_new") or 0) or r.get("group_failure"):
        return "new"
    if int(r.get("failed_known") or 0) + int(r.get("errors_known") or 0) or r.get("group_known"):
        return "known"
    return "nodata" if pct is None else "exact" if pct >= 100.0 else "tolerance"


def _failing_order(r: dict):
    return (-int((r.get("causes") or {}).get("unexplained", 0) > 0), r.get("status") == _WAIVED,
            -(r.get("max_abs_lsb") or 0), r.get("case_id") or "")


class _Failing:
    """Failing rows of one kind: the FAILING_CAP first by _failing_order, and how many there were."""

    def __init__(self):
        self.rows: list[dict] = []
        self.n = 0

    def add(self, r: dict) -> None:
        self.n += 1
        self.rows.append({k: r[k] for k in _FAILING_FIELDS if k in r})
        if len(self.rows) >= 2 * FAILING_CAP:   # sort is stable: the same as sorting them all at the end
            self.rows.sort(key=_failing_order)
            del self.rows[FAILING_CAP:]

    def first(self) -> list[dict]:
        return sorted(self.rows, key=_failing_order)[:FAILING_CAP]


def _cmd(text: str, label: str = "") -> str:
    """A command on one line: selected whole by a click, copied by its button."""
    lab = f'<span class="muted">{_e(label)}</span>' if label else ""
    return (f'<div class="cmd">{lab}<code>{_e(text)}</code>'
            f'<button type="button" class="copy" title="copy the command">copy</button></div>')


def _repro(r: dict) -> str:
    out = _cmd(r["repro"], "reproduce:") if r.get("repro") else ""
    if r.get("failure_file"):
        out += _cmd(f"qconform shrink {shlex.quote(str(r['failure_file']))}",   # (judged as the run did: the file says how)
                    "smallest failing input:")
    return out


def _why(r: dict) -> str:
    """A known failure's reason: its finding's (and ticket), or its waiver's (the row's reason); the
    first clause shown, the whole on a click (#24)."""
    text = why(r["finding"]) if r.get("finding") else None
    text = text or str(r.get("reason") or "")
    short = brief(text)
    if short == text:
        return _e(text)
    return f"<details><summary>{_e(short)}</summary>{_e(text)}</details>"


def _causes_text(r: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in (r.get("causes") or {}).items())


class Page:
    """What index.html shows of the rows beyond the summary, taken one row at a time."""

    def __init__(self):
        self.rows = 0
        self.statuses: dict[Any, int] = {}
        self.run_id = None                                   # the first row's that has one
        self.ops: dict[str, None] = {}                       # in the order of first rows
        self.targets: dict[str, None] = {}
        self.hists: dict[str, dict[str, HistTally]] = {}     # op -> target -> error histogram
        self.new = _Failing()                                # failures and errors no finding or waiver explains
        self.known = _Failing()                              # those a finding or a waiver does
        self.unsupported: dict[tuple[str, str], list] = {}   # (target, reason) -> [cases, first 8 ids]
        self.expired: list[dict] = []                        # rows that a waiver no longer covers
        self.unneeded: list[dict] = []                       # waived rows that pass now

    def add(self, r: dict) -> None:
        self.rows += 1
        status = r.get("status")
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if self.run_id is None and r.get("run_id"):
            self.run_id = r["run_id"]
        if r.get("op"):
            self.ops.setdefault(r["op"], None)
        if r.get("target"):
            self.targets.setdefault(r["target"], None)
        if r.get("elements") is not None and status != _UNSUPPORTED:
            by_target = self.hists.setdefault(r.get("op"), {})
            (by_target.get(r.get("target")) or by_target.setdefault(r.get("target"), HistTally())).add(r)
        kind = failure_kind(r)
        if kind is not None:
            (self.new if kind.endswith("_new") else self.known).add(r)
        if status == _UNSUPPORTED:
            u = self.unsupported.setdefault((r.get("target"), r.get("reason", "")), [0, []])
            u[0] += 1
            if len(u[1]) < 8:
                u[1].append(r.get("case_id"))
        for field, into in (("waiver_expired", self.expired), ("waiver_unneeded", self.unneeded)):
            if r.get(field):
                into.append({"waiver": r[field], "case_id": r.get("case_id"), "target": r.get("target")})


def build_html(rows: Iterable[dict], run_info: dict | None = None, certificate: dict | None = None) -> str:
    """index.html of ``rows`` (one pass)."""
    summary, page = Summary(), Page()
    for r in rows:
        summary.add(r)
        page.add(r)
    return render(page, summary.table(), summary.pair_table(), run_info, certificate)


_SECTIONS = (("new-section", "new failures"), ("matrix-section", "matrix"), ("summary-section", "summary"),
             ("cross-section", "devices"), ("causes-section", "causes"), ("histograms-section", "histograms"),
             ("latency-section", "latency"),
             ("known-section", "known failures"), ("unsupported-section", "unsupported"), ("run-section", "run"))


def render(page: Page, table: list[dict], pairs: list[dict], run_info: dict | None = None,
           certificate: dict | None = None, models: tuple[list[dict], list[dict]] | None = None,
           cross: list[dict] | None = None, review: list[dict] | None = None, since: str | None = None,
           history: str | None = None) -> str:
    """The page: ``table`` is the summary (reports.summary.Summary.table), ``pairs`` the same per
    (op, target) (Summary.pair_table: a farm run's table has a row per device, which keyed by
    (op, target) alone would keep only the last device's, a failing one hidden). ``models``: the rows of
    models.csv and layers.csv of a ``--model`` run (suite/models/verdicts.py): a section of their own.
    ``cross``: the cross-device table (reports/crossdevice.py) of a run on several devices.
    ``since``: the section of what is new since the baseline (reports/since.py), first; ``history``: the
    History section (reports/history.py), when earlier runs are beside this one."""
    ops, targets = list(page.ops), list(page.targets)
    s = {(r["op"], r["target"]): r for r in pairs}
    tot = totals(pairs)

    parts: list[str] = []
    run_id = (run_info or {}).get("run_id") or page.run_id or "?"
    parts.append(f"<h1>qconform report &mdash; run {_e(run_id)}</h1>")
    word, line = verdict(tot, run_info, certificate)
    parts.append(f'<div class="verdict {word}" id="verdict">{word}: {_e(line)}</div>')
    if machines(run_info):   # where it ran: the host's and each device's ISA (what the runtimes dispatch on)
        parts.append('<p class="muted" id="machines">' + "<br>".join(_e(m) for m in machines(run_info)) + "</p>")
    parts.append(f'<p id="counts">{page.rows} results, {len(ops)} ops, {len(targets)} targets: '
                 f'{tot["passed"]} passed, <b>{_n(tot["new"], "new failure")}</b> ({_n(tot["failed_new"], "fail")}, '
                 f'{_n(tot["errors_new"], "error")}), {tot["known"]} known ({_n(tot["findings"], "finding")}, '
                 f'{tot["waived"]} waived), {tot["unsupported"]} unsupported.</p>')
    parts.append('<p class="muted">' + " &middot; ".join(
        f'<a href="#{a}">{_e(name)}</a>' for a, name in _SECTIONS
        if (a != "unsupported-section" or page.unsupported) and (a != "cross-section" or cross))
        + (' &middot; <a href="#models-section">models</a>' if models else "") + "</p>")

    # ---- alerts
    if run_info is None:
        parts.append('<div class="alert" id="alert-interrupted">No run.json: this report was rebuilt from '
                     'results.jsonl alone (the run may have been interrupted before it started writing it).</div>')
    elif not run_info.get("finished"):
        parts.append('<div class="alert" id="alert-interrupted">This run did not finish (interrupted or still '
                     'running): the tables show the results written so far.</div>')
    elif run_info.get("interrupted") or run_info.get("exit_status") == 2:
        parts.append(f'<div class="alert" id="alert-interrupted">This run was interrupted (pytest exit status '
                     f'{_e(run_info.get("exit_status"))}): the tables show the results written before it stopped.</div>')
    if page.expired or page.unneeded:
        items = [f"<li>EXPIRED waiver {_e(r['waiver'])}: {_e(r['case_id'])} on {_e(r['target'])} "
                 f"fails again</li>" for r in page.expired]
        items += [f"<li>waiver {_e(r['waiver'])} is no longer needed: {_e(r['case_id'])} on "
                  f"{_e(r['target'])} now passes</li>" for r in page.unneeded]
        parts.append(f'<div class="alert" id="alert-waivers"><b>Waivers need attention</b><ul>{"".join(items)}</ul></div>')
    if certificate:
        for p in certificate.get("waiver_problems", []):
            parts.append(f'<div class="alert">certificate: {_e(p)}</div>')

    parts.append(since or since_section(None))   # ---- new since the baseline, or that there is none (#22)
    # ---- new failures: what fails the run, each with its reproduction
    # (with a baseline, "new" is the section above's: these are the unexplained ones, new or still failing)
    parts.append('<h2 id="new-section">' + ("New failures" if since is None else
                                            "Failures no known finding explains (new and still failing)") + "</h2>")
    new = page.new.first()
    if new:
        parts.append("<p>Failures and errors that no known finding (suite/core/findings.toml) or waiver explains: "
                     "unexplained mismatches first, then by max |error|.</p>")
        head = "".join(f"<th>{c}</th>" for c in ("case", "target", "status", "max |err|", "worst element",
                                                 "cause"))
        rows = []
        for r in new:
            off = (f"{fmt(r.get('max_abs_lsb'))} LSB; {r.get('mismatches')}/{r.get('elements')} off"
                   if r.get("max_abs_lsb") is not None else "")
            if r.get("status") == Status.FAIL.value:
                why = (f"<b>{_e(r.get('worst_cause') or '')}</b>" + (f'<br><span class="muted">all: '
                       f'{_e(_causes_text(r))}</span>' if r.get("causes") else ""))
            else:
                why = _e(r.get("reason", ""))
            if witness.row_text(r):   # (reports/witness.py)
                why += f'<br><span class="muted">witnesses: {_e(witness.row_text(r))}</span>'
            rows.append(f"<tr><td class=\"id\">{_e(r.get('case_id'))}</td><td>{_e(r.get('target'))}</td>"
                        f"<td>{_e(r.get('status'))}</td><td>{_e(off)}</td><td>{_e(worst_text(r))}</td>"
                        f'<td class="why"><div>{why}</div></td></tr><tr class="repro"><td colspan="6">{_repro(r)}</td></tr>')
        parts.append(f'<div class="box"><table class="full" id="new-failures"><thead><tr>{head}</tr></thead>'
                     f'<tbody>{"".join(rows)}</tbody></table></div>')
        if page.new.n > len(new):
            parts.append(f"<p>{page.new.n - len(new)} more new failures are not listed (the first {len(new)} are): "
                         f"results.jsonl and results.parquet hold them all.</p>")
    else:
        known = f"; the {tot['known']} known ones are listed below" if tot["known"] else ""
        parts.append(f"<p>No new failures{known}.</p>")
    whole = [r for r in pairs if r.get("group_failure")]   # reports.causes.judge_group
    if whole:
        parts.append('<p id="whole">(op, target)s failing as a whole (bias, declared scheme):</p><ul>' + "".join(
            f"<li><b>{_e(r['op'])} on {_e(r['target'])}</b>: {_e(r['group_failure'])}</li>" for r in whole) + "</ul>")
    unjudged = [r for r in pairs if r.get("group_incomplete")]   # an incomplete run: no group verdict
    if unjudged:
        parts.append('<p id="whole-incomplete">(op, target)s not judged as a whole (the run is incomplete):</p><ul>'
                     + "".join(f"<li><b>{_e(r['op'])} on {_e(r['target'])}</b>: {_e(r['group_incomplete'])}</li>"
                               for r in unjudged) + "</ul>")

    # ---- matrix
    parts.append('<h2 id="matrix-section">Op x target matrix</h2>')
    parts.append('<p class="legend">Cell: bit-exact % of the elements compared, passed/cases, new and known '
                 'failures.' + "".join(f'<span class="sw" style="background:{c}"></span>{_e(text)}'
                                        for _, c, text in CELLS) + "</p>")
    colour = {k: c for k, c, _ in CELLS}
    hdr = "".join(f"<th>{_e(x)}</th>" for x in targets)
    mrows = []
    for op in ops:
        cells = []
        for tg in targets:
            r = s.get((op, tg))
            if r is None:
                cells.append('<td class="cell" style="background:#fff">&nbsp;</td>')
                continue
            pct, state = _number(r.get("bit_exact_pct")), _state(r)
            n_new = int(r.get("failed_new") or 0) + int(r.get("errors_new") or 0)
            n_known = int(r.get("failed_known") or 0) + int(r.get("errors_known") or 0)
            mark = {"new": "&#10008;", "known": "&#10033;", "nodata": "&ndash;"}.get(state, "&#10004;")
            label = "unsupported" if pct is None else f"{fmt(pct)}%"
            more = (f" &middot; {n_new} new" if n_new else "") + (f" &middot; {n_known} known" if n_known else "")
            more += " &middot; as a whole" if state in ("new", "known") and not (n_new or n_known) else ""
            title = "; ".join(filter(None, [f"{op} on {tg}", r.get("findings"), r.get("group_failure"),
                                            r.get("group_known")]))
            cells.append(f'<td class="cell {state}" data-v="{"" if pct is None else pct}" '
                         f'style="background:{colour[state]}" title="{_e(title)}">{mark} {label}<br>'
                         f'<small>{r.get("passed")}/{r.get("cases")}{more}</small></td>')
        mrows.append(f"<tr><td>{_e(op)}</td>{''.join(cells)}</tr>")
    parts.append(f'<div class="wide"><table class="sortable" id="matrix"><thead><tr><th>op</th>{hdr}</tr></thead>'
                 f'<tbody>{"".join(mrows)}</tbody></table></div>')

    # ---- summary
    parts.append('<h2 id="summary-section">Summary per op and target</h2>')
    if table:
        cols = list(table[0])
        numeric = {c for c in cols if c not in ("op", "target", "device", "best_scheme", "findings")}
        nan = float("nan")   # an empty cell shows "-", as in summary.md
        parts.append('<div class="box wide">' + _table(cols, [[nan if r[c] is None else r[c] for c in cols]
                                                              for r in table], "summary", numeric) + "</div>")
    else:
        parts.append("<p>(no results)</p>")
    if any(r.get("p50_emulated_us") is not None for r in table):
        parts.append('<p class="note" id="emulated-note">p50_emulated_us: latencies on an emulated device (QEMU on '
                     'this host), not the board\'s; never in p50_latency_us, the latency chart or a diff.</p>')

    # ---- devices
    if review:   # ---- golden values no runtime reproduces (reports/witness.py)
        parts.append(f'<h2 id="review-section">Golden values for review</h2><p>{len(review)} cases that two '
                     f'runtimes or more ran, none of them bit-exact with the golden:</p>'
                     + _table(list(review[0]), [list(r.values()) for r in review], id_="review"))
    if cross:
        parts.append('<h2 id="cross-section">Same cases on other devices: outputs that differ bit-wise</h2>')
        parts.append('<p class="muted">differ: cases whose outputs are not bit-identical across the devices, of '
                     'compared; worst_delta_lsb: the worst case\'s max |difference| between devices (lo..hi where '
                     'the golden bounds it); status_differs: cases with another status on another device.</p>')
        cols = list(cross[0])
        parts.append('<div class="box wide">' + _table(cols, [[r[c] for c in cols] for r in cross], "cross",
                                                       {"compared", "differ", "status_differs"}) + "</div>")

    # ---- causes
    parts.append('<h2 id="causes-section">Mismatch causes</h2>')
    parts.append("<p>Every mismatching element is labelled: " + "; ".join(
        f"<b>{c}</b>: {_e(CAUSE_TEXT[c])}" for c in CAUSES) + ". (op, target)s with new failures come first, "
        "then the most unexplained elements: a kernel team looks at those before anything else.</p>")
    crow = []   # (#24: new failures first; the clamp column)
    shown = ["unexplained", "clamp", "saturation", "scheme", "tie"]
    for (op, t), r in s.items():
        counts = {c: int(r.get(f"cause_{c}") or 0) for c in CAUSES}
        if sum(counts.values()):
            new = int(r.get("failed_new") or 0) + int(r.get("errors_new") or 0)
            crow.append([op, t, new, *(counts[c] for c in shown), sum(counts.values()), r.get("best_scheme"),
                         r.get("best_scheme_exact_pct")])
    crow.sort(key=lambda x: (-x[2], -x[3], -x[8]))
    if crow:
        cols = ["op", "target", "new_failures", *shown, "mismatches", "best_scheme", "best_scheme_exact_pct"]
        parts.append('<div class="box wide">' + _table(cols, crow, "causes", set(cols[2:9] + ["best_scheme_exact_pct"]))
                     + "</div>")
        parts.append(_img(plots.causes_svg([f"{x[0]} @ {x[1]}" for x in crow],
                                           {c: [x[3 + i] for x in crow] for i, c in enumerate(shown)}),
                          "mismatch causes", "causes-plot"))
    else:
        parts.append("<p>No mismatching elements.</p>")

    # ---- histograms
    parts.append('<h2 id="histograms-section">Error histograms per op (LSB)</h2>')
    hists, exact_ops = {}, []
    for op in ops:
        h = {t: tally.hist() for t, tally in page.hists.get(op, {}).items()}
        h = {t: v for t, v in h.items() if v}
        if h and all(set(v) <= {"0"} for v in h.values()):
            exact_ops.append(op)   # every target bit-exact: a one-bar chart says nothing
        elif h:
            hists[op] = h
    if hists:   # one chart of small multiples: one panel per op
        parts.append(_img(plots.histograms_svg(hists, targets, hist_key_order),
                          f"error histograms: {', '.join(hists)}", "histograms-plot", "histogram"))
    else:
        parts.append("<p>No mismatching outputs.</p>")
    if exact_ops:
        parts.append(f"<p>Every compared output bit-exact on every target (no histogram): "
                     f"{_e(', '.join(exact_ops))}.</p>")

    # ---- latency
    parts.append('<h2 id="latency-section">Latency per op and target</h2>')
    p50 = {k: (None if v.get("p50_latency_us") is None or (isinstance(v.get("p50_latency_us"), float)
                                                           and math.isnan(v["p50_latency_us"]))
               else float(v["p50_latency_us"])) for k, v in s.items()}
    if any(v for v in p50.values()):
        parts.append(_img(plots.latency_svg(ops, targets, p50), "latency chart", "latency-plot"))
        lat_rows = [[op] + [p50.get((op, t)) for t in targets] for op in ops]
        parts.append(_table(["op"] + [f"{t} p50 µs" for t in targets], lat_rows, "latency",
                            {f"{t} p50 µs" for t in targets}))
    else:
        parts.append("<p>No latency samples.</p>")

    # ---- known failures
    parts.append('<h2 id="known-section">Known failures (findings and waivers)</h2>')
    known = page.known.first()
    if known:
        frows = [[f'<span class="nw">{_e(r.get("case_id"))}</span>', r.get("target"), r.get("status"),
                  r.get("finding") or r.get("waiver"), _why(r), r.get("max_abs_lsb"), r.get("mismatches"), r.get("elements"),
                  f'<div class="worst">{_e(worst_text(r))}</div>', _causes_text(r),
                  _cmd(r["repro"]) if r.get("repro") else ""] for r in known]
        cols = ["case", "target", "status", "finding or waiver", "why", "max_abs_lsb", "mismatches", "elements",
                "worst element", "causes", "reproduce"]
        parts.append('<div class="box">' + _table(cols, frows, "known-failures", {"max_abs_lsb", "mismatches",
                                                                                  "elements"},
                                                  {"case", "why", "worst element", "reproduce"}) + "</div>")
        if page.known.n > len(known):
            parts.append(f'<p id="known-more">{page.known.n - len(known)} more known failures are not listed '
                         f'(the first {len(known)} are): results.jsonl and results.parquet hold them all.</p>')
    else:
        parts.append("<p>No known failures.</p>")

    # ---- unsupported
    if page.unsupported:
        parts.append('<h2 id="unsupported-section">Unsupported</h2>')
        urows = [[t, count, why, ", ".join(ids) + (" ..." if count > 8 else "")]
                 for (t, why), (count, ids) in sorted(page.unsupported.items(), key=lambda kv: -kv[1][0])]
        parts.append(_table(["target", "cases", "reason", "cases (first 8)"], urows, "unsupported", {"cases"}))

    # ---- models (a --model run)
    if models:
        parts.append(_models_section(*models))

    # ---- certificate
    if certificate:
        parts.append('<h2 id="certificate-section">Certificate</h2>')
        crow2 = [[o.get("target"), o.get("spec"), o.get("op"), o.get("verdict"), o.get("reason") or "-",
                  o.get("counts", {}).get("cases"), o.get("counts", {}).get("failed"), o.get("case_digest")]
                 for o in certificate.get("ops", [])]
        parts.append(_table(["target", "spec", "op", "verdict", "why", "cases", "failed", "case set digest"], crow2,
                            "certificate", {"cases", "failed"}))

    # ---- run facts
    if history:   # ---- earlier runs of the same case set (reports/history.py, #22)
        parts.append(history)
    parts.append('<h2 id="run-section">Run</h2>')
    if run_info:
        facts = [["suite", run_info.get("suite_version")],
                 ["git commit", (f"{(run_info.get('git') or {}).get('commit')}"
                                 f"{' (dirty)' if (run_info.get('git') or {}).get('dirty') else ''}")],
                 ["started / finished", f"{run_info.get('started')} / {run_info.get('finished')}"],
                 ["options", json.dumps(run_info.get("options"), sort_keys=True)],
                 ["host", json.dumps(run_info.get("host"), sort_keys=True)]]
        for t, info in (run_info.get("targets") or {}).items():
            facts.append([f"target {t}", json.dumps(info.get("versions"), sort_keys=True)
                          + (f" devices: {json.dumps(info.get('devices'))}" if info.get("devices") else "")])
        for t, why in (run_info.get("unavailable_targets") or {}).items():
            facts.append([f"target {t}", f"unavailable: {why}"])
        if run_info.get("cost"):
            facts.append(["cost", json.dumps(run_info["cost"], sort_keys=True)])
        parts.append(_table(["what", "value"], facts, "run"))
    else:
        parts.append("<p>No run.json.</p>")

    body = "\n".join(parts)
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width,initial-scale=1">'
            f"<title>qconform report {_e(run_id)}</title><style>{_CSS}</style></head>\n"
            f"<body>\n{body}\n<script>{_JS}</script>\n</body></html>\n")


def _models_section(model_rows: list[dict], layer_rows: list[dict]) -> str:
    """Per model: models.csv's rows and a plot of each target's error per layer, its first
    divergent layer marked (accumulated error where the target ran the whole model, else the
    layer case's own)."""
    out = ['<h2 id="models-section">Models: error per layer</h2>',
           ("<p>Each layer against the golden chain (the graph golden from the model's inputs) where the target "
           "ran the whole model, else its harvested case's own verdict; layers.csv and models.csv in the run "
           "folder hold every value.</p>")]
    cols = ["model", "target", "verdict", "layers_checked", "layers_total", "layers", "layers_exact",
            "first_divergent_layer", "first_divergent_node", "output_max_abs_lsb", "inputs", "whole_model",
            "output_status", "finding", "verdict_reason"]   # (#24, #29: coverage is part of the verdict)
    out.append('<div class="box wide">' + _table(cols, [[r.get(c) for c in cols] for r in model_rows], "models",
                                                 {"layers", "layers_exact", "layers_checked", "layers_total"})
               + "</div>")
    shown = set()
    for r in model_rows:   # each layer not checked, with its reason (the same list once per model)
        entries = model_text.not_checked(r)
        key = (r.get("model"), tuple(entries))
        if not entries or key in shown:
            continue
        shown.add(key)
        targets = [x.get("target") for x in model_rows if (x.get("model"), tuple(model_text.not_checked(x))) == key]
        out.append(f'<details class="not-checked"><summary>{len(entries)} layers of {_e(r.get("model"))} not checked '
                   f'on {_e(", ".join(targets))}</summary><ul>'
                   + "".join(f"<li>{_e(e)}</li>" for e in entries) + "</ul></details>")
    for model in dict.fromkeys(r["model"] for r in layer_rows):
        rows = [r for r in layer_rows if r["model"] == model]
        layers = list(dict.fromkeys(int(r["layer"]) for r in rows))
        errors: dict[str, list] = {}
        for t in dict.fromkeys(r["target"] for r in rows):
            by = {int(r["layer"]): r for r in rows if r["target"] == t}
            errors[t] = [_float(_layer_error(by[k])) if k in by else None for k in layers]
        first = {r["target"]: int(r["first_divergent_layer"]) for r in model_rows
                 if r["model"] == model and str(r.get("first_divergent_layer", "")).strip() != ""}
        out.append(_img(plots.layers_svg(model, layers, errors, first), f"error per layer of {model}",
                        cls="model-layers"))
    return "".join(out)


def _layer_error(r: dict):
    return r.get("accumulated_max_abs_lsb") if r.get("source") == "model" else r.get("max_abs_lsb")


def _float(v):
    try:
        return float(v) if str(v).strip() != "" else None
    except (TypeError, ValueError):
        return None
