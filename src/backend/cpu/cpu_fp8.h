/* CPU twins of the FP8 W8A8 ops (backend_fp8.h): they define the numerics. Same arguments as h3_fp8_<op>. */
#ifndef H3_CPU_FP8_H
#define H3_CPU_FP8_H

#include "../backend_fp8.h"

void cpu_fp8_quant_rows(h3_backend *be, uint8_t *q, float *scale, const h3_bf16 *x, int64_t rows, int64_t dim,
                        int64_t ldx);
void cpu_fp8_matmul(h3_backend *be, h3_bf16 *y, int64_t ldy, const uint8_t *xq, const float *xs, int64_t M,
                    const h3_fp8_linear *w);

#endif
