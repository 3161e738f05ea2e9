"""Run a whole model on one target and keep every intermediate tensor (one child process each).

``python -m suite.models.runner MODEL TARGET JOB_DIR`` reads ``JOB_DIR/job.json`` (the tensors to
keep, the target's options, the input names, the number of invocations) and ``JOB_DIR/feeds.npz``
(``f<k>_<j>``: the j-th input of invocation k, in the model's layout) and writes
``JOB_DIR/tensors<k>.npz`` per invocation (``t<j>``: the j-th tensor of the job, in the model's layout).

* ``tflite`` / ``tflite-ref``: LiteRT (the target's op resolver) on the model with every kept
  tensor made a subgraph output. (``experimental_preserve_all_tensors`` keeps intermediates of
  the builtin kernels only: under XNNPACK, the default path, the delegate computes them inside
  itself, and 94 of 132 int8 tensors of the face detector read stale values; a subgraph output
  is written by whatever kernel computes it.)
* ``ort`` / ``htp``: ONNX Runtime (CPU, or QNN HTP without CPU fallback, as targets/ort.py and
  targets/htp.py open their sessions) with every kept tensor added as a graph output.

A crash or hang of the runtime is the child's, not the run's: :func:`run_model` reports it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from targets import get_target, tflite_model
from targets.onnx_model import load_onnx

from .onnx import read_onnx
from .tflite import read_model, tensor_keys

ROOT = Path(__file__).resolve().parents[2]
LITERT = ("tflite", "tflite-ref")
ORT = ("ort", "htp")


def can_run(fmt: str, target: str, form: str = "") -> str | None:
    """None if ``target`` runs a whole model of this format (and ONNX form), else why not."""
    if (fmt == "tflite" and target in LITERT) or (fmt == "onnx" and target == "ort"):
        return None
    if fmt == "onnx" and target == "htp":
        return None if form != "qoperator" else ("htp runs no whole onnx model in the QOperator form (the QNN "
                                                 "execution provider takes the QDQ form)")
    return f"{target} runs no whole {fmt} model"


def run_model(path: str, target: str, feeds: dict[str, np.ndarray] | list[dict[str, np.ndarray]], tensors: list[str],
              options: dict | None = None, timeout: float = 600.0, each=None):
    """({tensor: array in the model's layout}, "") or (None, why it did not run: crash, timeout, error).
    ``feeds`` a list: one invocation per set, in order, on one interpreter or session (a stateful
    model's state carries over); ``each(k, tensors)`` is called for each invocation in order, its
    tensors read one invocation at a time (the memory does not grow with their count); then
    (None, "") is returned on success."""
    sets = feeds if isinstance(feeds, list) else [feeds]
    names = list(sets[0])
    with tempfile.TemporaryDirectory(prefix="qconform-model-") as d:
        job = Path(d)
        np.savez(job / "feeds.npz", **{f"f{k}_{j}": fs[n] for k, fs in enumerate(sets) for j, n in enumerate(names)})
        (job / "job.json").write_text(json.dumps({"tensors": tensors, "options": options or {}, "inputs": names,
                                                  "invocations": len(sets)}))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
        try:
            p = subprocess.run([sys.executable, "-m", "suite.models.runner", str(path), target, str(job)],
                               capture_output=True, text=True, timeout=timeout, env=env, check=False)
        except subprocess.TimeoutExpired:
            return None, f"timeout: the whole model ran over {timeout:g} s"
        if p.returncode != 0:
            tail = (p.stderr.strip().splitlines() or [""])[-1][:400]
            kind = "crash" if p.returncode < 0 else "error"
            return None, f"{kind} (exit status {p.returncode}): {tail}"
        got = None
        for k in range(len(sets)):
            with np.load(job / f"tensors{k}.npz") as z:
                got = {name: z[f"t{j}"] for j, name in enumerate(tensors) if f"t{j}" in z.files}
            if each is not None:
                each(k, got)
        return (None if each is not None else got), ""


def _litert(path: str, target: str, sets: list[dict], tensors: list[str]):
    model, _ = read_model(path)
    sg = model.subgraphs[0]
    keys = tensor_keys(sg)
    index = {k: i for i, k in enumerate(keys)}
    keep = [index[t] for t in tensors if t in index]
    sg.outputs = list(dict.fromkeys(list(sg.outputs) + [i for i in keep if i not in sg.inputs]))
    model.signatureDefs = []
    t = get_target(target)
    it = t._interpreter(tflite_model.serialize(model))
    for feeds in sets:   # (one interpreter: a stateful model's variables carry over)
        for det in it.get_input_details():
            it.set_tensor(det["index"], np.asarray(feeds[keys[det["index"]]]))
        it.invoke()
        out = {keys[d["index"]]: np.array(it.get_tensor(d["index"])) for d in it.get_output_details()}
        out.update({keys[i]: np.asarray(feeds[keys[i]]) for i in sg.inputs})
        yield out


def _ort(path: str, target: str, sets: list[dict], tensors: list[str], options: dict):
    onnx = load_onnx()
    m, _ = read_onnx(path)   # (the bounded read and the harvest's refusals, not onnx.load)
    have = {o.name for o in m.graph.output}
    for name in tensors:
        if name not in have and name not in sets[0]:
            m.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    t = get_target(target, **options)
    sess = t.create_session(m.SerializeToString())
    names = [o.name for o in sess.get_outputs()]
    for feeds in sets:
        yield dict(zip(names, sess.run(names, feeds)))


def main(argv: list[str]) -> int:
    path, target, job = argv[0], argv[1], Path(argv[2])
    spec = json.loads((job / "job.json").read_text())
    names, n = spec["inputs"], int(spec["invocations"])
    with np.load(job / "feeds.npz") as z:
        sets = [{name: z[f"f{k}_{j}"] for j, name in enumerate(names)} for k in range(n)]
    if target in LITERT:
        got = _litert(path, target, sets, spec["tensors"])
    else:
        got = _ort(path, target, sets, spec["tensors"], spec.get("options") or {})
    for k, g in enumerate(got):   # (one file per invocation, written as it comes: the memory of one)
        np.savez(job / f"tensors{k}.npz", **{f"t{j}": g[name] for j, name in enumerate(spec["tensors"]) if name in g})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
