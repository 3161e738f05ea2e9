"""Generators of the elementwise family.

ADD, SUB, MUL (requantizing binary ops), MAXIMUM, MINIMUM (same-scale selection),
LESS, LESS_EQUAL, GREATER, GREATER_EQUAL, EQUAL, NOT_EQUAL (comparisons of real
values), QUANTIZE (float32 -> int8 and int8 -> int8), DEQUANTIZE (int8 -> float32),
ARG_MAX, ARG_MIN.

Edge variants construct what they name from the kernels' documented arithmetic:
``tie`` makes the scales powers of two apart so exact results land on k.5 output
LSB, ``dbl_vs_single`` nudges such scales by a few float32 ulps and keeps the
inputs where LiteRT's two rounding steps and a single rounding disagree (found
with the golden's own arithmetic, see ``_disagreeing``), ``mult_extreme`` puts the
quantized multipliers at the ends of their mantissa and shift ranges.
"""

from __future__ import annotations

import numpy as np

from reference import golden
from suite.core.case import Case, Tensor
from suite.cases.generate import Gen, f32, generator, real_values

ACTS = ["NONE", "NONE", "NONE", "RELU", "RELU6", "RELU_N1_TO_1"]
COMPARISONS = ["LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"]


def _clause(op: str, *parts: str) -> str:
    return "/".join(("litert-int8", op) + parts)


def _codes_i8(values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64).astype(np.int8)


# per-rank extent ranges: a case holds a few hundred to a few thousand elements
_EXTENT = {1: (64, 1024), 2: (8, 48), 3: (4, 14), 4: (3, 8), 5: (2, 5)}


def _dims(g: Gen, rank: int) -> list[int]:
    lo, hi = _EXTENT[rank]
    return g.dims(rank, lo, hi)


def _shapes(g: Gen, max_rank: int = 4) -> tuple[list[int], list[int]]:
    """Input shapes of a binary op: equal, or (``broadcast``, 30% of ``random``) NumPy-broadcastable.

    Broadcast cases drop dimensions of one side to 1 and sometimes its leading
    dimensions (a lower rank), in either operand.
    """
    bcast = g.variant == "broadcast" or (g.variant == "random" and g.rng.random() < 0.3)
    rank = g.randint(2, max_rank) if bcast else g.randint(1, min(max_rank, 4))
    a = _dims(g, rank)
    if not bcast:
        return a, list(a)
    b = [d if g.rng.random() < 0.5 else 1 for d in a]
    if g.rng.random() < 0.4:
        b = b[g.randint(1, rank - 1):] if rank > 1 else b
    if g.rng.random() < 0.5:
        a, b = b, a
    return a, b


def _scale_pow2_family(g: Gen, lo: float = 2 ** -8, hi: float = 2 ** -3) -> float:
    """A random float32 scale with few mantissa bits (so small multiples of it stay exact)."""
    e = g.rng.uniform(np.log2(lo), np.log2(hi))
    mant = g.randint(2 ** 6, 2 ** 7 - 1) / 2 ** 7          # 7 significant bits
    return f32(mant * 2.0 ** np.floor(e))


def _disagreeing(case: Case, grid: list[np.ndarray], n: int, g: Gen,
                 schemes=("tflite-ref-double", "tflite-ref-single")) -> np.ndarray | None:
    """Indices into ``grid`` (candidate input codes, one array per input) where the
    golden's results under ``schemes`` differ and the exact result is not a tie.

    The case's inputs are replaced by the grid to evaluate; up to ``n`` indices are
    returned in random order, or None when there are none.
    """
    trial = Case(op=case.op, inputs=[Tensor(t.dtype, tuple(v.shape), v, t.scale, t.zero_point, 0)
                                     for t, v in zip(case.inputs, grid)],
                 outputs=[Tensor(o.dtype, tuple(grid[0].shape), None, o.scale, o.zero_point, 0)
                          for o in case.outputs], attrs=dict(case.attrs))
    outs = [golden(trial, s)[0].astype(np.int64) for s in schemes]
    ex = golden(trial, "exact")[0]
    differ = np.zeros(grid[0].shape, bool)
    for o in outs[1:]:
        differ |= o != outs[0]
    frac = np.abs(ex - np.floor(ex) - 0.5)
    idx = np.flatnonzero(differ & (frac > 1e-9))
    if idx.size == 0:
        return None
    g.rng.shuffle(idx)
    return idx[:n]


def _pair_grid() -> tuple[np.ndarray, np.ndarray]:
    """Every (a, b) pair of int8 codes, flattened: 65,536 candidates."""
    a, b = np.meshgrid(np.arange(-128, 128), np.arange(-128, 128), indexing="ij")
    return _codes_i8(a.ravel()), _codes_i8(b.ravel())


# =========================================================================== ADD / SUB / MUL

def _exact_output(g: Gen, real: np.ndarray, so: float) -> int:
    """An output zero point that keeps most exact results of a tie case inside int8."""
    mid = float(np.median(real)) / so if real.size else 0.0
    return int(np.clip(round(-mid), -100, 100))


def _binary_case(op: str, a: Tensor, b: Tensor, so: float, zo: int, act: str = "NONE") -> Case:
    out_shape = list(np.broadcast_shapes(tuple(a.shape), tuple(b.shape)))
    out = Tensor("int8", tuple(out_shape), None, [f32(so)], [int(zo)], 0)
    return Case(op=op, inputs=[a, b], outputs=[out], attrs={"fused_activation_function": act})


def _combine(op: str, ra: np.ndarray, rb: np.ndarray) -> np.ndarray:
    return ra + rb if op == "ADD" else ra - rb if op == "SUB" else ra * rb


def _tie_scales(g: Gen, op: str, j: int | None = None) -> tuple[float, float, float]:
    """Scales whose exact results are multiples of 1/2 or 1/4 output LSB.

    ADD/SUB: s_b = s_a * 2^t (t in -1..1), s_out = max(s_a, s_b) * 2^j (j in 1..2): every
    LiteRT multiplier is a power of two, each step is exact up to the final
    RoundingDivideByPOT, which sees the exact k.5. MUL: s_out = s_a * s_b * 2^j, the float32
    multiplier is exactly 2^-j.
    """
    sa = _scale_pow2_family(g)
    if op in ("ADD", "SUB"):
        sb = f32(sa * 2.0 ** g.randint(-1, 1))
        so = f32(max(sa, sb) * 2.0 ** g.randint(1, 2))
    else:
        sb = _scale_pow2_family(g, 2 ** -6, 2 ** -2)
        so = f32(sa * sb * 2.0 ** (g.randint(1, 3) if j is None else j))
    return sa, sb, so


def _binary_tie(g: Gen, op: str) -> Case:
    """``tie``; ``ties`` (MUL): the multiplier 1/4 on even products, which
    SaturatingRoundingDoublingHighMul halves exactly (it would round odd ones, negative ties up,
    and make double-rounding differences away from ties); the final RoundingDivideByPOT breaks
    every tie (a product = 2 mod 4, about a third of ~400 elements) away from zero."""
    rich = g.variant == "ties"
    sa, sb, so = _tie_scales(g, op, 2 if rich else None)
    shape = [g.randint(16, 24), g.randint(16, 24)] if rich else _dims(g, g.randint(1, 3))
    za, zb = g.zero_point(), g.zero_point()
    a = g.activation(shape, sa, za)
    b = g.activation(shape, sb, zb)
    if op == "MUL":
        # small factors keep the products inside the output range
        a.data = g.codes(shape, lo=max(-128, za - 12), hi=min(127, za + 12))
        b.data = g.codes(shape, lo=max(-128, zb - 12), hi=min(127, zb + 12))
        if rich:    # b - z_b even: SaturatingRoundingDoublingHighMul halves every product exactly
            d = 2 * g.rng.integers(-6, 7, size=tuple(shape))
            b.data = np.where((zb + d >= -128) & (zb + d <= 127), zb + d, zb).astype(np.int8)
    real = _combine(op, real_values(a), real_values(b))
    c = _binary_case(op, a, b, so, _exact_output(g, real, so))
    c.clause = _clause(op, "output0", "rounding")
    c.description = (f"scales {sa:.6g}, {sb:.6g} -> {so:.6g}: exact results on k/2, k/4 output LSB; "
                     f"LiteRT rounds half away from zero")
    return c


def _binary_dbl_vs_single(g: Gen, op: str) -> Case:
    """Tie-family scales with s_out raised by 1..4 ulps: exact results sit just inside k.5
    (toward zero), where SaturatingRoundingDoublingHighMul can round onto the tie that
    RoundingDivideByPOT then rounds away from zero, while one rounding stays inside. The case
    keeps only inputs where the two builds give different codes."""
    for _ in range(12):
        sa, sb, so = _tie_scales(g, op)
        so = f32(so * (1.0 + g.choice([1, 2, 3, 4]) * 2.0 ** -23))
        za, zb = g.zero_point(), g.zero_point()
        a = Tensor("int8", (1,), np.zeros(1, np.int8), [sa], [za])
        b = Tensor("int8", (1,), np.zeros(1, np.int8), [sb], [zb])
        probe = _binary_case(op, a, b, so, 0)
        ga, gb = _pair_grid()
        idx = _disagreeing(probe, [ga, gb], 256, g)
        if idx is None:
            continue
        real = _combine(op, (ga[idx].astype(np.float64) - za) * sa, (gb[idx].astype(np.float64) - zb) * sb)
        zo = _exact_output(g, real, so)
        probe.outputs[0].zero_point = [zo]
        idx = _disagreeing(probe, [ga, gb], 256, g)   # the output zero point may clip some
        if idx is None:
            continue
        n = len(idx)
        a = Tensor("int8", (n,), ga[idx], [sa], [za])
        b = Tensor("int8", (n,), gb[idx], [sb], [zb])
        c = _binary_case(op, a, b, so, zo)
        c.clause = _clause(op, "output0", "rounding")
        c.description = (f"s_out nudged off a power-of-two ratio: {n} inputs where LiteRT's double "
                         f"rounding and single rounding give different codes")
        return c
    raise RuntimeError(f"{op} dbl_vs_single: no disagreeing inputs found")  # pragma: no cover


def _binary_mult_extreme(g: Gen, op: str) -> Case:
    """Quantized multipliers at the ends of their ranges (index picks which).

    0: output multiplier tiny (s_out >> inputs): most results round to the zero point.
    1: ADD/SUB: input scales 2^10..2^20 apart, input 2's multiplier shifts far right;
       MUL: multiplier mantissa at its top (ratio just below a power of two).
    2: ADD/SUB: output multiplier just below 1 (the largest LiteRT's ADD accepts), inputs
       that nearly cancel; MUL: multiplier 2^6..2^7 (large left shift, most results clip).
    """
    k = g.index % 3
    shape = _dims(g, g.randint(1, 3))
    sa = g.scale(2 ** -8, 2 ** -2)
    za, zb = g.zero_point(), g.zero_point()
    if op in ("ADD", "SUB"):
        if k == 0:
            sb = g.scale(2 ** -8, 2 ** -2)
            so = f32(max(sa, sb) * 2.0 ** g.rng.uniform(8, 14))
            desc = "output multiplier ~2^-30: results near the zero point"
        elif k == 1:
            sb = f32(sa * 2.0 ** -g.rng.uniform(10, 20))
            so = g.scale(2 ** -8, 2 ** -2)
            desc = "input scales 2^10..2^20 apart: input 2 multiplier with a large right shift"
        else:
            sb = sa
            twice = 2.0 * sa
            so = f32(twice / 2 ** 20 * (1 + 2.0 ** -10))
            while twice / float(np.float32(2 ** 20) * np.float32(so)) >= 1.0:
                so = float(np.nextafter(np.float32(so), np.float32(1)))
            desc = ("output multiplier just below 1 (largest accepted): half the elements cancel "
                    "exactly (zero point), the rest saturate")
        a = g.activation(shape, sa, za)
        b = g.activation(shape, sb, zb)
        if k == 2:
            b.data = _cancelling(g, op, a, b)
        zo = g.zero_point()
    else:
        sb = g.scale(2 ** -8, 2 ** -2)
        if k == 0:
            so = f32(sa * sb * 2.0 ** g.rng.uniform(20, 29))
            desc = "multiplier ~2^-20..2^-29: results near the zero point"
        elif k == 1:
            # s_a * s_b / s_out = 2^e * (1 - 2^-23): top of the mantissa range
            p = float(np.float32(np.float32(sa) * np.float32(sb)))
            so = f32(p / (2.0 ** -g.randint(4, 10)) * (1 + 2.0 ** -23))
            desc = "multiplier mantissa at its top (just below a power of two)"
        else:
            so = f32(sa * sb / 2.0 ** g.rng.uniform(6, 7))
            desc = "multiplier 2^6..2^7: large left shift, most results clip"
        a = g.activation(shape, sa, za)
        b = g.activation(shape, sb, zb)
        zo = g.zero_point()
    c = _binary_case(op, a, b, so, zo)
    c.clause = _clause(op, "output0", "multiplier")
    c.description = desc
    return c


def _cancelling(g: Gen, op: str, a: Tensor, b: Tensor) -> np.ndarray:
    """b's codes with about half of them cancelling a exactly (a + b = 0 for ADD, a - b = 0
    for SUB; a and b share one scale), the rest as drawn."""
    target = (-1 if op == "ADD" else 1) * (a.data.astype(np.int64) - a.zero_point[0]) + b.zero_point[0]
    ok = (target >= -128) & (target <= 127) & (g.rng.random(a.data.shape) < 0.5)
    return np.where(ok, target, b.data).astype(np.int8)


def _sub_mult_gt1(g: Gen) -> Case:
    """SUB with an output multiplier 2*max(s1, s2) / (2^20 * s_out) in (1.5, 12).

    LiteRT's Prepare takes QuantizeMultiplierGreaterThanOne, but the reference kernel applies
    the result with MultiplyByQuantizedMultiplierSmallerThanOneExp, i.e. a right shift by a
    negative amount (known finding ``sub-output-multiplier-gt1``). The golden applies the
    multiplier as MultiplyByQuantizedMultiplier would. The output LSB is far below the input
    LSB, so half the elements cancel exactly (result: the zero point) and the rest saturate.
    """
    shape = _dims(g, g.randint(1, 3))
    sa = g.scale(2 ** -6, 2 ** -2)
    so = f32(2.0 * sa / 2 ** 20 / g.rng.uniform(1.5, 12.0))
    a = g.activation(shape, sa)
    b = g.activation(shape, sa)
    b.data = _cancelling(g, "SUB", a, b)
    c = _binary_case("SUB", a, b, so, g.zero_point())
    c.clause = _clause("SUB", "output0", "multiplier")
    c.description = "output multiplier > 1 (QuantizeMultiplierGreaterThanOne in Prepare)"
    return c


def _binary(g: Gen, op: str) -> Case:
    v = g.variant
    if v in ("tie", "ties"):
        return _binary_tie(g, op)
    if v == "dbl_vs_single":
        return _binary_dbl_vs_single(g, op)
    if v == "mult_extreme":
        return _binary_mult_extreme(g, op)
    if v == "mult_gt1":
        return _sub_mult_gt1(g)
    sa_, sb_ = _shapes(g, max_rank=5)
    a = g.activation(sa_, scale=g.scale(2 ** -8, 2 ** -2))
    b = g.activation(sb_, scale=g.scale(2 ** -8, 2 ** -2))
    real = _combine(op, real_values(a), real_values(b))
    s, z = g.output_qparams(real)
    if v == "activation":
        act = ["RELU", "RELU6", "RELU_N1_TO_1"][g.index % 3]
    elif v == "random":
        act = g.choice(ACTS)
    else:
        act = "NONE"
    c = _binary_case(op, a, b, s, z, act)
    if v == "broadcast":
        c.clause = _clause(op, "broadcast")
        c.description = f"broadcast {list(a.shape)} with {list(b.shape)}"
    elif v == "activation":
        c.clause = _clause(op, "fused_activation_function")
        c.description = f"fused {act}: clamp bounds zp + round(bound / s_out)"
    elif v in ("sat_hi", "sat_lo"):
        c.clause = _clause(op, "output0", "range")
    elif v in ("zp_min", "zp_max"):
        c.clause = _clause(op, "input0", "zero_point")
    return c


_BINARY_VARIANTS = {"broadcast": 3, "activation": 3, "tie": 2, "dbl_vs_single": 2, "mult_extreme": 3}


@generator("ADD", variants=dict(_BINARY_VARIANTS))
def gen_add(g: Gen) -> Case:
    return _binary(g, "ADD")


@generator("SUB", variants={**_BINARY_VARIANTS, "mult_gt1": 2})
def gen_sub(g: Gen) -> Case:
    return _binary(g, "SUB")


@generator("MUL", variants=dict(_BINARY_VARIANTS))
def gen_mul(g: Gen) -> Case:
    return _binary(g, "MUL")


# ``ties`` (see _binary_tie): added to the default run (beyond --cases-per-op) so that a kernel
# breaking ties one way is refused on MUL alone (tests/test_tie_power.py); ADD and SUB's ``tie``
# cases hold enough
generator("MUL", variants={"ties": 2}, extra=True)(gen_mul)


# =========================================================================== MAXIMUM / MINIMUM

def _max_min(g: Gen, op: str) -> Case:
    """Both inputs and the output share one (scale, zero point) (the spec's same_scale)."""
    sa_, sb_ = _shapes(g, max_rank=5)
    s, z = g.scale(), g.zero_point()
    a = g.activation(sa_, s, z)
    b = g.activation(sb_, s, z)
    if g.variant == "equal" and tuple(sa_) == tuple(sb_):
        # half of the elements equal: which input a kernel returns must not matter
        eq = g.rng.random(sa_) < 0.5
        b.data = np.where(eq, a.data, b.data).astype(np.int8)
    out_shape = list(np.broadcast_shapes(tuple(sa_), tuple(sb_)))
    c = Case(op=op, inputs=[a, b], outputs=[Tensor("int8", tuple(out_shape), None, [s], [z], 0)])
    c.clause = _clause(op, "same_scale")
    if g.variant == "broadcast":
        c.description = f"broadcast {list(sa_)} with {list(sb_)}"
    return c


@generator("MAXIMUM", variants={"broadcast": 3, "equal": 2})
def gen_maximum(g: Gen) -> Case:
    return _max_min(g, "MAXIMUM")


@generator("MINIMUM", variants={"broadcast": 3, "equal": 2})
def gen_minimum(g: Gen) -> Case:
    return _max_min(g, "MINIMUM")


# =========================================================================== comparisons

def _cmp_case(op: str, a: Tensor, b: Tensor) -> Case:
    out_shape = list(np.broadcast_shapes(tuple(a.shape), tuple(b.shape)))
    return Case(op=op, inputs=[a, b], outputs=[Tensor("bool", tuple(out_shape), None, None, None, 0)])


def _inject_equal(g: Gen, a: Tensor, b: Tensor, frac: float = 0.5) -> None:
    """Set about ``frac`` of b's codes so its real value equals a's at the same index."""
    if tuple(a.shape) != tuple(b.shape):
        return
    ka, kb = a.scale[0], b.scale[0]
    da = a.data.astype(np.int64) - a.zero_point[0]
    num = da * np.float64(ka)
    qb = np.round(num / np.float64(kb)) + b.zero_point[0]
    exact = ((qb - b.zero_point[0]) * np.float64(kb) == num) & (qb >= -128) & (qb <= 127)
    pick = exact & (g.rng.random(a.shape) < frac)
    b.data = np.where(pick, qb, b.data).astype(np.int8)


def _comparison(g: Gen, op: str) -> Case:
    """Comparison cases LiteRT's fixed-point kernel resolves exactly (all but ``resolution``).

    LiteRT compares round(256 * real) of each input (see reference.ops.elementwise
    .litert_compare_operand). That is exact when both inputs share a scale >= 2^-8 (the
    rounding is then strictly increasing in q - z), or when both scales are multiples of
    2^-8 (every 256 * real is an integer): the random and edge variants use one of the two,
    with many exactly equal reals. ``resolution`` is the rest.
    """
    v = g.variant
    if v == "resolution":
        return _cmp_resolution(g, op)
    sa_, sb_ = _shapes(g, max_rank=4)
    if g.rng.random() < 0.5:
        s = g.scale(2 ** -8, 0.5)
        sa, sb = s, s
        kind = "one scale >= 2^-8"
    elif v == "equal":
        # ratios 2, 1/2, 3/2 of an even multiple of 2^-8: many codes have an equal partner
        k = g.choice([2, 4, 6, 8, 12, 16])
        sa = f32(k / 256)
        sb = f32(sa * g.choice([2.0, 0.5, 1.5]))
        kind = "scales multiples of 2^-8"
    else:
        base = g.choice([1, 2, 3, 4, 6, 8, 12, 16])
        sa = f32(base * g.choice([1, 2, 3, 4]) / 256)
        sb = f32(base * g.choice([1, 2, 3, 4]) / 256)
        kind = "scales multiples of 2^-8"
    a = g.activation(sa_, sa)
    b = g.activation(sb_, sb)
    _inject_equal(g, a, b, 0.8 if v == "equal" else 0.4)
    c = _cmp_case(op, a, b)
    c.clause = _clause(op, "real_value")
    c.description = f"{kind}: s = ({sa:.6g}, {sb:.6g}), z = ({a.zero_point[0]}, {b.zero_point[0]})"
    if v == "broadcast":
        c.description += f"; broadcast {list(sa_)} with {list(sb_)}"
    return c


def _cmp_resolution(g: Gen, op: str) -> Case:
    """Cases where LiteRT's 1/256 grid and the spec's real comparison disagree.

    0: one tiny scale (2^-12..2^-9), codes within 4 of the zero points: reals a few
       thousandths apart that LiteRT rounds to the same value (EQUAL(+-1, 0) true).
    1: unrelated scales 2^-9..2^-6 and b the nearest code to a's real: reals closer than
       1/256 but different.
    2: equal reals at scales s and s/2^t with s = 1/2 + k/512: 256 * real is a negative k.5,
       which LiteRT rounds toward +inf for one input (shift 0) and away from zero for the other.
    """
    k = g.index % 3
    shape = _dims(g, g.randint(1, 3))
    if k == 0:
        s = g.scale(2 ** -12, 2 ** -9)
        za, zb = g.zero_point(), g.zero_point()
        a = g.activation(shape, s, za, data=g.codes(shape, lo=max(-128, za - 4), hi=min(127, za + 4)))
        b = g.activation(shape, s, zb, data=g.codes(shape, lo=max(-128, zb - 4), hi=min(127, zb + 4)))
        desc = f"scale {s:.6g} < 2^-8: LiteRT resolves only steps of 1/256 (256 * s = {256 * s:.4g})"
    elif k == 1:
        sa, sb = g.scale(2 ** -9, 2 ** -6), g.scale(2 ** -9, 2 ** -6)
        a = g.activation(shape, sa)
        ra = real_values(a)
        zb = g.zero_point()
        qb = np.clip(np.round(ra / sb) + zb, -128, 127)
        b = Tensor("int8", tuple(shape), _codes_i8(qb), [sb], [zb])
        desc = f"scales {sa:.6g}, {sb:.6g}: b is the code nearest to a's real value"
    else:
        kk = 2 * g.randint(0, 127) + 1
        sa = f32(0.5 + kk / 512)
        t = g.randint(1, 3)
        sb = f32(sa / 2 ** t)
        za, zb = g.zero_point(), g.zero_point()
        lim = 127 >> t
        da = g.rng.integers(-lim, lim + 1, size=tuple(shape))
        da = np.where(g.rng.random(tuple(shape)) < 0.7, -(np.abs(da) | 1), da)   # mostly negative odd
        qa = np.clip(da + za, -128, 127)
        da = qa - za
        qb = np.clip(da * 2 ** t + zb, -128, 127)
        a = Tensor("int8", tuple(shape), _codes_i8(qa), [sa], [za])
        b = Tensor("int8", tuple(shape), _codes_i8(qb), [sb], [zb])
        desc = f"equal reals at scales {sa:.9g} and {sa:.9g}/2^{t}: 256 * real on negative k.5"
        if op in ("LESS", "GREATER_EQUAL"):
            # LiteRT makes the first input the larger: put it second where that shows
            a, b = b, a
    c = _cmp_case(op, a, b)
    c.clause = _clause(op, "real_value")
    c.description = desc
    return c


def _make_cmp_generator(op: str):
    @generator(op, variants={"broadcast": 3, "equal": 2, "resolution": 3})
    def gen(g: Gen) -> Case:
        return _comparison(g, op)
    gen.__name__ = f"gen_{op.lower()}"
    return gen


for _op in COMPARISONS:
    _make_cmp_generator(_op)


# =========================================================================== QUANTIZE

def _float_values(g: Gen, shape, so: float, zo: int) -> np.ndarray:
    """float32 reals over the output's representable range and a little beyond.

    ``sat_hi``/``sat_lo`` draw from the top/bottom 30% and past the end, so outputs clip.
    """
    lo, hi = (-128 - zo) * so, (127 - zo) * so
    span = hi - lo
    if g.variant == "sat_hi":
        lo, hi = hi - 0.3 * span, hi + 0.3 * span
    elif g.variant == "sat_lo":
        lo, hi = lo - 0.3 * span, lo + 0.3 * span
    else:
        lo, hi = lo - 0.05 * span, hi + 0.05 * span
    return g.rng.uniform(lo, hi, size=tuple(shape)).astype(np.float32)


def _quantize_case(x: Tensor, so: float, zo: int) -> Case:
    return Case(op="QUANTIZE", inputs=[x], outputs=[Tensor("int8", tuple(x.shape), None, [f32(so)], [int(zo)], 0)])


def _requant_ratio_case(g: Gen, ratio: float, shape, desc: str) -> Case:
    s_in = g.scale(2 ** -8, 2 ** -2)
    so = f32(s_in / ratio)
    x = g.activation(shape, s_in)
    c = _quantize_case(x, so, g.zero_point())
    c.clause = _clause("QUANTIZE", "requantize")
    c.description = desc
    return c


def _quantize(g: Gen) -> Case:
    v = g.variant
    shape = _dims(g, g.randint(1, 4))
    if v == "tie":
        # float32 x = (k + 1/2) * s exactly: x / s is exactly k.5 in float32
        so = _scale_pow2_family(g, 2 ** -8, 2 ** -1)
        zo = g.zero_point()
        k = g.rng.integers(-130 - zo, 130 - zo, size=tuple(shape))
        x = ((k + 0.5) * so).astype(np.float32)
        assert np.all(x.astype(np.float64) / so == k + 0.5)
        c = _quantize_case(Tensor("float32", tuple(shape), x), so, zo)
        c.clause = _clause("QUANTIZE", "float_input", "rounding")
        c.description = "float32 inputs with x / s exactly k.5: LiteRT rounds half away from zero"
        return c
    if v == "near_tie":
        so = _scale_pow2_family(g, 2 ** -8, 2 ** -1)
        zo = g.zero_point()
        k = g.rng.integers(-130 - zo, 130 - zo, size=tuple(shape))
        x = ((k + 0.5) * so).astype(np.float32)
        x = np.nextafter(x, np.where(g.rng.random(tuple(shape)) < 0.5, np.inf, -np.inf).astype(np.float32))
        c = _quantize_case(Tensor("float32", tuple(shape), x.astype(np.float32)), so, zo)
        c.clause = _clause("QUANTIZE", "float_input", "rounding")
        c.description = "float32 inputs one ulp off x / s = k.5"
        return c
    if v == "requant_tie":
        num, den = g.choice([(3, 8), (5, 8), (3, 4), (1, 2), (3, 2), (5, 4), (1, 4)])
        return _requant_ratio_case(g, num / den, shape,
                                   f"s_in / s_out = {num}/{den}: exact results on k.5 output LSB")
    if v == "dbl_vs_single":
        for _ in range(16):
            num, den = g.choice([(3, 8), (5, 8), (3, 4), (5, 16), (7, 16), (3, 2), (5, 4)])
            s_in = _scale_pow2_family(g)
            so = f32(s_in * den / num * (1 + g.choice([1, 2, 3]) * 2.0 ** -23))
            zi, zo = g.zero_point(), g.zero_point()
            probe = _quantize_case(Tensor("int8", (1,), np.zeros(1, np.int8), [s_in], [zi]), so, zo)
            grid = _codes_i8(np.arange(-128, 128))
            idx = _disagreeing(probe, [grid], 256, g)
            if idx is None:
                continue
            x = Tensor("int8", (len(idx),), grid[np.sort(idx)], [s_in], [zi])
            c = _quantize_case(x, so, zo)
            c.clause = _clause("QUANTIZE", "requantize", "rounding")
            c.description = (f"ratio {s_in / so:.9g} just off {num}/{den}: {len(idx)} codes where double "
                             f"and single rounding differ")
            return c
        raise RuntimeError("QUANTIZE dbl_vs_single: no disagreeing inputs")  # pragma: no cover
    if v == "mult_extreme":
        k = g.index % 3
        if k == 0:
            return _requant_ratio_case(g, 1.0, shape, "s_in == s_out (multiplier 2^30, shift 1): a zero-point shift")
        if k == 1:
            r = 2.0 ** -g.randint(1, 6) * (1 - 2.0 ** -23)
            return _requant_ratio_case(g, r, shape, "multiplier mantissa at its top (ratio just below 2^-k)")
        return _requant_ratio_case(g, 2.0 ** g.rng.uniform(5, 7), shape,
                                   "ratio 2^5..2^7: left shift, most outputs clip")
    # random and the common variants: half int8 -> int8, half float32 -> int8
    so_hint = None
    if g.rng.random() < 0.5:
        so, zo = g.scale(2 ** -8, 2 ** -2), g.zero_point()
        if v in ("sat_hi", "sat_lo"):
            so_hint = "clip"
        x = Tensor("float32", tuple(shape), _float_values(g, shape, so, zo))
        c = _quantize_case(x, so, zo)
        c.clause = _clause("QUANTIZE", "float_input")
        c.description = "float32 -> int8"
    else:
        s_in = g.scale(2 ** -8, 2 ** -2)
        x = g.activation(shape, s_in)
        ratio = 2.0 ** g.rng.uniform(-3, 3)
        if v in ("sat_hi", "sat_lo"):
            ratio = 2.0 ** g.rng.uniform(1, 3)
            so_hint = "clip"
        so = f32(s_in / ratio)
        c = _quantize_case(x, so, g.zero_point())
        c.clause = _clause("QUANTIZE", "requantize")
        c.description = f"int8 -> int8, s_in / s_out = {s_in / so:.6g}"
    if so_hint:
        c.clause = _clause("QUANTIZE", "output0", "range")
    return c


@generator("QUANTIZE", variants={"tie": 2, "near_tie": 1, "requant_tie": 2, "dbl_vs_single": 2,
                                 "mult_extreme": 3})
def gen_quantize(g: Gen) -> Case:
    return _quantize(g)


# =========================================================================== DEQUANTIZE

@generator("DEQUANTIZE", variants={"scale_extreme": 2})
def gen_dequantize(g: Gen) -> Case:
    """int8 -> float32; ``scale_extreme``: scales 2^-40..2^-30 (tiny products) or 2^6..2^12."""
    shape = _dims(g, g.randint(1, 4))
    if g.variant == "scale_extreme":
        s = g.scale(2.0 ** -40, 2.0 ** -30) if g.index % 2 == 0 else g.scale(2.0 ** 6, 2.0 ** 12)
    else:
        s = g.scale(2 ** -10, 1.0)
    x = g.activation(shape, s)
    c = Case(op="DEQUANTIZE", inputs=[x], outputs=[Tensor("float32", tuple(shape), None, None, None, 0)])
    c.clause = _clause("DEQUANTIZE", "output0")
    c.description = f"scale {s:.6g}: float32 result of (q - z) * s rounded once"
    return c


# =========================================================================== ARG_MAX / ARG_MIN

def _arg(g: Gen, op: str) -> Case:
    v = g.variant
    rank = g.randint(1, 4)
    shape = _dims(g, rank)
    axis = g.randint(0, rank - 1)
    if v == "large_reduction":
        shape = [g.randint(2, 4), g.randint(500, 1500)] if rank > 1 else [g.randint(1000, 3000)]
        rank = len(shape)
        axis = rank - 1
    x = g.activation(shape, g.scale())
    if v == "tie":
        # three distinct codes: most slices hold several maxima and minima
        vals = np.sort(g.rng.choice(np.arange(-128, 128), size=3, replace=False))
        x.data = vals[g.rng.integers(0, 3, size=tuple(shape))].astype(np.int8)
    out_shape = [d for i, d in enumerate(shape) if i != axis]
    if g.rng.random() < 0.4:
        axis -= rank                      # negative axis
    out_type = g.choice(["int32", "int64"])
    c = Case(op=op, inputs=[x, g.param(np.array([axis], np.int32))],
             outputs=[Tensor(out_type, tuple(out_shape), None, None, None, 0)],
             attrs={"output_type": out_type})
    c.clause = _clause(op, "output0")
    c.description = f"shape {shape}, axis {axis}, {out_type} indices; ties: first index"
    if v == "tie" or v.startswith("sat"):
        c.clause = _clause(op, "output0", "ties")
    return c


@generator("ARG_MAX", variants={"tie": 3, "large_reduction": 1})
def gen_arg_max(g: Gen) -> Case:
    return _arg(g, "ARG_MAX")


@generator("ARG_MIN", variants={"tie": 3, "large_reduction": 1})
def gen_arg_min(g: Gen) -> Case:
    return _arg(g, "ARG_MIN")
