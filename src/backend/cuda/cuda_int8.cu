/* CUDA twins of the INT8 W8A8 ops (ops_linear.h, docs/int8.md): the same codes, scales, int32 accumulators and
 * bf16 outputs as the CPU twins (cpu/cpu_int8.c), bit for bit.
 *
 * Quantization: one block per row (or per run of `group` channels), the absmax with fmaxf (order-free, so the
 * scale is the CPU's), the scale and x / scale as IEEE divisions (__fdiv_rn), __float2int_rn (round half to even,
 * as the CPU's rintf in the default rounding mode), clamp +-127. GEMM: cuBLASLt IMMA, int8 x int8 with
 * CUBLAS_COMPUTE_32I and an int32 output (exact: integer sums have no order), the fastest of the heuristic's first
 * candidates timed at first use of a shape (pick_algo), or, where the heuristic offers none, an exact tiled kernel. Dequantization: its own pass over the int32 accumulators with the CPU's
 * expression evaluated in the same order, every operation rounded once (__fmul_rn / __fadd_rn, and the file is
 * built with --fmad=false): fp32(acc) * sx[m] * sw[n] (+ bias[n]), or for groups the running fp32 sum over the
 * groups, times sw[n] (the groups' GEMMs as one strided batch over the K ranges, one int32 tile each). The int32
 * tiles are staged in scratch in row chunks of at most INT8_ACC_BYTES. */
#include "cuda_internal.h"
#include "cuda_int8.h"
#include "cuda_rowq.h" /* k_rowq_quant: the quantizer */

#include <stdio.h>
#include <string.h>

/* the int32 accumulators of one chunk of rows (scratch): 512 MiB keeps the DiT phase's peak low while every
 * chunk of the release's GEMMs (M = 19540: ~4000 rows) stays large enough for the tensor cores */
#define INT8_ACC_BYTES (512LL << 20)

static __device__ __forceinline__ float bf16_at(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }

extern "C" void cuda_int8_quant_rows(h3_backend *be, int8_t *q, float *scale, const h3_bf16 *x, int64_t rows,
                                     int64_t dim, int64_t ldx, int64_t group) {
    if (rows <= 0 || dim <= 0) return;
    const int64_t g = group > 0 ? group : dim, ng = dim / g;
    if (rows > 2147483647 || ng > 65535 || dim % g) {
        cuda_record_error(be, "int8_quant_rows", "too many rows or groups, or dim not a multiple of the group");
        return;
    }
    cudaStream_t st = cuda_of(be)->stream;
    const int vec = g % 8 == 0 && dim % 8 == 0 && ldx % 8 == 0 && ((uintptr_t)x & 15u) == 0 && ((uintptr_t)q & 7u) == 0;
    dim3 grid((unsigned)rows, (unsigned)ng);
    if (vec) k_rowq_quant<1><<<grid, ROWQ_THREADS, 0, st>>>(H3_ROWQ_INT8, (uint8_t *)q, scale, x, dim, ldx, g);
    else k_rowq_quant<0><<<grid, ROWQ_THREADS, 0, st>>>(H3_ROWQ_INT8, (uint8_t *)q, scale, x, dim, ldx, g);
    CUDA_LAUNCHED(be, "int8_quant_rows");
}

/* ---------------------------------------------------------------- int8 x int8 -> int32 */

/* The fallback: d[m, n] (row stride ldd) = sum_k x[m, k] w[n, k] over K, 16 x 16 tiles, exact int32. */
static __global__ void k_gemm_s8_tiled(int32_t *d, int64_t ldd, const int8_t *x, int64_t ldx, const int8_t *w,
                                       int64_t ldw, int64_t M, int64_t N, int64_t K) {
    __shared__ int32_t sx[16][17], sw[16][17];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t n = (int64_t)blockIdx.x * 16 + tx, nw = (int64_t)blockIdx.x * 16 + ty, mblocks = (M + 15) / 16;
    for (int64_t mb = blockIdx.y; mb < mblocks; mb += gridDim.y) {
        const int64_t m = mb * 16 + ty;
        int32_t acc = 0;
        for (int64_t k0 = 0; k0 < K; k0 += 16) {
            sx[ty][tx] = m < M && k0 + tx < K ? (int32_t)x[m * ldx + k0 + tx] : 0;
            sw[ty][tx] = nw < N && k0 + tx < K ? (int32_t)w[nw * ldw + k0 + tx] : 0;
            __syncthreads();
#pragma unroll
            for (int kk = 0; kk < 16; kk++) acc += sx[ty][kk] * sw[tx][kk];
            __syncthreads();
        }
        if (m < M && n < N) d[m * ldd + n] = acc;
    }
}

/* plans of CUDA_GEMM_S8_S32OUT keep the batch count in `bias` */
static cuda_gemm_plan *find_plan(cuda_impl *c, int64_t M, int64_t N, int64_t K, int64_t ldx, int64_t ldd, int align,
                                 int batch) {
    for (int i = 0; i < CUDA_PLAN_CACHE; i++) {
        cuda_gemm_plan *p = &c->plans[i];
        if (p->used && p->kind == CUDA_GEMM_S8_S32OUT * 1000 + align && p->M == M && p->N == N && p->K == K &&
            p->ldx == ldx && p->ldd == ldd && p->bias == batch)
            return p;
    }
    return NULL;
}

enum { INT8_ALGOS = 8 };

/* The fastest of cuBLASLt's first INT8_ALGOS heuristic candidates for this GEMM, each timed once after one untimed
 * run (on the operands themselves; d is overwritten, the caller's GEMM follows): the heuristic's first choice for
 * IMMA is not always its fastest. Runs once per shape (the plan cache), at the model's first forward. */
static cublasStatus_t pick_algo(h3_backend *be, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la, cublasLtMatrixLayout_t lb,
                                cublasLtMatrixLayout_t ld, int align, const int8_t *w, const int8_t *x, int32_t *d,
                                cublasLtMatmulAlgo_t *best) {
    cuda_impl *c = cuda_of(be);
    cublasLtMatmulHeuristicResult_t res[INT8_ALGOS];
    int nres = 0;
    cublasStatus_t st = cuda_lt_heuristics(be, op, la, lb, ld, align, INT8_ALGOS, res, &nres);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    *best = res[0].algo;
    cudaEvent_t ev[2] = {NULL, NULL};
    if (nres == 1 || cudaEventCreate(&ev[0]) != cudaSuccess || cudaEventCreate(&ev[1]) != cudaSuccess) {
        if (ev[0]) cudaEventDestroy(ev[0]);
        (void)cudaGetLastError();
        return CUBLAS_STATUS_SUCCESS;
    }
    float best_ms = 1e30f;
    const int32_t alpha = 1, beta = 0;
    for (int i = 0; i < nres; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
        if (cublasLtMatmul(c->lt, op, &alpha, w, la, x, lb, &beta, d, ld, d, ld, &res[i].algo, c->workspace,
                           c->workspace_bytes, c->stream) != CUBLAS_STATUS_SUCCESS)
            continue;
        float ms = 0.0f;
        cudaEventRecord(ev[0], c->stream);
        st = cublasLtMatmul(c->lt, op, &alpha, w, la, x, lb, &beta, d, ld, d, ld, &res[i].algo, c->workspace,
                            c->workspace_bytes, c->stream);
        cudaEventRecord(ev[1], c->stream);
        if (st != CUBLAS_STATUS_SUCCESS || cudaEventSynchronize(ev[1]) != cudaSuccess ||
            cudaEventElapsedTime(&ms, ev[0], ev[1]) != cudaSuccess)
            continue;
        if (ms < best_ms) best_ms = ms, *best = res[i].algo;
    }
    cudaEventDestroy(ev[0]), cudaEventDestroy(ev[1]);
    (void)cudaGetLastError(); /* a candidate that failed to launch is not the op's error */
    return CUBLAS_STATUS_SUCCESS;
}

/* d[m, n] (row stride ldd) = sum_{k < K} x[m, k] w[n, k], x row stride ldx, w row stride ldw: cuBLASLt's
 * column-major D[N, M] = A^T B with A = w [K x N] (op T), B = x [K x M] (op N). batch > 1: `batch` such products,
 * item b on x + b * koff, w + b * koff (consecutive K ranges: the groups) into d + b * dstride. The algorithm is
 * cached per shape; a shape the heuristic has none for is remembered and goes to k_gemm_s8_tiled. */
static void s8_gemm(h3_backend *be, int32_t *d, int64_t ldd, const int8_t *x, int64_t ldx, int64_t M, const int8_t *w,
                    int64_t ldw, int64_t N, int64_t K, int batch = 1, int64_t koff = 0, int64_t dstride = 0) {
    cuda_impl *c = cuda_of(be);
    if (M <= 0 || N <= 0) return;
    int align = cuda_ptr_align(w);
    if (cuda_ptr_align(x) < align) align = cuda_ptr_align(x);
    if (cuda_ptr_align(d) < align) align = cuda_ptr_align(d);
    if (batch > 1 && (cuda_ptr_align(x + koff) < align || cuda_ptr_align(d + dstride) < align)) align = 4;
    const int lt_ok = ldx == ldw && ldx % 4 == 0 && ldd % 4 == 0 && K % 4 == 0 && align >= 4 && koff % 4 == 0;
    cuda_gemm_plan *plan = lt_ok ? find_plan(c, M, N, K, ldx, ldd, align, batch) : NULL;
    cublasStatus_t st = CUBLAS_STATUS_NOT_SUPPORTED;
    if (lt_ok && !(plan && plan->mode == 1)) {
        cublasLtMatmulDesc_t op = NULL;
        cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
        cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
        if ((st = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32I, CUDA_R_32I)) == CUBLAS_STATUS_SUCCESS) {
            cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof tA);
            cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof tB);
            if ((st = cublasLtMatrixLayoutCreate(&la, CUDA_R_8I, (uint64_t)K, (uint64_t)N, ldw)) == CUBLAS_STATUS_SUCCESS &&
                (st = cublasLtMatrixLayoutCreate(&lb, CUDA_R_8I, (uint64_t)K, (uint64_t)M, ldx)) == CUBLAS_STATUS_SUCCESS &&
                (st = cublasLtMatrixLayoutCreate(&ld, CUDA_R_32I, (uint64_t)N, (uint64_t)M, ldd)) == CUBLAS_STATUS_SUCCESS) {
                if (batch > 1) {
                    int32_t bc = batch;
                    cublasLtMatrixLayout_t ls[3] = {la, lb, ld};
                    int64_t off[3] = {koff, koff, dstride};
                    for (int i = 0; i < 3; i++) {
                        cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc);
                        cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &off[i], sizeof off[i]);
                    }
                }
                if (!plan) {
                    cublasLtMatmulAlgo_t algo;
                    st = pick_algo(be, op, la, lb, ld, align, w, x, d, &algo);
                    plan = &c->plans[c->plan_next];
                    c->plan_next = (c->plan_next + 1) % CUDA_PLAN_CACHE;
                    memset(plan, 0, sizeof *plan);
                    plan->used = 1, plan->kind = CUDA_GEMM_S8_S32OUT * 1000 + align;
                    plan->M = M, plan->N = N, plan->K = K, plan->ldx = ldx, plan->ldd = ldd, plan->bias = batch;
                    if (st != CUBLAS_STATUS_SUCCESS) plan->mode = 1;
                    else plan->algo = algo;
                }
                if (st == CUBLAS_STATUS_SUCCESS) {
                    int32_t alpha = 1, beta = 0;
                    st = cublasLtMatmul(c->lt, op, &alpha, w, la, x, lb, &beta, d, ld, d, ld, &plan->algo, c->workspace,
                                        c->workspace_bytes, c->stream);
                }
            }
        }
        if (ld) cublasLtMatrixLayoutDestroy(ld);
        if (lb) cublasLtMatrixLayoutDestroy(lb);
        if (la) cublasLtMatrixLayoutDestroy(la);
        if (op) cublasLtMatmulDescDestroy(op);
        if (st == CUBLAS_STATUS_SUCCESS) return;
        if (plan && plan->mode != 1) { /* an algorithm was found but failed to run: a real error */
            char what[128];
            snprintf(what, sizeof what, "cublasLt int8 matmul (M %lld N %lld K %lld)", (long long)M, (long long)N,
                     (long long)K);
            cuda_record_error(be, what, cublasLtGetStatusString(st));
            return;
        }
    }
    int64_t gy = (M + 15) / 16;
    dim3 grid((unsigned)((N + 15) / 16), (unsigned)(gy > 65535 ? 65535 : gy));
    for (int b = 0; b < batch; b++)
        k_gemm_s8_tiled<<<grid, dim3(16, 16), 0, c->stream>>>(d + b * dstride, ldd, x + b * koff, ldx, w + b * koff, ldw, M, N, K);
    CUDA_LAUNCHED(be, "int8 gemm (tiled kernel)");
}

extern "C" void cuda_int8_gemm_s32(h3_backend *be, int32_t *acc, const int8_t *xq, int64_t M, const h3_int8_linear *w,
                                   int64_t k0, int64_t kn) {
    s8_gemm(be, acc, w->N, xq + k0, w->K, M, w->q + k0, w->K, w->N, kn);
}

/* ---------------------------------------------------------------- the dequantization */

/* y[m, n] = bf16(fp32(acc[m, n]) * xs[m] * ws[n] (+ bias[n])), left to right. V = 4: N % 4 == 0, ldy % 4 == 0,
 * y 8-byte, acc and ws 16-byte aligned. */
template <int V>
static __global__ void k_dequant(uint16_t *y, int64_t ldy, const int32_t *acc, const float *xs, const float *ws,
                                 const uint16_t *bias, int64_t M, int64_t N) {
    FOR_ROWS_COLS(m, c, M, N / V) {
        const float sx = xs[m];
        if (V == 4) {
            const int4 a = ((const int4 *)(acc + m * N))[c];
            const float4 s = ((const float4 *)ws)[c];
            float v[4] = {__fmul_rn(__fmul_rn(__int2float_rn(a.x), sx), s.x), __fmul_rn(__fmul_rn(__int2float_rn(a.y), sx), s.y),
                          __fmul_rn(__fmul_rn(__int2float_rn(a.z), sx), s.z), __fmul_rn(__fmul_rn(__int2float_rn(a.w), sx), s.w)};
            if (bias)
#pragma unroll
                for (int i = 0; i < 4; i++) v[i] = __fadd_rn(v[i], bf16_at(bias[4 * c + i]));
            uint2 o = make_uint2((uint32_t)f32_to_bf16_bits(v[0]) | ((uint32_t)f32_to_bf16_bits(v[1]) << 16),
                                 (uint32_t)f32_to_bf16_bits(v[2]) | ((uint32_t)f32_to_bf16_bits(v[3]) << 16));
            ((uint2 *)(y + m * ldy))[c] = o;
        } else {
            float v = __fmul_rn(__fmul_rn(__int2float_rn(acc[m * N + c]), sx), ws[c]);
            if (bias) v = __fadd_rn(v, bf16_at(bias[c]));
            y[m * ldy + c] = f32_to_bf16_bits(v);
        }
    }
}

/* groups: acc holds ng int32 tiles [M, N], tile j at acc + j * tstride; y = bf16(s * ws[n]
 * (+ bias[n])) with s = 0 + fp32(acc_0) * xs[m, 0] + fp32(acc_1) * xs[m, 1] + ... left to right, as the CPU twin */
static __global__ void k_dequant_groups(uint16_t *y, int64_t ldy, const int32_t *acc, int64_t tstride, const float *xs,
                                        int64_t ng, const float *ws, const uint16_t *bias, int64_t M, int64_t N) {
    FOR_ROWS_COLS(m, n, M, N) {
        const int64_t i = m * N + n;
        float s = 0.0f;
        for (int64_t j = 0; j < ng; j++) s = __fadd_rn(s, __fmul_rn(__int2float_rn(acc[j * tstride + i]), xs[m * ng + j]));
        float v = __fmul_rn(s, ws[n]);
        if (bias) v = __fadd_rn(v, bf16_at(bias[n]));
        y[m * ldy + n] = f32_to_bf16_bits(v);
    }
}

extern "C" void cuda_int8_matmul(h3_backend *be, h3_bf16 *y, int64_t ldy, const int8_t *xq, const float *xs, int64_t M,
                                 const h3_int8_linear *w, const h3_bf16 *bias) {
    cuda_impl *c = cuda_of(be);
    const int64_t N = w->N, K = w->K, g = w->group > 0 ? w->group : K, ng = K / g;
    if (M <= 0 || N <= 0) return;
    if (K % g) {
        cuda_record_error(be, "int8_matmul", "K is not a multiple of the group");
        return;
    }
    /* H3_INT8_GEMM=sm90: the own kernel with the dequantization fused (cuda_int8_sm90.cu) where it applies */
    if (ng == 1 && h3_knob_is(H3_KNOB_INT8_GEMM, "sm90") && cuda_int8_matmul_sm90(be, y, ldy, xq, xs, M, w, bias) == 0) return;
    /* rows per chunk: the int32 tiles (one per group) within INT8_ACC_BYTES, chunks of equal size */
    int64_t nchunk = (M * N * 4 * ng + INT8_ACC_BYTES - 1) / INT8_ACC_BYTES, rc = (M + nchunk - 1) / nchunk;
    if (nchunk > 1) rc = (rc + 127) / 128 * 128;
    if (rc > M) rc = M;
    int32_t *acc = (int32_t *)cuda_scratch(be, (size_t)(rc * N * ng) * sizeof(int32_t));
    if (!acc) return;
    const int v4 = N % 4 == 0 && ldy % 4 == 0 && ((uintptr_t)y & 7u) == 0 && ((uintptr_t)w->scale & 15u) == 0;
    for (int64_t r0 = 0; r0 < M; r0 += rc) {
        const int64_t rows = M - r0 < rc ? M - r0 : rc;
        if (ng == 1) {
            s8_gemm(be, acc, N, xq + r0 * K, K, rows, w->q, K, N, K);
            if (v4)
                k_dequant<4><<<grid_rows_cols(rows, N / 4, 256), 256, 0, c->stream>>>(y + r0 * ldy, ldy, acc, xs + r0,
                                                                                    w->scale, bias, rows, N);
            else
                k_dequant<1><<<grid_rows_cols(rows, N, 256), 256, 0, c->stream>>>(y + r0 * ldy, ldy, acc, xs + r0,
                                                                                w->scale, bias, rows, N);
            CUDA_LAUNCHED(be, "int8_matmul (dequantization)");
        } else { /* the groups' K ranges as one strided batch, then one pass over their int32 tiles */
            s8_gemm(be, acc, N, xq + r0 * K, K, rows, w->q, K, N, g, (int)ng, g, rows * N);
            k_dequant_groups<<<grid_rows_cols(rows, N, 256), 256, 0, c->stream>>>(y + r0 * ldy, ldy, acc, rows * N,
                                                                                 xs + r0 * ng, ng, w->scale, bias, rows, N);
            CUDA_LAUNCHED(be, "int8_matmul (group dequantization)");
        }
    }
    cuda_free(be, acc);
}
