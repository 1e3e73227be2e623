/* The NCCL communicator (src/backend/comm.h) on the GPUs of this machine: one thread per GPU, each with its own
 * CUDA backend; all-to-all with unequal sizes, all-gather and broadcast on device buffers, checked byte for byte;
 * then the all-to-all of one Ulysses exchange at the release shape (S = 19,540 rows of 56 heads x 128 in bf16,
 * split over the ranks), timed. docs/parallel.md.
 * Usage: test_comm_nccl [N]   (default: every GPU, at most 8) */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/comm.h"
#include "test.h"

enum { MAXN = H3_COMM_MAX_RANKS };

static uint8_t pat(int src, int dst, size_t i) { return (uint8_t)(src * 37 + dst * 11 + i * 7 + (i >> 8)); }
static size_t amount(int src, int dst) { return (size_t)((src * 5 + dst * 3) % 7) * 100000 + (size_t)(src + dst) % 3; }

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

typedef struct job {
    h3_comm_group *g;
    int            rank, n, ok, checks;
    double         ulysses_ms;
    char           msg[1200];
} job;

#define RCHECK(j, cond, ...)                                                              \
    do {                                                                                  \
        (j)->checks++;                                                                    \
        if (cond) (j)->ok++;                                                              \
        else if (!(j)->msg[0]) snprintf((j)->msg, sizeof (j)->msg, __VA_ARGS__);          \
    } while (0)

static void *rank_main(void *arg) {
    job *j = arg;
    h3_err e = {{0}};
    const int n = j->n, me = j->rank;
    h3_backend *be = h3_backend_new_on(H3_BACKEND_CUDA, 0, me, &e);
    RCHECK(j, be != NULL, "rank %d: %s", me, e.msg);
    if (!be) return NULL;
    h3_comm *c = h3_comm_join(j->g, me, be, &e);
    RCHECK(j, c != NULL, "rank %d: %s", me, e.msg);
    if (!c) {
        h3_backend_free(be);
        return NULL;
    }
    size_t soff[MAXN], sb[MAXN], roff[MAXN], rb[MAXN], st = 0, rt = 0;
    for (int p = 0; p < n; p++) {
        soff[p] = st, sb[p] = amount(me, p), st += sb[p];
        roff[p] = rt, rb[p] = amount(p, me), rt += rb[p];
    }
    uint8_t *hs = malloc(st + 1), *hr = malloc(rt + 1);
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < sb[p]; i++) hs[soff[p] + i] = pat(me, p, i);
    void *ds = h3_alloc(be, st + 1), *dr = h3_alloc(be, rt + 1);
    h3_upload(be, ds, hs, st + 1);
    RCHECK(j, h3_comm_alltoallv(c, dr, roff, rb, ds, soff, sb, &e) == 0, "rank %d: %s", me, e.msg);
    h3_download(be, hr, dr, rt + 1);
    h3_sync(be);
    int same = 1;
    for (int p = 0; p < n; p++)
        for (size_t i = 0; i < rb[p]; i++) same &= hr[roff[p] + i] == pat(p, me, i);
    RCHECK(j, same, "rank %d: all-to-all data differs", me);
    /* broadcast from each root */
    for (int root = 0; root < n; root++) {
        for (size_t i = 0; i < st; i++) hs[i] = me == root ? pat(root, 50, i) : 0;
        h3_upload(be, ds, hs, st);
        size_t len = st < 100001 ? st : 100001;
        RCHECK(j, h3_comm_broadcast(c, ds, len, root, &e) == 0, "rank %d: %s", me, e.msg);
        h3_download(be, hs, ds, len);
        h3_sync(be);
        int eq = 1;
        for (size_t i = 0; i < len; i++) eq &= hs[i] == pat(root, 50, i);
        RCHECK(j, eq, "rank %d: broadcast from %d differs", me, root);
    }
    RCHECK(j, h3_comm_barrier(c, &e) == 0, "rank %d: %s", me, e.msg);
    h3_free(be, ds), h3_free(be, dr);
    free(hs), free(hr);
    /* one Ulysses exchange: rank r holds rows [r0, r1) x 56 heads x 128 (bf16) and sends each peer its heads */
    const size_t S = 19540, H = 56, D = 128;
    size_t rows[MAXN], heads[MAXN];
    for (int p = 0; p < n; p++) rows[p] = S / n + ((size_t)p < S % n), heads[p] = H / n + ((size_t)p < H % n);
    st = rt = 0;
    for (int p = 0; p < n; p++) {
        soff[p] = st, sb[p] = rows[me] * heads[p] * D * 2, st += sb[p];
        roff[p] = rt, rb[p] = rows[p] * heads[me] * D * 2, rt += rb[p];
    }
    ds = h3_alloc(be, st), dr = h3_alloc(be, rt);
    double best = 1e9;
    for (int it = 0; it < 6; it++) {
        h3_comm_barrier(c, &e);
        double t0 = now();
        for (int k = 0; k < 3; k++) h3_comm_alltoallv(c, dr, roff, rb, ds, soff, sb, &e); /* q, k, v */
        h3_sync(be);
        double t = (now() - t0) * 1e3;
        if (it > 0 && t < best) best = t;
    }
    j->ulysses_ms = best;
    h3_free(be, ds), h3_free(be, dr);
    h3_comm_leave(c);
    RCHECK(j, h3_backend_check(be, &e) == 0, "rank %d: %s", me, e.msg);
    h3_backend_free(be);
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 0;
    h3_err e = {{0}};
    if (n <= 0) { /* every GPU: probe device indices until one fails */
        for (n = 0; n < MAXN; n++) {
            h3_backend *b = h3_backend_new_on(H3_BACKEND_CUDA, 0, n, &e);
            if (!b) break;
            h3_backend_free(b);
        }
    }
    if (n < 1) {
        fprintf(stderr, "test_comm_nccl: no GPU (%s)\n", e.msg);
        return 2;
    }
    h3_comm_group *g = h3_comm_group_new(H3_COMM_NCCL, n, &e);
    CHECK(g != NULL, "%s", e.msg);
    if (!g) TEST_END();
    job jobs[MAXN];
    pthread_t th[MAXN];
    for (int r = 0; r < n; r++) {
        memset(&jobs[r], 0, sizeof jobs[r]);
        jobs[r].g = g, jobs[r].rank = r, jobs[r].n = n;
        pthread_create(&th[r], NULL, rank_main, &jobs[r]);
    }
    double worst = 0;
    for (int r = 0; r < n; r++) {
        pthread_join(th[r], NULL);
        CHECK(jobs[r].ok == jobs[r].checks && jobs[r].checks > 0, "%s", jobs[r].msg);
        if (jobs[r].ulysses_ms > worst) worst = jobs[r].ulysses_ms;
    }
    printf("  NCCL %d rank(s): all-to-all, broadcasts, barrier checked; one block's q/k/v Ulysses exchange "
           "(S 19540, 56 x 128 bf16) %.3f ms\n", n, worst);
    h3_comm_group_free(g);
    TEST_END();
}
