/* Shared-memory addresses and mbarrier waits of the Hopper (sm_90a) kernels: cuda_flash_sm90.cu, cuda_sage8_sm90.cu,
 * cuda_int8_sm90.cu. Device code for sm_90a only: include it inside a kernel file's
 * `#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)` block, after cuda_internal.h. */
#ifndef H3_CUDA_SM90_MBARRIER_H
#define H3_CUDA_SM90_MBARRIER_H

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

#endif
