/* Dispatch of the FP8 W8A8 ops (backend_fp8.h) to the CPU twin (cpu/cpu_fp8.c) or CUDA (cuda/cuda_w8a8.cu). */
#include "backend_fp8.h"

#include <string.h>

#include "cpu/cpu_fp8.h"
#ifdef H3_CUDA
#include "cuda/cuda_w8a8.h"
#endif
#include "backend_timed.h"

void h3_fp8_quant_rows(h3_backend *be, uint8_t *q, float *scale, const h3_bf16 *x, int64_t rows, int64_t dim,
                       int64_t ldx) {
    TIMED_DISPATCH(be, fp8_quant_rows, be, q, scale, x, rows, dim, ldx);
}

void h3_fp8_matmul(h3_backend *be, h3_bf16 *y, int64_t ldy, const uint8_t *xq, const float *xs, int64_t M,
                   const h3_fp8_linear *w) {
    TIMED_DISPATCH(be, fp8_matmul, be, y, ldy, xq, xs, M, w);
}

int h3_fp8_linear_new(h3_backend *be, h3_fp8_linear *out, const h3_tensor *w, h3_err *e) {
    memset(out, 0, sizeof *out);
    if (!w || w->dtype != H3_BF16 || w->ndim != 2 || w->shape[0] < 1 || w->shape[1] < 1)
        return h3_fail(e, "fp8 quantization: the weight must be a BF16 matrix");
    const int64_t N = w->shape[0], K = w->shape[1];
    out->q = h3_alloc(be, (size_t)(N * K));
    out->scale = h3_alloc(be, (size_t)N * sizeof(float));
    if (!out->q || !out->scale) {
        h3_fp8_linear_free(be, out);
        return h3_fail(e, "fp8 quantization: out of memory for a %lld x %lld weight", (long long)N, (long long)K);
    }
    out->N = N, out->K = K;
    h3_fp8_quant_rows(be, out->q, out->scale, (const h3_bf16 *)w->data, N, K, K);
    return 0;
}

void h3_fp8_linear_free(h3_backend *be, h3_fp8_linear *l) {
    if (!l) return;
    h3_free(be, l->q);
    h3_free(be, l->scale);
    l->q = NULL, l->scale = NULL, l->bias = NULL, l->N = l->K = 0;
}
