/* Dispatch of the benchmark ops (backend_bench.h) to cpu/cpu_bench.c or cuda/cuda_bench.cu. */
#include "backend_bench.h"

#include "cpu/cpu_bench.h"
#ifdef H3_CUDA
#include "cuda/cuda_bench.h"
#endif

int h3_fill_random(h3_backend *be, void *x, h3_dtype dtype, int64_t n, uint64_t base, float scale, float offset) {
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) return cuda_fill_random_weights(be, x, dtype, n, base, scale, offset);
#endif
    (void)be;
    return cpu_fill_random_weights(x, dtype, n, base, scale, offset);
}

int h3_fill_random_host(void *x, h3_dtype dtype, int64_t n, uint64_t base, float scale, float offset) {
    return cpu_fill_random_weights(x, dtype, n, base, scale, offset);
}

int h3_memory_query(h3_backend *be, h3_memory_stats *out, h3_err *e) {
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) return cuda_memory_query(be, out, e);
#endif
    return cpu_memory_query(be, out, e);
}

void h3_memory_reset_peak(h3_backend *be) {
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) cuda_memory_reset_peak(be);
#endif
    (void)be;
}
