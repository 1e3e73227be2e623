/* CUDA twins of the benchmark ops (backend_bench.h): the counter-based random fill (bit-identical
 * with cpu_bench.c) and the stream-ordered pool's memory statistics. */
#include "cuda_internal.h"
#include "cuda_bench.h"

#include <cuda_fp16.h>

__device__ static inline uint64_t mix64(uint64_t s) {
    uint64_t z = s + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

template <typename T, int F16 = 0>
__global__ static void fill_random_kernel(T *x, int64_t n, uint64_t base, float scale, float offset) {
    for (int64_t j = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; j < n; j += (int64_t)gridDim.x * blockDim.x) {
        float u = __fsub_rn(__fmul_rn((float)(mix64(base + (uint64_t)j) >> 40), 2.0f / 16777216.0f), 1.0f);
        float v = __fadd_rn(offset, __fmul_rn(u, scale));
        if constexpr (F16) x[j] = __half_as_ushort(__float2half_rn(v));
        else if constexpr (sizeof(T) == 2) x[j] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
        else x[j] = v;
    }
}

extern "C" int cuda_fill_random_weights(h3_backend *be, void *x, h3_dtype dtype, int64_t n, uint64_t base,
                                        float scale, float offset) {
    cuda_impl *c = cuda_of(be);
    if (n <= 0) return 0;
    if (dtype == H3_BF16)
        fill_random_kernel<uint16_t><<<cuda_blocks(n, 256), 256, 0, c->stream>>>((uint16_t *)x, n, base, scale, offset);
    else if (dtype == H3_F16)
        fill_random_kernel<uint16_t, 1><<<cuda_blocks(n, 256), 256, 0, c->stream>>>((uint16_t *)x, n, base, scale, offset);
    else if (dtype == H3_F32)
        fill_random_kernel<float><<<cuda_blocks(n, 256), 256, 0, c->stream>>>((float *)x, n, base, scale, offset);
    else
        return -1;
    CUDA_LAUNCHED(be, "fill_random_kernel");
    return 0;
}

extern "C" int cuda_memory_query(h3_backend *be, h3_memory_stats *out, h3_err *e) {
    cuda_impl *c = cuda_of(be);
    cudaMemPool_t pool;
    uint64_t high = 0, reserved = 0, used = 0;
    size_t free_b = 0, total_b = 0;
    cudaError_t err;
    cudaStreamSynchronize(c->stream); /* frees queued on the stream count once they have run */
    if ((err = cudaDeviceGetDefaultMemPool(&pool, c->device)) != cudaSuccess ||
        (err = cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &high)) != cudaSuccess ||
        (err = cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved)) != cudaSuccess ||
        (err = cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used)) != cudaSuccess ||
        (err = cudaMemGetInfo(&free_b, &total_b)) != cudaSuccess)
        return h3_fail(e, "--backend cuda: memory query failed (%s)", cudaGetErrorString(err));
    out->peak_bytes = (size_t)high;
    out->in_use_bytes = total_b - free_b;
    out->total_bytes = total_b;
    out->available_bytes = free_b + (size_t)(reserved > used ? reserved - used : 0);
    return 0;
}

extern "C" void cuda_memory_reset_peak(h3_backend *be) {
    cudaMemPool_t pool;
    uint64_t zero = 0; /* resets the high-water mark to the current use */
    cudaStreamSynchronize(cuda_of(be)->stream);
    if (cudaDeviceGetDefaultMemPool(&pool, cuda_of(be)->device) == cudaSuccess)
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &zero);
}
