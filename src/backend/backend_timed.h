/* Private to the dispatchers of the activation-op families (backend_bf16.c, backend_fp8.c, backend_int8.c,
 * backend_sage8.c, backend_fusedq.c, backend_vae.c): TIMED_DISPATCH(be, op,
 * args...) calls cuda_<op>(args) on a CUDA backend, bracketed by the per-op timer (a no-op unless H3_CUDA_OPTIME=1),
 * and cpu_<op>(args) otherwise. The family's cpu_/cuda_ headers must be included first. */
#ifndef H3_BACKEND_TIMED_H
#define H3_BACKEND_TIMED_H

#ifdef H3_CUDA
#include "cuda/cuda_ops.h"
#define TIMED_DISPATCH(be, op, ...)                         \
    do {                                                    \
        if ((be)->kind == H3_BACKEND_CUDA) {                \
            int mark_ = cuda_optime_begin((be), #op);       \
            cuda_##op(__VA_ARGS__);                         \
            cuda_optime_end((be), mark_);                   \
        } else {                                            \
            cpu_##op(__VA_ARGS__);                          \
        }                                                   \
    } while (0)
#else
#define TIMED_DISPATCH(be, op, ...) cpu_##op(__VA_ARGS__)
#endif

#endif
