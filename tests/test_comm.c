/* The CPU communicator (src/backend/comm.h): N ranks as threads, 1..8, every collective with unequal sizes,
 * the data checked byte for byte against what each peer sent; a mismatch fails on every rank with one message;
 * the argument rules. docs/parallel.md. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "backend/comm.h"
#include "test.h"

enum { MAXN = H3_COMM_MAX_RANKS };

/* The byte rank `src` sends to rank `dst` at position i: a pattern that names both. */
static uint8_t pat(int src, int dst, size_t i) { return (uint8_t)(src * 37 + dst * 11 + i * 7 + (i >> 8)); }
/* Unequal sizes, zero included: what src sends to dst. */
static size_t amount(int src, int dst) { return (size_t)((src * 5 + dst * 3) % 7) * 1000 + (size_t)(src + dst) % 3; }

typedef struct rank_job {
    h3_comm_group *g;
    h3_backend    *be;
    int            rank, n;
    int            bad_counts;    /* run the mismatch case */
    int            ok, checks;    /* per-rank results (CHECK is not thread-safe) */
    int            failed_as_expected;
    char           msg[1024];
} rank_job;

#define RCHECK(j, cond)                                                                        \
    do {                                                                                       \
        (j)->checks++;                                                                         \
        if (cond) (j)->ok++;                                                                   \
        else if (!(j)->msg[0]) snprintf((j)->msg, sizeof (j)->msg, "rank %d: %s", (j)->rank, #cond); \
    } while (0)

static void *rank_main(void *arg) {
    rank_job *j = arg;
    h3_err e = {{0}};
    h3_comm *c = h3_comm_join(j->g, j->rank, j->be, &e);
    RCHECK(j, c != NULL);
    if (!c) return NULL;
    const int n = j->n, me = j->rank;
    RCHECK(j, h3_comm_size(c) == n && h3_comm_rank(c) == me);
    if (j->bad_counts) {
        /* rank 0 expects one byte more from rank n-1 than it sends: every rank must fail, naming the pair */
        size_t off[MAXN] = {0}, sb[MAXN], rb[MAXN];
        for (int p = 0; p < n; p++) sb[p] = rb[p] = 4;
        if (me == 0) rb[n - 1] = 5;
        uint8_t sbuf[4] = {1, 2, 3, 4}, rbuf[8 * MAXN];
        size_t roff[MAXN];
        for (int p = 0; p < n; p++) roff[p] = (size_t)p * 8;
        int rc = h3_comm_alltoallv(c, rbuf, roff, rb, sbuf, off, sb, &e);
        j->failed_as_expected = rc != 0 && strstr(e.msg, "expects 5") != NULL;
        snprintf(j->msg, sizeof j->msg, "%s", rc ? e.msg : "(no error)");
        /* the group is still usable afterwards */
        RCHECK(j, h3_comm_barrier(c, &e) == 0);
        /* h3_comm_agree: every rank ready -> 0 everywhere; the last rank not ready -> -1 everywhere, with its message */
        RCHECK(j, h3_comm_agree(c, 1, NULL, &e) == 0);
        RCHECK(j, h3_comm_agree(c, me != n - 1, "out of memory here", &e) != 0 && strstr(e.msg, "out of memory here"));
        RCHECK(j, h3_comm_agree(c, 1, NULL, &e) == 0); /* and the next agreement is clean again */
        h3_comm_leave(c);
        return NULL;
    }
    /* all-to-all: send [dst0 | dst1 | ...] packed, receive [src0 | src1 | ...] packed */
    size_t soff[MAXN], sb[MAXN], roff[MAXN], rb[MAXN], st = 0, rt = 0;
    for (int p = 0; p < n; p++) {
        soff[p] = st, sb[p] = amount(me, p), st += sb[p];
        roff[p] = rt, rb[p] = amount(p, me), rt += rb[p];
    }
    uint8_t *send = malloc(st + 1), *recv = malloc(rt + 1);
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < sb[p]; i++) send[soff[p] + i] = pat(me, p, i);
    memset(recv, 0xee, rt + 1);
    for (int round = 0; round < 3; round++) { /* repeated: the buffers and the group state are reused */
        RCHECK(j, h3_comm_alltoallv(c, recv, roff, rb, send, soff, sb, &e) == 0);
        int same = 1;
        for (int p = 0; p < n; p++)
            for (size_t i = 0; i < rb[p]; i++) same &= recv[roff[p] + i] == pat(p, me, i);
        RCHECK(j, same);
        RCHECK(j, recv[rt] == 0xee); /* nothing past the end */
    }
    /* all-gather with unequal pieces */
    size_t offs[MAXN], bytes[MAXN], tot = 0;
    for (int p = 0; p < n; p++) offs[p] = tot, bytes[p] = amount(p, p) + 1, tot += bytes[p];
    uint8_t *mine = malloc(bytes[me]), *all = malloc(tot);
    for (size_t i = 0; i < bytes[me]; i++) mine[i] = pat(me, 99, i);
    RCHECK(j, h3_comm_allgatherv(c, all, offs, bytes, mine, &e) == 0);
    int same = 1;
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < bytes[p]; i++) same &= all[offs[p] + i] == pat(p, 99, i);
    RCHECK(j, same);
    /* broadcast from every root */
    for (int root = 0; root < n; root++) {
        uint8_t b[3001];
        for (size_t i = 0; i < sizeof b; i++) b[i] = me == root ? pat(root, 50, i) : 0;
        RCHECK(j, h3_comm_broadcast(c, b, sizeof b, root, &e) == 0);
        int eq = 1;
        for (size_t i = 0; i < sizeof b; i++) eq &= b[i] == pat(root, 50, i);
        RCHECK(j, eq);
    }
    RCHECK(j, h3_comm_broadcast(c, mine, 1, n, &e) != 0 && strstr(e.msg, "broadcast from rank"));
    RCHECK(j, h3_comm_barrier(c, &e) == 0);
    free(send), free(recv), free(mine), free(all);
    h3_comm_leave(c);
    return NULL;
}

static void run_group(h3_backend *be, int n, int bad) {
    h3_err e = {{0}};
    h3_comm_group *g = h3_comm_group_new(H3_COMM_CPU, n, &e);
    CHECK(g != NULL, "%s", e.msg);
    if (!g) return;
    rank_job jobs[MAXN];
    pthread_t th[MAXN];
    for (int r = 0; r < n; r++) {
        memset(&jobs[r], 0, sizeof jobs[r]);
        jobs[r] = (rank_job){.g = g, .be = be, .rank = r, .n = n, .bad_counts = bad};
        pthread_create(&th[r], NULL, rank_main, &jobs[r]);
    }
    int ok = 0, checks = 0, all_failed = 1;
    for (int r = 0; r < n; r++) {
        pthread_join(th[r], NULL);
        ok += jobs[r].ok, checks += jobs[r].checks;
        if (jobs[r].ok != jobs[r].checks) CHECK(0, "%d ranks: %s", n, jobs[r].msg);
        all_failed &= jobs[r].failed_as_expected;
    }
    if (bad) {
        CHECK(all_failed, "%d ranks: a count mismatch must fail on every rank, naming it (rank 0: %s)", n, jobs[0].msg);
        if (n == 2) printf("  mismatch on 2 ranks -> %s\n", jobs[1].msg);
    } else {
        CHECK(ok == checks && checks > 0, "%d ranks: %d of %d checks", n, ok, checks);
        printf("  %d CPU ranks: all-to-all x3, all-gather, %d broadcasts, barrier: %d checks ok\n", n, n, ok);
    }
    h3_comm_group_free(g);
}

int main(void) {
    h3_err e = {{0}};
    h3_backend *be = h3_backend_new(H3_BACKEND_CPU, 1, &e);
    CHECK(be != NULL, "%s", e.msg);
    for (int n = 1; n <= MAXN; n++) run_group(be, n, 0);
    for (int n = 2; n <= 4; n++) run_group(be, n, 1);
    /* argument rules */
    CHECK(h3_comm_group_new(H3_COMM_CPU, 0, &e) == NULL && strstr(e.msg, "range is 1..8"), "%s", e.msg);
    CHECK(h3_comm_group_new(H3_COMM_CPU, 9, &e) == NULL && strstr(e.msg, "9 ranks"), "%s", e.msg);
    h3_comm_group *g = h3_comm_group_new(H3_COMM_CPU, 1, &e);
    CHECK(g && h3_comm_join(g, 1, be, &e) == NULL && strstr(e.msg, "rank 1 of 1"), "%s", e.msg);
    h3_comm_group_free(g);
#ifndef H3_CUDA
    CHECK(h3_comm_group_new(H3_COMM_NCCL, 2, &e) == NULL && strstr(e.msg, "NCCL needs a CUDA build"), "%s", e.msg);
#endif
    h3_backend_free(be);
    TEST_END();
}
