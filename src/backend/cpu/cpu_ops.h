/* CPU twins of the core backend ops (backend.h). Same arguments as h3_<op>. */
#ifndef H3_CPU_OPS_H
#define H3_CPU_OPS_H

#include "../backend.h"

void *cpu_alloc(h3_backend *be, size_t bytes);
void  cpu_free(h3_backend *be, void *p);
void  cpu_matmul(h3_backend *be, float *y, const float *x, int64_t M, const h3_tensor *w, const h3_tensor *bias,
                 int flags);
void  cpu_attention(h3_backend *be, float *out, int64_t o_stride, const float *q, int64_t q_stride, const float *k,
                    int64_t k_stride, const float *v, int64_t v_stride, int64_t Sq, int64_t Skv, int Hq, int Hkv,
                    int D, float scale, int causal, int flags);
void  cpu_rmsnorm(h3_backend *be, float *y, const float *x, int64_t rows, int64_t dim, const float *w, float eps,
                  int flags);
void  cpu_layernorm(h3_backend *be, float *y, const float *x, int64_t rows, int64_t dim, const float *w,
                    const float *b, float eps, int flags);
void  cpu_groupnorm(h3_backend *be, float *y, const float *x, int64_t N, int64_t C, int64_t L, int groups,
                    const float *w, const float *b, float eps, int flags);
void  cpu_rope_half(h3_backend *be, float *x, int64_t rows, int64_t stride, int nheads, int head_dim, int rot_dim,
                    const float *cos, const float *sin, int flags);
void  cpu_silu(h3_backend *be, float *y, const float *x, int64_t n, int flags);
void  cpu_gelu_tanh(h3_backend *be, float *y, const float *x, int64_t n, int flags);
void  cpu_gelu_erf(h3_backend *be, float *y, const float *x, int64_t n, int flags);
void  cpu_add(h3_backend *be, float *y, const float *a, const float *b, int64_t n, int flags);
void  cpu_mul(h3_backend *be, float *y, const float *a, const float *b, int64_t n, int flags);
void  cpu_scale(h3_backend *be, float *y, const float *x, float s, int64_t n, int flags);
void  cpu_round_bf16_buf(h3_backend *be, float *x, int64_t n);
void  cpu_add_bias(h3_backend *be, float *y, const float *bias, int64_t rows, int64_t dim, int flags);

#endif
