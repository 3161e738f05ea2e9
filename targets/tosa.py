"""``tosa``: Arm's TOSA reference model on the .tflite the LiteRT targets build, lowered to TOSA.

tosa-converter-for-tflite (.tflite -> TOSA MLIR; a ``tfl.`` op it leaves is ``unsupported``),
``tosa-opt --tosa-serialize`` (MLIR -> TOSA flatbuffer) and ``tosa_reference_model`` (the
spec's executable reference, bit-exact integer arithmetic). The TOSA tools pin an older NumPy
than the suite's, so they live in a virtualenv of their own, ``.venv-tosa`` (scripts/setup.sh;
``$QCONFORM_TOSA_VENV`` names another): ``targets/tosa_runner.py`` runs in that venv's Python,
one process kept for the worker's batches.

A batch is one model: one .tflite subgraph holding every case's operator (tensors ``c<k>_...``),
so one conversion, one tosa-opt and one reference-model run serve it; its outputs are split back
per case. Cases the converter names in a refusal (its diagnostics' locations) run alone, the rest
as a batch again; any other refusal of a batch splits it (:meth:`TosaTarget._split`); a case run
alone takes the single-case path, whose verdict and reason are its own. Compiled flatbuffers and
refusals are kept in an authenticated cache (:class:`targets.batching.ContextCache`, folder
``tosa`` of --cache-dir / $QCONFORM_CACHE_DIR, default ~/.cache/qconform/tosa), keyed by the
model bytes and both tools' versions, so a warm run only runs the reference model. A runner
killed by a signal while running one case is that case's ``crash`` (with the signal and the
runner's Python stack); in a batch, the batch is split.
"""

from __future__ import annotations

import base64
import json
import os
import select
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from suite.core.dtypes import DTYPES
from suite.core.errors import signal_name

from targets import tflite_model
from targets.base import Outcome, Target, Timing
from targets.batching import BatchFailed, ContextCache, batch_info, cache_dir_of, digest_of
from targets.tflite_model import _subgraph

ROOT = Path(__file__).resolve().parent.parent
RUNNER = Path(__file__).resolve().parent / "tosa_runner.py"
#: the largest reply line read back (outputs as base64 bytes)
MAX_REPLY = 512 << 20
#: the runner's time per case (tosa-opt and the reference model); a batch gets it per case
CASE_TIMEOUT_S = 60
START_TIMEOUT_S = 120
DEFAULT_CACHE_DIR = "~/.cache/qconform/tosa"
CACHE_FORMAT = "qconform-tosa-flatbuffer/2 hmac-sha256"   # in every entry's MAC


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
        return dict(self._runner().versions)

    #: no case of a group runs alone for its latency: the reference model's run time is no
    #: device's, and whole groups make the same batches (cache hits) whatever the test order
    latency_cases = 0
    #: its runner process takes a crash already (a fork of the worker would share the runner's pipes)
    fork_crashes = False

    #: tensor types the target feeds and fetches (NumPy has no 4-bit arrays); the tools refuse the rest
    FED_DTYPES = tflite_model.FED_DTYPES

    def unsupported(self, case):
        return tflite_model.refusal(case, self.FED_DTYPES, "the tosa target does not feed or fetch {} tensors")

    @property
    def compiled_cache(self) -> ContextCache | None:
        """Compiled TOSA flatbuffers (option ``cache_dir`` / --cache-dir + ``/tosa``,
        $QCONFORM_CACHE_DIR + ``/tosa``, default ~/.cache/qconform/tosa; ``off`` disables it),
        authenticated with the user's key as the QNN context cache is."""
        if not hasattr(self, "_cache"):
            root = cache_dir(self.options.get("cache_dir"))
            self._cache = ContextCache(root, kind="TOSA flatbuffer", suffix=".tosa", fmt=CACHE_FORMAT) \
                if root is not None else None
        return self._cache

    def _runner(self) -> "_Runner":
        if getattr(self, "_proc", None) is None or self._proc.dead:
            self._proc = _Runner()
        return self._proc

    def _compile_and_run(self, content: bytes, inputs: list[dict], n: int,
                         apart: bool = False) -> tuple[str, dict | int]:
        """(cache key, the runner's reply or the signal that killed it) of one model: its
        flatbuffer from the cache when held there (a verified entry), else compiled by the runner
        (``apart``: in a child of it, where a batch holding the model killed the runner) and
        stored; a compile refusal is stored as the key's failure."""
        runner = self._runner()
        cache = self.compiled_cache
        key = digest_of(content, *(f"{k}={v}" for k, v in sorted(runner.versions.items())), CACHE_FORMAT)
        flat = None
        if cache is not None and cache.enabled:
            flat, _, failed = cache.lookup_bytes(key)
            if failed is not None and isinstance(failed.get("reason"), str):
                located = failed.get("located")
                return key, {"reason": failed["reason"], "located": located if isinstance(located, list) else [],
                             "killed": failed.get("killed") is True, "status": "unsupported", "stage": "compile"}
        reply = runner.ask({"model": None if flat else base64.b64encode(content).decode(),
                            "flat": base64.b64encode(flat).decode() if flat else None, "inputs": inputs,
                            "batch": n > 1, "apart": apart, "keep": cache is not None and cache.enabled},
                           CASE_TIMEOUT_S * max(1, n))
        if isinstance(reply, dict) and isinstance(reply.get("signal"), int):   # its compiling child killed
            return key, reply["signal"]
        if isinstance(reply, dict) and cache is not None and cache.enabled:
            if reply.get("flat"):
                cache.store_bytes(key, base64.b64decode(reply["flat"]), {"cases": n})
            elif reply.get("stage") == "compile" and reply.get("status") == "unsupported":
                self._store_failure(key, reply)
        return key, reply

    def _store_failure(self, key: str, reply: dict) -> None:
        """A refusal kept: its reason, and for a batch the cases the converter named and whether
        it killed the runner."""
        cache = self.compiled_cache
        if cache is not None and cache.enabled:
            cache.store_failure(key, str(reply.get("reason", "")), located=reply.get("located") or [],
                                killed=bool(reply.get("killed")))

    def _split(self, items: list, halved: bool = False, apart: bool = False) -> list[Outcome]:
        """One outcome per case of ``items``: the cases as one batch; when it fails, the cases
        the converter names run alone and the others as a batch again; a failure naming none
        splits the batch in two halves, and a half failing so runs each case alone (the
        single-case path, whose verdict and reason are the case's own). Once a batch killed the
        runner, its parts are compiled ``apart`` (in a child of the runner, which survives)."""
        if len(items) <= 1:
            return [self._single(it, apart) for it in items]
        try:
            return self._batch(items, apart)
        except _Refused as e:
            named, apart = sorted(set(e.cases)), apart or e.killed
        if not named and halved:
            named = list(range(len(items)))
        if not named:
            mid = len(items) // 2
            return self._split(items[:mid], True, apart) + self._split(items[mid:], True, apart)
        alone = {k: self._single(items[k], apart) for k in named}
        rest = iter(self._split([it for k, it in enumerate(items) if k not in alone], False, apart))
        return [alone[k] if k in alone else next(rest) for k in range(len(items))]

    def _single(self, case, apart: bool = False) -> Outcome:
        try:
            built = tflite_model.build(case)
        except Exception as e:
            return Outcome.from_exception(e)
        _, r = self._compile_and_run(built.content, [_tensor(case.inputs[ci]) for ci in built.input_indices], 1,
                                     apart)
        if isinstance(r, int):   # killed by a signal while running this one case: its crash (the
            # worker goes on: a worker killed with it would be restarted and its batch run again alone)
            tail = self._proc.tail() if self._proc is not None else ""
            o = Outcome.error(f"the TOSA runner (tosa-converter-for-tflite, tosa-opt, tosa_reference_model"
                              + ("; the converter in a child process" if apart else "")
                              + f") was killed by {signal_name(r)} (signal {r}) while running this case"
                              + (f"; stderr: {tail}" if tail else ""), status="crash")
            o.info["signal"] = signal_name(r)
            return o
        return _outcome(case, r)

    def _batch(self, cases, apart: bool = False) -> list[Outcome]:
        """One model holding every case's operator (its own tensors, inputs and outputs); any
        refusal, a runner killed, or outputs that do not add up split the batch."""
        content, runtime = build_merged(cases)
        key, r = self._compile_and_run(
            content, [_tensor(c.inputs[ci]) for c, rt in zip(cases, runtime) for ci in rt], len(cases), apart)
        counts = [len(c.outputs) for c in cases]
        if isinstance(r, int):   # (kept as the batch's failure: the next run splits it at once)
            r = {"status": "error", "reason": f"the TOSA runner was killed by signal {r}", "killed": True}
            self._store_failure(key, r)
        if r.get("status") != "ok" or len(r.get("outputs", [])) != sum(counts):
            raise _Refused(str(r.get("reason") or "outputs do not match the cases"),
                           [k for k in r.get("located", []) if isinstance(k, int) and 0 <= k < len(cases)],
                           bool(r.get("killed")))
        info = batch_info(len(cases), r.get("latency_us"))
        outs, k = [], 0
        for c, n in zip(cases, counts):
            outs.append(_outcome(c, {"status": "ok", "outputs": r["outputs"][k:k + n]}, **info))
            k += n
        return outs

    def run(self, cases, timing: Timing) -> list[Outcome]:
        cases = list(cases)
        outs: list[Outcome | None] = [None] * len(cases)
        todo, items = [], []
        S = tflite_model.schema()
        for i, c in enumerate(cases):
            why = self.unsupported(c)
            if why:
                outs[i] = Outcome.unsupported(why)
                continue
            try:   # what tflite_model.build refuses, without serializing a model per case
                _subgraph(c, [S.BufferT()], S)
            except Exception as e:
                outs[i] = Outcome.from_exception(e)
                continue
            todo.append(i)
            items.append(c)
        if todo:
            t0 = time.perf_counter()
            # a batch in case-id order: the same cases make the same model (a cache hit) whatever
            # the test order; tosa-opt refuses unsigned tensors (TOSA has none) without naming
            # a case, so those run alone
            order = sorted(range(len(items)), key=lambda k: items[k].id)
            alone = {k for k in order if any(t.dtype.startswith("uint") for t in (*items[k].inputs, *items[k].outputs))}
            rest = [k for k in order if k not in alone]
            got = dict(zip(rest, self._split([items[k] for k in rest])))
            got.update((k, self._single(items[k])) for k in sorted(alone, key=lambda k: items[k].id))
            got = [got[k] for k in range(len(items))]
            share = round((time.perf_counter() - t0) / len(todo), 6)
            for i, o in zip(todo, got):
                outs[i] = o
                outs[i].info["target_s"] = share   # (batch_size: the merged model's, batch_info)
        return outs

    def run_one(self, case, timing: Timing) -> Outcome:
        return self.run([case], timing)[0]

    def close(self) -> None:
        if getattr(self, "_proc", None) is not None:
            self._proc.close()
            self._proc = None


def cache_dir(option: str | None) -> Path | None:
    """The flatbuffer cache folder: ``tosa`` in the folder --cache-dir or $QCONFORM_CACHE_DIR
    names (``off`` disables it), else ~/.cache/qconform/tosa (not the QNN contexts' folder)."""
    return cache_dir_of(option, DEFAULT_CACHE_DIR, "tosa")


def build_merged(cases: list) -> tuple[bytes, list[list[int]]]:
    """(one .tflite whose one subgraph holds each case's operator, per case the case input of
    each of its subgraph inputs). Case k's tensors are exactly :func:`tflite_model.build`'s,
    named ``c<k>_...``; the subgraph's inputs and outputs are case 0's, then case 1's, ..."""
    S = tflite_model.schema()
    model = S.ModelT()
    model.version = 3
    model.description = f"qconform batch of {len(cases)}"
    buffers = [S.BufferT()]
    codes: dict[int, int] = {}
    tensors, ops, ins, outs, runtime = [], [], [], [], []
    for k, case in enumerate(cases):
        sg, code, rt = _subgraph(case, buffers, S)
        base = len(tensors)
        for t in sg.tensors:
            t.name = f"c{k}_" + (t.name.decode() if isinstance(t.name, bytes) else t.name)
        tensors.extend(sg.tensors)
        for op in sg.operators:
            op.opcodeIndex = codes.setdefault(code, len(codes))
            op.inputs = [i + base if i >= 0 else i for i in op.inputs]
            op.outputs = [i + base for i in op.outputs]
            ops.append(op)
        ins.extend(int(i) + base for i in sg.inputs)
        outs.extend(int(i) + base for i in sg.outputs)
        runtime.append(rt)
    sg = S.SubGraphT()
    sg.tensors, sg.operators, sg.inputs, sg.outputs, sg.name = tensors, ops, ins, outs, "qconform-batch"
    model.operatorCodes, model.subgraphs, model.buffers = tflite_model.operator_codes(S, codes), [sg], buffers
    return tflite_model.serialize(model), runtime


class _Refused(BatchFailed):
    """A batch the tools refused as a whole; ``cases``: the positions its diagnostics name."""

    def __init__(self, reason: str, cases: list[int], killed: bool = False):
        super().__init__(reason)
        self.cases, self.killed = cases, killed


class _Runner:
    """``targets/tosa_runner.py`` run by the TOSA venv's Python, kept for the worker's batches
    (one JSON line a request, one a reply); its stdin closes when the worker ends."""

    def __init__(self):
        self.log = tempfile.TemporaryFile()   # its stderr (the tools' messages), read back if it fails
        # TOSA_MODEL_NO_BACKTRACE: the reference model would attach gdb to itself for a backtrace
        # at every warning and crash (seconds each), and it reads nothing else from the environment
        self.proc = subprocess.Popen([str(venv() / "bin" / "python"), str(RUNNER)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.log,
                                     env={**os.environ, "TOSA_MODEL_NO_BACKTRACE": "1"})
        self.dead = False
        first = self._read(START_TIMEOUT_S)
        if not isinstance(first, dict) or "versions" not in first:
            self.close(kill=True)
            raise RuntimeError(f"the TOSA runner did not start: {self.tail() or first}")
        self.versions = {str(k): str(v) for k, v in first["versions"].items()}

    def ask(self, request: dict, timeout: float) -> dict | int:
        """The reply to ``request``, or the signal number that killed the runner meanwhile."""
        try:
            self.proc.stdin.write(json.dumps(request).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:
            pass   # it died: _read says how
        return self._read(timeout)

    def _read(self, timeout: float) -> dict | int:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            self.close(kill=True)
            raise RuntimeError(f"the TOSA runner gave no reply within {timeout:.0f} s")
        line = self.proc.stdout.readline(MAX_REPLY + 1)
        if line.endswith(b"\n"):
            return json.loads(line)
        if line:   # no end of line within MAX_REPLY
            self.close(kill=True)
            raise RuntimeError(f"the TOSA runner's reply is longer than {MAX_REPLY} bytes")
        self.close()
        if self.proc.returncode is not None and self.proc.returncode < 0:
            return -self.proc.returncode
        raise RuntimeError(f"the TOSA runner failed (exit {self.proc.returncode}): {self.tail()}")

    def tail(self) -> str:
        """The end of its stderr: from a fatal signal's report (the runner's Python stack), if any."""
        self.log.seek(0, os.SEEK_END)
        self.log.seek(max(0, self.log.tell() - 4096))
        text = self.log.read().decode("utf-8", "replace")
        fatal = text.rfind("Fatal Python error")
        lines = [ln.strip() for ln in text[max(fatal, 0):].splitlines()
                 if ln.strip() and not ln.startswith("Extension modules")]
        return " | ".join(lines[:5] if fatal >= 0 else lines[-3:])

    def close(self, kill: bool = False) -> None:
        self.dead = True
        try:
            if kill:
                self.proc.kill()
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stdout.close()


def _tensor(t) -> dict:
    arr = np.ascontiguousarray(np.asarray(t.data).astype(DTYPES[t.dtype].storage)).reshape(t.shape)
    return {"dtype": str(arr.dtype), "shape": list(arr.shape), "data": base64.b64encode(arr.tobytes()).decode()}


def _outcome(case, r: dict, **info) -> Outcome:
    if r.get("status") != "ok":
        return Outcome(r.get("status", "error"), reason=str(r.get("reason", ""))[:2000])
    outputs = []   # in the case's shape when only the rank differs (the lowering keeps a squeezed or
    # rank-0 result); a different element count stays as it came: the judge's shape error
    for o, want in zip(r["outputs"], case.outputs):
        arr = np.frombuffer(base64.b64decode(o["data"]), dtype=o["dtype"]).reshape(o["shape"])
        outputs.append(arr.reshape(want.shape) if arr.size == int(np.prod(want.shape)) else arr)
    return Outcome.ok(outputs, r.get("latency_us", []), **(info or {"latency_scope": "case"}))
