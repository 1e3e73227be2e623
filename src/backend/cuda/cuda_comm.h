/* The NCCL communicator (cuda/cuda_comm.cu) behind comm.h's H3_COMM_NCCL. Without CUDA the group cannot be made
 * and the rest is never reached. */
#ifndef H3_CUDA_COMM_H
#define H3_CUDA_COMM_H

#ifdef __cplusplus
extern "C" {
#endif
#include <stddef.h>

#include "../backend.h"

#ifdef H3_CUDA
void *cuda_comm_group_new(int nranks, h3_err *e); /* NCCL's unique id for the group */
void  cuda_comm_group_free(void *g);
void *cuda_comm_join(void *g, int rank, h3_backend *be, h3_err *e); /* ncclCommInitRank: collective */
void  cuda_comm_leave(void *comm);
int   cuda_comm_alltoallv(void *comm, h3_backend *be, int n, void *recv, const size_t *roff, const size_t *rbytes,
                          const void *send, const size_t *soff, const size_t *sbytes, h3_err *e);
int   cuda_comm_broadcast(void *comm, h3_backend *be, void *buf, size_t bytes, int root, h3_err *e);
int   cuda_comm_barrier(void *comm, h3_backend *be, h3_err *e);
#else
static inline void *cuda_comm_group_new(int nranks, h3_err *e) {
    (void)nranks;
    return h3_fail(e, "communicator: NCCL needs a CUDA build (make CUDA=1)"), (void *)0;
}
static inline void  cuda_comm_group_free(void *g) { (void)g; }
static inline void *cuda_comm_join(void *g, int r, h3_backend *be, h3_err *e) { (void)g, (void)r, (void)be; return h3_fail(e, "communicator: no CUDA"), (void *)0; }
static inline void  cuda_comm_leave(void *c) { (void)c; }
static inline int   cuda_comm_alltoallv(void *c, h3_backend *be, int n, void *r, const size_t *ro, const size_t *rb,
                                        const void *s, const size_t *so, const size_t *sb, h3_err *e) {
    (void)c, (void)be, (void)n, (void)r, (void)ro, (void)rb, (void)s, (void)so, (void)sb;
    return h3_fail(e, "communicator: no CUDA");
}
static inline int cuda_comm_broadcast(void *c, h3_backend *be, void *b, size_t n, int root, h3_err *e) {
    (void)c, (void)be, (void)b, (void)n, (void)root;
    return h3_fail(e, "communicator: no CUDA");
}
static inline int cuda_comm_barrier(void *c, h3_backend *be, h3_err *e) { (void)c, (void)be; return h3_fail(e, "communicator: no CUDA"); }
#endif

#ifdef __cplusplus
}
#endif
#endif
