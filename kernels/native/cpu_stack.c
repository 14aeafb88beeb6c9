/* Every decoder layer of one engine step in one native call, for a float32 Llama-family model
 * whose linears are panel linears (cpu_gemm.c) over a float32 paged KV cache: from the
 * embedded rows to the final RMSNorm.
 *
 * Built at first use by kernels/native/build.py (cc -O3 -march=native -fopenmp) and called
 * through ctypes (kernels/programs/layer_stack.py). Why: the per-op path makes about ten calls a layer
 * (norms, linears, RoPE with the KV write, attention), each through nn.Module dispatch, a torch
 * allocation and ctypes; after a linear has streamed megabytes of weights through the caches,
 * that Python and dispatch code runs cold, at 50-150 us a call (measured on a 2-core Zen 4 VM:
 * an RMSNorm of 60 rows took 171 us right after a linear, 14 us in a loop). A step of the
 * 110M benchmark model ran 6% faster end to end in one call (paired replay of a whole
 * workload's steps, identical tokens).
 *
 * Nothing here computes: it sequences the kernels of cpu_fused.c, cpu_gemm.c and
 * cpu_attention.c, reached through pointers the caller fills in, so every value has the bits
 * of the per-op path (backends/local/model.py), which stays the reference for every other case.
 */

#include "fg_common.h"

FG_EXPORT_CONSTANTS

/* One layer: fg_layer (fg_common.h), its linears panel linears (kernels/layers/panel_linear.py). */
typedef struct {
    int num_layers, hidden, heads, kv_heads, head_dim, inter, block_size;
    int kb_hidden, kb_heads, kb_inter; /* each linear's oneDNN block (cpu_gemm.c), by its input width */
    float eps, scale;
    const fg_layer *layers;
    const float *final_norm;
    rms_norm_fn rms_norm;
    rope_fn rope_write_kv;
    decode_fn decode_attention;
    prefill_fn prefill_attention;
    linear_fn linear;
    swiglu_fn linear_swiglu;
} stack_model;

/* One step's rows: the first `num_decodes` run as decode rows (cpu_attention.c's decode kernel,
 * one query token each), the rest are the prefill chunks of `num_prefills` sequences. */
typedef struct {
    int64_t tokens;
    int num_decodes, num_prefills;
    float *h;             /* [T, hidden] the embedded rows; left as the residual stream */
    float *out;           /* [T, hidden] the result: after the final norm */
    const float *cos_sin; /* [T, 2, head_dim] each row's RoPE */
    const int64_t *slots; /* [T] each row's cache slot */
    const int32_t *decode_tables, *decode_lens;
    int64_t decode_stride;
    const int32_t *prefill_tables, *prefill_starts, *prefill_lens;
    int64_t prefill_stride;
    /* scratch: x, pending [T, hidden]; qkv [T, (H + 2 Hkv) D]; q, att [T, H D]; act [T, inter] */
    float *x, *qkv, *q, *att, *act, *pending;
} stack_step;

/* The sizes of the structs kernels/native/abi.py mirrors, checked when it loads this library. */
size_t fg_sizeof_stack_layer(void) { return sizeof(fg_layer); }
size_t fg_sizeof_stack_model(void) { return sizeof(stack_model); }
size_t fg_sizeof_stack_step(void) { return sizeof(stack_step); }

/* Returns 0, or -1 when an attention kernel found no scratch memory (out is then undefined). */
int stack_forward(const stack_model *m, const stack_step *s, int num_threads)
{
    const int64_t T = s->tokens, nd = s->num_decodes;
    const int H = m->heads, Hkv = m->kv_heads, D = m->head_dim, hidden = m->hidden;
    const int qkv_width = (H + 2 * Hkv) * D, q_width = H * D;
    for (int l = 0; l < m->num_layers; l++) {
        const fg_layer *L = m->layers + l;
        /* the previous layer's MLP output joins the residual stream inside this norm */
        if (l == 0)
            m->rms_norm(s->h, 0, L->input_norm, s->x, T, hidden, m->eps, num_threads);
        else
            m->rms_norm(s->pending, s->h, L->input_norm, s->x, T, hidden, m->eps, num_threads);
        m->linear(s->x, T, hidden, L->qkv, qkv_width, L->qkv_bias, s->qkv, m->kb_hidden, num_threads);
        m->rope_write_kv(s->qkv, s->cos_sin, s->slots, s->q, L->k_cache, L->v_cache, T, H, Hkv, D, num_threads);
        if (nd > 0 && m->decode_attention(s->q, L->k_cache, L->v_cache, s->decode_tables, s->decode_stride,
                                          s->decode_lens, s->att, (int)nd, H, Hkv, D, m->block_size, m->scale,
                                          0 /* float32 */, num_threads, 0, 0))
            return -1;
        if (T > nd && m->prefill_attention(s->q + nd * q_width, L->k_cache, L->v_cache, s->prefill_tables,
                                           s->prefill_stride, s->prefill_starts, s->prefill_lens,
                                           s->att + nd * q_width, s->num_prefills, H, Hkv, D, m->block_size,
                                           m->scale, num_threads))
            return -1;
        m->linear(s->att, T, q_width, L->o, hidden, L->o_bias, s->pending, m->kb_heads, num_threads);
        m->rms_norm(s->pending, s->h, L->post_norm, s->x, T, hidden, m->eps, num_threads);
        if (m->linear_swiglu(s->x, T, hidden, L->gate_up, 2 * m->inter, L->gate_up_bias, s->act, m->kb_hidden,
                             num_threads))
            return -1;
        m->linear(s->act, T, m->inter, L->down, hidden, L->down_bias, s->pending, m->kb_inter, num_threads);
    }
    if (m->num_layers == 0)
        m->rms_norm(s->h, 0, m->final_norm, s->out, T, hidden, m->eps, num_threads);
    else
        m->rms_norm(s->pending, s->h, m->final_norm, s->out, T, hidden, m->eps, num_threads);
    return 0;
}
