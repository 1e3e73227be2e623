/* CPU twins of the fused-quantization ops (ops.h): the producer's CPU twin, then the quantizer's, on
 * the rows it wrote; so each is its unfused composition by construction. */
#include "cpu_ops.h"


static void quant(h3_backend *be, const h3_bf16 *y, int64_t rows, int64_t dim, const h3_rowq *q) {
    if (q->kind == H3_ROWQ_INT8) cpu_int8_quant_rows(be, (int8_t *)q->q, q->scale, y, rows, dim, dim, q->group);
    else cpu_fp8_quant_rows(be, (uint8_t *)q->q, q->scale, y, rows, dim, dim);
}

void cpu_bf16_rmsnorm_modulate_q(h3_backend *be, h3_bf16 *y, const h3_bf16 *x, int64_t rows, int64_t dim,
                                 const float *w, float eps, const float *table, int64_t table_stride,
                                 const int32_t *row_index, int64_t shift_off, int64_t scale_off, const h3_rowq *q) {
    if (!h3_rowq_ok(be, "h3_bf16_rmsnorm_modulate_q", q, dim)) return;
    cpu_bf16_rmsnorm_modulate(be, y, x, rows, dim, w, eps, table, table_stride, row_index, shift_off, scale_off);
    quant(be, y, rows, dim, q);
}

void cpu_bf16_gated_residual_rmsnorm_modulate_q(h3_backend *be, h3_bf16 *x, const h3_bf16 *branch, h3_bf16 *y,
                                                int64_t rows, int64_t dim, const float *gate_table,
                                                int64_t gate_stride, const int32_t *gate_index, int64_t gate_off,
                                                const float *w, float eps, const float *table, int64_t table_stride,
                                                const int32_t *row_index, int64_t shift_off, int64_t scale_off,
                                                const h3_rowq *q) {
    if (!h3_rowq_ok(be, "h3_bf16_gated_residual_rmsnorm_modulate_q", q, dim)) return;
    cpu_bf16_gated_residual_rmsnorm_modulate(be, x, branch, y, rows, dim, gate_table, gate_stride, gate_index, gate_off,
                                             w, eps, table, table_stride, row_index, shift_off, scale_off);
    quant(be, y, rows, dim, q);
}

void cpu_bf16_swiglu_q(h3_backend *be, h3_bf16 *y, const h3_bf16 *z, int64_t rows, int64_t ff, int64_t ldz,
                       int64_t val_off, int64_t gate_off, const h3_rowq *q) {
    if (!h3_rowq_ok(be, "h3_bf16_swiglu_q", q, ff)) return;
    cpu_bf16_swiglu(be, y, z, rows, ff, ldz, val_off, gate_off);
    quant(be, y, rows, ff, q);
}

void cpu_vae_residual_rmsnorm_q(h3_backend *be, float *x, h3_bf16 *y, const h3_bf16 *branch, const float *scale,
                                int64_t rows, int64_t dim, const float *w, float eps, const h3_rowq *q) {
    if (!y) {
        h3_backend_unsupported(be, "h3_vae_residual_rmsnorm_q", "y is NULL (the quantized rows are y's)");
        return;
    }
    if (!h3_rowq_ok(be, "h3_vae_residual_rmsnorm_q", q, dim)) return;
    cpu_vae_residual_rmsnorm(be, x, y, branch, scale, rows, dim, w, eps);
    quant(be, y, rows, dim, q);
}
