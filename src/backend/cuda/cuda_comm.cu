/* NCCL behind comm.h (docs/parallel.md): one communicator per rank, made by ncclCommInitRank from the rank's
 * own thread with the group's unique id; collectives enqueued on the rank's backend stream, so they are ordered
 * with the rank's kernels and need no host synchronisation. The all-to-all is a group of ncclSend / ncclRecv
 * pairs (NCCL's own all-to-all pattern), which also covers unequal sizes. NVLink multicast (NVLS) is not
 * used: the communicators are made with it turned off. */
#include "cuda_internal.h"
#include "cuda_comm.h"

#include <nccl.h>
#include <stdlib.h>

typedef struct nccl_group {
    ncclUniqueId id;
    int          n;
} nccl_group;

static int nccl_fail(h3_err *e, const char *what, ncclResult_t r) {
    return h3_fail(e, "communicator: %s failed: %s", what, ncclGetErrorString(r));
}

extern "C" void *cuda_comm_group_new(int nranks, h3_err *e) {
    nccl_group *g = (nccl_group *)calloc(1, sizeof *g);
    if (!g) return h3_fail(e, "communicator: out of memory"), (void *)NULL;
    /* NVLink multicast (NVLS) off unless the user set it: NCCL reads this when the communicators are made, and
     * the lent machines must not create multicast objects (docs/parallel.md). Set here, once, before the rank
     * threads exist (setenv is not thread-safe). */
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    ncclResult_t r = ncclGetUniqueId(&g->id);
    if (r != ncclSuccess) {
        free(g);
        nccl_fail(e, "ncclGetUniqueId", r);
        return NULL;
    }
    g->n = nranks;
    return g;
}

extern "C" void cuda_comm_group_free(void *g) { free(g); }

extern "C" void *cuda_comm_join(void *gv, int rank, h3_backend *be, h3_err *e) {
    nccl_group *g = (nccl_group *)gv;
    if (cudaSetDevice(cuda_of(be)->device) != cudaSuccess) return h3_fail(e, "communicator: cudaSetDevice failed"), (void *)NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    ncclComm_t comm;
    ncclResult_t r = ncclCommInitRankConfig(&comm, g->n, g->id, rank, &cfg);
    if (r != ncclSuccess) {
        nccl_fail(e, "ncclCommInitRank", r);
        return NULL;
    }
    return comm;
}

extern "C" void cuda_comm_leave(void *c) {
    if (c) ncclCommDestroy((ncclComm_t)c);
}

extern "C" int cuda_comm_alltoallv(void *c, h3_backend *be, int n, void *recv, const size_t *roff, const size_t *rbytes,
                                   const void *send, const size_t *soff, const size_t *sbytes, h3_err *e) {
    ncclComm_t comm = (ncclComm_t)c;
    cudaStream_t st = cuda_of(be)->stream;
    ncclResult_t r = ncclGroupStart();
    for (int p = 0; p < n && r == ncclSuccess; p++) {
        if (sbytes[p]) r = ncclSend((const char *)send + soff[p], sbytes[p], ncclUint8, p, comm, st);
        if (r == ncclSuccess && rbytes[p]) r = ncclRecv((char *)recv + roff[p], rbytes[p], ncclUint8, p, comm, st);
    }
    ncclResult_t r2 = ncclGroupEnd();
    if (r != ncclSuccess) return nccl_fail(e, "ncclSend/ncclRecv", r);
    if (r2 != ncclSuccess) return nccl_fail(e, "ncclGroupEnd (all-to-all)", r2);
    return 0;
}

extern "C" int cuda_comm_broadcast(void *c, h3_backend *be, void *buf, size_t bytes, int root, h3_err *e) {
    ncclResult_t r = ncclBroadcast(buf, buf, bytes, ncclUint8, root, (ncclComm_t)c, cuda_of(be)->stream);
    return r == ncclSuccess ? 0 : nccl_fail(e, "ncclBroadcast", r);
}

/* An all-reduce of one int on the stream, then the host waits for it: every rank has reached this point. */
extern "C" int cuda_comm_barrier(void *c, h3_backend *be, h3_err *e) {
    int *d = (int *)cuda_scratch(be, sizeof(int));
    if (!d) return h3_fail(e, "communicator: out of device memory for the barrier");
    cudaStream_t st = cuda_of(be)->stream;
    cudaMemsetAsync(d, 0, sizeof(int), st);
    ncclResult_t r = ncclAllReduce(d, d, 1, ncclInt32, ncclSum, (ncclComm_t)c, st);
    cudaError_t ce = cudaStreamSynchronize(st);
    cuda_free(be, d);
    if (r != ncclSuccess) return nccl_fail(e, "ncclAllReduce (barrier)", r);
    if (ce != cudaSuccess) return h3_fail(e, "communicator: barrier: %s", cudaGetErrorString(ce));
    return 0;
}
