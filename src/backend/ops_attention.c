/* The host-side helpers of ops_attention.h: the 8-bit attention's code layout and its quantization rules on host
 * values (docs/fast.md), and the eager attention composite of the text encoder. */
#include "ops_attention.h"

#include <math.h>

static size_t up256(size_t n) { return (n + 255) & ~(size_t)255; }

static int64_t pad_keys(int64_t Skv) { return (Skv + H3_SAGE8_BK - 1) / H3_SAGE8_BK * H3_SAGE8_BK; }

/* sizes of the seven buffers in h3_sage8_codes order */
static void sizes(size_t sz[7], int64_t Sq, int64_t Skv, int Hq, int Hkv, int D) {
    int64_t nqb = (Sq + H3_SAGE8_BQ - 1) / H3_SAGE8_BQ, nkb = (Skv + H3_SAGE8_BK - 1) / H3_SAGE8_BK;
    sz[0] = (size_t)Hq * (size_t)Sq * (size_t)D;
    sz[1] = (size_t)Hkv * (size_t)Skv * (size_t)D;
    sz[2] = (size_t)Hkv * (size_t)D * (size_t)pad_keys(Skv);
    sz[3] = (size_t)Hq * (size_t)nqb * 4;
    sz[4] = (size_t)Hkv * (size_t)nkb * 4;
    sz[5] = sz[6] = (size_t)Hkv * (size_t)D * 4;
}

size_t h3_sage8_codes_bytes(int64_t Sq, int64_t Skv, int Hq, int Hkv, int D) {
    size_t sz[7], n = 0;
    sizes(sz, Sq, Skv, Hq, Hkv, D);
    for (int i = 0; i < 7; i++) n += up256(sz[i]);
    return n;
}

void h3_sage8_codes_layout(h3_sage8_codes *c, void *base, int64_t Sq, int64_t Skv, int Hq, int Hkv, int D) {
    size_t sz[7];
    sizes(sz, Sq, Skv, Hq, Hkv, D);
    uint8_t *p[7], *at = (uint8_t *)base;
    for (int i = 0; i < 7; i++) p[i] = at, at += up256(sz[i]);
    c->q = (int8_t *)p[0], c->k = (int8_t *)p[1], c->vt = p[2];
    c->q_scale = (float *)p[3], c->k_scale = (float *)p[4], c->v_scale = (float *)p[5], c->k_mean = (float *)p[6];
    c->Sq = Sq, c->Skv = Skv, c->Skv_pad = pad_keys(Skv), c->Hq = Hq, c->Hkv = Hkv, c->D = D;
}

float h3_sage8_int8_scale(float amax) { return fmaxf(amax, H3_SAGE8_MIN_AMAX) / 127.0f; }
float h3_sage8_fp8_scale(float amax) { return fmaxf(amax, H3_SAGE8_MIN_AMAX) / H3_SAGE8_P_SCALE; }

int8_t h3_sage8_int8_code(float x, float scale) {
    float r = rintf(x / scale); /* the default rounding mode: half to even */
    return (int8_t)(r > 127.0f ? 127 : r < -127.0f ? -127 : (int)r);
}

void h3_attention_eager(h3_backend *be, float *out, int64_t o_stride, const float *q, int64_t q_stride, const float *k,
                        int64_t k_stride, const float *v, int64_t v_stride, int64_t Sq, int64_t Skv, int Hq, int Hkv,
                        int D, float scale, int causal, int flags) {
    if (flags & H3_BF16_OUT)
        h3_attention_eager_bf16(be, out, o_stride, q, q_stride, k, k_stride, v, v_stride, Sq, Skv, Hq, Hkv, D, scale,
                                causal);
    else
        h3_attention(be, out, o_stride, q, q_stride, k, k_stride, v, v_stride, Sq, Skv, Hq, Hkv, D, scale, causal,
                     flags);
}
