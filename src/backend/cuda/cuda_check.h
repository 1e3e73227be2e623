/* CUDA twin of the result checks (backend_check.h; CPU twin in cpu/cpu_check.c), same arguments; x is device
 * memory. */
#ifndef H3_CUDA_CHECK_H
#define H3_CUDA_CHECK_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "../backend.h"

int64_t cuda_count_nonfinite(h3_backend *be, const void *x, int bf16, int64_t n);
int     cuda_tally_nonfinite(h3_backend *be, uint64_t *tally, const void *x, int bf16, int64_t n);

#ifdef __cplusplus
}
#endif

#endif
