/* 1-D ops of the audio VAE (docs/model/audio_vae.md section 4): convolutions, transposed
 * convolutions, Snake activations (plain and alias-free), and the small helpers around them.
 *
 * Layout: channel-major [B][C][L] (PyTorch's), fp32, contiguous, in backend memory. Weights are fp32
 * buffers in backend memory in PyTorch's layout (already weight-norm folded by the model). Every op
 * treats the B items independently (stereo = 2 items): padding and clamping are per item.
 * h3_<op> dispatches to cpu_<op> (src/backend/cpu/cpu_audio.c) or cuda_<op> (src/backend/cuda/cuda_audio.cu). */
#ifndef H3_BACKEND_AUDIO_H
#define H3_BACKEND_AUDIO_H

#include <stdint.h>

#include "backend.h"
#include "conv_shapes.h" /* H3_AF_TAPS, h3_conv1d_out_len */

/* Conv1d, zero padding `pad` on both sides (docs/model/audio_vae.md 4.1). x [B, Cin, L], w [Cout, Cin, K], bias [Cout]
 * or NULL, y [B, Cout, Lout] with Lout = h3_conv1d_out_len(...) >= 1. y must not alias x. */
void h3_conv1d(h3_backend *be, float *y, const float *x, int B, int Cin, int64_t L, const float *w,
               const float *bias, int Cout, int K, int stride, int pad, int dilation);

/* ConvTranspose1d, no output padding (docs/model/audio_vae.md 4.2). x [B, Cin, L], w [Cin, Cout, K], bias [Cout] or
 * NULL, y [B, Cout, (L-1)*stride - 2*pad + K]. y must not alias x. */
void h3_conv_transpose1d(h3_backend *be, float *y, const float *x, int B, int Cin, int64_t L, const float *w,
                         const float *bias, int Cout, int K, int stride, int pad);

/* Snake family (docs/model/audio_vae.md 4.4/4.5): y = x + inv[c] * sin(freq[c] * x)^2 over x [B, C, L]; y may alias x.
 * Snake1d: freq = alpha, inv = 1/(alpha + 1e-9). SnakeBeta: freq = exp(alpha), inv = 1/(exp(beta) + 1e-9). */
void h3_snake(h3_backend *be, float *y, const float *x, int B, int C, int64_t L, const float *freq,
              const float *inv);

/* Alias-free activation (docs/model/audio_vae.md 4.7-4.9): y = DownSample2(Snake(UpSample2(x))) with the 12-tap filter
 * `filt` (backend memory) and replicate padding at both resampling steps. x, y [B, C, L]; no alias. */
void h3_snake_alias_free(h3_backend *be, float *y, const float *x, int B, int C, int64_t L, const float *freq,
                         const float *inv, const float *filt);

/* y = min(max(x, lo), hi), n elements; y may alias x. */
void h3_clamp(h3_backend *be, float *y, const float *x, float lo, float hi, int64_t n);

/* y = x / d (a true division, as PyTorch's `tensor / num`), n elements; y may alias x. */
void h3_div_scalar(h3_backend *be, float *y, const float *x, float d, int64_t n);

/* Per item b: y[b] = x[b]^T, x [B, R, C] -> y [B, C, R]. No alias. */
void h3_transpose_last2(h3_backend *be, float *y, const float *x, int B, int64_t R, int64_t C);

/* The pooling of the audio VAE's attention projection (docs/model/audio_vae.md 6 step 6.4-6.5): rows of x hold H heads of
 * hd features; y[r, o] = adaptive_avg_pool(mean over heads)[o] with PyTorch's bins
 * [floor(o*hd/O), ceil((o+1)*hd/O)). x [rows, H*hd], y [rows, O]. */
void h3_head_mean_pool(h3_backend *be, float *y, const float *x, int64_t rows, int H, int hd, int O);

/* 1 when this backend implements the ops above (the CPU always does; CUDA in a CUDA=1 build). */
int h3_audio_supported(const h3_backend *be);

#endif
