/* CPU twin of the result checks (backend_check.h). */
#ifndef H3_CPU_CHECK_H
#define H3_CPU_CHECK_H

#include <stdint.h>

#include "../backend.h"

/* bf16: x holds bf16 values (uint16), else fp32 */
int64_t cpu_count_nonfinite(h3_backend *be, const void *x, int bf16, int64_t n);

#endif
