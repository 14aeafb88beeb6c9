/* float32 linears y = x W^T (+ b) that give oneDNN's bits, for any number of rows: the engine's
 * default CPU GEMM (kernels/cpu_linear.py `PanelLinear`). At a decode step's few rows oneDNN
 * streams the weights at about two thirds of the memory rate; this streams them at it, and at
 * hundreds of rows it runs a few percent faster than oneDNN.
 *
 * Built at first use by kernels/cpu_native.py (cc -O3 -march=native -fopenmp) and called through
 * ctypes (kernels/cpu_linear.py).
 *
 * The summation order is oneDNN's, found by comparing bits (tests/kernels/test_cpu_linear.py
 * asserts it): K is cut into blocks of `kb` inputs (512 for K <= 1024, 1024 above, on the oneDNN
 * in torch 2.13); each block is one FMA chain from zero, in input order; the blocks' sums are
 * added to the output in block order; the bias last. A row's bits therefore do not depend on how
 * many rows share the call, on the tiling or on the number of threads, and this path and
 * oneDNN's can be mixed freely from step to step.
 *
 * Weights are packed in panels of PANEL output columns, each [K, width] contiguous (width 64,
 * the last panel N % 64): a tile of output columns stays in registers while its panel streams
 * past in memory order, one broadcast and a few FMAs per input, no horizontal sums.
 */

#include <stdint.h>

typedef float vf16 __attribute__((vector_size(64), aligned(4))); /* for unaligned loads and stores */
typedef float vreg __attribute__((vector_size(64)));             /* naturally aligned: stays in registers */
#define LANES 16
#define PANEL 64
#define ALWAYS_INLINE static inline __attribute__((always_inline))
#ifdef __AVX512F__
#define MAX_ROWS 6 /* 6 rows x 4 vectors of accumulators + 4 weight vectors: 28 of 32 registers */
#else
#define MAX_ROWS 2 /* AVX2: a vreg is two registers; 2 x 4 x 2 + 8 = 24 (some spill, still streaming) */
#endif

/* out[r, 0 .. CV*16) (+)= x[r, 0 .. klen) . panel[0 .. klen, 0 .. CV*16) for NR rows r:
 * one FMA chain per output from zero over this block; `first` stores it, otherwise it is added
 * to what the earlier blocks left; `bias` (last block only) is added after. */
ALWAYS_INLINE void tile(const float *x, int64_t ldx, int klen, const float *panel, int width, float *out,
                        int64_t ldo, int first, const float *bias, const int NR, const int CV)
{
    vreg acc[MAX_ROWS][4];
#pragma GCC unroll 6
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 4
        for (int c = 0; c < CV; c++)
            acc[r][c] = (vreg){0};
    for (int k = 0; k < klen; k++, panel += width) {
        vreg wv[4];
#pragma GCC unroll 4
        for (int c = 0; c < CV; c++)
            wv[c] = (vreg) * (const vf16 *)(panel + c * LANES);
#pragma GCC unroll 6
        for (int r = 0; r < NR; r++) {
            const float xr = x[r * ldx + k];
#pragma GCC unroll 4
            for (int c = 0; c < CV; c++)
                acc[r][c] += xr * wv[c]; /* contracted to one FMA (gnu11: -ffp-contract=fast) */
        }
    }
#pragma GCC unroll 6
    for (int r = 0; r < NR; r++)
#pragma GCC unroll 4
        for (int c = 0; c < CV; c++) {
            vf16 *o = (vf16 *)(out + r * ldo + c * LANES);
            vreg v = first ? acc[r][c] : (vreg)*o + acc[r][c];
            if (bias)
                v = v + (vreg) * (const vf16 *)(bias + c * LANES);
            *o = (vf16)v;
        }
}

/* All rows of one panel over one K block, NR rows at a time. */
ALWAYS_INLINE void panel_block(const float *x, int64_t M, int K, int k0, int klen, const float *panel, int width,
                               float *out, int64_t N, int first, const float *bias, const int CV)
{
    int64_t m = 0;
    for (; m + MAX_ROWS <= M; m += MAX_ROWS)
        tile(x + m * K + k0, K, klen, panel, width, out + m * N, N, first, bias, MAX_ROWS, CV);
    const float *xm = x + m * K + k0;
    float *om = out + m * N;
    switch (M - m) {
#if MAX_ROWS > 5
    case 5:
        tile(xm, K, klen, panel, width, om, N, first, bias, 5, CV);
        break;
    case 4:
        tile(xm, K, klen, panel, width, om, N, first, bias, 4, CV);
        break;
    case 3:
        tile(xm, K, klen, panel, width, om, N, first, bias, 3, CV);
        break;
    case 2:
        tile(xm, K, klen, panel, width, om, N, first, bias, 2, CV);
        break;
#endif
    case 1:
        tile(xm, K, klen, panel, width, om, N, first, bias, 1, CV);
        break;
    default:
        break;
    }
}

/* y[M, N] = x[M, K] W^T + bias in oneDNN's order (see the top): W as panels (kernels/cpu_linear.py
 * `pack_panels`), N a multiple of 16, bias [N] or NULL, kb >= 1. Panels split over threads. */
void exact_linear(const float *x, int64_t M, int K, const float *panels, int N, const float *bias, float *y, int kb,
                  int num_threads)
{
    const int num_panels = (N + PANEL - 1) / PANEL;
    const int threads = num_threads < num_panels ? num_threads : num_panels;
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
    for (int p = 0; p < num_panels; p++) {
        const int n0 = p * PANEL, width = N - n0 < PANEL ? N - n0 : PANEL;
        const float *panel = panels + (int64_t)n0 * K;
        for (int k0 = 0; k0 < K; k0 += kb) {
            const int klen = K - k0 < kb ? K - k0 : kb;
            const float *b = k0 + klen == K && bias ? bias + n0 : 0;
            const float *pk = panel + (int64_t)k0 * width;
            switch (width / LANES) {
            case 4:
                panel_block(x, M, K, k0, klen, pk, width, y + n0, N, k0 == 0, b, 4);
                break;
            case 3:
                panel_block(x, M, K, k0, klen, pk, width, y + n0, N, k0 == 0, b, 3);
                break;
            case 2:
                panel_block(x, M, K, k0, klen, pk, width, y + n0, N, k0 == 0, b, 2);
                break;
            default:
                panel_block(x, M, K, k0, klen, pk, width, y + n0, N, k0 == 0, b, 1);
            }
        }
    }
}
