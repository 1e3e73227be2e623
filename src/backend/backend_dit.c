/* Dispatch of the DiT ops (backend_dit.h) to the CPU twin (cpu/cpu_dit.c) or CUDA. */
#include "backend_dit.h"

#include "cpu/cpu_dit.h"
#ifdef H3_CUDA
#include "cuda/cuda_dit.h"
#define DIT_DISPATCH(be, op, ...)                                      \
    do {                                                               \
        if ((be)->kind == H3_BACKEND_CUDA) cuda_##op(__VA_ARGS__);     \
        else cpu_##op(__VA_ARGS__);                                    \
    } while (0)
#else
#define DIT_DISPATCH(be, op, ...) cpu_##op(__VA_ARGS__)
#endif

void h3_adaln_modulate(h3_backend *be, float *y, const float *x, int64_t rows, int64_t dim, const float *table,
                       int64_t table_stride, const int32_t *row_index, int64_t shift_off, int64_t scale_off,
                       int flags) {
    DIT_DISPATCH(be, adaln_modulate, be, y, x, rows, dim, table, table_stride, row_index, shift_off, scale_off,
                 flags);
}

void h3_gated_residual(h3_backend *be, float *x, const float *branch, int64_t rows, int64_t dim,
                       const float *table, int64_t table_stride, const int32_t *row_index, int64_t gate_off,
                       int flags) {
    DIT_DISPATCH(be, gated_residual, be, x, branch, rows, dim, table, table_stride, row_index, gate_off, flags);
}

void h3_swiglu(h3_backend *be, float *y, const float *value, const float *gate, int64_t n, int flags) {
    DIT_DISPATCH(be, swiglu, be, y, value, gate, n, flags);
}

void h3_rows_gather(h3_backend *be, float *dst, const float *src, const int32_t *index, int64_t n, int64_t dim) {
    DIT_DISPATCH(be, rows_gather, be, dst, src, index, n, dim);
}

void h3_rows_scatter(h3_backend *be, float *dst, const float *src, const int32_t *index, int64_t n, int64_t dim,
                     int flags) {
    DIT_DISPATCH(be, rows_scatter, be, dst, src, index, n, dim, flags);
}

void h3_qkv_deinterleave(h3_backend *be, float *q, float *k, float *v, const float *fused, int64_t rows, int heads,
                         int head_dim) {
    DIT_DISPATCH(be, qkv_deinterleave, be, q, k, v, fused, rows, heads, head_dim);
}

void h3_matmul_rows(h3_backend *be, float *y, const float *x, int64_t M, const h3_tensor *w, int64_t N,
                    int64_t block_rows, int64_t block_stride, int64_t block_offset, int flags) {
    DIT_DISPATCH(be, matmul_rows, be, y, x, M, w, N, block_rows, block_stride, block_offset, flags);
}
