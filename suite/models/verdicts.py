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
from reports.results import iter_rows
from suite.cases.hunt import params as case_params
from suite.core.findings import brief, match, match_model, why
from suite.core.graph import CASE, Graph
from suite.core.tolerance import Policy

from .runner import can_run, run_model

LAYERS_CSV, MODELS_CSV = "layers.csv", "models.csv"
LAYER_COLUMNS = ["model", "layer", "node", "op", "target", "status", "bit_exact_pct", "max_abs_lsb",
                 "accumulated_max_abs_lsb", "source", "case_id", "finding"]
MODEL_COLUMNS = ["model", "target", "layers", "layers_exact", "first_divergent_layer", "first_divergent_node",
                 "output_max_abs_lsb", "whole_model", "scheme", "first_failing_layer", "output_status", "verdict",
                 "finding", "verdict_reason"]


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


def whole_model(graph: Graph, target: str, feeds: dict[str, np.ndarray], chain: dict[str, np.ndarray],
                policy: Policy | None, scheme, versions: dict | None = None, options: dict | None = None,
                timeout: float = 600.0) -> tuple[list[dict], str]:
    """Layer rows of ``target`` running the whole model (empty, and why, when it could not)."""
    tensors = [o for ly in graph.layers for o in ly.outputs]
    got, why = run_model(graph.path, target, model_feeds(graph, feeds), tensors, options, timeout)
    if got is None:
        return [], why
    got = {**to_graph_layout(graph, got), **feeds}
    rows = []
    for ly in graph.layers:
        out = ly.outputs[0]
        row = {"model": graph.name, "layer": ly.index, "node": ly.node, "op": ly.op, "target": target,
               "source": "model", "case_id": ly.case.id if ly.case is not None else ""}
        if out not in got or any(t is not None and t not in got for t in ly.inputs):
            rows.append({**row, "status": "missing"})
            continue
        own = layer_golden(ly, [None if t is None else got[t] for t in ly.inputs], scheme)[0]
        pct, max_abs = _diff(got[out], own)
        acc_pct, acc = _diff(got[out], chain[out])
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
    return rows, ""


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
            rows.append({**row, "status": "no-case" if ly.kind != CASE else "not-run"})
            continue
        rows.append({**row, "status": "known" if r.get("finding") else r.get("status"),
                     "bit_exact_pct": r.get("bit_exact_pct"), "max_abs_lsb": r.get("max_abs_lsb"),
                     "finding": r.get("finding") or ""})
    return rows


def model_row(graph: Graph, target: str, rows: list[dict], whole: str, scheme: str) -> dict:
    """The model's row of models.csv, with its verdict (:func:`model_verdict`)."""
    first = next((r for r in rows if (r.get("accumulated_max_abs_lsb") if r["source"] == "model"
                                      else r.get("max_abs_lsb")) not in (None, 0, 0.0)), None)
    failing = next((r for r in rows if r.get("status") in ("fail", "error", "crash", "timeout", "infra")), None)
    outs = [r for r in rows
            if r["source"] == "model" and graph.layers[_pos(graph, r["layer"])].outputs[0] in graph.outputs]
    row = {"model": graph.name, "target": target, "layers": len(rows),
           "layers_exact": sum(1 for r in rows if r.get("max_abs_lsb") in (0, 0.0)),
           "first_divergent_layer": "" if first is None else first["layer"],
           "first_divergent_node": "" if first is None else first["node"],
           "output_max_abs_lsb": max((o["accumulated_max_abs_lsb"] for o in outs
                                      if o.get("accumulated_max_abs_lsb") is not None), default=""),
           "whole_model": whole, "scheme": scheme,
           "first_failing_layer": "" if failing is None else failing["layer"]}
    return {**row, **model_verdict(graph.name, target, rows, outs, whole, failing)}


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
    ran = any(r["source"] == "model" for r in rows)
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
        bad = m["verdict"] in ("error", "fail")
        lsb = m["output_max_abs_lsb"]
        text = (f"model {m['model']} on {m['target']}: {m['layers_exact']}/{m['layers']} layers exact, "
                f"first divergent layer {m['first_divergent_layer'] if m['first_divergent_layer'] != '' else '-'}, "
                f"first failing layer {m['first_failing_layer'] if m['first_failing_layer'] != '' else '-'}; "
                f"whole model: {m['whole_model']}"
                + (f", output max |err| {lsb:g} LSB ({m['output_status']})" if lsb != "" else "")
                + f": {m['verdict'].upper()}" + (f" ({m['verdict_reason']})" if m["verdict_reason"] else "")
                + (f" [known finding {m['finding']}: {brief(why(m['finding']) or '')}]" if m["finding"] else "")
                + (": the run fails" if bad else ""))
        out.append((text, bad))
    return out


def _pos(graph: Graph, index: int) -> int:
    return next(i for i, ly in enumerate(graph.layers) if ly.index == index)


def write_model_reports(folder: str | Path, graph: Graph, feeds: dict[str, np.ndarray], targets: dict,
                        policy: Policy | None, scheme: str, versions=None, timeout: float = 600.0) -> list[dict]:
    """layers.csv and models.csv of a ``--model`` run in ``folder``: each target's whole-model run
    where it can, else its harvested cases' rows (from results.jsonl). Returns models.csv's rows."""
    folder = Path(folder)
    results = {(r.get("case_id"), r.get("target")): r for r in iter_rows(folder)} if (folder / "results.jsonl").exists() else {}
    chain = run_graph(graph, feeds, scheme)
    layer_rows, model_rows = [], []
    for name, t in targets.items():
        whole, rows = "", []
        why_not = can_run(graph.format, name, graph.form)
        if why_not is None:
            opts = dict(getattr(t, "options", {}) or {})
            try:
                rows, why = whole_model(graph, name, feeds, chain, policy, scheme, (versions or {}).get(name), opts,
                                        timeout)
            except Exception as e:  # noqa: BLE001 (its row says why; the run's other reports are written)
                rows, why = [], f"{type(e).__name__}: {e}"
            whole = "ran" if rows else why
        else:
            whole = why_not
        if not rows:
            rows = case_rows(graph, name, results)
        layer_rows += rows
        model_rows.append(model_row(graph, name, rows, whole, scheme))
    lp, mp = folder / LAYERS_CSV, folder / MODELS_CSV
    _write_csv(lp, LAYER_COLUMNS, layer_rows)
    _write_csv(mp, MODEL_COLUMNS, model_rows)
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
