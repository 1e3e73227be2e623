/* Row and layout ops (the table's lines are in ops_transfer.def; the rules shared by every group are in ops.h), and
 * the host side of transfers: pinned host buffers and asynchronous downloads (ops_transfer.c; not table ops, they
 * compute nothing). */
#ifndef H3_OPS_TRANSFER_H
#define H3_OPS_TRANSFER_H

#include <stddef.h>
#include <stdint.h>

#include "backend.h"

#define H3_OP(name, params, args) void h3_##name params;
#include "ops_transfer.def"
#undef H3_OP

/* Host buffers the device copies into asynchronously (CUDA: pinned memory; CPU: plain memory). */
void *h3_host_alloc(h3_backend *be, size_t bytes);
void  h3_host_free(h3_backend *be, void *p);
/* Makes n buffers of `bytes` and frees them again: on CUDA they stay in the backend's pinned-buffer cache, so a
 * later h3_host_alloc of that size is free. Safe to call from a second thread while the backend computes.
 * Returns 0, or -1 when an allocation failed. CPU: nothing to do. */
int   h3_host_prefetch(h3_backend *be, size_t bytes, int n);
/* Asynchronous downloads in slots (0 or 1): h3_download_async queues a copy of `bytes` from src (backend memory) to
 * dst (a h3_host_alloc buffer) after all work queued so far, on a copy stream, so compute queued later overlaps it;
 * h3_download_wait blocks until the slot's copy is done. Later work must not overwrite src before the wait.
 * CPU: a plain copy, the wait does nothing. */
typedef struct h3_xfer h3_xfer;
h3_xfer *h3_xfer_new(h3_backend *be);
void     h3_xfer_free(h3_backend *be, h3_xfer *x);
void     h3_download_async(h3_backend *be, h3_xfer *x, int slot, void *dst, const void *src, size_t bytes);
void     h3_download_wait(h3_backend *be, h3_xfer *x, int slot);

#endif
