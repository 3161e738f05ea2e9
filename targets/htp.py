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
            sess = ort.InferenceSession(model.content, so)
        except Exception as e:
            detail = self._qnn_reason(model, devs)
            raise Unsupported("QNN HTP cannot run the whole model (CPU fallback disabled): "
                              + (f"QNN says: {detail}" if detail else short_error(e))) from None
        try:
            info = sess.get_provider_graph_assignment_info()
        except Exception:
            info = None
        if info is not None and not any(sub.ep_name == "QNNExecutionProvider" and len(sub.get_nodes())
                                         for sub in info):
            raise Unsupported("no node of the model reached QNN HTP (ONNX Runtime folded it to "
                              "constants): HTP computed nothing")
        return sess

    def _qnn_reason(self, model, devs) -> str:
        """Re-create the failing session with verbose logging and keep QNN's own words."""
        import onnxruntime as ort
        import onnxruntime_qnn
        so = self.session_options()
        so.log_severity_level = 0
        so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        so.add_provider_for_devices(devs, {"backend_path": onnxruntime_qnn.get_qnn_htp_path(),
                                           "htp_performance_mode": self.perf_mode})
        lines = _capture_stderr(lambda: ort.InferenceSession(model.content, so))
        import re
        ansi = re.compile(r"\x1b\[[0-9;]*m")
        hits = []
        for ln in lines:
            ln = ansi.sub("", ln)
            m = re.search(r"\[([VIWEF]):onnxruntime:[^\]]*\]\s*(.*)", ln)
            if not m:
                continue
            level, text = m.group(1), m.group(2).strip()
            low = text.lower()
            if "qnn" not in ln.lower() and "htp" not in ln.lower():
                continue
            keep = level in "WEF" or "failed" in low or "error" in low
            noise = ("fallback to cpu" in low or "file mapped weights" in low
                     or "epcontext encryption" in low)
            if not keep or text.endswith(":") or noise:
                continue   # e.g. an empty "Unsupported nodes in QNN EP:" list
            if text not in hits:
                hits.append(text)
        return " | ".join(hits[:3])[:800]

    def run_one(self, case, timing: Timing) -> Outcome:
        return super().run_one(case, timing)


def _capture_stderr(fn) -> list[str]:
    """Lines written to file descriptor 2 (where ONNX Runtime logs) while ``fn`` runs."""
    import os
    import sys
    import tempfile
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            try:
                fn()
            except Exception:
                pass
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        return tmp.read().decode("utf-8", "replace").splitlines()
