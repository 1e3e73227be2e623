/* Reading golden safetensors files in the pipeline tests (tests/fixtures/golden/pipeline/, written
 * by tools/reference/gen_pipeline.py). Header-only; every function tolerates a missing tensor by
 * returning NULL so the test reports a failed CHECK instead of crashing. */
#ifndef H3_PIPELINE_FIXTURE_H
#define H3_PIPELINE_FIXTURE_H

#include <stdio.h>
#include <string.h>

#include "core/tensor.h"
#include "io/safetensors.h"

#define FIX_DIR "tests/fixtures/golden/pipeline/"

static inline st_file *fx_open(const char *name) {
    char path[512];
    snprintf(path, sizeof path, FIX_DIR "%s.safetensors", name);
    h3_err e = {{0}};
    st_file *f = st_open(path, &e);
    if (!f) fprintf(stderr, "fixture %s: %s\n", path, e.msg);
    return f;
}

/* The data of tensor `name` when it has dtype `dt`; *n = element count. */
static inline const void *fx_get(const st_file *f, const char *name, h3_dtype dt, int64_t *n) {
    if (n) *n = 0;
    if (!f) return NULL;
    const st_entry *en = st_find(f, name);
    if (!en || en->dtype != dt) return NULL;
    int64_t c = 1;
    for (int i = 0; i < en->ndim; i++) c *= en->shape[i];
    if (n) *n = c;
    return st_data(f, en);
}

static inline int fx_has(const st_file *f, const char *name) { return f && st_find(f, name) != NULL; }

/* Bitwise equality of n floats / doubles / int64; returns the first mismatch index or -1. */
static inline int64_t fx_first_diff(const void *a, const void *b, int64_t n, size_t elem) {
    const unsigned char *x = a, *y = b;
    for (int64_t i = 0; i < n; i++)
        if (memcmp(x + i * elem, y + i * elem, elem)) return i;
    return -1;
}

#endif

/* ---- running `h3 probe` on a golden input (the probe contract, end to end) ---- */
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* The h3 binary: $H3, else $H3_BUILD/h3 (tests/run_tests.sh sets H3_BUILD), else build/h3. */
static inline const char *fx_h3_path(char *buf, size_t cap) {
    const char *h3 = getenv("H3");
    if (h3 && *h3) return h3;
    const char *b = getenv("H3_BUILD");
    snprintf(buf, cap, "%s/h3", b && *b ? b : "build");
    return buf;
}

/* Runs `h3 probe OP [extra] --in FIX_DIR/<in_case>.safetensors --out <tmp>` and opens the output
 * (NULL when the probe failed; *rc gets its exit status). The output file is removed after opening
 * (the mapping stays valid). */
static inline st_file *fx_run_probe(const char *op, const char *extra, const char *in_case, int *rc) {
    char h3[512], out[256], cmd[2048];
    snprintf(out, sizeof out, "/tmp/h3_pipeline_probe_%d_%s.safetensors", (int)getpid(), op);
    snprintf(cmd, sizeof cmd, "%s probe %s %s --in " FIX_DIR "%s.safetensors --out %s 2>/dev/null",
             fx_h3_path(h3, sizeof h3), op, extra ? extra : "", in_case, out);
    int st = system(cmd);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    if (*rc != 0) return NULL;
    h3_err e = {{0}};
    st_file *f = st_open(out, &e);
    unlink(out);
    return f;
}

/* Runs the probe on <case>.in and compares every tensor of <case>.out with its output: bit for bit
 * when rel_tol < 0, else fp32 tensors by relative L2 <= rel_tol (others bit for bit). Returns the
 * number of tensors that match, -1 when the probe failed; *total = tensors in the .out file;
 * *worst = the largest relative L2 seen. */
static inline int fx_probe_matches(const char *op, const char *extra, const char *cas, double rel_tol, int *total,
                                   double *worst) {
    char in[160], outn[160];
    snprintf(in, sizeof in, "%s.in", cas);
    snprintf(outn, sizeof outn, "%s.out", cas);
    int rc;
    *total = 0;
    *worst = 0;
    st_file *got = fx_run_probe(op, extra, in, &rc);
    st_file *ref = fx_open(outn);
    if (!got || !ref) {
        if (got) st_close(got);
        if (ref) st_close(ref);
        return -1;
    }
    int same = 0;
    for (int i = 0; i < ref->n; i++) {
        const st_entry *r = &ref->entries[i], *g = st_find(got, r->name);
        (*total)++;
        if (!g || g->dtype != r->dtype || g->ndim != r->ndim || memcmp(g->shape, r->shape, sizeof(int64_t) * r->ndim))
            continue;
        int64_t n = 1;
        for (int d = 0; d < r->ndim; d++) n *= r->shape[d];
        if (rel_tol >= 0 && r->dtype == H3_F32) {
            double rel = h3_rel_l2(st_data(got, g), st_data(ref, r), (size_t)n);
            if (rel > *worst) *worst = rel;
            same += rel <= rel_tol;
        } else {
            same += fx_first_diff(st_data(got, g), st_data(ref, r), n, h3_dtype_size(r->dtype)) < 0;
        }
    }
    st_close(got);
    st_close(ref);
    return same;
}
