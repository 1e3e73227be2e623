/* Ops of the tile-batched bf16 video VAE decoder (src/model/video_vae.c, bf16 mode; docs/model/video_vae.md 7, 11, 13).
 *
 * The decoder stacks the token rows of several equally shaped tiles (each `period` rows: patch tokens, registers,
 * the zero token) into one activation of rows = tiles * period, so every linear is one large GEMM
 * (backend_bf16.h's h3_bf16_matmul) while attention stays per tile. The residual stream is fp32; the GEMM and
 * attention operands are bf16 buffers (h3_bf16). Numerics are those of the decoder's bf16 mode in the per-op
 * form (h3_rmsnorm / h3_rope_half / h3_gated_residual with fp32 arithmetic, one bf16 rounding where the mode
 * rounds), so on the CPU the batched decoder is bit-identical to the per-tile one. CPU twins: cpu/cpu_vae.c;
 * CUDA twins: cuda/cuda_vae.cu. Strides are in elements; every op accepts rows = 0. */
#ifndef H3_BACKEND_VAE_H
#define H3_BACKEND_VAE_H

#include <stddef.h>
#include <stdint.h>

#include "backend_bf16.h"

/* Residual update then RMSNorm, per row of x (rows x dim fp32, contiguous):
 *   branch != NULL: x[r, c] = x[r, c] + scale[c] * widen(branch[r, c])      (fp32, h3_gated_residual's order)
 *   y != NULL:      y[r, c] = bf16( x[r, c] * (1 / sqrtf(mean(x^2) + eps)) * w[c] )   (h3_rmsnorm, sum in double)
 * w may be NULL (no gain). */
void h3_vae_residual_rmsnorm(h3_backend *be, float *x, h3_bf16 *y, const h3_bf16 *branch, const float *scale,
                             int64_t rows, int64_t dim, const float *w, float eps);

/* q/k preparation of the decoder's bf16 mode (docs/model/video_vae.md 7 step 6.3-6.4), in place on strided bf16 heads: element
 * (r, h, d) at x[r * row_stride + h * head_dim + d], h < heads (q and k of a fused [q | k | v] projection are
 * 2 * n_heads consecutive heads). Per (row, head): RMSNorm over head_dim without gain (fp32, sum of squares in
 * double, h3_rmsnorm's order), then the rotate-half RoPE on the first rot_dim channels in fp32 (h3_rope_half
 * without H3_BF16_OUT; cos/sin: period x rot_dim fp32, table row r % period: every tile of a batch has the same
 * positions), then one bf16 rounding. */
void h3_vae_qk_norm_rope(h3_backend *be, h3_bf16 *x, int64_t rows, int64_t row_stride, int64_t period, int heads,
                         int head_dim, float eps, int rot_dim, const float *cos, const float *sin);

/* Self-attention of every tile of a batch (docs/model/video_vae.md 13: block-diagonal): for t < tiles, h3_bf16_attention (backend_bf16.h)
 * of rows [t * N, (t + 1) * N) of a fused projection qkv (row stride 3 * heads * head_dim: q | k | v heads) into
 * out rows [t * N, (t + 1) * N) (row stride heads * head_dim). head_dim 64 or 128. CUDA: one batched cuDNN SDPA call
 * (per-tile calls when cuDNN refuses). */
void h3_vae_tile_attention(h3_backend *be, h3_bf16 *out, const h3_bf16 *qkv, int64_t tiles, int64_t N, int heads,
                           int head_dim, float scale);

/* Host buffers the device copies into asynchronously (CUDA: pinned memory; CPU: plain memory). */
void *h3_vae_host_alloc(h3_backend *be, size_t bytes);
void  h3_vae_host_free(h3_backend *be, void *p);
/* Makes n buffers of `bytes` and frees them again: on CUDA they stay in the backend's pinned-buffer cache, so a
 * later h3_vae_host_alloc of that size is free. Safe to call from a second thread while the backend computes.
 * Returns 0, or -1 when an allocation failed. CPU: nothing to do. */
int   h3_vae_host_prefetch(h3_backend *be, size_t bytes, int n);

/* Asynchronous downloads in slots (0 or 1): h3_vae_download_async queues a copy of `bytes` from src (backend
 * memory) to dst (a h3_vae_host_alloc buffer) after all work queued so far, on a copy stream, so compute queued
 * later overlaps it; h3_vae_download_wait blocks until the slot's copy is done. Later work must not overwrite src
 * before the wait. CPU: a plain copy, the wait does nothing. */
typedef struct h3_vae_xfer h3_vae_xfer;
h3_vae_xfer *h3_vae_xfer_new(h3_backend *be);
void         h3_vae_xfer_free(h3_backend *be, h3_vae_xfer *x);
void         h3_vae_download_async(h3_backend *be, h3_vae_xfer *x, int slot, void *dst, const void *src, size_t bytes);
void         h3_vae_download_wait(h3_backend *be, h3_vae_xfer *x, int slot);

#endif
