/* CUDA twins of the benchmark ops (backend_bench.h): same arguments as cpu/cpu_bench.h. */
#ifndef H3_CUDA_BENCH_H
#define H3_CUDA_BENCH_H

#ifdef __cplusplus
extern "C" {
#endif
#include "../backend_bench.h"

int  cuda_fill_random_weights(h3_backend *be, void *x, h3_dtype dtype, int64_t n, uint64_t base, float scale,
                              float offset);
int  cuda_memory_query(h3_backend *be, h3_memory_stats *out, h3_err *e);
void cuda_memory_reset_peak(h3_backend *be);

#ifdef __cplusplus
}
#endif

#endif
