/* CPU twins of the FP8 W8A8 ops (ops_linear.h). The quantizer is the scheme's definition; the GEMM widens
 * the E4M3 codes to fp32 (exact) and runs OpenBLAS's SGEMM, so acc is an fp32 sum of exact products.
 * Compiled with -ffp-contract=off like the other twins. */
#include "cpu_ops.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>

#include "../../core/dtype.h"

void cpu_fp8_quant_rows(h3_backend *be, uint8_t *q, float *scale, const h3_bf16 *x, int64_t rows, int64_t dim,
                        int64_t ldx) {
#pragma omp parallel for schedule(static) if (rows * dim >= 32768)
    for (int64_t r = 0; r < rows; r++) {
        const h3_bf16 *xr = x + r * ldx;
        float amax = 0.0f;
        for (int64_t c = 0; c < dim; c++) amax = fmaxf(amax, fabsf(h3_bf16_to_f32(xr[c])));
        float s = fmaxf(amax, H3_FP8_MIN_AMAX) / H3_FP8_MAX;
        scale[r] = s;
        for (int64_t c = 0; c < dim; c++) q[r * dim + c] = h3_f32_to_f8e4m3(h3_bf16_to_f32(xr[c]) / s);
    }
}

/* Tiles of widened rows: MM_ROWS activation rows and W_ROWS weight rows at a time (<= 64 MB each at K = 14336). */
enum { MM_ROWS = 1024, W_ROWS = 1024 };

void cpu_fp8_matmul(h3_backend *be, h3_bf16 *y, int64_t ldy, const uint8_t *xq, const float *xs, int64_t M,
                    const h3_fp8_linear *w) {
    const int64_t N = w->N, K = w->K;
    if (M <= 0 || N <= 0) return;
    float lut[256];
    for (int i = 0; i < 256; i++) lut[i] = h3_f8e4m3_to_f32((uint8_t)i);
    const int64_t mr = M < MM_ROWS ? M : MM_ROWS, nr = N < W_ROWS ? N : W_ROWS;
    float *xf = malloc((size_t)(mr * K) * sizeof(float));
    float *wf = malloc((size_t)(nr * K) * sizeof(float));
    float *acc = malloc((size_t)(mr * nr) * sizeof(float));
    if (!xf || !wf || !acc) {
        free(xf), free(wf), free(acc);
        h3_backend_unsupported(be, "h3_fp8_matmul", "out of memory for the widened tiles");
        return;
    }
    for (int64_t n0 = 0; n0 < N; n0 += nr) {
        const int64_t nt = N - n0 < nr ? N - n0 : nr;
#pragma omp parallel for schedule(static) if (nt * K >= 32768)
        for (int64_t i = 0; i < nt * K; i++) wf[i] = lut[w->q[n0 * K + i]];
        for (int64_t m0 = 0; m0 < M; m0 += mr) {
            const int64_t mt = M - m0 < mr ? M - m0 : mr;
#pragma omp parallel for schedule(static) if (mt * K >= 32768)
            for (int64_t i = 0; i < mt * K; i++) xf[i] = lut[xq[m0 * K + i]];
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)mt, (int)nt, (int)K, 1.0f, xf, (int)K, wf,
                        (int)K, 0.0f, acc, (int)nt);
#pragma omp parallel for schedule(static) if (mt * nt >= 32768)
            for (int64_t r = 0; r < mt; r++)
                for (int64_t c = 0; c < nt; c++) {
                    float v = acc[r * nt + c] * (xs[m0 + r] * w->scale[n0 + c]);
                    if (w->bias) v += h3_bf16_to_f32(w->bias[n0 + c]); /* (no +0 without one: -0 stays -0) */
                    y[(m0 + r) * ldy + n0 + c] = h3_f32_to_bf16(v);
                }
        }
    }
    free(xf), free(wf), free(acc);
}
