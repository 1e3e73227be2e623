/* The LoRA merge on the CPU (cpu_lora.h, docs/lora.md "The merge and its rounding" and "Merge cost"). */
#include "cpu_lora.h"

#include <math.h>
#include <stdlib.h>

#include "../../core/dtype.h"

static inline float round_to(float x, h3_dtype dt) {
    return dt == H3_BF16 ? h3_round_bf16(x) : dt == H3_F16 ? h3_f16_to_f32(h3_f32_to_f16(x)) : x;
}

/* The weight is held in its own dtype (F32, BF16 or F16): every value in it is already rounded to that dtype, so
 * reading it back as fp32 gives exactly the value the merge left (no F32 copy of the whole weight). */
static inline float w_get(const void *W, h3_dtype dt, int64_t i) {
    return dt == H3_BF16 ? h3_bf16_to_f32(((const uint16_t *)W)[i])
         : dt == H3_F16  ? h3_f16_to_f32(((const uint16_t *)W)[i]) : ((const float *)W)[i];
}

static inline void w_set(void *W, h3_dtype dt, int64_t i, float v) {
    if (dt == H3_BF16) ((uint16_t *)W)[i] = h3_f32_to_bf16(v);
    else if (dt == H3_F16) ((uint16_t *)W)[i] = h3_f32_to_f16(v);
    else ((float *)W)[i] = v;
}

void cpu_lora_merge_rows(void *W, h3_dtype dt, int64_t n_o, int64_t n_i, int64_t row_group, int64_t group_stride,
                         const float *B, const float *A, int rank, float s) {
    /* Every element is acc = fmaf(B[o][q], A[q][i], acc) over q = 0..rank-1 in order, then the two roundings:
     * the same bits however the loops are tiled. Tiles of MR rows x NC columns keep the tile of A and the
     * accumulators in L1 and let the compiler use vector FMAs across i; tiles of rows go to the OpenMP threads
     * (a rank-64 release block took 4.1 s on 16 cores with the naive loop, docs/lora.md "Merge cost"). */
    enum { MR = 4, NC = 64 };
#pragma omp parallel for schedule(dynamic, 4) if (n_o * n_i * rank >= (1 << 22))
    for (int64_t o0 = 0; o0 < n_o; o0 += MR) {
        const int mr = n_o - o0 < MR ? (int)(n_o - o0) : MR;
        float acc[MR][NC];
        for (int64_t i0 = 0; i0 < n_i; i0 += NC) {
            const int nc = n_i - i0 < NC ? (int)(n_i - i0) : NC;
            for (int r = 0; r < MR; r++)
                for (int i = 0; i < NC; i++) acc[r][i] = 0.0f;
            for (int q = 0; q < rank; q++) {
                const float *aq = A + (int64_t)q * n_i + i0;
                for (int r = 0; r < mr; r++) {
                    const float bq = B[(o0 + r) * rank + q];
                    float *ac = acc[r];
#pragma omp simd
                    for (int i = 0; i < nc; i++) ac[i] = fmaf(bq, aq[i], ac[i]);
                }
            }
            for (int r = 0; r < mr; r++) {
                const int64_t o = o0 + r, w0 = ((o / row_group) * group_stride + o % row_group) * n_i + i0;
                for (int i = 0; i < nc; i++)
                    w_set(W, dt, w0 + i, round_to(w_get(W, dt, w0 + i) + round_to(acc[r][i] * s, dt), dt));
            }
        }
    }
}
