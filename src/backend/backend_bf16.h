/* bf16 activation ops: the fast path of the bf16 reference mode.
 *
 * In the bf16 mode of the reference every activation is a bf16 tensor (docs/model/dit.md 4), so storing
 * activations as bf16 in backend memory changes no result: it halves the bytes of every element-wise
 * op and lets GEMMs and attention read their operands as they are (no fp32 <-> bf16 conversion
 * passes). Buffers are `h3_bf16` (the upper 16 bits of an IEEE fp32, RNE) in backend memory; tables
 * (AdaLN rows, norm gains, rotary cos/sin) stay fp32 as in backend.h.
 *
 * Each op's numerics are the bf16-mode (H3_BF16_OUT) numerics of the fp32-buffer ops it replaces:
 * compute in fp32, round once per PyTorch op in the order given. The CPU twins (cpu/cpu_bf16.c) widen,
 * call the same fp32 code as backend.h's ops and round, so on the CPU the two paths are bit-identical;
 * the CUDA twins use tensor cores (bf16 x bf16, fp32 accumulate) and fused kernels.
 *
 * Strides are in elements. Every op accepts rows = 0. */
#ifndef H3_BACKEND_BF16_H
#define H3_BACKEND_BF16_H

#include <stdint.h>

#include "backend.h"

typedef uint16_t h3_bf16;

/* fp32 <-> bf16 buffers (n elements): pack y = bf16(x) (RNE); unpack: exact widening. */
void h3_bf16_pack(h3_backend *be, h3_bf16 *y, const float *x, int64_t n);
void h3_bf16_unpack(h3_backend *be, float *y, const h3_bf16 *x, int64_t n);

/* y[m, 0:N] (row stride ldy) = bf16( x[m, 0:K] (row stride ldx) . W[N, K]^T + bias ), fp32 accumulation,
 * the bias (F32 or BF16, or NULL) added in fp32 before the one rounding. W is BF16 ([N, K]). ldy >= N lets
 * several GEMMs write column slices of one wider buffer. */
void h3_bf16_matmul(h3_backend *be, h3_bf16 *y, int64_t ldy, const h3_bf16 *x, int64_t ldx, int64_t M,
                    const h3_tensor *w, const h3_tensor *bias);

/* RMSNorm, optionally followed by the AdaLN modulation of backend_dit.h (docs/model/dit.md 4.3, 4.6 steps 1-2):
 *   n = bf16( x * rsqrt(mean(x^2) + eps) * w )                      (w may be NULL: no gain)
 *   table != NULL: y = bf16( bf16( n * bf16(1 + scale[c]) ) + shift[c] ) with scale/shift read from
 *   table[row_index[r] * table_stride + scale_off / shift_off + c]; table == NULL: y = n.
 * x, y: rows x dim contiguous; y may alias x. */
void h3_bf16_rmsnorm_modulate(h3_backend *be, h3_bf16 *y, const h3_bf16 *x, int64_t rows, int64_t dim,
                              const float *w, float eps, const float *table, int64_t table_stride,
                              const int32_t *row_index, int64_t shift_off, int64_t scale_off);

/* In place on the heads of a strided buffer (element (r, h, d) at x[r * row_stride + h * head_stride + d]):
 * per (row, head) RMSNorm over head_dim with gain w (docs/model/dit.md 4.7 step 3), then, when cos != NULL, the
 * rotate-half RoPE of backend.h's h3_rope_half in its bf16 order on the first rot_dim channels
 * (cos/sin: rows x rot_dim fp32, rounded to bf16 at use). */
void h3_bf16_head_norm_rope(h3_backend *be, h3_bf16 *x, int64_t rows, int64_t row_stride, int heads,
                            int64_t head_stride, int head_dim, const float *w, float eps, int rot_dim,
                            const float *cos, const float *sin);

/* Scaled dot-product attention, not causal, Hq == Hkv * g (grouped-query), on strided bf16 heads
 * (q element (s, h, d) at q[s * q_rs + h * q_hs + d], likewise k, v); out[s * o_rs + h * D + d].
 * fp32 scores and softmax; the probabilities are rounded to bf16 before P.V (torch's flash/cuDNN
 * numerics; the CPU twin keeps them in fp32, so the twins differ by that rounding); output rounded once. */
void h3_bf16_attention(h3_backend *be, h3_bf16 *out, int64_t o_rs, const h3_bf16 *q, int64_t q_rs, int64_t q_hs,
                       const h3_bf16 *k, int64_t k_rs, int64_t k_hs, const h3_bf16 *v, int64_t v_rs, int64_t v_hs,
                       int64_t Sq, int64_t Skv, int Hq, int Hkv, int D, float scale);

/* x[r, c] = bf16( x[r, c] + bf16( gate[c] * branch[r, c] ) ), gate = table[row_index[r] * table_stride +
 * gate_off + c] (docs/model/dit.md 4.6 step 4); table == NULL: x = bf16(x + branch). rows x dim contiguous. */
void h3_bf16_gated_residual(h3_backend *be, h3_bf16 *x, const h3_bf16 *branch, int64_t rows, int64_t dim,
                            const float *table, int64_t table_stride, const int32_t *row_index, int64_t gate_off);

/* h3_bf16_gated_residual(x, branch, rows, dim, gate_table, gate_stride, gate_index, gate_off) followed by
 * h3_bf16_rmsnorm_modulate(y, x, rows, dim, w, eps, table, table_stride, row_index, shift_off, scale_off), in one
 * pass over the rows (a DiT residual and the norm of the sub-layer that reads it): the same bits as the two ops.
 * x is updated in place; y (rows x dim) gets the normalized rows and may alias x (x then ends normalized). */
void h3_bf16_gated_residual_rmsnorm_modulate(h3_backend *be, h3_bf16 *x, const h3_bf16 *branch, h3_bf16 *y,
                                             int64_t rows, int64_t dim, const float *gate_table, int64_t gate_stride,
                                             const int32_t *gate_index, int64_t gate_off, const float *w, float eps,
                                             const float *table, int64_t table_stride, const int32_t *row_index,
                                             int64_t shift_off, int64_t scale_off);

/* SwiGLU on a fused up-projection output z (rows x ldz): y[r, c] = bf16( val * bf16(silu(gate)) ) with
 * val = z[r * ldz + val_off + c], gate = z[r * ldz + gate_off + c], c < ff (docs/model/dit.md 4.8 step 2).
 * y: rows x ff contiguous. */
void h3_bf16_swiglu(h3_backend *be, h3_bf16 *y, const h3_bf16 *z, int64_t rows, int64_t ff, int64_t ldz,
                    int64_t val_off, int64_t gate_off);

/* Row moves. scatter: dst[index[i], :] = src[i, :]; scatter_f32 rounds fp32 rows to bf16;
 * gather_f32: dst[i, :] = widen(src[index[i], :]). index in backend memory. */
void h3_bf16_rows_scatter(h3_backend *be, h3_bf16 *dst, const h3_bf16 *src, const int32_t *index, int64_t n,
                          int64_t dim);
void h3_bf16_rows_scatter_f32(h3_backend *be, h3_bf16 *dst, const float *src, const int32_t *index, int64_t n,
                              int64_t dim);
void h3_bf16_rows_gather_f32(h3_backend *be, float *dst, const h3_bf16 *src, const int32_t *index, int64_t n,
                             int64_t dim);

/* --token-reduction (docs/model/features.md 5.5). pool: y[r] = x[a] when a == b, else bf16( (x[a] + x[b]) * 0.5 ) (fp32 sum and
 * product), with (a, b) = pairs[2r], pairs[2r + 1]. expand_delta: for r < prefix x[r] = reduced[parent[r]], else
 * x[r] = bf16( x[r] + scale * (reduced[p] - base[p]) ), p = parent[r], computed in fp32 one op at a time (difference,
 * product, sum). Rows of dim contiguous elements; pairs / parent are int32 in backend memory. */
void h3_bf16_rows_pool_pairs(h3_backend *be, h3_bf16 *y, const h3_bf16 *x, const int32_t *pairs, int64_t rows,
                             int64_t dim);
void h3_bf16_rows_expand_delta(h3_backend *be, h3_bf16 *x, const h3_bf16 *reduced, const h3_bf16 *base,
                               const int32_t *parent, int64_t rows, int64_t prefix, int64_t dim, float scale);

#endif
