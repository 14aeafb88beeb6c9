/* Every decoder layer of one engine step in one native call, for a Llama-family model with float32
 * activations whose linears are float32 panel linears (cpu_gemm.c) or weight-only int8 / int4
 * linears (cpu_quant.c), over a float32 paged KV cache: from the embedded rows to the final RMSNorm.
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
 * Nothing here computes: fg_layer.h sequences the kernels of cpu_fused.c, cpu_gemm.c, cpu_quant.c
 * and cpu_attention.c, reached through pointers the caller fills in, so every value has the bits
 * of the per-op path (backends/local/model/llama.py), which stays the reference for every other case.
 * A quantized model gained most: its per-op path paid the Python dispatch per operation that the
 * halved weight bytes were meant to save (issue 39).
 */

#include "fg_layer.h"

FG_EXPORT_CONSTANTS

/* How one linear's weight is held: float32 panels (kernels/layers/panel_linear.py, scale NULL) or
 * cpu_quant.c's codes (kernels/layers/quant_linear.py `pack_for_cpu`): the per-op layer's call. A
 * quantized one may also hold its weights as float32 panels (kernels/layers/quant_panels.py), which
 * steps of `panel_rows` rows or more take, where the kernel plan measured them faster: the same bits. */
typedef struct {
    const float *scale;   /* NULL: float32 panels; else cpu_quant.c's scale */
    const float *minimum; /* int4's minimum, else NULL */
    int kind, group;      /* cpu_quant.c's kind (0 int8, 1 int4) and int4's group size */
    const float *panels;  /* int8's codes / int4's weights as cpu_gemm.c panels, or NULL */
    int64_t panel_rows;   /* the fewest rows that take `panels` */
} stack_weight;

/* cpu_gemm.c's exact_linear_scaled: panels of int8 codes, then scale and bias */
typedef void (*scaled_fn)(const float *x, int64_t M, int K, const float *panels, int N, const float *scale,
                          const float *bias, float *y, int num_threads);

/* One layer: fg_layer (fg_common.h), its linears as `weights` says. */
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
    qk_norm_fn qk_norm;
    /* [num_layers][FG_LINEARS] each linear's weight (FG_QKV, FG_O, FG_DOWN, FG_GATE_UP); NULL: all
     * float32 panels, the gate/up ones with their SwiGLU (`linear_swiglu`) */
    const stack_weight *weights;
    quant_fn quant_linear;
    silu_mul_fn silu_mul; /* after a quantized gate/up projection, as its per-op MLP runs it */
    scaled_fn linear_scaled;
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
    float *gate_up; /* scratch [T, 2 inter] for a quantized gate/up projection; NULL where none is */
} stack_step;

/* The sizes of the structs kernels/native/abi.py mirrors, checked when it loads this library. */
size_t fg_sizeof_stack_layer(void) { return sizeof(fg_layer); }
size_t fg_sizeof_stack_model(void) { return sizeof(stack_model); }
size_t fg_sizeof_stack_step(void) { return sizeof(stack_step); }
size_t fg_sizeof_stack_weight(void) { return sizeof(stack_weight); }

typedef struct {
    fg_layers layers; /* first: the callbacks cast back to this */
    const stack_model *m;
    const stack_step *s;
} stack_run;

/* linear `which` of layer L: its cpu_quant.c codes, or NULL for float32 panels */
static const stack_weight *quantized(const stack_run *run, const fg_layer *L, int which)
{
    const stack_weight *w = run->m->weights;
    if (!w)
        return NULL;
    w += (L - run->m->layers) * FG_LINEARS + which;
    return w->scale ? w : NULL;
}

/* a quantized linear on its float32 panels (this step has enough rows): cpu_quant.c's bits */
static void panel_linear(const stack_model *m, const stack_weight *q, const float *x, int64_t rows, int K, int N,
                         const float *bias, float *y, int num_threads)
{
    if (q->kind == 0)
        m->linear_scaled(x, rows, K, q->panels, N, q->scale, bias, y, num_threads);
    else
        m->linear(x, rows, K, q->panels, N, bias, y, K, num_threads);
}

static void stack_linear(const fg_layers *r, const fg_layer *L, int which, const float *x, int K, const float *w,
                         int N, const float *bias, float *y)
{
    const stack_run *run = (const stack_run *)r;
    const stack_model *m = run->m;
    const stack_weight *q = quantized(run, L, which);
    if (q && q->panels && r->rows >= q->panel_rows) {
        panel_linear(m, q, x, r->rows, K, N, bias, y, r->num_threads);
        return;
    }
    if (q) {
        m->quant_linear(x, K, w, q->scale, q->minimum, bias, y, N, (int)r->rows, N, K, q->group, q->kind,
                        r->num_threads);
        return;
    }
    const int kb = which == FG_QKV ? m->kb_hidden : which == FG_O ? m->kb_heads : m->kb_inter;
    m->linear(x, r->rows, K, w, N, bias, y, kb, r->num_threads);
}

/* the first num_decodes rows on the decode kernel, the prefill chunks after them on the prefill one */
static int stack_attend(const fg_layers *r, const fg_layer *L, const float *q, float *out)
{
    const stack_run *run = (const stack_run *)r;
    const stack_model *m = run->m;
    const stack_step *s = run->s;
    const int64_t T = r->rows, nd = s->num_decodes, q_width = (int64_t)m->heads * m->head_dim;
    if (nd > 0 && m->decode_attention(q, L->k_cache, L->v_cache, s->decode_tables, s->decode_stride, s->decode_lens,
                                      out, (int)nd, m->heads, m->kv_heads, m->head_dim, m->block_size, m->scale,
                                      0 /* float32 */, r->num_threads, 0, 0))
        return -1;
    if (T > nd && m->prefill_attention(q + nd * q_width, L->k_cache, L->v_cache, s->prefill_tables, s->prefill_stride,
                                       s->prefill_starts, s->prefill_lens, out + nd * q_width, s->num_prefills,
                                       m->heads, m->kv_heads, m->head_dim, m->block_size, m->scale, r->num_threads))
        return -1;
    return 0;
}

/* float32 gate/up panels apply their SwiGLU themselves (cpu_gemm.c); quantized ones write
 * [gate | up] to scratch, then silu_mul (cpu_fused.c), as the per-op MLP does */
static int stack_gate_up(const fg_layers *r, const fg_layer *L, const float *x, float *act)
{
    const stack_run *run = (const stack_run *)r;
    const stack_model *m = run->m;
    const stack_weight *q = quantized(run, L, FG_GATE_UP);
    const int width = 2 * m->inter;
    if (q && q->panels && r->rows >= q->panel_rows) {
        panel_linear(m, q, x, r->rows, m->hidden, width, L->gate_up_bias, run->s->gate_up, r->num_threads);
        m->silu_mul(run->s->gate_up, act, r->rows, m->inter, r->num_threads);
        return 0;
    }
    if (q) {
        m->quant_linear(x, m->hidden, L->gate_up, q->scale, q->minimum, L->gate_up_bias, run->s->gate_up, width,
                        (int)r->rows, width, m->hidden, q->group, q->kind, r->num_threads);
        m->silu_mul(run->s->gate_up, act, r->rows, m->inter, r->num_threads);
        return 0;
    }
    return m->linear_swiglu(x, r->rows, m->hidden, L->gate_up, width, L->gate_up_bias, act, m->kb_hidden,
                            r->num_threads)
               ? -1
               : 0;
}

/* Returns 0, or -1 when an attention kernel found no scratch memory (out is then undefined). */
int stack_forward(const stack_model *m, const stack_step *s, int num_threads)
{
    const stack_run run = {
        .layers = {.rows = s->tokens, .num_layers = m->num_layers, .hidden = m->hidden, .heads = m->heads,
                   .kv_heads = m->kv_heads, .head_dim = m->head_dim, .inter = m->inter, .num_threads = num_threads,
                   .eps = m->eps, .layers = m->layers, .final_norm = m->final_norm, .rms_norm = m->rms_norm,
                   .rope_write_kv = m->rope_write_kv, .qk_norm = m->qk_norm, .cos_sin = s->cos_sin,
                   .slots = s->slots, .linear = stack_linear, .attend = stack_attend, .gate_up = stack_gate_up, .x = s->x,
                   .qkv = s->qkv, .q = s->q, .att = s->att, .act = s->act, .pending = s->pending},
        .m = m,
        .s = s,
    };
    return fg_layers_forward(&run.layers, s->h, s->out);
}
