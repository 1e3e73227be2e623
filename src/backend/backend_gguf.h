/* GGUF weights kept in their block form in backend memory (docs/checkpoints.md "Quantized on the GPU"): blocks of a
 * ggml type (src/io/gguf.h gguf_type) expanded into bf16 rows as a block's weights are needed, and random
 * well-formed blocks for release-shape benchmarks without a file.
 *
 * h3_gguf_dequant's value is gguf_dequantize's (ggml's reference arithmetic, docs/checkpoints.md "Types and
 * dequantization") rounded to bf16 with round-to-nearest-even (h3_f32_to_bf16): the bytes of the dequantize-at-load
 * path's bf16 view. The CPU twin (cpu/cpu_gguf.c) calls gguf_dequantize itself; the CUDA twin (cuda/cuda_gguf.cu)
 * forms the same fp32 products in the same order without contraction (--fmad=false) and rounds with the same bit
 * rule, so both are bit-identical (tests/backend_ops/ops_gguf.h). */
#ifndef H3_BACKEND_GGUF_H
#define H3_BACKEND_GGUF_H

#include <stdint.h>

#include "backend_bf16.h"

/* dst[0..n) (bf16, backend memory) = the n values of the GGUF blocks at src (backend memory) of ggml type `type`;
 * n a multiple of the type's block. A type h3 does not read or a partial block: h3_backend_unsupported. */
void h3_gguf_dequant(h3_backend *be, h3_bf16 *dst, const void *src, uint32_t type, int64_t n);

/* nblk random blocks of `type` at dst (backend memory), the same bytes on every backend for (seed, scale): random
 * codes, block scales that are finite positive fp16 values within a factor 2 of what makes the values span about
 * [-scale, scale] (the k-quants' mins and the _1 types' offsets centring them), int8 sub-block scales for Q6_K; for
 * F16 / BF16 / F32 values of magnitude in [s, 2s) with s the power of two at or below scale, random signs. */
void h3_gguf_fill_random(h3_backend *be, void *dst, uint32_t type, int64_t nblk, uint64_t seed, float scale);

#endif
