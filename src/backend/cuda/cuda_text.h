/* CUDA twins of the conditioner ops (backend_text.h; CPU twins in cpu/cpu_text.c), same arguments;
 * float pointers are device memory, `rows` of cuda_rows_add is host memory (as the CPU twin's). */
#ifndef H3_CUDA_TEXT_H
#define H3_CUDA_TEXT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "../backend.h"

void cuda_rmsnorm_qwen(h3_backend *be, float *y, const float *x, int64_t rows, int64_t dim, const float *w, float eps,
                       int flags);
void cuda_rows_add(h3_backend *be, float *x, const int64_t *rows, const float *src, int64_t n, int64_t dim, int flags);
void cuda_attention_eager_bf16(h3_backend *be, float *out, int64_t o_stride, const float *q, int64_t q_stride,
                               const float *k, int64_t k_stride, const float *v, int64_t v_stride, int64_t Sq,
                               int64_t Skv, int Hq, int Hkv, int D, float scale, int causal);

#ifdef __cplusplus
}
#endif

#endif
