/* CPU twins of the convolution ops (backend_conv.h). Same arguments as h3_<op>. */
#ifndef H3_CPU_CONV_H
#define H3_CPU_CONV_H

#include "../backend.h"
#include "../conv_shapes.h"

void cpu_conv3d(h3_backend *be, float *y, const float *x, const h3_conv3d_geom *g, const float *w,
                const float *bias);
void cpu_groupnorm_frames(h3_backend *be, float *y, const float *x, int64_t C, int64_t T, int64_t HW, int groups,
                          const float *w, const float *b, float eps, int silu);

#endif
