/* Activation-dtype ops: one call for the DiT's fp32 mode (activations as fp32 buffers) and its bf16 mode (h3_bf16
 * buffers, ops.h), picked by `act` (H3_F32 or H3_BF16). Each forwards to the existing op table, never computes:
 *   H3_BF16: the h3_bf16_* op (its _q form when `q` is given: docs/fast.md "Fused quantization");
 *   H3_F32:  the fp32-buffer ops without H3_BF16_OUT, in the unfused order the fused bf16 op stands for
 *            (docs/model/dit.md 4.3, 4.6-4.9); fp32 activations have no quantized linears, so q must be NULL.
 * The fp32 forms take contiguous rows where the comment says so (the strides the fp32 DiT uses). */
#ifndef H3_OPS_ACT_H
#define H3_OPS_ACT_H

#include <stdint.h>

#include "backend.h"

/* y = rmsnorm(x; w) then, with table != NULL, the AdaLN modulation (shift_off / scale_off of row row_index[r]).
 * F32: h3_rmsnorm, h3_adaln_modulate(y, y); BF16: h3_bf16_rmsnorm_modulate(_q). y may alias x. */
void h3_act_rmsnorm_modulate(h3_backend *be, h3_dtype act, void *y, const void *x, int64_t rows, int64_t dim,
                             const float *w, float eps, const float *table, int64_t table_stride,
                             const int32_t *row_index, int64_t shift_off, int64_t scale_off, const h3_rowq *q);

/* x += gate * branch (gate from the table at gate_off), table == NULL: x += branch.
 * F32: h3_gated_residual, or h3_add without a table; BF16: h3_bf16_gated_residual. */
void h3_act_gated_residual(h3_backend *be, h3_dtype act, void *x, const void *branch, int64_t rows, int64_t dim,
                           const float *gate_table, int64_t gate_stride, const int32_t *gate_index, int64_t gate_off);

/* h3_act_gated_residual then h3_act_rmsnorm_modulate(y, x) (y may alias x). BF16: the fused op (one pass). */
void h3_act_gated_residual_rmsnorm_modulate(h3_backend *be, h3_dtype act, void *x, const void *branch, void *y,
                                            int64_t rows, int64_t dim, const float *gate_table, int64_t gate_stride,
                                            const int32_t *gate_index, int64_t gate_off, const float *w, float eps,
                                            const float *table, int64_t table_stride, const int32_t *row_index,
                                            int64_t shift_off, int64_t scale_off, const h3_rowq *q);

/* The attention's q and k heads in place (docs/model/dit.md 4.7 step 3): per-head RMSNorm (gains wq / wk), then with
 * cos != NULL the rotate-half RoPE on rot_dim channels. BF16: h3_bf16_head_norm_rope on q, then on k (any strides);
 * F32: h3_rmsnorm of q, of k, then h3_rope_half of q, of k (heads contiguous: head_stride == head_dim). */
void h3_act_qk_norm_rope(h3_backend *be, h3_dtype act, void *q, void *k, int64_t rows, int64_t row_stride, int heads,
                         int64_t head_stride, int head_dim, const float *wq, const float *wk, float eps, int rot_dim,
                         const float *cos, const float *sin);

/* Self-attention, not causal, on strided heads (as h3_bf16_attention). F32: h3_attention (head_stride == D, the same
 * row stride for q, k and v). */
void h3_act_attention(h3_backend *be, h3_dtype act, void *out, int64_t o_rs, const void *q, const void *k,
                      const void *v, int64_t rs, int64_t head_stride, int64_t S, int heads, int D, float scale);

/* y = x W^T + bias. BF16: h3_bf16_matmul (row strides ldy, ldx); F32: h3_matmul (contiguous: ldy = N, ldx = K). */
void h3_act_matmul(h3_backend *be, h3_dtype act, void *y, int64_t ldy, const void *x, int64_t ldx, int64_t M,
                   const h3_tensor *w, const h3_tensor *bias);

/* Row moves between activation buffers and fp32 rows (index in backend memory):
 * scatter dst[index[i]] = src[i] (activation rows); scatter_f32 the same from fp32 rows (rounded in BF16);
 * gather_f32 dst[i] = widen(src[index[i]]). F32: h3_rows_scatter / h3_rows_gather. */
void h3_act_rows_scatter(h3_backend *be, h3_dtype act, void *dst, const void *src, const int32_t *index, int64_t n,
                         int64_t dim);
void h3_act_rows_scatter_f32(h3_backend *be, h3_dtype act, void *dst, const float *src, const int32_t *index,
                             int64_t n, int64_t dim);
void h3_act_rows_gather_f32(h3_backend *be, h3_dtype act, float *dst, const void *src, const int32_t *index, int64_t n,
                            int64_t dim);

/* y = widen(x), n elements (exact). F32: h3_copy; BF16: h3_bf16_unpack. */
void h3_act_to_f32(h3_backend *be, h3_dtype act, float *y, const void *x, int64_t n);

#endif
