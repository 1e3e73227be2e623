/* The CPU twins: cpu_<name> for every line of the op table (backend.h "The op table"), with the dispatcher's
 * arguments (made from the lists), and the CPU backend's memory. The twins are the numerical reference. */
#ifndef H3_CPU_OPS_H
#define H3_CPU_OPS_H

#include <math.h>

#include "../../core/dtype.h"
#include "../backend.h"
#include "../ops.h"

void *cpu_alloc(h3_backend *be, size_t bytes);
void  cpu_free(h3_backend *be, void *p);

/* Shared by the twins of the per-head norms (cpu_bf16.c, cpu_vae.c): 1 / sqrt(mean(x^2) + eps) over n bf16 values,
 * the squares summed in double in order (h3_rmsnorm's statistics). */
static inline float cpu_bf16_rms_inv(const h3_bf16 *x, int64_t n, float eps) {
    double ss = 0.0;
    for (int64_t d = 0; d < n; d++) {
        const float v = h3_bf16_to_f32(x[d]);
        ss += (double)v * v;
    }
    return 1.0f / sqrtf((float)(ss / (double)n) + eps);
}

#define H3_OP(name, params, args) void cpu_##name params;
#include "../ops_list.h"
#undef H3_OP

#endif
