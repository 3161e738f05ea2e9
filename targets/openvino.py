"""``openvino``: Intel's OpenVINO CPU plugin on the QDQ ONNX model the ``ort`` target builds.

``core.compile_model(core.read_model(onnx_bytes, b""), "CPU")``: OpenVINO's low-precision
transformations turn the QuantizeLinear/DequantizeLinear pairs around an op into its int8
kernel, as for an Intel CPU/NPU user's QDQ model. Batches are one merged model compiled once
(targets/ort.py, targets/batching.py): compiling dominates, about the same for one case or many.
"""

from __future__ import annotations

from types import SimpleNamespace

from targets.onnx_model import load_onnx
from targets.ort import OrtTarget

#: the ONNX element types OpenVINO's Python API takes and gives as NumPy arrays (not 4-bit)
_FOUR_BIT = ("int4", "uint4")


def load_openvino():
    """``openvino``, imported on first use (every use goes through here), so that a missing
    openvino makes only this target unavailable."""
    import openvino
    return openvino


class _Session:
    """A compiled model seen through the little of ONNX Runtime's session that targets/ort.py
    uses (``get_outputs``, ``run``)."""

    def __init__(self, compiled):
        self.compiled = compiled
        self.request = compiled.create_infer_request()

    def get_outputs(self):
        return [SimpleNamespace(name=o.get_any_name(), type="") for o in self.compiled.outputs]

    def run(self, names, feeds):
        self.request.infer(feeds)
        return [self.request.get_tensor(n).data.copy() for n in names]


class OpenvinoTarget(OrtTarget):
    name = "openvino"
    description = "OpenVINO CPU plugin, QDQ ONNX model (low-precision transformations)"

    def availability(self):
        try:
            load_onnx()
            load_openvino()
        except Exception as e:   # ImportError or a broken wheel
            return False, f"openvino not importable ({type(e).__name__}: {e}); pip install openvino"
        return True, "openvino CPU"

    def versions(self):
        ov, onnx = load_openvino(), load_onnx()
        return {"openvino": ov.get_version().split("-")[0], "onnx": onnx.__version__}

    def unsupported(self, case):
        for t in list(case.inputs) + list(case.outputs):
            if t.dtype in _FOUR_BIT:
                return f"OpenVINO's Python API has no {t.dtype} arrays to feed or fetch"
        return super().unsupported(case)

    def _core(self):
        if not hasattr(self, "_ov_core"):
            self._ov_core = load_openvino().Core()
        return self._ov_core

    def create_session(self, content: bytes):
        core = self._core()
        model = core.read_model(content, b"")
        return _Session(core.compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": 1}))

    def refused(self, content: bytes, error: Exception, model=None) -> str:
        return f"OpenVINO rejected the model: {_short(error)}"

    def _open(self, content: bytes, prefixes):
        return self.create_session(content), None   # OpenVINO records no per-node placement


def _short(e: Exception) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    # OpenVINO's messages end with its source location; the line before says what it refused
    useful = [ln for ln in lines if not ln.startswith(("Check ", "Exception from", "File "))]
    return (useful[-1] if useful else (lines[-1] if lines else type(e).__name__))[:600]
