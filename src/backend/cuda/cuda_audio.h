/* CUDA twins of the audio VAE ops (backend_audio.h; CPU twins in cpu/cpu_audio.c), same arguments,
 * every pointer device memory. */
#ifndef H3_CUDA_AUDIO_H
#define H3_CUDA_AUDIO_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "../backend.h"

void cuda_conv1d(h3_backend *be, float *y, const float *x, int B, int Cin, int64_t L, const float *w,
                 const float *bias, int Cout, int K, int stride, int pad, int dilation);
void cuda_conv_transpose1d(h3_backend *be, float *y, const float *x, int B, int Cin, int64_t L, const float *w,
                           const float *bias, int Cout, int K, int stride, int pad);
void cuda_snake(h3_backend *be, float *y, const float *x, int B, int C, int64_t L, const float *freq,
                const float *inv);
void cuda_snake_alias_free(h3_backend *be, float *y, const float *x, int B, int C, int64_t L, const float *freq,
                           const float *inv, const float *filt);
void cuda_clamp(h3_backend *be, float *y, const float *x, float lo, float hi, int64_t n);
void cuda_div_scalar(h3_backend *be, float *y, const float *x, float d, int64_t n);
void cuda_transpose_last2(h3_backend *be, float *y, const float *x, int B, int64_t R, int64_t C);
void cuda_head_mean_pool(h3_backend *be, float *y, const float *x, int64_t rows, int H, int hd, int O);

#ifdef __cplusplus
}
#endif

#endif
