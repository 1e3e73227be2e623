/* The backend-ops harness's machinery (docs/testing.md): buffers held on two "sides", the op loop, the
 * comparisons and the --perf timer. Included once, by tests/test_backend_ops.c (one translation unit, so
 * test.h's counters are shared by every case file).
 *
 * A case function builds its inputs with bo_in / bo_rand (host data copied to both sides), its outputs with
 * bo_out (NaN-poisoned on both sides: an unwritten element fails), calls the op once per side with BO_OP, and
 * checks what it wrote with bo_check (side 1 against side 0). Side 0 is the CPU twin; side 1 is the backend
 * under test: the CUDA backend, or, on the CPU pass, the CPU backend again with n threads against the twin's
 * one thread (then every pair comparison must be bit-identical, whatever the row's tolerance). The CPU pass's
 * own assertions come on top: bo_ref (the twin against a double-precision reference written in the case),
 * bo_same (aliasing: the in-place call bit-identical to the out-of-place one) and BO_BF16R (an H3_BF16_OUT
 * output holds bf16 values only). In --perf mode only side 1 exists and BO_OP times its call instead. */
#ifndef H3_BO_CORE_H
#define H3_BO_CORE_H

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test.h"
#include "test_data.h"
#include "backend/backend.h"
#ifdef H3_CUDA
#include "backend/cuda/cuda_ops.h"
#endif

typedef enum { BO_F32, BO_BF16, BO_U8, BO_I32 } bo_type;

typedef struct bo_buf {
    bo_type        t;
    int64_t        n;
    void          *h;    /* the host data it was made from (check mode; NULL for outputs) */
    void          *p[2]; /* backend memory of side 0 (the CPU twin) and side 1 (the backend under test) */
    struct bo_buf *next;
} bo_buf;

typedef struct bo_weight {
    h3_tensor        *host; /* the values (CPU memory) */
    h3_tensor        *t[2]; /* resident on each side (h3_weight_upload: a view on the CPU) */
    struct bo_weight *next;
} bo_weight;

/* where a row runs: the CPU pass, the CUDA pass; BO_PERF_ONLY rows (release shapes) run in --perf mode only */
enum { BO_CPU = 1, BO_CUDA = 2, BO_ALL = 3, BO_PERF_ONLY = 4 };
/* bo_check options: BO_BF16R: every element of both sides is a bf16 value (H3_BF16_OUT outputs) */
enum { BO_BF16R = 1 };

struct bo_ctx;
typedef struct bo_row {
    const char *op;   /* --op filter: the backend function's name without h3_ */
    const char *name; /* the case */
    void (*fn)(struct bo_ctx *c, const struct bo_row *r);
    int64_t     a[18]; /* the case function's parameters (shapes, dtypes, modes) */
    int         flags; /* passed to the op (H3_BF16_OUT, H3_F16_IN) where it takes flags */
    double      tol;   /* relative L2 bound of side 1 vs the twin on the CUDA pass; 0: bit-identical */
    int         where; /* BO_CPU | BO_CUDA | BO_PERF_ONLY */
    const char *env;   /* "NAME=value" set while the CUDA backend under test is made and the row runs */
} bo_row;

typedef struct bo_ctx {
    h3_backend   *be[2];
    int           side;     /* the side BO_OP is running now */
    int           cpu_pass; /* side 1 is the CPU backend (threads[1] threads vs the twin's threads[0]) */
    int           threads[2];
    int           perf, reps, verbose;
    const bo_row *row;
    const char   *tag; /* "cpu" / "cuda" */
    bo_buf       *bufs;
    bo_weight    *weights;
    double        flop, bytes; /* per call, for the --perf line of the next BO_OP */
    const char   *label;       /* the --perf line's name for the next BO_OP (default: the row's) */
    int           it;
    double        t0;
    int           checks;     /* checks made in this row */
    double        thread_tol; /* the CPU pass's 1-vs-n-thread tolerance of this row (bo_blas); 0: bit-identical */
} bo_ctx;

static double bo_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static size_t bo_esize(bo_type t) { return t == BO_BF16 ? 2 : t == BO_U8 ? 1 : 4; }
static int bo_has(const bo_ctx *c, int s) { return c->perf ? s == 1 : 1; }
static inline int bo_is_cuda(const h3_backend *be) { return be && be->kind == H3_BACKEND_CUDA; }

/* make side s current (the CPU pass: its thread count for the OpenMP loops and OpenBLAS) */
static void bo_use(bo_ctx *c, int s) {
    c->side = s;
    if (c->cpu_pass && s < 2) omp_set_num_threads(c->threads[s]);
}

/* ---- buffers ---- */

static bo_buf *bo_track(bo_ctx *c, bo_type t, int64_t n) {
    bo_buf *b = calloc(1, sizeof *b);
    b->t = t, b->n = n;
    for (int s = 0; s < 2; s++)
        if (bo_has(c, s)) b->p[s] = h3_alloc(c->be[s], bo_esize(t) * (size_t)(n > 0 ? n : 1));
    b->next = c->bufs, c->bufs = b;
    return b;
}

/* an input holding host's n elements on both sides (host is copied; the caller keeps it) */
static bo_buf *bo_in(bo_ctx *c, bo_type t, int64_t n, const void *host) {
    bo_buf *b = bo_track(c, t, n);
    size_t bytes = bo_esize(t) * (size_t)n;
    b->h = malloc(bytes ? bytes : 1);
    memcpy(b->h, host, bytes);
    for (int s = 0; s < 2; s++)
        if (b->p[s]) h3_upload(c->be[s], b->p[s], host, bytes);
    return b;
}

/* a random input: F32 uniform [-scale, scale) (rounded to bf16 when round is set) or BF16 values. In --perf mode
 * on the GPU filled on the device (release shapes: no host arrays of gigabytes). */
static bo_buf *bo_rand(bo_ctx *c, bo_type t, int64_t n, float scale, int round) {
#ifdef H3_CUDA
    if (c->perf && bo_is_cuda(c->be[1])) {
        static uint64_t seed = 1;
        bo_buf *b = bo_track(c, t, n);
        if (t == BO_F32) cuda_fill_random(c->be[1], b->p[1], n, seed++, scale);
        else cuda_fill_random_bf16(c->be[1], b->p[1], n, seed++, scale);
        return b;
    }
#endif
    void *h = t == BO_F32 ? (void *)rand_host(n, scale, round) : (void *)rand_bf16(n, scale);
    bo_buf *b = bo_in(c, t, n, h);
    free(h);
    return b;
}

/* an output: NaN on both sides (bf16 0x7fc0; U8 0xff, I32 -1) */
static bo_buf *bo_out(bo_ctx *c, bo_type t, int64_t n) {
    bo_buf *b = bo_track(c, t, n);
    if (c->perf) return b;
    size_t bytes = bo_esize(t) * (size_t)n;
    void *h = malloc(bytes ? bytes : 1);
    if (t == BO_F32)
        for (int64_t i = 0; i < n; i++) ((float *)h)[i] = NAN;
    else if (t == BO_BF16)
        for (int64_t i = 0; i < n; i++) ((uint16_t *)h)[i] = 0x7fc0;
    else
        memset(h, 0xff, bytes);
    for (int s = 0; s < 2; s++)
        if (b->p[s]) h3_upload(c->be[s], b->p[s], h, bytes);
    free(h);
    return b;
}

/* a second input with b's initial host data (aliasing checks: the in-place call's own copy) */
static bo_buf *bo_copy(bo_ctx *c, const bo_buf *b) {
    if (!b->h) return bo_out(c, b->t, b->n); /* --perf: any data */
    return bo_in(c, b->t, b->n, b->h);
}

/* side s's current contents, downloaded (malloc'd; the caller frees) */
static void *bo_get(bo_ctx *c, const bo_buf *b, int s) {
    size_t bytes = bo_esize(b->t) * (size_t)b->n;
    void *h = malloc(bytes ? bytes : 1);
    h3_sync(c->be[s]);
    h3_download(c->be[s], h, b->p[s], bytes);
    return h;
}

/* a weight [shape] of dtype t with uniform [-scale, scale) values, resident on both sides */
static bo_weight *bo_weight_new(bo_ctx *c, h3_dtype t, int ndim, const int64_t *shape, float scale) {
    h3_err e;
    bo_weight *w = calloc(1, sizeof *w);
    w->host = h3_tensor_new(t, ndim, shape, &e);
    int64_t n = h3_tensor_numel(w->host);
    float *v = rand_host(n, scale, 0);
    h3_convert_from_f32(w->host->data, t, v, (size_t)n);
    free(v);
    for (int s = 0; s < 2; s++)
        if (bo_has(c, s)) w->t[s] = h3_weight_upload(c->be[s], w->host, &e);
    w->next = c->weights, c->weights = w;
    return w;
}

static void bo_release(bo_ctx *c) {
    for (bo_buf *b = c->bufs, *nx; b; b = nx) {
        nx = b->next;
        for (int s = 0; s < 2; s++)
            if (b->p[s]) h3_free(c->be[s], b->p[s]);
        free(b->h), free(b);
    }
    for (bo_weight *w = c->weights, *nx; w; w = nx) {
        nx = w->next;
        for (int s = 0; s < 2; s++)
            if (w->t[s]) h3_weight_free(c->be[s], w->t[s]);
        h3_tensor_free(w->host), free(w);
    }
    c->bufs = NULL, c->weights = NULL;
}

/* the current side's pointer of a buffer / weight (inside BO_OP) */
#define PF(b) ((float *)(b)->p[c->side])
#define PB(b) ((uint16_t *)(b)->p[c->side])
#define PU(b) ((uint8_t *)(b)->p[c->side])
#define PI(b) ((int32_t *)(b)->p[c->side])
#define PW(w) ((w)->t[c->side])

/* ---- the op loop: each side once (check mode), or warm-up + reps timed calls on side 1 (--perf) ---- */

static void bo_cost(bo_ctx *c, const char *label, double flop, double bytes) {
    c->label = label, c->flop = flop, c->bytes = bytes;
}

static void bo_op_begin(bo_ctx *c) {
    c->it = -1;
    bo_use(c, c->perf ? 1 : 0);
}

static int bo_op_more(bo_ctx *c) { return c->perf ? c->it < c->reps : c->side < 2; }

static void bo_op_next(bo_ctx *c) {
    if (!c->perf) {
        if (c->side == 0) bo_use(c, 1);
        else c->side = 2;
        return;
    }
    if (c->it == -1) h3_sync(c->be[1]), c->t0 = bo_now(); /* after the warm-up (plans, module loads, pools) */
    if (++c->it < c->reps) return;
    h3_sync(c->be[1]);
    double ms = (bo_now() - c->t0) / c->reps * 1e3;
    char name[160];
    snprintf(name, sizeof name, "%s %s%s%s", c->row->op, c->row->name, c->label ? ": " : "", c->label ? c->label : "");
    printf("[%s] perf %-76s %10.4f ms", c->tag, name, ms);
    if (c->flop > 0) printf("  %8.3g TFLOP/s", c->flop / (ms * 1e-3) / 1e12);
    if (c->bytes > 0) printf("  %8.4g GB/s", c->bytes / (ms * 1e-3) / 1e9);
    printf("\n");
    c->label = NULL, c->flop = c->bytes = 0;
}

#define BO_OP(c, be, call)                                        \
    do {                                                          \
        for (bo_op_begin(c); bo_op_more(c); bo_op_next(c)) {      \
            h3_backend *be = (c)->be[(c)->side];                  \
            (void)be;                                             \
            call;                                                 \
        }                                                         \
    } while (0)

/* ---- checks ---- */

static float bo_elem(const bo_buf *b, const void *h, int64_t i) {
    return b->t == BO_F32 ? ((const float *)h)[i] : b->t == BO_BF16 ? h3_bf16_to_f32(((const uint16_t *)h)[i])
         : b->t == BO_U8 ? (float)((const uint8_t *)h)[i] : (float)((const int32_t *)h)[i];
}

static void bo_line(bo_ctx *c, const char *name, const char *what) {
    printf("  [%s] %-64s %s\n", c->tag, name, what);
    c->checks++;
}

/* The row's op goes through OpenBLAS, whose sgemm does not promise the same bits at another thread count (its
 * blocking follows the threads): the CPU pass compares 1 thread with n threads within tol instead of bit for bit
 * (1e-6 for fp32 outputs, 2e-4 where bf16 roundings can flip). */
static void bo_blas(bo_ctx *c, double tol) { c->thread_tol = tol; }

/* elements [off, off + n) of b on side 1 against side 0: relative L2 <= tol (the row's tolerance on the CUDA
 * pass; on the CPU pass 1 thread vs n threads, bit for bit unless bo_blas); tol 0 also requires every element
 * bit-identical. */
static void bo_check_range(bo_ctx *c, const char *name, const bo_buf *b, int64_t off, int64_t n, double tol, int opts) {
    if (c->perf) return;
    if (c->cpu_pass) tol = c->thread_tol;
    void *g0 = bo_get(c, b, 0), *g1 = bo_get(c, b, 1);
    size_t es = bo_esize(b->t);
    char *h0 = (char *)g0 + off * es, *h1 = (char *)g1 + off * es;
    float *f0 = malloc((size_t)(n > 0 ? n : 1) * 4), *f1 = malloc((size_t)(n > 0 ? n : 1) * 4);
    int64_t diff = 0, notbf = 0;
    for (int64_t i = 0; i < n; i++) {
        diff += memcmp(h0 + i * es, h1 + i * es, es) != 0;
        f0[i] = bo_elem(b, h0, i), f1[i] = bo_elem(b, h1, i);
        if ((opts & BO_BF16R) && b->t == BO_F32)
            notbf += (f0[i] == f0[i] && h3_round_bf16(f0[i]) != f0[i]) + (f1[i] == f1[i] && h3_round_bf16(f1[i]) != f1[i]);
    }
    double rel = h3_rel_l2(f1, f0, (size_t)n), mx = h3_max_abs(f1, f0, (size_t)n);
    if (rel != rel) rel = INFINITY; /* a NaN: an element left unwritten (poisoned) or a broken one */
    char what[200];
    snprintf(what, sizeof what, "rel_l2 %.3e (tol %.0e) max_abs %.3e, %lld of %lld differ", rel, tol, mx,
             (long long)diff, (long long)n);
    bo_line(c, name, what);
    CHECK(rel <= tol, "[%s] %s %s: %s: relative L2 %.3e > %.1e", c->tag, c->row->op, c->row->name, name, rel, tol);
    if (tol == 0.0)
        CHECK(diff == 0, "[%s] %s %s: %s: %lld elements not bit-identical", c->tag, c->row->op, c->row->name, name,
              (long long)diff);
    if ((opts & BO_BF16R) && b->t == BO_F32) {
        snprintf(what, sizeof what, "bf16 values only: %lld not", (long long)notbf);
        bo_line(c, name, what);
        CHECK(notbf == 0, "[%s] %s %s: %s: %lld H3_BF16_OUT outputs are not bf16 values", c->tag, c->row->op,
              c->row->name, name, (long long)notbf);
    }
    free(g0), free(g1), free(f0), free(f1);
}

static void bo_check(bo_ctx *c, const char *name, const bo_buf *b, double tol, int opts) {
    bo_check_range(c, name, b, 0, b->n, tol, opts);
}

/* a and b hold the same bits on every side (aliasing: y == x against y != x) */
static void bo_same(bo_ctx *c, const char *name, const bo_buf *a, const bo_buf *b) {
    if (c->perf) return;
    for (int s = 0; s < 2; s++) {
        void *ha = bo_get(c, a, s), *hb = bo_get(c, b, s);
        int64_t n = a->n < b->n ? a->n : b->n, diff = 0;
        size_t es = bo_esize(a->t);
        for (int64_t i = 0; i < n; i++) diff += memcmp((char *)ha + i * es, (char *)hb + i * es, es) != 0;
        char what[160];
        snprintf(what, sizeof what, "side %d: in place vs out of place: %lld of %lld differ", s, (long long)diff,
                 (long long)n);
        bo_line(c, name, what);
        CHECK(diff == 0 && a->n == b->n, "[%s] %s %s: %s (side %d): %lld elements differ", c->tag, c->row->op,
              c->row->name, name, s, (long long)diff);
        free(ha), free(hb);
    }
}

/* whether the CPU pass's own checks (double references) run: on the CPU pass, not in --perf mode */
static int bo_refs(const bo_ctx *c) { return c->cpu_pass && !c->perf; }

/* the twin's values got[i] (float) against a double-precision reference ref[i]: relative L2 <= tol */
static void bo_ref(bo_ctx *c, const char *name, const float *got, const double *ref, int64_t n, double tol) {
    double num = 0, den = 0, mx = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i];
        num += d * d, den += ref[i] * ref[i];
        if (fabs(d) > mx || d != d) mx = d != d ? INFINITY : fabs(d);
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    if (rel != rel) rel = INFINITY;
    char what[160];
    snprintf(what, sizeof what, "vs double reference: rel_l2 %.3e (tol %.0e) max_abs %.3e over %lld", rel, tol, mx,
             (long long)n);
    bo_line(c, name, what);
    CHECK(rel <= tol, "[%s] %s %s: %s: twin vs double reference relative L2 %.3e > %.1e", c->tag, c->row->op,
          c->row->name, name, rel, tol);
}

/* a plain assertion of a case, printed like the others */
static void bo_assert(bo_ctx *c, const char *name, int ok, const char *what) {
    if (c->perf) return;
    bo_line(c, name, ok ? what : "FAILED");
    CHECK(ok, "[%s] %s %s: %s: %s", c->tag, c->row->op, c->row->name, name, what);
}

/* the CUDA backend's test hooks (cuda_ops.h); nothing on the CPU */
static void bo_widen_tile(bo_ctx *c, int64_t elems) {
#ifdef H3_CUDA
    if (bo_is_cuda(c->be[1])) cuda_set_widen_tile(c->be[1], elems);
#endif
    (void)c, (void)elems;
}

static void bo_attention_cudnn(bo_ctx *c, int on) {
#ifdef H3_CUDA
    if (bo_is_cuda(c->be[1])) cuda_set_attention_cudnn(c->be[1], on);
#endif
    (void)c, (void)on;
}

#endif
