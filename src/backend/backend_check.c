/* Dispatch of the result checks (backend_check.h) to the CPU twin (cpu/cpu_check.c) or, in a CUDA=1 build, the
 * CUDA twin (cuda/cuda_check.cu). */
#include "backend_check.h"

#include "cpu/cpu_check.h"
#ifdef H3_CUDA
#include "cuda/cuda_check.h"
#endif

int64_t h3_count_nonfinite(h3_backend *be, const void *x, h3_dtype dt, int64_t n) {
    if (dt != H3_F32 && dt != H3_BF16) return -1;
    if (n <= 0) return 0;
    const int bf16 = dt == H3_BF16;
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) return cuda_count_nonfinite(be, x, bf16, n);
#endif
    return cpu_count_nonfinite(be, x, bf16, n);
}

int h3_tally_nonfinite(h3_backend *be, uint64_t *tally, const void *x, h3_dtype dt, int64_t n) {
    if (dt != H3_F32 && dt != H3_BF16) return -1;
    if (n <= 0) return 0;
    const int bf16 = dt == H3_BF16;
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) return cuda_tally_nonfinite(be, tally, x, bf16, n);
#endif
    *tally += (uint64_t)cpu_count_nonfinite(be, x, bf16, n);
    return 0;
}

int h3_check_finite(h3_backend *be, const float *x, int64_t n, const char *what, h3_err *e) {
    int64_t bad = h3_count_nonfinite(be, x, H3_F32, n);
    if (bad < 0) return h3_backend_check(be, e) ? -1 : h3_fail(e, "%s: the non-finite check could not run", what);
    if (bad)
        return h3_fail(e, "%s: %lld of %lld values are not finite (NaN or Inf): broken weights or inputs; nothing written",
                       what, (long long)bad, (long long)n);
    return 0;
}
