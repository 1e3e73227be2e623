/* CPU twin of h3_count_nonfinite: the float's exponent bits all set (NaN or +-Inf), tested on the bits so that
 * no compiler flag about NaNs can change the answer. */
#include "cpu_check.h"

#include <string.h>

int64_t cpu_count_nonfinite(h3_backend *be, const float *x, int64_t n) {
    (void)be;
    int64_t bad = 0;
#pragma omp parallel for reduction(+ : bad) if (n > 65536) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        bad += (u & 0x7f800000u) == 0x7f800000u;
    }
    return bad;
}
