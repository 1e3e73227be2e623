/* Row-major fp32 GEMMs with free leading dimensions, transposes and strided batches (cuBLASLt,
 * CUBLAS_COMPUTE_32F: the exact fp32 path, no TF32). Used by the convolution and eager-attention
 * twins (cuda_audio.cu, cuda_conv.cu, cuda_text.cu), whose operands are column slices of wider
 * buffers (im2col tiles, per-head columns of q/k/v rows). */
#ifndef H3_CUDA_GEMM_RM_H
#define H3_CUDA_GEMM_RM_H

#include "cuda_internal.h"

/* C[M,N] = op(A)[M,K] . op(B)[K,N] (beta 0), all row-major fp32 device buffers:
 *   op(A) = A [M][lda] when !ta, A^T with A stored [K][lda] when ta; likewise B ([K][ldb] or [N][ldb]);
 *   C [M][ldc]. batch >= 1 problems, operand i at base + i * stride (elements). Errors are recorded
 *   on the backend (cuda_backend_check). */
extern "C" void cuda_sgemm_rm(h3_backend *be, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                   const float *B, int64_t ldb, float *C, int64_t ldc, int batch, int64_t sa, int64_t sb, int64_t sc);

#endif
