/* Fused elementwise kernels for the CPU decoder: RMSNorm (with the residual add folded in),
 * Qwen3's per-head q/k RMSNorm, SwiGLU (silu(gate) * up) and a row-wise argmax for greedy sampling.
 *
 * Built at first use by kernels/native/build.py (cc -O3 -march=native -fopenmp), called through
 * ctypes on float32 contiguous tensors. Why: torch's CPU rms_norm runs as five separate ops
 * (pow, mean, add, rsqrt, mul: ~17x an add's time at [512, 768]), silu and the multiply are two
 * passes with a Sleef exp, and argmax over a [64, 32000] logits batch takes ~5 ms on one core.
 * Each kernel here is one pass over its rows (two for a norm row, which stays in L1).
 * Rows are split over `num_threads` OpenMP threads (torch's own runtime) when there is enough
 * work to pay for a parallel region.
 */

#include <math.h>
#include <stdint.h>

#include "fg_common.h"

FG_EXPORT_CONSTANTS

#define PARALLEL_MIN_ELEMS 32768 /* below this a parallel region costs more than it saves */

/* Unaligned 16-lane loads and stores (the typedef's aligned(4) makes plain dereferences legal;
 * a memcpy here would bounce through the stack and stall store forwarding). */
ALWAYS_INLINE vf16 load16(const float *p) { return *(const vf16 *)p; }

ALWAYS_INLINE void store16(float *p, vf16 v) { *(vf16 *)p = v; }

ALWAYS_INLINE vf16 select16(vi32 mask, vf16 a, vf16 b)
{
    return (vf16)(((vi32)a & mask) | ((vi32)b & ~mask));
}

/* e^x for any float x, clamped to [-87, 88]: 2^(x log2 e) split into a rounded integer power n
 * (put into the exponent bits) and a degree-7 polynomial of the fraction f in [-0.5, 0.5]
 * (relative error below 2e-7, about torch's Sleef exp). */
ALWAYS_INLINE vf16 exp16(vf16 x)
{
    const vf16 lo = (vf16){0} - 87.0f, hi = (vf16){0} + 88.0f;
    x = select16(x < lo, lo, x);
    x = select16(x > hi, hi, x);
    const vf16 t = x * 1.44269504088896341f;
    const vf16 half = select16(t < 0, (vf16){0} - 0.5f, (vf16){0} + 0.5f);
    const vi32 n = __builtin_convertvector(t + half, vi32); /* truncation of t +- 0.5: round */
    const vf16 f = t - __builtin_convertvector(n, vf16);
    vf16 p = f * 1.525273380405984e-05f;
    p = p + 1.5403530393381606e-04f;
    p = p * f + 1.3333558146428443e-03f;
    p = p * f + 9.618129107628477e-03f;
    p = p * f + 5.550410866482158e-02f;
    p = p * f + 2.402265069591007e-01f;
    p = p * f + 6.931471805599453e-01f;
    p = p * f + 1.0f;
    return p * (vf16)((n + 127) << 23);
}

static float norm_row(const float *x, const float *w, float *out, int n, float eps)
{
    vf16 acc = {0};
    int i = 0;
    for (; i + LANES <= n; i += LANES) {
        const vf16 v = load16(x + i);
        acc += v * v;
    }
    float sum = 0.0f;
    for (int j = 0; j < LANES; j++)
        sum += acc[j];
    for (; i < n; i++)
        sum += x[i] * x[i];
    const float inv = 1.0f / sqrtf(sum / (float)n + eps);
    for (i = 0; i + LANES <= n; i += LANES)
        store16(out + i, load16(x + i) * inv * load16(w + i));
    for (; i < n; i++)
        out[i] = x[i] * inv * w[i];
    return inv;
}

/* out[r] = x[r] / rms(x[r]) * weight. With `residual` (not NULL): residual[r] += x[r] first,
 * and the sum is what gets normalised (the residual stream keeps the sum). x: [rows, n]. */
void rms_norm(const float *x, float *residual, const float *weight, float *out, int64_t rows, int n,
              float eps, int num_threads)
{
#pragma omp parallel for num_threads(num_threads) schedule(static) if (rows * n >= PARALLEL_MIN_ELEMS)
    for (int64_t r = 0; r < rows; r++) {
        const float *src = x + r * n;
        if (residual) {
            float *h = residual + r * n;
            int i = 0;
            for (; i + LANES <= n; i += LANES)
                store16(h + i, load16(h + i) + load16(src + i));
            for (; i < n; i++)
                h[i] += src[i];
            src = h;
        }
        norm_row(src, weight, out + r * n, n, eps);
    }
}

/* Qwen3's per-head RMSNorm of a fused projection's rows, in place: each of the `heads` query
 * heads by q_weight, each of the `kv_heads` key heads by k_weight (the value heads untouched).
 * qkv: [tokens, (heads + 2 kv_heads) * head_dim]; weights [head_dim]. Each head row is
 * norm_row's, the bits of rms_norm above on a [tokens * heads, head_dim] view. */
void qk_norm(float *qkv, const float *q_weight, const float *k_weight, int64_t tokens, int heads, int kv_heads,
             int head_dim, float eps, int num_threads)
{
    const int64_t row = (int64_t)(heads + 2 * kv_heads) * head_dim;
#pragma omp parallel for num_threads(num_threads) schedule(static) if (tokens * row >= PARALLEL_MIN_ELEMS)
    for (int64_t t = 0; t < tokens; t++) {
        float *x = qkv + t * row;
        for (int h = 0; h < heads + kv_heads; h++) {
            float *head = x + (int64_t)h * head_dim;
            norm_row(head, h < heads ? q_weight : k_weight, head, head_dim, eps);
        }
    }
}

/* out[r, i] = silu(gate_up[r, i]) * gate_up[r, inter + i]; gate_up: [rows, 2 * inter]. */
void silu_mul(const float *gate_up, float *out, int64_t rows, int inter, int num_threads)
{
#pragma omp parallel for num_threads(num_threads) schedule(static) if (rows * inter >= PARALLEL_MIN_ELEMS)
    for (int64_t r = 0; r < rows; r++) {
        const float *g = gate_up + r * 2 * (int64_t)inter, *u = g + inter;
        float *o = out + r * (int64_t)inter;
        int i = 0;
        for (; i + LANES <= inter; i += LANES) {
            const vf16 x = load16(g + i);
            store16(o + i, x / (1.0f + exp16(-x)) * load16(u + i));
        }
        for (; i < inter; i++)
            o[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    }
}

/* out[r] = the first index of row r's largest value (a NaN counts as largest, as in torch). */
void argmax_rows(const float *x, int64_t *out, int64_t rows, int64_t n, int64_t row_stride, int num_threads)
{
#pragma omp parallel for num_threads(num_threads) schedule(static) if (rows * n >= 4 * PARALLEL_MIN_ELEMS)
    for (int64_t r = 0; r < rows; r++) {
        const float *row = x + r * row_stride;
        vf16 best = (vf16){0} - INFINITY;
        vi32 nan = {0};
        int64_t i = 0;
        for (; i + LANES <= n; i += LANES) {
            const vf16 v = load16(row + i);
            nan |= v != v;
            best = select16(v > best, v, best);
        }
        float peak = -INFINITY;
        int any_nan = 0;
        for (int j = 0; j < LANES; j++) {
            peak = best[j] > peak ? best[j] : peak;
            any_nan |= nan[j];
        }
        for (int64_t k = i; k < n; k++) {
            peak = row[k] > peak ? row[k] : peak;
            any_nan |= row[k] != row[k];
        }
        int64_t found = 0;
        for (int64_t k = 0; k < n; k++)
            if (any_nan ? row[k] != row[k] : row[k] == peak) {
                found = k;
                break;
            }
        out[r] = found;
    }
}

/* One head row of rotary embedding: out[i] = x[i] cos[i] + x[(i + D/2) % D] sin'[i], where sin'
 * holds sin with its first half negated (rotate_half folded in). Rounded as torch's reference
 * (mul, then addcmul: one fused multiply-add of the rolled term onto the rounded product), so
 * the bits are the same; contraction is off so the compiler adds no other fusions (the fmaf
 * loop still vectorises). */
__attribute__((optimize("fp-contract=off"))) static void rope_row(const float *x, const float *c, const float *s,
                                                                  float *out, int half)
{
    const float *lo = x, *hi = x + half;
    for (int i = 0; i < half; i++)
        out[i] = __builtin_fmaf(hi[i], s[i], lo[i] * c[i]);
    for (int i = 0; i < half; i++)
        out[half + i] = __builtin_fmaf(lo[i], s[half + i], hi[i] * c[half + i]);
}

/* Rotary embedding of a step's queries and keys and the KV-cache write, in one pass over the
 * fused projection's rows (instead of a rotation pass, a gather pass and two scatter copies).
 * qkv: [tokens, (heads + 2 kv_heads) * head_dim], q heads then k heads then v heads;
 * cos_sin: [tokens, 2, head_dim] (cos, sin'); slots: [tokens] cache rows (negative: not stored).
 * q_out: [tokens, heads, head_dim] gets the rotated queries; k_cache / v_cache
 * [rows, kv_heads, head_dim] get the rotated keys and the values at each token's slot. */
void rope_write_kv(const float *qkv, const float *cos_sin, const int64_t *slots, float *q_out, float *k_cache,
                   float *v_cache, int64_t tokens, int heads, int kv_heads, int head_dim, int num_threads)
{
    const int64_t row = (int64_t)(heads + 2 * kv_heads) * head_dim, kv_row = (int64_t)kv_heads * head_dim;
#pragma omp parallel for num_threads(num_threads) schedule(static) if (tokens * row >= PARALLEL_MIN_ELEMS)
    for (int64_t t = 0; t < tokens; t++) {
        const float *x = qkv + t * row, *c = cos_sin + t * 2 * head_dim, *s = c + head_dim;
        const int64_t slot = slots[t];
        for (int h = 0; h < heads; h++)
            rope_row(x + (int64_t)h * head_dim, c, s, q_out + (t * heads + h) * head_dim, head_dim / 2);
        if (slot < 0)
            continue;
        for (int h = 0; h < kv_heads; h++)
            rope_row(x + (int64_t)(heads + h) * head_dim, c, s, k_cache + slot * kv_row + (int64_t)h * head_dim,
                     head_dim / 2);
        const float *v = x + (int64_t)(heads + kv_heads) * head_dim;
        float *dst = v_cache + slot * kv_row;
        for (int64_t i = 0; i < kv_row; i++)
            dst[i] = v[i];
    }
}
