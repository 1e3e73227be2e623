/* The random GGUF blocks of h3_gguf_fill_random (ops_linear.def), one definition for both twins (host and device
 * code: integers only, so both give the same bytes). Block i's bytes are splitmix64 words of seed + i * 32 + w
 * (little-endian), then its scale fields are set: fp16 values 2^(exp2 + off) * (1 + mantissa / 1024) with the
 * mantissa from the word of seed + i * 32 + 31 and off per type (below: about scale / the codes' span), the _1 types'
 * offsets negative and the k-quants' mins positive, near the codes' mean times the scale, so values centre on 0. */
#ifndef H3_GGUF_RANDOM_H
#define H3_GGUF_RANDOM_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define GGUF_HD __host__ __device__
#else
#define GGUF_HD
#endif

/* exp2 of h3_gguf_fill_random's scale: scale = f * 2^(exp2 + 1) with f in [0.5, 1), so 2^exp2 <= scale (0 for a
 * scale that is not finite and positive). Host code: both twins call it before they fill. */
static inline int h3_gguf_scale_exp2(float scale) {
    int exp2 = 0;
    if (scale > 0 && isfinite(scale)) frexpf(scale, &exp2), exp2 -= 1;
    return exp2;
}

GGUF_HD static inline uint64_t gguf_mix64(uint64_t s) {
    uint64_t z = s + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* fp16 bits of sign * 2^e * (1 + m / 1024), e at most 15; below 2^-14 the subnormal with the mantissa shifted
 * (truncated), 0 below 2^-24 (the small block scales of wide rows: real files have them too) */
GGUF_HD static inline uint16_t gguf_f16_bits(int sign, int e, uint32_t m) {
    const uint32_t s = sign ? 0x8000u : 0u;
    e = e > 15 ? 15 : e;
    if (e < -14) return (uint16_t)(s | (-14 - e > 10 ? 0u : (1024u + (m & 0x3ffu)) >> (-14 - e)));
    return (uint16_t)(s | (uint32_t)(e + 15) << 10 | (m & 0x3ffu));
}

GGUF_HD static inline void gguf_put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v, p[1] = (uint8_t)(v >> 8); }

/* One block (bb bytes) of ggml type `type` at dst: the block-scale exponent offsets per type, from the codes' span
 * (Q8_0 127, Q4_0 8, Q5_0 16, Q4_1 15, Q5_1 31; Q4_K / Q5_K sub-scale 63 times 15 / 31 codes; Q6_K int8 sub-scales
 * times 32). Plain types: one value, magnitude [2^exp2, 2^(exp2 + 1)). */
GGUF_HD static inline void gguf_random_block(uint8_t *dst, uint32_t type, int64_t bb, uint64_t i, uint64_t seed, int exp2) {
    const uint64_t base = seed + i * 32;
    for (int64_t j = 0; j < bb; j += 8) {
        const uint64_t w = gguf_mix64(base + (uint64_t)(j / 8));
        for (int64_t k = 0; k < 8 && j + k < bb; k++) dst[j + k] = (uint8_t)(w >> (8 * k));
    }
    const uint64_t r = gguf_mix64(base + 31);
    const uint32_t m1 = (uint32_t)r, m2 = (uint32_t)(r >> 10);
    switch (type) {
    case 0: { /* F32 */
        const uint32_t u = (uint32_t)(r >> 32 & 0x80000000u) | (uint32_t)(exp2 + 127) << 23 | (uint32_t)(r & 0x7fffffu);
        for (int k = 0; k < 4; k++) dst[k] = (uint8_t)(u >> (8 * k));
        break;
    }
    case 1: gguf_put16(dst, gguf_f16_bits((int)(r >> 63), exp2, m1)); break;                       /* F16 */
    case 30: gguf_put16(dst, (uint16_t)((r >> 63) << 15 | (uint32_t)(exp2 + 127) << 7 | (m1 & 0x7f))); break; /* BF16 */
    case 8: gguf_put16(dst, gguf_f16_bits(0, exp2 - 7, m1)); break;  /* Q8_0 */
    case 2: gguf_put16(dst, gguf_f16_bits(0, exp2 - 3, m1)); break;  /* Q4_0 */
    case 6: gguf_put16(dst, gguf_f16_bits(0, exp2 - 4, m1)); break;  /* Q5_0 */
    case 3:                                                          /* Q4_1: d, m ~ -8 d */
        gguf_put16(dst, gguf_f16_bits(0, exp2 - 3, m1)), gguf_put16(dst + 2, gguf_f16_bits(1, exp2, m2));
        break;
    case 7:                                                          /* Q5_1: d, m ~ -16 d */
        gguf_put16(dst, gguf_f16_bits(0, exp2 - 4, m1)), gguf_put16(dst + 2, gguf_f16_bits(1, exp2, m2));
        break;
    case 12:                                                         /* Q4_K: d, dmin ~ 7.5 d */
        gguf_put16(dst, gguf_f16_bits(0, exp2 - 8, m1)), gguf_put16(dst + 2, gguf_f16_bits(0, exp2 - 5, m2));
        break;
    case 13:                                                         /* Q5_K: d, dmin ~ 15.5 d */
        gguf_put16(dst, gguf_f16_bits(0, exp2 - 9, m1)), gguf_put16(dst + 2, gguf_f16_bits(0, exp2 - 5, m2));
        break;
    case 14: gguf_put16(dst + 208, gguf_f16_bits(0, exp2 - 11, m1)); break; /* Q6_K: d last */
    default: break;
    }
}

#endif
