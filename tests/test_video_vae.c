/* Video VAE tests: the conv ops against naive loops, tile plans / frame counts / tensor list against the
 * docs/model/video_vae.md and the release index, fp32 parity with diffusers on every golden of
 * tests/fixtures/golden/video_vae (made by tools/reference/gen_video_vae.py), and error paths. */
#include <cblas.h>
#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "backend/ops.h"
#include "io/safetensors.h"
#include "model/video_vae.h"
#include "test.h"
#include "test_data.h"

#define GOLD "tests/fixtures/golden/video_vae"
#define GOLD_MODEL GOLD "/model/vae"
#define TINY_VAE "tests/fixtures/tiny/vae"
#define SKELETON_VAE "tests/fixtures/skeleton/vae"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- conv ops against naive loops ---------------------------------------------------------- */

static int64_t naive_src(int64_t q, int64_t n, int mode) {
    if (q >= 0 && q < n) return q;
    if (mode != H3_PAD_REFLECT) return -1;
    return q < 0 ? -q : 2 * (n - 1) - q;
}

static void naive_conv3d(float *y, const float *x, const h3_conv3d_geom *g, const float *w, const float *b,
                         int64_t to, int64_t ho, int64_t wo) {
    for (int64_t co = 0; co < g->cout; co++)
        for (int64_t t = 0; t < to; t++)
            for (int64_t i = 0; i < ho; i++)
                for (int64_t j = 0; j < wo; j++) {
                    double acc = b ? b[co] : 0.0;
                    for (int64_t ci = 0; ci < g->cin; ci++)
                        for (int a = 0; a < g->kt; a++)
                            for (int u = 0; u < g->kh; u++)
                                for (int v = 0; v < g->kw; v++) {
                                    int64_t ft = t * g->st + a - g->pt0;
                                    if (ft < 0 || ft >= g->tin) continue;
                                    int64_t sy = naive_src(i * g->sh + u - g->ph0, g->hin, g->spatial_pad);
                                    int64_t sx = naive_src(j * g->sw + v - g->pw0, g->win, g->spatial_pad);
                                    if (sy < 0 || sx < 0) continue;
                                    acc += (double)w[(((co * g->cin + ci) * g->kt + a) * g->kh + u) * g->kw + v] *
                                           x[((ci * g->tin + ft) * g->hin + sy) * g->win + sx];
                                }
                    y[((co * to + t) * ho + i) * wo + j] = (float)acc;
                }
}

static void check_conv3d(h3_backend *be, const char *name, h3_conv3d_geom g, int64_t et, int64_t eh, int64_t ew) {
    int64_t to, ho, wo;
    h3_err e = {{0}};
    int rc = h3_conv3d_check(&g, &to, &ho, &wo, name, &e);
    CHECK(rc == 0, "%s: %s", name, e.msg);
    if (rc) return;
    CHECK(to == et && ho == eh && wo == ew, "%s: output %lldx%lldx%lld, expected %lldx%lldx%lld", name, (long long)to,
          (long long)ho, (long long)wo, (long long)et, (long long)eh, (long long)ew);
    int64_t nx = g.cin * g.tin * g.hin * g.win, nw = g.cout * g.cin * g.kt * g.kh * g.kw, ny = g.cout * to * ho * wo;
    float *x = rand_host(nx, 1.0f, 0), *w = rand_host(nw, 1.0f, 0), *b = rand_host(g.cout, 1.0f, 0);
    float *y = malloc((size_t)ny * sizeof(float)), *ref = malloc((size_t)ny * sizeof(float));
    h3_conv3d(be, y, x, &g, w, b);
    naive_conv3d(ref, x, &g, w, b, to, ho, wo);
    char label[128];
    snprintf(label, sizeof label, "conv3d %s", name);
    CHECK_CLOSE(label, h3_rel_l2(y, ref, (size_t)ny), 1e-6);
    free(x), free(w), free(b), free(y), free(ref);
}

static void test_conv_ops(h3_backend *be) {
    printf("conv ops vs naive loops\n");
    /* causal conv: reflect 1, two zero frames in front (docs/model/video_vae.md 4.2) */
    check_conv3d(be, "causal k3 reflect", (h3_conv3d_geom){3, 4, 5, 6, 5, 3, 3, 3, 1, 1, 1, 2, 1, 1, 1, 1, H3_PAD_REFLECT},
                 4, 5, 6);
    /* downsampler (2,2,2): bottom/right reflect pad only (docs/model/video_vae.md 4.3) */
    check_conv3d(be, "downsample t2 s2", (h3_conv3d_geom){4, 5, 6, 8, 3, 3, 3, 3, 2, 2, 2, 2, 0, 1, 0, 1, H3_PAD_REFLECT},
                 3, 3, 4);
    check_conv3d(be, "downsample t1 s2 odd", (h3_conv3d_geom){2, 1, 7, 5, 2, 3, 3, 3, 1, 2, 2, 2, 0, 1, 0, 1, H3_PAD_REFLECT},
                 1, 3, 2);
    check_conv3d(be, "zero pad mixed strides", (h3_conv3d_geom){3, 3, 6, 5, 4, 3, 2, 3, 1, 2, 1, 1, 1, 0, 2, 1, H3_PAD_ZERO},
                 2, 3, 6);
    check_conv3d(be, "pointwise", (h3_conv3d_geom){6, 3, 4, 5, 7, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, H3_PAD_ZERO}, 3, 4, 5);
    /* large enough that the im2col runs in several row blocks */
    check_conv3d(be, "blocked im2col", (h3_conv3d_geom){64, 1, 130, 64, 2, 3, 3, 3, 1, 1, 1, 2, 1, 1, 1, 1, H3_PAD_REFLECT},
                 1, 130, 64);

    /* per-frame GroupNorm (+ fused SiLU), statistics never mixing frames (docs/model/video_vae.md 4.4) */
    const int64_t C = 8, T = 3, HW = 10;
    const int G = 4;
    float *x = rand_host(C * T * HW, 1.0f, 0), *w = rand_host(C, 1.0f, 0), *b = rand_host(C, 1.0f, 0);
    for (int64_t i = 0; i < C * T * HW; i++) x[i] = x[i] * 3.0f + (float)(i / HW % T); /* per-frame offsets */
    float *y = malloc((size_t)(C * T * HW) * sizeof(float)), *ref = malloc((size_t)(C * T * HW) * sizeof(float));
    for (int silu = 0; silu < 2; silu++) {
        h3_groupnorm_frames(be, y, x, C, T, HW, G, w, b, 1e-6f, silu);
        for (int64_t t = 0; t < T; t++)
            for (int g = 0; g < G; g++) {
                double s = 0, ss = 0;
                int64_t cg = C / G;
                for (int64_t c = g * cg; c < (g + 1) * cg; c++)
                    for (int64_t p = 0; p < HW; p++) s += x[(c * T + t) * HW + p];
                double m = s / (cg * HW);
                for (int64_t c = g * cg; c < (g + 1) * cg; c++)
                    for (int64_t p = 0; p < HW; p++) ss += pow(x[(c * T + t) * HW + p] - m, 2);
                double r = 1.0 / sqrt(ss / (cg * HW) + 1e-6);
                for (int64_t c = g * cg; c < (g + 1) * cg; c++)
                    for (int64_t p = 0; p < HW; p++) {
                        double v = (x[(c * T + t) * HW + p] - m) * r * w[c] + b[c];
                        if (silu) v = v / (1.0 + exp(-v));
                        ref[(c * T + t) * HW + p] = (float)v;
                    }
            }
        CHECK_CLOSE(silu ? "groupnorm_frames + silu" : "groupnorm_frames", h3_rel_l2(y, ref, (size_t)(C * T * HW)), 1e-6);
    }
    /* in place */
    memcpy(y, x, (size_t)(C * T * HW) * sizeof(float));
    h3_groupnorm_frames(be, y, y, C, T, HW, G, w, b, 1e-6f, 1);
    CHECK_CLOSE("groupnorm_frames in place", h3_rel_l2(y, ref, (size_t)(C * T * HW)), 1e-6);
    free(x), free(w), free(b), free(y), free(ref);

    h3_err e = {{0}};
    h3_conv3d_geom bad = {2, 1, 1, 4, 2, 3, 3, 3, 1, 1, 1, 2, 1, 1, 1, 1, H3_PAD_REFLECT};
    CHECK(h3_conv3d_check(&bad, NULL, NULL, NULL, "tiny", &e) != 0 && strstr(e.msg, "reflect"),
          "reflect pad on a 1-row input must fail: '%s'", e.msg);
}

/* ---- geometry against the docs/model/video_vae.md and the release index ----------------------------------------- */

static void test_geometry(void) {
    printf("geometry (release config from the skeleton)\n");
    video_vae_config c;
    h3_err e = {{0}};
    int rc = video_vae_config_load(SKELETON_VAE, &c, &e);
    CHECK(rc == 0, "skeleton config: %s", e.msg);
    if (rc) return;
    CHECK(c.S == 16 && c.R == 4 && c.P == 3 && c.K == 5 && c.O == 2 && c.FO == 5 && c.CF == 20,
          "derived S %d R %d P %d K %d O %d FO %d CF %d", c.S, c.R, c.P, c.K, c.O, c.FO, c.CF);
    CHECK(c.dim == 2048 && c.rope_dim == 48 && c.patch_dim == 3072 && c.ffn_inner == 8192, "decoder dims");
    CHECK(c.latents_mean[0] == 0.858090341091156f && c.latents_std[23] == 2.6127843856811523f, "latent stats");

    /* docs/model/video_vae.md 8.3 output lengths */
    const int64_t L[] = {5, 6, 7, 8, 9, 10, 11, 12, 13, 17, 37, 107}, T[] = {17, 18, 22, 26, 30, 34, 35, 39, 43, 56, 124, 362};
    int ok = 1;
    for (int i = 0; i < 12; i++) ok &= video_vae_decoded_frames(&c, L[i], &e) == T[i];
    CHECK(ok, "decoded frame counts differ from docs/model/video_vae.md 8.3");
    CHECK(video_vae_decoded_frames(&c, 2, &e) < 0 && strstr(e.msg, "at least 3"), "L = 2 must fail: '%s'", e.msg);
    CHECK(video_vae_decoded_frames(&c, 3, &e) == 9 && video_vae_decoded_frames(&c, 4, &e) == 13, "L = 3, 4");
    /* docs/model/video_vae.md 6 encode lengths */
    CHECK(video_vae_encoded_frames(&c, 22) == 7 && video_vae_encoded_frames(&c, 39) == 12 &&
              video_vae_encoded_frames(&c, 30) == 7 && video_vae_encoded_frames(&c, 17) == 2 &&
              video_vae_encoded_frames(&c, 5) == 2 && video_vae_encoded_frames(&c, 1) == 1 &&
              video_vae_encoded_frames(&c, 124) == 37,
          "encoded frame counts differ from docs/model/video_vae.md 6");

    /* docs/model/video_vae.md 8.1 tile plans */
    struct { int64_t len; int n; int64_t starts[11]; } plans[] = {
        {256, 1, {0}}, {512, 3, {0, 128, 256}}, {768, 4, {0, 160, 336, 512}}, {1024, 5, {0, 192, 384, 576, 768}},
        {1344, 7, {0, 176, 352, 528, 704, 896, 1088}},
        {2048, 11, {0, 176, 352, 528, 704, 880, 1056, 1232, 1408, 1600, 1792}}};
    for (size_t p = 0; p < sizeof plans / sizeof plans[0]; p++) {
        int64_t st[64], ov[64];
        int n = video_vae_split_tiles(plans[p].len, 256, 64, 16, st, ov, 64, &e);
        int same = n == plans[p].n;
        for (int i = 0; same && i < n; i++) same = st[i] == plans[p].starts[i];
        CHECK(same, "tile plan for %lld px differs from docs/model/video_vae.md 8.1", (long long)plans[p].len);
    }
    int64_t st[64], ov[64];
    int n = video_vae_split_tiles(3648, 256, 64, 16, st, ov, 64, &e);
    CHECK(n == 19 && st[4] == 704 && st[5] == 896 && st[18] == 3392 && ov[3] == 80 && ov[4] == 64, "3648 px plan");

    /* tensor list == the release index (names and total size) */
    h3_expect_list l = {0};
    CHECK(video_vae_expected_tensors(&c, &l, &e) == 0, "expected tensors: %s", e.msg);
    int64_t bytes = 0;
    for (int i = 0; i < l.n; i++) {
        int64_t k = 4;
        for (int d = 0; d < l.v[i].ndim; d++) k *= l.v[i].shape[d];
        bytes += k;
    }
    CHECK(l.n == 703 && bytes == 10415475936LL, "tensor list: %d tensors, %lld bytes (release: 703, 10415475936)", l.n,
          (long long)bytes);
    json_error_t je;
    json_t *idx = json_load_file(SKELETON_VAE "/diffusion_pytorch_model.safetensors.index.json", 0, &je);
    json_t *map = idx ? json_object_get(idx, "weight_map") : NULL;
    int all = map && (int)json_object_size(map) == l.n;
    for (int i = 0; all && i < l.n; i++) all = json_object_get(map, l.v[i].name) != NULL;
    CHECK(all, "tensor names differ from the release index");
    json_decref(idx);
    h3_expect_list_free(&l);
}

/* ---- goldens --------------------------------------------------------------------------------- */

static h3_tensor *load_f32(st_set *s, const char *name) {
    h3_tensor v;
    h3_err e;
    if (st_set_get(s, name, &v, &e) != 0) return NULL;
    return h3_tensor_to_f32(&v, &e);
}

static video_vae_tiling case_tiling(st_set *in) {
    video_vae_tiling t = video_vae_tiling_default();
    h3_tensor v;
    h3_err e;
    if (st_set_get(in, "tiling", &v, &e) == 0) {
        const int64_t *p = v.data;
        t.enabled = p[0] != 0;
        t.tile_h = (int)p[0], t.tile_w = (int)p[1], t.overlap_h = (int)p[2], t.overlap_w = (int)p[3];
    }
    return t;
}

static void compare_t(const char *label, const float *got, const h3_tensor *ref, double tol) {
    compare(label, got, ref->data, h3_tensor_numel(ref), tol);
}

/* tol: rel L2 bound vs the fp32 golden; tag: a label prefix ("" or "bf16 "). */
static void run_decode_case_tol(video_vae *v, const char *name, double tol, const char *tag) {
    char pin[512], pout[512];
    snprintf(pin, sizeof pin, GOLD "/%s.in.safetensors", name);
    snprintf(pout, sizeof pout, GOLD "/%s.out.safetensors", name);
    h3_err e = {{0}};
    st_set *in = st_set_open(pin, &e), *out = in ? st_set_open(pout, &e) : NULL;
    CHECK(in && out, "%s: %s", name, e.msg);
    if (!in || !out) goto done;
    h3_tensor *z = load_f32(in, "latents"), *ref = load_f32(out, "sample");
    video_vae_tiling t = case_tiling(in);
    const int64_t L = z->shape[2], h = z->shape[3], w = z->shape[4];
    int64_t T = video_vae_decoded_frames(video_vae_get_config(v), L, &e);
    CHECK(T == ref->shape[2], "%s: %lld frames, reference %lld", name, (long long)T, (long long)ref->shape[2]);
    float *got = malloc((size_t)h3_tensor_numel(ref) * sizeof(float));
    double t0 = now_s();
    int rc = video_vae_decode(v, z->data, L, h, w, &t, got, &e);
    CHECK(rc == 0, "%s: %s", name, e.msg);
    char label[160];
    snprintf(label, sizeof label, "%s%s (L=%lld -> %lld frames, %.2fs)", tag, name, (long long)L, (long long)T,
             now_s() - t0);
    if (rc == 0) compare_t(label, got, ref, tol);
    free(got);
    h3_tensor_free(z);
    h3_tensor_free(ref);
done:
    st_set_free(in);
    st_set_free(out);
}

static void run_decode_case(video_vae *v, const char *name) { run_decode_case_tol(v, name, 1e-4, ""); }

static void run_encode_case(video_vae *v, const char *name) {
    char pin[512], pout[512];
    snprintf(pin, sizeof pin, GOLD "/%s.in.safetensors", name);
    snprintf(pout, sizeof pout, GOLD "/%s.out.safetensors", name);
    h3_err e = {{0}};
    st_set *in = st_set_open(pin, &e), *out = in ? st_set_open(pout, &e) : NULL;
    CHECK(in && out, "%s: %s", name, e.msg);
    if (!in || !out) goto done;
    const video_vae_config *c = video_vae_get_config(v);
    h3_tensor *x = load_f32(in, "sample"), *rm = load_f32(out, "mean"), *rl = load_f32(out, "logvar");
    video_vae_tiling t = case_tiling(in);
    const int64_t T = x->shape[2], H = x->shape[3], W = x->shape[4], Tl = video_vae_encoded_frames(c, T);
    const int64_t n = Tl * (H / c->S) * (W / c->S);
    CHECK(Tl == rm->shape[2], "%s: %lld latent frames, reference %lld", name, (long long)Tl, (long long)rm->shape[2]);
    float *mom = malloc((size_t)(2 * c->latent_channels * n) * sizeof(float));
    float *mean = malloc((size_t)(c->latent_channels * n) * sizeof(float)), *lv = malloc((size_t)(c->latent_channels * n) * sizeof(float));
    double t0 = now_s();
    int rc = video_vae_encode(v, x->data, T, H, W, &t, mom, &e);
    CHECK(rc == 0, "%s: %s", name, e.msg);
    if (rc == 0) {
        video_vae_posterior(c, mom, n, mean, lv);
        char label[160];
        snprintf(label, sizeof label, "%s mean (T=%lld -> %lld, %.2fs)", name, (long long)T, (long long)Tl, now_s() - t0);
        compare_t(label, mean, rm, 1e-4);
        snprintf(label, sizeof label, "%s logvar", name);
        compare_t(label, lv, rl, 1e-4);
    }
    free(mom), free(mean), free(lv);
    h3_tensor_free(x), h3_tensor_free(rm), h3_tensor_free(rl);
done:
    st_set_free(in);
    st_set_free(out);
}

static void test_goldens(h3_backend *be) {
    printf("parity with diffusers (spec-16 model, %s)\n", GOLD_MODEL);
    h3_err e = {{0}};
    video_vae *v = video_vae_new(be, GOLD_MODEL, VIDEO_VAE_ENCODER | VIDEO_VAE_DECODER, &e);
    CHECK(v != NULL, "load: %s", e.msg);
    if (!v) return;
    const char *dec[] = {"decode_L7", "decode_L8", "decode_L11", "decode_L12", "decode_L7_untiled", "decode_L3"};
    for (size_t i = 0; i < sizeof dec / sizeof dec[0]; i++) run_decode_case(v, dec[i]);
    const char *enc[] = {"encode_T1", "encode_T17", "encode_T22", "encode_T39", "encode_T5"};
    for (size_t i = 0; i < sizeof enc / sizeof enc[0]; i++) run_encode_case(v, enc[i]);

    /* causality invariants (docs/model/video_vae.md 5, exact in the reference): a single frame encodes to latent 0 of any
     * clip starting with it; changing frames >= 9 leaves latents 0..2 of the clip unchanged */
    {
        const video_vae_config *c = video_vae_get_config(v);
        const int64_t H = 16, W = 16, n1 = (H / c->S) * (W / c->S), C2 = 2 * c->latent_channels, Tl = 2;
        float *clip = rand_host(3 * 17 * H * W, 1.0f, 0), *first = malloc(3 * H * W * sizeof(float));
        for (int ch = 0; ch < 3; ch++) memcpy(first + ch * H * W, clip + ch * 17 * H * W, H * W * sizeof(float));
        float *m1 = malloc(C2 * n1 * sizeof(float)), *m17 = malloc(C2 * Tl * n1 * sizeof(float));
        float *m17b = malloc(C2 * Tl * n1 * sizeof(float));
        int ok = video_vae_encode(v, first, 1, H, W, NULL, m1, &e) == 0 && video_vae_encode(v, clip, 17, H, W, NULL, m17, &e) == 0;
        double d0 = 0;
        for (int64_t ch = 0; ok && ch < C2; ch++)
            for (int64_t i = 0; i < n1; i++) d0 = fmax(d0, fabs(m1[ch * n1 + i] - m17[ch * Tl * n1 + i]));
        for (int ch = 0; ch < 3; ch++)
            for (int f = 9; f < 17; f++)
                for (int64_t i = 0; i < H * W; i++) clip[(ch * 17 + f) * H * W + i] += 1.0f;
        ok = ok && video_vae_encode(v, clip, 17, H, W, NULL, m17b, &e) == 0;
        /* T = 17 keeps latents 0, 1 of 5 (token drop); 0..2 would be unchanged, 0..1 are what is left */
        double d1 = 0;
        for (int64_t i = 0; ok && i < C2 * Tl * n1; i++) d1 = fmax(d1, fabs(m17[i] - m17b[i]));
        CHECK(ok, "invariant encodes: %s", e.msg);
        printf("  single frame vs clip latent 0: max |diff| %.3e; latents 0..1 after changing frames 9..16: %.3e\n", d0, d1);
        CHECK(d0 <= 1e-6 && d1 == 0.0, "causality invariants: %.3e, %.3e", d0, d1);
        free(clip), free(first), free(m1), free(m17), free(m17b);
    }

    /* error paths on the loaded model */
    float z[4 * 2 * 2 * 2] = {0}, out[1] = {0};
    CHECK(video_vae_decode(v, z, 2, 2, 2, NULL, out, &e) != 0 && strstr(e.msg, "latent frames"),
          "decode L=2: '%s'", e.msg);
    float *px = calloc(3 * 20 * 20, sizeof(float)), mom[64];
    CHECK(video_vae_encode(v, px, 1, 20, 20, NULL, mom, &e) != 0 && strstr(e.msg, "multiples"),
          "encode 20 px: '%s'", e.msg);
    CHECK(video_vae_encode(v, px, 1, 8, 16, NULL, mom, &e) != 0 && strstr(e.msg, "reflect"), "encode 8 px: '%s'", e.msg);
    video_vae_tiling bad = {1, 16, 16, 16, 8};
    CHECK(video_vae_encode(v, px, 1, 16, 16, &bad, mom, &e) != 0 && strstr(e.msg, "overlap"), "bad tiling: '%s'", e.msg);
    video_vae_tiling odd = {1, 20, 16, 8, 8};
    CHECK(video_vae_decode(v, z, 3, 2, 2, &odd, out, &e) != 0 && strstr(e.msg, "multiples"), "tile 20: '%s'", e.msg);
    free(px);
    video_vae_free(v);

    printf("tiny snapshot (%s)\n", TINY_VAE);
    v = video_vae_new(be, TINY_VAE, VIDEO_VAE_ENCODER | VIDEO_VAE_DECODER, &e);
    CHECK(v != NULL, "tiny load: %s", e.msg);
    if (!v) return;
    CHECK(video_vae_get_config(v)->latent_channels == 24 && video_vae_get_config(v)->S == 16, "tiny geometry");
    run_decode_case(v, "tiny_decode");
    run_encode_case(v, "tiny_encode");
    video_vae_free(v);
}

/* ---- loader errors ------------------------------------------------------------------------------ */

static void test_load_errors(h3_backend *be) {
    printf("load errors\n");
    h3_err e = {{0}};
    CHECK(video_vae_new(be, "tests/fixtures/no_such_dir", VIDEO_VAE_DECODER, &e) == NULL && strstr(e.msg, "config.json"),
          "missing dir: '%s'", e.msg);
    /* a config that disagrees with the weights: ffn_mult 3 */
    char dir[] = "/tmp/h3_vvae_XXXXXX";
    if (!mkdtemp(dir)) return;
    char path[600], src[1200];
    const char *files[] = {"diffusion_pytorch_model.safetensors.index.json", "diffusion_pytorch_model-00001-of-00003.safetensors",
                           "diffusion_pytorch_model-00002-of-00003.safetensors", "diffusion_pytorch_model-00003-of-00003.safetensors"};
    char cwd[512];
    if (!getcwd(cwd, sizeof cwd)) return;
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        snprintf(src, sizeof src, "%s/" GOLD_MODEL "/%s", cwd, files[i]);
        CHECK(symlink(src, path) == 0, "symlink %s", path);
    }
    json_error_t je;
    json_t *cfg = json_load_file(GOLD_MODEL "/config.json", 0, &je);
    json_object_set_new(cfg, "decoder_ffn_mult", json_integer(3));
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_dump_file(cfg, path, 0);
    CHECK(video_vae_new(be, dir, VIDEO_VAE_DECODER, &e) == NULL && strstr(e.msg, "ff.net.0.proj.weight") &&
              strstr(e.msg, "[192,32]"),
          "shape mismatch: '%s'", e.msg);
    json_object_set_new(cfg, "decoder_ffn_mult", json_integer(2));
    json_object_set_new(cfg, "decoder_attention_head_dim", json_integer(12)); /* int(12 * .75) = 9: not a multiple of 6 */
    json_dump_file(cfg, path, 0);
    CHECK(video_vae_new(be, dir, VIDEO_VAE_DECODER, &e) == NULL && strstr(e.msg, "multiple of 6"), "rope dims: '%s'", e.msg);
    json_object_set_new(cfg, "decoder_attention_head_dim", json_integer(16));
    json_object_set_new(cfg, "latents_std", json_pack("[f,f]", 1.0, 2.0));
    json_dump_file(cfg, path, 0);
    CHECK(video_vae_new(be, dir, VIDEO_VAE_DECODER, &e) == NULL && strstr(e.msg, "latents_std"), "stats: '%s'", e.msg);
    json_decref(cfg);
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/config.json", dir);
    unlink(path);
    rmdir(dir);
}

static void test_normalization(void) {
    printf("normalization helpers\n");
    video_vae_config c;
    h3_err e;
    if (video_vae_config_load(GOLD_MODEL, &c, &e) != 0) {
        CHECK(0, "config: %s", e.msg);
        return;
    }
    float z[4 * 3], z0[4 * 3];
    for (int i = 0; i < 12; i++) z[i] = z0[i] = frand();
    video_vae_normalize_latents(&c, z, 3);
    CHECK(z[0] == (z0[0] - 0.1f) / 1.5f && z[3] == (z0[3] + 0.2f) / 0.5f, "normalize = (z - mean) / std");
    video_vae_denormalize_latents(&c, z, 3);
    CHECK(fabsf(z[5] - z0[5]) < 1e-6f, "denormalize inverts normalize");
    uint8_t p[3] = {0, 128, 255};
    float x[3];
    video_vae_pixels_from_u8(p, x, 1);
    CHECK(x[0] == (0.0f - 0.485f) / 0.229f && x[1] == (128.0f / 255.0f - 0.456f) / 0.224f &&
              x[2] == (1.0f - 0.406f) / 0.225f, "pixels_from_u8");
    video_vae_denormalize_pixels(x, 1);
    CHECK(x[0] == 0.0f && fabsf(x[1] - 128.0f / 255.0f) < 1e-6f && fabsf(x[2] - 1.0f) < 1e-6f, "denormalize_pixels");
    float m[2 * 4 * 1], mean[4], lv[4];
    for (int i = 0; i < 8; i++) m[i] = (float)(i - 4) * 20.0f;
    video_vae_posterior(&c, m, 1, mean, lv);
    CHECK(mean[0] == -80.0f && lv[0] == 0.0f && lv[3] == 20.0f, "posterior clamp");
}

/* bf16 decoder mode (docs/model/video_vae.md 11) against the same fp32 goldens. BF16_DECODE_TOL: see docs/video_vae.md
 * ("bf16 decode"): the bound is derived from diffusers' own reduced-precision decode of these goldens. */
#define BF16_DECODE_TOL 1.2e-2
static void test_bf16_decode(h3_backend *be) {
    printf("bf16 decoder mode vs the fp32 diffusers goldens\n");
    h3_err e = {{0}};
    video_vae *v = video_vae_new(be, GOLD_MODEL, VIDEO_VAE_DECODER | VIDEO_VAE_BF16, &e);
    CHECK(v != NULL, "bf16 load: %s", e.msg);
    if (!v) return;
    const char *dec[] = {"decode_L7", "decode_L11", "decode_L7_untiled", "decode_L3"};
    for (size_t i = 0; i < sizeof dec / sizeof dec[0]; i++) run_decode_case_tol(v, dec[i], BF16_DECODE_TOL, "bf16 ");
    video_vae_free(v);
    v = video_vae_new(be, TINY_VAE, VIDEO_VAE_DECODER | VIDEO_VAE_BF16, &e);
    CHECK(v != NULL, "bf16 tiny load: %s", e.msg);
    if (!v) return;
    run_decode_case_tol(v, "tiny_decode", BF16_DECODE_TOL, "bf16 ");
    video_vae_free(v);
    /* the encoder has no bf16 mode: the flag is ignored there, the fp32 encode is unchanged */
    v = video_vae_new(be, GOLD_MODEL, VIDEO_VAE_ENCODER | VIDEO_VAE_BF16, &e);
    CHECK(v != NULL, "bf16 flag with the encoder: %s", e.msg);
    if (v) run_encode_case(v, "encode_T1");
    video_vae_free(v);
}

/* --vae-quant fp8 (docs/fast.md 7): the bf16 mode with the block GEMMs as FP8 W8A8, against the same fp32
 * goldens. Not the reference's arithmetic: FP8_DECODE_TOL is a bound on the measured error (docs/fast.md gives the
 * numbers), and the decode must differ from the bf16 mode's (the FP8 GEMMs ran) and repeat bit for bit. */
#define FP8_DECODE_TOL 5e-2
static void test_fp8_decode(h3_backend *be) {
    printf("fp8 decoder mode (--vae-quant fp8) vs the fp32 diffusers goldens\n");
    h3_err e = {{0}};
    video_vae *v = video_vae_new(be, GOLD_MODEL, VIDEO_VAE_DECODER | VIDEO_VAE_FP8, &e);
    CHECK(v != NULL, "fp8 load: %s", e.msg);
    if (!v) return;
    const char *dec[] = {"decode_L7", "decode_L11", "decode_L7_untiled", "decode_L3"};
    for (size_t i = 0; i < sizeof dec / sizeof dec[0]; i++) run_decode_case_tol(v, dec[i], FP8_DECODE_TOL, "fp8 ");
    /* against the bf16 mode on one case: different (the FP8 path ran), and the same bits twice */
    video_vae *vb = video_vae_new(be, GOLD_MODEL, VIDEO_VAE_DECODER | VIDEO_VAE_BF16, &e);
    st_set *in = st_set_open(GOLD "/decode_L7.in.safetensors", &e);
    CHECK(vb && in, "%s", e.msg);
    if (vb && in) {
        h3_tensor *z = load_f32(in, "latents");
        video_vae_tiling t = case_tiling(in);
        const int64_t L = z->shape[2], h = z->shape[3], w = z->shape[4];
        const video_vae_config *c = video_vae_get_config(v);
        const int64_t n = video_vae_decoded_frames(c, L, &e) * 3 * h * c->S * w * c->S;
        float *a = malloc((size_t)n * sizeof(float)), *a2 = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
        int ok = video_vae_decode(v, z->data, L, h, w, &t, a, &e) == 0 && video_vae_decode(v, z->data, L, h, w, &t, a2, &e) == 0 &&
                 video_vae_decode(vb, z->data, L, h, w, &t, b, &e) == 0;
        CHECK(ok, "%s", e.msg);
        if (ok) {
            double rel = h3_rel_l2(a, b, (size_t)n);
            printf("  fp8 vs bf16 decoder mode, decode_L7: rel_l2 %.3e\n", rel);
            CHECK(rel > 0, "the fp8 decode equals the bf16 one: the FP8 GEMMs did not run");
            CHECK(!memcmp(a, a2, (size_t)n * sizeof(float)), "two fp8 decodes differ");
        }
        free(a), free(a2), free(b);
        h3_tensor_free(z);
    }
    st_set_free(in);
    video_vae_free(vb);
    video_vae_free(v);
    v = video_vae_new(be, TINY_VAE, VIDEO_VAE_DECODER | VIDEO_VAE_FP8, &e);
    CHECK(v != NULL, "fp8 tiny load: %s", e.msg);
    if (v) run_decode_case_tol(v, "tiny_decode", FP8_DECODE_TOL, "fp8 ");
    video_vae_free(v);
}

/* The tile-batched bf16 decoder (default) against the per-tile one (batch 1) and batches of 2 and 4 (batches
 * that end mid-clip and span clips): the same operations on the same rows; only OpenBLAS's sgemm may round a row
 * differently for another M (seen: 1 ulp, 1.2e-7), so max abs <= 1e-6 rather than bit-identical. */
static void test_bf16_batched(h3_backend *be) {
    printf("bf16 decoder: tile-batched vs per-tile\n");
    h3_err e = {{0}};
    const char *models[2] = {GOLD_MODEL, TINY_VAE}, *cases[2] = {"decode_L11", "tiny_decode"};
    for (int mi = 0; mi < 2; mi++) {
        video_vae *v = video_vae_new(be, models[mi], VIDEO_VAE_DECODER | VIDEO_VAE_BF16, &e);
        CHECK(v != NULL, "bf16 load: %s", e.msg);
        if (!v) continue;
        char pin[512];
        snprintf(pin, sizeof pin, GOLD "/%s.in.safetensors", cases[mi]);
        st_set *in = st_set_open(pin, &e);
        CHECK(in != NULL, "%s: %s", cases[mi], e.msg);
        if (!in) {
            video_vae_free(v);
            continue;
        }
        h3_tensor *z = load_f32(in, "latents");
        video_vae_tiling t = case_tiling(in);
        const int64_t L = z->shape[2], h = z->shape[3], w = z->shape[4];
        const video_vae_config *c = video_vae_get_config(v);
        const int64_t n = video_vae_decoded_frames(c, L, &e) * 3 * h * c->S * w * c->S;
        float *ref = malloc((size_t)n * sizeof(float)), *got = malloc((size_t)n * sizeof(float));
        video_vae_set_decode_batch(v, 1);
        CHECK(video_vae_decode(v, z->data, L, h, w, &t, ref, &e) == 0, "per-tile: %s", e.msg);
        const int batches[3] = {0, 2, 4};
        for (int b = 0; b < 3; b++) {
            video_vae_set_decode_batch(v, batches[b]);
            memset(got, 0, (size_t)n * sizeof(float));
            CHECK(video_vae_decode(v, z->data, L, h, w, &t, got, &e) == 0, "batched: %s", e.msg);
            char label[128];
            snprintf(label, sizeof label, "%s batch %d vs per-tile", cases[mi], batches[b]);
            CHECK(h3_max_abs(got, ref, (size_t)n) <= 1e-6, "%s: max abs %.3e", label, h3_max_abs(got, ref, (size_t)n));
            printf("    %-40s max abs %.3e\n", label, h3_max_abs(got, ref, (size_t)n));
        }
        free(ref), free(got);
        h3_tensor_free(z);
        st_set_free(in);
        video_vae_free(v);
    }
}

int main(void) {
    test_seed(0x9E3779B97F4A7C15ull);
    h3_err e = {{0}};
    h3_backend *be = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    if (!be) {
        fprintf(stderr, "backend: %s\n", e.msg);
        return 1;
    }
    test_conv_ops(be); /* with the default threads: the parallel paths of the ops are exercised */
    /* The golden models are tiny: thousands of small ops, where thread hand-offs cost more than the
     * work (and crawl on an oversubscribed machine). One thread keeps this binary at ~2 s. */
    omp_set_num_threads(1);
    openblas_set_num_threads(1);
    test_geometry();
    test_goldens(be);
    test_bf16_decode(be);
    test_bf16_batched(be);
    test_fp8_decode(be);
    test_load_errors(be);
    test_normalization();
    h3_backend_free(be);
    TEST_END();
}
