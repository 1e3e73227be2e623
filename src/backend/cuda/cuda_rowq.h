/* Device tail of the fused-quantization kernels (ops.h): a block that has just written one bf16 row
 * quantizes it for the W8A8 GEMM that reads it. The rules are k_quant_rows' of cuda_w8a8.cu (FP8) and cuda_int8.cu
 * (INT8) to the operation: the absmax with fmaxf (order-free, so the scale does not depend on the thread layout),
 * the scale and x / scale as IEEE divisions, the E4M3 conversion (RNE, saturating) or __float2int_rn and the clamp;
 * so the codes and scales are the two-pass path's bit for bit. The two-pass path's own quantizers (cuda_int8.cu,
 * cuda_w8a8.cu) are k_rowq_quant below, so there is one definition of the rules on the device. */
#ifndef H3_CUDA_ROWQ_H
#define H3_CUDA_ROWQ_H

#include <cuda_fp8.h>

extern "C" {
#include "../ops.h"
}

/* What a kernel needs of an h3_rowq (passed by value). */
struct rowq_arg {
    int      kind;
    void    *q;
    float   *scale;
    int64_t  group; /* 0: the whole row */
};

static inline rowq_arg rowq_of(const h3_rowq *q) {
    rowq_arg a = {q->kind, q->q, q->scale, q->group};
    return a;
}

/* The fused kernels take rows of dim % 8 == 0 (16-byte bf16 chunks, 8-byte code chunks) and groups of a multiple
 * of 8 channels; anything else runs the two ops in turn. */
static inline int rowq_fusable(const h3_rowq *q, int64_t dim) {
    return dim % 8 == 0 && ((uintptr_t)q->q & 7u) == 0 && (q->group == 0 || q->group % 8 == 0);
}

static __device__ __forceinline__ float rowq_amax8(uint4 u, float m) {
    uint32_t wv[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; j++)
        m = fmaxf(m, fmaxf(fabsf(__uint_as_float(wv[j] << 16)), fabsf(__uint_as_float(wv[j] & 0xffff0000u))));
    return m;
}

static __device__ __forceinline__ float rowq_scale(int kind, float m) {
    return kind == H3_ROWQ_INT8 ? __fdiv_rn(fmaxf(m, H3_INT8_MIN_AMAX), H3_INT8_MAX)
                                : __fdiv_rn(fmaxf(m, H3_FP8_MIN_AMAX), H3_FP8_MAX);
}

static __device__ __forceinline__ uint32_t rowq_i8x4(float a, float b, float c, float d, float s) {
    int v[4] = {__float2int_rn(__fdiv_rn(a, s)), __float2int_rn(__fdiv_rn(b, s)), __float2int_rn(__fdiv_rn(c, s)),
                __float2int_rn(__fdiv_rn(d, s))};
    uint32_t o = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) o |= (uint32_t)(uint8_t)(int8_t)min(max(v[i], -127), 127) << (8 * i);
    return o;
}

static __device__ __forceinline__ uint32_t rowq_f8x4(float a, float b, float c, float d, float s) {
    float v[4] = {__fdiv_rn(a, s), __fdiv_rn(b, s), __fdiv_rn(c, s), __fdiv_rn(d, s)};
    uint32_t o = 0;
#pragma unroll
    for (int i = 0; i < 4; i++) o |= (uint32_t)(uint8_t)__nv_cvt_float_to_fp8(v[i], __NV_SATFINITE, __NV_E4M3) << (8 * i);
    return o;
}

/* 8 bf16 values -> 8 codes */
static __device__ __forceinline__ uint2 rowq_codes8(int kind, uint4 u, float s) {
    float f[8] = {__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u), __uint_as_float(u.y << 16),
                  __uint_as_float(u.y & 0xffff0000u), __uint_as_float(u.z << 16), __uint_as_float(u.z & 0xffff0000u),
                  __uint_as_float(u.w << 16), __uint_as_float(u.w & 0xffff0000u)};
    if (kind == H3_ROWQ_INT8) return make_uint2(rowq_i8x4(f[0], f[1], f[2], f[3], s), rowq_i8x4(f[4], f[5], f[6], f[7], s));
    return make_uint2(rowq_f8x4(f[0], f[1], f[2], f[3], s), rowq_f8x4(f[4], f[5], f[6], f[7], s));
}

/* one bf16 value -> its code */
static __device__ __forceinline__ uint8_t rowq_code1(int kind, uint16_t b, float s) {
    const float v = __fdiv_rn(__uint_as_float((uint32_t)b << 16), s);
    if (kind == H3_ROWQ_INT8) return (uint8_t)(int8_t)min(max(__float2int_rn(v), -127), 127);
    return (uint8_t)__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
}

enum { ROWQ_THREADS = 256 };

/* The standalone quantizers h3_fp8_quant_rows / h3_int8_quant_rows: grid (rows, groups); block (r, j) quantizes
 * x[r * ldx + j * g, + g) into q[r * dim + j * g, + g) and scale[r * gridDim.y + j] (g = dim: one scale per row).
 * VEC: g, dim and ldx multiples of 8, x 16-byte and q 8-byte aligned. */
template <int VEC>
static __global__ void __launch_bounds__(ROWQ_THREADS) k_rowq_quant(int kind, uint8_t *q, float *scale,
                                                                   const uint16_t *x, int64_t dim, int64_t ldx,
                                                                   int64_t g) {
    __shared__ float red[ROWQ_THREADS / 32];
    const int64_t r = blockIdx.x, j = blockIdx.y;
    const uint16_t *xr = x + r * ldx + j * g;
    uint8_t *qr = q + r * dim + j * g;
    float m = 0.0f;
    if (VEC)
        for (int64_t c8 = threadIdx.x; c8 < g / 8; c8 += blockDim.x) m = rowq_amax8(((const uint4 *)xr)[c8], m);
    else
        for (int64_t c = threadIdx.x; c < g; c += blockDim.x) m = fmaxf(m, fabsf(__uint_as_float((uint32_t)xr[c] << 16)));
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = 0.0f;
    for (int i = 0; i < (int)(blockDim.x / 32); i++) m = fmaxf(m, red[i]);
    const float s = rowq_scale(kind, m);
    if (threadIdx.x == 0) scale[r * gridDim.y + j] = s;
    if (VEC)
        for (int64_t c8 = threadIdx.x; c8 < g / 8; c8 += blockDim.x)
            ((uint2 *)qr)[c8] = rowq_codes8(kind, ((const uint4 *)xr)[c8], s);
    else
        for (int64_t c = threadIdx.x; c < g; c += blockDim.x) qr[c] = rowq_code1(kind, xr[c], s);
}

/* Row r of the block, yr = its dim bf16 values (16-byte aligned, written by this block before the call: the leading
 * barrier makes them visible to every thread), into codes q[r * dim ...] and scale[r * groups ...]. Every thread
 * of the block calls it. Whole rows: one block-wide max; groups: one warp per group, shuffles only. */
static __device__ void rowq_row(const rowq_arg &a, const uint16_t *yr, int64_t r, int64_t dim) {
    __shared__ float red[32];
    __syncthreads();
    const uint4 *y4 = (const uint4 *)yr;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = (int)(blockDim.x >> 5);
    if (a.group == 0) {
        uint2 *q2 = (uint2 *)((uint8_t *)a.q + r * dim);
        float m = 0.0f;
        for (int64_t c8 = threadIdx.x; c8 < dim / 8; c8 += blockDim.x) m = rowq_amax8(y4[c8], m);
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        if (lane == 0) red[warp] = m;
        __syncthreads();
        m = 0.0f;
        for (int i = 0; i < nw; i++) m = fmaxf(m, red[i]);
        const float s = rowq_scale(a.kind, m);
        if (threadIdx.x == 0) a.scale[r] = s;
        for (int64_t c8 = threadIdx.x; c8 < dim / 8; c8 += blockDim.x) q2[c8] = rowq_codes8(a.kind, y4[c8], s);
        __syncthreads(); /* red may be reused by the block's next row */
        return;
    }
    const int64_t g = a.group, gv = g / 8, ng = dim / g;
    for (int64_t j = warp; j < ng; j += nw) {
        const uint4 *gy = y4 + j * gv;
        uint2 *q2 = (uint2 *)((uint8_t *)a.q + r * dim + j * g);
        float m = 0.0f;
        for (int64_t c8 = lane; c8 < gv; c8 += 32) m = rowq_amax8(gy[c8], m);
        for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        const float s = rowq_scale(a.kind, m);
        if (lane == 0) a.scale[r * ng + j] = s;
        for (int64_t c8 = lane; c8 < gv; c8 += 32) q2[c8] = rowq_codes8(a.kind, gy[c8], s);
    }
}

#endif
