/* CPU twins of the INT8 W8A8 ops (ops_linear.h): exact int32 dot products (the "CPU INT32 reference" of
 * docs/int8.md), the quantizer through the one row rule h3_int8_quantize_row, the dequantization in fp32 left to
 * right. Compiled with -ffp-contract=off like the other twins. */
#include "cpu_ops.h"

#include <stdlib.h>

#include "../../core/dtype.h"

void cpu_int8_quant_rows(h3_backend *be, int8_t *q, float *scale, const h3_bf16 *x, int64_t rows, int64_t dim,
                         int64_t ldx, int64_t group) {
    (void)be;
    const int64_t g = group > 0 ? group : dim, ng = dim / g;
#pragma omp parallel
    {
        float *row = malloc((size_t)g * sizeof(float));
#pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            for (int64_t j = 0; j < ng; j++) {
                const h3_bf16 *xr = x + r * ldx + j * g;
                if (!row) continue;
                for (int64_t c = 0; c < g; c++) row[c] = h3_bf16_to_f32(xr[c]);
                scale[r * ng + j] = h3_int8_quantize_row(row, g, q + r * dim + j * g);
            }
        }
        free(row);
    }
}

static int32_t dot_s8(const int8_t *a, const int8_t *b, int64_t n) {
    int32_t s = 0;
    for (int64_t k = 0; k < n; k++) s += (int32_t)a[k] * (int32_t)b[k];
    return s;
}

void cpu_int8_gemm_s32(h3_backend *be, int32_t *acc, const int8_t *xq, int64_t M, const h3_int8_linear *w, int64_t k0,
                       int64_t kn) {
    (void)be;
    const int64_t N = w->N, K = w->K;
#pragma omp parallel for schedule(static) collapse(2) if (M * N * kn >= 65536)
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) acc[m * N + n] = dot_s8(xq + m * K + k0, w->q + n * K + k0, kn);
}

void cpu_int8_matmul(h3_backend *be, h3_bf16 *y, int64_t ldy, const int8_t *xq, const float *xs, int64_t M,
                     const h3_int8_linear *w, const h3_bf16 *bias) {
    (void)be;
    const int64_t N = w->N, K = w->K, g = w->group > 0 ? w->group : K, ng = K / g;
#pragma omp parallel for schedule(static) collapse(2) if (M * N * K >= 65536)
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            const int8_t *a = xq + m * K, *b = w->q + n * K;
            float v;
            if (ng == 1) {
                v = (float)dot_s8(a, b, K) * xs[m] * w->scale[n];
            } else {
                float s = 0.0f;
                for (int64_t j = 0; j < ng; j++) s += (float)dot_s8(a + j * g, b + j * g, g) * xs[m * ng + j];
                v = s * w->scale[n];
            }
            if (bias) v += h3_bf16_to_f32(bias[n]);
            y[m * ldy + n] = h3_f32_to_bf16(v);
        }
}
