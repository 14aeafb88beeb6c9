/* One decode round of a small float32 Llama model in one native call: a draft model's
 * rounds j >= 1 (one token per sequence), from the embedding gather to the final RMSNorm.
 *
 * Built at first use by kernels/native/build.py (cc -O3 -march=native -fopenmp) and called
 * through ctypes (kernels/programs/draft_round.py). Why: at batch 1 a small draft's round is ~15 tiny
 * calls (norms, linears, RoPE, attention, SwiGLU), each ~10 us of Python and ctypes overhead
 * around a few microseconds of work; here the whole round is one call.
 *
 * The norms, SwiGLU, RoPE with the KV write and the paged attention are the functions of
 * cpu_fused.c and cpu_attention.c, reached through pointers the caller fills in, in the layer
 * order of fg_layer.h (the stack's too): the same code, so the same bits, as the per-op path
 * (backends/local/speculative/draft_forward.py). Only the linears are this file's own, on
 * weights packed in panels of 64 output columns, each [K, 64] contiguous: a tile of output
 * columns stays in registers while its panel streams past in memory order, one broadcast and
 * a few FMAs per input, no horizontal sums (twice the speed of [K, N] rows at one row here).
 * Their summation order differs from torch's, which is fine for a draft: the target
 * verifies every guess.
 */

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fg_layer.h"

FG_EXPORT_CONSTANTS

#define PARALLEL_MIN_MACS (1 << 20) /* below this a parallel region costs more than it saves */

/* One layer: fg_layer (fg_common.h), its linears in plain panels (see linear). */
typedef struct {
    int num_layers, hidden, heads, kv_heads, head_dim, inter, block_size, max_positions, vocab;
    float eps, scale;
    const float *embed, *final_norm; /* [vocab, hidden], [hidden] */
    const float *cos_sin;            /* [max_positions, 2, head_dim]: cos, sin' of every position */
    const fg_layer *layers;
    rms_norm_fn rms_norm;
    silu_mul_fn silu_mul;
    rope_fn rope_write_kv;
    decode_fn attention;
    qk_norm_fn qk_norm;
} draft_model;

/* The sizes of the structs kernels/native/abi.py mirrors, checked when it loads this library. */
size_t fg_sizeof_draft_layer(void) { return sizeof(fg_layer); }
size_t fg_sizeof_draft_model(void) { return sizeof(draft_model); }

/* The tile's vectors are as wide as the registers: 16 floats with AVX-512 (32 registers), 8 on
 * AVX2 (16 registers). A wider vector than the registers is lowered by GCC through the stack, so
 * every FMA became a load and a store (the AVX2 build of a 16-float tile: 197 of its 200 FMAs
 * read the stack). */
#ifdef __AVX512F__
#define VL 16
#else
#define VL 8
#endif
typedef float vl __attribute__((vector_size(VL * 4)));              /* in registers */
typedef float vlu __attribute__((vector_size(VL * 4), aligned(4))); /* unaligned loads and stores */

/* out[b, 0 .. CV*VL) = bias + x[b] . panel for NB rows b: CV vectors of columns of one panel
 * whose rows lie `width` floats apart; NB x CV accumulators, the CV weight vectors and a
 * broadcast in registers. Each output is one FMA chain from its bias over k in order, whatever
 * the tiling, so the bits do not depend on the vector width. */
ALWAYS_INLINE void tile(const float *x, int K, const float *panel, int width, const float *bias, float *out, int N,
                        const int NB, const int CV)
{
    vl acc[4][4]; /* NB x CV of it used; fixed sizes (not VLAs) so they live in registers */
#pragma GCC unroll 4
    for (int c = 0; c < CV; c++) {
        const vl b0 = bias ? (vl) * (const vlu *)(bias + c * VL) : (vl){0};
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++)
            acc[b][c] = b0;
    }
    for (int k = 0; k < K; k++, panel += width) {
        vl wv[4];
#pragma GCC unroll 4
        for (int c = 0; c < CV; c++)
            wv[c] = (vl) * (const vlu *)(panel + c * VL);
#pragma GCC unroll 4
        for (int b = 0; b < NB; b++) {
            const float xb = x[(int64_t)b * K + k];
#pragma GCC unroll 4
            for (int c = 0; c < CV; c++)
                acc[b][c] += xb * wv[c];
        }
    }
#pragma GCC unroll 4
    for (int b = 0; b < NB; b++)
#pragma GCC unroll 4
        for (int c = 0; c < CV; c++)
            *(vlu *)(out + (int64_t)b * N + c * VL) = (vlu)acc[b][c];
}

#ifdef __AVX512F__
/* One panel's columns for NB rows: the whole panel (16, 32, 48 or 64 columns) in one tile, at
 * most 4 x 4 accumulators plus 4 weight vectors of 32 registers. */
ALWAYS_INLINE void panel_rows(const float *x, int K, const float *panel, int width, const float *bias, float *out,
                              int N, const int NB)
{
    switch (width / VL) {
    case 4:
        tile(x, K, panel, width, bias, out, N, NB, 4);
        break;
    case 3:
        tile(x, K, panel, width, bias, out, N, NB, 3);
        break;
    case 2:
        tile(x, K, panel, width, bias, out, N, NB, 2);
        break;
    default:
        tile(x, K, panel, width, bias, out, N, NB, 1);
    }
}
#else
/* One panel's columns (16, 32, 48 or 64) for NB rows, NB * CV + CV + 1 <= 16 registers: tiles of
 * 32 columns for one or two rows (4 or 8 accumulators), of 16 for three or four (6 or 8), the
 * rest in 16. */
ALWAYS_INLINE void panel_rows(const float *x, int K, const float *panel, int width, const float *bias, float *out,
                              int N, const int NB)
{
    int c = 0;
    if (NB <= 2)
        for (; c + 32 <= width; c += 32)
            tile(x, K, panel + c, width, bias ? bias + c : NULL, out + c, N, NB, 4);
    for (; c < width; c += 16)
        tile(x, K, panel + c, width, bias ? bias + c : NULL, out + c, N, NB, 2);
}
#endif

/* out[M, N] = x[M, K] @ W + bias, W packed as panels of PANEL columns ([K, PANEL] each, the last
 * [K, N % PANEL]; N a multiple of 16), so that a tile streams one contiguous run of weights.
 * Rows go four at a time; the panels split over threads when there is enough work. */
static void linear(const float *x, int M, int K, const float *w, int N, const float *bias, float *out,
                   int num_threads)
{
    const int panels = (N + PANEL - 1) / PANEL;
    const int parts = (int64_t)M * K * N >= PARALLEL_MIN_MACS && num_threads > 1 ? num_threads : 1;
#pragma omp parallel for num_threads(parts) schedule(static) if (parts > 1)
    for (int p = 0; p < panels; p++) {
        const int n0 = p * PANEL, width = N - n0 < PANEL ? N - n0 : PANEL;
        const float *panel = w + (int64_t)n0 * K, *pb = bias ? bias + n0 : NULL;
        int m = 0;
        for (; m + 4 <= M; m += 4)
            panel_rows(x + (int64_t)m * K, K, panel, width, pb, out + (int64_t)m * N + n0, N, 4);
        const float *xm = x + (int64_t)m * K;
        float *om = out + (int64_t)m * N + n0;
        if (M - m == 3)
            panel_rows(xm, K, panel, width, pb, om, N, 3);
        else if (M - m == 2)
            panel_rows(xm, K, panel, width, pb, om, N, 2);
        else if (M - m == 1)
            panel_rows(xm, K, panel, width, pb, om, N, 1);
    }
}

/* The per-token RoPE rows, cache slots and context lengths of decode tokens at `positions`,
 * into the caller's scratch (for callers that pass positions instead of them). */
static int decode_inputs(const draft_model *m, const int64_t *positions, const int32_t *block_tables,
                         int64_t table_stride, int batch, float *cos_sin, int64_t *slots, int32_t *seq_lens)
{
    const int bs = m->block_size, width = 2 * m->head_dim;
    for (int b = 0; b < batch; b++) {
        const int64_t p = positions[b];
        if (p < 0 || p >= m->max_positions || p / bs >= table_stride)
            return -2;
        memcpy(cos_sin + (int64_t)b * width, m->cos_sin + p * width, sizeof(float) * width);
        slots[b] = (int64_t)block_tables[b * table_stride + p / bs] * bs + p % bs;
        seq_lens[b] = (int32_t)(p + 1);
    }
    return 0;
}

typedef struct {
    fg_layers layers; /* first: the callbacks cast back to this */
    const draft_model *m;
    const int32_t *block_tables, *seq_lens;
    int64_t table_stride;
    float *gate_up; /* scratch [rows, 2 inter] */
} draft_run;

static void draft_linear(const fg_layers *r, const fg_layer *L, int which, const float *x, int K, const float *w,
                         int N, const float *bias, float *y)
{
    (void)L, (void)which; /* every linear of the draft runs on this file's panels */
    linear(x, (int)r->rows, K, w, N, bias, y, r->num_threads);
}

/* every row is a decode row */
static int draft_attend(const fg_layers *r, const fg_layer *L, const float *q, float *out)
{
    const draft_run *run = (const draft_run *)r;
    const draft_model *m = run->m;
    return m->attention(q, L->k_cache, L->v_cache, run->block_tables, run->table_stride, run->seq_lens, out,
                        (int)r->rows, m->heads, m->kv_heads, m->head_dim, m->block_size, m->scale, 0, r->num_threads,
                        NULL, NULL);
}

/* the [gate; up] projection, then SwiGLU over it (cpu_fused.c) */
static int draft_gate_up(const fg_layers *r, const fg_layer *L, const float *x, float *act)
{
    const draft_run *run = (const draft_run *)r;
    const draft_model *m = run->m;
    linear(x, (int)r->rows, m->hidden, L->gate_up, 2 * m->inter, L->gate_up_bias, run->gate_up, r->num_threads);
    m->silu_mul(run->gate_up, act, r->rows, m->inter, r->num_threads);
    return 0;
}

/* One token per sequence: ids [batch]; block_tables [batch, table_stride] int32. Either
 * `positions` [batch] (and NULL for the next three), or cos_sin [batch, 2, head_dim] (cos, sin'
 * as for rope_write_kv), slots [batch] cache rows and seq_lens [batch] int32 (including the
 * new token). out: [batch, hidden], the hidden states after the final norm. Returns 0, -1
 * when scratch memory could not be had, -2 for a token id past the vocabulary or a position past the RoPE table or its block table. */
int draft_decode_round(const draft_model *m, const int64_t *ids, const int64_t *positions, const float *cos_sin,
                       const int64_t *slots, const int32_t *seq_lens, const int32_t *block_tables,
                       int64_t table_stride, int batch, float *out, int num_threads)
{
    const int H = m->hidden, D = m->head_dim, qd = m->heads * D, qkv_n = (m->heads + 2 * m->kv_heads) * D;
    const int64_t B = batch;
    /* floats, then (8-byte aligned) the int64 slots and int32 lengths a positions call derives */
    const int64_t floats = B * (3 * (int64_t)H + qkv_n + 2 * (int64_t)qd + 3 * (int64_t)m->inter + 2 * D);
    float *scratch = malloc(sizeof(float) * (floats + (floats & 1)) + (sizeof(int64_t) + sizeof(int32_t)) * B);
    if (!scratch)
        return -1;
    float *h = scratch, *x = h + B * H, *pending = x + B * H, *qkv = pending + B * H, *q = qkv + B * qkv_n;
    float *att = q + B * qd, *gate_up = att + B * qd, *act = gate_up + 2 * B * m->inter;
    if (positions) {
        float *rows = act + B * m->inter;
        int64_t *own_slots = (int64_t *)(scratch + floats + (floats & 1));
        int32_t *own_lens = (int32_t *)(own_slots + B);
        if (decode_inputs(m, positions, block_tables, table_stride, batch, rows, own_slots, own_lens)) {
            free(scratch);
            return -2;
        }
        cos_sin = rows, slots = own_slots, seq_lens = own_lens;
    }
    for (int64_t b = 0; b < B; b++) { /* the residual stream */
        if (ids[b] < 0 || ids[b] >= m->vocab) {
            free(scratch);
            return -2;
        }
        memcpy(h + b * H, m->embed + ids[b] * H, sizeof(float) * H);
    }
    const draft_run run = {
        .layers = {.rows = B, .num_layers = m->num_layers, .hidden = H, .heads = m->heads, .kv_heads = m->kv_heads,
                   .head_dim = D, .inter = m->inter, .num_threads = num_threads, .eps = m->eps, .layers = m->layers,
                   .final_norm = m->final_norm, .rms_norm = m->rms_norm, .rope_write_kv = m->rope_write_kv,
                   .qk_norm = m->qk_norm, .cos_sin = cos_sin, .slots = slots, .linear = draft_linear,
                   .attend = draft_attend, .gate_up = draft_gate_up, .x = x, .qkv = qkv, .q = q, .att = att,
                   .act = act, .pending = pending},
        .m = m,
        .block_tables = block_tables,
        .seq_lens = seq_lens,
        .table_stride = table_stride,
        .gate_up = gate_up,
    };
    const int rc = fg_layers_forward(&run.layers, h, out);
    free(scratch);
    return rc;
}
