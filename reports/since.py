"""What is new since the baseline (``pytest --baseline=RUN``): the first section of index.html and
summary.md. Made of reports.diff's comparison of the run with the baseline (no latency: that is
``qconform diff``'s): new failures, new group verdicts and what is fixed first, then what still
fails. Without a baseline the section says so: "new" elsewhere in the report then means "not
explained by a known finding", not "new since an earlier run"."""

from __future__ import annotations

import html
from typing import Any

CAP = 200   # rows of each table shown (diff.json of qconform diff has them all)
NO_BASELINE = ("No baseline given (pytest --baseline=RUN, or qconform diff): \"new\" in this report means "
               "not explained by a known finding, not new since an earlier run.")


def rows(d) -> tuple[list[list[str]], list[list[str]]]:
    """(new since the baseline, still failing): [what, case or (op, target), target, detail] each;
    new failures and new group verdicts first, then other regressions, then what was fixed."""
    new: list[list[str]] = []
    new += [["new failure", c["case"], c["target"], "; ".join(c["what"])] for c in d.cases if c["new_failure"]]
    new += [["new group verdict", v["label"], v["target"], v["text"]] for v in d.verdicts.get("new", [])]
    new += [["regressed", c["case"], c["target"], "; ".join(c["what"])] for c in d.cases if not c["new_failure"]]
    new += [["fixed", c["case"], c["target"], "; ".join(c["what"])] for c in d.improved
            if any(w.startswith("fixed") for w in c["what"])]
    new += [["fixed group verdict", v["label"], v["target"], f"{v['text']} (now: {v['now']})"]
            for v in d.verdicts.get("fixed", [])]
    still = [["still failing", c["case"], c["target"], f"{c['status_before']} -> {c['status_now']}"] for c in d.still]
    still += [["still-failing group verdict", v["label"], v["target"], v["text"]] for v in d.verdicts.get("still", [])]
    return new, still


def headline(d) -> str:
    """"since baseline X: 1 new failure, 1 new group verdict, 2 fixed; 3 still failing"."""
    if d.refused:
        return f"since baseline {d.baseline}: NOT COMPARABLE: {d.refused}"
    new, still = rows(d)
    count = {k: sum(1 for r in new if r[0] == k) for k in ("new failure", "new group verdict", "regressed")}
    fixed = sum(1 for r in new if r[0].startswith("fixed"))
    return (f"since baseline {d.baseline}: {count['new failure']} new failures, {count['new group verdict']} new group "
            f"verdicts, {count['regressed']} other regressed cases, {fixed} fixed; {len(still)} still failing")


def _setup(d) -> list[str]:
    out = [str(x) + ("" if x.allowed else " (refused)") for x in d.setup]
    return out + list(d.notes)


def html_section(d: Any, error: str | None = None) -> str:
    """The section's HTML (``d``: a reports.diff.Diff, or None without a baseline; ``error``: why the
    baseline could not be read)."""
    e = html.escape
    out = ['<h2 id="since-section">New since the baseline</h2>']
    if error:
        return "".join(out) + f'<div class="alert" id="since-error">The baseline could not be compared: {e(error)}</div>'
    if d is None:
        return "".join(out) + f'<p id="since-none">{e(NO_BASELINE)}</p>'
    out.append(f'<p id="since-head"><b>{e(headline(d))}</b></p>')
    extra = _setup(d)
    if extra:
        out.append("<ul>" + "".join(f"<li>{e(x)}</li>" for x in extra) + "</ul>")
    if d.refused:
        out.append("<p>Only a run of the same case set (seed, ops, cases per op, case files, model) compares.</p>")
        return "".join(out)
    new, still = rows(d)
    for id_, title, rs in (("since-new", "New since the baseline", new), ("since-still", "Still failing", still)):
        if not rs:
            out.append(f'<p id="{id_}-none">{e(title)}: none.</p>')
            continue
        body = "".join("<tr>" + "".join(f"<td>{e(str(v))}</td>" for v in r) + "</tr>" for r in rs[:CAP])
        out.append(f'<p>{e(title)} ({len(rs)}):</p><div class="box"><table class="full" id="{id_}"><thead><tr>'
                   "<th>what</th><th>case or group</th><th>target</th><th>detail</th></tr></thead>"
                   f"<tbody>{body}</tbody></table></div>")
        if len(rs) > CAP:
            out.append(f"<p>{len(rs) - CAP} more: qconform diff BASELINE RUN lists them all.</p>")
    return "".join(out)


def markdown_section(d: Any, error: str | None = None) -> str:
    """The same for summary.md."""
    out = ["## New since the baseline\n"]
    if error:
        return out[0] + f"\nThe baseline could not be compared: {error}\n"
    if d is None:
        return out[0] + f"\n{NO_BASELINE}\n"
    out.append(f"**{headline(d)}**\n")
    out += [f"- {x}" for x in _setup(d)]
    if d.refused:
        return "\n".join(out) + "\n"
    new, still = rows(d)
    for title, rs in (("New since the baseline", new), ("Still failing", still)):
        out.append(f"\n{title} ({len(rs)}){':' if rs else '.'}\n")
        if rs:
            out.append("| what | case or group | target | detail |\n|---|---|---|---|")
            out += ["| " + " | ".join(str(v).replace("|", "\\|") for v in r) + " |" for r in rs[:CAP]]
    return "\n".join(out) + "\n"
