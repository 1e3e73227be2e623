/* The batched cuDNN attention of the video decoder and the pinned host buffers / asynchronous downloads of
 * ops_transfer.h (cuda/cuda_vae.cu, cuda/cuda_sdpa_cudnn.cu); the table's twins are declared in cuda_ops.h. */
#ifndef H3_CUDA_VAE_H
#define H3_CUDA_VAE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "../ops.h"

/* cuDNN SDPA over B independent problems (cuda_sdpa_cudnn.cu): batch b's q/k/v/o start bst[0..3] elements after
 * batch b-1's, the rest as cuda_cudnn_attention_bf16_strided. -1 when no cuDNN engine takes it. */
int cuda_cudnn_attention_bf16_batched(h3_backend *be, int64_t B, const int64_t bst[4], uint16_t *o, int64_t o_rs,
                                      const uint16_t *q, int64_t q_rs, int64_t q_hs, const uint16_t *k, int64_t k_rs,
                                      int64_t k_hs, const uint16_t *v, int64_t v_rs, int64_t v_hs, int64_t Sq,
                                      int64_t Skv, int Hq, int Hkv, int D, float scale);

void *cuda_host_alloc(h3_backend *be, size_t bytes);
void  cuda_host_free(h3_backend *be, void *p);
void *cuda_xfer_new(h3_backend *be);
void  cuda_xfer_free(h3_backend *be, void *x);
void  cuda_download_async(h3_backend *be, void *x, int slot, void *dst, const void *src, size_t bytes);
void  cuda_download_wait(h3_backend *be, void *x, int slot);

#ifdef __cplusplus
}
#endif

#endif
