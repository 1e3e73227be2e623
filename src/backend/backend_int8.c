/* Dispatch of the INT8 W8A8 ops (backend_int8.h) to the CPU twins (cpu/cpu_int8.c) or the CUDA ones
 * (cuda/cuda_int8.cu), which give the same bits. */
#include "backend_int8.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/dtype.h"
#include "cpu/cpu_int8.h"
#ifdef H3_CUDA
#include "cuda/cuda_int8.h"
#endif
#include "backend_timed.h"

float h3_int8_quantize_row(const float *x, int64_t n, int8_t *q) {
    float amax = 0.0f;
    for (int64_t c = 0; c < n; c++) amax = fmaxf(amax, fabsf(x[c]));
    const float s = fmaxf(amax, H3_INT8_MIN_AMAX) / H3_INT8_MAX;
    for (int64_t c = 0; c < n; c++) {
        float v = rintf(x[c] / s); /* the default rounding mode: to nearest, ties to even */
        v = v > 127.0f ? 127.0f : v < -127.0f ? -127.0f : v;
        q[c] = (int8_t)v;
    }
    return s;
}

void h3_int8_quant_rows(h3_backend *be, int8_t *q, float *scale, const h3_bf16 *x, int64_t rows, int64_t dim,
                        int64_t ldx, int64_t group) {
    TIMED_DISPATCH(be, int8_quant_rows, be, q, scale, x, rows, dim, ldx, group);
}

void h3_int8_gemm_s32(h3_backend *be, int32_t *acc, const int8_t *xq, int64_t M, const h3_int8_linear *w, int64_t k0,
                      int64_t kn) {
    TIMED_DISPATCH(be, int8_gemm_s32, be, acc, xq, M, w, k0, kn);
}

void h3_int8_matmul(h3_backend *be, h3_bf16 *y, int64_t ldy, const int8_t *xq, const float *xs, int64_t M,
                    const h3_int8_linear *w, const h3_bf16 *bias) {
    TIMED_DISPATCH(be, int8_matmul, be, y, ldy, xq, xs, M, w, bias);
}

static int alloc_linear(h3_backend *be, h3_int8_linear *out, int64_t N, int64_t K, h3_err *e) {
    memset(out, 0, sizeof *out);
    out->q = h3_alloc(be, (size_t)(N * K));
    out->scale = h3_alloc(be, (size_t)N * sizeof(float));
    if (!out->q || !out->scale) {
        h3_int8_linear_free(be, out);
        return h3_fail(e, "int8: out of memory for a %lld x %lld weight", (long long)N, (long long)K);
    }
    out->N = N, out->K = K;
    return 0;
}

int h3_int8_linear_new(h3_backend *be, h3_int8_linear *out, const h3_tensor *w, h3_err *e) {
    memset(out, 0, sizeof *out);
    if (!w || (w->dtype != H3_BF16 && w->dtype != H3_F32) || w->ndim != 2 || w->shape[0] < 1 || w->shape[1] < 1)
        return h3_fail(e, "int8 quantization: the weight must be a BF16 or F32 matrix");
    const int64_t N = w->shape[0], K = w->shape[1];
    if (alloc_linear(be, out, N, K, e) != 0) return -1;
    if (w->dtype == H3_BF16) { /* on the backend, through the activation quantizer (the same rule) */
        h3_int8_quant_rows(be, out->q, out->scale, (const h3_bf16 *)w->data, N, K, K, 0);
        return 0;
    }
    /* F32: on the host, row by row */
    float *row = malloc((size_t)K * sizeof(float)), *s = malloc((size_t)N * sizeof(float));
    int8_t *q = malloc((size_t)K);
    if (!row || !s || !q) {
        free(row), free(s), free(q);
        h3_int8_linear_free(be, out);
        return h3_fail(e, "int8 quantization: out of host memory");
    }
    for (int64_t n = 0; n < N; n++) {
        h3_download(be, row, (const float *)w->data + n * K, (size_t)K * sizeof(float));
        s[n] = h3_int8_quantize_row(row, K, q);
        h3_upload(be, out->q + n * K, q, (size_t)K);
    }
    h3_upload(be, out->scale, s, (size_t)N * sizeof(float));
    free(row), free(s), free(q);
    return 0;
}

int h3_int8_linear_from(h3_backend *be, h3_int8_linear *out, const h3_tensor *q, const h3_tensor *scale, h3_err *e) {
    memset(out, 0, sizeof *out);
    if (!q || q->dtype != H3_I8 || q->ndim != 2)
        return h3_fail(e, "int8: the codes must be an I8 matrix");
    const int64_t N = q->shape[0], K = q->shape[1];
    if (!scale || (scale->dtype != H3_F32 && scale->dtype != H3_BF16) || h3_tensor_numel(scale) != N)
        return h3_fail(e, "int8: the scales must be F32 or BF16 [%lld, 1]", (long long)N);
    if (alloc_linear(be, out, N, K, e) != 0) return -1;
    float *s = malloc((size_t)N * sizeof(float));
    if (!s) {
        h3_int8_linear_free(be, out);
        return h3_fail(e, "int8: out of host memory");
    }
    h3_convert_to_f32(s, scale->data, scale->dtype, (size_t)N);
    h3_upload(be, out->scale, s, (size_t)N * sizeof(float));
    h3_copy(be, out->q, q->data, (size_t)(N * K));
    free(s);
    return 0;
}

void h3_int8_linear_free(h3_backend *be, h3_int8_linear *l) {
    if (!l) return;
    h3_free(be, l->q);
    h3_free(be, l->scale);
    l->q = NULL, l->scale = NULL, l->N = l->K = l->group = 0;
}
