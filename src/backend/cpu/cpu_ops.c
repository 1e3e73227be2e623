/* The CPU backend: the numerical reference. GEMMs through OpenBLAS (fp32), everything else plain
 * loops parallelized with OpenMP. Compiled with -ffp-contract=off so fp32 results round like the
 * PyTorch reference's unfused ops. */
#include "cpu_ops.h"
#include "cpu_exp.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define RND(v) ((flags & H3_BF16_OUT) ? h3_round_bf16(v) : (v))
/* Start threads only when the loop has enough work to pay for them (tiny ops dominate small
 * models, and waking a pool thousands of times costs more than it saves). */
#define PAR(work) ((int64_t)(work) >= 32768)

void *cpu_alloc(h3_backend *be, size_t bytes) {
    size_t n = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, n ? n : 64);
    if (p) memset(p, 0, n ? n : 64);
    return p;
}

void cpu_free(h3_backend *be, void *p) { free(p); }

/* Rows of W widened to fp32 per tile: large enough for an efficient GEMM, small enough
 * (~16 MB) that a 66 GB bf16 model never needs an fp32 copy. */
static int64_t matmul_tile_rows(int64_t K) {
    int64_t rows = (4 << 20) / (K > 0 ? K : 1);
    if (rows < 16) rows = 16;
    return rows;
}

void cpu_matmul(h3_backend *be, float *y, const float *x, int64_t M, const h3_tensor *w, const h3_tensor *bias,
                int flags) {
    int64_t N = w->shape[0], K = w->shape[1];
    if (M <= 0 || N <= 0) return;
    float *xh = NULL;
    if ((flags & H3_F16_IN) && w->dtype == H3_F16) { /* the fp16-autocast input: x rounded to fp16 (exact in fp32) */
        if (!(xh = cpu_alloc(be, (size_t)(M * K) * sizeof(float)))) return;
#pragma omp parallel for schedule(static) if(PAR(M * K))
        for (int64_t i = 0; i < M * K; i++) xh[i] = h3_f16_to_f32(h3_f32_to_f16(x[i]));
        x = xh;
    }
    if (w->dtype == H3_F32) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, x, (int)K, w->data,
                    (int)K, 0.0f, y, (int)N);
    } else {
        int64_t tile = matmul_tile_rows(K);
        if (tile > N) tile = N;
        float *buf = cpu_alloc(be, (size_t)(tile * K) * sizeof(float));
        const uint8_t *wb = w->data;
        size_t esz = h3_dtype_size(w->dtype);
        for (int64_t n0 = 0; n0 < N; n0 += tile) {
            int64_t nt = N - n0 < tile ? N - n0 : tile;
#pragma omp parallel for schedule(static) if(PAR(nt * K))
            for (int64_t r = 0; r < nt; r++)
                h3_convert_to_f32(buf + r * K, wb + (size_t)((n0 + r) * K) * esz, w->dtype, (size_t)K);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)nt, (int)K, 1.0f, x, (int)K, buf,
                        (int)K, 0.0f, y + n0, (int)N);
        }
        cpu_free(be, buf);
    }
    cpu_free(be, xh);
    if (bias || (flags & H3_BF16_OUT)) {
        float *bf = NULL;
        if (bias) {
            bf = malloc((size_t)N * sizeof(float));
            h3_convert_to_f32(bf, bias->data, bias->dtype, (size_t)N);
        }
#pragma omp parallel for schedule(static) if(PAR(M * N))
        for (int64_t m = 0; m < M; m++) {
            float *row = y + m * N;
            for (int64_t n = 0; n < N; n++) {
                float v = bf ? row[n] + bf[n] : row[n];
                row[n] = RND(v);
            }
        }
        free(bf);
    }
}

void cpu_attention(h3_backend *be, float *out, int64_t o_stride, const float *q, int64_t q_stride, const float *k,
                   int64_t k_stride, const float *v, int64_t v_stride, int64_t Sq, int64_t Skv, int Hq, int Hkv,
                   int D, float scale, int causal, int flags) {
    const int64_t BQ = 128;
    int group = Hq / Hkv;
    float *scores = cpu_alloc(be, (size_t)(BQ * Skv) * sizeof(float));
    for (int h = 0; h < Hq; h++) {
        int hk = h / group;
        const float *kh = k + (int64_t)hk * D, *vh = v + (int64_t)hk * D;
        for (int64_t q0 = 0; q0 < Sq; q0 += BQ) {
            int64_t nq = Sq - q0 < BQ ? Sq - q0 : BQ;
            const float *qh = q + q0 * q_stride + (int64_t)h * D;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)Skv, D, scale, qh, (int)q_stride, kh,
                        (int)k_stride, 0.0f, scores, (int)Skv);
#pragma omp parallel for schedule(static) if(PAR(nq * Skv))
            for (int64_t i = 0; i < nq; i++) {
                float *s = scores + i * Skv;
                int64_t lim = causal ? q0 + i + 1 : Skv;
                /* The max and the scaling are lane-wise (same bits as one at a time); libm's expf is
                 * taken several values at a time, the sum stays in order (docs/architecture.md "The CPU twins' loops"). */
                float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
                for (int64_t j = 0; j < lim; j++) mx = s[j] > mx ? s[j] : mx;
                cpu_expf_shifted(s, lim, mx);
                float sum = 0.0f;
                for (int64_t j = 0; j < lim; j++) sum += s[j];
                float inv = 1.0f / sum;
#pragma omp simd
                for (int64_t j = 0; j < lim; j++) s[j] *= inv;
                if (lim < Skv) memset(s + lim, 0, (size_t)(Skv - lim) * sizeof(float));
            }
            float *oh = out + q0 * o_stride + (int64_t)h * D;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nq, D, (int)Skv, 1.0f, scores, (int)Skv, vh,
                        (int)v_stride, 0.0f, oh, (int)o_stride);
            if (flags & H3_BF16_OUT)
                for (int64_t i = 0; i < nq; i++) {
                    float *o = oh + i * o_stride;
#pragma omp simd
                    for (int d = 0; d < D; d++) o[d] = h3_round_bf16(o[d]);
                }
        }
    }
    cpu_free(be, scores);
}

void cpu_rmsnorm(h3_backend *be, float *y, const float *x, int64_t rows, int64_t dim, const float *w, float eps,
                 int flags) {
#pragma omp parallel for schedule(static) if(PAR(rows * dim))
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * dim;
        float *yr = y + r * dim;
        double ss = 0.0;
        for (int64_t c = 0; c < dim; c++) ss += (double)xr[c] * xr[c];
        float inv = 1.0f / sqrtf((float)(ss / (double)dim) + eps);
        for (int64_t c = 0; c < dim; c++) {
            float v = xr[c] * inv;
            if (w) v = v * w[c];
            yr[c] = RND(v);
        }
    }
}

/* LayerNorm's and GroupNorm's statistics of n values: mean and biased variance in double, two passes */
static void mean_rstd(const float *x, int64_t n, float eps, float *m, float *rstd) {
    double s = 0.0, ss = 0.0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    double mean = s / (double)n;
    for (int64_t i = 0; i < n; i++) ss += ((double)x[i] - mean) * ((double)x[i] - mean);
    *rstd = 1.0f / sqrtf((float)(ss / (double)n) + eps), *m = (float)mean;
}

void cpu_layernorm(h3_backend *be, float *y, const float *x, int64_t rows, int64_t dim, const float *w,
                   const float *b, float eps, int flags) {
#pragma omp parallel for schedule(static) if(PAR(rows * dim))
    for (int64_t r = 0; r < rows; r++) {
        const float *xr = x + r * dim;
        float *yr = y + r * dim;
        float m, rstd;
        mean_rstd(xr, dim, eps, &m, &rstd);
        for (int64_t c = 0; c < dim; c++) {
            float v = (xr[c] - m) * rstd;
            if (w) v = v * w[c];
            if (b) v = v + b[c];
            yr[c] = RND(v);
        }
    }
}

void cpu_groupnorm(h3_backend *be, float *y, const float *x, int64_t N, int64_t C, int64_t L, int groups,
                   const float *w, const float *b, float eps, int flags) {
    int64_t cg = C / groups;
#pragma omp parallel for collapse(2) schedule(static) if(PAR(N * C * L))
    for (int64_t n = 0; n < N; n++) {
        for (int g = 0; g < groups; g++) {
            const float *xg = x + (n * C + g * cg) * L;
            float *yg = y + (n * C + g * cg) * L;
            int64_t cnt = cg * L;
            float m, rstd;
            mean_rstd(xg, cnt, eps, &m, &rstd);
            for (int64_t c = 0; c < cg; c++) {
                int64_t ch = g * cg + c;
                for (int64_t l = 0; l < L; l++) {
                    float v = (xg[c * L + l] - m) * rstd;
                    if (w) v = v * w[ch];
                    if (b) v = v + b[ch];
                    yg[c * L + l] = RND(v);
                }
            }
        }
    }
}

void cpu_rope_half(h3_backend *be, float *x, int64_t rows, int64_t stride, int nheads, int head_dim, int rot_dim,
                   const float *cos, const float *sin, int flags) {
    int half = rot_dim / 2;
#pragma omp parallel for schedule(static) if(PAR(rows * stride))
    for (int64_t r = 0; r < rows; r++) {
        const float *cr = cos + r * rot_dim, *sr = sin + r * rot_dim;
        float tmp[1024];
        for (int h = 0; h < nheads; h++) {
            float *xh = x + r * stride + (int64_t)h * head_dim;
            memcpy(tmp, xh, (size_t)rot_dim * sizeof(float));
            for (int d = 0; d < rot_dim; d++) {
                float c = cr[d], s = sr[d];
                if (flags & H3_BF16_OUT) {
                    c = h3_round_bf16(c);
                    s = h3_round_bf16(s);
                }
                float rot = d < half ? -tmp[d + half] : tmp[d - half];
                float a = RND(tmp[d] * c), bb = RND(rot * s);
                xh[d] = RND(a + bb);
            }
        }
    }
}

#define ELEMENTWISE(name, expr)                                                                   \
    void cpu_##name(h3_backend *be, float *y, const float *x, int64_t n, int flags) {            \
        _Pragma("omp parallel for schedule(static) if(PAR(n))") for (int64_t i = 0; i < n; i++) {            \
            float v = x[i];                                                                       \
            float r = (expr);                                                                     \
            y[i] = RND(r);                                                                        \
        }                                                                                         \
    }

ELEMENTWISE(silu, v / (1.0f + expf(-v)))
ELEMENTWISE(gelu_tanh, 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v))))
ELEMENTWISE(gelu_erf, 0.5f * v * (1.0f + erff(v * 0.7071067811865476f)))

void cpu_add(h3_backend *be, float *y, const float *a, const float *b, int64_t n, int flags) {
#pragma omp parallel for schedule(static) if(PAR(n))
    for (int64_t i = 0; i < n; i++) y[i] = RND(a[i] + b[i]);
}

void cpu_mul(h3_backend *be, float *y, const float *a, const float *b, int64_t n, int flags) {
#pragma omp parallel for schedule(static) if(PAR(n))
    for (int64_t i = 0; i < n; i++) y[i] = RND(a[i] * b[i]);
}

void cpu_scale(h3_backend *be, float *y, const float *x, float s, int64_t n, int flags) {
#pragma omp parallel for schedule(static) if(PAR(n))
    for (int64_t i = 0; i < n; i++) y[i] = RND(x[i] * s);
}

void cpu_round_bf16_buf(h3_backend *be, float *x, int64_t n) {
#pragma omp parallel for schedule(static) if(PAR(n))
    for (int64_t i = 0; i < n; i++) x[i] = h3_round_bf16(x[i]);
}

void cpu_add_bias(h3_backend *be, float *y, const float *bias, int64_t rows, int64_t dim, int flags) {
#pragma omp parallel for schedule(static) if(PAR(rows * dim))
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < dim; c++) y[r * dim + c] = RND(y[r * dim + c] + bias[c]);
}
