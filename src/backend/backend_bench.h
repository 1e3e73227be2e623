/* Ops for benchmarks: random weights made where they live (66 GB of DiT weights are not generated on
 * the host and copied) and the backend's memory high-water mark.
 *
 * Random values: element j of a fill with counter base `base` is offset + scale * u, with
 * u = (splitmix64 output of state base + j) >> 40 mapped to [-1, 1) in 2^-23 steps; BF16 buffers get
 * the round-to-nearest-even bf16 of that fp32 value. The CPU and CUDA twins give identical bits, so a
 * random model is the same model on both backends. */
#ifndef H3_BACKEND_BENCH_H
#define H3_BACKEND_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

/* x: n elements of dtype F32, BF16 or F16 in backend memory (other dtypes: nothing is written, returns -1). */
int h3_fill_random(h3_backend *be, void *x, h3_dtype dtype, int64_t n, uint64_t base, float scale, float offset);
/* The same values into host memory (the CPU twin), whatever the backend. */
int h3_fill_random_host(void *x, h3_dtype dtype, int64_t n, uint64_t base, float scale, float offset);

typedef struct h3_memory_stats {
    size_t peak_bytes;   /* CUDA: the allocator pool's high-water mark since the last reset;
                            CPU: the process's peak resident set size (not resettable) */
    size_t in_use_bytes; /* CUDA: device memory in use by everything (cudaMemGetInfo); CPU: 0 */
    size_t total_bytes;  /* CUDA: device memory; CPU: 0 */
    size_t available_bytes; /* CUDA: what this process can still allocate: the device's free memory plus what the
                               pool holds unused (freed blocks stay in the pool); CPU: 0 */
} h3_memory_stats;

int  h3_memory_query(h3_backend *be, h3_memory_stats *out, h3_err *e);
/* CUDA: restarts the pool's high-water mark at the current use. CPU: no-op. */
void h3_memory_reset_peak(h3_backend *be);

#endif
