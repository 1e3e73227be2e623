/* The CPU twins of the bf16 activation ops (ops.h) against the fp32-buffer ops of backend.h /
 * ops.h in their H3_BF16_OUT mode, on the same bf16 values: the two paths must agree bit for
 * bit (the DiT's bf16 mode switched from one to the other; test_dit checks it against diffusers). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_data.h"
#include "backend/backend.h"
#include "backend/ops.h"
#include "core/dtype.h"
#include "core/tensor.h"

static h3_backend *be;

/* n random bf16 values, as bf16 and as (exact) fp32 */
static void rand_pair(int64_t n, float scale, h3_bf16 **b, float **f) {
    *b = malloc((size_t)n * 2), *f = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        (*b)[i] = h3_f32_to_bf16(frand() * scale);
        (*f)[i] = h3_bf16_to_f32((*b)[i]);
    }
}

/* count of elements where bf16 y differs from fp32 ref (which must hold bf16 values) */
static int64_t mismatches(const h3_bf16 *y, int64_t ldy, const float *ref, int64_t ldr, int64_t rows, int64_t cols) {
    int64_t bad = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            uint32_t a, b;
            float fa = h3_bf16_to_f32(y[r * ldy + c]), fb = ref[r * ldr + c];
            memcpy(&a, &fa, 4), memcpy(&b, &fb, 4);
            bad += a != b;
        }
    return bad;
}

#define SAME(name, y, ldy, ref, ldr, rows, cols)                                                      \
    do {                                                                                              \
        int64_t bad_ = mismatches((y), (ldy), (ref), (ldr), (rows), (cols));                          \
        printf("  %-56s %lld of %lld differ\n", (name), (long long)bad_, (long long)((rows) * (cols))); \
        CHECK(bad_ == 0, "%s: %lld elements differ", (name), (long long)bad_);                         \
    } while (0)

static h3_tensor *bf16_weight(int64_t N, int64_t K, h3_dtype t) {
    h3_err e;
    int64_t shape[2] = {N, K};
    h3_tensor *w = h3_tensor_new(t, K ? 2 : 1, K ? shape : &shape[0], &e);
    int64_t n = h3_tensor_numel(w);
    float *v = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) v[i] = frand() / sqrtf((float)(K ? K : 4));
    h3_convert_from_f32(w->data, t, v, (size_t)n);
    free(v);
    return w;
}

static void test_matmul(int64_t M, int64_t N, int64_t K, h3_dtype bias_t) {
    h3_tensor *w = bf16_weight(N, K, H3_BF16), *b = bias_t ? bf16_weight(N, 0, bias_t) : NULL;
    h3_bf16 *xb;
    float *xf;
    rand_pair(M * (K + 3), 1.0f, &xb, &xf);
    /* x with row stride K + 3, y a column slice at offset 5 of rows of N + 9 */
    float *xc = malloc((size_t)(M * K) * sizeof(float)), *yf = malloc((size_t)(M * N) * sizeof(float));
    for (int64_t r = 0; r < M; r++) memcpy(xc + r * K, xf + r * (K + 3), (size_t)K * sizeof(float));
    h3_matmul(be, yf, xc, M, w, b, H3_BF16_OUT);
    h3_bf16 *y = calloc((size_t)(M * (N + 9)), 2);
    h3_bf16_matmul(be, y + 5, N + 9, xb, K + 3, M, w, b);
    char name[96];
    snprintf(name, sizeof name, "matmul %lldx%lldx%lld, strided, bias %s", (long long)M, (long long)N, (long long)K,
             b ? h3_dtype_name(bias_t) : "none");
    SAME(name, y + 5, N + 9, yf, N, M, N);
    int64_t outside = 0;
    for (int64_t r = 0; r < M; r++)
        for (int64_t c = 0; c < N + 9; c++) outside += (c < 5 || c >= N + 5) && y[r * (N + 9) + c] != 0;
    CHECK(outside == 0, "matmul wrote %lld elements outside its column slice", (long long)outside);
    h3_tensor_free(w), h3_tensor_free(b);
    free(xb), free(xf), free(xc), free(yf), free(y);
}

static void test_norm_modulate(int64_t rows, int64_t dim) {
    h3_bf16 *xb;
    float *xf, *w = malloc((size_t)dim * sizeof(float)), *tab = malloc((size_t)(4 * 6 * dim) * sizeof(float));
    rand_pair(rows * dim, 3.0f, &xb, &xf);
    for (int64_t i = 0; i < dim; i++) w[i] = h3_round_bf16(1.0f + 0.2f * frand());
    for (int64_t i = 0; i < 4 * 6 * dim; i++) tab[i] = h3_round_bf16(0.5f * frand());
    int32_t *idx = malloc((size_t)rows * sizeof(int32_t));
    for (int64_t r = 0; r < rows; r++) idx[r] = (int32_t)(r % 4);
    float *ref = malloc((size_t)(rows * dim) * sizeof(float));
    h3_bf16 *y = malloc((size_t)(rows * dim) * 2);
    h3_rmsnorm(be, ref, xf, rows, dim, w, 1e-5f, H3_BF16_OUT);
    h3_bf16_rmsnorm_modulate(be, y, xb, rows, dim, w, 1e-5f, NULL, 0, NULL, 0, 0);
    SAME("rmsnorm", y, dim, ref, dim, rows, dim);
    h3_adaln_modulate(be, ref, ref, rows, dim, tab, 6 * dim, idx, 3 * dim, 4 * dim, H3_BF16_OUT);
    h3_bf16_rmsnorm_modulate(be, y, xb, rows, dim, w, 1e-5f, tab, 6 * dim, idx, 3 * dim, 4 * dim);
    SAME("rmsnorm + adaln_modulate", y, dim, ref, dim, rows, dim);
    /* gated residual and plain add */
    h3_bf16 *bb;
    float *bf;
    rand_pair(rows * dim, 2.0f, &bb, &bf);
    h3_gated_residual(be, xf, bf, rows, dim, tab, 6 * dim, idx, 2 * dim, H3_BF16_OUT);
    h3_bf16_gated_residual(be, xb, bb, rows, dim, tab, 6 * dim, idx, 2 * dim);
    SAME("gated_residual", xb, dim, xf, dim, rows, dim);
    h3_add(be, xf, xf, bf, rows * dim, H3_BF16_OUT);
    h3_bf16_gated_residual(be, xb, bb, rows, dim, NULL, 0, NULL, 0);
    SAME("residual add (no gate)", xb, dim, xf, dim, rows, dim);
    free(xb), free(xf), free(w), free(tab), free(idx), free(ref), free(y), free(bb), free(bf);
}

/* count of elements where two bf16 buffers differ, printed and checked like SAME */
static void same16(const char *name, const h3_bf16 *a, const h3_bf16 *b, int64_t n) {
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) bad += a[i] != b[i];
    printf("  %-56s %lld of %lld differ\n", name, (long long)bad, (long long)n);
    CHECK(bad == 0, "%s: %lld elements differ", name, (long long)bad);
}

/* The fused gated residual + RMSNorm/modulation against the two ops it replaces (x and y bit for bit), on a
 * DiT-like AdaLN table: 2 blocks x 2 timesteps x 3 modalities rows of 6 slots, row_index = timestep * 3 + tag.
 * The gate is block 0's slot 2 (gated) and the modulation block 0's slots 3/4 or, next_block, block 1's slots 0/1
 * (the FFN residual fused with the next block's norm1). in_place: y aliases x (the refiner's final norm). */
static void test_residual_norm(const char *name, int64_t rows, int64_t dim, int gated, int modulated, int gain,
                               int next_block, int in_place) {
    const int64_t slot = dim, row6 = 6 * dim, per_block = 2 * 3 * row6;
    float *tab = malloc((size_t)(2 * per_block) * sizeof(float)), *w = malloc((size_t)dim * sizeof(float));
    for (int64_t i = 0; i < 2 * per_block; i++) tab[i] = h3_round_bf16(0.5f * frand());
    for (int64_t i = 0; i < dim; i++) w[i] = h3_round_bf16(1.0f + 0.2f * frand());
    int32_t *idx = malloc((size_t)rows * sizeof(int32_t));
    for (int64_t r = 0; r < rows; r++) idx[r] = (int32_t)((r * 2 / (rows > 1 ? rows : 1)) * 3 + (r * 7) % 3);
    h3_bf16 *x, *br;
    float *xf, *bf;
    rand_pair(rows * dim, 3.0f, &x, &xf);
    rand_pair(rows * dim, 2.0f, &br, &bf);
    const float *gt = gated ? tab : NULL, *mt = modulated ? tab + (next_block ? per_block : 0) : NULL;
    const int64_t sh = next_block ? 0 * slot : 3 * slot, sc = next_block ? 1 * slot : 4 * slot;
    const float *gw = gain ? w : NULL;
    /* y with a guard element on each side (0x7fc0: NaN) that must stay */
    const int64_t n = rows * dim;
    h3_bf16 *xr = malloc((size_t)n * 2), *yr = malloc((size_t)n * 2), *xs = malloc((size_t)n * 2);
    h3_bf16 *ys = malloc((size_t)(n + 2) * 2);
    for (int64_t i = 0; i < n + 2; i++) ys[i] = 0x7fc0;
    memcpy(xr, x, (size_t)n * 2), memcpy(xs, x, (size_t)n * 2);
    h3_bf16_gated_residual(be, xr, br, rows, dim, gt, row6, idx, 2 * slot);
    h3_bf16_rmsnorm_modulate(be, in_place ? xr : yr, xr, rows, dim, gw, 1e-6f, mt, row6, idx, sh, sc);
    h3_bf16 *y = in_place ? xs : ys + 1;
    h3_bf16_gated_residual_rmsnorm_modulate(be, xs, br, y, rows, dim, gt, row6, idx, 2 * slot, gw, 1e-6f, mt, row6,
                                            idx, sh, sc);
    char label[112];
    snprintf(label, sizeof label, "%s: x", name);
    same16(label, xs, xr, n);
    if (!in_place) {
        snprintf(label, sizeof label, "%s: y", name);
        same16(label, y, yr, n);
        CHECK(ys[0] == 0x7fc0 && ys[n + 1] == 0x7fc0, "%s: wrote outside y", name);
    }
    free(tab), free(w), free(idx), free(x), free(xf), free(br), free(bf), free(xr), free(yr), free(xs), free(ys);
}

/* per-head q norm + RoPE on the q third of an interleaved [rows][heads][q k v][D] buffer */
static void test_head_norm_rope(int64_t rows, int heads, int D, int rot) {
    int64_t I = (int64_t)heads * D, rs = 3 * I;
    h3_bf16 *xb;
    float *xf;
    rand_pair(rows * rs, 3.0f, &xb, &xf);
    float *w = malloc((size_t)D * sizeof(float)), *cs = malloc((size_t)(rows * rot) * sizeof(float));
    float *sn = malloc((size_t)(rows * rot) * sizeof(float)), *q = malloc((size_t)(rows * I) * sizeof(float));
    for (int d = 0; d < D; d++) w[d] = 1.0f + 0.2f * frand();
    for (int64_t i = 0; i < rows * rot; i++) cs[i] = cosf(3.0f * frand()), sn[i] = sinf(3.0f * frand());
    for (int64_t r = 0; r < rows; r++)
        for (int h = 0; h < heads; h++) memcpy(q + r * I + h * D, xf + r * rs + h * 3 * D, (size_t)D * sizeof(float));
    h3_rmsnorm(be, q, q, rows * heads, D, w, 1e-5f, H3_BF16_OUT);
    h3_rope_half(be, q, rows, I, heads, D, rot, cs, sn, H3_BF16_OUT);
    h3_bf16_head_norm_rope(be, xb, rows, rs, heads, 3 * D, D, w, 1e-5f, rot, cs, sn);
    int64_t bad = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int h = 0; h < heads; h++) bad += mismatches(xb + r * rs + h * 3 * D, 0, q + r * I + h * D, 0, 1, D);
    printf("  %-56s %lld differ\n", "head rmsnorm + rope (interleaved heads)", (long long)bad);
    CHECK(bad == 0, "head_norm_rope: %lld elements differ", (long long)bad);
    /* k and v thirds untouched */
    int64_t touched = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int h = 0; h < heads; h++)
            for (int d = D; d < 3 * D; d++)
                touched += h3_bf16_to_f32(xb[r * rs + h * 3 * D + d]) != xf[r * rs + h * 3 * D + d];
    CHECK(touched == 0, "head_norm_rope changed %lld elements outside q", (long long)touched);
    free(xb), free(xf), free(w), free(cs), free(sn), free(q);
}

static void test_attention_swiglu(void) {
    int64_t S = 70, H = 3, D = 32, I = H * D, rs = 3 * I;
    h3_bf16 *qkv;
    float *qkvf;
    rand_pair(S * rs, 2.0f, &qkv, &qkvf);
    float *o = malloc((size_t)(S * I) * sizeof(float));
    h3_attention(be, o, I, qkvf, rs, qkvf + I, rs, qkvf + 2 * I, rs, S, S, (int)H, (int)H, (int)D, 0.17f, 0,
                 H3_BF16_OUT);
    h3_bf16 *ob = malloc((size_t)(S * I) * 2);
    h3_bf16_attention(be, ob, I, qkv, rs, D, qkv + I, rs, D, qkv + 2 * I, rs, D, S, S, (int)H, (int)H, (int)D, 0.17f);
    SAME("attention on planar qkv heads", ob, I, o, I, S, I);
    int64_t FF = 40;
    h3_bf16 *z;
    float *zf, *val = malloc((size_t)(S * FF) * sizeof(float)), *gate = malloc((size_t)(S * FF) * sizeof(float));
    rand_pair(S * 2 * FF, 4.0f, &z, &zf);
    for (int64_t r = 0; r < S; r++)
        for (int64_t c = 0; c < FF; c++) gate[r * FF + c] = zf[r * 2 * FF + c], val[r * FF + c] = zf[r * 2 * FF + FF + c];
    h3_swiglu(be, val, val, gate, S * FF, H3_BF16_OUT);
    h3_bf16 *p = malloc((size_t)(S * FF) * 2);
    h3_bf16_swiglu(be, p, z, S, FF, 2 * FF, FF, 0);
    SAME("swiglu, gate first", p, FF, val, FF, S, FF);
    free(qkv), free(qkvf), free(o), free(ob), free(z), free(zf), free(val), free(gate), free(p);
}

static void test_rows(void) {
    int64_t n = 20, dim = 12, S = 31;
    int32_t idx[20];
    for (int i = 0; i < n; i++) idx[i] = (int32_t)((i * 7 + 3) % S);
    float *src = malloc((size_t)(n * dim) * sizeof(float)), *ref = calloc((size_t)(S * dim), sizeof(float));
    for (int64_t i = 0; i < n * dim; i++) src[i] = frand();
    h3_bf16 *dst = calloc((size_t)(S * dim), 2);
    h3_rows_scatter(be, ref, src, idx, n, dim, H3_BF16_OUT);
    h3_bf16_rows_scatter_f32(be, dst, src, idx, n, dim);
    SAME("rows_scatter_f32", dst, dim, ref, dim, S, dim);
    float *g = malloc((size_t)(n * dim) * sizeof(float)), *gr = malloc((size_t)(n * dim) * sizeof(float));
    h3_bf16_rows_gather_f32(be, g, dst, idx, n, dim);
    h3_rows_gather(be, gr, ref, idx, n, dim);
    CHECK(!memcmp(g, gr, (size_t)(n * dim) * sizeof(float)), "rows_gather_f32 differs");
    h3_bf16 *p = malloc((size_t)(n * dim) * 2);
    h3_bf16_pack(be, p, src, n * dim);
    h3_bf16_unpack(be, g, p, n * dim);
    int64_t bad = 0;
    for (int64_t i = 0; i < n * dim; i++) bad += g[i] != h3_round_bf16(src[i]);
    CHECK(bad == 0, "pack/unpack: %lld differ", (long long)bad);
    free(src), free(ref), free(dst), free(g), free(gr), free(p);
}

/* --token-reduction's row ops: the pooled row is the mean of its pair rounded once to bf16 (the fp32 sum of two
 * bf16 values is exact here, so the mean is compared with a float64 one); a singleton is copied; the restore
 * adds scale x (reduced - base) in fp32 and rounds once, copies the prefix rows, and gives x back exactly
 * where nothing changed (reduced == base). */
static void test_token_reduction_ops(void) {
    enum { S = 23, PREFIX = 5, SR = 14, D = 40 };
    int32_t pairs[2 * SR], parent[S];
    for (int i = 0; i < SR; i++) {
        int a = i < PREFIX ? i : PREFIX + 2 * (i - PREFIX), b = i < PREFIX ? i : a + 1 < S ? a + 1 : a;
        pairs[2 * i] = a, pairs[2 * i + 1] = b;
    }
    for (int r = 0; r < S; r++) parent[r] = r < PREFIX ? r : PREFIX + (r - PREFIX) / 2;
    h3_bf16 *x, *red, *base;
    float *xf, *rf, *bf;
    rand_pair(S * D, 3.0f, &x, &xf);
    rand_pair(SR * D, 3.0f, &red, &rf);
    rand_pair(SR * D, 3.0f, &base, &bf);
    h3_bf16 *y = malloc((size_t)(SR * D) * 2);
    h3_bf16_rows_pool_pairs(be, y, x, pairs, SR, D);
    int64_t bad = 0;
    for (int i = 0; i < SR; i++)
        for (int c = 0; c < D; c++) {
            int a = pairs[2 * i], b = pairs[2 * i + 1];
            uint16_t want = a == b ? x[a * D + c] : h3_f32_to_bf16((float)(((double)xf[a * D + c] + xf[b * D + c]) / 2.0));
            bad += y[i * D + c] != want;
        }
    printf("  %-56s %lld of %d differ\n", "rows_pool_pairs vs the float64 mean", (long long)bad, SR * D);
    CHECK(bad == 0, "rows_pool_pairs: %lld elements differ from the rounded mean", (long long)bad);
    const float scales[2] = {1.0f, 0.625f};
    for (int k = 0; k < 2; k++) {
        h3_bf16 *xe = malloc((size_t)(S * D) * 2);
        memcpy(xe, x, (size_t)(S * D) * 2);
        h3_bf16_rows_expand_delta(be, xe, red, base, parent, S, PREFIX, D, scales[k]);
        bad = 0;
        for (int r = 0; r < S; r++)
            for (int c = 0; c < D; c++) {
                int p = parent[r];
                float upd = rf[p * D + c] - bf[p * D + c], sc = scales[k] * upd;
                uint16_t want = r < PREFIX ? red[p * D + c] : h3_f32_to_bf16(xf[r * D + c] + sc);
                bad += xe[r * D + c] != want;
            }
        CHECK(bad == 0, "rows_expand_delta (scale %g): %lld elements differ", (double)scales[k], (long long)bad);
        free(xe);
    }
    /* nothing changed in the reduced stack: every full row comes back as it was */
    h3_bf16 *xe = malloc((size_t)(S * D) * 2), *pooled = malloc((size_t)(SR * D) * 2);
    memcpy(xe, x, (size_t)(S * D) * 2);
    h3_bf16_rows_pool_pairs(be, pooled, x, pairs, SR, D);
    h3_bf16_rows_expand_delta(be, xe, pooled, pooled, parent, S, PREFIX, D, 1.0f);
    CHECK(!memcmp(xe, x, (size_t)(S * D) * 2), "pool then expand with an unchanged stack changed the rows");
    free(x), free(xf), free(red), free(rf), free(base), free(bf), free(y), free(xe), free(pooled);
}

int main(void) {
    h3_err e;
    test_seed(0xD1B54A32D192ED03ull);
    be = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    if (!be) {
        fprintf(stderr, "%s\n", e.msg);
        return 2;
    }
    test_matmul(37, 50, 64, 0);
    test_matmul(1100, 20, 48, H3_F32); /* more rows than one fp32 chunk */
    test_matmul(5, 33, 17, H3_BF16);
    test_norm_modulate(23, 48);
    test_norm_modulate(5, 5376);
    test_residual_norm("residual+norm2 5376 (gate 2, shift/scale 3/4)", 29, 5376, 1, 1, 1, 0, 0);
    test_residual_norm("residual+next norm1 5376 (gate 5 -> next 0/1)", 29, 5376, 1, 1, 1, 1, 0);
    test_residual_norm("residual+norm 100 (dim % 8 != 0)", 13, 100, 1, 1, 1, 0, 0);
    test_residual_norm("residual+norm 37, odd dim", 7, 37, 1, 1, 1, 1, 0);
    test_residual_norm("add+rmsnorm (no tables, refiner) 5376", 9, 5376, 0, 0, 1, 0, 0);
    test_residual_norm("add+rmsnorm in place (refiner final norm)", 9, 5376, 0, 0, 1, 0, 1);
    test_residual_norm("residual+norm, no gain (w NULL) 2048", 11, 2048, 1, 1, 0, 0, 0);
    test_residual_norm("residual (gate) + rmsnorm (table NULL) 2048", 11, 2048, 1, 0, 1, 0, 0);
    test_residual_norm("add (no gate) + norm modulate 5376", 5, 5376, 0, 1, 1, 1, 0);
    test_residual_norm("residual+norm, 0 rows", 0, 5376, 1, 1, 1, 0, 0);
    test_head_norm_rope(9, 3, 32, 24);
    test_head_norm_rope(4, 2, 128, 96);
    test_attention_swiglu();
    test_rows();
    test_token_reduction_ops();
    h3_backend_free(be);
    TEST_END();
}
