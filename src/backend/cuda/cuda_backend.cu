/* The CUDA backend's life cycle, memory (a stream-ordered pool) and GEMMs (cuBLASLt).
 * All work goes to one stream per backend, so every op is ordered after the previous one without
 * host synchronization; only h3_download and h3_sync wait. */
#include "cuda_internal.h"
#include "cuda_stream.h"
#include "cuda_vae.h" /* cuda_host_alloc: the staging buffers of cuda_upload */
extern "C" {
#include "../../core/tensor.h" /* h3_memcpy_par */

#include <cuda_fp16.h>
}

#include <stdlib.h>
#include <string.h>
#include <time.h>

extern "C" {

void cuda_record_error(h3_backend *be, const char *what, const char *detail) {
    cuda_impl *c = cuda_of(be);
    if (c->failed) return;
    c->failed = 1;
    snprintf(c->errmsg, sizeof c->errmsg, "cuda backend: %s failed: %s", what, detail);
    /* also said at once (a sticky CUDA error makes every later op fail; h3_backend_check returns this first one) */
    fprintf(stderr, "h3: %s\n", c->errmsg);
}

int cuda_backend_check(h3_backend *be, h3_err *e) {
    cuda_impl *c = cuda_of(be);
    return c->failed ? h3_fail(e, "%s", c->errmsg) : 0;
}

/* ---- cuBLASLt warm-up ----
 * The process's first heuristic query initializes cuBLASLt's kernel tables (a one-time cost inside the first
 * phase that runs a GEMM). A thread started with the backend makes a few queries (bf16 and fp32 GEMMs; no
 * plan cache, no stream work) while the host loads the tokenizer and the weights. cuBLASLt calls are
 * thread-safe on one handle. H3_LT_WARMUP=0 turns it off, =sync runs it inline and reports its time. */
extern "C" cublasStatus_t cuda_lt_heuristic(h3_backend *be, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                                            cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t ld, int align,
                                            cublasLtMatmulAlgo_t *algo);

static void *lt_warmup_main(void *arg) {
    h3_backend *be = (h3_backend *)arg;
    cudaSetDevice(cuda_of(be)->device);
    const cudaDataType_t types[3][2] = {{CUDA_R_16BF, CUDA_R_16BF}, {CUDA_R_16BF, CUDA_R_32F}, {CUDA_R_32F, CUDA_R_32F}};
    for (int t = 0; t < 3; t++) {
        cublasLtMatmulDesc_t op = NULL;
        cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
        cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
        cublasLtMatmulAlgo_t algo;
        if (cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatrixLayoutCreate(&la, types[t][0], 4096, 4096, 4096) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatrixLayoutCreate(&lb, types[t][0], 4096, 64, 4096) == CUBLAS_STATUS_SUCCESS &&
            cublasLtMatrixLayoutCreate(&ld, types[t][1], 4096, 64, 4096) == CUBLAS_STATUS_SUCCESS) {
            cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof tA);
            cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof tB);
            (void)cuda_lt_heuristic(be, op, la, lb, ld, 16, &algo);
        }
        if (ld) cublasLtMatrixLayoutDestroy(ld);
        if (lb) cublasLtMatrixLayoutDestroy(lb);
        if (la) cublasLtMatrixLayoutDestroy(la);
        if (op) cublasLtMatmulDescDestroy(op);
    }
    return NULL;
}

static void lt_warmup_start(h3_backend *be) {
    cuda_impl *c = cuda_of(be);
    const char *w = h3_knob_get(H3_KNOB_LT_WARMUP);
    if (w && !strcmp(w, "0")) return;
    if (w && !strcmp(w, "sync")) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        lt_warmup_main(be);
        clock_gettime(CLOCK_MONOTONIC, &b);
        /* H3_LT_WARMUP=sync only: a timing diagnostic (docs/tuning.md) */
        fprintf(stderr, "h3: cuBLASLt warm-up %.3f s\n", (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec));
        return;
    }
    c->warmup_started = pthread_create(&c->warmup, NULL, lt_warmup_main, be) == 0;
}

int cuda_backend_init(h3_backend *be, int device, h3_err *e) {
    int ndev = 0;
    cudaError_t err = cudaGetDeviceCount(&ndev);
    if (err != cudaSuccess || ndev == 0)
        return h3_fail(e, "--backend cuda: no usable CUDA device (%s)",
                       err != cudaSuccess ? cudaGetErrorString(err) : "device count 0");
    if (device < 0 || device >= ndev)
        return h3_fail(e, "--device %d: no such CUDA device (this machine has %d: 0..%d)", device, ndev, ndev - 1);
    cuda_impl *c = (cuda_impl *)calloc(1, sizeof *c);
    if (!c) return h3_fail(e, "out of memory");
    be->impl = c;
    c->device = device;
    pthread_mutex_init(&c->pin_lock, NULL);
    c->widen_tile = 64LL << 20; /* 256 MB of fp32: big enough to keep the SGEMM efficient */
    const char *prec = h3_knob_get(H3_KNOB_CUDA_PRECISION);
    c->force_fp32 = prec && strcmp(prec, "fp32") == 0;
    /* H3_BF16_ROUND (same bits in every form): "sw" the integer bf16 rounding in cuda_bf16.cu, "hw" the
     * hardware conversion with the NaN test everywhere, default ("pair") also the packed pair conversions of
     * the DiT's q/k norm + RoPE kernel */
    const char *hr = h3_knob_get(H3_KNOB_BF16_ROUND);
    c->bf16_hw_round = hr && !strcmp(hr, "sw") ? 0 : hr && !strcmp(hr, "hw") ? 1 : 2;
    const char *fv = h3_knob_get(H3_KNOB_FLASH_VARIANT); /* tuning runs: force one cuda_flash_sm90 variant */
    c->flash_variant = fv && *fv ? atoi(fv) : -1;
    const char *sv = h3_knob_get(H3_KNOB_SAGE8_VARIANT); /* tuning runs: force one cuda_sage8_sm90 variant */
    c->sage8_variant = sv && *sv ? atoi(sv) : -1;
    const char *bn = h3_knob_get(H3_KNOB_FLASH_BN);
    c->flash_bn = bn ? atoi(bn) : 64;
    if ((err = cudaSetDevice(c->device)) != cudaSuccess ||
        (err = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        free(c);
        be->impl = NULL;
        return h3_fail(e, "--backend cuda: cannot start device %d (%s)", c->device, cudaGetErrorString(err));
    }
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, c->device);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, c->device);
    c->sm_arch = major * 10 + minor;
    if (c->sm_arch < 80) { /* bf16 tensor cores (mma.sync bf16, cvt.rn.bf16x2) from compute capability 8.0 on */
        cudaStreamDestroy(c->stream);
        free(c);
        be->impl = NULL;
        return h3_fail(e, "--backend cuda: the GPU has compute capability %d.%d; h3 needs 8.0 or newer (A100, RTX 30xx, "
                          "H100 and later)", major, minor);
    }
    /* Keep freed blocks in the pool: per-op scratch then costs no cudaMalloc after warm-up. */
    cudaMemPool_t pool;
    if (cudaDeviceGetDefaultMemPool(&pool, c->device) == cudaSuccess) {
        uint64_t keep = UINT64_MAX;
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    if (cublasLtCreate(&c->lt) != CUBLAS_STATUS_SUCCESS) {
        cudaStreamDestroy(c->stream);
        free(c);
        be->impl = NULL;
        return h3_fail(e, "--backend cuda: cublasLtCreate failed");
    }
    c->workspace_bytes = 64u << 20;
    if (cudaMalloc(&c->workspace, c->workspace_bytes) != cudaSuccess) c->workspace_bytes = 0, c->workspace = NULL;
    cudaEventCreate(&c->marks[0]);
    cudaEventCreate(&c->marks[1]);
    cudaEventCreateWithFlags(&c->up_done[0], cudaEventDisableTiming);
    cudaEventCreateWithFlags(&c->up_done[1], cudaEventDisableTiming);
    lt_warmup_start(be);
    return 0;
}

void cuda_backend_shutdown(h3_backend *be) {
    cuda_impl *c = cuda_of(be);
    if (!c) return;
    if (c->warmup_started) pthread_join(c->warmup, NULL);
    cudaStreamSynchronize(c->stream);
    cuda_copier_release(be);
    cuda_optime_release(be);
    cuda_gemm_rm_release(be);
    cuda_sdpa_release(be);
    cuda_vae_pin_release(be);
    cudaEventDestroy(c->marks[0]);
    cudaEventDestroy(c->marks[1]);
    cudaEventDestroy(c->up_done[0]);
    cudaEventDestroy(c->up_done[1]);
    if (c->workspace) cudaFree(c->workspace);
    cublasLtDestroy(c->lt);
    cudaStreamDestroy(c->stream);
    pthread_mutex_destroy(&c->pin_lock);
    free(c);
    be->impl = NULL;
}

/* ---- memory ---- */

void *cuda_alloc(h3_backend *be, size_t bytes) {
    cuda_impl *c = cuda_of(be);
    void *p = NULL;
    size_t n = bytes ? (bytes + 255) / 256 * 256 : 256;
    if (cudaMallocAsync(&p, n, c->stream) != cudaSuccess) {
        cudaGetLastError(); /* out of memory is reported by the NULL return, not as a sticky error */
        return NULL;
    }
    CUDA_OK(be, cudaMemsetAsync(p, 0, n, c->stream));
    return p;
}

void *cuda_scratch(h3_backend *be, size_t bytes) {
    cuda_impl *c = cuda_of(be);
    void *p = NULL;
    cudaError_t err = cudaMallocAsync(&p, bytes ? bytes : 256, c->stream);
    if (err != cudaSuccess) {
        char what[96];
        snprintf(what, sizeof what, "scratch allocation of %zu bytes", bytes);
        cuda_record_error(be, what, cudaGetErrorString(err));
        return NULL;
    }
    return p;
}

void cuda_free(h3_backend *be, void *p) {
    if (p) CUDA_OK(be, cudaFreeAsync(p, cuda_of(be)->stream));
}

/* Large uploads from pageable memory (weights out of a file mapping) go through two pinned staging buffers of
 * UP_CHUNK bytes: the host fills chunk i+1 with OpenMP threads (h3_memcpy_par: the mapping's page faults, i.e. the
 * file reads, run in parallel) while chunk i's DMA runs; the driver's own pageable path stages with one thread.
 * H3_UPLOAD_STAGED=0 keeps the plain path (A/B). Either way the call returns once src is no longer read. */
enum { UP_STAGED_MIN = 16 << 20, UP_CHUNK = 64 << 20 };

static int host_pinned(const void *p) {
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeHost;
}

static int staged_upload(h3_backend *be, char *dst, const char *src, size_t bytes) {
    cuda_impl *c = cuda_of(be);
    void *buf[2] = {cuda_host_alloc(be, UP_CHUNK), cuda_host_alloc(be, UP_CHUNK)};
    if (!buf[0] || !buf[1]) {
        cuda_host_free(be, buf[0]), cuda_host_free(be, buf[1]);
        return -1;
    }
    int i = 0;
    for (size_t off = 0; off < bytes; off += UP_CHUNK, i++) {
        const size_t n = bytes - off < (size_t)UP_CHUNK ? bytes - off : (size_t)UP_CHUNK;
        const int b = i & 1;
        if (i >= 2) CUDA_OK(be, cudaEventSynchronize(c->up_done[b])); /* its previous DMA has finished */
        h3_memcpy_par(buf[b], src + off, n);
        CUDA_OK(be, cudaMemcpyAsync(dst + off, buf[b], n, cudaMemcpyHostToDevice, c->stream));
        CUDA_OK(be, cudaEventRecord(c->up_done[b], c->stream));
    }
    for (int b = 0; b < 2 && b < i; b++) CUDA_OK(be, cudaEventSynchronize(c->up_done[b])); /* buffers free again */
    cuda_host_free(be, buf[0]), cuda_host_free(be, buf[1]);
    return 0;
}

void cuda_upload(h3_backend *be, void *dst, const void *src, size_t bytes) {
    const char *st = h3_knob_get(H3_KNOB_UPLOAD_STAGED);
    if (bytes >= UP_STAGED_MIN && !(st && !strcmp(st, "0")) && !host_pinned(src) &&
        staged_upload(be, (char *)dst, (const char *)src, bytes) == 0)
        return;
    /* From pageable memory this returns once src has been staged, so src may be freed after. */
    CUDA_OK(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, cuda_of(be)->stream));
}

void cuda_download(h3_backend *be, void *dst, const void *src, size_t bytes) {
    cuda_impl *c = cuda_of(be);
    CUDA_OK(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    CUDA_OK(be, cudaStreamSynchronize(c->stream));
}

void cuda_copy(h3_backend *be, void *dst, const void *src, size_t bytes) {
    cuda_impl *c = cuda_of(be);
    const char *d = (const char *)dst, *s = (const char *)src;
    if (dst == src || bytes == 0) return;
    if (d < s + bytes && s < d + bytes) { /* overlapping (memmove semantics): go through scratch */
        void *tmp = cuda_scratch(be, bytes);
        if (!tmp) return;
        CUDA_OK(be, cudaMemcpyAsync(tmp, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
        CUDA_OK(be, cudaMemcpyAsync(dst, tmp, bytes, cudaMemcpyDeviceToDevice, c->stream));
        cuda_free(be, tmp);
        return;
    }
    CUDA_OK(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
}

void cuda_copy_2d(h3_backend *be, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows) {
    CUDA_OK(be, cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, rows, cudaMemcpyDeviceToDevice, cuda_of(be)->stream));
}

void cuda_bind_thread(h3_backend *be) { CUDA_OK(be, cudaSetDevice(cuda_of(be)->device)); }

void cuda_sync(h3_backend *be) { CUDA_OK(be, cudaStreamSynchronize(cuda_of(be)->stream)); }

void cuda_mark(h3_backend *be, int slot) {
    cuda_impl *c = cuda_of(be);
    CUDA_OK(be, cudaEventRecord(c->marks[slot ? 1 : 0], c->stream));
}

float cuda_elapsed_ms(h3_backend *be) {
    cuda_impl *c = cuda_of(be);
    float ms = 0.0f;
    CUDA_OK(be, cudaEventSynchronize(c->marks[1]));
    CUDA_OK(be, cudaEventElapsedTime(&ms, c->marks[0], c->marks[1]));
    return ms;
}

void cuda_set_widen_tile(h3_backend *be, int64_t elems) { cuda_of(be)->widen_tile = elems > 0 ? elems : 1; }

} /* extern "C" */

/* ---- conversions ---- */

/* vec: src 16-byte and dst 8-byte aligned, 4 elements per access (2-byte accesses alone keep too
 * few bytes in flight to stream at full bandwidth) */
static __global__ void k_f32_to_bf16(uint16_t *dst, const float *src, int64_t n, int vec) {
    int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, stride = (int64_t)gridDim.x * blockDim.x;
    int64_t done = 0;
    if (vec) {
        int64_t n4 = n / 4;
        const float4 *s4 = (const float4 *)src;
        uint2 *d4 = (uint2 *)dst;
        for (int64_t i = tid; i < n4; i += stride) {
            float4 v = s4[i];
            uint2 o;
            o.x = (uint32_t)f32_to_bf16_bits(v.x) | ((uint32_t)f32_to_bf16_bits(v.y) << 16);
            o.y = (uint32_t)f32_to_bf16_bits(v.z) | ((uint32_t)f32_to_bf16_bits(v.w) << 16);
            d4[i] = o;
        }
        done = n4 * 4;
    }
    for (int64_t i = done + tid; i < n; i += stride) dst[i] = f32_to_bf16_bits(src[i]);
}

static int aligned_to(const void *p, uintptr_t a) { return ((uintptr_t)p % a) == 0; }

/* Rows [0, rows) of a BF16 (is_f16 = 0) or F16 weight widened to fp32; exact. */
static __global__ void k_widen(float *dst, const uint16_t *src, int64_t n, int is_f16) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        uint16_t h = src[i];
        dst[i] = is_f16 ? __half2float(__ushort_as_half(h)) : __uint_as_float((uint32_t)h << 16);
    }
}

/* bf16 -> fp32, 4 elements per access; dst 16-byte and src 8-byte aligned (scratch buffers) */
static __global__ void k_widen_bf16_vec(float *dst, const uint16_t *src, int64_t n) {
    int64_t tid = blockIdx.x * (int64_t)blockDim.x + threadIdx.x, stride = (int64_t)gridDim.x * blockDim.x;
    int64_t n4 = n / 4;
    const uint2 *s4 = (const uint2 *)src;
    float4 *d4 = (float4 *)dst;
    for (int64_t i = tid; i < n4; i += stride) {
        uint2 v = s4[i];
        d4[i] = make_float4(__uint_as_float(v.x << 16), __uint_as_float(v.x & 0xffff0000u),
                            __uint_as_float(v.y << 16), __uint_as_float(v.y & 0xffff0000u));
    }
    for (int64_t i = n4 * 4 + tid; i < n; i += stride) dst[i] = __uint_as_float((uint32_t)src[i] << 16);
}

static __device__ __forceinline__ float load_as_f32(const void *p, int64_t i, h3_dtype t) {
    if (t == H3_F32) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    if (t == H3_BF16) return __uint_as_float((uint32_t)h << 16);
    return __half2float(__ushort_as_half(h));
}

/* fp32 -> fp16 (round to nearest even; __float2half_rn), the H3_F16_IN input of cuda_matmul; widen != NULL: the
 * rounded values as fp32 (the exact path under H3_CUDA_PRECISION=fp32) */
static __global__ void k_f32_to_f16(__half *dst, float *widen, const float *src, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        __half h = __float2half_rn(src[i]);
        if (widen) widen[i] = __half2float(h);
        else dst[i] = h;
    }
}

/* y[m, n] = round?(y[m, n] + bias[n]); the CPU twin's epilogue. */
static __global__ void k_bias_round(float *y, const void *bias, h3_dtype bt, int64_t M, int64_t N, int round) {
    FOR_ROWS_COLS(m, n, M, N) {
        float v = y[m * N + n];
        if (bias) v = v + load_as_f32(bias, n, bt);
        y[m * N + n] = round ? round_bf16(v) : v;
    }
}

extern "C" void cuda_f32_to_bf16(h3_backend *be, uint16_t *dst, const float *src, int64_t n) {
    if (n <= 0) return;
    int vec = aligned_to(src, 16) && aligned_to(dst, 8);
    k_f32_to_bf16<<<cuda_blocks(vec ? n / 4 + 1 : n, 256), 256, 0, cuda_of(be)->stream>>>(dst, src, n, vec);
    CUDA_LAUNCHED(be, "f32_to_bf16");
}

/* ---- cuBLASLt ---- */


/* The heuristic's first `max` algorithms for a described GEMM (*n of them in res), with the workspace and operand
 * alignment (bytes) as preferences; CUBLAS_STATUS_NOT_SUPPORTED when it has none. cuda_int8.cu times several. */
extern "C" cublasStatus_t cuda_lt_heuristics(h3_backend *be, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                                             cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t ld, int align, int max,
                                             cublasLtMatmulHeuristicResult_t *res, int *n) {
    cuda_impl *c = cuda_of(be);
    cublasLtMatmulPreference_t pref = NULL;
    uint64_t ws = c->workspace_bytes;
    uint32_t al = (uint32_t)align;
    *n = 0;
    cublasStatus_t st = cublasLtMatmulPreferenceCreate(&pref);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al, sizeof al);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al, sizeof al);
    st = cublasLtMatmulAlgoGetHeuristic(c->lt, op, la, lb, ld, ld, pref, max, res, n);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    return *n < 1 ? CUBLAS_STATUS_NOT_SUPPORTED : CUBLAS_STATUS_SUCCESS;
}

/* The heuristic's first algorithm (cuda_lt_heuristics with max 1); shared by lt_gemm_ex, cuda_sgemm_rm
 * (cuda_gemm_rm.cu) and the fp8 GEMMs (cuda_w8a8.cu). */
extern "C" cublasStatus_t cuda_lt_heuristic(h3_backend *be, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                                            cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t ld, int align,
                                            cublasLtMatmulAlgo_t *algo) {
    cublasLtMatmulHeuristicResult_t res;
    int n = 0;
    cublasStatus_t st = cuda_lt_heuristics(be, op, la, lb, ld, align, 1, &res, &n);
    if (st == CUBLAS_STATUS_SUCCESS) *algo = res.algo;
    return st;
}

/* Row-major y[M,N] = x[M,K] . w[N,K]^T, written column-major as D[N,M] = W^T(NxK) . X(KxM): A = w with
 * op T (ld K), B = x with op N (ld ldx >= K), D ld = ldd (>= N; a column slice of a wider y). A bias
 * (N values) is added by the epilogue in fp32 before the output conversion. */
static void lt_gemm_ex(h3_backend *be, int kind, const void *w, const void *x, int64_t ldx, void *y, int64_t M,
                       int64_t N, int64_t K, int64_t ldd, const void *bias, cudaDataType_t bias_type) {
    cuda_impl *c = cuda_of(be);
    cudaDataType_t ab = kind == CUDA_GEMM_F32 ? CUDA_R_32F : kind == CUDA_GEMM_F16_F32OUT ? CUDA_R_16F : CUDA_R_16BF;
    cudaDataType_t cd = kind == CUDA_GEMM_BF16_BF16OUT ? CUDA_R_16BF : CUDA_R_32F;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasOperation_t tA = CUBLAS_OP_T, tB = CUBLAS_OP_N;
    cublasStatus_t st;
    int align = cuda_ptr_align(w);
    if (cuda_ptr_align(x) < align) align = cuda_ptr_align(x);
    if (cuda_ptr_align(y) < align) align = cuda_ptr_align(y);
    int bias_key = bias ? (int)bias_type + 1 : 0;
    char what[160];
    snprintf(what, sizeof what, "cublasLt matmul (kind %d, M %lld N %lld K %lld, ldx %lld ldy %lld)", kind,
             (long long)M, (long long)N, (long long)K, (long long)ldx, (long long)ldd);

    if ((st = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) != CUBLAS_STATUS_SUCCESS) goto fail;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &tA, sizeof tA);
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tB, sizeof tB);
    if (bias) {
        cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias);
        cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type);
    }
    if ((st = cublasLtMatrixLayoutCreate(&la, ab, (uint64_t)K, (uint64_t)N, K)) != CUBLAS_STATUS_SUCCESS) goto fail;
    if ((st = cublasLtMatrixLayoutCreate(&lb, ab, (uint64_t)K, (uint64_t)M, ldx)) != CUBLAS_STATUS_SUCCESS) goto fail;
    if ((st = cublasLtMatrixLayoutCreate(&ld, cd, (uint64_t)N, (uint64_t)M, ldd)) != CUBLAS_STATUS_SUCCESS) goto fail;

    {
        cuda_gemm_plan *plan = NULL;
        cublasLtMatmulAlgo_t algo;
        int key_kind = kind * 1000 + align; /* the heuristic's choice depends on alignment too */
        for (int i = 0; i < CUDA_PLAN_CACHE; i++) {
            cuda_gemm_plan *p = &c->plans[i];
            if (p->used && p->kind == key_kind && p->M == M && p->N == N && p->K == K && p->ldx == ldx &&
                p->ldd == ldd && p->bias == bias_key) {
                plan = p;
                break;
            }
        }
        if (!plan) {
            if ((st = cuda_lt_heuristic(be, op, la, lb, ld, align, &algo)) != CUBLAS_STATUS_SUCCESS) goto fail;
            plan = &c->plans[c->plan_next];
            c->plan_next = (c->plan_next + 1) % CUDA_PLAN_CACHE;
            plan->used = 1;
            plan->kind = key_kind;
            plan->M = M, plan->N = N, plan->K = K, plan->ldx = ldx, plan->ldd = ldd, plan->bias = bias_key;
            plan->algo = algo;
        }
        float alpha = 1.0f, beta = 0.0f;
        st = cublasLtMatmul(c->lt, op, &alpha, w, la, x, lb, &beta, y, ld, y, ld, &plan->algo, c->workspace,
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

static void lt_gemm(h3_backend *be, int kind, const void *w, const void *x, void *y, int64_t M, int64_t N,
                    int64_t K, int64_t ldd) {
    lt_gemm_ex(be, kind, w, x, K, y, M, N, K, ldd, NULL, CUDA_R_32F);
}

extern "C" void cuda_lt_gemm(h3_backend *be, int kind, const void *w, const void *x, int64_t ldx, void *y,
                             int64_t ldy, int64_t M, int64_t N, int64_t K, const void *bias, cudaDataType_t bias_type) {
    if (M <= 0 || N <= 0) return;
    lt_gemm_ex(be, kind, w, x, ldx, y, M, N, K, ldy, bias, bias_type);
}

extern "C" void cuda_gemm_bf16(h3_backend *be, uint16_t *y, const uint16_t *x, const uint16_t *w, int64_t M,
                               int64_t N, int64_t K) {
    if (M <= 0 || N <= 0) return;
    lt_gemm(be, CUDA_GEMM_BF16_BF16OUT, w, x, y, M, N, K, N);
}

extern "C" void cuda_matmul(h3_backend *be, float *y, const float *x, int64_t M, const h3_tensor *w,
                            const h3_tensor *bias, int flags) {
    cuda_impl *c = cuda_of(be);
    int64_t N = w->shape[0], K = w->shape[1];
    if (M <= 0 || N <= 0) return;
    float *xr = NULL; /* H3_F16_IN under H3_CUDA_PRECISION=fp32: the fp16-rounded input for the exact path below */
    if (w->dtype == H3_F16 && (flags & H3_F16_IN) && c->force_fp32) {
        if (!(xr = (float *)cuda_scratch(be, (size_t)(M * K) * sizeof(float)))) return;
        k_f32_to_f16<<<cuda_blocks(M * K, 256), 256, 0, c->stream>>>(NULL, xr, x, M * K);
        CUDA_LAUNCHED(be, "f32_to_f16");
        x = xr;
    }
    if (w->dtype == H3_F16 && (flags & H3_F16_IN) && !xr) {
        /* the reference's fp16-autocast linear: x rounded to fp16, fp16 tensor cores (exact products, fp32
         * accumulation), fp32 output; the bias below */
        __half *xh = (__half *)cuda_scratch(be, (size_t)(M * K) * 2);
        if (!xh) return;
        k_f32_to_f16<<<cuda_blocks(M * K, 256), 256, 0, c->stream>>>(xh, NULL, x, M * K);
        CUDA_LAUNCHED(be, "f32_to_f16");
        lt_gemm(be, CUDA_GEMM_F16_F32OUT, w->data, xh, y, M, N, K, N);
        cuda_free(be, xh);
    } else if (w->dtype == H3_BF16 && (flags & H3_BF16_OUT) && !c->force_fp32) {
        /* bf16 tensor-core path: x rounded to bf16 (a no-op on the reference's bf16 activations). */
        uint16_t *xb = (uint16_t *)cuda_scratch(be, (size_t)(M * K) * 2);
        if (!xb) return;
        cuda_f32_to_bf16(be, xb, x, M * K);
        if (!bias) {
            /* no bias: cuBLASLt rounds the fp32 accumulator to bf16 itself (nearest even, the same
             * single rounding), then an exact widening; 2/3 of the epilogue traffic of fp32 out */
            uint16_t *yb = (uint16_t *)cuda_scratch(be, (size_t)(M * N) * 2);
            if (!yb) {
                cuda_free(be, xb);
                return;
            }
            lt_gemm(be, CUDA_GEMM_BF16_BF16OUT, w->data, xb, yb, M, N, K, N);
            if (aligned_to(y, 16))
                k_widen_bf16_vec<<<cuda_blocks(M * N / 4 + 1, 256), 256, 0, c->stream>>>(y, yb, M * N);
            else
                k_widen<<<cuda_blocks(M * N, 256), 256, 0, c->stream>>>(y, yb, M * N, 0);
            CUDA_LAUNCHED(be, "widen bf16 output");
            cuda_free(be, yb);
            cuda_free(be, xb);
            return;
        }
        lt_gemm(be, CUDA_GEMM_BF16_F32OUT, w->data, xb, y, M, N, K, N);
        cuda_free(be, xb);
    } else if (w->dtype == H3_F32) {
        lt_gemm(be, CUDA_GEMM_F32, w->data, x, y, M, N, K, N);
    } else if (w->dtype == H3_BF16 || w->dtype == H3_F16) {
        /* exact fp32 path: widen a tile of weight rows, SGEMM into the matching columns of y */
        int64_t tile = c->widen_tile / (K > 0 ? K : 1);
        if (tile < 1) tile = 1;
        if (tile > N) tile = N;
        float *buf = (float *)cuda_scratch(be, (size_t)(tile * K) * sizeof(float));
        if (!buf) {
            if (xr) cuda_free(be, xr);
            return;
        }
        for (int64_t n0 = 0; n0 < N; n0 += tile) {
            int64_t nt = N - n0 < tile ? N - n0 : tile;
            k_widen<<<cuda_blocks(nt * K, 256), 256, 0, c->stream>>>(buf, (const uint16_t *)w->data + n0 * K,
                                                                       nt * K, w->dtype == H3_F16);
            CUDA_LAUNCHED(be, "widen");
            lt_gemm(be, CUDA_GEMM_F32, buf, x, y + n0, M, nt, K, N);
        }
        cuda_free(be, buf);
    } else {
        cuda_record_error(be, "matmul", "weight dtype must be F32, BF16 or F16");
        if (xr) cuda_free(be, xr);
        return;
    }
    if (xr) cuda_free(be, xr);
    if (bias || (flags & H3_BF16_OUT)) {
        k_bias_round<<<grid_rows_cols(M, N, 256), 256, 0, c->stream>>>(y, bias ? bias->data : NULL,
                                                                      bias ? bias->dtype : H3_F32, M, N,
                                                                      (flags & H3_BF16_OUT) != 0);
        CUDA_LAUNCHED(be, "bias_round");
    }
}

/* ---- random fills for tests and benchmarks (a hash of the index: reproducible, no state) ---- */

static __device__ __forceinline__ float hash_uniform(uint64_t i, uint64_t seed) {
    uint64_t z = i * 0x9E3779B97F4A7C15ull + seed * 0xD1B54A32D192ED03ull + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f; /* [-1, 1) */
}

static __global__ void k_fill(float *x, uint16_t *xb, int64_t n, uint64_t seed, float scale) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = hash_uniform((uint64_t)i, seed) * scale;
        if (x) x[i] = v;
        else xb[i] = f32_to_bf16_bits(v);
    }
}

extern "C" void cuda_fill_random(h3_backend *be, float *x, int64_t n, uint64_t seed, float scale) {
    if (n <= 0) return;
    k_fill<<<cuda_blocks(n, 256), 256, 0, cuda_of(be)->stream>>>(x, NULL, n, seed, scale);
    CUDA_LAUNCHED(be, "fill_random");
}

extern "C" void cuda_fill_random_bf16(h3_backend *be, uint16_t *x, int64_t n, uint64_t seed, float scale) {
    if (n <= 0) return;
    k_fill<<<cuda_blocks(n, 256), 256, 0, cuda_of(be)->stream>>>(NULL, x, n, seed, scale);
    CUDA_LAUNCHED(be, "fill_random_bf16");
}
