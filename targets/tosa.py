"""``tosa``: Arm's TOSA reference model on the .tflite the LiteRT targets build, lowered to TOSA.

tosa-converter-for-tflite (.tflite -> TOSA MLIR; a ``tfl.`` op it leaves is ``unsupported``),
``tosa-opt --tosa-serialize`` (MLIR -> TOSA flatbuffer) and ``tosa_reference_model`` (the
spec's executable reference, bit-exact integer arithmetic). The TOSA tools pin an older NumPy
than the suite's, so they live in a virtualenv of their own, ``.venv-tosa`` (scripts/setup.sh;
``$QCONFORM_TOSA_VENV`` names another): a batch is one run of ``targets/tosa_runner.py`` by that
venv's Python. A runner killed by a signal while running one case is re-raised in the worker,
so the case's verdict is that ``crash``; in a batch of several, each case is run again alone.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np

from suite.core.dtypes import DTYPES

from targets import tflite_model
from targets.base import Outcome, Target, Timing

ROOT = Path(__file__).resolve().parent.parent
RUNNER = Path(__file__).resolve().parent / "tosa_runner.py"
#: the largest reply read back (outputs as JSON lists)
MAX_REPLY = 512 << 20
#: the runner's time per case (tosa-opt and the reference model); a batch gets it per case
CASE_TIMEOUT_S = 60


def venv() -> Path:
    return Path(os.environ.get("QCONFORM_TOSA_VENV") or ROOT / ".venv-tosa")


class TosaTarget(Target):
    name = "tosa"
    description = "Arm TOSA reference model on tosa-converter-for-tflite's lowering of the .tflite"

    def availability(self):
        v = venv()
        missing = [p for p in ("bin/python", "bin/tosa-opt") if not (v / p).exists()]
        if missing:
            return False, (f"no TOSA tools venv at {v} ({', '.join(missing)} missing); "
                           f"bash scripts/setup.sh creates it (or set QCONFORM_TOSA_VENV)")
        try:
            tflite_model.schema()
        except Exception as e:
            return False, f"the .tflite builder needs ai-edge-litert ({type(e).__name__}: {e})"
        return True, "tosa-tools"

    def versions(self):
        if not hasattr(self, "_versions"):
            self._versions = self._call([])[0]
        return dict(self._versions)

    #: tensor types the target feeds and fetches (NumPy has no 4-bit arrays); the tools refuse the rest
    FED_DTYPES = set(tflite_model.TENSOR_TYPES) - {"int4", "uint4"}

    def unsupported(self, case):
        return tflite_model.refusal(case, self.FED_DTYPES, "the tosa target does not feed or fetch {} tensors")

    def _call(self, reqs: list) -> tuple[dict, list | int]:
        """(versions, results) of one runner process; results is the signal number instead if
        the runner was killed by one."""
        py = venv() / "bin" / "python"
        # TOSA_MODEL_NO_BACKTRACE: the reference model would attach gdb to itself for a backtrace
        # at every warning and crash (seconds each), and it reads nothing else from the environment
        p = subprocess.run([str(py), str(RUNNER)], input=json.dumps({"cases": reqs}).encode(),
                           capture_output=True, timeout=CASE_TIMEOUT_S * max(1, len(reqs)),
                           env={**os.environ, "TOSA_MODEL_NO_BACKTRACE": "1"})
        if p.returncode < 0:
            return {}, -p.returncode
        if p.returncode != 0 or len(p.stdout) > MAX_REPLY:
            tail = p.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
            raise RuntimeError(f"the TOSA runner failed (exit {p.returncode}): {' | '.join(tail)}")
        reply = json.loads(p.stdout)
        return reply["versions"], reply["results"]

    def run(self, cases, timing: Timing) -> list[Outcome]:
        cases = list(cases)
        outs: list[Outcome | None] = [None] * len(cases)
        todo, reqs = [], []
        for i, c in enumerate(cases):
            why = self.unsupported(c)
            if why:
                outs[i] = Outcome.unsupported(why)
                continue
            try:
                built = tflite_model.build(c)
            except Exception as e:
                outs[i] = Outcome.from_exception(e)
                continue
            todo.append(i)
            reqs.append({"model": base64.b64encode(built.content).decode(),
                         "inputs": [_tensor(c.inputs[ci]) for ci in built.input_indices]})
        if todo:
            t0 = time.perf_counter()
            _, results = self._call(reqs)
            if isinstance(results, int):   # killed by a signal: each case alone finds whose
                if len(todo) == 1:
                    os.kill(os.getpid(), results)   # the worker dies as the runner did: a crash
                    raise RuntimeError(f"the TOSA runner was killed by signal {results}")
                for i in todo:
                    outs[i] = self.run([cases[i]], timing)[0]
                return outs
            share = round((time.perf_counter() - t0) / len(todo), 6)
            for i, r in zip(todo, results):
                outs[i] = _outcome(cases[i], r)
                outs[i].info.update(target_s=share, batch_size=len(todo))
        return outs

    def run_one(self, case, timing: Timing) -> Outcome:
        return self.run([case], timing)[0]


def _tensor(t) -> dict:
    arr = np.asarray(t.data).astype(DTYPES[t.dtype].storage)
    return {"dtype": str(arr.dtype), "shape": list(t.shape), "data": arr.ravel().tolist()}


def _outcome(case, r: dict) -> Outcome:
    if r.get("status") != "ok":
        return Outcome(r.get("status", "error"), reason=str(r.get("reason", ""))[:2000])
    outputs = []   # in the case's shape when only the rank differs (the lowering keeps a squeezed or
    # rank-0 result); a different element count stays as it came: the judge's shape error
    for o, want in zip(r["outputs"], case.outputs):
        arr = np.asarray(o["data"], dtype=o["dtype"]).reshape(o["shape"])
        outputs.append(arr.reshape(want.shape) if arr.size == int(np.prod(want.shape)) else arr)
    return Outcome.ok(outputs, r.get("latency_us", []), latency_scope="case")
