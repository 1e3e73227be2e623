/* CPU twins of the bf16 activation ops (backend_bf16.h). Same arguments as h3_bf16_<op>. */
#ifndef H3_CPU_BF16_H
#define H3_CPU_BF16_H

#include "../backend_bf16.h"

void cpu_bf16_pack(h3_backend *be, h3_bf16 *y, const float *x, int64_t n);
void cpu_bf16_unpack(h3_backend *be, float *y, const h3_bf16 *x, int64_t n);
void cpu_bf16_matmul(h3_backend *be, h3_bf16 *y, int64_t ldy, const h3_bf16 *x, int64_t ldx, int64_t M,
                     const h3_tensor *w, const h3_tensor *bias);
void cpu_bf16_rmsnorm_modulate(h3_backend *be, h3_bf16 *y, const h3_bf16 *x, int64_t rows, int64_t dim, const float *w,
                               float eps, const float *table, int64_t table_stride, const int32_t *row_index,
                               int64_t shift_off, int64_t scale_off);
void cpu_bf16_head_norm_rope(h3_backend *be, h3_bf16 *x, int64_t rows, int64_t row_stride, int heads,
                             int64_t head_stride, int head_dim, const float *w, float eps, int rot_dim,
                             const float *cos, const float *sin);
void cpu_bf16_attention(h3_backend *be, h3_bf16 *out, int64_t o_rs, const h3_bf16 *q, int64_t q_rs, int64_t q_hs,
                        const h3_bf16 *k, int64_t k_rs, int64_t k_hs, const h3_bf16 *v, int64_t v_rs, int64_t v_hs,
                        int64_t Sq, int64_t Skv, int Hq, int Hkv, int D, float scale);
void cpu_bf16_gated_residual(h3_backend *be, h3_bf16 *x, const h3_bf16 *branch, int64_t rows, int64_t dim,
                             const float *table, int64_t table_stride, const int32_t *row_index, int64_t gate_off);
void cpu_bf16_gated_residual_rmsnorm_modulate(h3_backend *be, h3_bf16 *x, const h3_bf16 *branch, h3_bf16 *y,
                                              int64_t rows, int64_t dim, const float *gate_table, int64_t gate_stride,
                                              const int32_t *gate_index, int64_t gate_off, const float *w, float eps,
                                              const float *table, int64_t table_stride, const int32_t *row_index,
                                              int64_t shift_off, int64_t scale_off);
void cpu_bf16_swiglu(h3_backend *be, h3_bf16 *y, const h3_bf16 *z, int64_t rows, int64_t ff, int64_t ldz,
                     int64_t val_off, int64_t gate_off);
void cpu_bf16_rows_scatter(h3_backend *be, h3_bf16 *dst, const h3_bf16 *src, const int32_t *index, int64_t n,
                           int64_t dim);
void cpu_bf16_rows_scatter_f32(h3_backend *be, h3_bf16 *dst, const float *src, const int32_t *index, int64_t n,
                               int64_t dim);
void cpu_bf16_rows_pool_pairs(h3_backend *be, h3_bf16 *y, const h3_bf16 *x, const int32_t *pairs, int64_t rows,
                              int64_t dim);
void cpu_bf16_rows_expand_delta(h3_backend *be, h3_bf16 *x, const h3_bf16 *reduced, const h3_bf16 *base,
                                const int32_t *parent, int64_t rows, int64_t prefix, int64_t dim, float scale);
void cpu_bf16_rows_gather_f32(h3_backend *be, float *dst, const h3_bf16 *src, const int32_t *index, int64_t n,
                              int64_t dim);

#endif
