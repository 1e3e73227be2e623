/* The GGUF expansion of cuda/cuda_gguf.cu on a stream of the caller's (its twins of the table's gguf ops are
 * declared in cuda_ops.h). */
#ifndef H3_CUDA_GGUF_H
#define H3_CUDA_GGUF_H

#ifdef __cplusplus
extern "C" {
#endif
#include "../ops.h"

/* h3_gguf_dequant on a given stream (cuda_stream.cu's copy stream: the weight slots' fills); 0, or -1 for a type
 * it does not read */
int  cuda_gguf_dequant_on(void *stream, h3_bf16 *dst, const void *src, uint32_t type, int64_t n);
/* the same values widened to F32 (a wide slot piece, backend_stream.h) */
int  cuda_gguf_dequant_wide_on(void *stream, float *dst, const void *src, uint32_t type, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
