/* cpu_quant.c's int8 weight-only linear on the AMX tile unit (TDPBSSD: int8 x int8 into int32),
 * included by cpu_quant.c only.
 *
 * The weights are already int8; the activations are float32. Each row of x is written as three
 * int8 digits on a power-of-two scale s (its largest |x| / 127, rounded up to a power of two):
 *     x = s * (d0 + d1 / 128 + d2 / 16384) + e,   |e| <= s / 32768,
 * every step exact in float32 (d0 = round(x / s) in [-127, 127]; each remainder, times 128, is at
 * most 64 in size). A row's three dot products with the codes are exact int32 sums (|d| <= 127,
 * K up to 2^31 / 127^2 inputs), so the only rounding is the final float32 combination
 *     y = ((c0 + c1 / 128 + c2 / 16384) * s) * scale + bias
 * and the digits' remainder e, below a float32 rounding of the row's largest element times 4. The
 * result is not the vector kernel's bits (those sum float32 products in input order), but a row's
 * bits depend only on that row: the digits, the scale and each C tile row are per row, so a step's
 * other rows never change them, as the engine's parity tests require of every path.
 *
 * Why: at a decode step of 16 rows the vector kernel widens every code to float32 and does 16
 * float32 FMAs per weight, which at AVX-512's rate costs what float32 panels cost: int8 bought
 * nothing there on a Sapphire Rapids box (1.07x at 16 rows, issue 39). TDPBSSD does 16 x 16 x 64
 * int8 products per instruction; three digits cost three of them per B tile, and the B tile is
 * the codes themselves, loaded as they lie: a layer on the tile unit holds its panels as
 * [K/4, 16, 4] (four inputs of each channel together, the tile's layout) instead of [K, 16]
 * (kernels/layers/quant_linear.py `tile_layout`; permuting them in registers at each call, VPERMB,
 * cost a lone row a quarter of its time with the weights in cache: 58 against 44 us, 768 -> 3072).
 * The kernel plan turns it on where it measures faster (kernels/choices.py `quant_panels`,
 * FAIRGATE_QUANT_TILES), for a layer's every row count at once (kind W_INT8_AMX), never beside
 * float32 panels, whose bits are the vector kernel's.
 */

#if defined(__AMX_TILE__) && defined(__AMX_INT8__) && defined(__AVX512BW__) && defined(__linux__)
#define HAVE_AMX_INT8 1
#include <math.h>
#include <stdlib.h>

#include "fg_amx.h"

#define AMX_ROWS 16  /* rows of x an A or C tile holds */
#define AMX_KSTEP 64 /* inputs an A tile row holds (64 int8) */
#define AMX_DIGITS 3

/* tmm0-2: C (R rows x 16 int32, one per digit); tmm3-5: A (R rows x 64 int8, one per digit);
 * tmm6-7: B (16 rows of 16 x 4 int8), alternately, so a load overlaps the products before it. */
static void amx_configure(int R)
{
    fg_amx_configure(R, 6, 16);
}

/* Row m's digits: d[t * plane + m * K + k] int8, s[m] the scale (NaN where the row is not finite:
 * its outputs are NaN, as the float path's would be). */
static void amx_digits(const float *x, int64_t x_stride, int8_t *d, int64_t plane, float *s, int64_t M, int K)
{
    for (int64_t m = 0; m < M; m++) {
        const float *row = x + m * x_stride;
        __m512 top = _mm512_setzero_ps();
        __mmask16 nan = 0;
        for (int k = 0; k < K; k += 16) {
            const __m512 v = _mm512_loadu_ps(row + k);
            nan |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
            top = _mm512_max_ps(top, _mm512_abs_ps(v));
        }
        const float big = nan ? NAN : _mm512_reduce_max_ps(top);
        int e = 0;
        if (big > 0.0f && isfinite(big))
            frexpf(big / 127.0f, &e); /* big / 127 <= 2^e: |x| / 2^e <= 127 */
        const float scale = big > 0.0f && isfinite(big) ? ldexpf(1.0f, e) : big == 0.0f ? 1.0f : NAN;
        s[m] = scale;
        const __m512 inv = _mm512_set1_ps(isfinite(scale) ? 1.0f / scale : 0.0f), radix = _mm512_set1_ps(128.0f);
        int8_t *d0 = d + m * K, *d1 = d0 + plane, *d2 = d1 + plane;
        for (int k = 0; k < K; k += 16) {
            __m512 u = _mm512_mul_ps(_mm512_loadu_ps(row + k), inv);
            __m512i q = _mm512_cvtps_epi32(u); /* to nearest: |q| <= 127 */
            _mm_storeu_si128((__m128i *)(d0 + k), _mm512_cvtsepi32_epi8(q));
            u = _mm512_mul_ps(_mm512_sub_ps(u, _mm512_cvtepi32_ps(q)), radix);
            q = _mm512_cvtps_epi32(u);
            _mm_storeu_si128((__m128i *)(d1 + k), _mm512_cvtsepi32_epi8(q));
            u = _mm512_mul_ps(_mm512_sub_ps(u, _mm512_cvtepi32_ps(q)), radix);
            _mm_storeu_si128((__m128i *)(d2 + k), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(u)));
        }
    }
}

/* One panel (16 outputs; its codes [K/4, 16, 4]) for rows m0 .. m0+R of the digits (tiles
 * configured for R rows or more). */
static void amx_panel(const int8_t *d, int64_t M, int K, const int8_t *panel, const float *s, const float *scale,
                      const float *bias, float *y, int64_t y_stride, int64_t m0, int R, int n0, int N)
{
    int32_t c[AMX_DIGITS][AMX_ROWS * 16] __attribute__((aligned(64)));
    const int8_t *a0 = d + m0 * K, *a1 = a0 + M * K, *a2 = a1 + M * K;
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    for (int k = 0; k < K; k += 2 * AMX_KSTEP) { /* two steps a turn: B alternates tmm6 and tmm7 */
        _tile_loadd(6, panel + (int64_t)k * 16, 64);
        _tile_loadd(3, a0 + k, K);
        _tile_loadd(4, a1 + k, K);
        _tile_loadd(5, a2 + k, K);
        _tile_dpbssd(0, 3, 6);
        _tile_dpbssd(1, 4, 6);
        _tile_dpbssd(2, 5, 6);
        if (k + AMX_KSTEP == K)
            break;
        _tile_loadd(7, panel + (int64_t)(k + AMX_KSTEP) * 16, 64);
        _tile_loadd(3, a0 + k + AMX_KSTEP, K);
        _tile_loadd(4, a1 + k + AMX_KSTEP, K);
        _tile_loadd(5, a2 + k + AMX_KSTEP, K);
        _tile_dpbssd(0, 3, 7);
        _tile_dpbssd(1, 4, 7);
        _tile_dpbssd(2, 5, 7);
    }
    _tile_stored(0, c[0], 64);
    _tile_stored(1, c[1], 64);
    _tile_stored(2, c[2], 64);
    const int width = N - n0 < 16 ? N - n0 : 16;
    const __m512 mul = _mm512_loadu_ps(scale + n0); /* the scale is padded to whole panels */
    __m512 add = _mm512_setzero_ps();
    if (bias)
        add = width == 16 ? _mm512_loadu_ps(bias + n0) : _mm512_maskz_loadu_ps((__mmask16)((1u << width) - 1), bias + n0);
    const __m512 r1 = _mm512_set1_ps(1.0f / 128.0f), r2 = _mm512_set1_ps(1.0f / 16384.0f);
    for (int i = 0; i < R; i++) {
        const __m512 v0 = _mm512_cvtepi32_ps(_mm512_load_si512(c[0] + 16 * i));
        const __m512 v1 = _mm512_cvtepi32_ps(_mm512_load_si512(c[1] + 16 * i));
        const __m512 v2 = _mm512_cvtepi32_ps(_mm512_load_si512(c[2] + 16 * i));
        const __m512 sum = _mm512_add_ps(v0, _mm512_add_ps(_mm512_mul_ps(v1, r1), _mm512_mul_ps(v2, r2)));
        const __m512 out = _mm512_fmadd_ps(_mm512_mul_ps(sum, _mm512_set1_ps(s[m0 + i])), mul, add);
        float *dst = y + (m0 + i) * y_stride + n0;
        if (width == 16)
            _mm512_storeu_ps(dst, out);
        else
            _mm512_mask_storeu_ps(dst, (__mmask16)((1u << width) - 1), out);
    }
}

/* y = x W^T (+ b) for int8 codes in the tile layout; returns 0, or -1 without scratch memory for
 * even one row. */
static int quant_linear_amx(const float *x, int64_t x_stride, const int8_t *w, const float *scale,
                            const float *bias, float *y, int64_t y_stride, int M, int N, int K, int num_threads)
{
    if (M <= 0)
        return 0;
    const int blocks = (M + AMX_ROWS - 1) / AMX_ROWS;
    const int R = (M + blocks - 1) / blocks; /* rows per tile: 17 rows are two tiles of 9, not 16 and 1 */
    const int64_t Mp = (int64_t)blocks * R;  /* rows padded to whole tiles (the pad's digits are zero) */
    int8_t *d = malloc((size_t)(AMX_DIGITS * Mp * K));
    float *s = malloc(sizeof(float) * (size_t)Mp);
    if (!d || !s) { /* a row at a time, the same bits (each row's are its own) */
        free(d);
        free(s);
        for (int m = 0; M > 1 && m < M; m++)
            if (quant_linear_amx(x + m * x_stride, x_stride, w, scale, bias, y + m * y_stride, y_stride, 1, N, K,
                                 num_threads))
                return -1;
        return M > 1 ? 0 : -1;
    }
    amx_digits(x, x_stride, d, Mp * K, s, M, K);
    for (int t = 0; t < AMX_DIGITS; t++) /* the pad rows' digits: zero */
        memset(d + t * Mp * K + (int64_t)M * K, 0, (size_t)((Mp - M) * K));
    for (int64_t m = M; m < Mp; m++)
        s[m] = 0.0f;
    const int panels = (N + 15) / 16;
    const int64_t items = (int64_t)blocks * panels;
    const int threads = num_threads < items ? num_threads : (int)items;
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        amx_configure(R);
#pragma omp for schedule(dynamic, 1)
        for (int64_t it = 0; it < items; it++) {
            const int p = (int)(it % panels);
            const int64_t m0 = it / panels * R;
            const int rows = M - m0 < R ? (int)(M - m0) : R;
            amx_panel(d, Mp, K, w + (int64_t)p * K * 16, s, scale, bias, y, y_stride, m0, rows, p * 16, N);
        }
        _tile_release();
    }
    free(d);
    free(s);
    return 0;
}
#endif
