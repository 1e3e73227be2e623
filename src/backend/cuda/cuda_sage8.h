/* The sm_90a kernel of the 8-bit attention (cuda/cuda_sage8_sm90.cu) behind cuda_sage8_attention_codes
 * (cuda/cuda_sage8.cu; the table's twins are declared in cuda_ops.h). */
#ifndef H3_CUDA_SAGE8_H
#define H3_CUDA_SAGE8_H

#ifdef __cplusplus
extern "C" {
#endif
#include "../ops.h"

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
