/* FP8 (E4M3) W8A8 linears: the opt-in `--quant fp8` mode of the DiT's bf16 path (docs/fp8.md).
 *
 * The scheme is LightX2V's fp8 channel-symmetric one (docs/model/features.md 6.3, "fp8-sgl"): every weight row (output
 * channel) and every activation row (token) gets its own scale,
 *     scale = max(absmax(row), 1e-5) / 448,      q[c] = e4m3(x[c] / scale)
 * (fp32 division, round to nearest even, saturating at +-448; 448 is E4M3's largest finite value), and
 *     y[m, n] = bf16( acc[m, n] * (xs[m] * ws[n]) [+ bias[n]] ),   acc = sum_k xq[m, k] * wq[n, k] in fp32
 * (the products of two E4M3 values are exact in fp32). This is not the reference's arithmetic: it trades
 * the bf16 GEMMs' precision for twice the tensor-core rate. The CPU twins (cpu/cpu_fp8.c) define the
 * numerics; the CUDA twins (cuda/cuda_fp8.cu) quantize bit-identically and run cuBLASLt FP8 GEMMs with
 * per-row / per-column scale vectors (their fp32 accumulation order differs from the CPU's). */
#ifndef H3_BACKEND_FP8_H
#define H3_BACKEND_FP8_H

#include <stdint.h>

#include "backend_bf16.h"

#define H3_FP8_MAX      448.0f
#define H3_FP8_MIN_AMAX 1e-5f

/* A quantized linear y = x W^T (+ b), W [N, K]: codes and per-output-channel scales in backend memory, and an
 * optional bf16 bias the linear does not own (the video decoder's linears have one; the DiT's have none). The bias
 * is added in fp32 to the scaled accumulator before the one rounding to bf16. */
typedef struct h3_fp8_linear {
    uint8_t       *q;     /* [N][K] E4M3 codes */
    float         *scale; /* [N] */
    const h3_bf16 *bias;  /* [N] or NULL; not freed by h3_fp8_linear_free */
    int64_t        N, K;
} h3_fp8_linear;

/* Quantizes a BF16 weight [N, K] (backend memory, as h3_weight_upload / the model loaders give it) into
 * *out (freshly allocated; the weight is left as it is). -1 with e filled on a bad weight or no memory. */
int  h3_fp8_linear_new(h3_backend *be, h3_fp8_linear *out, const h3_tensor *w, h3_err *e);
void h3_fp8_linear_free(h3_backend *be, h3_fp8_linear *l);

/* Per-row quantization of bf16 rows x (row stride ldx) into q [rows][dim] (contiguous) and scale [rows]. */
void h3_fp8_quant_rows(h3_backend *be, uint8_t *q, float *scale, const h3_bf16 *x, int64_t rows, int64_t dim,
                       int64_t ldx);

/* y[m, 0:N] (row stride ldy) = bf16( (xq[m] . wq[n]) * (xs[m] * ws[n]) [+ w->bias[n]] ), xq [M][K] from
 * h3_fp8_quant_rows. */
void h3_fp8_matmul(h3_backend *be, h3_bf16 *y, int64_t ldy, const uint8_t *xq, const float *xs, int64_t M,
                   const h3_fp8_linear *w);

#endif
