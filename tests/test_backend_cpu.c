/* Core CPU backend ops against naive double-precision loops written independently here (random data:
 * tests/test_data.h, seeded in main). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "backend/ops.h"
#include "backend/backend_check.h"
#include "test.h"
#include "test_data.h"

static void test_matmul(h3_backend *be) {
    int64_t M = 37, K = 300, N = 129;
    float *x = rand_host(M * K, 1, 0), *wf = rand_host(N * K, 0.1f, 0), *bias = rand_host(N, 1, 0);
    uint16_t *wb = malloc((size_t)(N * K) * 2), *wh = malloc((size_t)(N * K) * 2);
    h3_convert_from_f32(wb, H3_BF16, wf, (size_t)(N * K));
    h3_convert_from_f32(wh, H3_F16, wf, (size_t)(N * K));
    int64_t ws[2] = {N, K}, bs[1] = {N};
    h3_tensor w32 = {H3_F32, 2, {N, K}, wf, 0}, w16 = {H3_BF16, 2, {N, K}, wb, 0}, wf16 = {H3_F16, 2, {N, K}, wh, 0};
    h3_tensor bt = {H3_F32, 1, {N}, bias, 0};
    (void)ws;
    (void)bs;
    const h3_tensor *ws_[3] = {&w32, &w16, &wf16};
    const char *names[3] = {"matmul f32 weights", "matmul bf16 weights", "matmul f16 weights"};
    float *y = malloc((size_t)(M * N) * 4), *ref = malloc((size_t)(M * N) * 4), *wtmp = malloc((size_t)(N * K) * 4);
    for (int t = 0; t < 3; t++) {
        h3_convert_to_f32(wtmp, ws_[t]->data, ws_[t]->dtype, (size_t)(N * K));
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = bias[n];
                for (int64_t k = 0; k < K; k++) s += (double)x[m * K + k] * wtmp[n * K + k];
                ref[m * N + n] = (float)s;
            }
        h3_matmul(be, y, x, M, ws_[t], &bt, 0);
        CHECK_CLOSE(names[t], h3_rel_l2(y, ref, (size_t)(M * N)), 1e-6);
    }
    /* bf16 output rounding: every output is a bf16 value within one rounding of the fp32 result. */
    h3_matmul(be, y, x, M, &w16, NULL, H3_BF16_OUT);
    int exact = 1;
    for (int64_t i = 0; i < M * N; i++)
        if (h3_round_bf16(y[i]) != y[i]) exact = 0;
    CHECK(exact, "H3_BF16_OUT yields bf16 values");
    /* H3_F16_IN: the product of the fp16-rounded input with the F16 weights, fp32 output (not rounded) */
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = bias[n];
            for (int64_t k = 0; k < K; k++)
                s += (double)h3_f16_to_f32(h3_f32_to_f16(x[m * K + k])) * h3_f16_to_f32(wh[n * K + k]);
            ref[m * N + n] = (float)s;
        }
    h3_matmul(be, y, x, M, &wf16, &bt, H3_F16_IN);
    CHECK_CLOSE("matmul H3_F16_IN (fp16 input rounding)", h3_rel_l2(y, ref, (size_t)(M * N)), 1e-6);
    h3_matmul(be, wtmp, x, M, &wf16, &bt, 0); /* without the flag: fp32 inputs, a different result */
    CHECK(h3_rel_l2(wtmp, ref, (size_t)(M * N)) > 1e-5, "H3_F16_IN rounds the input (rel %.3e without it)",
          h3_rel_l2(wtmp, ref, (size_t)(M * N)));
    free(x), free(wf), free(bias), free(wb), free(wh), free(y), free(ref), free(wtmp);
}

static void naive_attention(float *out, const float *q, const float *k, const float *v, int64_t S, int Hq, int Hkv,
                            int D, int qs, int ks, int vs, int os, float scale, int causal) {
    double *p = malloc((size_t)S * sizeof *p);
    for (int h = 0; h < Hq; h++) {
        int hk = h / (Hq / Hkv);
        for (int64_t i = 0; i < S; i++) {
            double mx = -1e300, sum = 0;
            int64_t lim = causal ? i + 1 : S;
            for (int64_t j = 0; j < lim; j++) {
                double s = 0;
                for (int d = 0; d < D; d++) s += (double)q[i * qs + h * D + d] * k[j * ks + hk * D + d];
                p[j] = s * scale;
                if (p[j] > mx) mx = p[j];
            }
            for (int64_t j = 0; j < lim; j++) sum += (p[j] = exp(p[j] - mx));
            for (int d = 0; d < D; d++) {
                double o = 0;
                for (int64_t j = 0; j < lim; j++) o += p[j] / sum * v[j * vs + hk * D + d];
                out[i * os + h * D + d] = (float)o;
            }
        }
    }
    free(p);
}

static void test_attention(h3_backend *be) {
    int64_t S = 300; /* more than one 128-row query block */
    int Hq = 4, Hkv = 2, D = 16;
    int qs = Hq * D + 8, ks = Hkv * D + 4, vs = Hkv * D, os = Hq * D; /* strided inputs */
    float *q = rand_host(S * qs, 1, 0), *k = rand_host(S * ks, 1, 0), *v = rand_host(S * vs, 1, 0);
    float *o = calloc((size_t)(S * os), 4), *r = calloc((size_t)(S * os), 4);
    float scale = 1.0f / sqrtf((float)D);
    for (int causal = 0; causal < 2; causal++) {
        naive_attention(r, q, k, v, S, Hq, Hkv, D, qs, ks, vs, os, scale, causal);
        h3_attention(be, o, os, q, qs, k, ks, v, vs, S, S, Hq, Hkv, D, scale, causal, 0);
        CHECK_CLOSE(causal ? "attention causal GQA strided" : "attention GQA strided", h3_rel_l2(o, r, (size_t)(S * os)), 1e-6);
    }
    free(q), free(k), free(v), free(o), free(r);
}

static void test_norms(h3_backend *be) {
    int64_t rows = 7, dim = 96;
    float *x = rand_host(rows * dim, 3, 0), *w = rand_host(dim, 1, 0), *b = rand_host(dim, 1, 0);
    float *y = malloc((size_t)(rows * dim) * 4), *r = malloc((size_t)(rows * dim) * 4);
    for (int64_t i = 0; i < rows; i++) {
        double ss = 0, s = 0, var = 0;
        for (int64_t c = 0; c < dim; c++) ss += (double)x[i * dim + c] * x[i * dim + c], s += x[i * dim + c];
        double mean = s / dim;
        for (int64_t c = 0; c < dim; c++) var += (x[i * dim + c] - mean) * (x[i * dim + c] - mean);
        for (int64_t c = 0; c < dim; c++) r[i * dim + c] = (float)(x[i * dim + c] / sqrt(ss / dim + 1e-5) * w[c]);
    }
    h3_rmsnorm(be, y, x, rows, dim, w, 1e-5f, 0);
    CHECK_CLOSE("rmsnorm", h3_rel_l2(y, r, (size_t)(rows * dim)), 1e-6);
    for (int64_t i = 0; i < rows; i++) {
        double s = 0, var = 0;
        for (int64_t c = 0; c < dim; c++) s += x[i * dim + c];
        double mean = s / dim;
        for (int64_t c = 0; c < dim; c++) var += (x[i * dim + c] - mean) * (x[i * dim + c] - mean);
        for (int64_t c = 0; c < dim; c++) r[i * dim + c] = (float)((x[i * dim + c] - mean) / sqrt(var / dim + 1e-6) * w[c] + b[c]);
    }
    h3_layernorm(be, y, x, rows, dim, w, b, 1e-6f, 0);
    CHECK_CLOSE("layernorm", h3_rel_l2(y, r, (size_t)(rows * dim)), 1e-6);
    /* GroupNorm over [N=2, C=8, L=12], 4 groups. */
    int64_t N = 2, C = 8, L = 12;
    int G = 4;
    float *gx = rand_host(N * C * L, 2, 0), *gy = malloc((size_t)(N * C * L) * 4), *gr = malloc((size_t)(N * C * L) * 4);
    for (int64_t n = 0; n < N; n++)
        for (int g = 0; g < G; g++) {
            double s = 0, var = 0;
            int64_t c0 = g * (C / G), cnt = (C / G) * L;
            for (int64_t c = c0; c < c0 + C / G; c++)
                for (int64_t l = 0; l < L; l++) s += gx[(n * C + c) * L + l];
            double mean = s / cnt;
            for (int64_t c = c0; c < c0 + C / G; c++)
                for (int64_t l = 0; l < L; l++) var += pow(gx[(n * C + c) * L + l] - mean, 2);
            for (int64_t c = c0; c < c0 + C / G; c++)
                for (int64_t l = 0; l < L; l++)
                    gr[(n * C + c) * L + l] = (float)((gx[(n * C + c) * L + l] - mean) / sqrt(var / cnt + 1e-6) * w[c] + b[c]);
        }
    h3_groupnorm(be, gy, gx, N, C, L, G, w, b, 1e-6f, 0);
    CHECK_CLOSE("groupnorm", h3_rel_l2(gy, gr, (size_t)(N * C * L)), 1e-6);
    free(x), free(w), free(b), free(y), free(r), free(gx), free(gy), free(gr);
}

static void test_rope(h3_backend *be) {
    int64_t rows = 5;
    int H = 3, D = 32, R = 24, stride = H * D + 3;
    float *x = rand_host(rows * stride, 1, 0), *c = rand_host(rows * R, 1, 0), *s = rand_host(rows * R, 1, 0);
    float *ref = malloc((size_t)(rows * stride) * 4);
    memcpy(ref, x, (size_t)(rows * stride) * 4);
    for (int64_t r = 0; r < rows; r++)
        for (int h = 0; h < H; h++)
            for (int d = 0; d < R; d++) {
                const float *xh = x + r * stride + h * D;
                double rot = d < R / 2 ? -xh[d + R / 2] : xh[d - R / 2];
                ref[r * stride + h * D + d] = (float)(xh[d] * (double)c[r * R + d] + rot * s[r * R + d]);
            }
    h3_rope_half(be, x, rows, stride, H, D, R, c, s, 0);
    CHECK_CLOSE("rope (partial, strided)", h3_rel_l2(x, ref, (size_t)(rows * stride)), 1e-6);
    int pass = 1;
    for (int64_t r = 0; r < rows; r++)
        for (int h = 0; h < H; h++)
            for (int d = R; d < D; d++)
                if (x[r * stride + h * D + d] != ref[r * stride + h * D + d]) pass = 0;
    CHECK(pass, "channels past rot_dim pass through unchanged");
    free(x), free(c), free(s), free(ref);
}

static void test_elementwise(h3_backend *be) {
    int64_t n = 1000;
    float *x = rand_host(n, 6, 0), *b = rand_host(n, 2, 0), *y = malloc((size_t)n * 4), *r = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) r[i] = (float)(x[i] / (1 + exp(-(double)x[i])));
    h3_silu(be, y, x, n, 0);
    CHECK_CLOSE("silu", h3_rel_l2(y, r, (size_t)n), 1e-6);
    for (int64_t i = 0; i < n; i++) r[i] = (float)(0.5 * x[i] * (1 + erf(x[i] / sqrt(2.0))));
    h3_gelu_erf(be, y, x, n, 0);
    CHECK_CLOSE("gelu (erf)", h3_rel_l2(y, r, (size_t)n), 1e-6);
    for (int64_t i = 0; i < n; i++) {
        double v = x[i];
        r[i] = (float)(0.5 * v * (1 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))));
    }
    h3_gelu_tanh(be, y, x, n, 0);
    CHECK_CLOSE("gelu (tanh)", h3_rel_l2(y, r, (size_t)n), 1e-6);
    h3_add(be, y, x, b, n, 0);
    int ok = 1;
    for (int64_t i = 0; i < n; i++) ok &= y[i] == x[i] + b[i];
    h3_mul(be, y, x, b, n, 0);
    for (int64_t i = 0; i < n; i++) ok &= y[i] == x[i] * b[i];
    h3_scale(be, y, x, 0.5f, n, 0);
    for (int64_t i = 0; i < n; i++) ok &= y[i] == x[i] * 0.5f;
    h3_add(be, y, x, b, n, H3_BF16_OUT);
    for (int64_t i = 0; i < n; i++) ok &= y[i] == h3_round_bf16(x[i] + b[i]);
    memcpy(y, x, (size_t)n * 4);
    h3_round_bf16_buf(be, y, n);
    for (int64_t i = 0; i < n; i++) ok &= y[i] == h3_round_bf16(x[i]);
    memcpy(y, x, (size_t)n * 4);
    h3_add_bias(be, y, b, 10, 100, 0);
    for (int64_t i = 0; i < n; i++) ok &= y[i] == x[i] + b[i % 100];
    CHECK(ok, "add/mul/scale/round/add_bias exact");
    free(x), free(b), free(y), free(r);
}

/* h3_count_nonfinite / h3_check_finite (backend_check.h): NaN and both infinities counted, large finite values not */
static void test_nonfinite(h3_backend *be) {
    enum { N = 200003 }; /* past the threaded size */
    float *x = h3_alloc(be, sizeof(float) * N);
    if (!x) {
        CHECK(0, "alloc");
        return;
    }
    for (int i = 0; i < N; i++) x[i] = (float)(i % 7) - 3.0f;
    x[5] = 3.4028235e38f, x[6] = -3.4028235e38f, x[7] = 1e-45f;
    h3_err e = {{0}};
    CHECK(h3_count_nonfinite(be, x, H3_F32, N) == 0 && h3_check_finite(be, x, N, "t", &e) == 0, "all finite: %s", e.msg);
    x[0] = NAN, x[1000] = INFINITY, x[N - 1] = -INFINITY, x[77777] = -NAN;
    CHECK(h3_count_nonfinite(be, x, H3_F32, N) == 4, "4 non-finite counted: %lld", (long long)h3_count_nonfinite(be, x, H3_F32, N));
    CHECK(h3_count_nonfinite(be, x + 1, H3_F32, N - 2) == 2, "a sub-range: 2");
    CHECK(h3_count_nonfinite(be, x, H3_F32, 0) == 0, "n = 0");
    CHECK(h3_check_finite(be, x, N, "denoise: the latents", &e) == -1 &&
              strstr(e.msg, "denoise: the latents: 4 of 200003 values are not finite"), "message: %s", e.msg);
    /* bf16: the same values rounded; the largest finite bf16 (0x7f7f) and a subnormal are not counted */
    uint16_t *h = h3_alloc(be, sizeof(uint16_t) * N);
    if (!h) {
        CHECK(0, "alloc");
        h3_free(be, x);
        return;
    }
    for (int i = 0; i < N; i++) h[i] = h3_f32_to_bf16(x[i]);
    h[5] = 0x7f7f, h[6] = 0xff7f, h[7] = 0x0001;
    CHECK(h3_count_nonfinite(be, h, H3_BF16, N) == 4, "bf16: 4 non-finite counted: %lld",
          (long long)h3_count_nonfinite(be, h, H3_BF16, N));
    CHECK(h3_count_nonfinite(be, h + 1, H3_BF16, N - 2) == 2, "bf16: a sub-range: 2");
    CHECK(h3_count_nonfinite(be, h, H3_F16, N) == -1, "another dtype: -1");
    h3_free(be, h);
    h3_free(be, x);
}

int main(void) {
    h3_err e;
    test_seed(0x9e3779b97f4a7c15ull);
    h3_backend *be = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    CHECK(be != NULL, "cpu backend: %s", e.msg);
    if (!be) TEST_END();
    test_matmul(be);
    test_attention(be);
    test_norms(be);
    test_rope(be);
    test_elementwise(be);
    test_nonfinite(be);
    h3_backend *cu = h3_backend_new(H3_BACKEND_CUDA, 0, &e);
#ifndef H3_CUDA
    CHECK(cu == NULL && strstr(e.msg, "without CUDA"), "cuda backend refused cleanly in a CPU build: %s", e.msg);
#endif
    h3_backend_free(cu);
    h3_backend_free(be);
    TEST_END();
}
