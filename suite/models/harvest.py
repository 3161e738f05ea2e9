"""Harvest: a model file -> a Graph whose case layers carry the data of one inference.

``harvest_model(path)`` reads a .tflite or quantized .onnx model (QDQ or QOperator) (suite/models/tflite.py, onnx.py),
makes the graph inputs (given ones, e.g. the first sample of a calibration .npz, else seeded data
over the input's real range), runs the graph golden (reference/graph.py) on them, and puts each
layer's input tensors into its case. ``write_cases`` writes one case file per layer (with a
``source``: the model's name and SHA-256, the node, the layer index) and ``coverage.md``.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np

from reference.graph import layer_golden, with_inputs
from suite.core.dtypes import DTYPES
from suite.core.errors import QconformError
from suite.core.graph import CASE, Graph
from suite.core.userfile import read_bytes

from . import onnx as onnx_harvest
from . import tflite as tflite_harvest
from .runner import can_run, run_model   # (a child process: the runtime's crash is not the harvest's)
from .verdicts import model_feeds as in_model_layout
from .verdicts import to_graph_layout

COVERAGE = "coverage.md"   # (not *.json: --case-file DIR reads every *.json)


INVOCATIONS_MAX = 10_000
STATEFUL_INVOCATIONS = 4   # a stateful model's whole-model runs: its state carried over this many inputs


def parse_inputs(value) -> tuple[str | Path | None, int | None]:
    """``--model-inputs``: an .npz of the model's inputs, or N (seeded inputs per target) -> (npz, N)."""
    if value is None or isinstance(value, Path):
        return value, None
    text = str(value).strip()
    if text.isdigit() or (text[:1] in "+-" and text[1:].isdigit()):
        n = int(text)
        if not 1 <= n <= INVOCATIONS_MAX:
            raise QconformError(f"asks for {n} inputs", field="--model-inputs",
                                rule=f"N in [1, {INVOCATIONS_MAX}] seeded inputs, or an .npz of the model's inputs")
        return None, n
    return value, None


def harvest_model(path: str | Path, inputs: str | Path | None = None, seed: int = 0, scheme=None,
                  input_shapes: dict[str, tuple[int, ...]] | None = None) -> Graph:
    """``input_shapes`` (``--model-input-shape``): sizes of an .onnx model's symbolic input dimensions."""
    path = str(path)
    inputs, n = parse_inputs(inputs)
    if not Path(path).is_file():
        raise QconformError("no such model file", source=path, field="--model")
    if path.endswith(".tflite"):
        if input_shapes:
            raise QconformError("--model-input-shape sets an .onnx model's symbolic input dimensions; a .tflite "
                                "model's inputs have static shapes", source=path, field="--model-input-shape")
        graph = tflite_harvest.harvest(path)
    elif path.endswith(".onnx"):
        graph = onnx_harvest.harvest(path, input_shapes)
    else:
        raise QconformError("is neither a .tflite nor an .onnx model", source=path, field="--model",
                            rule="model files end in .tflite or .onnx")
    find_cuts(graph)
    graph.invocations = n or (STATEFUL_INVOCATIONS if graph.stateful else 1)
    fill(graph, capture_cuts(graph, inputs, seed), scheme)
    return graph


#: the runtime whose whole-model run gives the cuts' activations: LiteRT's reference kernels (no
#: XNNPACK, one kernel per op, deterministic), ONNX Runtime's CPU provider
CAPTURE = {"tflite": "tflite-ref", "onnx": "ort"}
CAPTURE_TIMEOUT = 600.0


def capture_cuts(graph: Graph, inputs, seed: int) -> dict[str, np.ndarray]:
    """The harvest's feeds: the graph inputs and, at each cut, the activations a reference runtime's
    run of the whole model had there (``CAPTURE``: the golden cannot compute a cut, an op it does
    not cover or a state read), so the layers after a cut are cases on real data. A stateless model:
    one run on the harvest's inputs. A stateful one: ``graph.invocations`` runs in order (its state
    carried), the last one's inputs and state read (at the first, the state is its initial value).
    Where the runtime cannot run the model, the cuts keep their seeded data; ``graph.cut_inputs``
    says for each cut where its data came from (written into each case reading it)."""
    k = graph.invocations - 1 if graph.stateful else 0
    feeds = model_feeds(graph, inputs, seed, k)
    if not graph.cuts:
        return feeds
    target = CAPTURE[graph.format]
    why = can_run(graph.format, target, graph.form)
    got: dict[str, np.ndarray] = {}
    if why is None:
        sets = [model_feeds(graph, inputs, seed, j) for j in range(k)] + [feeds]
        last = len(sets) - 1

        def keep(j: int, tensors: dict) -> None:
            if j == last:
                got.update(to_graph_layout(graph, {t: v for t, v in tensors.items() if t in graph.cuts}))

        _, why = run_model(graph.path, target, [in_model_layout(graph, f) for f in sets], list(graph.cuts), {},
                           CAPTURE_TIMEOUT, keep)
    where = (f"captured on {target}: the whole model on the harvest's inputs (seed {seed}"
             + (f", invocation {k + 1} of {k + 1}, its state carried" if graph.stateful else "") + ")")
    for t in graph.cuts:
        spec = graph.specs[t]
        v = got.get(t)
        if why or v is None or tuple(np.shape(v)) != tuple(spec.shape) or np.asarray(v).dtype != DTYPES[spec.dtype].storage:
            graph.cut_inputs[t] = (f"seeded (seed {seed}) over its codes: {target} " +
                                   (f"did not run the whole model ({why})" if why else "did not give it"))
            continue
        feeds[t] = np.asarray(v)
        graph.cut_inputs[t] = where
    return feeds


def find_cuts(graph: Graph) -> None:
    """Every tensor a layer reads that no earlier layer computes and no graph input gives (the output
    of an op not covered, a state variable read) is a cut: fed seeded data in its quantization, with
    the reason the format's harvest gave (``graph.cuts``), so one op not covered costs one layer."""
    have = set(graph.inputs)
    for ly in graph.layers:
        for i, t in enumerate(ly.inputs):
            if t is not None and t not in have:
                graph.cuts.setdefault(t, "no layer the golden covers computes it")
                if t not in graph.specs and ly.case is not None and not (ly.pads and ly.pads[i]):
                    graph.specs[t] = ly.case.inputs[i]   # (its consumer's case says its quantization)
                have.add(t)
        have.update(ly.outputs)
    for t in [t for t in graph.cuts if t not in have or t not in graph.specs]:
        del graph.cuts[t]   # (an op not covered whose output no layer reads)


def feed_sets(graph: Graph, inputs, seed: int) -> list[dict[str, np.ndarray]]:
    """The whole model's inputs, one set per invocation (``graph.invocations``): the harvest's own
    first, then seeded ones (an .npz given: its inputs each time, the cuts seeded anew)."""
    first = model_feeds(graph, inputs, seed)
    return [first] + [model_feeds(graph, inputs, seed, k) for k in range(1, graph.invocations)]


def model_feeds(graph: Graph, inputs: str | Path | None, seed: int, invocation: int = 0) -> dict[str, np.ndarray]:
    """The graph inputs (graph layout): from an .npz keyed by the model's input names (arrays in
    the model's layout; a leading calibration-sample axis takes its first sample), else seeded:
    uniform over the codes (a quantized input) or over the real range its first quantization
    covers (a float input). Then the cuts (``graph.cuts``), seeded uniform over their codes.
    ``invocation`` k > 0: the k-th of ``--model-inputs N``'s seeded sets."""
    inputs, _ = parse_inputs(inputs)
    given = {}
    if inputs is not None:
        raw = read_bytes(inputs, "inputs file", "--inputs", "model")
        try:
            with np.load(io.BytesIO(raw)) as z:
                given = {k: z[k] for k in z.files}
        except Exception as e:  # noqa: BLE001 (np.load's many errors: one error naming the file)
            raise QconformError(f"cannot read the inputs: {type(e).__name__}: {e}", source=str(inputs),
                                field="--inputs", rule="an .npz of the model's inputs") from None
    rng = np.random.default_rng(seed if invocation == 0 else [seed, invocation])
    feeds = {}
    for name in graph.inputs:
        spec = graph.specs[name]
        model_name = graph.model_inputs.get(name, name)
        perm = graph.layout.get(name)
        if model_name in given:
            arr = np.asarray(given[model_name])
            want = len(spec.shape)
            if arr.ndim == want + 1:
                arr = arr[0]
            if perm is not None:
                arr = arr.transpose(perm)
            if tuple(arr.shape) != tuple(spec.shape):
                raise QconformError(f"input {model_name!r} has shape {list(arr.shape)} (graph layout), the model "
                                    f"{list(spec.shape)}", source=str(inputs), field=model_name, rule="input shapes")
            feeds[name] = arr.astype(DTYPES[spec.dtype].storage)
        elif spec.dtype == "float32":
            lo, hi = _real_range(graph, name)
            feeds[name] = rng.uniform(lo, hi, spec.shape).astype(np.float32)
        else:
            info = DTYPES[spec.dtype]
            feeds[name] = rng.integers(info.qmin, info.qmax + 1, spec.shape).astype(info.storage)
    for name in graph.cuts:
        spec = graph.specs[name]
        info = DTYPES[spec.dtype]
        if info.qmin is None:
            feeds[name] = rng.uniform(-1.0, 1.0, spec.shape).astype(info.storage)
        else:
            feeds[name] = rng.integers(info.qmin, info.qmax + 1, spec.shape).astype(info.storage)
    missing = set(given) - {graph.model_inputs.get(n, n) for n in graph.inputs}
    if missing:
        raise QconformError(f"names no model input: {', '.join(sorted(missing))} (inputs: "
                            f"{', '.join(graph.model_inputs.get(n, n) for n in graph.inputs)})",
                            source=str(inputs), field="--inputs", rule="keys are the model's input names")
    return feeds


def _real_range(graph: Graph, name: str) -> tuple[float, float]:
    for ly in graph.layers:
        if name in ly.inputs and ly.case is not None and ly.case.outputs[0].quantized:
            o = ly.case.outputs[0]
            info = DTYPES[o.dtype]
            s, z = o.scale[0], o.zero_point[0]
            return (info.qmin - z) * s, (info.qmax - z) * s
    return -1.0, 1.0


def fill(graph: Graph, feeds: dict[str, np.ndarray], scheme=None) -> dict[str, np.ndarray]:
    """Run the graph golden on ``feeds`` (the graph inputs and the cuts) and give every case layer
    its input data; a layer whose input nothing gives is moved to ``not_covered``."""
    env = {k: np.asarray(v) for k, v in feeds.items()}
    kept = []
    for ly in graph.layers:
        missing = [t for t in ly.inputs if t is not None and t not in env]
        if missing:
            graph.not_covered.setdefault(ly.model_op or ly.op, []).append(
                f"{ly.node}: its input {missing[0]} comes from a layer not covered")
            continue
        xs = [None if t is None else env[t] for t in ly.inputs]
        if ly.kind == CASE:
            ly.case = with_inputs(ly, xs)
        env.update(zip(ly.outputs, layer_golden(ly, xs, scheme)))
        kept.append(ly)
    graph.layers = kept
    return env


def case_source(graph: Graph, ly) -> dict:
    """The case's origin; ``inputs``: where each input read at a cut got its data (a captured
    activation or seeded codes); every other input is the graph golden's, from the model's inputs."""
    src = {"model": graph.name, "sha256": graph.digest, "node": ly.node, "layer": ly.index,
           "model_op": ly.model_op}
    cut = [{"input": i, "tensor": t, "data": graph.cut_inputs.get(t, "seeded over its codes")}
           for i, t in enumerate(ly.inputs) if t is not None and t in graph.cuts]
    if cut:
        src["inputs"] = cut
    return src


def write_cases(graph: Graph, out: str | Path) -> list[Path]:
    """One case file per case layer (``<case id>.json``, with its ``source``) and coverage.md."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for ly in graph.layers:
        if ly.kind != CASE:
            continue
        doc = {**ly.case.to_dict(), "source": case_source(graph, ly)}
        p = out / f"{ly.case.id}.json"
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
        os.replace(tmp, p)
        paths.append(p)
    (out / COVERAGE).write_text(coverage_text(graph))
    return paths


def coverage_text(graph: Graph) -> str:
    """What the harvest made of a model: cases per op, golden-only float layers, ops not covered."""
    c = graph.coverage()
    lines = [f"# {graph.name} (sha256 {graph.digest})", "",
             (f"{c['cases']} layers harvested as cases, {sum(c['float_layers'].values())} float (QDQ) layers "
              f"in the graph golden only, {sum(c['not_covered'].values())} not covered"), "",
             "| op | layers | as |", "| --- | --- | --- |"]
    lines += [f"| {op} | {n} | case |" for op, n in sorted(c["cases_by_op"].items())]
    lines += [f"| {op} | {n} | float layer (dequantize, float32 op, quantize): golden only |"
              for op, n in sorted(c["float_layers"].items())]
    lines += [f"| {op} | {n} | not covered |" for op, n in sorted(c["not_covered"].items())]
    for op, nodes in sorted(graph.not_covered.items()):
        lines += ["", f"{op} not covered:"] + [f"- {n}" for n in nodes]
    if graph.cuts:   # the layers after them are cases all the same
        lines += ["", "Cuts (tensors no covered layer computes; their data):"]
        lines += [f"- {t}: {why}; data {graph.cut_inputs.get(t, 'seeded over its codes')}"
                  for t, why in graph.cuts.items()]
    return "\n".join(lines) + "\n"
