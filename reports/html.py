"""``index.html``: a self-contained report of one run (no network needed to open it).

Built from results.jsonl alone (plus run.json and certificate.json when present), so
``qconform report RUN_DIR`` rebuilds it for any run, interrupted ones included. The rows
stream through :class:`Page` (what the page shows beyond the summary: counts, error
histograms, the failing cases, at most :data:`FAILING_CAP` of them, the unsupported ones
grouped by reason) and a :class:`reports.summary.Summary`; :func:`render` makes the page.
Sections, in order: alerts (interrupted run, waiver problems), the op x target matrix
(coloured by bit-exact %, failures outlined), the summary table, mismatch causes
(unexplained first), per-op error histograms in LSB, latency per op and target,
failing cases with their reproduction commands, unsupported cases, the run's facts.
Charts are SVGs written as text by plots.py (no plotting library), embedded as data URIs; tables sort by clicking a header.
"""

from __future__ import annotations

import base64
import html
import json
import math
from collections.abc import Iterable
from typing import Any

from reports import plots
from reports.causes import CAUSE_TEXT, CAUSES, HistTally, hist_key_order
from reports.summary import Summary, fmt
from suite.core.verdict import ERRORS, Status

INDEX = "index.html"
#: the failing-cases table lists at most this many (unexplained first, then by max |error|)
FAILING_CAP = 2000
_PASS, _WAIVED, _UNSUPPORTED = Status.PASS.value, Status.WAIVED.value, Status.UNSUPPORTED.value
BAD = frozenset({Status.FAIL.value} | {s.value for s in ERRORS})
_FAILING_FIELDS = ("case_id", "target", "status", "max_abs_lsb", "mismatches", "elements", "causes",
                   "first_output", "first_index", "got", "want", "reason", "repro", "failure_file")

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.2em 2em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f2f2f2}table.sortable th{cursor:pointer}table.sortable th:hover{background:#e4e4e4}
td.num{text-align:right;font-variant-numeric:tabular-nums}
td.cell{text-align:center;min-width:6em}td.cell.failing{outline:3px solid #000;outline-offset:-3px;font-weight:bold}
.alert{background:#fdecea;border:2px solid #c0392b;padding:.6em 1em;margin:.6em 0}
.note{background:#fff8e1;border:1px solid #f1c40f;padding:.5em 1em;margin:.6em 0}
code{font-size:12px;background:#f6f6f6;padding:1px 3px;word-break:break-all}
img{max-width:100%;border:1px solid #eee;margin:4px}
.muted{color:#777}.wide{overflow-x:auto}.wide td{white-space:nowrap}
"""

_JS = """
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


def _cell_color(pct: float | None, failed: int, ran: int) -> str:
    if pct is None:
        return "#eeeeee"
    if pct >= 100.0:
        return "#a9dfbf"
    if failed:
        return "#f5b7b1" if pct >= 99 else "#ec7063"
    return "#f9e79f" if pct >= 99 else "#f8c471"


def _failing_order(r: dict):
    return (-int((r.get("causes") or {}).get("unexplained", 0) > 0), r.get("status") == _WAIVED,
            -(r.get("max_abs_lsb") or 0), r.get("case_id") or "")


class Page:
    """What index.html shows of the rows beyond the summary, taken one row at a time."""

    def __init__(self):
        self.rows = 0
        self.statuses: dict[Any, int] = {}
        self.run_id = None                                   # the first row's that has one
        self.ops: dict[str, None] = {}                       # in the order of first rows
        self.targets: dict[str, None] = {}
        self.hists: dict[str, dict[str, HistTally]] = {}     # op -> target -> error histogram
        self.failing: list[dict] = []                        # the FAILING_CAP first by _failing_order
        self.n_failing = 0
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
        if status in BAD or status == _WAIVED:
            self.n_failing += 1
            self.failing.append({k: r[k] for k in _FAILING_FIELDS if k in r})
            if len(self.failing) >= 2 * FAILING_CAP:   # sort is stable: the same as sorting them all at the end
                self.failing.sort(key=_failing_order)
                del self.failing[FAILING_CAP:]
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


def render(page: Page, table: list[dict], pairs: list[dict], run_info: dict | None = None,
           certificate: dict | None = None) -> str:
    """The page: ``table`` is the summary (reports.summary.Summary.table), ``pairs`` the same per
    (op, target) (Summary.pair_table: a farm run's table has a row per device, which keyed by
    (op, target) alone would keep only the last device's, a failing one hidden)."""
    ops, targets = list(page.ops), list(page.targets)
    s = {(r["op"], r["target"]): r for r in pairs}
    n = page.statuses.get

    parts: list[str] = []
    run_id = (run_info or {}).get("run_id") or page.run_id or "?"
    parts.append(f"<h1>qconform report &mdash; run {_e(run_id)}</h1>")
    n_bad = sum(c for st, c in page.statuses.items() if st in BAD)
    parts.append(f'<p>{page.rows} results, {len(ops)} ops, {len(targets)} targets: '
                 f'{n(_PASS, 0)} passed, {n_bad} failed or errored, '
                 f'{n(_WAIVED, 0)} waived, '
                 f'{n(_UNSUPPORTED, 0)} unsupported.</p>')

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

    # ---- matrix
    parts.append('<h2 id="matrix-section">Op x target matrix</h2>')
    parts.append('<p class="muted">Cell: bit-exact % of elements, passed/cases; green: every element exact; '
                 'yellow: within tolerance; red: failing cases (outlined).</p>')
    hdr = "".join(f"<th>{_e(t)}</th>" for t in targets)
    mrows = []
    for op in ops:
        cells = []
        for t in targets:
            r = s.get((op, t))
            if r is None:
                cells.append('<td class="cell" style="background:#fff">&nbsp;</td>')
                continue
            pct = r.get("bit_exact_pct")
            pct = None if pct is None or (isinstance(pct, float) and math.isnan(pct)) else float(pct)
            failed = int(r.get("failed") or 0) + int(r.get("errors") or 0)
            ran = int(r.get("cases") or 0) - int(r.get("unsupported") or 0)
            mark = "&#10004;" if not failed and ran else ("&#10008;" if failed else "&ndash;")
            label = "unsupported" if pct is None else f"{fmt(pct)}%"
            cls = "cell failing" if failed else "cell"
            cells.append(f'<td class="{cls}" data-v="{"" if pct is None else pct}" '
                         f'style="background:{_cell_color(pct, failed, ran)}" '
                         f'title="{_e(op)} on {_e(t)}">{mark} {label}<br><small>{r.get("passed")}/{r.get("cases")}'
                         f'{f" &middot; {failed} failed" if failed else ""}</small></td>')
        mrows.append(f"<tr><td>{_e(op)}</td>{''.join(cells)}</tr>")
    parts.append(f'<table class="sortable" id="matrix"><thead><tr><th>op</th>{hdr}</tr></thead>'
                 f'<tbody>{"".join(mrows)}</tbody></table>')
    if ops and targets:
        pct = {k: (None if v.get("bit_exact_pct") is None or (isinstance(v.get("bit_exact_pct"), float)
                                                           and math.isnan(v["bit_exact_pct"]))
                   else float(v["bit_exact_pct"])) for k, v in s.items()}
        failed = {k: int(v.get("failed") or 0) + int(v.get("errors") or 0) for k, v in s.items()}
        parts.append(_img(plots.matrix_svg(ops, targets, pct, failed), "bit-exact matrix", "matrix-plot"))

    # ---- summary
    parts.append('<h2 id="summary-section">Summary per op and target</h2>')
    if table:
        cols = list(table[0])
        numeric = {c for c in cols if c not in ("op", "target", "device", "best_scheme", "findings")}
        nan = float("nan")   # an empty cell shows "-", as in summary.md
        parts.append('<div class="wide">' + _table(cols, [[nan if r[c] is None else r[c] for c in cols]
                                                          for r in table], "summary", numeric) + "</div>")
    else:
        parts.append("<p>(no results)</p>")

    # ---- causes
    parts.append('<h2 id="causes-section">Mismatch causes</h2>')
    parts.append("<p>Every mismatching element is labelled: " + "; ".join(
        f"<b>{c}</b>: {_e(CAUSE_TEXT[c])}" for c in CAUSES) + ". Unexplained ones come first: a kernel team "
        "looks at those before anything else.</p>")
    crow = []
    for (op, t), r in s.items():
        counts = {c: int(r.get(f"cause_{c}") or 0) for c in CAUSES}
        if sum(counts.values()):
            crow.append([op, t, counts["unexplained"], counts["saturation"], counts["scheme"], counts["tie"],
                         sum(counts.values()), r.get("best_scheme"), r.get("best_scheme_exact_pct")])
    crow.sort(key=lambda x: (-x[2], -x[6]))
    if crow:
        cols = ["op", "target", "unexplained", "saturation", "scheme", "tie", "mismatches", "best_scheme",
                "best_scheme_exact_pct"]
        parts.append(_table(cols, crow, "causes", set(cols[2:7] + ["best_scheme_exact_pct"])))
        parts.append(_img(plots.causes_svg([f"{x[0]} @ {x[1]}" for x in crow],
                                           {c: [x[2 + i] for x in crow] for i, c in
                                            enumerate(["unexplained", "saturation", "scheme", "tie"])}),
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

    # ---- failing cases
    parts.append('<h2 id="failures-section">Failing cases</h2>')
    bad = sorted(page.failing, key=_failing_order)[:FAILING_CAP]
    if bad:
        frows = []
        for r in bad:
            causes = ", ".join(f"{k} {v}" for k, v in (r.get("causes") or {}).items())
            first = ""
            if r.get("first_index") is not None:
                first = f"out {r.get('first_output')} {r.get('first_index')}: got {r.get('got')}, want {r.get('want')}"
            repro = f"<code>{_e(r.get('repro', ''))}</code>"
            if r.get("failure_file"):
                repro += (f"<br><span class=muted>smallest failing input:</span> <code>qconform shrink "
                          f"{_e(r['failure_file'])} --target {_e(r['target'])}</code>")
            frows.append([r.get("case_id"), r.get("target"), r.get("status"), r.get("max_abs_lsb"),
                          r.get("mismatches"), r.get("elements"), causes, first, r.get("reason", ""), repro])
        cols = ["case", "target", "status", "max_abs_lsb", "mismatches", "elements", "causes", "first mismatch",
                "reason", "reproduce"]
        parts.append(_table(cols, frows, "failures", {"max_abs_lsb", "mismatches", "elements"}, {"reproduce"}))
        if page.n_failing > len(bad):
            parts.append(f'<p id="failures-more">{page.n_failing - len(bad)} more failing cases are not listed '
                         f'(the first {len(bad)} are): results.jsonl and results.parquet hold them all.</p>')
    else:
        parts.append("<p>No failing cases.</p>")

    # ---- unsupported
    if page.unsupported:
        parts.append('<h2 id="unsupported-section">Unsupported</h2>')
        urows = [[t, count, why, ", ".join(ids) + (" ..." if count > 8 else "")]
                 for (t, why), (count, ids) in sorted(page.unsupported.items(), key=lambda kv: -kv[1][0])]
        parts.append(_table(["target", "cases", "reason", "cases (first 8)"], urows, "unsupported", {"cases"}))

    # ---- certificate
    if certificate:
        parts.append('<h2 id="certificate-section">Certificate</h2>')
        crow2 = [[o.get("target"), o.get("spec"), o.get("op"), o.get("verdict"), o.get("counts", {}).get("cases"),
                  o.get("counts", {}).get("failed"), o.get("case_digest")] for o in certificate.get("ops", [])]
        parts.append(_table(["target", "spec", "op", "verdict", "cases", "failed", "case set digest"], crow2,
                            "certificate", {"cases", "failed"}))

    # ---- run facts
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
