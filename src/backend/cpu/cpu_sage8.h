/* CPU twin of the 8-bit attention (backend_sage8.h): the definition of its numerics. Same arguments as h3_sage8_<op>. */
#ifndef H3_CPU_SAGE8_H
#define H3_CPU_SAGE8_H

#include "../backend_sage8.h"

void cpu_sage8_quantize(h3_backend *be, h3_sage8_codes *c, const h3_bf16 *q, int64_t q_rs, int64_t q_hs,
                        const h3_bf16 *k, int64_t k_rs, int64_t k_hs, const h3_bf16 *v, int64_t v_rs, int64_t v_hs);
void cpu_sage8_attention_codes(h3_backend *be, h3_bf16 *out, int64_t o_rs, const h3_sage8_codes *c, float scale);
void cpu_sage8_attention(h3_backend *be, h3_bf16 *out, int64_t o_rs, const h3_bf16 *q, int64_t q_rs, int64_t q_hs,
                         const h3_bf16 *k, int64_t k_rs, int64_t k_hs, const h3_bf16 *v, int64_t v_rs, int64_t v_hs,
                         int64_t Sq, int64_t Skv, int Hq, int Hkv, int D, float scale);

#endif
