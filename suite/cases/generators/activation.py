"""Generators for SOFTMAX, LOG_SOFTMAX, LOGISTIC, TANH, HARD_SWISH, LEAKY_RELU, RELU, RELU6.

Fixed-output ops (SOFTMAX, LOGISTIC: (1/256, -128); TANH: (1/128, 0); LOG_SOFTMAX:
(16/256, 127)) get exactly the spec's output quantization. The others fit the output
range to the real results (``Gen.output_qparams``).

Constraints of LiteRT's reference kernels that the generators respect (each one found
by running it; see reference/ops/activation.py):
* SOFTMAX: a row whose sum of exps reaches 512 aborts the process (``TFLITE_CHECK`` on
  the output exponent), so every row keeps its Q12.19 sum below 2^28; beta * s_in >= 2^-26.
* LOG_SOFTMAX: the reverse multiplier needs s_in >= ~2^-24; rows stay below 4096 values.
* HARD_SWISH: s_in / (128 s_out) < 1.
"""

from __future__ import annotations

import math

import numpy as np

from reference import arith
from reference.ops import activation as A

from suite.core.case import Case, Tensor
from suite.cases.generate import Gen, f32, generator, rounding_inputs

T = "litert-int8"
SOFTMAX_OUT = (1.0 / 256.0, -128)
LOGISTIC_OUT = (1.0 / 256.0, -128)
TANH_OUT = (1.0 / 128.0, 0)
LOG_SOFTMAX_OUT = (16.0 / 256.0, 127)


def _clause(op: str, *parts: str) -> str:
    return " ".join(f"{T}/{op}/{p}" for p in parts) if parts else f"{T}/{op}"


def _shape(g: Gen, lo: int = 64, hi: int = 2048, max_rank: int = 4) -> list[int]:
    """An elementwise shape of rank 1..max_rank with lo..hi elements (odd dims for odd_shape)."""
    rank = g.randint(1, max_rank)
    dims = g.dims(rank, 1, 12)
    n = math.prod(dims)
    if n < lo:
        k = -(-lo // n)
        dims[-1] *= k if g.variant != "odd_shape" else k | 1
    while math.prod(dims) > hi and max(dims) > 1:
        i = int(np.argmax(dims))
        dims[i] = max(1, dims[i] // 2) | (1 if g.variant == "odd_shape" else 0)
    return dims


def _rows_shape(g: Gen, depth: int, hi: int = 2048) -> list[int]:
    """A shape whose last dimension is ``depth`` (the softmax axis), rank 1..4, <= hi elements."""
    rank = g.randint(1, 4)
    outer = g.dims(rank - 1, 1, 6)
    while outer and math.prod(outer) * depth > hi:
        outer[int(np.argmax(outer))] = max(1, max(outer) // 2) | (1 if g.variant == "odd_shape" else 0)
        if max(outer) == 1:
            break
    return outer + [depth]


def _i8(a) -> np.ndarray:
    return np.clip(np.asarray(a, dtype=np.int64), -128, 127).astype(np.int8)


def _act(g: Gen, data, s: float, z: int) -> Tensor:
    data = _i8(data)
    return Tensor("int8", tuple(data.shape), data, [f32(s)], [int(z)], 0)


def _ulp32(x) -> np.ndarray:
    x = np.abs(np.asarray(x, dtype=np.float32))
    return (np.nextafter(x, np.float32(np.inf)) - x).astype(np.float64)


def _f32_neighbours(x: float, n: int = 8) -> np.ndarray:
    """The float32 values within n steps of float32(x) (x > 0), ascending."""
    base = np.array([np.float32(x)]).view(np.int32)[0]
    return (base + np.arange(-n, n + 1, dtype=np.int32)).view(np.float32)


# ----------------------------------------------------------------------------- SOFTMAX

def _tie_row_scale(g: Gen, log: bool) -> tuple[float, int, int]:
    """(s, b, delta): a row of one maximum and b values delta codes below it, with s such that
    the real output of the maximum lies on a rounding half-way point.

    SOFTMAX: 256 / (1 + b e^(-s delta)) = k + 1/2; LOG_SOFTMAX: 16 log(1 + b e^(-s delta)) = k + 1/2.
    """
    for _ in range(200):
        b, delta = g.randint(1, 150), g.randint(1, 24)
        k = g.randint(1, 40)
        t = 512.0 / (2 * k + 1) - 1.0 if not log else math.expm1((k + 0.5) / 16.0)
        if not 0 < t < 0.98 * b:
            continue
        s = math.log(b / t) / delta
        if 2.0 ** -9 <= s <= 2.0:
            return f32(s), b, delta
    return f32(0.125), 4, 8


def _softmax_like(g: Gen, op: str) -> Case:
    v = g.variant
    log = op == "LOG_SOFTMAX"
    clause = ["fixed_output"]
    beta = 1.0
    depth = g.randint(2, 48) | (1 if v == "odd_shape" else 0)
    s = g.scale(2.0 ** -6, 0.5)
    z = g.zero_point()
    desc = ""
    if not log and (v == "beta" or (v == "random" and g.rng.random() < 0.3)):
        beta = f32(g.choice([0.25, 0.5, 2.0, 0.1, 1.7, 3.0]))
        clause.append("attrs.beta")
        desc = f"beta {beta:g}"
    elif v == "scale_extreme":
        kind = g.index % 3 if not log else g.index % 2
        if kind == 0:                       # tiny: every exp ~ 1, rows short enough to stay < 512
            s = g.scale(2.0 ** -16, 2.0 ** -12)
            depth = g.randint(2, 200)
            desc = f"tiny input scale {s:.3g}"
        elif kind == 1:                     # large: only the maximum survives
            s = g.scale(1.0, 8.0)
            desc = f"large input scale {s:.3g}"
        else:                               # beta * s * 2^26 above the int32 multiplier cap
            s = g.scale(4.0, 8.0)
            beta = f32(g.choice([10.0, 16.0]))
            desc = f"beta * scale = {beta * s:.3g} above the multiplier cap"
    elif v == "large_reduction":
        depth = g.choice([1000, 1500, 2048, 3000, 4000] if log else [1000, 1024, 1500, 2048])
        s = g.scale(2.0 ** -4, 0.5)
        clause.append("reduction")
        desc = f"long rows ({depth})"
    elif v == "all_equal":
        depth = g.choice([1, 2, 3, 5, 100, 255, 511])
        clause.append("all_equal")
        desc = f"rows of {depth} equal values"
    elif v == "sum_overflow":
        # a row whose exps sum to >= 512 (512+ equal values): a valid input on which LiteRT's
        # reference SOFTMAX aborts (TFLITE_CHECK(exponent <= 31)); see suite/core/findings.toml
        depth = g.choice([512, 600, 1024])
        clause.append("all_equal")
        desc = f"rows of {depth} equal values (sum of exps >= 512)"
    elif v == "diff_min":
        s = g.scale(2.0 ** -4, 1.0)
        depth = g.randint(8, 64)
        desc = "differences at the diff_min cutoff"
    shape = _rows_shape(g, depth, hi=4096 if v == "large_reduction" else 2048)
    x = g.codes(shape, zero_point=z).astype(np.int64)
    if v in ("all_equal", "sum_overflow"):
        x = np.broadcast_to(g.rng.integers(-128, 128, size=shape[:-1] + [1]), shape).copy()
    elif v == "diff_min":
        diff_min = A.log_softmax_params(s, False)[4] if log else A.softmax_params(beta, s, False)[2]
        mx = g.randint(max(-128, -128 - diff_min + 1), 127)
        pool = np.array([mx + diff_min - 1, mx + diff_min, mx + diff_min + 1, mx + diff_min + 2, mx])
        x = np.where(g.rng.random(shape) < 0.5, g.rng.choice(pool, size=shape),
                     g.rng.integers(-128, mx + 1, size=shape))
        x[..., 0] = mx
        clause.append("diff_min")
    elif v == "tie":
        s, b, delta = _tie_row_scale(g, log)
        depth = b + 1
        shape = _rows_shape(g, depth)
        x = g.rng.integers(-128, 128, size=shape)
        row = x.reshape(-1, depth)
        mx = g.randint(-128 + delta, 127)
        row[0, :] = mx - delta
        row[0, g.randint(0, b)] = mx
        x = row.reshape(shape)
        clause.append("rounding.tie")
        desc = f"row 0: one maximum and {b} values {delta} below it, real output on a .5 boundary"
    if not log:
        # keep every row's sum of exps below 512 (LiteRT's reference kernel aborts at 512)
        for _ in range(8):
            if depth < 512 or (A.softmax_exp_sums(x, beta, s) < (1 << 28) - (1 << 22)).all():
                break
            s = f32(s * 2.0)
    inp = _act(g, x, s, z)
    oq = LOG_SOFTMAX_OUT if log else SOFTMAX_OUT
    out = g.output(shape, *oq)
    attrs = {} if log else {"beta": float(beta)}
    g.clause = _clause(op, *clause)
    case = Case(op=op, inputs=[inp], outputs=[out], attrs=attrs, clause=g.clause)
    case.description = f"{op} over the last axis of {shape}, input scale {s:.4g}" + (f"; {desc}" if desc else "")
    return case


@generator("SOFTMAX", variants={"beta": 3, "scale_extreme": 3, "large_reduction": 3, "all_equal": 2,
                                "diff_min": 2, "tie": 3, "sum_overflow": 1})
def gen_softmax(g: Gen) -> Case:
    return _softmax_like(g, "SOFTMAX")


@generator("LOG_SOFTMAX", variants={"scale_extreme": 2, "large_reduction": 2, "all_equal": 2,
                                    "diff_min": 2, "tie": 3})
def gen_log_softmax(g: Gen) -> Case:
    return _softmax_like(g, "LOG_SOFTMAX")


# ----------------------------------------------------------------------------- LOGISTIC / TANH

def _logistic_tie_scale(g: Gen) -> float | None:
    """A float32 d > 0 with 1/(1 + expf(-d)) exactly (2k+1)/512 in float32 (a table entry
    256 f = k + 1/2 exactly), where expf(-d) is at least 0.1 ULP away from a float32
    rounding boundary (so any expf within 0.4 ULP gives the same table)."""
    one = np.float32(1.0)
    found = []
    for j in range(24):
        h = (2 * (128 + j) + 1) / 512.0
        es = _f32_neighbours(1.0 / h - 1.0)
        ok = (one / (one + es)).astype(np.float32) == np.float32(h)
        for e in es[ok]:
            ds = _f32_neighbours(-math.log(float(e)))
            e64 = np.exp(-ds.astype(np.float64))
            good = (e64.astype(np.float32) == e) & (np.abs(e64 - float(e)) < 0.4 * _ulp32(e))
            found.extend(float(d) for d in ds[good])
    return g.choice(sorted(set(found))) if found else None


def _tanh_tie_scale(g: Gen) -> float | None:
    """A float32 d > 0 with tanh(d) within 0.05 ULP of (2k+1)/256 (a table entry 128 f = k + 1/2
    once tanhf rounds to float32)."""
    found = []
    for j in range(64):
        h = (2 * j + 1) / 256.0
        ds = _f32_neighbours(math.atanh(h))
        t = np.tanh(ds.astype(np.float64))
        found.extend(float(d) for d in ds[np.abs(t - h) < 0.05 * _ulp32(h)])
    return g.choice(sorted(set(found))) if found else None


def _table_op(g: Gen, op: str, oq: tuple[float, int]) -> Case:
    v = g.variant
    clause = ["fixed_output"]
    shape = _shape(g)
    s = g.scale(2.0 ** -8, 2.0 ** -2)
    z = g.zero_point()
    desc = ""
    x = None
    if v == "scale_extreme":
        s = g.scale(2.0 ** -16, 2.0 ** -12) if g.index % 2 == 0 else g.scale(1.0, 16.0)
        desc = f"extreme input scale {s:.3g}"
    elif v == "full_table":
        shape = [2, 128] if g.index % 2 == 0 else [16, 16]
        x = g.rng.permutation(np.arange(-128, 128)).reshape(shape)
        desc = "every code once (the whole table)"
        clause.append("table")
    elif v == "tie":
        d = _logistic_tie_scale(g) if op == "LOGISTIC" else _tanh_tie_scale(g)
        if d is not None:
            s = d
            z = g.randint(-100, 100)
            x = g.codes(shape, zero_point=z).astype(np.int64)
            x = np.where(g.rng.random(shape) < 0.3, z + 1, x)
            desc = f"code {z + 1} dequantizes to {s:.9g}: its table entry is a .5 tie before roundf"
            clause.append("rounding.tie")
    if x is None:
        x = g.codes(shape, zero_point=z)
    inp = _act(g, x, s, z)
    out = g.output(shape, *oq)
    g.clause = _clause(op, *clause)
    case = Case(op=op, inputs=[inp], outputs=[out], attrs={}, clause=g.clause)
    case.description = f"{op} on {shape}, input ({s:.4g}, {z})" + (f"; {desc}" if desc else "")
    return case


@generator("LOGISTIC", variants={"tie": 3, "scale_extreme": 2, "full_table": 2})
def gen_logistic(g: Gen) -> Case:
    return _table_op(g, "LOGISTIC", LOGISTIC_OUT)


@generator("TANH", variants={"tie": 3, "scale_extreme": 2, "full_table": 2})
def gen_tanh(g: Gen) -> Case:
    return _table_op(g, "TANH", TANH_OUT)


# ----------------------------------------------------------------------------- HARD_SWISH

def _hard_swish_real(x: np.ndarray) -> np.ndarray:
    return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0


@generator("HARD_SWISH", variants={"reluish_shift": 3, "full_table": 2, "mult_extreme": 2})
def gen_hard_swish(g: Gen) -> Case:
    v = g.variant
    shape = _shape(g)
    s = g.scale(2.0 ** -9, 2.0 ** -3)
    z = g.zero_point()
    desc = ""
    x = None
    if v == "reluish_shift":
        # reluish multiplier s_in * 256 / 3: left shift (> 1), about 1, right shift (< 1)
        s = [g.scale(0.04, 0.2), g.scale(0.0075, 0.011), g.scale(2.0 ** -12, 2.0 ** -9)][g.index % 3]
        desc = "reluish multiplier " + ["left-shifted", "near 1", "right-shifted"][g.index % 3]
    elif v == "full_table":
        shape = [2, 128] if g.index % 2 == 0 else [16, 16]
        x = g.rng.permutation(np.arange(-128, 128)).reshape(shape)
        desc = "every code once"
    if x is None:
        x = g.codes(shape, zero_point=z)
    inp = _act(g, x, s, z)
    full = (np.arange(-128, 128) - z) * float(np.float32(s))
    so, zo = g.output_qparams(_hard_swish_real(full))
    if v == "mult_extreme":
        if g.index % 2 == 0:
            so = f32(so * 16.0)            # small output multiplier: large right shift
            desc = "output scale 16x the fitted one"
        else:
            so = f32(so / 8.0)             # outputs saturate
            desc = "output scale 1/8 of the fitted one (saturating)"
    so = max(so, f32(float(np.float32(s)) / 120.0))     # s_in / (128 s_out) < 1
    out = g.output(shape, so, zo)
    g.clause = _clause("HARD_SWISH", "output0")
    case = Case(op="HARD_SWISH", inputs=[inp], outputs=[out], attrs={}, clause=g.clause)
    case.description = f"HARD_SWISH on {shape}, input ({s:.4g}, {z}), output ({so:.4g}, {zo})" + \
        (f"; {desc}" if desc else "")
    return case


# ----------------------------------------------------------------------------- LEAKY_RELU, RELU, RELU6

def _exact_ratio_scales(g: Gen, ratio: float) -> tuple[float, float]:
    """(s_in, s_out) with float32(s_in / s_out) exactly ``ratio`` (s_out has a 4-bit mantissa)."""
    s_out = f32((1.0 + g.randint(0, 15) / 16.0) * 2.0 ** g.randint(-9, -4))
    return f32(ratio * s_out), s_out


def _relu_family(g: Gen, op: str) -> Case:
    v = g.variant
    shape = _shape(g, lo=512) if v == "ties" else _shape(g)
    clause = ["output0"]
    attrs: dict = {}
    alpha = 1.0
    if op == "LEAKY_RELU":
        alpha = f32(g.choice([0.01, 0.1, 0.2, 0.3, 0.5]))
        if v == "alpha_extreme":
            alpha = f32([1.5, -0.75, 0.0][g.index % 3])
        elif v == "ties":     # s_in * alpha / s_out = 3/16: ties the final shift breaks, below zero
            alpha = 0.5
        attrs["alpha"] = float(alpha)
    s = g.scale(2.0 ** -8, 2.0 ** -2)
    z = g.zero_point()
    x = g.codes(shape, zero_point=z).astype(np.int64)
    so = zo = None
    desc = ""
    if v in ("tie", "ties", "dbl_vs_single"):
        # ties: 3/8, a ratio below 1/2 whose ties reach the final RoundingDivideByPOT (half away
        # from zero; at 3/4 SaturatingRoundingDoublingHighMul breaks them, negative ones up)
        ratio = (g.choice([0.375, 0.75, 1.5, 0.625]) if v == "tie" else 0.375 if v == "ties"
                 else float(g.rng.uniform(0.26, 0.49)))
        if v in ("tie", "ties"):
            s, so = _exact_ratio_scales(g, ratio)
        else:
            so = f32(g.scale(2.0 ** -8, 2.0 ** -3))
            s = f32(ratio * so)
        z = g.randint(-60, 60)
        zo = g.randint(-100, 0)
        mults = [(float(np.float32(np.float32(s) / np.float32(so))), 0, 127 - z)]
        if op == "LEAKY_RELU":
            am = float(np.float32(np.float32(np.float32(s) * np.float32(alpha)) / np.float32(so)))
            if am != 0:
                mults.append((abs(am), -128 - z, -1))
        x = x.ravel()
        for real, lo, hi in mults:
            m, sh = (int(t) for t in arith.quantize_multiplier(real))
            picks = rounding_inputs(g, v, m, sh, lo, hi, x.size)
            if picks is not None:
                x = np.where(g.rng.random(x.size) < (0.9 if v == "ties" else 0.35) / len(mults), z + picks, x)
        x = x.reshape(shape)
        clause.append("rounding.double" if v == "dbl_vs_single" else "rounding.tie")
        desc = ("many differences land on k + 1/2 after the multiplier" if v != "dbl_vs_single"
                else "multiplier in [1/4, 1/2): two-step and one-step rounding disagree")
    elif v == "mult_extreme":
        z = g.randint(-20, 20)
        if g.index % 2 == 0:
            s = f32(g.scale(2.0 ** -3, 2.0 ** -1))
            x = z + g.rng.integers(-3, 4, size=shape)
            so = f32(s / 2.0 ** g.rng.uniform(6, 8))
            zo = g.randint(-40, 40)
            desc = f"s_in / s_out = {s / so:.4g} (large left shift)"
        else:
            s = f32(g.scale(2.0 ** -10, 2.0 ** -8))
            so = f32(s * 2.0 ** g.rng.uniform(7, 9))
            zo = g.randint(-40, 40)
            desc = f"s_in / s_out = {s / so:.4g} (large right shift)"
        clause.append("multiplier")
    elif v == "clamp" and op == "RELU6":
        s = g.scale(0.06, 0.2)                                  # inputs reach +-12 .. +-25
        so = f32(g.rng.uniform(7.0, 10.0) / 255.0)               # 6 maps inside the code range
        zo = -128
        desc = "the upper bound 6 lies inside the code range"
        clause.append("activation.clamp")
    inp = _act(g, x, s, z)
    if so is None:
        r = (np.arange(-128, 128) - z) * float(np.float32(s))
        if op == "RELU":
            r = np.maximum(r, 0)
        elif op == "RELU6":
            r = np.clip(r, 0, 6)
        else:
            r = np.where(r >= 0, r, float(alpha) * r)
        so, zo = g.output_qparams(r)
    out = g.output(shape, so, zo)
    g.clause = _clause(op, *clause)
    case = Case(op=op, inputs=[inp], outputs=[out], attrs=attrs, clause=g.clause)
    case.description = f"{op} on {shape}, input ({float(np.float32(s)):.4g}, {z}), output ({so:.4g}, {zo})" + \
        (f", alpha {alpha:g}" if op == "LEAKY_RELU" else "") + (f"; {desc}" if desc else "")
    return case


@generator("LEAKY_RELU", variants={"tie": 2, "dbl_vs_single": 2, "alpha_extreme": 3, "mult_extreme": 2})
def gen_leaky_relu(g: Gen) -> Case:
    return _relu_family(g, "LEAKY_RELU")


# ``ties``: added to the default run (beyond --cases-per-op) so that a kernel breaking ties one way
# is refused on LEAKY_RELU alone (tests/test_tie_power.py); RELU and RELU6 clamp every result below
# the zero point, so they have positive ties only, which their ``tie`` cases hold enough of
generator("LEAKY_RELU", variants={"ties": 2}, extra=True)(gen_leaky_relu)


@generator("RELU", variants={"tie": 2, "dbl_vs_single": 2, "mult_extreme": 2})
def gen_relu(g: Gen) -> Case:
    return _relu_family(g, "RELU")


@generator("RELU6", variants={"tie": 2, "dbl_vs_single": 2, "mult_extreme": 2, "clamp": 2})
def gen_relu6(g: Gen) -> Case:
    return _relu_family(g, "RELU6")
