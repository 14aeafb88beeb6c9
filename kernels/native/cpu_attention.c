/* Paged attention for CPUs: decode (one query token per sequence over its cached context) and,
 * for a float32 cache, prefill (a chunk of new tokens per sequence, causal over its context;
 * see paged_prefill_attention at the end).
 *
 * Built at first use by kernels/native/build.py (cc -O3 -march=native -fopenmp) and called
 * through ctypes, so it needs no torch headers; the OpenMP runtime is the one torch loaded.
 *
 * Cache layout (K and V alike): [num_blocks, block_size, num_kv_heads, head_dim], elements
 * float32, bfloat16 or float16 (kv_dtype 0, 1, 2), or quantized codes (kernels/ops/kv_quant.py):
 * int8 (kv_dtype 3, x = code * scale) or 4-bit (kv_dtype 4, head_dim / 2 bytes a row,
 * x = code * scale + min), with float16 scales [num_blocks, block_size, num_kv_heads, 1 | 2]
 * beside the blocks. Codes are widened in registers; the scale of a row multiplies its dot
 * product (pass 1) and its probability (pass 3), so no float copy of a row is ever made.
 * Blocks are read in place: no gather, no
 * padding, each cached element is read exactly once per call. Work is split into items of
 * (sequence, run of KV heads) so that short batches still keep every thread busy; an item
 * reads its rows of a block as contiguous head_dim vectors.
 *
 * Per item: pass 1 computes every score (q . k) into a scratch row, pass 2 takes the
 * softmax, pass 3 accumulates the probability-weighted V rows. Scores and sums are float32.
 */

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fg_common.h"
#if defined(__x86_64__)
#include <immintrin.h>
#endif

FG_EXPORT_CONSTANTS

enum { KV_F32 = 0, KV_BF16 = 1, KV_F16 = 2, KV_INT8 = 3, KV_INT4 = 4 };

/* vf16, vi32, LANES: fg_common.h. */
typedef uint16_t vu16 __attribute__((vector_size(32), aligned(2)));
typedef uint32_t vu32 __attribute__((vector_size(64)));
typedef _Float16 vh16 __attribute__((vector_size(32), aligned(2)));

/* 16 int8 codes, or 16 4-bit codes packed in 8 bytes (byte j: lane j low, lane j + 8 high),
 * widened to float32 (GCC scalarises the generic narrow-integer conversions). */
ALWAYS_INLINE vf16 codes16(const void *p, int kv_dtype)
{
#if defined(__AVX512F__)
    if (kv_dtype == KV_INT8)
        return (vf16)_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)p)));
    const __m128i b = _mm_loadl_epi64((const __m128i *)p);
    const __m512i wide = _mm512_cvtepu8_epi32(_mm_unpacklo_epi64(b, b));
    const __m512i shift = _mm512_set_epi32(4, 4, 4, 4, 4, 4, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0);
    return (vf16)_mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srlv_epi32(wide, shift), _mm512_set1_epi32(15)));
#elif defined(__AVX2__)
    __m256 lo, hi;
    if (kv_dtype == KV_INT8) {
        const __m128i b = _mm_loadu_si128((const __m128i *)p);
        lo = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
        hi = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(b, 8)));
    } else {
        const __m256i wide = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p));
        lo = _mm256_cvtepi32_ps(_mm256_and_si256(wide, _mm256_set1_epi32(15)));
        hi = _mm256_cvtepi32_ps(_mm256_srli_epi32(wide, 4));
    }
    vf16 both;
    memcpy(&both, &lo, sizeof lo);
    memcpy((char *)&both + sizeof lo, &hi, sizeof hi);
    return both;
#else
    vf16 out;
    for (int i = 0; i < LANES; i++)
        out[i] = kv_dtype == KV_INT8 ? ((const int8_t *)p)[i]
                                     : (((const uint8_t *)p)[i % 8] >> (i < 8 ? 0 : 4)) & 15;
    return out;
#endif
}

/* Lanes d .. d+15 of a K or V row, widened to float32 (codes: not yet scaled). `kv_dtype` is a
 * constant at every call site (the item function is inlined once per dtype), so the branches
 * fold away. */
ALWAYS_INLINE vf16 load16(const void *row, int d, int kv_dtype)
{
    if (kv_dtype == KV_INT8)
        return codes16((const int8_t *)row + d, KV_INT8);
    if (kv_dtype == KV_INT4)
        return codes16((const uint8_t *)row + d / 2, KV_INT4);
    if (kv_dtype == KV_F32)
        return *(const vf16 *)((const float *)row + d);
    if (kv_dtype == KV_BF16)
        return (vf16)(__builtin_convertvector(*(const vu16 *)((const uint16_t *)row + d), vu32) << 16);
#if defined(__AVX512F__)
    /* GCC scalarises the generic half-to-float conversion; the x86 one is one instruction. */
    return (vf16)_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)row + d)));
#elif defined(__F16C__)
    const __m128i *src = (const __m128i *)((const uint16_t *)row + d);
    const __m256 lo = _mm256_cvtph_ps(_mm_loadu_si128(src)), hi = _mm256_cvtph_ps(_mm_loadu_si128(src + 1));
    vf16 both;
    memcpy(&both, &lo, sizeof lo);
    memcpy((char *)&both + sizeof lo, &hi, sizeof hi);
    return both;
#else
    return __builtin_convertvector(*(const vh16 *)((const _Float16 *)row + d), vf16);
#endif
}

/* Pairwise sums of x's lanes into lanes 0-7 and of y's into lanes 8-15. Four rounds of it
 * turn 16 per-token accumulators into one vector whose lane j is token j's dot product. */
ALWAYS_INLINE vf16 fold(vf16 x, vf16 y)
{
    return __builtin_shufflevector(x, y, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30)
         + __builtin_shufflevector(x, y, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

ALWAYS_INLINE vf16 fold16(const vf16 *a)
{
    vf16 b[8], c[4], d[2];
    for (int i = 0; i < 8; i++)
        b[i] = fold(a[2 * i], a[2 * i + 1]);
    for (int i = 0; i < 4; i++)
        c[i] = fold(b[2 * i], b[2 * i + 1]);
    for (int i = 0; i < 2; i++)
        d[i] = fold(c[2 * i], c[2 * i + 1]);
    return fold(d[0], d[1]);
}


/* Lane-wise mask ? a : b, with mask lanes all ones or all zeros (C has no vector ?:). */
ALWAYS_INLINE vf16 select16(vi32 mask, vf16 a, vf16 b)
{
    return (vf16)(((vi32)a & mask) | ((vi32)b & ~mask));
}

/* e^x for x <= 0 (softmax inputs once the max is taken off): 2^(x log2 e) split into an
 * integer power n, put straight into the exponent bits, and a degree-7 Taylor polynomial of
 * the fraction f in [-0.5, 0.5] (truncation error below 1e-8). Below -87 the result is 0.
 * Defined for each vector width (V floats, VI the int32 lanes, SELECT its select). */
#define DEFINE_EXP(NAME, V, VI, SELECT)                                                   \
    ALWAYS_INLINE V NAME(V x)                                                             \
    {                                                                                     \
        const V lowest = (V){0} - 87.0f;                                                  \
        const VI underflow = x < lowest;                                                  \
        x = SELECT(underflow, lowest, x);                                                 \
        const V t = x * 1.44269504088896341f;                                             \
        const VI n = __builtin_convertvector(t - 0.5f, VI); /* t <= 0: rounds to nearest */ \
        const V f = t - __builtin_convertvector(n, V);                                    \
        V p = f * 1.525273380405984e-05f;                                                 \
        p = p + 1.5403530393381606e-04f;                                                  \
        p = p * f + 1.3333558146428443e-03f;                                              \
        p = p * f + 9.618129107628477e-03f;                                               \
        p = p * f + 5.550410866482158e-02f;                                               \
        p = p * f + 2.402265069591007e-01f;                                               \
        p = p * f + 6.931471805599453e-01f;                                               \
        p = p * f + 1.0f;                                                                 \
        const V scale = (V)((n + 127) << 23);                                             \
        const V zero = {0};                                                               \
        return SELECT(underflow, zero, p * scale);                                        \
    }
DEFINE_EXP(exp16, vf16, vi32, select16)

/* The prefill kernel's vectors are as wide as the registers: 16 floats with AVX-512, else 8.
 * GCC lowers a 16-float vector on 16 AVX2 registers to loads and stores through the stack,
 * and the AVX2 build of this kernel then ran at a few GFLOP/s (a seventh of a 110m pass on a
 * Zen 3 box). With RL lanes, pass 1 folds RL tokens at once and pass 3 keeps OUT_CHUNKS
 * vectors of each output row in registers at a time. */
#ifdef __AVX512F__
#define RL 16
#define OUT_CHUNKS 8
typedef vf16 vr;
typedef vi32 vri;
#define fold_r fold16
#define select_r select16
#define exp_r exp16
#define fma_r(a, b, c) ((a) * (b) + (c)) /* contracted to one FMA (gnu11: -ffp-contract=fast) */
#define fmas_r(s, b, c) ((s) * (b) + (c)) /* the same with a scalar s for a */
#else
#define RL 8
#define OUT_CHUNKS 2 /* 4 rows x 2 vectors of sums + 2 of V + a broadcast, of 16 registers */
typedef float vr __attribute__((vector_size(32), aligned(4)));
typedef int32_t vri __attribute__((vector_size(32)));

ALWAYS_INLINE vr fold8(vr x, vr y)
{
    return __builtin_shufflevector(x, y, 0, 2, 4, 6, 8, 10, 12, 14)
         + __builtin_shufflevector(x, y, 1, 3, 5, 7, 9, 11, 13, 15);
}

/* lane j: the sum of a[j]'s lanes (fold16's three rounds for 8 tokens) */
ALWAYS_INLINE vr fold_r(const vr *a)
{
    vr b[4], c[2];
    for (int i = 0; i < 4; i++)
        b[i] = fold8(a[2 * i], a[2 * i + 1]);
    for (int i = 0; i < 2; i++)
        c[i] = fold8(b[2 * i], b[2 * i + 1]);
    return fold8(c[0], c[1]);
}

ALWAYS_INLINE vr select_r(vri mask, vr a, vr b)
{
    return (vr)(((vri)a & mask) | ((vri)b & ~mask));
}
DEFINE_EXP(exp_r, vr, vri, select_r)

/* a * b + c in one rounding. GCC left some of pass 3's multiply-adds uncontracted in this
 * build, differently for each row of a group, so a row's bits came to depend on its chunk. */
ALWAYS_INLINE vr fma_r(vr a, vr b, vr c)
{
#if defined(__FMA__)
    return (vr)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
#else
    vr out;
    for (int i = 0; i < RL; i++)
        out[i] = fmaf(a[i], b[i], c[i]);
    return out;
#endif
}

/* fma_r with every lane of a = the scalar s */
ALWAYS_INLINE vr fmas_r(float s, vr b, vr c)
{
#if defined(__FMA__)
    return fma_r((vr)_mm256_set1_ps(s), b, c);
#else
    return fma_r((vr){s, s, s, s, s, s, s, s}, b, c);
#endif
}
#endif

/* s[0 .. n) = softmax(s), in place: RL lanes of e^x at a time, the tail one by one. */
static void softmax_in_place(float *s, int n)
{
    float peak = -INFINITY;
    for (int t = 0; t < n; t++)
        peak = s[t] > peak ? s[t] : peak;
    float total = 0.0f;
    int t = 0;
    for (; t + RL <= n; t += RL) {
        const vr e = exp_r(*(vr *)(s + t) - peak);
        *(vr *)(s + t) = e;
        for (int i = 0; i < RL; i++)
            total += e[i];
    }
    for (; t < n; t++) {
        s[t] = expf(s[t] - peak);
        total += s[t];
    }
    const float inv = 1.0f / total;
    for (t = 0; t < n; t++)
        s[t] *= inv;
}

/* The cache lines of one K or V row into L2: the same row of the block read next, one block
 * ahead. Blocks lie anywhere in the pool, so the hardware's stream prefetcher, which follows
 * addresses within a page, starts cold at every block; this keeps the stream going across them
 * (decode attention of a 110m pass on a Sapphire Rapids box: see docs/engine-performance.md). */
ALWAYS_INLINE void prefetch_row(const char *row, size_t row_bytes)
{
    for (size_t off = 0; off < row_bytes; off += 64)
        __builtin_prefetch(row + off, 0, 2);
}

/* Attention of one sequence's query heads [head_begin*group, head_end*group) over its
 * `ctx_len` cached tokens. Scratch: `scores` holds width * ctx_len floats and `partial`
 * width * LANES vectors (width = query heads in the item). head_dim is a multiple of LANES;
 * 64 and 128 reach here as constants.
 *
 * Both passes walk a block in memory order (token, then head), so the cache lines stream
 * in sequence. Pass 1 leaves each (head, token) product as a 16-lane partial and folds sixteen
 * tokens' partials at once (one horizontal reduction per 16 tokens instead of per token);
 * pass 3 accumulates into the output rows, which stay in L1. */
ALWAYS_INLINE void attend_item(
    const float *query, const void *k_cache, const void *v_cache, const int32_t *table,
    int ctx_len, float *out, int num_heads, int num_kv_heads, const int head_dim, int block_size,
    float scale, const int kv_dtype, int head_begin, int head_end, float *scores, vf16 *partial,
    const _Float16 *k_scale, const _Float16 *v_scale, int skip)
{
    const int group = num_heads / num_kv_heads;
    const int width = (head_end - head_begin) * group;
    const int chunks = head_dim / LANES;
    const int quant = kv_dtype == KV_INT8 || kv_dtype == KV_INT4;
    const int per_row = kv_dtype == KV_INT4 ? 2 : 1; /* scale values per (token, head) */
    const size_t row_bytes = kv_dtype == KV_F32 ? 4 * (size_t)head_dim
                           : kv_dtype == KV_INT8 ? (size_t)head_dim
                           : kv_dtype == KV_INT4 ? (size_t)head_dim / 2 : 2 * (size_t)head_dim;
    const size_t block_bytes = (size_t)block_size * num_kv_heads * row_bytes;
    const float *q0 = query + (int64_t)head_begin * group * head_dim;
    float *o0 = out + (int64_t)head_begin * group * head_dim;
    const int num_blocks = (ctx_len + block_size - 1) / block_size;
    /* 4-bit rows add min * sum(q) to each dot product: spread over the 16 lanes that fold into it. */
    float qsum[width];
    for (int w = 0; w < width; w++) {
        qsum[w] = 0.0f;
        for (int d = 0; kv_dtype == KV_INT4 && d < head_dim; d++)
            qsum[w] += q0[(int64_t)w * head_dim + d];
        qsum[w] *= 1.0f / LANES;
    }

    /* pass 1: scores[w * ctx_len + t] = scale * q_w . k_t */
    for (int b = 0; b < num_blocks; b++) {
        const char *block = (const char *)k_cache + (size_t)table[b] * block_bytes;
        /* what comes next (the V pass's first block after the last K block) at the same offsets */
        const ptrdiff_t ahead = (b + 1 < num_blocks ? (const char *)k_cache + (size_t)table[b + 1] * block_bytes
                                                    : (const char *)v_cache + (size_t)table[0] * block_bytes) - block;
        const int n = ctx_len - b * block_size < block_size ? ctx_len - b * block_size : block_size;
        for (int j0 = 0; j0 < n; j0 += LANES) {
            const int m = n - j0 < LANES ? n - j0 : LANES;
            for (int j = 0; j < m; j++) {
                const size_t slot = (size_t)table[b] * block_size + j0 + j;
                const char *row = block + ((size_t)(j0 + j) * num_kv_heads + head_begin) * row_bytes;
                for (int h = 0; h < head_end - head_begin; h++, row += row_bytes) {
                    prefetch_row(row + ahead, row_bytes);
                    const _Float16 *rs = quant ? k_scale + (slot * num_kv_heads + head_begin + h) * per_row : 0;
                    for (int g = 0; g < group; g++) {
                        const float *q = q0 + (int64_t)(h * group + g) * head_dim;
                        vf16 acc = *(const vf16 *)q * load16(row, 0, kv_dtype);
                        for (int c = 1; c < chunks; c++)
                            acc += *(const vf16 *)(q + c * LANES) * load16(row, c * LANES, kv_dtype);
                        if (kv_dtype == KV_INT8)
                            acc *= (float)rs[0];
                        else if (kv_dtype == KV_INT4)
                            acc = acc * (float)rs[0] + (float)rs[1] * qsum[h * group + g];
                        partial[(h * group + g) * LANES + j] = acc;
                    }
                }
            }
            for (int w = 0; w < width; w++) {
                vf16 *acc = partial + w * LANES;
                for (int j = m; j < LANES; j++)
                    acc[j] = (vf16){0};
                const vf16 dots = fold16(acc) * scale;
                float *dst = scores + (int64_t)w * ctx_len + b * block_size + j0;
                if (m == LANES)
                    *(vf16 *)dst = dots;
                else
                    for (int j = 0; j < m; j++)
                        dst[j] = dots[j];
            }
        }
    }
    /* pass 2: softmax per query head, in place; the first `skip` tokens (before a sliding
     * window, in its first block) weigh 0 */
    for (int w = 0; w < width; w++) {
        memset(scores + (int64_t)w * ctx_len, 0, sizeof(float) * skip);
        softmax_in_place(scores + (int64_t)w * ctx_len + skip, ctx_len - skip);
        memset(o0 + (int64_t)w * head_dim, 0, sizeof(float) * head_dim);
    }
    /* pass 3: out_w = sum_t p_w,t * v_t */
    for (int b = 0; b < num_blocks; b++) {
        const char *block = (const char *)v_cache + (size_t)table[b] * block_bytes;
        const ptrdiff_t ahead = b + 1 < num_blocks ? (const char *)v_cache + (size_t)table[b + 1] * block_bytes - block : 0;
        const int n = ctx_len - b * block_size < block_size ? ctx_len - b * block_size : block_size;
        for (int j = 0; j < n; j++) {
            const size_t slot = (size_t)table[b] * block_size + j;
            const char *row = block + ((size_t)j * num_kv_heads + head_begin) * row_bytes;
            const int t = b * block_size + j;
            for (int h = 0; h < head_end - head_begin; h++, row += row_bytes) {
                if (ahead)
                    prefetch_row(row + ahead, row_bytes);
                const _Float16 *rs = quant ? v_scale + (slot * num_kv_heads + head_begin + h) * per_row : 0;
                for (int g = 0; g < group; g++) {
                    const int w = h * group + g;
                    float p = scores[(int64_t)w * ctx_len + t];
                    vf16 *o = (vf16 *)(o0 + (int64_t)w * head_dim);
                    const float shift = kv_dtype == KV_INT4 ? p * (float)rs[1] : 0.0f;
                    if (quant)
                        p *= (float)rs[0];
                    for (int c = 0; c < chunks; c++)
                        o[c] += p * load16(row, c * LANES, kv_dtype) + shift;
                }
            }
        }
    }
}

#if RL != LANES
/* attend_item for a float32 cache in vectors as wide as the registers (an AVX2 build: see RL):
 * the same passes, RL tokens folded at once. */
ALWAYS_INLINE void attend_item_f32(
    const float *query, const float *k_cache, const float *v_cache, const int32_t *table, int ctx_len, float *out,
    int num_heads, int num_kv_heads, const int head_dim, int block_size, float scale, int head_begin, int head_end,
    float *scores, vr *partial, int skip)
{
    const int group = num_heads / num_kv_heads;
    const int width = (head_end - head_begin) * group;
    const int chunks = head_dim / RL;
    const size_t row_floats = (size_t)head_dim, block_floats = (size_t)block_size * num_kv_heads * head_dim;
    const float *q0 = query + (int64_t)head_begin * group * head_dim;
    float *o0 = out + (int64_t)head_begin * group * head_dim;
    const int num_blocks = (ctx_len + block_size - 1) / block_size;

    /* pass 1: scores[w * ctx_len + t] = scale * q_w . k_t */
    for (int b = 0; b < num_blocks; b++) {
        const float *block = k_cache + (size_t)table[b] * block_floats;
        const ptrdiff_t ahead = ((b + 1 < num_blocks ? k_cache + (size_t)table[b + 1] * block_floats
                                                     : v_cache + (size_t)table[0] * block_floats) - block) * 4;
        const int n = ctx_len - b * block_size < block_size ? ctx_len - b * block_size : block_size;
        for (int j0 = 0; j0 < n; j0 += RL) {
            const int m = n - j0 < RL ? n - j0 : RL;
            for (int j = 0; j < m; j++) {
                const float *row = block + ((size_t)(j0 + j) * num_kv_heads + head_begin) * row_floats;
                for (int h = 0; h < head_end - head_begin; h++, row += row_floats) {
                    prefetch_row((const char *)row + ahead, 4 * row_floats);
                    for (int g = 0; g < group; g++) {
                        const float *q = q0 + (int64_t)(h * group + g) * head_dim;
                        vr acc = *(const vr *)q * *(const vr *)row;
                        for (int c = 1; c < chunks; c++)
                            acc = fma_r(*(const vr *)(q + c * RL), *(const vr *)(row + c * RL), acc);
                        partial[(h * group + g) * RL + j] = acc;
                    }
                }
            }
            for (int w = 0; w < width; w++) {
                vr *acc = partial + w * RL;
                for (int j = m; j < RL; j++)
                    acc[j] = (vr){0};
                const vr dots = fold_r(acc) * scale;
                float *dst = scores + (int64_t)w * ctx_len + b * block_size + j0;
                if (m == RL)
                    *(vr *)dst = dots;
                else
                    for (int j = 0; j < m; j++)
                        dst[j] = dots[j];
            }
        }
    }
    /* pass 2: softmax per query head, in place; the first `skip` tokens (before a sliding
     * window, in its first block) weigh 0 */
    for (int w = 0; w < width; w++) {
        memset(scores + (int64_t)w * ctx_len, 0, sizeof(float) * skip);
        softmax_in_place(scores + (int64_t)w * ctx_len + skip, ctx_len - skip);
        memset(o0 + (int64_t)w * head_dim, 0, sizeof(float) * head_dim);
    }
    /* pass 3: out_w = sum_t p_w,t * v_t */
    for (int b = 0; b < num_blocks; b++) {
        const float *block = v_cache + (size_t)table[b] * block_floats;
        const ptrdiff_t ahead = b + 1 < num_blocks ? (v_cache + (size_t)table[b + 1] * block_floats - block) * 4 : 0;
        const int n = ctx_len - b * block_size < block_size ? ctx_len - b * block_size : block_size;
        for (int j = 0; j < n; j++) {
            const float *row = block + ((size_t)j * num_kv_heads + head_begin) * row_floats;
            const int t = b * block_size + j;
            for (int h = 0; h < head_end - head_begin; h++, row += row_floats) {
                if (ahead)
                    prefetch_row((const char *)row + ahead, 4 * row_floats);
                for (int g = 0; g < group; g++) {
                    const int w = h * group + g;
                    const float p = scores[(int64_t)w * ctx_len + t];
                    vr *o = (vr *)(o0 + (int64_t)w * head_dim);
                    for (int c = 0; c < chunks; c++)
                        o[c] = fmas_r(p, *(const vr *)(row + c * RL), o[c]);
                }
            }
        }
    }
}
#endif

static void attend_item_any(
    const float *query, const void *k_cache, const void *v_cache, const int32_t *table,
    int ctx_len, float *out, int num_heads, int num_kv_heads, int head_dim, int block_size,
    float scale, int kv_dtype, int head_begin, int head_end, float *scores, vf16 *partial,
    const _Float16 *k_scale, const _Float16 *v_scale, int skip)
{
#define ATTEND(D, T) attend_item(query, k_cache, v_cache, table, ctx_len, out, num_heads, num_kv_heads, \
                                 D, block_size, scale, T, head_begin, head_end, scores, partial, k_scale, v_scale, \
                                 skip)
#define BY_DIM(T)              \
    do {                       \
        if (head_dim == 64)    \
            ATTEND(64, T);     \
        else if (head_dim == 128) \
            ATTEND(128, T);    \
        else                   \
            ATTEND(head_dim, T); \
    } while (0)
    switch (kv_dtype) {
    case KV_F32:
#if RL != LANES
#define ATTEND_F32(D) attend_item_f32(query, k_cache, v_cache, table, ctx_len, out, num_heads, num_kv_heads, D, \
                                      block_size, scale, head_begin, head_end, scores, (vr *)partial, skip)
        if (head_dim == 64)
            ATTEND_F32(64);
        else if (head_dim == 128)
            ATTEND_F32(128);
        else
            ATTEND_F32(head_dim);
#undef ATTEND_F32
#else
        BY_DIM(KV_F32);
#endif
        break;
    case KV_BF16:
        BY_DIM(KV_BF16);
        break;
    case KV_INT8:
        BY_DIM(KV_INT8);
        break;
    case KV_INT4:
        BY_DIM(KV_INT4);
        break;
    default:
        BY_DIM(KV_F16);
    }
#undef BY_DIM
#undef ATTEND
}

/* query, out: [num_seqs, num_heads, head_dim] float32, contiguous.
 * block_tables: [num_seqs, table_stride] int32; seq_lens: [num_seqs] int32 (>= 1).
 * k_scale, v_scale: float16 scales of a quantized cache (kv_dtype 3, 4), else NULL.
 * Returns 0, or -1 when scratch memory could not be had (out is then undefined). */
int paged_decode_attention_windowed(
    const float *query, const void *k_cache, const void *v_cache, const int32_t *block_tables,
    int64_t table_stride, const int32_t *seq_lens, float *out, int num_seqs, int num_heads,
    int num_kv_heads, int head_dim, int block_size, float scale, int kv_dtype, int num_threads,
    const _Float16 *k_scale, const _Float16 *v_scale, int window);

int paged_decode_attention(
    const float *query, const void *k_cache, const void *v_cache, const int32_t *block_tables,
    int64_t table_stride, const int32_t *seq_lens, float *out, int num_seqs, int num_heads,
    int num_kv_heads, int head_dim, int block_size, float scale, int kv_dtype, int num_threads,
    const _Float16 *k_scale, const _Float16 *v_scale)
{
    return paged_decode_attention_windowed(query, k_cache, v_cache, block_tables, table_stride, seq_lens, out,
                                           num_seqs, num_heads, num_kv_heads, head_dim, block_size, scale, kv_dtype,
                                           num_threads, k_scale, v_scale, 0);
}

/* paged_decode_attention over each sequence's last `window` positions only (0: its whole context;
 * Gemma 3's sliding layers): the table from the block holding the window's first key, whose
 * earlier tokens weigh 0. */
int paged_decode_attention_windowed(
    const float *query, const void *k_cache, const void *v_cache, const int32_t *block_tables,
    int64_t table_stride, const int32_t *seq_lens, float *out, int num_seqs, int num_heads,
    int num_kv_heads, int head_dim, int block_size, float scale, int kv_dtype, int num_threads,
    const _Float16 *k_scale, const _Float16 *v_scale, int window)
{
    int max_len = 0;
    for (int i = 0; i < num_seqs; i++)
        max_len = seq_lens[i] > max_len ? seq_lens[i] : max_len;
    /* Split heads only when sequences alone are too few to feed every thread. */
    int splits = 1;
    while (splits < num_kv_heads && num_seqs * splits < 4 * num_threads)
        splits++;
    const int heads_per_item = (num_kv_heads + splits - 1) / splits;
    splits = (num_kv_heads + heads_per_item - 1) / heads_per_item;
    const int num_items = num_seqs * splits;
    const int group = num_heads / num_kv_heads;
    int failed = 0;
    /* Longest sequences first, so that the threads' last items are short ones and neither waits
     * long for the other at the end (an item's time goes with its context); stable order. */
    int order[num_seqs > 0 ? num_seqs : 1];
    for (int i = 0; i < num_seqs; i++) {
        int j = i;
        for (; j > 0 && seq_lens[order[j - 1]] < seq_lens[i]; j--)
            order[j] = order[j - 1];
        order[j] = i;
    }

#pragma omp parallel num_threads(num_threads) reduction(| : failed)
    {
        const size_t width = (size_t)heads_per_item * group;
        float *scores = malloc(sizeof(float) * width * (max_len > 0 ? max_len : 1));
        vf16 *partial = aligned_alloc(64, sizeof(vf16) * width * LANES);
        /* Every thread meets the worksharing loop, scratch or not (a skipped one deadlocks). */
#pragma omp for schedule(dynamic, 1)
        for (int item = 0; item < num_items; item++) {
            if (!scores || !partial) {
                failed = 1;
                continue;
            }
            const int seq = order[item / splits];
            const int head_begin = (item % splits) * heads_per_item;
            const int head_end = head_begin + heads_per_item < num_kv_heads ? head_begin + heads_per_item : num_kv_heads;
            const int len = seq_lens[seq], lo = window > 0 && len > window ? len - window : 0;
            const int first_block = lo / block_size; /* the window's first key sits in it, lo % block_size in */
            attend_item_any(query + (int64_t)seq * num_heads * head_dim, k_cache, v_cache,
                        block_tables + (int64_t)seq * table_stride + first_block, len - first_block * block_size,
                        out + (int64_t)seq * num_heads * head_dim, num_heads, num_kv_heads,
                        head_dim, block_size, scale, kv_dtype, head_begin, head_end, scores, partial,
                        k_scale, v_scale, lo - first_block * block_size);
        }
        free(scores);
        free(partial);
    }
    return failed ? -1 : 0;
}

/* Causal attention of R (<= 4) consecutive query rows of one head over their sequence's float32
 * cache: row r sits at position first_pos + r and sees tokens 0 .. first_pos + r. Each K and V
 * row is read once for the R rows (from L2: a head's rows of a 512-token context are 256 KB).
 * Pass 1 scores sixteen tokens at a time (q in registers, one fold per sixteen tokens and row),
 * pass 2 the softmax, pass 3 sums the weighted V rows in registers. Tokens past a row's own
 * position score -inf and weigh 0, so a row's result depends only on its position and context,
 * not on the chunk it came in. `scores`: R rows of `stride` floats (>= first_pos + R, rounded up
 * to 16); `rows_at[t]`: where token t's row of this head starts in the cache. With `window` > 0
 * (Gemma 3's sliding layers) row r sees only tokens first_pos + r - window < t: the passes start
 * at the sixteen-token group holding the first row's first key, earlier ones score -inf. */
ALWAYS_INLINE void prefill_group(const float *query, int64_t q_stride, const float *k_cache, const float *v_cache,
                                 int first_pos, float *out, const int head_dim, float scale, float *scores,
                                 int64_t stride, const int64_t *rows_at, const int R, int window)
{
    const int chunks = head_dim / RL, len = first_pos + R; /* the last row's context */
    const int tb = window > 0 && first_pos - window + 1 > 0 ? (first_pos - window + 1) / RL * RL : 0;
    vr qv[4][128 / RL], peak[4];
    for (int r = 0; r < R; r++) {
        peak[r] = (vr){0} - INFINITY;
        for (int c = 0; c < chunks; c++)
            qv[r][c] = *(const vr *)(query + r * q_stride + c * RL);
    }
    for (int t0 = tb; t0 < len; t0 += RL) {
        const int m = len - t0 < RL ? len - t0 : RL;
        vr part[4][RL];
        for (int j = 0; j < RL; j++) {
            const float *k = k_cache + rows_at[t0 + (j < m ? j : 0)];
            vr kv[128 / RL];
            for (int c = 0; c < chunks; c++)
                kv[c] = *(const vr *)(k + c * RL);
            for (int r = 0; r < R; r++) {
                vr acc = qv[r][0] * kv[0];
                for (int c = 1; c < chunks; c++)
                    acc = fma_r(qv[r][c], kv[c], acc);
                part[r][j] = acc;
            }
        }
        for (int r = 0; r < R; r++) {
            vr dots = fold_r(part[r]) * scale;
            for (int j = first_pos + r + 1 - t0; j < RL; j++) /* past row r's position (and len) */
                if (j >= 0)
                    dots[j] = -INFINITY;
            for (int j = 0; window > 0 && j < RL && t0 + j <= first_pos + r - window; j++) /* before its window */
                dots[j] = -INFINITY;
            peak[r] = select_r(dots > peak[r], dots, peak[r]);
            *(vr *)(scores + r * stride + t0) = dots;
        }
    }
    float inv[4];
    for (int r = 0; r < R; r++) {
        float top = peak[r][0];
        for (int i = 1; i < RL; i++)
            top = peak[r][i] > top ? peak[r][i] : top;
        vr total = {0};
        for (int t0 = tb; t0 < len; t0 += RL) {
            const vr e = exp_r(*(vr *)(scores + r * stride + t0) - top);
            *(vr *)(scores + r * stride + t0) = e;
            total += e;
        }
        float sum = 0.0f;
        for (int i = 0; i < RL; i++)
            sum += total[i];
        inv[r] = 1.0f / sum;
    }
    const int cn = chunks < OUT_CHUNKS ? chunks : OUT_CHUNKS; /* divides chunks: head_dim is a multiple of 16 */
    for (int c0 = 0; c0 < chunks; c0 += cn) {
        vr o[4][OUT_CHUNKS];
        for (int r = 0; r < R; r++)
            for (int c = 0; c < cn; c++)
                o[r][c] = (vr){0};
        for (int t = tb; t < len; t++) {
            const float *v = v_cache + rows_at[t] + c0 * RL;
            vr vv[OUT_CHUNKS];
            for (int c = 0; c < cn; c++)
                vv[c] = *(const vr *)(v + c * RL);
            for (int r = 0; r < R; r++) {
                const float p = scores[r * stride + t];
                for (int c = 0; c < cn; c++)
                    o[r][c] = fmas_r(p, vv[c], o[r][c]);
            }
        }
        for (int r = 0; r < R; r++)
            for (int c = 0; c < cn; c++)
                *(vr *)(out + r * q_stride + (c0 + c) * RL) = o[r][c] * inv[r];
    }
}

/* `rows` query rows of one head, four at a time (see prefill_group). */
ALWAYS_INLINE void prefill_rows(const float *query, int64_t q_stride, const float *k_cache, const float *v_cache,
                                const int32_t *table, int first_pos, int rows, float *out, int kv_head,
                                int num_kv_heads, const int head_dim, int block_size, float scale, float *scores,
                                int64_t stride, int64_t *rows_at, int window)
{
    for (int t = 0; t < first_pos + rows; t++) /* one division a token */
        rows_at[t] = (((int64_t)table[t / block_size] * block_size + t % block_size) * num_kv_heads + kv_head) * head_dim;
    int r = 0;
    for (; r + 4 <= rows; r += 4)
        prefill_group(query + r * q_stride, q_stride, k_cache, v_cache, first_pos + r, out + r * q_stride, head_dim,
                      scale, scores, stride, rows_at, 4, window);
    const float *q = query + r * q_stride;
    float *o = out + r * q_stride;
    if (rows - r == 3)
        prefill_group(q, q_stride, k_cache, v_cache, first_pos + r, o, head_dim, scale, scores, stride, rows_at, 3,
                      window);
    else if (rows - r == 2)
        prefill_group(q, q_stride, k_cache, v_cache, first_pos + r, o, head_dim, scale, scores, stride, rows_at, 2,
                      window);
    else if (rows - r == 1)
        prefill_group(q, q_stride, k_cache, v_cache, first_pos + r, o, head_dim, scale, scores, stride, rows_at, 1,
                      window);
}

#define PREFILL_TILE 16 /* query rows of one head per work item */

/* query, out: [num_tokens, num_heads, head_dim] float32; sequence s's new tokens are rows
 * query_start[s] .. query_start[s + 1] and sit at the last positions of its seq_lens[s]
 * context, whose K/V (the new tokens' too) are already in the float32 cache. head_dim a
 * multiple of 16, at most 128. Returns 0, or -1 when scratch memory could not be had. */
int paged_prefill_attention_windowed(const float *query, const float *k_cache, const float *v_cache,
                                     const int32_t *block_tables, int64_t table_stride, const int32_t *query_start,
                                     const int32_t *seq_lens, float *out, int num_seqs, int num_heads,
                                     int num_kv_heads, int head_dim, int block_size, float scale, int num_threads,
                                     int window);

int paged_prefill_attention(const float *query, const float *k_cache, const float *v_cache,
                            const int32_t *block_tables, int64_t table_stride, const int32_t *query_start,
                            const int32_t *seq_lens, float *out, int num_seqs, int num_heads, int num_kv_heads,
                            int head_dim, int block_size, float scale, int num_threads)
{
    return paged_prefill_attention_windowed(query, k_cache, v_cache, block_tables, table_stride, query_start,
                                            seq_lens, out, num_seqs, num_heads, num_kv_heads, head_dim, block_size,
                                            scale, num_threads, 0);
}

/* paged_prefill_attention where each query sees only its last `window` positions (0: all). */
int paged_prefill_attention_windowed(const float *query, const float *k_cache, const float *v_cache,
                                     const int32_t *block_tables, int64_t table_stride, const int32_t *query_start,
                                     const int32_t *seq_lens, float *out, int num_seqs, int num_heads,
                                     int num_kv_heads, int head_dim, int block_size, float scale, int num_threads,
                                     int window)
{
    int tiles = 0, max_len = 1;
    for (int s = 0; s < num_seqs; s++) {
        tiles += (query_start[s + 1] - query_start[s] + PREFILL_TILE - 1) / PREFILL_TILE;
        max_len = seq_lens[s] > max_len ? seq_lens[s] : max_len;
    }
    const int64_t num_items = (int64_t)tiles * num_heads, q_stride = (int64_t)num_heads * head_dim;
    const int group = num_heads / num_kv_heads;
    int failed = 0;
#pragma omp parallel num_threads(num_threads) reduction(| : failed)
    {
        const int64_t stride = ((int64_t)max_len + LANES - 1) / LANES * LANES;
        float *scores = aligned_alloc(64, sizeof(float) * 4 * (size_t)stride);
        int64_t *rows_at = malloc(sizeof(int64_t) * (size_t)max_len);
        /* Every thread meets the worksharing loop, scratch or not (a skipped one deadlocks). */
#pragma omp for schedule(dynamic, 1)
        for (int64_t item = 0; item < num_items; item++) {
            if (!scores || !rows_at) {
                failed = 1;
                continue;
            }
            const int head = (int)(item % num_heads);
            int tile = (int)(item / num_heads), s = 0;
            for (;; s++) { /* the sequence this tile belongs to */
                const int n = (query_start[s + 1] - query_start[s] + PREFILL_TILE - 1) / PREFILL_TILE;
                if (tile < n)
                    break;
                tile -= n;
            }
            const int q_len = query_start[s + 1] - query_start[s], r0 = tile * PREFILL_TILE;
            const int rows = q_len - r0 < PREFILL_TILE ? q_len - r0 : PREFILL_TILE;
            const int64_t first = (int64_t)query_start[s] + r0;
            const float *q = query + first * q_stride + (int64_t)head * head_dim;
            float *o = out + first * q_stride + (int64_t)head * head_dim;
            const int32_t *table = block_tables + (int64_t)s * table_stride;
            const int first_pos = seq_lens[s] - q_len + r0;
            if (head_dim == 64)
                prefill_rows(q, q_stride, k_cache, v_cache, table, first_pos, rows, o, head / group, num_kv_heads, 64,
                             block_size, scale, scores, stride, rows_at, window);
            else
                prefill_rows(q, q_stride, k_cache, v_cache, table, first_pos, rows, o, head / group, num_kv_heads,
                             head_dim, block_size, scale, scores, stride, rows_at, window);
        }
        free(scores);
        free(rows_at);
    }
    return failed ? -1 : 0;
}
