/* DiT parity (docs/model/dit.md, golden files from tools/reference/gen_dit.py): the C forward on the
 * golden inputs vs diffusers' MiniMaxH3Transformer3DModel, fp32 (rel L2 <= 1e-5) and bf16 mixed
 * (<= 3e-2), both checkpoint layouts (identical outputs), AdaLN precompute/release, input errors,
 * and the fused DiT ops against the unfused op sequence. Run from the repo root. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ops.h"
#include "io/safetensors.h"
#include "model/dit.h"
#include "pipeline/layout.h"
#include "test.h"
#include "test_data.h"

#define FIX "tests/fixtures/"

typedef struct golden {
    st_set    *in_set;
    h3_tensor *t[10];
    dit_tensors dt;
} golden;

static const char *in_names[10] = {"hidden_states", "audio_hidden_states", "encoder_hidden_states", "timestep",
                                   "timestep_indices", "token_tags", "position_ids", "video_indices",
                                   "audio_indices", "text_indices"};

static void golden_free(golden *g) {
    for (int i = 0; i < 10; i++) h3_tensor_free(g->t[i]);
    st_set_free(g->in_set);
}

/* Inputs converted to f32 / i64 / f64 as the probe does. */
static int golden_load(const char *path, golden *g, h3_err *e) {
    memset(g, 0, sizeof *g);
    if (!(g->in_set = st_set_open(path, e))) return -1;
    for (int i = 0; i < 10; i++) {
        h3_tensor v;
        if (st_set_get(g->in_set, in_names[i], &v, e) != 0) return -1;
        if (v.dtype == H3_F32 || v.dtype == H3_I64 || v.dtype == H3_F64) {
            g->t[i] = h3_tensor_new(v.dtype, v.ndim, v.shape, e);
            if (!g->t[i]) return -1;
            memcpy(g->t[i]->data, v.data, h3_tensor_nbytes(&v));
        } else {
            g->t[i] = h3_tensor_to_f32(&v, e);
        }
    }
    const h3_tensor **d = (const h3_tensor **)&g->dt;
    for (int i = 0; i < 10; i++) d[i] = g->t[i];
    return 0;
}

/* golden_load for a test: on failure one failed check with the reason, g freed, returns -1 */
static int golden_open(const char *path, golden *g) {
    h3_err e = {{0}};
    if (golden_load(path, g, &e) == 0) return 0;
    CHECK(0, "%s", e.msg);
    golden_free(g);
    return -1;
}

static h3_tensor *load_out(const char *path, const char *name) {
    h3_err e;
    st_set *s = st_set_open(path, &e);
    if (!s) {
        fprintf(stderr, "%s\n", e.msg);
        return NULL;
    }
    h3_tensor v, *t = NULL;
    if (st_set_get(s, name, &v, &e) == 0) t = h3_tensor_to_f32(&v, &e);
    st_set_free(s);
    return t;
}

typedef struct run_out {
    float *video, *audio;
    int64_t nv, na;
} run_out;

static int run_forward(dit_model *m, golden *g, run_out *o, h3_err *e) {
    dit_inputs in;
    if (dit_inputs_from_tensors(dit_get_config(m), &g->dt, 0, &in, e) != 0) return -1;
    const dit_config *c = dit_get_config(m);
    o->nv = in.Nv * c->in_channels * 4;
    o->na = in.Na * c->audio_in_channels;
    o->video = malloc((size_t)o->nv * sizeof(float));
    o->audio = malloc((size_t)o->na * sizeof(float));
    return dit_forward(m, &in, o->video, o->audio, e);
}

static void run_out_free(run_out *o) {
    free(o->video);
    free(o->audio);
}

static void report(const char *label, const float *a, const float *ref, int64_t n, double tol) {
    char name[160];
    snprintf(name, sizeof name, "%s (max_abs %.2e)", label, h3_max_abs(a, ref, (size_t)n));
    CHECK_CLOSE(name, h3_rel_l2(a, ref, (size_t)n), tol);
}

/* One golden case: both layouts in fp32 and bf16. */
static void test_case(h3_backend *be, const char *cas, const char *diff_dir, const char *orig_dir) {
    char path[512];
    h3_err e = {{0}};
    golden g;
    snprintf(path, sizeof path, FIX "golden/dit/%s.in.safetensors", cas);
    if (golden_open(path, &g) != 0) return;
    snprintf(path, sizeof path, FIX "golden/dit/%s.out.safetensors", cas);
    h3_tensor *ref_v = load_out(path, "sample"), *ref_a = load_out(path, "audio_sample");
    snprintf(path, sizeof path, FIX "golden/dit/%s.bf16.out.safetensors", cas);
    h3_tensor *ref16_v = load_out(path, "sample"), *ref16_a = load_out(path, "audio_sample");
    CHECK(ref_v && ref_a && ref16_v && ref16_a, "%s: golden outputs missing", cas);
    if (!ref_v || !ref_a || !ref16_v || !ref16_a) goto out;
    printf("%s (S = %lld, K = %lld):\n", cas, (long long)g.t[6]->shape[0], (long long)g.t[3]->shape[0]);
    run_out o32[2] = {{0}}, o16[2] = {{0}};
    const char *dirs[2] = {diff_dir, orig_dir};
    for (int layout = 0; layout < 2; layout++) {
        for (int bf16 = 0; bf16 < 2; bf16++) {
            dit_model *m = dit_load(be, dirs[layout], bf16, &e);
            CHECK(m != NULL, "%s", e.msg);
            if (!m) continue;
            run_out *o = bf16 ? &o16[layout] : &o32[layout];
            int rc = run_forward(m, &g, o, &e);
            CHECK(rc == 0, "%s", e.msg);
            CHECK(o->nv == h3_tensor_numel(ref_v) && o->na == h3_tensor_numel(ref_a), "%s: output sizes", cas);
            if (rc == 0 && o->nv == h3_tensor_numel(ref_v)) {
                char label[128];
                const char *ln = layout ? "original" : "diffusers";
                snprintf(label, sizeof label, "%s %s %s video", cas, ln, bf16 ? "bf16" : "fp32");
                report(label, o->video, bf16 ? ref16_v->data : ref_v->data, o->nv, bf16 ? 3e-2 : 1e-5);
                snprintf(label, sizeof label, "%s %s %s audio", cas, ln, bf16 ? "bf16" : "fp32");
                report(label, o->audio, bf16 ? ref16_a->data : ref_a->data, o->na, bf16 ? 3e-2 : 1e-5);
            }
            dit_free(m);
        }
    }
    for (int bf16 = 0; bf16 < 2; bf16++) {
        run_out *a = bf16 ? &o16[0] : &o32[0], *b = bf16 ? &o16[1] : &o32[1];
        if (a->video && b->video && a->audio && b->audio)
            CHECK(!memcmp(a->video, b->video, (size_t)a->nv * 4) && !memcmp(a->audio, b->audio, (size_t)a->na * 4),
                  "%s %s: diffusers and original layouts give different outputs", cas, bf16 ? "bf16" : "fp32");
    }
    if (o16[0].video && o32[0].video) {
        /* each side's own bf16 error against its fp32 result: they should be of the same size */
        printf("  %s bf16-vs-fp32: C video %.3e audio %.3e | reference video %.3e audio %.3e\n", cas,
               h3_rel_l2(o16[0].video, o32[0].video, (size_t)o32[0].nv),
               h3_rel_l2(o16[0].audio, o32[0].audio, (size_t)o32[0].na),
               h3_rel_l2(ref16_v->data, ref_v->data, (size_t)o32[0].nv),
               h3_rel_l2(ref16_a->data, ref_a->data, (size_t)o32[0].na));
        printf("  %s C bf16 vs reference bf16, relative to the reference's own bf16 error: video %.2f\n", cas,
               h3_rel_l2(o16[0].video, ref16_v->data, (size_t)o32[0].nv) /
                   h3_rel_l2(ref16_v->data, ref_v->data, (size_t)o32[0].nv));
    }
    for (int i = 0; i < 2; i++) run_out_free(&o32[i]), run_out_free(&o16[i]);
out:
    h3_tensor_free(ref_v), h3_tensor_free(ref_a), h3_tensor_free(ref16_v), h3_tensor_free(ref16_a);
    golden_free(&g);
}

/* --quant fp8 (docs/fp8.md) on the tiny golden case: both checkpoint layouts give the same bits (per-row
 * quantization does not see the row order), the error against the fp32 reference is larger than bf16's but
 * small, and the fp32 mode refuses it. */
static void test_fp8(h3_backend *be, const char *cas, const char *diff_dir, const char *orig_dir) {
    char path[512];
    h3_err e = {{0}};
    golden g;
    snprintf(path, sizeof path, FIX "golden/dit/%s.in.safetensors", cas);
    if (golden_open(path, &g) != 0) return;
    snprintf(path, sizeof path, FIX "golden/dit/%s.out.safetensors", cas);
    h3_tensor *ref_v = load_out(path, "sample"), *ref_a = load_out(path, "audio_sample");
    run_out o8[2] = {{0}}, o16 = {0};
    const char *dirs[2] = {diff_dir, orig_dir};
    int ok = ref_v && ref_a;
    CHECK(ok, "%s: golden outputs missing", cas);
    for (int layout = 0; ok && layout < 2; layout++) {
        dit_model *m = dit_load(be, dirs[layout], 1, &e);
        CHECK(m != NULL, "%s", e.msg);
        if (!m) continue;
        if (layout == 0) CHECK(run_forward(m, &g, &o16, &e) == 0, "bf16 forward: %s", e.msg);
        CHECK(dit_quantize_fp8(m, &e) == 0, "dit_quantize_fp8: %s", e.msg);
        CHECK(dit_quantize_fp8(m, &e) == 0, "a second dit_quantize_fp8 is a no-op: %s", e.msg);
        CHECK(run_forward(m, &g, &o8[layout], &e) == 0, "fp8 forward: %s", e.msg);
        dit_free(m);
    }
    if (o8[0].video && o8[1].video && o16.video) {
        CHECK(!memcmp(o8[0].video, o8[1].video, (size_t)o8[0].nv * 4) && !memcmp(o8[0].audio, o8[1].audio, (size_t)o8[0].na * 4),
              "%s fp8: diffusers and original layouts give different outputs", cas);
        double e8v = h3_rel_l2(o8[0].video, ref_v->data, (size_t)o8[0].nv), e8a = h3_rel_l2(o8[0].audio, ref_a->data, (size_t)o8[0].na);
        double e16v = h3_rel_l2(o16.video, ref_v->data, (size_t)o16.nv), e16a = h3_rel_l2(o16.audio, ref_a->data, (size_t)o16.na);
        printf("  %s fp8 vs the fp32 reference: video %.3e audio %.3e (bf16: %.3e / %.3e)\n", cas, e8v, e8a, e16v, e16a);
        CHECK(e8v > e16v && e8a > e16a, "%s: fp8 is not less precise than bf16 (%.3e / %.3e vs %.3e / %.3e): is it used?",
              cas, e8v, e8a, e16v, e16a);
        CHECK_CLOSE("fp8 video vs fp32 reference", e8v, 1e-1);
        CHECK_CLOSE("fp8 audio vs fp32 reference", e8a, 1e-1);
    }
    dit_model *m32 = dit_load(be, diff_dir, 0, &e);
    CHECK(m32 && dit_quantize_fp8(m32, &e) != 0 && strstr(e.msg, "bf16"), "fp32 mode accepted --quant fp8");
    dit_free(m32);
    run_out_free(&o8[0]), run_out_free(&o8[1]), run_out_free(&o16);
    h3_tensor_free(ref_v), h3_tensor_free(ref_a);
    golden_free(&g);
}

/* --token-reduction (docs/model/features.md 5.5) on a tiny golden case: an empty block range is the plain forward bit for
 * bit; a range changes the output (the blocks saw the pooled rows) by a bounded amount, the same in both checkpoint
 * layouts up to bf16 roundings; a range through the last block restores after the loop; the fp32 mode and a target video that is not
 * the packed tail are refused. Grid: 7 frames of 2 x 3 tokens (an odd width: a singleton per line). */
static void test_token_reduction(h3_backend *be, const char *cas, const char *diff_dir, const char *orig_dir,
                                 int64_t F, int64_t gh, int64_t gw) {
    char path[512];
    h3_err e = {{0}};
    golden g;
    snprintf(path, sizeof path, FIX "golden/dit/%s.in.safetensors", cas);
    if (golden_open(path, &g) != 0) return;
    const char *dirs[2] = {diff_dir, orig_dir};
    run_out plain = {0}, same = {0}, part[2] = {{0}}, tail = {0};
    for (int layout = 0; layout < 2; layout++) {
        dit_model *m = dit_load(be, dirs[layout], 1, &e);
        CHECK(m != NULL, "%s", e.msg);
        if (!m) continue;
        dit_inputs in;
        CHECK(dit_inputs_from_tensors(dit_get_config(m), &g.dt, 0, &in, &e) == 0, "%s", e.msg);
        const dit_config *c = dit_get_config(m);
        in.reduce_frames = F, in.reduce_h = gh, in.reduce_w = gw, in.reduce_scale = 1.0f;
        run_out *targets[4] = {&plain, &same, &part[layout], &tail};
        int ranges[4][2] = {{0, 0}, {1, 1}, {0, 1}, {1, c->num_layers}};
        for (int k = layout ? 2 : 0; k < (layout ? 3 : 4); k++) {
            run_out *o = targets[k];
            o->nv = in.Nv * c->in_channels * 4, o->na = in.Na * c->audio_in_channels;
            o->video = malloc((size_t)o->nv * sizeof(float)), o->audio = malloc((size_t)o->na * sizeof(float));
            in.reduce_begin = ranges[k][0], in.reduce_end = ranges[k][1];
            CHECK(dit_forward(m, &in, o->video, o->audio, &e) == 0, "%s reduce %d..%d: %s", cas, ranges[k][0],
                  ranges[k][1], e.msg);
        }
        if (layout == 0) { /* the target video must be the packed tail */
            dit_inputs bad = in;
            bad.reduce_begin = 0, bad.reduce_end = 1, bad.reduce_h = gh + 1;
            float *v = malloc((size_t)plain.nv * sizeof(float)), *a = malloc((size_t)plain.na * sizeof(float));
            CHECK(dit_forward(m, &bad, v, a, &e) != 0 && strstr(e.msg, "token-reduction"), "%s: a wrong grid was accepted", cas);
            free(v), free(a);
        }
        dit_free(m);
    }
    if (plain.video && same.video && part[0].video && part[1].video && tail.video) {
        CHECK(!memcmp(plain.video, same.video, (size_t)plain.nv * 4) && !memcmp(plain.audio, same.audio, (size_t)plain.na * 4),
              "%s: an empty reduction range changed the output", cas);
        /* the layouts' GEMMs differ in shape (separate q/k/v vs fused), and at the reduced row count OpenBLAS may
         * sum in another order: the same up to bf16 roundings */
        double lv = h3_rel_l2(part[1].video, part[0].video, (size_t)plain.nv);
        double la = h3_rel_l2(part[1].audio, part[0].audio, (size_t)plain.na);
        printf("  %s token reduction, original vs diffusers layout: video %.3e audio %.3e\n", cas, lv, la);
        CHECK(lv < 1e-2 && la < 1e-2, "%s: token reduction differs between the checkpoint layouts (%.3e / %.3e)", cas, lv, la);
        double dv = h3_rel_l2(part[0].video, plain.video, (size_t)plain.nv);
        double da = h3_rel_l2(part[0].audio, plain.audio, (size_t)plain.na);
        double dt = h3_rel_l2(tail.video, plain.video, (size_t)plain.nv);
        printf("  %s token reduction vs the plain forward: blocks 0..0 video %.3e audio %.3e; blocks 1..end video %.3e\n",
               cas, dv, da, dt);
        CHECK(dv > 0 && dt > 0, "%s: the reduction did not change the video output", cas);
        CHECK(dv < 0.5 && da < 0.5 && dt < 0.5, "%s: the reduction moved the output by more than half its norm", cas);
    }
    dit_model *m32 = dit_load(be, diff_dir, 0, &e);
    if (m32) {
        dit_inputs in;
        CHECK(dit_inputs_from_tensors(dit_get_config(m32), &g.dt, 0, &in, &e) == 0, "%s", e.msg);
        in.reduce_frames = F, in.reduce_h = gh, in.reduce_w = gw, in.reduce_begin = 0, in.reduce_end = 1;
        float *v = malloc((size_t)plain.nv * sizeof(float)), *a = malloc((size_t)plain.na * sizeof(float));
        CHECK(dit_forward(m32, &in, v, a, &e) != 0 && strstr(e.msg, "bf16"), "fp32 mode accepted token reduction");
        free(v), free(a);
        dit_free(m32);
    }
    run_out_free(&plain), run_out_free(&same), run_out_free(&part[0]), run_out_free(&part[1]), run_out_free(&tail);
    golden_free(&g);
}

/* AdaLN precompute then release: identical outputs; unknown timesteps then fail cleanly. */
static void test_adaln_cache(h3_backend *be) {
    h3_err e = {{0}};
    golden g;
    if (golden_open(FIX "golden/dit/fl2va.in.safetensors", &g) != 0) return;
    dit_model *m = dit_load(be, FIX "tiny/transformer", 1, &e);
    CHECK(m != NULL, "%s", e.msg);
    if (!m) {
        golden_free(&g);
        return;
    }
    run_out plain = {0}, cached = {0}, bad = {0};
    CHECK(run_forward(m, &g, &plain, &e) == 0, "%s", e.msg);
    const float *ts = g.t[3]->data;
    int K = (int)g.t[3]->shape[0];
    float extra[8] = {1.0f, 0.5f};
    memcpy(extra + 2, ts, (size_t)K * sizeof(float));
    CHECK(dit_prepare_timesteps(m, extra, K + 2, &e) == 0, "%s", e.msg);
    size_t ada = dit_adaln_weight_bytes(m), tot = dit_weight_bytes(m);
    dit_release_adaln(m);
    printf("  tiny AdaLN weights %zu of %zu bytes (%.1f%%) released\n", ada, tot, 100.0 * (double)ada / (double)tot);
    CHECK(run_forward(m, &g, &cached, &e) == 0, "%s", e.msg);
    if (plain.video && cached.video)
        CHECK(!memcmp(plain.video, cached.video, (size_t)plain.nv * 4) &&
                  !memcmp(plain.audio, cached.audio, (size_t)plain.na * 4),
              "precomputed AdaLN tables change the output");
    /* a value never prepared: the file-backed projections stay readable after the release (their pages are given
     * back and read again), so the forward builds its table and gives what a model that never released gives */
    ((float *)g.t[3]->data)[0] = 0.0123f;
    dit_model *fresh = dit_load(be, FIX "tiny/transformer", 1, &e);
    run_out late = {0}, ref = {0};
    CHECK(fresh && run_forward(m, &g, &late, &e) == 0 && run_forward(fresh, &g, &ref, &e) == 0,
          "unprepared timestep after release (file weights): '%s'", e.msg);
    if (late.video && ref.video)
        CHECK(!memcmp(late.video, ref.video, (size_t)late.nv * 4) && !memcmp(late.audio, ref.audio, (size_t)late.na * 4),
              "a table built after the release differs from one built before");
    printf("  unprepared timestep after release (file weights) -> table built from the file mapping\n");
    /* random weights have no file: released for good, an unprepared value is refused */
    dit_config c;
    CHECK(dit_config_load(FIX "tiny/transformer", &c, &e) == 0, "%s", e.msg);
    dit_model *r = dit_new_random(be, &c, 1, 3, &e);
    CHECK(r && dit_prepare_timesteps(r, extra, K + 2, &e) == 0, "random model: %s", e.msg);
    if (r) {
        dit_release_adaln(r);
        int rc = run_forward(r, &g, &bad, &e);
        CHECK(rc != 0 && strstr(e.msg, "AdaLN"), "unprepared timestep after release (random): rc %d '%s'", rc, e.msg);
        printf("  unprepared timestep after release (random weights) -> %s\n", e.msg);
    }
    run_out_free(&plain), run_out_free(&cached), run_out_free(&bad), run_out_free(&late), run_out_free(&ref);
    dit_free(r), dit_free(fresh);
    dit_free(m);
    golden_free(&g);
}

/* Bad inputs: one-line errors, nothing computed. */
static void test_errors(h3_backend *be) {
    h3_err e = {{0}};
    golden g;
    if (golden_open(FIX "golden/dit/t2va.in.safetensors", &g) != 0) return;
    dit_model *m = dit_load(be, FIX "tiny/transformer", 0, &e);
    CHECK(m != NULL, "%s", e.msg);
    if (!m) {
        golden_free(&g);
        return;
    }
    const dit_config *c = dit_get_config(m);
    dit_inputs in;
    CHECK(dit_inputs_from_tensors(c, &g.dt, 0, &in, &e) == 0, "%s", e.msg);
    int64_t S = in.S;
    struct {
        const char *what, *expect;
        h3_tensor *t;
        int slot;
    } shape_cases[] = {
        {"2-column position_ids", "position_ids", h3_tensor_new(H3_F64, 2, (int64_t[]){S, 2}, &e), 6},
        {"short token_tags", "token_tags", h3_tensor_new(H3_I64, 1, (int64_t[]){S - 1}, &e), 5},
        {"2-D timestep", "timestep", h3_tensor_new(H3_F32, 2, (int64_t[]){1, in.K}, &e), 3},
        {"video row count mismatch", "hidden_states", h3_tensor_new(H3_F32, 3, (int64_t[]){1, in.Nv - 1, 96}, &e), 0},
        {"audio width", "audio_hidden_states", h3_tensor_new(H3_F32, 3, (int64_t[]){1, in.Na, 31}, &e), 1},
        {"i32 tags", "token_tags", h3_tensor_new(H3_I32, 1, (int64_t[]){S}, &e), 5},
    };
    for (size_t i = 0; i < sizeof shape_cases / sizeof shape_cases[0]; i++) {
        dit_tensors bad = g.dt;
        ((const h3_tensor **)&bad)[shape_cases[i].slot] = shape_cases[i].t;
        dit_inputs tmp;
        int rc = dit_inputs_from_tensors(c, &bad, 0, &tmp, &e);
        CHECK(rc != 0 && strstr(e.msg, shape_cases[i].expect) && !strchr(e.msg, '\n'), "%s: rc %d '%s'",
              shape_cases[i].what, rc, e.msg);
        printf("  %-26s -> %s\n", shape_cases[i].what, e.msg);
        h3_tensor_free(shape_cases[i].t);
    }
    /* batch 2 (PROBE.md B): item 1 = item 0 with the video rows negated; item 0 must match batch 1 */
    {
        h3_tensor *b2[3];
        for (int i = 0; i < 3; i++) {
            const h3_tensor *t1 = g.t[i];
            b2[i] = h3_tensor_new(H3_F32, 3, (int64_t[]){2, t1->shape[1], t1->shape[2]}, &e);
            size_t nb = h3_tensor_nbytes(t1);
            memcpy(b2[i]->data, t1->data, nb);
            memcpy((char *)b2[i]->data + nb, t1->data, nb);
        }
        float *hv = (float *)b2[0]->data + h3_tensor_numel(g.t[0]);
        for (int64_t i = 0; i < h3_tensor_numel(g.t[0]); i++) hv[i] = -hv[i];
        dit_tensors bt = g.dt;
        bt.hidden_states = b2[0], bt.audio_hidden_states = b2[1], bt.encoder_hidden_states = b2[2];
        float *v1 = malloc((size_t)in.Nv * 96 * 4), *a1 = malloc((size_t)in.Na * 32 * 4);
        float *v2 = malloc((size_t)in.Nv * 96 * 4), *a2 = malloc((size_t)in.Na * 32 * 4);
        dit_inputs i0, i1;
        int rc = dit_forward(m, &in, v1, a1, &e);
        rc |= dit_inputs_from_tensors(c, &bt, 0, &i0, &e) | dit_forward(m, &i0, v2, a2, &e);
        CHECK(rc == 0 && !memcmp(v1, v2, (size_t)in.Nv * 96 * 4), "batch item 0 differs from batch 1: %s", e.msg);
        rc = dit_inputs_from_tensors(c, &bt, 1, &i1, &e) | dit_forward(m, &i1, v2, a2, &e);
        CHECK(rc == 0 && memcmp(v1, v2, (size_t)in.Nv * 96 * 4) != 0, "batch item 1 ignores its own rows: %s", e.msg);
        CHECK(dit_inputs_from_tensors(c, &bt, 2, &i1, &e) != 0, "batch item 2 of 2 accepted");
        free(v1), free(a1), free(v2), free(a2);
        for (int i = 0; i < 3; i++) h3_tensor_free(b2[i]);
    }
    float *vo = malloc((size_t)in.Nv * 96 * 4), *ao = malloc((size_t)in.Na * 32 * 4);
    int64_t *tix = malloc((size_t)S * 8), *tags = malloc((size_t)S * 8), *vix = malloc((size_t)in.Nv * 8);
    float ts_bad[2] = {0.6f, 0.3f};
    for (int k = 0; k < 5; k++) {
        dit_inputs b = in;
        const char *what = "", *expect = "";
        memcpy(tix, in.timestep_indices, (size_t)S * 8);
        memcpy(tags, in.token_tags, (size_t)S * 8);
        memcpy(vix, in.video_indices, (size_t)in.Nv * 8);
        switch (k) {
        case 0: tix[7] = in.K, b.timestep_indices = tix, what = "out-of-range timestep_indices", expect = "timestep_indices"; break;
        case 1: tags[3] = 3, b.token_tags = tags, what = "tag 3", expect = "token_tags"; break;
        case 2: vix[1] = vix[0], b.video_indices = vix, what = "overlapping video_indices", expect = "video_indices"; break;
        case 3: b.timestep = ts_bad, b.K = 2, what = "unsorted timestep", expect = "ascending"; break;
        case 4: b.Nv = in.Nv - 1, what = "row counts vs S", expect = "add up"; break;
        }
        int rc = dit_forward(m, &b, vo, ao, &e);
        CHECK(rc != 0 && strstr(e.msg, expect), "%s: rc %d '%s'", what, rc, e.msg);
        printf("  %-26s -> %s\n", what, e.msg);
    }
    free(vo), free(ao), free(tix), free(tags), free(vix);
    dit_free(m);
    golden_free(&g);

    /* loader errors: a folder whose config does not match its tensors */
    dit_config cfg;
    CHECK(dit_config_load(FIX "tiny/FL2VA/transformer", &cfg, &e) == 0 && cfg.original_layout == 1 &&
              cfg.ffn_dim == 64 && cfg.num_refiner_layers == 2 && cfg.in_channels == 24, "original config: %s", e.msg);
    CHECK(dit_load(be, FIX "golden/dit", 0, &e) == NULL && strstr(e.msg, "config.json"), "no config: '%s'", e.msg);
}

/* Tensor lists: tiny folders match exactly; release counts from the vendored skeleton config. */
static void test_expected(void) {
    h3_err e = {{0}};
    const char *dirs[4] = {FIX "tiny/transformer", FIX "tiny/FL2VA/transformer", FIX "skeleton/transformer",
                           FIX "skeleton/FL2VA/transformer"};
    for (int i = 0; i < 4; i++) {
        dit_config c;
        h3_expect_list l = {0};
        if (dit_config_load(dirs[i], &c, &e) != 0 || dit_expected_tensors(&c, &l, &e) != 0) {
            CHECK(0, "%s", e.msg);
            continue;
        }
        size_t bytes = 0, adaln = 0;
        int f32 = 0;
        for (int j = 0; j < l.n; j++) {
            int64_t n = 1;
            for (int d = 0; d < l.v[j].ndim; d++) n *= l.v[j].shape[d];
            bytes += (size_t)n * h3_dtype_size(l.v[j].dtype);
            if (strstr(l.v[j].name, "adaln_proj") || strstr(l.v[j].name, "norm_out.linear"))
                adaln += (size_t)n * h3_dtype_size(l.v[j].dtype);
            f32 += l.v[j].dtype == H3_F32;
        }
        if (i < 2) {
            st_set *s = st_set_open(dirs[i], &e);
            CHECK(s && st_set_count(s) == l.n, "%s: %d tensors stored, %d expected", dirs[i], s ? st_set_count(s) : -1, l.n);
            for (int j = 0; s && j < l.n; j++) {
                const st_entry *en = st_set_entry(s, l.v[j].name, NULL);
                int ok = en && en->dtype == l.v[j].dtype && en->ndim == l.v[j].ndim;
                for (int d = 0; ok && d < en->ndim; d++) ok = en->shape[d] == l.v[j].shape[d];
                CHECK(ok, "%s: tensor '%s' missing or wrong dtype/shape", dirs[i], l.v[j].name);
            }
            st_set_free(s);
        } else {
            int orig = i == 3;
            CHECK(l.n == (orig ? 535 : 638) && f32 == (orig ? 13 : 12), "%s: %d tensors (%d F32)", dirs[i], l.n, f32);
            CHECK(bytes == (orig ? 66280430144ull : 66280430080ull), "%s: %zu bytes", dirs[i], bytes);
            if (!orig)
                printf("  release: %d tensors, %zu bytes; AdaLN projections %zu bytes (%.1f%%) freed by "
                       "dit_release_adaln\n", l.n, bytes, adaln, 100.0 * (double)adaln / (double)bytes);
            /* memory planning (automatic --ssd-streaming): a GPU keeps all but the AdaLN projections; streamed, all but
             * those and the 50 blocks' four linears, plus two slots of one block's linears */
            const size_t H = 5376, I = 56 * 128, FF = 14336, block = 2 * (3 * I * H + H * I + 2 * FF * H + H * FF);
            const size_t res = dit_gpu_weight_bytes(&c, DIT_BF16, &e), str = dit_gpu_weight_bytes(&c, DIT_BF16 | DIT_STREAM, &e);
            CHECK(res == bytes - adaln, "%s: resident GPU weights %zu bytes, want %zu", dirs[i], res, bytes - adaln);
            CHECK(str == bytes - adaln - 50 * block + 2 * block + 4096, "%s: streamed GPU weights %zu bytes", dirs[i], str);
            CHECK(dit_activation_bytes(&c, DIT_BF16, 19540) == (size_t)19540 * 2 * (3 * H + 2 * FF + FF),
                  "%s: bf16 activations %zu bytes", dirs[i], dit_activation_bytes(&c, DIT_BF16, 19540));
            printf("  %s: on a GPU %zu bytes resident, %zu streamed (block linears %zu bytes each)\n",
                   orig ? "original" : "release", res, str, block);
            /* the automatic decision at 544x960x124 (19540 rows): resident on an 80 GB card (79 GiB available) and a
             * 48 GB one (46 GiB), streamed on a 40 GB one (38 GiB) and a 24 GB one (22 GiB) */
            const double GiB = 1024.0 * 1024.0 * 1024.0;
            double need;
            CHECK(!dit_should_stream(&c, DIT_BF16, 19540, 79 * GiB, &need) && !dit_should_stream(&c, DIT_BF16, 19540, 46 * GiB, &need) &&
                      dit_should_stream(&c, DIT_BF16, 19540, 38 * GiB, &need) && dit_should_stream(&c, DIT_BF16, 19540, 22 * GiB, &need),
                  "%s: automatic streaming: need %.2f GiB", dirs[i], need / GiB);
            CHECK(fabs(need - ((double)(bytes - adaln) + (double)dit_activation_bytes(&c, DIT_BF16, 19540) + 3 * GiB)) < 1,
                  "%s: the need %.0f bytes is not weights + activations + 3 GiB", dirs[i], need);
            printf("  %s: a resident bf16 DiT at 19540 rows needs %.2f GiB: resident at 46 GiB available, streamed at 38\n",
                   orig ? "original" : "release", need / GiB);
        }
        h3_expect_list_free(&l);
    }
}

/* inv_freq for rope_freq_dim 16 is the docs/model/dit.md 4.1 table bit for bit. */
static void test_inv_freq(void) {
    static const uint32_t hex[16] = {0x3f800000, 0x3f0ff59a, 0x3ea1e89b, 0x3e361887, 0x3dcccccd, 0x3d6655c2,
                                     0x3d0186e3, 0x3c91ad39, 0x3c23d70a, 0x3bb8449c, 0x3b4f3e38, 0x3ae91528,
                                     0x3a83126f, 0x3a136a16, 0x39a5cb60, 0x393a7753};
    float f[16];
    dit_rope_inv_freq(f, 16, 10000.0f);
    int same = 0;
    for (int k = 0; k < 16; k++) {
        uint32_t u;
        memcpy(&u, &f[k], 4);
        same += u == hex[k];
    }
    printf("  inv_freq (16) bit-exact entries: %d/16\n", same);
    CHECK(same == 16, "inv_freq differs from the spec table");
}

/* The fused ops against the unfused sequence of core ops, bit for bit. */
static void test_fused_ops(h3_backend *be) {
    const int64_t rows = 37, dim = 24, trows = 6, stride = 6 * dim;
    size_t n = (size_t)(rows * dim);
    float *x = malloc(n * 4), *tab = malloc((size_t)(trows * stride) * 4), *y = malloc(n * 4), *ref = malloc(n * 4);
    float *one = malloc(n * 4), *tmp = malloc(n * 4), *shift = malloc(n * 4), *gate = malloc(n * 4);
    float *br = malloc(n * 4);
    int32_t idx[37];
    test_seed(7);
    for (size_t i = 0; i < n; i++) x[i] = 3.0f * frand(), br[i] = frand();
    for (int64_t i = 0; i < trows * stride; i++) tab[i] = 0.7f * frand();
    for (int r = 0; r < rows; r++) idx[r] = (r * 5 + 1) % trows;
    for (int fl = 0; fl < 2; fl++) {
        int flags = fl ? H3_BF16_OUT : 0;
        if (fl) {
            for (size_t i = 0; i < n; i++) x[i] = h3_round_bf16(x[i]), br[i] = h3_round_bf16(br[i]);
            for (int64_t i = 0; i < trows * stride; i++) tab[i] = h3_round_bf16(tab[i]);
        }
        /* modulate: 1 + scale, times x, plus shift, each a separate op */
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < dim; c++) {
                one[r * dim + c] = 1.0f;
                tmp[r * dim + c] = tab[idx[r] * stride + 4 * dim + c];
                shift[r * dim + c] = tab[idx[r] * stride + 3 * dim + c];
                gate[r * dim + c] = tab[idx[r] * stride + 5 * dim + c];
            }
        h3_add(be, tmp, one, tmp, (int64_t)n, flags);
        h3_mul(be, ref, x, tmp, (int64_t)n, flags);
        h3_add(be, ref, ref, shift, (int64_t)n, flags);
        h3_adaln_modulate(be, y, x, rows, dim, tab, stride, idx, 3 * dim, 4 * dim, flags);
        CHECK(!memcmp(y, ref, n * 4), "adaln_modulate differs from add/mul/add (flags %d)", flags);
        /* gated residual */
        memcpy(y, x, n * 4);
        h3_mul(be, tmp, gate, br, (int64_t)n, flags);
        h3_add(be, ref, x, tmp, (int64_t)n, flags);
        h3_gated_residual(be, y, br, rows, dim, tab, stride, idx, 5 * dim, flags);
        CHECK(!memcmp(y, ref, n * 4), "gated_residual differs from mul/add (flags %d)", flags);
        /* swiglu */
        h3_silu(be, tmp, br, (int64_t)n, flags);
        h3_mul(be, ref, x, tmp, (int64_t)n, flags);
        h3_swiglu(be, y, x, br, (int64_t)n, flags);
        CHECK(!memcmp(y, ref, n * 4), "swiglu differs from silu/mul (flags %d)", flags);
    }
    /* scatter then gather is the identity on a permutation; scatter rounds with the flag */
    int32_t perm[37];
    for (int r = 0; r < rows; r++) perm[r] = (r * 11 + 3) % 37;
    h3_rows_scatter(be, y, br, perm, rows, dim, 0);
    h3_rows_gather(be, ref, y, perm, rows, dim);
    CHECK(!memcmp(ref, br, n * 4), "scatter/gather round trip");
    CHECK(y[perm[2] * dim + 5] == br[2 * dim + 5], "scatter places row 2");
    /* deinterleave: rows x heads x [q k v] */
    int heads = 3, hd = 4;
    float fused[2 * 3 * 3 * 4], q[24], k[24], v[24];
    for (int i = 0; i < 72; i++) fused[i] = (float)i;
    h3_qkv_deinterleave(be, q, k, v, fused, 2, heads, hd);
    int ok = 1;
    for (int r = 0; r < 2; r++)
        for (int h = 0; h < heads; h++)
            for (int d = 0; d < hd; d++) {
                int base = r * 36 + h * 12 + d;
                ok &= q[r * 12 + h * 4 + d] == fused[base] && k[r * 12 + h * 4 + d] == fused[base + 4] &&
                      v[r * 12 + h * 4 + d] == fused[base + 8];
            }
    CHECK(ok, "qkv_deinterleave");
    /* matmul_rows: the k block of a per-head interleaved [q k v] weight vs h3_matmul on those rows */
    {
        const int64_t M = 5, Kd = 300, NH = 3, D = 40, I = NH * D;
        int64_t wshape[2] = {3 * I, Kd}, kshape[2] = {I, Kd};
        h3_err e;
        h3_tensor *w = h3_tensor_new(H3_BF16, 2, wshape, &e), *wk = h3_tensor_new(H3_BF16, 2, kshape, &e);
        float *xin = malloc((size_t)(M * Kd) * 4), *y1 = malloc((size_t)(M * I) * 4), *y2 = malloc((size_t)(M * I) * 4);
        uint16_t *wd = w->data, *kd = wk->data;
        for (int64_t i = 0; i < 3 * I * Kd; i++) wd[i] = h3_f32_to_bf16(frand());
        for (int64_t i = 0; i < M * Kd; i++) xin[i] = frand();
        for (int64_t h = 0; h < NH; h++)
            for (int64_t d = 0; d < D; d++)
                memcpy(kd + (h * D + d) * Kd, wd + (h * 3 * D + D + d) * Kd, (size_t)Kd * 2);
        h3_matmul_rows(be, y1, xin, M, w, I, D, 3 * D, D, 0);
        h3_matmul(be, y2, xin, M, wk, NULL, 0);
        CHECK_CLOSE("matmul_rows (interleaved k) vs matmul", h3_rel_l2(y1, y2, (size_t)(M * I)), 1e-6);
        h3_matmul_rows(be, y1, xin, M, wk, I, I, I, 0, H3_BF16_OUT);
        h3_matmul(be, y2, xin, M, wk, NULL, H3_BF16_OUT);
        CHECK_CLOSE("matmul_rows (identity, bf16 out) vs matmul", h3_rel_l2(y1, y2, (size_t)(M * I)), 1e-2);
        h3_tensor_free(w), h3_tensor_free(wk);
        free(xin), free(y1), free(y2);
    }
    free(x), free(tab), free(y), free(ref), free(one), free(tmp), free(shift), free(gate), free(br);
}

/* Synthetic inputs on a small t2va layout (3 text rows, 2 frames of 4 x 4 latents, 5 audio latents; video rows at
 * t 0.75, audio at 0.5) and output buffers for two models (a, b): shared by the --layers and --ssd-streaming tests. */
typedef struct small_run {
    layout    *L;
    int64_t   *tidx;
    float      tv[LAYOUT_MAX_TIMESTEPS];
    float     *video, *audio, *text;
    float     *va, *aa, *vb, *ab; /* outputs of model a and model b */
    size_t     nv, na;            /* their element counts */
    dit_inputs in;
} small_run;

static int small_run_make(const dit_config *c, small_run *r, h3_err *e) {
    memset(r, 0, sizeof *r);
    const int64_t tags[3] = {1, 1, 1};
    if (!(r->L = layout_new_t2va(tags, 3, 2, 4, 4, 5, NULL, 0, e))) return -1;
    const layout *L = r->L;
    int K;
    r->tidx = malloc(sizeof(int64_t) * (size_t)L->S);
    layout_row_timesteps(L, 0.75f, 0.5f, r->tv, &K, r->tidx);
    r->nv = (size_t)(L->Nv * 96), r->na = (size_t)(L->Na * c->audio_in_channels);
    r->video = malloc(sizeof(float) * r->nv), r->audio = malloc(sizeof(float) * r->na);
    r->text = malloc(sizeof(float) * (size_t)(3 * c->text_dim));
    for (size_t i = 0; i < r->nv; i++) r->video[i] = sinf(0.37f * (float)i);
    for (size_t i = 0; i < r->na; i++) r->audio[i] = cosf(0.11f * (float)i);
    for (int64_t i = 0; i < 3 * c->text_dim; i++) r->text[i] = 0.2f * sinf((float)i);
    r->va = malloc(sizeof(float) * r->nv), r->aa = malloc(sizeof(float) * r->na);
    r->vb = malloc(sizeof(float) * r->nv), r->ab = malloc(sizeof(float) * r->na);
    r->in = (dit_inputs){.video = r->video, .Nv = L->Nv, .audio = r->audio, .Na = L->Na, .text = r->text, .Nt = L->T,
                         .timestep = r->tv, .K = K, .S = L->S, .timestep_indices = r->tidx, .token_tags = L->token_tags,
                         .position_ids = L->position_ids, .video_indices = L->video_indices,
                         .audio_indices = L->audio_indices, .text_indices = L->text_indices};
    return 0;
}

/* 1 when model a's outputs equal model b's bit for bit */
static int small_run_same(const small_run *r) {
    return !memcmp(r->va, r->vb, sizeof(float) * r->nv) && !memcmp(r->aa, r->ab, sizeof(float) * r->na);
}

static void small_run_free(small_run *r) {
    layout_free(r->L);
    free(r->tidx), free(r->video), free(r->audio), free(r->text), free(r->va), free(r->aa), free(r->vb), free(r->ab);
}

/* --layers (docs/model/features.md 5.3) on a random 8-block model: the gate scores recomputed here from the AdaLN
 * tables, the skipped set (the lowest scores among blocks 2..6), and the thinned forward against the full
 * model with the skipped blocks' gates zeroed (a block with zero gates leaves X unchanged in fp32). */
static void test_layers(h3_backend *be) {
    h3_err e = {{0}};
    dit_config c;
    CHECK(dit_config_load(FIX "tiny/transformer", &c, &e) == 0, "config: %s", e.msg);
    c.num_layers = 8;
    dit_model *a = dit_new_random(be, &c, 0, 77, &e), *b = a ? dit_new_random(be, &c, 0, 77, &e) : NULL;
    CHECK(a && b, "random models: %s", e.msg);
    if (!a || !b) {
        dit_free(a);
        return;
    }
    const float ts[2] = {0.5f, 0.75f};
    CHECK(dit_select_layers(a, 5, &e) == -1 && strstr(e.msg, "dit_prepare_timesteps"), "select before tables: %s",
          e.msg);
    CHECK(dit_prepare_timesteps(a, ts, 2, &e) == 0 && dit_prepare_timesteps(b, ts, 2, &e) == 0, "tables: %s", e.msg);
    const int64_t H = c.hidden_size;
    double score[8], mine[8];
    CHECK(dit_gate_scores(a, score, &e) == 0, "scores: %s", e.msg);
    for (int blk = 0; blk < 8; blk++) {
        double sum = 0;
        for (int k = 0; k < 2; k++) {
            const float *t = dit_adaln_block_table(a, ts[k], blk); /* [3][6][H] */
            for (int mo = 0; mo < 3; mo++)
                for (int64_t ch = 0; ch < H; ch++) sum += fabs(t[(mo * 6 + 2) * H + ch]) + fabs(t[(mo * 6 + 5) * H + ch]);
        }
        mine[blk] = sum / (2.0 * 3 * 2 * (double)H);
        CHECK(fabs(mine[blk] - score[blk]) <= 1e-12 * fabs(mine[blk]), "block %d score %g vs %g", blk, score[blk],
              mine[blk]);
    }
    /* expected skipped set: the 3 lowest of blocks 2..6 */
    int expect[8] = {0}, cand[5] = {2, 3, 4, 5, 6};
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
            if (mine[cand[j]] < mine[cand[i]]) {
                int t = cand[i];
                cand[i] = cand[j], cand[j] = t;
            }
    for (int i = 0; i < 3; i++) expect[cand[i]] = 1;
    CHECK(dit_select_layers(a, 5, &e) == 0, "select 5 of 8: %s", e.msg);
    int same = 1;
    for (int blk = 0; blk < 8; blk++) same &= dit_layer_skipped(a, blk) == expect[blk];
    CHECK(same, "skipped set differs from the 3 lowest gate scores among blocks 2..6");
    printf("  %-48s skipped %d %d %d\n", "--layers 5 of 8 (gate-ranked)", cand[0], cand[1], cand[2]);
    /* b: all blocks, the skipped ones' gates zeroed in its tables (CPU backend: host memory) */
    for (int blk = 0; blk < 8; blk++)
        if (expect[blk])
            for (int k = 0; k < 2; k++) {
                float *t = (float *)dit_adaln_block_table(b, ts[k], blk);
                for (int mo = 0; mo < 3; mo++) {
                    memset(t + (mo * 6 + 2) * H, 0, sizeof(float) * (size_t)H);
                    memset(t + (mo * 6 + 5) * H, 0, sizeof(float) * (size_t)H);
                }
            }
    small_run r;
    CHECK(small_run_make(&c, &r, &e) == 0, "inputs: %s", e.msg);
    CHECK(dit_forward(a, &r.in, r.va, r.aa, &e) == 0 && dit_forward(b, &r.in, r.vb, r.ab, &e) == 0, "forwards: %s", e.msg);
    CHECK(small_run_same(&r), "thinned forward differs from the zero-gate forward");
    /* and thinning changes the result (the skipped blocks did something) */
    dit_model *full = dit_new_random(be, &c, 0, 77, &e);
    if (full && dit_prepare_timesteps(full, ts, 2, &e) == 0 && dit_forward(full, &r.in, r.vb, r.ab, &e) == 0)
        CHECK(memcmp(r.va, r.vb, sizeof(float) * r.nv) != 0, "skipping blocks changed nothing");
    CHECK(dit_block_forward(a, cand[0], NULL, &r.in, &e) == -1 && strstr(e.msg, "dropped"), "skipped block run: %s",
          e.msg);
    CHECK(dit_select_layers(b, 2, &e) == -1 && strstr(e.msg, "at most 5"), "too few layers: %s", e.msg);
    small_run_free(&r);
    dit_free(full);
    dit_free(a);
    dit_free(b);
}


/* --ssd-streaming (docs/model/features.md 7.3): a model whose main blocks' linears are copied into two slots per forward gives
 * the resident model's bits, in both layouts and both modes, over two forwards (the second starts on the block the
 * first prefetched), with --layers, and for one block alone; the fill count and bytes add up. Also loaded from the
 * tiny checkpoint files (the slots then copy from the file mapping). */
static void stream_case(h3_backend *be, const char *label, const char *dir, int mode) {
    h3_err e = {{0}};
    dit_config c;
    CHECK(dit_config_load(dir, &c, &e) == 0, "config: %s", e.msg);
    c.num_layers = 8;
    /* variants: random weights (host memory), the files through the mapping, the files read (H3_STREAM_READ=direct:
     * O_DIRECT where the file system takes it, else buffered preads) */
    for (int variant = 0; variant < 3; variant++) {
        const int from_file = variant > 0;
        if (from_file) CHECK(dit_config_load(dir, &c, &e) == 0, "config: %s", e.msg);
        dit_model *a = from_file ? dit_load(be, dir, mode, &e) : dit_new_random(be, &c, mode, 91, &e);
        setenv("H3_STREAM_READ", variant == 2 ? "direct" : "map", 1);
        dit_model *b = a ? (from_file ? dit_load(be, dir, mode | DIT_STREAM, &e) : dit_new_random(be, &c, mode | DIT_STREAM, 91, &e))
                         : NULL;
        unsetenv("H3_STREAM_READ");
        CHECK(a && b, "%s models: %s", label, e.msg);
        if (!a || !b) {
            dit_free(a);
            return;
        }
        const float ts[2] = {0.5f, 0.75f};
        CHECK(dit_prepare_timesteps(a, ts, 2, &e) == 0 && dit_prepare_timesteps(b, ts, 2, &e) == 0, "tables: %s", e.msg);
        const int64_t H = c.hidden_size;
        small_run r;
        CHECK(small_run_make(&c, &r, &e) == 0, "inputs: %s", e.msg);
        const layout *L = r.L;
        int same = 1;
        for (int pass = 0; pass < 2; pass++) {
            CHECK(dit_forward(a, &r.in, r.va, r.aa, &e) == 0 && dit_forward(b, &r.in, r.vb, r.ab, &e) == 0, "forwards: %s",
                  e.msg);
            same &= small_run_same(&r);
        }
        CHECK(same, "%s%s: streamed forwards differ from the resident model's", label, from_file ? " (files)" : "");
        dit_stream_stats st, none;
        dit_get_stream_stats(b, &st);
        dit_get_stream_stats(a, &none);
        const int64_t Lb = c.num_layers;
        /* the first forward copies its first block, then prefetches each next one and block 0 again (L + 1), the second
         * L more; with two blocks or fewer both stay in the slots after the first forward */
        const int64_t want = Lb <= 2 ? Lb : 2 * Lb + 1;
        CHECK(st.fills == want && none.fills == 0 && st.bytes > 0 && st.slot_bytes > 0,
              "%s: %lld fills (want %lld), %g bytes", label, (long long)st.fills, (long long)want, st.bytes);
        const double per_block = st.bytes / (double)st.fills;
        const double I = (double)c.num_attention_heads * c.attention_head_dim, FF = c.ffn_dim;
        CHECK(per_block == 2.0 * (3 * I * H + H * I + 2 * FF * H + H * FF), "%s: %g bytes per block copy", label, per_block);
        /* one block alone, on packed rows of a fixed pattern */
        float *Xa = malloc(sizeof(float) * (size_t)(L->S * H)), *Xb = malloc(sizeof(float) * (size_t)(L->S * H));
        for (int64_t i = 0; i < L->S * H; i++) Xa[i] = Xb[i] = 0.25f * sinf(0.013f * (float)i);
        if (mode & DIT_BF16) h3_round_bf16_buf(be, Xa, L->S * H), h3_round_bf16_buf(be, Xb, L->S * H);
        CHECK(dit_block_forward(a, 1, Xa, &r.in, &e) == 0 && dit_block_forward(b, 1, Xb, &r.in, &e) == 0, "block: %s", e.msg);
        CHECK(!memcmp(Xa, Xb, sizeof(float) * (size_t)(L->S * H)), "%s: one streamed block differs", label);
        if (!from_file) { /* --layers 5 of 8 on both: the prefetch skips the dropped blocks */
            CHECK(dit_select_layers(a, 5, &e) == 0 && dit_select_layers(b, 5, &e) == 0, "--layers: %s", e.msg);
            for (int pass = 0; pass < 2; pass++) {
                CHECK(dit_forward(a, &r.in, r.va, r.aa, &e) == 0 && dit_forward(b, &r.in, r.vb, r.ab, &e) == 0,
                      "forwards: %s", e.msg);
                CHECK(small_run_same(&r), "%s: --layers 5: streamed forward %d differs", label, pass);
            }
        }
        if (mode & DIT_BF16) {
            CHECK(dit_quantize_fp8(b, &e) == -1 && strstr(e.msg, "--ssd-streaming"), "fp8 + streaming: '%s'", e.msg);
        }
        CHECK(variant < 2 ? st.reads == 0 : st.reads == 1 || st.reads == 2, "%s: reads %d for variant %d", label, st.reads,
              variant);
        static const char *const what[3] = {"(random)", "(files, mapping)", "(files, read)"};
        printf("  %-36s %-17s identical, %lld copies of %.0f bytes%s\n", label, what[variant], (long long)st.fills, per_block,
               variant < 2 ? "" : st.reads == 1 ? " (O_DIRECT)" : " (buffered: no O_DIRECT here)");
        free(Xa), free(Xb);
        small_run_free(&r);
        dit_free(a);
        dit_free(b);
    }
}

/* --ssd-streaming with --token-reduction (a pooled range, and one through the last block) and --core-reuse (a STORE
 * forward, then a REUSE one): the tiny checkpoint streamed gives the resident model's bits (bf16, t2va golden inputs:
 * 7 frames of 2 x 3 tokens). */
static void stream_reduce_core(h3_backend *be) {
    h3_err e = {{0}};
    golden g;
    if (golden_open(FIX "golden/dit/t2va.in.safetensors", &g) != 0) return;
    dit_model *a = dit_load(be, FIX "tiny/transformer", DIT_BF16, &e);
    dit_model *b = a ? dit_load(be, FIX "tiny/transformer", DIT_BF16 | DIT_STREAM, &e) : NULL;
    CHECK(a && b, "models: %s", e.msg);
    dit_inputs in;
    if (a && b && dit_inputs_from_tensors(dit_get_config(a), &g.dt, 0, &in, &e) == 0) {
        const dit_config *c = dit_get_config(a);
        const int64_t nv = in.Nv * c->in_channels * 4, na = in.Na * c->audio_in_channels;
        float *va = malloc(sizeof(float) * (size_t)nv), *aa = malloc(sizeof(float) * (size_t)na);
        float *vb = malloc(sizeof(float) * (size_t)nv), *ab = malloc(sizeof(float) * (size_t)na);
        struct { int begin, end, core; const char *what; } cases[] = {
            {0, 1, DIT_CORE_RUN, "--token-reduction 0..1"},
            {1, c->num_layers, DIT_CORE_RUN, "--token-reduction 1..last"},
            {0, 0, DIT_CORE_RUN_STORE, "--core-reuse store"},
            {0, 0, DIT_CORE_REUSE, "--core-reuse reuse"},
        };
        in.reduce_frames = 7, in.reduce_h = 2, in.reduce_w = 3, in.reduce_scale = 1.0f;
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            in.reduce_begin = cases[k].begin, in.reduce_end = cases[k].end, in.core = cases[k].core;
            CHECK(dit_forward(a, &in, va, aa, &e) == 0 && dit_forward(b, &in, vb, ab, &e) == 0, "%s: %s", cases[k].what,
                  e.msg);
            CHECK(!memcmp(va, vb, sizeof(float) * (size_t)nv) && !memcmp(aa, ab, sizeof(float) * (size_t)na),
                  "%s: streamed differs from resident", cases[k].what);
            printf("  %-48s streamed = resident bit for bit\n", cases[k].what);
        }
        free(va), free(aa), free(vb), free(ab);
    }
    dit_free(a), dit_free(b);
    golden_free(&g);
}

int main(void) {
    h3_err e = {{0}};
    h3_backend *be = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    if (!be) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    printf("fused DiT ops vs unfused:\n");
    test_fused_ops(be);
    test_inv_freq();
    printf("tensor lists:\n");
    test_expected();
    test_case(be, "t2va", FIX "tiny/transformer", FIX "tiny/FL2VA/transformer");
    test_case(be, "fl2va", FIX "tiny/transformer", FIX "tiny/FL2VA/transformer");
    test_case(be, "ref2va", FIX "tiny/transformer_ref", FIX "tiny/Ref2VA/transformer");
    printf("--quant fp8:\n");
    test_fp8(be, "t2va", FIX "tiny/transformer", FIX "tiny/FL2VA/transformer");
    test_fp8(be, "ref2va", FIX "tiny/transformer_ref", FIX "tiny/Ref2VA/transformer");
    printf("--token-reduction:\n");
    test_token_reduction(be, "t2va", FIX "tiny/transformer", FIX "tiny/FL2VA/transformer", 7, 2, 3);
    test_token_reduction(be, "ref2va", FIX "tiny/transformer_ref", FIX "tiny/Ref2VA/transformer", 7, 2, 2);
    printf("AdaLN precompute/release:\n");
    test_adaln_cache(be);
    printf("input errors:\n");
    test_errors(be);
    printf("layer thinning:\n");
    test_layers(be);
    printf("--ssd-streaming:\n");
    stream_case(be, "diffusers layout, bf16", FIX "tiny/transformer", DIT_BF16);
    stream_case(be, "diffusers layout, fp32", FIX "tiny/transformer", 0);
    stream_case(be, "original layout, bf16", FIX "tiny/FL2VA/transformer", DIT_BF16);
    stream_case(be, "original layout, fp32", FIX "tiny/FL2VA/transformer", 0);
    stream_reduce_core(be);
    h3_backend_free(be);
    TEST_END();
}
