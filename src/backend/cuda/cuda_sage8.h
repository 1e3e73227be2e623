/* CUDA twins of the 8-bit attention ops (backend_sage8.h), cuda/cuda_sage8.cu; the sm_90a kernel in
 * cuda/cuda_sage8_sm90.cu. Same arguments as h3_sage8_<op>. */
#ifndef H3_CUDA_SAGE8_H
#define H3_CUDA_SAGE8_H

#ifdef __cplusplus
extern "C" {
#endif
#include "../backend_sage8.h"

void cuda_sage8_quantize(h3_backend *be, h3_sage8_codes *c, const h3_bf16 *q, int64_t q_rs, int64_t q_hs,
                         const h3_bf16 *k, int64_t k_rs, int64_t k_hs, const h3_bf16 *v, int64_t v_rs, int64_t v_hs);
void cuda_sage8_attention_codes(h3_backend *be, h3_bf16 *out, int64_t o_rs, const h3_sage8_codes *c, float scale);
void cuda_sage8_attention(h3_backend *be, h3_bf16 *out, int64_t o_rs, const h3_bf16 *q, int64_t q_rs, int64_t q_hs,
                          const h3_bf16 *k, int64_t k_rs, int64_t k_hs, const h3_bf16 *v, int64_t v_rs, int64_t v_hs,
                          int64_t Sq, int64_t Skv, int Hq, int Hkv, int D, float scale);

/* The sm_90a kernel (head_dim 128): 0 when launched, -1 when it does not apply (then the plain kernel runs). */
int  cuda_sage8_sm90(h3_backend *be, uint16_t *out, int64_t o_rs, const h3_sage8_codes *c, float scale);
/* tuning / tests: number of compiled variants of cuda_sage8_sm90 and the one to use (-1: default); 0 makes
 * cuda_sage8_attention_codes skip the sm_90a kernel (tests of the plain kernel): pass cuda_sage8_sm90_variants() */
int  cuda_sage8_sm90_variants(void);
void cuda_sage8_set_variant(h3_backend *be, int v);

#ifdef __cplusplus
}
#endif
#endif
