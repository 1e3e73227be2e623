/* The FP8 W8A8 ops (backend_fp8.h) on CUDA against their CPU twins and against PyTorch's fixture
 * (tests/fixtures/fp8/linear.safetensors: LightX2V's quantization in torch, torch._scaled_mm). Quantization must
 * be bit-identical (codes and scales); the GEMM differs from the twin by its fp32 summation order only.
 * `test_cuda_fp8 bench`: FP8 vs BF16 GEMM rates at the DiT's block shapes (M = 19540 rows, 544x960x124) and the
 * quantizer's bandwidth. Built with CUDA=1 (make cuda-tests), run on the GPU machine. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test.h"
#include "test_data.h"
#include "backend/backend.h"
#include "backend/backend_bf16.h"
#include "backend/backend_fp8.h"
#include "core/dtype.h"
#include "core/tensor.h"
#include "io/safetensors.h"

static h3_backend *cpu, *gpu;
static void *dev(const void *host, size_t bytes) {
    void *d = h3_alloc(gpu, bytes);
    if (host) h3_upload(gpu, d, host, bytes);
    return d;
}

/* rows with a spread of magnitudes, a zero row, an outlier */
static uint16_t *rand_rows(int64_t rows, int64_t ld, float scale) {
    uint16_t *x = malloc((size_t)(rows * ld) * 2);
    for (int64_t r = 0; r < rows; r++) {
        float m = scale * powf(10.0f, 3.0f * (float)(r % 7) / 6.0f - 2.0f);
        for (int64_t c = 0; c < ld; c++) x[r * ld + c] = h3_f32_to_bf16(r == 1 ? 0.0f : frand() * m);
    }
    if (rows > 2) x[2 * ld + 3] = h3_f32_to_bf16(-7000.0f);
    return x;
}

static void test_quant(const char *name, int64_t rows, int64_t dim, int64_t ldx) {
    uint16_t *x = rand_rows(rows, ldx, 1.0f);
    uint8_t *qc = malloc((size_t)(rows * dim)), *qg = malloc((size_t)(rows * dim));
    float *sc = malloc((size_t)rows * sizeof(float)), *sg = malloc((size_t)rows * sizeof(float));
    h3_fp8_quant_rows(cpu, qc, sc, x, rows, dim, ldx);
    uint16_t *dx = dev(x, (size_t)(rows * ldx) * 2);
    uint8_t *dq = dev(NULL, (size_t)(rows * dim));
    float *ds = dev(NULL, (size_t)rows * sizeof(float));
    h3_fp8_quant_rows(gpu, dq, ds, dx, rows, dim, ldx);
    h3_download(gpu, qg, dq, (size_t)(rows * dim));
    h3_download(gpu, sg, ds, (size_t)rows * sizeof(float));
    int64_t dc = 0, dsc = 0;
    for (int64_t i = 0; i < rows * dim; i++) dc += qc[i] != qg[i];
    for (int64_t i = 0; i < rows; i++) dsc += memcmp(&sc[i], &sg[i], 4) != 0;
    printf("  %-52s codes %lld of %lld differ, scales %lld of %lld\n", name, (long long)dc, (long long)(rows * dim),
           (long long)dsc, (long long)rows);
    CHECK(dc == 0 && dsc == 0, "%s: CUDA quantization differs from the CPU twin", name);
    h3_free(gpu, dx), h3_free(gpu, dq), h3_free(gpu, ds);
    free(x), free(qc), free(qg), free(sc), free(sg);
}

static double rel_bf16(const uint16_t *a, const uint16_t *b, int64_t rows, int64_t cols, int64_t ld, int64_t *flips) {
    double num = 0, den = 0;
    *flips = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            double u = h3_bf16_to_f32(a[r * ld + c]), v = h3_bf16_to_f32(b[r * ld + c]);
            num += (u - v) * (u - v), den += v * v;
            *flips += a[r * ld + c] != b[r * ld + c];
        }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static void test_matmul(const char *name, int64_t M, int64_t N, int64_t K, int64_t ldy) {
    uint16_t *x = rand_rows(M, K, 1.0f), *w = rand_rows(N, K, 0.05f);
    int64_t shape[2] = {N, K};
    h3_err e;
    h3_tensor *wt = h3_tensor_view(H3_BF16, 2, shape, w, &e);
    h3_fp8_linear lc, lg;
    CHECK(h3_fp8_linear_new(cpu, &lc, wt, &e) == 0, "%s", e.msg);
    h3_tensor *wd = h3_weight_upload(gpu, wt, &e);
    CHECK(wd && h3_fp8_linear_new(gpu, &lg, wd, &e) == 0, "%s", e.msg);
    uint8_t *xq = malloc((size_t)(M * K));
    float *xs = malloc((size_t)M * sizeof(float));
    h3_fp8_quant_rows(cpu, xq, xs, x, M, K, K);
    uint16_t *yc = malloc((size_t)(M * ldy) * 2), *yg = malloc((size_t)(M * ldy) * 2);
    for (int64_t i = 0; i < M * ldy; i++) yc[i] = 0x7fc0;
    h3_fp8_matmul(cpu, yc, ldy, xq, xs, M, &lc);
    uint8_t *dxq = dev(xq, (size_t)(M * K));
    float *dxs = dev(xs, (size_t)M * sizeof(float));
    uint16_t *dy = dev(yc, (size_t)(M * ldy) * 2); /* NaN-poisoned outside the written columns */
    h3_fp8_matmul(gpu, dy, ldy, dxq, dxs, M, &lg);
    h3_download(gpu, yg, dy, (size_t)(M * ldy) * 2);
    h3_err ce = {{0}};
    CHECK(h3_backend_check(gpu, &ce) == 0, "%s: %s", name, ce.msg);
    int64_t flips, pad_ok = 1;
    for (int64_t r = 0; r < M; r++)
        for (int64_t c = N; c < ldy; c++) pad_ok &= yg[r * ldy + c] == 0x7fc0;
    double rel = rel_bf16(yg, yc, M, N, ldy, &flips);
    printf("  %-52s rel_l2 %.3e, %lld of %lld bf16 outputs differ\n", name, rel, (long long)flips, (long long)(M * N));
    CHECK(rel <= 2e-3, "%s: CUDA fp8 matmul vs CPU twin rel L2 %.3e", name, rel);
    CHECK(pad_ok, "%s: columns past N were written", name);
    h3_fp8_linear_free(cpu, &lc), h3_fp8_linear_free(gpu, &lg);
    h3_weight_free(gpu, wd), h3_tensor_free(wt);
    h3_free(gpu, dxq), h3_free(gpu, dxs), h3_free(gpu, dy);
    free(x), free(w), free(xq), free(xs), free(yc), free(yg);
}

static void test_fixture(void) {
    h3_err e = {{0}};
    st_set *s = st_set_open("tests/fixtures/fp8/linear.safetensors", &e);
    CHECK(s != NULL, "%s", e.msg);
    if (!s) return;
    h3_tensor x, w, xq, xs, y;
    CHECK(st_set_get(s, "x", &x, &e) == 0 && st_set_get(s, "w", &w, &e) == 0 && st_set_get(s, "xq", &xq, &e) == 0 &&
              st_set_get(s, "xs", &xs, &e) == 0 && st_set_get(s, "y", &y, &e) == 0,
          "%s", e.msg);
    const int64_t M = x.shape[0], K = x.shape[1], N = w.shape[0];
    h3_tensor *wd = h3_weight_upload(gpu, &w, &e);
    h3_fp8_linear lg;
    CHECK(wd && h3_fp8_linear_new(gpu, &lg, wd, &e) == 0, "%s", e.msg);
    uint16_t *dx = dev(x.data, (size_t)(M * K) * 2);
    uint8_t *dq = dev(NULL, (size_t)(M * K));
    float *ds = dev(NULL, (size_t)M * sizeof(float));
    uint16_t *dy = dev(NULL, (size_t)(M * N) * 2);
    h3_fp8_quant_rows(gpu, dq, ds, dx, M, K, K);
    h3_fp8_matmul(gpu, dy, N, dq, ds, M, &lg);
    uint8_t *q = malloc((size_t)(M * K));
    uint16_t *yg = malloc((size_t)(M * N) * 2);
    h3_download(gpu, q, dq, (size_t)(M * K));
    h3_download(gpu, yg, dy, (size_t)(M * N) * 2);
    int64_t dc = 0, flips;
    for (int64_t i = 0; i < M * K; i++) dc += q[i] != ((const uint8_t *)xq.data)[i];
    double rel = rel_bf16(yg, y.data, M, N, N, &flips);
    printf("  torch fixture: CUDA codes %lld of %lld differ; CUDA GEMM vs torch._scaled_mm rel_l2 %.3e (%lld of %lld differ)\n",
           (long long)dc, (long long)(M * K), rel, (long long)flips, (long long)(M * N));
    CHECK(dc == 0, "CUDA activation codes differ from torch");
    CHECK(rel <= 2e-3, "CUDA fp8 GEMM vs torch._scaled_mm rel L2 %.3e", rel);
    h3_fp8_linear_free(gpu, &lg), h3_weight_free(gpu, wd);
    h3_free(gpu, dx), h3_free(gpu, dq), h3_free(gpu, ds), h3_free(gpu, dy);
    free(q), free(yg);
    st_set_free(s);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* GEMM rates at one DiT block's shapes, bf16 vs fp8 (quantization of the input timed separately). */
static void bench(void) {
    const int64_t M = 19540;
    struct { const char *name; int64_t N, K; } sh[] = {
        {"qkv 21504 x 5376", 21504, 5376}, {"attn out 5376 x 7168", 5376, 7168},
        {"ffn up 28672 x 5376", 28672, 5376}, {"ffn down 5376 x 14336", 5376, 14336}};
    h3_err e;
    printf("bench: M = %lld rows (544x960x124), median of 9\n", (long long)M);
    for (size_t i = 0; i < sizeof sh / sizeof sh[0]; i++) {
        const int64_t N = sh[i].N, K = sh[i].K;
        int64_t wshape[2] = {N, K};
        h3_tensor wv = {H3_BF16, 2, {N, K}, NULL, 0};
        (void)wshape;
        wv.data = h3_alloc(gpu, (size_t)(N * K) * 2);
        uint16_t *hw = rand_rows(1024, K, 0.05f);
        for (int64_t r = 0; r < N; r += 1024)
            h3_upload(gpu, (uint16_t *)wv.data + r * K, hw, (size_t)((N - r < 1024 ? N - r : 1024) * K) * 2);
        uint16_t *hx = rand_rows(1024, K, 1.0f);
        uint16_t *x = h3_alloc(gpu, (size_t)(M * K) * 2), *y = h3_alloc(gpu, (size_t)(M * N) * 2);
        for (int64_t r = 0; r < M; r += 1024)
            h3_upload(gpu, x + r * K, hx, (size_t)((M - r < 1024 ? M - r : 1024) * K) * 2);
        uint8_t *xq = h3_alloc(gpu, (size_t)(M * K));
        float *xs = h3_alloc(gpu, (size_t)M * sizeof(float));
        h3_fp8_linear l;
        if (!x || !y || !xq || !xs || h3_fp8_linear_new(gpu, &l, &wv, &e) != 0) {
            printf("  %s: out of memory\n", sh[i].name);
            continue;
        }
        double tb[9], tf[9], tfa[9], tq[9];
        for (int rep = -1; rep < 9; rep++) {
            double t0;
            h3_sync(gpu), t0 = now_s();
            h3_bf16_matmul(gpu, y, N, x, K, M, &wv, NULL);
            h3_sync(gpu);
            if (rep >= 0) tb[rep] = now_s() - t0;
            t0 = now_s();
            h3_fp8_quant_rows(gpu, xq, xs, x, M, K, K);
            h3_sync(gpu);
            if (rep >= 0) tq[rep] = now_s() - t0;
            t0 = now_s();
            h3_fp8_matmul(gpu, y, N, xq, xs, M, &l);
            h3_sync(gpu);
            if (rep >= 0) tf[rep] = now_s() - t0;
            setenv("H3_FP8_FAST_ACCUM", "1", 1);
            t0 = now_s();
            h3_fp8_matmul(gpu, y, N, xq, xs, M, &l);
            h3_sync(gpu);
            if (rep >= 0) tfa[rep] = now_s() - t0;
            unsetenv("H3_FP8_FAST_ACCUM");
        }
        double *ts[4] = {tb, tq, tf, tfa};
        for (int k = 0; k < 4; k++) /* medians */
            for (int a = 0; a < 9; a++)
                for (int b = a + 1; b < 9; b++)
                    if (ts[k][b] < ts[k][a]) {
                        double t = ts[k][a];
                        ts[k][a] = ts[k][b], ts[k][b] = t;
                    }
        double fl = 2.0 * (double)M * (double)N * (double)K;
        printf("  %-24s bf16 %.3f ms (%.0f TFLOP/s) | fp8 %.3f ms (%.0f TFLOP/s), fast accum %.3f ms (%.0f) | quant %.3f ms (%.2f TB/s)\n",
               sh[i].name, tb[4] * 1e3, fl / tb[4] / 1e12, tf[4] * 1e3, fl / tf[4] / 1e12, tfa[4] * 1e3, fl / tfa[4] / 1e12,
               tq[4] * 1e3, (double)(M * K) * 3.0 / tq[4] / 1e12);
        h3_err ce = {{0}};
        CHECK(h3_backend_check(gpu, &ce) == 0, "bench %s: %s", sh[i].name, ce.msg);
        h3_fp8_linear_free(gpu, &l);
        h3_free(gpu, x), h3_free(gpu, y), h3_free(gpu, xq), h3_free(gpu, xs), h3_free(gpu, wv.data);
        free(hw), free(hx);
    }
}

int main(int argc, char **argv) {
    h3_err e;
    cpu = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    gpu = h3_backend_new(H3_BACKEND_CUDA, 0, &e);
    if (!cpu || !gpu) {
        fprintf(stderr, "test_cuda_fp8: %s\n", e.msg);
        return 2;
    }
    printf("fp8 quantization, CUDA vs CPU twin:\n");
    test_quant("rows 300 x 5376 (vectorized)", 300, 5376, 5376);
    test_quant("rows 64 x 14336, row stride 28672", 64, 14336, 28672);
    test_quant("rows 77 x 100 (unvectorized)", 77, 100, 100);
    test_quant("rows 5 x 7 with stride 9", 5, 7, 9);
    printf("fp8 matmul, CUDA vs CPU twin:\n");
    test_matmul("300 x 512 x 5376", 300, 512, 5376, 512);
    test_matmul("257 x 1040 x 1024, y slice of 1104", 257, 1040, 1024, 1104);
    test_matmul("33 x 48 x 64 (tiny model widths)", 33, 48, 64, 48);
    test_fixture();
    if (argc > 1 && !strcmp(argv[1], "bench")) bench();
    h3_backend_free(gpu);
    h3_backend_free(cpu);
    TEST_END();
}
