/* Fused activation quantization (docs/fast.md "Fused quantization"): producer ops of the bf16 path that also write
 * their output rows' 8-bit codes and scales for the W8A8 GEMM that reads them (`--quant fp8` / `--quant int8`,
 * `--vae-quant fp8`), so the GEMM's input needs no quantization pass of its own.
 *
 * Each op is exactly its unfused composition: the producer op of backend_bf16.h / backend_vae.h (its bf16 output
 * y, always written), then h3_fp8_quant_rows(q, scale, y, rows, dim, dim) or h3_int8_quant_rows(q, scale, y, rows,
 * dim, dim, group) on that y. The codes are of the rounded bf16 values, as in the two passes, so the fast modes'
 * outputs do not change. The CPU twins (cpu/cpu_fusedq.c) call the two CPU twins in turn; the CUDA twins quantize
 * in the producer kernel's own block (tests/backend_ops/ops_fusedq.h checks both against the two ops, tolerance 0). */
#ifndef H3_BACKEND_FUSEDQ_H
#define H3_BACKEND_FUSEDQ_H

#include <stdint.h>

#include "backend_bf16.h"

enum { H3_ROWQ_FP8 = 1, H3_ROWQ_INT8 = 2 };

/* Where the codes go: q [rows][dim] contiguous (E4M3 or int8), scale [rows] or, for int8 with group > 0,
 * [rows][dim / group] (dim a multiple of group). */
typedef struct h3_rowq {
    int      kind; /* H3_ROWQ_FP8 or H3_ROWQ_INT8 */
    void    *q;
    float   *scale;
    int64_t  group; /* int8 only; 0: one scale per row */
} h3_rowq;

/* h3_bf16_rmsnorm_modulate, then the rows of y quantized into *q. */
void h3_bf16_rmsnorm_modulate_q(h3_backend *be, h3_bf16 *y, const h3_bf16 *x, int64_t rows, int64_t dim,
                                const float *w, float eps, const float *table, int64_t table_stride,
                                const int32_t *row_index, int64_t shift_off, int64_t scale_off, const h3_rowq *q);

/* h3_bf16_gated_residual_rmsnorm_modulate, then the rows of y quantized into *q. */
void h3_bf16_gated_residual_rmsnorm_modulate_q(h3_backend *be, h3_bf16 *x, const h3_bf16 *branch, h3_bf16 *y,
                                               int64_t rows, int64_t dim, const float *gate_table, int64_t gate_stride,
                                               const int32_t *gate_index, int64_t gate_off, const float *w, float eps,
                                               const float *table, int64_t table_stride, const int32_t *row_index,
                                               int64_t shift_off, int64_t scale_off, const h3_rowq *q);

/* h3_bf16_swiglu, then the rows of y (rows x ff) quantized into *q. */
void h3_bf16_swiglu_q(h3_backend *be, h3_bf16 *y, const h3_bf16 *z, int64_t rows, int64_t ff, int64_t ldz,
                      int64_t val_off, int64_t gate_off, const h3_rowq *q);

/* h3_vae_residual_rmsnorm (backend_vae.h) with y != NULL, then the rows of y quantized into *q. */
void h3_vae_residual_rmsnorm_q(h3_backend *be, float *x, h3_bf16 *y, const h3_bf16 *branch, const float *scale,
                               int64_t rows, int64_t dim, const float *w, float eps, const h3_rowq *q);

#endif
