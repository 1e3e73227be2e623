/* Dispatch of the audio VAE ops (backend_audio.h) to the CPU twin (cpu/cpu_audio.c) or CUDA. */
#include "backend_audio.h"

#include "cpu/cpu_audio.h"
#ifdef H3_CUDA /* twins in src/backend/cuda/cuda_audio.cu */
#include "cuda/cuda_audio.h"
#define AUDIO_DISPATCH(be, op, ...)                                    \
    do {                                                               \
        if ((be)->kind == H3_BACKEND_CUDA) cuda_##op(__VA_ARGS__);     \
        else cpu_##op(__VA_ARGS__);                                    \
    } while (0)
#define AUDIO_HAS_CUDA 1
#else
/* A build without CUDA has no CUDA backend; any other backend kind records a clean failure
 * instead of handing its pointers to the CPU twin (h3_backend_check reports it). */
#define AUDIO_DISPATCH(be, op, ...)                                                                   \
    do {                                                                                              \
        if ((be)->kind != H3_BACKEND_CPU) h3_backend_unsupported(be, "h3_" #op, "no twin on this backend"); \
        else cpu_##op(__VA_ARGS__);                                                                   \
    } while (0)
#define AUDIO_HAS_CUDA 0
#endif

int h3_audio_supported(const h3_backend *be) { return be->kind == H3_BACKEND_CPU || (AUDIO_HAS_CUDA && be->kind == H3_BACKEND_CUDA); }

void h3_conv1d(h3_backend *be, float *y, const float *x, int B, int Cin, int64_t L, const float *w,
               const float *bias, int Cout, int K, int stride, int pad, int dilation) {
    AUDIO_DISPATCH(be, conv1d, be, y, x, B, Cin, L, w, bias, Cout, K, stride, pad, dilation);
}

void h3_conv_transpose1d(h3_backend *be, float *y, const float *x, int B, int Cin, int64_t L, const float *w,
                         const float *bias, int Cout, int K, int stride, int pad) {
    AUDIO_DISPATCH(be, conv_transpose1d, be, y, x, B, Cin, L, w, bias, Cout, K, stride, pad);
}

void h3_snake(h3_backend *be, float *y, const float *x, int B, int C, int64_t L, const float *freq,
              const float *inv) {
    AUDIO_DISPATCH(be, snake, be, y, x, B, C, L, freq, inv);
}

void h3_snake_alias_free(h3_backend *be, float *y, const float *x, int B, int C, int64_t L, const float *freq,
                         const float *inv, const float *filt) {
    AUDIO_DISPATCH(be, snake_alias_free, be, y, x, B, C, L, freq, inv, filt);
}

void h3_clamp(h3_backend *be, float *y, const float *x, float lo, float hi, int64_t n) {
    AUDIO_DISPATCH(be, clamp, be, y, x, lo, hi, n);
}

void h3_div_scalar(h3_backend *be, float *y, const float *x, float d, int64_t n) {
    AUDIO_DISPATCH(be, div_scalar, be, y, x, d, n);
}

void h3_transpose_last2(h3_backend *be, float *y, const float *x, int B, int64_t R, int64_t C) {
    AUDIO_DISPATCH(be, transpose_last2, be, y, x, B, R, C);
}

void h3_head_mean_pool(h3_backend *be, float *y, const float *x, int64_t rows, int H, int hd, int O) {
    AUDIO_DISPATCH(be, head_mean_pool, be, y, x, rows, H, hd, O);
}
