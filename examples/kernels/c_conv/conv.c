/*
 * An int8 CONV_2D kernel in C, as a hardware team would bring it to qconform.
 *
 * Layouts and arithmetic follow the LiteRT int8 spec and LiteRT's reference kernel
 * (reference_integer_ops::ConvPerChannel with PopulateConvolutionQuantizationParams):
 *
 *   input  NHWC int8, zero point z_in
 *   filter OHWI int8 (symmetric), one scale per output channel (or one for all)
 *   bias   int32 per output channel (optional), scale s_in * s_w[c]
 *   output NHWC int8, zero point z_out
 *
 *   acc[c]  = sum over in-bounds taps of w * (x - z_in)  + bias[c]   (int32, wraps)
 *   real[c] = (double)s_in * (double)s_w[c] / (double)s_out
 *   m[c], shift[c] = QuantizeMultiplier(real[c])       (frexp, round half away)
 *   out     = clamp(MultiplyByQuantizedMultiplier(acc, m, shift) + z_out, act_min, act_max)
 *
 * with MultiplyByQuantizedMultiplier's default (double rounding) build:
 * RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(acc << left, m), right).
 * Grouped convolution: in_c = groups * filter_c, output channel o uses group
 * o / (out_c / groups).
 *
 * Build:   cc -shared -fPIC -O2 conv.c -o libqcconv.so
 * Wrong:   cc -shared -fPIC -O2 -DQC_BUGGY conv.c -o libqcconv_buggy.so
 *          (the final shift truncates instead of rounding: the suite must catch it)
 *
 * The C ABI is qc_conv2d_int8() below; examples/kernels/c_conv/target.py calls it
 * through ctypes. Copy this file, put your kernel behind the same function, and
 * the suite certifies it.
 */

#include <math.h>
#include <stdint.h>
#include <stddef.h>

typedef struct {
    int32_t batch, in_h, in_w, in_c;          /* input NHWC */
    int32_t out_h, out_w, out_c;              /* output NHWC (batch as input) */
    int32_t k_h, k_w, filter_c;               /* filter OHWI: out_c x k_h x k_w x filter_c */
    int32_t stride_h, stride_w, dil_h, dil_w;
    int32_t pad_top, pad_left;                /* SAME/VALID already resolved by the caller */
    int32_t input_zp, output_zp;
    int32_t act_min, act_max;                 /* fused activation, in output codes */
    float input_scale, output_scale;
    const float *filter_scales;               /* n_filter_scales values: 1 or out_c */
    int32_t n_filter_scales;
} qc_conv_params;

enum { QC_OK = 0, QC_BAD_SHAPE = 1, QC_BAD_SCALES = 2 };

static void quantize_multiplier(double d, int32_t *m, int *shift) {
    if (d == 0.0) { *m = 0; *shift = 0; return; }
    double q = frexp(d, shift);
    int64_t q_fixed = (int64_t)round(q * (double)(1LL << 31));
    if (q_fixed == (1LL << 31)) { q_fixed /= 2; ++*shift; }
    if (*shift < -31) { *shift = 0; q_fixed = 0; }
    *m = (int32_t)q_fixed;
}

static int32_t srdhm(int32_t a, int32_t b) {         /* SaturatingRoundingDoublingHighMul */
    if (a == INT32_MIN && b == INT32_MIN) return INT32_MAX;
    int64_t ab = (int64_t)a * (int64_t)b;
    int64_t nudge = ab >= 0 ? (1LL << 30) : (1 - (1LL << 30));
    return (int32_t)((ab + nudge) / (1LL << 31));      /* C division truncates */
}

static int32_t rdbpot(int32_t x, int exponent) {     /* RoundingDivideByPOT: ties away from 0 */
#ifdef QC_BUGGY
    return x >> exponent;                              /* the deliberate bug: truncation */
#else
    int32_t mask = (int32_t)((1LL << exponent) - 1);
    int32_t remainder = x & mask;
    int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> exponent) + (remainder > threshold ? 1 : 0);
#endif
}

static int32_t mbqm(int32_t x, int32_t m, int shift) {
    int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
    int32_t xl = (int32_t)(uint32_t)((uint32_t)x << left);   /* wraps like the int32 multiply */
    return rdbpot(srdhm(xl, m), right);
}

int qc_conv2d_int8(const qc_conv_params *p, const int8_t *input, const int8_t *filter,
                   const int32_t *bias, int8_t *output) {
    if (p->filter_c <= 0 || p->in_c % p->filter_c) return QC_BAD_SHAPE;
    int32_t groups = p->in_c / p->filter_c;
    if (p->out_c % groups) return QC_BAD_SHAPE;
    if (p->n_filter_scales != 1 && p->n_filter_scales != p->out_c) return QC_BAD_SCALES;
    int32_t per_group = p->out_c / groups;
    for (int32_t o = 0; o < p->out_c; ++o) {
        double s_w = (double)p->filter_scales[p->n_filter_scales == 1 ? 0 : o];
        double real = (double)p->input_scale * s_w / (double)p->output_scale;
        int32_t m; int shift;
        quantize_multiplier(real, &m, &shift);
        int32_t g = o / per_group;
        for (int32_t b = 0; b < p->batch; ++b)
        for (int32_t oy = 0; oy < p->out_h; ++oy)
        for (int32_t ox = 0; ox < p->out_w; ++ox) {
            int64_t acc = 0;
            for (int32_t ky = 0; ky < p->k_h; ++ky) {
                int32_t iy = oy * p->stride_h - p->pad_top + ky * p->dil_h;
                if (iy < 0 || iy >= p->in_h) continue;
                for (int32_t kx = 0; kx < p->k_w; ++kx) {
                    int32_t ix = ox * p->stride_w - p->pad_left + kx * p->dil_w;
                    if (ix < 0 || ix >= p->in_w) continue;
                    const int8_t *xrow = input + (((size_t)b * p->in_h + iy) * p->in_w + ix) * p->in_c
                                         + (size_t)g * p->filter_c;
                    const int8_t *wrow = filter + (((size_t)o * p->k_h + ky) * p->k_w + kx) * p->filter_c;
                    for (int32_t c = 0; c < p->filter_c; ++c)
                        acc += (int32_t)wrow[c] * ((int32_t)xrow[c] - p->input_zp);
                }
            }
            if (bias) acc += bias[o];
            int32_t acc32 = (int32_t)(uint32_t)(uint64_t)acc;   /* the int32 accumulator wraps */
            int32_t v = mbqm(acc32, m, shift) + p->output_zp;
            if (v < p->act_min) v = p->act_min;
            if (v > p->act_max) v = p->act_max;
            output[(((size_t)b * p->out_h + oy) * p->out_w + ox) * p->out_c + o] = (int8_t)v;
        }
    }
    return QC_OK;
}
