/* DiT-specific ops (docs/model/dit.md sections 4.5-4.9): AdaLN modulation and gated residuals
 * addressed per row through a (timestep, modality) table, SwiGLU, row gather/scatter and the
 * per-head QKV de-interleave of the original checkpoint layout.
 *
 * Tables: `table` holds table rows of `table_stride` floats; packed row r reads table row
 * row_index[r]. All pointers are backend memory (row_index included). With H3_BF16_OUT every
 * PyTorch op of the reference rounds to bf16, in the order the formulas below give. */
#ifndef H3_BACKEND_DIT_H
#define H3_BACKEND_DIT_H

#include <stdint.h>

#include "backend.h"

/* y[r,c] = (x[r,c] * (1 + scale[c])) + shift[c] with scale = table[row_index[r]*stride + scale_off + c],
 * shift likewise at shift_off. bf16: [bf16]([bf16](x * [bf16](1 + scale)) + shift) (docs/model/dit.md 4.6 step 2).
 * y may alias x. */
void h3_adaln_modulate(h3_backend *be, float *y, const float *x, int64_t rows, int64_t dim, const float *table,
                       int64_t table_stride, const int32_t *row_index, int64_t shift_off, int64_t scale_off,
                       int flags);

/* x[r,c] = x[r,c] + gate[c] * branch[r,c], gate = table[row_index[r]*stride + gate_off + c].
 * bf16: [bf16](x + [bf16](gate * branch)) (docs/model/dit.md 4.6 step 4). */
void h3_gated_residual(h3_backend *be, float *x, const float *branch, int64_t rows, int64_t dim,
                       const float *table, int64_t table_stride, const int32_t *row_index, int64_t gate_off,
                       int flags);

/* y[i] = value[i] * silu(gate[i]); bf16: [bf16](value * [bf16](silu(gate))) (docs/model/dit.md 4.8). y may alias. */
void h3_swiglu(h3_backend *be, float *y, const float *value, const float *gate, int64_t n, int flags);

/* dst[i, :] = src[index[i], :] for i < n (rows of dim floats). */
void h3_rows_gather(h3_backend *be, float *dst, const float *src, const int32_t *index, int64_t n, int64_t dim);
/* dst[index[i], :] = src[i, :] (rounded to bf16 with H3_BF16_OUT: the reference's dtype cast). */
void h3_rows_scatter(h3_backend *be, float *dst, const float *src, const int32_t *index, int64_t n, int64_t dim,
                     int flags);

/* fused: rows x (heads*3*head_dim), per head [q | k | v] (original qkv_proj layout, docs/model/dit.md 2.4);
 * q/k/v: rows x (heads*head_dim). */
void h3_qkv_deinterleave(h3_backend *be, float *q, float *k, float *v, const float *fused, int64_t rows, int heads,
                         int head_dim);

/* y[M,N] = x[M,K] . W'^T where W' row n is row (n / block_rows) * block_stride + block_offset +
 * n % block_rows of w (w: [rows, K], F32/BF16/F16). Reads q, k or v straight out of the original
 * layout's per-head interleaved qkv_proj (block_rows = head_dim, block_stride = 3 * head_dim,
 * block_offset = 0 / head_dim / 2 * head_dim) and plain weights (block_rows = N, offset 0) through
 * the same tiles, so both checkpoint layouts give bit-identical results. No bias. */
void h3_matmul_rows(h3_backend *be, float *y, const float *x, int64_t M, const h3_tensor *w, int64_t N,
                    int64_t block_rows, int64_t block_stride, int64_t block_offset, int flags);

#endif
