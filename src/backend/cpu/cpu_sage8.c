/* CPU twin of the 8-bit attention: the rules of ops_attention.h written out one value at a time, in key order. */
#include "cpu_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"

#define BF(x) h3_bf16_to_f32(x)

/* INT8 codes of rows [r0, r0 + n) of one head (element (s, d) at x[s * rs + d]), minus mean[d] when given */
static float quant_block(int8_t *dst, const h3_bf16 *x, int64_t rs, int64_t r0, int64_t n, int D, const float *mean) {
    float amax = 0.0f;
    for (int64_t r = r0; r < r0 + n; r++)
        for (int d = 0; d < D; d++) {
            float v = mean ? BF(x[r * rs + d]) - mean[d] : BF(x[r * rs + d]);
            amax = fmaxf(amax, fabsf(v));
        }
    float sc = h3_sage8_int8_scale(amax);
    for (int64_t r = r0; r < r0 + n; r++)
        for (int d = 0; d < D; d++) {
            float v = mean ? BF(x[r * rs + d]) - mean[d] : BF(x[r * rs + d]);
            dst[r * D + d] = h3_sage8_int8_code(v, sc);
        }
    return sc;
}

void cpu_sage8_quantize(h3_backend *be, h3_sage8_codes *c, const h3_bf16 *q, int64_t q_rs, int64_t q_hs,
                        const h3_bf16 *k, int64_t k_rs, int64_t k_hs, const h3_bf16 *v, int64_t v_rs, int64_t v_hs) {
    const int D = c->D;
    const int64_t Sq = c->Sq, Skv = c->Skv, P = c->Skv_pad;
    const int64_t nqb = (Sq + H3_SAGE8_BQ - 1) / H3_SAGE8_BQ, nkb = (Skv + H3_SAGE8_BK - 1) / H3_SAGE8_BK;
#pragma omp parallel for schedule(static)
    for (int h = 0; h < c->Hkv; h++) {
        float *mean = c->k_mean + (int64_t)h * D, *vs = c->v_scale + (int64_t)h * D;
        for (int d = 0; d < D; d++) {
            double sum = 0.0; /* exact for activations (bf16 values of a 2^27 range), so any order gives it */
            float vmax = 0.0f;
            for (int64_t s = 0; s < Skv; s++) {
                sum += (double)BF(k[s * k_rs + h * k_hs + d]);
                vmax = fmaxf(vmax, fabsf(BF(v[s * v_rs + h * v_hs + d])));
            }
            mean[d] = (float)(sum / (double)Skv);
            vs[d] = h3_sage8_fp8_scale(vmax);
        }
        for (int64_t b = 0; b < nkb; b++) {
            int64_t r0 = b * H3_SAGE8_BK, n = Skv - r0 < H3_SAGE8_BK ? Skv - r0 : H3_SAGE8_BK;
            c->k_scale[h * nkb + b] = quant_block(c->k + (int64_t)h * Skv * D, k + h * k_hs, k_rs, r0, n, D, mean);
        }
        uint8_t *vt = c->vt + (int64_t)h * D * P;
        for (int d = 0; d < D; d++)
            for (int64_t col = 0; col < P; col++) {
                int64_t s = (col & ~(int64_t)31) + h3_sage8_vt_token((int)(col & 31));
                vt[d * P + col] = s < Skv ? h3_f32_to_f8e4m3(BF(v[s * v_rs + h * v_hs + d]) / vs[d]) : 0;
            }
    }
#pragma omp parallel for schedule(static)
    for (int h = 0; h < c->Hq; h++)
        for (int64_t b = 0; b < nqb; b++) {
            int64_t r0 = b * H3_SAGE8_BQ, n = Sq - r0 < H3_SAGE8_BQ ? Sq - r0 : H3_SAGE8_BQ;
            c->q_scale[h * nqb + b] = quant_block(c->q + (int64_t)h * Sq * D, q + h * q_hs, q_rs, r0, n, D, NULL);
        }
}

void cpu_sage8_attention_codes(h3_backend *be, h3_bf16 *out, int64_t o_rs, const h3_sage8_codes *c, float scale) {
    const int D = c->D, g = c->Hq / c->Hkv;
    const int64_t Sq = c->Sq, Skv = c->Skv, P = c->Skv_pad;
    const int64_t nqb = (Sq + H3_SAGE8_BQ - 1) / H3_SAGE8_BQ, nkb = (Skv + H3_SAGE8_BK - 1) / H3_SAGE8_BK;
    const float sl2 = scale * 1.4426950408889634f, l448 = 8.807354922057604f; /* fp32(log2(448)), as the kernels */
    float e4m3[256]; /* code -> value */
    for (int i = 0; i < 256; i++) e4m3[i] = h3_f8e4m3_to_f32((uint8_t)i);
    int col_of[32]; /* the V^T column of each token of a run of 32 */
    for (int col = 0; col < 32; col++) col_of[h3_sage8_vt_token(col)] = col;
    const int64_t rows = (int64_t)c->Hq * Sq;
#pragma omp parallel
    {
        float *o = malloc((size_t)(2 * D + H3_SAGE8_BK) * sizeof(float));
        if (o) {
            float *pv = o + D, *f = pv + D;
            uint8_t pc[H3_SAGE8_BK];
#pragma omp for schedule(dynamic, 16)
            for (int64_t hr = 0; hr < rows; hr++) {
                int h = (int)(hr / Sq), hk = h / g;
                int64_t r = hr - (int64_t)h * Sq;
                const int8_t *qc = c->q + ((int64_t)h * Sq + r) * D;
                const int8_t *kc = c->k + (int64_t)hk * Skv * D;
                const uint8_t *vt = c->vt + (int64_t)hk * D * P;
                const float fq = c->q_scale[h * nqb + r / H3_SAGE8_BQ] * sl2;
                float m = -INFINITY, l = 0.0f;
                for (int d = 0; d < D; d++) o[d] = 0.0f, pv[d] = 0.0f;
                for (int64_t j = 0; j < nkb; j++) {
                    const int64_t n0 = j * H3_SAGE8_BK;
                    const int nn = (int)(Skv - n0 < H3_SAGE8_BK ? Skv - n0 : H3_SAGE8_BK);
                    const float fsc = fq * c->k_scale[hk * nkb + j];
                    float mx = -INFINITY;
                    for (int n = 0; n < nn; n++) {
                        int32_t acc = 0;
                        for (int d = 0; d < D; d++) acc += (int32_t)qc[d] * (int32_t)kc[(n0 + n) * D + d];
                        f[n] = (float)acc;
                        mx = fmaxf(mx, f[n]);
                    }
                    const float mn = fmaxf(m, mx * fsc), corr = exp2f(m - mn), cb = l448 - mn;
                    m = mn;
                    float rs = 0.0f;
                    for (int n = 0; n < nn; n++) {
                        float p = exp2f(fmaf(f[n], fsc, cb));
                        rs += p;
                        pc[n] = h3_f32_to_f8e4m3(p);
                    }
                    l = l * corr + rs;
                    for (int d = 0; d < D; d++) o[d] = (o[d] + pv[d]) * corr; /* the previous tile's P V */
                    for (int d = 0; d < D; d++) {
                        const uint8_t *vr = vt + d * P + n0;
                        float acc = 0.0f; /* a fresh fp32 sum per tile, in key order */
                        for (int n = 0; n < nn; n++) acc += e4m3[pc[n]] * e4m3[vr[(n & ~31) + col_of[n & 31]]];
                        pv[d] = acc;
                    }
                }
                const float inv = l > 0.0f ? 1.0f / l : 0.0f;
                const float *vs = c->v_scale + (int64_t)hk * D;
                for (int d = 0; d < D; d++) out[r * o_rs + (int64_t)h * D + d] = h3_f32_to_bf16(((o[d] + pv[d]) * inv) * vs[d]);
            }
            free(o);
        } else {
            h3_backend_unsupported(be, "h3_sage8_attention", "out of memory for the row buffers");
        }
    }
}

void cpu_sage8_attention(h3_backend *be, h3_bf16 *out, int64_t o_rs, const h3_bf16 *q, int64_t q_rs, int64_t q_hs,
                         const h3_bf16 *k, int64_t k_rs, int64_t k_hs, const h3_bf16 *v, int64_t v_rs, int64_t v_hs,
                         int64_t Sq, int64_t Skv, int Hq, int Hkv, int D, float scale) {
    if (Sq <= 0 || Hq <= 0) return;
    if (Skv <= 0 || Hkv <= 0 || Hq % Hkv || D <= 0) {
        h3_backend_unsupported(be, "h3_sage8_attention", "Skv and D must be > 0 and Hq a multiple of Hkv");
        return;
    }
    void *buf = calloc(1, h3_sage8_codes_bytes(Sq, Skv, Hq, Hkv, D));
    if (!buf) {
        h3_backend_unsupported(be, "h3_sage8_attention", "out of memory for the codes");
        return;
    }
    h3_sage8_codes c;
    h3_sage8_codes_layout(&c, buf, Sq, Skv, Hq, Hkv, D);
    cpu_sage8_quantize(be, &c, q, q_rs, q_hs, k, k_rs, k_hs, v, v_rs, v_hs);
    cpu_sage8_attention_codes(be, out, o_rs, &c, scale);
    free(buf);
}
