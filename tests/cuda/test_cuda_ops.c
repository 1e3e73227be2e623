/* Every CUDA op against its CPU twin (built with CUDA=1 only: make CUDA=1 MEDIA=0 cuda-tests; run on a
 * GPU machine by tests/cuda/run_device.sh). Fresh random inputs per case, device outputs poisoned
 * with NaN first (an unwritten element fails), relative L2 and max-abs printed for every case.
 * Tolerances: fp32 paths 1e-5 (GEMM, attention: summation order differs) and 1e-6 (element-wise,
 * norms: same operation order); bf16 tensor-core paths 3e-2 (conventions.md bf16 mode). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_data.h"
#include "backend/backend.h"
#include "backend/backend_check.h"
#include "backend/backend_dit.h"
#include "backend/cuda/cuda_ops.h"
#include "core/dtype.h"
#include "core/tensor.h"

static h3_backend *cpu, *gpu;
static void *to_dev(const void *host, size_t bytes) {
    void *d = h3_alloc(gpu, bytes);
    h3_upload(gpu, d, host, bytes);
    return d;
}

static float *dev_f(const float *host, int64_t n) { return to_dev(host, (size_t)n * sizeof(float)); }

/* a device buffer of n NaNs */
static float *dev_poison(int64_t n) {
    float *h = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) h[i] = NAN;
    float *d = dev_f(h, n);
    free(h);
    return d;
}

/* the device buffer against the host reference (tests/test_data.h's compare) */
static void dev_compare(const char *name, const float *dev, const float *ref, int64_t n, double tol) {
    float *got = malloc((size_t)n * sizeof(float));
    h3_download(gpu, got, dev, (size_t)n * sizeof(float));
    compare(name, got, ref, n, tol);
    free(got);
}

/* A weight tensor: host copy (for the CPU twin) in dtype t from fp32 values, and a device copy. */
typedef struct { h3_tensor *host, *dev; } weight;

static weight make_weight(h3_dtype t, int ndim, const int64_t *shape, float scale) {
    h3_err e;
    weight w;
    w.host = h3_tensor_new(t, ndim, shape, &e);
    int64_t n = h3_tensor_numel(w.host);
    float *v = rand_host(n, scale, 0);
    h3_convert_from_f32(w.host->data, t, v, (size_t)n);
    free(v);
    w.dev = h3_weight_upload(gpu, w.host, &e);
    return w;
}

static void free_weight(weight w) {
    h3_weight_free(gpu, w.dev);
    h3_tensor_free(w.host);
}

/* ---- matmul ---- */

static void test_matmul(const char *name, int64_t M, int64_t N, int64_t K, h3_dtype wt, int with_bias, h3_dtype bt,
                        int flags, int x_offset, double tol) {
    int64_t ws[2] = {N, K}, bs[1] = {N};
    weight w = make_weight(wt, 2, ws, 1.0f / sqrtf((float)K));
    weight b = {0};
    if (with_bias) b = make_weight(bt, 1, bs, 0.5f);
    float *x = rand_host(M * K + x_offset, 1.0f, flags & H3_BF16_OUT);
    float *y = malloc((size_t)(M * N) * sizeof(float));
    h3_matmul(cpu, y, x + x_offset, M, w.host, with_bias ? b.host : NULL, flags);
    float *dx = dev_f(x, M * K + x_offset), *dy = dev_poison(M * N);
    h3_matmul(gpu, dy, dx + x_offset, M, w.dev, with_bias ? b.dev : NULL, flags);
    dev_compare(name, dy, y, M * N, tol);
    h3_free(gpu, dx), h3_free(gpu, dy);
    free(x), free(y);
    free_weight(w);
    if (with_bias) free_weight(b);
}

/* ---- attention: q/k/v as column slices of wider rows (strides), like a fused QKV buffer ---- */

static void test_attention(const char *name, int64_t Sq, int64_t Skv, int Hq, int Hkv, int D, int causal, int flags,
                           float amp, double tol) {
    int64_t qs = (int64_t)Hq * D + 8, ks = (int64_t)Hkv * D + 24, os = (int64_t)Hq * D + 16;
    int bf = (flags & H3_BF16_OUT) != 0;
    float *q = rand_host(Sq * qs, amp, bf), *k = rand_host(Skv * ks, amp, bf), *v = rand_host(Skv * ks, 1.0f, bf);
    float *o = malloc((size_t)(Sq * os) * sizeof(float));
    for (int64_t i = 0; i < Sq * os; i++) o[i] = 0.0f;
    float scale = 1.0f / sqrtf((float)D);
    h3_attention(cpu, o, os, q + 4, qs, k + 8, ks, v + 16, ks, Sq, Skv, Hq, Hkv, D, scale, causal, flags);
    float *dq = dev_f(q, Sq * qs), *dk = dev_f(k, Skv * ks), *dv = dev_f(v, Skv * ks);
    float *dout = h3_alloc(gpu, (size_t)(Sq * os) * sizeof(float)); /* zeroed: the padding columns stay 0 */
    float *poison = malloc((size_t)(Sq * os) * sizeof(float));
    for (int64_t r = 0; r < Sq; r++)
        for (int64_t c = 0; c < os; c++) poison[r * os + c] = c < (int64_t)Hq * D ? NAN : 0.0f;
    h3_upload(gpu, dout, poison, (size_t)(Sq * os) * sizeof(float));
    h3_attention(gpu, dout, os, dq + 4, qs, dk + 8, ks, dv + 16, ks, Sq, Skv, Hq, Hkv, D, scale, causal, flags);
    dev_compare(name, dout, o, Sq * os, tol);
    h3_free(gpu, dq), h3_free(gpu, dk), h3_free(gpu, dv), h3_free(gpu, dout);
    free(q), free(k), free(v), free(o), free(poison);
}

/* ---- norms ---- */

static void test_norms(int flags, double tol) {
    const char *tag = flags ? " [bf16]" : "";
    char name[96];
    int64_t rows = 37, dim = 5376;
    float *x = rand_host(rows * dim, 3.0f, flags), *w = rand_host(dim, 1.0f, flags), *b = rand_host(dim, 1.0f, flags);
    float *y = malloc((size_t)(rows * dim) * sizeof(float));
    float *dx = dev_f(x, rows * dim), *dw = dev_f(w, dim), *db = dev_f(b, dim), *dy = dev_poison(rows * dim);

    h3_rmsnorm(cpu, y, x, rows, dim, w, 1e-5f, flags);
    h3_rmsnorm(gpu, dy, dx, rows, dim, dw, 1e-5f, flags);
    snprintf(name, sizeof name, "rmsnorm 37x5376 gain%s", tag);
    dev_compare(name, dy, y, rows * dim, tol);

    /* in place, no gain, head-sized rows (q/k norm) */
    float *x2 = rand_host(rows * 56 * 128, 2.0f, flags);
    float *y2 = malloc((size_t)(rows * 56 * 128) * sizeof(float));
    memcpy(y2, x2, (size_t)(rows * 56 * 128) * sizeof(float));
    float *dx2 = dev_f(x2, rows * 56 * 128);
    h3_rmsnorm(cpu, y2, y2, rows * 56, 128, NULL, 1e-6f, flags);
    h3_rmsnorm(gpu, dx2, dx2, rows * 56, 128, NULL, 1e-6f, flags);
    snprintf(name, sizeof name, "rmsnorm in place 2072x128 no gain%s", tag);
    dev_compare(name, dx2, y2, rows * 56 * 128, tol);

    h3_layernorm(cpu, y, x, rows, dim, w, b, 1e-6f, flags);
    h3_layernorm(gpu, dy, dx, rows, dim, dw, db, 1e-6f, flags);
    snprintf(name, sizeof name, "layernorm 37x5376 w+b%s", tag);
    dev_compare(name, dy, y, rows * dim, tol);

    h3_layernorm(cpu, y, x, rows, dim, NULL, NULL, 1e-6f, flags);
    h3_layernorm(gpu, dy, dx, rows, dim, NULL, NULL, 1e-6f, flags);
    snprintf(name, sizeof name, "layernorm 37x5376 plain%s", tag);
    dev_compare(name, dy, y, rows * dim, tol);

    /* groupnorm: N=2, C=64, L=37*5376/128 */
    int64_t N = 2, C = 64, L = rows * dim / (N * C);
    float *gw = rand_host(C, 1.0f, flags), *gb = rand_host(C, 1.0f, flags);
    float *dgw = dev_f(gw, C), *dgb = dev_f(gb, C);
    h3_groupnorm(cpu, y, x, N, C, L, 8, gw, gb, 1e-6f, flags);
    h3_groupnorm(gpu, dy, dx, N, C, L, 8, dgw, dgb, 1e-6f, flags);
    snprintf(name, sizeof name, "groupnorm N2 C64 L%lld g8%s", (long long)L, tag);
    dev_compare(name, dy, y, rows * dim, tol);

    h3_free(gpu, dx), h3_free(gpu, dw), h3_free(gpu, db), h3_free(gpu, dy), h3_free(gpu, dx2);
    h3_free(gpu, dgw), h3_free(gpu, dgb);
    free(x), free(w), free(b), free(y), free(x2), free(y2), free(gw), free(gb);
}

/* ---- rotary: 56 heads of 128 with 96 rotated channels (docs/model/dit.md 4.7 step 4), rows with padding ---- */

static void test_rope(int flags, double tol) {
    int64_t rows = 45, nh = 6, hd = 128, rot = 96, stride = nh * hd + 40;
    float *x = rand_host(rows * stride, 2.0f, flags), *cs = malloc((size_t)(rows * rot) * sizeof(float));
    float *sn = malloc((size_t)(rows * rot) * sizeof(float));
    for (int64_t r = 0; r < rows; r++)
        for (int d = 0; d < rot; d++) {
            float th = (float)(r * 3 + 1) * (1.0f + 0.37f * (float)(d % 48));
            cs[r * rot + d] = cosf(th), sn[r * rot + d] = sinf(th);
        }
    float *dx = dev_f(x, rows * stride), *dc = dev_f(cs, rows * rot), *ds = dev_f(sn, rows * rot);
    h3_rope_half(cpu, x, rows, stride, (int)nh, (int)hd, (int)rot, cs, sn, flags);
    h3_rope_half(gpu, dx, rows, stride, (int)nh, (int)hd, (int)rot, dc, ds, flags);
    dev_compare(flags ? "rope_half 45 rows x 6x128, rot 96 [bf16]" : "rope_half 45 rows x 6x128, rot 96", dx, x,
            rows * stride, tol);
    h3_free(gpu, dx), h3_free(gpu, dc), h3_free(gpu, ds);
    free(x), free(cs), free(sn);
}

/* ---- element-wise ---- */

static void test_eltwise(int flags, double tol) {
    const char *tag = flags ? " [bf16]" : "";
    char name[96];
    int64_t n = 1000003, rows = 211, dim = 4739; /* odd sizes: tails */
    float *a = rand_host(n, 6.0f, flags), *b = rand_host(n, 2.0f, flags), *y = malloc((size_t)n * sizeof(float));
    float *da = dev_f(a, n), *db = dev_f(b, n), *dy = dev_poison(n);
    struct { const char *name; void (*op)(h3_backend *, float *, const float *, int64_t, int); } un[] = {
        {"silu", h3_silu}, {"gelu_tanh", h3_gelu_tanh}, {"gelu_erf", h3_gelu_erf}};
    for (int i = 0; i < 3; i++) {
        un[i].op(cpu, y, a, n, flags);
        un[i].op(gpu, dy, da, n, flags);
        snprintf(name, sizeof name, "%s n=%lld%s", un[i].name, (long long)n, tag);
        dev_compare(name, dy, y, n, tol);
    }
    h3_add(cpu, y, a, b, n, flags), h3_add(gpu, dy, da, db, n, flags);
    snprintf(name, sizeof name, "add%s", tag);
    dev_compare(name, dy, y, n, tol);
    h3_mul(cpu, y, a, b, n, flags), h3_mul(gpu, dy, da, db, n, flags);
    snprintf(name, sizeof name, "mul%s", tag);
    dev_compare(name, dy, y, n, tol);
    h3_scale(cpu, y, a, 0.7071f, n, flags), h3_scale(gpu, dy, da, 0.7071f, n, flags);
    snprintf(name, sizeof name, "scale%s", tag);
    dev_compare(name, dy, y, n, tol);
    /* add_bias in place on rows x dim (first rows*dim of a) */
    float *yb = malloc((size_t)(rows * dim) * sizeof(float));
    memcpy(yb, a, (size_t)(rows * dim) * sizeof(float));
    float *dyb = dev_f(a, rows * dim);
    h3_add_bias(cpu, yb, b, rows, dim, flags), h3_add_bias(gpu, dyb, db, rows, dim, flags);
    snprintf(name, sizeof name, "add_bias 211x4739%s", tag);
    dev_compare(name, dyb, yb, rows * dim, tol);
    if (!flags) {
        float *r = rand_host(n, 100.0f, 0);
        float *dr = dev_f(r, n);
        h3_round_bf16_buf(cpu, r, n), h3_round_bf16_buf(gpu, dr, n);
        dev_compare("round_bf16_buf (exact)", dr, r, n, 0.0);
        h3_free(gpu, dr);
        free(r);
    }
    h3_free(gpu, da), h3_free(gpu, db), h3_free(gpu, dy), h3_free(gpu, dyb);
    free(a), free(b), free(y), free(yb);
}

/* ---- DiT ops (backend_dit.h) ---- */

static void test_dit_ops(int flags, double tol) {
    const char *tag = flags ? " [bf16]" : "";
    char name[96];
    int64_t rows = 300, dim = 5376, trows = 9, tstride = 6 * dim;
    float *x = rand_host(rows * dim, 3.0f, flags), *table = rand_host(trows * tstride, 1.0f, flags);
    float *br = rand_host(rows * dim, 2.0f, flags), *y = malloc((size_t)(rows * dim) * sizeof(float));
    int32_t *idx = malloc((size_t)rows * sizeof(int32_t));
    for (int64_t r = 0; r < rows; r++) idx[r] = (int32_t)((r * 7 + r / 5) % trows);
    float *dx = dev_f(x, rows * dim), *dt = dev_f(table, trows * tstride), *dbr = dev_f(br, rows * dim);
    float *dy = dev_poison(rows * dim);
    int32_t *didx = to_dev(idx, (size_t)rows * sizeof(int32_t));

    h3_adaln_modulate(cpu, y, x, rows, dim, table, tstride, idx, 0, dim, flags);
    h3_adaln_modulate(gpu, dy, dx, rows, dim, dt, tstride, didx, 0, dim, flags);
    snprintf(name, sizeof name, "adaln_modulate 300x5376%s", tag);
    dev_compare(name, dy, y, rows * dim, tol);

    memcpy(y, x, (size_t)(rows * dim) * sizeof(float));
    h3_gated_residual(cpu, y, br, rows, dim, table, tstride, idx, 2 * dim, flags);
    h3_gated_residual(gpu, dx, dbr, rows, dim, dt, tstride, didx, 2 * dim, flags);
    snprintf(name, sizeof name, "gated_residual 300x5376%s", tag);
    dev_compare(name, dx, y, rows * dim, tol);

    h3_swiglu(cpu, y, x, br, rows * dim, flags);
    h3_upload(gpu, dx, x, (size_t)(rows * dim) * sizeof(float));
    h3_swiglu(gpu, dy, dx, dbr, rows * dim, flags);
    snprintf(name, sizeof name, "swiglu n=%lld%s", (long long)(rows * dim), tag);
    dev_compare(name, dy, y, rows * dim, tol);

    /* gather 100 rows, scatter them back into a zeroed buffer */
    int64_t ng = 100;
    int32_t *gi = malloc((size_t)ng * sizeof(int32_t));
    for (int64_t i = 0; i < ng; i++) gi[i] = (int32_t)((i * 37 + 11) % rows); /* distinct: 37 coprime to 300 */
    int32_t *dgi = to_dev(gi, (size_t)ng * sizeof(int32_t));
    h3_rows_gather(cpu, y, x, gi, ng, dim);
    h3_rows_gather(gpu, dy, dx, dgi, ng, dim);
    dev_compare("rows_gather 100 of 300 rows", dy, y, ng * dim, 0.0);
    float *z = calloc((size_t)(rows * dim), sizeof(float));
    float *dz = h3_alloc(gpu, (size_t)(rows * dim) * sizeof(float));
    h3_rows_scatter(cpu, z, x, gi, ng, dim, flags);
    h3_rows_scatter(gpu, dz, dx, dgi, ng, dim, flags);
    snprintf(name, sizeof name, "rows_scatter 100 into 300 rows%s", tag);
    dev_compare(name, dz, z, rows * dim, 0.0);

    /* qkv de-interleave: rows x heads*3*hd */
    int heads = 7, hd = 128;
    int64_t inner = (int64_t)heads * hd, nf = 50 * 3 * inner;
    float *f = rand_host(nf, 1.0f, 0), *q = malloc((size_t)(50 * inner) * sizeof(float) * 3);
    float *df = dev_f(f, nf), *dq = dev_poison(50 * inner * 3);
    h3_qkv_deinterleave(cpu, q, q + 50 * inner, q + 100 * inner, f, 50, heads, hd);
    h3_qkv_deinterleave(gpu, dq, dq + 50 * inner, dq + 100 * inner, df, 50, heads, hd);
    if (!flags) dev_compare("qkv_deinterleave 50 rows x 7 heads x 128", dq, q, 50 * inner * 3, 0.0);

    /* matmul_rows: k rows out of a per-head interleaved [q|k|v] weight, and a plain contiguous slice */
    {
        int64_t hd2 = 32, nh = 4, K = 96, M = 70;
        int64_t ws[2] = {3 * nh * hd2, K};
        weight w = make_weight(flags ? H3_BF16 : H3_F32, 2, ws, 0.1f);
        float *xm = rand_host(M * K, 1.0f, flags), *ym = malloc((size_t)(M * nh * hd2) * sizeof(float));
        float *dxm = dev_f(xm, M * K), *dym = dev_poison(M * nh * hd2);
        h3_matmul_rows(cpu, ym, xm, M, w.host, nh * hd2, hd2, 3 * hd2, hd2, flags);
        h3_matmul_rows(gpu, dym, dxm, M, w.dev, nh * hd2, hd2, 3 * hd2, hd2, flags);
        snprintf(name, sizeof name, "matmul_rows interleaved k rows%s", tag);
        dev_compare(name, dym, ym, M * nh * hd2, flags ? 3e-2 : 1e-5);
        h3_matmul_rows(cpu, ym, xm, M, w.host, 100, 100, 0, 20, flags);
        h3_matmul_rows(gpu, dym, dxm, M, w.dev, 100, 100, 0, 20, flags);
        snprintf(name, sizeof name, "matmul_rows contiguous rows 20..119%s", tag);
        dev_compare(name, dym, ym, M * 100, flags ? 3e-2 : 1e-5);
        h3_free(gpu, dxm), h3_free(gpu, dym);
        free(xm), free(ym);
        free_weight(w);
    }

    h3_free(gpu, dx), h3_free(gpu, dt), h3_free(gpu, dbr), h3_free(gpu, dy), h3_free(gpu, didx);
    h3_free(gpu, dgi), h3_free(gpu, dz), h3_free(gpu, df), h3_free(gpu, dq);
    free(x), free(table), free(br), free(y), free(idx), free(gi), free(z), free(f), free(q);
}

/* h3_count_nonfinite (backend_check.h): the CUDA twin's count = the CPU twin's, on sizes with tails and on more
 * elements than one grid covers (8192 blocks x 256 threads) */
static void test_nonfinite(void) {
    static const int64_t sizes[] = {1, 255, 257, 1000003, 3000017};
    for (int k = 0; k < 5; k++) {
        int64_t n = sizes[k];
        float *x = rand_host(n, 4.0f, 0);
        int64_t marks[] = {0, n / 3, n / 2, n - 1, 7, 9999};
        const float bad[] = {NAN, INFINITY, -INFINITY, -NAN, NAN, INFINITY};
        for (int i = 0; i < 6; i++)
            if (marks[i] < n) x[marks[i]] = bad[i];
        if (n > 100) x[n / 4] = 3.4028235e38f; /* finite extremes are not counted */
        float *dx = dev_f(x, n);
        int64_t want = h3_count_nonfinite(cpu, x, H3_F32, n), got = h3_count_nonfinite(gpu, dx, H3_F32, n);
        printf("  count_nonfinite n=%-8lld cpu %lld cuda %lld\n", (long long)n, (long long)want, (long long)got);
        CHECK(got == want && want >= 1, "count_nonfinite n=%lld: cuda %lld, cpu %lld", (long long)n, (long long)got,
              (long long)want);
        h3_free(gpu, dx);
        free(x);
    }
    float *z = dev_f((const float[]){1.0f, 2.0f}, 2);
    CHECK(h3_count_nonfinite(gpu, z, H3_F32, 2) == 0 && h3_count_nonfinite(gpu, z, H3_F32, 0) == 0, "all finite / empty: 0");
    h3_free(gpu, z);
}

int main(void) {
    h3_err e;
    cpu = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    gpu = h3_backend_new(H3_BACKEND_CUDA, 0, &e);
    if (!gpu) {
        fprintf(stderr, "test_cuda_ops: %s\n", e.msg);
        CHECK(0, "no CUDA backend");
        TEST_END();
    }
    printf("matmul\n");
    test_matmul("matmul F32 w 77x130x96 +F32 bias (fp32 SGEMM)", 77, 130, 96, H3_F32, 1, H3_F32, 0, 0, 1e-5);
    test_matmul("matmul F32 w 64x256x5376 (fp32 SGEMM, long K)", 64, 256, 5376, H3_F32, 0, H3_F32, 0, 0, 1e-5);
    test_matmul("matmul F32 w, x misaligned by 4 bytes", 33, 40, 25, H3_F32, 1, H3_BF16, 0, 1, 1e-5);
    cuda_set_widen_tile(gpu, 40 * 96); /* force 4 widened tiles over N = 130 */
    test_matmul("matmul BF16 w widened to fp32, 4 tiles, +BF16 bias", 77, 130, 96, H3_BF16, 1, H3_BF16, 0, 0, 1e-5);
    cuda_set_widen_tile(gpu, 64LL << 20);
    test_matmul("matmul F16 w widened to fp32 300x384x512", 300, 384, 512, H3_F16, 0, H3_F32, 0, 0, 1e-5);
    test_matmul("matmul BF16 w [bf16] tensor cores 300x384x512 +bias", 300, 384, 512, H3_BF16, 1, H3_BF16,
                H3_BF16_OUT, 0, 3e-2);
    test_matmul("matmul BF16 w [bf16] tensor cores 257x1000x5376", 257, 1000, 5376, H3_BF16, 0, H3_F32, H3_BF16_OUT,
                0, 3e-2);
    test_matmul("matmul F32 w [bf16] (fp32 SGEMM + rounding)", 100, 96, 128, H3_F32, 1, H3_F32, H3_BF16_OUT, 0, 3e-2);
    /* the video decoder's proj_out in bf16 mode: fp16 input, fp16 tensor cores, fp32 out (exact products: only the
     * summation order differs from the CPU twin) */
    test_matmul("matmul F16 w, H3_F16_IN, fp16 tensor cores 1792x3072x2048 +F16 bias", 1792, 3072, 2048, H3_F16, 1,
                H3_F16, H3_F16_IN, 0, 1e-5);
    test_matmul("matmul F16 w, H3_F16_IN, 77x130x96, x misaligned", 77, 130, 96, H3_F16, 1, H3_F16, H3_F16_IN, 1,
                1e-5);
    { /* the same under H3_CUDA_PRECISION=fp32 (a second backend): the fp16-rounded input through the exact SGEMM */
        h3_err e2;
        setenv("H3_CUDA_PRECISION", "fp32", 1);
        h3_backend *fast = gpu;
        gpu = h3_backend_new(H3_BACKEND_CUDA, 0, &e2);
        unsetenv("H3_CUDA_PRECISION");
        CHECK(gpu != NULL, "second CUDA backend: %s", gpu ? "" : e2.msg);
        if (gpu) {
            test_matmul("matmul F16 w, H3_F16_IN, H3_CUDA_PRECISION=fp32 300x384x512 +F16 bias", 300, 384, 512, H3_F16,
                        1, H3_F16, H3_F16_IN, 0, 1e-5);
            h3_sync(gpu);
            CHECK(cuda_backend_check(gpu, &e2) == 0, "fp32 backend: %s", e2.msg);
            h3_backend_free(gpu);
        }
        gpu = fast;
    }

    printf("attention\n");
    test_attention("attention fp32 S150 Hq4 Hkv2 D64", 150, 150, 4, 2, 64, 0, 0, 1.0f, 1e-5);
    test_attention("attention fp32 causal S97 H3 D48", 97, 97, 3, 3, 48, 1, 0, 2.0f, 1e-5);
    test_attention("attention fp32 cross Sq37 Skv300 Hq2 Hkv1 D16", 37, 300, 2, 1, 16, 0, 0, 2.0f, 1e-5);
    test_attention("attention fp32 S200 H2 D128", 200, 200, 2, 2, 128, 0, 0, 2.0f, 1e-5);
    test_attention("attention fp32 S40 H1 D256", 40, 40, 1, 1, 256, 0, 0, 1.0f, 1e-5);
    for (int use_cudnn = 1; use_cudnn >= 0; use_cudnn--) {
        /* non-causal [bf16] cases go to cuDNN's SDPA when it has an engine, else to the own kernel */
        cuda_set_attention_cudnn(gpu, use_cudnn);
        printf(" [bf16] attention with %s\n", use_cudnn ? "cuDNN SDPA first (causal: own kernel)" : "the own flash kernel");
        test_attention("attention [bf16] flash S300 Hq4 Hkv2 D128", 300, 300, 4, 2, 128, 0, H3_BF16_OUT, 2.0f, 3e-2);
        test_attention("attention [bf16] flash causal S257 H2 D128", 257, 257, 2, 2, 128, 1, H3_BF16_OUT, 2.0f, 3e-2);
        test_attention("attention [bf16] flash cross Sq100 Skv700 Hq4 Hkv1 D64", 100, 700, 4, 1, 64, 0, H3_BF16_OUT,
                       2.0f, 3e-2);
        test_attention("attention [bf16] flash causal S200 H2 D64", 200, 200, 2, 2, 64, 1, H3_BF16_OUT, 2.0f, 3e-2);
        test_attention("attention [bf16] flash S2122 H4 D128 (DiT S)", 2122, 2122, 4, 4, 128, 0, H3_BF16_OUT, 3.0f, 3e-2);
    }
    cuda_set_attention_cudnn(gpu, 1);
    test_attention("attention [bf16] D48 falls back to fp32 kernel", 90, 90, 2, 2, 48, 0, H3_BF16_OUT, 2.0f, 3e-2);

    printf("norms, rope, element-wise\n");
    test_norms(0, 1e-6);
    test_norms(H3_BF16_OUT, 1e-2);
    test_rope(0, 1e-6);
    test_rope(H3_BF16_OUT, 1e-2);
    test_eltwise(0, 1e-6);
    test_eltwise(H3_BF16_OUT, 1e-2);
    printf("result checks\n");
    test_nonfinite();

    printf("DiT ops\n");
    test_dit_ops(0, 1e-6);
    test_dit_ops(H3_BF16_OUT, 1e-2);

    h3_sync(gpu);
    int bad = cuda_backend_check(gpu, &e);
    CHECK(bad == 0, "CUDA error during the tests: %s", e.msg);
    h3_backend_free(gpu);
    h3_backend_free(cpu);
    TEST_END();
}
