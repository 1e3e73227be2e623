/* CUDA twins of the bf16 activation ops (ops.h).
 *
 * GEMMs are cuBLASLt BF16 x BF16 with fp32 accumulation and the bias in the fp32 epilogue, written as
 * bf16 straight into (a column slice of) the output rows. Attention reads the strided heads of a fused
 * qkv buffer as they are (cuDNN's fused SDPA with the caller's strides; packed head-major copies and
 * the own flash kernel only when cuDNN refuses). The element-wise kernels fuse what the reference does
 * in several bf16 ops (RMSNorm + AdaLN modulation; q/k norm + RoPE) while rounding every intermediate
 * the reference rounds, in its order (--fmad=false: one fp32 rounding per product and sum, as the CPU
 * twin). 16-byte accesses where rows allow. */
#include "cuda_ops.h"
#include "cuda_int8.h"
#include "cuda_internal.h"
#include "cuda_rowq.h"

#include <stdlib.h>
#include <string.h>

#define GRID_STRIDE(i, n) \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

static __device__ __forceinline__ float bf(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
static __device__ __forceinline__ uint16_t pk(float f) { return f32_to_bf16_bits(f); }

static inline int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* ---- conversions ---- */

static __global__ void k_pack(uint16_t *y, const float *x, int64_t n) {
    GRID_STRIDE(i, n) y[i] = pk(x[i]);
}

static __global__ void k_unpack(float *y, const uint16_t *x, int64_t n) {
    GRID_STRIDE(i, n) y[i] = bf(x[i]);
}

extern "C" void cuda_bf16_pack(h3_backend *be, h3_bf16 *y, const float *x, int64_t n) {
    if (n <= 0) return;
    k_pack<<<cuda_blocks(n, 256), 256, 0, cuda_of(be)->stream>>>(y, x, n);
    CUDA_LAUNCHED(be, "bf16_pack");
}

extern "C" void cuda_bf16_unpack(h3_backend *be, float *y, const h3_bf16 *x, int64_t n) {
    if (n <= 0) return;
    k_unpack<<<cuda_blocks(n, 256), 256, 0, cuda_of(be)->stream>>>(y, x, n);
    CUDA_LAUNCHED(be, "bf16_unpack");
}

/* ---- GEMM ---- */

static __global__ void k_rows_f32_to_bf16(uint16_t *out, int64_t o_rs, const float *src, int64_t S, int64_t w) {
    FOR_ROWS_COLS(s, c, S, w) out[s * o_rs + c] = pk(src[s * w + c]);
}


extern "C" void cuda_bf16_matmul(h3_backend *be, h3_bf16 *y, int64_t ldy, const h3_bf16 *x, int64_t ldx, int64_t M,
                                 const h3_tensor *w, const h3_tensor *bias) {
    int64_t N = w->shape[0], K = w->shape[1];
    if (M <= 0 || N <= 0) return;
    if (w->dtype != H3_BF16) {
        cuda_record_error(be, "bf16_matmul", "weight must be BF16");
        return;
    }
    if (bias && bias->dtype != H3_F32 && bias->dtype != H3_BF16) {
        cuda_record_error(be, "bf16_matmul", "bias must be F32 or BF16");
        return;
    }
    if (bias && bias->dtype == H3_F32) {
        /* cuBLASLt takes no fp32 bias with a bf16 output: fp32 output with the bias in the epilogue, then
         * one rounding pass (the same single rounding of acc + bias) */
        float *yf = (float *)cuda_scratch(be, (size_t)(M * N) * sizeof(float));
        if (!yf) return;
        cuda_lt_gemm(be, CUDA_GEMM_BF16_F32OUT, w->data, x, ldx, yf, N, M, N, K, bias->data, CUDA_R_32F);
        k_rows_f32_to_bf16<<<grid_rows_cols(M, N, 256), 256, 0, cuda_of(be)->stream>>>(y, ldy, yf, M, N);
        CUDA_LAUNCHED(be, "bf16_matmul (round fp32 output)");
        cuda_free(be, yf);
        return;
    }
    cuda_lt_gemm(be, CUDA_GEMM_BF16_BF16OUT, w->data, x, ldx, y, ldy, M, N, K, bias ? bias->data : NULL, CUDA_R_16BF);
}

/* ---- RMSNorm (+ AdaLN modulation): one block per row ---- */

enum { RM_THREADS = 256 };

static __device__ __forceinline__ float norm_mod(float x, float inv, const float *w, const float *shift,
                                                 const float *scale, int64_t c) {
    float v = x * inv;
    if (w) v = v * w[c];
    v = round_bf16(v);
    if (scale) {
        float one_plus = round_bf16(1.0f + scale[c]);
        float prod = round_bf16(v * one_plus);
        v = prod + shift[c];
    }
    return v;
}

/* VEC: dim % 8 == 0 and rows 16-byte aligned: uint4 = 8 bf16 per access. */
template <int VEC>
static __global__ void __launch_bounds__(RM_THREADS) k_rmsnorm_mod(uint16_t *y, const uint16_t *x, int64_t dim,
                                                                   const float *w, float eps, const float *table,
                                                                   int64_t tstride, const int32_t *ridx,
                                                                   int64_t shift_off, int64_t scale_off) {
    __shared__ double red[RM_THREADS / 32];
    int64_t r = blockIdx.x;
    const uint16_t *xr = x + r * dim;
    uint16_t *yr = y + r * dim;
    double ss = 0.0;
    if (VEC) {
        for (int64_t c8 = threadIdx.x; c8 < dim / 8; c8 += blockDim.x) {
            uint4 u = ((const uint4 *)xr)[c8];
            uint32_t wv[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                float a = __uint_as_float(wv[j] << 16), b = __uint_as_float(wv[j] & 0xffff0000u);
                ss += (double)a * a;
                ss += (double)b * b;
            }
        }
    } else {
        for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
            float v = bf(xr[c]);
            ss += (double)v * v;
        }
    }
    ss = cuda_block_sum_d(ss, red);
    float inv = 1.0f / sqrtf((float)(ss / (double)dim) + eps);
    const float *shift = NULL, *scale = NULL;
    if (table) {
        const float *t = table + (int64_t)ridx[r] * tstride;
        shift = t + shift_off, scale = t + scale_off;
    }
    if (VEC) {
        for (int64_t c8 = threadIdx.x; c8 < dim / 8; c8 += blockDim.x) {
            uint4 u = ((const uint4 *)xr)[c8];
            uint32_t wv[4] = {u.x, u.y, u.z, u.w}, o[4];
#pragma unroll
            for (int j = 0; j < 4; j++) {
                int64_t c = c8 * 8 + 2 * j;
                float a = norm_mod(__uint_as_float(wv[j] << 16), inv, w, shift, scale, c);
                float b = norm_mod(__uint_as_float(wv[j] & 0xffff0000u), inv, w, shift, scale, c + 1);
                o[j] = (uint32_t)pk(a) | ((uint32_t)pk(b) << 16);
            }
            ((uint4 *)yr)[c8] = make_uint4(o[0], o[1], o[2], o[3]);
        }
    } else {
        for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) yr[c] = pk(norm_mod(bf(xr[c]), inv, w, shift, scale, c));
    }
}

/* The same arithmetic as k_rmsnorm_mod<1>, faster: each thread keeps its (up to RMC_V) 16-byte chunks of the
 * row in registers between the sum of squares and the output (all loads issued up front, one read of x),
 * and reads w / shift / scale as float4s (the scalar, 32-byte-strided loads of k_rmsnorm_mod were its
 * bottleneck: 0.43 ms at 19540 x 5376, ~1 TB/s). Threads per block = ceil(dim / 8 / RMC_V), a multiple of 32. */
enum { RMC_V = 4 };
/* The RMSNorm + modulation of one row held in registers (u: this thread's RMC_V 16-byte chunks, zeros past the row),
 * written to yr: the sum of squares in double over the block, then the reference's roundings. Shared by
 * k_rmsnorm_mod_cached and k_gated_residual_rmsnorm_mod, so both give the same bits. */
template <int HW>
static __device__ __forceinline__ void norm_mod_row(const uint4 (&u)[RMC_V], uint4 *yr, int64_t r, int64_t nvec,
                                                    int64_t dim, const float *w, float eps, const float *table,
                                                    int64_t tstride, const int32_t *ridx, int64_t shift_off,
                                                    int64_t scale_off, double *red) {
    double ss = 0.0;
#pragma unroll
    for (int i = 0; i < RMC_V; i++) {
        uint32_t wv[4] = {u[i].x, u[i].y, u[i].z, u[i].w};
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float a = __uint_as_float(wv[j] << 16), b = __uint_as_float(wv[j] & 0xffff0000u);
            ss += (double)a * a;
            ss += (double)b * b;
        }
    }
    ss = cuda_block_sum_d(ss, red);
    const float inv = 1.0f / sqrtf((float)(ss / (double)dim) + eps);
    const float *shift = NULL, *scale = NULL;
    if (table) {
        const float *t = table + (int64_t)ridx[r] * tstride;
        shift = t + shift_off, scale = t + scale_off;
    }
#pragma unroll
    for (int i = 0; i < RMC_V; i++) {
        int64_t c8 = threadIdx.x + (int64_t)i * blockDim.x;
        if (c8 >= nvec) break;
        float wf[8], sh[8], sc[8], v[8];
        if (w) load8f(wf, w + c8 * 8);
        if (table) load8f(sh, shift + c8 * 8), load8f(sc, scale + c8 * 8);
        uint32_t wv[4] = {u[i].x, u[i].y, u[i].z, u[i].w}, o[4];
#pragma unroll
        for (int j = 0; j < 4; j++) v[2 * j] = __uint_as_float(wv[j] << 16), v[2 * j + 1] = __uint_as_float(wv[j] & 0xffff0000u);
#pragma unroll
        for (int k = 0; k < 8; k += 2) { /* norm_mod with the vectors in registers, two channels at a time */
            float t0 = v[k] * inv, t1 = v[k + 1] * inv;
            if (w) t0 = t0 * wf[k], t1 = t1 * wf[k + 1];
            rn2<HW>(t0, t1);
            if (table) {
                float op0 = 1.0f + sc[k], op1 = 1.0f + sc[k + 1];
                rn2<HW>(op0, op1);
                float p0 = t0 * op0, p1 = t1 * op1;
                rn2<HW>(p0, p1);
                t0 = p0 + sh[k], t1 = p1 + sh[k + 1];
            }
            v[k] = t0, v[k + 1] = t1;
        }
#pragma unroll
        for (int j = 0; j < 4; j++) o[j] = pack2<HW>(v[2 * j], v[2 * j + 1]);
        yr[c8] = make_uint4(o[0], o[1], o[2], o[3]);
    }
}

/* Q: the rows of y also quantized (cuda_rowq.h; ops.h) */
template <int HW, int Q>
static __global__ void __launch_bounds__(1024) k_rmsnorm_mod_cached(uint16_t *y, const uint16_t *x, int64_t dim,
                                                                     const float *w, float eps, const float *table,
                                                                     int64_t tstride, const int32_t *ridx,
                                                                     int64_t shift_off, int64_t scale_off,
                                                                     rowq_arg qa) {
    __shared__ double red[32];
    const int64_t r = blockIdx.x, nvec = dim / 8;
    const uint4 *xr = (const uint4 *)(x + r * dim);
    uint4 *yr = (uint4 *)(y + r * dim);
    uint4 u[RMC_V];
#pragma unroll
    for (int i = 0; i < RMC_V; i++) {
        int64_t c8 = threadIdx.x + (int64_t)i * blockDim.x;
        u[i] = c8 < nvec ? xr[c8] : make_uint4(0u, 0u, 0u, 0u);
    }
    norm_mod_row<HW>(u, yr, r, nvec, dim, w, eps, table, tstride, ridx, shift_off, scale_off, red);
    if (Q) rowq_row(qa, y + r * dim, r, dim);
}

/* The launch of cuda_bf16_rmsnorm_modulate; with q (ops.h) the register-cached kernel also quantizes the
 * rows it wrote, when it takes them: returns 1 then, 0 when the caller still has to quantize y. */
static int rmsnorm_modulate(h3_backend *be, h3_bf16 *y, const h3_bf16 *x, int64_t rows, int64_t dim, const float *w,
                            float eps, const float *table, int64_t table_stride, const int32_t *row_index,
                            int64_t shift_off, int64_t scale_off, const h3_rowq *q) {
    if (rows <= 0) return 1;
    cudaStream_t st = cuda_of(be)->stream;
    if (rows > 2147483647) {
        cuda_record_error(be, "bf16_rmsnorm_modulate", "too many rows");
        return 1;
    }
    /* one block per row (a warp per row holding the row in registers measured 1.8x slower: 0.77 vs
     * 0.42 ms at 19540 x 5376). The register-cached kernel needs 16-byte rows and float4-aligned
     * weight / table vectors. */
    const int64_t nvec = dim / 8;
    int params16 = (!w || aligned16(w)) &&
                   (!table || (aligned16(table) && table_stride % 4 == 0 && shift_off % 4 == 0 && scale_off % 4 == 0));
    int fused = 0;
    if (dim % 8 == 0 && nvec <= (int64_t)RMC_V * 1024 && aligned16(x) && aligned16(y) && params16) {
        unsigned threads = (unsigned)(((nvec + RMC_V - 1) / RMC_V + 31) / 32 * 32);
        const int hw = cuda_of(be)->bf16_hw_round;
        rowq_arg qa = {0, NULL, NULL, 0};
        if (q && rowq_fusable(q, dim)) qa = rowq_of(q), fused = 1;
#define RMC_LAUNCH(HW, Q)                                                                                          \
    k_rmsnorm_mod_cached<HW, Q><<<(unsigned)rows, threads, 0, st>>>(y, x, dim, w, eps, table, table_stride, row_index, \
                                                                    shift_off, scale_off, qa)
        if (fused) {
            if (hw == 2) RMC_LAUNCH(2, 1);
            else if (hw) RMC_LAUNCH(1, 1);
            else RMC_LAUNCH(0, 1);
        } else {
            if (hw == 2) RMC_LAUNCH(2, 0);
            else if (hw) RMC_LAUNCH(1, 0);
            else RMC_LAUNCH(0, 0);
        }
#undef RMC_LAUNCH
    } else if (dim % 8 == 0 && aligned16(x) && aligned16(y))
        k_rmsnorm_mod<1><<<(unsigned)rows, RM_THREADS, 0, st>>>(y, x, dim, w, eps, table, table_stride, row_index,
                                                               shift_off, scale_off);
    else
        k_rmsnorm_mod<0><<<(unsigned)rows, RM_THREADS, 0, st>>>(y, x, dim, w, eps, table, table_stride, row_index,
                                                               shift_off, scale_off);
    CUDA_LAUNCHED(be, "bf16_rmsnorm_modulate");
    return fused;
}

/* the two-pass tail of the fused ops where their kernel did not quantize (the CPU twin's composition) */
static void quant_rows(h3_backend *be, const h3_bf16 *y, int64_t rows, int64_t dim, const h3_rowq *q) {
    if (q->kind == H3_ROWQ_INT8) cuda_int8_quant_rows(be, (int8_t *)q->q, q->scale, y, rows, dim, dim, q->group);
    else cuda_fp8_quant_rows(be, (uint8_t *)q->q, q->scale, y, rows, dim, dim);
}

extern "C" void cuda_bf16_rmsnorm_modulate(h3_backend *be, h3_bf16 *y, const h3_bf16 *x, int64_t rows, int64_t dim,
                                           const float *w, float eps, const float *table, int64_t table_stride,
                                           const int32_t *row_index, int64_t shift_off, int64_t scale_off) {
    rmsnorm_modulate(be, y, x, rows, dim, w, eps, table, table_stride, row_index, shift_off, scale_off, NULL);
}

extern "C" void cuda_bf16_rmsnorm_modulate_q(h3_backend *be, h3_bf16 *y, const h3_bf16 *x, int64_t rows, int64_t dim,
                                             const float *w, float eps, const float *table, int64_t table_stride,
                                             const int32_t *row_index, int64_t shift_off, int64_t scale_off,
                                             const h3_rowq *q) {
    if (!h3_rowq_ok(be, "h3_bf16_rmsnorm_modulate_q", q, dim)) return;
    if (!rmsnorm_modulate(be, y, x, rows, dim, w, eps, table, table_stride, row_index, shift_off, scale_off, q))
        quant_rows(be, y, rows, dim, q);
}

/* ---- per-head RMSNorm + rotate-half RoPE: one warp per (row, head), E channels per lane ---- */

template <int E, int VEC>
static __global__ void k_head_norm_rope(uint16_t *x, int64_t rows, int64_t rs, int heads, int64_t hs, const float *w,
                                        float eps, int rot, const float *cos, const float *sin) {
    const int D = 32 * E, half = rot / 2, shift = half / E;
    int lane = threadIdx.x & 31;
    int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t task = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5; task < rows * heads; task += nwarps) {
        int64_t r = task / heads;
        int h = (int)(task - r * heads);
        uint16_t *xh = x + r * rs + h * hs + lane * E;
        float v[E], n[E];
        if (E == 4 && VEC) {
            uint2 u = *(const uint2 *)xh;
            v[0] = __uint_as_float(u.x << 16), v[1] = __uint_as_float(u.x & 0xffff0000u);
            v[2] = __uint_as_float(u.y << 16), v[3] = __uint_as_float(u.y & 0xffff0000u);
        } else {
#pragma unroll
            for (int j = 0; j < E; j++) v[j] = bf(xh[j]);
        }
        double ss = 0.0;
#pragma unroll
        for (int j = 0; j < E; j++) ss += (double)v[j] * v[j];
        for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        float inv = 1.0f / sqrtf((float)(ss / (double)D) + eps);
#pragma unroll
        for (int j = 0; j < E; j++) {
            float t = v[j] * inv;
            if (w) t = t * w[lane * E + j];
            n[j] = round_bf16(t);
        }
        if (cos) {
            /* partner channel d +- half lives `shift` lanes away at the same slot */
            int src = lane < shift ? lane + shift : lane - shift;
            float p[E];
#pragma unroll
            for (int j = 0; j < E; j++) p[j] = __shfl_sync(0xffffffffu, n[j], src);
            int d0 = lane * E;
            if (d0 < rot) {
                const float *cr = cos + r * rot, *sr = sin + r * rot;
#pragma unroll
                for (int j = 0; j < E; j++) {
                    int d = d0 + j;
                    float c = round_bf16(cr[d]), s = round_bf16(sr[d]);
                    float rv = d < half ? -p[j] : p[j];
                    float a = round_bf16(n[j] * c), b = round_bf16(rv * s);
                    n[j] = a + b; /* rounded by pk below */
                }
            }
        }
        if (E == 4 && VEC) {
            *(uint2 *)xh = make_uint2((uint32_t)pk(n[0]) | ((uint32_t)pk(n[1]) << 16),
                                      (uint32_t)pk(n[2]) | ((uint32_t)pk(n[3]) << 16));
        } else {
#pragma unroll
            for (int j = 0; j < E; j++) xh[j] = pk(n[j]);
        }
    }
}

/* head_dim 128, 8-byte aligned heads: one warp per row looping over its heads, the row's cos/sin in
 * registers (read once per row instead of once per head). Same arithmetic as k_head_norm_rope<4, 1>. */
static __global__ void __launch_bounds__(256) k_head_norm_rope_row(uint16_t *x, int64_t rows, int64_t rs, int heads,
                                                                   int64_t hs, const float *w, float eps, int rot,
                                                                   const float *cos, const float *sin) {
    const int E = 4, D = 128, half = rot / 2, shift = half / E;
    int lane = threadIdx.x & 31;
    int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (r >= rows) return;
    int d0 = lane * E, rotl = cos && d0 < rot;
    float c[E], sn[E], wg[E];
#pragma unroll
    for (int j = 0; j < E; j++) {
        wg[j] = w ? w[d0 + j] : 1.0f;
        c[j] = rotl ? round_bf16(cos[r * rot + d0 + j]) : 0.0f;
        sn[j] = rotl ? round_bf16(sin[r * rot + d0 + j]) : 0.0f;
    }
    int src = lane < shift ? lane + shift : lane - shift;
    for (int h = 0; h < heads; h++) {
        uint16_t *xh = x + r * rs + h * hs + d0;
        uint2 u = *(const uint2 *)xh;
        float v[E] = {__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u), __uint_as_float(u.y << 16),
                      __uint_as_float(u.y & 0xffff0000u)};
        double ss = 0.0;
#pragma unroll
        for (int j = 0; j < E; j++) ss += (double)v[j] * v[j];
        for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        float inv = 1.0f / sqrtf((float)(ss / (double)D) + eps);
        float n[E];
#pragma unroll
        for (int j = 0; j < E; j++) {
            float t = v[j] * inv;
            if (w) t = t * wg[j];
            n[j] = round_bf16(t);
        }
        if (cos) {
            float p[E];
#pragma unroll
            for (int j = 0; j < E; j++) p[j] = __shfl_sync(0xffffffffu, n[j], src);
            if (rotl) {
#pragma unroll
                for (int j = 0; j < E; j++) {
                    float rv = d0 + j < half ? -p[j] : p[j];
                    n[j] = round_bf16(n[j] * c[j]) + round_bf16(rv * sn[j]);
                }
            }
        }
        *(uint2 *)xh = make_uint2((uint32_t)pk(n[0]) | ((uint32_t)pk(n[1]) << 16),
                                  (uint32_t)pk(n[2]) | ((uint32_t)pk(n[3]) << 16));
    }
}

/* head_dim 128, 16-byte aligned heads: one warp per row, a half-warp per head (8 channels per lane, 16-byte
 * accesses), HR_U head pairs loaded before any is used (k_head_norm_rope_row keeps one 8-byte load per lane in
 * flight: 0.46 ms per call at 19540 x 56 heads, ~1.2 TB/s). Same arithmetic as k_head_norm_rope<4, 1>; the
 * sum of squares is a double (as the twin), so its summation order does not reach the float result. */
enum { HR_U = 4 };
template <int HW>
static __global__ void __launch_bounds__(256) k_head_norm_rope_row8(uint16_t *x, int64_t rows, int64_t rs, int heads,
                                                                    int64_t hs, const float *w, float eps, int rot,
                                                                    const float *cos, const float *sin) {
    const int E = 8, D = 128, half = rot / 2, shift = half / E;
    const int lane = threadIdx.x & 31, sub = lane & 15, hsel = lane >> 4;
    const int64_t r = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (r >= rows) return;
    const int d0 = sub * E, rotl = cos && d0 < rot;
    float c[E], sn[E], wg[E];
#pragma unroll
    for (int j = 0; j < E; j++) {
        wg[j] = w ? w[d0 + j] : 1.0f;
        c[j] = rotl ? rbf16<HW ? 1 : 0>(cos[r * rot + d0 + j]) : 0.0f; /* loaded values: the tested rounding */
        sn[j] = rotl ? rbf16<HW ? 1 : 0>(sin[r * rot + d0 + j]) : 0.0f;
    }
    /* the partner channel d +- half lives `shift` lanes away inside the same half-warp */
    const int src = (lane & 16) | (sub < shift ? sub + shift : sub - shift);
    uint16_t *xr = x + r * rs + d0;
    for (int h0 = 0; h0 < heads; h0 += 2 * HR_U) {
        uint4 u[HR_U];
#pragma unroll
        for (int i = 0; i < HR_U; i++) {
            int h = h0 + 2 * i + hsel;
            u[i] = h < heads ? *(const uint4 *)(xr + h * hs) : make_uint4(0u, 0u, 0u, 0u);
        }
#pragma unroll
        for (int i = 0; i < HR_U; i++) {
            int h = h0 + 2 * i + hsel;
            if (h0 + 2 * i >= heads) break; /* warp-uniform: both halves idle */
            uint32_t wv[4] = {u[i].x, u[i].y, u[i].z, u[i].w};
            float v[E];
#pragma unroll
            for (int j = 0; j < 4; j++) v[2 * j] = __uint_as_float(wv[j] << 16), v[2 * j + 1] = __uint_as_float(wv[j] & 0xffff0000u);
            double ss = 0.0;
#pragma unroll
            for (int j = 0; j < E; j++) ss += (double)v[j] * v[j];
            for (int o = 8; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
            float inv = 1.0f / sqrtf((float)(ss / (double)D) + eps);
            float n[E];
#pragma unroll
            for (int j = 0; j < E; j += 2) { /* two channels at a time (rn2: one packed conversion at HW 2) */
                n[j] = v[j] * inv, n[j + 1] = v[j + 1] * inv;
                if (w) n[j] = n[j] * wg[j], n[j + 1] = n[j + 1] * wg[j + 1];
                rn2<HW>(n[j], n[j + 1]);
            }
            if (cos) {
                float p[E];
#pragma unroll
                for (int j = 0; j < E; j++) p[j] = __shfl_sync(0xffffffffu, n[j], src);
                if (rotl) {
#pragma unroll
                    for (int j = 0; j < E; j += 2) {
                        float rv0 = d0 + j < half ? -p[j] : p[j], rv1 = d0 + j + 1 < half ? -p[j + 1] : p[j + 1];
                        float a0 = n[j] * c[j], a1 = n[j + 1] * c[j + 1], b0 = rv0 * sn[j], b1 = rv1 * sn[j + 1];
                        rn2<HW>(a0, a1), rn2<HW>(b0, b1);
                        n[j] = a0 + b0, n[j + 1] = a1 + b1;
                    }
                }
            }
            if (h < heads) {
                uint32_t o[4];
#pragma unroll
                for (int j = 0; j < 4; j++) o[j] = pack2<HW>(n[2 * j], n[2 * j + 1]);
                *(uint4 *)(xr + h * hs) = make_uint4(o[0], o[1], o[2], o[3]);
            }
        }
    }
}

/* Any head_dim <= 512 (tiny test models): one warp per (row, head) through shared memory. */
enum { HN_WARPS = 8, HN_MAXD = 512 };
static __global__ void k_head_norm_rope_any(uint16_t *x, int64_t rows, int64_t rs, int heads, int64_t hs, int D,
                                            const float *w, float eps, int rot, const float *cos, const float *sin) {
    __shared__ float buf[HN_WARPS][HN_MAXD];
    int lane = threadIdx.x & 31, wi = threadIdx.x >> 5, half = rot / 2;
    float *n = buf[wi];
    int64_t nwarps = ((int64_t)gridDim.x * blockDim.x) >> 5;
    for (int64_t task = (blockIdx.x * (int64_t)blockDim.x + threadIdx.x) >> 5; task < rows * heads; task += nwarps) {
        int64_t r = task / heads;
        int h = (int)(task - r * heads);
        uint16_t *xh = x + r * rs + h * hs;
        double ss = 0.0;
        for (int d = lane; d < D; d += 32) {
            float v = bf(xh[d]);
            ss += (double)v * v;
        }
        for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
        float inv = 1.0f / sqrtf((float)(ss / (double)D) + eps);
        for (int d = lane; d < D; d += 32) {
            float t = bf(xh[d]) * inv;
            if (w) t = t * w[d];
            n[d] = round_bf16(t);
        }
        __syncwarp();
        for (int d = lane; d < D; d += 32) {
            float o = n[d];
            if (cos && d < rot) {
                float c = round_bf16(cos[r * rot + d]), s = round_bf16(sin[r * rot + d]);
                float rv = d < half ? -n[d + half] : n[d - half];
                o = round_bf16(n[d] * c) + round_bf16(rv * s);
            }
            xh[d] = pk(o);
        }
        __syncwarp();
    }
}

extern "C" void cuda_bf16_head_norm_rope(h3_backend *be, h3_bf16 *x, int64_t rows, int64_t row_stride, int heads,
                                         int64_t head_stride, int head_dim, const float *w, float eps, int rot_dim,
                                         const float *cos, const float *sin) {
    if (rows <= 0 || heads <= 0) return;
    int E = head_dim / 32;
    int ok = (head_dim == 128 || head_dim == 64) && (!cos || (rot_dim % 2 == 0 && rot_dim <= head_dim &&
                                                                (rot_dim / 2) % E == 0 && rot_dim % E == 0));
    if (!ok) {
        if (head_dim > HN_MAXD || (cos && (rot_dim > head_dim || rot_dim % 2))) {
            cuda_record_error(be, "bf16_head_norm_rope", "head_dim must be <= 512 and rot_dim even and <= head_dim");
            return;
        }
        k_head_norm_rope_any<<<cuda_blocks(rows * heads * 32, 32 * HN_WARPS), 32 * HN_WARPS, 0, cuda_of(be)->stream>>>(
            x, rows, row_stride, heads, head_stride, head_dim, w, eps, rot_dim, cos, sin);
        CUDA_LAUNCHED(be, "bf16_head_norm_rope (any head_dim)");
        return;
    }
    int vec = E == 4 && ((uintptr_t)x & 7u) == 0 && row_stride % 4 == 0 && head_stride % 4 == 0;
    unsigned blocks = cuda_blocks(rows * heads * 32, 256);
    cudaStream_t st = cuda_of(be)->stream;
    int vec16 = E == 4 && aligned16(x) && row_stride % 8 == 0 && head_stride % 8 == 0 && (!cos || (rot_dim / 2) % 8 == 0);
    if (vec16)
        if (cuda_of(be)->bf16_hw_round == 2)
            k_head_norm_rope_row8<2><<<(unsigned)((rows + 7) / 8), 256, 0, st>>>(x, rows, row_stride, heads, head_stride,
                                                                                 w, eps, rot_dim, cos, sin);
        else if (cuda_of(be)->bf16_hw_round)
            k_head_norm_rope_row8<1><<<(unsigned)((rows + 7) / 8), 256, 0, st>>>(x, rows, row_stride, heads, head_stride,
                                                                                 w, eps, rot_dim, cos, sin);
        else
            k_head_norm_rope_row8<0><<<(unsigned)((rows + 7) / 8), 256, 0, st>>>(x, rows, row_stride, heads, head_stride,
                                                                                 w, eps, rot_dim, cos, sin);
    else if (E == 4 && vec) /* one warp per row (0.46 ms per call at 19540 rows x 56 heads vs 0.69 one warp per head) */
        k_head_norm_rope_row<<<(unsigned)((rows + 7) / 8), 256, 0, st>>>(x, rows, row_stride, heads, head_stride, w, eps,
                                                                         rot_dim, cos, sin);
    else if (E == 4) /* unaligned: element loads */
        k_head_norm_rope<4, 0><<<blocks, 256, 0, st>>>(x, rows, row_stride, heads, head_stride, w, eps, rot_dim, cos, sin);
    else
        k_head_norm_rope<2, 0><<<blocks, 256, 0, st>>>(x, rows, row_stride, heads, head_stride, w, eps, rot_dim, cos, sin);
    CUDA_LAUNCHED(be, "bf16_head_norm_rope");
}

/* ---- attention ---- */

/* strided bf16 heads -> head-major [H][S][D] */
static __global__ void k_pack_heads(uint16_t *dst, const uint16_t *src, int64_t S, int64_t rs, int64_t hs, int H,
                                    int D) {
    FOR_ROWS_COLS(s, c, S, (int64_t)H * D) {
        int h = (int)c / D, d = (int)c - h * D;
        dst[((int64_t)h * S + s) * D + d] = src[s * rs + (int64_t)h * hs + d];
    }
}

/* strided bf16 heads -> fp32 rows [S][H*D] */
static __global__ void k_heads_to_f32(float *dst, const uint16_t *src, int64_t S, int64_t rs, int64_t hs, int H, int D) {
    FOR_ROWS_COLS(s, c, S, (int64_t)H * D) {
        int h = (int)c / D, d = (int)c - h * D;
        dst[s * H * D + c] = bf(src[s * rs + (int64_t)h * hs + d]);
    }
}

extern "C" void cuda_bf16_attention(h3_backend *be, h3_bf16 *out, int64_t o_rs, const h3_bf16 *q, int64_t q_rs,
                                    int64_t q_hs, const h3_bf16 *k, int64_t k_rs, int64_t k_hs, const h3_bf16 *v,
                                    int64_t v_rs, int64_t v_hs, int64_t Sq, int64_t Skv, int Hq, int Hkv, int D,
                                    float scale) {
    cuda_impl *c = cuda_of(be);
    if (Sq <= 0 || Hq <= 0) return;
    if (Skv <= 0 || Hkv <= 0 || Hq % Hkv) {
        cuda_record_error(be, "bf16_attention", "Skv must be > 0 and Hq a multiple of Hkv");
        return;
    }
    if (D != 64 && D != 128) { /* small test models: fp32 copies through h3_attention's exact kernel */
        int64_t wq = (int64_t)Hq * D, wkv = (int64_t)Hkv * D;
        float *qf = (float *)cuda_scratch(be, (size_t)(Sq * wq + 2 * Skv * wkv + Sq * wq) * sizeof(float));
        if (!qf) return;
        float *kf = qf + Sq * wq, *vf = kf + Skv * wkv, *of = vf + Skv * wkv;
        k_heads_to_f32<<<grid_rows_cols(Sq, wq, 256), 256, 0, c->stream>>>(qf, q, Sq, q_rs, q_hs, Hq, D);
        k_heads_to_f32<<<grid_rows_cols(Skv, wkv, 256), 256, 0, c->stream>>>(kf, k, Skv, k_rs, k_hs, Hkv, D);
        k_heads_to_f32<<<grid_rows_cols(Skv, wkv, 256), 256, 0, c->stream>>>(vf, v, Skv, v_rs, v_hs, Hkv, D);
        CUDA_LAUNCHED(be, "bf16_attention (fp32 copies)");
        cuda_attention(be, of, wq, qf, wq, kf, wkv, vf, wkv, Sq, Skv, Hq, Hkv, D, scale, 0, H3_BF16_OUT);
        k_rows_f32_to_bf16<<<grid_rows_cols(Sq, wq, 256), 256, 0, c->stream>>>(out, o_rs, of, Sq, wq);
        CUDA_LAUNCHED(be, "bf16_attention (rows to bf16)");
        cuda_free(be, qf);
        return;
    }
    /* 1. the own Hopper kernel on the strides as they are (head_dim 128; 4-11 % faster than cuDNN at the
     * DiT's shapes, docs/cuda.md), unless H3_ATTN=cudnn / own */
    const char *impl = h3_knob_get(H3_KNOB_ATTN);
    if (D == 128 && (!impl || !strcmp(impl, "sm90")) &&
        cuda_flash_sm90(be, out, o_rs, D, q, q_rs, q_hs, k, k_rs, k_hs, v, v_rs, v_hs, Sq, Skv, Hq, Hkv, D, scale) == 0)
        return;
    /* 2. cuDNN on the strides as they are (H3_ATTN_STRIDED=0: always the head-major copies) */
    const char *strided = h3_knob_get(H3_KNOB_ATTN_STRIDED);
    if ((!strided || strcmp(strided, "0")) && cuda_cudnn_attention_bf16_strided(be, out, o_rs, q, q_rs, q_hs, k, k_rs, k_hs, v, v_rs, v_hs, Sq, Skv, Hq,
                                          Hkv, D, scale) == 0)
        return;
    /* 3. head-major copies, then cuDNN or the own mma.sync flash kernel */
    size_t nq = (size_t)Hq * Sq * D, nkv = (size_t)Hkv * Skv * D;
    uint16_t *qb = (uint16_t *)cuda_scratch(be, (nq + 2 * nkv) * 2);
    if (!qb) return;
    uint16_t *kb = qb + nq, *vb = kb + nkv;
    k_pack_heads<<<grid_rows_cols(Sq, (int64_t)Hq * D, 256), 256, 0, c->stream>>>(qb, q, Sq, q_rs, q_hs, Hq, D);
    k_pack_heads<<<grid_rows_cols(Skv, (int64_t)Hkv * D, 256), 256, 0, c->stream>>>(kb, k, Skv, k_rs, k_hs, Hkv, D);
    k_pack_heads<<<grid_rows_cols(Skv, (int64_t)Hkv * D, 256), 256, 0, c->stream>>>(vb, v, Skv, v_rs, v_hs, Hkv, D);
    CUDA_LAUNCHED(be, "bf16_attention (pack heads)");
    int64_t wq = (int64_t)Hq * D;
    if (o_rs == wq && cuda_cudnn_attention_bf16(be, out, qb, kb, vb, Sq, Skv, Hq, Hkv, D, scale) == 0) {
        cuda_free(be, qb);
        return;
    }
    float *of = (float *)cuda_scratch(be, (size_t)(Sq * wq) * sizeof(float));
    if (of) {
        cuda_flash_attention_bf16(be, of, wq, qb, kb, vb, Sq, Skv, Hq, Hkv, D, scale, 0, 1);
        k_rows_f32_to_bf16<<<grid_rows_cols(Sq, wq, 256), 256, 0, c->stream>>>(out, o_rs, of, Sq, wq);
        CUDA_LAUNCHED(be, "bf16_attention (rows to bf16)");
        cuda_free(be, of);
    }
    cuda_free(be, qb);
}

/* ---- gated residual, SwiGLU ---- */

/* x = bf16(x + bf16(gate * branch)); rows x dim, blockIdx.y strides rows, 8 channels per thread. */
template <int VEC, int HW>
static __global__ void k_gated_residual(uint16_t *x, const uint16_t *br, int64_t rows, int64_t dim, const float *table,
                                        int64_t tstride, const int32_t *ridx, int64_t gate_off) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float *gate = table ? table + (int64_t)ridx[r] * tstride + gate_off : NULL;
        uint16_t *xr = x + r * dim;
        const uint16_t *brr = br + r * dim;
        if (VEC) {
            for (int64_t c8 = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c8 < dim / 8;
                 c8 += (int64_t)gridDim.x * blockDim.x) {
                uint4 ux = ((const uint4 *)xr)[c8], ub = ((const uint4 *)brr)[c8];
                uint32_t a[4] = {ux.x, ux.y, ux.z, ux.w}, b[4] = {ub.x, ub.y, ub.z, ub.w}, o[4];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    int64_t c = c8 * 8 + 2 * j;
                    float x0 = __uint_as_float(a[j] << 16), x1 = __uint_as_float(a[j] & 0xffff0000u);
                    float b0 = __uint_as_float(b[j] << 16), b1 = __uint_as_float(b[j] & 0xffff0000u);
                    if (gate) b0 = gate[c] * b0, b1 = gate[c + 1] * b1, rn2<HW>(b0, b1);
                    o[j] = pack2<HW>(x0 + b0, x1 + b1);
                }
                ((uint4 *)xr)[c8] = make_uint4(o[0], o[1], o[2], o[3]);
            }
        } else {
            for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < dim; c += (int64_t)gridDim.x * blockDim.x) {
                float b = bf(brr[c]);
                if (gate) b = round_bf16(gate[c] * b);
                xr[c] = pk(bf(xr[c]) + b);
            }
        }
    }
}

extern "C" void cuda_bf16_gated_residual(h3_backend *be, h3_bf16 *x, const h3_bf16 *branch, int64_t rows, int64_t dim,
                                         const float *table, int64_t table_stride, const int32_t *row_index,
                                         int64_t gate_off) {
    if (rows <= 0 || dim <= 0) return;
    cudaStream_t st = cuda_of(be)->stream;
    if (dim % 8 == 0 && aligned16(x) && aligned16(branch) && cuda_of(be)->bf16_hw_round == 2)
        k_gated_residual<1, 2><<<grid_rows_cols(rows, dim / 8, 256), 256, 0, st>>>(x, branch, rows, dim, table,
                                                                                 table_stride, row_index, gate_off);
    else if (dim % 8 == 0 && aligned16(x) && aligned16(branch) && cuda_of(be)->bf16_hw_round)
        k_gated_residual<1, 1><<<grid_rows_cols(rows, dim / 8, 256), 256, 0, st>>>(x, branch, rows, dim, table,
                                                                                 table_stride, row_index, gate_off);
    else if (dim % 8 == 0 && aligned16(x) && aligned16(branch))
        k_gated_residual<1, 0><<<grid_rows_cols(rows, dim / 8, 256), 256, 0, st>>>(x, branch, rows, dim, table,
                                                                                 table_stride, row_index, gate_off);
    else
        k_gated_residual<0, 0><<<grid_rows_cols(rows, dim, 256), 256, 0, st>>>(x, branch, rows, dim, table, table_stride,
                                                                          row_index, gate_off);
    CUDA_LAUNCHED(be, "bf16_gated_residual");
}

/* Gated residual + RMSNorm/modulation, one block per row, the row in registers: x and branch read once, the new x
 * written, then the norm of k_rmsnorm_mod_cached on the registers (no second read of x). The residual rounds as
 * k_gated_residual, the norm as k_rmsnorm_mod_cached with the same threads per row (so the same partial sums of
 * squares): the same bits as the two kernels, one read of x less and one launch less. */
template <int HW, int Q>
static __global__ void __launch_bounds__(1024)
    k_gated_residual_rmsnorm_mod(uint16_t *x, const uint16_t *br, uint16_t *y, int64_t dim, const float *gtable,
                                 int64_t gstride, const int32_t *gidx, int64_t gate_off, const float *w, float eps,
                                 const float *table, int64_t tstride, const int32_t *ridx, int64_t shift_off,
                                 int64_t scale_off, rowq_arg qa) {
    __shared__ double red[32];
    const int64_t r = blockIdx.x, nvec = dim / 8;
    uint4 *xr = (uint4 *)(x + r * dim);
    const uint4 *brr = (const uint4 *)(br + r * dim);
    uint4 *yr = (uint4 *)(y + r * dim);
    uint4 u[RMC_V], ub[RMC_V];
#pragma unroll
    for (int i = 0; i < RMC_V; i++) { /* every load issued before any is used */
        int64_t c8 = threadIdx.x + (int64_t)i * blockDim.x;
        u[i] = c8 < nvec ? xr[c8] : make_uint4(0u, 0u, 0u, 0u);
        ub[i] = c8 < nvec ? brr[c8] : make_uint4(0u, 0u, 0u, 0u);
    }
    const float *gate = gtable ? gtable + (int64_t)gidx[r] * gstride + gate_off : NULL;
#pragma unroll
    for (int i = 0; i < RMC_V; i++) { /* x = bf16(x + bf16(gate * branch)), kept in u for the norm */
        int64_t c8 = threadIdx.x + (int64_t)i * blockDim.x;
        if (c8 >= nvec) break;
        float g[8];
        if (gate) load8f(g, gate + c8 * 8);
        uint32_t a[4] = {u[i].x, u[i].y, u[i].z, u[i].w}, b[4] = {ub[i].x, ub[i].y, ub[i].z, ub[i].w}, o[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float x0 = __uint_as_float(a[j] << 16), x1 = __uint_as_float(a[j] & 0xffff0000u);
            float b0 = __uint_as_float(b[j] << 16), b1 = __uint_as_float(b[j] & 0xffff0000u);
            if (gate) b0 = g[2 * j] * b0, b1 = g[2 * j + 1] * b1, rn2<HW>(b0, b1);
            o[j] = pack2<HW>(x0 + b0, x1 + b1);
        }
        u[i] = make_uint4(o[0], o[1], o[2], o[3]);
        xr[c8] = u[i];
    }
    norm_mod_row<HW>(u, yr, r, nvec, dim, w, eps, table, tstride, ridx, shift_off, scale_off, red); /* as k_rmsnorm_mod_cached */
    if (Q) rowq_row(qa, y + r * dim, r, dim);
}

/* The launch of cuda_bf16_gated_residual_rmsnorm_modulate; q as in rmsnorm_modulate (1: quantized). */
static int gated_residual_rmsnorm_modulate(h3_backend *be, h3_bf16 *x, const h3_bf16 *branch, h3_bf16 *y, int64_t rows,
                                           int64_t dim, const float *gate_table, int64_t gate_stride,
                                           const int32_t *gate_index, int64_t gate_off, const float *w, float eps,
                                           const float *table, int64_t table_stride, const int32_t *row_index,
                                           int64_t shift_off, int64_t scale_off, const h3_rowq *q) {
    if (rows <= 0 || dim <= 0) return 1;
    /* the fused kernel takes what k_rmsnorm_mod_cached takes, plus a 16-byte branch and float4 gate vectors */
    const int64_t nvec = dim / 8;
    int vec16 = dim % 8 == 0 && nvec <= (int64_t)RMC_V * 1024 && aligned16(x) && aligned16(branch) && aligned16(y);
    int params16 = (!w || aligned16(w)) &&
                   (!table || (aligned16(table) && table_stride % 4 == 0 && shift_off % 4 == 0 && scale_off % 4 == 0)) &&
                   (!gate_table || (aligned16(gate_table) && gate_stride % 4 == 0 && gate_off % 4 == 0));
    if (!vec16 || !params16 || rows > 2147483647) { /* the two kernels in turn */
        cuda_bf16_gated_residual(be, x, branch, rows, dim, gate_table, gate_stride, gate_index, gate_off);
        return rmsnorm_modulate(be, y, x, rows, dim, w, eps, table, table_stride, row_index, shift_off, scale_off, q);
    }
    /* k_rmsnorm_mod_cached's threads per row: its partial sums of squares, so its float result */
    unsigned threads = (unsigned)(((nvec + RMC_V - 1) / RMC_V + 31) / 32 * 32);
    cudaStream_t st = cuda_of(be)->stream;
    const int hw = cuda_of(be)->bf16_hw_round;
    rowq_arg qa = {0, NULL, NULL, 0};
    int fused = 0;
    if (q && rowq_fusable(q, dim)) qa = rowq_of(q), fused = 1;
#define GRN_LAUNCH(HW, Q)                                                                                              \
    k_gated_residual_rmsnorm_mod<HW, Q><<<(unsigned)rows, threads, 0, st>>>(x, branch, y, dim, gate_table, gate_stride, \
                                                                            gate_index, gate_off, w, eps, table,       \
                                                                            table_stride, row_index, shift_off,        \
                                                                            scale_off, qa)
    if (fused) {
        if (hw == 2) GRN_LAUNCH(2, 1);
        else if (hw) GRN_LAUNCH(1, 1);
        else GRN_LAUNCH(0, 1);
    } else {
        if (hw == 2) GRN_LAUNCH(2, 0);
        else if (hw) GRN_LAUNCH(1, 0);
        else GRN_LAUNCH(0, 0);
    }
#undef GRN_LAUNCH
    CUDA_LAUNCHED(be, "bf16_gated_residual_rmsnorm_modulate");
    return fused;
}

extern "C" void cuda_bf16_gated_residual_rmsnorm_modulate(h3_backend *be, h3_bf16 *x, const h3_bf16 *branch,
                                                          h3_bf16 *y, int64_t rows, int64_t dim,
                                                          const float *gate_table, int64_t gate_stride,
                                                          const int32_t *gate_index, int64_t gate_off, const float *w,
                                                          float eps, const float *table, int64_t table_stride,
                                                          const int32_t *row_index, int64_t shift_off,
                                                          int64_t scale_off) {
    gated_residual_rmsnorm_modulate(be, x, branch, y, rows, dim, gate_table, gate_stride, gate_index, gate_off, w, eps,
                                    table, table_stride, row_index, shift_off, scale_off, NULL);
}

extern "C" void cuda_bf16_gated_residual_rmsnorm_modulate_q(h3_backend *be, h3_bf16 *x, const h3_bf16 *branch,
                                                            h3_bf16 *y, int64_t rows, int64_t dim,
                                                            const float *gate_table, int64_t gate_stride,
                                                            const int32_t *gate_index, int64_t gate_off,
                                                            const float *w, float eps, const float *table,
                                                            int64_t table_stride, const int32_t *row_index,
                                                            int64_t shift_off, int64_t scale_off, const h3_rowq *q) {
    if (!h3_rowq_ok(be, "h3_bf16_gated_residual_rmsnorm_modulate_q", q, dim)) return;
    if (!gated_residual_rmsnorm_modulate(be, x, branch, y, rows, dim, gate_table, gate_stride, gate_index, gate_off, w,
                                         eps, table, table_stride, row_index, shift_off, scale_off, q))
        quant_rows(be, y, rows, dim, q);
}

static __device__ __forceinline__ float silu_f32(float g) { return g / (1.0f + expf(-g)); } /* before its rounding */
template <int HW> static __device__ __forceinline__ float swiglu1(float val, float g) {
    float s = rbf16<HW>(silu_f32(g));
    return val * s;
}

template <int VEC, int HW>
static __global__ void k_swiglu(uint16_t *y, const uint16_t *z, int64_t rows, int64_t ff, int64_t ldz, int64_t voff,
                                int64_t goff) {
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const uint16_t *val = z + r * ldz + voff, *gate = z + r * ldz + goff;
        uint16_t *yr = y + r * ff;
        if (VEC) {
            for (int64_t c8 = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c8 < ff / 8;
                 c8 += (int64_t)gridDim.x * blockDim.x) {
                uint4 uv = ((const uint4 *)val)[c8], ug = ((const uint4 *)gate)[c8];
                uint32_t a[4] = {uv.x, uv.y, uv.z, uv.w}, g[4] = {ug.x, ug.y, ug.z, ug.w}, o[4];
#pragma unroll
                for (int j = 0; j < 4; j++) {
                    float g0 = __uint_as_float(g[j] << 16), g1 = __uint_as_float(g[j] & 0xffff0000u);
                    float s0 = silu_f32(g0), s1 = silu_f32(g1); /* swiglu1 on a pair */
                    rn2<HW>(s0, s1);
                    o[j] = pack2<HW>(__uint_as_float(a[j] << 16) * s0, __uint_as_float(a[j] & 0xffff0000u) * s1);
                }
                ((uint4 *)yr)[c8] = make_uint4(o[0], o[1], o[2], o[3]);
            }
        } else {
            for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < ff; c += (int64_t)gridDim.x * blockDim.x)
                yr[c] = pk(swiglu1<0>(bf(val[c]), bf(gate[c])));
        }
    }
}

extern "C" void cuda_bf16_swiglu(h3_backend *be, h3_bf16 *y, const h3_bf16 *z, int64_t rows, int64_t ff, int64_t ldz,
                                 int64_t val_off, int64_t gate_off) {
    if (rows <= 0 || ff <= 0) return;
    cudaStream_t st = cuda_of(be)->stream;
    int vec = ff % 8 == 0 && ldz % 8 == 0 && val_off % 8 == 0 && gate_off % 8 == 0 && aligned16(z) && aligned16(y);
    if (vec && cuda_of(be)->bf16_hw_round == 2)
        k_swiglu<1, 2><<<grid_rows_cols(rows, ff / 8, 256), 256, 0, st>>>(y, z, rows, ff, ldz, val_off, gate_off);
    else if (vec && cuda_of(be)->bf16_hw_round)
        k_swiglu<1, 1><<<grid_rows_cols(rows, ff / 8, 256), 256, 0, st>>>(y, z, rows, ff, ldz, val_off, gate_off);
    else if (vec)
        k_swiglu<1, 0><<<grid_rows_cols(rows, ff / 8, 256), 256, 0, st>>>(y, z, rows, ff, ldz, val_off, gate_off);
    else
        k_swiglu<0, 0><<<grid_rows_cols(rows, ff, 256), 256, 0, st>>>(y, z, rows, ff, ldz, val_off, gate_off);
    CUDA_LAUNCHED(be, "bf16_swiglu");
}

/* SwiGLU + the quantization of its rows (ops.h): one block per row, the elements as k_swiglu<1, HW>
 * (element-wise: the same bits in any layout), then the row's codes (cuda_rowq.h). */
template <int HW>
static __global__ void __launch_bounds__(256) k_swiglu_rowq(uint16_t *y, const uint16_t *z, int64_t ff, int64_t ldz,
                                                            int64_t voff, int64_t goff, rowq_arg qa) {
    const int64_t r = blockIdx.x;
    const uint4 *val = (const uint4 *)(z + r * ldz + voff), *gate = (const uint4 *)(z + r * ldz + goff);
    uint4 *yr = (uint4 *)(y + r * ff);
    for (int64_t c8 = threadIdx.x; c8 < ff / 8; c8 += blockDim.x) {
        uint4 uv = val[c8], ug = gate[c8];
        uint32_t a[4] = {uv.x, uv.y, uv.z, uv.w}, g[4] = {ug.x, ug.y, ug.z, ug.w}, o[4];
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float g0 = __uint_as_float(g[j] << 16), g1 = __uint_as_float(g[j] & 0xffff0000u);
            float s0 = silu_f32(g0), s1 = silu_f32(g1);
            rn2<HW>(s0, s1);
            o[j] = pack2<HW>(__uint_as_float(a[j] << 16) * s0, __uint_as_float(a[j] & 0xffff0000u) * s1);
        }
        yr[c8] = make_uint4(o[0], o[1], o[2], o[3]);
    }
    rowq_row(qa, y + r * ff, r, ff);
}

extern "C" void cuda_bf16_swiglu_q(h3_backend *be, h3_bf16 *y, const h3_bf16 *z, int64_t rows, int64_t ff, int64_t ldz,
                                   int64_t val_off, int64_t gate_off, const h3_rowq *q) {
    if (!h3_rowq_ok(be, "h3_bf16_swiglu_q", q, ff)) return;
    if (rows <= 0 || ff <= 0) return;
    int vec = ff % 8 == 0 && ldz % 8 == 0 && val_off % 8 == 0 && gate_off % 8 == 0 && aligned16(z) && aligned16(y);
    if (!vec || !rowq_fusable(q, ff) || rows > 2147483647) {
        cuda_bf16_swiglu(be, y, z, rows, ff, ldz, val_off, gate_off);
        quant_rows(be, y, rows, ff, q);
        return;
    }
    cudaStream_t st = cuda_of(be)->stream;
    const int hw = cuda_of(be)->bf16_hw_round;
    rowq_arg qa = rowq_of(q);
    if (hw == 2) k_swiglu_rowq<2><<<(unsigned)rows, 256, 0, st>>>(y, z, ff, ldz, val_off, gate_off, qa);
    else if (hw) k_swiglu_rowq<1><<<(unsigned)rows, 256, 0, st>>>(y, z, ff, ldz, val_off, gate_off, qa);
    else k_swiglu_rowq<0><<<(unsigned)rows, 256, 0, st>>>(y, z, ff, ldz, val_off, gate_off, qa);
    CUDA_LAUNCHED(be, "bf16_swiglu_q");
}

/* ---- row moves ---- */

static __global__ void k_scatter(uint16_t *dst, const uint16_t *src, const int32_t *idx, int64_t n, int64_t dim) {
    FOR_ROWS_COLS(i, c, n, dim) dst[(int64_t)idx[i] * dim + c] = src[i * dim + c];
}

static __global__ void k_scatter_f32(uint16_t *dst, const float *src, const int32_t *idx, int64_t n, int64_t dim) {
    FOR_ROWS_COLS(i, c, n, dim) dst[(int64_t)idx[i] * dim + c] = pk(src[i * dim + c]);
}

static __global__ void k_gather_f32(float *dst, const uint16_t *src, const int32_t *idx, int64_t n, int64_t dim) {
    FOR_ROWS_COLS(i, c, n, dim) dst[i * dim + c] = bf(src[(int64_t)idx[i] * dim + c]);
}

extern "C" void cuda_bf16_rows_scatter(h3_backend *be, h3_bf16 *dst, const h3_bf16 *src, const int32_t *index,
                                       int64_t n, int64_t dim) {
    if (n <= 0) return;
    k_scatter<<<grid_rows_cols(n, dim, 256), 256, 0, cuda_of(be)->stream>>>(dst, src, index, n, dim);
    CUDA_LAUNCHED(be, "bf16_rows_scatter");
}

extern "C" void cuda_bf16_rows_scatter_f32(h3_backend *be, h3_bf16 *dst, const float *src, const int32_t *index,
                                           int64_t n, int64_t dim) {
    if (n <= 0) return;
    k_scatter_f32<<<grid_rows_cols(n, dim, 256), 256, 0, cuda_of(be)->stream>>>(dst, src, index, n, dim);
    CUDA_LAUNCHED(be, "bf16_rows_scatter_f32");
}

extern "C" void cuda_bf16_rows_gather_f32(h3_backend *be, float *dst, const h3_bf16 *src, const int32_t *index,
                                          int64_t n, int64_t dim) {
    if (n <= 0) return;
    k_gather_f32<<<grid_rows_cols(n, dim, 256), 256, 0, cuda_of(be)->stream>>>(dst, src, index, n, dim);
    CUDA_LAUNCHED(be, "bf16_rows_gather_f32");
}

/* ---- --token-reduction: pairs pooled, the full grid restored with the reduced stack's update ---- */

static __global__ void k_pool_pairs(uint16_t *y, const uint16_t *x, const int32_t *pairs, int64_t rows, int64_t dim) {
    FOR_ROWS_COLS(r, c, rows, dim) {
        const int64_t a = pairs[2 * r], b = pairs[2 * r + 1];
        y[r * dim + c] = a == b ? x[a * dim + c] : pk((bf(x[a * dim + c]) + bf(x[b * dim + c])) * 0.5f);
    }
}

static __global__ void k_expand_delta(uint16_t *x, const uint16_t *red, const uint16_t *base, const int32_t *parent,
                                      int64_t rows, int64_t prefix, int64_t dim, float scale) {
    FOR_ROWS_COLS(r, c, rows, dim) {
        const int64_t p = parent[r];
        if (r < prefix) {
            x[r * dim + c] = red[p * dim + c];
        } else {
            float update = bf(red[p * dim + c]) - bf(base[p * dim + c]);
            float scaled = scale * update;
            x[r * dim + c] = pk(bf(x[r * dim + c]) + scaled);
        }
    }
}

extern "C" void cuda_bf16_rows_pool_pairs(h3_backend *be, h3_bf16 *y, const h3_bf16 *x, const int32_t *pairs,
                                          int64_t rows, int64_t dim) {
    if (rows <= 0 || dim <= 0) return;
    k_pool_pairs<<<grid_rows_cols(rows, dim, 256), 256, 0, cuda_of(be)->stream>>>(y, x, pairs, rows, dim);
    CUDA_LAUNCHED(be, "bf16_rows_pool_pairs");
}

extern "C" void cuda_bf16_rows_expand_delta(h3_backend *be, h3_bf16 *x, const h3_bf16 *reduced, const h3_bf16 *base,
                                            const int32_t *parent, int64_t rows, int64_t prefix, int64_t dim,
                                            float scale) {
    if (rows <= 0 || dim <= 0) return;
    k_expand_delta<<<grid_rows_cols(rows, dim, 256), 256, 0, cuda_of(be)->stream>>>(x, reduced, base, parent, rows,
                                                                                 prefix, dim, scale);
    CUDA_LAUNCHED(be, "bf16_rows_expand_delta");
}
