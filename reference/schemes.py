"""Named requantization schemes.

A scheme says how a kernel turns exact integer arithmetic into an output code:
how the real multiplier is formed (double or float32), and how it is applied
(LiteRT's fixed-point multiplier with one or two rounding steps, or a float
multiply with a given rounding). Every op's golden takes a scheme, so a report
can say which arithmetic a target's kernel matches.

Writing an op's golden against a scheme:

* ``scheme.is_fixed``: reproduce LiteRT's reference kernel (quantized multipliers,
  ``scheme.single_rounding`` selects MultiplyByQuantizedMultiplier's build, and
  ``scheme.half_up_shift`` how the double build's final shift breaks ties: pass both on to
  ``arith.mbqm`` and its kin).
  ``scheme.requantize(acc, real_multiplier, zp, lo, hi)`` does the common case.
* otherwise (a float scheme): compute the real result in ``scheme.float_dtype``
  and finish it with ``scheme.quantize_real(x, zp, lo, hi)`` (divide by the
  output scale first), or with ``scheme.requantize`` for an int accumulator.
* ``scheme.exact``: the ``exact`` scheme returns the unrounded real value (in
  output LSB, zero point added, unclamped) so a report can tell a rounding tie.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from reference import arith


@dataclass(frozen=True)
class Scheme:
    name: str
    description: str
    kind: str                       # "fixed": integer multiplier; "float": float scaling
    multiplier_precision: str       # "double" | "float": how s_in*s_w/s_out is formed
    single_rounding: bool = False   # fixed: one rounding step (ties up) instead of two
    half_up_shift: bool = False     # fixed, two steps: RoundingDivideByPOT ties toward +inf (ARM SRSHL)
    float_round: str = "half_even"  # "half_even" | "half_away" | "none" (exact scheme)
    float_dtype: str = "float32"    # float: the type the arithmetic happens in
    clamp_before_round: bool = False  # float: clamp in float, then round (MLAS, XNNPACK)
    #: uint8 x int8 products summed in adjacent pairs, each pair sum saturated to int16 (x86
    #: vpmaddubsw, as MLAS's AVX2 QGEMM without VNNI does): CONV_2D, FULLY_CONNECTED, BATCH_MATMUL
    int16_pairs: bool = False
    #: int16_pairs for int8 activations too, as the uint8 codes x + 128 (oneDNN's s8s8 path on such
    #: CPUs: its 128 * sum(w) compensation is exact, the shifted pair sums saturate): FULLY_CONNECTED's
    #: always, CONV_2D's when their zero point is 0 (OpenVINO subtracts any other one first: exact)
    pairs_s8_shift: bool = False
    aliases: tuple[str, ...] = ()

    @property
    def is_fixed(self) -> bool:
        return self.kind == "fixed"

    @property
    def exact(self) -> bool:
        return self.float_round == "none"

    @property
    def ftype(self):
        return np.float32 if self.float_dtype == "float32" else np.float64

    def real_multiplier(self, *factors_num, den=1.0) -> np.ndarray:
        """prod(factors_num) / den, left to right, in the scheme's multiplier precision.

        Factors are runtime scales (float32 values); the result is a float64 array.
        """
        if self.multiplier_precision == "float":
            acc = None
            for f in factors_num:
                f = np.asarray(f, dtype=np.float32)
                acc = f if acc is None else (acc * f).astype(np.float32)
            return np.asarray((acc / np.float32(den)).astype(np.float32), dtype=np.float64)
        acc = None
        for f in factors_num:
            f = np.asarray(np.asarray(f, dtype=np.float32), dtype=np.float64)
            acc = f if acc is None else acc * f
        return acc / np.float64(np.float32(den))

    def round(self, x) -> np.ndarray:
        """The scheme's rounding of a real value to an integer (float paths)."""
        if self.float_round == "half_even":
            return arith.round_half_even(x)
        if self.float_round == "half_away":
            return arith.round_half_away(x)
        return np.asarray(x, dtype=np.float64)

    def quantize_real(self, x, zero_point, lo: int, hi: int) -> np.ndarray:
        """x (already divided by the output scale) -> clamp(round(x) + zp), the float path."""
        x = np.asarray(x)
        if self.exact:
            return np.asarray(x, dtype=np.float64) + zero_point
        if self.clamp_before_round:
            ft = x.dtype.type if x.dtype.kind == "f" else np.float64
            x = np.clip(x, ft(lo - zero_point), ft(hi - zero_point))
        r = self.round(x)
        return np.clip(r.astype(np.int64) + zero_point, lo, hi)

    def requantize(self, acc, real_multiplier, zero_point, lo: int, hi: int) -> np.ndarray:
        """Scale an int accumulator by the real multiplier, add the zero point, clamp."""
        acc = np.asarray(acc, dtype=np.int64)
        if self.exact:
            return acc.astype(np.float64) * np.asarray(real_multiplier, dtype=np.float64) + zero_point
        if self.is_fixed:
            m, s = arith.quantize_multiplier(real_multiplier, self.single_rounding)
            out = arith.mbqm(acc, m, s, self.single_rounding, self.half_up_shift) + zero_point
            return np.clip(out, lo, hi)
        ft = self.ftype
        x = acc.astype(ft) * np.asarray(real_multiplier).astype(ft)
        return self.quantize_real(x, zero_point, lo, hi)


SCHEMES: dict[str, Scheme] = {}
_ALIASES: dict[str, str] = {}


def _add(s: Scheme) -> Scheme:
    SCHEMES[s.name] = s
    for a in s.aliases:
        _ALIASES[a.lower()] = s.name
    return s


DEFAULT_SCHEME = "tflite-ref-double"

_add(Scheme("tflite-ref-double",
            "LiteRT reference kernels, default build: double-precision multiplier, "
            "SaturatingRoundingDoublingHighMul then RoundingDivideByPOT (two roundings)",
            kind="fixed", multiplier_precision="double", float_round="half_away"))
_add(Scheme("tflite-ref-single",
            "LiteRT reference kernels built with TFLITE_SINGLE_ROUNDING: one 64-bit "
            "multiply-shift, ties toward +inf",
            kind="fixed", multiplier_precision="double", single_rounding=True, float_round="half_away"))
_add(Scheme("xnnpack-fp32",
            "XNNPACK fp32 requantization: float32 accumulator x float32 scale, clamp in float, "
            "round half to even",
            kind="float", multiplier_precision="float", float_round="half_even", float_dtype="float32",
            clamp_before_round=True))
_add(Scheme("ort-fp32-rne",
            "ONNX Runtime (MLAS): float32 multiplier formed left to right, float32(acc) x scale, "
            "clamp in float, round half to even",
            kind="float", multiplier_precision="float", float_round="half_even", float_dtype="float32",
            clamp_before_round=True))
_add(Scheme("ort-avx2-u8s8",
            "ONNX Runtime (MLAS) on x86 with AVX2 (or AVX-512BW) but no VNNI: ort-fp32-rne, with the uint8 x "
            "int8 products of CONV_2D, FULLY_CONNECTED and BATCH_MATMUL summed by vpmaddubsw, two adjacent "
            "ones (along the reduced axis, from its start) at a time, each pair sum saturated to int16",
            kind="float", multiplier_precision="float", float_round="half_even", float_dtype="float32",
            clamp_before_round=True, int16_pairs=True))
_add(Scheme("openvino-u8s8-pairs",
            "OpenVINO's CPU plugin (oneDNN) on x86 without VNNI (AVX2 or SSE4.1): ort-avx2-u8s8, with the int8 "
            "activations of FULLY_CONNECTED, and of CONV_2D when their zero point is 0, summed as the uint8 "
            "codes x + 128 (the zero point shifted alike), so their pairs saturate too",
            kind="float", multiplier_precision="float", float_round="half_even", float_dtype="float32",
            clamp_before_round=True, int16_pairs=True, pairs_s8_shift=True))
_add(Scheme("onnx-ref",
            "the onnx reference evaluator: NumPy float arithmetic (int32 x float32 promotes to "
            "float64), np.rint (half to even), clip",
            kind="float", multiplier_precision="float", float_round="half_even", float_dtype="float64"))
_add(Scheme("arm-half-up-double",
            "an ARM NEON build of LiteRT's kernels without gemmlowp's sign fixup: double-precision "
            "multiplier, MultiplyByQuantizedMultiplier as SQRDMULH then a rounding shift (SRSHL / "
            "vrshr) whose ties go toward +inf (-2.5 -> -2 where tflite-ref-double gives -3); "
            "FULLY_CONNECTED through the same multiplier",
            kind="fixed", multiplier_precision="double", float_round="half_away", half_up_shift=True))
# arm-half-up-single: one 64-bit multiply and rounding shift, ties toward +inf, on every op
# FULLY_CONNECTED included, is exactly D1's arithmetic (tflite-ref-single differs on
# FULLY_CONNECTED only, where LiteRT's reference kernel uses std::round): an alias, not a second
# golden that would tie with it everywhere.
_add(Scheme("caffe-d1",
            "SNPS-Caffe D1 (= arm-half-up-single): double-precision multiplier, one rounding step "
            "(a 64-bit multiply and rounding shift, ties toward +inf) on every op",
            kind="fixed", multiplier_precision="double", single_rounding=True, float_round="half_away",
            aliases=("D1", "d1", "arm-half-up-single")))
# caffe-d2 differs from tflite-ref-double on FULLY_CONNECTED only: there it is the classic gemmlowp
# requantization (GetQuantizedConvolutionMultipler's multiplier, SRDHM then RDBPOT) that TFLite Micro's
# FC kernel and the TOSA converter's FC lowering (RESCALE with DOUBLE_ROUND) keep, where LiteRT's
# reference FC now rounds once with std::round: so gemmlowp-fc-double is its alias, not a second
# golden that would tie with it everywhere.
_add(Scheme("caffe-d2",
            "SNPS-Caffe D2 (= gemmlowp-fc-double): double-precision multiplier, two rounding steps "
            "(SRDHM + RDBPOT) on every op, FULLY_CONNECTED included (the classic gemmlowp FC "
            "requantization of TFLite Micro and TOSA; LiteRT's reference FC uses std::round)",
            kind="fixed", multiplier_precision="double", float_round="half_away",
            aliases=("D2", "d2", "gemmlowp-fc-double")))
_add(Scheme("caffe-f2",
            "SNPS-Caffe F2 (and Caffe2): single-precision multiplier, two rounding steps",
            kind="fixed", multiplier_precision="float", float_round="half_away", aliases=("F2", "f2")))
_add(Scheme("exact",
            "no rounding at all: the real result in output LSB (for labelling ties; not a kernel)",
            kind="float", multiplier_precision="double", float_round="none", float_dtype="float64"))


def get_scheme(name: str | Scheme | None) -> Scheme:
    if name is None:
        return SCHEMES[DEFAULT_SCHEME]
    if isinstance(name, Scheme):
        return name
    if name in SCHEMES:
        return SCHEMES[name]
    if name.lower() in _ALIASES:
        return SCHEMES[_ALIASES[name.lower()]]
    raise KeyError(f"unknown scheme '{name}' (known: {', '.join(SCHEMES)})")


def kernel_schemes() -> list[str]:
    """Schemes that model a kernel (everything but ``exact``)."""
    return [n for n, s in SCHEMES.items() if not s.exact]
