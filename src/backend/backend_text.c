/* Dispatch of the conditioner ops (backend_text.h) to the CPU twins (cpu/cpu_text.c) or, in a CUDA=1
 * build, the CUDA twins (cuda/cuda_text.cu). */
#include "backend_text.h"

#include "cpu/cpu_text.h"
#ifdef H3_CUDA
#include "cuda/cuda_text.h"
#define ON_CUDA(be) ((be)->kind == H3_BACKEND_CUDA)
#else
#define ON_CUDA(be) 0
#endif

void h3_rmsnorm_qwen(h3_backend *be, float *y, const float *x, int64_t rows, int64_t dim, const float *w, float eps,
                     int flags) {
#ifdef H3_CUDA
    if (ON_CUDA(be)) {
        cuda_rmsnorm_qwen(be, y, x, rows, dim, w, eps, flags);
        return;
    }
#endif
    cpu_rmsnorm_qwen(be, y, x, rows, dim, w, eps, flags);
}

void h3_rows_add(h3_backend *be, float *x, const int64_t *rows, const float *src, int64_t n, int64_t dim, int flags) {
#ifdef H3_CUDA
    if (ON_CUDA(be)) {
        cuda_rows_add(be, x, rows, src, n, dim, flags);
        return;
    }
#endif
    cpu_rows_add(be, x, rows, src, n, dim, flags);
}

void h3_attention_eager(h3_backend *be, float *out, int64_t o_stride, const float *q, int64_t q_stride, const float *k,
                        int64_t k_stride, const float *v, int64_t v_stride, int64_t Sq, int64_t Skv, int Hq, int Hkv,
                        int D, float scale, int causal, int flags) {
    if (!(flags & H3_BF16_OUT)) {
        h3_attention(be, out, o_stride, q, q_stride, k, k_stride, v, v_stride, Sq, Skv, Hq, Hkv, D, scale, causal, flags);
        return;
    }
#ifdef H3_CUDA
    if (ON_CUDA(be)) {
        cuda_attention_eager_bf16(be, out, o_stride, q, q_stride, k, k_stride, v, v_stride, Sq, Skv, Hq, Hkv, D, scale,
                                  causal);
        return;
    }
#endif
    cpu_attention_eager_bf16(be, out, o_stride, q, q_stride, k, k_stride, v, v_stride, Sq, Skv, Hq, Hkv, D, scale,
                             causal);
}
