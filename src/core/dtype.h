/* Element types of the safetensors format and scalar conversions between them.
 * bf16/f16/f8 conversions round to nearest even, as PyTorch does. */
#ifndef H3_DTYPE_H
#define H3_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum h3_dtype {
    H3_F64, H3_F32, H3_F16, H3_BF16, H3_I64, H3_I32, H3_I16, H3_I8, H3_U8, H3_BOOL,
    H3_F8_E4M3, H3_F8_E5M2, H3_DTYPE_COUNT
} h3_dtype;

size_t      h3_dtype_size(h3_dtype t);
const char *h3_dtype_name(h3_dtype t);          /* safetensors spelling, e.g. "BF16" */
int         h3_dtype_from_name(const char *s);  /* -1 when unknown */
int         h3_dtype_is_float(h3_dtype t);

static inline float h3_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t h3_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN stays NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Rounds an fp32 value to the nearest bf16 and returns it widened back ("[bf16]" in docs/model/dit.md 0). */
static inline float h3_round_bf16(float f) { return h3_bf16_to_f32(h3_f32_to_bf16(f)); }

float    h3_f16_to_f32(uint16_t h);
uint16_t h3_f32_to_f16(float f);
float    h3_f8e4m3_to_f32(uint8_t v);
float    h3_f8e5m2_to_f32(uint8_t v);
uint8_t  h3_f32_to_f8e4m3(float f); /* saturates to +-448 (finite-only format) */
uint8_t  h3_f32_to_f8e5m2(float f);

/* Converts n elements of src (type t) to fp32. Integer and bool types convert by value. */
void h3_convert_to_f32(float *dst, const void *src, h3_dtype t, size_t n);
/* Converts n fp32 values to type t (float types round to nearest even; integer types truncate). */
void h3_convert_from_f32(void *dst, h3_dtype t, const float *src, size_t n);

#endif
