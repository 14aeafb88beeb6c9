/* What every native CPU kernel shares: the layout constants, the 16-lane vector types, and the
 * types of the kernels that the whole-model programs (cpu_stack.c, cpu_draft.c) call through
 * pointers. Python's mirror of all of it is kernels/native/abi.py, which checks the constants
 * and the struct sizes each library exports (FG_EXPORT_CONSTANTS, fg_sizeof_*) when it loads it.
 *
 * Built into each library by kernels/native/build.py; its text is part of every library's cache
 * key, so a change here rebuilds them all.
 */

#ifndef FG_COMMON_H
#define FG_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* The layout unit: head_dim, a panel linear's and a quantized linear's output width are
 * multiples of it (a 16-lane vector of float32; GCC lowers the vectors below to whatever unit
 * -march=native has: one AVX-512 register, two AVX2 ones, four NEON ones). */
#define LANES 16
/* Output columns per packed weight panel (kernels/layers/panel_linear.py `pack_panels`). */
#define PANEL 64

#define ALWAYS_INLINE static inline __attribute__((always_inline))

typedef float vf16 __attribute__((vector_size(64), aligned(4))); /* aligned(4): unaligned loads and stores */
typedef int32_t vi32 __attribute__((vector_size(64)));

/* Every library exports the constants above, so that Python can check its own copy at load. */
#define FG_EXPORT_CONSTANTS                 \
    int fg_lanes(void) { return LANES; }    \
    int fg_panel(void) { return PANEL; }

/* The per-operation kernels, as the programs reach them (cpu_fused.c, cpu_attention.c, cpu_gemm.c). */
typedef void (*rms_norm_fn)(const float *x, float *residual, const float *weight, float *out, int64_t rows, int n,
                            float eps, int num_threads);
typedef void (*qk_norm_fn)(float *qkv, const float *q_weight, const float *k_weight, int64_t tokens, int heads,
                           int kv_heads, int head_dim, float eps, int num_threads);
typedef void (*silu_mul_fn)(const float *gate_up, float *out, int64_t rows, int inter, int num_threads);
typedef void (*rope_fn)(const float *qkv, const float *cos_sin, const int64_t *slots, float *q_out, float *k_cache,
                        float *v_cache, int64_t tokens, int heads, int kv_heads, int head_dim, int num_threads);
typedef int (*decode_fn)(const float *query, const void *k_cache, const void *v_cache, const int32_t *block_tables,
                         int64_t table_stride, const int32_t *seq_lens, float *out, int num_seqs, int num_heads,
                         int num_kv_heads, int head_dim, int block_size, float scale, int kv_dtype, int num_threads,
                         const void *k_scale, const void *v_scale);
typedef int (*prefill_fn)(const float *query, const float *k_cache, const float *v_cache, const int32_t *block_tables,
                          int64_t table_stride, const int32_t *query_start, const int32_t *seq_lens, float *out,
                          int num_seqs, int num_heads, int num_kv_heads, int head_dim, int block_size, float scale,
                          int num_threads);
typedef void (*linear_fn)(const float *x, int64_t M, int K, const float *panels, int N, const float *bias, float *y,
                          int kb, int num_threads);
typedef int (*swiglu_fn)(const float *x, int64_t M, int K, const float *panels, int N, const float *bias, float *y,
                         int kb, int num_threads);
/* cpu_quant.c's weight-only int8 / int4 linear (kind 0 / 1) */
typedef void (*quant_fn)(const float *x, int64_t x_stride, const void *w, const float *scale, const float *minimum,
                         const float *bias, float *y, int64_t y_stride, int M, int N, int K, int group, int kind,
                         int num_threads);

/* One decoder layer as both programs hold it: norm weights [hidden]; linears packed in panels
 * (cpu_stack.c: kernels/layers/panel_linear.py's, the gate/up one in `swiglu_order`, or a quantized
 * linear's int8 / int4 codes in cpu_quant.c's panels, which cpu_stack.c's `stack_weight` then
 * describes; cpu_draft.c: plain `pack_panels`), biases [N] or NULL; Qwen3's per-head q/k norm weights [head_dim], or NULL
 * for the families without; float32 caches [blocks, block_size, kv_heads, head_dim]. */
typedef struct {
    const float *input_norm, *qkv, *qkv_bias, *o, *o_bias, *post_norm, *gate_up, *gate_up_bias, *down, *down_bias;
    const float *q_norm, *k_norm;
    float *k_cache, *v_cache;
} fg_layer;

#endif
