/* The backend interface: the small set of ops the models are written in (llm.c style, no graph).
 *
 * Activations are fp32 buffers in backend memory (host memory on the CPU backend, device memory on
 * CUDA). Weights are h3_tensor in their stored dtype (F32/BF16/F16) whose data lives in backend
 * memory (on the CPU, usually a zero-copy view into the mmap'd safetensors file).
 *
 * Precision: ops compute in fp32. Ops that take `flags` round their output to bf16 when
 * H3_BF16_OUT is set, which is how the bf16 reference mode ("[bf16]" in docs/model/dit.md 0) is reproduced:
 * one rounding per PyTorch op on bf16 tensors. The h3_bf16_* ops keep their activations as bf16 buffers.
 *
 * This header is the base: the backend's life cycle, its memory, and the op table's rules (below). The ops
 * themselves are in ops.h (all groups) or ops_<group>.h. */
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

/* A bf16 activation buffer element: the upper 16 bits of an IEEE fp32, rounded to nearest even (docs/model/dit.md 0). */
typedef uint16_t h3_bf16;

/* Fused activation quantization (docs/fast.md "Fused quantization"): the _q ops of the table also write their bf16
 * output rows' 8-bit codes and scales here, for the W8A8 GEMM that reads them. q [rows][dim] contiguous (E4M3 or
 * int8), scale [rows] or, for int8 with group > 0, [rows][dim / group] (dim a multiple of group). */
enum { H3_ROWQ_FP8 = 1, H3_ROWQ_INT8 = 2 };
typedef struct h3_rowq {
    int      kind; /* H3_ROWQ_FP8 or H3_ROWQ_INT8 */
    void    *q;
    float   *scale;
    int64_t  group; /* int8 only; 0: one scale per row */
} h3_rowq;

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

/* ---- the op table (docs/architecture.md "The op table") ----
 * Every compute op is declared once, as a line H3_OP(name, (parameters), (arguments)) of one of the lists
 * ops_linear.def, ops_attention.def, ops_norm.def, ops_eltwise.def, ops_conv.def, ops_transfer.def (grouped by what
 * the ops compute). From those lines follow the public prototypes h3_<name> (ops_<group>.h, all of them in ops.h),
 * the twins' prototypes cpu_<name> (cpu/cpu_ops.h) and cuda_<name> (cuda/cuda_ops.h), and the dispatchers (ops.c):
 * h3_<name>(be, ...) runs cuda_<name> on a CUDA backend, timed per op under H3_CUDA_OPTIME=1 (docs/tuning.md), and
 * cpu_<name> otherwise. A new op is one H3_OP line, its two twins and a case of tests/test_backend_ops.c. */

/* 1 when be has a twin of every op (the CPU always; CUDA in a CUDA=1 build). */
int h3_ops_supported(const h3_backend *be);

/* The check every twin of a _q op makes first: a bad h3_rowq (no codes, an unknown kind, a group that does not
 * divide the row) is recorded as the backend's error (as other bad arguments) and the op runs nothing. */
static inline int h3_rowq_ok(h3_backend *be, const char *op, const h3_rowq *q, int64_t dim) {
    int ok = q && q->q && q->scale && (q->kind == H3_ROWQ_FP8 || q->kind == H3_ROWQ_INT8) &&
             (q->kind == H3_ROWQ_INT8 || q->group == 0) && q->group >= 0 && (q->group == 0 || dim % q->group == 0);
    if (!ok) h3_backend_unsupported(be, op, "bad h3_rowq (codes, scales, kind, or a group that does not divide the row)");
    return ok;
}

#endif
