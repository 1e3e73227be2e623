/* CUDA twins of the GGUF block ops (backend_gguf.h), cuda/cuda_gguf.cu. Same arguments as the CPU twins. */
#ifndef H3_CUDA_GGUF_H
#define H3_CUDA_GGUF_H

#ifdef __cplusplus
extern "C" {
#endif
#include "../backend_gguf.h"

void cuda_gguf_dequant(h3_backend *be, h3_bf16 *dst, const void *src, uint32_t type, int64_t n);
void cuda_gguf_fill_random(h3_backend *be, void *dst, uint32_t type, int64_t nblk, uint64_t seed, int exp2);
/* h3_gguf_dequant on a given stream (cuda_stream.cu's copy stream: the weight slots' fills); 0, or -1 for a type
 * it does not read */
int  cuda_gguf_dequant_on(void *stream, h3_bf16 *dst, const void *src, uint32_t type, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
