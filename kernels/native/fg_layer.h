/* The decoder layers as both whole-model programs run them (cpu_stack.c, cpu_draft.c): the
 * order of the per-op path (backends/local/model/llama.py `DecoderLayer`, `DecoderModel.forward`),
 * so each value gets the bits of the kernels it calls there. What differs between the programs
 * is behind three callbacks: how a linear runs, how the rows attend, how the MLP's gate/up
 * projection becomes silu(gate) * up.
 *
 * A program embeds `fg_layers` as the first member of its own run state, so its callbacks can
 * cast the pointer they get back to that state.
 */

#ifndef FG_LAYER_H
#define FG_LAYER_H

#include "fg_common.h"

/* which of a layer's linears a `linear` call is (FG_GATE_UP: the one behind `gate_up`) */
enum { FG_QKV = 0, FG_O = 1, FG_DOWN = 2, FG_GATE_UP = 3, FG_LINEARS = 4 };

typedef struct fg_layers fg_layers;
struct fg_layers {
    int64_t rows;
    int num_layers, hidden, heads, kv_heads, head_dim, inter, num_threads;
    float eps;
    const fg_layer *layers;
    const float *final_norm;
    rms_norm_fn rms_norm;
    rope_fn rope_write_kv;
    qk_norm_fn qk_norm; /* for layers with q_norm (Qwen3) */
    const float *cos_sin; /* [rows, 2, head_dim] each row's RoPE */
    const int64_t *slots; /* [rows] each row's cache slot */
    /* y[rows, N] = x[rows, K] w + bias, for linear `which` of layer L */
    void (*linear)(const fg_layers *r, const fg_layer *L, int which, const float *x, int K, const float *w, int N,
                   const float *bias, float *y);
    /* out [rows, H D] = the rows' attention of q [rows, H D] over the layer's caches; nonzero: no memory */
    int (*attend)(const fg_layers *r, const fg_layer *L, const float *q, float *out);
    /* act [rows, inter] = silu(x Wgate) * (x Wup); nonzero: no memory */
    int (*gate_up)(const fg_layers *r, const fg_layer *L, const float *x, float *act);
    /* scratch: x, pending [rows, hidden]; qkv [rows, (H + 2 Hkv) D]; q, att [rows, H D]; act [rows, inter] */
    float *x, *qkv, *q, *att, *act, *pending;
};

/* Every layer from the embedded rows h [rows, hidden] (left as the residual stream) to `out`
 * [rows, hidden] after the final norm. Returns 0, or the first nonzero callback result (out is
 * then undefined). */
static inline int fg_layers_forward(const fg_layers *r, float *h, float *out)
{
    const int64_t T = r->rows;
    const int H = r->heads, Hkv = r->kv_heads, D = r->head_dim, hidden = r->hidden, nt = r->num_threads;
    const int qkv_width = (H + 2 * Hkv) * D, q_width = H * D;
    int rc;
    for (int l = 0; l < r->num_layers; l++) {
        const fg_layer *L = r->layers + l;
        /* the previous layer's MLP output joins the residual stream inside this norm */
        if (l == 0)
            r->rms_norm(h, 0, L->input_norm, r->x, T, hidden, r->eps, nt);
        else
            r->rms_norm(r->pending, h, L->input_norm, r->x, T, hidden, r->eps, nt);
        r->linear(r, L, FG_QKV, r->x, hidden, L->qkv, qkv_width, L->qkv_bias, r->qkv);
        if (L->q_norm) /* Qwen3: each q and k head normalised before RoPE */
            r->qk_norm(r->qkv, L->q_norm, L->k_norm, T, H, Hkv, D, r->eps, nt);
        r->rope_write_kv(r->qkv, r->cos_sin, r->slots, r->q, L->k_cache, L->v_cache, T, H, Hkv, D, nt);
        if ((rc = r->attend(r, L, r->q, r->att)))
            return rc;
        r->linear(r, L, FG_O, r->att, q_width, L->o, hidden, L->o_bias, r->pending);
        r->rms_norm(r->pending, h, L->post_norm, r->x, T, hidden, r->eps, nt);
        if ((rc = r->gate_up(r, L, r->x, r->act)))
            return rc;
        r->linear(r, L, FG_DOWN, r->act, r->inter, L->down, hidden, L->down_bias, r->pending);
    }
    if (r->num_layers == 0)
        r->rms_norm(h, 0, r->final_norm, out, T, hidden, r->eps, nt);
    else
        r->rms_norm(r->pending, h, r->final_norm, out, T, hidden, r->eps, nt);
    return 0;
}

#endif
