"""Run a batch of .tflite models through Arm's TOSA tools; run by the TOSA tools' own Python.

Not imported by the suite: ``targets/tosa.py`` starts it as ``.venv-tosa/bin/python
targets/tosa_runner.py`` (tosa-tools pins an older NumPy than the suite's .venv), writes one
request on its stdin and reads one reply from its stdout (JSON, one line each):

request: ``{"cases": [{"model": base64 .tflite, "inputs": [{"dtype", "shape", "data"}]}]}``
reply:   ``{"versions": {...}, "results": [{"status": "ok", "outputs": [{"dtype", "shape",
"data"}], "latency_us": [...]} | {"status": "unsupported" | "error", "reason": ...}]}``

Each case: tosa-converter-for-tflite (in this process) .tflite -> TOSA MLIR; a ``tfl.`` op left
in it is ``unsupported`` (the converter did not lower it); ``tosa-opt --tosa-serialize``
(a process) -> TOSA flatbuffer; ``tosa_reference_model.run`` (in this process). Standard library,
NumPy and the TOSA packages only.
"""

from __future__ import annotations

import base64
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version

import numpy as np

TFL_OP = re.compile(r'"?(tfl\.[A-Za-z0-9_]+)')
OPT_TIMEOUT_S = 120


def _versions() -> dict:
    return {"tosa-tools": version("tosa-tools"),
            "tosa-converter-for-tflite": version("tosa-converter-for-tflite")}


def _short(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-3:])[:600] if lines else ""


def run_case(req: dict, tmp: str, opt: str) -> dict:
    import tosa_converter_for_tflite as conv
    import tosa_reference_model as ref

    src_tfl, src, out = (os.path.join(tmp, n) for n in ("m.tflite", "m.mlir", "m.tosa"))
    with open(src_tfl, "wb") as f:
        f.write(base64.b64decode(req["model"]))
    sink = io.BytesIO()
    try:
        conv.tflite_flatbuffer_to_tosa_mlir(src_tfl, sink, conv.TosaConverterOutputFormat.Text)
    except RuntimeError as e:   # the converter's refusal (a TypeError here would be the runner's bug)
        return {"status": "unsupported", "reason": f"tosa-converter-for-tflite refused the model: {_short(str(e))}"}
    mlir = sink.getvalue().decode("utf-8", "replace")
    left = sorted(set(TFL_OP.findall(mlir)) - {"tfl.description", "tfl.schema_version"})
    if left:
        return {"status": "unsupported",
                "reason": f"tosa-converter-for-tflite left {', '.join(left)} unlowered (not TOSA)"}
    with open(src, "w") as f:
        f.write(mlir)
    if os.path.exists(out):
        os.unlink(out)
    p = subprocess.run([opt, src, f"--tosa-serialize=tosa-flatbuffer-filename={out}", "-o", os.devnull],
                       capture_output=True, text=True, timeout=OPT_TIMEOUT_S)
    if p.returncode != 0 or not os.path.exists(out):
        return {"status": "unsupported", "reason": f"tosa-opt --tosa-serialize refused the TOSA MLIR: {_short(p.stderr)}"}
    with open(out, "rb") as f:
        flat = f.read()
    inputs = [np.asarray(t["data"], dtype=t["dtype"]).reshape(t["shape"]) for t in req["inputs"]]
    t0 = time.perf_counter_ns()
    try:
        outs, status = ref.run(flat, inputs)
    except ValueError as e:   # the reference model refuses the converter's graph ("Invalid TOSA graph")
        return {"status": "unsupported", "reason": f"tosa_reference_model refused the converted graph: {_short(str(e))}"}
    spent = (time.perf_counter_ns() - t0) / 1000.0
    if status != ref.GraphStatus.TOSA_VALID:
        kind = "unsupported" if status == ref.GraphStatus.TOSA_UNPREDICTABLE else "error"
        return {"status": kind, "reason": f"tosa_reference_model: graph status {status.name}"}
    return {"status": "ok", "latency_us": [spent],
            "outputs": [{"dtype": str(np.asarray(o).dtype), "shape": list(np.shape(o)),
                         "data": np.asarray(o).ravel().tolist()} for o in outs]}


def main() -> int:
    request = json.loads(sys.stdin.buffer.read())
    reply = os.fdopen(os.dup(1), "w")   # the tools print to stdout (ARG_MIN's lowering does): only the reply goes there
    os.dup2(2, 1)
    opt = os.path.join(os.path.dirname(sys.executable), "tosa-opt")
    results = []
    with tempfile.TemporaryDirectory(prefix="qconform-tosa-") as tmp:
        for req in request["cases"]:
            try:
                results.append(run_case(req, tmp, opt))
            except Exception as e:   # this case's error, the batch goes on
                results.append({"status": "error", "reason": f"{type(e).__name__}: {_short(str(e))}"})
            sys.stderr.flush()
    reply.write(json.dumps({"versions": _versions(), "results": results}) + "\n")
    reply.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
