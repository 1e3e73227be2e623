/* Cases of the conditioner / audio VAE / video VAE encoder ops (ops.h, ops.h, ops.h):
 * formerly tests/cuda/test_cuda_ops2.c. Included once by tests/test_backend_ops.c after ops_f32.h. The CPU twins'
 * convolutions are also checked against naive loops and the diffusers goldens by tests/test_audio_vae.c and
 * tests/test_video_vae.c; here the CPU pass adds 1-vs-n-thread bit identity, aliasing and double references of
 * the simple ops. */
#include "backend/ops.h"

/* ---- rmsnorm_qwen: a = rows, dim, in place ---- */
static void c_rmsnorm_qwen(bo_ctx *c, const bo_row *r) {
    const int64_t rows = r->a[0], dim = r->a[1], n = rows * dim;
    const int fl = r->flags, bf = (fl & H3_BF16_OUT) != 0, inplace = (int)r->a[2];
    bo_buf *x = bo_rand(c, BO_F32, n, 3.0f, bf), *w = bo_rand(c, BO_F32, dim, 1.5f, bf), *y = bo_out(c, BO_F32, n);
    bo_buf *res = inplace ? x : y;
    bo_cost(c, NULL, 0, 8.0 * n);
    BO_OP(c, be, h3_rmsnorm_qwen(be, PF(res), PF(x), rows, dim, PF(w), 1e-6f, fl));
    bo_check(c, inplace ? "x (in place)" : "y", res, r->tol, bf ? BO_BF16R : 0);
    if (c->perf) return;
    bo_buf *x2 = bo_copy(c, x), *y2 = bo_out(c, BO_F32, n); /* the other aliasing */
    if (inplace) BO_OP(c, be, h3_rmsnorm_qwen(be, PF(y2), PF(x2), rows, dim, PF(w), 1e-6f, fl));
    else BO_OP(c, be, h3_rmsnorm_qwen(be, PF(x2), PF(x2), rows, dim, PF(w), 1e-6f, fl));
    bo_same(c, "aliasing", inplace ? y2 : x2, res);
    if (!bo_refs(c)) return;
    float *yh = bo_get(c, res, 0);
    const float *xh = x->h, *wh = w->h;
    double *ref = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < rows; i++) {
        double ss = 0;
        for (int64_t j = 0; j < dim; j++) ss += (double)xh[i * dim + j] * xh[i * dim + j];
        double inv = 1.0 / sqrt(ss / dim + 1e-6);
        for (int64_t j = 0; j < dim; j++) ref[i * dim + j] = xh[i * dim + j] * inv * wh[j];
    }
    bo_ref(c, "y", yh, ref, n, bf ? 1e-2 : 1e-6);
    free(yh), free(ref);
}

/* ---- rows_add: 33 distinct rows of 90 (7 coprime to 90), dim 1000; the row list is host memory ---- */
static void c_rows_add(bo_ctx *c, const bo_row *r) {
    const int64_t L = 90, dim = 1000, n = 33;
    int64_t rows[33];
    for (int64_t a = 0; a < n; a++) rows[a] = (a * 7 + 3) % L;
    const int bf = (r->flags & H3_BF16_OUT) != 0;
    bo_buf *x = bo_rand(c, BO_F32, L * dim, 2.0f, bf), *src = bo_rand(c, BO_F32, n * dim, 1.0f, bf);
    BO_OP(c, be, h3_rows_add(be, PF(x), rows, PF(src), n, dim, r->flags));
    bo_check(c, "x (in place)", x, 0.0, bf ? BO_BF16R : 0);
    if (!bo_refs(c)) return;
    float *xh = bo_get(c, x, 0);
    double *ref = malloc((size_t)(L * dim) * sizeof(double));
    for (int64_t i = 0; i < L * dim; i++) ref[i] = ((const float *)x->h)[i];
    for (int64_t a = 0; a < n; a++)
        for (int64_t j = 0; j < dim; j++) ref[rows[a] * dim + j] += ((const float *)src->h)[a * dim + j];
    bo_ref(c, "x", xh, ref, L * dim, bf ? 1e-2 : 1e-7);
    free(xh), free(ref);
}

/* ---- attention_eager [bf16] (the conditioner's; q/k/v column slices of wider rows): a = S, Hq, Hkv, D, causal,
 * amplitude x1000 ---- */
static void c_attention_eager(bo_ctx *c, const bo_row *r) {
    const int64_t S = r->a[0];
    const int Hq = (int)r->a[1], Hkv = (int)r->a[2], D = (int)r->a[3], causal = (int)r->a[4];
    const float amp = (float)r->a[5] / 1000.0f, scale = 1.0f / sqrtf((float)D);
    const int64_t qs = (int64_t)Hq * D + 8, ks = (int64_t)Hkv * D + 24, os = (int64_t)Hq * D + 16;
    bo_buf *q = bo_rand(c, BO_F32, S * qs, amp, 1), *k = bo_rand(c, BO_F32, S * ks, amp, 1);
    bo_buf *v = bo_rand(c, BO_F32, S * ks, 1.0f, 1), *o;
    if (c->perf) {
        o = bo_out(c, BO_F32, S * os);
    } else {
        float *poison = malloc((size_t)(S * os) * sizeof(float));
        for (int64_t i = 0; i < S * os; i++) poison[i] = i % os < (int64_t)Hq * D ? NAN : 0.0f;
        o = bo_in(c, BO_F32, S * os, poison);
        free(poison);
    }
    bo_cost(c, NULL, 4.0 * S * S * Hq * D / (causal ? 2 : 1), 0);
    bo_blas(c, 2e-4);
    BO_OP(c, be, h3_attention_eager(be, PF(o), os, PF(q) + 4, qs, PF(k) + 8, ks, PF(v) + 16, ks, S, S, Hq, Hkv, D,
                                    scale, causal, r->flags));
    bo_check(c, "out (padding columns stay 0)", o, r->tol, BO_BF16R);
    if (!bo_refs(c)) return;
    float *oh = bo_get(c, o, 0);
    const float *qh = (const float *)q->h + 4, *kh = (const float *)k->h + 8, *vh = (const float *)v->h + 16;
    int64_t st = bo_step(S, 12), n = 0;
    double *ref = malloc((size_t)((S / st + 1) * Hq * D) * sizeof(double)), *p = malloc((size_t)S * sizeof(double));
    float *got = malloc((size_t)((S / st + 1) * Hq * D) * sizeof(float));
    for (int64_t i = 0; i < S; i += st)
        for (int h = 0; h < Hq; h++) {
            int hk = h / (Hq / Hkv);
            int64_t nk = causal ? i + 1 : S;
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < nk; j++) {
                double s = 0;
                for (int d = 0; d < D; d++) s += (double)qh[i * qs + h * D + d] * kh[j * ks + hk * D + d];
                p[j] = s * scale, mx = p[j] > mx ? p[j] : mx;
            }
            for (int64_t j = 0; j < nk; j++) sum += p[j] = exp(p[j] - mx);
            for (int d = 0; d < D; d++, n++) {
                double acc = 0;
                for (int64_t j = 0; j < nk; j++) acc += p[j] * vh[j * ks + hk * D + d];
                ref[n] = acc / sum, got[n] = oh[i * os + h * D + d];
            }
        }
    bo_ref(c, "out", got, ref, n, 2e-2);
    free(oh), free(ref), free(p), free(got);
}

/* ---- conv1d: a = B, Cin, L, Cout, K, stride, pad, dilation, bias ---- */
static void c_conv1d(bo_ctx *c, const bo_row *r) {
    const int B = (int)r->a[0], Cin = (int)r->a[1], Cout = (int)r->a[3], K = (int)r->a[4], s = (int)r->a[5];
    const int pad = (int)r->a[6], dil = (int)r->a[7], bias = (int)r->a[8];
    const int64_t L = r->a[2], Lo = h3_conv1d_out_len(L, K, s, pad, dil);
    bo_buf *x = bo_rand(c, BO_F32, (int64_t)B * Cin * L, 1.0f, 0);
    bo_buf *w = bo_rand(c, BO_F32, (int64_t)Cout * Cin * K, 1.0f / sqrtf((float)(Cin * K)), 0);
    bo_buf *b = bo_rand(c, BO_F32, Cout, 0.5f, 0), *y = bo_out(c, BO_F32, (int64_t)B * Cout * Lo);
    bo_cost(c, NULL, 2.0 * B * Cout * Cin * K * (double)Lo, 0);
    bo_blas(c, 1e-6);
    BO_OP(c, be, h3_conv1d(be, PF(y), PF(x), B, Cin, L, PF(w), bias ? PF(b) : NULL, Cout, K, s, pad, dil));
    bo_check(c, "y", y, r->tol, 0);
    if (!bo_refs(c) || (double)B * Cout * Cin * K * (double)Lo > 3e8) return; /* the reference at small sizes */
    float *yh = bo_get(c, y, 0);
    const float *xh = x->h, *wh = w->h, *bh = b->h;
    double *ref = malloc((size_t)y->n * sizeof(double));
    for (int bb = 0; bb < B; bb++)
        for (int o = 0; o < Cout; o++)
            for (int64_t t = 0; t < Lo; t++) {
                double acc = bias ? bh[o] : 0.0;
                for (int ci = 0; ci < Cin; ci++)
                    for (int k = 0; k < K; k++) {
                        int64_t i = t * s - pad + (int64_t)k * dil;
                        if (i >= 0 && i < L) acc += (double)wh[((int64_t)o * Cin + ci) * K + k] * xh[((int64_t)bb * Cin + ci) * L + i];
                    }
                ref[((int64_t)bb * Cout + o) * Lo + t] = acc;
            }
    bo_ref(c, "y", yh, ref, y->n, 1e-5);
    free(yh), free(ref);
}

/* ---- conv_transpose1d: a = B, Cin, L, Cout, K, stride, pad, bias ---- */
static void c_conv_transpose1d(bo_ctx *c, const bo_row *r) {
    const int B = (int)r->a[0], Cin = (int)r->a[1], Cout = (int)r->a[3], K = (int)r->a[4], s = (int)r->a[5];
    const int pad = (int)r->a[6], bias = (int)r->a[7];
    const int64_t L = r->a[2], Lo = (L - 1) * s - 2 * (int64_t)pad + K;
    bo_buf *x = bo_rand(c, BO_F32, (int64_t)B * Cin * L, 1.0f, 0);
    bo_buf *w = bo_rand(c, BO_F32, (int64_t)Cin * Cout * K, 1.0f / sqrtf((float)Cin), 0);
    bo_buf *b = bo_rand(c, BO_F32, Cout, 0.5f, 0), *y = bo_out(c, BO_F32, (int64_t)B * Cout * Lo);
    bo_cost(c, NULL, 2.0 * B * Cout * Cin * K * (double)L, 0);
    bo_blas(c, 1e-6);
    BO_OP(c, be, h3_conv_transpose1d(be, PF(y), PF(x), B, Cin, L, PF(w), bias ? PF(b) : NULL, Cout, K, s, pad));
    bo_check(c, "y", y, r->tol, 0);
    if (!bo_refs(c) || (double)B * Cout * Cin * K * (double)L > 3e8) return; /* the reference at small sizes */
    float *yh = bo_get(c, y, 0);
    const float *xh = x->h, *wh = w->h, *bh = b->h;
    double *ref = calloc((size_t)y->n, sizeof(double));
    for (int bb = 0; bb < B; bb++)
        for (int o = 0; o < Cout; o++) {
            double *yr = ref + ((int64_t)bb * Cout + o) * Lo;
            for (int64_t t = 0; t < Lo; t++) yr[t] = bias ? bh[o] : 0.0;
            for (int ci = 0; ci < Cin; ci++)
                for (int64_t i = 0; i < L; i++)
                    for (int k = 0; k < K; k++) {
                        int64_t t = i * s + k - pad;
                        if (t >= 0 && t < Lo)
                            yr[t] += (double)wh[((int64_t)ci * Cout + o) * K + k] * xh[((int64_t)bb * Cin + ci) * L + i];
                    }
        }
    bo_ref(c, "y", yh, ref, y->n, 1e-5);
    free(yh), free(ref);
}

/* ---- snake (a[3] 0, then also in place) / snake_alias_free (a[3] 1): a = B, C, L, alias_free ---- */
static void c_snake(bo_ctx *c, const bo_row *r) {
    const int B = (int)r->a[0], C = (int)r->a[1], af = (int)r->a[3];
    const int64_t L = r->a[2], n = (int64_t)B * C * L;
    float *freq = malloc((size_t)C * sizeof(float)), *inv = malloc((size_t)C * sizeof(float)), filt[H3_AF_TAPS];
    for (int ch = 0; ch < C; ch++) { /* Snake1d: freq = alpha, inv = 1 / (alpha + 1e-9) */
        freq[ch] = 0.2f + 1.5f * (frand() + 1.0f);
        inv[ch] = 1.0f / (freq[ch] + 1e-9f);
    }
    float fs = 0.0f;
    for (int k = 0; k < H3_AF_TAPS; k++) filt[k] = 0.5f + 0.4f * frand(), fs += filt[k];
    for (int k = 0; k < H3_AF_TAPS; k++) filt[k] /= fs;
    bo_buf *x = bo_rand(c, BO_F32, n, 3.0f, 0), *y = bo_out(c, BO_F32, n);
    bo_buf *df = bo_in(c, BO_F32, C, freq), *di = bo_in(c, BO_F32, C, inv), *dfl = bo_in(c, BO_F32, H3_AF_TAPS, filt);
    bo_cost(c, NULL, 0, 8.0 * n);
    if (af) BO_OP(c, be, h3_snake_alias_free(be, PF(y), PF(x), B, C, L, PF(df), PF(di), PF(dfl)));
    else BO_OP(c, be, h3_snake(be, PF(y), PF(x), B, C, L, PF(df), PF(di)));
    bo_check(c, "y", y, r->tol, 0);
    if (!af && !c->perf) { /* in place */
        BO_OP(c, be, h3_snake(be, PF(x), PF(x), B, C, L, PF(df), PF(di)));
        bo_check(c, "snake in place", x, r->tol, 0);
        bo_same(c, "in place", x, y);
        if (bo_refs(c)) {
            float *yh = bo_get(c, y, 0);
            const float *xh = x->h;
            double *ref = malloc((size_t)n * sizeof(double));
            for (int64_t i = 0; i < n; i++) {
                int ch = (int)((i / L) % C);
                double sn = sin((double)freq[ch] * xh[i]);
                ref[i] = xh[i] + (double)inv[ch] * sn * sn;
            }
            bo_ref(c, "y", yh, ref, n, 1e-6);
            free(yh), free(ref);
        }
    }
    free(freq), free(inv);
}

/* ---- clamp, div_scalar (also in place): a = which (0 clamp, 1 div_scalar), n ---- */
static void c_scalar_op(bo_ctx *c, const bo_row *r) {
    const int which = (int)r->a[0];
    const int64_t n = r->a[1];
    bo_buf *x = bo_rand(c, BO_F32, n, 2.0f, 0), *y = bo_out(c, BO_F32, n);
    bo_cost(c, NULL, 0, 8.0 * n);
    if (which == 0) BO_OP(c, be, h3_clamp(be, PF(y), PF(x), -1.0f, 1.0f, n));
    else BO_OP(c, be, h3_div_scalar(be, PF(y), PF(x), 3.0f, n));
    bo_check(c, "y", y, 0.0, 0);
    if (c->perf) return;
    bo_buf *x2 = bo_copy(c, x);
    if (which == 0) BO_OP(c, be, h3_clamp(be, PF(x2), PF(x2), -1.0f, 1.0f, n));
    else BO_OP(c, be, h3_div_scalar(be, PF(x2), PF(x2), 3.0f, n));
    bo_same(c, "in place", x2, y);
    if (which == 1) { /* the old test's second case: /7 in place */
        bo_buf *x3 = bo_copy(c, x);
        BO_OP(c, be, h3_div_scalar(be, PF(x3), PF(x3), 7.0f, n));
        bo_check(c, "div_scalar /7 in place", x3, 0.0, 0);
    }
    if (!bo_refs(c)) return;
    float *yh = bo_get(c, y, 0);
    const float *xh = x->h;
    double *ref = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++)
        ref[i] = which == 0 ? (xh[i] < -1.0f ? -1.0 : xh[i] > 1.0f ? 1.0 : xh[i]) : xh[i] / 3.0;
    bo_ref(c, "y", yh, ref, n, which == 0 ? 0.0 : 1e-7);
    free(yh), free(ref);
}

/* ---- transpose_last2: a = B, R, C ---- */
static void c_transpose(bo_ctx *c, const bo_row *r) {
    const int B = (int)r->a[0];
    const int64_t R = r->a[1], C = r->a[2], n = B * R * C;
    bo_buf *x = bo_rand(c, BO_F32, n, 1.0f, 0), *y = bo_out(c, BO_F32, n);
    bo_cost(c, NULL, 0, 8.0 * n);
    BO_OP(c, be, h3_transpose_last2(be, PF(y), PF(x), B, R, C));
    bo_check(c, "y", y, 0.0, 0);
    if (!bo_refs(c)) return;
    float *yh = bo_get(c, y, 0);
    double *ref = malloc((size_t)n * sizeof(double));
    for (int b = 0; b < B; b++)
        for (int64_t i = 0; i < R; i++)
            for (int64_t j = 0; j < C; j++) ref[(b * C + j) * R + i] = ((const float *)x->h)[(b * R + i) * C + j];
    bo_ref(c, "y", yh, ref, n, 0.0);
    free(yh), free(ref);
}

/* ---- head_mean_pool: a = rows, H, hd, O ---- */
static void c_head_mean_pool(bo_ctx *c, const bo_row *r) {
    const int64_t rows = r->a[0];
    const int H = (int)r->a[1], hd = (int)r->a[2], O = (int)r->a[3];
    bo_buf *x = bo_rand(c, BO_F32, rows * H * hd, 1.0f, 0), *y = bo_out(c, BO_F32, rows * O);
    BO_OP(c, be, h3_head_mean_pool(be, PF(y), PF(x), rows, H, hd, O));
    bo_check(c, "y", y, 0.0, 0);
    if (!bo_refs(c)) return;
    float *yh = bo_get(c, y, 0);
    double *ref = malloc((size_t)(rows * O) * sizeof(double));
    for (int64_t i = 0; i < rows; i++)
        for (int o = 0; o < O; o++) { /* adaptive average pooling of the head mean over hd -> O bins */
            int64_t e0 = (int64_t)o * hd / O, e1 = ((int64_t)(o + 1) * hd + O - 1) / O;
            double s = 0;
            for (int64_t e = e0; e < e1; e++)
                for (int h = 0; h < H; h++) s += ((const float *)x->h)[(i * H + h) * hd + e];
            ref[i * O + o] = s / H / (double)(e1 - e0);
        }
    bo_ref(c, "y", yh, ref, rows * O, 1e-6);
    free(yh), free(ref);
}

/* ---- conv3d: a = cin, tin, hin, win, cout, kt, kh, kw, st, sh, sw, pt0, ph0, ph1, pw0, pw1, pad mode, bias ---- */
static void c_conv3d(bo_ctx *c, const bo_row *r) {
    const int64_t *a = r->a;
    h3_conv3d_geom g = {a[0], a[1], a[2], a[3], a[4], (int)a[5], (int)a[6], (int)a[7], (int)a[8], (int)a[9],
                        (int)a[10], (int)a[11], (int)a[12], (int)a[13], (int)a[14], (int)a[15], (int)a[16]};
    h3_err e;
    int64_t to, ho, wo;
    if (h3_conv3d_check(&g, &to, &ho, &wo, r->name, &e) != 0) {
        bo_assert(c, "geometry", 0, e.msg);
        return;
    }
    const int64_t nx = g.cin * g.tin * g.hin * g.win, ny = g.cout * to * ho * wo, nw = g.cout * g.cin * g.kt * g.kh * g.kw;
    bo_buf *x = bo_rand(c, BO_F32, nx, 1.0f, 0), *w = bo_rand(c, BO_F32, nw, 1.0f / sqrtf((float)(nw / g.cout)), 0);
    bo_buf *b = bo_rand(c, BO_F32, g.cout, 0.5f, 0), *y = bo_out(c, BO_F32, ny);
    bo_cost(c, NULL, 2.0 * (double)nw * (double)(to * ho * wo), 0);
    bo_blas(c, 1e-6);
    BO_OP(c, be, h3_conv3d(be, PF(y), PF(x), &g, PF(w), a[17] ? PF(b) : NULL));
    bo_check(c, "y", y, r->tol, 0);
}

/* ---- groupnorm_frames: a = C, T, HW, groups, affine, silu, in place ---- */
static void c_groupnorm_frames(bo_ctx *c, const bo_row *r) {
    const int64_t C = r->a[0], T = r->a[1], HW = r->a[2], n = C * T * HW;
    const int groups = (int)r->a[3], affine = (int)r->a[4], silu = (int)r->a[5], inplace = (int)r->a[6];
    float *xh = rand_offset(n, 2.0f, 0.7f); /* a non-zero mean */
    bo_buf *x = bo_in(c, BO_F32, n, xh), *w = bo_rand(c, BO_F32, C, 1.0f, 0), *b = bo_rand(c, BO_F32, C, 1.0f, 0);
    free(xh);
    bo_buf *y = inplace ? x : bo_out(c, BO_F32, n);
    bo_cost(c, NULL, 0, 12.0 * n);
    BO_OP(c, be, h3_groupnorm_frames(be, PF(y), PF(x), C, T, HW, groups, affine ? PF(w) : NULL, affine ? PF(b) : NULL,
                                     1e-6f, silu));
    bo_check(c, inplace ? "x (in place)" : "y", y, r->tol, 0);
    if (c->perf) return;
    bo_buf *x2 = bo_copy(c, x), *y2 = inplace ? bo_out(c, BO_F32, n) : x2;
    BO_OP(c, be, h3_groupnorm_frames(be, PF(y2), PF(x2), C, T, HW, groups, affine ? PF(w) : NULL,
                                     affine ? PF(b) : NULL, 1e-6f, silu));
    bo_same(c, "aliasing", y2, y);
    if (!bo_refs(c)) return;
    float *yh = bo_get(c, y, 0);
    const float *x0 = x->h, *wh = w->h, *bh = b->h;
    double *ref = malloc((size_t)n * sizeof(double));
    const int64_t cg = C / groups;
    for (int64_t t = 0; t < T; t++) /* statistics per frame and group: x is [C, T, HW] */
        for (int g = 0; g < groups; g++) {
            double s = 0, s2 = 0, cnt = (double)(cg * HW);
            for (int64_t ch = g * cg; ch < (g + 1) * cg; ch++)
                for (int64_t i = 0; i < HW; i++) s += x0[(ch * T + t) * HW + i];
            double mean = s / cnt;
            for (int64_t ch = g * cg; ch < (g + 1) * cg; ch++)
                for (int64_t i = 0; i < HW; i++) {
                    double d = x0[(ch * T + t) * HW + i] - mean;
                    s2 += d * d;
                }
            double inv = 1.0 / sqrt(s2 / cnt + 1e-6);
            for (int64_t ch = g * cg; ch < (g + 1) * cg; ch++)
                for (int64_t i = 0; i < HW; i++) {
                    int64_t at = (ch * T + t) * HW + i;
                    double v = (x0[at] - mean) * inv;
                    if (affine) v = v * wh[ch] + bh[ch];
                    if (silu) v = v / (1.0 + exp(-v));
                    ref[at] = v;
                }
        }
    bo_ref(c, "y", yh, ref, n, 1e-5);
    free(yh), free(ref);
}

/* ---- the op families the backend under test reports it has ---- */
static void c_supported(bo_ctx *c, const bo_row *r) {
    bo_assert(c, "h3_ops_supported", h3_ops_supported(c->be[1]) != 0, "every op of the table present");
}
