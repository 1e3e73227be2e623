/* Weight slots on CUDA (backend_stream.h). Fills run on a copy stream of their own, so the DMA of block b + 1
 * overlaps the kernels of block b on the compute stream; events order the two: a fill waits for the slot's
 * "released" event (recorded on the compute stream after the slot's last reader), a reader waits for its
 * "filled" event (recorded on the copy stream). The sources go through two pinned staging buffers of the copy
 * stream, filled by the host while the other's DMA runs: memory sources (file mappings, host copies) with OpenMP
 * threads (h3_memcpy_par: the mapping's page faults run in parallel), file sources with parallel preads
 * (h3_read_span, O_DIRECT: the aligned range around the piece, the DMA starting at its first byte). */
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
            if (cuda_gguf_dequant_on(k->stream, (h3_bf16 *)dst, src, p[i].gguf_type, (int64_t)(p[i].bytes / 2)) != 0)
                return h3_fail(e, "weight slot: GGUF type %u is not one h3 reads", p[i].gguf_type);
            CUDA_LAUNCHED(be, "gguf dequant_kernel (weight slot)");
            continue;
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
            CUDA_OK(be, cudaMemcpyAsync(dst + off, (char *)k->stage[b] + skip, len, cudaMemcpyHostToDevice, k->stream));
            CUDA_OK(be, cudaEventRecord(k->stage_done[b], k->stream));
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
