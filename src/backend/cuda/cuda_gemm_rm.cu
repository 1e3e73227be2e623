/* Row-major strided fp32 GEMM on cuBLASLt (cuda_gemm_rm.h). A row-major C[M,N] = op(A) op(B) is the
 * column-major C^T[N,M] = op(B)^T op(A)^T, so cuBLASLt's first operand is B and its second A. */
#include "cuda_gemm_rm.h"

#include <stdlib.h>
#include <string.h>

namespace {

struct rm_plan {
    int                  used;
    int64_t              key[14];
    cublasLtMatmulAlgo_t algo;
};

enum { RM_PLANS = 64 };
/* one cache per backend (cuda_impl.rm_plans, freed by cuda_gemm_rm_release) */
struct rm_cache {
    rm_plan plans[RM_PLANS];
    int     next;
};

} // namespace

extern "C" void cuda_sgemm_rm(h3_backend *be, int ta, int tb, int64_t M, int64_t N, int64_t K, const float *A,
                              int64_t lda, const float *B, int64_t ldb, float *C, int64_t ldc, int batch, int64_t sa,
                              int64_t sb, int64_t sc) {
    cuda_impl *c = cuda_of(be);
    if (M <= 0 || N <= 0 || batch <= 0) return;
    if (K <= 0) { /* empty sum: zeros (cuBLASLt rejects K = 0) */
        for (int i = 0; i < batch; i++)
            CUDA_OK(be, cudaMemset2DAsync(C + i * sc, (size_t)ldc * 4, 0, (size_t)N * 4, (size_t)M, c->stream));
        return;
    }
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
    /* cuBLASLt operand 1 = B (col-major view: [N,K] when !tb with ld ldb, else [K,N] transposed) */
    cublasOperation_t t1 = tb ? CUBLAS_OP_T : CUBLAS_OP_N, t2 = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    uint64_t r1 = tb ? (uint64_t)K : (uint64_t)N, c1 = tb ? (uint64_t)N : (uint64_t)K;
    uint64_t r2 = ta ? (uint64_t)M : (uint64_t)K, c2 = ta ? (uint64_t)K : (uint64_t)M;
    int align = cuda_ptr_align(A);
    if (cuda_ptr_align(B) < align) align = cuda_ptr_align(B);
    if (cuda_ptr_align(C) < align) align = cuda_ptr_align(C);
    /* every row start and batch operand must be as aligned as the bases (conservative: an odd leading
     * dimension or batch stride limits the kernels to 4-byte accesses) */
    {
        int64_t dims[6] = {lda, ldb, ldc, batch > 1 ? sa : 0, batch > 1 ? sb : 0, batch > 1 ? sc : 0};
        for (int i = 0; i < 6; i++)
            if (dims[i] && cuda_ptr_align((const void *)(uintptr_t)(dims[i] * 4)) < align)
                align = cuda_ptr_align((const void *)(uintptr_t)(dims[i] * 4));
    }
    char what[160];
    snprintf(what, sizeof what, "cublasLt sgemm_rm (M %lld N %lld K %lld, batch %d)", (long long)M, (long long)N,
             (long long)K, batch);
    int64_t key[14] = {(int64_t)(uintptr_t)c->lt, ta, tb, M, N, K, lda, ldb, ldc, batch, sa, sb, sc, align};
    rm_plan *plan = NULL;
    if (!c->rm_plans && !(c->rm_plans = calloc(1, sizeof(rm_cache)))) {
        cuda_record_error(be, "sgemm_rm", "out of memory for the plan cache");
        return;
    }
    rm_cache *cache = (rm_cache *)c->rm_plans;

    if ((st = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) != CUBLAS_STATUS_SUCCESS) goto fail;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t1, sizeof t1);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &t2, sizeof t2);
    if ((st = cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, r1, c1, ldb)) != CUBLAS_STATUS_SUCCESS) goto fail;
    if ((st = cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, r2, c2, lda)) != CUBLAS_STATUS_SUCCESS) goto fail;
    if ((st = cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, (uint64_t)N, (uint64_t)M, ldc)) != CUBLAS_STATUS_SUCCESS)
        goto fail;
    if (batch > 1) {
        int32_t bc = batch;
        cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc);
        cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc);
        cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc);
        cublasLtMatrixLayoutSetAttribute(la, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sb, sizeof sb);
        cublasLtMatrixLayoutSetAttribute(lb, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sa, sizeof sa);
        cublasLtMatrixLayoutSetAttribute(ld, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &sc, sizeof sc);
    }
    for (int i = 0; i < RM_PLANS; i++)
        if (cache->plans[i].used && !memcmp(cache->plans[i].key, key, sizeof key)) {
            plan = &cache->plans[i];
            break;
        }
    if (!plan) {
        cublasLtMatmulAlgo_t algo;
        if ((st = cuda_lt_heuristic(be, op, la, lb, ld, align, &algo)) != CUBLAS_STATUS_SUCCESS) goto fail;
        plan = &cache->plans[cache->next];
        cache->next = (cache->next + 1) % RM_PLANS;
        plan->used = 1;
        memcpy(plan->key, key, sizeof key);
        plan->algo = algo;
    }
    {
        float alpha = 1.0f, beta = 0.0f;
        st = cublasLtMatmul(c->lt, op, &alpha, B, la, A, lb, &beta, C, ld, C, ld, &plan->algo, c->workspace,
                            c->workspace_bytes, c->stream);
        if (st != CUBLAS_STATUS_SUCCESS) goto fail;
    }
    goto done;
fail:
    cuda_record_error(be, what, cublasLtGetStatusString(st));
done:
    if (ld) cublasLtMatrixLayoutDestroy(ld);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (op) cublasLtMatmulDescDestroy(op);
}

extern "C" void cuda_gemm_rm_release(h3_backend *be) {
    free(cuda_of(be)->rm_plans);
    cuda_of(be)->rm_plans = NULL;
}
