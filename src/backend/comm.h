/* A communicator: N ranks that exchange buffers, for sequence parallelism over several GPUs (docs/parallel.md).
 *
 * One process, one thread per rank. A group is made once (h3_comm_group_new); then each rank's thread joins it
 * with its own backend (h3_comm_join: collective, every rank must call it) and calls the collectives below in the
 * same order as the other ranks. Two implementations behind the same calls:
 *   H3_COMM_CPU   ranks are threads on the CPU backend; buffers are host memory; each collective copies between
 *                 the ranks' buffers and returns when the data is in place (two barriers). Runs the parallel code
 *                 paths anywhere, CI included.
 *   H3_COMM_NCCL  ranks are GPUs (one CUDA backend each); buffers are device memory; each collective is
 *                 enqueued on the rank's stream (NCCL send/recv pairs in a group), ordered with the rank's ops.
 * A failed collective fails on every rank (the CPU one agrees on the outcome inside the call), so no rank waits
 * forever for a peer that gave up. */
#ifndef H3_COMM_H
#define H3_COMM_H

#include <stddef.h>

#include "backend.h"

typedef enum h3_comm_kind { H3_COMM_CPU = 0, H3_COMM_NCCL = 1 } h3_comm_kind;
enum { H3_COMM_MAX_RANKS = 8 };

typedef struct h3_comm_group h3_comm_group;
typedef struct h3_comm       h3_comm; /* one rank's handle */

/* nranks 1..H3_COMM_MAX_RANKS. NCCL: fails when the binary has no CUDA. */
h3_comm_group *h3_comm_group_new(h3_comm_kind kind, int nranks, h3_err *e);
/* After every rank has left. */
void           h3_comm_group_free(h3_comm_group *g);

/* Rank `rank` joins from its own thread, with the backend its buffers live on (CPU for H3_COMM_CPU; the CUDA
 * backend of the rank's GPU for NCCL). Blocks until every rank has joined. */
h3_comm *h3_comm_join(h3_comm_group *g, int rank, h3_backend *be, h3_err *e);
void     h3_comm_leave(h3_comm *c);

int h3_comm_size(const h3_comm *c);
int h3_comm_rank(const h3_comm *c);

/* All-to-all with per-peer sizes, in bytes: this rank's send + soff[p] (sbytes[p] bytes) goes to peer p, and
 * what peer p sends to this rank lands at recv + roff[p] (rbytes[p] bytes, which must equal what p sends). The
 * send and receive ranges must not overlap. Zero sizes are allowed. */
int h3_comm_alltoallv(h3_comm *c, void *recv, const size_t *roff, const size_t *rbytes, const void *send,
                      const size_t *soff, const size_t *sbytes, h3_err *e);
/* Rank r's send (bytes[r] of it) lands at recv + offs[r] on every rank (offs and bytes the same on all ranks). */
int h3_comm_allgatherv(h3_comm *c, void *recv, const size_t *offs, const size_t *bytes, const void *send, h3_err *e);
/* root's buf (bytes) to every rank's buf. */
int h3_comm_broadcast(h3_comm *c, void *buf, size_t bytes, int root, h3_err *e);
/* Host-side agreement (no device work, any kind): every rank says whether it is ready (ok 1) or failed (ok 0, why
 * its message); returns 0 on every rank when all are ready, else -1 on every rank with the first failed rank's
 * message. Lets a rank that failed before a collective stop its peers instead of leaving them waiting. */
int h3_comm_agree(h3_comm *c, int ok, const char *why, h3_err *e);
/* Returns when every rank has reached it (NCCL: when every rank's stream has, host-side as well). */
int h3_comm_barrier(h3_comm *c, h3_err *e);

#endif
