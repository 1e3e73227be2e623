/* MiniMax-H3 DiT, bf16 mode on bf16 activation buffers (ops.h): the blocks, the attention and FFN
 * sub-layers and the text stream (docs/model/dit.md 4.3, 4.6-4.8). The reference's bf16 mode stores every
 * activation in bf16, so these buffers hold exactly the values the fp32-buffer path rounds to; on the CPU both
 * paths give the same bits (tests/test_bf16_ops.c), on CUDA the operands go to the tensor cores as they are. */
#include <math.h>
#include <string.h>

#include "../backend/ops.h"
#include "../core/tuning.h"
#include "dit_internal.h"
#include "dit_ulysses.h"

void dit16_free_scratch(h3_backend *be, dit_scratch16 *s) {
    h3_free(be, s->n), h3_free(be, s->o), h3_free(be, s->big), h3_free(be, s->mid);
    h3_free(be, s->xq), h3_free(be, s->xs);
    memset(s, 0, sizeof *s);
}

int dit16_alloc_scratch(dit_model *m, int64_t rows, dit_scratch16 *s) {
    const dit_config *c = &m->cfg;
    int64_t H = c->hidden_size, I = (int64_t)c->num_attention_heads * c->attention_head_dim, FF = c->ffn_dim;
    int64_t big = 3 * I > 2 * FF ? 3 * I : 2 * FF, mid = I > FF ? I : FF;
    memset(s, 0, sizeof *s);
    s->n = h3_alloc(m->be, (size_t)(rows * H) * 2);
    s->o = h3_alloc(m->be, (size_t)(rows * H) * 2);
    s->big = h3_alloc(m->be, (size_t)(rows * big) * 2);
    s->mid = h3_alloc(m->be, (size_t)(rows * mid) * 2);
    const int quant = m->fp8 || m->int8_profile;
    if (quant) {
        int64_t widest = H > mid ? H : mid, groups = m->int8_fc2_groups ? FF / 1024 + 1 : 1;
        s->xq = h3_alloc(m->be, (size_t)(rows * widest));
        s->xs = h3_alloc(m->be, (size_t)(rows * groups) * sizeof(float));
    }
    if (!s->n || !s->o || !s->big || !s->mid || (quant && (!s->xq || !s->xs))) {
        dit16_free_scratch(m->be, s);
        return -1;
    }
    return 0;
}

/* y = x W^T: through the FP8 copy when --quant fp8 made one, or the INT8 one (docs/int8.md) (the input rows
 * quantized into the scratch first, unless `quantized` says they already are), else the bf16 GEMM. */
static void lin16(dit_model *m, dit_scratch16 *s, h3_bf16 *y, int64_t ldy, const h3_bf16 *x, int64_t ldx, int64_t rows,
                  const h3_tensor *w, const h3_fp8_linear *q, const h3_int8_linear *i8, int quantized) {
    if (i8->q) {
        if (!quantized) h3_int8_quant_rows(m->be, (int8_t *)s->xq, s->xs, x, rows, i8->K, ldx, i8->group);
        h3_int8_matmul(m->be, y, ldy, (const int8_t *)s->xq, s->xs, rows, i8, NULL);
    } else if (q->q) {
        if (!quantized) h3_fp8_quant_rows(m->be, s->xq, s->xs, x, rows, q->K, ldx);
        h3_fp8_matmul(m->be, y, ldy, s->xq, s->xs, rows, q);
    } else {
        h3_bf16_matmul(m->be, y, ldy, x, ldx, rows, w, NULL);
    }
}

/* The codes a quantized linear reads (s->xq / s->xs) as the h3_rowq its input's producer fills (docs/fast.md "Fused
 * quantization"), or NULL: the linear is bf16, or H3_FUSED_QUANT=0 (lin16 then quantizes in a pass of its own). */
static const h3_rowq *rowq_for(const dit_scratch16 *s, const h3_fp8_linear *q, const h3_int8_linear *i8, h3_rowq *out) {
    if (!h3_knob_int(H3_KNOB_FUSED_QUANT, 1)) return NULL;
    if (i8->q) *out = (h3_rowq){H3_ROWQ_INT8, s->xq, s->xs, i8->group};
    else if (q->q) *out = (h3_rowq){H3_ROWQ_FP8, s->xq, s->xs, 0};
    else return NULL;
    return out;
}

/* The linear that reads the attention's input rows first (attention16's first lin16): its codes serve q, k and v. */
static const h3_rowq *rowq_qkv(const dit_model *m, const dit_attn_w *w, const dit_scratch16 *s, h3_rowq *out) {
    const dit_config *c = &m->cfg;
    if ((c->original_layout && !c->qkv_stacked) || w->qkv_planar || w->f8_qkv.q || w->i8_qkv.q)
        return rowq_for(s, &w->f8_qkv, &w->i8_qkv, out);
    return rowq_for(s, &w->f8_q, &w->i8_q, out);
}

/* Attention sub-layer (docs/model/dit.md 4.7) in bf16: one [S, 3I] GEMM output (or three column slices of it),
 * q/k normalized and rotated in place, attention straight on its strided heads. */
static void attend16(void *arg, h3_backend *be, void *out, int64_t ldo, const void *q, const void *k, const void *v,
                     int64_t ld, int64_t hs, int64_t S, int nh, int D) { /* arg: the model (--attention sage8) */
    const dit_model *m = arg;
    (m->attention_sage8 ? h3_sage8_attention : h3_bf16_attention)(be, out, ldo, q, ld, hs, k, ld, hs, v, ld, hs, S, S, nh,
                                                                  nh, D, 1.0f / sqrtf((float)D));
}

/* par (--parallel): the attention through this rank's exchange (dit_ulysses.h); NULL: one rank. quantized: the
 * scratch already holds n's codes for the q|k|v linears (rowq_qkv). */
static void attention16(dit_model *m, const dit_attn_w *w, const h3_bf16 *n, int64_t rows, const float *cos,
                        const float *sin, dit_scratch16 *s, h3_bf16 *out, struct dit_ulysses *par, int quantized) {
    const dit_config *c = &m->cfg;
    h3_backend *be = m->be;
    int NH = c->num_attention_heads, D = c->attention_head_dim;
    int64_t H = c->hidden_size, I = (int64_t)NH * D, ld = 3 * I;
    h3_bf16 *q = s->big, *k, *v;
    int64_t hs;
    if (c->original_layout && !c->qkv_stacked) { /* original layout: per-head [q k v] rows, so per-head [q k v] columns (docs/model/dit.md 2.4) */
        lin16(m, s, s->big, ld, n, H, rows, w->qkv, &w->f8_qkv, &w->i8_qkv, quantized);
        k = q + D, v = q + 2 * D, hs = 3 * D;
    } else {
        if (w->qkv_planar || w->f8_qkv.q || w->i8_qkv.q) {
            lin16(m, s, s->big, ld, n, H, rows, w->qkv_planar, &w->f8_qkv, &w->i8_qkv, quantized);
        } else {
            const int shared = quantized || w->f8_q.q || w->i8_q.q;
            lin16(m, s, s->big, ld, n, H, rows, w->to_q, &w->f8_q, &w->i8_q, quantized);
            lin16(m, s, s->big + I, ld, n, H, rows, w->to_k, &w->f8_k, &w->i8_k, shared);
            lin16(m, s, s->big + 2 * I, ld, n, H, rows, w->to_v, &w->f8_v, &w->i8_v, shared);
        }
        k = q + I, v = q + 2 * I, hs = D;
    }
    int rot = 6 * c->rope_freq_dim;
    h3_bf16_head_norm_rope(be, q, rows, ld, NH, hs, D, w->norm_q, c->qk_norm_eps, rot, cos, sin);
    h3_bf16_head_norm_rope(be, k, rows, ld, NH, hs, D, w->norm_k, c->qk_norm_eps, rot, cos, sin);
    /* --attention sage8 (docs/fast.md): the same arguments, 8-bit products */
    if (par) dit_ulysses_attention(par, be, s->mid, I, q, k, v, ld, hs, attend16, m);
    else attend16(m, be, s->mid, I, q, k, v, ld, hs, rows, NH, D);
    lin16(m, s, out, H, s->mid, I, rows, w->to_out, &w->f8_out, &w->i8_out, 0);
}

/* SwiGLU FFN (docs/model/dit.md 4.8) in bf16: one GEMM for value and gate, then down (its input's codes written by
 * the SwiGLU when the down projection is quantized). quantized: the scratch already holds n's codes for the up
 * projection. */
static void feed_forward16(dit_model *m, const dit_block_w *b, const h3_bf16 *n, int64_t rows, dit_scratch16 *s,
                           h3_bf16 *out, int quantized) {
    int64_t H = m->cfg.hidden_size, FF = m->cfg.ffn_dim;
    int gate_first = m->cfg.original_layout; /* mlp.fc1 = [gate; value], ff.net.0.proj = [value; gate] */
    lin16(m, s, s->big, 2 * FF, n, H, rows, b->ff_in, &b->f8_in, &b->i8_in, quantized);
    h3_rowq rq;
    const h3_rowq *dq = rowq_for(s, &b->f8_down, &b->i8_down, &rq);
    if (dq)
        h3_bf16_swiglu_q(m->be, s->mid, s->big, rows, FF, 2 * FF, gate_first ? FF : 0, gate_first ? 0 : FF, dq);
    else
        h3_bf16_swiglu(m->be, s->mid, s->big, rows, FF, 2 * FF, gate_first ? FF : 0, gate_first ? 0 : FF);
    lin16(m, s, out, H, s->mid, FF, rows, b->ff_down, &b->f8_down, &b->i8_down, dq != NULL);
}

/* Context embedder + token refiner in bf16 -> xt [Nt, H] bf16. */
int dit16_text_stream(dit_model *m, const float *text_host, int64_t Nt, h3_bf16 *xt, h3_err *e) {
    const dit_config *c = &m->cfg;
    h3_backend *be = m->be;
    int64_t H = c->hidden_size;
    float *tin = h3_alloc(be, (size_t)(Nt * c->text_dim) * sizeof(float));
    h3_bf16 *tin16 = h3_alloc(be, (size_t)(Nt * c->text_dim) * 2);
    dit_scratch16 s;
    if (!tin || !tin16 || dit16_alloc_scratch(m, Nt, &s) != 0) {
        h3_free(be, tin), h3_free(be, tin16);
        return h3_fail(e, "out of memory for the text stream (%lld rows)", (long long)Nt);
    }
    h3_upload(be, tin, text_host, (size_t)(Nt * c->text_dim) * sizeof(float));
    h3_bf16_pack(be, tin16, tin, Nt * c->text_dim); /* the cast to the context embedder's dtype */
    h3_bf16_matmul(be, xt, H, tin16, c->text_dim, Nt, m->ctx_w, m->ctx_b);
    /* each residual is fused with the norm that reads it: norm2, the next layer's norm1 or the final norm (in place) */
    const int R = c->num_refiner_layers;
    if (R == 0)
        h3_bf16_rmsnorm_modulate(be, xt, xt, Nt, H, m->refiner_final_norm, c->final_norm_eps, NULL, 0, NULL, 0, 0);
    else
        h3_bf16_rmsnorm_modulate(be, s.n, xt, Nt, H, m->refiner[0].norm1, c->norm_eps, NULL, 0, NULL, 0, 0);
    for (int r = 0; r < R; r++) {
        const dit_block_w *b = &m->refiner[r];
        attention16(m, &b->attn, s.n, Nt, NULL, NULL, &s, s.o, NULL, 0);
        h3_bf16_gated_residual_rmsnorm_modulate(be, xt, s.o, s.n, Nt, H, NULL, 0, NULL, 0, b->norm2, c->norm_eps, NULL,
                                                0, NULL, 0, 0);
        feed_forward16(m, b, s.n, Nt, &s, s.o, 0);
        if (r + 1 < R)
            h3_bf16_gated_residual_rmsnorm_modulate(be, xt, s.o, s.n, Nt, H, NULL, 0, NULL, 0, m->refiner[r + 1].norm1,
                                                    c->norm_eps, NULL, 0, NULL, 0, 0);
        else
            h3_bf16_gated_residual_rmsnorm_modulate(be, xt, s.o, xt, Nt, H, NULL, 0, NULL, 0, m->refiner_final_norm,
                                                    c->final_norm_eps, NULL, 0, NULL, 0, 0);
    }
    h3_free(be, tin), h3_free(be, tin16);
    dit16_free_scratch(be, &s);
    return 0;
}

/* One main block (docs/model/dit.md 4.6) in bf16, in place on X [S, H]. Each gated residual is fused with the norm that reads
 * the rows it writes: the attention's with this block's norm2, the FFN's (next >= 0) with the norm1 of block
 * `next`, which runs right after on the same rows. normed: the block before did that for this one (s16.n holds
 * this block's norm1 of X, and with quantized linears s16.xq its codes: docs/fast.md "Fused quantization"). */
void dit16_run_block(dit_model *m, fwd_ctx *x, int64_t b, h3_bf16 *X, int normed, int64_t next) {
    const dit_config *c = &m->cfg;
    h3_backend *be = m->be;
    int64_t S = x->S, H = c->hidden_size, row6 = (int64_t)ADALN_SLOTS * H, per_block = x->K * MODALITIES * row6;
    const dit_block_w *w = &m->blocks[b];
    /* this block's AdaLN table: rows of 6 slots, shift / scale / gate of the attention, then of the FFN */
    const float *tb = x->tab + b * per_block;
    dit_scratch16 *s = &x->s16;
    h3_rowq rq;
    const h3_rowq *aq = rowq_qkv(m, &w->attn, s, &rq);
    if (!normed && aq)
        h3_bf16_rmsnorm_modulate_q(be, s->n, X, S, H, w->norm1, c->norm_eps, tb, row6, x->ada_idx, 0 * H, 1 * H, aq);
    else if (!normed)
        h3_bf16_rmsnorm_modulate(be, s->n, X, S, H, w->norm1, c->norm_eps, tb, row6, x->ada_idx, 0 * H, 1 * H);
    attention16(m, &w->attn, s->n, S, x->cos, x->sin, s, s->o, x->par, aq != NULL);
    /* X += gate 2 * attention; n = norm2(X) with shift 3 / scale 4 */
    const h3_rowq *fq = rowq_for(s, &w->f8_in, &w->i8_in, &rq);
    if (fq)
        h3_bf16_gated_residual_rmsnorm_modulate_q(be, X, s->o, s->n, S, H, tb, row6, x->ada_idx, 2 * H, w->norm2,
                                                  c->norm_eps, tb, row6, x->ada_idx, 3 * H, 4 * H, fq);
    else
        h3_bf16_gated_residual_rmsnorm_modulate(be, X, s->o, s->n, S, H, tb, row6, x->ada_idx, 2 * H, w->norm2,
                                                c->norm_eps, tb, row6, x->ada_idx, 3 * H, 4 * H);
    feed_forward16(m, w, s->n, S, s, s->o, fq != NULL);
    /* X += gate 5 * FFN; n = norm1(X) of block `next` with shift 0 / scale 1 of its table */
    if (next < 0) {
        h3_bf16_gated_residual(be, X, s->o, S, H, tb, row6, x->ada_idx, 5 * H);
        return;
    }
    const float *tn = x->tab + next * per_block;
    const h3_rowq *nq = rowq_qkv(m, &m->blocks[next].attn, s, &rq); /* block next's q|k|v codes (its `normed`) */
    if (nq)
        h3_bf16_gated_residual_rmsnorm_modulate_q(be, X, s->o, s->n, S, H, tb, row6, x->ada_idx, 5 * H,
                                                  m->blocks[next].norm1, c->norm_eps, tn, row6, x->ada_idx, 0 * H,
                                                  1 * H, nq);
    else
        h3_bf16_gated_residual_rmsnorm_modulate(be, X, s->o, s->n, S, H, tb, row6, x->ada_idx, 5 * H,
                                                m->blocks[next].norm1, c->norm_eps, tn, row6, x->ada_idx, 0 * H, 1 * H);
}
