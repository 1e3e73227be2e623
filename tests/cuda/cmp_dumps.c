/* Compares two `h3 generate --dump-latents` files tensor by tensor (tests/cuda/run_e2e_device.sh:
 * the CUDA backend's dump against the CPU backend's), or a dump against a diffusers e2e golden.
 *
 *   cmp_dumps TOL REF.safetensors TEST.safetensors [LABEL]
 *       every tensor of REF must be in TEST with the same dtype and shape; F32 tensors pass with
 *       relative L2 ||TEST - REF|| / ||REF|| <= TOL, other dtypes (prompt ids, tags, pixels) must be
 *       bit-identical.
 *   cmp_dumps --golden TOL GOLDEN.out.safetensors TEST.safetensors [LABEL]
 *       as tests/test_e2e.c: video_latents, audio_latents, audio, and frames, of which the golden
 *       keeps the frames listed in its `frames_index` and every `frames_pixel_step`-th row and column.
 *
 * Prints one line per tensor (relative L2, max abs) and `RESULT <passed> <failed>`; exit status 0
 * when all pass, 1 when one fails, 2 on unreadable input. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/dtype.h"
#include "io/safetensors.h"

static int passed, failed;

static void shape_str(const st_entry *e, char *out, size_t cap) {
    size_t k = (size_t)snprintf(out, cap, "[");
    for (int i = 0; i < e->ndim && k < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%s%lld", i ? "," : "", (long long)e->shape[i]);
    if (k < cap) snprintf(out + k, cap - k, "]");
}

static int64_t numel(const st_entry *e) {
    int64_t n = 1;
    for (int i = 0; i < e->ndim; i++) n *= e->shape[i];
    return n;
}

static void verdict(const char *label, const char *name, const char *shape, double rel, double maxabs, double tol,
                    const char *note) {
    int ok = rel <= tol; /* NaN fails */
    printf("  %-8s %-24s %-18s rel_l2 %.3e  max_abs %.3e  (tol %.0e)%s  %s\n", label, name, shape, rel, maxabs, tol,
           note, ok ? "ok" : "FAIL");
    ok ? passed++ : failed++;
}

/* rel L2 / max abs of test[map(k)] against ref[k] for k < n (map NULL: identity). */
static void f32_stats(const float *ref, const float *test, int64_t n, const int64_t *map, double *rel, double *maxabs) {
    double d2 = 0, r2 = 0, m = 0;
    for (int64_t k = 0; k < n; k++) {
        double r = ref[k], t = test[map ? map[k] : k], d = t - r;
        d2 += d * d, r2 += r * r;
        if (isnan(d)) m = INFINITY;
        else if (fabs(d) > m) m = fabs(d);
    }
    *rel = r2 > 0 ? sqrt(d2 / r2) : sqrt(d2);
    *maxabs = m;
}

static int same_shape(const st_entry *a, const st_entry *b) {
    if (a->ndim != b->ndim || a->dtype != b->dtype) return 0;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return 0;
    return 1;
}

static void compare_all(const st_file *ref, const st_file *test, double tol, const char *label) {
    for (int i = 0; i < ref->n; i++) {
        const st_entry *re = &ref->entries[i], *te = st_find(test, re->name);
        char rs[64], ts[64];
        shape_str(re, rs, sizeof rs);
        if (!te || !same_shape(re, te)) {
            if (te) shape_str(te, ts, sizeof ts);
            printf("  %-8s %-24s %s in the reference, %s in the test  FAIL\n", label, re->name, rs, te ? ts : "missing");
            failed++;
            continue;
        }
        const void *a = st_data(ref, re), *b = st_data(test, te);
        if (re->dtype == H3_F32) {
            double rel, maxabs;
            f32_stats(a, b, numel(re), NULL, &rel, &maxabs);
            verdict(label, re->name, rs, rel, maxabs, tol, "");
        } else {
            int ok = memcmp(a, b, (size_t)(re->end - re->begin)) == 0;
            printf("  %-8s %-24s %-18s %s  %s\n", label, re->name, rs, ok ? "bit-identical" : "differs", ok ? "ok" : "FAIL");
            ok ? passed++ : failed++;
        }
    }
}

/* The golden convention of tests/test_e2e.c (tools/reference/gen_e2e.py). */
static void compare_golden(const st_file *g, const st_file *h, double tol, const char *label) {
    static const char *const names[] = {"video_latents", "audio_latents", "frames", "audio"};
    const st_entry *ie = st_find(g, "frames_index"), *se = st_find(g, "frames_pixel_step");
    const int64_t *index = ie && ie->dtype == H3_I64 && ie->ndim == 1 ? st_data(g, ie) : NULL;
    const int64_t *step = se && se->dtype == H3_I64 && se->ndim == 1 && se->shape[0] == 2 ? st_data(g, se) : NULL;
    for (int t = 0; t < 4; t++) {
        const st_entry *ge = st_find(g, names[t]), *he = st_find(h, names[t]);
        int frames = t == 2;
        if (!ge || !he || ge->dtype != H3_F32 || he->dtype != H3_F32 || ge->ndim != he->ndim ||
            (frames && (!index || !step || step[0] != step[1] || step[0] < 1 || ge->ndim != 4 || ge->shape[0] != ie->shape[0]))) {
            printf("  %-8s %-24s missing, not f32, or no frames_index / frames_pixel_step in the golden  FAIL\n", label,
                   names[t]);
            failed++;
            continue;
        }
        int64_t n = numel(ge), s = frames ? step[0] : 1;
        int ok = 1;
        for (int i = frames ? 1 : 0; i < ge->ndim; i++)
            ok &= ge->shape[i] == (frames && i < 3 ? (he->shape[i] + s - 1) / s : he->shape[i]);
        int64_t *map = frames ? malloc(sizeof(int64_t) * (size_t)n) : NULL;
        for (int64_t k = 0; ok && frames && k < n; k++) {
            int64_t C = ge->shape[3], Wg = ge->shape[2], Hg = ge->shape[1];
            int64_t c = k % C, x = k / C % Wg, y = k / C / Wg % Hg, f = index[k / C / Wg / Hg];
            if (f < 0 || f >= he->shape[0]) ok = 0;
            else map[k] = ((f * he->shape[1] + y * s) * he->shape[2] + x * s) * C + c;
        }
        char gs[64], hs[64];
        shape_str(ge, gs, sizeof gs);
        shape_str(he, hs, sizeof hs);
        if (!ok) {
            printf("  %-8s %-24s golden %s does not sample test %s  FAIL\n", label, names[t], gs, hs);
            failed++;
        } else {
            double rel, maxabs;
            f32_stats(st_data(g, ge), st_data(h, he), n, map, &rel, &maxabs);
            char note[64] = "";
            if (frames) snprintf(note, sizeof note, " (%lld frames, step %lld)", (long long)ge->shape[0], (long long)s);
            verdict(label, names[t], hs, rel, maxabs, tol, note);
        }
        free(map);
    }
}

int main(int argc, char **argv) {
    int golden = argc > 1 && !strcmp(argv[1], "--golden");
    char **a = argv + golden;
    int n = argc - golden;
    if (n < 4 || n > 5) {
        fprintf(stderr, "usage: cmp_dumps [--golden] TOL REF.safetensors TEST.safetensors [LABEL]\n");
        return 2;
    }
    char *end;
    double tol = strtod(a[1], &end);
    if (*end || !(tol > 0)) {
        fprintf(stderr, "cmp_dumps: TOL must be a positive number, got '%s'\n", a[1]);
        return 2;
    }
    h3_err e = {0};
    st_file *ref = st_open(a[2], &e);
    if (!ref) {
        fprintf(stderr, "cmp_dumps: %s\n", e.msg);
        return 2;
    }
    st_file *test = st_open(a[3], &e);
    if (!test) {
        fprintf(stderr, "cmp_dumps: %s\n", e.msg);
        st_close(ref);
        return 2;
    }
    const char *label = n == 5 ? a[4] : "";
    if (golden) compare_golden(ref, test, tol, label);
    else compare_all(ref, test, tol, label);
    st_close(ref);
    st_close(test);
    printf("RESULT %d %d\n", passed, failed);
    return failed ? 1 : 0;
}
