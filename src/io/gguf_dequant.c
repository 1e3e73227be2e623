/* GGUF dequantization (gguf.h gguf_dequantize), block by block with ggml's reference arithmetic (docs/checkpoints.md):
 * the fp16 block scales widened exactly, each product formed in fp32 in ggml's order (for the k-quants the
 * sub-block scale d * sc first, then times the code, minus dmin * m), compiled without FMA contraction
 * (-ffp-contract=off), so every value is bit-identical to ggml's dequantize_row_* and the gguf package's numpy. */
#include <stdlib.h>
#include <string.h>

#include "../core/dtype.h"
#include "gguf.h"

static float f16_at(const uint8_t *p) { return h3_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* Q4_0: d (f16), 16 bytes of 4-bit codes; value j < 16 is the low nibble of byte j, j + 16 the high one, (q - 8) d */
static void q4_0(const uint8_t *b, float *y) {
    const float d = f16_at(b);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)((b[2 + j] & 0x0F) - 8) * d;
        y[j + 16] = (float)((b[2 + j] >> 4) - 8) * d;
    }
}

/* Q4_1: d, m (f16), nibbles as Q4_0; q d + m */
static void q4_1(const uint8_t *b, float *y) {
    const float d = f16_at(b), m = f16_at(b + 2);
    for (int j = 0; j < 16; j++) {
        y[j] = (float)(b[4 + j] & 0x0F) * d + m;
        y[j + 16] = (float)(b[4 + j] >> 4) * d + m;
    }
}

/* Q5_0: d (f16), 32 high bits (bit j is value j's fifth bit), nibbles as Q4_0; (q - 16) d */
static void q5_0(const uint8_t *b, float *y) {
    const float d = f16_at(b);
    uint32_t qh;
    memcpy(&qh, b + 2, 4);
    for (int j = 0; j < 16; j++) {
        const int h0 = (int)((qh >> j) << 4 & 0x10), h1 = (int)((qh >> (j + 12)) & 0x10);
        y[j] = (float)(((b[6 + j] & 0x0F) | h0) - 16) * d;
        y[j + 16] = (float)(((b[6 + j] >> 4) | h1) - 16) * d;
    }
}

/* Q5_1: d, m (f16), 32 high bits, nibbles; q d + m */
static void q5_1(const uint8_t *b, float *y) {
    const float d = f16_at(b), m = f16_at(b + 2);
    uint32_t qh;
    memcpy(&qh, b + 4, 4);
    for (int j = 0; j < 16; j++) {
        const int h0 = (int)((qh >> j) << 4 & 0x10), h1 = (int)((qh >> (j + 12)) & 0x10);
        y[j] = (float)((b[8 + j] & 0x0F) | h0) * d + m;
        y[j + 16] = (float)((b[8 + j] >> 4) | h1) * d + m;
    }
}

/* Q8_0: d (f16), 32 int8 codes; q d */
static void q8_0(const uint8_t *b, float *y) {
    const float d = f16_at(b);
    for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

/* The k-quants' 6-bit scale and min of sub-block j (of 8) from their 12 packed bytes. */
static void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K: d, dmin (f16), 12 scale bytes, 128 code bytes; 4 chunks of 64 values, each 32 low then 32 high nibbles of
 * 32 bytes, with the chunk's two sub-block scales */
static void q4_k(const uint8_t *b, float *y) {
    const float d = f16_at(b), dmin = f16_at(b + 2);
    const uint8_t *sc = b + 4, *q = b + 16;
    for (int c = 0; c < 4; c++, q += 32, y += 64) {
        int s1, m1, s2, m2;
        scale_min_k4(2 * c, sc, &s1, &m1);
        scale_min_k4(2 * c + 1, sc, &s2, &m2);
        const float d1 = d * (float)s1, n1 = dmin * (float)m1, d2 = d * (float)s2, n2 = dmin * (float)m2;
        for (int l = 0; l < 32; l++) y[l] = d1 * (float)(q[l] & 0x0F) - n1;
        for (int l = 0; l < 32; l++) y[32 + l] = d2 * (float)(q[l] >> 4) - n2;
    }
}

/* Q5_K: d, dmin, 12 scale bytes, 32 high-bit bytes, 128 code bytes; as Q4_K with chunk c's fifth bits in bits 2c
 * (low nibbles) and 2c + 1 (high nibbles) of the high-bit bytes */
static void q5_k(const uint8_t *b, float *y) {
    const float d = f16_at(b), dmin = f16_at(b + 2);
    const uint8_t *sc = b + 4, *qh = b + 16, *q = b + 48;
    for (int c = 0; c < 4; c++, q += 32, y += 64) {
        int s1, m1, s2, m2;
        scale_min_k4(2 * c, sc, &s1, &m1);
        scale_min_k4(2 * c + 1, sc, &s2, &m2);
        const float d1 = d * (float)s1, n1 = dmin * (float)m1, d2 = d * (float)s2, n2 = dmin * (float)m2;
        const uint8_t u1 = (uint8_t)(1u << (2 * c)), u2 = (uint8_t)(2u << (2 * c));
        for (int l = 0; l < 32; l++) y[l] = d1 * (float)((q[l] & 0x0F) + (qh[l] & u1 ? 16 : 0)) - n1;
        for (int l = 0; l < 32; l++) y[32 + l] = d2 * (float)((q[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - n2;
    }
}

/* Q6_K: 128 low-nibble bytes, 64 high-bit bytes (2 bits per value), 16 int8 sub-block scales, d (f16); two halves
 * of 128 values, each from 64 low bytes, 32 high bytes and 8 scales; (d sc) (q - 32) */
static void q6_k(const uint8_t *b, float *y) {
    const float d = f16_at(b + 208);
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    for (int n = 0; n < 2; n++, ql += 64, qh += 32, sc += 8, y += 128)
        for (int l = 0; l < 32; l++) {
            const int is = l / 16;
            const int q1 = (int)((ql[l] & 0x0F) | ((qh[l] >> 0 & 3) << 4)) - 32;
            const int q2 = (int)((ql[l + 32] & 0x0F) | ((qh[l] >> 2 & 3) << 4)) - 32;
            const int q3 = (int)((ql[l] >> 4) | ((qh[l] >> 4 & 3) << 4)) - 32;
            const int q4 = (int)((ql[l + 32] >> 4) | ((qh[l] >> 6 & 3) << 4)) - 32;
            y[l] = d * (float)sc[is] * (float)q1;
            y[l + 32] = d * (float)sc[is + 2] * (float)q2;
            y[l + 64] = d * (float)sc[is + 4] * (float)q3;
            y[l + 96] = d * (float)sc[is + 6] * (float)q4;
        }
}

int gguf_dequantize(uint32_t type, const void *src, float *dst, int64_t n) {
    int64_t be, bb;
    if (!gguf_type_block(type, &be, &bb, NULL) || n % be) return -1;
    const uint8_t *s = src;
    if (type == GGUF_F32) {
        memcpy(dst, src, (size_t)n * 4);
        return 0;
    }
    for (int64_t i = 0; i < n / be; i++, s += bb) {
        float *y = dst + i * be;
        switch (type) {
        case GGUF_F16: *y = f16_at(s); break;
        case GGUF_BF16: *y = h3_bf16_to_f32((uint16_t)(s[0] | s[1] << 8)); break;
        case GGUF_Q4_0: q4_0(s, y); break;
        case GGUF_Q4_1: q4_1(s, y); break;
        case GGUF_Q5_0: q5_0(s, y); break;
        case GGUF_Q5_1: q5_1(s, y); break;
        case GGUF_Q8_0: q8_0(s, y); break;
        case GGUF_Q4_K: q4_k(s, y); break;
        case GGUF_Q5_K: q5_k(s, y); break;
        case GGUF_Q6_K: q6_k(s, y); break;
        default: return -1;
        }
    }
    return 0;
}

int gguf_view_as(const gguf_file *f, const gguf_tensor *t, h3_dtype want, h3_tensor *view, void **buf, h3_err *e) {
    *buf = NULL;
    if (want != H3_F32 && want != H3_BF16)
        return h3_fail(e, "%s: tensor %s: internal: a %s view was asked for", f->path, t->name, h3_dtype_name(want));
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    float *y = malloc((size_t)n * sizeof *y);
    if (!y) return h3_fail(e, "%s: tensor %s: out of memory dequantizing %lld values", f->path, t->name, (long long)n);
    const void *src = gguf_data(f, t);
    if (!src || gguf_dequantize(t->type, src, y, n) != 0) {
        free(y);
        return h3_fail(e, "%s: tensor %s: cannot be dequantized", f->path, t->name);
    }
    void *data = y;
    if (want == H3_BF16) { /* in place: element i's 2 bytes land before element i + 1 is read */
        uint16_t *h = (uint16_t *)y;
        for (int64_t i = 0; i < n; i++) h[i] = h3_f32_to_bf16(y[i]);
        data = realloc(y, n > 0 ? (size_t)n * 2 : 1);
        if (!data) data = y;
    }
    memset(view, 0, sizeof *view);
    view->dtype = want;
    view->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++) view->shape[d] = t->shape[d];
    view->data = data;
    view->owns_data = 0;
    *buf = data;
    return 0;
}
