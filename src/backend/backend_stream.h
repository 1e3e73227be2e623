/* Weights streamed into backend memory while the backend computes (docs/model/features.md 7.3): a slot is a piece of
 * backend memory that holds one block's matrices at a time. The model fills one slot with the next block's
 * bytes while the backend runs the current block out of the other slot, so only two blocks are resident.
 *
 * Ordering (all on the backend's queue, nothing waits on the host unless said):
 *   h3_slot_fill     copies host bytes into the slot after the ops queued before the slot's last
 *                    h3_slot_release have finished with it (CUDA: on a second, copy stream);
 *   h3_slot_acquire  makes the ops queued after it wait for the slot's last fill;
 *   h3_slot_release  marks the ops queued so far as the last readers of the slot's contents.
 * On the CPU a fill is a parallel memcpy and acquire/release do nothing (the ops run in call order).
 *
 * Sources are host memory, typically a read-only file mapping, or byte ranges of files read with pread (O_DIRECT: the
 * page cache keeps no copy); h3_slot_fill returns once they are no longer read (CUDA stages them through pinned
 * buffers of its own). Or GGUF blocks in backend memory (a GGUF transformer kept quantized, docs/checkpoints.md):
 * expanded into the slot as bf16 by h3_gguf_dequant's arithmetic (CUDA: its kernel on the copy stream, so the
 * expansion of block b + 1 overlaps block b's kernels as a copy does). A `wide` piece holds BF16 values (or GGUF blocks
 * expanded to BF16) and lands widened to F32 (exactly), 2 x bytes in the slot: the fp32 mode's LoRA-merged parts, which
 * the resident model holds as F32 copies of the BF16 weights (docs/lora.md "With --ssd-streaming"). */
#ifndef H3_BACKEND_STREAM_H
#define H3_BACKEND_STREAM_H

#include <stddef.h>

#include "../io/file_read.h"
#include "backend.h"

typedef struct h3_slot h3_slot;

typedef struct h3_slot_piece {
    const void *src;    /* host bytes (when file is NULL) */
    size_t      bytes;
    size_t      offset; /* where they go in the slot */
    const h3_read_file *file; /* or read them from this file at file_off (h3_read_span: uncached with O_DIRECT) */
    uint64_t    file_off;
    int         gguf;      /* 1: src is backend memory holding GGUF blocks of gguf_type, expanded to bytes / 2 bf16 values */
    uint32_t    gguf_type;
    int         wide;      /* 1: the bytes / 2 BF16 values are written as F32 (2 x bytes at offset) */
} h3_slot_piece;

/* NULL when out of backend memory. */
h3_slot *h3_slot_new(h3_backend *be, size_t bytes);
/* Waits for the slot's fills and readers, then gives its memory back. NULL is a no-op. */
void     h3_slot_free(h3_backend *be, h3_slot *s);
void    *h3_slot_data(const h3_slot *s);
size_t   h3_slot_bytes(const h3_slot *s);
/* Fails when a piece ends past the slot or has no source (nothing queued then), or when a copy cannot be queued
 * (some may have been): after a failed fill the slot's contents are undefined until a fill succeeds. */
int      h3_slot_fill(h3_backend *be, h3_slot *s, const h3_slot_piece *pieces, int n, h3_err *e);
void     h3_slot_acquire(h3_backend *be, h3_slot *s);
void     h3_slot_release(h3_backend *be, h3_slot *s);

/* The slot's backend-private state (CUDA: its events), for twins of ops that order themselves after a fill
 * (h3_lora_merge_into, ops_linear.def). */
void    *h3_slot_impl(const h3_slot *s);

#endif
