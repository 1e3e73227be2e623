/* CPU twin of h3_count_nonfinite: the value's exponent bits all set (NaN or +-Inf), tested on the bits so that
 * no compiler flag about NaNs can change the answer; a bf16 value is the top half of an fp32 one, so the same mask
 * shifted down by 16 bits. */
#include "cpu_check.h"

#include <string.h>

int64_t cpu_count_nonfinite(h3_backend *be, const void *x, int bf16, int64_t n) {
    (void)be;
    int64_t bad = 0;
    if (bf16) {
        const uint16_t *h = x;
#pragma omp parallel for reduction(+ : bad) if (n > 65536) schedule(static)
        for (int64_t i = 0; i < n; i++) bad += (h[i] & 0x7f80u) == 0x7f80u;
        return bad;
    }
    const float *f = x;
#pragma omp parallel for reduction(+ : bad) if (n > 65536) schedule(static)
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &f[i], sizeof u);
        bad += (u & 0x7f800000u) == 0x7f800000u;
    }
    return bad;
}
