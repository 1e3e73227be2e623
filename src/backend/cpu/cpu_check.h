/* CPU twin of the result checks (backend_check.h). */
#ifndef H3_CPU_CHECK_H
#define H3_CPU_CHECK_H

#include <stdint.h>

#include "../backend.h"

int64_t cpu_count_nonfinite(h3_backend *be, const float *x, int64_t n);

#endif
