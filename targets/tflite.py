"""LiteRT targets: ``tflite`` (default kernels, XNNPACK) and ``tflite-ref`` (reference kernels).

The model for a case is a one-operator .tflite flatbuffer built by
:mod:`targets.tflite_model`. ai-edge-litert is the maintained successor of
tflite-runtime (which stopped at 2.14 in 2023).
"""

from __future__ import annotations

import numpy as np

from suite.dtypes import DTYPES
from suite.errors import Unsupported

from . import tflite_model
from .base import Outcome, Target, Timing


class _LiteRT(Target):
    resolver = "AUTO"

    def availability(self):
        try:
            import ai_edge_litert.interpreter  # noqa: F401
            import flatbuffers  # noqa: F401
        except Exception as e:  # ImportError or a broken wheel
            return False, f"ai-edge-litert is not importable ({type(e).__name__}: {e}); pip install ai-edge-litert"
        return True, "ai-edge-litert"

    def versions(self):
        from importlib.metadata import version
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
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
        rtype = getattr(OpResolverType, self.resolver)
        it = Interpreter(model_content=content, experimental_op_resolver_type=rtype, num_threads=1)
        it.allocate_tensors()
        return it

    def run_one(self, case, timing: Timing) -> Outcome:
        built = tflite_model.build(case)
        try:
            it = self._interpreter(built.content)
        except Exception as e:
            raise Unsupported(f"LiteRT rejected the model: {str(e).strip().splitlines()[-1] if str(e).strip() else e}")
        details = it.get_input_details()
        for det, ci in zip(details, built.input_indices):
            t = case.inputs[ci]
            it.set_tensor(det["index"], np.asarray(t.data).astype(DTYPES[t.dtype].storage).reshape(t.shape))
        outs_det = it.get_output_details()

        def invoke():
            it.invoke()

        try:
            _, samples = timing.measure(invoke)
        except RuntimeError as e:
            msg = str(e)
            if "not supported" in msg or "not currently supported" in msg:
                raise Unsupported(f"LiteRT kernel: {msg.strip().splitlines()[0]}") from None
            raise
        outputs = [np.array(it.get_tensor(d["index"])) for d in outs_det]
        return Outcome.ok(outputs, samples, resolver=self.resolver)


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
