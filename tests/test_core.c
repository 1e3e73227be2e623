/* dtype conversions and tensor helpers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/tensor.h"
#include "core/text.h"
#include "core/tuning.h"
#include "test.h"

static uint32_t f2u(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float u2f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* the strict number syntax and the quoting of core/text.h */
static void test_text(void) {
    long v = 0;
    uint64_t u = 0;
    double d = 0;
    CHECK(h3_parse_int("128", 1, 1000, &v) == 0 && v == 128, "128");
    CHECK(h3_parse_int("007", 1, 1000, &v) == 0 && v == 7, "leading zeros are decimal");
    static const char *const bad_int[] = {"", " 128", "128 ", "+7", "-1", "0x10", "1e3", "12a", "1001", "0", "\t5"};
    for (size_t i = 0; i < sizeof bad_int / sizeof bad_int[0]; i++)
        CHECK(h3_parse_int(bad_int[i], 1, 1000, &v) == -1, "'%s' refused", bad_int[i]);
    CHECK(h3_parse_u64("18446744073709551615", &u) == 0 && u == UINT64_MAX, "2^64-1");
    CHECK(h3_parse_u64("18446744073709551616", &u) == -1 && h3_parse_u64(" -1", &u) == -1 && h3_parse_u64("+7", &u) == -1,
          "2^64, ' -1', '+7' refused");
    CHECK(h3_parse_decimal("14.375", &d) == 0 && d == 14.375, "14.375");
    CHECK(h3_parse_decimal("5", &d) == 0 && d == 5 && h3_parse_decimal(".5", &d) == 0 && d == 0.5 &&
              h3_parse_decimal("5.", &d) == 0 && d == 5, "5, .5, 5.");
    static const char *const bad_dec[] = {"", ".", "0x5", "1e1", " 6", "6 ", "-3", "+3", "inf", "nan", "1.2.3", "1,5"};
    for (size_t i = 0; i < sizeof bad_dec / sizeof bad_dec[0]; i++)
        CHECK(h3_parse_decimal(bad_dec[i], &d) == -1, "'%s' refused", bad_dec[i]);
    CHECK(!strcmp(h3_quote("a\tb"), "a\\x09b"), "control bytes escaped: %s", h3_quote("a\tb"));
    char big[5000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    const char *q = h3_quote(big);
    CHECK(strlen(q) < H3_QUOTE_MAX + 40 && strstr(q, "... (4999 bytes)"), "long input truncated: %zu bytes", strlen(q));
    const char *q1 = h3_quote("one"), *q2 = h3_quote("two");
    CHECK(!strcmp(q1, "one") && !strcmp(q2, "two"), "two quotes in one call");
}

/* The knob table (src/core/tuning.c): unique H3_* names (TMPDIR the one system variable), every one a row of
 * docs/tuning.md, values read live (the tests set knobs between runs), unknown H3_* names reported. */
static void test_tuning(void) {
    char doc[65536];
    FILE *f = fopen("docs/tuning.md", "rb");
    size_t n = f ? fread(doc, 1, sizeof doc - 1, f) : 0;
    if (f) fclose(f);
    doc[n] = 0;
    CHECK(n > 0, "docs/tuning.md readable");
    for (int k = 0; k < H3_KNOB_COUNT; k++) {
        const h3_knob_info *a = h3_knob_about((h3_knob)k);
        CHECK(a && a->name && a->type && a->dflt && a->meaning, "knob %d has a full row", k);
        if (!a) continue;
        CHECK(!strncmp(a->name, "H3_", 3) || !strcmp(a->name, "TMPDIR"), "knob name %s", a->name);
        char row[80];
        snprintf(row, sizeof row, "| `%s` |", a->name);
        CHECK(strstr(doc, row) != NULL, "docs/tuning.md has the row of %s", a->name);
        for (int j = 0; j < k; j++) CHECK(strcmp(a->name, h3_knob_about((h3_knob)j)->name), "%s listed twice", a->name);
    }
    CHECK(h3_knob_about(H3_KNOB_COUNT) == NULL, "no row past the table");
    unsetenv("H3_VAE_BATCH");
    CHECK(h3_knob_get(H3_KNOB_VAE_BATCH) == NULL && h3_knob_int(H3_KNOB_VAE_BATCH, -7) == -7, "unset knob");
    setenv("H3_VAE_BATCH", "3", 1);
    CHECK(h3_knob_int(H3_KNOB_VAE_BATCH, -7) == 3 && h3_knob_is(H3_KNOB_VAE_BATCH, "3") && !h3_knob_is(H3_KNOB_VAE_BATCH, "0"),
          "set knob read live");
    setenv("H3_NO_SUCH_KNOB_FOR_TEST", "1", 1);
    char buf[512];
    int u = h3_knob_unknown(buf, sizeof buf);
    CHECK(u >= 1 && strstr(buf, "H3_NO_SUCH_KNOB_FOR_TEST") && !strstr(buf, "H3_VAE_BATCH"), "unknown knobs: %d '%s'", u, buf);
    unsetenv("H3_NO_SUCH_KNOB_FOR_TEST"), unsetenv("H3_VAE_BATCH");
    u = h3_knob_unknown(buf, sizeof buf);
    CHECK(!strstr(buf, "H3_NO_SUCH_KNOB_FOR_TEST"), "unset unknown knob no longer listed: '%s'", buf);
}

int main(void) {
    test_text();
    /* bf16: round to nearest even on the 16 dropped bits. */
    CHECK(h3_f32_to_bf16(1.0f) == 0x3f80, "1.0");
    CHECK(h3_f32_to_bf16(u2f(0x3f808000)) == 0x3f80, "tie to even (down)");
    CHECK(h3_f32_to_bf16(u2f(0x3f818000)) == 0x3f82, "tie to even (up)");
    CHECK(h3_f32_to_bf16(u2f(0x3f808001)) == 0x3f81, "above half rounds up");
    CHECK(h3_f32_to_bf16(u2f(0x7f7fffff)) == 0x7f80, "max float rounds to inf");
    CHECK(isnan(h3_bf16_to_f32(h3_f32_to_bf16(NAN))), "NaN stays NaN");
    int bf_ok = 1;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = h3_bf16_to_f32((uint16_t)h);
        if (!isnan(f) && h3_f32_to_bf16(f) != h) bf_ok = 0;
    }
    CHECK(bf_ok, "every bf16 value round-trips");

    /* f16: every value round-trips; rounding of midpoints is to even. */
    int f16_ok = 1;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = h3_f16_to_f32((uint16_t)h);
        if (!isnan(f) && h3_f32_to_f16(f) != h) f16_ok = 0;
    }
    CHECK(f16_ok, "every f16 value round-trips");
    CHECK(h3_f16_to_f32(0x3c00) == 1.0f && h3_f16_to_f32(0x0001) == 0x1p-24f && h3_f16_to_f32(0x7bff) == 65504.0f,
          "f16 decode (1, min subnormal, max)");
    CHECK(h3_f32_to_f16(1.0f + 0x1p-11f) == 0x3c00, "f16 tie to even down");
    CHECK(h3_f32_to_f16(1.0f + 3 * 0x1p-11f) == 0x3c02, "f16 tie to even up");
    CHECK(h3_f32_to_f16(65520.0f) == 0x7c00 && h3_f32_to_f16(65519.0f) == 0x7bff, "f16 overflow threshold");
    CHECK(h3_f32_to_f16(0x1p-25f) == 0x0000 && h3_f32_to_f16(0x1.8p-25f) == 0x0001, "f16 subnormal rounding");

    /* f8: all finite codes round-trip; known values. */
    int e4_ok = 1, e5_ok = 1;
    for (int v = 0; v < 256; v++) {
        float f = h3_f8e4m3_to_f32((uint8_t)v);
        if (!isnan(f) && h3_f32_to_f8e4m3(f) != v && !(f == 0 && (v & 0x7f) == 0)) e4_ok = 0;
        float g = h3_f8e5m2_to_f32((uint8_t)v);
        if (!isnan(g) && h3_f32_to_f8e5m2(g) != v) e5_ok = 0;
    }
    CHECK(e4_ok, "every finite F8_E4M3 value round-trips");
    CHECK(e5_ok, "every F8_E5M2 value round-trips");
    CHECK(h3_f8e4m3_to_f32(0x7e) == 448.0f && h3_f8e4m3_to_f32(0x01) == 0x1p-9f && isnan(h3_f8e4m3_to_f32(0x7f)),
          "e4m3 max, min subnormal, NaN");
    CHECK(h3_f32_to_f8e4m3(1000.0f) == 0x7e, "e4m3 saturates");
    CHECK(h3_f8e5m2_to_f32(0x7b) == 57344.0f && isinf(h3_f8e5m2_to_f32(0x7c)), "e5m2 max, inf");

    /* dtype names and sizes. */
    CHECK(h3_dtype_from_name("BF16") == H3_BF16 && h3_dtype_from_name("F8_E5M2") == H3_F8_E5M2 &&
              h3_dtype_from_name("bf16") == -1 && h3_dtype_from_name("") == -1,
          "dtype names");
    CHECK(h3_dtype_size(H3_I64) == 8 && h3_dtype_size(H3_BOOL) == 1 && h3_dtype_size(H3_F16) == 2, "dtype sizes");

    /* Bulk conversions. */
    float src[5] = {1.5f, -2.25f, 3.0f, 0.0f, 100.0f}, dst[5];
    uint16_t b[5];
    h3_convert_from_f32(b, H3_BF16, src, 5);
    h3_convert_to_f32(dst, b, H3_BF16, 5);
    CHECK(!memcmp(src, dst, sizeof src), "bf16 bulk round trip of exact values");
    int64_t i64[3] = {-3, 0, 1LL << 40};
    h3_convert_to_f32(dst, i64, H3_I64, 3);
    CHECK(dst[0] == -3.0f && dst[2] == 0x1p40f, "int64 to f32");

    /* Tensors and metrics. */
    h3_err e;
    int64_t shape[3] = {2, 3, 4};
    h3_tensor *t = h3_tensor_new(H3_BF16, 3, shape, &e);
    CHECK(t && h3_tensor_numel(t) == 24 && h3_tensor_nbytes(t) == 48, "tensor size");
    char s[64];
    CHECK(!strcmp(h3_shape_str(shape, 3, s, sizeof s), "[2,3,4]"), "shape string %s", s);
    h3_tensor_free(t);
    int64_t bad[1] = {-1};
    CHECK(h3_tensor_new(H3_F32, 1, bad, &e) == NULL && strstr(e.msg, "negative"), "negative dim rejected: %s", e.msg);
    float a[3] = {1, 2, 2}, r[3] = {1, 2, 3};
    CHECK(fabs(h3_rel_l2(a, r, 3) - 1.0 / sqrt(14.0)) < 1e-12 && h3_max_abs(a, r, 3) == 1.0, "metrics");
    (void)f2u;
    test_tuning();
    TEST_END();
}
