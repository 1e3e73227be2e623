/* The activation-dtype ops of ops_act.h: each a switch between an h3_bf16_* op and the fp32-buffer ops it stands for. */
#include "ops_act.h"

#include "ops.h"

void h3_act_rmsnorm_modulate(h3_backend *be, h3_dtype act, void *y, const void *x, int64_t rows, int64_t dim,
                             const float *w, float eps, const float *table, int64_t table_stride,
                             const int32_t *row_index, int64_t shift_off, int64_t scale_off, const h3_rowq *q) {
    if (act == H3_BF16 && q) {
        h3_bf16_rmsnorm_modulate_q(be, y, x, rows, dim, w, eps, table, table_stride, row_index, shift_off, scale_off, q);
    } else if (act == H3_BF16) {
        h3_bf16_rmsnorm_modulate(be, y, x, rows, dim, w, eps, table, table_stride, row_index, shift_off, scale_off);
    } else {
        h3_rmsnorm(be, y, x, rows, dim, w, eps, 0);
        if (table) h3_adaln_modulate(be, y, y, rows, dim, table, table_stride, row_index, shift_off, scale_off, 0);
    }
}

void h3_act_gated_residual(h3_backend *be, h3_dtype act, void *x, const void *branch, int64_t rows, int64_t dim,
                           const float *gate_table, int64_t gate_stride, const int32_t *gate_index, int64_t gate_off) {
    if (act == H3_BF16)
        h3_bf16_gated_residual(be, x, branch, rows, dim, gate_table, gate_stride, gate_index, gate_off);
    else if (gate_table)
        h3_gated_residual(be, x, branch, rows, dim, gate_table, gate_stride, gate_index, gate_off, 0);
    else
        h3_add(be, x, x, branch, rows * dim, 0);
}

void h3_act_gated_residual_rmsnorm_modulate(h3_backend *be, h3_dtype act, void *x, const void *branch, void *y,
                                            int64_t rows, int64_t dim, const float *gate_table, int64_t gate_stride,
                                            const int32_t *gate_index, int64_t gate_off, const float *w, float eps,
                                            const float *table, int64_t table_stride, const int32_t *row_index,
                                            int64_t shift_off, int64_t scale_off, const h3_rowq *q) {
    if (act == H3_BF16 && q) {
        h3_bf16_gated_residual_rmsnorm_modulate_q(be, x, branch, y, rows, dim, gate_table, gate_stride, gate_index,
                                                  gate_off, w, eps, table, table_stride, row_index, shift_off,
                                                  scale_off, q);
    } else if (act == H3_BF16) {
        h3_bf16_gated_residual_rmsnorm_modulate(be, x, branch, y, rows, dim, gate_table, gate_stride, gate_index,
                                                gate_off, w, eps, table, table_stride, row_index, shift_off, scale_off);
    } else {
        h3_act_gated_residual(be, act, x, branch, rows, dim, gate_table, gate_stride, gate_index, gate_off);
        h3_act_rmsnorm_modulate(be, act, y, x, rows, dim, w, eps, table, table_stride, row_index, shift_off, scale_off,
                                NULL);
    }
}

void h3_act_qk_norm_rope(h3_backend *be, h3_dtype act, void *q, void *k, int64_t rows, int64_t row_stride, int heads,
                         int64_t head_stride, int head_dim, const float *wq, const float *wk, float eps, int rot_dim,
                         const float *cos, const float *sin) {
    if (act == H3_BF16) {
        h3_bf16_head_norm_rope(be, q, rows, row_stride, heads, head_stride, head_dim, wq, eps, rot_dim, cos, sin);
        h3_bf16_head_norm_rope(be, k, rows, row_stride, heads, head_stride, head_dim, wk, eps, rot_dim, cos, sin);
        return;
    }
    /* one 128-wide gain shared by all heads: the heads are rows of the norm */
    h3_rmsnorm(be, q, q, rows * heads, head_dim, wq, eps, 0);
    h3_rmsnorm(be, k, k, rows * heads, head_dim, wk, eps, 0);
    if (cos) {
        h3_rope_half(be, q, rows, row_stride, heads, head_dim, rot_dim, cos, sin, 0);
        h3_rope_half(be, k, rows, row_stride, heads, head_dim, rot_dim, cos, sin, 0);
    }
}

void h3_act_attention(h3_backend *be, h3_dtype act, void *out, int64_t o_rs, const void *q, const void *k,
                      const void *v, int64_t rs, int64_t head_stride, int64_t S, int heads, int D, float scale) {
    if (act == H3_BF16)
        h3_bf16_attention(be, out, o_rs, q, rs, head_stride, k, rs, head_stride, v, rs, head_stride, S, S, heads, heads,
                          D, scale);
    else
        h3_attention(be, out, o_rs, q, rs, k, rs, v, rs, S, S, heads, heads, D, scale, 0, 0);
}

void h3_act_matmul(h3_backend *be, h3_dtype act, void *y, int64_t ldy, const void *x, int64_t ldx, int64_t M,
                   const h3_tensor *w, const h3_tensor *bias) {
    if (act == H3_BF16) h3_bf16_matmul(be, y, ldy, x, ldx, M, w, bias);
    else h3_matmul(be, y, x, M, w, bias, 0);
}

void h3_act_rows_scatter(h3_backend *be, h3_dtype act, void *dst, const void *src, const int32_t *index, int64_t n,
                         int64_t dim) {
    if (act == H3_BF16) h3_bf16_rows_scatter(be, dst, src, index, n, dim);
    else h3_rows_scatter(be, dst, src, index, n, dim, 0);
}

void h3_act_rows_scatter_f32(h3_backend *be, h3_dtype act, void *dst, const float *src, const int32_t *index,
                             int64_t n, int64_t dim) {
    if (act == H3_BF16) h3_bf16_rows_scatter_f32(be, dst, src, index, n, dim);
    else h3_rows_scatter(be, dst, src, index, n, dim, 0);
}

void h3_act_rows_gather_f32(h3_backend *be, h3_dtype act, float *dst, const void *src, const int32_t *index, int64_t n,
                            int64_t dim) {
    if (act == H3_BF16) h3_bf16_rows_gather_f32(be, dst, src, index, n, dim);
    else h3_rows_gather(be, dst, src, index, n, dim);
}

void h3_act_to_f32(h3_backend *be, h3_dtype act, float *y, const void *x, int64_t n) {
    if (act == H3_BF16) h3_bf16_unpack(be, y, x, n);
    else h3_copy(be, y, x, (size_t)n * sizeof(float));
}
