/* CPU twins of the VAE decoder ops (ops.h): the arithmetic of h3_gated_residual, h3_rmsnorm and
 * h3_rope_half (cpu_ops.c, cpu_dit.c) on fp32 values widened from bf16, one rounding at the end. */
#include "cpu_ops.h"

#include <math.h>
#include <string.h>

#include "../../core/dtype.h"

static inline float widen(h3_bf16 h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline h3_bf16 to_bf16(float f) {
    float r = h3_round_bf16(f);
    uint32_t u;
    memcpy(&u, &r, sizeof u);
    return (h3_bf16)(u >> 16);
}

void cpu_vae_residual_rmsnorm(h3_backend *be, float *x, h3_bf16 *y, const h3_bf16 *branch, const float *scale,
                              int64_t rows, int64_t dim, const float *w, float eps) {
    (void)be;
#pragma omp parallel for schedule(static) if (rows * dim >= 32768)
    for (int64_t r = 0; r < rows; r++) {
        float *xr = x + r * dim;
        if (branch) {
            const h3_bf16 *br = branch + r * dim;
            for (int64_t c = 0; c < dim; c++) xr[c] = xr[c] + scale[c] * widen(br[c]);
        }
        if (!y) continue;
        double ss = 0.0;
        for (int64_t c = 0; c < dim; c++) ss += (double)xr[c] * xr[c];
        float inv = 1.0f / sqrtf((float)(ss / (double)dim) + eps);
        h3_bf16 *yr = y + r * dim;
        for (int64_t c = 0; c < dim; c++) {
            float v = xr[c] * inv;
            if (w) v = v * w[c];
            yr[c] = to_bf16(v);
        }
    }
}

void cpu_vae_qk_norm_rope(h3_backend *be, h3_bf16 *x, int64_t rows, int64_t row_stride, int64_t period, int heads,
                          int head_dim, float eps, int rot_dim, const float *cos, const float *sin) {
    (void)be;
    const int half = rot_dim / 2;
#pragma omp parallel for schedule(static) if (rows * heads * head_dim >= 32768)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t s = r % period;
        const float *cr = cos + s * rot_dim, *sr = sin + s * rot_dim;
        float tmp[1024];
        for (int h = 0; h < heads; h++) {
            h3_bf16 *xh = x + r * row_stride + (int64_t)h * head_dim;
            const float inv = cpu_bf16_rms_inv(xh, head_dim, eps);
            for (int d = 0; d < head_dim; d++) tmp[d] = widen(xh[d]) * inv;
            for (int d = 0; d < head_dim; d++) {
                float val = tmp[d];
                if (d < rot_dim) {
                    float rot = d < half ? -tmp[d + half] : tmp[d - half];
                    float a = tmp[d] * cr[d], bb = rot * sr[d];
                    val = a + bb;
                }
                xh[d] = to_bf16(val);
            }
        }
    }
}

void cpu_vae_tile_attention(h3_backend *be, h3_bf16 *out, const h3_bf16 *qkv, int64_t tiles, int64_t N, int heads,
                            int head_dim, float scale) {
    const int64_t D = (int64_t)heads * head_dim;
    for (int64_t t = 0; t < tiles; t++) {
        const h3_bf16 *q = qkv + t * N * 3 * D;
        cpu_bf16_attention(be, out + t * N * D, D, q, 3 * D, head_dim, q + D, 3 * D, head_dim, q + 2 * D, 3 * D,
                           head_dim, N, N, heads, heads, head_dim, scale);
    }
}
