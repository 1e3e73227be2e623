/* Weight slots on CUDA (backend_stream.h). Fills run on a copy stream of their own, so the DMA of block b + 1
 * overlaps the kernels of block b on the compute stream; events order the two: a fill waits for the slot's
 * "released" event (recorded on the compute stream after the slot's last reader), a reader waits for its
 * "filled" event (recorded on the copy stream). The sources go through two pinned staging buffers of the copy
 * stream, filled by the host while the other's DMA runs: memory sources (file mappings, host copies) with OpenMP
 * threads (h3_memcpy_par: the mapping's page faults run in parallel), file sources with parallel preads
 * (h3_read_span, O_DIRECT: the aligned range around the piece, the DMA starting at its first byte). */
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "cuda_internal.h"
#include "cuda_ops.h" /* cuda_alloc, cuda_free */
#include "cuda_stream.h"
#include "cuda_gguf.h" /* cuda_gguf_dequant_on: GGUF pieces */
#include "cuda_vae.h" /* cuda_host_alloc: pinned buffers kept by the backend */
extern "C" {
#include "../../core/error.h"
#include "../../core/tensor.h" /* h3_memcpy_par */
#include "../../io/file_read.h"
}

/* staging buffers: 64 MiB chunks, plus the slack an O_DIRECT read of an unaligned range needs (page-aligned: pinned) */
enum { STAGE_BYTES = 64 << 20, STAGE_CAP = STAGE_BYTES + 2 * H3_DIRECT_ALIGN };

typedef struct copier {
    cudaStream_t stream;
    void        *stage[2];
    cudaEvent_t  stage_done[2]; /* the last DMA out of each staging buffer */
    int          stage_used[2];
    int          slots; /* slots alive: the last one's free gives the stream and the staging buffers back */
    void        *wide;  /* device memory for one staged chunk of a wide piece's BF16 values (cudaMalloc) */
} copier;

typedef struct slot_events {
    cudaEvent_t filled, released;
} slot_events;

static copier *copier_of(h3_backend *be) {
    cuda_impl *c = cuda_of(be);
    if (c->copier) return (copier *)c->copier;
    copier *k = (copier *)calloc(1, sizeof *k);
    if (!k) return NULL;
    if (cudaStreamCreateWithFlags(&k->stream, cudaStreamNonBlocking) != cudaSuccess) {
        cudaGetLastError();
        free(k);
        return NULL;
    }
    for (int i = 0; i < 2; i++) cudaEventCreateWithFlags(&k->stage_done[i], cudaEventDisableTiming);
    c->copier = k;
    return k;
}

extern "C" void cuda_copier_release(h3_backend *be) {
    cuda_impl *c = cuda_of(be);
    copier *k = (copier *)c->copier;
    if (!k) return;
    cudaStreamSynchronize(k->stream);
    for (int i = 0; i < 2; i++) {
        cuda_host_free(be, k->stage[i]);
        cudaEventDestroy(k->stage_done[i]);
    }
    cudaStreamDestroy(k->stream);
    if (k->wide) cudaFree(k->wide);
    free(k);
    c->copier = NULL;
}

extern "C" int cuda_slot_init(h3_backend *be, void **data, void **impl, size_t bytes) {
    cuda_impl *c = cuda_of(be);
    copier *k = copier_of(be);
    slot_events *ev = (slot_events *)calloc(1, sizeof *ev);
    void *p = NULL; /* from the compute stream's pool, so the memory statistics count the slots */
    if (!k || !ev || !(p = cuda_alloc(be, bytes))) {
        free(ev);
        if (k && !k->slots) cuda_copier_release(be);
        return -1;
    }
    if (cudaEventCreateWithFlags(&ev->filled, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&ev->released, cudaEventDisableTiming) != cudaSuccess) {
        cudaGetLastError();
        cuda_free(be, p);
        free(ev);
        if (!k->slots) cuda_copier_release(be);
        return -1;
    }
    k->slots++;
    /* a first fill must not overtake work the compute stream queued before the slot existed */
    CUDA_OK(be, cudaEventRecord(ev->released, c->stream));
    CUDA_OK(be, cudaEventRecord(ev->filled, k->stream));
    *data = p, *impl = ev;
    return 0;
}

extern "C" void cuda_slot_release_all(h3_backend *be, void *data, void *impl) {
    cuda_impl *c = cuda_of(be);
    slot_events *ev = (slot_events *)impl;
    copier *k = (copier *)c->copier;
    if (k) cudaStreamSynchronize(k->stream);
    cudaStreamSynchronize(c->stream);
    cuda_free(be, data);
    if (ev) {
        cudaEventDestroy(ev->filled);
        cudaEventDestroy(ev->released);
        free(ev);
    }
    if (k && --k->slots <= 0) cuda_copier_release(be); /* no slot left: nothing to copy into */
}

/* a wide piece's chunk: BF16 values staged in device memory, widened (exactly) into the F32 slot part */
__global__ static void widen_kernel(float *dst, const uint16_t *src, int64_t n) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        dst[i] = __uint_as_float((uint32_t)src[i] << 16);
}

extern "C" int cuda_slot_fill(h3_backend *be, void *data, void *impl, const h3_slot_piece *p, int n, h3_err *e) {
    slot_events *ev = (slot_events *)impl;
    copier *k = copier_of(be);
    cuda_impl *c = cuda_of(be);
    if (!k) return h3_fail(e, "weight slot: cannot create the copy stream");
    if (c->failed) return h3_fail(e, "%s", c->errmsg); /* an earlier failure: report it as it was */
    CUDA_OK(be, cudaStreamWaitEvent(k->stream, ev->released, 0));
    int next = 0;
    for (int i = 0; i < n; i++) {
        char *dst = (char *)data + p[i].offset;
        const char *src = (const char *)p[i].src;
        if (p[i].gguf) { /* blocks already in device memory: expanded by a kernel on the copy stream */
            const int64_t nv = (int64_t)(p[i].bytes / 2);
            if ((p[i].wide ? cuda_gguf_dequant_wide_on(k->stream, (float *)dst, src, p[i].gguf_type, nv)
                           : cuda_gguf_dequant_on(k->stream, (h3_bf16 *)dst, src, p[i].gguf_type, nv)) != 0)
                return h3_fail(e, "weight slot: GGUF type %u is not one h3 reads", p[i].gguf_type);
            CUDA_LAUNCHED(be, "gguf dequant_kernel (weight slot)");
            continue;
        }
        if (p[i].wide && !k->wide && cudaMalloc(&k->wide, STAGE_BYTES) != cudaSuccess) {
            cudaGetLastError();
            k->wide = NULL;
            return h3_fail(e, "weight slot: out of device memory for a %d MiB widening buffer", STAGE_BYTES >> 20);
        }
        for (size_t off = 0; off < p[i].bytes; off += STAGE_BYTES) {
            const size_t len = p[i].bytes - off < (size_t)STAGE_BYTES ? p[i].bytes - off : (size_t)STAGE_BYTES;
            const int b = next;
            next ^= 1;
            if (!k->stage[b] && !(k->stage[b] = cuda_host_alloc(be, STAGE_CAP)))
                return h3_fail(e, "weight slot: out of pinned host memory for a %d MiB staging buffer", STAGE_BYTES >> 20);
            if (k->stage_used[b]) CUDA_OK(be, cudaEventSynchronize(k->stage_done[b])); /* its last DMA is done */
            size_t skip = 0; /* a file piece: the wanted bytes start at stage + skip (O_DIRECT reads aligned ranges) */
            if (p[i].file) {
                if (h3_read_span(p[i].file, p[i].file_off + off, len, k->stage[b], STAGE_CAP, &skip, e) != 0) return -1;
            } else {
                h3_memcpy_par(k->stage[b], src + off, len);
            }
            /* wide: into the device buffer, then widened into the part (the same stream orders the buffer's reuse) */
            CUDA_OK(be, cudaMemcpyAsync(p[i].wide ? (char *)k->wide : dst + off, (char *)k->stage[b] + skip, len,
                                        cudaMemcpyHostToDevice, k->stream));
            CUDA_OK(be, cudaEventRecord(k->stage_done[b], k->stream));
            if (p[i].wide) {
                const int64_t nv = (int64_t)(len / 2);
                widen_kernel<<<cuda_blocks(nv, 256), 256, 0, k->stream>>>((float *)(dst + 2 * off), (const uint16_t *)k->wide, nv);
                CUDA_LAUNCHED(be, "widen_kernel (weight slot)");
            }
            k->stage_used[b] = 1;
        }
    }
    CUDA_OK(be, cudaEventRecord(ev->filled, k->stream));
    return c->failed ? h3_fail(e, "weight slot: %s", c->errmsg) : 0;
}

extern "C" void cuda_slot_acquire(h3_backend *be, void *impl) {
    CUDA_OK(be, cudaStreamWaitEvent(cuda_of(be)->stream, ((slot_events *)impl)->filled, 0));
}

extern "C" void cuda_slot_mark_released(h3_backend *be, void *impl) {
    CUDA_OK(be, cudaEventRecord(((slot_events *)impl)->released, cuda_of(be)->stream));
}

/* ---- h3_lora_merge_into (ops_linear.def): the CPU merge's bits (cpu/cpu_stream.c, docs/lora.md "The merge and its
 * rounding"). Each element: acc = fma(B[o][q], A[q][i], acc) over q = 0 .. rank-1 from 0 (__fmaf_rn, in that order),
 * then round(W + round(acc * s)) with __fmul_rn / __fadd_rn, so nvcc cannot contract or reorder; bf16 rounding is
 * h3_f32_to_bf16's (nearest even, NaN kept quiet). Tiles of 64 x 64 outputs, 16 x 16 threads of 4 x 4 each, the
 * factors staged through shared memory 16 ranks at a time. */
enum { LM_T = 64, LM_KC = 16 };

template <int DT> __device__ __forceinline__ float lm_load(const void *p, int64_t i) {
    if (DT == 1) return __uint_as_float((uint32_t)((const uint16_t *)p)[i] << 16);
    if (DT == 2) return __half2float(((const __half *)p)[i]);
    return ((const float *)p)[i];
}

__device__ __forceinline__ uint16_t lm_bf16(float f) { /* h3_f32_to_bf16 */
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

template <int DT> __device__ __forceinline__ float lm_round(float x) {
    if (DT == 1) return __uint_as_float((uint32_t)lm_bf16(x) << 16);
    if (DT == 2) return __half2float(__float2half_rn(x));
    return x;
}

template <int DT> __device__ __forceinline__ void lm_store(void *p, int64_t i, float v) { /* v is already rounded */
    if (DT == 1) ((uint16_t *)p)[i] = (uint16_t)(__float_as_uint(v) >> 16);
    else if (DT == 2) ((__half *)p)[i] = __float2half_rn(v);
    else ((float *)p)[i] = v;
}

template <int DT>
__global__ void __launch_bounds__(256) lora_merge_kernel(void *W, const void *A, const void *B, int64_t n, int64_t k,
                                                          int64_t group, int64_t stride, int rank, float s) {
    __shared__ float As[LM_KC][LM_T];
    __shared__ float Bs[LM_T][LM_KC + 1];
    const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
    const int64_t i0 = (int64_t)blockIdx.x * LM_T, o0 = (int64_t)blockIdx.y * LM_T;
    float acc[4][4];
#pragma unroll
    for (int a = 0; a < 4; a++)
#pragma unroll
        for (int b = 0; b < 4; b++) acc[a][b] = 0.0f;
    for (int q0 = 0; q0 < rank; q0 += LM_KC) {
        for (int t = threadIdx.x; t < LM_KC * LM_T; t += 256) {
            const int q = t / LM_T, c = t % LM_T; /* A[q0 + q][i0 + c] */
            As[q][c] = q0 + q < rank && i0 + c < k ? lm_load<DT>(A, (int64_t)(q0 + q) * k + i0 + c) : 0.0f;
            const int r = t / LM_KC, qq = t % LM_KC; /* B[o0 + r][q0 + qq] */
            Bs[r][qq] = q0 + qq < rank && o0 + r < n ? lm_load<DT>(B, (o0 + r) * rank + q0 + qq) : 0.0f;
        }
        __syncthreads();
        const int kc = rank - q0 < LM_KC ? rank - q0 : LM_KC; /* only real ranks enter the chain */
        for (int q = 0; q < kc; q++) {
            float av[4];
#pragma unroll
            for (int b = 0; b < 4; b++) av[b] = As[q][tx + 16 * b];
#pragma unroll
            for (int a = 0; a < 4; a++) {
                const float bv = Bs[ty + 16 * a][q];
#pragma unroll
                for (int b = 0; b < 4; b++) acc[a][b] = __fmaf_rn(bv, av[b], acc[a][b]);
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int a = 0; a < 4; a++) {
        const int64_t o = o0 + ty + 16 * a;
        if (o >= n) continue;
        const int64_t row = (o / group) * stride + o % group;
#pragma unroll
        for (int b = 0; b < 4; b++) {
            const int64_t i = i0 + tx + 16 * b;
            if (i >= k) continue;
            const int64_t at = row * k + i;
            const float d = lm_round<DT>(__fmul_rn(acc[a][b], s));
            lm_store<DT>(W, at, lm_round<DT>(__fadd_rn(lm_load<DT>(W, at), d)));
        }
    }
}

extern "C" void cuda_lora_merge_into(h3_backend *be, h3_slot *slot, void *W, h3_dtype dt, const h3_lora_delta *d) {
    cuda_impl *c = cuda_of(be);
    if (c->failed || !h3_lora_delta_ok(be, W, dt, d)) return;
    cudaStream_t st = c->stream;
    copier *k = NULL;
    if (slot) { /* after the slot's fill, on its copy stream, and before its "filled" event */
        if (!(k = copier_of(be))) return cuda_record_error(be, "h3_lora_merge_into", "cannot create the copy stream");
        st = k->stream;
    }
    if (d->n == 0 || d->k == 0) return;
    if (d->n > 65535LL * LM_T) return cuda_record_error(be, "h3_lora_merge_into", "more rows than one grid covers");
    const dim3 grid((unsigned)((d->k + LM_T - 1) / LM_T), (unsigned)((d->n + LM_T - 1) / LM_T));
    if (dt == H3_BF16)
        lora_merge_kernel<1><<<grid, 256, 0, st>>>(W, d->A, d->B, d->n, d->k, d->row_group, d->group_stride, d->rank, d->scaling);
    else if (dt == H3_F16)
        lora_merge_kernel<2><<<grid, 256, 0, st>>>(W, d->A, d->B, d->n, d->k, d->row_group, d->group_stride, d->rank, d->scaling);
    else
        lora_merge_kernel<0><<<grid, 256, 0, st>>>(W, d->A, d->B, d->n, d->k, d->row_group, d->group_stride, d->rank, d->scaling);
    CUDA_LAUNCHED(be, "lora_merge_kernel");
    if (slot) CUDA_OK(be, cudaEventRecord(((slot_events *)h3_slot_impl(slot))->filled, k->stream));
}
