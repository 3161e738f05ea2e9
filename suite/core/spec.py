"""Spec tables: the quantization rules each operator must follow, as data.

Tables live in ``suite/core/tables/*.toml`` (one file per specification). This module
loads them, resolves each tensor's role defaults, and checks a case against its
table, naming the clause that a violation breaks.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from suite.core.dtypes import DTYPES
from suite.core.userfile import tomllib   # (tomli on Python 3.10)

SPEC_DIR = Path(__file__).parent / "tables"

# ----------------------------------------------------------------------------- op options

#: Every option a case may give (``attrs``): its type and bounds, checked where a case enters
#: (:func:`check_case`), and its value when absent (``REQUIRED``: it must be given). The defaults
#: are written into a case when it is read (:func:`with_defaults`), so the golden and every target
#: read one value: LiteRT's schema would give an absent stride, beta or alpha 0.
#: ("int", lo, hi) | ("float", lo, hi) (lo excluded when > 0) | ("bool",) | ("enum", values) |
#: ("ints", lo, hi, max length) | ("str",)
REQUIRED = object()
SIZE_MAX = 1 << 16   # windows, strides, dilations: no real model comes near; bounds the golden's work
RANK_MAX = 8
ATTRS: dict[str, tuple[tuple, Any]] = {
    "padding": (("enum", ("SAME", "VALID")), "SAME"),
    "fused_activation_function": (("enum", ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")), "NONE"),
    "stride_h": (("int", 1, SIZE_MAX), 1), "stride_w": (("int", 1, SIZE_MAX), 1),
    "dilation_h_factor": (("int", 1, SIZE_MAX), 1), "dilation_w_factor": (("int", 1, SIZE_MAX), 1),
    "filter_height": (("int", 1, SIZE_MAX), REQUIRED), "filter_width": (("int", 1, SIZE_MAX), REQUIRED),
    "depth_multiplier": (("int", 1, SIZE_MAX), None),
    "keep_dims": (("bool",), False), "keep_num_dims": (("bool",), False), "align_corners": (("bool",), False),
    "half_pixel_centers": (("bool",), False), "adj_x": (("bool",), False), "adj_y": (("bool",), False),
    "offset": (("bool",), False),
    "beta": (("float", 0.0, float(SIZE_MAX)), 1.0),
    "alpha": (("float", -float(SIZE_MAX), float(SIZE_MAX)), 0.2),
    "axis": (("int", -RANK_MAX, RANK_MAX - 1), None), "batch_dims": (("int", -RANK_MAX, RANK_MAX - 1), None),
    "block_size": (("int", 0, SIZE_MAX), None),
    "begin_mask": (("int", 0, (1 << RANK_MAX) - 1), None), "end_mask": (("int", 0, (1 << RANK_MAX) - 1), None),
    "ellipsis_mask": (("int", 0, (1 << RANK_MAX) - 1), None),
    "new_axis_mask": (("int", 0, (1 << RANK_MAX) - 1), None),
    "shrink_axis_mask": (("int", 0, (1 << RANK_MAX) - 1), None),
    "new_shape": (("ints", -1, (1 << 31) - 1, RANK_MAX), None),
    "squeeze_dims": (("ints", -RANK_MAX, RANK_MAX - 1, RANK_MAX), None),
    "output_type": (("enum", ("int32", "int64")), None), "out_type": (("enum", ("int32", "int64")), None),
}
#: the golden's largest intermediate array (a padded input, a convolution's gathered taps), in
#: elements: 2^27, 1 GiB at 8 bytes (docs/case-format.md)
WORK_MAX = 1 << 27
#: the elements a case's outputs (and a broadcast, a padding) may hold beyond its inputs': at least
#: OUTPUT_FLOOR, else OUTPUT_GROWTH x the inputs' elements (an upsampling, a bias broadcast) (docs/case-format.md)
OUTPUT_FLOOR = 1 << 22
OUTPUT_GROWTH = 16
#: the element-wise ops whose two inputs broadcast (reference/common.py binary_operands)
BROADCASTING = frozenset({"ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "EQUAL", "NOT_EQUAL", "GREATER",
                          "GREATER_EQUAL", "LESS", "LESS_EQUAL"})


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def attr_problem(name: str, v) -> str | None:
    """Why option ``name`` cannot be ``v`` (None: it can)."""
    kind = ATTRS[name][0]
    if kind[0] == "int" and not (_is_int(v) and kind[1] <= v <= kind[2]):
        return f"must be an integer in [{kind[1]}, {kind[2]}] (got {v!r})"[:200]
    if kind[0] == "bool" and not isinstance(v, bool):
        return f"must be true or false (got {v!r})"[:200]
    if kind[0] == "enum" and v not in kind[1]:
        return f"must be one of {', '.join(kind[1])} (got {v!r})"[:200]
    if kind[0] == "float":
        try:
            f = float(v) if _is_int(v) or isinstance(v, float) else None
        except OverflowError:   # an integer beyond the float range
            f = None
        lo, hi = kind[1], kind[2]
        if f is None or not math.isfinite(f) or f > hi or (f <= lo if lo >= 0 else f < lo):
            low = f"({lo:g}" if lo >= 0 else f"[{lo:g}"
            return f"must be a finite number in {low}, {hi:g}] (got {v!r})"[:200]
    if kind[0] == "ints" and not (isinstance(v, list) and len(v) <= kind[3]
                                  and all(_is_int(e) and kind[1] <= e <= kind[2] for e in v)):
        return f"must be a list of at most {kind[3]} integers in [{kind[1]}, {kind[2]}] (got {v!r})"[:200]
    return None


def with_defaults(op: str, table_name: str, attrs: dict) -> dict:
    """``attrs`` with every absent option of ``op`` that has a default set to it."""
    try:
        names = rule(op, table_name).attrs
    except KeyError:
        return attrs
    filled = {n: ATTRS[n][1] for n in names if n in ATTRS and n not in attrs
              and ATTRS[n][1] is not None and ATTRS[n][1] is not REQUIRED}
    return {**attrs, **filled} if filled else attrs


@dataclass(frozen=True)
class TensorRule:
    name: str
    role: str
    dtypes: tuple[str, ...]
    range: tuple[int, int] | None
    granularity: str | tuple[str, ...] | None  # "per-tensor" | "per-axis" | "blocked" (or several) | None
    axis: int | None = None       # per-axis dimension
    zero_point: int | None = None  # required zero point
    bias_scale: str | None = None
    quantized: bool = True
    const: bool = False
    optional: bool = False
    variadic: bool = False
    layout: str | None = None
    axis_attr: str | None = None      # the op option naming the quantized axis (ONNX "axis")
    axis_default: int | None = None   # its default when the case omits it
    block_attr: str | None = None     # the op option naming a blocked scale's block size


@dataclass(frozen=True)
class OpRule:
    table: str
    op: str
    source: str
    inputs: tuple[TensorRule, ...]
    outputs: tuple[TensorRule, ...]
    attrs: tuple[str, ...] = ()
    same_scale: bool = False
    fixed_output: tuple[float, int] | None = None
    fixed_output_text: str | None = None
    note: str = ""

    def clause(self, *parts: str) -> str:
        return "/".join((self.table, self.op) + tuple(p for p in parts if p))

    def input_rule(self, i: int) -> TensorRule | None:
        if not self.inputs:
            return None
        if self.inputs[-1].variadic and i >= len(self.inputs) - 1:
            return self.inputs[-1]
        return self.inputs[i] if i < len(self.inputs) else None


@dataclass
class Violation:
    clause: str
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message} [{self.clause}]"


@dataclass
class SpecTable:
    name: str
    title: str
    ops: dict[str, OpRule] = field(default_factory=dict)


def _tensor_rule(raw: dict[str, Any], roles: dict[str, dict[str, Any]]) -> TensorRule:
    merged = dict(roles.get(raw.get("role", ""), {}))
    merged.update(raw)
    dts = merged.get("dtype", "int8")
    dts = tuple(dts) if isinstance(dts, list) else (dts,)
    quantized = merged.get("quantized", True)
    # several dtypes: each its own range, unless the tensor itself names one (not its role's)
    rng = raw.get("range") if len(dts) > 1 else merged.get("range")
    if rng is None and quantized and len(dts) == 1 and dts[0] in DTYPES and DTYPES[dts[0]].is_int:
        rng = (DTYPES[dts[0]].qmin, DTYPES[dts[0]].qmax)   # several dtypes: each its own range
    gran = merged.get("granularity") if quantized else None
    return TensorRule(
        name=merged["name"], role=merged.get("role", ""), dtypes=dts,
        range=tuple(rng) if rng is not None else None,
        granularity=tuple(gran) if isinstance(gran, list) else gran,
        axis=merged.get("axis"), zero_point=merged.get("zero_point"),
        bias_scale=merged.get("bias_scale"), quantized=quantized,
        const=merged.get("const", False), optional=merged.get("optional", False),
        variadic=merged.get("variadic", False), layout=merged.get("layout"),
        axis_attr=merged.get("axis_attr"), axis_default=merged.get("axis_default"),
        block_attr=merged.get("block_attr"))


def _load_table(path: Path) -> SpecTable:
    with open(path, "rb") as f:
        raw = tomllib.load(f)
    meta = raw.get("table", {})
    name = meta.get("name", path.stem)
    roles = raw.get("roles", {})
    table = SpecTable(name=name, title=meta.get("title", name))
    for op, row in raw.get("ops", {}).items():
        fo = row.get("fixed_output")
        table.ops[op] = OpRule(
            table=name, op=op, source=row.get("source", "spec"),
            inputs=tuple(_tensor_rule(t, roles) for t in row.get("inputs", [])),
            outputs=tuple(_tensor_rule(t, roles) for t in row.get("outputs", [])),
            attrs=tuple(row.get("attrs", [])), same_scale=row.get("same_scale", False),
            fixed_output=(fo["scale"], fo["zero_point"]) if fo else None,
            fixed_output_text=fo.get("text") if fo else None, note=row.get("note", ""))
    return table


@functools.lru_cache(maxsize=None)
def _all_tables() -> dict[str, SpecTable]:
    tables = {}
    for p in sorted(SPEC_DIR.glob("*.toml")):
        t = _load_table(p)
        tables[t.name] = t
    return tables


def tables() -> dict[str, SpecTable]:
    return _all_tables()


def table(name: str = "litert-int8") -> SpecTable:
    return _all_tables()[name]


def known_ops() -> set[str]:
    ops: set[str] = set()
    for t in _all_tables().values():
        ops.update(t.ops)
    return ops


def rule(op: str, table_name: str = "litert-int8") -> OpRule:
    t = table(table_name)
    if op not in t.ops:
        raise KeyError(f"operator {op} is not in spec table {table_name}")
    return t.ops[op]


def spec_ops(table_name: str = "litert-int8") -> list[str]:
    """Operators of a table, in the table's order."""
    return list(table(table_name).ops)


def input_is_const(case, i: int) -> bool:
    """Whether input ``i`` of a case is a model constant (weights, bias, params)."""
    t = case.inputs[i]
    if t.const is not None:
        return t.const
    try:
        r = rule(case.op, case.spec).input_rule(i)
    except KeyError:
        return False
    return bool(r and r.const)


def _close(a: float, b: float, rel: float = 1e-6) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=0.0)


def check_case(case) -> list[Violation]:
    """Every way a case breaks its spec table (empty if it conforms)."""
    out: list[Violation] = []
    try:
        r = rule(case.op, case.spec)
    except KeyError as e:
        return [Violation(f"{case.spec}", "op", str(e))]

    def bad(clause_parts, fld, msg):
        out.append(Violation(r.clause(*clause_parts), fld, msg))

    unknown = sorted(set(case.attrs) - set(r.attrs))
    if unknown:
        bad(("attrs",), "attrs", f"{case.op} has no option(s) {', '.join(unknown)} "
            f"(its options: {', '.join(r.attrs) or 'none'})")
    for name in r.attrs:
        if name not in ATTRS:
            continue
        if name not in case.attrs:
            if ATTRS[name][1] is REQUIRED:
                bad(("attrs", name), f"attrs.{name}", f"{case.op} needs {name} (it has no default)")
            continue
        why = attr_problem(name, case.attrs[name])
        if why:
            bad(("attrs", name), f"attrs.{name}", why)
    if not out:
        _check_work(case, bad)
        _check_agreement(case, bad)
        big = output_problem(case)
        if big:
            bad(("inputs",), *big)

    n_required = sum(1 for t in r.inputs if not t.optional and not t.variadic)
    if len(case.inputs) < n_required:
        bad(("inputs",), "inputs", f"{case.op} takes at least {n_required} inputs, got {len(case.inputs)}")
    if not r.inputs[-1].variadic if r.inputs else False:
        if len(case.inputs) > len(r.inputs):
            bad(("inputs",), "inputs", f"{case.op} takes at most {len(r.inputs)} inputs, got {len(case.inputs)}")
    for i, t in enumerate(case.inputs):
        tr = r.input_rule(i)
        if tr is not None:
            _check_tensor(case, t, tr, f"inputs[{i}]", bad)
    if len(case.outputs) != len(r.outputs):   # an output the op does not have is never compared
        bad(("outputs",), "outputs", f"{case.op} has {len(r.outputs)} output(s), got {len(case.outputs)}")
    for i, t in enumerate(case.outputs):
        if i < len(r.outputs):
            _check_tensor(case, t, r.outputs[i], f"outputs[{i}]", bad)

    # bias scale = input scale x weight scale, zero point 0
    for i, t in enumerate(case.inputs):
        tr = r.input_rule(i)
        if tr is None or not tr.bias_scale or not t.quantized:
            continue
        a_idx, w_idx = _bias_operands(tr.bias_scale)
        if max(a_idx, w_idx) >= len(case.inputs):
            continue
        a, w = case.inputs[a_idx], case.inputs[w_idx]
        if not (a.quantized and w.quantized):
            continue
        want = [a.scale[0] * ws for ws in w.scale]
        got = t.scale
        if len(got) == 1 and len(want) > 1:
            bad((tr.name, "scale"), f"inputs[{i}].scale",
                "per-axis weights need a per-axis bias (one scale per output channel)")
        elif len(got) != len(want) and len(want) != 1:
            bad((tr.name, "scale"), f"inputs[{i}].scale", f"has {len(got)} values, weights have {len(want)}")
        else:
            ws = want if len(want) == len(got) else want * len(got)
            for c, (g, wv) in enumerate(zip(got, ws)):
                if not _close(g, wv):
                    bad((tr.name, "scale"), f"inputs[{i}].scale[{c}]",
                        f"must equal {tr.bias_scale} = {wv:.9g} (got {g:.9g})")
                    break

    quantized_io = [(f"inputs[{i}]", t) for i, t in enumerate(case.inputs)
                    if t.quantized and (r.input_rule(i) is not None and r.input_rule(i).role == "activation")]
    quantized_io += [(f"outputs[{i}]", t) for i, t in enumerate(case.outputs) if t.quantized]
    if r.same_scale and len(quantized_io) > 1:
        ref_name, ref = quantized_io[-1]
        for name, t in quantized_io[:-1]:
            if not (_close(t.scale[0], ref.scale[0]) and t.zero_point[0] == ref.zero_point[0]):
                bad(("same_scale",), name,
                    f"(scale, zero_point) = ({t.scale[0]:.9g}, {t.zero_point[0]}) must equal the output's "
                    f"({ref.scale[0]:.9g}, {ref.zero_point[0]}): inputs and outputs must all have the same scale/zero_point")
    if r.fixed_output is not None and case.outputs and case.outputs[0].quantized:
        o = case.outputs[0]
        s, z = r.fixed_output
        if not (_close(o.scale[0], s) and o.zero_point[0] == z):
            bad(("fixed_output",), "outputs[0]",
                f"(scale, zero_point) must be {r.fixed_output_text or (s, z)} (got ({o.scale[0]:.9g}, {o.zero_point[0]}))")
    return out


def _bias_operands(expr: str) -> tuple[int, int]:
    # "input0_scale * input1_scale" -> (0, 1)
    parts = [p.strip() for p in expr.split("*")]
    idx = [int(p.replace("input", "").replace("_scale", "")) for p in parts]
    return idx[0], idx[1]


def _check_tensor(case, t, tr: TensorRule, where: str, bad) -> None:
    if t.dtype not in tr.dtypes:
        bad((tr.name, "dtype"), f"{where}.dtype", f"must be {' or '.join(tr.dtypes)} (got {t.dtype})")
        return
    if not tr.quantized or DTYPES[t.dtype].qmin is None:
        if t.quantized and not tr.quantized:
            bad((tr.name, "quantization"), f"{where}.scale", f"{tr.name} is not quantized: omit scale/zero_point")
        return
    if t.dtype == "float32":
        return
    if not t.quantized:
        bad((tr.name, "quantization"), f"{where}.scale", f"{tr.name} must be quantized (give scale and zero_point)")
        return
    if tr.granularity == "per-tensor" and len(t.scale) != 1:
        bad((tr.name, "granularity"), f"{where}.scale", f"{tr.name} is per-tensor: one scale, got {len(t.scale)}")
    if tr.granularity == "per-axis" and len(t.scale) > 1 and tr.axis is not None:
        if t.quantized_dimension != tr.axis:
            bad((tr.name, "granularity"), f"{where}.quantized_dimension",
                f"{tr.name} is per-axis along dimension {tr.axis} (got {t.quantized_dimension})")
    _check_axis_blocks(case, t, tr, where, bad)
    if tr.zero_point is not None and any(z != tr.zero_point for z in t.zero_point):
        bad((tr.name, "zero_point"), f"{where}.zero_point", f"{tr.name} zero point must be {tr.zero_point}")
    rng = tr.range if tr.range is not None else (DTYPES[t.dtype].qmin, DTYPES[t.dtype].qmax)
    if rng is not None:
        lo, hi = rng
        if any(not (lo <= z <= hi) for z in t.zero_point) and tr.zero_point is None and tr.role == "activation":
            bad((tr.name, "zero_point"), f"{where}.zero_point", f"zero point must lie in [{lo}, {hi}]")
        if t.data is not None and t.data.size:
            dmin, dmax = int(t.data.min()), int(t.data.max())
            if dmin < lo or dmax > hi:
                bad((tr.name, "range"), f"{where}.data", f"{tr.name} values must lie in [{lo}, {hi}] (got [{dmin}, {dmax}])")


def _check_axis_blocks(case, t, tr: TensorRule, where: str, bad) -> None:
    """Blocked scales and an axis option (ONNX QuantizeLinear / DequantizeLinear style).

    A tensor with ``scale_shape`` is blocked: the rule must allow "blocked", and the
    op's ``block_attr`` option B must give ceil(D / B) blocks on quantized_dimension.
    With ``axis_attr``, a per-axis or blocked tensor's quantized_dimension must be the
    option's value (negative counts from the back; ``axis_default`` if omitted).
    """
    allowed = tr.granularity if isinstance(tr.granularity, tuple) else (tr.granularity,)
    blocked = t.scale_shape is not None
    if blocked and "blocked" not in allowed:
        bad((tr.name, "granularity"), f"{where}.scale_shape",
            f"{tr.name} is {' or '.join(str(a) for a in allowed)}: a blocked scale is not allowed")
        return
    rank = len(t.shape)
    if tr.axis_attr and (blocked or len(t.scale) > 1):
        axis = case.attrs.get(tr.axis_attr, tr.axis_default)
        if isinstance(axis, bool) or not isinstance(axis, int):
            bad((tr.name, tr.axis_attr), f"attrs.{tr.axis_attr}", f"must be an integer (got {axis!r})")
        elif not -rank <= axis < rank:
            bad((tr.name, tr.axis_attr), f"attrs.{tr.axis_attr}",
                f"{axis} is outside [-{rank}, {rank - 1}] for a rank-{rank} {tr.name}")
        elif axis % rank != t.quantized_dimension:
            bad((tr.name, tr.axis_attr), f"{where}.quantized_dimension",
                f"must be {tr.axis_attr} = {axis} (dimension {axis % rank}), got {t.quantized_dimension}")
    if tr.block_attr:
        b = case.attrs.get(tr.block_attr, 0)
        if isinstance(b, bool) or not isinstance(b, int) or b < 0:
            bad((tr.name, tr.block_attr), f"attrs.{tr.block_attr}", f"must be an integer >= 0 (got {b!r})")
        elif blocked and b == 0:
            bad((tr.name, tr.block_attr), f"attrs.{tr.block_attr}",
                f"a blocked {tr.name} scale needs {tr.block_attr} > 0")
        elif not blocked and b > 0:
            bad((tr.name, tr.block_attr), f"attrs.{tr.block_attr}",
                f"{tr.block_attr} = {b} is only for a blocked scale (give scale_shape)")
        elif blocked:
            d = t.shape[t.quantized_dimension]
            if t.scale_shape[t.quantized_dimension] != -(-d // b):
                bad((tr.name, tr.block_attr), f"{where}.scale_shape",
                    f"dimension {t.quantized_dimension} of size {d} in blocks of {b} needs "
                    f"ceil({d}/{b}) = {-(-d // b)} scales, got {t.scale_shape[t.quantized_dimension]}")


def _check_work(case, bad) -> None:
    """A convolution's or pool's window, stride and dilation keep the golden's largest array (the
    zero-point padded input, the gathered taps) within WORK_MAX elements."""
    if case.op not in ("CONV_2D", "DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MAX_POOL_2D") or not case.inputs:
        return
    x = case.inputs[0].shape
    if len(x) != 4:
        return
    a = case.attrs
    pool = case.op.endswith("POOL_2D")
    if pool:
        k, taps_c = (a.get("filter_height", 1), a.get("filter_width", 1)), x[3]
        dil = (1, 1)
    else:
        if len(case.inputs) < 2 or len(case.inputs[1].shape) != 4:
            return
        w = case.inputs[1].shape
        k = (w[1], w[2])
        taps_c = w[3]   # per tap and output position: CONV_2D's input channels, DEPTHWISE's outputs
        dil = (a.get("dilation_h_factor", 1), a.get("dilation_w_factor", 1))
    stride = (a.get("stride_h", 1), a.get("stride_w", 1))
    if not all(_is_int(v) and v >= 1 for v in (*k, *dil, *stride)):
        return   # (said above)
    extent, out_hw = [], []
    for n, kk, s, d in zip(x[1:3], k, stride, dil):
        eff = (kk - 1) * d + 1
        o = (n + s - 1) // s if a.get("padding", "SAME") == "SAME" else max((n - eff + s) // s, 1)
        out_hw.append(o)
        extent.append(max(n, (o - 1) * s + eff))
    padded = x[0] * extent[0] * extent[1] * (taps_c if case.op == "DEPTHWISE_CONV_2D" else x[3])
    gathered = 0 if pool else x[0] * out_hw[0] * out_hw[1] * k[0] * k[1] * taps_c   # (pools sum separably)
    worst = max(padded, gathered)
    if worst > WORK_MAX:
        bad(("attrs",), "attrs", f"window {k[0]}x{k[1]}, dilation {dil[0]}x{dil[1]} and stride {stride[0]}x{stride[1]} "
            f"over input {list(x)} make the golden hold {worst} elements, above the supported 2^27")


def output_problem(case) -> tuple[str, str] | None:
    """(field, why) when what ``case``'s op will compute (its declared outputs, the broadcast of its
    inputs, a padding, a gather) holds more elements than :data:`OUTPUT_FLOOR` and
    :data:`OUTPUT_GROWTH` x its inputs' elements allow: a small file must not make the golden or a
    target allocate gigabytes. None if it fits (or the shapes are wrong: the golden says how)."""
    inputs = sum(math.prod(t.shape) for t in case.inputs)
    limit = max(OUTPUT_FLOOR, OUTPUT_GROWTH * inputs)

    def over(n: int, fld: str, what: str) -> tuple[str, str] | None:
        if n <= limit:
            return None
        return fld, (f"{what} holds {n:,} elements: more than {limit:,} (the larger of {OUTPUT_FLOOR:,} and "
                     f"{OUTPUT_GROWTH} x the inputs' {inputs:,})")

    declared = sum(math.prod(t.shape) for t in case.outputs)
    found = over(declared, "outputs", f"{case.op}'s declared outputs")
    if found:
        return found
    xs = [tuple(t.shape) for t in case.inputs]
    try:
        if case.op in BROADCASTING and len(xs) >= 2:
            return over(math.prod(np.broadcast_shapes(xs[0], xs[1])), "inputs[1].shape",
                        f"the broadcast of {list(xs[0])} and {list(xs[1])}")
        if case.op == "BATCH_MATMUL" and len(xs) >= 2 and min(len(xs[0]), len(xs[1])) >= 2:
            batch = math.prod(np.broadcast_shapes(xs[0][:-2], xs[1][:-2]))
            m = xs[0][-1] if case.attrs.get("adj_x") else xs[0][-2]
            n = xs[1][-2] if case.attrs.get("adj_y") else xs[1][-1]
            return over(batch * m * n, "inputs[1].shape",
                        f"the batches of {list(xs[0])} and {list(xs[1])}")
        if case.op in ("PAD", "PADV2", "SPACE_TO_BATCH_ND") and len(case.inputs) >= 2 and case.inputs[1].data is not None:
            pads = np.asarray(case.inputs[1].data, dtype=object).ravel().tolist()
            x = xs[0] if case.op != "SPACE_TO_BATCH_ND" else xs[0][1:3]
            if len(pads) == 2 * len(x) and all(isinstance(v, int) for v in pads):
                n = math.prod(max(d + a + b, 0) for d, a, b in zip(x, pads[::2], pads[1::2]))
                n *= math.prod(xs[0]) // max(math.prod(x), 1) if case.op == "SPACE_TO_BATCH_ND" else 1
                return over(n, "inputs[1].data", f"{list(xs[0])} padded by {pads}")
        if case.op == "GATHER" and len(xs) >= 2 and xs[0]:
            axis = case.attrs.get("axis") or 0
            if isinstance(axis, int) and -len(xs[0]) <= axis < len(xs[0]):
                bd = case.attrs.get("batch_dims") or 0
                bd = bd if isinstance(bd, int) and 0 <= bd <= min(len(xs[1]), axis % len(xs[0])) else 0
                n = math.prod(xs[0]) // max(xs[0][axis], 1) * math.prod(xs[1][bd:])
                return over(n, "inputs[1].shape", f"{list(xs[0])} gathered by {list(xs[1])} indices")
    except (ValueError, TypeError):
        return None   # (shapes that do not broadcast: the golden names them)
    return None


def _check_agreement(case, bad) -> None:
    """An option that repeats what the tensors say must say the same (a target might read either)."""
    a = case.attrs
    if case.op == "RESHAPE" and "new_shape" in a and len(case.inputs) > 1 and case.inputs[1].data is not None:
        given = [int(v) for v in case.inputs[1].data.ravel()]
        if given != list(a["new_shape"]):
            bad(("attrs", "new_shape"), "attrs.new_shape",
                f"is {a['new_shape']} but the shape input (inputs[1]) is {given}: give one, or the same")
    if case.op == "DEPTHWISE_CONV_2D" and "depth_multiplier" in a and len(case.inputs) > 1:
        x, w = case.inputs[0].shape, case.inputs[1].shape
        if len(x) == 4 and len(w) == 4 and x[3] > 0 and w[3] != x[3] * a["depth_multiplier"]:
            bad(("attrs", "depth_multiplier"), "attrs.depth_multiplier",
                f"is {a['depth_multiplier']} but the filter has {w[3]} output channels for {x[3]} input channels")
