/* CPU twins of the DiT ops (backend_dit.h). Same arguments as h3_<op>. */
#ifndef H3_CPU_DIT_H
#define H3_CPU_DIT_H

#include "../backend_dit.h"

void cpu_adaln_modulate(h3_backend *be, float *y, const float *x, int64_t rows, int64_t dim, const float *table,
                        int64_t table_stride, const int32_t *row_index, int64_t shift_off, int64_t scale_off,
                        int flags);
void cpu_gated_residual(h3_backend *be, float *x, const float *branch, int64_t rows, int64_t dim,
                        const float *table, int64_t table_stride, const int32_t *row_index, int64_t gate_off,
                        int flags);
void cpu_swiglu(h3_backend *be, float *y, const float *value, const float *gate, int64_t n, int flags);
void cpu_rows_gather(h3_backend *be, float *dst, const float *src, const int32_t *index, int64_t n, int64_t dim);
void cpu_rows_scatter(h3_backend *be, float *dst, const float *src, const int32_t *index, int64_t n, int64_t dim,
                      int flags);
void cpu_qkv_deinterleave(h3_backend *be, float *q, float *k, float *v, const float *fused, int64_t rows,
                          int heads, int head_dim);

void cpu_matmul_rows(h3_backend *be, float *y, const float *x, int64_t M, const h3_tensor *w, int64_t N,
                     int64_t block_rows, int64_t block_stride, int64_t block_offset, int flags);

#endif
