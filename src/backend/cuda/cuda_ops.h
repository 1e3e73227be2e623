/* The CUDA twins of every op of the table (backend.h "The op table"), plus the backend's life cycle and a few
 * entry points for tests and benchmarks. Same arguments as cpu_<op> (cpu/cpu_ops.h); all pointers are device
 * memory. Plain C interface: the implementations are extern "C" in the .cu files.
 *
 * Precision of each path (docs/cuda.md has the details and the measured errors):
 *   matmul  F32 weight                     fp32 SGEMM (cuBLASLt COMPUTE_32F, no TF32): exact fp32 path
 *           BF16/F16 weight, no H3_BF16_OUT weight widened to fp32 tile by tile, then fp32 SGEMM
 *           BF16 weight with H3_BF16_OUT   x rounded to bf16 (exact when x is bf16 already, as in the
 *                                          reference's mixed mode), BF16 x BF16 tensor cores, fp32
 *                                          accumulate, fp32 bias add, one bf16 rounding
 *   attention with H3_BF16_OUT and D in {64, 128}: q/k/v rounded to bf16, then cuDNN's fused SDPA
 *           (non-causal) or the own flash kernel (causal, or no cuDNN engine): fp32 scores and
 *           softmax, P rounded to bf16 like torch's SDPA, fp32 accumulation, bf16 output;
 *           otherwise an fp32 kernel (online softmax, fp32 throughout).
 *   everything else: fp32 arithmetic in the CPU twin's order (compiled with --fmad=false), one bf16
 *           rounding where the twin rounds.
 * H3_CUDA_PRECISION=fp32 forces the fp32 paths everywhere (for parity runs of the bf16 mode). */
#ifndef H3_CUDA_OPS_H
#define H3_CUDA_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* the project headers are C: give their declarations C linkage when nvcc compiles a .cu */
#ifdef __cplusplus
extern "C" {
#endif
#include "../backend.h"
#include "../ops.h"

int  cuda_backend_init(h3_backend *be, int device, h3_err *e); /* device: the CUDA device index */
void cuda_backend_shutdown(h3_backend *be);
/* First CUDA/cuBLASLt error since init (ops are void): 0 when none, else -1 with e filled. */
int  cuda_backend_check(h3_backend *be, h3_err *e);
/* Records the first failure (one line on stderr): "cuda backend: <what> failed: <detail>". */
void cuda_record_error(h3_backend *be, const char *what, const char *detail);

void *cuda_alloc(h3_backend *be, size_t bytes);
void  cuda_free(h3_backend *be, void *p);
void  cuda_upload(h3_backend *be, void *dst, const void *src_host, size_t bytes);
void  cuda_download(h3_backend *be, void *dst_host, const void *src, size_t bytes);
void  cuda_copy(h3_backend *be, void *dst, const void *src, size_t bytes);
void  cuda_sync(h3_backend *be);
void  cuda_copy_2d(h3_backend *be, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows);
void  cuda_bind_thread(h3_backend *be);

/* cuda_<name> for every line of the op table (made from the lists) */
#define H3_OP(name, params, args) void cuda_##name params;
#include "../ops_list.h"
#undef H3_OP

/* Per-op device time (H3_CUDA_OPTIME=1): events around each timed op; the report (one line per op
 * name: calls, total ms, share) goes to stderr at shutdown or on cuda_optime_report. */
int  cuda_optime_begin(h3_backend *be, const char *name);
void cuda_optime_end(h3_backend *be, int mark);
void cuda_optime_report(h3_backend *be);

/* ---- for tests and benchmarks (bf16 data as uint16_t bit patterns, device memory) ---- */
/* Widened-weight tile size of the fp32 matmul path in elements (tests force several tiles). */
void cuda_set_widen_tile(h3_backend *be, int64_t elems);
/* y[M,N] (bf16) = x[M,K] (bf16) . w[N,K]^T (bf16), fp32 accumulation: the raw cuBLASLt GEMM. */
void cuda_gemm_bf16(h3_backend *be, uint16_t *y, const uint16_t *x, const uint16_t *w, int64_t M, int64_t N,
                    int64_t K);
/* Flash attention on head-major bf16 q [Hq][Sq][D], k/v [Hkv][Skv][D]; out fp32 rows [Sq][o_stride]
 * (head h at column h*D), rounded to bf16 when round_out. D in {64, 128}. */
void cuda_flash_attention_bf16(h3_backend *be, float *out, int64_t o_stride, const uint16_t *q, const uint16_t *k,
                               const uint16_t *v, int64_t Sq, int64_t Skv, int Hq, int Hkv, int D, float scale,
                               int causal, int round_out);
/* cuDNN fused SDPA (non-causal) on the same head-major bf16 q/k/v; o is bf16 rows [Sq][Hq*D].
 * Returns -1 when cuDNN has no engine for the shape (the caller then uses the own kernel). */
int  cuda_cudnn_attention_bf16(h3_backend *be, uint16_t *o, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                               int64_t Sq, int64_t Skv, int Hq, int Hkv, int D, float scale);
/* The same on strided bf16 heads: element (s, h, d) of q at q[s*q_rs + h*q_hs + d] (k, v likewise);
 * o rows [Sq][o_rs] with head h at column h*D. -1 when no engine accepts the strides. */
int  cuda_cudnn_attention_bf16_strided(h3_backend *be, uint16_t *o, int64_t o_rs, const uint16_t *q, int64_t q_rs,
                                       int64_t q_hs, const uint16_t *k, int64_t k_rs, int64_t k_hs, const uint16_t *v,
                                       int64_t v_rs, int64_t v_hs, int64_t Sq, int64_t Skv, int Hq, int Hkv, int D,
                                       float scale);
/* Hopper wgmma flash attention (cuda_flash_sm90.cu): non-causal, bf16, head_dim D 128 or 64, Hq % Hkv == 0.
 * q/k/v/out are device bf16 with element strides: element (row s, head h, channel d) of q is
 * q[s*q_rs + h*q_hs + d], likewise k, v, out. fp32 scores and online softmax (exp2 with scale*log2e),
 * P rounded to bf16 before P V, fp32 accumulation, output rounded once to bf16 (nearest even).
 * q/k/v: 16-byte aligned bases, strides multiples of 8 elements; out: 4-byte aligned, even strides.
 * Any Sq, Skv >= 1. Returns 0, or -1 if the shape, layout or device is unsupported (caller falls back). */
int  cuda_flash_sm90(h3_backend *be, uint16_t *out, int64_t o_rs, int64_t o_hs, const uint16_t *q, int64_t q_rs,
                     int64_t q_hs, const uint16_t *k, int64_t k_rs, int64_t k_hs, const uint16_t *v, int64_t v_rs,
                     int64_t v_hs, int64_t Sq, int64_t Skv, int Hq, int Hkv, int D, float scale);
/* The same over `batch` (1..65535) independent problems of one shape in one launch: item b's q/k/v/out
 * start b*q_bs / k_bs / v_bs / o_bs elements after item 0's (multiples of 8, out: even; ignored when
 * batch == 1). Rows past Sq / Skv of an item are never read or written, so each item's result is
 * bit-identical to a cuda_flash_sm90 call on it. cuda_flash_sm90 is batch 1. */
int  cuda_flash_sm90_batched(h3_backend *be, int64_t batch, int64_t q_bs, int64_t k_bs, int64_t v_bs, int64_t o_bs,
                             uint16_t *out, int64_t o_rs, int64_t o_hs, const uint16_t *q, int64_t q_rs, int64_t q_hs,
                             const uint16_t *k, int64_t k_rs, int64_t k_hs, const uint16_t *v, int64_t v_rs,
                             int64_t v_hs, int64_t Sq, int64_t Skv, int Hq, int Hkv, int D, float scale);
/* tuning / tests: number of compiled variants of cuda_flash_sm90 and the one to use (-1: default) */
int  cuda_flash_sm90_variants(void);
void cuda_flash_sm90_set_variant(h3_backend *be, int v);
/* 0: h3_attention's bf16 path uses the own flash kernel only; 1 (default unless H3_ATTN=own): cuDNN
 * SDPA first for non-causal attention. */
void cuda_set_attention_cudnn(h3_backend *be, int enable);
/* fp32 -> bf16 conversion (round to nearest even) of n elements. */
void cuda_f32_to_bf16(h3_backend *be, uint16_t *dst, const float *src, int64_t n);
/* Uniform values in [-scale, scale) from a hash of (index, seed), on the device. */
void cuda_fill_random(h3_backend *be, float *x, int64_t n, uint64_t seed, float scale);
void cuda_fill_random_bf16(h3_backend *be, uint16_t *x, int64_t n, uint64_t seed, float scale);
/* Device-event timing: mark(0) ... mark(1), then elapsed_ms() waits for mark 1 and returns the gap. */
void  cuda_mark(h3_backend *be, int slot);
float cuda_elapsed_ms(h3_backend *be);

#ifdef __cplusplus
}
#endif

#endif
