/* qconform golden: the int8 dot products NumPy has no fast form for.
 *
 * out[b, o] = sum_k w[o, k] * d[b, k], exact, for int8 weights w [O, K] and int16 input
 * deviations d [B, K] (d = x - z_in of 8-bit codes, so |d| <= 255 and |w * d| <= 32640).
 * Each run of at most 65536 terms is summed in int32 (at most 65536 * 32640 < 2^31, so it
 * cannot wrap) and the runs in int64: the result is the exact sum. reference/native.py
 * builds this file with the machine's C compiler and checks it against NumPy before use.
 */
#include <stdint.h>

#define QC_RUN 65536

void qc_dot_i8_i16(const int8_t *w, const int16_t *d, int64_t *out, long B, long O, long K)
{
    for (long b = 0; b < B; b++) {
        const int16_t *dr = d + b * K;
        for (long o = 0; o < O; o++) {
            const int8_t *wr = w + o * K;
            int64_t total = 0;
            for (long k0 = 0; k0 < K; k0 += QC_RUN) {
                long k1 = K - k0 < QC_RUN ? K : k0 + QC_RUN;
                int32_t acc = 0;
                for (long k = k0; k < k1; k++)
                    acc += (int32_t)wr[k] * (int32_t)dr[k];
                total += acc;
            }
            out[b * O + o] = total;
        }
    }
}
