"""``ort``: ONNX Runtime CPU on a QDQ ONNX model (full graph optimization, as users run it)."""

from __future__ import annotations

import numpy as np

from suite.errors import Unsupported

from . import onnx_model
from .base import Outcome, Target, Timing


def short_error(e: Exception) -> str:
    text = str(e).strip()
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return (lines[-1] if lines else type(e).__name__)[:600]


class OrtTarget(Target):
    name = "ort"
    description = "ONNX Runtime CPU execution provider, QDQ model, ORT_ENABLE_ALL"

    def availability(self):
        try:
            import onnx  # noqa: F401
            import onnxruntime  # noqa: F401
        except Exception as e:
            return False, f"onnx/onnxruntime not importable ({type(e).__name__}: {e}); pip install onnx onnxruntime"
        return True, "onnxruntime"

    def versions(self):
        import onnx
        import onnxruntime
        return {"onnxruntime": onnxruntime.__version__, "onnx": onnx.__version__,
                "opset": str(onnx_model.OPSET)}

    def unsupported(self, case):
        if case.op not in onnx_model.supported_ops():
            return f"no ONNX mapping for {case.op}"
        return None

    def session_options(self):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
        return so

    def session(self, model: onnx_model.OnnxModel):
        import onnxruntime as ort
        try:
            return ort.InferenceSession(model.content, self.session_options(),
                                        providers=["CPUExecutionProvider"])
        except Exception as e:
            raise Unsupported(f"ONNX Runtime rejected the model: {short_error(e)}") from None

    def run_one(self, case, timing: Timing) -> Outcome:
        model = onnx_model.build(case)
        sess = self.session(model)
        feeds = model.feeds(case)
        names = [o.name for o in model.outputs]
        kinds = {o.name: o.type for o in sess.get_outputs()}
        if any(kinds.get(n) in ("tensor(int4)", "tensor(uint4)") for n in names):
            invoke = lambda: onnx_model.run_session(sess, names, feeds)   # noqa: E731 (4-bit outputs)
        else:
            invoke = lambda: sess.run(names, feeds)   # noqa: E731
        outs, samples = timing.measure(invoke)
        return Outcome.ok(model.unpack(outs), samples, nodes=",".join(model.op_types),
                          **self.placement(sess))

    def placement(self, sess) -> dict:
        """Which execution provider ran which nodes (as ONNX Runtime recorded it)."""
        try:
            info = sess.get_provider_graph_assignment_info()
        except Exception:
            return {}
        parts = []
        for sub in info:
            ops = [n[1] if isinstance(n, tuple) else getattr(n, "op_type", str(n)) for n in sub.get_nodes()]
            parts.append(f"{sub.ep_name}: {','.join(ops)}")
        return {"placement": "; ".join(parts) if parts else "no node (constant-folded)"}
