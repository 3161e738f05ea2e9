"""Shrinking a failing case to a smaller one that still fails on the same target.

A *window* is a [start, stop) range per dimension of output 0. For each supported op
family, :func:`window_case` builds the sub-case whose golden output is exactly that
window of the original output (same quantization, same values, same accumulators):

* elementwise (ADD, SUB, MUL, comparisons, MAXIMUM, ...) and unary ops: the inputs are
  sliced like the output (a broadcast dimension of size 1 stays whole); SOFTMAX-like ops
  keep their last axis whole;
* CONV_2D / DEPTHWISE_CONV_2D: batch and output channels are sliced (filter, bias and
  per-channel scales with them; depthwise by whole groups of the depth multiplier); the
  input is cropped to the receptive field of the output window, the taps that fell in the
  padding are filled with the input zero point (LiteRT skips those taps, which is the
  same), and the padding becomes VALID;
* FULLY_CONNECTED: batch rows and output units;
* AVERAGE_POOL_2D / MAX_POOL_2D: batch, channels, and spatial windows whose receptive
  field lies inside the input (then VALID padding);
* every other op (PAD, MEAN, GATHER, BATCH_MATMUL, TRANSPOSE_CONV, CONCATENATION, ...): its
  inputs are halved along one axis at a time (alone, or together with the other inputs of the
  same rank and length there), the golden giving the outputs' shapes; a cut the spec table or the
  golden refuses is not tried (:func:`sliced_case`).

:func:`shrink` first tries single failing elements (largest error first), then halves
the window one dimension at a time while the case still fails, and keeps the smallest
failing case. "Fails" means the verdict the suite would give: beyond the tolerance of
the policy (or any mismatch with ``any_mismatch``), or a target error.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from reference import golden
from reference.schemes import DEFAULT_SCHEME
from suite.core.case import Case, Tensor
from suite.core.errors import QconformError
from suite.core.spec import check_case
from suite.core.tolerance import load_policy
from suite.core.verdict import Status
from suite.core.waivers import Waivers
from targets import get_target, target_name
from targets.remote import device_targets
from targets.transport import parse_device
from targets.base import Timing

from .isolation import executor_for
from .judge import Goldens, Judge

BINARY = {"ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "LESS", "LESS_EQUAL",
          "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL", "POW", "FLOOR_DIV", "FLOOR_MOD"}
UNARY = {"LOGISTIC", "TANH", "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "HARD_SWISH", "LEAKY_RELU",
         "QUANTIZE", "DEQUANTIZE", "ABS", "ELU", "EXP", "LOG", "SQRT", "RSQRT", "NEG", "SIN", "COS",
         "GELU", "PRELU"}
LAST_AXIS_WHOLE = {"SOFTMAX", "LOG_SOFTMAX", "L2_NORMALIZATION"}
CONV = {"CONV_2D", "DEPTHWISE_CONV_2D"}
POOL = {"AVERAGE_POOL_2D", "MAX_POOL_2D"}
FC = {"FULLY_CONNECTED"}
SUPPORTED = sorted(BINARY | UNARY | LAST_AXIS_WHOLE | CONV | POOL | FC)

Window = list[tuple[int, int]]


def elements(case: Case) -> int:
    """Input plus output elements of a case (what shrinking makes smaller)."""
    return sum(t.size for t in case.inputs) + sum(t.size for t in case.outputs)


# ----------------------------------------------------------------------------- sub-cases

def _slice_tensor(t: Tensor, slices: list[slice], axis_scales: bool = True) -> Tensor:
    """t[slices] with per-axis scales/zero points sliced along the quantized dimension."""
    nt = copy.copy(t)
    data = np.asarray(t.data).reshape(t.shape)[tuple(slices)]
    nt.data = np.ascontiguousarray(data)
    nt.shape = tuple(int(x) for x in data.shape)
    if axis_scales and t.per_axis:
        sl = slices[t.quantized_dimension]
        nt.scale = list(t.scale[sl])
        nt.zero_point = list(t.zero_point[sl])
    return nt


def _with_output(case: Case, shape, inputs: list[Tensor], attrs: dict | None = None) -> Case:
    c = copy.copy(case)
    c.inputs = inputs
    out = copy.copy(case.outputs[0])
    out.shape = tuple(int(x) for x in shape)
    c.outputs = [out] + [copy.copy(o) for o in case.outputs[1:]]
    c.attrs = dict(case.attrs if attrs is None else attrs)
    c.source = None
    return c


def _elementwise(case: Case, win: Window, whole_last: bool = False) -> Case | None:
    out_shape = case.outputs[0].shape
    if whole_last and out_shape and win[-1] != (0, out_shape[-1]):
        return None
    ins = []
    for t in case.inputs:
        if t.data is None or len(t.shape) > len(out_shape):
            return None
        off = len(out_shape) - len(t.shape)
        sl = []
        for i, d in enumerate(t.shape):
            a, b = win[off + i]
            if d == 1 and out_shape[off + i] != 1:
                sl.append(slice(0, 1))
            elif d == out_shape[off + i]:
                sl.append(slice(a, b))
            else:
                return None
        ins.append(_slice_tensor(t, sl))
    return _with_output(case, [b - a for a, b in win], ins)


def _geometry(case: Case, k_hw):
    a = case.attrs
    stride = (int(a.get("stride_h", 1)), int(a.get("stride_w", 1)))
    if case.op in POOL:
        dil = (1, 1)
    else:
        dil = (int(a.get("dilation_h_factor", 1)), int(a.get("dilation_w_factor", 1)))
    padding = a.get("padding", "SAME")
    in_hw = case.inputs[0].shape[1:3]
    out_hw = case.outputs[0].shape[1:3]
    pads = []
    for n, k, s, d, o in zip(in_hw, k_hw, stride, dil, out_hw):
        eff = (k - 1) * d + 1
        pads.append(max((o - 1) * s + eff - n, 0) // 2 if padding == "SAME" else 0)
    return stride, dil, pads


def _crop_input(x: Tensor, nwin, hw_win, k_hw, stride, dil, pads, cslice, fill_padding: bool) -> Tensor | None:
    """The input rows/cols the output window reads; out-of-image taps filled with the zero point."""
    data = np.asarray(x.data).reshape(x.shape)
    n, h, w, c = x.shape
    ranges = []
    for (a, b), k, s, d, p, size in zip(hw_win, k_hw, stride, dil, pads, (h, w)):
        r0 = a * s - p
        r1 = (b - 1) * s - p + (k - 1) * d + 1
        if not fill_padding and (r0 < 0 or r1 > size):
            return None
        ranges.append((r0, r1))
    (r0, r1), (c0, c1) = ranges
    zp = int(x.zero_point[0])
    sub = data[nwin[0]:nwin[1], :, :, cslice]
    out = np.full((sub.shape[0], r1 - r0, c1 - c0, sub.shape[3]), zp, dtype=data.dtype)
    sr0, sr1 = max(r0, 0), min(r1, h)
    sc0, sc1 = max(c0, 0), min(c1, w)
    if sr1 > sr0 and sc1 > sc0:
        out[:, sr0 - r0:sr1 - r0, sc0 - c0:sc1 - c0, :] = sub[:, sr0:sr1, sc0:sc1, :]
    nt = copy.copy(x)
    nt.data = out
    nt.shape = tuple(int(v) for v in out.shape)
    return nt


def _conv(case: Case, win: Window) -> Case | None:
    x, w = case.inputs[0], case.inputs[1]
    bias = case.inputs[2] if len(case.inputs) > 2 and case.inputs[2].data is not None else None
    (n0, n1), (y0, y1), (x0, x1), (c0, c1) = win
    if case.op == "CONV_2D":
        k_hw = w.shape[1:3]
        cin = slice(None)
        wsl = [slice(c0, c1), slice(None), slice(None), slice(None)]
        bsl = slice(c0, c1)
        out_c = c1 - c0
    else:
        k_hw = w.shape[1:3]
        mult = w.shape[3] // x.shape[3]
        g0, g1 = c0 // mult, -(-c1 // mult)
        cin = slice(g0, g1)
        wsl = [slice(None), slice(None), slice(None), slice(g0 * mult, g1 * mult)]
        bsl = slice(g0 * mult, g1 * mult)
        out_c = (g1 - g0) * mult
        if (g0 * mult, g1 * mult) != (c0, c1):
            return None     # the caller asks for whole groups only
    stride, dil, pads = _geometry(case, k_hw)
    nx = _crop_input(x, (n0, n1), [(y0, y1), (x0, x1)], k_hw, stride, dil, pads, cin, fill_padding=True)
    ins = [nx, _slice_tensor(w, wsl)]
    if bias is not None:
        ins.append(_slice_tensor(bias, [bsl]))
    elif len(case.inputs) > 2:
        ins.append(copy.copy(case.inputs[2]))
    attrs = dict(case.attrs)
    attrs["padding"] = "VALID"
    return _with_output(case, (n1 - n0, y1 - y0, x1 - x0, out_c), ins, attrs)


def _pool(case: Case, win: Window) -> Case | None:
    x = case.inputs[0]
    (n0, n1), (y0, y1), (x0, x1), (c0, c1) = win
    k_hw = (int(case.attrs["filter_height"]), int(case.attrs["filter_width"]))
    stride, dil, pads = _geometry(case, k_hw)
    nx = _crop_input(x, (n0, n1), [(y0, y1), (x0, x1)], k_hw, stride, dil, pads, slice(c0, c1),
                     fill_padding=False)
    if nx is None:
        return None
    attrs = dict(case.attrs)
    attrs["padding"] = "VALID"
    return _with_output(case, (n1 - n0, y1 - y0, x1 - x0, c1 - c0), [nx], attrs)


def _fc(case: Case, win: Window) -> Case | None:
    x, w = case.inputs[0], case.inputs[1]
    bias = case.inputs[2] if len(case.inputs) > 2 and case.inputs[2].data is not None else None
    out_shape = case.outputs[0].shape
    o0, o1 = win[-1]
    n_in = w.shape[1]
    if case.attrs.get("keep_num_dims"):
        if tuple(x.shape[:-1]) != tuple(out_shape[:-1]):
            return None
        nx = _slice_tensor(x, [slice(a, b) for a, b in win[:-1]] + [slice(None)])
    else:
        if len(out_shape) != 2:
            return None
        b0, b1 = win[0]
        flat = np.asarray(x.data).reshape(-1, n_in)[b0:b1]
        nx = copy.copy(x)
        nx.data = np.ascontiguousarray(flat)
        nx.shape = tuple(int(v) for v in flat.shape)
    ins = [nx, _slice_tensor(w, [slice(o0, o1), slice(None)])]
    if bias is not None:
        ins.append(_slice_tensor(bias, [slice(o0, o1)]))
    elif len(case.inputs) > 2:
        ins.append(copy.copy(case.inputs[2]))
    return _with_output(case, [b - a for a, b in win], ins)


def window_case(case: Case, win: Window) -> Case | None:
    """The sub-case computing exactly window ``win`` of output 0 (None if this op cannot)."""
    op = case.op
    if op in BINARY or op in UNARY:
        return _elementwise(case, win)
    if op in LAST_AXIS_WHOLE:
        return _elementwise(case, win, whole_last=True)
    if op in CONV:
        return _conv(case, win)
    if op in POOL:
        return _pool(case, win)
    if op in FC:
        return _fc(case, win)
    return None   # (no window of its output: :func:`shrink` slices its inputs instead, :func:`sliced_case`)


def _align(case: Case, dim: int) -> int:
    """The step a window along ``dim`` must respect (whole depth-multiplier groups for depthwise)."""
    if case.op == "DEPTHWISE_CONV_2D" and dim == 3:
        return max(1, case.inputs[1].shape[3] // case.inputs[0].shape[3])
    return 1


# ----------------------------------------------------------------------------- search

@dataclass
class Judgement:
    fails: bool
    status: str
    want: list | None = None
    got: list | None = None
    errors: list | None = None
    reason: str = ""
    message: str = ""   # the run's failure message (got, want, the worst element)
    finding: str | None = None


@dataclass
class ShrinkResult:
    original: Case
    case: Case
    judgement: Judgement
    runs: int
    tried: int
    steps: list[str] = field(default_factory=list)
    window: Window = field(default_factory=list)   # of the original output 0

    @property
    def before(self) -> int:
        return elements(self.original)

    @property
    def after(self) -> int:
        return elements(self.case)


def make_judge(target: str, tolerance_file: str | None = None, scheme: str | None = None,
               any_mismatch: bool = False, target_obj=None, isolation: str = "process",
               timeout: float = 60.0, device: str | None = None) -> Callable[[Case], Judgement]:
    """judge(case) -> Judgement: run the case on the target and give the suite's verdict, by the
    run's own judge (suite/harness/judge.py: the same golden, tolerance and scheme).

    As in a run, a native target runs in a worker process (``isolation="process"``): a case
    that crashes or hangs it is a ``crash`` / ``timeout`` judgement, not the end of the shrink.
    ``judge.close()`` ends the worker and the target."""
    if target_obj is not None:
        t = target_obj
    elif device:   # the target bound to the device, as a run binds it (availability checked there)
        spec = parse_device(device)
        t = device_targets([target], spec, [spec])[target]
    else:
        t = get_target(target)
    ok, why = t.availability()
    if not ok:
        raise QconformError(f"target '{target}' is not available on this machine: {why}", field="--target")
    ex = executor_for(t, isolation, timeout)
    name = target_name(target) if target_obj is None else target   # as a run names it: tolerance rules, findings
    goldens = Goldens()
    runner = Judge(scheme=scheme or DEFAULT_SCHEME, policy=load_policy(tolerance_file), waivers=Waivers(),
                   goldens=goldens, run_id="shrink", seed=0)
    timing = Timing(warmup=0, repeats=1)

    def judge(case: Case, batch: list[Case] | None = None) -> Judgement:
        """``batch``: the cases to run together, ``case`` among them (as its run batched it)."""
        try:
            want = goldens.get(case, runner.scheme)
        except Exception as e:
            return Judgement(False, "invalid", reason=f"golden: {type(e).__name__}: {e}")
        batch = batch or [case]
        o = ex.run(batch, timing)[next(i for i, c in enumerate(batch) if c is case)]
        v, _ = runner(case, name, o, ex.versions())
        cmp = v.comparison
        if v.status is Status.UNSUPPORTED:
            return Judgement(False, v.status.value, want, reason=v.reason, message=v.message)
        if cmp is None or cmp.garbage:
            return Judgement(v.status.is_bad, v.status.value, want, reason=v.reason, message=v.message,
                             finding=v.finding)
        bad = cmp.mismatches > 0 if any_mismatch else v.status is Status.FAIL
        return Judgement(bad, v.status.value, want, o.outputs, cmp.errors,
                         f"max |err| {cmp.max_abs_lsb:g} LSB, {cmp.mismatches}/{cmp.elements} elements off",
                         v.message, v.finding)

    def close() -> None:
        ex.close()
    judge.versions = ex.versions  # type: ignore[attr-defined]
    judge.target = t  # type: ignore[attr-defined]
    judge.close = close  # type: ignore[attr-defined]
    return judge


def _bad_positions(case: Case, j: Judgement, limit: int) -> list[tuple[int, ...]]:
    """Output-0 positions to try alone, largest |error| first."""
    if not j.errors:
        return []
    err = np.abs(np.asarray(j.errors[0]).reshape(case.outputs[0].shape))
    flat = np.flatnonzero(err)
    if not flat.size:
        return []
    order = flat[np.argsort(-err.ravel()[flat], kind="stable")][:limit]
    return [tuple(int(i) for i in np.unravel_index(k, err.shape)) for k in order]


def shrink(case: Case, judge: Callable[[Case], Judgement], max_runs: int = 200, singles: int = 8,
           log: Callable[[str], None] | None = None) -> ShrinkResult:
    """The smallest failing sub-case found (see the module docstring)."""
    runs = tried = 0
    log = log or (lambda s: None)
    first = judge(case)
    runs += 1
    if not first.fails:
        raise QconformError(f"{case.id} does not fail on this target ({first.status}: {first.reason})",
                            field="CASE", rule="only a failing case can be shrunk")
    shape = list(case.outputs[0].shape)
    best_case, best_j, best_win = case, first, [(0, d) for d in shape]
    steps: list[str] = []
    cache: dict[tuple, Judgement | None] = {}

    def attempt(win: Window) -> bool:
        nonlocal best_case, best_j, best_win, runs, tried
        key = tuple(win)
        if key in cache or runs >= max_runs:
            return False
        tried += 1
        try:
            sub = window_case(case, win)
        except QconformError:
            raise
        except Exception:
            sub = None
        if sub is None or check_case(sub):
            cache[key] = None
            return False
        j = judge(sub)
        runs += 1
        cache[key] = j
        if j.fails and elements(sub) < elements(best_case):
            best_case, best_j, best_win = sub, j, list(win)
            steps.append(f"window {[list(w) for w in win]}: {elements(sub)} elements, {j.reason or j.status}")
            log(steps[-1])
            return True
        return False

    if case.op not in SUPPORTED:   # every other op: its inputs sliced, the golden giving the output shape
        return _shrink_inputs(case, judge, first, max_runs, log)
    # 1. one failing element alone (a whole depth-multiplier group for depthwise channels)
    for pos in _bad_positions(case, first, singles):
        win = []
        for dim, p in enumerate(pos):
            a = _align(case, dim)
            win.append(((p // a) * a, (p // a) * a + a) if a > 1 else (p, p + 1))
        if attempt(win):
            break
    # 2. halve one dimension at a time while it still fails
    changed = True
    while changed and runs < max_runs:
        changed = False
        for dim in range(len(shape)):
            a = _align(case, dim)
            while runs < max_runs:
                lo, hi = best_win[dim]
                n = (hi - lo) // a
                if n <= 1:
                    break
                mid = lo + (n // 2) * a
                moved = False
                for half in ((lo, mid), (mid, hi)):
                    win = list(best_win)
                    win[dim] = half
                    if attempt(win):
                        moved = changed = True
                        break
                if not moved:
                    break
    if elements(best_case) * 4 > elements(case) and runs < max_runs:
        # the output window left most of it (a conv's input channels all feed each output): its
        # inputs are sliced too; the sub-case is then no window of the original output
        more = _shrink_inputs(best_case, judge, best_j, max_runs - runs + 1, log)
        if more.steps:
            return ShrinkResult(case, more.case, more.judgement, runs + more.runs - 1, tried + more.tried,
                                steps + more.steps, [])
    return ShrinkResult(case, best_case, best_j, runs, tried, steps, best_win)


# ----------------------------------------------------------------------------- any op: inputs sliced

def sliced_case(case: Case, cuts: dict[int, tuple[int, int, int]]) -> Case | None:
    """The case with input ``i`` cut to ``[a, b)`` along its axis ``d`` for each ``i: (d, a, b)``;
    its outputs' shapes are the golden's on the cut inputs (the spec says them); None when the spec
    table refuses the result or the golden cannot compute it (an index out of range, shapes that
    no longer agree). Any op whose semantics keep along an axis (batch, channels, rows, the
    reduced or gathered axis, a concatenated input) shrinks so, each sub-case judged again."""
    ins = []
    for i, t in enumerate(case.inputs):
        if i in cuts:
            d, a, b = cuts[i]
            sl = [slice(None)] * len(t.shape)
            sl[d] = slice(a, b)
            t = _slice_tensor(t, sl)
        ins.append(t)
    c = _with_output(case, case.outputs[0].shape, ins)
    try:
        outs = golden(c)
    except Exception as e:   # an op that checks its declared output shape says the one it computes
        shape = getattr(e, "computed_shape", None) or _said_shape(e)
        c = _stated_shape(c, cuts) if shape is None else c
        if c is None or len(c.outputs) != 1:
            return None
        if shape is not None:
            c.outputs[0].shape = tuple(shape)
        try:
            outs = golden(c)
        except Exception:
            return None
    if len(outs) != len(c.outputs):
        return None
    c.outputs = [copy.copy(o) for o in c.outputs]
    for o, g in zip(c.outputs, outs):
        o.shape = tuple(int(x) for x in np.shape(g))
    if any(o.size == 0 for o in c.outputs) or check_case(c):
        return None
    return c


def _stated_shape(c: Case, cuts: dict) -> Case | None:
    """An op told its output shape by an operand (TRANSPOSE_CONV's output_shape): that operand and
    the output follow a cut along one axis of the output's rank, the first extent (from 1) that the
    golden and the spec table accept; None without such an operand or extent."""
    out = tuple(c.outputs[0].shape)
    axes = {d for i, (d, _, _) in cuts.items() if len(c.inputs[i].shape) == len(out)}
    stated = [j for j, t in enumerate(c.inputs) if j not in cuts and t.data is not None and len(t.shape) == 1
              and np.asarray(t.data).ravel().tolist() == list(out)]
    if len(axes) != 1 or len(stated) != 1:
        return None
    (a,), j = axes, stated[0]
    for v in range(1, out[a] + 1):
        shape = list(out)
        shape[a] = v
        t = copy.copy(c.inputs[j])
        t.data = np.asarray(shape, dtype=np.asarray(c.inputs[j].data).dtype)
        sub = copy.copy(c)
        sub.inputs = [t if k == j else x for k, x in enumerate(c.inputs)]
        sub.outputs = [copy.copy(o) for o in c.outputs]
        sub.outputs[0].shape = tuple(shape)
        try:
            golden(sub)
        except Exception:
            continue
        if not check_case(sub):
            return sub
    return None


_SAID = re.compile(r"(?:must be|gives|computes output shape) \[([0-9, ]*)\]")


def _said_shape(e: Exception) -> tuple[int, ...] | None:
    """The output shape a golden's shape check says it computes (QconformError on outputs[0].shape)."""
    if getattr(e, "field", None) != "outputs[0].shape":
        return None
    m = _SAID.search(str(e))
    return tuple(int(x) for x in m.group(1).split(",") if x.strip()) if m else None


def _moves(case: Case) -> list[dict[int, tuple[int, int, int]]]:
    """Cuts to try, each halving: one input along one axis; every input of the same rank whose
    axis has the same length there, together (batch, channels); two inputs along two axes of the
    same length (a matmul's K, a filter's and a bias's channels)."""
    out = []
    data = [(i, t) for i, t in enumerate(case.inputs) if t.data is not None and len(t.shape)]
    for i, t in data:
        for d, n in enumerate(t.shape):
            if n > 1:
                together = {j: u for j, u in data if len(u.shape) == len(t.shape) and u.shape[d] == n}
                pairs = [(j, e) for j, u in data if j != i for e, m in enumerate(u.shape) if m == n]
                for half in ((0, n // 2), (n // 2, n)):
                    if len(together) > 1:
                        out.append({j: (d, *half) for j in together})
                    out.append({i: (d, *half)})
                    out += [{i: (d, *half), j: (e, *half)} for j, e in pairs]   # (K of a matmul: other axes)
    seen, uniq = set(), []
    for m in out:
        k = tuple(sorted(m.items()))
        if k not in seen:
            seen.add(k)
            uniq.append(m)
    return uniq


def _shrink_inputs(case: Case, judge, first: Judgement, max_runs: int, log) -> ShrinkResult:
    """Greedy: the first cut that still fails and has fewer elements is kept, until none does."""
    best, best_j, runs, tried, steps = case, first, 1, 0, []
    tried_keys: set = set()
    changed = True
    while changed and runs < max_runs:
        changed = False
        for m in _moves(best):
            if runs >= max_runs:
                break
            sub = sliced_case(best, m)
            tried += 1
            if sub is None or elements(sub) >= elements(best):
                continue
            key = sub.digest()
            if key in tried_keys:
                continue
            tried_keys.add(key)
            j = judge(sub)
            runs += 1
            if j.fails:
                best, best_j, changed = sub, j, True
                cut = ", ".join(f"input {i} axis {d} [{a}:{b}]" for i, (d, a, b) in sorted(m.items()))
                steps.append(f"{cut}: {elements(sub)} elements, {j.reason or j.status}")
                log(steps[-1])
                break
    return ShrinkResult(case, best, best_j, runs, tried, steps, [(0, d) for d in best.outputs[0].shape])


def shrunk_document(res: ShrinkResult, target: str) -> dict:
    """The shrunk case as a case file with ``want``/``got`` (like the runner's failure files)."""
    c = copy.copy(res.case)
    c.id = res.original.id if res.original.id.endswith("-shrunk") else f"{res.original.id}-shrunk"
    c.description = (f"shrunk from {res.original.id} ({res.before} -> {res.after} elements) on {target}"
                     + (f"; {res.original.description}" if res.original.description else ""))
    d = c.to_dict()
    j = res.judgement
    if j.want is not None:
        d["want"] = [np.asarray(w).ravel().tolist() for w in j.want]
    if j.got is not None:
        d["got"] = [np.asarray(g).ravel().tolist() for g in j.got]
    d["target"] = target
    d["shrunk_from"] = res.original.id
    d["shrink"] = {"elements_before": res.before, "elements_after": res.after, "runs": res.runs,
                   "window": [list(w) for w in res.window] or None,   # (None: its inputs were cut too)
                   "verdict": j.status, "reason": j.reason}
    return d
