/* Dispatch of the VAE decoder ops (backend_vae.h) to the CPU twin (cpu/cpu_vae.c) or CUDA (cuda/cuda_vae.cu). */
#include "backend_vae.h"

#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_vae.h"
#ifdef H3_CUDA
#include "cuda/cuda_vae.h"
#define VAE_IS_CUDA(be) ((be)->kind == H3_BACKEND_CUDA)
#else
#define VAE_IS_CUDA(be) 0
#endif
#include "backend_timed.h"
/* the decoder's ops in H3_CUDA_OPTIME's table too (docs/tuning.md) */
#define VAE_DISPATCH TIMED_DISPATCH

void h3_vae_residual_rmsnorm(h3_backend *be, float *x, h3_bf16 *y, const h3_bf16 *branch, const float *scale,
                             int64_t rows, int64_t dim, const float *w, float eps) {
    VAE_DISPATCH(be, vae_residual_rmsnorm, be, x, y, branch, scale, rows, dim, w, eps);
}

void h3_vae_qk_norm_rope(h3_backend *be, h3_bf16 *x, int64_t rows, int64_t row_stride, int64_t period, int heads,
                         int head_dim, float eps, int rot_dim, const float *cos, const float *sin) {
    VAE_DISPATCH(be, vae_qk_norm_rope, be, x, rows, row_stride, period, heads, head_dim, eps, rot_dim, cos, sin);
}

void h3_vae_tile_attention(h3_backend *be, h3_bf16 *out, const h3_bf16 *qkv, int64_t tiles, int64_t N, int heads,
                           int head_dim, float scale) {
    VAE_DISPATCH(be, vae_tile_attention, be, out, qkv, tiles, N, heads, head_dim, scale);
}

void *h3_vae_host_alloc(h3_backend *be, size_t bytes) {
#ifdef H3_CUDA
    if (VAE_IS_CUDA(be)) return cuda_vae_host_alloc(be, bytes);
#endif
    return malloc(bytes ? bytes : 1);
}

void h3_vae_host_free(h3_backend *be, void *p) {
    if (!p) return;
#ifdef H3_CUDA
    if (VAE_IS_CUDA(be)) {
        cuda_vae_host_free(be, p);
        return;
    }
#endif
    free(p);
}

int h3_vae_host_prefetch(h3_backend *be, size_t bytes, int n) {
    if (be->kind == H3_BACKEND_CPU || n <= 0) return 0;
    void *p[8] = {0};
    int rc = 0;
    if (n > 8) n = 8;
    for (int i = 0; i < n; i++)
        if (!(p[i] = h3_vae_host_alloc(be, bytes))) rc = -1;
    for (int i = 0; i < n; i++) h3_vae_host_free(be, p[i]);
    return rc;
}

struct h3_vae_xfer { int unused; }; /* the CPU backend's: nothing to hold */

h3_vae_xfer *h3_vae_xfer_new(h3_backend *be) {
#ifdef H3_CUDA
    if (VAE_IS_CUDA(be)) return (h3_vae_xfer *)cuda_vae_xfer_new(be);
#endif
    return calloc(1, sizeof(h3_vae_xfer));
}

void h3_vae_xfer_free(h3_backend *be, h3_vae_xfer *x) {
    if (!x) return;
#ifdef H3_CUDA
    if (VAE_IS_CUDA(be)) {
        cuda_vae_xfer_free(be, x);
        return;
    }
#endif
    free(x);
}

void h3_vae_download_async(h3_backend *be, h3_vae_xfer *x, int slot, void *dst, const void *src, size_t bytes) {
#ifdef H3_CUDA
    if (VAE_IS_CUDA(be)) {
        cuda_vae_download_async(be, x, slot, dst, src, bytes);
        return;
    }
#endif
    (void)x, (void)slot;
    memcpy(dst, src, bytes);
}

void h3_vae_download_wait(h3_backend *be, h3_vae_xfer *x, int slot) {
#ifdef H3_CUDA
    if (VAE_IS_CUDA(be)) cuda_vae_download_wait(be, x, slot);
#endif
    (void)be, (void)x, (void)slot;
}
