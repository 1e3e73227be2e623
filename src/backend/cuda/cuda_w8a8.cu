/* CUDA twins of the FP8 W8A8 ops (ops_linear.h).
 *
 * Quantization: one block per row, the row's absmax (fmaxf: order-free, so the scale is the CPU twin's bit
 * for bit), then x / scale (IEEE division) converted with the hardware's RNE saturating E4M3 conversion: the
 * same codes as the CPU's h3_f32_to_f8e4m3. GEMM: cuBLASLt E4M3 x E4M3 with fp32 accumulation and bf16 output,
 * the per-output-channel and per-token scales given as cuBLASLt's outer scale vectors
 * (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F); where the heuristic offers no algorithm for those, an fp32
 * output and one scale + rounding pass; shapes it refuses, a plain dot-product kernel. H3_FP8_FAST_ACCUM=1 turns on cuBLASLt's fast (less precise)
 * FP8 accumulation (a tuning switch). */
#include "cuda_internal.h"
#include "cuda_ops.h"
#include "cuda_rowq.h" /* k_rowq_quant: the quantizer */

#include <cuda_fp8.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" void cuda_fp8_quant_rows(h3_backend *be, uint8_t *q, float *scale, const h3_bf16 *x, int64_t rows,
                                    int64_t dim, int64_t ldx) {
    if (rows <= 0 || dim <= 0) return;
    if (rows > 2147483647) {
        cuda_record_error(be, "fp8_quant_rows", "too many rows");
        return;
    }
    cudaStream_t st = cuda_of(be)->stream;
    int vec = dim % 8 == 0 && ldx % 8 == 0 && ((uintptr_t)x & 15u) == 0 && ((uintptr_t)q & 7u) == 0;
    if (vec) k_rowq_quant<1><<<(unsigned)rows, ROWQ_THREADS, 0, st>>>(H3_ROWQ_FP8, q, scale, x, dim, ldx, dim);
    else k_rowq_quant<0><<<(unsigned)rows, ROWQ_THREADS, 0, st>>>(H3_ROWQ_FP8, q, scale, x, dim, ldx, dim);
    CUDA_LAUNCHED(be, "fp8_quant_rows");
}

/* fallback epilogue: y = bf16(acc * (xs[m] * ws[n]) [+ bias[n]]) */
static __global__ void k_scale_rows_cols(uint16_t *y, int64_t ldy, const float *acc, const float *xs, const float *ws,
                                         const uint16_t *bias, int64_t M, int64_t N) {
    FOR_ROWS_COLS(m, n, M, N) {
        float v = acc[m * N + n] * (xs[m] * ws[n]);
        if (bias) v += __uint_as_float((uint32_t)bias[n] << 16);
        y[m * ldy + n] = f32_to_bf16_bits(v);
    }
}

/* Shapes cuBLASLt's FP8 kernels refuse (rows not 16-byte multiples: the tiny test decoders' 8-wide q|k|v): the
 * fp32 accumulator by one dot product per output, then k_scale_rows_cols. A product of two E4M3 values is exact
 * in fp32, so this differs from the CPU twin's sgemm only in summation order (docs/fast.md 7). */
static __device__ __forceinline__ float e4m3_to_f32(uint8_t c) {
    return __half2float(__half(__nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E4M3)));
}

static __global__ void k_fp8_dot(float *acc, const uint8_t *xq, const uint8_t *wq, int64_t M, int64_t N, int64_t K) {
    FOR_ROWS_COLS(m, n, M, N) {
        float s = 0.0f;
        for (int64_t k = 0; k < K; k++) s += e4m3_to_f32(xq[m * K + k]) * e4m3_to_f32(wq[n * K + k]);
        acc[m * N + n] = s;
    }
}

/* The cached plan of an FP8 GEMM kind, shape, output stride, alignment and accumulation mode, or NULL. */
static cuda_gemm_plan *find_plan(cuda_impl *c, int kind, int64_t M, int64_t N, int64_t K, int64_t ldd, int align,
                                 int fast) {
    for (int i = 0; i < CUDA_PLAN_CACHE; i++) {
        cuda_gemm_plan *p = &c->plans[i];
        if (p->used && p->kind == kind * 1000 + align && p->M == M && p->N == N && p->K == K && p->ldd == ldd &&
            p->bias == fast)
            return p;
    }
    return NULL;
}

static cuda_gemm_plan *new_plan(cuda_impl *c, int kind, int64_t M, int64_t N, int64_t K, int64_t ldd, int align,
                                int fast) {
    cuda_gemm_plan *p = &c->plans[c->plan_next];
    c->plan_next = (c->plan_next + 1) % CUDA_PLAN_CACHE;
    memset(p, 0, sizeof *p);
    p->used = 1, p->kind = kind * 1000 + align, p->M = M, p->N = N, p->K = K, p->ldx = K, p->ldd = ldd, p->bias = fast;
    return p;
}

/* D[N, M] = A^T B in cuBLASLt's column-major terms (A = wq [K x N] op T, B = xq [K x M] op N), D of type dt
 * (ld ldd); kind CUDA_GEMM_FP8 passes the two outer scale vectors, CUDA_GEMM_FP8_F32OUT none (acc only).
 * Finds (and caches) the algorithm; CUBLAS_STATUS_NOT_SUPPORTED when the heuristic has none. */
static cublasStatus_t fp8_gemm(h3_backend *be, int kind, void *y, int64_t ldd, const uint8_t *xq, const float *xs,
                               int64_t M, const h3_fp8_linear *w, int align, int fast) {
    cuda_impl *c = cuda_of(be);
    const int64_t N = w->N, K = w->K;
    const cudaDataType_t dt = kind == CUDA_GEMM_FP8 ? CUDA_R_16BF : CUDA_R_32F;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
    int8_t fast8 = (int8_t)fast;
    cublasStatus_t st;
    const int with_bias = kind == CUDA_GEMM_FP8 && w->bias; /* the bias in cuBLASLt's epilogue (bf16, as D) */
    cuda_gemm_plan *plan = find_plan(c, kind, M, N, K, ldd, align, fast + 2 * with_bias);
    if (plan && plan->mode == 1) return CUBLAS_STATUS_NOT_SUPPORTED;
    if ((st = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) != CUBLAS_STATUS_SUCCESS) return st;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof tA);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof tB);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast8, sizeof fast8);
    if (kind == CUDA_GEMM_FP8) {
        int32_t vec = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
        const void *sa = w->scale, *sb = xs;
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &vec, sizeof vec);
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &vec, sizeof vec);
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa);
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb);
    }
    if (with_bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        cudaDataType_t bt = CUDA_R_16BF;
        const void *bp = w->bias;
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt);
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp);
    }
    if ((st = cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, (uint64_t)K, (uint64_t)N, K)) != CUBLAS_STATUS_SUCCESS ||
        (st = cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, (uint64_t)K, (uint64_t)M, K)) != CUBLAS_STATUS_SUCCESS ||
        (st = cublasLtMatrixLayoutCreate(&ld, dt, (uint64_t)N, (uint64_t)M, ldd)) != CUBLAS_STATUS_SUCCESS)
        goto done;
    if (!plan) {
        cublasLtMatmulAlgo_t algo;
        st = cuda_lt_heuristic(be, op, la, lb, ld, align, &algo);
        plan = new_plan(c, kind, M, N, K, ldd, align, fast + 2 * with_bias);
        if (st != CUBLAS_STATUS_SUCCESS) {
            plan->mode = 1; /* remembered: the next call goes straight to the fallback */
            goto done;
        }
        plan->algo = algo;
    }
    {
        float alpha = 1.0f, beta = 0.0f;
        st = cublasLtMatmul(c->lt, op, &alpha, w->q, la, xq, lb, &beta, y, ld, y, ld, &plan->algo, c->workspace,
                            c->workspace_bytes, c->stream);
    }
done:
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    cublasLtMatmulDescDestroy(op);
    return st;
}

extern "C" void cuda_fp8_matmul(h3_backend *be, h3_bf16 *y, int64_t ldy, const uint8_t *xq, const float *xs, int64_t M,
                                const h3_fp8_linear *w) {
    cuda_impl *c = cuda_of(be);
    const int64_t N = w->N, K = w->K;
    if (M <= 0 || N <= 0) return;
    if (K % 16 || N % 8 || ldy % 8) { /* cuBLASLt's FP8 kernels want 16-byte rows of the operands and outputs */
        float *acc = (float *)cuda_scratch(be, (size_t)(M * N) * sizeof(float));
        if (!acc) return;
        k_fp8_dot<<<grid_rows_cols(M, N, 128), 128, 0, c->stream>>>(acc, xq, w->q, M, N, K);
        CUDA_LAUNCHED(be, "fp8_matmul (unaligned shape)");
        k_scale_rows_cols<<<grid_rows_cols(M, N, 256), 256, 0, c->stream>>>(y, ldy, acc, xs, w->scale,
                                                                            (const uint16_t *)w->bias, M, N);
        CUDA_LAUNCHED(be, "fp8_matmul (scale pass)");
        cuda_free(be, acc);
        return;
    }
    const int fast = h3_knob_int(H3_KNOB_FP8_FAST_ACCUM, 0) > 0;
    int align = cuda_ptr_align(w->q);
    if (cuda_ptr_align(xq) < align) align = cuda_ptr_align(xq);
    if (cuda_ptr_align(y) < align) align = cuda_ptr_align(y);
    cublasStatus_t st = fp8_gemm(be, CUDA_GEMM_FP8, y, ldy, xq, xs, M, w, align, fast);
    if (st == CUBLAS_STATUS_SUCCESS) return;
    /* no algorithm with scale vectors: the fp32 accumulator out, then the scales and the rounding */
    float *acc = (float *)cuda_scratch(be, (size_t)(M * N) * sizeof(float));
    if (!acc) return;
    int a2 = cuda_ptr_align(acc) < align ? cuda_ptr_align(acc) : align;
    st = fp8_gemm(be, CUDA_GEMM_FP8_F32OUT, acc, N, xq, xs, M, w, a2, fast);
    if (st != CUBLAS_STATUS_SUCCESS) {
        char what[128];
        snprintf(what, sizeof what, "cublasLt fp8 matmul (M %lld N %lld K %lld)", (long long)M, (long long)N, (long long)K);
        cuda_record_error(be, what, cublasLtGetStatusString(st));
    } else {
        k_scale_rows_cols<<<grid_rows_cols(M, N, 256), 256, 0, c->stream>>>(y, ldy, acc, xs, w->scale,
                                                                            (const uint16_t *)w->bias, M, N);
        CUDA_LAUNCHED(be, "fp8_matmul (scale pass)");
    }
    cuda_free(be, acc);
}
