/* Weight slots (backend_stream.h): the checks and the CPU twin here, the CUDA twin in cuda/cuda_stream.cu. */
#include "backend_stream.h"

#include <stdlib.h>
#include <string.h>

#include "../core/tensor.h" /* h3_memcpy_par */
#include "cpu/cpu_ops.h"
#ifdef H3_CUDA
#include "cuda/cuda_stream.h"
#endif

struct h3_slot {
    void  *data;
    size_t bytes;
    void  *impl; /* CUDA: the slot's events */
};

h3_slot *h3_slot_new(h3_backend *be, size_t bytes) {
    h3_slot *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->bytes = bytes;
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) {
        if (cuda_slot_init(be, &s->data, &s->impl, bytes) != 0) {
            free(s);
            return NULL;
        }
        return s;
    }
#endif
    if (!(s->data = h3_alloc(be, bytes ? bytes : 1))) {
        free(s);
        return NULL;
    }
    return s;
}

void h3_slot_free(h3_backend *be, h3_slot *s) {
    if (!s) return;
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) {
        cuda_slot_release_all(be, s->data, s->impl);
        free(s);
        return;
    }
#endif
    h3_free(be, s->data);
    free(s);
}

void  *h3_slot_data(const h3_slot *s) { return s->data; }
size_t h3_slot_bytes(const h3_slot *s) { return s->bytes; }

/* The CPU twin of a file piece: chunks through an aligned bounce buffer (O_DIRECT wants aligned buffers), to dst. */
static int fill_from_file(char *dst, const h3_slot_piece *p, h3_err *e) {
    const size_t chunk = (size_t)64 << 20, cap = chunk + 2 * H3_DIRECT_ALIGN;
    uint8_t *buf = aligned_alloc(H3_DIRECT_ALIGN, cap);
    if (!buf) return h3_fail(e, "out of memory for a read buffer");
    int rc = 0;
    for (size_t pos = 0; pos < p->bytes && rc == 0; pos += chunk) {
        const size_t len = p->bytes - pos < chunk ? p->bytes - pos : chunk;
        size_t skip;
        rc = h3_read_span(p->file, p->file_off + pos, len, buf, cap, &skip, e);
        if (rc == 0) memcpy(dst + pos, buf + skip, len);
    }
    free(buf);
    return rc;
}

/* A wide piece on the CPU: its BF16 values (copied, read or expanded from GGUF blocks) widened into the slot. */
static int fill_wide(h3_backend *be, h3_slot *s, const h3_slot_piece *p, h3_err *e) {
    const size_t n = p->bytes / 2;
    void *tmp = p->gguf || p->file ? malloc(p->bytes ? p->bytes : 1) : NULL;
    if ((p->gguf || p->file) && !tmp) return h3_fail(e, "weight slot: out of memory for a %zu-byte piece", p->bytes);
    int rc = 0;
    if (p->gguf) {
        cpu_gguf_dequant(be, tmp, p->src, p->gguf_type, (int64_t)n);
        rc = h3_backend_check(be, e);
    } else if (p->file) {
        rc = fill_from_file(tmp, p, e);
    }
    if (rc == 0) {
        const h3_bf16 *v = tmp ? tmp : p->src;
        float *w = (float *)((char *)s->data + p->offset);
#pragma omp parallel for schedule(static) if (n >= (1 << 20))
        for (int64_t i = 0; i < (int64_t)n; i++) w[i] = h3_bf16_to_f32(v[i]);
    }
    free(tmp);
    return rc;
}

int h3_slot_fill(h3_backend *be, h3_slot *s, const h3_slot_piece *p, int n, h3_err *e) {
    for (int i = 0; i < n; i++) {
        const size_t out = p[i].wide ? 2 * p[i].bytes : p[i].bytes;
        if ((!p[i].src && !p[i].file) || p[i].offset > s->bytes || out > s->bytes - p[i].offset)
            return h3_fail(e, "weight slot: piece %d (%zu bytes at offset %zu) %s a slot of %zu bytes", i, out,
                           p[i].offset, p[i].src || p[i].file ? "ends past" : "has no source for", s->bytes);
    }
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) return cuda_slot_fill(be, s->data, s->impl, p, n, e);
#endif
    (void)be;
    for (int i = 0; i < n; i++) {
        if (p[i].wide) {
            if (fill_wide(be, s, &p[i], e) != 0) return -1;
            continue;
        }
        if (p[i].gguf) {
            cpu_gguf_dequant(be, (h3_bf16 *)((char *)s->data + p[i].offset), p[i].src, p[i].gguf_type,
                             (int64_t)(p[i].bytes / 2));
            if (h3_backend_check(be, e) != 0) return -1;
            continue;
        }
        if (p[i].file && fill_from_file((char *)s->data + p[i].offset, &p[i], e) != 0) return -1;
        if (!p[i].file) h3_memcpy_par((char *)s->data + p[i].offset, p[i].src, p[i].bytes);
    }
    return 0;
}

void h3_slot_acquire(h3_backend *be, h3_slot *s) {
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) cuda_slot_acquire(be, s->impl);
#endif
    (void)be, (void)s;
}

void h3_slot_release(h3_backend *be, h3_slot *s) {
#ifdef H3_CUDA
    if (be->kind == H3_BACKEND_CUDA) cuda_slot_mark_released(be, s->impl);
#endif
    (void)be, (void)s;
}

void *h3_slot_impl(const h3_slot *s) { return s->impl; }
