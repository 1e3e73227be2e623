/* CUDA twins of the FP8 W8A8 ops (backend_fp8.h), cuda/cuda_w8a8.cu. Same arguments. */
#ifndef H3_CUDA_W8A8_H
#define H3_CUDA_W8A8_H

#ifdef __cplusplus
extern "C" {
#endif
#include "../backend_fp8.h"

void cuda_fp8_quant_rows(h3_backend *be, uint8_t *q, float *scale, const h3_bf16 *x, int64_t rows, int64_t dim,
                         int64_t ldx);
void cuda_fp8_matmul(h3_backend *be, h3_bf16 *y, int64_t ldy, const uint8_t *xq, const float *xs, int64_t M,
                     const h3_fp8_linear *w);

#ifdef __cplusplus
}
#endif
#endif
