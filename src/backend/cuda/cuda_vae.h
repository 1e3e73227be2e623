/* CUDA twins of the VAE decoder ops (backend_vae.h). Same arguments as cpu_vae_<op> (cpu/cpu_vae.h); all
 * pointers are device memory except the host buffers. */
#ifndef H3_CUDA_VAE_H
#define H3_CUDA_VAE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "../backend_vae.h"

void cuda_vae_residual_rmsnorm(h3_backend *be, float *x, h3_bf16 *y, const h3_bf16 *branch, const float *scale,
                               int64_t rows, int64_t dim, const float *w, float eps);
void cuda_vae_qk_norm_rope(h3_backend *be, h3_bf16 *x, int64_t rows, int64_t row_stride, int64_t period, int heads,
                           int head_dim, float eps, int rot_dim, const float *cos, const float *sin);

void cuda_vae_tile_attention(h3_backend *be, h3_bf16 *out, const h3_bf16 *qkv, int64_t tiles, int64_t N, int heads,
                             int head_dim, float scale);
/* cuDNN SDPA over B independent problems (cuda_sdpa_cudnn.cu): batch b's q/k/v/o start bst[0..3] elements after
 * batch b-1's, the rest as cuda_cudnn_attention_bf16_strided. -1 when no cuDNN engine takes it. */
int cuda_cudnn_attention_bf16_batched(h3_backend *be, int64_t B, const int64_t bst[4], uint16_t *o, int64_t o_rs,
                                      const uint16_t *q, int64_t q_rs, int64_t q_hs, const uint16_t *k, int64_t k_rs,
                                      int64_t k_hs, const uint16_t *v, int64_t v_rs, int64_t v_hs, int64_t Sq,
                                      int64_t Skv, int Hq, int Hkv, int D, float scale);

void *cuda_vae_host_alloc(h3_backend *be, size_t bytes);
void  cuda_vae_host_free(h3_backend *be, void *p);
void *cuda_vae_xfer_new(h3_backend *be);
void  cuda_vae_xfer_free(h3_backend *be, void *x);
void  cuda_vae_download_async(h3_backend *be, void *x, int slot, void *dst, const void *src, size_t bytes);
void  cuda_vae_download_wait(h3_backend *be, void *x, int slot);

#ifdef __cplusplus
}
#endif

#endif
