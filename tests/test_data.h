/* Shared test data: one random generator (xorshift64*, uniform [-1, 1) floats with 24 random bits) and the
 * host-side comparison the tests print and check. Used by tests/test_*.c, tests/backend_ops/ and tests/cuda/ in
 * place of the copies each file used to carry. Each binary seeds the generator itself (test_seed) where its inputs
 * must not depend on what ran before. Include after test.h (CHECK, CHECK_CLOSE). */
#ifndef H3_TEST_DATA_H
#define H3_TEST_DATA_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "core/tensor.h"

static uint64_t h3t_rng = 0x2545F4914F6CDD1Dull;

static inline void test_seed(uint64_t seed) { h3t_rng = seed ? seed : 0x2545F4914F6CDD1Dull; }

/* uniform in [-1, 1), multiples of 2^-23 */
static inline float frand(void) {
    h3t_rng ^= h3t_rng >> 12, h3t_rng ^= h3t_rng << 25, h3t_rng ^= h3t_rng >> 27;
    return (float)((h3t_rng * 0x2545F4914F6CDD1Dull) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

/* n floats uniform in [-scale, scale), rounded to bf16 when bf16 is set (malloc'd; n 0 gives a 1-element block) */
static inline float *rand_host(int64_t n, float scale, int bf16) {
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        x[i] = frand() * scale;
        if (bf16) x[i] = h3_round_bf16(x[i]);
    }
    return x;
}

/* n floats offset + uniform [-scale, scale) */
static inline float *rand_offset(int64_t n, float scale, float offset) {
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = offset + frand() * scale;
    return x;
}

/* n bf16 values (bit patterns) of uniform [-scale, scale) */
static inline uint16_t *rand_bf16(int64_t n, float scale) {
    uint16_t *x = malloc((size_t)(n > 0 ? n : 1) * 2);
    for (int64_t i = 0; i < n; i++) x[i] = h3_f32_to_bf16(frand() * scale);
    return x;
}

/* n floats, all NaN (poisoned outputs: an unwritten element fails a comparison) */
static inline float *host_nan(int64_t n) {
    float *x = malloc((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = NAN;
    return x;
}

/* got vs ref on the host: prints the relative L2 and max-abs errors and checks rel_l2 <= tol (a NaN fails);
 * tol 0 also requires every element bit-identical (the sign of zeros too). Returns the relative L2 error. */
static inline double compare(const char *name, const float *got, const float *ref, int64_t n, double tol) {
    double rel = h3_rel_l2(got, ref, (size_t)n), mx = h3_max_abs(got, ref, (size_t)n);
    if (rel != rel) rel = INFINITY;
    int64_t diff = 0;
    for (int64_t i = 0; i < n; i++) diff += memcmp(&got[i], &ref[i], sizeof(float)) != 0;
    printf("  %-56s max_abs %.3e, %lld of %lld differ\n", name, mx, (long long)diff, (long long)n);
    CHECK_CLOSE(name, rel, tol);
    if (tol == 0.0) CHECK(diff == 0, "%s: %lld elements not bit-identical", name, (long long)diff);
    return rel;
}

#endif
