/* Noise parity (docs/model/dit.md 8): torch.randn under torch.Generator().manual_seed(seed) within 1e-6
 * (golden/pipeline/randn), the request's draw order + 0.999 condition augmentation + packing against
 * the starting rows the reference pipeline handed its transformer (golden/pipeline/denoise_*.in),
 * patchify/unpatchify and audio row packing, and the conditioning-row-count errors. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/layout.h"
#include "pipeline/noise.h"
#include "pipeline_fixture.h"
#include "test.h"

static double max_abs_diff(const float *a, const float *b, int64_t n, int64_t *exact) {
    double m = 0;
    *exact = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (d > m) m = d;
        *exact += a[i] == b[i];
    }
    return m;
}

static void test_randn(void) {
    st_file *f = fx_open("randn");
    static const uint64_t seeds[] = {0, 1, 42, 4294967303ull, 123456789, 9223372036854775807ull};
    static const int sizes[] = {1, 2, 5, 15, 16, 17, 31, 33, 96, 100, 576, 2368, 4097};
    double worst = 0;
    int64_t total = 0, exact_total = 0;
    int tensors = 0;
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            char name[64];
            snprintf(name, sizeof name, "randn_%llu_%d", (unsigned long long)seeds[s], sizes[k]);
            int64_t n;
            const float *ref = fx_get(f, name, H3_F32, &n);
            if (!ref) continue;
            float *mine = malloc(sizeof(float) * (size_t)n);
            torch_rng g;
            torch_rng_seed(&g, seeds[s]);
            torch_randn(&g, mine, n);
            int64_t exact;
            double d = max_abs_diff(mine, ref, n, &exact);
            CHECK(d <= 1e-6, "%s: max abs %.3g", name, d);
            if (d > worst) worst = d;
            total += n;
            exact_total += exact;
            tensors++;
            free(mine);
        }
    CHECK(tensors >= 60, "only %d randn tensors in the fixture", tensors);
    /* several draws from one generator, incl. the scalar path's cached second sample */
    torch_rng g;
    torch_rng_seed(&g, 42);
    for (int k = 0; k < 16; k++) {
        char name[32];
        snprintf(name, sizeof name, "sequence_%d", k);
        int64_t n, exact;
        const float *ref = fx_get(f, name, H3_F32, &n);
        if (!ref) break;
        float mine[64];
        torch_randn(&g, mine, n);
        double d = max_abs_diff(mine, ref, n, &exact);
        CHECK(d <= 1e-6, "%s: max abs %.3g", name, d);
        if (d > worst) worst = d;
        total += n;
        exact_total += exact;
    }
    printf("  randn: %lld values, max abs diff %.3g, %.1f%% bit-exact (tol 1e-6)\n", (long long)total, worst,
           100.0 * (double)exact_total / (double)total);
    /* docs/model/dit.md 8.3: seed 42 starts 1.92691529, 1.48728406, 0.900717199, -2.10552096 */
    float v[16];
    torch_rng_seed(&g, 42);
    torch_randn(&g, v, 16);
    CHECK(fabsf(v[0] - 1.92691529f) < 1e-6f && fabsf(v[3] + 2.10552096f) < 1e-6f, "seed 42: %.9g %.9g", v[0], v[3]);
    st_close(f);
}

static void test_packing(void) {
    /* patchify follows docs/model/dit.md 8.1's formula, unpatchify inverts it */
    const int C = 3, F = 2, lh = 4, lw = 6;
    const int n = C * F * lh * lw;
    float lat[144], rows[144], back[144];
    for (int i = 0; i < n; i++) lat[i] = (float)i;
    h3_err e = {{0}};
    CHECK(noise_patchify(lat, C, F, lh, lw, rows, &e) == 0, "patchify");
    int ok = 1;
    for (int f = 0; f < F; f++)
        for (int y = 0; y < lh / 2; y++)
            for (int x = 0; x < lw / 2; x++)
                for (int c = 0; c < C; c++)
                    for (int dy = 0; dy < 2; dy++)
                        for (int dx = 0; dx < 2; dx++) {
                            int r = (f * (lh / 2) + y) * (lw / 2) + x, q = c * 4 + dy * 2 + dx;
                            ok &= rows[r * C * 4 + q] == lat[((c * F + f) * lh + 2 * y + dy) * lw + 2 * x + dx];
                        }
    CHECK(ok, "patchify index mapping");
    CHECK(noise_unpatchify(rows, C, F, lh, lw, back, &e) == 0 && !memcmp(back, lat, sizeof(float) * n), "round trip");
    CHECK(noise_patchify(lat, C, F, 3, 8, rows, &e) == -1 && strstr(e.msg, "not divisible by the patch"), "odd: %s", e.msg);
    /* audio rows (2A, Ca) <-> (2, Ca, A) */
    float ar[2 * 5 * 3], al[2 * 5 * 3], ar2[2 * 5 * 3];
    for (int i = 0; i < 30; i++) ar[i] = (float)i;
    noise_audio_rows_to_latents(ar, 3, 5, al);
    CHECK(al[(1 * 3 + 2) * 5 + 4] == ar[(1 * 5 + 4) * 3 + 2], "audio latent[c][k][i] = row[c*A+i][k]");
    noise_audio_latents_to_rows(al, 3, 5, ar2);
    CHECK(!memcmp(ar, ar2, sizeof ar), "audio round trip");
    /* augmentation: fp32(0.999)*x + (1 - fp32(0.999))*n */
    float x[2] = {1.0f, -2.0f}, nz[2] = {0.5f, 3.0f};
    noise_augment_condition(x, nz, 2);
    const float t = 0.999f, omt = 1.0f - t;
    CHECK(x[0] == t * 1.0f + omt * 0.5f && x[1] == t * -2.0f + omt * 3.0f, "augmentation arithmetic");
}

/* The pipeline's starting rows for each denoise fixture: draw order conditions -> video -> audio. */
static void test_request_rows(void) {
    static const char *tasks[] = {"t2va", "fl2va", "ref2va"};
    for (int k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "denoise_%s.in", tasks[k]);
        st_file *f = fx_open(name);
        int64_t nv = 0, na = 0, ng = 0, nr = 0, nac = 0;
        const float *ref_v = fx_get(f, "latents", H3_F32, &nv), *ref_a = fx_get(f, "audio_latents", H3_F32, &na);
        const int64_t *geo = fx_get(f, "geometry", H3_I64, &ng), *seed = fx_get(f, "seed", H3_I64, NULL);
        const int64_t *ncv = fx_get(f, "num_condition_video_rows", H3_I64, NULL);
        const int64_t *nca = fx_get(f, "num_condition_audio_rows", H3_I64, NULL);
        const int64_t *refs = fx_get(f, "references", H3_I64, &nr);
        const float *aconds = fx_get(f, "audio_condition_latents", H3_F32, &nac);
        CHECK(ref_v && ref_a && geo && seed && ncv && nca, "%s fixture incomplete", name);
        if (!(ref_v && ref_a && geo && seed && ncv && nca)) { st_close(f); continue; }
        noise_condition conds[4];
        int nconds = 0;
        for (int c = 0; c < 4; c++) {
            char cn[48];
            snprintf(cn, sizeof cn, "condition_latents_%d", c);
            const st_entry *en = st_find(f, cn);
            if (!en) break;
            conds[nconds++] = (noise_condition){st_data(f, en), (int)en->shape[2], (int)en->shape[3], (int)en->shape[4]};
        }
        (void)refs;
        noise_request r = {.seed = (uint64_t)seed[0], .C = 24, .Ca = 32, .F = (int)geo[0], .lh = (int)geo[1],
                           .lw = (int)geo[2], .A = (int)geo[3], .conditions = conds, .num_conditions = nconds,
                           .reference_audio_rows = aconds, .num_reference_audio_rows = nac / 32,
                           .expected_condition_video_rows = ncv[0], .expected_condition_audio_rows = nca[0]};
        float *v = malloc(sizeof(float) * (size_t)nv), *a = malloc(sizeof(float) * (size_t)na);
        h3_err e = {{0}};
        int rc = noise_prepare_rows(&r, v, a, &e);
        CHECK(rc == 0, "%s: %s", tasks[k], e.msg);
        if (rc == 0) {
            int64_t ev, ea, ec;
            double dv = max_abs_diff(v, ref_v, nv, &ev), da = max_abs_diff(a, ref_a, na, &ea);
            double dc = max_abs_diff(v, ref_v, ncv[0] * 96, &ec);
            printf("  %-6s starting rows: video max abs %.3g (%lld/%lld exact; condition rows %.3g), audio %.3g\n",
                   tasks[k], dv, (long long)ev, (long long)nv, dc, da);
            CHECK(dv <= 1e-6 && da <= 1e-6, "%s starting rows: video %.3g audio %.3g", tasks[k], dv, da);
            if (nac) CHECK(!memcmp(a, aconds, sizeof(float) * (size_t)nac), "%s: reference audio rows are copied clean",
                           tasks[k]);
        }
        /* the layout's reservation must match what the conditions pack into */
        if (nconds) {
            r.expected_condition_video_rows = ncv[0] + 4;
            CHECK(noise_prepare_rows(&r, v, a, &e) == -1 && strstr(e.msg, "reserved"), "%s: %s", tasks[k], e.msg);
            r.expected_condition_video_rows = ncv[0];
        }
        r.expected_condition_audio_rows = nca[0] + 2;
        CHECK(noise_prepare_rows(&r, v, a, &e) == -1 && strstr(e.msg, "reference audio rows"), "%s audio: %s", tasks[k],
              e.msg);
        free(v);
        free(a);
        st_close(f);
    }
}

/* `h3 probe noise`: torch.randn within 1e-6 (checked as max abs through rel L2 and max abs). */
static void test_probe_op(void) {
    static const char *cases[] = {"noise_42_1x24x1x4x6", "noise_9223372036854775807_2x3"};
    for (size_t c = 0; c < 2; c++) {
        int total;
        double worst;
        int same = fx_probe_matches("noise", NULL, cases[c], 1e-6, &total, &worst);
        CHECK(same == 1 && total == 1, "h3 probe noise %s: %d of %d outputs match (rel L2 %.3g)", cases[c], same,
              total, worst);
    }
}

/* Injected video noise skips its draw (docs/model/dit.md 8.3): the audio rows then come first off the generator;
 * injected audio latents (2, Ca, A) are converted to rows instead of drawn. */
static void test_injected_noise(void) {
    enum { F = 2, LH = 2, LW = 4, A = 5, NV = 24 * F * LH * LW, NA = 2 * A * 32 };
    float *given = malloc(sizeof(float) * NV), *vrows = malloc(sizeof(float) * NV), *arows = malloc(sizeof(float) * NA);
    float *expect = malloc(sizeof(float) * NA), *alat = malloc(sizeof(float) * NA), *vexp = malloc(sizeof(float) * NV);
    for (int i = 0; i < NV; i++) given[i] = (float)i * 0.01f;
    noise_request r = {.seed = 9, .C = 24, .Ca = 32, .F = F, .lh = LH, .lw = LW, .A = A, .video_noise = given};
    h3_err e = {{0}};
    CHECK(noise_prepare_rows(&r, vrows, arows, &e) == 0, "%s", e.msg);
    torch_rng g;
    torch_rng_seed(&g, 9);
    torch_randn(&g, expect, NA);
    noise_patchify(given, 24, F, LH, LW, vexp, &e);
    CHECK(!memcmp(arows, expect, sizeof(float) * NA), "audio is the first draw when the video noise is given");
    CHECK(!memcmp(vrows, vexp, sizeof(float) * NV), "given video noise is patchified");
    /* audio given: the video draw is the first and only one */
    noise_audio_rows_to_latents(expect, 32, A, alat);
    r.video_noise = NULL;
    r.audio_noise = alat;
    CHECK(noise_prepare_rows(&r, vrows, arows, &e) == 0, "%s", e.msg);
    CHECK(!memcmp(arows, expect, sizeof(float) * NA), "given audio latents become rows");
    torch_rng_seed(&g, 9);
    torch_randn(&g, given, NV);
    noise_patchify(given, 24, F, LH, LW, vexp, &e);
    CHECK(!memcmp(vrows, vexp, sizeof(float) * NV), "video noise drawn first");
    free(given), free(vrows), free(arows), free(expect), free(alat), free(vexp);
}

int main(void) {
    test_injected_noise();
    test_probe_op();
    test_randn();
    test_packing();
    test_request_rows();
    TEST_END();
}
