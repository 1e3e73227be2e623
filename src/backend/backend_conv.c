/* Dispatch of the convolution ops (backend_conv.h) to the CPU twin (cpu/cpu_conv.c) or CUDA
 * (the geometry checks both twins use live below them, in conv_shapes.c). */
#include "backend_conv.h"

#include "cpu/cpu_conv.h"
#ifdef H3_CUDA /* twins in src/backend/cuda/cuda_conv.cu */
#include "cuda/cuda_conv.h"
#define CONV_DISPATCH(be, op, ...)                                  \
    do {                                                            \
        if ((be)->kind == H3_BACKEND_CUDA) cuda_##op(__VA_ARGS__);  \
        else cpu_##op(__VA_ARGS__);                                 \
    } while (0)
#define CONV_HAS_CUDA 1
#else
/* A build without CUDA has no CUDA backend; any other backend kind records a clean failure
 * instead of handing its pointers to the CPU twin (h3_backend_check reports it). */
#define CONV_DISPATCH(be, op, ...)                                                                    \
    do {                                                                                              \
        if ((be)->kind != H3_BACKEND_CPU) h3_backend_unsupported(be, "h3_" #op, "no twin on this backend"); \
        else cpu_##op(__VA_ARGS__);                                                                   \
    } while (0)
#define CONV_HAS_CUDA 0
#endif

int h3_conv_supported(const h3_backend *be) { return be->kind == H3_BACKEND_CPU || (CONV_HAS_CUDA && be->kind == H3_BACKEND_CUDA); }

void h3_conv3d(h3_backend *be, float *y, const float *x, const h3_conv3d_geom *g, const float *w,
               const float *bias) {
    CONV_DISPATCH(be, conv3d, be, y, x, g, w, bias);
}

void h3_groupnorm_frames(h3_backend *be, float *y, const float *x, int64_t C, int64_t T, int64_t HW, int groups,
                         const float *w, const float *b, float eps, int silu) {
    CONV_DISPATCH(be, groupnorm_frames, be, y, x, C, T, HW, groups, w, b, eps, silu);
}
