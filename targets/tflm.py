"""``tflm``: TensorFlow Lite for Microcontrollers (the ``tflite-micro`` wheel's Python interpreter).

It runs the same one-operator .tflite the LiteRT targets build (:mod:`targets.tflite_model`)
with TFLM's reference kernels, the ones microcontroller builds start from (CMSIS-NN
and other vendor kernels replace them op by op). TFLM runs only a model's first subgraph, so
each case is its own model and interpreter (creating one is cheap: a fixed tensor arena).
"""

from __future__ import annotations

import os
import time
from importlib.metadata import version

import numpy as np

from suite.core.dtypes import DTYPES
from suite.core.errors import Unsupported

from targets import tflite_model
from targets.base import Outcome, Target, Timing

#: the interpreter's tensor arena; the suite's single-op models need well under it
ARENA_BYTES = 16 << 20


def load_runtime():
    """``tflite_micro.runtime``, imported on first use (every use goes through here), so that a
    missing tflite-micro makes only this target unavailable."""
    from tflite_micro import runtime
    return runtime


class TflmTarget(Target):
    name = "tflm"
    description = "TensorFlow Lite for Microcontrollers, reference kernels (tflite-micro wheel)"

    def availability(self):
        try:
            load_runtime()
            tflite_model.schema()   # the model builder (LiteRT's schema classes)
        except Exception as e:
            return False, (f"tflite-micro is not importable ({type(e).__name__}: {e}); "
                           f"pip install --pre tflite-micro")
        return True, "tflite-micro"

    def versions(self):
        return {"tflite-micro": version("tflite-micro")}

    #: tensor types the target feeds and fetches (NumPy has no 4-bit arrays); TFLM refuses the rest itself
    FED_DTYPES = tflite_model.FED_DTYPES

    def unsupported(self, case):
        return tflite_model.refusal(case, self.FED_DTYPES, "the tflm target does not feed or fetch {} tensors")

    def run(self, cases, timing: Timing) -> list[Outcome]:
        outs = []
        for c in cases:   # one model and interpreter each (TFLM runs a model's first subgraph only)
            t0 = time.perf_counter()
            o = self.safe_run_one(c, timing)
            o.info.setdefault("target_s", round(time.perf_counter() - t0, 6))
            outs.append(o)
        return outs

    def run_one(self, case, timing: Timing) -> Outcome:
        built = tflite_model.build(case)
        rt = load_runtime()
        mark = _stderr_mark()
        try:
            it = rt.Interpreter.from_bytes(built.content, arena_size=ARENA_BYTES)
        except Exception as e:   # TFLM's MicroInterpreter refused the model (op not registered, Prepare failed)
            raise Unsupported(f"TFLM rejected the model: {_said(mark, e)}") from None
        for k, ci in enumerate(built.input_indices):
            t = case.inputs[ci]
            try:
                it.set_input(np.asarray(t.data).astype(DTYPES[t.dtype].storage).reshape(t.shape), k)
            except ValueError as e:   # its Python binding maps no NumPy type to the tensor's (uint16)
                raise Unsupported(f"TFLM's Python interpreter refused the input: {_said(None, e)}") from None
        spent = [0.0]

        def invoke():
            t0 = time.perf_counter()
            it.invoke()
            spent[0] += time.perf_counter() - t0

        mark = _stderr_mark()
        try:
            _, samples = timing.measure(invoke)
        except RuntimeError as e:   # a kernel's Eval refused (a type or shape it does not handle)
            raise Unsupported(f"TFLM invoke failed: {_said(mark, e)}") from None
        outputs = [np.array(it.get_output(j)) for j in range(len(case.outputs))]
        return Outcome.ok(outputs, samples, latency_scope="case", invoke_s=round(spent[0], 6))


# TFLM says why it refused only through MicroPrintf, on stderr; the exception is generic. In the
# worker process stderr is a regular file (suite/harness/isolation.py), so what TFLM printed
# during a call is read back from the offset it had before the call.

def _stderr_mark() -> int | None:
    try:
        return os.lseek(2, 0, os.SEEK_END)
    except OSError:   # a terminal or pipe (in-process use): only the exception's text
        return None


def _said(mark: int | None, e: Exception) -> str:
    text = ""
    if mark is not None:
        try:
            end = os.lseek(2, 0, os.SEEK_END)
            raw = os.pread(2, min(end - mark, 4096), mark) if end > mark else b""
            text = " | ".join(ln.strip() for ln in raw.decode("utf-8", "replace").splitlines() if ln.strip())
        except OSError:
            text = ""
    msg = str(e).strip().splitlines()
    head = msg[-1] if msg else type(e).__name__
    return f"{head}: {text[-600:]}" if text else head
