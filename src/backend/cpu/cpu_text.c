/* CPU twins of the conditioner ops (ops.h). */
#include "cpu_ops.h"
#include "cpu_exp.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RND(v) ((flags & H3_BF16_OUT) ? h3_round_bf16(v) : (v))

void cpu_rmsnorm_qwen(h3_backend *be, float *y, const float *x, int64_t rows, int64_t dim, const float *w, float eps,
                      int flags) {
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * dim;
        float *yr = y + r * dim;
        float ss = 0.0f; /* x.pow(2).mean(-1) in fp32 */
        for (int64_t c = 0; c < dim; c++) ss += xr[c] * xr[c];
        float inv = 1.0f / sqrtf(ss / (float)dim + eps);
        for (int64_t c = 0; c < dim; c++) {
            float v = RND(xr[c] * inv);
            yr[c] = RND(w[c] * v);
        }
    }
}

void cpu_rows_add(h3_backend *be, float *x, const int64_t *rows, const float *src, int64_t n, int64_t dim, int flags) {
#pragma omp parallel for schedule(static)
    for (int64_t a = 0; a < n; a++) {
        float *xr = x + rows[a] * dim;
        const float *sr = src + a * dim;
        for (int64_t c = 0; c < dim; c++) xr[c] = RND(xr[c] + sr[c]);
    }
}

void cpu_attention_eager_bf16(h3_backend *be, float *out, int64_t o_stride, const float *q, int64_t q_stride,
                              const float *k, int64_t k_stride, const float *v, int64_t v_stride, int64_t Sq,
                              int64_t Skv, int Hq, int Hkv, int D, float scale, int causal) {
    const int64_t BQ = 128;
    int group = Hq / Hkv;
    float *scores = malloc((size_t)(BQ * Skv) * sizeof(float));
    if (!scores) return;
    for (int h = 0; h < Hq; h++) {
        int hk = h / group;
        const float *kh = k + (int64_t)hk * D, *vh = v + (int64_t)hk * D;
        for (int64_t q0 = 0; q0 < Sq; q0 += BQ) {
            int64_t nq = Sq - q0 < BQ ? Sq - q0 : BQ;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)Skv, D, 1.0f, q + q0 * q_stride + (int64_t)h * D,
                        (int)q_stride, kh, (int)k_stride, 0.0f, scores, (int)Skv);
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < nq; i++) {
                float *s = scores + i * Skv;
                int64_t lim = causal ? q0 + i + 1 : Skv;
                /* Rounding, max and division are lane-wise (same bits as one at a time); libm's expf is
                 * taken several values at a time, the sum stays in order (docs/architecture.md "The CPU twins' loops"). */
                float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
                for (int64_t j = 0; j < lim; j++) {
                    float t = h3_round_bf16(h3_round_bf16(s[j]) * scale);
                    s[j] = t;
                    mx = t > mx ? t : mx;
                }
                cpu_expf_shifted(s, lim, mx);
                float sum = 0.0f;
                for (int64_t j = 0; j < lim; j++) sum += s[j];
#pragma omp simd
                for (int64_t j = 0; j < lim; j++) s[j] = h3_round_bf16(s[j] / sum);
                if (lim < Skv) memset(s + lim, 0, (size_t)(Skv - lim) * sizeof(float));
            }
            float *oh = out + q0 * o_stride + (int64_t)h * D;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nq, D, (int)Skv, 1.0f, scores, (int)Skv, vh,
                        (int)v_stride, 0.0f, oh, (int)o_stride);
            for (int64_t i = 0; i < nq; i++) {
                float *o = oh + i * o_stride;
#pragma omp simd
                for (int d = 0; d < D; d++) o[d] = h3_round_bf16(o[d]);
            }
        }
    }
    free(scores);
}
