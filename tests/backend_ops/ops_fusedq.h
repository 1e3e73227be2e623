/* Cases of the fused-quantization ops (ops.h, docs/fast.md "Fused quantization"). Included once by
 * tests/test_backend_ops.c after ops_int8.h. Each row runs the fused op and its unfused composition (the producer
 * op, then h3_fp8_quant_rows / h3_int8_quant_rows on its output) on the same inputs, and requires on every side
 * (the CPU twin, the backend under test) the same bits from both: bf16 rows, the residual stream where the op
 * updates one, codes and scales (tolerance 0). Then the fused op's outputs against the twin's as the producer's own
 * rows do (the row's tolerance; 0 also for the codes). In --perf mode: the fused op, the producer and the quantizer
 * timed apart. */
#include "backend/ops.h"

/* a and b hold the same bits on every side (the fused op against the two ops) */
static void fq_same(bo_ctx *c, const char *name, const bo_buf *a, const bo_buf *b) {
    if (c->perf) return;
    for (int s = 0; s < 2; s++) {
        void *ha = bo_get(c, a, s), *hb = bo_get(c, b, s);
        size_t es = bo_esize(a->t);
        int64_t diff = 0;
        for (int64_t i = 0; i < a->n; i++) diff += memcmp((char *)ha + i * es, (char *)hb + i * es, es) != 0;
        char what[160];
        snprintf(what, sizeof what, "side %d (%s): fused vs the two ops: %lld of %lld differ", s,
                 s ? c->tag : "twin", (long long)diff, (long long)a->n);
        bo_line(c, name, what);
        CHECK(diff == 0 && a->n == b->n, "[%s] %s %s: %s (side %d): fused != composition in %lld elements", c->tag,
              c->row->op, c->row->name, name, s, (long long)diff);
        free(ha), free(hb);
    }
}

enum { FQ_NORM = 0, FQ_RESIDUAL_NORM = 1, FQ_SWIGLU = 2, FQ_VAE_NORM = 3 };

/* ---- a = producer (FQ_*), rows, dim (ff for SwiGLU), kind (H3_ROWQ_FP8 / _INT8), group, variant (NORM: tables;
 * RESIDUAL_NORM: 0 gate 2 + mod 3/4, 1 gate 5 + the next block's 0/1, 2 no tables; SWIGLU: gate first; VAE_NORM:
 * with a branch), byte offset of the codes (not a multiple of 8: the two-pass fallback) ---- */
static void c_fusedq(bo_ctx *c, const bo_row *r) {
    const int prod = (int)r->a[0], kind = (int)r->a[3], var = (int)r->a[5];
    const int64_t rows = r->a[1], dim = r->a[2], group = r->a[4], qoff = r->a[6], n = rows * dim;
    const int64_t ng = group ? dim / group : 1, row6 = 6 * dim, per_block = 2 * 3 * row6;
    float *th = rand_offset(2 * per_block, 0.5f, 0.0f), *wh = rand_offset(dim, 0.2f, 1.0f);
    for (int64_t i = 0; i < 2 * per_block; i++) th[i] = h3_round_bf16(th[i]);
    int32_t *idx = bo_dit_row_index(rows);
    bo_buf *w = bo_in(c, BO_F32, dim, wh), *t = bo_in(c, BO_F32, 2 * per_block, th), *di = bo_in(c, BO_I32, rows, idx);
    free(th), free(wh), free(idx);
    /* inputs: x (bf16 rows; fp32 for the decoder's norm), the branch, SwiGLU's z */
    bo_buf *x = NULL, *br = NULL, *z = NULL;
    if (prod == FQ_SWIGLU) z = bo_rand(c, BO_BF16, rows * 2 * dim, 4.0f, 0);
    else if (prod == FQ_VAE_NORM) x = bo_rand(c, BO_F32, n, 2.0f, 0), br = bo_rand(c, BO_BF16, n, 2.0f, 0);
    else x = bo_rand(c, BO_BF16, n, 2.0f, 0), br = bo_rand(c, BO_BF16, n, 2.0f, 0);
    bo_buf *xf = x ? bo_copy(c, x) : NULL, *xc = x ? bo_copy(c, x) : NULL; /* the residual ops update x */
    bo_buf *yf = bo_out(c, BO_BF16, n), *yc = bo_out(c, BO_BF16, n);
    bo_buf *qf = bo_out(c, BO_U8, n + qoff), *qc = bo_out(c, BO_U8, n + qoff);
    bo_buf *sf = bo_out(c, BO_F32, rows * ng), *sc = bo_out(c, BO_F32, rows * ng);
    const int64_t go = var == 1 ? 5 * dim : 2 * dim, mod = var == 1 ? per_block : 0, sh = var == 1 ? 0 : 3 * dim,
                  scl = var == 1 ? dim : 4 * dim;
    const int tabs = var != 2;
    const int64_t ldz = 2 * dim, vo = var ? dim : 0, gto = var ? 0 : dim;
    /* the fused op; P_Q(b, s) its h3_rowq on side c->side */
#define P_Q(qb, sb) (&(h3_rowq){kind, PU(qb) + qoff, PF(sb), group})
    bo_cost(c, "fused", 0, (prod == FQ_SWIGLU ? 7.0 : prod == FQ_VAE_NORM ? 13.0 : 9.0) * n);
    switch (prod) {
    case FQ_NORM:
        BO_OP(c, be, h3_bf16_rmsnorm_modulate_q(be, PB(yf), PB(xf), rows, dim, PF(w), 1e-6f, var ? PF(t) : NULL, row6,
                                                PI(di), 3 * dim, 4 * dim, P_Q(qf, sf)));
        break;
    case FQ_RESIDUAL_NORM:
        BO_OP(c, be, h3_bf16_gated_residual_rmsnorm_modulate_q(be, PB(xf), PB(br), PB(yf), rows, dim,
                                                               tabs ? PF(t) : NULL, row6, PI(di), go, PF(w), 1e-6f,
                                                               tabs ? PF(t) + mod : NULL, row6, PI(di), sh, scl,
                                                               P_Q(qf, sf)));
        break;
    case FQ_SWIGLU:
        BO_OP(c, be, h3_bf16_swiglu_q(be, PB(yf), PB(z), rows, dim, ldz, vo, gto, P_Q(qf, sf)));
        break;
    default:
        BO_OP(c, be, h3_vae_residual_rmsnorm_q(be, PF(xf), PB(yf), var ? PB(br) : NULL, var ? PF(w) : NULL, rows, dim,
                                               PF(w), 1e-6f, P_Q(qf, sf)));
    }
#undef P_Q
    /* the composition: the producer, then the quantizer on its rows */
    bo_cost(c, "producer alone", 0, (prod == FQ_SWIGLU ? 6.0 : prod == FQ_VAE_NORM ? 12.0 : 8.0) * n);
    switch (prod) {
    case FQ_NORM:
        BO_OP(c, be, h3_bf16_rmsnorm_modulate(be, PB(yc), PB(xc), rows, dim, PF(w), 1e-6f, var ? PF(t) : NULL, row6,
                                              PI(di), 3 * dim, 4 * dim));
        break;
    case FQ_RESIDUAL_NORM:
        BO_OP(c, be, h3_bf16_gated_residual_rmsnorm_modulate(be, PB(xc), PB(br), PB(yc), rows, dim,
                                                             tabs ? PF(t) : NULL, row6, PI(di), go, PF(w), 1e-6f,
                                                             tabs ? PF(t) + mod : NULL, row6, PI(di), sh, scl));
        break;
    case FQ_SWIGLU:
        BO_OP(c, be, h3_bf16_swiglu(be, PB(yc), PB(z), rows, dim, ldz, vo, gto));
        break;
    default:
        BO_OP(c, be, h3_vae_residual_rmsnorm(be, PF(xc), PB(yc), var ? PB(br) : NULL, var ? PF(w) : NULL, rows, dim,
                                             PF(w), 1e-6f));
    }
    bo_cost(c, "quantizer alone", 0, 3.0 * n);
    if (kind == H3_ROWQ_INT8)
        BO_OP(c, be, h3_int8_quant_rows(be, (int8_t *)PU(qc) + qoff, PF(sc), PB(yc), rows, dim, dim, group));
    else
        BO_OP(c, be, h3_fp8_quant_rows(be, PU(qc) + qoff, PF(sc), PB(yc), rows, dim, dim));
    if (c->perf) return;
    fq_same(c, "y", yf, yc);
    if (x) fq_same(c, "x (the residual stream)", xf, xc);
    fq_same(c, "codes", qf, qc);
    fq_same(c, "scales", sf, sc);
    /* the fused op against the twin, as the producer's own rows (its tolerance); tolerance 0: the codes too */
    bo_check(c, "y vs the twin", yf, r->tol, 0);
    if (r->tol == 0.0) bo_check(c, "codes vs the twin", qf, 0.0, 0), bo_check(c, "scales vs the twin", sf, 0.0, 0);
}
