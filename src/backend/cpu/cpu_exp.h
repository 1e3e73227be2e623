/* The CPU twins' exponential: libm's expf bit for bit, several values at a time (docs/architecture.md
 * "The CPU twins' loops"). */
#ifndef H3_CPU_EXP_H
#define H3_CPU_EXP_H

#include <stdint.h>

/* s[j] = expf(s[j] - shift) for j < n: the same bits as that scalar loop, for every input. */
void cpu_expf_shifted(float *s, int64_t n, float shift);

#endif
