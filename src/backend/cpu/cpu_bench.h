/* CPU twins of the benchmark ops (backend_bench.h). */
#ifndef H3_CPU_BENCH_H
#define H3_CPU_BENCH_H

#include "../backend_bench.h"

int cpu_fill_random_weights(void *x, h3_dtype dtype, int64_t n, uint64_t base, float scale, float offset);
int cpu_memory_query(h3_backend *be, h3_memory_stats *out, h3_err *e);

#endif
