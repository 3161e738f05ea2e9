"""A qconform target around a C int8 CONV_2D kernel (``conv.c`` next to this file), via ctypes.

Certify it::

    cc -shared -fPIC -O2 examples/kernels/c_conv/conv.c -o /tmp/libqcconv.so
    QC_CONV_LIB=/tmp/libqcconv.so pytest --target=examples.kernels.c_conv.target:CConvTarget \\
        --ops CONV_2D --tolerance examples/kernels/bit-exact.toml

The glue does what a runtime's "prepare" step does: it resolves SAME/VALID padding
into top/left offsets, computes the fused activation's clamp bounds in output
codes, and hands the C function raw int8 buffers in the case's layouts (NHWC
input and output, OHWI filter, int32 bias). A team copies this file and ``conv.c``,
replaces the kernel behind ``qc_conv2d_int8``, and keeps the rest.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from pathlib import Path

import numpy as np

from targets.base import Outcome, Target, Timing

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "conv.c"
LIB_ENV = "QC_CONV_LIB"

_I32 = ctypes.c_int32


class ConvParams(ctypes.Structure):
    """Mirror of ``qc_conv_params`` in conv.c (same order, same types)."""
    _fields_ = [(n, _I32) for n in ("batch", "in_h", "in_w", "in_c", "out_h", "out_w", "out_c",
                                    "k_h", "k_w", "filter_c", "stride_h", "stride_w", "dil_h", "dil_w",
                                    "pad_top", "pad_left", "input_zp", "output_zp", "act_min", "act_max")] + [
        ("input_scale", ctypes.c_float), ("output_scale", ctypes.c_float),
        ("filter_scales", ctypes.POINTER(ctypes.c_float)), ("n_filter_scales", _I32)]


ERRORS = {1: "bad shape (channels not a multiple of the groups)", 2: "bad number of filter scales"}


def build_library(out: str | os.PathLike, buggy: bool = False, cc: str = "cc") -> Path:
    """Compile conv.c into a shared library (``-DQC_BUGGY``: the deliberately wrong variant)."""
    out = Path(out)
    cmd = [cc, "-shared", "-fPIC", "-O2", *(["-DQC_BUGGY"] if buggy else []), str(SOURCE), "-o", str(out), "-lm"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


def same_or_valid(n: int, k: int, stride: int, dil: int, padding: str) -> tuple[int, int]:
    """(output size, padding before) as LiteRT computes them (ComputePaddingHeightWidth)."""
    eff = (k - 1) * dil + 1
    if padding == "SAME":
        out = (n + stride - 1) // stride
    else:
        out = (n - eff + stride) // stride
    total = (out - 1) * stride + eff - n
    return out, max(total // 2, 0)


def activation_bounds(act: str, scale: float, zp: int) -> tuple[int, int]:
    """Clamp bounds of a fused activation in int8 codes (float32 division, rounded half away)."""
    def quant(f: float) -> int:
        v = float(np.float32(f) / np.float32(scale))
        return zp + int(np.sign(v) * np.floor(abs(v) + 0.5))
    lo, hi = -128, 127
    if act == "RELU":
        return max(lo, quant(0.0)), hi
    if act == "RELU6":
        return max(lo, quant(0.0)), min(hi, quant(6.0))
    if act == "RELU_N1_TO_1":
        return max(lo, quant(-1.0)), min(hi, quant(1.0))
    return lo, hi


class CConvTarget(Target):
    name = "c-conv"
    description = "an int8 CONV_2D kernel in C (examples/kernels/c_conv/conv.c) through ctypes"
    expected_scheme = "tflite-ref-double"

    def __init__(self, **options):
        super().__init__(**options)
        self.lib_path = options.get("lib") or os.environ.get(LIB_ENV)
        self._fn = None

    def availability(self):
        if not self.lib_path:
            return False, (f"set {LIB_ENV} to the compiled kernel (cc -shared -fPIC -O2 {SOURCE} "
                           f"-o libqcconv.so)")
        if not Path(self.lib_path).exists():
            return False, f"{LIB_ENV}={self.lib_path}: no such file"
        return True, f"C kernel {self.lib_path}"

    def versions(self):
        return {"library": str(self.lib_path)}

    def unsupported(self, case):
        if case.op != "CONV_2D":
            return f"this kernel implements CONV_2D only, not {case.op}"
        kinds = [t.dtype for t in case.inputs[:2]] + [case.outputs[0].dtype]
        if kinds != ["int8", "int8", "int8"]:
            return f"int8 input/filter/output only (got {'/'.join(kinds)})"
        if len(case.inputs) > 2 and case.inputs[2].data is not None and case.inputs[2].dtype != "int32":
            return f"int32 bias only (got {case.inputs[2].dtype})"
        return None

    def _function(self):
        if self._fn is None:
            lib = ctypes.CDLL(str(self.lib_path))
            fn = lib.qc_conv2d_int8
            fn.argtypes = [ctypes.POINTER(ConvParams), ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                           ctypes.c_void_p]
            fn.restype = ctypes.c_int
            self._fn = fn
        return self._fn

    def run_one(self, case, timing: Timing) -> Outcome:
        x_t, w_t, out_t = case.inputs[0], case.inputs[1], case.outputs[0]
        a = case.attrs
        n, h, w, cin = x_t.shape
        o, kh, kw, cw = w_t.shape
        sh, sw = int(a.get("stride_h", 1)), int(a.get("stride_w", 1))
        dh, dw = int(a.get("dilation_h_factor", 1)), int(a.get("dilation_w_factor", 1))
        padding = a.get("padding", "VALID")
        oh, pt = same_or_valid(h, kh, sh, dh, padding)
        ow, pl = same_or_valid(w, kw, sw, dw, padding)
        x = np.ascontiguousarray(np.asarray(x_t.data, np.int8).reshape(x_t.shape))
        f = np.ascontiguousarray(np.asarray(w_t.data, np.int8).reshape(w_t.shape))
        bias = None
        if len(case.inputs) > 2 and case.inputs[2].data is not None:
            bias = np.ascontiguousarray(np.asarray(case.inputs[2].data, np.int32).reshape(-1))
        scales = np.ascontiguousarray(np.asarray(w_t.scale, np.float32))
        lo, hi = activation_bounds(a.get("fused_activation_function", "NONE") or "NONE",
                                   out_t.scale[0], int(out_t.zero_point[0]))
        p = ConvParams(n, h, w, cin, oh, ow, o, kh, kw, cw, sh, sw, dh, dw, pt, pl,
                       int(x_t.zero_point[0]), int(out_t.zero_point[0]), lo, hi,
                       float(x_t.scale[0]), float(out_t.scale[0]),
                       scales.ctypes.data_as(ctypes.POINTER(ctypes.c_float)), len(scales))
        out = np.empty((n, oh, ow, o), np.int8)
        fn = self._function()
        rc = [0]

        def invoke():
            rc[0] = fn(ctypes.byref(p), x.ctypes.data, f.ctypes.data,
                       None if bias is None else bias.ctypes.data, out.ctypes.data)
        _, samples = timing.measure(invoke)
        if rc[0] != 0:
            return Outcome.error(f"qc_conv2d_int8 returned {rc[0]}: {ERRORS.get(rc[0], 'unknown error')}")
        return Outcome.ok([out.copy()], samples)
