/* Pinned host buffers and asynchronous downloads (ops_transfer.h): CUDA's in cuda/cuda_vae.cu, the CPU's here. */
#include "ops_transfer.h"

#include <stdlib.h>
#include <string.h>

#ifdef H3_CUDA
#include "cuda/cuda_vae.h"
#endif

void *h3_host_alloc(h3_backend *be, size_t bytes) {
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) return cuda_host_alloc(be, bytes);
#endif
    return malloc(bytes ? bytes : 1);
}

void h3_host_free(h3_backend *be, void *p) {
    if (!p) return;
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) { cuda_host_free(be, p); return; }
#endif
    free(p);
}

int h3_host_prefetch(h3_backend *be, size_t bytes, int n) {
    if (be->kind == H3_BACKEND_CPU || n <= 0) return 0;
    void *p[8] = {0};
    int rc = 0;
    if (n > 8) n = 8;
    for (int i = 0; i < n; i++)
        if (!(p[i] = h3_host_alloc(be, bytes))) rc = -1;
    for (int i = 0; i < n; i++) h3_host_free(be, p[i]);
    return rc;
}

struct h3_xfer { int unused; }; /* the CPU backend's: nothing to hold */

h3_xfer *h3_xfer_new(h3_backend *be) {
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) return (h3_xfer *)cuda_xfer_new(be);
#endif
    return calloc(1, sizeof(h3_xfer));
}

void h3_xfer_free(h3_backend *be, h3_xfer *x) {
    if (!x) return;
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) { cuda_xfer_free(be, x); return; }
#endif
    free(x);
}

void h3_download_async(h3_backend *be, h3_xfer *x, int slot, void *dst, const void *src, size_t bytes) {
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) { cuda_download_async(be, x, slot, dst, src, bytes); return; }
#endif
    (void)x, (void)slot;
    memcpy(dst, src, bytes);
}

void h3_download_wait(h3_backend *be, h3_xfer *x, int slot) {
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) cuda_download_wait(be, x, slot);
#endif
    (void)be, (void)x, (void)slot;
}
