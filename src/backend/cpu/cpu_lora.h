/* The LoRA merge's arithmetic on host memory (docs/lora.md "The merge and its rounding"): the CPU twin of
 * h3_lora_merge_into (ops_linear.def) and dit_lora.c's merge at load both run it, so the slot merge and the load
 * merge cannot differ. */
#ifndef H3_CPU_LORA_H
#define H3_CPU_LORA_H

#include <stdint.h>

#include "../../core/dtype.h"

/* W[dest(o)][i] for o < n, i < k with fp32 factors B [n][rank], A [rank][k] (every value already rounded to dt), on
 * the OpenMP threads; the bits do not depend on the thread count. */
void cpu_lora_merge_rows(void *W, h3_dtype dt, int64_t n, int64_t k, int64_t row_group, int64_t group_stride,
                         const float *B, const float *A, int rank, float scaling);

#endif
