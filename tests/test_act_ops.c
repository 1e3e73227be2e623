/* The activation-dtype ops (ops_act.h) against the ops they stand for, bit for bit, in both dtypes: fp32 the
 * fp32-buffer ops without H3_BF16_OUT in the unfused order, bf16 the h3_bf16_* op (or its _q form). The DiT's two
 * precisions run through these (dit_block.c), so its outputs stay those of the separate ops. CPU backend (backend
 * memory is host memory). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_data.h"
#include "backend/backend.h"
#include "backend/ops.h"
#include "backend/ops_act.h"
#include "core/dtype.h"
#include "core/tensor.h"

static h3_backend *be;

/* n random activations of dtype act (bf16 values in either dtype) */
static void *rnd(h3_dtype act, int64_t n, float scale) {
    float *f = rand_host(n, scale, 1);
    if (act == H3_F32) return f;
    h3_bf16 *b = malloc((size_t)(n > 0 ? n : 1) * 2);
    for (int64_t i = 0; i < n; i++) b[i] = h3_f32_to_bf16(f[i]);
    free(f);
    return b;
}

static void *dup(const void *p, size_t bytes) {
    void *d = malloc(bytes ? bytes : 1);
    memcpy(d, p, bytes);
    return d;
}

#define SAME(name, a, b, bytes)                                                                              \
    do {                                                                                                     \
        int same_ = memcmp((a), (b), (bytes)) == 0;                                                          \
        printf("  %-60s %s\n", (name), same_ ? "same bits" : "DIFFER");                                     \
        CHECK(same_, "%s: the act op differs from the op it stands for", (name));                           \
    } while (0)

static const char *dn(h3_dtype act) { return act == H3_F32 ? "f32" : "bf16"; }

/* The ops h3_act_gated_residual_rmsnorm_modulate stands for, on x2 with the norm into y2 (y2 == x2: in place) */
static void ref_gated_residual_norm(h3_dtype act, void *x2, const void *br, void *y2, int64_t rows, int64_t dim,
                                    const float *t, int64_t stride, const int32_t *idx, const float *w) {
    if (act == H3_BF16) {
        h3_bf16_gated_residual_rmsnorm_modulate(be, x2, br, y2, rows, dim, t, stride, idx, 5 * dim, w, 1e-5f, t,
                                                stride, idx, 3 * dim, 4 * dim);
        return;
    }
    if (t) h3_gated_residual(be, x2, br, rows, dim, t, stride, idx, 5 * dim, 0);
    else h3_add(be, x2, x2, br, rows * dim, 0);
    h3_rmsnorm(be, y2, x2, rows, dim, w, 1e-5f, 0);
    if (t) h3_adaln_modulate(be, y2, y2, rows, dim, t, stride, idx, 3 * dim, 4 * dim, 0);
}

/* rmsnorm + modulate, gated residual, residual + norm (with and without tables, and the _q forms in bf16) */
static void test_norms(h3_dtype act, int64_t rows, int64_t dim) {
    char name[96];
    const size_t es = h3_dtype_size(act), nb = (size_t)(rows * dim) * es;
    const int64_t K = 2, stride = 6 * dim;
    float *tab = rand_host(K * stride, 0.5f, 0), *w = rand_offset(dim, 0.2f, 1.0f);
    int32_t *idx = malloc((size_t)rows * sizeof *idx);
    for (int64_t r = 0; r < rows; r++) idx[r] = (int32_t)(r % K);
    void *x = rnd(act, rows * dim, 2.0f), *br = rnd(act, rows * dim, 1.0f);
    void *y1 = calloc(1, nb), *y2 = calloc(1, nb);
    uint8_t *q1 = calloc(1, (size_t)(rows * dim)), *q2 = calloc(1, (size_t)(rows * dim));
    float *s1 = calloc((size_t)rows + 1, 4), *s2 = calloc((size_t)rows + 1, 4);
    h3_rowq rq1 = {H3_ROWQ_FP8, q1, s1, 0}, rq2 = {H3_ROWQ_FP8, q2, s2, 0};
    for (int with_table = 0; with_table < 2; with_table++) {
        const float *t = with_table ? tab : NULL;
        h3_act_rmsnorm_modulate(be, act, y1, x, rows, dim, w, 1e-5f, t, stride, idx, 0, dim, NULL);
        if (act == H3_F32) {
            h3_rmsnorm(be, y2, x, rows, dim, w, 1e-5f, 0);
            if (t) h3_adaln_modulate(be, y2, y2, rows, dim, t, stride, idx, 0, dim, 0);
        } else {
            h3_bf16_rmsnorm_modulate(be, y2, x, rows, dim, w, 1e-5f, t, stride, idx, 0, dim);
        }
        snprintf(name, sizeof name, "%s rmsnorm_modulate %lldx%lld%s", dn(act), (long long)rows, (long long)dim,
                 t ? "" : " (no table)");
        SAME(name, y1, y2, nb);

        void *x1 = dup(x, nb), *x2 = dup(x, nb);
        h3_act_gated_residual(be, act, x1, br, rows, dim, t, stride, idx, 2 * dim);
        if (act == H3_BF16) h3_bf16_gated_residual(be, x2, br, rows, dim, t, stride, idx, 2 * dim);
        else if (t) h3_gated_residual(be, x2, br, rows, dim, t, stride, idx, 2 * dim, 0);
        else h3_add(be, x2, x2, br, rows * dim, 0);
        snprintf(name, sizeof name, "%s gated_residual%s", dn(act), t ? "" : " (no table: add)");
        SAME(name, x1, x2, nb);

        memcpy(x1, x, nb), memcpy(x2, x, nb);
        h3_act_gated_residual_rmsnorm_modulate(be, act, x1, br, y1, rows, dim, t, stride, idx, 5 * dim, w, 1e-5f, t,
                                               stride, idx, 3 * dim, 4 * dim, NULL);
        ref_gated_residual_norm(act, x2, br, y2, rows, dim, t, stride, idx, w);
        snprintf(name, sizeof name, "%s gated_residual_rmsnorm_modulate%s (x, y)", dn(act), t ? "" : " (no tables)");
        SAME(name, x1, x2, nb);
        SAME(name, y1, y2, nb);

        memcpy(x1, x, nb), memcpy(x2, x, nb); /* in place: y == x (the refiner's final norm) */
        h3_act_gated_residual_rmsnorm_modulate(be, act, x1, br, x1, rows, dim, t, stride, idx, 5 * dim, w, 1e-5f, t,
                                               stride, idx, 3 * dim, 4 * dim, NULL);
        ref_gated_residual_norm(act, x2, br, x2, rows, dim, t, stride, idx, w);
        snprintf(name, sizeof name, "%s gated_residual_rmsnorm_modulate in place%s", dn(act), t ? "" : " (no tables)");
        SAME(name, x1, x2, nb);

        if (act == H3_BF16) { /* the _q forms: the same rows and their codes */
            h3_act_rmsnorm_modulate(be, act, y1, x, rows, dim, w, 1e-5f, t, stride, idx, 0, dim, &rq1);
            h3_bf16_rmsnorm_modulate_q(be, y2, x, rows, dim, w, 1e-5f, t, stride, idx, 0, dim, &rq2);
            SAME("bf16 rmsnorm_modulate with codes (_q): rows", y1, y2, nb);
            SAME("bf16 rmsnorm_modulate with codes (_q): codes", q1, q2, (size_t)(rows * dim));
            SAME("bf16 rmsnorm_modulate with codes (_q): scales", s1, s2, (size_t)rows * 4);
            memcpy(x1, x, nb), memcpy(x2, x, nb);
            h3_act_gated_residual_rmsnorm_modulate(be, act, x1, br, y1, rows, dim, t, stride, idx, 5 * dim, w, 1e-5f,
                                                   t, stride, idx, 0, dim, &rq1);
            h3_bf16_gated_residual_rmsnorm_modulate_q(be, x2, br, y2, rows, dim, t, stride, idx, 5 * dim, w, 1e-5f, t,
                                                      stride, idx, 0, dim, &rq2);
            SAME("bf16 gated_residual_rmsnorm_modulate (_q): x", x1, x2, nb);
            SAME("bf16 gated_residual_rmsnorm_modulate (_q): rows", y1, y2, nb);
            SAME("bf16 gated_residual_rmsnorm_modulate (_q): codes", q1, q2, (size_t)(rows * dim));
        }
        free(x1), free(x2);
    }
    free(tab), free(w), free(idx), free(x), free(br), free(y1), free(y2), free(q1), free(q2), free(s1), free(s2);
}

/* q/k norm + RoPE and the attention on q|k|v heads: fp32 on separate contiguous buffers, bf16 on a fused [S, 3I]
 * projection output (per-head [q k v] columns when interleaved, as the original layout's) */
static void test_attention(h3_dtype act, int64_t S, int heads, int D, int interleaved) {
    char name[96];
    const int64_t I = (int64_t)heads * D, ld = act == H3_F32 ? I : 3 * I, hs = act == H3_F32 || !interleaved ? D : 3 * D;
    const int rot = D / 2 + D / 4;
    const size_t es = h3_dtype_size(act);
    const size_t nb = act == H3_F32 ? (size_t)(3 * S * I) * es : (size_t)(S * ld) * es;
    float *cos = rand_host(S * rot, 1.0f, 0), *sin = rand_host(S * rot, 1.0f, 0);
    float *wq = rand_offset(D, 0.2f, 1.0f), *wk = rand_offset(D, 0.2f, 1.0f);
    void *buf = rnd(act, (int64_t)(nb / es), 1.0f), *b1 = dup(buf, nb), *b2 = dup(buf, nb);
    /* q, k, v of each copy: fp32 three [S, I] blocks, bf16 column offsets of the fused rows */
    const int64_t off_k = act == H3_F32 ? S * I : interleaved ? D : I, off_v = 2 * off_k;
    uint8_t *p1 = b1, *p2 = b2;
    for (int rope = 0; rope < 2; rope++) {
        const float *c = rope ? cos : NULL, *s = rope ? sin : NULL;
        memcpy(b1, buf, nb), memcpy(b2, buf, nb);
        h3_act_qk_norm_rope(be, act, p1, p1 + off_k * es, S, ld, heads, hs, D, wq, wk, 1e-6f, rot, c, s);
        if (act == H3_BF16) {
            h3_bf16_head_norm_rope(be, (h3_bf16 *)p2, S, ld, heads, hs, D, wq, 1e-6f, rot, c, s);
            h3_bf16_head_norm_rope(be, (h3_bf16 *)(p2 + off_k * es), S, ld, heads, hs, D, wk, 1e-6f, rot, c, s);
        } else {
            h3_rmsnorm(be, (float *)p2, (float *)p2, S * heads, D, wq, 1e-6f, 0);
            h3_rmsnorm(be, (float *)(p2 + off_k * es), (float *)(p2 + off_k * es), S * heads, D, wk, 1e-6f, 0);
            if (c) {
                h3_rope_half(be, (float *)p2, S, ld, heads, D, rot, c, s, 0);
                h3_rope_half(be, (float *)(p2 + off_k * es), S, ld, heads, D, rot, c, s, 0);
            }
        }
        snprintf(name, sizeof name, "%s qk_norm_rope S %lld, %d heads of %d%s%s", dn(act), (long long)S, heads, D,
                 rope ? ", RoPE" : "", interleaved ? ", interleaved" : "");
        SAME(name, b1, b2, nb);
    }
    const size_t ob = (size_t)(S * I) * es;
    void *o1 = calloc(1, ob), *o2 = calloc(1, ob);
    const float scale = 1.0f / sqrtf((float)D);
    h3_act_attention(be, act, o1, I, p1, p1 + off_k * es, p1 + off_v * es, ld, hs, S, heads, D, scale);
    if (act == H3_BF16)
        h3_bf16_attention(be, o2, I, (h3_bf16 *)p1, ld, hs, (h3_bf16 *)(p1 + off_k * es), ld, hs,
                          (h3_bf16 *)(p1 + off_v * es), ld, hs, S, S, heads, heads, D, scale);
    else
        h3_attention(be, o2, I, (float *)p1, ld, (float *)(p1 + off_k * es), ld, (float *)(p1 + off_v * es), ld, S, S,
                     heads, heads, D, scale, 0, 0);
    snprintf(name, sizeof name, "%s attention S %lld, %d heads of %d%s", dn(act), (long long)S, heads, D,
             interleaved ? ", interleaved" : "");
    SAME(name, o1, o2, ob);
    free(cos), free(sin), free(wq), free(wk), free(buf), free(b1), free(b2), free(o1), free(o2);
}

/* the GEMM (bf16: into a column slice of a wider buffer), the row moves and the widening */
static void test_matmul_rows(h3_dtype act, int64_t M, int64_t N, int64_t K) {
    char name[96];
    h3_err e;
    const size_t es = h3_dtype_size(act);
    int64_t shape[2] = {N, K}, bshape[1] = {N};
    h3_tensor *w = h3_tensor_new(H3_BF16, 2, shape, &e), *b = h3_tensor_new(H3_F32, 1, bshape, &e);
    float *wf = rand_host(N * K, 1.0f / sqrtf((float)K), 1);
    h3_convert_from_f32(w->data, H3_BF16, wf, (size_t)(N * K));
    free(b->data), b->data = rand_host(N, 0.1f, 0);
    const int64_t ldy = act == H3_F32 ? N : N + 7, ldx = K;
    void *x = rnd(act, M * ldx, 1.0f), *y1 = calloc((size_t)(M * ldy), es), *y2 = calloc((size_t)(M * ldy), es);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        const h3_tensor *bias = with_bias ? b : NULL;
        h3_act_matmul(be, act, y1, ldy, x, ldx, M, w, bias);
        if (act == H3_BF16) h3_bf16_matmul(be, y2, ldy, x, ldx, M, w, bias);
        else h3_matmul(be, y2, x, M, w, bias, 0);
        snprintf(name, sizeof name, "%s matmul %lldx%lldx%lld%s", dn(act), (long long)M, (long long)N, (long long)K,
                 bias ? " + bias" : "");
        SAME(name, y1, y2, (size_t)(M * ldy) * es);
    }
    /* rows: n of the M rows of x (width K) moved by a permutation */
    const int64_t n = M / 2 + 1;
    int32_t *idx = malloc((size_t)n * sizeof *idx);
    for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)((i * 7 + 3) % M);
    const size_t nb = (size_t)(M * K) * es;
    void *d1 = dup(x, nb), *d2 = dup(x, nb), *src = rnd(act, n * K, 1.0f);
    float *f = rand_host(n * K, 3.0f, 0), *g1 = calloc((size_t)(M * K) + 1, 4), *g2 = calloc((size_t)(M * K) + 1, 4);
    h3_act_rows_scatter(be, act, d1, src, idx, n, K);
    if (act == H3_BF16) h3_bf16_rows_scatter(be, d2, src, idx, n, K);
    else h3_rows_scatter(be, d2, src, idx, n, K, 0);
    snprintf(name, sizeof name, "%s rows_scatter %lld of %lld rows", dn(act), (long long)n, (long long)M);
    SAME(name, d1, d2, nb);
    h3_act_rows_scatter_f32(be, act, d1, f, idx, n, K);
    if (act == H3_BF16) h3_bf16_rows_scatter_f32(be, d2, f, idx, n, K);
    else h3_rows_scatter(be, d2, f, idx, n, K, 0);
    snprintf(name, sizeof name, "%s rows_scatter_f32", dn(act));
    SAME(name, d1, d2, nb);
    h3_act_rows_gather_f32(be, act, g1, d1, idx, n, K);
    if (act == H3_BF16) h3_bf16_rows_gather_f32(be, g2, d1, idx, n, K);
    else h3_rows_gather(be, g2, d1, idx, n, K);
    snprintf(name, sizeof name, "%s rows_gather_f32", dn(act));
    SAME(name, g1, g2, (size_t)(n * K) * 4);
    h3_act_to_f32(be, act, g1, x, M * K);
    if (act == H3_BF16) h3_bf16_unpack(be, g2, x, M * K);
    else memcpy(g2, x, (size_t)(M * K) * 4);
    snprintf(name, sizeof name, "%s to_f32", dn(act));
    SAME(name, g1, g2, (size_t)(M * K) * 4);
    h3_tensor_free(w), h3_tensor_free(b);
    free(wf), free(x), free(y1), free(y2), free(idx), free(d1), free(d2), free(src), free(f), free(g1), free(g2);
}

int main(void) {
    h3_err e;
    test_seed(0x9E3779B97F4A7C15ull);
    be = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    if (!be) {
        fprintf(stderr, "%s\n", e.msg);
        return 2;
    }
    const h3_dtype acts[2] = {H3_F32, H3_BF16};
    for (int a = 0; a < 2; a++) {
        test_norms(acts[a], 23, 48);
        test_norms(acts[a], 5, 1000);
        test_attention(acts[a], 37, 3, 32, 0);
        test_matmul_rows(acts[a], 29, 40, 48);
    }
    test_attention(H3_BF16, 19, 2, 64, 1);
    h3_backend_free(be);
    TEST_END();
}
