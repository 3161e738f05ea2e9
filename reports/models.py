"""A ``--model`` run's coverage and verdict as text: the terminal line, summary.md's Models section.

models.csv (suite/models/verdicts.py) holds per (model, target) how many of the model's layers were
checked (``layers_checked`` of ``layers_total``) and each one not checked with its reason
(``not_checked``: ``node: reason`` entries joined by `` | ``); outputs.csv the whole model's output
error over ``--model-inputs N`` inputs. The verdict reads ``PASS on 60 of 61 layers (1 not
covered: CUSTOM ...)``: a model is never PASS on a fraction of itself without each missing layer
named with its reason.
"""

from __future__ import annotations

from suite.core.text import md_cell


def _md(v) -> str:
    return md_cell("" if v is None else str(v))

SEP = " | "
SHOWN = 3   # nodes named per group on the terminal line (summary.md and models.csv name them all)


def not_checked(row: dict) -> list[str]:
    v = row.get("not_checked") or ""
    return [x for x in str(v).split(SEP) if x]


def _groups(entries: list[str]) -> list[tuple[str, str, list[str]]]:
    """(op, reason, nodes) per distinct (op, reason): ``op12:PRELU: why`` entries grouped."""
    out: dict[tuple[str, str], list[str]] = {}
    for e in entries:
        node, _, why = e.partition(": ")   # (a LiteRT node is "op<k>:<OP>"; an ONNX node its name)
        op = node.split(":", 1)[1].split("[", 1)[0] if ":" in node else ""
        out.setdefault((op, why), []).append(node.split(":", 1)[0] if op else node)
    return [(op, why, nodes) for (op, why), nodes in out.items()]


def coverage_text(row: dict, shown: int = SHOWN) -> str:
    """``on 60 of 61 layers (1 not covered: CUSTOM op3: not in the litert-int8 spec table)``."""
    total, checked = row.get("layers_total"), row.get("layers_checked")
    if total in (None, ""):
        return ""
    text = f"on {checked} of {total} layers"
    entries = not_checked(row)
    if entries:
        parts = []
        for op, why, nodes in _groups(entries):
            named = ", ".join(nodes[:shown]) + (f", +{len(nodes) - shown}" if len(nodes) > shown else "")
            parts.append(f"{len(nodes)}{' ' + op if op else ''} ({named}: {why})")
        text += f" ({len(entries)} not covered: " + "; ".join(parts) + ")"
    return text


def markdown_section(model_rows: list[dict] | None, output_rows: list[dict] | None = None) -> str:
    """summary.md's Models section: per (model, target) its verdict on how many layers, and every
    layer not checked with its reason; the whole model's output error over its inputs."""
    if not model_rows:
        return ""
    out = ["## Models: verdict and coverage\n",
           "| model | target | verdict | layers checked | whole model | output max \\|err\\| LSB | reason |",
           "|---|---|---|---|---|---|---|"]
    for r in model_rows:
        out.append("| " + " | ".join(_md(v) for v in (
            r.get("model"), r.get("target"), str(r.get("verdict", "")).upper(),
            f"{r.get('layers_checked')} of {r.get('layers_total')}", r.get("whole_model"),
            r.get("output_max_abs_lsb"), r.get("verdict_reason"))) + " |")
    seen = set()
    for r in model_rows:
        entries = not_checked(r)
        if not entries:
            continue
        key = (r.get("model"), tuple(entries))
        targets = [x.get("target") for x in model_rows if (x.get("model"), tuple(not_checked(x))) == key]
        if key in seen:
            continue
        seen.add(key)
        out.append(f"\n{len(entries)} layers of {_md(r.get('model'))} not checked on {_md(', '.join(targets))}:\n")
        out += [f"- {_md(e)}" for e in entries]
    if output_rows:
        out.append("\n### Whole model outputs against the graph golden (error in LSB over the inputs)\n")
        cols = ["model", "target", "output", "inputs", "elements", "mean_lsb", "mean_abs_lsb", "max_abs_lsb",
                "bit_exact_pct", "histogram"]
        out.append("| " + " | ".join(cols) + " |")
        out.append("|" + "---|" * len(cols))
        out += ["| " + " | ".join(_md(r.get(c)) for c in cols) + " |" for r in output_rows]
    return "\n".join(out) + "\n"
