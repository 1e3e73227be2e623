/* CUDA twins of the norms, rotary embedding and element-wise ops (backend.h). Each computes in the
 * CPU twin's order (cpu/cpu_ops.c) and is compiled with --fmad=false, so most outputs match the CPU
 * bit for bit; sums of squares run in double like the twin's, only the summation order differs. */
#include "cuda_internal.h"

#define RND(v) (round ? round_bf16(v) : (v))
#define GRID_STRIDE(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

enum { NORM_THREADS = 256 };

/* ---- normalization: one block per row (or group) ---- */

static __global__ void k_rmsnorm(float *y, const float *x, int64_t dim, const float *w, float eps, int round) {
    __shared__ double red[NORM_THREADS / 32];
    const float *xr = x + blockIdx.x * dim;
    float *yr = y + blockIdx.x * dim;
    double ss = 0.0;
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) ss += (double)xr[c] * xr[c];
    ss = cuda_block_sum_d(ss, red);
    float inv = 1.0f / sqrtf((float)(ss / (double)dim) + eps);
    for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
        float v = xr[c] * inv;
        if (w) v = v * w[c];
        yr[c] = RND(v);
    }
}

/* Short rows (q/k norm: 128 channels, millions of rows): one warp per row, grid-stride over rows. */
static __global__ void k_rmsnorm_warp(float *y, const float *x, int64_t rows, int64_t dim, const float *w, float eps,
                                      int round) {
    int lane = threadIdx.x & 31;
    int64_t warps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t r = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5; r < rows; r += warps) {
        const float *xr = x + r * dim;
        float *yr = y + r * dim;
        double ss = 0.0;
        for (int64_t c = lane; c < dim; c += 32) ss += (double)xr[c] * xr[c];
        for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        float inv = 1.0f / sqrtf((float)(ss / (double)dim) + eps);
        for (int64_t c = lane; c < dim; c += 32) {
            float v = xr[c] * inv;
            if (w) v = v * w[c];
            yr[c] = RND(v);
        }
    }
}

/* Two passes like the twin: mean, then the biased variance around it. cnt elements from base,
 * channel c of the group spans [c*L, (c+1)*L) (layernorm: L = 1, one channel per element). */
static __device__ void norm_group(float *yg, const float *xg, int64_t cg, int64_t L, int64_t ch0, const float *w,
                                  const float *b, float eps, int round) {
    __shared__ double red[NORM_THREADS / 32];
    int64_t cnt = cg * L;
    double s = 0.0;
    for (int64_t i = threadIdx.x; i < cnt; i += blockDim.x) s += xg[i];
    s = cuda_block_sum_d(s, red);
    double mean = s / (double)cnt;
    double ss = 0.0;
    for (int64_t i = threadIdx.x; i < cnt; i += blockDim.x) ss += ((double)xg[i] - mean) * ((double)xg[i] - mean);
    ss = cuda_block_sum_d(ss, red);
    float rstd = 1.0f / sqrtf((float)(ss / (double)cnt) + eps), m = (float)mean;
    if (L == 1) { /* layernorm: element i is channel i (no per-element division) */
        for (int64_t i = threadIdx.x; i < cnt; i += blockDim.x) {
            float v = (xg[i] - m) * rstd;
            if (w) v = v * w[ch0 + i];
            if (b) v = v + b[ch0 + i];
            yg[i] = RND(v);
        }
    } else {
        for (int64_t c = 0; c < cg; c++) {
            int64_t ch = ch0 + c;
            for (int64_t l = threadIdx.x; l < L; l += blockDim.x) {
                float v = (xg[c * L + l] - m) * rstd;
                if (w) v = v * w[ch];
                if (b) v = v + b[ch];
                yg[c * L + l] = RND(v);
            }
        }
    }
}

static __global__ void k_layernorm(float *y, const float *x, int64_t dim, const float *w, const float *b, float eps,
                                   int round) {
    norm_group(y + blockIdx.x * dim, x + blockIdx.x * dim, dim, 1, 0, w, b, eps, round);
}

static __global__ void k_groupnorm(float *y, const float *x, int64_t C, int64_t L, int groups, const float *w,
                                   const float *b, float eps, int round) {
    int64_t n = blockIdx.x / groups, g = blockIdx.x % groups, cg = C / groups;
    int64_t off = (n * C + g * cg) * L;
    norm_group(y + off, x + off, cg, L, g * cg, w, b, eps, round);
}

extern "C" void cuda_rmsnorm(h3_backend *be, float *y, const float *x, int64_t rows, int64_t dim, const float *w,
                             float eps, int flags) {
    if (rows <= 0) return;
    if (dim <= 1024) {
        k_rmsnorm_warp<<<cuda_blocks(rows * 32, 256), 256, 0, cuda_of(be)->stream>>>(y, x, rows, dim, w, eps,
                                                                                  flags & H3_BF16_OUT);
        CUDA_LAUNCHED(be, "rmsnorm (warp per row)");
        return;
    }
    k_rmsnorm<<<(unsigned)rows, NORM_THREADS, 0, cuda_of(be)->stream>>>(y, x, dim, w, eps, flags & H3_BF16_OUT);
    CUDA_LAUNCHED(be, "rmsnorm");
}

extern "C" void cuda_layernorm(h3_backend *be, float *y, const float *x, int64_t rows, int64_t dim, const float *w,
                               const float *b, float eps, int flags) {
    if (rows <= 0) return;
    k_layernorm<<<(unsigned)rows, NORM_THREADS, 0, cuda_of(be)->stream>>>(y, x, dim, w, b, eps, flags & H3_BF16_OUT);
    CUDA_LAUNCHED(be, "layernorm");
}

extern "C" void cuda_groupnorm(h3_backend *be, float *y, const float *x, int64_t N, int64_t C, int64_t L, int groups,
                               const float *w, const float *b, float eps, int flags) {
    if (N <= 0 || groups <= 0) return;
    k_groupnorm<<<(unsigned)(N * groups), NORM_THREADS, 0, cuda_of(be)->stream>>>(y, x, C, L, groups, w, b, eps,
                                                                                   flags & H3_BF16_OUT);
    CUDA_LAUNCHED(be, "groupnorm");
}

/* ---- rotary ("rotate half"): one thread per (row, head, pair d / d + half) ---- */

static __global__ void k_rope_half(float *x, int64_t rows, int64_t stride, int nheads, int head_dim, int rot_dim,
                                   const float *cos, const float *sin, int round) {
    int half = rot_dim / 2;
    FOR_ROWS_COLS(r, hd, rows, (int64_t)nheads * half) {
        int h = (int)hd / half, d = (int)hd - h * half; /* 32-bit division */
        float *xh = x + r * stride + (int64_t)h * head_dim;
        const float *cr = cos + r * rot_dim, *sr = sin + r * rot_dim;
        float lo = xh[d], hi = xh[d + half];
        float c0 = cr[d], s0 = sr[d], c1 = cr[d + half], s1 = sr[d + half];
        if (round) c0 = round_bf16(c0), s0 = round_bf16(s0), c1 = round_bf16(c1), s1 = round_bf16(s1);
        float a0 = RND(lo * c0), b0 = RND(-hi * s0);
        float a1 = RND(hi * c1), b1 = RND(lo * s1);
        xh[d] = RND(a0 + b0);
        xh[d + half] = RND(a1 + b1);
    }
}

extern "C" void cuda_rope_half(h3_backend *be, float *x, int64_t rows, int64_t stride, int nheads, int head_dim,
                               int rot_dim, const float *cos, const float *sin, int flags) {
    int64_t total = rows * nheads * (rot_dim / 2);
    if (total <= 0) return;
    k_rope_half<<<grid_rows_cols(rows, (int64_t)nheads * (rot_dim / 2), 128), 128, 0, cuda_of(be)->stream>>>(x, rows, stride, nheads, head_dim, rot_dim,
                                                                          cos, sin, flags & H3_BF16_OUT);
    CUDA_LAUNCHED(be, "rope_half");
}

/* ---- element-wise ---- */

#define UNARY(name, expr)                                                                            \
    static __global__ void k_##name(float *y, const float *x, int64_t n, int round) {                \
        GRID_STRIDE(i, n) {                                                                          \
            float v = x[i];                                                                          \
            float r = (expr);                                                                        \
            y[i] = RND(r);                                                                           \
        }                                                                                            \
    }                                                                                                \
    extern "C" void cuda_##name(h3_backend *be, float *y, const float *x, int64_t n, int flags) {    \
        if (n <= 0) return;                                                                          \
        k_##name<<<cuda_blocks(n, 256), 256, 0, cuda_of(be)->stream>>>(y, x, n, flags & H3_BF16_OUT); \
        CUDA_LAUNCHED(be, #name);                                                                    \
    }

UNARY(silu, v / (1.0f + expf(-v)))
UNARY(gelu_tanh, 0.5f * v * (1.0f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v))))
UNARY(gelu_erf, 0.5f * v * (1.0f + erff(v * 0.7071067811865476f)))

#define BINARY(name, expr)                                                                                 \
    static __global__ void k_##name(float *y, const float *a, const float *b, int64_t n, int round) {      \
        GRID_STRIDE(i, n) y[i] = RND(expr);                                                                \
    }                                                                                                      \
    extern "C" void cuda_##name(h3_backend *be, float *y, const float *a, const float *b, int64_t n, int flags) { \
        if (n <= 0) return;                                                                                \
        k_##name<<<cuda_blocks(n, 256), 256, 0, cuda_of(be)->stream>>>(y, a, b, n, flags & H3_BF16_OUT);   \
        CUDA_LAUNCHED(be, #name);                                                                          \
    }

BINARY(add, a[i] + b[i])
BINARY(mul, a[i] * b[i])

static __global__ void k_scale(float *y, const float *x, float s, int64_t n, int round) {
    GRID_STRIDE(i, n) y[i] = RND(x[i] * s);
}

extern "C" void cuda_scale(h3_backend *be, float *y, const float *x, float s, int64_t n, int flags) {
    if (n <= 0) return;
    k_scale<<<cuda_blocks(n, 256), 256, 0, cuda_of(be)->stream>>>(y, x, s, n, flags & H3_BF16_OUT);
    CUDA_LAUNCHED(be, "scale");
}

static __global__ void k_round_bf16(float *x, int64_t n) {
    GRID_STRIDE(i, n) x[i] = round_bf16(x[i]);
}

extern "C" void cuda_round_bf16_buf(h3_backend *be, float *x, int64_t n) {
    if (n <= 0) return;
    k_round_bf16<<<cuda_blocks(n, 256), 256, 0, cuda_of(be)->stream>>>(x, n);
    CUDA_LAUNCHED(be, "round_bf16_buf");
}

static __global__ void k_add_bias(float *y, const float *bias, int64_t rows, int64_t dim, int round) {
    FOR_ROWS_COLS(r, c, rows, dim) y[r * dim + c] = RND(y[r * dim + c] + bias[c]);
}

extern "C" void cuda_add_bias(h3_backend *be, float *y, const float *bias, int64_t rows, int64_t dim, int flags) {
    if (rows * dim <= 0) return;
    k_add_bias<<<grid_rows_cols(rows, dim, 256), 256, 0, cuda_of(be)->stream>>>(y, bias, rows, dim,
                                                                              flags & H3_BF16_OUT);
    CUDA_LAUNCHED(be, "add_bias");
}
