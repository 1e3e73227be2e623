/* Denoising-loop parity (docs/model/dit.md 7.4, 8.2): the C loop (row timestep plans, one dit_forward per
 * step, Euler on the target rows only, final unpack) on the tiny random-weight DiT, against the final
 * latents of diffusers' core denoise steps for t2va, fl2va (first + last) and ref2va with 4 model
 * evaluations (golden/pipeline/denoise_*), in fp32: relative L2 <= 1e-4. Also: the layout rebuilt
 * in C equals the one the reference handed its transformer, condition/reference rows are never
 * written, the loop runs N - 1 forwards, and starting from C-drawn noise stays within the tolerance. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "model/dit.h"
#include "pipeline/denoise.h"
#include "pipeline/layout.h"
#include "pipeline/noise.h"
#include "pipeline/sched.h"
#include "pipeline_fixture.h"
#include "test.h"

static int count_steps(void *user, int step, int total) {
    (*(int *)user)++;
    return 0;
}

/* n uniform values in [-1, 1) from a 64-bit LCG (state advanced) */
static void fill_uniform(float *x, int64_t n, uint64_t *st) {
    for (int64_t i = 0; i < n; i++) x[i] = (float)((*st = *st * 6364136223846793005ull + 1) >> 40) / 8388608.0f - 1.0f;
}

static double max_abs(const float *a, const float *b, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - (double)b[i]));
    return m;
}

typedef struct loop_result {
    float *video, *audio;  /* unpacked latents */
    float *rows_v, *rows_a;
} loop_result;

static void loop_result_free(loop_result *r) {
    free(r->video);
    free(r->audio);
    free(r->rows_v);
    free(r->rows_a);
}

/* Runs the C loop from the given starting rows. */
static int run_loop(dit_model *m, const layout *L, const float *text, int steps, const float *v0, const float *a0,
                    int *forwards, int release_adaln, loop_result *out, h3_err *e) {
    memset(out, 0, sizeof *out);
    sched sv, sa;
    if (sched_init(&sv, steps, SCHED_VIDEO_SHIFT, e) || sched_init(&sa, steps, SCHED_AUDIO_SHIFT, e)) return -1;
    out->rows_v = malloc(sizeof(float) * (size_t)(L->Nv * 96));
    out->rows_a = malloc(sizeof(float) * (size_t)(L->Na * 32));
    memcpy(out->rows_v, v0, sizeof(float) * (size_t)(L->Nv * 96));
    memcpy(out->rows_a, a0, sizeof(float) * (size_t)(L->Na * 32));
    *forwards = 0;
    denoise_args a = {.L = L, .text = text, .video_sched = &sv, .audio_sched = &sa, .video_rows = out->rows_v,
                      .audio_rows = out->rows_a, .progress = count_steps, .progress_user = forwards,
                      .release_adaln = release_adaln};
    int rc = denoise_run(m, &a, e);
    if (rc == 0) {
        out->video = malloc(sizeof(float) * (size_t)(24 * L->num_latent_frames * L->latent_height * L->latent_width));
        out->audio = malloc(sizeof(float) * (size_t)(2 * 32 * L->num_audio_latents));
        rc = denoise_unpack(L, 24, 32, out->rows_v, out->rows_a, out->video, out->audio, e);
    }
    sched_free(&sv);
    sched_free(&sa);
    return rc;
}

static void test_task(h3_backend *be, const char *task) {
    char name[64];
    snprintf(name, sizeof name, "denoise_%s.in", task);
    st_file *fi = fx_open(name);
    snprintf(name, sizeof name, "denoise_%s.out", task);
    st_file *fo = fx_open(name);
    int64_t nv = 0, na = 0, nS = 0, nt = 0, nvi = 0, nai = 0, nti = 0, ntext = 0, nref = 0, nanc = 0, nac = 0;
    const float *v0 = fx_get(fi, "latents", H3_F32, &nv), *a0 = fx_get(fi, "audio_latents", H3_F32, &na);
    const float *text = fx_get(fi, "prompt_embeds", H3_F32, &ntext);
    const double *pos = fx_get(fi, "position_ids", H3_F64, &nS);
    const int64_t *tags = fx_get(fi, "token_tags", H3_I64, &nt), *vi = fx_get(fi, "video_indices", H3_I64, &nvi);
    const int64_t *ai = fx_get(fi, "audio_indices", H3_I64, &nai), *ti = fx_get(fi, "text_indices", H3_I64, &nti);
    const int64_t *ncv = fx_get(fi, "num_condition_video_rows", H3_I64, NULL);
    const int64_t *nca = fx_get(fi, "num_condition_audio_rows", H3_I64, NULL);
    const int64_t *geo = fx_get(fi, "geometry", H3_I64, NULL), *steps = fx_get(fi, "num_inference_steps", H3_I64, NULL);
    const int64_t *seed = fx_get(fi, "seed", H3_I64, NULL), *ttags = fx_get(fi, "text_token_tags", H3_I64, NULL);
    const int64_t *refs = fx_get(fi, "references", H3_I64, &nref), *anchors = fx_get(fi, "anchors", H3_I64, &nanc);
    const float *aconds = fx_get(fi, "audio_condition_latents", H3_F32, &nac);
    const float *ref_video = fx_get(fo, "latents", H3_F32, NULL), *ref_audio = fx_get(fo, "audio_latents", H3_F32, NULL);
    CHECK(v0 && a0 && text && pos && tags && vi && ai && ti && ncv && nca && geo && steps && seed && ttags && ref_video &&
              ref_audio,
          "%s: fixture incomplete", task);
    if (!(v0 && a0 && text && pos && tags && vi && ai && ti && ncv && nca && geo && steps && seed && ttags && ref_video &&
          ref_audio)) {
        st_close(fi);
        st_close(fo);
        return;
    }
    h3_err e = {{0}};
    const int F = (int)geo[0], lh = (int)geo[1], lw = (int)geo[2], A = (int)geo[3];
    layout *L = layout_new_from_tensors(nS / 3, pos, tags, vi, nvi, ai, nai, ti, nti, ncv[0], nca[0], F, lh, lw, A, &e);
    CHECK(L != NULL, "%s: layout from the reference's tensors: %s", task, e.msg);

    /* the C layout builder gives the same layout the reference pipeline built */
    layout *C = NULL;
    if (refs) {
        layout_ref r[16];
        int n = (int)(nref / 5);
        for (int i = 0; i < n && i < 16; i++)
            r[i] = (layout_ref){(layout_ref_kind)refs[5 * i], (int)refs[5 * i + 1], (int)refs[5 * i + 2],
                                (int)refs[5 * i + 3], (int)refs[5 * i + 4]};
        C = layout_new_ref2va(ttags, nti, r, n, F, lh, lw, A, &e);
    } else {
        int anc[2] = {anchors && nanc > 0 ? (int)anchors[0] : 0, anchors && nanc > 1 ? (int)anchors[1] : 0};
        C = layout_new_t2va(ttags, nti, F, lh, lw, A, anc, anchors ? (int)nanc : 0, &e);
    }
    CHECK(C && C->S * 3 == nS && fx_first_diff(C->position_ids, pos, nS, 8) < 0 &&
              fx_first_diff(C->token_tags, tags, nt, 8) < 0 && fx_first_diff(C->video_indices, vi, nvi, 8) < 0 &&
              fx_first_diff(C->audio_indices, ai, nai, 8) < 0 && C->num_condition_video_rows == ncv[0] &&
              C->num_condition_audio_rows == nca[0],
          "%s: C layout differs from the reference pipeline's (%s)", task, e.msg);
    layout_free(C);

    const char *dir = refs ? "tests/fixtures/tiny/transformer_ref" : "tests/fixtures/tiny/transformer";
    dit_model *m = L ? dit_load(be, dir, 0, &e) : NULL;
    CHECK(m != NULL, "%s: dit_load %s: %s", task, dir, e.msg);
    if (m && L) {
        loop_result r;
        int forwards = 0;
        int rc = run_loop(m, L, text, (int)steps[0], v0, a0, &forwards, 0, &r, &e);
        CHECK(rc == 0, "%s: denoise: %s", task, e.msg);
        if (rc == 0) {
            const int64_t nvl = (int64_t)24 * F * lh * lw, nal = (int64_t)64 * A;
            char label[96];
            snprintf(label, sizeof label, "%s final video latents (fp32, %d evaluations)", task, forwards);
            CHECK_CLOSE(label, h3_rel_l2(r.video, ref_video, nvl), 1e-4);
            snprintf(label, sizeof label, "%s final audio latents", task);
            CHECK_CLOSE(label, h3_rel_l2(r.audio, ref_audio, nal), 1e-4);
            printf("  %-48s max abs video %.3g audio %.3g\n", task, max_abs(r.video, ref_video, nvl),
                   max_abs(r.audio, ref_audio, nal));
            CHECK(forwards == (int)steps[0] - 1, "%s: %d forwards for num_inference_steps %lld", task, forwards,
                  (long long)steps[0]);
            CHECK(!memcmp(r.rows_v, v0, sizeof(float) * (size_t)(ncv[0] * 96)), "%s: condition rows were written", task);
            CHECK(!memcmp(r.rows_a, a0, sizeof(float) * (size_t)(nca[0] * 32)), "%s: reference audio rows written", task);
            loop_result_free(&r);

            /* end to end from the seed: C-drawn starting rows (torch.randn within ~2e-7) */
            noise_condition conds[4];
            int nconds = 0;
            for (int c = 0; c < 4; c++) {
                char cn[48];
                snprintf(cn, sizeof cn, "condition_latents_%d", c);
                const st_entry *en = st_find(fi, cn);
                if (!en) break;
                conds[nconds++] = (noise_condition){st_data(fi, en), (int)en->shape[2], (int)en->shape[3], (int)en->shape[4]};
            }
            noise_request nr = {.seed = (uint64_t)seed[0], .C = 24, .Ca = 32, .F = F, .lh = lh, .lw = lw, .A = A,
                                .conditions = conds, .num_conditions = nconds, .reference_audio_rows = aconds,
                                .num_reference_audio_rows = nac / 32, .expected_condition_video_rows = ncv[0],
                                .expected_condition_audio_rows = nca[0]};
            float *sv = malloc(sizeof(float) * (size_t)nv), *sa = malloc(sizeof(float) * (size_t)na);
            rc = noise_prepare_rows(&nr, sv, sa, &e);
            CHECK(rc == 0, "%s: noise: %s", task, e.msg);
            /* this second loop also drops the AdaLN weights after preparing its tables */
            if (rc == 0 && run_loop(m, L, text, (int)steps[0], sv, sa, &forwards, 1, &r, &e) == 0) {
                snprintf(label, sizeof label, "%s from seed %lld: video", task, (long long)seed[0]);
                CHECK_CLOSE(label, h3_rel_l2(r.video, ref_video, nvl), 1e-4);
                snprintf(label, sizeof label, "%s from seed %lld: audio", task, (long long)seed[0]);
                CHECK_CLOSE(label, h3_rel_l2(r.audio, ref_audio, nal), 1e-4);
                loop_result_free(&r);
                /* the AdaLN projections only gave their pages back (file weights): a new schedule still runs, its
                 * tables read from the file mapping again, and gives what a fresh model gives */
                sched other;
                sched_init(&other, 7, 12.0, &e);
                const sched *keep = &other;
                float *v2 = malloc(sizeof(float) * (size_t)nv), *a2 = malloc(sizeof(float) * (size_t)na);
                memcpy(v2, sv, sizeof(float) * (size_t)nv), memcpy(a2, sa, sizeof(float) * (size_t)na);
                denoise_args late = {.L = L, .text = text, .video_sched = keep, .audio_sched = keep,
                                     .video_rows = sv, .audio_rows = sa};
                denoise_args ref = late;
                ref.video_rows = v2, ref.audio_rows = a2;
                dit_model *fresh = dit_load(be, dir, 0, &e);
                CHECK(fresh && denoise_run(m, &late, &e) == 0 && denoise_run(fresh, &ref, &e) == 0,
                      "%s: a new schedule after the release: %s", task, e.msg);
                /* bit for bit: a list's tables are computed together whatever was cached before (dit.c
                 * dit_prepare_timesteps), as a fresh model computes them */
                CHECK(!memcmp(sv, v2, sizeof(float) * (size_t)nv) && !memcmp(sa, a2, sizeof(float) * (size_t)na),
                      "%s: a new schedule after the release differs from a fresh model's", task);
                dit_free(fresh);
                free(v2), free(a2);
                sched_free(&other);
            } else {
                CHECK(0, "%s: loop from the seed: %s", task, e.msg);
            }
            free(sv);
            free(sa);
        }
    }
    dit_free(m);
    layout_free(L);
    st_close(fi);
    st_close(fo);
}

/* The release's mixed precision: the loop with the DiT in bf16 mode vs diffusers with the DiT loaded
 * in bf16 (golden denoise_ref2va.bf16.out), within 3e-2 (bf16 noise, conventions.md). */
static void test_bf16(h3_backend *be) {
    st_file *fi = fx_open("denoise_ref2va.in"), *fo = fx_open("denoise_ref2va.bf16.out");
    st_file *f32 = fx_open("denoise_ref2va.out");
    int64_t nv = 0, na = 0, nS = 0, nvi = 0, nai = 0, nti = 0;
    const float *v0 = fx_get(fi, "latents", H3_F32, &nv), *a0 = fx_get(fi, "audio_latents", H3_F32, &na);
    const float *text = fx_get(fi, "prompt_embeds", H3_F32, NULL);
    const double *pos = fx_get(fi, "position_ids", H3_F64, &nS);
    const int64_t *tags = fx_get(fi, "token_tags", H3_I64, NULL), *vi = fx_get(fi, "video_indices", H3_I64, &nvi);
    const int64_t *ai = fx_get(fi, "audio_indices", H3_I64, &nai), *ti = fx_get(fi, "text_indices", H3_I64, &nti);
    const int64_t *ncv = fx_get(fi, "num_condition_video_rows", H3_I64, NULL);
    const int64_t *nca = fx_get(fi, "num_condition_audio_rows", H3_I64, NULL);
    const int64_t *geo = fx_get(fi, "geometry", H3_I64, NULL), *steps = fx_get(fi, "num_inference_steps", H3_I64, NULL);
    const float *rv = fx_get(fo, "latents", H3_F32, NULL), *ra = fx_get(fo, "audio_latents", H3_F32, NULL);
    const float *rv32 = fx_get(f32, "latents", H3_F32, NULL), *ra32 = fx_get(f32, "audio_latents", H3_F32, NULL);
    int ready = v0 && a0 && text && pos && tags && vi && ai && ti && ncv && nca && geo && steps && rv && ra && rv32 && ra32;
    CHECK(ready, "bf16 fixture incomplete");
    h3_err e = {{0}};
    layout *L = ready ? layout_new_from_tensors(nS / 3, pos, tags, vi, nvi, ai, nai, ti, nti, ncv[0], nca[0], (int)geo[0],
                                                (int)geo[1], (int)geo[2], (int)geo[3], &e)
                      : NULL;
    dit_model *m = L ? dit_load(be, "tests/fixtures/tiny/transformer_ref", 1, &e) : NULL;
    CHECK(!ready || m, "bf16 dit_load: %s", e.msg);
    loop_result r;
    int forwards;
    if (m && run_loop(m, L, text, (int)steps[0], v0, a0, &forwards, 0, &r, &e) == 0) {
        const int64_t nvl = 24 * geo[0] * geo[1] * geo[2], nal = 64 * geo[3];
        CHECK_CLOSE("ref2va bf16 loop: video vs diffusers bf16", h3_rel_l2(r.video, rv, nvl), 3e-2);
        CHECK_CLOSE("ref2va bf16 loop: audio vs diffusers bf16", h3_rel_l2(r.audio, ra, nal), 3e-2);
        printf("  (diffusers' own bf16-vs-fp32 gap: video %.3e audio %.3e; ours vs diffusers fp32: %.3e %.3e)\n",
               h3_rel_l2(rv, rv32, nvl), h3_rel_l2(ra, ra32, nal), h3_rel_l2(r.video, rv32, nvl),
               h3_rel_l2(r.audio, ra32, nal));
        loop_result_free(&r);
    } else if (m) {
        CHECK(0, "bf16 loop: %s", e.msg);
    }
    dit_free(m);
    layout_free(L);
    st_close(fi);
    st_close(fo);
    st_close(f32);
}

/* A tiny loop runs; a layout whose rows disagree with its target geometry is refused. */
static void test_errors(h3_backend *be) {
    h3_err e = {{0}};
    dit_model *m = dit_load(be, "tests/fixtures/tiny/transformer", 0, &e);
    CHECK(m != NULL, "dit_load: %s", e.msg);
    if (!m) return;
    const int64_t tags[2] = {1, 1};
    layout *L = layout_new_t2va(tags, 2, 2, 2, 2, 3, NULL, 0, &e);
    sched sv, sa;
    sched_init(&sv, 3, 12.0, &e);
    sched_init(&sa, 3, 3.0, &e);
    float text[2 * 16] = {0}, v[2 * 96] = {0}, a[6 * 32] = {0};
    denoise_args args = {.L = L, .text = text, .video_sched = &sv, .audio_sched = &sa, .video_rows = v, .audio_rows = a};
    CHECK(denoise_run(m, &args, &e) == 0, "tiny loop: %s", e.msg);
    L->num_latent_frames = 3; /* the rows no longer match the geometry */
    CHECK(denoise_run(m, &args, &e) == -1 && strstr(e.msg, "geometry"), "geometry mismatch: %s", e.msg);
    layout_free(L);
    sched_free(&sv);
    sched_free(&sa);
    dit_free(m);
}

/* --reuse (docs/model/features.md 5.2): the fresh-pass counts docs/model/features.md 5.2 gives, the extrapolation rule, and the loop
 * on the tiny DiT against a loop written here from the text of docs/model/features.md 5.2 (fresh passes evaluate the model, the
 * others extrapolate each modality's velocity on its own sigma grid). */
static void test_reuse(h3_backend *be) {
    CHECK(denoise_fresh_passes(20, 1) == 20 && denoise_fresh_passes(20, 2) == 11 && denoise_fresh_passes(20, 3) == 8 &&
              denoise_fresh_passes(50, 3) == 18,
          "fresh passes: 20/1 %d, 20/2 %d, 20/3 %d, 50/3 %d (spec: 20, 11, 8, 18)", denoise_fresh_passes(20, 1),
          denoise_fresh_passes(20, 2), denoise_fresh_passes(20, 3), denoise_fresh_passes(50, 3));
    CHECK(denoise_pass_is_fresh(0, 6, 2) && !denoise_pass_is_fresh(1, 6, 2) && denoise_pass_is_fresh(4, 6, 2) &&
              denoise_pass_is_fresh(5, 6, 2) && !denoise_pass_is_fresh(3, 6, 2),
          "fresh pattern of 6 passes with reuse 2 is 0, 2, 4, 5");
    float vl[2] = {1.0f, -2.0f}, vp[2] = {0.5f, 0.0f}, v[2];
    denoise_extrapolate(v, vl, vp, 2, 0.4f, 0.6f, 0.8f); /* r = (0.4-0.6)/(0.6-0.8) = 1 */
    CHECK(fabsf(v[0] - 1.5f) < 1e-6f && fabsf(v[1] + 4.0f) < 1e-6f, "extrapolation r = 1: %g %g", v[0], v[1]);
    denoise_extrapolate(v, vl, vp, 2, 0.0f, 0.9f, 0.95f); /* r = 18, clamped to 2 */
    CHECK(fabsf(v[0] - 2.0f) < 1e-6f && fabsf(v[1] + 6.0f) < 1e-6f, "extrapolation clamped to 2: %g %g", v[0], v[1]);

    h3_err e = {{0}};
    dit_model *m = dit_load(be, "tests/fixtures/tiny/transformer", 0, &e);
    CHECK(m != NULL, "dit_load: %s", e.msg);
    if (!m) return;
    const int64_t tags[3] = {1, 1, 1};
    layout *L = layout_new_t2va(tags, 3, 2, 4, 4, 5, NULL, 0, &e);
    CHECK(L != NULL, "layout: %s", e.msg);
    const int steps = 6, R = 2;
    sched sv, sa;
    sched_init(&sv, steps + 1, SCHED_VIDEO_SHIFT, &e);
    sched_init(&sa, steps + 1, SCHED_AUDIO_SHIFT, &e);
    const int64_t Q = 96, nv = L->Nv * Q, na = L->Na * 32;
    float *text = malloc(sizeof(float) * 3 * 16), *v0 = malloc(sizeof(float) * (size_t)nv);
    float *a0 = malloc(sizeof(float) * (size_t)na);
    uint64_t st = 7;
    fill_uniform(v0, nv, &st);
    fill_uniform(a0, na, &st);
    for (int i = 0; i < 3 * 16; i++) text[i] = 0.1f * (float)(i % 7) - 0.3f;
    /* the loop under test */
    float *xv = malloc(sizeof(float) * (size_t)nv), *xa = malloc(sizeof(float) * (size_t)na);
    memcpy(xv, v0, sizeof(float) * (size_t)nv);
    memcpy(xa, a0, sizeof(float) * (size_t)na);
    int evals = -1, passes = 0;
    denoise_args args = {.L = L, .text = text, .video_sched = &sv, .audio_sched = &sa, .video_rows = xv,
                         .audio_rows = xa, .reuse = R, .evaluations = &evals, .progress = count_steps,
                         .progress_user = &passes};
    CHECK(denoise_run(m, &args, &e) == 0, "reuse loop: %s", e.msg);
    CHECK(evals == 4 && passes == steps, "reuse 2 over 6 passes: %d evaluations (want 4), %d passes", evals, passes);
    /* the loop from the text of docs/model/features.md 5.2 */
    float *yv = malloc(sizeof(float) * (size_t)nv), *ya = malloc(sizeof(float) * (size_t)na);
    float *fv[2] = {malloc(sizeof(float) * (size_t)nv), malloc(sizeof(float) * (size_t)nv)};
    float *fa[2] = {malloc(sizeof(float) * (size_t)na), malloc(sizeof(float) * (size_t)na)};
    float *uv = malloc(sizeof(float) * (size_t)nv), *ua = malloc(sizeof(float) * (size_t)na);
    int64_t *tidx = malloc(sizeof(int64_t) * (size_t)L->S);
    memcpy(yv, v0, sizeof(float) * (size_t)nv);
    memcpy(ya, a0, sizeof(float) * (size_t)na);
    int nfresh = 0, fresh_at[8];
    for (int i = 0; i < steps && e.msg[0] == 0; i++) {
        if (i == 0 || i % R == 0 || i == steps - 1) {
            float ts[LAYOUT_MAX_TIMESTEPS];
            int K;
            layout_row_timesteps(L, sv.timesteps[i], sa.timesteps[i], ts, &K, tidx);
            dit_inputs in = {.video = yv, .Nv = L->Nv, .audio = ya, .Na = L->Na, .text = text, .Nt = L->T,
                             .timestep = ts, .K = K, .S = L->S, .timestep_indices = tidx,
                             .token_tags = L->token_tags, .position_ids = L->position_ids,
                             .video_indices = L->video_indices, .audio_indices = L->audio_indices,
                             .text_indices = L->text_indices};
            int slot = nfresh % 2;
            CHECK(dit_forward(m, &in, fv[slot], fa[slot], &e) == 0, "forward: %s", e.msg);
            fresh_at[nfresh++] = i;
            memcpy(uv, fv[slot], sizeof(float) * (size_t)nv);
            memcpy(ua, fa[slot], sizeof(float) * (size_t)na);
        } else {
            int last = (nfresh - 1) % 2, prev = nfresh % 2, il = fresh_at[nfresh - 1];
            int ip = nfresh >= 2 ? fresh_at[nfresh - 2] : il;
            for (int mod = 0; mod < 2; mod++) {
                const sched *sc = mod ? &sa : &sv;
                float **f = mod ? fa : fv, *u = mod ? ua : uv;
                int64_t n = mod ? na : nv;
                float r = 0.0f;
                if (nfresh >= 2) {
                    r = (sc->sigmas[i] - sc->sigmas[il]) / (sc->sigmas[il] - sc->sigmas[ip]);
                    r = r < -2.0f ? -2.0f : r > 2.0f ? 2.0f : r;
                }
                if (nfresh < 2) memcpy(u, f[last], sizeof(float) * (size_t)n); /* one fresh velocity: reused */
                else
                    for (int64_t j = 0; j < n; j++) u[j] = f[last][j] + r * (f[last][j] - f[prev][j]);
            }
        }
        sched_step(&sv, i, uv, yv, nv); /* t2va: no condition rows */
        sched_step(&sa, i, ua, ya, na);
    }
    double dv = max_abs(xv, yv, nv), da = max_abs(xa, ya, na);
    printf("  %-48s max_abs video %.3e audio %.3e\n", "reuse 2 loop vs the spec's loop", dv, da);
    CHECK(dv == 0.0 && da == 0.0, "reuse loop differs from the spec's loop: %g %g", dv, da);
    /* reuse 1 and 0 are the plain loop */
    memcpy(xv, v0, sizeof(float) * (size_t)nv);
    memcpy(xa, a0, sizeof(float) * (size_t)na);
    args.reuse = 1;
    CHECK(denoise_run(m, &args, &e) == 0 && evals == steps, "reuse 1: %d evaluations: %s", evals, e.msg);
    free(text), free(v0), free(a0), free(xv), free(xa), free(yv), free(ya), free(uv), free(ua), free(tidx);
    free(fv[0]), free(fv[1]), free(fa[0]), free(fa[1]);
    layout_free(L);
    sched_free(&sv);
    sched_free(&sa);
    dit_free(m);
}

/* --core-reuse (docs/model/features.md 5.4): the fresh pattern, and a REUSE forward on the same inputs as the STORE
 * forward reproduces it (input + (output - input) = output up to one rounding), in fp32 and bf16. */
static void test_core_reuse(h3_backend *be) {
    int pat = 0;
    for (int f = 0; f < 10; f++) pat |= denoise_core_is_fresh(f, f == 9, 4) << f;
    CHECK(pat == ((1 << 0) | (1 << 4) | (1 << 8) | (1 << 9)), "core-reuse 4 over 10 passes: fresh mask %#x (want 0, 4, 8, 9)",
          pat);
    for (int bf16 = 0; bf16 < 2; bf16++) {
        h3_err e = {{0}};
        dit_model *m = dit_load(be, "tests/fixtures/tiny/transformer", bf16, &e);
        CHECK(m != NULL, "dit_load: %s", e.msg);
        if (!m) return;
        const int64_t tags[3] = {1, 1, 1};
        layout *L = layout_new_t2va(tags, 3, 2, 4, 4, 5, NULL, 0, &e);
        int64_t *tidx = malloc(sizeof(int64_t) * (size_t)L->S);
        float ts[LAYOUT_MAX_TIMESTEPS];
        int K;
        layout_row_timesteps(L, 0.6f, 0.4f, ts, &K, tidx);
        const int64_t nv = L->Nv * 96, na = L->Na * 32;
        float *v = malloc(sizeof(float) * (size_t)nv), *a = malloc(sizeof(float) * (size_t)na), text[3 * 16];
        for (int64_t i = 0; i < nv; i++) v[i] = sinf(0.3f * (float)i);
        for (int64_t i = 0; i < na; i++) a[i] = cosf(0.7f * (float)i);
        for (int i = 0; i < 3 * 16; i++) text[i] = 0.05f * (float)(i % 9);
        dit_inputs in = {.video = v, .Nv = L->Nv, .audio = a, .Na = L->Na, .text = text, .Nt = L->T, .timestep = ts,
                         .K = K, .S = L->S, .timestep_indices = tidx, .token_tags = L->token_tags,
                         .position_ids = L->position_ids, .video_indices = L->video_indices,
                         .audio_indices = L->audio_indices, .text_indices = L->text_indices,
                         .core = DIT_CORE_REUSE};
        float *ov = malloc(sizeof(float) * (size_t)nv), *oa = malloc(sizeof(float) * (size_t)na);
        float *rv = malloc(sizeof(float) * (size_t)nv), *ra = malloc(sizeof(float) * (size_t)na);
        CHECK(dit_forward(m, &in, rv, ra, &e) == -1 && strstr(e.msg, "no stored core residual"), "reuse first: %s",
              e.msg);
        in.core = DIT_CORE_RUN;
        CHECK(dit_forward(m, &in, rv, ra, &e) == 0, "run: %s", e.msg);
        in.core = DIT_CORE_RUN_STORE;
        CHECK(dit_forward(m, &in, ov, oa, &e) == 0, "store: %s", e.msg);
        CHECK(!memcmp(ov, rv, sizeof(float) * (size_t)nv), "storing the residual changed the forward");
        in.core = DIT_CORE_REUSE;
        CHECK(dit_forward(m, &in, ov, oa, &e) == 0, "reuse: %s", e.msg);
        double tol = bf16 ? 3e-2 : 1e-6, ev = h3_rel_l2(ov, rv, (size_t)nv), ea = h3_rel_l2(oa, ra, (size_t)na);
        printf("  core reuse on the stored forward's inputs (%s): video %.3e audio %.3e\n", bf16 ? "bf16" : "fp32", ev, ea);
        CHECK(ev <= tol && ea <= tol, "core reuse %s: %g %g > %g", bf16 ? "bf16" : "fp32", ev, ea, tol);
        free(tidx), free(v), free(a), free(ov), free(oa), free(rv), free(ra);
        layout_free(L);
        dit_free(m);
    }
}

/* `h3 probe denoise` on the three goldens: final latents within rel L2 1e-4. */
static void test_probe_op(void) {
    static const char *tasks[][2] = {{"denoise_t2va", "--model tests/fixtures/tiny"},
                                     {"denoise_fl2va", "--model tests/fixtures/tiny --component transformer"},
                                     {"denoise_ref2va", "--model tests/fixtures/tiny --component transformer_ref"}};
    for (int k = 0; k < 3; k++) {
        int total;
        double worst;
        int same = fx_probe_matches("denoise", tasks[k][1], tasks[k][0], 1e-4, &total, &worst);
        char label[96];
        snprintf(label, sizeof label, "h3 probe denoise %s (worst output)", tasks[k][0] + 8);
        CHECK_CLOSE(label, same == 2 && total == 2 ? worst : 1.0, 1e-4);
    }
}

/* --token-reduction's block schedule (docs/model/features.md 5.5): the defaults for 50 blocks, the environment overrides,
 * and one-line errors for bad values. */
static void test_token_reduction_schedule(void) {
    h3_err e = {{0}};
    unsetenv("H3_TOKEN_REDUCTION_BLOCKS"), unsetenv("H3_TOKEN_REDUCTION_EARLY"), unsetenv("H3_TOKEN_REDUCTION_SCALE");
    denoise_args a;
    memset(&a, 0, sizeof a);
    CHECK(denoise_token_reduction(&a, 50, &e) == 0, "%s", e.msg);
    CHECK(a.reduce_begin == 4 && a.reduce_end == 30 && a.reduce_early_passes == 10 && a.reduce_early_end == 40 &&
              a.reduce_scale == 1.0f,
          "defaults %d..%d, early %d:%d, scale %g", a.reduce_begin, a.reduce_end, a.reduce_early_passes,
          a.reduce_early_end, (double)a.reduce_scale);
    CHECK(denoise_token_reduction(&a, 2, &e) != 0 && strstr(e.msg, "H3_TOKEN_REDUCTION_BLOCKS"),
          "defaults accepted on a 2-block model");
    setenv("H3_TOKEN_REDUCTION_BLOCKS", "6:42", 1); /* END >= 40: no early schedule */
    CHECK(denoise_token_reduction(&a, 50, &e) == 0 && a.reduce_begin == 6 && a.reduce_end == 42 &&
              a.reduce_early_passes == 0,
          "6:42 -> %d..%d early %d", a.reduce_begin, a.reduce_end, a.reduce_early_passes);
    setenv("H3_TOKEN_REDUCTION_BLOCKS", "4:30", 1);
    setenv("H3_TOKEN_REDUCTION_EARLY", "5:45", 1);
    setenv("H3_TOKEN_REDUCTION_SCALE", "0.5", 1);
    CHECK(denoise_token_reduction(&a, 50, &e) == 0 && a.reduce_early_passes == 5 && a.reduce_early_end == 45 &&
              a.reduce_scale == 0.5f,
          "early 5:45 scale 0.5 -> %d:%d %g", a.reduce_early_passes, a.reduce_early_end, (double)a.reduce_scale);
    setenv("H3_TOKEN_REDUCTION_EARLY", "0", 1);
    CHECK(denoise_token_reduction(&a, 50, &e) == 0 && a.reduce_early_passes == 0, "EARLY=0 kept an early schedule");
    const char *bad[][2] = {{"H3_TOKEN_REDUCTION_BLOCKS", "30:4"}, {"H3_TOKEN_REDUCTION_BLOCKS", "4:51"},
                            {"H3_TOKEN_REDUCTION_BLOCKS", "x"},    {"H3_TOKEN_REDUCTION_EARLY", "10:20"},
                            {"H3_TOKEN_REDUCTION_SCALE", "3"},     {"H3_TOKEN_REDUCTION_SCALE", "nan"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        unsetenv("H3_TOKEN_REDUCTION_BLOCKS"), unsetenv("H3_TOKEN_REDUCTION_EARLY"), unsetenv("H3_TOKEN_REDUCTION_SCALE");
        setenv(bad[i][0], bad[i][1], 1);
        int rc = denoise_token_reduction(&a, 50, &e);
        CHECK(rc != 0 && strstr(e.msg, bad[i][0]) && !strchr(e.msg, '\n'), "%s=%s accepted (%s)", bad[i][0], bad[i][1],
              rc ? e.msg : "");
    }
    unsetenv("H3_TOKEN_REDUCTION_BLOCKS"), unsetenv("H3_TOKEN_REDUCTION_EARLY"), unsetenv("H3_TOKEN_REDUCTION_SCALE");
}

/* docs/model/features.md 5.7 (the 256-square RoPE adaptation): rope_spatial_scale 0.5 gives the loop of a layout whose rows'
 * h and w position ids are halved by hand (the same bits), and differs from the released coordinates; the t
 * coordinate and everything else are untouched. On a t2va layout of the tiny DiT, random rows, 3 passes. */
static void test_rope_spatial_scale(h3_backend *be) {
    h3_err e = {{0}};
    dit_model *m = dit_load(be, "tests/fixtures/tiny/transformer", 0, &e);
    CHECK(m != NULL, "dit_load: %s", e.msg);
    if (!m) return;
    const int64_t tags[3] = {1, 1, 1};
    layout *L = layout_new_t2va(tags, 3, 2, 4, 4, 3, NULL, 0, &e);
    layout *H = layout_new_t2va(tags, 3, 2, 4, 4, 3, NULL, 0, &e);
    CHECK(L && H, "layouts: %s", e.msg);
    if (!L || !H) {
        layout_free(L), layout_free(H), dit_free(m);
        return;
    }
    for (int64_t r = 0; r < H->S; r++) H->position_ids[3 * r + 1] *= 0.5, H->position_ids[3 * r + 2] *= 0.5;
    const int64_t nv = L->Nv * 96, na = L->Na * 32, nt = 3 * 16;
    float *v0 = malloc(sizeof(float) * (size_t)nv), *a0 = malloc(sizeof(float) * (size_t)na), text[3 * 16];
    uint64_t st = 12345;
    fill_uniform(v0, nv, &st);
    fill_uniform(a0, na, &st);
    fill_uniform(text, nt, &st);
    float *rows[3][2];
    for (int k = 0; k < 3; k++) { /* 0: scale 0.5; 1: halved by hand; 2: released */
        sched sv, sa;
        sched_init(&sv, 3, SCHED_VIDEO_SHIFT, &e), sched_init(&sa, 3, SCHED_AUDIO_SHIFT, &e);
        rows[k][0] = malloc(sizeof(float) * (size_t)nv), rows[k][1] = malloc(sizeof(float) * (size_t)na);
        memcpy(rows[k][0], v0, sizeof(float) * (size_t)nv), memcpy(rows[k][1], a0, sizeof(float) * (size_t)na);
        denoise_args a = {.L = k == 1 ? H : L, .text = text, .video_sched = &sv, .audio_sched = &sa,
                          .video_rows = rows[k][0], .audio_rows = rows[k][1], .rope_spatial_scale = k == 0 ? 0.5f : 0.0f};
        CHECK(denoise_run(m, &a, &e) == 0, "rope scale loop %d: %s", k, e.msg);
        sched_free(&sv), sched_free(&sa);
    }
    CHECK(!memcmp(rows[0][0], rows[1][0], sizeof(float) * (size_t)nv) &&
              !memcmp(rows[0][1], rows[1][1], sizeof(float) * (size_t)na),
          "rope_spatial_scale 0.5 equals the loop on halved h/w position ids");
    CHECK(memcmp(rows[0][0], rows[2][0], sizeof(float) * (size_t)nv) != 0,
          "rope_spatial_scale 0.5 changes the video rows (max diff %.3g)", max_abs(rows[0][0], rows[2][0], nv));
    for (int64_t r = 0; r < L->S; r++) /* the caller's layout is not modified */
        if (L->position_ids[3 * r + 1] != H->position_ids[3 * r + 1] * 2.0) {
            CHECK(0, "the layout's position ids were changed at row %lld", (long long)r);
            break;
        }
    for (int k = 0; k < 3; k++) free(rows[k][0]), free(rows[k][1]);
    free(v0), free(a0);
    layout_free(L), layout_free(H);
    dit_free(m);
}

int main(void) {
    test_probe_op();
    test_token_reduction_schedule();
    h3_err e = {{0}};
    h3_backend *be = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    CHECK(be != NULL, "backend: %s", e.msg);
    if (be) {
        test_task(be, "t2va");
        test_task(be, "fl2va");
        test_task(be, "ref2va");
        test_bf16(be);
        test_errors(be);
        test_reuse(be);
        test_core_reuse(be);
        test_rope_spatial_scale(be);
    }
    h3_backend_free(be);
    TEST_END();
}
