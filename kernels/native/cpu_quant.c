/* Weight-only quantized linears for CPUs: y = x W^T (+ b) with W held as int8 (one scale per
 * output channel) or as unsigned 4-bit codes (a scale and a minimum per group of inputs).
 *
 * Built at first use by kernels/native/build.py (cc -O3 -march=native -fopenmp) and called
 * through ctypes on torch tensors' memory, so no Python dispatch sits between the model and the
 * loop. Decode is memory-bound: each weight byte is read once per call, widened to float32 in
 * registers and used for every row of x; nothing is dequantized to memory but, for int4 at 16
 * rows and more, one block of a panel pair into a 32 KB buffer on the stack (`item_blocked`).
 *
 * Weight layout (made by kernels/layers/quant_linear.py): panels of 16 output channels,
 *   int8:  [num_panels, K, 16] int8, scale [num_panels * 16] float32;
 *   int4:  [num_panels, K, 8] uint8 where byte j holds channel j (low nibble) and j + 8 (high
 *          nibble); scale and minimum [num_panels, K / group, 16] float32, w = code * scale + min.
 * Channels past N in the last panel are zero and are never stored.
 *
 * One work item is NP panels (NP * 16 outputs) over every row of x, taken MB rows at a time:
 * per input k the panel's 16-wide weight vectors are widened once and feed MB * NP
 * accumulators (an outer product), so wider batches reuse each widened weight MB times.
 */

#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "fg_common.h"



#include "quant_amx.h"

FG_EXPORT_CONSTANTS

typedef int8_t vi8 __attribute__((vector_size(16), aligned(1)));
typedef uint8_t vu8 __attribute__((vector_size(8), aligned(1)));
/* Register tile: MB rows x NP panels of accumulators (16 on AVX-512's 32 registers; 4 vectors
 * of two halves each on AVX2's 16). */
#if defined(__AVX512F__)
#define MB 8
#define NP 2
#else
#define MB 4
#define NP 1
#endif

enum { W_INT8 = 0, W_INT4 = 1, W_INT8_AMX = 2 /* int8 on the tile unit (quant_amx.h) */ };

/* The 16 codes of input k for one panel, widened to float32 lanes. GCC scalarises generic
 * narrow-integer-to-float vector conversions, so x86 gets the one-instruction widenings. */
ALWAYS_INLINE vf16 int8_lanes(const int8_t *p)
{
#if defined(__AVX512F__)
    return (vf16)_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
#elif defined(__AVX2__)
    const __m128i b = _mm_loadu_si128((const __m128i *)p);
    const __m256 lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
    const __m256 hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(b, 8)));
    vf16 both;
    memcpy(&both, &lo, sizeof lo);
    memcpy((char *)&both + sizeof lo, &hi, sizeof hi);
    return both;
#else
    return __builtin_convertvector(__builtin_convertvector(*(const vi8 *)p, vi32), vf16);
#endif
}

/* 8 bytes -> 16 codes: lanes 0-7 the low nibbles, lanes 8-15 the high ones. */
ALWAYS_INLINE vf16 int4_lanes(const uint8_t *p)
{
#if defined(__AVX512F__)
    const __m128i b = _mm_loadl_epi64((const __m128i *)p);
    const __m512i wide = _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(b, b));
    const __m512i shift = _mm512_set_epi32(4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0);
    return (vf16)_mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srlv_epi32(wide, shift), _mm512_set1_epi32(15)));
#elif defined(__AVX2__)
    const __m256i wide = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
    const __m256 lo = _mm256_cvtepi32_ps(_mm256_and_si256(wide, _mm256_set1_epi32(15)));
    const __m256 hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(wide, 4));
    vf16 both;
    memcpy(&both, &lo, sizeof lo);
    memcpy((char *)&both + sizeof lo, &hi, sizeof hi);
    return both;
#else
    const vu8 b = *(const vu8 *)p;
    const vi32 both = __builtin_convertvector(__builtin_shufflevector(b, b, 0, 1, 2, 3, 4, 5, 6, 7,
                                                                      0, 1, 2, 3, 4, 5, 6, 7), vi32);
    const vi32 shift = {0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4};
    return __builtin_convertvector((both >> shift) & 15, vf16);
#endif
}

/* 16 weights of input k for one panel, as float32 (int8: the raw codes; int4: dequantized). */
ALWAYS_INLINE vf16 weights16(const void *panel, int k, int kind, const float *scale, const float *minimum)
{
    if (kind == W_INT8)
        return int8_lanes((const int8_t *)panel + (int64_t)k * LANES);
    const vf16 code = int4_lanes((const uint8_t *)panel + (int64_t)k * (LANES / 2));
    return code * *(const vf16 *)scale + *(const vf16 *)minimum;
}

/* Rows m0 .. m0+mb-1 of x against panels pan .. pan+np-1. mb and np are constants at each
 * call site, so the accumulator arrays live in registers. */
ALWAYS_INLINE void tile(
    const float *x, int64_t x_stride, const void *w, const float *scale, const float *minimum,
    const float *bias, float *y, int64_t y_stride, int m0, const int mb, int pan, const int np,
    int N, int K, int group, const int kind)
{
    vf16 acc[MB][NP];
    for (int i = 0; i < mb; i++)
        for (int p = 0; p < np; p++)
            acc[i][p] = (vf16){0};
    const size_t panel_bytes = kind == W_INT8 ? (size_t)K * LANES : (size_t)K * (LANES / 2);
    const int groups = kind == W_INT4 ? K / group : 1;
    for (int k = 0; k < K; k++) {
        vf16 wv[NP];
        for (int p = 0; p < np; p++) {
            const int64_t g = kind == W_INT4 ? ((int64_t)(pan + p) * groups + k / group) * LANES : 0;
            wv[p] = weights16((const char *)w + (pan + p) * panel_bytes, k, kind, scale + g, minimum + g);
        }
        for (int i = 0; i < mb; i++) {
            const float xv = x[(int64_t)(m0 + i) * x_stride + k];
            for (int p = 0; p < np; p++)
                acc[i][p] += xv * wv[p];
        }
    }
    for (int p = 0; p < np; p++) {
        const int n0 = (pan + p) * LANES;
        const int width = N - n0 < LANES ? N - n0 : LANES;
        vf16 mul = {0}, add = {0};
        for (int j = 0; j < LANES; j++)
            mul[j] = kind == W_INT8 ? scale[n0 + j] : 1.0f;
        if (bias)
            for (int j = 0; j < width; j++)
                add[j] = bias[n0 + j];
        for (int i = 0; i < mb; i++) {
            const vf16 out = acc[i][p] * mul + add;
            float *dst = y + (int64_t)(m0 + i) * y_stride + n0;
            if (width == LANES)
                memcpy(dst, &out, sizeof out);
            else
                for (int j = 0; j < width; j++)
                    dst[j] = out[j];
        }
    }
}

#if defined(__AVX2__) && !defined(__AVX512F__)
/* AVX2 has 16 registers of 8 floats. `tile` above keeps MB x NP accumulators of 16 floats and
 * widens the weights through a 16-float temporary: GCC lowers each to pairs through the stack
 * (objdump of a Zen 3 build: 110 of the file's 128 FMAs read the stack), and the int8 kernel
 * ran at ~1 GB/s, a third of the float32 panels' speed at one row. `tile8` is the same
 * computation in halves of 8 lanes held in registers (MB x NP x 2 accumulators, the two halves
 * of each panel's weights and a broadcast: 11 of 16 registers): every output is still one FMA
 * chain from zero over k in order, then acc * mul + add, so the bits are `tile`'s. */
typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4))); /* unaligned loads and stores */

/* weights16's 16 lanes as two halves of 8 */
ALWAYS_INLINE void weights8x2(const void *panel, int k, int kind, const float *scale, const float *minimum, v8 *lo,
                              v8 *hi)
{
    if (kind == W_INT8) {
        const __m128i b = _mm_loadu_si128((const __m128i *)((const int8_t *)panel + (int64_t)k * LANES));
        *lo = (v8)_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
        *hi = (v8)_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(b, 8)));
        return;
    }
    const __m256i wide = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)((const uint8_t *)panel
                                                                                  + (int64_t)k * (LANES / 2))));
    const v8 code_lo = (v8)_mm256_cvtepi32_ps(_mm256_and_si256(wide, _mm256_set1_epi32(15)));
    const v8 code_hi = (v8)_mm256_cvtepi32_ps(_mm256_srli_epi32(wide, 4));
    *lo = code_lo * *(const v8u *)scale + *(const v8u *)minimum;
    *hi = code_hi * *(const v8u *)(scale + 8) + *(const v8u *)(minimum + 8);
}

ALWAYS_INLINE void tile8(
    const float *x, int64_t x_stride, const void *w, const float *scale, const float *minimum,
    const float *bias, float *y, int64_t y_stride, int m0, const int mb, int pan, const int np,
    int N, int K, int group, const int kind)
{
    v8 lo[MB][NP], hi[MB][NP];
    for (int i = 0; i < mb; i++)
        for (int p = 0; p < np; p++)
            lo[i][p] = hi[i][p] = (v8){0};
    const size_t panel_bytes = kind == W_INT8 ? (size_t)K * LANES : (size_t)K * (LANES / 2);
    const int groups = kind == W_INT4 ? K / group : 1;
    for (int k = 0; k < K; k++) {
        v8 wl[NP], wh[NP];
        for (int p = 0; p < np; p++) {
            const int64_t g = kind == W_INT4 ? ((int64_t)(pan + p) * groups + k / group) * LANES : 0;
            weights8x2((const char *)w + (pan + p) * panel_bytes, k, kind, scale + g, minimum + g, &wl[p], &wh[p]);
        }
        for (int i = 0; i < mb; i++) {
            const float xv = x[(int64_t)(m0 + i) * x_stride + k];
            for (int p = 0; p < np; p++) {
                lo[i][p] += xv * wl[p];
                hi[i][p] += xv * wh[p];
            }
        }
    }
    for (int p = 0; p < np; p++) {
        const int n0 = (pan + p) * LANES;
        const int width = N - n0 < LANES ? N - n0 : LANES;
        v8 mul_lo = {0}, mul_hi = {0}, add_lo = {0}, add_hi = {0};
        for (int j = 0; j < 8; j++) {
            mul_lo[j] = kind == W_INT8 ? scale[n0 + j] : 1.0f;
            mul_hi[j] = kind == W_INT8 ? scale[n0 + 8 + j] : 1.0f;
        }
        if (bias)
            for (int j = 0; j < width; j++) {
                if (j < 8)
                    add_lo[j] = bias[n0 + j];
                else
                    add_hi[j - 8] = bias[n0 + j];
            }
        for (int i = 0; i < mb; i++) {
            const v8 out_lo = lo[i][p] * mul_lo + add_lo, out_hi = hi[i][p] * mul_hi + add_hi;
            float *dst = y + (int64_t)(m0 + i) * y_stride + n0;
            if (width == LANES) {
                *(v8u *)dst = (v8u)out_lo;
                *(v8u *)(dst + 8) = (v8u)out_hi;
            } else
                for (int j = 0; j < width; j++)
                    dst[j] = j < 8 ? out_lo[j] : out_hi[j - 8];
        }
    }
}
#define tile tile8
#endif

ALWAYS_INLINE void item(
    const float *x, int64_t x_stride, const void *w, const float *scale, const float *minimum,
    const float *bias, float *y, int64_t y_stride, int M, int pan, const int np, int N, int K, int group,
    const int kind)
{
#define TILE(R) tile(x, x_stride, w, scale, minimum, bias, y, y_stride, m0, R, pan, np, N, K, group, kind)
    /* Row counts are constants in every tile instance: MB, then 4, 2 and 1 for the rest. */
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

/* Wider batches: the same sums, each panel's codes widened (and int4 dequantized) once per block
 * of KB inputs into `wbuf` and read from there by every row tile of a chunk of up to MC rows,
 * instead of once per tile; the tiles' sums wait in `accbuf` between blocks. Every output still
 * adds its products in input order from zero, then scale and bias: the same bits as `item`. */
#define KB 256
#define MC 64
/* int4 only, from two tiles of rows: there the blocked loop measured 1.1-1.5x faster (16-200 rows,
 * the 110M bench model's shapes, one thread, Emerald Rapids; widening an int4 code costs a shift, a
 * mask, a conversion and a multiply-add). int8's widening is two instructions per 16 weights, and
 * blocking it measured no faster (0.9-1.1x), so int8 keeps `item`. */
#define BLOCKED_ROWS (2 * MB)

ALWAYS_INLINE void tile_block(const float *x, int64_t x_stride, const vf16 *wbuf, vf16 *accbuf, int m0,
                              const int mb, const int np, int k0, int kn)
{
    vf16 acc[MB][NP];
    for (int i = 0; i < mb; i++)
        for (int p = 0; p < np; p++)
            acc[i][p] = k0 == 0 ? (vf16){0} : accbuf[(m0 + i) * NP + p];
    for (int k = 0; k < kn; k++) {
        vf16 wv[NP];
        for (int p = 0; p < np; p++)
            wv[p] = wbuf[k * NP + p];
        for (int i = 0; i < mb; i++) {
            const float xv = x[(int64_t)(m0 + i) * x_stride + k0 + k];
            for (int p = 0; p < np; p++)
                acc[i][p] += xv * wv[p];
        }
    }
    for (int i = 0; i < mb; i++)
        for (int p = 0; p < np; p++)
            accbuf[(m0 + i) * NP + p] = acc[i][p];
}

#if defined(__AVX2__) && !defined(__AVX512F__)
/* `tile_block` in halves of 8 lanes held in registers, as `tile8` (the same sums, so the same
 * bits): `wbuf` and `accbuf` hold the same 16-float vectors, read and written as two halves. */
ALWAYS_INLINE void tile_block8(const float *x, int64_t x_stride, const vf16 *wbuf, vf16 *accbuf, int m0,
                               const int mb, const int np, int k0, int kn)
{
    v8 lo[MB][NP], hi[MB][NP];
    for (int i = 0; i < mb; i++)
        for (int p = 0; p < np; p++) {
            const float *a = (const float *)&accbuf[(m0 + i) * NP + p];
            lo[i][p] = k0 == 0 ? (v8){0} : (v8) * (const v8u *)a;
            hi[i][p] = k0 == 0 ? (v8){0} : (v8) * (const v8u *)(a + 8);
        }
    for (int k = 0; k < kn; k++) {
        v8 wl[NP], wh[NP];
        for (int p = 0; p < np; p++) {
            const float *wv = (const float *)&wbuf[k * NP + p];
            wl[p] = (v8) * (const v8u *)wv;
            wh[p] = (v8) * (const v8u *)(wv + 8);
        }
        for (int i = 0; i < mb; i++) {
            const float xv = x[(int64_t)(m0 + i) * x_stride + k0 + k];
            for (int p = 0; p < np; p++) {
                lo[i][p] += xv * wl[p];
                hi[i][p] += xv * wh[p];
            }
        }
    }
    for (int i = 0; i < mb; i++)
        for (int p = 0; p < np; p++) {
            float *a = (float *)&accbuf[(m0 + i) * NP + p];
            *(v8u *)a = (v8u)lo[i][p];
            *(v8u *)(a + 8) = (v8u)hi[i][p];
        }
}
#define tile_block tile_block8
#endif

ALWAYS_INLINE void item_blocked(
    const float *x, int64_t x_stride, const void *w, const float *scale, const float *minimum,
    const float *bias, float *y, int64_t y_stride, int M, int pan, const int np, int N, int K, int group,
    const int kind)
{
    vf16 wbuf[KB * NP], accbuf[MC * NP];
    const size_t panel_bytes = kind == W_INT8 ? (size_t)K * LANES : (size_t)K * (LANES / 2);
    const int groups = kind == W_INT4 ? K / group : 1;
    for (int c0 = 0; c0 < M; c0 += MC) {
        const int mc = M - c0 < MC ? M - c0 : MC;
        const float *xc = x + (int64_t)c0 * x_stride;
        for (int k0 = 0; k0 < K; k0 += KB) {
            const int kn = K - k0 < KB ? K - k0 : KB;
            for (int k = 0; k < kn; k++)
                for (int p = 0; p < np; p++) {
                    const int64_t g = kind == W_INT4 ? ((int64_t)(pan + p) * groups + (k0 + k) / group) * LANES : 0;
                    wbuf[k * NP + p] = weights16((const char *)w + (pan + p) * panel_bytes, k0 + k, kind,
                                                 scale + g, minimum + g);
                }
            for (int m0 = 0; m0 < mc;) {
                const int left = mc - m0;
                const int mb = left >= MB ? MB : left >= 4 ? 4 : left >= 2 ? 2 : 1;
                if (mb == MB)
                    tile_block(xc, x_stride, wbuf, accbuf, m0, MB, np, k0, kn);
                else if (mb == 4)
                    tile_block(xc, x_stride, wbuf, accbuf, m0, 4, np, k0, kn);
                else if (mb == 2)
                    tile_block(xc, x_stride, wbuf, accbuf, m0, 2, np, k0, kn);
                else
                    tile_block(xc, x_stride, wbuf, accbuf, m0, 1, np, k0, kn);
                m0 += mb;
            }
        }
        for (int p = 0; p < np; p++) {
            const int n0 = (pan + p) * LANES;
            const int width = N - n0 < LANES ? N - n0 : LANES;
            vf16 mul = {0}, add = {0};
            for (int j = 0; j < LANES; j++)
                mul[j] = kind == W_INT8 ? scale[n0 + j] : 1.0f;
            if (bias)
                for (int j = 0; j < width; j++)
                    add[j] = bias[n0 + j];
            for (int i = 0; i < mc; i++) {
                const vf16 out = accbuf[i * NP + p] * mul + add;
                float *dst = y + (int64_t)(c0 + i) * y_stride + n0;
                if (width == LANES)
                    memcpy(dst, &out, sizeof out);
                else
                    for (int j = 0; j < width; j++)
                        dst[j] = out[j];
            }
        }
    }
}

/* Whether an int8 linear of K inputs can run on the tile unit here: 1 yes, 0 no (K not a multiple
 * of 64, or the kernel refused this process the tile state), -1 not built for it. A layer runs
 * there when the kernel plan passes kind W_INT8_AMX for it, which it does only where this said 1. */
int quant_amx_path(int K)
{
#ifdef HAVE_AMX_INT8
    return K % AMX_KSTEP == 0 && fg_amx_granted();
#else
    (void)K;
    return -1;
#endif
}

/* x: [M, K] float32 rows `x_stride` apart; y: [M, N] float32 rows `y_stride` apart.
 * kind 0 = int8 (scale per channel, minimum unused), 1 = int4 (K % group == 0), 2 = int8 on the
 * AMX tile unit, its codes in the tile layout (quant_amx.h; other bits than kind 0's, the same
 * for a row at every M).
 * bias: [N] float32 or NULL. */
void quant_linear(
    const float *x, int64_t x_stride, const void *w, const float *scale, const float *minimum,
    const float *bias, float *y, int64_t y_stride, int M, int N, int K, int group, int kind,
    int num_threads)
{
    if (kind == W_INT8_AMX) {
        /* codes in the tile layout, which only the tile unit reads; the plan passes this kind only
         * where quant_amx_path said 1 (a grant is for the process's life), so the NaNs below are
         * a broken promise made loud, not a path */
#ifdef HAVE_AMX_INT8
        if (quant_amx_path(K) == 1
            && quant_linear_amx(x, x_stride, (const int8_t *)w, scale, bias, y, y_stride, M, N, K, num_threads) == 0)
            return;
#endif
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++)
                y[(int64_t)m * y_stride + n] = NAN;
        return;
    }
    const int panels = (N + LANES - 1) / LANES;
    const int items = (panels + NP - 1) / NP;
#pragma omp parallel for num_threads(num_threads) schedule(dynamic, 1)
    for (int it = 0; it < items; it++) {
        const int pan = it * NP;
        const int np = panels - pan < NP ? panels - pan : NP;
#define ITEM(P, KIND)                                                                                  \
    do {                                                                                               \
        if ((KIND) == W_INT4 && M >= BLOCKED_ROWS)                                                     \
            item_blocked(x, x_stride, w, scale, minimum, bias, y, y_stride, M, pan, P, N, K, group, KIND); \
        else                                                                                           \
            item(x, x_stride, w, scale, minimum, bias, y, y_stride, M, pan, P, N, K, group, KIND);     \
    } while (0)
        if (kind == W_INT8 && np == NP)
            ITEM(NP, W_INT8);
        else if (kind == W_INT8)
            ITEM(1, W_INT8);
        else if (np == NP)
            ITEM(NP, W_INT4);
        else
            ITEM(1, W_INT4);
#undef ITEM
    }
}

/* The weights as float32 [N, K] rows, as `tile` widens them: int8's raw codes (the scale stays
 * an output multiplier), int4's dequantized values (code * scale + minimum, the same expression,
 * so the same bits). kernels/layers/quant_panels.py packs these into cpu_gemm.c's panels: at many
 * rows its tiles can outrun this file's, with the same sums in the same order (see there). */
void quant_unpack(const void *w, const float *scale, const float *minimum, float *out, int N, int K, int group,
                  int kind)
{
    const size_t panel_bytes = kind == W_INT8 ? (size_t)K * LANES : (size_t)K * (LANES / 2);
    const int groups = kind == W_INT4 ? K / group : 1;
    for (int pan = 0; pan < (N + LANES - 1) / LANES; pan++)
        for (int k = 0; k < K; k++) {
            const int64_t g = kind == W_INT4 ? ((int64_t)pan * groups + k / group) * LANES : 0;
            const vf16 v = weights16((const char *)w + pan * panel_bytes, k, kind, scale + g, minimum + g);
            for (int j = 0; j < LANES && pan * LANES + j < N; j++)
                out[(int64_t)(pan * LANES + j) * K + k] = v[j];
        }
}
