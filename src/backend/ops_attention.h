/* Attention ops (the table's lines are in ops_attention.def), the 8-bit attention's codes, and the eager composite.
 *
 * 8-bit attention (`--attention sage8`, docs/fast.md): SageAttention2's scheme on strided bf16 heads.
 *
 * Quantization (h3_sage8_quantize), per the rules below; every division is fp32 (round to nearest), every code
 * rounds half to even:
 *   K smoothing: mean[hk][d] = fp32( fp64 sum over the Skv tokens of k[s][hk][d] / Skv ); ks = fp32(k) - mean
 *                (softmax-invariant: it shifts every score of a query row by the same amount).
 *   Q, K: INT8 symmetric, one scale per block of rows of one head: H3_SAGE8_BQ query rows (a consumer warpgroup's
 *         tile of the CUDA kernel), H3_SAGE8_BK key rows (its K tile):
 *         scale = max(amax(block), H3_SAGE8_MIN_AMAX) / 127, code = clamp(rint(x / scale), -127, 127).
 *   V:    FP8 E4M3, one scale per (kv head, channel): scale = max(amax over the tokens, H3_SAGE8_MIN_AMAX) / 448,
 *         code = e4m3(v / scale) (round to nearest even, saturating). Stored transposed ([hk][d][token], tokens
 *         padded with zero codes to a multiple of H3_SAGE8_BK) with the tokens of each run of 32 permuted
 *         (column c of a run holds token h3_sage8_vt_token(c) of it): that is the order in which the QK^T
 *         accumulator registers of the CUDA kernel already are the FP8 A operand of P V (docs/fast.md 2).
 *
 * Attention (h3_sage8_attention_codes), per query row of head h (hk = h / (Hq / Hkv)), over the key tiles j of
 * H3_SAGE8_BK keys in order, sl2 = fp32(scale * log2(e)), fq = q_scale[h][row / BQ] * sl2:
 *   fsc = fq * k_scale[hk][j]; f[n] = fp32(int32 sum_d qc[d] kc[n][d]) (exact);
 *   mt = max_n(f) * fsc; mn = max(m, mt); corr = exp2(m - mn); m = mn;
 *   p[n] = exp2(fma(f[n], fsc, log2(448) - mn))          (P in [0, 1] times 448, SageAttention2's static scale)
 *   l = l * corr + sum_n p[n];  pv[d] = sum_n e4m3(p[n]) * vc[n][d] (products exact in fp32, a fresh fp32 sum
 *   per tile);  o = (o + pv_prev) * corr, pv_prev = pv   (the two-level accumulation; o += pv_last at the end)
 *   out[row][h * D + d] = bf16( (o[d] * (1 / l)) * v_scale[hk][d] ).
 * The CPU twin (cpu/cpu_sage8.c) is the definition: the same codes bit for bit, exact integer Q K^T, its exp2
 * and sums in fp32 in key order; the CUDA kernel (cuda/cuda_sage8_sm90.cu, head_dim 128 on sm_90a) agrees to
 * summation-order / exp2-approximation noise (its P codes may differ by one step where p sits on a rounding
 * boundary). Other head dims and GPUs run a plain CUDA kernel of the same numerics. */
#ifndef H3_OPS_ATTENTION_H
#define H3_OPS_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

#define H3_SAGE8_BQ       64
#define H3_SAGE8_BK       128
#define H3_SAGE8_MIN_AMAX 1e-20f
#define H3_SAGE8_P_SCALE  448.0f

/* Quantized operands of one attention call, in backend memory (one allocation, h3_sage8_codes_bytes). */
typedef struct h3_sage8_codes {
    int8_t  *q;       /* [Hq][Sq][D] */
    int8_t  *k;       /* [Hkv][Skv][D], smoothed */
    uint8_t *vt;      /* [Hkv][D][Skv_pad] E4M3, runs of 32 tokens permuted (h3_sage8_vt_token) */
    float   *q_scale; /* [Hq][ceil(Sq / BQ)] */
    float   *k_scale; /* [Hkv][ceil(Skv / BK)] */
    float   *v_scale; /* [Hkv][D] */
    float   *k_mean;  /* [Hkv][D] */
    int64_t  Sq, Skv, Skv_pad;
    int      Hq, Hkv, D;
} h3_sage8_codes;

/* Bytes of the buffers of a problem (each 256-byte aligned); layout sets the pointers into base. */
size_t h3_sage8_codes_bytes(int64_t Sq, int64_t Skv, int Hq, int Hkv, int D);
void   h3_sage8_codes_layout(h3_sage8_codes *c, void *base, int64_t Sq, int64_t Skv, int Hq, int Hkv, int D);
/* The token of a run of 32 held by V^T column c (0..31) of that run: c = 16 a + 4 t + i holds token
 * 16 a + 8 (i >> 1) + 2 t + (i & 1). */
static inline int h3_sage8_vt_token(int c) { return (c >> 4) * 16 + ((c >> 1) & 1) * 8 + ((c >> 2) & 3) * 2 + (c & 1); }
/* The rules on host values (the twin, the tests): scale of an INT8 / E4M3 block from its amax, one INT8 code. */
float  h3_sage8_int8_scale(float amax);
float  h3_sage8_fp8_scale(float amax);
int8_t h3_sage8_int8_code(float x, float scale);

#define H3_OP(name, params, args) void h3_##name params;
#include "ops_attention.def"
#undef H3_OP

/* Attention as transformers' eager path computes it (the reference the text encoder's goldens use), same arguments
 * as h3_attention: without H3_BF16_OUT it is h3_attention, with it h3_attention_eager_bf16 (ops_attention.c). */
void h3_attention_eager(h3_backend *be, float *out, int64_t o_stride, const float *q, int64_t q_stride, const float *k,
                        int64_t k_stride, const float *v, int64_t v_stride, int64_t Sq, int64_t Skv, int Hq, int Hkv,
                        int D, float scale, int causal, int flags);

#endif
