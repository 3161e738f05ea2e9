"""LiteRT targets: ``tflite`` (default kernels, XNNPACK) and ``tflite-ref`` (reference kernels).

The model for a case is a one-operator .tflite flatbuffer built by
:mod:`targets.tflite_model`; a batch is one .tflite with one such subgraph (and one
SignatureDef) per case (:func:`targets.batching.build_tflite_batch`), each invoked and
timed on its own. ai-edge-litert is the maintained successor of
tflite-runtime (which stopped at 2.14 in 2023).
"""

from __future__ import annotations

import time
from importlib.metadata import version

import numpy as np

from suite.core.dtypes import DTYPES
from suite.core.errors import Unsupported

from targets import tflite_model
from targets.base import Outcome, Target, Timing
from targets.batching import BatchFailed, BatchStats, bisect, build_tflite_batch


def load_interpreter():
    """``ai_edge_litert.interpreter``, imported on first use (every use goes through here): this
    module must load without LiteRT, so that a missing ai-edge-litert makes the target unavailable."""
    from ai_edge_litert import interpreter
    return interpreter


class _LiteRT(Target):
    resolver = "AUTO"
    #: no case runs alone for its latency: in a batch each case's subgraph is invoked on its own,
    #: so its latency is already its own (``latency_scope`` "case"); alone it would cost a model more
    latency_cases = 0

    def availability(self):
        try:
            load_interpreter()
            tflite_model.schema()   # the model builder's half (it needs flatbuffers)
        except Exception as e:  # ImportError or a broken wheel
            return False, f"ai-edge-litert is not importable ({type(e).__name__}: {e}); pip install ai-edge-litert"
        return True, "ai-edge-litert"

    def versions(self):
        return {"ai-edge-litert": version("ai-edge-litert"), "op_resolver": self.resolver}

    #: element types LiteRT's builtin kernels compute on as quantized activations
    KERNEL_DTYPES = {"int8", "uint8", "int16", "int32", "int64", "float32", "bool", "int4"}

    def unsupported(self, case):
        for t in list(case.inputs) + list(case.outputs):
            if t.dtype not in tflite_model.TENSOR_TYPES:
                return f"LiteRT has no tensor type {t.dtype}"
            if t.dtype not in self.KERNEL_DTYPES:
                return f"LiteRT's builtin kernels do not compute on {t.dtype} tensors"
        if case.op not in tflite_model.OPTIONS:
            return f"no LiteRT builtin mapping for {case.op}"
        return None

    def _interpreter(self, content: bytes):
        lite = load_interpreter()
        rtype = getattr(lite.OpResolverType, self.resolver)
        it = lite.Interpreter(model_content=content, experimental_op_resolver_type=rtype, num_threads=1)
        it.allocate_tensors()
        return it

    def _max_batch(self) -> int:
        """Cases per model in run() (target option ``max_batch``; the runner's --batch-size
        decides how many cases a run() call gets; 1 = one model and interpreter per case)."""
        return int(self.options.get("max_batch", 256))

    def run(self, cases, timing: Timing) -> list[Outcome]:
        """Run a batch as one .tflite with one subgraph (and SignatureDef) per case.

        Each case's subgraph is allocated, fed and invoked on its own, so its latency is its
        own invoke (``latency_scope`` "case"), as with one model per case. A model that
        LiteRT cannot load or prepare as a whole is split in halves (targets.batching.bisect),
        down to the single-case path."""
        cases = list(cases)
        outs: list[Outcome | None] = [None] * len(cases)
        todo = []
        for i, c in enumerate(cases):
            why = self.unsupported(c)
            if why:
                outs[i] = Outcome.unsupported(why)
            else:
                todo.append(i)
        stats = self.batch_stats
        limit = max(1, self._max_batch())
        for start in range(0, len(todo), limit):
            chunk = todo[start:start + limit]
            res = bisect(chunk, lambda idx: self._run_batch([cases[i] for i in idx], timing),
                         lambda i: self._single(cases[i], timing), stats)
            for i, o in zip(chunk, res):
                outs[i] = o
        return outs

    @property
    def batch_stats(self) -> BatchStats:
        if not hasattr(self, "_batch_stats"):
            self._batch_stats = BatchStats()
        return self._batch_stats

    def _single(self, case, timing: Timing) -> Outcome:
        t0 = time.perf_counter()
        o = self.safe_run_one(case, timing)
        o.info.setdefault("target_s", round(time.perf_counter() - t0, 6))
        return o

    def _run_batch(self, cases: list, timing: Timing) -> list[Outcome]:
        t_start = time.perf_counter()
        try:
            built = build_tflite_batch(cases)
        except Exception as e:
            raise BatchFailed(f"building the batch model: {e}") from None
        stats = self.batch_stats
        t0 = time.perf_counter()
        stats.sessions += 1
        try:
            it = self._interpreter(built.content)   # allocates subgraph 0, applies default delegates
            w = it._interpreter                       # what SignatureRunner drives: per-subgraph calls
        except Exception as e:
            stats.failed += 1
            raise BatchFailed(f"LiteRT rejected the batch model: {e}") from None
        finally:
            stats.session_s += time.perf_counter() - t0
        outs = []
        for k, case in enumerate(cases):
            c0 = time.perf_counter()
            o = self._run_subgraph(w, k, case, built, timing)
            o.info["batch_size"] = len(cases)
            o.info["target_s"] = round(time.perf_counter() - c0, 6)
            outs.append(o)
        shared = (time.perf_counter() - t_start - sum(o.info["target_s"] for o in outs)) / len(cases)
        for o in outs:   # the model build and interpreter creation, shared equally
            o.info["target_s"] = round(o.info["target_s"] + shared, 6)
        return outs

    def _run_subgraph(self, w, k: int, case, built, timing: Timing) -> Outcome:
        """Case ``k`` of a batch model: allocate its subgraph, set its inputs, time its invoke."""
        try:
            w.AllocateTensors(k)
        except Exception as e:
            return Outcome.unsupported(f"LiteRT rejected the model: {_last_line(e)}")
        try:
            for ci, ti in zip(built.runtime_inputs[k], built.input_tensors[k]):
                t = case.inputs[ci]
                w.SetTensor(ti, np.asarray(t.data).astype(DTYPES[t.dtype].storage).reshape(t.shape), k)
            spent = [0.0]

            def invoke():
                t0 = time.perf_counter()
                w.Invoke(k)
                spent[0] += time.perf_counter() - t0

            try:
                _, samples = timing.measure(invoke)
            except RuntimeError as e:
                msg = str(e)
                if "not supported" in msg or "not currently supported" in msg:
                    return Outcome.unsupported(f"LiteRT kernel: {msg.strip().splitlines()[0]}")
                raise
            outputs = [np.array(w.GetTensor(ti, k)) for ti in built.output_tensors[k]]
        except Exception as e:   # this case's error, not the batch's
            return Outcome.from_exception(e)
        return Outcome.ok(outputs, samples, resolver=self.resolver, latency_scope="case",
                          invoke_s=round(spent[0], 6))

    def run_one(self, case, timing: Timing) -> Outcome:
        built = tflite_model.build(case)
        self.batch_stats.sessions += 1
        try:
            it = self._interpreter(built.content)
        except Exception as e:
            raise Unsupported(f"LiteRT rejected the model: {_last_line(e)}") from None
        details = it.get_input_details()
        for det, ci in zip(details, built.input_indices):
            t = case.inputs[ci]
            it.set_tensor(det["index"], np.asarray(t.data).astype(DTYPES[t.dtype].storage).reshape(t.shape))
        outs_det = it.get_output_details()

        spent = [0.0]

        def invoke():
            t0 = time.perf_counter()
            it.invoke()
            spent[0] += time.perf_counter() - t0

        try:
            _, samples = timing.measure(invoke)
        except RuntimeError as e:
            msg = str(e)
            if "not supported" in msg or "not currently supported" in msg:
                raise Unsupported(f"LiteRT kernel: {msg.strip().splitlines()[0]}") from None
            raise
        outputs = [np.array(it.get_tensor(d["index"])) for d in outs_det]
        return Outcome.ok(outputs, samples, resolver=self.resolver, latency_scope="case",
                          invoke_s=round(spent[0], 6))


class TfliteTarget(_LiteRT):
    name = "tflite"
    description = "LiteRT interpreter, default kernels (XNNPACK delegate applied)"
    resolver = "AUTO"


class TfliteRefTarget(_LiteRT):
    name = "tflite-ref"
    description = "LiteRT interpreter, reference kernels (OpResolverType.BUILTIN_REF)"
    resolver = "BUILTIN_REF"
    expected_scheme = "tflite-ref-double"


class TfliteOptTarget(_LiteRT):
    name = "tflite-opt"
    description = "LiteRT interpreter, builtin optimized kernels without default delegates"
    resolver = "BUILTIN_WITHOUT_DEFAULT_DELEGATES"


def _last_line(e: Exception) -> str:
    text = str(e).strip()
    return text.splitlines()[-1] if text else type(e).__name__
