/* The quantized linears of ops_linear.h: made from a weight through the table's quantization ops (ops_linear.def),
 * and the int8 rule on host rows that the converter, the CPU twin and the tests share (docs/int8.md, docs/fp8.md). */
#include "ops_linear.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/dtype.h"

/* N x K one-byte codes and N scales in backend memory, both or neither */
static int alloc_codes(h3_backend *be, void **q, float **scale, int64_t N, int64_t K, const char *what, h3_err *e) {
    *q = h3_alloc(be, (size_t)(N * K));
    *scale = h3_alloc(be, (size_t)N * sizeof(float));
    if (*q && *scale) return 0;
    h3_free(be, *q), h3_free(be, *scale);
    *q = NULL, *scale = NULL;
    return h3_fail(e, "%s: out of memory for a %lld x %lld weight", what, (long long)N, (long long)K);
}

int h3_fp8_linear_new(h3_backend *be, h3_fp8_linear *out, const h3_tensor *w, h3_err *e) {
    memset(out, 0, sizeof *out);
    if (!w || w->dtype != H3_BF16 || w->ndim != 2 || w->shape[0] < 1 || w->shape[1] < 1)
        return h3_fail(e, "fp8 quantization: the weight must be a BF16 matrix");
    const int64_t N = w->shape[0], K = w->shape[1];
    if (alloc_codes(be, (void **)&out->q, &out->scale, N, K, "fp8 quantization", e) != 0) return -1;
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

static int alloc_linear(h3_backend *be, h3_int8_linear *out, int64_t N, int64_t K, h3_err *e) {
    memset(out, 0, sizeof *out);
    if (alloc_codes(be, (void **)&out->q, &out->scale, N, K, "int8", e) != 0) return -1;
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
