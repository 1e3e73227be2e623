/* CUDA twins of the video VAE encoder's convolution ops (backend_conv.h; CPU twins in cpu/cpu_conv.c),
 * same arguments, every tensor pointer device memory (the geometry struct is host memory). */
#ifndef H3_CUDA_CONV_H
#define H3_CUDA_CONV_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "../backend.h"
#include "../conv_shapes.h"

void cuda_conv3d(h3_backend *be, float *y, const float *x, const h3_conv3d_geom *g, const float *w,
                 const float *bias);
void cuda_groupnorm_frames(h3_backend *be, float *y, const float *x, int64_t C, int64_t T, int64_t HW, int groups,
                           const float *w, const float *b, float eps, int silu);

#ifdef __cplusplus
}
#endif

#endif
