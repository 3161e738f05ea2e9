"""Per-layer and whole-model verdicts of a ``--model`` run: layers.csv and models.csv.

For a target that runs the whole model (suite/models/runner.py), each layer's output is compared
in LSB with two goldens (reference/graph.py, under the run's scheme):

* its **own error**: the layer's golden on the target's own inputs of that layer (what the layer
  itself got wrong), judged by the run's tolerance policy (``status``);
* its **accumulated error**: the golden chain from the model's inputs (all errors so far).

``first_divergent_layer`` is the first layer whose output differs from the golden chain (before
it the target's inputs were the golden's, so its own error started the divergence). A target that
cannot run the whole model gets the layer cases' own rows (results.jsonl: the harness judged
each harvested case on the harvest's inputs), ``source`` saying which.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from reference.graph import layer_golden, run_graph
from reports.models import SEP, coverage_text
from reports.results import iter_rows
from suite.cases.hunt import params as case_params
from suite.core.findings import brief, match, match_model, why
from suite.core.graph import CASE, Graph
from suite.core.tolerance import Policy

from .runner import can_run, run_model

LAYERS_CSV, MODELS_CSV, OUTPUTS_CSV = "layers.csv", "models.csv", "outputs.csv"
LAYER_COLUMNS = ["model", "layer", "node", "op", "target", "status", "bit_exact_pct", "max_abs_lsb",
                 "accumulated_max_abs_lsb", "source", "case_id", "finding", "reason"]
MODEL_COLUMNS = ["model", "target", "layers", "layers_exact", "first_divergent_layer", "first_divergent_node",
                 "output_max_abs_lsb", "whole_model", "scheme", "first_failing_layer", "output_status", "verdict",
                 "finding", "verdict_reason", "layers_total", "layers_checked", "not_checked", "inputs"]
OUTPUT_COLUMNS = ["model", "target", "output", "inputs", "elements", "mean_lsb", "mean_abs_lsb", "max_abs_lsb",
                  "bit_exact_pct", "histogram"]
#: a layer row's status that means its output was compared with its golden on this target
CHECKED = ("exact", "within-tolerance", "pass", "fail", "known")
HIST_TAIL = 8   # outputs.csv's histogram: one bin per LSB in [-8, 8], the rest in two tail bins


def _diff(got: np.ndarray, want: np.ndarray) -> tuple[float, float]:
    """(bit-exact %, max |error| in LSB); a shape mismatch is (0, inf)."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        if got.size != want.size:
            return 0.0, float("inf")
        got = got.reshape(want.shape)
    e = np.abs(got.astype(np.int64) - want.astype(np.int64))
    return (float((e == 0).mean() * 100) if e.size else 100.0), float(e.max(initial=0))


def to_graph_layout(graph: Graph, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: (v.transpose(graph.layout[k]) if k in graph.layout and v.ndim == 4 else v) for k, v in tensors.items()}


def model_feeds(graph: Graph, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Graph-layout feeds -> the model's (its input names, its layout)."""
    return {graph.model_inputs.get(n, n): (np.ascontiguousarray(feeds[n].transpose(np.argsort(graph.layout[n])))
                                           if n in graph.layout else feeds[n]) for n in graph.inputs}


def whole_model(graph: Graph, target: str, feeds: dict[str, np.ndarray] | list[dict[str, np.ndarray]],
                chain: dict[str, np.ndarray] | None, policy: Policy | None, scheme, versions: dict | None = None,
                options: dict | None = None, timeout: float = 600.0, outputs: list[dict] | None = None):
    """Layer rows of ``target`` running the whole model (None, and why, when it could not), over
    one or several invocations (``feeds`` a list: one set each, in order on one interpreter; a
    layer's row is its worst invocation). Each invocation's golden chain takes the target's own
    values at the cuts (``graph.cuts``: a state read, an op not covered), so each layer after a
    cut is judged on the activations the target really had there. ``outputs``, if given, gets
    one row per model output: its error distribution against the chain over the invocations."""
    sets = feeds if isinstance(feeds, list) else [feeds]
    tensors = list(dict.fromkeys([o for ly in graph.layers for o in ly.outputs] + list(graph.cuts)))
    agg: dict[int, dict] = {}   # by the layer's position (a model's node names may repeat)
    errs: dict[str, dict] = {}

    def each(k: int, got: dict) -> None:   # one invocation: its tensors, then dropped
        fs = sets[k]
        got = {**to_graph_layout(graph, got), **{n: fs[n] for n in graph.inputs}}
        at_cuts = {t: (got[t] if t in got else fs[t]) for t in graph.cuts}
        ch = chain if (k == 0 and chain is not None and not graph.cuts) else run_graph(graph, {**fs, **at_cuts}, scheme)
        got.update({t: v for t, v in at_cuts.items() if t not in got})
        for p, ly in enumerate(graph.layers):
            a = agg.setdefault(p, {"missing": False, "pct": 100.0, "max": 0.0, "acc_pct": 100.0, "acc": 0.0})
            out = ly.outputs[0]
            if out not in got or any(t is not None and t not in got for t in ly.inputs):
                a["missing"] = True
                continue
            own = layer_golden(ly, [None if t is None else got[t] for t in ly.inputs], scheme)[0]
            pct, max_abs = _diff(got[out], own)
            acc_pct, acc = _diff(got[out], ch[out])
            a["pct"], a["max"] = min(a["pct"], pct), max(a["max"], max_abs)
            a["acc_pct"], a["acc"] = min(a["acc_pct"], acc_pct), max(a["acc"], acc)
        for o in graph.outputs:
            if o in got and o in ch and np.asarray(got[o]).size == np.asarray(ch[o]).size:
                _tally(errs.setdefault(o, {"inputs": 0, "n": 0, "sum": 0, "abs": 0, "max": 0, "exact": 0,
                                           "hist": np.zeros(2 * HIST_TAIL + 3, np.int64)}),
                       np.asarray(got[o]).astype(np.int64).reshape(-1) - np.asarray(ch[o]).astype(np.int64).reshape(-1))

    _, why = run_model(graph.path, target, [model_feeds(graph, f) for f in sets], tensors, options, timeout, each)
    if why:
        return None, why
    rows = []
    for p, ly in enumerate(graph.layers):
        a = agg[p]
        row = {"model": graph.name, "layer": ly.index, "node": ly.node, "op": ly.op, "target": target,
               "source": "model", "case_id": ly.case.id if ly.case is not None else ""}
        if a["missing"]:
            rows.append({**row, "status": "missing", "reason": f"{target} did not give the layer's tensors"})
            continue
        out = ly.outputs[0]
        pct, max_abs, acc_pct, acc = a["pct"], a["max"], a["acc_pct"], a["acc"]
        tol = policy.lookup(ly.op, target, graph.specs[out].dtype, versions or {}) if policy is not None else None
        status = "exact" if max_abs == 0 else "fail"
        if status == "fail" and tol is not None and np.isfinite(max_abs) and tol.passes(max_abs, 100.0 - pct):
            status = "within-tolerance"
        if status == "fail" and ly.case is not None:   # a finding's region, of the layer's case (#24)
            f = _layer_finding(ly.case, target, max_abs)
            if f is not None:
                status, row["finding"] = "known", f.id
        rows.append({**row, "status": status, "bit_exact_pct": round(pct, 4), "max_abs_lsb": max_abs,
                     "accumulated_max_abs_lsb": acc,
                     "accumulated_within": acc == 0 or (tol is not None and np.isfinite(acc)
                                                        and tol.passes(acc, 100.0 - acc_pct))})
    if outputs is not None:
        outputs += [output_row(graph.name, target, o, e) for o, e in errs.items()]
    return rows, ""


def _tally(t: dict, e: np.ndarray) -> None:
    """Add one invocation's output error (LSB) to its running tally (memory: one histogram)."""
    t["inputs"] += 1
    t["n"] += int(e.size)
    t["sum"] += int(e.sum())
    t["abs"] += int(np.abs(e).sum())
    t["max"] = max(t["max"], int(np.abs(e).max(initial=0)))
    t["exact"] += int((e == 0).sum())
    t["hist"] += np.bincount(np.clip(e, -HIST_TAIL - 1, HIST_TAIL + 1) + HIST_TAIL + 1, minlength=2 * HIST_TAIL + 3)


def output_row(model: str, target: str, output: str, t: dict) -> dict:
    """One model output's error distribution in LSB against the golden chain over the inputs (as
    TFLite's inference_diff reports it): mean (signed), mean |err|, max |err|, bit-exact share, and
    a histogram ``err:count`` (one bin per LSB in [-8, 8], the tails in ``<-8`` and ``>8``)."""
    n = t["n"]

    def label(i: int) -> str:
        v = i - HIST_TAIL - 1
        return f"<-{HIST_TAIL}" if v < -HIST_TAIL else f">{HIST_TAIL}" if v > HIST_TAIL else str(v)

    return {"model": model, "target": target, "output": output, "inputs": t["inputs"], "elements": n,
            "mean_lsb": round(t["sum"] / n, 6) if n else "", "mean_abs_lsb": round(t["abs"] / n, 6) if n else "",
            "max_abs_lsb": t["max"], "bit_exact_pct": round(t["exact"] / n * 100, 4) if n else "",
            "histogram": " ".join(f"{label(i)}:{int(c)}" for i, c in enumerate(t["hist"]) if c)}


def _layer_finding(case, target: str, max_abs: float):
    """The finding that explains a layer's own failure on ``target``, by the layer case's params (as
    the judge evaluates it for the layer's case: suite/harness/judge.py)."""
    try:
        p = case_params(case)
    except Exception:  # noqa: BLE001 (params it cannot describe: in no region)
        p = {}
    return match(case.op, target, case.variant, "fail", {**p, "max_abs_lsb": max_abs})


def case_rows(graph: Graph, target: str, results: dict[tuple[str, str], dict]) -> list[dict]:
    """Layer rows of ``target`` from the harness's verdicts of the harvested cases."""
    rows = []
    for ly in graph.layers:
        r = results.get((ly.case.id, target)) if ly.kind == CASE else None
        row = {"model": graph.name, "layer": ly.index, "node": ly.node, "op": ly.op, "target": target,
               "source": "case", "case_id": ly.case.id if ly.case is not None else ""}
        if r is None:
            rows.append({**row, "status": "no-case" if ly.kind != CASE else "not-run",
                         "reason": ("a float layer: the golden chain only, no case judges it alone" if ly.kind != CASE
                                    else "its case did not run in this run (--ops, -k, --lf, an interruption)")})
            continue
        rows.append({**row, "status": "known" if r.get("finding") else r.get("status"),
                     "bit_exact_pct": r.get("bit_exact_pct"), "max_abs_lsb": r.get("max_abs_lsb"),
                     "finding": r.get("finding") or "", "reason": r.get("reason") or ""})
    return rows


def coverage(graph: Graph, rows: list[dict]) -> dict:
    """How many of the model's layers (its operators) ``rows`` checked, and each one not checked
    with its reason: the harvest's not-covered operators and the layers whose output this target's
    rows did not compare (a case unsupported on the target, not run, a tensor the runtime did not
    give). An operator made of several layers (SPLIT_V: one SLICE per output) is checked when all are."""
    entries = [e for nodes in graph.not_covered.values() for e in nodes]
    by_op: dict[int, list[dict]] = {}
    for r in rows:
        by_op.setdefault(r["layer"], []).append(r)
    checked = 0
    for k, rs in by_op.items():
        bad = [r for r in rs if r.get("status") not in CHECKED]
        if not bad:
            checked += 1
            continue
        r = bad[0]
        why = f"{r.get('status')}" + (f": {r['reason']}" if r.get("reason") else "")
        entries.append(f"{r['node']}: {why}")
    total = graph.operators or (len(by_op) + sum(len(v) for v in graph.not_covered.values()))
    return {"layers_total": total, "layers_checked": checked,
            "not_checked": SEP.join(e.replace(SEP, " / ") for e in entries)}


def model_row(graph: Graph, target: str, rows: list[dict], whole: str, scheme: str) -> dict:
    """The model's row of models.csv, with its verdict (:func:`model_verdict`) and its coverage
    (:func:`coverage`)."""
    first = next((r for r in rows if (r.get("accumulated_max_abs_lsb") if r["source"] == "model"
                                      else r.get("max_abs_lsb")) not in (None, 0, 0.0)), None)
    failing = next((r for r in rows if r.get("status") in ("fail", "error", "crash", "timeout", "infra")), None)
    outs = [r for r in rows
            if r["source"] == "model" and graph.layers[_pos(graph, r["node"])].outputs[0] in graph.outputs]
    row = {"model": graph.name, "target": target, "layers": len(rows),
           "layers_exact": sum(1 for r in rows if r.get("max_abs_lsb") in (0, 0.0)),
           "first_divergent_layer": "" if first is None else first["layer"],
           "first_divergent_node": "" if first is None else first["node"],
           "output_max_abs_lsb": max((o["accumulated_max_abs_lsb"] for o in outs
                                      if o.get("accumulated_max_abs_lsb") is not None), default=""),
           "whole_model": whole, "scheme": scheme,
           "first_failing_layer": "" if failing is None else failing["layer"],
           "inputs": graph.invocations if any(r["source"] == "model" for r in rows) else "",
           **coverage(graph, rows)}
    v = model_verdict(graph.name, target, rows, outs, whole, failing)
    if v["verdict"] in ("pass", "cases") and not row["layers_checked"]:   # green is earned: nothing checked is no pass
        v = {**v, "verdict": "unchecked", "verdict_reason": f"no layer of the model was checked on {target}"}
    return {**row, **v}


def model_verdict(model: str, target: str, rows: list[dict], outs: list[dict], whole: str, failing) -> dict:
    """A whole model's verdict on a target that ran it (a target that cannot is judged by its cases
    alone: verdict "cases"). ``error``: the whole model did not run (crash, timeout, the runtime's
    error). ``fail``: a layer's own error (the layer's golden on the target's own inputs of it) is
    beyond its tolerance. The output's error along the chain is not judged on its own: where it is
    beyond the output layer's tolerance while every layer is within its own (``output_status``
    "accumulated"), it is what the allowed per-layer differences become through the graph (a model
    amplifies a 1 LSB rounding difference of an early layer), not a defect of any kernel; it is
    shown, and passes. A model finding (findings.toml ``model``) explains an error or a failure."""
    if not outs:
        out_status = ""
    elif all(o.get("accumulated_max_abs_lsb") in (0, 0.0) for o in outs):
        out_status = "exact"
    elif all(o.get("accumulated_within") for o in outs):
        out_status = "within-tolerance"
    else:
        out_status = "fail" if failing is not None else "accumulated"
    ran = whole == "ran" or any(r["source"] == "model" for r in rows)
    if not ran and " runs no whole " in whole:
        return {"output_status": out_status, "verdict": "cases", "finding": "",
                "verdict_reason": "judged by its layers' cases"}
    if not ran:
        status, reason = "model-error", "the whole model did not run"
    elif failing is not None and failing["source"] == "model":
        status, reason = "model-fail", (f"layer {failing['layer']} ({failing['node']}) {failing['max_abs_lsb']:g} LSB "
                                        f"off its own golden, beyond its tolerance")
    else:
        return {"output_status": out_status, "verdict": "pass", "finding": "", "verdict_reason": ""}
    f = match_model(model, target, status)
    return {"output_status": out_status, "verdict": "known" if f else status.removeprefix("model-"),
            "finding": f.id if f else "", "verdict_reason": reason}


def model_lines(model_rows: list[dict]) -> list[tuple[str, bool]]:
    """One terminal line per (model, target), and whether it fails the run."""
    out = []
    for m in model_rows:
        bad = m["verdict"] in ("error", "fail", "unchecked")
        lsb = m["output_max_abs_lsb"]
        cov = coverage_text(m)
        text = (f"model {m['model']} on {m['target']}: {m['verdict'].upper()}" + (f" {cov}" if cov else "")
                + (f" ({m['verdict_reason']})" if m["verdict_reason"] else "")
                + (f" [known finding {m['finding']}: {brief(why(m['finding']) or '')}]" if m["finding"] else "")
                + f"; {m['layers_exact']}/{m['layers']} layers exact, "
                f"first divergent layer {m['first_divergent_layer'] if m['first_divergent_layer'] != '' else '-'}, "
                f"first failing layer {m['first_failing_layer'] if m['first_failing_layer'] != '' else '-'}; "
                f"whole model: {m['whole_model']}"
                + (f" ({m['inputs']} inputs)" if m.get("inputs") not in (None, "", 1) else "")
                + (f", output max |err| {lsb:g} LSB ({m['output_status']})" if lsb != "" else "")
                + (": the run fails" if bad else ""))
        out.append((text, bad))
        out += [(line, False) for line in output_lines(m.get("_outputs") or [])]
    return out


def output_lines(output_rows: list[dict]) -> list[str]:
    """One terminal line per (model, target, output) of a whole-model run over several inputs."""
    return [f"model {o['model']} on {o['target']}: output {o['output']} over {o['inputs']} inputs: mean "
            f"{o['mean_lsb']:+g} LSB, mean |err| {o['mean_abs_lsb']:g}, max |err| {o['max_abs_lsb']} LSB, "
            f"{o['bit_exact_pct']:g}% bit-exact; histogram {o['histogram']}" for o in output_rows if o["elements"]]


def _pos(graph: Graph, node: str) -> int:
    return next(i for i, ly in enumerate(graph.layers) if ly.node == node)


def write_model_reports(folder: str | Path, graph: Graph, feeds: dict[str, np.ndarray], targets: dict,
                        policy: Policy | None, scheme: str, versions=None, timeout: float = 600.0) -> list[dict]:
    """layers.csv and models.csv of a ``--model`` run in ``folder``: each target's whole-model run
    where it can, else its harvested cases' rows (from results.jsonl). Returns models.csv's rows."""
    folder = Path(folder)
    results = {(r.get("case_id"), r.get("target")): r for r in iter_rows(folder)} if (folder / "results.jsonl").exists() else {}
    sets = feeds if isinstance(feeds, list) else [feeds]
    chain = run_graph(graph, sets[0], scheme) if not graph.cuts else None   # (with cuts: each target's own)
    layer_rows, model_rows, output_rows = [], [], []
    for name, t in targets.items():
        whole, rows = "", None
        why_not = can_run(graph.format, name, graph.form)
        if why_not is None:
            opts = dict(getattr(t, "options", {}) or {})
            try:
                rows, why = whole_model(graph, name, sets, chain, policy, scheme, (versions or {}).get(name), opts,
                                        timeout, outputs=output_rows)
            except Exception as e:  # noqa: BLE001 (its row says why; the run's other reports are written)
                rows, why = None, f"{type(e).__name__}: {e}"
            whole = "ran" if rows is not None else (why or "did not run (no reason given)")
        else:
            whole = why_not
        if not rows:
            rows = case_rows(graph, name, results)
        layer_rows += rows
        model_rows.append({**model_row(graph, name, rows, whole, scheme),   # (its outputs' lines: model_lines)
                           "_outputs": [o for o in output_rows if o["target"] == name and graph.invocations > 1]})
    _write_csv(folder / LAYERS_CSV, LAYER_COLUMNS, layer_rows)
    _write_csv(folder / MODELS_CSV, MODEL_COLUMNS, model_rows)
    _write_csv(folder / OUTPUTS_CSV, OUTPUT_COLUMNS, output_rows)
    return model_rows


def _write_csv(path: Path, cols: list[str], rows: list[dict]) -> None:
    buf = io.StringIO()
    w = csv.DictWriter(buf, cols, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in cols})
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(buf.getvalue())
    tmp.replace(path)
