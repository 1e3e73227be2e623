/* Cases of the fp32-buffer ops (backend.h, ops.h): formerly tests/cuda/test_cuda_ops.c. Included once by
 * tests/test_backend_ops.c. The double-precision references (CPU pass) evaluate sampled rows only (bo_step), so
 * the CPU pass stays quick at the CUDA cases' shapes. Reference tolerances: fp32 1e-5 (GEMM/attention: summation
 * order) or 1e-6 (element-wise, norms); H3_BF16_OUT 1e-2 (a few bf16 roundings of at most 2^-9 each). */
#include "backend/backend_check.h"
#include "backend/ops.h"

#define BO_REF_TOL(flags) (((flags) & H3_BF16_OUT) ? 1e-2 : 1e-6)

/* a row step that samples about `want` of `rows` rows */
static int64_t bo_step(int64_t rows, int64_t want) { return rows > want ? (rows + want - 1) / want : 1; }

static float *bo_widen(const h3_tensor *t) {
    int64_t n = h3_tensor_numel(t);
    float *f = malloc((size_t)n * sizeof(float));
    h3_convert_to_f32(f, t->data, t->dtype, (size_t)n);
    return f;
}

/* ---- matmul: a = M, N, K, weight dtype, bias?, bias dtype, x offset (floats), CUDA widen tile (0: default) ---- */
static void c_matmul(bo_ctx *c, const bo_row *r) {
    const int64_t M = r->a[0], N = r->a[1], K = r->a[2], off = r->a[6];
    int64_t ws[2] = {N, K}, bs[1] = {N};
    if (r->a[7]) bo_widen_tile(c, r->a[7]);
    bo_weight *w = bo_weight_new(c, (h3_dtype)r->a[3], 2, ws, 1.0f / sqrtf((float)K));
    bo_weight *b = r->a[4] ? bo_weight_new(c, (h3_dtype)r->a[5], 1, bs, 0.5f) : NULL;
    bo_buf *x = bo_rand(c, BO_F32, M * K + off, 1.0f, r->flags & H3_BF16_OUT), *y = bo_out(c, BO_F32, M * N);
    bo_cost(c, NULL, 2.0 * M * N * K, 0);
    bo_blas(c, (r->flags & H3_BF16_OUT) ? 2e-4 : 1e-6);
    BO_OP(c, be, h3_matmul(be, PF(y), PF(x) + off, M, PW(w), b ? PW(b) : NULL, r->flags));
    if (r->a[7]) bo_widen_tile(c, 64LL << 20); /* the backend's default */
    bo_check(c, "y", y, r->tol, (r->flags & H3_BF16_OUT) ? BO_BF16R : 0);
    if (!bo_refs(c)) return;
    float *yh = bo_get(c, y, 0), *wf = bo_widen(w->host), *bf = b ? bo_widen(b->host) : NULL;
    const float *xh = (const float *)x->h + off;
    int f16in = (r->flags & H3_F16_IN) && r->a[3] == H3_F16;
    int64_t st = bo_step(M, 24), n = 0;
    double *ref = malloc((size_t)((M / st + 1) * N) * sizeof(double));
    float *got = malloc((size_t)((M / st + 1) * N) * sizeof(float));
    for (int64_t m = 0; m < M; m += st)
        for (int64_t j = 0; j < N; j++, n++) {
            double s = bf ? bf[j] : 0.0;
            for (int64_t k = 0; k < K; k++) {
                double xv = f16in ? h3_f16_to_f32(h3_f32_to_f16(xh[m * K + k])) : xh[m * K + k];
                s += xv * wf[j * K + k];
            }
            ref[n] = s, got[n] = yh[m * N + j];
        }
    bo_ref(c, "y", got, ref, n, (r->flags & H3_BF16_OUT) ? 1e-2 : 1e-5);
    free(yh), free(wf), free(bf), free(ref), free(got);
}

/* ---- attention: q/k/v column slices of wider rows (strides), like a fused QKV buffer.
 * a = Sq, Skv, Hq, Hkv, D, causal, amplitude x1000, 1: CUDA without cuDNN SDPA (the own kernel) ---- */
static void c_attention(bo_ctx *c, const bo_row *r) {
    const int64_t Sq = r->a[0], Skv = r->a[1];
    const int Hq = (int)r->a[2], Hkv = (int)r->a[3], D = (int)r->a[4], causal = (int)r->a[5];
    const float amp = (float)r->a[6] / 1000.0f;
    const int64_t qs = (int64_t)Hq * D + 8, ks = (int64_t)Hkv * D + 24, os = (int64_t)Hq * D + 16;
    const int bf = (r->flags & H3_BF16_OUT) != 0;
    bo_attention_cudnn(c, !r->a[7]);
    bo_buf *q = bo_rand(c, BO_F32, Sq * qs, amp, bf), *k = bo_rand(c, BO_F32, Skv * ks, amp, bf);
    bo_buf *v = bo_rand(c, BO_F32, Skv * ks, 1.0f, bf);
    bo_buf *o;
    if (c->perf) {
        o = bo_out(c, BO_F32, Sq * os);
    } else { /* NaN where written, 0 in the padding columns */
        float *poison = malloc((size_t)(Sq * os) * sizeof(float));
        for (int64_t i = 0; i < Sq * os; i++) poison[i] = i % os < (int64_t)Hq * D ? NAN : 0.0f;
        o = bo_in(c, BO_F32, Sq * os, poison);
        free(poison);
    }
    const float scale = 1.0f / sqrtf((float)D);
    bo_cost(c, NULL, 4.0 * Sq * Skv * Hq * D / (causal ? 2 : 1), 0);
    bo_blas(c, bf ? 2e-4 : 1e-6);
    BO_OP(c, be, h3_attention(be, PF(o), os, PF(q) + 4, qs, PF(k) + 8, ks, PF(v) + 16, ks, Sq, Skv, Hq, Hkv, D,
                              scale, causal, r->flags));
    bo_attention_cudnn(c, 1);
    bo_check(c, "out (padding columns stay 0)", o, r->tol, bf ? BO_BF16R : 0);
    if (!bo_refs(c)) return;
    float *oh = bo_get(c, o, 0);
    const float *qh = (const float *)q->h + 4, *kh = (const float *)k->h + 8, *vh = (const float *)v->h + 16;
    int64_t st = bo_step(Sq, 16), n = 0;
    double *ref = malloc((size_t)((Sq / st + 1) * Hq * D) * sizeof(double)), *p = malloc((size_t)Skv * sizeof(double));
    float *got = malloc((size_t)((Sq / st + 1) * Hq * D) * sizeof(float));
    for (int64_t i = 0; i < Sq; i += st)
        for (int h = 0; h < Hq; h++) {
            int hk = h / (Hq / Hkv);
            int64_t nk = causal ? i + 1 : Skv;
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < nk; j++) {
                double s = 0;
                for (int d = 0; d < D; d++) s += (double)qh[i * qs + h * D + d] * kh[j * ks + hk * D + d];
                p[j] = s * scale;
                if (p[j] > mx) mx = p[j];
            }
            for (int64_t j = 0; j < nk; j++) sum += p[j] = exp(p[j] - mx);
            for (int d = 0; d < D; d++, n++) {
                double acc = 0;
                for (int64_t j = 0; j < nk; j++) acc += p[j] * vh[j * ks + hk * D + d];
                ref[n] = acc / sum, got[n] = oh[i * os + h * D + d];
            }
        }
    bo_ref(c, "out", got, ref, n, bf ? 1e-2 : 1e-5);
    free(oh), free(ref), free(p), free(got);
}

/* ---- norms: a = rows, dim, which (0 rmsnorm + gain, 1 rmsnorm in place without gain, 2 layernorm w+b,
 * 3 layernorm plain, 4 groupnorm), N, C, groups (groupnorm: x is [N, C, rows * dim / (N * C)]) ---- */
static void c_norm(bo_ctx *c, const bo_row *r) {
    const int64_t rows = r->a[0], dim = r->a[1], which = r->a[2], n = rows * dim;
    const int fl = r->flags, bf = (fl & H3_BF16_OUT) != 0;
    const int64_t N = r->a[3], C = r->a[4], L = N && C ? n / (N * C) : 0;
    const int groups = (int)r->a[5];
    bo_buf *x = bo_rand(c, BO_F32, n, which == 1 ? 2.0f : 3.0f, bf);
    int64_t nw = which == 4 ? C : dim;
    bo_buf *w = bo_rand(c, BO_F32, nw, 1.0f, bf), *b = bo_rand(c, BO_F32, nw, 1.0f, bf), *y = bo_out(c, BO_F32, n);
    bo_cost(c, NULL, 0, 8.0 * n);
    if (which == 0) BO_OP(c, be, h3_rmsnorm(be, PF(y), PF(x), rows, dim, PF(w), 1e-5f, fl));
    if (which == 1) BO_OP(c, be, h3_rmsnorm(be, PF(x), PF(x), rows, dim, NULL, 1e-6f, fl));
    if (which == 2) BO_OP(c, be, h3_layernorm(be, PF(y), PF(x), rows, dim, PF(w), PF(b), 1e-6f, fl));
    if (which == 3) BO_OP(c, be, h3_layernorm(be, PF(y), PF(x), rows, dim, NULL, NULL, 1e-6f, fl));
    if (which == 4) BO_OP(c, be, h3_groupnorm(be, PF(y), PF(x), N, C, L, groups, PF(w), PF(b), 1e-6f, fl));
    bo_buf *res = which == 1 ? x : y;
    bo_check(c, which == 1 ? "x (in place)" : "y", res, r->tol, bf ? BO_BF16R : 0);
    if (c->perf) return;
    if (which != 4) { /* y aliasing x (the API allows it) gives the same bits */
        bo_buf *x2 = bo_copy(c, x), *y2 = bo_copy(c, x);
        if (which == 0) BO_OP(c, be, h3_rmsnorm(be, PF(x2), PF(x2), rows, dim, PF(w), 1e-5f, fl));
        if (which == 1) BO_OP(c, be, h3_rmsnorm(be, PF(y2), PF(x2), rows, dim, NULL, 1e-6f, fl));
        if (which == 2) BO_OP(c, be, h3_layernorm(be, PF(x2), PF(x2), rows, dim, PF(w), PF(b), 1e-6f, fl));
        if (which == 3) BO_OP(c, be, h3_layernorm(be, PF(x2), PF(x2), rows, dim, NULL, NULL, 1e-6f, fl));
        bo_same(c, "aliasing", which == 1 ? y2 : x2, res);
    }
    if (!bo_refs(c)) return;
    float *yh = bo_get(c, res, 0);
    const float *xh = x->h, *wh = w->h, *bh = b->h;
    int64_t m = 0, total = which == 4 ? n : (rows / bo_step(rows, 16) + 1) * dim;
    double *ref = malloc((size_t)total * sizeof(double));
    float *got = malloc((size_t)total * sizeof(float));
    if (which == 4) {
        const int64_t cg = C / groups;
        for (int64_t i = 0; i < N; i++)
            for (int g = 0; g < groups; g++) {
                const float *xg = xh + (i * C + g * cg) * L;
                double s = 0, s2 = 0, cnt = (double)(cg * L);
                for (int64_t j = 0; j < cg * L; j++) s += xg[j];
                double mean = s / cnt;
                for (int64_t j = 0; j < cg * L; j++) s2 += (xg[j] - mean) * (xg[j] - mean);
                double inv = 1.0 / sqrt(s2 / cnt + 1e-6);
                for (int64_t j = 0; j < cg * L; j++, m++) {
                    int64_t ch = g * cg + j / L, at = (i * C + g * cg) * L + j;
                    ref[m] = (xg[j] - mean) * inv * wh[ch] + bh[ch], got[m] = yh[at];
                }
            }
    } else {
        for (int64_t i = 0; i < rows; i += bo_step(rows, 16)) {
            const float *xr = xh + i * dim;
            double s = 0, s2 = 0;
            for (int64_t j = 0; j < dim; j++) s += xr[j], s2 += (double)xr[j] * xr[j];
            double mean = s / dim, var = 0;
            for (int64_t j = 0; j < dim; j++) var += (xr[j] - mean) * (xr[j] - mean);
            var /= dim;
            for (int64_t j = 0; j < dim; j++, m++) {
                double v;
                if (which <= 1) v = xr[j] / sqrt(s2 / dim + (which == 0 ? 1e-5 : 1e-6)) * (which == 0 ? wh[j] : 1.0);
                else v = (xr[j] - mean) / sqrt(var + 1e-6) * (which == 2 ? wh[j] : 1.0) + (which == 2 ? bh[j] : 0.0);
                ref[m] = v, got[m] = yh[i * dim + j];
            }
        }
    }
    bo_ref(c, "y", got, ref, m, bf ? 1e-2 : 1e-5);
    free(yh), free(ref), free(got);
}

/* ---- rope_half: a = rows, heads, head_dim, rot_dim, row padding (in place) ---- */
static void c_rope(bo_ctx *c, const bo_row *r) {
    const int64_t rows = r->a[0], nh = r->a[1], hd = r->a[2], rot = r->a[3], stride = nh * hd + r->a[4];
    const int bf = (r->flags & H3_BF16_OUT) != 0;
    bo_buf *x = bo_rand(c, BO_F32, rows * stride, 2.0f, bf);
    float *cs = malloc((size_t)(rows * rot) * sizeof(float)), *sn = malloc((size_t)(rows * rot) * sizeof(float));
    for (int64_t i = 0; i < rows; i++)
        for (int d = 0; d < rot; d++) {
            float th = (float)(i * 3 + 1) * (1.0f + 0.37f * (float)(d % (rot / 2)));
            cs[i * rot + d] = cosf(th), sn[i * rot + d] = sinf(th);
        }
    bo_buf *dc = bo_in(c, BO_F32, rows * rot, cs), *ds = bo_in(c, BO_F32, rows * rot, sn);
    bo_cost(c, NULL, 0, 8.0 * rows * nh * hd);
    BO_OP(c, be, h3_rope_half(be, PF(x), rows, stride, (int)nh, (int)hd, (int)rot, PF(dc), PF(ds), r->flags));
    bo_check(c, "x (in place)", x, r->tol, bf ? BO_BF16R : 0);
    if (bo_refs(c)) {
        float *xh = bo_get(c, x, 0);
        const float *x0 = x->h;
        int64_t n = rows * stride;
        double *ref = malloc((size_t)n * sizeof(double));
        for (int64_t i = 0; i < rows; i++)
            for (int64_t col = 0; col < stride; col++) {
                int64_t h = col / hd, d = col % hd, at = i * stride + col;
                ref[at] = x0[at];
                if (h >= nh || d >= rot) continue;
                double cv = cs[i * rot + d], sv = sn[i * rot + d];
                double other = d < rot / 2 ? -(double)x0[at + rot / 2] : x0[at - rot / 2];
                ref[at] = x0[at] * cv + other * sv;
            }
        bo_ref(c, "x", xh, ref, n, bf ? 1e-2 : 1e-6);
        free(xh), free(ref);
    }
    free(cs), free(sn);
}

/* ---- element-wise: a = which (0 silu, 1 gelu_tanh, 2 gelu_erf, 3 add, 4 mul, 5 scale, 6 add_bias,
 * 7 round_bf16_buf), n, rows, dim (add_bias) ---- */
static double bo_elt_ref(int which, double a, double b) {
    switch (which) {
    case 0: return a / (1.0 + exp(-a));
    case 1: return 0.5 * a * (1.0 + tanh(0.7978845608028654 * (a + 0.044715 * a * a * a)));
    case 2: return 0.5 * a * (1.0 + erf(a / sqrt(2.0)));
    case 3: case 6: return a + b;
    case 4: return a * b;
    case 5: return a * (double)0.7071f;
    default: return a;
    }
}

static void bo_elt_call(h3_backend *be, int which, float *y, const float *a, const float *b, int64_t n, int64_t rows,
                        int64_t dim, int fl) {
    switch (which) {
    case 0: h3_silu(be, y, a, n, fl); break;
    case 1: h3_gelu_tanh(be, y, a, n, fl); break;
    case 2: h3_gelu_erf(be, y, a, n, fl); break;
    case 3: h3_add(be, y, a, b, n, fl); break;
    case 4: h3_mul(be, y, a, b, n, fl); break;
    case 5: h3_scale(be, y, a, 0.7071f, n, fl); break;
    case 6: if (y != a) h3_copy(be, y, a, (size_t)(rows * dim) * sizeof(float));
            h3_add_bias(be, y, b, rows, dim, fl); break;
    default: if (y != a) h3_copy(be, y, a, (size_t)n * sizeof(float));
             h3_round_bf16_buf(be, y, n); break;
    }
}

static void c_eltwise(bo_ctx *c, const bo_row *r) {
    const int which = (int)r->a[0], fl = r->flags, bf = (fl & H3_BF16_OUT) != 0;
    const int64_t rows = r->a[2], dim = r->a[3], n = which == 6 ? rows * dim : r->a[1];
    bo_buf *a = bo_rand(c, BO_F32, n, which == 7 ? 100.0f : 6.0f, bf), *b = bo_rand(c, BO_F32, n, 2.0f, bf);
    bo_buf *y = bo_out(c, BO_F32, n);
    bo_cost(c, NULL, 0, (which >= 3 && which != 5 ? 12.0 : 8.0) * n);
    BO_OP(c, be, bo_elt_call(be, which, PF(y), PF(a), PF(b), n, rows, dim, fl));
    bo_check(c, "y", y, r->tol, bf || which == 7 ? BO_BF16R : 0);
    if (c->perf) return;
    bo_buf *a2 = bo_copy(c, a); /* y aliasing the (first) input */
    BO_OP(c, be, bo_elt_call(be, which, PF(a2), PF(a2), PF(b), n, rows, dim, fl));
    bo_same(c, "y == x", a2, y);
    if (!bo_refs(c)) return;
    float *yh = bo_get(c, y, 0);
    const float *ah = a->h, *bh = b->h;
    double *ref = malloc((size_t)n * sizeof(double));
    for (int64_t i = 0; i < n; i++) ref[i] = bo_elt_ref(which, ah[i], which == 6 ? bh[i % dim] : bh[i]);
    bo_ref(c, "y", yh, ref, n, which == 7 ? 2e-3 : BO_REF_TOL(fl));
    free(yh), free(ref);
}

/* ---- DiT ops: a = which (0 adaln_modulate, 1 gated_residual, 2 swiglu, 3 rows_gather, 4 rows_scatter,
 * 5 qkv_deinterleave), rows, dim, table rows ---- */
static void c_dit(bo_ctx *c, const bo_row *r) {
    const int which = (int)r->a[0], fl = r->flags, bf = (fl & H3_BF16_OUT) != 0;
    const int64_t rows = r->a[1], dim = r->a[2], trows = r->a[3], ts = 6 * dim, n = rows * dim;
    int32_t *idx = malloc((size_t)rows * sizeof(int32_t));
    for (int64_t i = 0; i < rows; i++) idx[i] = (int32_t)((i * 7 + i / 5) % trows);
    const int64_t ng = 100; /* rows_gather / rows_scatter: 100 distinct rows (37 coprime to 300) */
    int32_t gi[100];
    for (int64_t i = 0; i < ng; i++) gi[i] = (int32_t)((i * 37 + 11) % rows);
    bo_buf *x = bo_rand(c, BO_F32, n, 3.0f, bf && which != 5), *t = bo_rand(c, BO_F32, trows * ts, 1.0f, bf);
    bo_buf *br = bo_rand(c, BO_F32, n, 2.0f, bf), *di = bo_in(c, BO_I32, rows, idx), *dg = bo_in(c, BO_I32, ng, gi);
    bo_buf *y = bo_out(c, BO_F32, which == 5 ? 3 * n : n), *f = which == 5 ? bo_rand(c, BO_F32, 3 * n, 1.0f, 0) : br;
    free(idx);
    const int heads = (int)(dim / 128);
    const int64_t inner = dim, R = rows;
    bo_cost(c, NULL, 0, 12.0 * n);
    switch (which) {
    case 0: BO_OP(c, be, h3_adaln_modulate(be, PF(y), PF(x), rows, dim, PF(t), ts, PI(di), 0, dim, fl)); break;
    case 1: y = x; BO_OP(c, be, h3_gated_residual(be, PF(x), PF(br), rows, dim, PF(t), ts, PI(di), 2 * dim, fl)); break;
    case 2: BO_OP(c, be, h3_swiglu(be, PF(y), PF(x), PF(br), n, fl)); break;
    case 3: BO_OP(c, be, h3_rows_gather(be, PF(y), PF(x), PI(dg), ng, dim)); break;
    case 4: {
        float *z = calloc((size_t)n, sizeof(float));
        y = bo_in(c, BO_F32, n, z);
        free(z);
        BO_OP(c, be, h3_rows_scatter(be, PF(y), PF(x), PI(dg), ng, dim, fl));
        break;
    }
    default:
        BO_OP(c, be, h3_qkv_deinterleave(be, PF(y), PF(y) + R * inner, PF(y) + 2 * R * inner, PF(f), R, heads, 128));
    }
    int64_t nout = which == 3 ? ng * dim : y->n;
    if (which == 3) y->n = nout;
    bo_check(c, which == 1 ? "x (in place)" : "y", y, which >= 3 ? 0.0 : r->tol, bf && which != 5 ? BO_BF16R : 0);
    if (!bo_refs(c)) return;
    float *yh = bo_get(c, y, 0);
    const float *xh = x->h, *th = t->h, *bh = br->h;
    double *ref = malloc((size_t)nout * sizeof(double));
    for (int64_t i = 0; i < nout; i++) {
        int64_t row = i / dim, col = i % dim;
        const float *tr = th + (int64_t)((row * 7 + row / 5) % trows) * ts;
        switch (which) {
        case 0: ref[i] = xh[i] * (1.0 + tr[dim + col]) + tr[col]; break;
        case 1: ref[i] = xh[i] + (double)tr[2 * dim + col] * bh[i]; break;
        case 2: ref[i] = xh[i] * (bh[i] / (1.0 + exp(-(double)bh[i]))); break;
        case 3: ref[i] = xh[gi[row] * dim + col]; break;
        case 4: ref[i] = 0.0; break;
        default: {
            int64_t part = i / n, rr = (i % n) / inner, h = (i % inner) / 128, d = i % 128;
            ref[i] = ((const float *)f->h)[rr * 3 * inner + h * 3 * 128 + part * 128 + d];
        }
        }
    }
    if (which == 4)
        for (int64_t k = 0; k < ng; k++)
            for (int64_t col = 0; col < dim; col++) ref[gi[k] * dim + col] = xh[k * dim + col];
    bo_ref(c, "y", yh, ref, nout, which >= 3 ? 0.0 : BO_REF_TOL(fl));
    free(yh), free(ref);
}

/* ---- matmul_rows: a = M, K, N, block_rows, block_stride, block_offset, weight rows (k rows out of an
 * interleaved [q|k|v] weight, or a contiguous slice) ---- */
static void c_matmul_rows(bo_ctx *c, const bo_row *r) {
    const int64_t M = r->a[0], K = r->a[1], N = r->a[2], br = r->a[3], bs = r->a[4], bo = r->a[5];
    const int bf = (r->flags & H3_BF16_OUT) != 0;
    int64_t ws[2] = {r->a[6], K};
    bo_weight *w = bo_weight_new(c, bf ? H3_BF16 : H3_F32, 2, ws, 0.1f);
    bo_buf *x = bo_rand(c, BO_F32, M * K, 1.0f, bf), *y = bo_out(c, BO_F32, M * N);
    bo_cost(c, NULL, 2.0 * M * N * K, 0);
    bo_blas(c, bf ? 2e-4 : 1e-6);
    BO_OP(c, be, h3_matmul_rows(be, PF(y), PF(x), M, PW(w), N, br, bs, bo, r->flags));
    bo_check(c, "y", y, r->tol, bf ? BO_BF16R : 0);
    if (!bo_refs(c)) return;
    float *yh = bo_get(c, y, 0), *wf = bo_widen(w->host);
    const float *xh = x->h;
    double *ref = malloc((size_t)(M * N) * sizeof(double));
    for (int64_t m = 0; m < M; m++)
        for (int64_t j = 0; j < N; j++) {
            int64_t src = (j / br) * bs + bo + j % br;
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += (double)xh[m * K + k] * wf[src * K + k];
            ref[m * N + j] = s;
        }
    bo_ref(c, "y", yh, ref, M * N, bf ? 1e-2 : 1e-5);
    free(yh), free(wf), free(ref);
}

/* ---- device copy (the --perf ceiling of the memory-bound ops): a = elements ---- */
static void c_copy(bo_ctx *c, const bo_row *r) {
    bo_buf *x = bo_rand(c, BO_F32, r->a[0], 1.0f, 0), *y = bo_out(c, BO_F32, r->a[0]);
    bo_cost(c, NULL, 0, 8.0 * r->a[0]);
    BO_OP(c, be, h3_copy(be, PF(y), PF(x), (size_t)r->a[0] * sizeof(float)));
    bo_check(c, "y", y, 0.0, 0);
    bo_same(c, "y == x", y, x);
}

/* ---- h3_count_nonfinite (backend_check.h): a = n, how many NaN/+-Inf to plant (every k-th element from a
 * tail-sized offset), whether to plant huge finite values too (counted as finite), and the dtype (0 fp32, 1 bf16).
 * Both sides count the same buffer; the count must equal the planted number exactly, on every backend. ---- */
static void c_count_nonfinite(bo_ctx *c, const bo_row *r) {
    const int64_t n = r->a[0], bad = r->a[1];
    float *h = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) h[i] = frand() * 4.0f - 2.0f;
    const int64_t step = bad > 0 ? n / bad : 0;
    for (int64_t j = 0; j < bad; j++) {
        const int64_t i = (j * step + 7 * j + 3) % n; /* distinct while 7 * bad < step */
        h[i] = j % 3 == 0 ? NAN : j % 3 == 1 ? INFINITY : -INFINITY;
    }
    const int bf16 = r->a[3] != 0;
    if (r->a[2] && n > 2) /* finite extremes (the largest finite value of the dtype, a subnormal): not counted */
        h[n - 1] = bf16 ? 3.38e38f : 3.4e38f, h[n - 2] = bf16 ? -3.38e38f : -3.4e38f, h[0] = bf16 ? 1e-40f : 1e-45f;
    if (bf16) /* rounded to bf16 in place (inf and NaN stay non-finite), packed into the first half */
        for (int64_t i = 0; i < n; i++) ((uint16_t *)h)[i] = h3_f32_to_bf16(h[i]);
    bo_buf *x = bo_in(c, bf16 ? BO_BF16 : BO_F32, n, h);
    free(h);
    int64_t got[2] = {-2, -2};
    bo_cost(c, NULL, 0, (bf16 ? 2.0 : 4.0) * n);
    BO_OP(c, be, got[c->side] = h3_count_nonfinite(be, x->p[c->side], bf16 ? H3_BF16 : H3_F32, n));
    if (c->perf) return;
    char what[96];
    snprintf(what, sizeof what, "counts %lld / %lld, planted %lld", (long long)got[0], (long long)got[1], (long long)bad);
    bo_assert(c, "count", got[0] == bad && got[1] == bad, what);
}

/* ---- h3_tally_nonfinite (backend_check.h): the same planted buffer as count_nonfinite's case, counted twice into
 * the second of two zeroed device counters and read back after a sync: the second must be 2 x planted (the count is
 * added, not stored), the first untouched; exact on every backend. ---- */
static void c_tally_nonfinite(bo_ctx *c, const bo_row *r) {
    const int64_t n = r->a[0], bad = r->a[1];
    const int bf16 = r->a[3] != 0;
    float *h = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) h[i] = frand() * 4.0f - 2.0f;
    const int64_t step = bad > 0 ? n / bad : 0;
    for (int64_t j = 0; j < bad; j++) h[(j * step + 7 * j + 3) % n] = j % 2 ? NAN : -INFINITY;
    if (bf16)
        for (int64_t i = 0; i < n; i++) ((uint16_t *)h)[i] = h3_f32_to_bf16(h[i]);
    bo_buf *x = bo_in(c, bf16 ? BO_BF16 : BO_F32, n, h);
    free(h);
    bo_buf *tally = bo_track(c, BO_I32, 4); /* two uint64 counters, zeroed by h3_alloc */
    int rc[2] = {-2, -2};
    bo_cost(c, NULL, 0, 2 * (bf16 ? 2.0 : 4.0) * n);
    BO_OP(c, be, {
        uint64_t *t = (uint64_t *)tally->p[c->side] + 1;
        rc[c->side] = h3_tally_nonfinite(be, t, x->p[c->side], bf16 ? H3_BF16 : H3_F32, n);
        if (!rc[c->side]) rc[c->side] = h3_tally_nonfinite(be, t, x->p[c->side], bf16 ? H3_BF16 : H3_F32, n);
    });
    if (c->perf) return;
    for (int s = 0; s < 2; s++) {
        uint64_t *got = bo_get(c, tally, s);
        char what[128];
        snprintf(what, sizeof what, "side %d: rc %d, counters %llu %llu, planted %lld (x2 expected in the second)", s,
                 rc[s], (unsigned long long)got[0], (unsigned long long)got[1], (long long)bad);
        bo_assert(c, "tally", rc[s] == 0 && got[0] == 0 && got[1] == 2 * (uint64_t)bad, what);
        free(got);
    }
}

/* ---- copy_2d: a = rows, width, source pitch, destination pitch (bytes); the bytes between rows stay as they were
 * (0xff poison), each row's width bytes are the source's ---- */
static void c_copy_2d(bo_ctx *c, const bo_row *r) {
    const int64_t rows = r->a[0], width = r->a[1], sp = r->a[2], dp = r->a[3];
    uint8_t *src = malloc((size_t)(rows * sp)), *want = malloc((size_t)(rows * dp));
    for (int64_t i = 0; i < rows * sp; i++) src[i] = (uint8_t)(frand() * 127.0f + 128.0f);
    memset(want, 0xff, (size_t)(rows * dp));
    for (int64_t i = 0; i < rows; i++) memcpy(want + i * dp, src + i * sp, (size_t)width);
    bo_buf *s = bo_in(c, BO_U8, rows * sp, src), *d = bo_out(c, BO_U8, rows * dp);
    bo_cost(c, NULL, 0, 2.0 * (double)(rows * width));
    BO_OP(c, be, h3_copy_2d(be, PU(d), (size_t)dp, PU(s), (size_t)sp, (size_t)width, (size_t)rows));
    bo_check(c, "dst", d, 0.0, 0);
    if (bo_refs(c)) {
        uint8_t *g = bo_get(c, d, 0);
        CHECK(!memcmp(g, want, (size_t)(rows * dp)), "[%s] copy_2d %s: the rows or the gaps between them differ "
              "from the expected bytes", c->tag, r->name);
        bo_line(c, "dst vs expected bytes", memcmp(g, want, (size_t)(rows * dp)) ? "differ" : "bit-identical");
        free(g);
    }
    free(src), free(want);
}
