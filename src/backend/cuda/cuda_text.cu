/* CUDA twins of the conditioner ops (ops.h), in the CPU twins' operation order
 * (cpu/cpu_text.c; --fmad=false): the fp32 sums that the CPU forms sequentially are formed
 * sequentially here too (one lane per row), so the statistics are bit-identical; the eager
 * attention's two products are fp32 cuBLASLt GEMMs (cuda_gemm_rm.h), its softmax follows the twin. */
#include "cuda_ops.h"

#include "cuda_gemm_rm.h"
#include "cuda_internal.h"

#define RND(v) (bf ? round_bf16(v) : (v))

/* One warp per row: lane 0 forms sum(x^2) in the twin's order, the warp normalizes. y may alias x
 * (every element is read by the lane that writes it, after the sum). */
static __global__ void k_rmsnorm_qwen(float *y, const float *x, int64_t rows, int64_t dim, const float *w, float eps,
                                      int bf) {
    int lane = threadIdx.x & 31;
    int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t r = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32; r < rows; r += warps) {
        const float *xr = x + r * dim;
        float *yr = y + r * dim;
        float inv = 0.0f;
        if (lane == 0) {
            float ss = 0.0f;
            int64_t c = 0;
            for (; c + 4 <= dim; c += 4) {
                float a = xr[c], b = xr[c + 1], d = xr[c + 2], e = xr[c + 3];
                ss += a * a;
                ss += b * b;
                ss += d * d;
                ss += e * e;
            }
            for (; c < dim; c++) ss += xr[c] * xr[c];
            inv = 1.0f / sqrtf(ss / (float)dim + eps);
        }
        inv = __shfl_sync(0xffffffffu, inv, 0);
        for (int64_t c = lane; c < dim; c += 32) {
            float v = RND(xr[c] * inv);
            yr[c] = RND(w[c] * v);
        }
        __syncwarp();
    }
}

extern "C" void cuda_rmsnorm_qwen(h3_backend *be, float *y, const float *x, int64_t rows, int64_t dim, const float *w,
                                  float eps, int flags) {
    if (rows <= 0 || dim <= 0) return;
    int64_t blocks = (rows + 7) / 8;
    if (blocks > 8192) blocks = 8192;
    k_rmsnorm_qwen<<<(unsigned)blocks, 256, 0, cuda_of(be)->stream>>>(y, x, rows, dim, w, eps,
                                                                      (flags & H3_BF16_OUT) != 0);
    CUDA_LAUNCHED(be, "rmsnorm_qwen");
}

static __global__ void k_rows_add(float *x, const int64_t *rows, const float *src, int64_t n, int64_t dim, int bf) {
    FOR_ROWS_COLS(a, c, n, dim) {
        float *xr = x + rows[a] * dim;
        xr[c] = RND(xr[c] + src[a * dim + c]);
    }
}

extern "C" void cuda_rows_add(h3_backend *be, float *x, const int64_t *rows, const float *src, int64_t n, int64_t dim,
                              int flags) {
    if (n <= 0 || dim <= 0) return;
    int64_t *drows = (int64_t *)cuda_scratch(be, (size_t)n * sizeof(int64_t));
    if (!drows) return;
    cuda_upload(be, drows, rows, (size_t)n * sizeof(int64_t));
    k_rows_add<<<grid_rows_cols(n, dim, 256), 256, 0, cuda_of(be)->stream>>>(x, drows, src, n, dim,
                                                                             (flags & H3_BF16_OUT) != 0);
    CUDA_LAUNCHED(be, "rows_add");
    cuda_free(be, drows);
}

/* Softmax rows of the eager attention (cpu_attention_eager_bf16's loop): s = bf16(bf16(s) * scale) on
 * the first lim columns, max, exp, sum (sequential, lane 0, as the twin), P = bf16(s / sum), zeros
 * beyond lim. Row r = h * nq + i of a [Hq][nq][Skv] score block whose first query is q0. */
static __global__ void k_eager_softmax(float *S, int64_t nrows, int64_t nq, int64_t Skv, int64_t q0, float scale,
                                       int causal) {
    int lane = threadIdx.x & 31;
    int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t r = blockIdx.x * (int64_t)(blockDim.x / 32) + threadIdx.x / 32; r < nrows; r += warps) {
        float *s = S + r * Skv;
        int64_t i = r % nq;
        int64_t lim = causal ? q0 + i + 1 : Skv;
        if (lim > Skv) lim = Skv;
        float mx = -INFINITY;
        for (int64_t j = lane; j < lim; j += 32) {
            float v = round_bf16(round_bf16(s[j]) * scale);
            s[j] = v;
            mx = v > mx ? v : mx;
        }
        for (int o = 16; o > 0; o >>= 1) {
            float t = __shfl_xor_sync(0xffffffffu, mx, o);
            mx = t > mx ? t : mx;
        }
        for (int64_t j = lane; j < lim; j += 32) s[j] = expf(s[j] - mx);
        __syncwarp();
        float sum = 0.0f;
        if (lane == 0)
            for (int64_t j = 0; j < lim; j++) sum += s[j];
        sum = __shfl_sync(0xffffffffu, sum, 0);
        for (int64_t j = lane; j < lim; j += 32) s[j] = round_bf16(s[j] / sum);
        for (int64_t j = lim + lane; j < Skv; j += 32) s[j] = 0.0f;
        __syncwarp();
    }
}

/* out[q0 + i][0 .. width) rounded to bf16 */
static __global__ void k_round_rows(float *out, int64_t o_stride, int64_t nq, int64_t width) {
    FOR_ROWS_COLS(i, c, nq, width) out[i * o_stride + c] = round_bf16(out[i * o_stride + c]);
}

extern "C" void cuda_attention_eager_bf16(h3_backend *be, float *out, int64_t o_stride, const float *q,
                                          int64_t q_stride, const float *k, int64_t k_stride, const float *v,
                                          int64_t v_stride, int64_t Sq, int64_t Skv, int Hq, int Hkv, int D,
                                          float scale, int causal) {
    cuda_impl *c = cuda_of(be);
    if (Sq <= 0 || Hq <= 0 || Hkv <= 0 || D <= 0) return;
    if (Skv <= 0) { /* no keys: the twin's P.V over an empty sum is 0 */
        for (int64_t i = 0; i < Sq; i++) CUDA_OK(be, cudaMemsetAsync(out + i * o_stride, 0, (size_t)Hq * D * 4, c->stream));
        return;
    }
    const int group = Hq / Hkv;
    /* scores of all heads for a block of nq queries: at most 64M floats (256 MB) of scratch */
    const int64_t cap = (int64_t)64 << 20;
    int64_t nq = cap / ((int64_t)Hq * Skv);
    if (nq < 1) nq = 1;
    if (nq > Sq) nq = Sq;
    float *S = (float *)cuda_scratch(be, (size_t)(nq * Hq * Skv) * sizeof(float));
    if (!S) return;
    for (int64_t q0 = 0; q0 < Sq; q0 += nq) {
        int64_t m = Sq - q0 < nq ? Sq - q0 : nq;
        /* head h = hk * group + g: for each g, one GEMM batched over the Hkv kv heads */
        for (int g = 0; g < group; g++) {
            /* S[h][i][j] = q[q0 + i][h*D ..] . k[j][hk*D ..] */
            cuda_sgemm_rm(be, 0, 1, m, Skv, D, q + q0 * q_stride + (int64_t)g * D, q_stride, k, k_stride,
                          S + (int64_t)g * m * Skv, Skv, Hkv, (int64_t)group * D, D, (int64_t)group * m * Skv);
        }
        int64_t nrows = (int64_t)Hq * m, blocks = (nrows + 7) / 8;
        if (blocks > 8192) blocks = 8192;
        k_eager_softmax<<<(unsigned)blocks, 256, 0, c->stream>>>(S, nrows, m, Skv, q0, scale, causal);
        CUDA_LAUNCHED(be, "eager softmax");
        for (int g = 0; g < group; g++) {
            /* out[q0 + i][h*D + d] = sum_j P[h][i][j] v[j][hk*D + d] */
            cuda_sgemm_rm(be, 0, 0, m, D, Skv, S + (int64_t)g * m * Skv, Skv, v, v_stride,
                          out + q0 * o_stride + (int64_t)g * D, o_stride, Hkv, (int64_t)group * m * Skv, D,
                          (int64_t)group * D);
        }
        k_round_rows<<<grid_rows_cols(m, (int64_t)Hq * D, 256), 256, 0, c->stream>>>(out + q0 * o_stride, o_stride, m,
                                                                                   (int64_t)Hq * D);
        CUDA_LAUNCHED(be, "eager round");
    }
    cuda_free(be, S);
}
