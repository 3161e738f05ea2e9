"""Run .tflite models through Arm's TOSA tools; run by the TOSA tools' own Python.

Not imported by the suite: ``targets/tosa.py`` starts it once per worker as ``.venv-tosa/bin/python
targets/tosa_runner.py`` (tosa-tools pins an older NumPy than the suite's .venv) and keeps it: it
writes its versions as its first line, then answers one request line with one reply line (JSON)
until its stdin closes:

request: ``{"model": base64 .tflite, "flat": base64 TOSA flatbuffer or null, "inputs": [{"dtype",
"shape", "data": base64 of the array's bytes}], "batch": true (its tensors are named c<k>_...: locate
the cases a refusal names), "apart": true (compile it in a forked child), "keep": true (reply with
the flatbuffer compiled)}``
reply:   ``{"status": "ok", "outputs": [{"dtype", "shape", "data"}], "latency_us": [...],
"flat": base64 (compiled here, asked to keep it)} | {"status": "unsupported" | "error", "reason": ...,
"stage": "compile" | "run", "located": [k, ...]} | {"signal": N}`` (``located``: the k of each
tensor named ``c<k>_...`` in the converter's diagnostics of a refusal, or made by a ``tfl.`` op it
left; ``signal``: compiling it ``apart`` killed the child that did)

A request without ``flat``: tosa-converter-for-tflite (in this process) .tflite -> TOSA MLIR; a
``tfl.`` op left in it is ``unsupported`` (the converter did not lower it); ``tosa-opt
--tosa-serialize`` (a process) -> TOSA flatbuffer. Then ``tosa_reference_model.run`` (in this
process) on the flatbuffer. The model may be one case's or a batch's (one subgraph holding every
case's operator): the runner does not know which. Standard library, NumPy and the TOSA packages only.
"""

from __future__ import annotations

import base64
import faulthandler
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from importlib.metadata import distribution, version

import numpy as np

TFL_OP = re.compile(r'"?(tfl\.[A-Za-z0-9_]+)')
OPT_TIMEOUT_S = 120
LOCATED = re.compile(r'loc\("c([0-9]{1,9})_')
LOC_ALIAS = re.compile(r'^#(loc[0-9]+) = loc\("c([0-9]{1,9})_', re.M)
LOC_USE = re.compile(r'loc\(#(loc[0-9]+)\)')
NOT_OPS = {"tfl.description", "tfl.schema_version"}   # the module's attributes
MAX_FLAT = 256 << 20   # bytes of a TOSA flatbuffer tosa-opt writes (base64 of it within tosa.py's MAX_REPLY)


def _versions() -> dict:
    return {"tosa-tools": version("tosa-tools"),
            "tosa-converter-for-tflite": version("tosa-converter-for-tflite")}


def _short(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return " | ".join(lines[-3:])[:600] if lines else ""


def _refused(reason: str, stage: str, kind: str = "unsupported") -> dict:
    return {"status": kind, "reason": reason, "stage": stage}


def _locate_left(src_tfl: str) -> list[int]:
    """The k of each tensor ``c<k>_...`` that a ``tfl.`` op left in the converter's output
    (converted again with its locations, which it otherwise strips) produces."""
    import tosa_converter_for_tflite as conv

    sink = io.BytesIO()
    try:
        conv.tflite_flatbuffer_to_tosa_mlir(src_tfl, sink, conv.TosaConverterOutputFormat.Text,
                                            conv.TosaConverterDebugInfo.Enable)
    except RuntimeError:
        return []
    text = sink.getvalue().decode("utf-8", "replace")
    alias = {a: int(k) for a, k in LOC_ALIAS.findall(text)}
    found = set()
    for line in text.splitlines():
        if set(TFL_OP.findall(line)) - NOT_OPS:
            found.update(int(k) for k in LOCATED.findall(line))
            found.update(alias[a] for a in LOC_USE.findall(line) if a in alias)
    return sorted(found)


def compile_model(model: bytes, tmp: str, opt: str, locate: bool = False) -> bytes | dict:
    """The TOSA flatbuffer of a .tflite, or the refusal (a reply)."""
    import tosa_converter_for_tflite as conv

    src_tfl, src, out = (os.path.join(tmp, n) for n in ("m.tflite", "m.mlir", "m.tosa"))
    with open(src_tfl, "wb") as f:
        f.write(model)
    sink = io.BytesIO()
    with tempfile.TemporaryFile() as diag:   # its diagnostics (on fd 2) name the tensors where it failed
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(diag.fileno(), 2)
        try:
            conv.tflite_flatbuffer_to_tosa_mlir(src_tfl, sink, conv.TosaConverterOutputFormat.Text)
        except RuntimeError as e:   # the converter's refusal (a TypeError here would be the runner's bug)
            refusal = _refused(f"tosa-converter-for-tflite refused the model: {_short(str(e))}", "compile")
        else:
            refusal = None
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        diag.seek(0)
        said = diag.read(1 << 20).decode("utf-8", "replace")
    sys.stderr.write(said)
    if refusal is not None:   # a batch's tensors are named c<k>_...: the cases the converter refused
        return {**refusal, "located": sorted({int(k) for k in LOCATED.findall(said)})}
    mlir = sink.getvalue().decode("utf-8", "replace")
    left = sorted(set(TFL_OP.findall(mlir)) - NOT_OPS)
    if left:
        refusal = _refused(f"tosa-converter-for-tflite left {', '.join(left)} unlowered (not TOSA)", "compile")
        return {**refusal, "located": _locate_left(src_tfl)} if locate else refusal
    with open(src, "w") as f:
        f.write(mlir)
    if os.path.exists(out):
        os.unlink(out)
    p = subprocess.run([opt, src, f"--tosa-serialize=tosa-flatbuffer-filename={out}", "-o", os.devnull],
                       capture_output=True, text=True, timeout=OPT_TIMEOUT_S)
    if p.returncode != 0 or not os.path.exists(out):
        return _refused(f"tosa-opt --tosa-serialize refused the TOSA MLIR: {_short(p.stderr)}", "compile")
    with open(out, "rb") as f:   # (tosa-opt's file in this runner's own temporary folder)
        flat = f.read(MAX_FLAT + 1)
    if len(flat) > MAX_FLAT:
        return _refused(f"tosa-opt wrote a TOSA flatbuffer of over {MAX_FLAT} bytes", "compile")
    return flat


def compile_apart(model: bytes, tmp: str, opt: str, locate: bool) -> bytes | dict:
    """:func:`compile_model` in a forked child: a converter that kills it by a signal (a
    TRANSPOSE with a negative permutation does) is this model's ``{"signal": N}``, and the
    runner goes on (a new runner would cost a Python start)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:   # the child: its answer on the pipe, then gone without the parent's cleanup
        os.close(r)
        try:
            got = compile_model(model, tmp, opt, locate)
            data = b"B" + got if isinstance(got, bytes) else b"J" + json.dumps(got).encode()
        except BaseException as e:   # its error, the runner's reply
            data = b"J" + json.dumps({"status": "error", "reason": f"{type(e).__name__}: {_short(str(e))}",
                                      "stage": "run"}).encode()
        with os.fdopen(w, "wb") as f:
            f.write(data)
        os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return {"signal": os.WTERMSIG(status)}
    if data[:1] == b"B":
        return data[1:]
    if data[:1] == b"J":
        return json.loads(data[1:])
    return {"status": "error", "reason": f"the compiling child ended with status {status} and no answer",
            "stage": "run"}


def run_model(req: dict, tmp: str, opt: str) -> dict:
    import tosa_reference_model as ref

    reply: dict = {}
    if req.get("flat"):
        flat = base64.b64decode(req["flat"])
    else:
        compile_ = compile_apart if req.get("apart") else compile_model
        flat = compile_(base64.b64decode(req["model"]), tmp, opt, bool(req.get("batch")))
        if isinstance(flat, dict):
            return flat
        if req.get("keep"):   # (for the caller's cache)
            reply["flat"] = base64.b64encode(flat).decode()
    inputs = [np.frombuffer(base64.b64decode(t["data"]), dtype=t["dtype"]).reshape(t["shape"]).copy()
              for t in req["inputs"]]
    t0 = time.perf_counter_ns()
    try:
        outs, status = ref.run(flat, inputs)
    except ValueError as e:   # the reference model refuses the converter's graph ("Invalid TOSA graph")
        return {**reply, **_refused(f"tosa_reference_model refused the converted graph: {_short(str(e))}", "run")}
    spent = (time.perf_counter_ns() - t0) / 1000.0
    if status != ref.GraphStatus.TOSA_VALID:
        kind = "unsupported" if status == ref.GraphStatus.TOSA_UNPREDICTABLE else "error"
        return {**reply, **_refused(f"tosa_reference_model: graph status {status.name}", "run", kind)}
    return {**reply, "status": "ok", "latency_us": [spent],
            "outputs": [_array(o) for o in outs]}


def _array(a) -> dict:
    a = np.ascontiguousarray(a)
    return {"dtype": str(a.dtype), "shape": list(a.shape), "data": base64.b64encode(a.tobytes()).decode()}


def main() -> int:
    # a fatal signal's Python stack to the runner's own stderr (fd 2 is redirected while converting)
    faulthandler.enable(os.dup(2))
    reply = os.fdopen(os.dup(1), "w")   # the tools print to stdout (ARG_MIN's lowering does): only replies go there
    os.dup2(2, 1)
    # the real binary, not the venv's Python shim that starts it (a second Python start per call)
    opt = os.path.join(os.path.dirname(sys.executable), "tosa-opt")
    binary = distribution("tosa-tools").locate_file("bin/tosa-opt")
    if os.path.isfile(binary):   # else another layout of the package: its shim
        opt = str(binary)
    reply.write(json.dumps({"versions": _versions()}) + "\n")
    reply.flush()
    with tempfile.TemporaryDirectory(prefix="qconform-tosa-") as tmp:
        for line in sys.stdin:
            if not line.strip():
                continue
            try:
                result = run_model(json.loads(line), tmp, opt)
            except Exception as e:   # this request's error, the runner goes on
                result = {"status": "error", "reason": f"{type(e).__name__}: {_short(str(e))}", "stage": "run"}
            sys.stderr.flush()
            reply.write(json.dumps(result) + "\n")
            reply.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
