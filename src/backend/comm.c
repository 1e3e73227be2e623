/* The communicator (comm.h): the group, the CPU implementation (ranks are threads, buffers host memory) and the
 * dispatch to the NCCL one (cuda/cuda_comm.cu). docs/parallel.md. */
#include "comm.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_comm.h"

/* What a rank has posted for the collective in progress (CPU): the other ranks read it between the barriers. */
typedef struct posted {
    const void   *send;
    const size_t *soff, *sbytes;
    size_t        rbytes_from[H3_COMM_MAX_RANKS]; /* what this rank expects from each peer */
    int           op;                             /* which collective (a mismatch is an error on every rank) */
} posted;

struct h3_comm_group {
    h3_comm_kind      kind;
    int               n;
    pthread_barrier_t bar;
    posted            post[H3_COMM_MAX_RANKS];
    int               bad[H3_COMM_MAX_RANKS];       /* rank r found a mismatch in this collective */
    char              why[H3_COMM_MAX_RANKS][256];
    void             *nccl;                         /* cuda_comm_group (NCCL's unique id) */
    int               joined;
    pthread_mutex_t   mu;
};

struct h3_comm {
    h3_comm_group *g;
    int            rank;
    h3_backend    *be;
    void          *nccl; /* the rank's ncclComm_t (cuda_comm.cu) */
};

enum { OP_ALLTOALLV = 1, OP_BROADCAST = 2, OP_BARRIER = 3 };

h3_comm_group *h3_comm_group_new(h3_comm_kind kind, int nranks, h3_err *e) {
    if (nranks < 1 || nranks > H3_COMM_MAX_RANKS)
        return h3_fail(e, "communicator: %d ranks, the range is 1..%d", nranks, H3_COMM_MAX_RANKS), NULL;
    if (kind != H3_COMM_CPU && kind != H3_COMM_NCCL) return h3_fail(e, "communicator: unknown kind %d", (int)kind), NULL;
    h3_comm_group *g = calloc(1, sizeof *g);
    if (!g) return h3_fail(e, "communicator: out of memory"), NULL;
    g->kind = kind, g->n = nranks;
    if (kind == H3_COMM_NCCL && !(g->nccl = cuda_comm_group_new(nranks, e))) {
        free(g);
        return NULL;
    }
    pthread_barrier_init(&g->bar, NULL, (unsigned)nranks);
    pthread_mutex_init(&g->mu, NULL);
    return g;
}

void h3_comm_group_free(h3_comm_group *g) {
    if (!g) return;
    pthread_barrier_destroy(&g->bar);
    pthread_mutex_destroy(&g->mu);
    cuda_comm_group_free(g->nccl);
    free(g);
}

h3_comm *h3_comm_join(h3_comm_group *g, int rank, h3_backend *be, h3_err *e) {
    if (rank < 0 || rank >= g->n) return h3_fail(e, "communicator: rank %d of %d", rank, g->n), NULL;
    const h3_backend_kind want = g->kind == H3_COMM_NCCL ? H3_BACKEND_CUDA : H3_BACKEND_CPU;
    if (!be || be->kind != want)
        return h3_fail(e, "communicator: rank %d joins with a %s backend, this group needs %s", rank,
                       be ? h3_backend_name(be) : "missing", want == H3_BACKEND_CUDA ? "CUDA" : "the CPU"),
               NULL;
    h3_comm *c = calloc(1, sizeof *c);
    if (!c) return h3_fail(e, "communicator: out of memory"), NULL;
    c->g = g, c->rank = rank, c->be = be;
    if (g->kind == H3_COMM_NCCL && !(c->nccl = cuda_comm_join(g->nccl, rank, be, e))) { /* collective */
        free(c);
        return NULL;
    }
    pthread_barrier_wait(&g->bar);
    return c;
}

void h3_comm_leave(h3_comm *c) {
    if (!c) return;
    cuda_comm_leave(c->nccl);
    free(c);
}

int h3_comm_size(const h3_comm *c) { return c->g->n; }
int h3_comm_rank(const h3_comm *c) { return c->rank; }

/* ---- CPU ---- */

/* The second half of every CPU collective: after the copies, every rank learns whether any rank failed. */
static int cpu_finish(h3_comm *c, h3_err *e) {
    h3_comm_group *g = c->g;
    pthread_barrier_wait(&g->bar); /* every copy done: the send buffers may be reused, bad[] is complete */
    int first = -1;
    for (int r = 0; r < g->n && first < 0; r++)
        if (g->bad[r]) first = r;
    char why[256];
    if (first >= 0) memcpy(why, g->why[first], sizeof why);
    pthread_barrier_wait(&g->bar); /* everyone has read bad[]: the next collective may clear it */
    g->bad[c->rank] = 0;
    if (first >= 0) return h3_fail(e, "communicator: rank %d: %s", first, why);
    return 0;
}

static void cpu_mark_bad(h3_comm *c, const char *why) {
    h3_comm_group *g = c->g;
    if (g->bad[c->rank]) return;
    g->bad[c->rank] = 1;
    snprintf(g->why[c->rank], sizeof g->why[0], "%s", why);
}

static int cpu_alltoallv(h3_comm *c, void *recv, const size_t *roff, const size_t *rbytes, const void *send,
                         const size_t *soff, const size_t *sbytes, int op, h3_err *e) {
    h3_comm_group *g = c->g;
    posted *me = &g->post[c->rank];
    me->send = send, me->soff = soff, me->sbytes = sbytes, me->op = op;
    for (int p = 0; p < g->n; p++) me->rbytes_from[p] = rbytes[p];
    pthread_barrier_wait(&g->bar); /* every rank has posted */
    for (int p = 0; p < g->n; p++) {
        const posted *src = &g->post[p];
        char why[256];
        if (src->op != op) {
            snprintf(why, sizeof why, "ranks called different collectives (rank %d and rank %d)", c->rank, p);
            cpu_mark_bad(c, why);
            break;
        }
        if (src->sbytes[c->rank] != rbytes[p]) {
            snprintf(why, sizeof why, "rank %d sends %zu bytes to rank %d, which expects %zu", p, src->sbytes[c->rank],
                     c->rank, rbytes[p]);
            cpu_mark_bad(c, why);
            break;
        }
    }
    if (!g->bad[c->rank])
        for (int p = 0; p < g->n; p++) {
            const posted *src = &g->post[p];
            if (rbytes[p])
                memcpy((char *)recv + roff[p], (const char *)src->send + src->soff[c->rank], rbytes[p]);
        }
    return cpu_finish(c, e);
}

/* ---- the collectives ---- */

int h3_comm_alltoallv(h3_comm *c, void *recv, const size_t *roff, const size_t *rbytes, const void *send,
                      const size_t *soff, const size_t *sbytes, h3_err *e) {
    if (c->g->kind == H3_COMM_NCCL) return cuda_comm_alltoallv(c->nccl, c->be, c->g->n, recv, roff, rbytes, send, soff, sbytes, e);
    return cpu_alltoallv(c, recv, roff, rbytes, send, soff, sbytes, OP_ALLTOALLV, e);
}

int h3_comm_allgatherv(h3_comm *c, void *recv, const size_t *offs, const size_t *bytes, const void *send, h3_err *e) {
    /* the same buffer to every peer: an all-to-all whose send offsets are all 0 */
    size_t soff[H3_COMM_MAX_RANKS], sb[H3_COMM_MAX_RANKS];
    for (int p = 0; p < c->g->n; p++) soff[p] = 0, sb[p] = bytes[c->rank];
    return h3_comm_alltoallv(c, recv, offs, bytes, send, soff, sb, e);
}

int h3_comm_broadcast(h3_comm *c, void *buf, size_t bytes, int root, h3_err *e) {
    h3_comm_group *g = c->g;
    if (root < 0 || root >= g->n) return h3_fail(e, "communicator: broadcast from rank %d of %d", root, g->n);
    if (g->kind == H3_COMM_NCCL) return cuda_comm_broadcast(c->nccl, c->be, buf, bytes, root, e);
    /* every rank receives root's bytes; root sends them to everyone but keeps its own */
    size_t zero[H3_COMM_MAX_RANKS] = {0}, sb[H3_COMM_MAX_RANKS] = {0}, rb[H3_COMM_MAX_RANKS] = {0};
    if (c->rank == root)
        for (int p = 0; p < g->n; p++) sb[p] = p == root ? 0 : bytes;
    else
        rb[root] = bytes;
    return cpu_alltoallv(c, buf, zero, rb, buf, zero, sb, OP_BROADCAST, e);
}

int h3_comm_agree(h3_comm *c, int ok, const char *why, h3_err *e) {
    if (!ok) cpu_mark_bad(c, why && why[0] ? why : "failed");
    return cpu_finish(c, e); /* the ranks are threads of one process, whatever the kind: the host barrier serves */
}

int h3_comm_barrier(h3_comm *c, h3_err *e) {
    if (c->g->kind == H3_COMM_NCCL) return cuda_comm_barrier(c->nccl, c->be, e);
    size_t zero[H3_COMM_MAX_RANKS] = {0};
    return cpu_alltoallv(c, NULL, zero, zero, NULL, zero, zero, OP_BARRIER, e);
}
