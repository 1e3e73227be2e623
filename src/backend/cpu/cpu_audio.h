/* CPU twins of the audio VAE ops (backend_audio.h). Same arguments as h3_<op>. */
#ifndef H3_CPU_AUDIO_H
#define H3_CPU_AUDIO_H

#include "../backend.h"
#include "../conv_shapes.h"

void cpu_conv1d(h3_backend *be, float *y, const float *x, int B, int Cin, int64_t L, const float *w,
                const float *bias, int Cout, int K, int stride, int pad, int dilation);
void cpu_conv_transpose1d(h3_backend *be, float *y, const float *x, int B, int Cin, int64_t L, const float *w,
                          const float *bias, int Cout, int K, int stride, int pad);
void cpu_snake(h3_backend *be, float *y, const float *x, int B, int C, int64_t L, const float *freq,
               const float *inv);
void cpu_snake_alias_free(h3_backend *be, float *y, const float *x, int B, int C, int64_t L, const float *freq,
                          const float *inv, const float *filt);
void cpu_clamp(h3_backend *be, float *y, const float *x, float lo, float hi, int64_t n);
void cpu_div_scalar(h3_backend *be, float *y, const float *x, float d, int64_t n);
void cpu_transpose_last2(h3_backend *be, float *y, const float *x, int B, int64_t R, int64_t C);
void cpu_head_mean_pool(h3_backend *be, float *y, const float *x, int64_t rows, int H, int hd, int O);

#endif
