"""Build a single-operator .tflite flatbuffer for a case, with exact quantization.

The model holds only the operator under test: runtime inputs are the case's
non-constant inputs (quantized codes), constants (weights, bias, shapes, axes)
are buffers, and the outputs are the quantized output tensors. Options come from
``case.attrs``, named as the schema's option fields in snake_case.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from suite.core.dtypes import pack_int4
from suite.core.errors import Unsupported
from suite.core.spec import input_is_const

# op -> options table name (None: the op has no options)
OPTIONS = {
    "ADD": "AddOptions", "SUB": "SubOptions", "MUL": "MulOptions",
    "AVERAGE_POOL_2D": "Pool2DOptions", "MAX_POOL_2D": "Pool2DOptions",
    "CONCATENATION": "ConcatenationOptions", "CONV_2D": "Conv2DOptions",
    "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions", "FULLY_CONNECTED": "FullyConnectedOptions",
    "L2_NORMALIZATION": "L2NormOptions", "LOGISTIC": None, "TANH": None,
    "SOFTMAX": "SoftmaxOptions", "LOG_SOFTMAX": "LogSoftmaxOptions",
    "RESHAPE": "ReshapeOptions", "RESIZE_BILINEAR": "ResizeBilinearOptions",
    "SPACE_TO_DEPTH": "SpaceToDepthOptions", "PAD": "PadOptions", "PADV2": "PadV2Options",
    "GATHER": "GatherOptions", "BATCH_TO_SPACE_ND": "BatchToSpaceNDOptions",
    "SPACE_TO_BATCH_ND": "SpaceToBatchNDOptions", "TRANSPOSE": "TransposeOptions",
    "MEAN": "ReducerOptions", "SUM": "ReducerOptions", "SQUEEZE": "SqueezeOptions",
    "MAXIMUM": "MaximumMinimumOptions", "MINIMUM": "MaximumMinimumOptions",
    "ARG_MAX": "ArgMaxOptions", "ARG_MIN": "ArgMinOptions",
    "LESS": "LessOptions", "LESS_EQUAL": "LessEqualOptions", "GREATER": "GreaterOptions",
    "GREATER_EQUAL": "GreaterEqualOptions", "EQUAL": "EqualOptions", "NOT_EQUAL": "NotEqualOptions",
    "SLICE": "SliceOptions", "SHAPE": "ShapeOptions", "QUANTIZE": "QuantizeOptions",
    "DEQUANTIZE": "DequantizeOptions", "TRANSPOSE_CONV": "TransposeConvOptions",
    "HARD_SWISH": "HardSwishOptions", "LEAKY_RELU": "LeakyReluOptions", "RELU": None, "RELU6": None,
    "STRIDED_SLICE": "StridedSliceOptions", "BATCH_MATMUL": "BatchMatMulOptions",
}

# enum-valued option fields: snake name -> schema enum class name
ENUM_FIELDS = {
    "padding": "Padding",
    "fused_activation_function": "ActivationFunctionType",
    "output_type": "TensorType",
    "out_type": "TensorType",
}

TENSOR_TYPES = {
    "float32": "FLOAT32", "int32": "INT32", "uint8": "UINT8", "int64": "INT64", "bool": "BOOL",
    "int16": "INT16", "int8": "INT8", "uint16": "UINT16", "int4": "INT4", "uint4": "UINT4",
}
#: the tensor types a Python runtime feeds and fetches as NumPy arrays (NumPy has no 4-bit ones)
FED_DTYPES = frozenset(TENSOR_TYPES) - {"int4", "uint4"}


def refusal(case, dtypes: set[str], no_dtype: str) -> str | None:
    """Why a runtime taking this module's .tflite cannot express ``case``: a tensor type outside
    ``dtypes`` (``no_dtype`` formatted with it), or an op with no builtin mapping; else None."""
    for t in list(case.inputs) + list(case.outputs):
        if t.dtype not in dtypes:
            return no_dtype.format(t.dtype)
    if case.op not in OPTIONS:
        return f"no TFLite builtin mapping for {case.op}"
    return None


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


@dataclass
class BuiltModel:
    content: bytes
    input_indices: list[int]   # case input index of each model input, in order


# The runtime, imported on first use: this module (and targets.tflite, targets.netrun and
# targets.remote, which import it) must load without LiteRT, so that a missing ai-edge-litert
# makes those targets unavailable (their availability() calls schema()) instead of breaking
# the import. Every use goes through schema() and serialize().

def schema():
    """LiteRT's generated flatbuffer schema classes (``ai_edge_litert.schema_py_generated``;
    importing them needs ``flatbuffers`` too)."""
    from ai_edge_litert import schema_py_generated as S
    return S


def serialize(model) -> bytes:
    """A schema ``ModelT`` as .tflite bytes."""
    import flatbuffers
    b = flatbuffers.Builder(1024)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def build(case):
    """Serialize a one-op model for ``case``. Raises Unsupported for what it cannot express."""
    S = schema()
    model = S.ModelT()
    model.version = 3
    model.description = f"qconform {case.id}"
    buffers = [S.BufferT()]   # buffer 0 is the empty sentinel
    sg, opcode_builtin, runtime_inputs = _subgraph(case, buffers, S)
    model.operatorCodes = operator_codes(S, [opcode_builtin])
    model.subgraphs = [sg]
    model.buffers = buffers
    return BuiltModel(serialize(model), runtime_inputs)


def operator_codes(S, codes) -> list:
    """The OperatorCodeT of each builtin operator code in ``codes``, in order (a model's table)."""
    ocs = []
    for code in codes:
        oc = S.OperatorCodeT()
        oc.builtinCode = code
        oc.deprecatedBuiltinCode = min(code, 127)
        oc.version = 1
        ocs.append(oc)
    return ocs


def _tensor(S, case_tensor, name, buffer_index):
    t = S.TensorT()
    t.name = name
    t.shape = [int(d) for d in case_tensor.shape]
    try:
        t.type = getattr(S.TensorType, TENSOR_TYPES[case_tensor.dtype])
    except KeyError:
        raise Unsupported(f"LiteRT has no tensor type for {case_tensor.dtype}") from None
    t.buffer = buffer_index
    if case_tensor.scale is not None:
        q = S.QuantizationParametersT()
        q.scale = [float(np.float32(s)) for s in case_tensor.scale]
        q.zeroPoint = [int(z) for z in case_tensor.zero_point]
        q.quantizedDimension = int(case_tensor.quantized_dimension)
        t.quantization = q
    return t


def _buffer(S, tensor):
    b = S.BufferT()
    arr = np.asarray(tensor.data)
    if tensor.dtype in ("int4", "uint4"):
        raw = pack_int4(arr)
    elif tensor.dtype == "bool":
        raw = arr.astype(np.uint8)
    else:
        raw = np.ascontiguousarray(arr).astype(arr.dtype.newbyteorder("<"), copy=False)
    b.data = np.frombuffer(raw.tobytes(), dtype=np.uint8)
    return b


def _options(S, case):
    opt_name = OPTIONS.get(case.op)
    if opt_name is None:
        return None, 0
    cls = getattr(S, opt_name + "T")
    o = cls()
    fields = set(vars(o))
    for key, value in case.attrs.items():
        camel = _camel(key)
        if camel not in fields:
            continue  # attrs the schema does not carry (checked against the spec table elsewhere)
        if key in ENUM_FIELDS and isinstance(value, str):
            enum = getattr(S, ENUM_FIELDS[key])
            if key in ("output_type", "out_type"):
                value = TENSOR_TYPES.get(value, value)
            try:
                value = getattr(enum, value)
            except AttributeError:
                raise Unsupported(f"{key}={value!r} is not a LiteRT {ENUM_FIELDS[key]}") from None
        elif isinstance(value, list):
            value = [int(v) for v in value]
        setattr(o, camel, value)
    return o, getattr(S.BuiltinOptions, opt_name)


def _subgraph(case, buffers, S):
    try:
        code = getattr(S.BuiltinOperator, case.op)
    except AttributeError:
        raise Unsupported(f"LiteRT has no builtin operator {case.op}") from None
    sg = S.SubGraphT()
    tensors = []
    op_inputs, sg_inputs, runtime = [], [], []
    for i, t in enumerate(case.inputs):
        if t.data is None:
            op_inputs.append(-1)
            continue
        if input_is_const(case, i):
            buffers.append(_buffer(S, t))
            tensors.append(_tensor(S, t, f"input{i}", len(buffers) - 1))
        else:
            buffers.append(S.BufferT())
            tensors.append(_tensor(S, t, f"input{i}", len(buffers) - 1))
            sg_inputs.append(len(tensors) - 1)
            runtime.append(i)
        op_inputs.append(len(tensors) - 1)
    outs = []
    for i, t in enumerate(case.outputs):
        buffers.append(S.BufferT())
        tensors.append(_tensor(S, t, f"output{i}", len(buffers) - 1))
        outs.append(len(tensors) - 1)
    op = S.OperatorT()
    op.opcodeIndex = 0
    op.inputs = op_inputs
    op.outputs = outs
    opts, opts_type = _options(S, case)
    if opts is not None:
        op.builtinOptionsType = opts_type
        op.builtinOptions = opts
    sg.tensors = tensors
    sg.inputs = sg_inputs
    sg.outputs = outs
    sg.operators = [op]
    sg.name = case.id
    return sg, code, runtime
