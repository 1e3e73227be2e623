/* Scheduler parity (docs/model/dit.md 7): sigma grids, timesteps and Euler steps bit-exact against
 * diffusers' MiniMaxH3Scheduler (golden/pipeline/{sigmas,euler,sigmas_*}.safetensors), plus the
 * validation errors and the --steps mapping. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "pipeline/sched.h"
#include "pipeline_fixture.h"
#include "test.h"

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static void test_grids(void) {
    st_file *f = fx_open("sigmas");
    CHECK(f != NULL, "sigmas fixture");
    int grids = 0, exact = 0;
    for (int k = 0; k < 16; k++) {
        char name[64];
        snprintf(name, sizeof name, "shift_%d", k);
        const double *shift = fx_get(f, name, H3_F64, NULL);
        if (!shift) break;
        for (int n = 2; n <= 1000; n++) {
            int64_t ns, nt;
            snprintf(name, sizeof name, "sigmas_%d_%d", n, k);
            const float *ref_s = fx_get(f, name, H3_F32, &ns);
            snprintf(name, sizeof name, "timesteps_%d_%d", n, k);
            const float *ref_t = fx_get(f, name, H3_F32, &nt);
            if (!ref_s) continue;
            sched s;
            h3_err e = {{0}};
            int rc = sched_init(&s, n, *shift, &e);
            CHECK(rc == 0, "sched_init(%d, %g): %s", n, *shift, e.msg);
            if (rc) continue;
            grids++;
            int same = s.num_sigmas == ns && s.num_sigmas - 1 == nt &&
                       fx_first_diff(s.sigmas, ref_s, ns, 4) < 0 && fx_first_diff(s.timesteps, ref_t, nt, 4) < 0;
            CHECK(same, "grid N=%d shift=%g differs from diffusers (len %d vs %lld)", n, *shift, s.num_sigmas,
                  (long long)ns);
            exact += same;
            sched_free(&s);
        }
    }
    printf("  sigma grids bit-exact: %d of %d (shifts 12, 3, 6, 1, 0.5, 7.3; N 2..1000)\n", exact, grids);
    CHECK(grids > 250, "only %d grids in the fixture", grids);

    /* explicit sigma lists: accepted/rejected as the reference does, timesteps bit-exact */
    int lists = 0;
    for (int j = 0; j < 64; j++) {
        char name[64];
        int64_t n, nok, nt;
        snprintf(name, sizeof name, "explicit_%d", j);
        if (!fx_has(f, name)) break;
        const float *sig = fx_get(f, name, H3_F32, &n);
        snprintf(name, sizeof name, "explicit_ok_%d", j);
        const int64_t *ok = fx_get(f, name, H3_I64, &nok);
        sched s;
        h3_err e = {{0}};
        int rc = sched_init_sigmas(&s, sig ? sig : (const float[]){0}, (int)n, &e);
        CHECK((rc == 0) == (ok && ok[0] == 1), "explicit list %d: C %s, reference %s", j, rc ? "rejects" : "accepts",
              ok && ok[0] ? "accepts" : "rejects");
        if (rc == 0) {
            snprintf(name, sizeof name, "explicit_timesteps_%d", j);
            const float *ref_t = fx_get(f, name, H3_F32, &nt);
            CHECK(ref_t && nt == n - 1 && fx_first_diff(s.timesteps, ref_t, nt, 4) < 0, "explicit list %d timesteps", j);
            sched_free(&s);
        } else {
            CHECK(strstr(e.msg, "strictly decreasing") != NULL, "explicit list %d error: %s", j, e.msg);
        }
        lists++;
    }
    CHECK(lists >= 8, "explicit lists in fixture: %d", lists);
    st_close(f);
}

/* The probe-format cases (sigmas op inputs: f32 shift). */
static void test_probe_cases(void) {
    static const char *cases[] = {"n5_video", "n5_audio", "n21_video", "n21_audio", "n30_video"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char name[64];
        snprintf(name, sizeof name, "sigmas_%s.in", cases[c]);
        st_file *fi = fx_open(name);
        snprintf(name, sizeof name, "sigmas_%s.out", cases[c]);
        st_file *fo = fx_open(name);
        const int64_t *n = fx_get(fi, "num_inference_steps", H3_I64, NULL);
        const float *shift = fx_get(fi, "shift", H3_F32, NULL);
        int64_t ns, nt;
        const float *rs = fx_get(fo, "sigmas", H3_F32, &ns), *rt = fx_get(fo, "timesteps", H3_F32, &nt);
        CHECK(n && shift && rs && rt, "probe case %s incomplete", cases[c]);
        if (n && shift && rs && rt) {
            sched s;
            h3_err e = {{0}};
            CHECK(sched_init(&s, (int)*n, *shift, &e) == 0, "%s", e.msg);
            CHECK(s.num_sigmas == ns && fx_first_diff(s.sigmas, rs, ns, 4) < 0 && fx_first_diff(s.timesteps, rt, nt, 4) < 0,
                  "probe case %s differs", cases[c]);
            sched_free(&s);
        }
        st_close(fi);
        st_close(fo);
    }
}

/* Spec 7.1's hex table (N = 5) as an independent anchor. */
static void test_spec_values(void) {
    sched s;
    h3_err e;
    static const uint32_t vs[5] = {0x3f800000, 0x3f7914c2, 0x3f6c4ec5, 0x3f4ccccd, 0};
    static const uint32_t vt[4] = {0, 0x3cdd67c0, 0x3d9d89d8, 0x3e4ccccc};
    static const uint32_t as[5] = {0x3f800000, 0x3f666666, 0x3f400000, 0x3f000000, 0};
    CHECK(sched_init(&s, 5, SCHED_VIDEO_SHIFT, &e) == 0, "%s", e.msg);
    for (int i = 0; i < 5; i++) CHECK(bits(s.sigmas[i]) == vs[i], "video sigma %d = %08x", i, bits(s.sigmas[i]));
    for (int i = 0; i < 4; i++) CHECK(bits(s.timesteps[i]) == vt[i], "video t %d = %08x", i, bits(s.timesteps[i]));
    CHECK(sched_index_for_timestep(&s, s.timesteps[2], &e) == 2, "index_for_timestep");
    CHECK(sched_index_for_timestep(&s, 0.5f, &e) == -1 && strstr(e.msg, "not in the schedule"), "unknown timestep");
    sched_free(&s);
    CHECK(sched_init(&s, 5, SCHED_AUDIO_SHIFT, &e) == 0, "%s", e.msg);
    for (int i = 0; i < 5; i++) CHECK(bits(s.sigmas[i]) == as[i], "audio sigma %d = %08x", i, bits(s.sigmas[i]));
    sched_free(&s);
}

static void test_errors(void) {
    sched s;
    h3_err e = {{0}};
    CHECK(sched_init(&s, 1, 12.0, &e) == -1 && strstr(e.msg, "num_inference_steps"), "N=1: %s", e.msg);
    CHECK(sched_init(&s, 0, 12.0, &e) == -1, "N=0");
    CHECK(sched_init(&s, 5, 0.0, &e) == -1 && strstr(e.msg, "shift"), "shift 0: %s", e.msg);
    CHECK(sched_init(&s, 5, -3.0, &e) == -1, "shift < 0");
    CHECK(sched_init(&s, 5, NAN, &e) == -1, "shift NaN");
    CHECK(sched_init_sigmas(&s, (const float[]){1.0f}, 1, &e) == -1, "one sigma");
    CHECK(sched_init_sigmas(&s, (const float[]){1.0f, 0.5f, 0.5f, 0.0f}, 4, &e) == -1, "not strictly decreasing");
    CHECK(sched_init_sigmas(&s, (const float[]){1.0f, 0.5f, 0.1f}, 3, &e) == -1, "does not end at 0");
    /* --steps N = model evaluations -> num_inference_steps N + 1, and the grid then has N forwards */
    int n = 0;
    CHECK(sched_num_inference_steps_for_evaluations(20, &n, &e) == 0 && n == 21, "--steps 20 -> %d", n);
    CHECK(sched_num_inference_steps_for_evaluations(1, &n, &e) == 0 && n == 2, "--steps 1 -> %d", n);
    CHECK(sched_num_inference_steps_for_evaluations(0, &n, &e) == -1 && strstr(e.msg, "--steps"), "--steps 0: %s", e.msg);
    sched_num_inference_steps_for_evaluations(4, &n, &e);
    CHECK(sched_init(&s, n, 12.0, &e) == 0 && sched_evaluations(&s) == 4, "--steps 4 gives 4 evaluations");
    sched_free(&s);
}

static void test_euler(void) {
    st_file *f = fx_open("euler");
    static const int cases[][2] = {{5, 12}, {5, 3}, {21, 12}, {21, 3}, {2, 12}, {30, 3}};
    int steps_checked = 0, exact = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char nx[32], nv[32], no[32];
        snprintf(nx, sizeof nx, "x_%d_%d", cases[c][0], cases[c][1]);
        snprintf(nv, sizeof nv, "v_%d_%d", cases[c][0], cases[c][1]);
        snprintf(no, sizeof no, "out_%d_%d", cases[c][0], cases[c][1]);
        int64_t n;
        const float *x = fx_get(f, nx, H3_F32, &n), *v = fx_get(f, nv, H3_F32, NULL), *o = fx_get(f, no, H3_F32, NULL);
        CHECK(x && v && o, "euler case %s missing", nx);
        if (!x || !v || !o) continue;
        sched s;
        h3_err e;
        CHECK(sched_init(&s, cases[c][0], cases[c][1], &e) == 0, "%s", e.msg);
        const int steps = sched_evaluations(&s), width = (int)(n / steps);
        float buf[4096];
        for (int i = 0; i < steps; i++) {
            memcpy(buf, x + i * width, sizeof(float) * width);
            sched_step(&s, i, v + i * width, buf, width);
            int same = fx_first_diff(buf, o + i * width, width, 4) < 0;
            CHECK(same, "Euler step %d of N=%d shift %d differs", i, cases[c][0], cases[c][1]);
            exact += same;
            steps_checked++;
        }
        sched_free(&s);
    }
    printf("  Euler steps bit-exact: %d of %d\n", exact, steps_checked);
    /* docs/model/dit.md 7.3's worked example */
    const float *sx = fx_get(f, "spec_x", H3_F32, NULL), *sv = fx_get(f, "spec_v", H3_F32, NULL);
    const float *so = fx_get(f, "spec_out", H3_F32, NULL);
    if (sx && sv && so) {
        sched s;
        h3_err e;
        sched_init(&s, 5, 12.0, &e);
        float y[3] = {sx[0], sx[1], sx[2]};
        sched_step(&s, 0, sv, y, 3);
        CHECK(bits(y[0]) == 0x3f00b120 && bits(y[1]) == 0xbf9f4ee0 && bits(y[2]) == 0x3ffef650, "docs/model/dit.md 7.3 example");
        CHECK(fx_first_diff(y, so, 3, 4) < 0, "docs/model/dit.md 7.3 example vs reference");
        sched_free(&s);
    }
    st_close(f);
}

/* `h3 probe sigmas` on the probe-format goldens: outputs bit-exact. */
static void test_probe_op(void) {
    static const char *cases[] = {"sigmas_n5_video", "sigmas_n5_audio", "sigmas_n21_video", "sigmas_n21_audio",
                                  "sigmas_n30_video"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int total;
        double worst;
        int same = fx_probe_matches("sigmas", NULL, cases[c], -1, &total, &worst);
        CHECK(same == 2 && total == 2, "h3 probe sigmas %s: %d of %d outputs match (-1: probe failed)", cases[c], same,
              total);
    }
}

/* scheduler_config.json as diffusers reads it: shift, absent = 12.0; bad values, classes and files refused. */
static int sched_cfg(const char *dir, const char *json, double *shift, h3_err *e) {
    char p[512];
    snprintf(p, sizeof p, "%s/scheduler_config.json", dir);
    FILE *f = fopen(p, "w");
    if (!f) return h3_fail(e, "cannot write %s", p);
    fputs(json, f);
    fclose(f);
    return sched_config_load(dir, shift, e);
}

static void test_config(void) {
    char dir[] = "/tmp/h3_sched_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp");
        return;
    }
    h3_err e = {{0}};
    double shift = 0;
    CHECK(sched_cfg(dir, "{\"_class_name\": \"MiniMaxH3Scheduler\", \"shift\": 5.5}", &shift, &e) == 0 && shift == 5.5,
          "shift 5.5 read: %g (%s)", shift, e.msg);
    CHECK(sched_cfg(dir, "{\"shift\": 3}", &shift, &e) == 0 && shift == 3.0, "integer shift 3 read: %g", shift);
    CHECK(sched_cfg(dir, "{\"_class_name\": \"MiniMaxH3Scheduler\", \"num_train_timesteps\": 1000}", &shift, &e) == 0 &&
              shift == SCHED_DEFAULT_SHIFT, "absent shift: the class default 12.0, other keys ignored: %g", shift);
    static const char *const bad[] = {"{\"shift\": 0}", "{\"shift\": -3.0}", "{\"shift\": \"12\"}",
                                      "{\"shift\": true}", "{\"shift\": 1e7}", "{\"shift\": null}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e.msg[0] = 0;
        CHECK(sched_cfg(dir, bad[i], &shift, &e) != 0 && strstr(e.msg, "scheduler_config.json: \"shift\" must be"),
              "%s refused with the field named: %s", bad[i], e.msg);
    }
    CHECK(sched_cfg(dir, "{\"_class_name\": \"FlowMatchEulerDiscreteScheduler\", \"shift\": 3.0}", &shift, &e) != 0 &&
              strstr(e.msg, "_class_name"), "another scheduler class refused: %s", e.msg);
    CHECK(sched_cfg(dir, "[12.0]", &shift, &e) != 0 && strstr(e.msg, "not a JSON object"), "not an object: %s", e.msg);
    /* read through the snapshot's one JSON opener (docs/robustness.md): the file named, the rule broken */
    CHECK(sched_cfg(dir, "{\"shift\": ", &shift, &e) != 0 && strstr(e.msg, "scheduler_config.json") &&
              strstr(e.msg, "not valid JSON"),
          "truncated JSON: %s", e.msg);
    char p[512];
    snprintf(p, sizeof p, "%s/scheduler_config.json", dir);
    remove(p);
    CHECK(sched_config_load(dir, &shift, &e) != 0 && strstr(e.msg, "scheduler_config.json"), "missing file: %s", e.msg);
    CHECK(sched_config_load("tests/fixtures/skeleton/scheduler", &shift, &e) == 0 && shift == 12.0, "release video: %g", shift);
    CHECK(sched_config_load("tests/fixtures/skeleton/audio_scheduler", &shift, &e) == 0 && shift == 3.0, "release audio: %g",
          shift);
    rmdir(dir);
}

int main(void) {
    test_config();
    test_probe_op();
    test_grids();
    test_probe_cases();
    test_spec_values();
    test_errors();
    test_euler();
    TEST_END();
}
