/* Linear ops (the table's lines are in ops_linear.def) and the quantized linears they run on.
 *
 * FP8 (E4M3) W8A8, the opt-in `--quant fp8` (docs/fp8.md): LightX2V's fp8 channel-symmetric scheme. Every weight
 * row (output channel) and every activation row (token) gets its own scale,
 *     scale = max(absmax(row), 1e-5) / 448,      q[c] = e4m3(x[c] / scale)
 * (fp32 division, round to nearest even, saturating at +-448, E4M3's largest finite value), and
 *     y[m, n] = bf16( acc[m, n] * (xs[m] * ws[n]) [+ bias[n]] ),   acc = sum_k xq[m, k] * wq[n, k] in fp32
 * (the products of two E4M3 values are exact in fp32). The CPU twins define the numerics; the CUDA twins quantize
 * bit-identically and run cuBLASLt FP8 GEMMs (their fp32 accumulation order differs from the CPU's).
 *
 * INT8 W8A8, `--quant int8` and int8 snapshots made by `h3 quantize` or LightX2V (docs/int8.md). Weight row n:
 *     s[n] = max(absmax_k |W[n, k]|, 1e-5) / 127,   q[n, k] = clamp(round_half_even(W[n, k] / s[n]), -127, 127)
 * (fp32 division). Activations: the same rule on each token row at every GEMM, or on each run of `group` channels
 * of a row (--int8-fc2-groups). Then, with exact int32 dot products
 *     per token:  y[m, n] = bf16(fp32(acc[m, n]) * sx[m] * sw[n] (+ bias[n]))      (left to right, fp32)
 *     grouped:    y[m, n] = bf16((sum_g fp32(acc_g[m, n]) * sx[m, g]) * sw[n])
 * (|acc| <= 128 * 127 * K fits int32 for K < 2^17). Weights from LightX2V's generic converter may hold -128 codes
 * (its clamp is [-128, 127]): the GEMM takes them as they are. The CUDA twins give the CPU twins' bits.
 *
 * GGUF blocks (docs/checkpoints.md "Quantized on the GPU"): h3_gguf_dequant's value is gguf_dequantize's (ggml's
 * reference arithmetic) rounded to bf16 (nearest even), the bytes of the dequantize-at-load path; the CUDA twin forms
 * the same fp32 products in the same order without contraction, so both twins are bit-identical. */
#ifndef H3_OPS_LINEAR_H
#define H3_OPS_LINEAR_H

#include <stdint.h>

#include "backend.h"

#define H3_FP8_MAX       448.0f
#define H3_FP8_MIN_AMAX  1e-5f
#define H3_INT8_MAX      127.0f
#define H3_INT8_MIN_AMAX 1e-5f

/* An FP8 linear y = x W^T (+ b), W [N, K]: codes and per-output-channel scales in backend memory, and an optional
 * bf16 bias the linear does not own (the video decoder's linears have one), added in fp32 before the one rounding. */
typedef struct h3_fp8_linear {
    uint8_t       *q;     /* [N][K] E4M3 codes */
    float         *scale; /* [N] */
    const h3_bf16 *bias;  /* [N] or NULL; not freed by h3_fp8_linear_free */
    int64_t        N, K;
} h3_fp8_linear;

/* An INT8 linear y = x W^T, W [N, K]: codes and per-output-channel scales in backend memory. group > 0: the input
 * rows are quantized in runs of `group` channels (K a multiple of it); 0: one scale per row. */
typedef struct h3_int8_linear {
    int8_t *q;     /* [N][K] */
    float  *scale; /* [N] */
    int64_t N, K;
    int64_t group;
} h3_int8_linear;

/* A LoRA delta for h3_lora_merge_into (ops_linear.def): B . A, A [rank][k] and B [n][rank] in backend memory in
 * the weight's dtype, times `scaling`, added to n rows of k values; delta row o goes to weight row
 * (o / row_group) * group_stride + o % row_group (the per-head rows of a fused qkv_proj). */
typedef struct h3_lora_delta {
    const void *A, *B;
    int64_t     n, k, row_group, group_stride;
    int         rank;
    float       scaling;
} h3_lora_delta;
typedef struct h3_slot h3_slot; /* backend_stream.h */

/* The check both twins of h3_lora_merge_into make first: the weight's dtype is F32, BF16 or F16 and the delta's
 * shape is sane, else the backend's error is recorded (h3_backend_check) and nothing runs. */
static inline int h3_lora_delta_ok(h3_backend *be, const void *W, h3_dtype dt, const h3_lora_delta *d) {
    int ok = (dt == H3_F32 || dt == H3_BF16 || dt == H3_F16) && W && d && d->A && d->B && d->n >= 0 && d->k >= 0 &&
             d->rank >= 1 && d->row_group >= 1 && (d->n <= d->row_group || d->group_stride >= d->row_group);
    if (!ok) h3_backend_unsupported(be, "h3_lora_merge_into", "the weight is not F32/BF16/F16 or the delta's shape is bad");
    return ok;
}

#define H3_OP(name, params, args) void h3_##name params;
#include "ops_linear.def"
#undef H3_OP

/* ---- the quantized linears (ops_linear.c): made from a weight through the ops above ---- */
/* Quantizes a BF16 weight [N, K] (backend memory) into *out (freshly allocated; the weight is left as it is).
 * -1 with e filled on a bad weight or no memory. */
int  h3_fp8_linear_new(h3_backend *be, h3_fp8_linear *out, const h3_tensor *w, h3_err *e);
void h3_fp8_linear_free(h3_backend *be, h3_fp8_linear *l);
/* The int8 rule on one row of n fp32 values (host memory): codes into q, returns the scale. The converter, the CPU
 * twin and the tests share it, so a converted snapshot and runtime quantization give the same bits. */
float h3_int8_quantize_row(const float *x, int64_t n, int8_t *q);
/* Quantizes a BF16 or F32 weight [N, K] (backend memory) into *out (freshly allocated). */
int  h3_int8_linear_new(h3_backend *be, h3_int8_linear *out, const h3_tensor *w, h3_err *e);
/* Takes stored codes q (I8 [N, K], backend memory) and scales (F32 or BF16 [N, 1] or [N], host memory) into *out
 * (both copied). */
int  h3_int8_linear_from(h3_backend *be, h3_int8_linear *out, const h3_tensor *q, const h3_tensor *scale, h3_err *e);
void h3_int8_linear_free(h3_backend *be, h3_int8_linear *l);

#endif
