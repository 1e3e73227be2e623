/* --parallel N: the team of ranks and its threads (dit_parallel.h, docs/parallel.md). Each forward starts one
 * thread per rank (the device bound to it first) that runs dit_forward_rank with the rank's communicator handle. */
#include "dit_parallel.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dit_internal.h"

struct dit_team {
    int            n;
    dit_model     *m[H3_COMM_MAX_RANKS];
    h3_comm_group *g;
    h3_comm       *c[H3_COMM_MAX_RANKS];
};

typedef struct job {
    dit_team         *t;
    int               rank, rc;
    const dit_inputs *in;
    float            *video, *audio;
    h3_err            e;
} job;

static void *join_main(void *arg) {
    job *j = arg;
    h3_backend_bind_thread(j->t->m[j->rank]->be);
    j->t->c[j->rank] = h3_comm_join(j->t->g, j->rank, j->t->m[j->rank]->be, &j->e);
    j->rc = j->t->c[j->rank] ? 0 : -1;
    return NULL;
}

static void *forward_main(void *arg) {
    job *j = arg;
    h3_backend_bind_thread(j->t->m[j->rank]->be);
    j->rc = dit_forward_rank(j->t->m[j->rank], j->in, j->t->c[j->rank], j->video, j->audio, &j->e);
    return NULL;
}

/* one thread per rank on fn; the first failed rank's message into e */
static int run_all(dit_team *t, void *(*fn)(void *), const dit_inputs *in, float *video, float *audio, h3_err *e) {
    job jobs[H3_COMM_MAX_RANKS];
    pthread_t th[H3_COMM_MAX_RANKS];
    int started[H3_COMM_MAX_RANKS] = {0};
    for (int r = 0; r < t->n; r++) {
        memset(&jobs[r], 0, sizeof jobs[r]);
        jobs[r].t = t, jobs[r].rank = r, jobs[r].in = in, jobs[r].video = video, jobs[r].audio = audio;
    }
    int rc = 0;
    for (int r = 0; r < t->n; r++)
        if (pthread_create(&th[r], NULL, fn, &jobs[r]) != 0) {
            /* the ranks started would wait for this one at their first collective: run it here instead */
            fn(&jobs[r]);
        } else {
            started[r] = 1;
        }
    for (int r = 0; r < t->n; r++)
        if (started[r]) pthread_join(th[r], NULL);
    for (int r = 0; r < t->n && rc == 0; r++)
        if (jobs[r].rc != 0) rc = h3_fail(e, "--parallel rank %d: %s", r, jobs[r].e.msg);
    return rc;
}

dit_team *dit_team_new(dit_model *const *models, int n, h3_comm_kind kind, h3_err *e) {
    if (n < 1 || n > H3_COMM_MAX_RANKS) return h3_fail(e, "--parallel %d: the range is 1..%d", n, H3_COMM_MAX_RANKS), NULL;
    dit_team *t = calloc(1, sizeof *t);
    if (!t) return h3_fail(e, "--parallel: out of memory"), NULL;
    t->n = n;
    for (int r = 0; r < n; r++) t->m[r] = models[r];
    if (!(t->g = h3_comm_group_new(kind, n, e)) || run_all(t, join_main, NULL, NULL, NULL, e) != 0) {
        dit_team_free(t);
        return NULL;
    }
    return t;
}

void dit_team_free(dit_team *t) {
    if (!t) return;
    for (int r = 0; r < t->n; r++) h3_comm_leave(t->c[r]);
    h3_comm_group_free(t->g);
    free(t);
}

int        dit_team_size(const dit_team *t) { return t->n; }
dit_model *dit_team_model(const dit_team *t, int rank) { return rank >= 0 && rank < t->n ? t->m[rank] : NULL; }

int dit_team_forward(dit_team *t, const dit_inputs *in, float *video_out, float *audio_out, h3_err *e) {
    /* the forward's settings rank 0 holds (--attention, --layers' choice) on every rank */
    const dit_model *m0 = t->m[0];
    for (int r = 1; r < t->n; r++) {
        dit_model *m = t->m[r];
        m->attention_sage8 = m0->attention_sage8;
        if (m0->skip && !m->skip && !(m->skip = calloc((size_t)m->cfg.num_layers, 1)))
            return h3_fail(e, "--parallel: out of memory");
        if (m0->skip) memcpy(m->skip, m0->skip, (size_t)m->cfg.num_layers);
    }
    return run_all(t, forward_main, in, video_out, audio_out, e);
}
