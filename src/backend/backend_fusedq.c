/* Dispatch of the fused-quantization ops (backend_fusedq.h) to the CPU twins (cpu/cpu_fusedq.c) or CUDA
 * (cuda/cuda_bf16.cu, cuda/cuda_vae.cu). A bad h3_rowq (no codes, an unknown kind, a group that does not divide
 * the row) is recorded as the backend's error, as the other ops' bad arguments. */
#include "backend_fusedq.h"

#include "cpu/cpu_fusedq.h"
#ifdef H3_CUDA
#include "cuda/cuda_fusedq.h"
#endif
#include "backend_timed.h"

static int rowq_ok(h3_backend *be, const char *op, const h3_rowq *q, int64_t dim) {
    int ok = q && q->q && q->scale && (q->kind == H3_ROWQ_FP8 || q->kind == H3_ROWQ_INT8) &&
             (q->kind == H3_ROWQ_INT8 || q->group == 0) && q->group >= 0 && (q->group == 0 || dim % q->group == 0);
    if (!ok) h3_backend_unsupported(be, op, "bad h3_rowq (codes, scales, kind, or a group that does not divide the row)");
    return ok;
}

void h3_bf16_rmsnorm_modulate_q(h3_backend *be, h3_bf16 *y, const h3_bf16 *x, int64_t rows, int64_t dim,
                                const float *w, float eps, const float *table, int64_t table_stride,
                                const int32_t *row_index, int64_t shift_off, int64_t scale_off, const h3_rowq *q) {
    if (!rowq_ok(be, "h3_bf16_rmsnorm_modulate_q", q, dim)) return;
    TIMED_DISPATCH(be, bf16_rmsnorm_modulate_q, be, y, x, rows, dim, w, eps, table, table_stride, row_index, shift_off,
                   scale_off, q);
}

void h3_bf16_gated_residual_rmsnorm_modulate_q(h3_backend *be, h3_bf16 *x, const h3_bf16 *branch, h3_bf16 *y,
                                               int64_t rows, int64_t dim, const float *gate_table, int64_t gate_stride,
                                               const int32_t *gate_index, int64_t gate_off, const float *w, float eps,
                                               const float *table, int64_t table_stride, const int32_t *row_index,
                                               int64_t shift_off, int64_t scale_off, const h3_rowq *q) {
    if (!rowq_ok(be, "h3_bf16_gated_residual_rmsnorm_modulate_q", q, dim)) return;
    TIMED_DISPATCH(be, bf16_gated_residual_rmsnorm_modulate_q, be, x, branch, y, rows, dim, gate_table, gate_stride,
                   gate_index, gate_off, w, eps, table, table_stride, row_index, shift_off, scale_off, q);
}

void h3_bf16_swiglu_q(h3_backend *be, h3_bf16 *y, const h3_bf16 *z, int64_t rows, int64_t ff, int64_t ldz,
                      int64_t val_off, int64_t gate_off, const h3_rowq *q) {
    if (!rowq_ok(be, "h3_bf16_swiglu_q", q, ff)) return;
    TIMED_DISPATCH(be, bf16_swiglu_q, be, y, z, rows, ff, ldz, val_off, gate_off, q);
}

void h3_vae_residual_rmsnorm_q(h3_backend *be, float *x, h3_bf16 *y, const h3_bf16 *branch, const float *scale,
                               int64_t rows, int64_t dim, const float *w, float eps, const h3_rowq *q) {
    if (!y) {
        h3_backend_unsupported(be, "h3_vae_residual_rmsnorm_q", "y is NULL (the quantized rows are y's)");
        return;
    }
    if (!rowq_ok(be, "h3_vae_residual_rmsnorm_q", q, dim)) return;
    TIMED_DISPATCH(be, vae_residual_rmsnorm_q, be, x, y, branch, scale, rows, dim, w, eps, q);
}
