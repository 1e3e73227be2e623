/* Dispatch of the conditioner ops (backend_text.h). No CUDA twins yet: see the header. */
#include "backend_text.h"

#include "cpu/cpu_text.h"

/* On a CUDA backend the fp32 forms run as core ops (below: the same formulas; the core rmsnorm
 * sums squares in double where the twin sums in fp32, a last-bit difference); the bf16 forms have
 * no twin, so they record a clean failure rather than hand device pointers to the CPU twins. */
static const char NO_TWIN[] = "no CUDA twin for the bf16 form: the text encoder runs on the CPU backend";

void h3_rmsnorm_qwen(h3_backend *be, float *y, const float *x, int64_t rows, int64_t dim, const float *w, float eps,
                     int flags) {
    if (be->kind == H3_BACKEND_CUDA) {
        if (flags & H3_BF16_OUT) h3_backend_unsupported(be, "h3_rmsnorm_qwen", NO_TWIN);
        else h3_rmsnorm(be, y, x, rows, dim, w, eps, flags);
        return;
    }
    cpu_rmsnorm_qwen(be, y, x, rows, dim, w, eps, flags);
}

void h3_rows_add(h3_backend *be, float *x, const int64_t *rows, const float *src, int64_t n, int64_t dim, int flags) {
    if (be->kind == H3_BACKEND_CUDA) {
        for (int64_t a = 0; a < n; a++) h3_add(be, x + rows[a] * dim, x + rows[a] * dim, src + a * dim, dim, flags);
        return;
    }
    cpu_rows_add(be, x, rows, src, n, dim, flags);
}

void h3_attention_eager(h3_backend *be, float *out, int64_t o_stride, const float *q, int64_t q_stride, const float *k,
                        int64_t k_stride, const float *v, int64_t v_stride, int64_t Sq, int64_t Skv, int Hq, int Hkv,
                        int D, float scale, int causal, int flags) {
    if (!(flags & H3_BF16_OUT)) {
        h3_attention(be, out, o_stride, q, q_stride, k, k_stride, v, v_stride, Sq, Skv, Hq, Hkv, D, scale, causal, flags);
        return;
    }
    if (be->kind == H3_BACKEND_CUDA) {
        h3_backend_unsupported(be, "h3_attention_eager", NO_TWIN);
        return;
    }
    cpu_attention_eager_bf16(be, out, o_stride, q, q_stride, k, k_stride, v, v_stride, Sq, Skv, Hq, Hkv, D, scale,
                             causal);
}
