/* CPU twins of the VAE decoder ops (backend_vae.h). Same arguments as h3_vae_<op>. */
#ifndef H3_CPU_VAE_H
#define H3_CPU_VAE_H

#include "../backend_vae.h"

void cpu_vae_residual_rmsnorm(h3_backend *be, float *x, h3_bf16 *y, const h3_bf16 *branch, const float *scale,
                              int64_t rows, int64_t dim, const float *w, float eps);
void cpu_vae_qk_norm_rope(h3_backend *be, h3_bf16 *x, int64_t rows, int64_t row_stride, int64_t period, int heads,
                          int head_dim, float eps, int rot_dim, const float *cos, const float *sin);
void cpu_vae_tile_attention(h3_backend *be, h3_bf16 *out, const h3_bf16 *qkv, int64_t tiles, int64_t N, int heads,
                            int head_dim, float scale);

#endif
