/* CPU twins of the benchmark ops: counter-based random fill and the process's peak memory. */
#include "cpu_bench.h"

#include <sys/resource.h>

#include "../../core/dtype.h"

/* splitmix64 of one counter value: state + golden ratio, then the finalizer. */
static inline uint64_t mix64(uint64_t s) {
    uint64_t z = s + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int cpu_fill_random_weights(void *x, h3_dtype dtype, int64_t n, uint64_t base, float scale, float offset) {
    if (dtype != H3_F32 && dtype != H3_BF16 && dtype != H3_F16) return -1;
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < n; j++) {
        float u = (float)(mix64(base + (uint64_t)j) >> 40) * (2.0f / 16777216.0f) - 1.0f;
        float v = offset + u * scale; /* two roundings (no fma): the CUDA twin does the same */
        if (dtype == H3_BF16) ((uint16_t *)x)[j] = h3_f32_to_bf16(v);
        else if (dtype == H3_F16) ((uint16_t *)x)[j] = h3_f32_to_f16(v);
        else ((float *)x)[j] = v;
    }
    return 0;
}

int cpu_memory_query(h3_backend *be, h3_memory_stats *out, h3_err *e) {
    (void)be;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return h3_fail(e, "getrusage failed");
    out->peak_bytes = (size_t)ru.ru_maxrss * 1024u; /* Linux: kilobytes */
    out->in_use_bytes = 0;
    out->total_bytes = 0;
    out->available_bytes = 0;
    return 0;
}
