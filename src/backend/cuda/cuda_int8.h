/* The own sm_90a INT8 GEMM (cuda/cuda_int8_sm90.cu) behind cuda_int8_matmul (the table's twins are declared in
 * cuda_ops.h). */
#ifndef H3_CUDA_INT8_H
#define H3_CUDA_INT8_H

#ifdef __cplusplus
extern "C" {
#endif
#include "../ops.h"

/* cuda_int8_sm90.cu: the per-token matmul as one wgmma kernel with the dequantization in its epilogue (the same
 * bits); 0 when it ran, -1 (nothing launched) when the device (sm_90 only), shape (K % 128, N % 8) or alignment
 * does not suit it. */
int  cuda_int8_matmul_sm90(h3_backend *be, h3_bf16 *y, int64_t ldy, const int8_t *xq, const float *xs, int64_t M,
                           const h3_int8_linear *w, const h3_bf16 *bias);

#ifdef __cplusplus
}
#endif
#endif
