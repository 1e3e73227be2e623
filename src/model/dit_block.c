/* MiniMax-H3 DiT blocks, one code for both precisions (docs/model/dit.md 4.3, 4.6-4.8): the main blocks, the
 * attention and FFN sub-layers, the text stream and their scratch, on activation buffers of the model's dtype m->act
 * through the h3_act_* ops (ops_act.h). fp32 (the reference) runs the fp32-buffer ops unfused; bf16 keeps every
 * activation in bf16 as the reference's bf16 mode stores it, with each residual fused into the norm that reads it;
 * on the CPU those buffers hold exactly the values the fp32-buffer ops round to (tests/test_bf16_ops.c), on CUDA the
 * operands go to the tensor cores as they are. */
#include <math.h>
#include <string.h>

#include "../backend/ops.h"
#include "../backend/ops_act.h"
#include "../core/tuning.h"
#include "dit_internal.h"
#include "dit_ulysses.h"

void dit_free_scratch(h3_backend *be, dit_scratch *s) {
    h3_free(be, s->n), h3_free(be, s->o), h3_free(be, s->q), h3_free(be, s->k), h3_free(be, s->v);
    h3_free(be, s->mid), h3_free(be, s->big), h3_free(be, s->xq), h3_free(be, s->xs);
    memset(s, 0, sizeof *s);
}

int dit_alloc_scratch(dit_model *m, int64_t rows, dit_scratch *s) {
    const dit_config *c = &m->cfg;
    int64_t H = c->hidden_size, I = (int64_t)c->num_attention_heads * c->attention_head_dim, FF = c->ffn_dim;
    int64_t big = 3 * I > 2 * FF ? 3 * I : 2 * FF, mid = I > FF ? I : FF;
    const size_t es = h3_dtype_size(m->act);
    memset(s, 0, sizeof *s);
    s->n = h3_alloc(m->be, (size_t)(rows * H) * es);
    s->o = h3_alloc(m->be, (size_t)(rows * H) * es);
    if (m->act == H3_F32) { /* separate q, k, v; mid only holds the attention output (the FFN works in big) */
        s->q = h3_alloc(m->be, (size_t)(rows * I) * es);
        s->k = h3_alloc(m->be, (size_t)(rows * I) * es);
        s->v = h3_alloc(m->be, (size_t)(rows * I) * es);
        s->mid = h3_alloc(m->be, (size_t)(rows * I) * es);
        s->big = h3_alloc(m->be, (size_t)(rows * big) * es);
        if (!s->n || !s->o || !s->q || !s->k || !s->v || !s->mid || !s->big) {
            dit_free_scratch(m->be, s);
            return -1;
        }
        return 0;
    }
    s->big = h3_alloc(m->be, (size_t)(rows * big) * es);
    s->mid = h3_alloc(m->be, (size_t)(rows * mid) * es);
    const int quant = m->fp8 || m->int8_profile;
    if (quant) {
        int64_t widest = H > mid ? H : mid, groups = m->int8_fc2_groups ? FF / 1024 + 1 : 1;
        s->xq = h3_alloc(m->be, (size_t)(rows * widest));
        s->xs = h3_alloc(m->be, (size_t)(rows * groups) * sizeof(float));
    }
    if (!s->n || !s->o || !s->big || !s->mid || (quant && (!s->xq || !s->xs))) {
        dit_free_scratch(m->be, s);
        return -1;
    }
    return 0;
}

/* y = x W^T: through the FP8 copy when --quant fp8 made one, or the INT8 one (docs/int8.md) (the input rows
 * quantized into the scratch first, unless `quantized` says they already are), else the GEMM of the activation dtype
 * (fp32: contiguous rows). */
static void linear(dit_model *m, dit_scratch *s, void *y, int64_t ldy, const void *x, int64_t ldx, int64_t rows,
                   const h3_tensor *w, const h3_fp8_linear *q, const h3_int8_linear *i8, int quantized) {
    if (i8->q) {
        if (!quantized) h3_int8_quant_rows(m->be, (int8_t *)s->xq, s->xs, x, rows, i8->K, ldx, i8->group);
        h3_int8_matmul(m->be, y, ldy, (const int8_t *)s->xq, s->xs, rows, i8, NULL);
    } else if (q->q) {
        if (!quantized) h3_fp8_quant_rows(m->be, s->xq, s->xs, x, rows, q->K, ldx);
        h3_fp8_matmul(m->be, y, ldy, s->xq, s->xs, rows, q);
    } else {
        h3_act_matmul(m->be, m->act, y, ldy, x, ldx, rows, w, NULL);
    }
}

/* The codes a quantized linear reads (s->xq / s->xs) as the h3_rowq its input's producer fills (docs/fast.md "Fused
 * quantization"), or NULL: the linear is bf16, or H3_FUSED_QUANT=0 (linear then quantizes in a pass of its own). */
static const h3_rowq *rowq_for(const dit_scratch *s, const h3_fp8_linear *q, const h3_int8_linear *i8, h3_rowq *out) {
    if (!h3_knob_int(H3_KNOB_FUSED_QUANT, 1)) return NULL;
    if (i8->q) *out = (h3_rowq){H3_ROWQ_INT8, s->xq, s->xs, i8->group};
    else if (q->q) *out = (h3_rowq){H3_ROWQ_FP8, s->xq, s->xs, 0};
    else return NULL;
    return out;
}

/* The linear that reads the attention's input rows first (project_qkv's first linear): its codes serve q, k and v. */
static const h3_rowq *rowq_qkv(const dit_model *m, const dit_attn_w *w, const dit_scratch *s, h3_rowq *out) {
    const dit_config *c = &m->cfg;
    if ((c->original_layout && !c->qkv_stacked) || w->qkv_planar || w->f8_qkv.q || w->i8_qkv.q)
        return rowq_for(s, &w->f8_qkv, &w->i8_qkv, out);
    return rowq_for(s, &w->f8_q, &w->i8_q, out);
}

/* The attention itself, on strided heads (the --parallel exchange calls it per head group). */
static void attend(void *arg, h3_backend *be, void *out, int64_t ldo, const void *q, const void *k, const void *v,
                   int64_t ld, int64_t hs, int64_t S, int nh, int D) { /* arg: the model (--attention sage8) */
    const dit_model *m = arg;
    const float scale = 1.0f / sqrtf((float)D);
    if (m->act == H3_BF16 && m->attention_sage8) /* --attention sage8 (docs/fast.md): the same arguments, 8-bit products */
        h3_sage8_attention(be, out, ldo, q, ld, hs, k, ld, hs, v, ld, hs, S, S, nh, nh, D, scale);
    else
        h3_act_attention(be, m->act, out, ldo, q, k, v, ld, hs, S, nh, D, scale);
}

/* q, k, v of input rows n: their buffers, row stride *ld and head stride *hs. fp32: three row-mapped GEMMs into
 * s->q / s->k / s->v (both layouts through the same tiles: bit-identical q/k/v, docs/model/dit.md 2.4, trap 1);
 * bf16: one [S, 3I] GEMM output in s->big (or three column slices of it). quantized: the scratch already holds n's
 * codes for the q|k|v linears (rowq_qkv). */
static void project_qkv(dit_model *m, const dit_attn_w *w, const void *n, int64_t rows, dit_scratch *s, int quantized,
                        void **q, void **k, void **v, int64_t *ld, int64_t *hs) {
    const dit_config *c = &m->cfg;
    h3_backend *be = m->be;
    int D = c->attention_head_dim;
    int64_t H = c->hidden_size, I = (int64_t)c->num_attention_heads * D;
    if (m->act == H3_F32) {
        if (w->qkv) {
            h3_matmul_rows(be, s->q, n, rows, w->qkv, I, D, 3 * D, 0, 0);
            h3_matmul_rows(be, s->k, n, rows, w->qkv, I, D, 3 * D, D, 0);
            h3_matmul_rows(be, s->v, n, rows, w->qkv, I, D, 3 * D, 2 * D, 0);
        } else if (w->qkv_planar) { /* [q; k; v] rows (a single file's qkv_proj) */
            h3_matmul_rows(be, s->q, n, rows, w->qkv_planar, I, I, 3 * I, 0, 0);
            h3_matmul_rows(be, s->k, n, rows, w->qkv_planar, I, I, 3 * I, I, 0);
            h3_matmul_rows(be, s->v, n, rows, w->qkv_planar, I, I, 3 * I, 2 * I, 0);
        } else {
            h3_matmul_rows(be, s->q, n, rows, w->to_q, I, I, I, 0, 0);
            h3_matmul_rows(be, s->k, n, rows, w->to_k, I, I, I, 0, 0);
            h3_matmul_rows(be, s->v, n, rows, w->to_v, I, I, I, 0, 0);
        }
        *q = s->q, *k = s->k, *v = s->v, *ld = I, *hs = D;
        return;
    }
    int64_t ld3 = 3 * I;
    h3_bf16 *big = s->big;
    if (c->original_layout && !c->qkv_stacked) { /* original layout: per-head [q k v] rows, so per-head [q k v] columns (docs/model/dit.md 2.4) */
        linear(m, s, big, ld3, n, H, rows, w->qkv, &w->f8_qkv, &w->i8_qkv, quantized);
        *k = big + D, *v = big + 2 * D, *hs = 3 * D;
    } else {
        if (w->qkv_planar || w->f8_qkv.q || w->i8_qkv.q) {
            linear(m, s, big, ld3, n, H, rows, w->qkv_planar, &w->f8_qkv, &w->i8_qkv, quantized);
        } else {
            const int shared = quantized || w->f8_q.q || w->i8_q.q;
            linear(m, s, big, ld3, n, H, rows, w->to_q, &w->f8_q, &w->i8_q, quantized);
            linear(m, s, big + I, ld3, n, H, rows, w->to_k, &w->f8_k, &w->i8_k, shared);
            linear(m, s, big + 2 * I, ld3, n, H, rows, w->to_v, &w->f8_v, &w->i8_v, shared);
        }
        *k = big + I, *v = big + 2 * I, *hs = D;
    }
    *q = big, *ld = ld3;
}

/* Attention sub-layer (docs/model/dit.md 4.7) on rows x H input n -> out: q/k normalized and rotated in place (cos
 * NULL: no RoPE), attention on their heads, the output projection. par (--parallel): the attention through this
 * rank's exchange (dit_ulysses.h); NULL: one rank. */
static void attention(dit_model *m, const dit_attn_w *w, const void *n, int64_t rows, const float *cos,
                      const float *sin, dit_scratch *s, void *out, struct dit_ulysses *par, int quantized) {
    const dit_config *c = &m->cfg;
    h3_backend *be = m->be;
    int NH = c->num_attention_heads, D = c->attention_head_dim;
    int64_t H = c->hidden_size, I = (int64_t)NH * D, ld, hs;
    void *q, *k, *v;
    project_qkv(m, w, n, rows, s, quantized, &q, &k, &v, &ld, &hs);
    h3_act_qk_norm_rope(be, m->act, q, k, rows, ld, NH, hs, D, w->norm_q, w->norm_k, c->qk_norm_eps,
                        6 * c->rope_freq_dim, cos, sin);
    if (par) dit_ulysses_attention(par, be, s->mid, I, q, k, v, ld, hs, attend, m);
    else attend(m, be, s->mid, I, q, k, v, ld, hs, rows, NH, D);
    linear(m, s, out, H, s->mid, I, rows, w->to_out, &w->f8_out, &w->i8_out, 0);
}

/* SwiGLU FFN (docs/model/dit.md 4.8): out = down(value * silu(gate)). fp32: value and gate as two GEMMs on the row
 * views of the input weight, the product in place of value; bf16: one GEMM for both, the product in s->mid (its
 * codes written by the SwiGLU when the down projection is quantized). quantized: the scratch already holds n's codes
 * for the up projection. */
static void feed_forward(dit_model *m, const dit_block_w *b, const void *n, int64_t rows, dit_scratch *s, void *out,
                         int quantized) {
    int64_t H = m->cfg.hidden_size, FF = m->cfg.ffn_dim;
    const void *product;
    h3_rowq rq;
    const h3_rowq *dq = NULL;
    if (m->act == H3_F32) {
        float *value = s->big, *gate = value + rows * FF;
        h3_matmul(m->be, value, n, rows, b->ff_value, NULL, 0);
        h3_matmul(m->be, gate, n, rows, b->ff_gate, NULL, 0);
        h3_swiglu(m->be, value, value, gate, rows * FF, 0);
        product = value;
    } else {
        int gate_first = m->cfg.original_layout; /* mlp.fc1 = [gate; value], ff.net.0.proj = [value; gate] */
        linear(m, s, s->big, 2 * FF, n, H, rows, b->ff_in, &b->f8_in, &b->i8_in, quantized);
        dq = rowq_for(s, &b->f8_down, &b->i8_down, &rq);
        if (dq)
            h3_bf16_swiglu_q(m->be, s->mid, s->big, rows, FF, 2 * FF, gate_first ? FF : 0, gate_first ? 0 : FF, dq);
        else
            h3_bf16_swiglu(m->be, s->mid, s->big, rows, FF, 2 * FF, gate_first ? FF : 0, gate_first ? 0 : FF);
        product = s->mid;
    }
    linear(m, s, out, H, product, FF, rows, b->ff_down, &b->f8_down, &b->i8_down, dq != NULL);
}

/* Context embedder + token refiner (docs/model/dit.md 4.2 steps 3-4, 4.3): text rows -> xt [Nt, H] of the activation
 * dtype. Each residual is fused with the norm that reads it: norm2, the next layer's norm1 or the final norm (in
 * place). */
int dit_text_stream(dit_model *m, const float *text_host, int64_t Nt, void *xt, h3_err *e) {
    const dit_config *c = &m->cfg;
    h3_backend *be = m->be;
    const h3_dtype act = m->act;
    int64_t H = c->hidden_size;
    float *tin = h3_alloc(be, (size_t)(Nt * c->text_dim) * sizeof(float));
    h3_bf16 *tin16 = act == H3_BF16 ? h3_alloc(be, (size_t)(Nt * c->text_dim) * 2) : NULL;
    dit_scratch s;
    if (!tin || (act == H3_BF16 && !tin16) || dit_alloc_scratch(m, Nt, &s) != 0) {
        h3_free(be, tin), h3_free(be, tin16);
        return h3_fail(e, "out of memory for the text stream (%lld rows)", (long long)Nt);
    }
    h3_upload(be, tin, text_host, (size_t)(Nt * c->text_dim) * sizeof(float));
    const void *text = tin;
    if (act == H3_BF16) { /* the cast to the context embedder's dtype */
        h3_bf16_pack(be, tin16, tin, Nt * c->text_dim);
        text = tin16;
    }
    h3_act_matmul(be, act, xt, H, text, c->text_dim, Nt, m->ctx_w, m->ctx_b);
    const int R = c->num_refiner_layers;
    if (R == 0)
        h3_act_rmsnorm_modulate(be, act, xt, xt, Nt, H, m->refiner_final_norm, c->final_norm_eps, NULL, 0, NULL, 0, 0,
                                NULL);
    else
        h3_act_rmsnorm_modulate(be, act, s.n, xt, Nt, H, m->refiner[0].norm1, c->norm_eps, NULL, 0, NULL, 0, 0, NULL);
    for (int r = 0; r < R; r++) {
        const dit_block_w *b = &m->refiner[r];
        attention(m, &b->attn, s.n, Nt, NULL, NULL, &s, s.o, NULL, 0);
        h3_act_gated_residual_rmsnorm_modulate(be, act, xt, s.o, s.n, Nt, H, NULL, 0, NULL, 0, b->norm2, c->norm_eps,
                                               NULL, 0, NULL, 0, 0, NULL);
        feed_forward(m, b, s.n, Nt, &s, s.o, 0);
        if (r + 1 < R)
            h3_act_gated_residual_rmsnorm_modulate(be, act, xt, s.o, s.n, Nt, H, NULL, 0, NULL, 0,
                                                   m->refiner[r + 1].norm1, c->norm_eps, NULL, 0, NULL, 0, 0, NULL);
        else
            h3_act_gated_residual_rmsnorm_modulate(be, act, xt, s.o, xt, Nt, H, NULL, 0, NULL, 0, m->refiner_final_norm,
                                                   c->final_norm_eps, NULL, 0, NULL, 0, 0, NULL);
    }
    h3_free(be, tin), h3_free(be, tin16);
    dit_free_scratch(be, &s);
    return 0;
}

/* One main block (docs/model/dit.md 4.6) in place on X [S, H]. Each gated residual is fused with the norm that reads
 * the rows it writes: the attention's with this block's norm2, the FFN's (next >= 0) with the norm1 of block
 * `next`, which runs right after on the same rows. normed: the block before did that for this one (s.n holds
 * this block's norm1 of X, and with quantized linears s.xq its codes: docs/fast.md "Fused quantization"). */
void dit_run_block(dit_model *m, fwd_ctx *x, int64_t b, void *X, int normed, int64_t next) {
    const dit_config *c = &m->cfg;
    h3_backend *be = m->be;
    const h3_dtype act = m->act;
    int64_t S = x->S, H = c->hidden_size, row6 = (int64_t)ADALN_SLOTS * H, per_block = x->K * MODALITIES * row6;
    const dit_block_w *w = &m->blocks[b];
    /* this block's AdaLN table: rows of 6 slots, shift / scale / gate of the attention, then of the FFN */
    const float *tb = x->tab + b * per_block;
    dit_scratch *s = &x->s;
    h3_rowq rq;
    const h3_rowq *aq = rowq_qkv(m, &w->attn, s, &rq);
    if (!normed)
        h3_act_rmsnorm_modulate(be, act, s->n, X, S, H, w->norm1, c->norm_eps, tb, row6, x->ada_idx, 0 * H, 1 * H, aq);
    attention(m, &w->attn, s->n, S, x->cos, x->sin, s, s->o, x->par, aq != NULL);
    /* X += gate 2 * attention; n = norm2(X) with shift 3 / scale 4 */
    const h3_rowq *fq = rowq_for(s, &w->f8_in, &w->i8_in, &rq);
    h3_act_gated_residual_rmsnorm_modulate(be, act, X, s->o, s->n, S, H, tb, row6, x->ada_idx, 2 * H, w->norm2,
                                           c->norm_eps, tb, row6, x->ada_idx, 3 * H, 4 * H, fq);
    feed_forward(m, w, s->n, S, s, s->o, fq != NULL);
    /* X += gate 5 * FFN; n = norm1(X) of block `next` with shift 0 / scale 1 of its table */
    if (next < 0) {
        h3_act_gated_residual(be, act, X, s->o, S, H, tb, row6, x->ada_idx, 5 * H);
        return;
    }
    const float *tn = x->tab + next * per_block;
    const h3_rowq *nq = rowq_qkv(m, &m->blocks[next].attn, s, &rq); /* block next's q|k|v codes (its `normed`) */
    h3_act_gated_residual_rmsnorm_modulate(be, act, X, s->o, s->n, S, H, tb, row6, x->ada_idx, 5 * H,
                                           m->blocks[next].norm1, c->norm_eps, tn, row6, x->ada_idx, 0 * H, 1 * H, nq);
}
