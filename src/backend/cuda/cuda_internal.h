/* Private state and helpers shared by the CUDA backend's .cu files. */
#ifndef H3_CUDA_INTERNAL_H
#define H3_CUDA_INTERNAL_H

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "cuda_ops.h"

/* One cached cuBLASLt plan: a shape/type combination and the algorithm the heuristic chose. */
typedef struct cuda_gemm_plan {
    int                    used;
    int                    kind; /* CUDA_GEMM_* below */
    int64_t                M, N, K;
    int64_t                ldx, ldd; /* row strides of x and of the output */
    int                    bias;     /* 0 none, else the epilogue bias's cudaDataType_t + 1 */
    int                    mode;     /* CUDA_GEMM_FP8 (cuda_w8a8.cu): 1 = no algorithm takes the scale vectors;
                                      * CUDA_GEMM_S8_S32OUT (cuda_int8.cu): 1 = none for the shape */
    cublasLtMatmulAlgo_t   algo;
} cuda_gemm_plan;

enum { CUDA_GEMM_F32 = 0, CUDA_GEMM_BF16_F32OUT = 1, CUDA_GEMM_BF16_BF16OUT = 2, CUDA_GEMM_FP8 = 3,
       CUDA_GEMM_FP8_F32OUT = 4, CUDA_GEMM_F16_F32OUT = 5, CUDA_GEMM_S8_S32OUT = 6 /* cuda_int8.cu */ };
enum { CUDA_PLAN_CACHE = 128, CUDA_PIN_CACHE = 8 };

typedef struct cuda_impl {
    int              device;
    cudaStream_t     stream;
    cublasLtHandle_t lt;
    void            *workspace; /* cuBLASLt workspace */
    size_t           workspace_bytes;
    int              force_fp32;  /* H3_CUDA_PRECISION=fp32 */
    int              flash_bn;    /* H3_FLASH_BN: keys per flash tile at head_dim 128 (tuning) */
    int              flash_variant; /* cuda_flash_sm90's compiled variant (tests/tuning); -1: by shape */
    int              bf16_hw_round; /* H3_BF16_ROUND: 2 (default) as 1 + packed pair conversions in the DiT's q/k norm
                                     * + RoPE; 1 hardware bf16 rounding in cuda_bf16.cu's kernels and the VAE's q/k
                                     * norm + RoPE; 0 integer (all the same bits) */
    int              sm_arch;     /* compute capability * 10 + minor (90 on H100/H200) */
    int64_t          widen_tile;  /* elements of a widened weight tile (fp32 matmul path) */
    int              failed;      /* sticky first error */
    char             errmsg[512];
    cudaEvent_t      marks[2];
    cudaEvent_t      up_done[2];  /* staged uploads: the DMA of each pinned staging buffer (cuda_upload) */
    void            *copier;      /* weight slots' copy stream and staging buffers (cuda_stream.cu) */
    void            *sdpa;        /* cuDNN SDPA state (cuda_sdpa_cudnn.cu), created on first use */
    void            *optime;      /* per-op timing (H3_CUDA_OPTIME=1, cuda_optime.cu) */
    void            *rm_plans;    /* cuda_sgemm_rm's plan cache (cuda_gemm_rm.cu) */
    cuda_gemm_plan   plans[CUDA_PLAN_CACHE];
    int              plan_next;
    void            *pin_ptr[CUDA_PIN_CACHE];   /* pinned host buffers this backend made (cuda_vae.cu) */
    size_t           pin_bytes[CUDA_PIN_CACHE]; /* their sizes */
    int              pin_used[CUDA_PIN_CACHE];  /* handed out (else kept for reuse) */
    pthread_t        warmup;      /* cuda_lt_warmup's thread (joined at shutdown) */
    int              warmup_started;
    pthread_mutex_t  pin_lock; /* the table above: a pipeline may fill it from a second thread (h3_host_prefetch) */
    int              sage8_variant; /* cuda_sage8_sm90's compiled variant (tests/tuning); -1: the default */
} cuda_impl;

static inline cuda_impl *cuda_of(h3_backend *be) { return (cuda_impl *)be->impl; }

/* Records the first failure (the ops are void; cuda_backend_check reports it). */
extern "C" void cuda_record_error(h3_backend *be, const char *what, const char *detail);

#define CUDA_OK(be, call)                                                          \
    do {                                                                           \
        cudaError_t err_ = (call);                                                 \
        if (err_ != cudaSuccess) cuda_record_error((be), #call, cudaGetErrorString(err_)); \
    } while (0)

/* After each launch: catches bad configurations (the kernel's own faults show at the next sync). */
#define CUDA_LAUNCHED(be, name)                                                    \
    do {                                                                           \
        cudaError_t err_ = cudaGetLastError();                                     \
        if (err_ != cudaSuccess) cuda_record_error((be), name, cudaGetErrorString(err_)); \
    } while (0)

/* Scratch memory from the stream-ordered pool (freed with cuda_free, also stream-ordered). */
extern "C" void *cuda_scratch(h3_backend *be, size_t bytes);
/* Row-major y[M,N] (row stride ldy) = x[M,K] (row stride ldx) . w[N,K]^T (+ bias[N] in the fp32
 * epilogue, bias_type CUDA_R_32F or CUDA_R_16BF; bias NULL: none); kind CUDA_GEMM_*. */
extern "C" void cuda_lt_gemm(h3_backend *be, int kind, const void *w, const void *x, int64_t ldx, void *y, int64_t ldy,
                             int64_t M, int64_t N, int64_t K, const void *bias, cudaDataType_t bias_type);
/* cuBLASLt's first heuristic choice for a described GEMM (workspace and alignment as preferences). */
extern "C" cublasStatus_t cuda_lt_heuristics(h3_backend *be, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                                             cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t ld, int align, int max,
                                             cublasLtMatmulHeuristicResult_t *res, int *n);
extern "C" cublasStatus_t cuda_lt_heuristic(h3_backend *be, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t la,
                                            cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t ld, int align,
                                            cublasLtMatmulAlgo_t *algo);
/* Frees cuda_sgemm_rm's plan cache (cuda_gemm_rm.cu). */
extern "C" void cuda_gemm_rm_release(h3_backend *be);
/* Reports and frees the per-op timing state (cuda_optime.cu). */
void cuda_optime_release(h3_backend *be);
/* Frees the cuDNN handle and cached SDPA plans (cuda_sdpa_cudnn.cu). */
extern "C" void cuda_sdpa_release(h3_backend *be);
extern "C" void cuda_vae_pin_release(h3_backend *be); /* the pinned host buffers kept by cuda_vae.cu */

/* The largest power of two (<= 256) dividing the address: the alignment cuBLASLt's heuristics are told about. */
static inline int cuda_ptr_align(const void *p) {
    uintptr_t u = (uintptr_t)p;
    int a = 256;
    while (a > 1 && (u % (uintptr_t)a)) a >>= 1;
    return a;
}

/* Grid-stride kernels: at most 8192 blocks, so each thread streams several elements (hundreds of
 * thousands of one-element blocks cost more in block scheduling than in memory traffic). */
static inline unsigned cuda_blocks(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    if (b > 8192) b = 8192;
    return (unsigned)(b < 1 ? 1 : b);
}

/* rows x cols loops without 64-bit division per element: blockIdx.y strides the rows, the x
 * threads the columns. Launch with grid_rows_cols. */
#define FOR_ROWS_COLS(r, c, rows, cols)                                                   \
    for (int64_t r = blockIdx.y; r < (rows); r += gridDim.y)                              \
        for (int64_t c = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; c < (cols);      \
             c += (int64_t)gridDim.x * blockDim.x)

static inline dim3 grid_rows_cols(int64_t rows, int64_t cols, int threads) {
    int64_t gx = (cols + threads - 1) / threads, gy = rows;
    if (gx > 8) gx = 8; /* at most 8192 blocks, as cuda_blocks */
    if (gy > 1024) gy = 1024;
    return dim3((unsigned)(gx < 1 ? 1 : gx), (unsigned)(gy < 1 ? 1 : gy));
}

/* Sum over the block, every thread gets the result; `red` holds blockDim.x / 32 doubles (shared).
 * The leading barrier lets a block call it twice in a row (red may still be read). */
/* 8 floats from a 16-byte-aligned p as two float4 loads (gains, tables, cos/sin rows) */
static __device__ __forceinline__ void load8f(float (&d)[8], const float *p) {
    float4 a = ((const float4 *)p)[0], b = ((const float4 *)p)[1];
    d[0] = a.x, d[1] = a.y, d[2] = a.z, d[3] = a.w, d[4] = b.x, d[5] = b.y, d[6] = b.z, d[7] = b.w;
}

static __device__ __forceinline__ double cuda_block_sum_d(double v, double *red) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    double s = 0.0;
    for (int i = 0; i < (int)(blockDim.x / 32); i++) s += red[i];
    return s;
}

/* Same rounding as h3_round_bf16 (dtype.h): nearest even, NaN stays a quiet NaN. */
static __device__ __forceinline__ float round_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return __uint_as_float((u | 0x00400000u) & 0xffff0000u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return __uint_as_float(u & 0xffff0000u);
}

static __device__ __forceinline__ uint16_t f32_to_bf16_bits(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* The same bits as f32_to_bf16_bits / round_bf16 for every input: non-NaN values through the hardware's RNE
 * conversion (cvt.rn.bf16.f32, one instruction instead of the integer rounding), NaN by the CPU's quiet-NaN
 * rule. HW selects it in the element-wise kernels of cuda_bf16.cu (H3_BF16_ROUND=sw keeps the integer form). */
static __device__ __forceinline__ uint16_t f32_to_bf16_bits_hw(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    return __bfloat16_as_ushort(__float2bfloat16_rn(f));
}
static __device__ __forceinline__ float round_bf16_hw(float f) { return __uint_as_float((uint32_t)f32_to_bf16_bits_hw(f) << 16); }
/* HW 2 (H3_BF16_ROUND's default): the hardware conversion without the NaN test, for values that are results of
 * GPU arithmetic only. That arithmetic gives every NaN as the canonical 0x7fffffff, which both rules round to
 * 0x7fff, so the bits are HW 1's for every input; pairs go through one packed conversion (cvt.rn.bf16x2.f32). A
 * value loaded from memory keeps the tested form (rbf16<HW ? 1 : 0>). */
static __device__ __forceinline__ uint32_t bf16x2_rn(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
template <int HW> static __device__ __forceinline__ float rbf16(float f) {
    return HW == 2 ? __uint_as_float((uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(f)) << 16)
           : HW    ? round_bf16_hw(f)
                   : round_bf16(f);
}
template <int HW> static __device__ __forceinline__ uint16_t pbf16(float f) {
    return HW == 2 ? __bfloat16_as_ushort(__float2bfloat16_rn(f)) : HW ? f32_to_bf16_bits_hw(f) : f32_to_bf16_bits(f);
}
/* the bf16 bits of lo (low half) and hi (high half) */
template <int HW> static __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    return HW == 2 ? bf16x2_rn(lo, hi) : (uint32_t)pbf16<HW>(lo) | ((uint32_t)pbf16<HW>(hi) << 16);
}
/* a and b rounded to bf16 in place */
template <int HW> static __device__ __forceinline__ void rn2(float &a, float &b) {
    if (HW == 2) {
        uint32_t r = bf16x2_rn(a, b);
        a = __uint_as_float(r << 16), b = __uint_as_float(r & 0xffff0000u);
    } else {
        a = rbf16<HW>(a), b = rbf16<HW>(b);
    }
}

#endif
