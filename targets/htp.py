"""``htp``: ONNX Runtime with onnxruntime-qnn's HTP backend (libQnnHtp.so).

On a Linux x86-64 host the HTP backend runs in simulation. CPU fallback is
disabled (``session.disable_cpu_ep_fallback=1``), so a model that does not run
wholly on HTP fails to load and the case is ``unsupported`` with QNN's reason:
nothing silently runs on the CPU.
"""

from __future__ import annotations

import threading

from suite.errors import Unsupported

from . import onnx_model
from .base import Outcome, Timing
from .ort import OrtTarget, short_error

_registered = False
_lock = threading.Lock()


def register_qnn():
    """Register the QNN execution provider library once per process; returns its devices."""
    global _registered
    import onnxruntime as ort
    import onnxruntime_qnn
    with _lock:
        if not _registered:
            try:
                ort.register_execution_provider_library("QNNExecutionProvider",
                                                        onnxruntime_qnn.get_library_path())
            except Exception as e:  # already registered by someone else in this process
                if "already" not in str(e).lower():
                    raise
            _registered = True
    return [d for d in ort.get_ep_devices() if d.ep_name == "QNNExecutionProvider"]


class HtpTarget(OrtTarget):
    name = "htp"
    description = "Qualcomm HTP through onnxruntime-qnn (simulated on x86-64), CPU fallback disabled"

    def availability(self):
        try:
            import onnxruntime  # noqa: F401
            import onnxruntime_qnn  # noqa: F401
        except Exception as e:
            return False, f"onnxruntime-qnn not importable ({type(e).__name__}: {e}); pip install onnxruntime-qnn"
        try:
            devs = register_qnn()
        except Exception as e:
            return False, f"QNN execution provider failed to register: {short_error(e)}"
        if not devs:
            return False, "QNN execution provider registered but reports no device"
        return True, "onnxruntime-qnn HTP backend"

    def versions(self):
        import onnxruntime
        import onnxruntime_qnn
        v = {"onnxruntime": onnxruntime.__version__, "onnxruntime-qnn": onnxruntime_qnn.__version__,
             "htp_performance_mode": self.perf_mode}
        try:
            from onnxruntime_qnn import build_and_package_info as info
            v["qnn_sdk"] = getattr(info, "qnn_version", "unknown")
        except Exception:
            pass
        return v

    @property
    def perf_mode(self) -> str:
        return str(self.options.get("htp_performance_mode", "burst"))

    def session(self, model: onnx_model.OnnxModel):
        import onnxruntime as ort
        import onnxruntime_qnn
        devs = register_qnn()
        so = self.session_options()
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        so.add_provider_for_devices(devs, {
            "backend_path": onnxruntime_qnn.get_qnn_htp_path(),
            "htp_performance_mode": self.perf_mode,
        })
        try:
            return ort.InferenceSession(model.content, so)
        except Exception as e:
            raise Unsupported(f"QNN HTP cannot run the whole model (CPU fallback disabled): "
                              f"{short_error(e)}") from None

    def run_one(self, case, timing: Timing) -> Outcome:
        out = super().run_one(case, timing)
        out.info["placement"] = "all nodes on QNNExecutionProvider (CPU fallback disabled)"
        return out
