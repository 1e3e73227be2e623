/* Convolution ops of the video VAE encoder: 3-D convolutions with built-in causal / reflect padding
 * and per-frame GroupNorm (docs/model/video_vae.md sections 4.1-4.4). The 1-D convolutions of the
 * audio VAE live in backend_audio.h.
 *
 * All tensors are fp32 buffers in backend memory, one batch item, channel-major [C, T, H, W].
 * Weights use the PyTorch layout (Conv3d [Cout, Cin, kt, kh, kw]) as fp32 buffers; bias may be NULL.
 * Outputs never alias inputs. Dispatch: backend_conv.c -> cpu/cpu_conv.c or cuda/cuda_conv.cu
 * (h3_conv_supported says whether a backend has them). */
#ifndef H3_BACKEND_CONV_H
#define H3_BACKEND_CONV_H

#include <stdint.h>

#include "backend.h"
#include "conv_shapes.h" /* h3_conv3d_geom, h3_conv3d_check */

/* y[co,t,i,j] = b[co] + sum_{ci,a,u,v} w[co,ci,a,u,v] * xpad[ci, t*st+a, i*sh+u, j*sw+v] (docs/model/video_vae.md 4.2).
 * Workspace is internal and bounded (the CPU twin im2cols a block of output rows at a time). */
void h3_conv3d(h3_backend *be, float *y, const float *x, const h3_conv3d_geom *g, const float *w,
               const float *bias);

/* Per-frame GroupNorm on x [C, T, HW] (docs/model/video_vae.md 4.4): for each frame t and group g (channels
 * [g*C/G, (g+1)*C/G)), statistics over (C/G) x HW values, biased variance, accumulated in double;
 * y = (x - mean) * rsqrt(var + eps) * w[c] + b[c]. With silu != 0, y = silu(y) is fused in
 * (x * sigmoid(x), as torch's F.silu). y may alias x. */
void h3_groupnorm_frames(h3_backend *be, float *y, const float *x, int64_t C, int64_t T, int64_t HW, int groups,
                         const float *w, const float *b, float eps, int silu);

/* 1 when this backend implements the ops above (the CPU always does; CUDA in a CUDA=1 build). */
int h3_conv_supported(const h3_backend *be);

#endif
