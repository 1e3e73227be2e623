/* Layout parity (docs/model/dit.md 5, 6): packed layouts of t2va / fl2va / ref2va (positions, tags,
 * indices, condition counts) and the per-step row timestep plans bit-exact against diffusers'
 * builders (golden/pipeline/layout_*, plans), the geometry helpers against modular_pipeline.py
 * (golden/pipeline/geometry), the worked examples of docs/model/dit.md 6, and the validation errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/layout.h"
#include "pipeline_fixture.h"
#include "test.h"

static const char *cases[] = {
    "t2va", "fl2va_first", "fl2va_last", "fl2va_both", "t2va_1344x768", "t2va_768x1344", "fl2va_first_960x544",
    "fl2va_last_124frames", "fl2va_both_345frames", "fl2va_last_f16", "fl2va_last_f200", "ref2va_worked",
    "ref2va_mixed", "ref2va_real",
};

/* Builds the C layout for a layout probe case from its .in file. */
static layout *build_case(st_file *fi, h3_err *e) {
    int64_t T, ng, na = 0, nr = 0;
    const int64_t *tags = fx_get(fi, "text_token_tags", H3_I64, &T);
    const int64_t *geo = fx_get(fi, "geometry", H3_I64, &ng);
    const int64_t *anc = fx_get(fi, "anchors", H3_I64, &na);
    const int64_t *refs = fx_get(fi, "references", H3_I64, &nr);
    if (!tags || !geo || ng != 4) { h3_fail(e, "fixture incomplete"); return NULL; }
    if (refs) {
        int n = (int)(nr / 5);
        layout_ref *r = calloc((size_t)n, sizeof *r);
        for (int i = 0; i < n; i++)
            r[i] = (layout_ref){(layout_ref_kind)refs[5 * i], (int)refs[5 * i + 1], (int)refs[5 * i + 2],
                                (int)refs[5 * i + 3], (int)refs[5 * i + 4]};
        layout *L = layout_new_ref2va(tags, T, r, n, (int)geo[0], (int)geo[1], (int)geo[2], (int)geo[3], e);
        free(r);
        return L;
    }
    int a[2] = {0, 0};
    for (int i = 0; i < na && i < 2; i++) a[i] = (int)anc[i];
    return layout_new_t2va(tags, T, (int)geo[0], (int)geo[1], (int)geo[2], (int)geo[3], a, (int)na, e);
}

static void test_cases(void) {
    st_file *plans = fx_open("plans");
    int plans_checked = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char name[96];
        snprintf(name, sizeof name, "layout_%s.in", cases[c]);
        st_file *fi = fx_open(name);
        snprintf(name, sizeof name, "layout_%s.out", cases[c]);
        st_file *fo = fx_open(name);
        h3_err e = {{0}};
        layout *L = fi ? build_case(fi, &e) : NULL;
        CHECK(L != NULL, "%s: %s", cases[c], e.msg);
        int64_t nS, nt, nv, na, nx, nc;
        const double *pos = fx_get(fo, "position_ids", H3_F64, &nS);
        const int64_t *tags = fx_get(fo, "token_tags", H3_I64, &nt);
        const int64_t *vi = fx_get(fo, "video_indices", H3_I64, &nv);
        const int64_t *ai = fx_get(fo, "audio_indices", H3_I64, &na);
        const int64_t *ti = fx_get(fo, "text_indices", H3_I64, &nx);
        const int64_t *ncond = fx_get(fo, "num_condition_rows", H3_I64, &nc);
        CHECK(pos && tags && vi && ai && ti && ncond, "%s: reference output incomplete", cases[c]);
        if (L && pos && tags && vi && ai && ti && ncond) {
            CHECK(L->S * 3 == nS && L->S == nt && L->Nv == nv && L->Na == na && L->T == nx,
                  "%s: sizes S %lld/%lld Nv %lld/%lld Na %lld/%lld", cases[c], (long long)L->S, (long long)nt,
                  (long long)L->Nv, (long long)nv, (long long)L->Na, (long long)na);
            if (L->S == nt && L->Nv == nv && L->Na == na && L->T == nx) {
                int64_t d = fx_first_diff(L->position_ids, pos, nS, 8);
                CHECK(d < 0, "%s: position_ids differ first at row %lld col %lld: %.17g vs %.17g", cases[c],
                      (long long)(d / 3), (long long)(d % 3), d >= 0 ? L->position_ids[d] : 0, d >= 0 ? pos[d] : 0);
                CHECK(fx_first_diff(L->token_tags, tags, nt, 8) < 0, "%s: token_tags differ", cases[c]);
                CHECK(fx_first_diff(L->video_indices, vi, nv, 8) < 0, "%s: video_indices differ", cases[c]);
                CHECK(fx_first_diff(L->audio_indices, ai, na, 8) < 0, "%s: audio_indices differ", cases[c]);
                CHECK(fx_first_diff(L->text_indices, ti, nx, 8) < 0, "%s: text_indices differ", cases[c]);
                CHECK(L->num_condition_video_rows == ncond[0] && L->num_condition_audio_rows == ncond[1],
                      "%s: condition rows %lld/%lld vs %lld/%lld", cases[c], (long long)L->num_condition_video_rows,
                      (long long)L->num_condition_audio_rows, (long long)ncond[0], (long long)ncond[1]);
            }
            /* row timestep plans of this layout */
            int64_t *idx = malloc(sizeof(int64_t) * (size_t)L->S);
            for (int j = 0; j < 32; j++) {
                char pn[128];
                snprintf(pn, sizeof pn, "%s_%d_tv", cases[c], j);
                const float *tv = fx_get(plans, pn, H3_F32, NULL);
                if (!tv) break;
                snprintf(pn, sizeof pn, "%s_%d_ta", cases[c], j);
                const float *ta = fx_get(plans, pn, H3_F32, NULL);
                snprintf(pn, sizeof pn, "%s_%d_timestep", cases[c], j);
                int64_t nk, ni;
                const float *ts = fx_get(plans, pn, H3_F32, &nk);
                snprintf(pn, sizeof pn, "%s_%d_timestep_indices", cases[c], j);
                const int64_t *ix = fx_get(plans, pn, H3_I64, &ni);
                float mine[LAYOUT_MAX_TIMESTEPS];
                int K;
                layout_row_timesteps(L, *tv, *ta, mine, &K, idx);
                CHECK(ta && ts && ix && K == nk && ni == L->S && fx_first_diff(mine, ts, nk, 4) < 0 &&
                          fx_first_diff(idx, ix, ni, 8) < 0,
                      "%s: plan %d (tv %.9g ta %.9g) differs: K %d vs %lld", cases[c], j, (double)*tv,
                      ta ? (double)*ta : 0.0, K, (long long)nk);
                plans_checked++;
            }
            free(idx);
        }
        layout_free(L);
        st_close(fi);
        st_close(fo);
    }
    printf("  %zu layouts and %d row timestep plans compared bit for bit\n", sizeof cases / sizeof cases[0],
           plans_checked);
    CHECK(plans_checked >= 40, "only %d plans", plans_checked);
    st_close(plans);
}

/* Spec 6.4's worked example and 6.1's grids, independent of the fixtures. */
static void test_spec_examples(void) {
    const int64_t tags[5] = {1, 1, 0, 0, 1};
    const layout_ref refs[3] = {{LAYOUT_REF_IMAGE, 1, 4, 6, 0}, {LAYOUT_REF_VIDEO, 7, 4, 4, 40}, {LAYOUT_REF_AUDIO, 0, 0, 0, 30}};
    h3_err e = {{0}};
    layout *L = layout_new_ref2va(tags, 5, refs, 3, 7, 4, 4, 37, &e);
    CHECK(L && L->S == 281 && L->num_condition_video_rows == 34 && L->num_condition_audio_rows == 140,
          "worked example sizes: %s", e.msg);
    if (L) {
        const struct { int s, tag; double t, h, w; } rows[] = {
            {0, 1, 0, 0, 0}, {4, 1, 4, 0, 0}, {5, 0, 5, 2.9360547051563817, -3.5959179422654266},
            {10, 0, 5, 16, 22.531972647421814}, {11, 2, 6, 0, 0}, {50, 2, 45, 0, 0}, {90, 2, 45, 0, 16},
            {91, 0, 6, 0, 0}, {118, 0, 36, 16, 16}, {119, 2, 46, 0, 0}, {178, 2, 75, 0, 16}, {179, 2, 76, 0, 0},
            {252, 2, 112, 0, 16}, {253, 0, 76, 0, 0}, {280, 0, 106, 16, 16}};
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
            const double *p = L->position_ids + 3 * rows[i].s;
            CHECK(L->token_tags[rows[i].s] == rows[i].tag && p[0] == rows[i].t && p[1] == rows[i].h && p[2] == rows[i].w,
                  "worked example row %d: tag %lld (%g, %.17g, %.17g)", rows[i].s, (long long)L->token_tags[rows[i].s],
                  p[0], p[1], p[2]);
        }
        /* docs/model/dit.md 6.5 example: t = 0.3 / 0.6 with conditions and reference audio -> 4 timesteps */
        int64_t *idx = malloc(sizeof(int64_t) * (size_t)L->S);
        float ts[4];
        int K;
        layout_row_timesteps(L, 0.3f, 0.6f, ts, &K, idx);
        CHECK(K == 4 && ts[0] == 0.3f && ts[1] == 0.6f && ts[2] == 0.999f && ts[3] == 1.0f, "plan 0.3/0.6: K %d", K);
        CHECK(idx[0] == 0 && idx[5] == 2 && idx[11] == 3 && idx[179] == 1 && idx[253] == 0, "plan row indices");
        layout_row_timesteps(L, 0.9995f, 0.9999f, ts, &K, idx);
        CHECK(K == 3 && ts[0] == 0.9995f && ts[1] == 0.9999f && ts[2] == 1.0f, "plan 0.9995/0.9999: K %d", K);
        free(idx);
    }
    layout_free(L);
    /* 6.1: 768 (h) x 1344 (w) */
    double gh[24], gw[42];
    layout_spatial_grid(48, sqrt(48.0 * 84.0), gh);
    layout_spatial_grid(84, sqrt(48.0 * 84.0), gw);
    CHECK(gh[0] == 3.9051368637047297 && gh[1] == 4.913042125062669 && gh[23] == 27.08695787493733, "gh %.17g", gh[0]);
    CHECK(gw[0] == -5.166010488516722 && gw[1] == -4.158105227158783 && gw[41] == 36.15810522715877, "gw %.17g", gw[0]);
    /* 6.3 / trap 7: pairwise vs sequential differ at F = 16; last anchor for F = 37, T = 256 */
    CHECK(layout_last_anchor_time(256, 37) == 460.99999999999994, "last anchor %.17g", layout_last_anchor_time(256, 37));
    double times[37];
    layout_temporal_grid(37, 256.0, times);
    CHECK(times[36] == 455.9999999999999, "last frame %.17g", times[36]);
}

static void test_geometry(void) {
    st_file *f = fx_open("geometry");
    int64_t n, nc;
    const int64_t *frames = fx_get(f, "num_frames", H3_I64, &n), *aligned = fx_get(f, "aligned", H3_I64, NULL);
    const int64_t *latent = fx_get(f, "latent_frames", H3_I64, NULL), *audio = fx_get(f, "audio_latents", H3_I64, NULL);
    const int64_t *ok = fx_get(f, "duration_ok", H3_I64, NULL);
    CHECK(frames && aligned && latent && audio && ok, "geometry fixture");
    int agree = 0;
    for (int64_t i = 0; frames && aligned && latent && audio && ok && i < n; i++) {
        h3_err e = {{0}};
        int a = 0, F = 0;
        int rc = layout_align_num_frames((int)frames[i], &a, &e);
        int same = (rc == 0) == (aligned[i] >= 0);
        if (rc == 0) {
            same &= a == aligned[i];
            same &= layout_latent_frames(a, &F, &e) == 0 && F == latent[i];
            same &= layout_audio_latents(a) == audio[i];
            same &= (layout_check_duration((int)frames[i], a, &e) == 0) == (ok[i] == 1);
        } else {
            same &= strstr(e.msg, "num_frames") != NULL;
        }
        CHECK(same, "num_frames %lld: aligned %d F %d vs %lld %lld", (long long)frames[i], a, F, (long long)aligned[i],
              (long long)latent[i]);
        agree += same;
    }
    printf("  frame rules agree for %d of %lld frame counts (-1..400)\n", agree, (long long)n);
    const double *asp = fx_get(f, "canvas_aspect", H3_F64, &nc);
    const int64_t *hw = fx_get(f, "canvas_hw", H3_I64, NULL);
    for (int64_t i = 0; asp && hw && i < nc / 2; i++) {
        h3_err e = {{0}};
        int h = -1, w = -1;
        int rc = layout_resolve_canvas(asp[2 * i], asp[2 * i + 1], &h, &w, &e);
        CHECK(rc == 0 ? (h == hw[2 * i] && w == hw[2 * i + 1]) : (hw[2 * i] == -1 && strstr(e.msg, "aspect ratio")),
              "canvas %g:%g -> %dx%d vs %lldx%lld (%s)", asp[2 * i], asp[2 * i + 1], h, w, (long long)hw[2 * i],
              (long long)hw[2 * i + 1], e.msg);
    }
    st_close(f);

    /* the layout step's geometry and its errors */
    layout_geometry g;
    h3_err e = {{0}};
    CHECK(layout_resolve_geometry(0, 0, 124, &g, &e) == 0 && g.height == 768 && g.width == 1344 && g.num_latent_frames == 37 &&
              g.latent_height == 48 && g.latent_width == 84 && g.num_audio_latents == 207,
          "default geometry: %s", e.msg);
    CHECK(layout_resolve_geometry(544, 960, 108, &g, &e) == 0 && g.num_frames == 124 && g.latent_height == 34, "544x960");
    CHECK(layout_resolve_geometry(512, 0, 124, &g, &e) == -1 && strstr(e.msg, "together"), "height alone: %s", e.msg);
    CHECK(layout_resolve_geometry(500, 512, 124, &g, &e) == -1 && strstr(e.msg, "multiples of 32"), "500: %s", e.msg);
    CHECK(layout_resolve_geometry(512, 512, 22, &g, &e) == -1 && strstr(e.msg, "between 120 and 360"), "22: %s", e.msg);
    CHECK(layout_resolve_geometry(512, 512, 346, &g, &e) == -1 && strstr(e.msg, "rounded up to 362"), "346: %s", e.msg);
    CHECK(layout_resolve_geometry(512, 512, 345, &g, &e) == 0 && g.num_latent_frames == 102 && g.num_audio_latents == 575,
          "345 frames");
    CHECK(layout_resolve_geometry(512, 512, 0, &g, &e) == -1 && strstr(e.msg, "positive"), "0 frames: %s", e.msg);
}

static void test_errors(void) {
    const int64_t tags[3] = {1, 1, 1}, badtags[2] = {1, 5};
    h3_err e = {{0}};
    layout *L;
    CHECK(!(L = layout_new_t2va(tags, 3, 7, 4, 6, 37, (const int[]){2}, 1, &e)) && strstr(e.msg, "'first'"),
          "bad anchor: %s", e.msg);
    CHECK(!(L = layout_new_t2va(tags, 3, 7, 4, 6, 37, (const int[]){0, 1, 0}, 3, &e)), "three anchors");
    CHECK(!(L = layout_new_t2va(tags, 3, 7, 3, 6, 37, NULL, 0, &e)) && strstr(e.msg, "patch"), "odd lh: %s", e.msg);
    CHECK(!(L = layout_new_t2va(tags, 3, 0, 4, 6, 37, NULL, 0, &e)), "F = 0");
    CHECK(!(L = layout_new_t2va(badtags, 2, 7, 4, 6, 37, NULL, 0, &e)) && strstr(e.msg, "text_token_tags[1]"),
          "bad text tag: %s", e.msg);
    const layout_ref img = {LAYOUT_REF_IMAGE, 1, 4, 4, 0}, aud = {LAYOUT_REF_AUDIO, 0, 0, 0, 10};
    const layout_ref badkind = {(layout_ref_kind)7, 1, 4, 4, 0}, oddimg = {LAYOUT_REF_IMAGE, 1, 5, 4, 0};
    CHECK(!(L = layout_new_ref2va(tags, 3, &badkind, 1, 7, 4, 4, 37, &e)) && strstr(e.msg, "references[0]"),
          "unknown kind: %s", e.msg);
    CHECK(!(L = layout_new_ref2va(tags, 3, &oddimg, 1, 7, 4, 4, 37, &e)) && strstr(e.msg, "patch"), "odd ref: %s", e.msg);
    CHECK(layout_check_references(&img, 1, &e) == 0, "one image ok");
    CHECK(layout_check_references(&img, 0, &e) == -1 && strstr(e.msg, "at least one"), "no refs: %s", e.msg);
    CHECK(layout_check_references(&aud, 1, &e) == -1 && strstr(e.msg, "audio reference"), "audio only: %s", e.msg);
    layout_ref many[13];
    for (int i = 0; i < 13; i++) many[i] = img;
    CHECK(layout_check_references(many, 10, &e) == -1 && strstr(e.msg, "at most 9 image"), "10 images: %s", e.msg);
    for (int i = 0; i < 13; i++) many[i] = i < 9 ? img : (layout_ref){LAYOUT_REF_VIDEO, 2, 4, 4, 0};
    CHECK(layout_check_references(many, 12, &e) == 0, "9 images + 3 videos ok: %s", e.msg);
    many[12] = aud;
    CHECK(layout_check_references(many, 13, &e) == -1 && strstr(e.msg, "12 references"), "13 refs: %s", e.msg);

    /* layouts from tensors: partition and count checks */
    L = layout_new_t2va(tags, 3, 2, 2, 2, 3, NULL, 0, &e);
    CHECK(L != NULL, "small layout: %s", e.msg);
    if (L) {
        layout *M = layout_new_from_tensors(L->S, L->position_ids, L->token_tags, L->video_indices, L->Nv, L->audio_indices,
                                            L->Na, L->text_indices, L->T, 0, 0, 2, 2, 2, 3, &e);
        CHECK(M != NULL, "round trip: %s", e.msg);
        layout_free(M);
        int64_t saved = L->video_indices[1];
        L->video_indices[1] = L->video_indices[0];
        M = layout_new_from_tensors(L->S, L->position_ids, L->token_tags, L->video_indices, L->Nv, L->audio_indices, L->Na,
                                    L->text_indices, L->T, 0, 0, 2, 2, 2, 3, &e);
        CHECK(!M && strstr(e.msg, "video_indices[1]"), "overlapping indices: %s", e.msg);
        L->video_indices[1] = saved;
        M = layout_new_from_tensors(L->S, L->position_ids, L->token_tags, L->video_indices, L->Nv, L->audio_indices, L->Na,
                                    L->text_indices, L->T, 1, 0, 2, 2, 2, 3, &e);
        CHECK(!M && strstr(e.msg, "num_condition_video_rows"), "condition count: %s", e.msg);
        layout_free(L);
    }
}

/* `h3 probe layout` on every layout golden: all outputs bit-exact. */
static void test_probe_op(void) {
    int ok = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char cas[96];
        snprintf(cas, sizeof cas, "layout_%s", cases[c]);
        int total;
        double worst;
        int same = fx_probe_matches("layout", NULL, cas, -1, &total, &worst);
        CHECK(same == 6 && total == 6, "h3 probe layout %s: %d of %d outputs match (-1: probe failed)", cases[c], same,
              total);
        ok += same == 6;
    }
    printf("  h3 probe layout: %d of %zu cases bit-exact\n", ok, sizeof cases / sizeof cases[0]);
}

int main(void) {
    test_probe_op();
    test_cases();
    test_spec_examples();
    test_geometry();
    test_errors();
    TEST_END();
}
