/* cpu_expf_shifted (cpu_exp.h). With AVX2 + FMA, e^x is computed in double, 4 lanes at a time, with a relative
 * error near 1e-11, and rounded to float. That is libm's expf result except where e^x lies close to a midpoint
 * between two floats: libm's expf is within 0.502 of a float step of e^x, so it can only round the other way
 * within 0.002 of a step of a midpoint. A lane within 1/256 of a step of one (about 0.2 % of them), or with x
 * outside [-87, 0] (denormal or large results, infinities, NaN), takes libm's expf itself.
 * tests/test_cpu_exp.c compares the two on floats across [-88, 0] (every one of them with --all). */
#include "cpu_exp.h"

#include <math.h>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

/* e^x for x in [-87, 0]: x = n ln2 + r with |r| <= ln2 / 2, e^r by its Taylor series to r^9 (relative
 * error below 7e-12), 2^n through the exponent bits */
static inline __m256d exp_pd(__m256d x) {
    const __m256d log2e = _mm256_set1_pd(1.4426950408889634), ln2 = _mm256_set1_pd(0.6931471805599453);
    __m256d n = _mm256_round_pd(_mm256_mul_pd(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fnmadd_pd(n, ln2, x);
    __m256d r2 = _mm256_mul_pd(r, r), r4 = _mm256_mul_pd(r2, r2), r8 = _mm256_mul_pd(r4, r4);
    __m256d p01 = _mm256_fmadd_pd(r, _mm256_set1_pd(1.0), _mm256_set1_pd(1.0));
    __m256d p23 = _mm256_fmadd_pd(r, _mm256_set1_pd(1.0 / 6), _mm256_set1_pd(1.0 / 2));
    __m256d p45 = _mm256_fmadd_pd(r, _mm256_set1_pd(1.0 / 120), _mm256_set1_pd(1.0 / 24));
    __m256d p67 = _mm256_fmadd_pd(r, _mm256_set1_pd(1.0 / 5040), _mm256_set1_pd(1.0 / 720));
    __m256d p89 = _mm256_fmadd_pd(r, _mm256_set1_pd(1.0 / 362880), _mm256_set1_pd(1.0 / 40320));
    __m256d p03 = _mm256_fmadd_pd(r2, p23, p01), p47 = _mm256_fmadd_pd(r2, p67, p45);
    __m256d p = _mm256_fmadd_pd(r8, p89, _mm256_fmadd_pd(r4, p47, p03));
    __m256i e = _mm256_slli_epi64(_mm256_add_epi64(_mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(n)),
                                                   _mm256_set1_epi64x(1023)), 52);
    return _mm256_mul_pd(p, _mm256_castsi256_pd(e));
}

void cpu_expf_shifted(float *s, int64_t n, float shift) {
    /* a double's 29 mantissa bits below a float's: 2^28 is the midpoint, NEAR the band left to libm */
    const int64_t NEAR = (int64_t)1 << 21;
    const __m128 vshift = _mm_set1_ps(shift), lo = _mm_set1_ps(-87.0f), hi = _mm_set1_ps(0.0f);
    const __m256i low_bits = _mm256_set1_epi64x(((int64_t)1 << 29) - 1), mid = _mm256_set1_epi64x((int64_t)1 << 28);
    const __m256i near_hi = _mm256_set1_epi64x(NEAR), near_lo = _mm256_set1_epi64x(-NEAR);
    int64_t j = 0;
    while (j + 4 <= n) {
        /* the lanes libm decides are kept aside and done after each block, so the vector loop calls nothing */
        enum { BLK = 256 };
        float held_x[BLK];
        int64_t held_j[BLK];
        int nheld = 0;
        const int64_t end = n - j >= BLK ? j + BLK : j + ((n - j) & ~(int64_t)3);
        for (; j < end; j += 4) {
            __m128 x = _mm_sub_ps(_mm_loadu_ps(s + j), vshift); /* the scalar loop's float subtraction */
            __m256d y = exp_pd(_mm256_cvtps_pd(x));
            __m256i d = _mm256_sub_epi64(_mm256_and_si256(_mm256_castpd_si256(y), low_bits), mid);
            __m256i near = _mm256_and_si256(_mm256_cmpgt_epi64(d, near_lo), _mm256_cmpgt_epi64(near_hi, d));
            int in = _mm_movemask_ps(_mm_and_ps(_mm_cmp_ps(x, lo, _CMP_GE_OQ), _mm_cmp_ps(x, hi, _CMP_LE_OQ)));
            int held = _mm256_movemask_pd(_mm256_castsi256_pd(near)) | (~in & 0xf);
            _mm_storeu_ps(s + j, _mm256_cvtpd_ps(y));
            if (held) {
                float xs[4];
                _mm_storeu_ps(xs, x);
                for (int l = 0; l < 4; l++)
                    if (held >> l & 1) held_x[nheld] = xs[l], held_j[nheld++] = j + l;
            }
        }
        for (int k = 0; k < nheld; k++) s[held_j[k]] = expf(held_x[k]);
    }
    for (; j < n; j++) s[j] = expf(s[j] - shift);
}

#else

void cpu_expf_shifted(float *s, int64_t n, float shift) {
    for (int64_t j = 0; j < n; j++) s[j] = expf(s[j] - shift);
}

#endif
