// CUDA twin of h3_count_nonfinite (backend_check.h): each thread counts the non-finite floats of its grid-stride
// slice (exponent bits all set, as the CPU twin tests them), the block adds its threads' counts in shared memory and
// one atomicAdd per block adds them into a device counter, which is copied back after a stream sync (count) or left
// on the device for the caller to read later (tally). A bf16 value is
// the top half of an fp32 one: the same exponent mask, 16 bits down.
#include "cuda_check.h"

#include "cuda_internal.h"

template <typename T>
static __device__ __forceinline__ unsigned nonfinite(T v);
template <> __device__ __forceinline__ unsigned nonfinite<float>(float v) {
    return (__float_as_uint(v) & 0x7f800000u) == 0x7f800000u;
}
template <> __device__ __forceinline__ unsigned nonfinite<uint16_t>(uint16_t v) { return (v & 0x7f80u) == 0x7f80u; }

template <typename T>
static __global__ void k_count_nonfinite(const T *x, int64_t n, unsigned long long *count) {
    __shared__ unsigned long long part[256];
    unsigned long long bad = 0;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        bad += nonfinite<T>(x[i]);
    part[threadIdx.x] = bad;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0 && part[0]) atomicAdd(count, part[0]);
}

static void launch_count(cuda_impl *c, const void *x, int bf16, int64_t n, unsigned long long *count) {
    if (bf16) k_count_nonfinite<uint16_t><<<cuda_blocks(n, 256), 256, 0, c->stream>>>((const uint16_t *)x, n, count);
    else k_count_nonfinite<float><<<cuda_blocks(n, 256), 256, 0, c->stream>>>((const float *)x, n, count);
}

extern "C" int cuda_tally_nonfinite(h3_backend *be, uint64_t *tally, const void *x, int bf16, int64_t n) {
    if (n <= 0) return 0;
    launch_count(cuda_of(be), x, bf16, n, (unsigned long long *)tally);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
        cuda_record_error(be, "tally_nonfinite", cudaGetErrorString(err));
        return -1;
    }
    return 0;
}

extern "C" int64_t cuda_count_nonfinite(h3_backend *be, const void *x, int bf16, int64_t n) {
    if (n <= 0) return 0;
    cuda_impl *c = cuda_of(be);
    unsigned long long *count = (unsigned long long *)cuda_scratch(be, sizeof *count), host = 0;
    if (!count) return -1;
    CUDA_OK(be, cudaMemsetAsync(count, 0, sizeof *count, c->stream));
    launch_count(c, x, bf16, n, count);
    CUDA_LAUNCHED(be, "count_nonfinite");
    cudaError_t err = cudaMemcpyAsync(&host, count, sizeof host, cudaMemcpyDeviceToHost, c->stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(c->stream);
    cuda_free(be, count);
    if (err != cudaSuccess) {
        cuda_record_error(be, "count_nonfinite", cudaGetErrorString(err));
        return -1;
    }
    return (int64_t)host;
}
