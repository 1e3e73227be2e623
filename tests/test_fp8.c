/* The CPU twins of the FP8 W8A8 ops (ops_linear.h) against PyTorch: tests/fixtures/fp8/linear.safetensors
 * (tools/reference/gen_fp8.py) holds LightX2V's per-channel quantization of bf16 rows done with torch
 * (codes and scales, which must match bit for bit) and torch._scaled_mm's FP8 rowwise GEMM (bf16 out) plus
 * the same product in float64. Also: the quantizer's own invariants on edge rows. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "backend/backend.h"
#include "backend/ops.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "io/safetensors.h"

#define FIXTURE "tests/fixtures/fp8/linear.safetensors"

static int64_t count_diff_u8(const uint8_t *a, const uint8_t *b, int64_t n) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++) d += a[i] != b[i];
    return d;
}

static int64_t count_diff_u32(const void *a, const void *b, int64_t n) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++) d += ((const uint32_t *)a)[i] != ((const uint32_t *)b)[i];
    return d;
}

static float *widen_bf16(const uint16_t *v, int64_t n) {
    float *f = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) f[i] = h3_bf16_to_f32(v[i]);
    return f;
}

static void test_fixture(h3_backend *be) {
    h3_err e = {{0}};
    st_set *s = st_set_open(FIXTURE, &e);
    CHECK(s != NULL, "%s (regenerate with tools/reference/gen_fp8.py on the GPU machine)", e.msg);
    if (!s) return;
    h3_tensor x, w, xq, xs, wq, ws, y, y64;
    int ok = st_set_get(s, "x", &x, &e) == 0 && st_set_get(s, "w", &w, &e) == 0 && st_set_get(s, "xq", &xq, &e) == 0 &&
             st_set_get(s, "xs", &xs, &e) == 0 && st_set_get(s, "wq", &wq, &e) == 0 && st_set_get(s, "ws", &ws, &e) == 0 &&
             st_set_get(s, "y", &y, &e) == 0 && st_set_get(s, "y64", &y64, &e) == 0;
    CHECK(ok, "fixture tensors: %s", e.msg);
    if (!ok) {
        st_set_free(s);
        return;
    }
    const int64_t M = x.shape[0], K = x.shape[1], N = w.shape[0];
    CHECK(x.dtype == H3_BF16 && w.dtype == H3_BF16 && xq.dtype == H3_U8 && y.dtype == H3_BF16 && w.shape[1] == K,
          "fixture layout");
    printf("fixture %s: M %lld N %lld K %lld\n", FIXTURE, (long long)M, (long long)N, (long long)K);

    /* activations: per-row quantization */
    uint8_t *q = malloc((size_t)(M * K));
    float *sc = malloc((size_t)M * sizeof(float));
    h3_fp8_quant_rows(be, q, sc, (const h3_bf16 *)x.data, M, K, K);
    int64_t dq = count_diff_u8(q, xq.data, M * K), ds = count_diff_u32(sc, xs.data, M);
    printf("  activation codes: %lld of %lld differ from torch; scales: %lld of %lld\n", (long long)dq,
           (long long)(M * K), (long long)ds, (long long)M);
    CHECK(dq == 0 && ds == 0, "activation quantization differs from torch (%lld codes, %lld scales)", (long long)dq,
          (long long)ds);

    /* weights: h3_fp8_linear_new (the same rule on output channels) */
    h3_fp8_linear lw;
    CHECK(h3_fp8_linear_new(be, &lw, &w, &e) == 0, "%s", e.msg);
    int64_t dwq = count_diff_u8(lw.q, wq.data, N * K), dws = count_diff_u32(lw.scale, ws.data, N);
    printf("  weight codes: %lld of %lld differ from torch; scales: %lld of %lld\n", (long long)dwq, (long long)(N * K),
           (long long)dws, (long long)N);
    CHECK(dwq == 0 && dws == 0, "weight quantization differs from torch (%lld codes, %lld scales)", (long long)dwq,
          (long long)dws);

    /* GEMM on torch's own codes: against _scaled_mm and against the float64 product */
    uint16_t *out = malloc((size_t)(M * (N + 3)) * 2);
    h3_fp8_linear tw = {.q = wq.data, .scale = ws.data, .N = N, .K = K};
    h3_fp8_matmul(be, out, N + 3, xq.data, xs.data, M, &tw);
    float *got = malloc((size_t)(M * N) * sizeof(float));
    for (int64_t r = 0; r < M; r++)
        for (int64_t c = 0; c < N; c++) got[r * N + c] = h3_bf16_to_f32(out[r * (N + 3) + c]);
    float *ref = widen_bf16(y.data, M * N), *ref64 = widen_bf16(y64.data, M * N);
    int64_t flips = 0;
    for (int64_t i = 0; i < M * N; i++) flips += got[i] != ref[i];
    printf("  matmul vs torch._scaled_mm: %lld of %lld bf16 outputs differ (max_abs %.2e); torch vs float64 %.3e\n",
           (long long)flips, (long long)(M * N), h3_max_abs(got, ref, (size_t)(M * N)),
           h3_rel_l2(ref, ref64, (size_t)(M * N)));
    /* only the fp32 summation order differs (single bf16 roundings flip, nothing more): the CPU's sum is within
     * 1e-4 of the exact product, _scaled_mm (cuBLASLt) within its own rounding of it */
    CHECK_CLOSE("fp8 matmul vs torch._scaled_mm", h3_rel_l2(got, ref, (size_t)(M * N)), 2e-3);
    CHECK_CLOSE("fp8 matmul vs the float64 product", h3_rel_l2(got, ref64, (size_t)(M * N)), 1e-4);
    h3_fp8_linear_free(be, &lw);
    free(q), free(sc), free(out), free(got), free(ref), free(ref64);
    st_set_free(s);
}

/* Edge rows: the largest |x| maps to +-448 (code 0x7e / 0xfe), a zero row gets the floor scale and zero codes,
 * and dequantized values are within half an E4M3 step of x. */
static void test_invariants(h3_backend *be) {
    enum { R = 4, K = 40 };
    uint16_t x[R * K];
    for (int c = 0; c < K; c++) {
        x[0 * K + c] = h3_f32_to_bf16((float)(c - 20) * 0.37f);
        x[1 * K + c] = 0;
        x[2 * K + c] = h3_f32_to_bf16(c == 7 ? -5000.0f : 1e-3f * (float)c);
        x[3 * K + c] = h3_f32_to_bf16(1e-8f * (float)(c + 1));
    }
    uint8_t q[R * K];
    float s[R];
    h3_fp8_quant_rows(be, q, s, x, R, K, K);
    CHECK(q[0 * K + 0] == 0xfe, "row 0: the absmax element (-7.4) is not -448 (code %#x)", q[0]);
    CHECK(s[1] == H3_FP8_MIN_AMAX / H3_FP8_MAX, "zero row: scale %g", (double)s[1]);
    int zeros = 1;
    for (int c = 0; c < K; c++) zeros &= (q[K + c] & 0x7f) == 0;
    CHECK(zeros, "zero row: nonzero codes");
    CHECK(q[2 * K + 7] == 0xfe, "row 2: the outlier is not -448");
    CHECK(s[3] == H3_FP8_MIN_AMAX / H3_FP8_MAX, "tiny row: the scale floor is not applied (%g)", (double)s[3]);
    double worst = 0;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < K; c++) {
            float v = h3_bf16_to_f32(x[r * K + c]), d = h3_f8e4m3_to_f32(q[r * K + c]) * s[r];
            float a = fabsf(v / s[r]);
            /* E4M3 step at |a|: 2^(floor(log2 a) - 3) above 2^-6, 2^-9 below */
            float step = a >= 0x1p-6f ? ldexpf(1.0f, (int)floorf(log2f(a)) - 3) : 0x1p-9f;
            double err = fabs((double)d - v) / (0.5 * step * s[r]);
            if (err > worst) worst = err;
        }
    printf("  quantization error / half step, worst over the edge rows: %.3f\n", worst);
    CHECK(worst <= 1.0 + 1e-6, "a code is more than half an E4M3 step from its value (%.3f)", worst);
}

int main(void) {
    h3_err e;
    h3_backend *be = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    if (!be) {
        fprintf(stderr, "%s\n", e.msg);
        return 2;
    }
    printf("fp8 quantizer invariants:\n");
    test_invariants(be);
    test_fixture(be);
    h3_backend_free(be);
    TEST_END();
}
