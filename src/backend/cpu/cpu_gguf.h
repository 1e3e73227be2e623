/* CPU twins of the GGUF block ops (backend_gguf.h). exp2: the block scale's power of two (the dispatcher's, from
 * the scale); the twins use integers only there. */
#ifndef H3_CPU_GGUF_H
#define H3_CPU_GGUF_H

#include "../backend_gguf.h"

void cpu_gguf_dequant(h3_backend *be, h3_bf16 *dst, const void *src, uint32_t type, int64_t n);
void cpu_gguf_fill_random(h3_backend *be, void *dst, uint32_t type, int64_t nblk, uint64_t seed, int exp2);

#endif
