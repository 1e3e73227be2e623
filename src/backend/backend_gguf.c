/* Dispatch of the GGUF block ops (backend_gguf.h) to the CPU twin (cpu/cpu_gguf.c) or CUDA (cuda/cuda_gguf.cu). */
#include "backend_gguf.h"

#include <math.h>

#include "cpu/cpu_gguf.h"
#ifdef H3_CUDA
#include "cuda/cuda_gguf.h"
#endif
#include "backend_timed.h"

void h3_gguf_dequant(h3_backend *be, h3_bf16 *dst, const void *src, uint32_t type, int64_t n) {
    TIMED_DISPATCH(be, gguf_dequant, be, dst, src, type, n);
}

void h3_gguf_fill_random(h3_backend *be, void *dst, uint32_t type, int64_t nblk, uint64_t seed, float scale) {
    int exp2 = 0; /* scale = f * 2^(exp2 + 1), f in [0.5, 1): 2^exp2 <= scale */
    if (scale > 0 && isfinite(scale)) frexpf(scale, &exp2), exp2 -= 1;
    TIMED_DISPATCH(be, gguf_fill_random, be, dst, type, nblk, seed, exp2);
}
