/* Result checks (docs/robustness.md, "Flags, numbers, results and messages"): a cheap reduction that tells whether
 * a buffer holds NaN or +-Inf, run on the latents after the DiT and on the samples after each decoder. */
#ifndef H3_BACKEND_CHECK_H
#define H3_BACKEND_CHECK_H

#include <stdint.h>

#include "../core/dtype.h"
#include "backend.h"

/* How many of x[0..n) are not finite (NaN or +-Inf); x is backend memory of dtype dt (H3_F32 or H3_BF16: the DiT's
 * bf16 residual stream is checked block by block under --profile). Synchronous (the count is on the host when it
 * returns); -1 when the backend could not run it (its failure is recorded, h3_backend_check says) or dt is another
 * dtype. */
int64_t h3_count_nonfinite(h3_backend *be, const void *x, h3_dtype dt, int64_t n);

/* The same count added into *tally (one uint64 in backend memory), without waiting for it: a forward checks every
 * DiT block's output into its own counter and reads them all once at its end (docs/robustness.md), so the check
 * costs a read of the buffer and no pipeline stall. 0, or -1 when dt is not H3_F32/H3_BF16 or the launch failed
 * (its failure is recorded, h3_backend_check says). */
int h3_tally_nonfinite(h3_backend *be, uint64_t *tally, const void *x, h3_dtype dt, int64_t n);

/* 0 when the fp32 x[0..n) is all finite; else -1 with "WHAT: N of M values are not finite (NaN or Inf): ..." in e. */
int h3_check_finite(h3_backend *be, const float *x, int64_t n, const char *what, h3_err *e);

#endif
