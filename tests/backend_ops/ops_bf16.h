/* Cases of the bf16 activation ops (ops.h): formerly tests/cuda/test_cuda_bf16.c. Included once by
 * tests/test_backend_ops.c after ops_f32.h. tests/test_bf16_ops.c checks these CPU twins bit for bit against the
 * fp32-buffer ops' H3_BF16_OUT mode; here the CPU pass adds 1-vs-n-thread bit identity, aliasing and double
 * references (bf16 outputs: 1e-2, a few roundings of at most 2^-9). */
#include "backend/ops.h"

static void bo_ref16(bo_ctx *c, const char *name, const bo_buf *b, const double *ref, double tol) {
    uint16_t *h = bo_get(c, b, 0);
    float *f = malloc((size_t)b->n * sizeof(float));
    for (int64_t i = 0; i < b->n; i++) f[i] = h3_bf16_to_f32(h[i]);
    bo_ref(c, name, f, ref, b->n, tol);
    free(h), free(f);
}

static double bo_bf(const bo_buf *b, int64_t i) { return h3_bf16_to_f32(((const uint16_t *)b->h)[i]); }

/* ---- rows scatter / gather / pack: a = which (0 rows_scatter, 1 rows_scatter_f32, 2 rows_gather_f32, 3 pack,
 * 4 unpack); 300 distinct rows (37 coprime to 500) of 500, dim 96 ---- */
static void c_bf16_rows(bo_ctx *c, const bo_row *r) {
    const int which = (int)r->a[0];
    const int64_t n = 300, dim = 96, S = 500;
    int32_t idx[300];
    for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)((i * 37 + 11) % S);
    bo_buf *src = bo_rand(c, BO_BF16, n * dim, 1.0f, 0), *dst = bo_rand(c, BO_BF16, S * dim, 1.0f, 0);
    bo_buf *srcf = bo_rand(c, BO_F32, n * dim, 1.0f, 0), *di = bo_in(c, BO_I32, n, idx), *y;
    double *ref = malloc((size_t)(S * dim) * sizeof(double));
    if (which <= 1) {
        for (int64_t i = 0; i < S * dim; i++) ref[i] = bo_bf(dst, i);
        for (int64_t i = 0; i < n; i++)
            for (int64_t j = 0; j < dim; j++)
                ref[idx[i] * dim + j] = which ? h3_round_bf16(((const float *)srcf->h)[i * dim + j]) : bo_bf(src, i * dim + j);
        y = dst;
        if (which == 0) BO_OP(c, be, h3_bf16_rows_scatter(be, PB(dst), PB(src), PI(di), n, dim));
        if (which == 1) BO_OP(c, be, h3_bf16_rows_scatter_f32(be, PB(dst), PF(srcf), PI(di), n, dim));
        bo_check(c, "dst", y, 0.0, 0);
        if (bo_refs(c)) bo_ref16(c, "dst", y, ref, 0.0);
    } else if (which == 2) {
        y = bo_out(c, BO_F32, n * dim);
        BO_OP(c, be, h3_bf16_rows_gather_f32(be, PF(y), PB(dst), PI(di), n, dim));
        bo_check(c, "y (exact)", y, 0.0, BO_BF16R);
        if (bo_refs(c)) {
            float *yh = bo_get(c, y, 0);
            for (int64_t i = 0; i < n; i++)
                for (int64_t j = 0; j < dim; j++) ref[i * dim + j] = bo_bf(dst, idx[i] * dim + j);
            bo_ref(c, "y", yh, ref, n * dim, 0.0);
            free(yh);
        }
    } else if (which == 3) {
        y = bo_out(c, BO_BF16, n * dim);
        BO_OP(c, be, h3_bf16_pack(be, PB(y), PF(srcf), n * dim));
        bo_check(c, "fp32 -> bf16", y, 0.0, 0);
        for (int64_t i = 0; i < n * dim; i++) ref[i] = h3_round_bf16(((const float *)srcf->h)[i]);
        if (bo_refs(c)) { y->n = n * dim; bo_ref16(c, "y (round to nearest even)", y, ref, 0.0); }
    } else {
        y = bo_out(c, BO_F32, n * dim);
        BO_OP(c, be, h3_bf16_unpack(be, PF(y), PB(src), n * dim));
        bo_check(c, "bf16 -> fp32", y, 0.0, BO_BF16R);
        if (bo_refs(c)) {
            float *yh = bo_get(c, y, 0);
            for (int64_t i = 0; i < n * dim; i++) ref[i] = bo_bf(src, i);
            bo_ref(c, "y", yh, ref, n * dim, 0.0);
            free(yh);
        }
    }
    free(ref);
}

/* ---- --token-reduction's pool / restore: a DiT-like table (40 prefix rows, then a 3-wide token grid of 5 x 7:
 * pairs and a singleton), dim 5376 ---- */
static void c_token_reduction(bo_ctx *c, const bo_row *r) {
    const int64_t P = 40, F = 5, gh = 7, gw = 3, gwr = 2, dim = 5376, S = P + F * gh * gw, Sr = P + F * gh * gwr;
    int32_t *pairs = malloc((size_t)(2 * Sr) * 4), *parent = malloc((size_t)S * 4);
    for (int64_t i = 0; i < Sr; i++) {
        int64_t a = i, b = i;
        if (i >= P) {
            int64_t l = i - P, col = 2 * (l % gwr);
            a = P + (l / gwr) * gw + col, b = col + 1 < gw ? a + 1 : a;
        }
        pairs[2 * i] = (int32_t)a, pairs[2 * i + 1] = (int32_t)b;
    }
    for (int64_t i = 0; i < S; i++) parent[i] = (int32_t)(i < P ? i : P + ((i - P) / gw) * gwr + ((i - P) % gw) / 2);
    bo_buf *x = bo_rand(c, BO_BF16, S * dim, 4.0f, 0), *red = bo_rand(c, BO_BF16, Sr * dim, 4.0f, 0);
    bo_buf *base = bo_rand(c, BO_BF16, Sr * dim, 4.0f, 0), *y = bo_out(c, BO_BF16, Sr * dim);
    bo_buf *dp = bo_in(c, BO_I32, 2 * Sr, pairs), *dpa = bo_in(c, BO_I32, S, parent);
    if (r->a[0] == 0) {
        BO_OP(c, be, h3_bf16_rows_pool_pairs(be, PB(y), PB(x), PI(dp), Sr, dim));
        bo_check(c, "rows_pool_pairs 775 -> 390 rows", y, 0.0, 0);
        if (bo_refs(c)) {
            double *ref = malloc((size_t)(Sr * dim) * sizeof(double));
            for (int64_t i = 0; i < Sr; i++)
                for (int64_t j = 0; j < dim; j++)
                    ref[i * dim + j] = 0.5 * (bo_bf(x, pairs[2 * i] * dim + j) + bo_bf(x, pairs[2 * i + 1] * dim + j));
            bo_ref16(c, "y (mean of the pair)", y, ref, 1e-2);
            free(ref);
        }
    } else {
        BO_OP(c, be, h3_bf16_rows_expand_delta(be, PB(x), PB(red), PB(base), PI(dpa), S, P, dim, 0.75f));
        bo_check(c, "rows_expand_delta 390 -> 775 rows, scale 0.75", x, 0.0, 0);
        if (bo_refs(c)) {
            double *ref = malloc((size_t)(S * dim) * sizeof(double));
            for (int64_t i = 0; i < S; i++)
                for (int64_t j = 0; j < dim; j++) {
                    int64_t p = parent[i];
                    ref[i * dim + j] = i < P ? bo_bf(red, p * dim + j)
                                             : bo_bf(x, i * dim + j) + 0.75 * (bo_bf(red, p * dim + j) - bo_bf(base, p * dim + j));
                }
            bo_ref16(c, "x (restored)", x, ref, 1e-2);
            free(ref);
        }
    }
    free(pairs), free(parent);
}

/* ---- bf16 matmul: a = M, N, K, ldx, ldy, bias, bias dtype; y's columns >= N must stay ---- */
static void c_bf16_matmul(bo_ctx *c, const bo_row *r) {
    const int64_t M = r->a[0], N = r->a[1], K = r->a[2], ldx = r->a[3], ldy = r->a[4];
    int64_t ws[2] = {N, K}, bs[1] = {N};
    bo_weight *w = bo_weight_new(c, H3_BF16, 2, ws, 1.0f / sqrtf((float)K));
    bo_weight *b = r->a[5] ? bo_weight_new(c, (h3_dtype)r->a[6], 1, bs, 0.5f) : NULL;
    bo_buf *x = bo_rand(c, BO_BF16, M * ldx, 1.0f, 0), *y;
    if (c->perf) {
        y = bo_out(c, BO_BF16, M * ldy);
    } else {
        uint16_t *p = rand_bf16(M * ldy, 1.0f);
        for (int64_t i = 0; i < M * ldy; i++)
            if (i % ldy < N) p[i] = 0x7fc0;
        y = bo_in(c, BO_BF16, M * ldy, p);
        free(p);
    }
    bo_cost(c, NULL, 2.0 * M * N * K, 0);
    bo_blas(c, 2e-4);
    BO_OP(c, be, h3_bf16_matmul(be, PB(y), ldy, PB(x), ldx, M, PW(w), b ? PW(b) : NULL));
    bo_check(c, "y (columns past N kept)", y, r->tol, 0);
    if (!bo_refs(c)) return;
    float *wf = bo_widen(w->host), *bf = b ? bo_widen(b->host) : NULL;
    double *ref = malloc((size_t)(M * ldy) * sizeof(double));
    for (int64_t m = 0; m < M; m++)
        for (int64_t j = 0; j < ldy; j++) {
            double s = bf && j < N ? bf[j] : 0.0;
            if (j >= N) s = bo_bf(y, m * ldy + j);
            else
                for (int64_t k = 0; k < K; k++) s += bo_bf(x, m * ldx + k) * wf[j * K + k];
            ref[m * ldy + j] = s;
        }
    bo_ref16(c, "y", y, ref, 1e-2);
    free(wf), free(bf), free(ref);
}

/* ---- rmsnorm + modulate: a = rows, dim, table, gain; then in place (y aliasing x) ---- */
static void c_bf16_norm_modulate(bo_ctx *c, const bo_row *r) {
    const int64_t rows = r->a[0], dim = r->a[1], stride = 6 * dim, n = rows * dim;
    const int K3 = 6, tab = (int)r->a[2], gain = (int)r->a[3];
    float *th = rand_offset(K3 * stride, 0.5f, 0.0f);
    for (int64_t i = 0; i < K3 * stride; i++) th[i] = h3_round_bf16(th[i]);
    int32_t *idx = malloc((size_t)rows * sizeof(int32_t));
    for (int64_t i = 0; i < rows; i++) idx[i] = (int32_t)((i * 7) % K3);
    float *wh = rand_offset(dim, 0.2f, 1.0f);
    bo_buf *x = bo_rand(c, BO_BF16, n, 2.0f, 0), *y = bo_out(c, BO_BF16, n), *w = bo_in(c, BO_F32, dim, wh);
    bo_buf *t = bo_in(c, BO_F32, K3 * stride, th), *di = bo_in(c, BO_I32, rows, idx);
    free(wh), free(th), free(idx);
    bo_cost(c, NULL, 0, 4.0 * n);
    BO_OP(c, be, h3_bf16_rmsnorm_modulate(be, PB(y), PB(x), rows, dim, gain ? PF(w) : NULL, 1e-5f, tab ? PF(t) : NULL,
                                          stride, PI(di), 3 * dim, 4 * dim));
    bo_check(c, "y", y, r->tol, 0);
    if (c->perf) return;
    BO_OP(c, be, h3_bf16_rmsnorm_modulate(be, PB(x), PB(x), rows, dim, gain ? PF(w) : NULL, 1e-5f,
                                          tab ? PF(t) : NULL, stride, PI(di), 3 * dim, 4 * dim));
    bo_check(c, "... in place", x, r->tol, 0);
    bo_same(c, "in place", x, y);
    if (!bo_refs(c)) return;
    double *ref = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < rows; i++) {
        double ss = 0;
        for (int64_t j = 0; j < dim; j++) ss += bo_bf(x, i * dim + j) * bo_bf(x, i * dim + j);
        double inv = 1.0 / sqrt(ss / dim + 1e-5);
        const float *tr = (const float *)t->h + (int64_t)((i * 7) % K3) * stride;
        for (int64_t j = 0; j < dim; j++) {
            double v = bo_bf(x, i * dim + j) * inv * (gain ? ((const float *)w->h)[j] : 1.0);
            ref[i * dim + j] = tab ? v * (1.0 + tr[4 * dim + j]) + tr[3 * dim + j] : v;
        }
    }
    bo_ref16(c, "y", y, ref, 1e-2);
    free(ref);
}

/* ---- head norm + rope on the k heads of a fused [rows][3 * heads * D] buffer (planar or per-head interleaved):
 * a = rows, heads, D, rot, interleaved, rope; the whole buffer compared (q and v must stay) ---- */
static void c_bf16_head_norm_rope(bo_ctx *c, const bo_row *r) {
    const int64_t rows = r->a[0];
    const int heads = (int)r->a[1], D = (int)r->a[2], rot = (int)r->a[3], il = (int)r->a[4], rope = (int)r->a[5];
    const int64_t I = (int64_t)heads * D, rs = 3 * I, hs = il ? 3 * D : D, koff = il ? D : I;
    bo_buf *x = bo_rand(c, BO_BF16, rows * rs, 3.0f, 0);
    float *wh = rand_offset(D, 0.2f, 1.0f);
    bo_buf *w = bo_in(c, BO_F32, D, wh), *cs = bo_rand(c, BO_F32, rows * rot, 1.0f, 0);
    bo_buf *sn = bo_rand(c, BO_F32, rows * rot, 1.0f, 0);
    free(wh);
    bo_cost(c, NULL, 0, 4.0 * rows * I);
    BO_OP(c, be, h3_bf16_head_norm_rope(be, PB(x) + koff, rows, rs, heads, hs, D, PF(w), 1e-5f, rot,
                                        rope ? PF(cs) : NULL, rope ? PF(sn) : NULL));
    bo_check(c, "the fused buffer", x, r->tol, 0);
    if (!bo_refs(c)) return;
    double *ref = malloc((size_t)(rows * rs) * sizeof(double)), *hv = malloc((size_t)D * sizeof(double));
    for (int64_t i = 0; i < rows * rs; i++) ref[i] = bo_bf(x, i);
    for (int64_t i = 0; i < rows; i++)
        for (int h = 0; h < heads; h++) {
            int64_t at = i * rs + koff + h * hs;
            double ss = 0;
            for (int d = 0; d < D; d++) ss += bo_bf(x, at + d) * bo_bf(x, at + d);
            double inv = 1.0 / sqrt(ss / D + 1e-5);
            for (int d = 0; d < D; d++) hv[d] = bo_bf(x, at + d) * inv * ((const float *)w->h)[d];
            for (int d = 0; d < D; d++) {
                double v = hv[d];
                if (rope && d < rot) {
                    const float *cr = (const float *)cs->h + i * rot, *sr = (const float *)sn->h + i * rot;
                    double o = d < rot / 2 ? -hv[d + rot / 2] : hv[d - rot / 2];
                    v = hv[d] * cr[d] + o * sr[d];
                }
                ref[at + d] = v;
            }
        }
    bo_ref16(c, "x", x, ref, 1e-2);
    free(ref), free(hv);
}

/* ---- attention: q/k/v heads of one fused buffer (Sq == Skv, Hq == Hkv; planar or interleaved) or separate
 * buffers: a = Sq, Skv, Hq, Hkv, D, interleaved ---- */
static void c_bf16_attention(bo_ctx *c, const bo_row *r) {
    const int64_t Sq = r->a[0], Skv = r->a[1];
    const int Hq = (int)r->a[2], Hkv = (int)r->a[3], D = (int)r->a[4], il = (int)r->a[5];
    const int fused = Sq == Skv && Hq == Hkv;
    const int64_t I = (int64_t)Hq * D, Ikv = (int64_t)Hkv * D, rs = fused ? 3 * I : I + 8, rskv = fused ? 3 * I : Ikv + 24;
    const int64_t hs = fused && il ? 3 * D : D, koff = fused ? (il ? D : I) : 0, voff = fused ? (il ? 2 * D : 2 * I) : 0;
    const int64_t ors = I + 16;
    bo_buf *q = bo_rand(c, BO_BF16, Sq * rs, 2.0f, 0);
    bo_buf *k = fused ? q : bo_rand(c, BO_BF16, Skv * rskv, 2.0f, 0), *v = fused ? q : bo_rand(c, BO_BF16, Skv * rskv, 1.0f, 0);
    bo_buf *o;
    if (c->perf) {
        o = bo_out(c, BO_BF16, Sq * ors);
    } else {
        uint16_t *poison = malloc((size_t)(Sq * ors) * 2);
        for (int64_t i = 0; i < Sq * ors; i++) poison[i] = i % ors < I ? 0x7fc0 : 0;
        o = bo_in(c, BO_BF16, Sq * ors, poison);
        free(poison);
    }
    const float scale = 1.0f / sqrtf((float)D);
    bo_cost(c, NULL, 4.0 * Sq * Skv * Hq * D, 0);
    bo_blas(c, 2e-4);
    BO_OP(c, be, h3_bf16_attention(be, PB(o), ors, PB(q), rs, hs, PB(k) + koff, rskv, hs, PB(v) + voff, rskv, hs, Sq,
                                   Skv, Hq, Hkv, D, scale));
    bo_check(c, "out (padding columns stay 0)", o, r->tol, 0);
    if (!bo_refs(c)) return;
    uint16_t *oh = bo_get(c, o, 0);
    int64_t st = bo_step(Sq, 12), n = 0;
    double *ref = malloc((size_t)((Sq / st + 1) * I) * sizeof(double)), *p = malloc((size_t)Skv * sizeof(double));
    float *got = malloc((size_t)((Sq / st + 1) * I) * sizeof(float));
    for (int64_t i = 0; i < Sq; i += st)
        for (int h = 0; h < Hq; h++) {
            int hk = h / (Hq / Hkv);
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < Skv; j++) {
                double s = 0;
                for (int d = 0; d < D; d++) s += bo_bf(q, i * rs + h * hs + d) * bo_bf(k, koff + j * rskv + hk * hs + d);
                p[j] = s * scale, mx = p[j] > mx ? p[j] : mx;
            }
            for (int64_t j = 0; j < Skv; j++) sum += p[j] = exp(p[j] - mx);
            for (int d = 0; d < D; d++, n++) {
                double acc = 0;
                for (int64_t j = 0; j < Skv; j++) acc += p[j] * bo_bf(v, voff + j * rskv + hk * hs + d);
                ref[n] = acc / sum, got[n] = h3_bf16_to_f32(oh[i * ors + h * D + d]);
            }
        }
    bo_ref(c, "out", got, ref, n, 2e-2);
    free(oh), free(ref), free(p), free(got);
}

/* ---- gated residual (x += gate * branch; no table: x += branch): a = rows, dim, table ---- */
static void c_bf16_gated_residual(bo_ctx *c, const bo_row *r) {
    const int64_t rows = r->a[0], dim = r->a[1], stride = 6 * dim, n = rows * dim;
    const int K3 = 3, tab = (int)r->a[2];
    int32_t *idx = malloc((size_t)rows * sizeof(int32_t));
    for (int64_t i = 0; i < rows; i++) idx[i] = (int32_t)((i * 5) % K3);
    bo_buf *x = bo_rand(c, BO_BF16, n, 2.0f, 0), *br = bo_rand(c, BO_BF16, n, 2.0f, 0);
    bo_buf *t = bo_rand(c, BO_F32, K3 * stride, 0.5f, 0), *di = bo_in(c, BO_I32, rows, idx);
    free(idx);
    bo_cost(c, NULL, 0, 6.0 * n);
    BO_OP(c, be, h3_bf16_gated_residual(be, PB(x), PB(br), rows, dim, tab ? PF(t) : NULL, stride, PI(di), 2 * dim));
    bo_check(c, "x (in place)", x, r->tol, 0);
    if (!bo_refs(c)) return;
    double *ref = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) {
        int64_t row = i / dim;
        double g = tab ? ((const float *)t->h)[((row * 5) % K3) * stride + 2 * dim + i % dim] : 1.0;
        ref[i] = bo_bf(x, i) + g * bo_bf(br, i);
    }
    bo_ref16(c, "x", x, ref, 1e-2);
    free(ref);
}

/* The DiT's AdaLN row of each packed row, timestep * 3 + tag: video rows first (the first 1/32 at a second
 * timestep, like conditioning frames), then audio rows, then text rows. */
static int32_t *bo_dit_row_index(int64_t rows) {
    int32_t *idx = malloc((size_t)rows * sizeof(int32_t));
    const int64_t nt = rows > 1024 ? 256 : rows / 4, na = rows / 8;
    for (int64_t i = 0; i < rows; i++) {
        int tag = i >= rows - nt ? 1 : i >= rows - nt - na ? 2 : 0, ts = tag == 0 && i < rows / 32;
        idx[i] = (int32_t)(ts * 3 + tag);
    }
    return idx;
}

/* ---- the fused gated residual + RMSNorm/modulation, x and y bit for bit: a = rows, dim, tables, gain,
 * next_block (gate slot 5 with the next block's slots 0/1; else gate 2, modulation 3/4), in place (y = x),
 * y offset (odd: not 16-byte aligned) ---- */
static void c_bf16_residual_norm(bo_ctx *c, const bo_row *r) {
    const int64_t rows = r->a[0], dim = r->a[1], row6 = 6 * dim, per_block = 2 * 3 * row6, n = rows * dim;
    const int tables = (int)r->a[2], gain = (int)r->a[3], nb = (int)r->a[4], inpl = (int)r->a[5];
    const int64_t yoff = r->a[6];
    float *th = rand_offset(2 * per_block, 0.5f, 0.0f), *wh = rand_offset(dim, 0.2f, 1.0f);
    for (int64_t i = 0; i < 2 * per_block; i++) th[i] = h3_round_bf16(th[i]);
    int32_t *idx = bo_dit_row_index(rows);
    bo_buf *x = bo_rand(c, BO_BF16, n, 2.0f, 0), *br = bo_rand(c, BO_BF16, n, 2.0f, 0), *y = bo_out(c, BO_BF16, n + yoff);
    bo_buf *w = bo_in(c, BO_F32, dim, wh), *t = bo_in(c, BO_F32, 2 * per_block, th), *di = bo_in(c, BO_I32, rows, idx);
    free(th), free(wh), free(idx);
    const int64_t mod = nb ? per_block : 0, sh = nb ? 0 : 3 * dim, sc = nb ? dim : 4 * dim, go = nb ? 5 * dim : 2 * dim;
    bo_cost(c, NULL, 0, 6.0 * n);
    BO_OP(c, be, h3_bf16_gated_residual_rmsnorm_modulate(be, PB(x), PB(br), inpl ? PB(x) : PB(y) + yoff, rows, dim,
                                                         tables ? PF(t) : NULL, row6, PI(di), go, gain ? PF(w) : NULL,
                                                         1e-6f, tables ? PF(t) + mod : NULL, row6, PI(di), sh, sc));
    bo_check(c, "x", x, 0.0, 0);
    if (!inpl) bo_check_range(c, "y", y, yoff, n, 0.0, 0);
    if (inpl || c->perf) return;
    /* y = x: the same bits as x of the out-of-place call */
    bo_buf *x3 = bo_copy(c, x);
    BO_OP(c, be, h3_bf16_gated_residual_rmsnorm_modulate(be, PB(x3), PB(br), PB(x3), rows, dim, tables ? PF(t) : NULL,
                                                         row6, PI(di), go, gain ? PF(w) : NULL, 1e-6f,
                                                         tables ? PF(t) + mod : NULL, row6, PI(di), sh, sc));
    if (yoff == 0) bo_same(c, "in place: y", x3, y);
}

/* ---- swiglu on [rows][2 * ff] rows (value first or gate first): a = rows, ff, gate first ---- */
static void c_bf16_swiglu(bo_ctx *c, const bo_row *r) {
    const int64_t rows = r->a[0], ff = r->a[1], ldz = 2 * ff, vo = r->a[2] ? ff : 0, go = r->a[2] ? 0 : ff;
    bo_buf *z = bo_rand(c, BO_BF16, rows * ldz, 4.0f, 0), *y = bo_out(c, BO_BF16, rows * ff);
    bo_cost(c, NULL, 0, 6.0 * rows * ff);
    BO_OP(c, be, h3_bf16_swiglu(be, PB(y), PB(z), rows, ff, ldz, vo, go));
    bo_check(c, "y", y, r->tol, 0);
    if (!bo_refs(c)) return;
    double *ref = malloc((size_t)(rows * ff) * sizeof(double));
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < ff; j++) {
            double g = bo_bf(z, i * ldz + go + j);
            ref[i * ff + j] = bo_bf(z, i * ldz + vo + j) * g / (1.0 + exp(-g));
        }
    bo_ref16(c, "y", y, ref, 1e-2);
    free(ref);
}

#ifdef H3_CUDA
/* ---- --perf only: the CUDA attention kernels themselves on head-major bf16 q/k/v (cuda_ops.h): a = S, H, D,
 * 1: cuDNN SDPA (else the own flash kernel) ---- */
static void c_cuda_attention(bo_ctx *c, const bo_row *r) {
    const int64_t S = r->a[0];
    const int H = (int)r->a[1], D = (int)r->a[2];
    if (!c->perf || !bo_is_cuda(c->be[1])) return;
    bo_buf *q = bo_rand(c, BO_BF16, 3 * S * H * D, 2.0f, 0), *o = bo_out(c, BO_F32, S * H * D);
    const uint16_t *qp = q->p[1];
    const float scale = 1.0f / sqrtf((float)D);
    if (r->a[3] && cuda_cudnn_attention_bf16(c->be[1], o->p[1], qp, qp + S * H * D, qp + 2 * S * H * D, S, S, H, H, D,
                                             scale) != 0) {
        printf("[%s] perf %s %s: no cuDNN engine\n", c->tag, r->op, r->name);
        return;
    }
    bo_cost(c, NULL, 4.0 * S * S * H * D, 0);
    if (r->a[3])
        BO_OP(c, be, cuda_cudnn_attention_bf16(be, PB(o), PB(q), PB(q) + S * H * D, PB(q) + 2 * S * H * D, S, S, H, H,
                                               D, scale));
    else
        BO_OP(c, be, cuda_flash_attention_bf16(be, PF(o), (int64_t)H * D, PB(q), PB(q) + S * H * D,
                                               PB(q) + 2 * S * H * D, S, S, H, H, D, scale, 0, 1));
}
#endif
