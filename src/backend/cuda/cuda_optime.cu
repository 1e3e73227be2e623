/* Per-op device time for tuning (H3_CUDA_OPTIME=1): a pair of events around each timed op on the
 * backend's stream, summed per op name when reported. Off by default: then begin/end cost one branch. */
#include "cuda_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct op_mark {
    const char *name;
    cudaEvent_t a, b;
} op_mark;

typedef struct optime_state {
    op_mark *marks;
    int      n, cap;
} optime_state;

static optime_state *state(h3_backend *be) {
    cuda_impl *c = cuda_of(be);
    if (!c->optime) {
        const char *v = h3_knob_get(H3_KNOB_CUDA_OPTIME);
        if (!v || strcmp(v, "1")) return NULL;
        c->optime = calloc(1, sizeof(optime_state));
    }
    return (optime_state *)c->optime;
}

extern "C" int cuda_optime_begin(h3_backend *be, const char *name) {
    if (!cuda_of(be)->optime && !h3_knob_get(H3_KNOB_CUDA_OPTIME)) return -1;
    optime_state *s = state(be);
    if (!s) return -1;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 4096;
        op_mark *m = (op_mark *)realloc(s->marks, (size_t)cap * sizeof *m);
        if (!m) return -1;
        s->marks = m, s->cap = cap;
    }
    op_mark *m = &s->marks[s->n];
    m->name = name;
    if (cudaEventCreate(&m->a) != cudaSuccess) return -1;
    if (cudaEventCreate(&m->b) != cudaSuccess) {
        cudaEventDestroy(m->a);
        return -1;
    }
    cudaEventRecord(m->a, cuda_of(be)->stream);
    return s->n++;
}

extern "C" void cuda_optime_end(h3_backend *be, int mark) {
    if (mark < 0) return;
    optime_state *s = (optime_state *)cuda_of(be)->optime;
    cudaEventRecord(s->marks[mark].b, cuda_of(be)->stream);
}

extern "C" void cuda_optime_report(h3_backend *be) {
    optime_state *s = (optime_state *)cuda_of(be)->optime;
    if (!s || !s->n) return;
    cudaStreamSynchronize(cuda_of(be)->stream);
    enum { MAXN = 64 };
    const char *names[MAXN];
    double ms[MAXN], total = 0.0;
    int calls[MAXN], k = 0;
    for (int i = 0; i < s->n; i++) {
        float t = 0.0f;
        cudaEventElapsedTime(&t, s->marks[i].a, s->marks[i].b);
        cudaEventDestroy(s->marks[i].a);
        cudaEventDestroy(s->marks[i].b);
        int j = 0;
        while (j < k && strcmp(names[j], s->marks[i].name)) j++;
        if (j == k && k < MAXN) names[k] = s->marks[i].name, ms[k] = 0.0, calls[k] = 0, k++;
        if (j < k) ms[j] += t, calls[j]++;
        total += t;
    }
    /* H3_CUDA_OPTIME=1 only: the diagnostic table (docs/tuning.md), at backend shutdown where no log is left */
    fprintf(stderr, "h3: cuda op time (H3_CUDA_OPTIME), %d ops, %.3f ms in all:\n", s->n, total);
    for (int j = 0; j < k; j++)
        fprintf(stderr, "  %-28s %7d calls %10.3f ms %5.1f %%\n", names[j], calls[j], ms[j], 100.0 * ms[j] / total);
    s->n = 0;
}

void cuda_optime_release(h3_backend *be) {
    cuda_optime_report(be);
    optime_state *s = (optime_state *)cuda_of(be)->optime;
    if (!s) return;
    free(s->marks);
    free(s);
    cuda_of(be)->optime = NULL;
}
