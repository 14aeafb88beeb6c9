/* Greedy tokens straight from the final hidden states: the argmax of a float32 panel LM head's
 * logits (cpu_gemm.c's exact_linear, to the bit), without computing every logit in float32.
 *
 * Built at first use by kernels/native/build.py (cc -O3 -march=native -fopenmp) and called through
 * ctypes (kernels/layers/greedy_head.py, which proves the bound below in its docstring).
 *
 * A screen first scores every vocabulary row with bfloat16 copies of the hidden row and of the
 * weights (AVX512-BF16's dot-product instruction where the CPU has it: twice the float32 FMA
 * rate on half the bytes; widened to float32 FMAs elsewhere). Each screened score s_v is within
 * B_v = c |h| |w_v| of the float32 logit f_v (c from the two roundings to bfloat16 and the two
 * summations; the caller passes it), and B_v <= B_max (the largest weight norm's). The true
 * argmax v* has f_v* >= f_u for every u, so s_v* >= s_top - B_max - B_v* >= s_top - 2 B_max:
 * only the rows that score that much can be the argmax, and each of them is recomputed in
 * float32 in exact_linear's summation order (blocks of kb inputs, each one FMA chain from zero,
 * the blocks added in order). The first largest of those is the token: the one argmax over the
 * float32 logits would return. Typically a handful of rows pass.
 *
 * Where the CPU has AMX (AMX-BF16) and K is a multiple of 32, the screen runs on the tile unit
 * instead: the same pairs, the same layout (a panel's 16-column group is a B tile of 16 pair rows,
 * 256 bytes apart), products exact and summed in float32 with subnormals flushed as the vector
 * instruction's are; only the order of the sums is the tile unit's, and the bound allows any
 * order (kernels/layers/greedy_head.py). It computes so much faster than the vector units that the screen
 * runs at the rate the bfloat16 weights stream in (a Sapphire Rapids core: ~4x the AVX512-BF16
 * screen at a decode step's rows). The kernel must grant the process the tile state first
 * (arch_prctl ARCH_REQ_XCOMP_PERM, Linux 5.16+); where it does not, the vector screen runs.
 *
 * Weight layouts: `wbf` the screen's, panels of 64 columns each [K / 2, width, 2] bfloat16
 * (pairs of inputs together, as the dot-product instruction takes them); `w32` the float32
 * weight [N, K] in rows, so that a recomputed row is one contiguous read (in exact_linear's
 * panels its inputs lie a panel's width apart: a cache line each). */

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__AVX512BF16__) || (defined(__AMX_TILE__) && defined(__AMX_BF16__))
#include <immintrin.h>
#endif
#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__linux__)
#define HAVE_AMX 1
#include "fg_amx.h"
#endif

#include "fg_common.h"

FG_EXPORT_CONSTANTS

/* LANES (a panel's column groups: the layout, and the AMX tiles' width) and PANEL: fg_common.h */
/* The vector screen's registers: with AVX-512, 16 floats, and a tile of 6 rows x a panel's 4
 * vectors of sums; with 16 registers of 8 floats (AVX2), 4 rows x 2 vectors of 8 columns (8
 * sums + 4 widened weight vectors + 2 broadcasts). A vector wider than the registers is lowered
 * by GCC to loads and stores through the stack: the AVX2 build of the 16-float screen ran at a
 * small fraction of the FMA rate (it took a third of a 110m pass on a Zen 3 box). */
#ifdef __AVX512F__
#define VL 16
#define ROWS 6
#define TILE_VECS 4
#else
#define VL 8
#define ROWS 4
#define TILE_VECS 2
#endif
typedef float vfl __attribute__((vector_size(VL * 4), aligned(4)));    /* unaligned loads and stores */
typedef float vacc __attribute__((vector_size(VL * 4)));                /* in registers */
typedef uint32_t vul __attribute__((vector_size(VL * 4), aligned(4)));
typedef uint32_t vu __attribute__((vector_size(VL * 4)));

/* float32 -> bfloat16, rounding to nearest even (NaN stays NaN) */
static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* The vector screen's hidden rows: bfloat16 pairs in one uint32 (XW 1, as the dot-product
 * instruction takes them), or each pair's two values widened to float32 (XW 2, so a product
 * is a broadcast from memory and an FMA, with no per-step widening of the input). */
#if defined(__AVX512BF16__)
#define XW 1
#else
#define XW 2
#endif

/* The most vectors of columns a one-row tile takes (tile_cv below). */
#if XW == 2
#define WIDE_VECS 8
#else
#define WIDE_VECS TILE_VECS
#endif

/* acc[c] += the pair at xp . the VL column pairs at w + 2 VL c, for CV vectors of columns */
ALWAYS_INLINE void dot_pairs(vacc *acc, const uint32_t *xp, const uint16_t *w, const int CV)
{
#if defined(__AVX512BF16__)
    const __m512bh xb = (__m512bh)_mm512_set1_epi32((int)xp[0]);
    for (int c = 0; c < CV; c++)
        acc[c] = (vacc)_mm512_dpbf16_ps((__m512)acc[c], xb, (__m512bh)_mm512_loadu_si512(w + 2 * VL * c));
#else
    const float lo = ((const float *)xp)[0], hi = ((const float *)xp)[1];
    for (int c = 0; c < CV; c++) {
        const vu pairs = (vu) * (const vul *)(w + 2 * VL * c);
        acc[c] += lo * (vacc)(pairs << 16); /* each product exact in float32, as the instruction's */
        acc[c] += hi * (vacc)(pairs & 0xffff0000u);
    }
#endif
}

/* scores[r, 0 .. CV*VL) = x2[r] . panel for NR rows; the panel's pair rows lie `stride`
 * uint16 apart (2 x its width) */
ALWAYS_INLINE void screen_tile(const uint32_t *x2, int pairs, const uint16_t *panel, int64_t stride, float *scores,
                               int64_t ld, const int NR, const int CV)
{
    vacc acc[ROWS][WIDE_VECS];
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < CV; c++)
            acc[r][c] = (vacc){0};
    for (int k = 0; k < pairs; k++, panel += stride)
        for (int r = 0; r < NR; r++)
            dot_pairs(acc[r], x2 + ((int64_t)r * pairs + k) * XW, panel, CV);
    for (int r = 0; r < NR; r++)
        for (int c = 0; c < CV; c++)
            *(vfl *)(scores + r * ld + c * VL) = (vfl)acc[r][c];
}

/* NR rows over a panel of PV vectors of columns, in tiles of CV vectors (PV % CV == 0) */
ALWAYS_INLINE void screen_rows(const uint32_t *x2, int pairs, const uint16_t *panel, float *scores, int64_t ld,
                               const int NR, const int PV, const int CV)
{
    for (int c = 0; c < PV; c += CV)
        screen_tile(x2, pairs, panel + 2 * VL * c, 2 * VL * PV, scores + c * VL, ld, NR, CV);
}

/* The vectors of columns a tile of NR rows takes. Without a dot-product instruction each pair
 * is two dependent FMAs into one sum, so a tile of one or two rows and TILE_VECS vectors left
 * two or four chains to hide the FMA latency with (the AVX2 screen of a 32000 x 768 head ran
 * at ~5 GB/s at one row, slower than the float32 head it screens for): one row takes up to
 * WIDE_VECS (8 sums, a pair's widened weights and two broadcasts), two rows half of that.
 * The tiling does not change a sum: each column's products are added in pair order. */
ALWAYS_INLINE int tile_cv(const int NR, const int PV)
{
    const int most = NR == 1 ? WIDE_VECS : NR == 2 ? WIDE_VECS / 2 : TILE_VECS;
    const int cv = most > TILE_VECS ? most : TILE_VECS;
    return PV < cv ? PV : PV % cv == 0 ? cv : PV < TILE_VECS ? PV : TILE_VECS;
}

ALWAYS_INLINE void screen_panel(const uint32_t *x2, int64_t M, int pairs, const uint16_t *panel, float *scores,
                                int64_t ld, const int PV)
{
    int64_t m = 0;
    for (; m + ROWS <= M; m += ROWS)
        screen_rows(x2 + m * pairs * XW, pairs, panel, scores + m * ld, ld, ROWS, PV, tile_cv(ROWS, PV));
    switch (M - m) {
#if ROWS > 4
    case 5: screen_rows(x2 + m * pairs * XW, pairs, panel, scores + m * ld, ld, 5, PV, tile_cv(5, PV)); break;
    case 4: screen_rows(x2 + m * pairs * XW, pairs, panel, scores + m * ld, ld, 4, PV, tile_cv(4, PV)); break;
#endif
    case 3: screen_rows(x2 + m * pairs * XW, pairs, panel, scores + m * ld, ld, 3, PV, tile_cv(3, PV)); break;
    case 2: screen_rows(x2 + m * pairs * XW, pairs, panel, scores + m * ld, ld, 2, PV, tile_cv(2, PV)); break;
    case 1: screen_rows(x2 + m * pairs * XW, pairs, panel, scores + m * ld, ld, 1, PV, tile_cv(1, PV)); break;
    default: break;
    }
}

#ifdef HAVE_AMX
#define TILE_ROWS 16  /* hidden rows a C tile holds */
#define TILE_PAIRS 16 /* input pairs an A tile row holds (64 bytes) */

/* tmm0-3: C (R rows x 16 float32 columns each); tmm4: A (R rows x 16 pairs); tmm5-7: B (16 pair
 * rows x 16 columns of pairs), three in turn so a load overlaps the product before it */
static void configure_tiles(int R)
{
    fg_amx_configure(R, 5, TILE_PAIRS);
}

/* scores[m .. m+R, 0 .. CV*16) = x2[m .. m+R] . panel on the tile unit (the tiles are
 * configured for R rows); the panel is [pairs, width, 2] bfloat16, width = CV * 16 */
ALWAYS_INLINE void amx_block(const uint32_t *x2, int pairs, const uint16_t *panel, int width, float *scores,
                             int64_t ld, const int CV)
{
    const int64_t xs = (int64_t)pairs * 4, ws = (int64_t)width * 4; /* bytes between rows */
    _tile_zero(0);
    if (CV > 1)
        _tile_zero(1);
    if (CV > 2)
        _tile_zero(2);
    if (CV > 3)
        _tile_zero(3);
    for (int k = 0; k < pairs; k += TILE_PAIRS) {
        const uint16_t *w = panel + (int64_t)k * width * 2;
        _tile_loadd(4, x2 + k, xs);
        _tile_loadd(5, w, ws);
        _tile_dpbf16ps(0, 4, 5);
        if (CV > 1) {
            _tile_loadd(6, w + 32, ws);
            _tile_dpbf16ps(1, 4, 6);
        }
        if (CV > 2) {
            _tile_loadd(7, w + 64, ws);
            _tile_dpbf16ps(2, 4, 7);
        }
        if (CV > 3) {
            _tile_loadd(5, w + 96, ws);
            _tile_dpbf16ps(3, 4, 5);
        }
    }
    _tile_stored(0, scores, ld * 4);
    if (CV > 1)
        _tile_stored(1, scores + 16, ld * 4);
    if (CV > 2)
        _tile_stored(2, scores + 32, ld * 4);
    if (CV > 3)
        _tile_stored(3, scores + 48, ld * 4);
}

/* The screen of every panel on the tile unit: pairs a multiple of TILE_PAIRS. */
static void amx_screen(const uint32_t *x2, int64_t M, int pairs, const uint16_t *wbf, float *scores, int N,
                       int num_threads)
{
    const int panels = (N + PANEL - 1) / PANEL;
    const int threads = num_threads < panels ? num_threads : panels;
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
        int configured = 0; /* the rows the tiles are set for: each thread has its own tiles */
#pragma omp for schedule(static)
        for (int p = 0; p < panels; p++) {
            const int n0 = p * PANEL, width = N - n0 < PANEL ? N - n0 : PANEL;
            const uint16_t *panel = wbf + (int64_t)n0 * pairs * 2;
            for (int64_t m = 0; m < M; m += TILE_ROWS) {
                const int R = M - m < TILE_ROWS ? (int)(M - m) : TILE_ROWS;
                if (R != configured) {
                    configure_tiles(R);
                    configured = R;
                }
                const uint32_t *xm = x2 + m * pairs;
                float *out = scores + m * N + n0;
                switch (width / LANES) {
                case 4: amx_block(xm, pairs, panel, width, out, N, 4); break;
                case 3: amx_block(xm, pairs, panel, width, out, N, 3); break;
                case 2: amx_block(xm, pairs, panel, width, out, N, 2); break;
                default: amx_block(xm, pairs, panel, width, out, N, 1);
                }
            }
        }
        if (configured)
            _tile_release(); /* a thread holding no tile state switches as cheaply as before */
    }
}
#endif

/* Row v's logit in exact_linear's order (its vector kernel's lane v, written out). */
static float exact_logit(const float *x, int K, const float *w32, int v, int kb)
{
    const float *row = w32 + (int64_t)v * K;
    float out = 0.0f;
    for (int k0 = 0; k0 < K; k0 += kb) {
        const int end = K - k0 < kb ? K : k0 + kb;
        float acc = 0.0f;
        for (int k = k0; k < end; k++)
            acc = fmaf(x[k], row[k], acc);
        out = k0 == 0 ? acc : out + acc;
    }
    return out;
}

/* The screen of every panel on the vector units. */
static void vector_screen(const uint32_t *x2, int64_t M, int pairs, const uint16_t *wbf, float *scores, int N,
                          int num_threads)
{
    const int K = 2 * pairs, panels = (N + PANEL - 1) / PANEL;
    const int threads = num_threads < panels ? num_threads : panels;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 4) if (threads > 1)
    for (int p = 0; p < panels; p++) {
        const int n0 = p * PANEL, width = N - n0 < PANEL ? N - n0 : PANEL;
        const uint16_t *panel = wbf + (int64_t)n0 * K;
        switch (width / LANES) { /* a multiple of 16 columns: VL divides it */
        case 4: screen_panel(x2, M, pairs, panel, scores + n0, N, 64 / VL); break;
        case 3: screen_panel(x2, M, pairs, panel, scores + n0, N, 48 / VL); break;
        case 2: screen_panel(x2, M, pairs, panel, scores + n0, N, 32 / VL); break;
        default: screen_panel(x2, M, pairs, panel, scores + n0, N, 16 / VL);
        }
    }
}

/* Which screen greedy_tokens runs for K inputs: 2 the AMX tile unit, 1 AVX512-BF16's dot
 * products, 0 float32 FMAs (for tests and the engine's log). */
int greedy_screen(int K)
{
#ifdef HAVE_AMX
    if ((K / 2) % TILE_PAIRS == 0 && fg_amx_granted())
        return 2;
#endif
#if defined(__AVX512BF16__)
    return 1;
#else
    return 0;
#endif
}

/* tokens[m] = argmax_v of x[m] . w_v (float32 panel logits, first index on ties) for M rows.
 * x: [M, K] float32, K even; w_norm_max: the largest of the weight rows' L2 norms (rounded up);
 * the screen's bound is B_v = c |x_m| |w_v| + slack <= c |x_m| w_norm_max + slack = B_max (slack: what flushing subnormals to zero can lose); N a
 * multiple of 16. Returns 0, or -2 when a row is not finite (NaN or inf in x or its logits):
 * the caller takes the full logits then. */
int greedy_tokens(const float *x, int64_t M, int K, const uint16_t *wbf, const float *w32, double w_norm_max,
                  int N, int kb, double c, double slack, int64_t *tokens, float *scratch, int num_threads)
{
    /* scratch: M * N floats for the screened scores, then M * K for the hidden rows in bfloat16
     * (the caller's buffer, kept between calls: a fresh 8 MB a step faulted its pages in each time) */
    const int pairs = K / 2;
    float *scores = scratch;
    uint32_t *x2 = (uint32_t *)(scratch + M * N);
#ifdef HAVE_AMX
    const int amx = pairs % TILE_PAIRS == 0 && fg_amx_granted();
#else
    const int amx = 0;
#endif
    if (amx || XW == 1)
        for (int64_t i = 0; i < M * pairs; i++)
            x2[i] = (uint32_t)to_bf16(x[2 * i]) | (uint32_t)to_bf16(x[2 * i + 1]) << 16;
    else
        for (int64_t i = 0; i < M * K; i++)
            x2[i] = (uint32_t)to_bf16(x[i]) << 16; /* the bfloat16 value as a float32's bits */
#ifdef HAVE_AMX
    if (amx)
        amx_screen(x2, M, pairs, wbf, scores, N, num_threads);
    else
#endif
        vector_screen(x2, M, pairs, wbf, scores, N, num_threads);
    int bad = 0;
    const int row_threads = num_threads < M ? num_threads : (int)M;
#pragma omp parallel for num_threads(row_threads) schedule(dynamic, 1) reduction(| : bad) if (row_threads > 1)
    for (int64_t m = 0; m < M; m++) {
        const float *xm = x + m * K, *s = scores + m * N;
        double norm = 0.0;
        for (int k = 0; k < K; k++)
            norm += (double)xm[k] * xm[k];
        /* max_u (s_u - B_u) >= top - B_max, and the argmax v* has s_v* >= that - B_v*: so only
         * rows scoring at least top - 2 B_max can be it (a superset of the exact test's rows,
         * found in two vector passes) */
        vacc peak = (vacc) * (const vfl *)s;
        for (int v = VL; v < N; v += VL) {
            const vacc sv = (vacc) * (const vfl *)(s + v);
            peak = (vacc)(((vu)sv & (vu)(sv > peak)) | ((vu)peak & ~(vu)(sv > peak)));
        }
        float top = peak[0];
        for (int i = 1; i < VL; i++)
            top = peak[i] > top ? peak[i] : top;
        const double floor = (double)top - 2.0 * (c * sqrt(norm) * w_norm_max + slack);
        const float cut = nextafterf((float)floor, -INFINITY); /* rounded towards keeping more rows */
        float best = -INFINITY;
        int64_t token = -1;
        for (int v0 = 0; v0 < N; v0 += VL) {
            const vacc sv = (vacc) * (const vfl *)(s + v0);
            const vu hit = (vu)(sv >= cut);
            uint32_t any = 0;
            for (int i = 0; i < VL; i++)
                any |= hit[i];
            if (!any)
                continue;
            for (int v = v0; v < v0 + VL; v++) {
                if (!(s[v] >= cut))
                    continue;
                const float f = exact_logit(xm, K, w32, v, kb);
                if (f > best) {
                    best = f;
                    token = v;
                }
            }
        }
        if (!isfinite(norm) || !isfinite(top) || token < 0 || !isfinite(best))
            bad = 1;
        tokens[m] = token;
    }
    return bad ? -2 : 0;
}
