/* The dispatchers of the op table (backend.h "The op table"): one function h3_<name> per H3_OP line, made here
 * from the lists. On a CUDA backend it runs cuda_<name>, bracketed by the per-op timer (a no-op unless
 * H3_CUDA_OPTIME=1, docs/tuning.md); on the CPU cpu_<name>; any other kind records a clean failure instead of
 * handing its pointers to the CPU twin (h3_backend_check reports it). */
#include "ops.h"

#include "cpu/cpu_ops.h"
#ifdef H3_CUDA
#include "cuda/cuda_ops.h"
#define H3_OP(name, params, args)                                                          \
    void h3_##name params {                                                                \
        if (be->kind == H3_BACKEND_CUDA) {                                                 \
            int mark_ = cuda_optime_begin(be, #name);                                      \
            cuda_##name args;                                                              \
            cuda_optime_end(be, mark_);                                                    \
        } else if (be->kind == H3_BACKEND_CPU) {                                           \
            cpu_##name args;                                                               \
        } else {                                                                           \
            h3_backend_unsupported(be, "h3_" #name, "no twin on this backend");            \
        }                                                                                  \
    }
#else
#define H3_OP(name, params, args)                                                          \
    void h3_##name params {                                                                \
        if (be->kind == H3_BACKEND_CPU) cpu_##name args;                                   \
        else h3_backend_unsupported(be, "h3_" #name, "no twin on this backend");           \
    }
#endif
#include "ops_list.h"
#undef H3_OP

int h3_ops_supported(const h3_backend *be) {
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) return 1;
#endif
    return be->kind == H3_BACKEND_CPU;
}
