/* CPU twins of the bf16 activation ops (ops.h). Each widens its bf16 operands, computes with
 * the same fp32 code as the fp32-buffer ops of backend.h / ops.h in their H3_BF16_OUT mode and
 * stores the (already bf16-exact) results, so the two paths give the same bits on the CPU.
 * Compiled with -ffp-contract=off like the other twins. */
#include "cpu_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../core/dtype.h"

#define BF(v) h3_bf16_to_f32(v)
#define PK(v) h3_f32_to_bf16(v)

void cpu_bf16_pack(h3_backend *be, h3_bf16 *y, const float *x, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= 32768)
    for (int64_t i = 0; i < n; i++) y[i] = PK(x[i]);
}

void cpu_bf16_unpack(h3_backend *be, float *y, const h3_bf16 *x, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= 32768)
    for (int64_t i = 0; i < n; i++) y[i] = BF(x[i]);
}

/* Row chunks keep the fp32 copies small (1024 rows of the widest DiT input: 22 MB + 117 MB). */
enum { MM_CHUNK = 1024 };

void cpu_bf16_matmul(h3_backend *be, h3_bf16 *y, int64_t ldy, const h3_bf16 *x, int64_t ldx, int64_t M,
                     const h3_tensor *w, const h3_tensor *bias) {
    int64_t N = w->shape[0], K = w->shape[1];
    if (M <= 0 || N <= 0) return;
    int64_t ch = M < MM_CHUNK ? M : MM_CHUNK;
    float *xf = malloc((size_t)(ch * K) * sizeof(float));
    float *yf = malloc((size_t)(ch * N) * sizeof(float));
    if (!xf || !yf) {
        free(xf), free(yf);
        h3_backend_unsupported(be, "h3_bf16_matmul", "out of memory for the fp32 row chunk");
        return;
    }
    for (int64_t m0 = 0; m0 < M; m0 += ch) {
        int64_t mt = M - m0 < ch ? M - m0 : ch;
#pragma omp parallel for schedule(static) if (mt * K >= 32768)
        for (int64_t r = 0; r < mt; r++)
            for (int64_t c = 0; c < K; c++) xf[r * K + c] = BF(x[(m0 + r) * ldx + c]);
        cpu_matmul(be, yf, xf, mt, w, bias, H3_BF16_OUT);
#pragma omp parallel for schedule(static) if (mt * N >= 32768)
        for (int64_t r = 0; r < mt; r++)
            for (int64_t c = 0; c < N; c++) y[(m0 + r) * ldy + c] = PK(yf[r * N + c]);
    }
    free(xf), free(yf);
}

void cpu_bf16_rmsnorm_modulate(h3_backend *be, h3_bf16 *y, const h3_bf16 *x, int64_t rows, int64_t dim,
                               const float *w, float eps, const float *table, int64_t table_stride,
                               const int32_t *row_index, int64_t shift_off, int64_t scale_off) {
#pragma omp parallel for schedule(static) if (rows * dim >= 32768)
    for (int64_t r = 0; r < rows; r++) {
        const h3_bf16 *xr = x + r * dim;
        h3_bf16 *yr = y + r * dim;
        double ss = 0.0;
        for (int64_t c = 0; c < dim; c++) {
            float v = BF(xr[c]);
            ss += (double)v * v;
        }
        float inv = 1.0f / sqrtf((float)(ss / (double)dim) + eps);
        const float *shift = table ? table + (int64_t)row_index[r] * table_stride + shift_off : NULL;
        const float *scale = table ? table + (int64_t)row_index[r] * table_stride + scale_off : NULL;
        for (int64_t c = 0; c < dim; c++) {
            float v = BF(xr[c]) * inv;
            if (w) v = v * w[c];
            v = h3_round_bf16(v);
            if (table) {
                float one_plus = h3_round_bf16(1.0f + scale[c]);
                float prod = h3_round_bf16(v * one_plus);
                v = prod + shift[c];
            }
            yr[c] = PK(v);
        }
    }
}

void cpu_bf16_head_norm_rope(h3_backend *be, h3_bf16 *x, int64_t rows, int64_t row_stride, int heads,
                             int64_t head_stride, int head_dim, const float *w, float eps, int rot_dim,
                             const float *cos, const float *sin) {
    int half = rot_dim / 2;
#pragma omp parallel for schedule(static) if (rows * heads * head_dim >= 32768)
    for (int64_t r = 0; r < rows; r++) {
        float n[1024];
        for (int h = 0; h < heads; h++) {
            h3_bf16 *xh = x + r * row_stride + (int64_t)h * head_stride;
            const float inv = cpu_bf16_rms_inv(xh, head_dim, eps);
            for (int d = 0; d < head_dim; d++) {
                float v = BF(xh[d]) * inv;
                if (w) v = v * w[d];
                n[d] = h3_round_bf16(v);
            }
            if (cos) { /* cpu_rope_half's bf16 order */
                const float *cr = cos + r * rot_dim, *sr = sin + r * rot_dim;
                for (int d = 0; d < rot_dim; d++) {
                    float c = h3_round_bf16(cr[d]), s = h3_round_bf16(sr[d]);
                    float rot = d < half ? -n[d + half] : n[d - half];
                    float a = h3_round_bf16(n[d] * c), b = h3_round_bf16(rot * s);
                    xh[d] = PK(a + b);
                }
                for (int d = rot_dim; d < head_dim; d++) xh[d] = PK(n[d]);
            } else {
                for (int d = 0; d < head_dim; d++) xh[d] = PK(n[d]);
            }
        }
    }
}

/* Strided bf16 heads -> contiguous fp32 rows [S][H*D]. */
static float *widen_heads(const h3_bf16 *src, int64_t rs, int64_t hs, int64_t S, int H, int D) {
    float *out = malloc((size_t)(S * H * D) * sizeof(float));
    if (!out) return NULL;
#pragma omp parallel for schedule(static) if (S * H * D >= 32768)
    for (int64_t s = 0; s < S; s++)
        for (int h = 0; h < H; h++)
            for (int d = 0; d < D; d++) out[(s * H + h) * D + d] = BF(src[s * rs + h * hs + d]);
    return out;
}

void cpu_bf16_attention(h3_backend *be, h3_bf16 *out, int64_t o_rs, const h3_bf16 *q, int64_t q_rs, int64_t q_hs,
                        const h3_bf16 *k, int64_t k_rs, int64_t k_hs, const h3_bf16 *v, int64_t v_rs, int64_t v_hs,
                        int64_t Sq, int64_t Skv, int Hq, int Hkv, int D, float scale) {
    if (Sq <= 0) return;
    float *qf = widen_heads(q, q_rs, q_hs, Sq, Hq, D), *kf = widen_heads(k, k_rs, k_hs, Skv, Hkv, D);
    float *vf = widen_heads(v, v_rs, v_hs, Skv, Hkv, D), *of = malloc((size_t)(Sq * Hq * D) * sizeof(float));
    if (qf && kf && vf && of) {
        int64_t wq = (int64_t)Hq * D, wkv = (int64_t)Hkv * D;
        cpu_attention(be, of, wq, qf, wq, kf, wkv, vf, wkv, Sq, Skv, Hq, Hkv, D, scale, 0, H3_BF16_OUT);
#pragma omp parallel for schedule(static) if (Sq * wq >= 32768)
        for (int64_t s = 0; s < Sq; s++)
            for (int64_t c = 0; c < wq; c++) out[s * o_rs + c] = PK(of[s * wq + c]);
    } else {
        h3_backend_unsupported(be, "h3_bf16_attention", "out of memory for the fp32 copies");
    }
    free(qf), free(kf), free(vf), free(of);
}

void cpu_bf16_gated_residual(h3_backend *be, h3_bf16 *x, const h3_bf16 *branch, int64_t rows, int64_t dim,
                             const float *table, int64_t table_stride, const int32_t *row_index, int64_t gate_off) {
#pragma omp parallel for schedule(static) if (rows * dim >= 32768)
    for (int64_t r = 0; r < rows; r++) {
        const float *gate = table ? table + (int64_t)row_index[r] * table_stride + gate_off : NULL;
        h3_bf16 *xr = x + r * dim;
        const h3_bf16 *br = branch + r * dim;
        for (int64_t c = 0; c < dim; c++) {
            float b = gate ? h3_round_bf16(gate[c] * BF(br[c])) : BF(br[c]);
            xr[c] = PK(BF(xr[c]) + b);
        }
    }
}

/* The two twins in turn: the fused op's bits are theirs by construction. */
void cpu_bf16_gated_residual_rmsnorm_modulate(h3_backend *be, h3_bf16 *x, const h3_bf16 *branch, h3_bf16 *y,
                                              int64_t rows, int64_t dim, const float *gate_table, int64_t gate_stride,
                                              const int32_t *gate_index, int64_t gate_off, const float *w, float eps,
                                              const float *table, int64_t table_stride, const int32_t *row_index,
                                              int64_t shift_off, int64_t scale_off) {
    cpu_bf16_gated_residual(be, x, branch, rows, dim, gate_table, gate_stride, gate_index, gate_off);
    cpu_bf16_rmsnorm_modulate(be, y, x, rows, dim, w, eps, table, table_stride, row_index, shift_off, scale_off);
}

void cpu_bf16_swiglu(h3_backend *be, h3_bf16 *y, const h3_bf16 *z, int64_t rows, int64_t ff, int64_t ldz,
                     int64_t val_off, int64_t gate_off) {
#pragma omp parallel for schedule(static) if (rows * ff >= 32768)
    for (int64_t r = 0; r < rows; r++) {
        const h3_bf16 *val = z + r * ldz + val_off, *gate = z + r * ldz + gate_off;
        for (int64_t c = 0; c < ff; c++) {
            float g = BF(gate[c]);
            float s = h3_round_bf16(g / (1.0f + expf(-g)));
            y[r * ff + c] = PK(BF(val[c]) * s);
        }
    }
}

void cpu_bf16_rows_scatter(h3_backend *be, h3_bf16 *dst, const h3_bf16 *src, const int32_t *index, int64_t n,
                           int64_t dim) {
#pragma omp parallel for schedule(static) if (n * dim >= 32768)
    for (int64_t i = 0; i < n; i++) memcpy(dst + (int64_t)index[i] * dim, src + i * dim, (size_t)dim * 2);
}

void cpu_bf16_rows_scatter_f32(h3_backend *be, h3_bf16 *dst, const float *src, const int32_t *index, int64_t n,
                               int64_t dim) {
#pragma omp parallel for schedule(static) if (n * dim >= 32768)
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < dim; c++) dst[(int64_t)index[i] * dim + c] = PK(src[i * dim + c]);
}

void cpu_bf16_rows_gather_f32(h3_backend *be, float *dst, const h3_bf16 *src, const int32_t *index, int64_t n,
                              int64_t dim) {
#pragma omp parallel for schedule(static) if (n * dim >= 32768)
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < dim; c++) dst[i * dim + c] = BF(src[(int64_t)index[i] * dim + c]);
}

void cpu_bf16_rows_pool_pairs(h3_backend *be, h3_bf16 *y, const h3_bf16 *x, const int32_t *pairs, int64_t rows,
                              int64_t dim) {
#pragma omp parallel for schedule(static) if (rows * dim >= 32768)
    for (int64_t r = 0; r < rows; r++) {
        const h3_bf16 *a = x + (int64_t)pairs[2 * r] * dim, *b = x + (int64_t)pairs[2 * r + 1] * dim;
        h3_bf16 *yr = y + r * dim;
        if (a == b) memcpy(yr, a, (size_t)dim * sizeof *yr);
        else
            for (int64_t c = 0; c < dim; c++) yr[c] = PK((BF(a[c]) + BF(b[c])) * 0.5f);
    }
}

void cpu_bf16_rows_expand_delta(h3_backend *be, h3_bf16 *x, const h3_bf16 *reduced, const h3_bf16 *base,
                                const int32_t *parent, int64_t rows, int64_t prefix, int64_t dim, float scale) {
#pragma omp parallel for schedule(static) if (rows * dim >= 32768)
    for (int64_t r = 0; r < rows; r++) {
        const int64_t p = parent[r];
        h3_bf16 *xr = x + r * dim;
        const h3_bf16 *red = reduced + p * dim, *bas = base + p * dim;
        if (r < prefix) memcpy(xr, red, (size_t)dim * sizeof *xr);
        else
            for (int64_t c = 0; c < dim; c++) {
                float update = BF(red[c]) - BF(bas[c]);
                float scaled = scale * update;
                xr[c] = PK(BF(xr[c]) + scaled);
            }
    }
}
