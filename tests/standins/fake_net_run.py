#!/usr/bin/env python3
"""STAND-IN for qnn-net-run: the same command line and file conventions, onnxruntime inside.

Not a Qualcomm tool. It lets the tests drive the ``netrun`` target's template path end
to end where no QNN SDK is installed: it takes the qnn-net-run flags the suite's
profiles use, reads an input list in the SNPE/QNN format (one line per inference;
``name:=path`` pairs or bare paths in graph-input order; lines starting with ``#`` or
``%`` name outputs and are skipped), runs the model (a QDQ ONNX file, whatever its
extension, given as ``--model``, ``--dlc_path`` or ``--retrieve_context``) with
onnxruntime on the CPU, and writes ``<output_dir>/Result_<i>/<tensor>.raw``.

* ``--use_native_input_files``: raw inputs hold the graph inputs' codes (int8, ...);
  without it they are float32 reals, quantized with the DequantizeLinear that
  consumes the input (round half to even, saturate).
* ``--use_native_output_files``: outputs are written as codes; without it as float32
  reals, dequantized with the QuantizeLinear that produced them.
* ``--backend`` is required, as for the real tool, and must name a file found as is
  or in one of the ``LD_LIBRARY_PATH`` folders (the profile's pushed libraries).
* a ``.tflite`` flatbuffer runs on LiteRT's reference kernels instead (same conventions).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np


def _parse(argv):
    ap = argparse.ArgumentParser(prog="qnn-net-run (stand-in)")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--model")
    src.add_argument("--dlc_path")
    src.add_argument("--retrieve_context")
    ap.add_argument("--backend", required=True)
    ap.add_argument("--input_list", required=True)
    ap.add_argument("--output_dir", default="./output")
    ap.add_argument("--use_native_input_files", action="store_true")
    ap.add_argument("--use_native_output_files", action="store_true")
    ap.add_argument("--perf_profile")
    ap.add_argument("--profiling_level")
    ap.add_argument("--num_inferences", type=int)
    ap.add_argument("--log_level")
    ap.add_argument("--config_file")
    return ap.parse_args(argv)


def _find_backend(name: str) -> Path | None:
    p = Path(name)
    if p.is_file():
        return p
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if d and (Path(d) / name).is_file():
            return Path(d) / name
    return None


def _qparams(model, tensor: str, op_type: str, as_input: bool):
    """(scale, zero point) of the Q/DQ node consuming (as_input) or producing ``tensor``."""
    from onnx import numpy_helper
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == op_type and ((as_input and n.input[0] == tensor) or (not as_input and n.output[0] == tensor)):
            return float(inits[n.input[1]]), int(inits[n.input[2]])
    return None


def _input_lines(a):
    return [ln.split() for ln in Path(a.input_list).read_text().splitlines()
            if ln.strip() and not ln.lstrip().startswith(("#", "%"))]


def _run_tflite(a, path) -> int:
    """A .tflite model: LiteRT's reference kernels (same conventions as for ONNX)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_path=path, experimental_op_resolver_type=OpResolverType.BUILTIN_REF, num_threads=1)
    it.allocate_tensors()
    ins, outs = it.get_input_details(), it.get_output_details()
    for k, words in enumerate(_input_lines(a)[: a.num_inferences or None]):
        files = {}
        for pos, w in enumerate(words):
            name, sep, f = w.partition(":=")
            files[name if sep else ins[pos]["name"]] = f if sep else w
        for det in ins:
            dt = np.dtype(det["dtype"])
            if a.use_native_input_files:
                arr = np.fromfile(files[det["name"]], dtype=dt)
            else:
                s, z = det["quantization"]
                info = np.iinfo(dt)
                real = np.fromfile(files[det["name"]], dtype=np.float32).astype(np.float64)
                arr = np.clip(np.rint(real / s) + z, info.min, info.max).astype(dt)
            it.set_tensor(det["index"], arr.reshape(det["shape"]))
        it.invoke()
        d = Path(a.output_dir) / f"Result_{k}"
        d.mkdir(parents=True, exist_ok=True)
        for det in outs:
            arr = it.get_tensor(det["index"])
            fname = "".join(ch if ch.isalnum() or ch in "_.-" else "_" for ch in det["name"]) + ".raw"
            if a.use_native_output_files:
                np.ascontiguousarray(arr).tofile(d / fname)
            else:
                s, z = det["quantization"]
                ((arr.astype(np.float64) - z) * s).astype(np.float32).tofile(d / fname)
    return 0


def main(argv=None) -> int:
    a = _parse(sys.argv[1:] if argv is None else argv)
    if _find_backend(a.backend) is None:
        print(f"ERROR: backend {a.backend} not found (LD_LIBRARY_PATH={os.environ.get('LD_LIBRARY_PATH', '')})",
              file=sys.stderr)
        return 3
    path = a.model or a.dlc_path or a.retrieve_context
    if Path(path).read_bytes()[4:8] == b"TFL3":
        return _run_tflite(a, path)
    import onnx
    import onnxruntime as ort
    from onnx import helper
    model = onnx.load(path)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    ins = sess.get_inputs()
    outs = [o.name for o in sess.get_outputs()]
    types = {vi.name: helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type) for vi in model.graph.input}
    lines = _input_lines(a)
    for k, words in enumerate(lines[: a.num_inferences or None]):
        files = {}
        for pos, w in enumerate(words):
            name, sep, f = w.partition(":=")
            if not sep:
                name, f = ins[pos].name, w
            files[name] = f
        feeds = {}
        for i in ins:
            shape = [int(d) for d in i.shape]
            if a.use_native_input_files:
                arr = np.fromfile(files[i.name], dtype=types[i.name]).reshape(shape)
            else:
                real = np.fromfile(files[i.name], dtype=np.float32).astype(np.float64)
                s, z = _qparams(model, i.name, "DequantizeLinear", True)
                info = np.iinfo(types[i.name])
                arr = np.clip(np.rint(real / s) + z, info.min, info.max).astype(types[i.name]).reshape(shape)
            feeds[i.name] = arr
        res = sess.run(outs, feeds)
        d = Path(a.output_dir) / f"Result_{k}"
        d.mkdir(parents=True, exist_ok=True)
        for name, arr in zip(outs, res):
            fname = "".join(ch if ch.isalnum() or ch in "_.-" else "_" for ch in name) + ".raw"
            if a.use_native_output_files:
                np.ascontiguousarray(arr).tofile(d / fname)
            else:
                s, z = _qparams(model, name, "QuantizeLinear", False)
                ((arr.astype(np.float64) - z) * s).astype(np.float32).tofile(d / fname)
    print(f"qnn-net-run (stand-in): {len(lines)} inference(s) -> {a.output_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
