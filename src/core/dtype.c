#include "dtype.h"

#include <math.h>
#include <string.h>

static const struct {
    const char *name;
    size_t      size;
} dtype_info[H3_DTYPE_COUNT] = {
    [H3_F64] = {"F64", 8},   [H3_F32] = {"F32", 4},         [H3_F16] = {"F16", 2},
    [H3_BF16] = {"BF16", 2}, [H3_I64] = {"I64", 8},         [H3_I32] = {"I32", 4},
    [H3_I16] = {"I16", 2},   [H3_I8] = {"I8", 1},           [H3_U8] = {"U8", 1},
    [H3_BOOL] = {"BOOL", 1}, [H3_F8_E4M3] = {"F8_E4M3", 1}, [H3_F8_E5M2] = {"F8_E5M2", 1},
};

size_t h3_dtype_size(h3_dtype t) { return (unsigned)t < H3_DTYPE_COUNT ? dtype_info[t].size : 0; }
const char *h3_dtype_name(h3_dtype t) { return (unsigned)t < H3_DTYPE_COUNT ? dtype_info[t].name : "?"; }

int h3_dtype_from_name(const char *s) {
    for (int i = 0; i < H3_DTYPE_COUNT; i++)
        if (!strcmp(s, dtype_info[i].name)) return i;
    return -1;
}

int h3_dtype_is_float(h3_dtype t) {
    return t == H3_F64 || t == H3_F32 || t == H3_F16 || t == H3_BF16 || t == H3_F8_E4M3 || t == H3_F8_E5M2;
}

float h3_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: value = man * 2^-24 */
            float f = (float)man * 0x1p-24f;
            memcpy(&u, &f, 4);
            u |= sign;
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round-to-nearest-even conversion of a finite or special fp32 into a narrow float format with
 * `ebits` exponent bits and `mbits` mantissa bits (IEEE-like: max exponent reserved for inf/nan
 * unless finite_only). Returns the encoded magnitude bits without sign. */
static uint32_t narrow_float(float f, int ebits, int mbits, int finite_only, uint32_t max_finite_bits) {
    float a = fabsf(f);
    int bias = (1 << (ebits - 1)) - 1;
    if (isnan(f)) return finite_only ? 0x7f : (((1u << ebits) - 1) << mbits) | (1u << (mbits - 1));
    int e;
    float m = frexpf(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    if (a == 0.0f) return 0;
    int exp = e - 1 + bias; /* biased exponent of a = 1.m * 2^(e-1) */
    double scaled;
    uint32_t bits;
    if (exp <= 0) { /* subnormal: units of 2^(1-bias-mbits) */
        scaled = ldexp((double)a, bias - 1 + mbits);
    } else {
        scaled = ldexp((double)m * 2.0 - 1.0, mbits); /* mantissa fraction in units */
    }
    double fl = floor(scaled), rem = scaled - fl;
    uint64_t q = (uint64_t)fl;
    if (rem > 0.5 || (rem == 0.5 && (q & 1))) q++;
    if (exp <= 0) {
        bits = (uint32_t)q; /* may carry into the first normal exponent: still correct encoding */
    } else {
        bits = ((uint32_t)exp << mbits) + (uint32_t)q; /* carry moves into exponent */
    }
    uint32_t inf_bits = ((1u << ebits) - 1) << mbits;
    if (finite_only) {
        if (bits > max_finite_bits) bits = max_finite_bits;
    } else if (bits >= inf_bits) {
        bits = inf_bits;
    }
    (void)max_finite_bits;
    return bits;
}

uint16_t h3_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    if (isinf(f)) return sign | 0x7c00;
    return sign | (uint16_t)narrow_float(f, 5, 10, 0, 0);
}

float h3_f8e4m3_to_f32(uint8_t v) {
    /* E4M3 (fn): bias 7, no infinities, 0x7f/0xff are NaN. */
    int sign = v >> 7, exp = (v >> 3) & 0xf, man = v & 7;
    float r;
    if ((v & 0x7f) == 0x7f) return NAN;
    if (exp == 0) r = ldexpf((float)man, -9);
    else r = ldexpf(1.0f + man / 8.0f, exp - 7);
    return sign ? -r : r;
}

float h3_f8e5m2_to_f32(uint8_t v) {
    /* E5M2 is the top byte of an f16. */
    return h3_f16_to_f32((uint16_t)(v << 8));
}

uint8_t h3_f32_to_f8e4m3(float f) {
    uint8_t sign = signbit(f) ? 0x80 : 0;
    if (isnan(f)) return 0x7f;
    if (isinf(f)) return sign | 0x7e;
    return sign | (uint8_t)narrow_float(f, 4, 3, 1, 0x7e);
}

uint8_t h3_f32_to_f8e5m2(float f) {
    uint8_t sign = signbit(f) ? 0x80 : 0;
    if (isinf(f)) return sign | 0x7c;
    return sign | (uint8_t)narrow_float(f, 5, 2, 0, 0);
}

void h3_convert_to_f32(float *dst, const void *src, h3_dtype t, size_t n) {
    switch (t) {
    case H3_F32: memmove(dst, src, n * 4); break;
    case H3_F64: for (size_t i = 0; i < n; i++) dst[i] = (float)((const double *)src)[i]; break;
    case H3_BF16: for (size_t i = 0; i < n; i++) dst[i] = h3_bf16_to_f32(((const uint16_t *)src)[i]); break;
    case H3_F16: for (size_t i = 0; i < n; i++) dst[i] = h3_f16_to_f32(((const uint16_t *)src)[i]); break;
    case H3_F8_E4M3: for (size_t i = 0; i < n; i++) dst[i] = h3_f8e4m3_to_f32(((const uint8_t *)src)[i]); break;
    case H3_F8_E5M2: for (size_t i = 0; i < n; i++) dst[i] = h3_f8e5m2_to_f32(((const uint8_t *)src)[i]); break;
    case H3_I64: for (size_t i = 0; i < n; i++) dst[i] = (float)((const int64_t *)src)[i]; break;
    case H3_I32: for (size_t i = 0; i < n; i++) dst[i] = (float)((const int32_t *)src)[i]; break;
    case H3_I16: for (size_t i = 0; i < n; i++) dst[i] = (float)((const int16_t *)src)[i]; break;
    case H3_I8: for (size_t i = 0; i < n; i++) dst[i] = (float)((const int8_t *)src)[i]; break;
    case H3_U8:
    case H3_BOOL: for (size_t i = 0; i < n; i++) dst[i] = (float)((const uint8_t *)src)[i]; break;
    default: break;
    }
}

void h3_convert_from_f32(void *dst, h3_dtype t, const float *src, size_t n) {
    switch (t) {
    case H3_F32: memmove(dst, src, n * 4); break;
    case H3_F64: for (size_t i = 0; i < n; i++) ((double *)dst)[i] = src[i]; break;
    case H3_BF16: for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = h3_f32_to_bf16(src[i]); break;
    case H3_F16: for (size_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = h3_f32_to_f16(src[i]); break;
    case H3_F8_E4M3: for (size_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = h3_f32_to_f8e4m3(src[i]); break;
    case H3_F8_E5M2: for (size_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = h3_f32_to_f8e5m2(src[i]); break;
    case H3_I64: for (size_t i = 0; i < n; i++) ((int64_t *)dst)[i] = (int64_t)src[i]; break;
    case H3_I32: for (size_t i = 0; i < n; i++) ((int32_t *)dst)[i] = (int32_t)src[i]; break;
    case H3_I16: for (size_t i = 0; i < n; i++) ((int16_t *)dst)[i] = (int16_t)src[i]; break;
    case H3_I8: for (size_t i = 0; i < n; i++) ((int8_t *)dst)[i] = (int8_t)src[i]; break;
    case H3_U8: for (size_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = (uint8_t)src[i]; break;
    case H3_BOOL: for (size_t i = 0; i < n; i++) ((uint8_t *)dst)[i] = src[i] != 0.0f; break;
    default: break;
    }
}
