/* The pieces the Hopper (sm_90a) kernels share: cuda_flash_sm90.cu, cuda_sage8_sm90.cu, cuda_int8_sm90.cu.
 * Shared-memory addresses, mbarrier waits, TMA loads, warpgroup MMA fences and descriptors, named barriers (device
 * code for sm_90a only: other targets compile empty kernels that are never launched), and the host's tensor-map
 * encoder. Include it inside a kernel file's anonymous namespace, after cuda_internal.h and <cuda.h>. */
#ifndef H3_CUDA_SM90_COMMON_H
#define H3_CUDA_SM90_COMMON_H

#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)

__device__ __forceinline__ uint32_t su32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_init(uint32_t bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ __forceinline__ uint32_t mbar_try(uint32_t bar, unsigned parity) {
    uint32_t done;
    asm volatile("{\n.reg .pred p;\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                 "selp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
    return done;
}
/* thread 0, after its mbar_init calls: the initialisation made visible (before the CTA's __syncthreads) */
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
/* waits for the phase of the given parity */
__device__ __forceinline__ void mbar_wait(uint32_t bar, unsigned parity) {
    while (!mbar_try(bar, parity)) {
    }
}
/* the producer's waits: ~2^31 polls (many seconds: a pipeline bug, never a legitimate wait) trap, so a
 * deadlock fails the launch instead of hanging the process. (A trap in the consumer warpgroups' code
 * makes ptxas cap their registers near the kernel-entry count and spill, so only the producer has it.) */
__device__ __forceinline__ void mbar_wait_guarded(uint32_t bar, unsigned parity) {
    for (uint32_t n = 0; !mbar_try(bar, parity);)
        if (++n == 0x80000000u) __trap();
}

/* ---- TMA: tiled loads of 2 to 4 dimensions into shared memory, completion on an mbarrier ---- */
__device__ __forceinline__ void tma_load2(uint32_t dst, const CUtensorMap *map, uint32_t bar, int c0, int c1) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n"
                 ::"r"(dst), "l"((uint64_t)map), "r"(bar), "r"(c0), "r"(c1)
                 : "memory");
}
__device__ __forceinline__ void tma_load3(uint32_t dst, const CUtensorMap *map, uint32_t bar, int c0, int c1, int c2) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n"
                 ::"r"(dst), "l"((uint64_t)map), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}
__device__ __forceinline__ void tma_load4(uint32_t dst, const CUtensorMap *map, uint32_t bar, int c0, int c1, int c2,
                                          int c3) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];\n"
                 ::"r"(dst), "l"((uint64_t)map), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
                 : "memory");
}
/* the producer thread's first step: its kernel's tensor maps into the descriptor cache, in order */
__device__ __forceinline__ void prefetch_map(const CUtensorMap *m) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"((uint64_t)m) : "memory");
}
template <typename... Maps>
__device__ __forceinline__ void prefetch_maps(const Maps *...m) {
    (prefetch_map(m), ...);
}

/* ---- warpgroup MMA ---- */
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/* keeps the compiler from moving accesses of accumulator registers across wgmma issue / wait */
template <int N>
__device__ __forceinline__ void keep(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void keep(int32_t (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; i++) asm volatile("" : "+r"(r[i])::"memory");
}

/* Shared-memory matrix descriptor: start address, leading / stride byte offsets (16-byte units),
 * swizzle mode 1 = 128B (bits 62-63). */
__device__ __forceinline__ uint64_t sm_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return (uint64_t)((addr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFFu) << 16) |
           ((uint64_t)((sbo >> 4) & 0x3FFFu) << 32) | (1ull << 62);
}

__device__ __forceinline__ uint32_t bf16x2(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

/* ---- the attention kernels' two consumer warpgroups (256 threads): named barriers, stage release ---- */
__device__ __forceinline__ void nbar_sync(int id) { asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory"); }
__device__ __forceinline__ void nbar_arrive(int id) { asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory"); }

/* one warp's release of a stage: after its wgmma reading the stage has completed */
__device__ __forceinline__ void release(uint32_t bar, int lane) {
    __syncwarp();
    if (lane == 0) mbar_arrive(bar);
}

#endif /* sm_90a device code */

/* ---- host side ---- */

typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                    const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                    CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

/* the driver's cuTensorMapEncodeTiled through the runtime (no -lcuda); looked up per call (microseconds),
 * so no process-wide state */
encode_tiled_fn encoder(void) {
    void *f = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
        return (encode_tiled_fn)f;
    return nullptr;
}

#endif
