/* CUDA twins of the fused-quantization ops (backend_fusedq.h): cuda_bf16.cu (the DiT norms, SwiGLU) and
 * cuda_vae.cu (the decoder norm). Same arguments as h3_<op>. */
#ifndef H3_CUDA_FUSEDQ_H
#define H3_CUDA_FUSEDQ_H

#ifdef __cplusplus
extern "C" {
#endif
#include "../backend_fusedq.h"

void cuda_bf16_rmsnorm_modulate_q(h3_backend *be, h3_bf16 *y, const h3_bf16 *x, int64_t rows, int64_t dim,
                                  const float *w, float eps, const float *table, int64_t table_stride,
                                  const int32_t *row_index, int64_t shift_off, int64_t scale_off, const h3_rowq *q);
void cuda_bf16_gated_residual_rmsnorm_modulate_q(h3_backend *be, h3_bf16 *x, const h3_bf16 *branch, h3_bf16 *y,
                                                 int64_t rows, int64_t dim, const float *gate_table,
                                                 int64_t gate_stride, const int32_t *gate_index, int64_t gate_off,
                                                 const float *w, float eps, const float *table, int64_t table_stride,
                                                 const int32_t *row_index, int64_t shift_off, int64_t scale_off,
                                                 const h3_rowq *q);
void cuda_bf16_swiglu_q(h3_backend *be, h3_bf16 *y, const h3_bf16 *z, int64_t rows, int64_t ff, int64_t ldz,
                        int64_t val_off, int64_t gate_off, const h3_rowq *q);
void cuda_vae_residual_rmsnorm_q(h3_backend *be, float *x, h3_bf16 *y, const h3_bf16 *branch, const float *scale,
                                 int64_t rows, int64_t dim, const float *w, float eps, const h3_rowq *q);

#ifdef __cplusplus
}
#endif

#endif
