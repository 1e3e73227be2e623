/* The backend's life cycle and memory (backend.h); the compute ops' dispatchers are made in ops.c. */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_ops.h"
#ifdef H3_CUDA
#include "cuda/cuda_ops.h"
#define DISPATCH(be, op, ...)                                  \
    do {                                                       \
        if ((be)->kind == H3_BACKEND_CUDA) cuda_##op(__VA_ARGS__); \
        else cpu_##op(__VA_ARGS__);                            \
    } while (0)
#define DISPATCH_RET(be, op, ...) \
    return (be)->kind == H3_BACKEND_CUDA ? cuda_##op(__VA_ARGS__) : cpu_##op(__VA_ARGS__)
#else
#define DISPATCH(be, op, ...) cpu_##op(__VA_ARGS__)
#define DISPATCH_RET(be, op, ...) return cpu_##op(__VA_ARGS__)
#endif

#include <omp.h>

h3_backend *h3_backend_new(h3_backend_kind kind, int nthreads, h3_err *e) { return h3_backend_new_on(kind, nthreads, 0, e); }

h3_backend *h3_backend_new_on(h3_backend_kind kind, int nthreads, int device, h3_err *e) {
    h3_backend *be = calloc(1, sizeof *be);
    if (!be) {
        h3_fail(e, "out of memory");
        return NULL;
    }
    be->kind = kind;
    be->nthreads = nthreads > 0 ? nthreads : omp_get_max_threads();
    if (kind == H3_BACKEND_CUDA) {
#ifdef H3_CUDA
        if (cuda_backend_init(be, device, e) != 0) {
            free(be);
            return NULL;
        }
#else
        (void)device;
        free(be);
        h3_fail(e, "--backend cuda: this binary was built without CUDA (rebuild with make CUDA=1)");
        return NULL;
#endif
    }
    return be;
}

void h3_backend_free(h3_backend *be) {
    if (!be) return;
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) cuda_backend_shutdown(be);
#endif
    free(be);
}

const char *h3_backend_name(const h3_backend *be) { return be->kind == H3_BACKEND_CUDA ? "cuda" : "cpu"; }

int h3_backend_check(h3_backend *be, h3_err *e) {
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) return cuda_backend_check(be, e);
#endif
    if (__atomic_load_n(&be->failed, __ATOMIC_ACQUIRE) == 1) return h3_fail(e, "%s", be->failure);
    return 0;
}

void h3_backend_unsupported(h3_backend *be, const char *op, const char *why) {
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) {
        cuda_record_error(be, op, why);
        return;
    }
#endif
    /* the CPU: a twin out of memory for its scratch (cpu_bf16.c, cpu_fp8.c) or a programming error; the first one
     * is kept (the twins may call from OpenMP threads: one writer wins the flag) */
    int expected = 0;
    if (__atomic_compare_exchange_n(&be->failed, &expected, 2, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        snprintf(be->failure, sizeof be->failure, "%s: no %s twin (%s)", op, h3_backend_name(be), why);
        __atomic_store_n(&be->failed, 1, __ATOMIC_RELEASE);
    }
}

void *h3_alloc(h3_backend *be, size_t bytes) { DISPATCH_RET(be, alloc, be, bytes); }
void  h3_free(h3_backend *be, void *p) {
    if (p) DISPATCH(be, free, be, p);
}

#ifdef H3_CUDA
void h3_upload(h3_backend *be, void *dst, const void *src, size_t n) {
    if (be->kind == H3_BACKEND_CUDA) cuda_upload(be, dst, src, n);
    else memcpy(dst, src, n);
}
void h3_download(h3_backend *be, void *dst, const void *src, size_t n) {
    if (be->kind == H3_BACKEND_CUDA) cuda_download(be, dst, src, n);
    else memcpy(dst, src, n);
}
void h3_copy(h3_backend *be, void *dst, const void *src, size_t n) {
    if (be->kind == H3_BACKEND_CUDA) cuda_copy(be, dst, src, n);
    else memmove(dst, src, n);
}
void h3_sync(h3_backend *be) {
    if (be->kind == H3_BACKEND_CUDA) cuda_sync(be);
}
#else
void h3_upload(h3_backend *be, void *dst, const void *src, size_t n) { memcpy(dst, src, n); }
void h3_download(h3_backend *be, void *dst, const void *src, size_t n) { memcpy(dst, src, n); }
void h3_copy(h3_backend *be, void *dst, const void *src, size_t n) { memmove(dst, src, n); }
void h3_sync(h3_backend *be) {}
#endif

static void host_copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows) {
    for (size_t r = 0; r < rows; r++) memcpy((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
}
void h3_copy_2d(h3_backend *be, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows) {
    if (!width || !rows) return;
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) {
        cuda_copy_2d(be, dst, dpitch, src, spitch, width, rows);
        return;
    }
#endif
    host_copy_2d(dst, dpitch, src, spitch, width, rows);
}
void h3_backend_bind_thread(h3_backend *be) {
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) cuda_bind_thread(be);
#endif
    (void)be;
}

h3_tensor *h3_weight_upload(h3_backend *be, const h3_tensor *t, h3_err *e) {
    if (be->kind == H3_BACKEND_CPU) return h3_tensor_view(t->dtype, t->ndim, t->shape, t->data, e);
    h3_tensor *w = h3_tensor_view(t->dtype, t->ndim, t->shape, NULL, e);
    if (!w) return NULL;
    size_t n = h3_tensor_nbytes(t);
    w->data = h3_alloc(be, n);
    if (!w->data) {
        h3_tensor_free(w);
        h3_fail(e, "out of device memory uploading %zu bytes", n);
        return NULL;
    }
    h3_upload(be, w->data, t->data, n);
    return w;
}

void h3_weight_free(h3_backend *be, h3_tensor *w) {
    if (!w) return;
    if (be->kind != H3_BACKEND_CPU) h3_free(be, w->data);
    h3_tensor_free(w);
}
