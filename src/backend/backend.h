/* The backend interface: the small set of ops the models are written in (llm.c style, no graph).
 *
 * Activations are fp32 buffers in backend memory (host memory on the CPU backend, device memory on
 * CUDA). Weights are h3_tensor in their stored dtype (F32/BF16/F16) whose data lives in backend
 * memory (on the CPU, usually a zero-copy view into the mmap'd safetensors file).
 *
 * Precision: ops compute in fp32. Ops that take `flags` round their output to bf16 when
 * H3_BF16_OUT is set, which is how the bf16 reference mode ("[bf16]" in docs/model/dit.md 0) is reproduced:
 * one rounding per PyTorch op on bf16 tensors.
 *
 * Every op is a plain function h3_OP(be, ...) that dispatches to cpu_OP (src/backend/cpu/) or
 * cuda_OP (src/backend/cuda/, built with CUDA=1) with the same arguments. Component-specific ops
 * (convolutions, AdaLN modulation, ...) live in backend_<topic>.h next to this file. */
#ifndef H3_BACKEND_H
#define H3_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "../core/error.h"
#include "../core/tensor.h"
#include "../core/tuning.h" /* the knobs of docs/tuning.md, read by the ops and their callers */

typedef enum h3_backend_kind { H3_BACKEND_CPU = 0, H3_BACKEND_CUDA = 1 } h3_backend_kind;

typedef struct h3_backend {
    h3_backend_kind kind;
    int             nthreads;
    void           *impl; /* backend-private state (CUDA: stream, cuBLASLt handle, workspace) */
    int             failed;       /* the CPU's first recorded failure (h3_backend_unsupported), for h3_backend_check */
    char            failure[256];
} h3_backend;

/* H3_F16_IN (h3_matmul with F16 weights; ignored for other weights): x is rounded to fp16 (nearest even) before the
 * product, as the reference's fp16-autocast linears cast their input; fp32 accumulation and output (bias in fp32). */
enum { H3_BF16_OUT = 1, H3_F16_IN = 2 };

/* nthreads <= 0: all cores. Fails for CUDA when the binary was built without CUDA. */
h3_backend *h3_backend_new(h3_backend_kind kind, int nthreads, h3_err *e);
/* The same on CUDA device `device` (h3_backend_new: device 0); the CPU ignores it. */
h3_backend *h3_backend_new_on(h3_backend_kind kind, int nthreads, int device, h3_err *e);
void        h3_backend_free(h3_backend *be);
const char *h3_backend_name(const h3_backend *be);
/* First failure since the backend was made (the ops are void: a CUDA/cuBLASLt error, an op called on a backend
 * that has no twin for it, a CPU twin out of memory for its scratch): 0 when none, else -1 with e filled. Check
 * after a phase (after h3_sync) to turn a recorded failure into an error. */
int  h3_backend_check(h3_backend *be, h3_err *e);
/* For dispatchers of ops without a twin on be's kind (and CPU twins that cannot run): records "<op>: no <kind>
 * twin (<why>)" as the backend's first failure and runs nothing; h3_backend_check reports it (library code prints
 * nothing itself). */
void h3_backend_unsupported(h3_backend *be, const char *op, const char *why);

/* ---- memory ---- */
void *h3_alloc(h3_backend *be, size_t bytes);            /* zeroed; NULL when out of memory */
void  h3_free(h3_backend *be, void *p);
void  h3_upload(h3_backend *be, void *dst, const void *src_host, size_t bytes);
void  h3_download(h3_backend *be, void *dst_host, const void *src, size_t bytes);
void  h3_copy(h3_backend *be, void *dst, const void *src, size_t bytes);
void  h3_sync(h3_backend *be);
/* rows x width bytes from src (row pitch spitch) to dst (row pitch dpitch), both backend memory, not overlapping;
 * ordered with the backend's other ops (the packing of sequence parallelism's exchanges, docs/parallel.md). */
void  h3_copy_2d(h3_backend *be, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows);
/* Makes be's device current on the calling thread (CUDA: cudaSetDevice; the CPU: nothing): a thread that runs ops
 * on a backend it did not make calls it first (one thread per rank, docs/parallel.md). */
void  h3_backend_bind_thread(h3_backend *be);
/* A weight resident on the backend: CPU returns a view of t (no copy), CUDA uploads.
 * Free with h3_weight_free. */
h3_tensor *h3_weight_upload(h3_backend *be, const h3_tensor *t, h3_err *e);
void       h3_weight_free(h3_backend *be, h3_tensor *w);

/* ---- linear algebra ---- */
/* y[M,N] = x[M,K] . W[N,K]^T (+ bias[N]); W is F32, BF16 or F16, bias any float type or NULL.
 * fp32 accumulation; bf16 weights are widened tile by tile, never the whole matrix at once. */
void h3_matmul(h3_backend *be, float *y, const float *x, int64_t M, const h3_tensor *w,
               const h3_tensor *bias, int flags);

/* Scaled dot-product attention, no dropout. q: [Sq, Hq*D] rows (row stride q_stride floats),
 * k/v: [Skv, Hkv*D] (strides k_stride/v_stride), out: [Sq, Hq*D] (stride o_stride).
 * Hq must be a multiple of Hkv (grouped-query: q head h reads kv head h / (Hq/Hkv)).
 * causal: query i sees keys 0..i (requires Sq == Skv). softmax in fp32. */
void h3_attention(h3_backend *be, float *out, int64_t o_stride, const float *q, int64_t q_stride,
                  const float *k, int64_t k_stride, const float *v, int64_t v_stride, int64_t Sq,
                  int64_t Skv, int Hq, int Hkv, int D, float scale, int causal, int flags);

/* ---- normalization (x: rows x dim, contiguous; y may alias x) ---- */
/* y = x * rsqrt(mean(x^2) + eps) * w; w may be NULL (no gain). One rounding at the end. */
void h3_rmsnorm(h3_backend *be, float *y, const float *x, int64_t rows, int64_t dim, const float *w,
                float eps, int flags);
/* y = (x - mean) * rsqrt(var + eps) * w + b; w/b may be NULL. Biased variance. */
void h3_layernorm(h3_backend *be, float *y, const float *x, int64_t rows, int64_t dim,
                  const float *w, const float *b, float eps, int flags);
/* x: [N, C, L] (L = all trailing dims); statistics over (C/groups) x L per (n, group). */
void h3_groupnorm(h3_backend *be, float *y, const float *x, int64_t N, int64_t C, int64_t L,
                  int groups, const float *w, const float *b, float eps, int flags);

/* ---- rotary embedding ("rotate half" on the first rot_dim channels of each head) ----
 * x: rows x (nheads*head_dim) with row stride `stride`; cos/sin: rows x rot_dim.
 * out[d] = x[d]*cos[d] - x[d+rot/2]*sin[d] for d < rot/2, x[d]*cos[d] + x[d-rot/2]*sin[d] otherwise;
 * channels >= rot_dim pass through. With H3_BF16_OUT each product and the sum round to bf16 and
 * cos/sin are rounded to bf16 first (the bf16 reference order of docs/model/dit.md 4.7). In place. */
void h3_rope_half(h3_backend *be, float *x, int64_t rows, int64_t stride, int nheads, int head_dim,
                  int rot_dim, const float *cos, const float *sin, int flags);

/* ---- element-wise (n elements, contiguous; y may alias inputs) ---- */
void h3_silu(h3_backend *be, float *y, const float *x, int64_t n, int flags);
void h3_gelu_tanh(h3_backend *be, float *y, const float *x, int64_t n, int flags);
void h3_gelu_erf(h3_backend *be, float *y, const float *x, int64_t n, int flags);
void h3_add(h3_backend *be, float *y, const float *a, const float *b, int64_t n, int flags);
void h3_mul(h3_backend *be, float *y, const float *a, const float *b, int64_t n, int flags);
void h3_scale(h3_backend *be, float *y, const float *x, float s, int64_t n, int flags);
void h3_round_bf16_buf(h3_backend *be, float *x, int64_t n);
/* y[r, :] += bias[:] for rows x dim */
void h3_add_bias(h3_backend *be, float *y, const float *bias, int64_t rows, int64_t dim, int flags);

#endif
