/* float32 linears y = x W^T (+ b) that give oneDNN's bits, for any number of rows: the engine's
 * default CPU GEMM (kernels/layers/panel_linear.py `PanelLinear`). At a decode step's few rows oneDNN
 * streams the weights at about two thirds of the memory rate; this streams them at it, and at
 * hundreds of rows it runs a few percent faster than oneDNN.
 *
 * Built at first use by kernels/native/build.py (cc -O3 -march=native -fopenmp) and called through
 * ctypes (kernels/layers/panel_linear.py).
 *
 * The summation order is oneDNN's, found by comparing bits (tests/kernels/test_cpu_linear.py
 * asserts it): K is cut into blocks of `kb` inputs (the CPU decides how many: kernels/layers/panel_linear.py
 * `onednn_block` finds out by comparing bits); each block is one FMA chain from zero, in input
 * order; the blocks' sums are added to the output in block order; the bias last. A row's bits
 * therefore do not depend on how many rows share the call, on the tiling or on the number of
 * threads, and this path and oneDNN's can be mixed freely from step to step.
 *
 * Weights are packed in panels of PANEL output columns, each [K, width] contiguous (width 64,
 * the last panel N % 64): a tile of output columns stays in registers while its panel streams
 * past in memory order, one broadcast and a few FMAs per input, no horizontal sums. Up to 96
 * rows, while the tiles read a panel block (the first from memory, the others from L2), they
 * prefetch the next block into L2, one cache line at a time spread evenly over all their k
 * steps, so the weight stream overlaps the arithmetic (12 layers of 110m weights from memory, on
 * a Sapphire Rapids box: 8 rows 32 -> 24.5 ms, 32 rows 46.5 -> 36 ms, 64 rows 63.5 -> 52 ms
 * against prefetching in bursts, measured).
 *
 * `exact_linear_swiglu` is the MLP's [gate; up] projection with its SwiGLU applied to each
 * panel's sums while they are in L2 (the same bits as the separate pass in cpu_fused.c).
 */

#include <omp.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "fg_common.h"

FG_EXPORT_CONSTANTS

/* A tile keeps TILE_ROWS rows x TILE_VECS vectors of sums in registers, with room left for the
 * weight vectors of a k step and a broadcast input. With AVX-512 (32 registers of 16 floats) a
 * tile covers a whole 64-column panel: 6 x 4 accumulators + 4 weight vectors = 28. With 16
 * registers of 8 floats (AVX2) it covers 16 columns: 6 x 2 + 2 + 1 = 15; a wider tile would not
 * fit, and GCC lowers a vector wider than the registers to loads and stores through the stack
 * (the kernel then ran at a fraction of the FMA rate). Any tiling gives the same bits: each
 * output's sum is still one chain over the block's inputs in order. */
#ifdef __AVX512F__
#define VL 16 /* floats a vector register holds (fg_common.h's LANES is the layout's unit) */
#define TILE_VECS 4
#define PREFETCH_MAX_ROWS 96 /* up to here the next block is prefetched into L2 as well (below) */
#else
#define VL 8
#define TILE_VECS 2
/* On a Zen 3 core (AVX2) the L1 prefetch of the block being read beats the next block's L2
 * prefetch at every row count: 12 layers' linears from memory, 32 rows 58 -> 45 ms, 64 rows
 * 138 -> 93 ms, 1-16 rows the same. */
#define PREFETCH_MAX_ROWS 0
#endif
/* Which thread takes which panel. Each thread owns a contiguous share of the panels and runs it
 * front to back, so that on AVX-512 a block's tiles can prefetch the next block, which is the next
 * one in memory (below). A thread whose share is done takes panels one at a time from the back of
 * the share with the most left (`next_panel`), so a thread that the OS preempted (a busy neighbour,
 * the server's event loop, a client) holds up the other only for the panel it is in, not for its
 * whole share. A panel's sums are the same whichever thread runs it. A taken panel skips the
 * next-block prefetch: what follows it in memory is its owner's next, already fetched or taken. */
typedef struct {
    _Atomic uint64_t span; /* front << 32 | back: the share's panels not yet taken */
    char pad[56];          /* one cache line each */
} fg_share;

static void split_shares(fg_share *shares, int threads, int panels)
{
    for (int t = 0; t < threads; t++) {
        const uint64_t lo = (uint64_t)t * panels / threads, hi = (uint64_t)(t + 1) * panels / threads;
        atomic_init(&shares[t].span, lo << 32 | hi);
    }
}

/* The next panel for thread `self`: the front of its own share, else the back of the fullest
 * share (*taken = 1); -1 when every panel is out. */
static int next_panel(fg_share *shares, int threads, int self, int *taken)
{
    uint64_t v = atomic_load_explicit(&shares[self].span, memory_order_relaxed);
    while ((uint32_t)(v >> 32) < (uint32_t)v)
        if (atomic_compare_exchange_weak(&shares[self].span, &v, v + ((uint64_t)1 << 32))) {
            *taken = 0;
            return (int)(v >> 32);
        }
    for (;;) {
        int victim = -1;
        uint32_t most = 0;
        for (int t = 0; t < threads; t++) {
            const uint64_t w = atomic_load_explicit(&shares[t].span, memory_order_relaxed);
            const uint32_t left = (uint32_t)w > (uint32_t)(w >> 32) ? (uint32_t)w - (uint32_t)(w >> 32) : 0;
            if (left > most)
                most = left, victim = t;
        }
        if (victim < 0)
            return -1;
        uint64_t w = atomic_load_explicit(&shares[victim].span, memory_order_relaxed);
        if ((uint32_t)(w >> 32) < (uint32_t)w && atomic_compare_exchange_weak(&shares[victim].span, &w, w - 1)) {
            *taken = 1;
            return (int)((uint32_t)w - 1);
        }
    }
}
#define TILE_ROWS 6
#define CHAINS 8 /* independent FMA chains a tile of one or two rows needs to keep the FMA units busy */
typedef float vfu __attribute__((vector_size(VL * 4), aligned(4))); /* for unaligned loads and stores */
typedef float vreg __attribute__((vector_size(VL * 4)));             /* naturally aligned: stays in registers */
#define L1_AHEAD 16 /* k steps ahead that a tile of many rows prefetches its panel rows into L1 */

/* The next block's prefetch, spread evenly over every k step of every tile of this block:
 * `lines` cache lines over `steps` k steps, one whenever the running credit reaches `steps`. */
struct ahead {
    const char *next;
    int64_t credit, lines, steps;
};

/* out[r, 0 .. CV*VL) (+)= x[r, 0 .. klen) . panel[0 .. klen, 0 .. CV*VL) for NR rows r:
 * one FMA chain per output from zero over this block; `first` stores it, otherwise it is added
 * to what the earlier blocks left; `bias` (last block only) is added after. */
ALWAYS_INLINE void tile(const float *x, int64_t ldx, int klen, const float *panel, int width, float *out,
                        int64_t ldo, int first, const float *bias, const int NR, const int CV,
                        struct ahead *ahead, const int PREFETCH)
{
    const char *next = PREFETCH ? ahead->next : 0;
    int64_t credit = PREFETCH ? ahead->credit : 0;
    const int64_t lines = PREFETCH ? ahead->lines : 0, steps = PREFETCH ? ahead->steps : 1;
    vreg acc[TILE_ROWS][CHAINS];
#pragma GCC unroll 6
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 8
        for (int c = 0; c < CV; c++)
            acc[r][c] = (vreg){0};
    for (int k = 0; k < klen; k++, panel += width) {
        vreg wv[CHAINS];
        if (PREFETCH) { /* the next block's weights, into L2 while this one computes */
            credit += lines;
            while (credit >= steps) {
                __builtin_prefetch(next, 0, 2);
                next += 64;
                credit -= steps;
            }
        } else { /* many rows: each tile reads the block from L2 (prefill: +3-5% a core, measured) */
#pragma GCC unroll 4
            for (int c = 0; c < CV * VL; c += 16) /* a cache line at a time */
                __builtin_prefetch(panel + L1_AHEAD * width + c, 0, 3);
        }
#pragma GCC unroll 8
        for (int c = 0; c < CV; c++)
            wv[c] = (vreg) * (const vfu *)(panel + c * VL);
#pragma GCC unroll 6
        for (int r = 0; r < NR; r++) {
            const float xr = x[r * ldx + k];
#pragma GCC unroll 8
            for (int c = 0; c < CV; c++)
                acc[r][c] += xr * wv[c]; /* contracted to one FMA (gnu11: -ffp-contract=fast) */
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 8
        for (int c = 0; c < CV; c++) {
            vfu *o = (vfu *)(out + r * ldo + c * VL);
            vreg v = first ? acc[r][c] : (vreg)*o + acc[r][c];
            if (bias)
                v = v + (vreg) * (const vfu *)(bias + c * VL);
            *o = (vfu)v;
        }
    if (PREFETCH) {
        ahead->next = next;
        ahead->credit = credit;
    }
}

/* The vectors of columns a tile of NR rows takes: CV (PV % CV == 0), or, where a tile of one or
 * two rows has room for more FMA chains (CHAINS), 2 or 4 times that: a lone decode row runs 8
 * chains, not 2. */
ALWAYS_INLINE int tile_vecs(const int NR, const int PV, const int CV)
{
    if (NR * CV * 4 <= CHAINS && PV % (CV * 4) == 0)
        return CV * 4;
    if (NR * CV * 2 <= CHAINS && PV % (CV * 2) == 0)
        return CV * 2;
    return CV;
}

/* NR rows of one panel over one K block: the panel's PV vectors of columns, tile_vecs at a time. */
ALWAYS_INLINE void rows_tiles(const float *x, int64_t K, int klen, const float *panel, int width, float *out,
                              int64_t N, int first, const float *bias, const int NR, const int PV, const int CV,
                              struct ahead *ahead, const int PREFETCH)
{
    const int wide = tile_vecs(NR, PV, CV);
#pragma GCC unroll 8
    for (int c = 0; c < PV; c += wide)
        tile(x, K, klen, panel + c * VL, width, out + c * VL, N, first, bias ? bias + c * VL : 0, NR, wide,
             ahead, PREFETCH);
}

/* How many tiles rows_tiles runs for NR rows (the prefetch is spread over all their k steps). */
ALWAYS_INLINE int64_t tiles_of(const int NR, const int PV, const int CV)
{
    return PV / tile_vecs(NR, PV, CV);
}

/* All rows of one panel over one K block, TILE_ROWS rows at a time. With PREFETCH, every tile's
 * k steps share the prefetch of what comes next (a thread's panels are contiguous, in the order
 * it runs them), evenly: a burst of prefetches fills the line-fill buffers and stalls the loads of
 * the tile that issues them, while an even stream keeps the weights coming at the rate the
 * arithmetic takes them (at 8-64 rows, 12 layers' weights from memory: 30-62 ms -> see
 * docs/engine-performance.md). A single tile prefetches the next block as it reads this one. */
ALWAYS_INLINE void rows_block(const float *x, int64_t M, int K, int k0, int klen, const float *panel, int width,
                              float *out, int64_t N, int first, const float *bias, const int PV, const int CV,
                              const int PREFETCH)
{
    const int64_t full = M / TILE_ROWS, rest = M % TILE_ROWS;
    int64_t tiles = full * tiles_of(TILE_ROWS, PV, CV);
    switch (rest) {
    case 5: tiles += tiles_of(5, PV, CV); break;
    case 4: tiles += tiles_of(4, PV, CV); break;
    case 3: tiles += tiles_of(3, PV, CV); break;
    case 2: tiles += tiles_of(2, PV, CV); break;
    case 1: tiles += tiles_of(1, PV, CV); break;
    default: break;
    }
    struct ahead ahead = {(const char *)(panel + (int64_t)klen * width), 0,
                          (int64_t)klen * width * (int64_t)sizeof(float) / 64, tiles * klen};
    int64_t m = 0;
    for (; m + TILE_ROWS <= M; m += TILE_ROWS)
        rows_tiles(x + m * K + k0, K, klen, panel, width, out + m * N, N, first, bias, TILE_ROWS, PV, CV, &ahead,
                   PREFETCH);
    const float *xm = x + m * K + k0;
    float *om = out + m * N;
    switch (rest) {
    case 5: rows_tiles(xm, K, klen, panel, width, om, N, first, bias, 5, PV, CV, &ahead, PREFETCH); break;
    case 4: rows_tiles(xm, K, klen, panel, width, om, N, first, bias, 4, PV, CV, &ahead, PREFETCH); break;
    case 3: rows_tiles(xm, K, klen, panel, width, om, N, first, bias, 3, PV, CV, &ahead, PREFETCH); break;
    case 2: rows_tiles(xm, K, klen, panel, width, om, N, first, bias, 2, PV, CV, &ahead, PREFETCH); break;
    case 1: rows_tiles(xm, K, klen, panel, width, om, N, first, bias, 1, PV, CV, &ahead, PREFETCH); break;
    default: break;
    }
}

/* Above PREFETCH_MAX_ROWS the block is compute-bound and x's rows fill L2: no prefetch there.
 * PV: the panel's width in vectors (width / VL); the tiles take CV = min(PV, TILE_VECS) of them. */
ALWAYS_INLINE void panel_block(const float *x, int64_t M, int K, int k0, int klen, const float *panel, int width,
                               float *out, int64_t N, int first, const float *bias, const int PV, int taken)
{
    const int CV = PV < TILE_VECS ? PV : TILE_VECS;
    if (M <= PREFETCH_MAX_ROWS && !taken)
        rows_block(x, M, K, k0, klen, panel, width, out, N, first, bias, PV, CV, 1);
    else
        rows_block(x, M, K, k0, klen, panel, width, out, N, first, bias, PV, CV, 0);
}

/* y[M, N] = x[M, K] W^T + bias in oneDNN's order (see the top): W as panels (kernels/layers/panel_linear.py
 * `pack_panels`), N a multiple of 16, bias [N] or NULL, kb >= 1. Panels split over threads. */
void exact_linear(const float *x, int64_t M, int K, const float *panels, int N, const float *bias, float *y, int kb,
                  int num_threads)
{
    const int num_panels = (N + PANEL - 1) / PANEL;
    const int threads = num_threads < num_panels ? num_threads : num_panels > 0 ? num_panels : 1;
    fg_share shares[threads];
    split_shares(shares, threads, num_panels);
#pragma omp parallel num_threads(threads) if (threads > 1)
    for (int p, taken; (p = next_panel(shares, threads, omp_get_thread_num(), &taken)) >= 0;) {
        const int n0 = p * PANEL, width = N - n0 < PANEL ? N - n0 : PANEL;
        const float *panel = panels + (int64_t)n0 * K;
        for (int k0 = 0; k0 < K; k0 += kb) {
            const int klen = K - k0 < kb ? K - k0 : kb;
            const float *b = k0 + klen == K && bias ? bias + n0 : 0;
            const float *pk = panel + (int64_t)k0 * width;
            switch (width / 16) { /* a multiple of 16 columns: VL divides it */
            case 4:
                panel_block(x, M, K, k0, klen, pk, width, y + n0, N, k0 == 0, b, 64 / VL, taken);
                break;
            case 3:
                panel_block(x, M, K, k0, klen, pk, width, y + n0, N, k0 == 0, b, 48 / VL, taken);
                break;
            case 2:
                panel_block(x, M, K, k0, klen, pk, width, y + n0, N, k0 == 0, b, 32 / VL, taken);
                break;
            default:
                panel_block(x, M, K, k0, klen, pk, width, y + n0, N, k0 == 0, b, 16 / VL, taken);
            }
        }
    }
}

/* y[M, N] = (x[M, K] W^T) * scale + bias, W an int8 linear's codes as float32 panels
 * (kernels/layers/quant_panels.py): one FMA chain per output over all K inputs from zero, then one
 * multiply-add, as cpu_quant.c's `tile` computes it (the same expression under the same flags), so
 * the same bits. scale [N]; bias [N] or NULL. */
void exact_linear_scaled(const float *x, int64_t M, int K, const float *panels, int N, const float *scale,
                         const float *bias, float *y, int num_threads)
{
    exact_linear(x, M, K, panels, N, 0, y, K, num_threads);
#pragma omp parallel for num_threads(num_threads) if (num_threads > 1 && M * N >= 65536)
    for (int64_t m = 0; m < M; m++) {
        float *row = y + m * N;
        for (int n = 0; n < N; n++)
            row[n] = row[n] * scale[n] + (bias ? bias[n] : 0.0f);
    }
}

/* e^x for any float x, clamped to [-87, 88]: cpu_fused.c's exp16, the same expression, so that
 * the SwiGLU below gives the bits of cpu_fused.c's silu_mul (tests/kernels/test_cpu_linear.py).
 * A copy, not a shared header: each library is built from its one source file and cached by
 * that file's content, so a header's change would not rebuild it. */
ALWAYS_INLINE vreg exp_lanes(vreg x)
{
    typedef int32_t vi32 __attribute__((vector_size(VL * 4)));
    const vreg lo = (vreg){0} - 87.0f, hi = (vreg){0} + 88.0f;
    x = (vreg)(((vi32)lo & (vi32)(x < lo)) | ((vi32)x & ~(vi32)(x < lo)));
    x = (vreg)(((vi32)hi & (vi32)(x > hi)) | ((vi32)x & ~(vi32)(x > hi)));
    const vreg t = x * 1.44269504088896341f;
    const vi32 neg = (vi32)(t < 0);
    const vreg half = (vreg)((neg & (vi32)((vreg){0} - 0.5f)) | (~neg & (vi32)((vreg){0} + 0.5f)));
    const vi32 n = __builtin_convertvector(t + half, vi32);
    const vreg f = t - __builtin_convertvector(n, vreg);
    vreg p = f * 1.525273380405984e-05f;
    p = p + 1.5403530393381606e-04f;
    p = p * f + 1.3333558146428443e-03f;
    p = p * f + 9.618129107628477e-03f;
    p = p * f + 5.550410866482158e-02f;
    p = p * f + 2.402265069591007e-01f;
    p = p * f + 6.931471805599453e-01f;
    p = p * f + 1.0f;
    return p * (vreg)((n + 127) << 23);
}

/* A SwiGLU projection with its activation: y[M, N/2] = silu(g) * u, where [g | u] = x W^T + bias
 * in oneDNN's order. The weight's gate and up rows are interleaved before packing (each panel holds
 * 32 gate columns and the 32 up columns of the same outputs, kernels/layers/panel_linear.py `swiglu_order`), so a panel's
 * sums finish in a per-thread [M, 64] scratch that stays in L2 and turn into 32 output columns
 * there: the [M, N] gate/up tensor is never written out, nor read back. N a multiple of 64. */
int exact_linear_swiglu(const float *x, int64_t M, int K, const float *panels, int N, const float *bias, float *y,
                        int kb, int num_threads)
{
    const int num_panels = N / PANEL, half = PANEL / 2, inter = N / 2;
    const int threads = num_threads < num_panels ? num_threads : num_panels > 0 ? num_panels : 1;
    fg_share shares[threads];
    split_shares(shares, threads, num_panels);
    int failed = 0;
#pragma omp parallel num_threads(threads) if (threads > 1) reduction(| : failed)
    {
        float *scratch = malloc(sizeof(float) * PANEL * (M > 0 ? M : 1));
        for (int p, taken; (p = next_panel(shares, threads, omp_get_thread_num(), &taken)) >= 0;) {
            if (!scratch) { /* the other threads take this one's panels; none is left unrun */
                failed = 1;
                break;
            }
            const float *panel = panels + (int64_t)p * PANEL * K;
            for (int k0 = 0; k0 < K; k0 += kb) {
                const int klen = K - k0 < kb ? K - k0 : kb;
                const float *b = k0 + klen == K && bias ? bias + (int64_t)p * PANEL : 0;
                panel_block(x, M, K, k0, klen, panel + (int64_t)k0 * PANEL, PANEL, scratch, PANEL, k0 == 0, b,
                            PANEL / VL, taken);
            }
            for (int64_t r = 0; r < M; r++) {
                const float *g = scratch + r * PANEL, *u = g + half;
                float *o = y + r * inter + (int64_t)p * half;
                for (int i = 0; i < half; i += VL) {
                    const vreg gv = (vreg) * (const vfu *)(g + i);
                    *(vfu *)(o + i) = (vfu)(gv / (1.0f + exp_lanes(-gv)) * (vreg) * (const vfu *)(u + i));
                }
            }
        }
        free(scratch);
    }
    return failed ? -1 : 0;
}
