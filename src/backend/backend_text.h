/* Ops of the Qwen3-VL conditioner (docs/model/text_encoder.md sections 2-3) that the core set
 * lacks. CPU twins in cpu/cpu_text.c, CUDA twins (CUDA=1 builds) in cuda/cuda_text.cu with the same
 * numerics (sequential fp32 statistics, the eager attention's bf16 roundings; its products are fp32
 * GEMMs on both). The fp32 form of h3_attention_eager is h3_attention on every backend. */
#ifndef H3_BACKEND_TEXT_H
#define H3_BACKEND_TEXT_H

#include <stdint.h>

#include "backend.h"

/* Qwen3VLTextRMSNorm (docs/model/text_encoder.md 2.4): y = w * round(x * rsqrt(mean(x^2) + eps)); with H3_BF16_OUT the
 * normalized value is rounded to bf16 before the gain multiply and the product is rounded again.
 * x, y: rows x dim (y may alias x); w: dim floats (backend memory). Statistics in fp32. */
void h3_rmsnorm_qwen(h3_backend *be, float *y, const float *x, int64_t rows, int64_t dim, const float *w, float eps,
                     int flags);

/* x[rows[a], :] += src[a, :] for a < n (rows of dim floats; rows host memory). Deepstack (docs/model/text_encoder.md 2.9). */
void h3_rows_add(h3_backend *be, float *x, const int64_t *rows, const float *src, int64_t n, int64_t dim, int flags);

/* Attention as transformers' eager path computes it (the reference the goldens use). Same
 * arguments as h3_attention. Without H3_BF16_OUT it is h3_attention. With it, the bf16 tensor
 * ops of eager_attention_forward are reproduced: scores = bf16(q.k^T), bf16(scores * scale),
 * softmax in fp32 rounded to bf16, out = bf16(P.V) (fp32 accumulation throughout). */
void h3_attention_eager(h3_backend *be, float *out, int64_t o_stride, const float *q, int64_t q_stride, const float *k,
                        int64_t k_stride, const float *v, int64_t v_stride, int64_t Sq, int64_t Skv, int Hq, int Hkv,
                        int D, float scale, int causal, int flags);

#endif
