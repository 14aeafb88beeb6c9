/* int8 x int8 linears for CPUs: y = x W^T (+ b) with W int8 per output channel (as cpu_quant.c)
 * and x quantized here, per row, to int8 (symmetric, one scale per row): integer dot products
 * do 4x (AVX-512 VNNI) the multiply-adds per instruction of float32 FMAs, which is what
 * compute-bound batches (decode at 16+ sequences, prefill) need.
 *
 * Built and loaded like cpu_quant.c (kernels/native/build.py). Row quantization, exactly as
 * kernels/ops/quant_a8.py's torch reference computes it (float32 throughout):
 *   absmax = max |x[m, :]|, inv = 127 / absmax, q = rint(x * inv) (ties to even) in [-127, 127],
 *   row scale = absmax / 127 (a zero row: q = 0, scale 0).
 * Then y[m, n] = (sum_k q[m, k] * w[n, k]) * row_scale[m] * w_scale[n] + bias[n], the sum exact
 * in int32 (|sum| <= K * 127 * 127 + the VNNI offset's 128 * K * 127: K <= 65536 fits).
 *
 * Weight layout (kernels/ops/quant_a8.py's pack_a8): panels of 16 output channels and quads of
 * 4 inputs, [num_panels, K4, 16, 4] int8 with K4 = ceil(K / 4) (inputs past K and channels
 * past N are zero), scale [num_panels * 16] float32, colsum [num_panels * 16] int32 = sum_k w.
 *
 * Instruction paths, all exact (tests/kernels/test_quant_a8.py builds each):
 * - AVX-512 VNNI: vpdpbusd multiplies unsigned by signed bytes, so rows are stored offset,
 *   u = q + 128 in [1, 255], and 128 * colsum[n] is taken off the sum. dpbusd adds its four
 *   products into int32 without an int16 step: nothing saturates.
 * - AVX2: vpmaddubsw adds PAIRS of u8 * s8 products into int16 with saturation, and 255 * 127 * 2
 *   = 64770 would not fit. So no offset: |q| (0..127) times sign(q) * w (|w| <= 127, the format
 *   never uses -128) gives pairs of at most 2 * 127 * 127 = 32258 < 32767, exact; vpmaddwd
 *   widens pairs of those into int32.
 * - otherwise plain C.
 */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "fg_common.h"

FG_EXPORT_CONSTANTS

#define QUAD 4
#if defined(__AVX512VNNI__) && defined(__AVX512F__)
#define PATH_VNNI 1
#define MB 8
#define NP 2
#define OFFSET 128
#elif defined(__AVX2__)
#define PATH_AVX2 1
#define MB 4
#define NP 1
#define OFFSET 0
#else
#define MB 4
#define NP 1
#define OFFSET 0
#endif

/* Which instruction path this build took: 2 = AVX-512 VNNI, 1 = AVX2, 0 = plain C. */
int quant_a8_path(void)
{
#if defined(PATH_VNNI)
    return 2;
#elif defined(PATH_AVX2)
    return 1;
#else
    return 0;
#endif
}

/* Row m of x -> kp bytes of q (+ OFFSET; padding is OFFSET, which meets zero weights), its scale. */
static void quantize_row(const float *x, int K, int kp, uint8_t *out, float *row_scale)
{
    float absmax = 0.0f;
    for (int k = 0; k < K; k++) {
        const float a = fabsf(x[k]);
        absmax = a > absmax ? a : absmax;
    }
    const float inv = absmax > 0.0f ? 127.0f / absmax : 0.0f;
    *row_scale = absmax / 127.0f;
    for (int k = 0; k < K; k++) {
        float r = rintf(x[k] * inv);
        r = r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r);
        out[k] = (uint8_t)((int)r + OFFSET);
    }
    for (int k = K; k < kp; k++)
        out[k] = (uint8_t)OFFSET;
}

/* Rows m0 .. m0+mb-1 of the quantized x against panels pan .. pan+np-1 (mb, np constants at
 * each call site, so the accumulators live in registers). */
ALWAYS_INLINE void tile(
    const uint8_t *xq, int kp, const float *row_scale, const int8_t *w, const float *scale,
    const int32_t *colsum, const float *bias, float *y, int64_t y_stride, int m0, const int mb,
    int pan, const int np, int N)
{
    const int k4 = kp / QUAD;
    const size_t panel_bytes = (size_t)kp * LANES;
    int32_t sums[MB][NP][LANES];
#if defined(PATH_VNNI)
    __m512i acc[MB][NP];
    for (int i = 0; i < mb; i++)
        for (int p = 0; p < np; p++)
            acc[i][p] = _mm512_setzero_si512();
    for (int q = 0; q < k4; q++) {
        __m512i wv[NP];
        for (int p = 0; p < np; p++)
            wv[p] = _mm512_loadu_si512((const void *)(w + (pan + p) * panel_bytes + (size_t)q * LANES * QUAD));
        for (int i = 0; i < mb; i++) {
            int32_t four;
            memcpy(&four, xq + (size_t)(m0 + i) * kp + (size_t)q * QUAD, sizeof four);
            const __m512i xv = _mm512_set1_epi32(four);
            for (int p = 0; p < np; p++)
                acc[i][p] = _mm512_dpbusd_epi32(acc[i][p], xv, wv[p]);
        }
    }
    for (int i = 0; i < mb; i++)
        for (int p = 0; p < np; p++)
            _mm512_storeu_si512((void *)sums[i][p], acc[i][p]);
#elif defined(PATH_AVX2)
    /* Two 8-channel halves per panel: 32 bytes = 8 channels x 4 inputs. */
    __m256i acc[MB][2];
    const __m256i ones = _mm256_set1_epi16(1);
    for (int i = 0; i < mb; i++)
        acc[i][0] = acc[i][1] = _mm256_setzero_si256();
    const int8_t *panel = w + pan * panel_bytes;
    for (int q = 0; q < k4; q++) {
        const __m256i w0 = _mm256_loadu_si256((const __m256i *)(panel + (size_t)q * LANES * QUAD));
        const __m256i w1 = _mm256_loadu_si256((const __m256i *)(panel + (size_t)q * LANES * QUAD + 32));
        for (int i = 0; i < mb; i++) {
            int32_t four;
            memcpy(&four, xq + (size_t)(m0 + i) * kp + (size_t)q * QUAD, sizeof four);
            const __m256i xv = _mm256_set1_epi32(four);
            const __m256i ax = _mm256_abs_epi8(xv);
            const __m256i p0 = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(w0, xv));
            const __m256i p1 = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(w1, xv));
            acc[i][0] = _mm256_add_epi32(acc[i][0], _mm256_madd_epi16(p0, ones));
            acc[i][1] = _mm256_add_epi32(acc[i][1], _mm256_madd_epi16(p1, ones));
        }
    }
    for (int i = 0; i < mb; i++) {
        _mm256_storeu_si256((__m256i *)sums[i][0], acc[i][0]);
        _mm256_storeu_si256((__m256i *)(sums[i][0] + 8), acc[i][1]);
    }
#else
    for (int i = 0; i < mb; i++)
        for (int p = 0; p < np; p++) {
            const int8_t *panel = w + (pan + p) * panel_bytes;
            const int8_t *row = (const int8_t *)(xq + (size_t)(m0 + i) * kp);
            for (int j = 0; j < LANES; j++) {
                int32_t s = 0;
                for (int q = 0; q < k4; q++)
                    for (int t = 0; t < QUAD; t++)
                        s += (int32_t)row[q * QUAD + t] * panel[((size_t)q * LANES + j) * QUAD + t];
                sums[i][p][j] = s;
            }
        }
#endif
    for (int p = 0; p < np; p++) {
        const int n0 = (pan + p) * LANES;
        const int width = N - n0 < LANES ? N - n0 : LANES;
        for (int i = 0; i < mb; i++) {
            const float rs = row_scale[m0 + i];
            float *dst = y + (int64_t)(m0 + i) * y_stride + n0;
            for (int j = 0; j < width; j++) {
                const int32_t dot = sums[i][p][j] - OFFSET * colsum[n0 + j];
                dst[j] = (float)dot * (rs * scale[n0 + j]) + (bias ? bias[n0 + j] : 0.0f);
            }
        }
    }
}

ALWAYS_INLINE void item(
    const uint8_t *xq, int kp, const float *row_scale, const int8_t *w, const float *scale,
    const int32_t *colsum, const float *bias, float *y, int64_t y_stride, int M, int pan, const int np,
    int N)
{
#define TILE(R) tile(xq, kp, row_scale, w, scale, colsum, bias, y, y_stride, m0, R, pan, np, N)
    for (int m0 = 0; m0 < M;) {
        const int left = M - m0;
        if (left >= MB) {
            TILE(MB);
            m0 += MB;
        } else if (left >= 4) {
            TILE(4);
            m0 += 4;
        } else if (left >= 2) {
            TILE(2);
            m0 += 2;
        } else {
            TILE(1);
            m0 += 1;
        }
    }
#undef TILE
}

/* x: [M, K] float32 rows `x_stride` apart; y: [M, N] float32 rows `y_stride` apart; bias [N]
 * or NULL; w, scale, colsum as in the header. Returns 0, or -1 when scratch memory is short. */
int quant_linear_a8(
    const float *x, int64_t x_stride, const int8_t *w, const float *scale, const int32_t *colsum,
    const float *bias, float *y, int64_t y_stride, int M, int N, int K, int num_threads)
{
    const int kp = (K + QUAD - 1) / QUAD * QUAD;
    uint8_t *xq = malloc((size_t)M * kp + 64);
    float *row_scale = malloc((size_t)M * sizeof(float));
    if (!xq || !row_scale) {
        free(xq);
        free(row_scale);
        return -1;
    }
    for (int m = 0; m < M; m++)
        quantize_row(x + (int64_t)m * x_stride, K, kp, xq + (size_t)m * kp, row_scale + m);
    const int panels = (N + LANES - 1) / LANES;
    const int items = (panels + NP - 1) / NP;
#pragma omp parallel for num_threads(num_threads) schedule(dynamic, 1)
    for (int it = 0; it < items; it++) {
        const int pan = it * NP;
        const int np = panels - pan < NP ? panels - pan : NP;
        if (np == NP)
            item(xq, kp, row_scale, w, scale, colsum, bias, y, y_stride, M, pan, NP, N);
        else
            item(xq, kp, row_scale, w, scale, colsum, bias, y, y_stride, M, pan, 1, N);
    }
    free(xq);
    free(row_scale);
    return 0;
}
