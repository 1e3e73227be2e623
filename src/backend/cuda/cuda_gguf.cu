/* CUDA twins of the GGUF block ops (ops_linear.h). One thread per output value: it reads its block's scale
 * fields and its code bits (byte loads: the blocks are 18 to 210 bytes, not aligned) and forms the value with the
 * CPU twin's fp32 products in the same order (--fmad=false, and the _rn intrinsics to say so), then rounds to
 * bf16 with h3_f32_to_bf16's bit rule (quiet NaNs included), so every value is bit-identical to cpu_gguf.c. */
#include "cuda_internal.h"
#include "cuda_gguf.h"

#include "../gguf_random.h"

/* h3_f16_to_f32 (core/dtype.c) on the device: exact widening, subnormals as man * 2^-24 */
__device__ static inline float f16_at(const uint8_t *p) {
    const uint32_t h = (uint32_t)p[0] | (uint32_t)p[1] << 8;
    const uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    uint32_t u;
    if (exp == 0) u = man ? (__float_as_uint(__fmul_rn((float)man, 0x1p-24f)) | sign) : sign;
    else if (exp == 31) u = sign | 0x7f800000u | (man << 13);
    else u = sign | ((exp + 112) << 23) | (man << 13);
    return __uint_as_float(u);
}

/* h3_f32_to_bf16 (core/dtype.h) */
__device__ static inline uint16_t to_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* the k-quants' 6-bit scale and min of sub-block j (gguf_dequant.c scale_min_k4) */
__device__ static inline void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

__device__ static inline uint32_t u32_at(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* value v (< the block's count) of block b of type T, as gguf_dequant.c computes it */
template <int T>
__device__ static inline float value(const uint8_t *b, int v) {
    if constexpr (T == 0) return __uint_as_float(u32_at(b));
    if constexpr (T == 1) return f16_at(b);
    if constexpr (T == 30) return __uint_as_float(((uint32_t)b[0] | (uint32_t)b[1] << 8) << 16);
    if constexpr (T == 8) return __fmul_rn((float)(int8_t)b[2 + v], f16_at(b));
    if constexpr (T == 2) {
        const int j = v & 15, q = v < 16 ? (b[2 + j] & 0x0F) : (b[2 + j] >> 4);
        return __fmul_rn((float)(q - 8), f16_at(b));
    }
    if constexpr (T == 3) {
        const int j = v & 15, q = v < 16 ? (b[4 + j] & 0x0F) : (b[4 + j] >> 4);
        return __fadd_rn(__fmul_rn((float)q, f16_at(b)), f16_at(b + 2));
    }
    if constexpr (T == 6 || T == 7) {
        const int o = T == 6 ? 2 : 4, j = v & 15;
        const uint32_t qh = u32_at(b + o);
        const int h = v < 16 ? (int)((qh >> j) << 4 & 0x10) : (int)((qh >> (j + 12)) & 0x10);
        const int q = (v < 16 ? (b[o + 4 + j] & 0x0F) : (b[o + 4 + j] >> 4)) | h;
        if constexpr (T == 6) return __fmul_rn((float)(q - 16), f16_at(b));
        return __fadd_rn(__fmul_rn((float)q, f16_at(b)), f16_at(b + 2));
    }
    if constexpr (T == 12 || T == 13) {
        const int c = v >> 6, hi = (v >> 5) & 1, l = v & 31;
        int s, m;
        scale_min_k4(2 * c + hi, b + 4, &s, &m);
        const float d1 = __fmul_rn(f16_at(b), (float)s), n1 = __fmul_rn(f16_at(b + 2), (float)m);
        const uint8_t *q = b + (T == 12 ? 16 : 48) + 32 * c;
        int code = hi ? (q[l] >> 4) : (q[l] & 0x0F);
        if constexpr (T == 13) code += (b[16 + l] & (uint8_t)((hi ? 2u : 1u) << (2 * c))) ? 16 : 0;
        return __fsub_rn(__fmul_rn(d1, (float)code), n1);
    }
    if constexpr (T == 14) {
        const int n = v >> 7, r = v & 127, quarter = r >> 5, l = r & 31, is = l / 16;
        const uint8_t *ql = b + 64 * n, *qh = b + 128 + 32 * n;
        const int8_t *sc = (const int8_t *)(b + 192) + 8 * n;
        const int lo = (quarter & 1) ? ql[l + 32] : ql[l];
        const int q = ((quarter & 2) ? (lo >> 4) : (lo & 0x0F)) | ((qh[l] >> (2 * quarter) & 3) << 4);
        return __fmul_rn(__fmul_rn(f16_at(b + 208), (float)sc[is + 2 * quarter]), (float)(q - 32));
    }
    return 0.0f;
}

/* BV values per block of BB bytes, each stored as its bf16 bits */
__device__ static inline void store_value(uint16_t *dst, int64_t i, float v) { dst[i] = to_bf16(v); }
/* the same bf16 value widened to F32 (exact): a wide slot piece (backend_stream.h, the fp32 mode's LoRA parts) */
__device__ static inline void store_value(float *dst, int64_t i, float v) {
    dst[i] = __uint_as_float((uint32_t)to_bf16(v) << 16);
}

template <int T, int BV, int BB, typename OUT>
__global__ static void dequant_kernel(OUT *dst, const uint8_t *src, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        store_value(dst, i, value<T>(src + (i / BV) * BB, (int)(i % BV)));
}

template <typename OUT> static int dequant_launch(void *stream, OUT *y, const void *src, uint32_t type, int64_t n) {
    if (n <= 0) return 0;
    cudaStream_t s = (cudaStream_t)stream;
    const unsigned g = cuda_blocks(n, 256);
    const uint8_t *x = (const uint8_t *)src;
    switch (type) {
    case 0: dequant_kernel<0, 1, 4><<<g, 256, 0, s>>>(y, x, n); break;
    case 1: dequant_kernel<1, 1, 2><<<g, 256, 0, s>>>(y, x, n); break;
    case 30: dequant_kernel<30, 1, 2><<<g, 256, 0, s>>>(y, x, n); break;
    case 2: dequant_kernel<2, 32, 18><<<g, 256, 0, s>>>(y, x, n); break;
    case 3: dequant_kernel<3, 32, 20><<<g, 256, 0, s>>>(y, x, n); break;
    case 6: dequant_kernel<6, 32, 22><<<g, 256, 0, s>>>(y, x, n); break;
    case 7: dequant_kernel<7, 32, 24><<<g, 256, 0, s>>>(y, x, n); break;
    case 8: dequant_kernel<8, 32, 34><<<g, 256, 0, s>>>(y, x, n); break;
    case 12: dequant_kernel<12, 256, 144><<<g, 256, 0, s>>>(y, x, n); break;
    case 13: dequant_kernel<13, 256, 176><<<g, 256, 0, s>>>(y, x, n); break;
    case 14: dequant_kernel<14, 256, 210><<<g, 256, 0, s>>>(y, x, n); break;
    default: return -1;
    }
    return 0;
}

extern "C" int cuda_gguf_dequant_wide_on(void *stream, float *dst, const void *src, uint32_t type, int64_t n) {
    return dequant_launch(stream, dst, src, type, n);
}

extern "C" int cuda_gguf_dequant_on(void *stream, h3_bf16 *dst, const void *src, uint32_t type, int64_t n) {
    return dequant_launch(stream, (uint16_t *)dst, src, type, n);
}

/* the type's block (values, bytes); 0 when not read (gguf.c's table, which the CUDA objects do not link against
 * in their own translation unit) */
static int block_of(uint32_t type, int64_t *bv, int64_t *bb) {
    switch (type) {
    case 0: *bv = 1, *bb = 4; return 1;
    case 1: case 30: *bv = 1, *bb = 2; return 1;
    case 2: *bv = 32, *bb = 18; return 1;
    case 3: *bv = 32, *bb = 20; return 1;
    case 6: *bv = 32, *bb = 22; return 1;
    case 7: *bv = 32, *bb = 24; return 1;
    case 8: *bv = 32, *bb = 34; return 1;
    case 12: *bv = 256, *bb = 144; return 1;
    case 13: *bv = 256, *bb = 176; return 1;
    case 14: *bv = 256, *bb = 210; return 1;
    default: return 0;
    }
}

extern "C" void cuda_gguf_dequant(h3_backend *be, h3_bf16 *dst, const void *src, uint32_t type, int64_t n) {
    int64_t bv, bb;
    if (!block_of(type, &bv, &bb) || n < 0 || n % bv) {
        cuda_record_error(be, "gguf_dequant", "a GGUF type h3 does not read, or a partial block");
        return;
    }
    cuda_gguf_dequant_on(cuda_of(be)->stream, dst, src, type, n);
    CUDA_LAUNCHED(be, "gguf dequant_kernel");
}

__global__ static void fill_kernel(uint8_t *dst, uint32_t type, int64_t bb, int64_t nblk, uint64_t seed, int exp2) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < nblk; i += (int64_t)gridDim.x * blockDim.x)
        gguf_random_block(dst + i * bb, type, bb, (uint64_t)i, seed, exp2);
}

extern "C" void cuda_gguf_fill_random(h3_backend *be, void *dst, uint32_t type, int64_t nblk, uint64_t seed, float scale) {
    const int exp2 = h3_gguf_scale_exp2(scale);
    int64_t bv, bb;
    if (!block_of(type, &bv, &bb) || nblk < 0) {
        cuda_record_error(be, "gguf_fill_random", "a GGUF type h3 does not read");
        return;
    }
    if (nblk == 0) return;
    fill_kernel<<<cuda_blocks(nblk, 256), 256, 0, cuda_of(be)->stream>>>((uint8_t *)dst, type, bb, nblk, seed, exp2);
    CUDA_LAUNCHED(be, "gguf fill_kernel");
}
