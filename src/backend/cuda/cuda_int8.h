/* CUDA twins of the INT8 W8A8 ops (backend_int8.h), cuda/cuda_int8.cu. Same arguments as h3_int8_<op>. */
#ifndef H3_CUDA_INT8_H
#define H3_CUDA_INT8_H

#ifdef __cplusplus
extern "C" {
#endif
#include "../backend_int8.h"

void cuda_int8_quant_rows(h3_backend *be, int8_t *q, float *scale, const h3_bf16 *x, int64_t rows, int64_t dim,
                          int64_t ldx, int64_t group);
void cuda_int8_gemm_s32(h3_backend *be, int32_t *acc, const int8_t *xq, int64_t M, const h3_int8_linear *w, int64_t k0,
                        int64_t kn);
void cuda_int8_matmul(h3_backend *be, h3_bf16 *y, int64_t ldy, const int8_t *xq, const float *xs, int64_t M,
                      const h3_int8_linear *w, const h3_bf16 *bias);
/* cuda_int8_sm90.cu: the per-token matmul as one wgmma kernel with the dequantization in its epilogue (the same
 * bits); 0 when it ran, -1 (nothing launched) when the device (sm_90 only), shape (K % 128, N % 8) or alignment
 * does not suit it. */
int  cuda_int8_matmul_sm90(h3_backend *be, h3_bf16 *y, int64_t ldy, const int8_t *xq, const float *xs, int64_t M,
                           const h3_int8_linear *w, const h3_bf16 *bias);

#ifdef __cplusplus
}
#endif
#endif
