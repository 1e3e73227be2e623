/* INT8 W8A8 linears: `--quant int8` and int8 snapshots made by `h3 quantize` or LightX2V (docs/int8.md).
 *
 * Weight row n (output channel), from the stored values widened to fp32:
 *     s[n] = max(absmax_k |W[n, k]|, 1e-5) / 127,   q[n, k] = clamp(round_half_even(W[n, k] / s[n]), -127, 127)
 * (fp32 division). Activations: the same rule on each token row at every GEMM (dynamic, symmetric), or on each
 * run of `group` channels of a row (--int8-fc2-groups, one scale per group). Then, with exact int32 dot products
 *     per token:  y[m, n] = bf16(fp32(acc[m, n]) * sx[m] * sw[n] (+ bias[n]))      (left to right, fp32)
 *     grouped:    y[m, n] = bf16((sum_g fp32(acc_g[m, n]) * sx[m, g]) * sw[n])
 * acc = sum_k xq[m, k] * wq[n, k] in int32 (|acc| <= 128 * 127 * K fits for K < 2^17). Weights made by LightX2V's
 * generic converter may hold -128 codes (its clamp is [-128, 127]): the GEMM takes them as they are.
 * The CPU twins (cpu/cpu_int8.c) define the numerics; the CUDA twins (cuda/cuda_int8.cu) give the same bits. */
#ifndef H3_BACKEND_INT8_H
#define H3_BACKEND_INT8_H

#include <stdint.h>

#include "backend_bf16.h"

#define H3_INT8_MAX      127.0f
#define H3_INT8_MIN_AMAX 1e-5f

/* A quantized linear y = x W^T, W [N, K]: codes and per-output-channel scales in backend memory. group > 0: the
 * input rows are quantized in runs of `group` channels (K a multiple of it); 0: one scale per row. */
typedef struct h3_int8_linear {
    int8_t *q;     /* [N][K] */
    float  *scale; /* [N] */
    int64_t N, K;
    int64_t group;
} h3_int8_linear;

/* The rule on one row of n fp32 values (host memory): codes into q, returns the scale. The converter, the CPU
 * twin and the tests share it, so a converted snapshot and runtime quantization give the same bits. */
float h3_int8_quantize_row(const float *x, int64_t n, int8_t *q);

/* Quantizes a BF16 or F32 weight [N, K] (backend memory) into *out (freshly allocated; the weight is left as it is). */
int  h3_int8_linear_new(h3_backend *be, h3_int8_linear *out, const h3_tensor *w, h3_err *e);
/* Takes stored codes q (I8 [N, K], backend memory) and scales (F32 or BF16 [N, 1] or [N], host memory) into *out
 * (both copied). */
int  h3_int8_linear_from(h3_backend *be, h3_int8_linear *out, const h3_tensor *q, const h3_tensor *scale, h3_err *e);
void h3_int8_linear_free(h3_backend *be, h3_int8_linear *l);

/* Quantizes bf16 rows x (row stride ldx) into q [rows][dim] (contiguous) and scale [rows][dim / group]
 * (group 0: [rows]). */
void h3_int8_quant_rows(h3_backend *be, int8_t *q, float *scale, const h3_bf16 *x, int64_t rows, int64_t dim,
                        int64_t ldx, int64_t group);
/* acc[m, n] (row stride N) = sum_k xq[m, k] * w->q[n, k] over k in [k0, k0 + kn), exact int32. */
void h3_int8_gemm_s32(h3_backend *be, int32_t *acc, const int8_t *xq, int64_t M, const h3_int8_linear *w, int64_t k0,
                      int64_t kn);
/* y[m, 0:N] (row stride ldy) per the rule above, xq / xs from h3_int8_quant_rows with w->group; bias bf16 [N]
 * or NULL. */
void h3_int8_matmul(h3_backend *be, h3_bf16 *y, int64_t ldy, const int8_t *xq, const float *xs, int64_t M,
                    const h3_int8_linear *w, const h3_bf16 *bias);

#endif
