/* fl2va / ref2va conditioning (src/media/resize.c, src/pipeline/condition.c) against goldens made
 * by tools/reference/gen_condition.py with Pillow and the diffusers minimax_h3 blocks themselves:
 * PIL resampling bit for bit, keyframe fitting and canvases, reference image sizes and video frames,
 * encode_vae_condition and the reference audio rows on the tiny VAEs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "media/resize.h"
#include "model/audio_vae.h"
#include "model/video_vae.h"
#include "pipeline/condition.h"
#include "pipeline/layout.h"
#include "pipeline/noise.h"
#include "test.h"
#include "test_data.h"

#define GOLD "tests/fixtures/golden/condition"

static st_set *open_gold(const char *file) {
    char path[512];
    h3_err e;
    snprintf(path, sizeof path, GOLD "/%s", file);
    st_set *s = st_set_open(path, &e);
    CHECK(s != NULL, "%s", e.msg);
    return s;
}

/* A view of a stored tensor (dtype as written); NULL when absent. */
static const void *get(st_set *s, const char *name, h3_tensor *v) {
    h3_err e;
    if (st_set_get(s, name, v, &e)) return NULL;
    return v->data;
}

static int64_t numel(const h3_tensor *v) { return h3_tensor_numel(v); }

static int count_diff_u8(const uint8_t *a, const uint8_t *b, int64_t n) {
    int d = 0;
    for (int64_t i = 0; i < n; i++) d += a[i] != b[i];
    return d;
}

static void test_resize(void) {
    st_set *s = open_gold("resize.safetensors");
    if (!s) return;
    int cases = 0;
    for (int i = 0;; i++) {
        char name[64];
        h3_tensor pv, sv, dv;
        snprintf(name, sizeof name, "case%d.params", i);
        const int64_t *p = get(s, name, &pv);
        if (!p) break;
        snprintf(name, sizeof name, "case%d.src", i);
        const uint8_t *src = get(s, name, &sv);
        snprintf(name, sizeof name, "case%d.dst", i);
        const uint8_t *ref = get(s, name, &dv);
        int sw = (int)p[0], sh = (int)p[1], dw = (int)p[2], dh = (int)p[3];
        uint8_t *got = malloc((size_t)dw * dh * 3);
        h3_err e;
        int rc = h3_resize_rgb(src, sw, sh, got, dw, dh, (h3_resample)p[4], &e);
        CHECK(rc == 0, "resize case %d: %s", i, e.msg);
        int d = rc ? -1 : count_diff_u8(got, ref, (int64_t)dw * dh * 3);
        printf("  resize %3dx%-3d -> %3dx%-3d filter %d: %d of %d bytes differ from PIL\n", sw, sh, dw, dh, (int)p[4], d,
               dw * dh * 3);
        CHECK(d == 0, "resize case %d differs from PIL in %d bytes", i, d);
        free(got);
        cases++;
    }
    CHECK(cases >= 8, "only %d resize cases found", cases);
    h3_err e;
    uint8_t px[3] = {0};
    CHECK(h3_resize_rgb(px, 1, 1, px, 0, 1, H3_RESAMPLE_LANCZOS, &e) == -1 && strstr(e.msg, "positive"), "%s", e.msg);
    CHECK(h3_crop_rgb(px, 1, 1, 0, 0, px, 2, 1, &e) == -1 && strstr(e.msg, "outside"), "%s", e.msg);
    st_set_free(s);
}

static void test_keyframes(void) {
    st_set *s = open_gold("keyframes.safetensors");
    if (!s) return;
    for (int i = 0;; i++) {
        char name[64];
        h3_tensor cv, v;
        snprintf(name, sizeof name, "case%d.canvas", i);
        const int64_t *canvas = get(s, name, &cv);
        if (!canvas) break;
        int H = (int)canvas[0], W = (int)canvas[1], explicit_canvas = (int)canvas[2];
        const char *names[2] = {"first", "last"};
        const uint8_t *img[2] = {NULL, NULL};
        int sz[2][2] = {{0}}, n = 0;
        int idx[2];
        for (int k = 0; k < 2; k++) {
            snprintf(name, sizeof name, "case%d.%s_size", i, names[k]);
            const int64_t *z = get(s, name, &v);
            if (!z) continue;
            sz[n][0] = (int)z[0], sz[n][1] = (int)z[1];
            snprintf(name, sizeof name, "case%d.%s", i, names[k]);
            img[n] = get(s, name, &v);
            idx[n] = n;
            n++;
        }
        h3_err e;
        if (!explicit_canvas) { /* the fl2va default canvas from the first keyframe's aspect */
            int h, w;
            CHECK(cond_fl2va_canvas(sz[0][0], sz[0][1], &h, &w, &e) == 0, "%s", e.msg);
            printf("  keyframe case %d: default canvas for %dx%d = %dx%d (reference %dx%d)\n", i, sz[0][0], sz[0][1], w, h,
                   W, H);
            CHECK(h == H && w == W, "case %d canvas %dx%d, reference %dx%d", i, w, h, W, H);
            continue;
        }
        for (int k = 0; k < n; k++) {
            uint8_t *got = malloc((size_t)W * H * 3);
            int rc = cond_fit_keyframe(img[k], sz[k][0], sz[k][1], idx[k], W, H, got, &e);
            CHECK(rc == 0, "%s", e.msg);
            snprintf(name, sizeof name, "case%d.keyframe%d", i, k);
            const uint8_t *ref = get(s, name, &v);
            CHECK(ref && numel(&v) == (int64_t)W * H * 3, "case %d keyframe %d missing", i, k);
            int d = ref && !rc ? count_diff_u8(got, ref, (int64_t)W * H * 3) : -1;
            printf("  keyframe case %d #%d %dx%d -> %dx%d (%s): %d bytes differ\n", i, k, sz[k][0], sz[k][1], W, H,
                   k == 0 ? "stretch" : "cover+crop", d);
            CHECK(d == 0, "keyframe case %d #%d differs in %d bytes", i, k, d);
            free(got);
        }
    }
    st_set_free(s);
}

static void test_references(void) {
    st_set *s = open_gold("references.safetensors");
    if (!s) return;
    h3_tensor iv, ov, v;
    const int64_t *in = get(s, "image_sizes.in", &iv), *out = get(s, "image_sizes.out", &ov);
    h3_err e;
    for (int64_t i = 0; in && out && i < iv.shape[0]; i++) {
        int w, h;
        CHECK(cond_ref_image_size((int)in[2 * i], (int)in[2 * i + 1], "--ref-image", COND_REF_SIZE_REFERENCE, 64, 32, &w,
                                  &h, &e) == 0, "%s", e.msg);
        CHECK(w == out[2 * i] && h == out[2 * i + 1], "image %lldx%lld -> %dx%d, reference %lldx%lld", (long long)in[2 * i],
              (long long)in[2 * i + 1], w, h, (long long)out[2 * i], (long long)out[2 * i + 1]);
    }
    int w, h;
    CHECK(cond_ref_image_size(500, 100, "--ref-image x.png", COND_REF_SIZE_REFERENCE, 64, 32, &w, &h, &e) == -1 &&
              strstr(e.msg, "1:4"), "%s", e.msg);
    /* the Metal engine's policies, docs/model/features.md 1.3's examples: `match` scales down only to the canvas's area,
     * `max` down only to a 2048 short edge; both keep the 1:4..4:1 rule */
    static const int pol[][7] = {
        {COND_REF_SIZE_MATCH, 1920, 1080, 512, 512, 672, 384},    /* docs/model/features.md 1.3's example */
        {COND_REF_SIZE_MATCH, 640, 480, 1024, 1024, 640, 480},    /* smaller than the canvas: kept */
        {COND_REF_SIZE_MATCH, 650, 481, 1024, 1024, 640, 480},    /* kept, sides to multiples of 32 */
        {COND_REF_SIZE_MATCH, 64, 64, 64, 32, 32, 32},            /* 2048 pixels: 45.25 -> 32 */
        {COND_REF_SIZE_MAX, 4096, 2160, 64, 32, 3872, 2048},      /* docs/model/features.md 1.3's example */
        {COND_REF_SIZE_MAX, 640, 480, 64, 32, 640, 480},          /* never enlarged */
        {COND_REF_SIZE_REFERENCE, 640, 480, 64, 32, 2720, 2048},  /* the reference enlarges to a 2048 short edge */
    };
    for (size_t i = 0; i < sizeof pol / sizeof pol[0]; i++) {
        const int *c = pol[i];
        int ok = cond_ref_image_size(c[1], c[2], "--ref-image", (cond_ref_size)c[0], c[3], c[4], &w, &h, &e) == 0;
        CHECK(ok && w == c[5] && h == c[6], "policy %d: %dx%d under %dx%d -> %dx%d, want %dx%d", c[0], c[1], c[2], c[3],
              c[4], w, h, c[5], c[6]);
    }
    CHECK(cond_ref_image_size(500, 100, "--ref-image x.png", COND_REF_SIZE_MATCH, 512, 512, &w, &h, &e) == -1 &&
              strstr(e.msg, "1:4"), "match keeps the aspect rule: %s", e.msg);

    const uint8_t *video = get(s, "video.in", &v);
    int n = (int)v.shape[0], vh = (int)v.shape[1], vw = (int)v.shape[2];
    h3_tensor pv, rv;
    const int64_t *p = get(s, "video.params", &pv);
    const uint8_t *ref = get(s, "video.out", &rv);
    uint8_t *got = NULL;
    int no, ow, oh;
    int rc = cond_ref_video_frames(video, n, vw, vh, (int)p[0], (int)p[1], p[2], "--ref-video v.mp4", &got, &no, &ow, &oh, &e);
    CHECK(rc == 0, "%s", e.msg);
    CHECK(!rc && no == rv.shape[0] && oh == rv.shape[1] && ow == rv.shape[2], "video frames %dx%dx%d vs reference", no, oh, ow);
    if (!rc && no == rv.shape[0]) {
        int d = count_diff_u8(got, ref, numel(&rv));
        printf("  reference video %d frames %dx%d -> %d frames %dx%d: %d bytes differ\n", n, vw, vh, no, ow, oh, d);
        CHECK(d == 0, "video frames differ in %d bytes", d);
    }
    free(got);
    CHECK(cond_ref_video_frames(video, 4, vw, vh, 124, 768, 768 * 1344, "--ref-video v.mp4", &got, &no, &ow, &oh, &e) == -1 &&
              strstr(e.msg, "at least 5"), "%s", e.msg);
    /* the released rule agrees with the layout's canvas */
    int h1, w1, h2, w2;
    CHECK(cond_resolve_canvas(1920, 1080, 768, 768 * 1344, &h1, &w1, &e) == 0 && layout_resolve_canvas(1920, 1080, &h2, &w2, &e) == 0 &&
              h1 == h2 && w1 == w2 && h1 == 768 && w1 == 1344, "canvas %dx%d", w1, h1);
    /* snap down to 17n + 5 (encoders.py), never past the frames there are */
    CHECK(cond_ref_video_encode_frames(25) == 22 && cond_ref_video_encode_frames(124) == 124 &&
              cond_ref_video_encode_frames(140) == 124 && cond_ref_video_encode_frames(13) == 13 &&
              cond_ref_video_encode_frames(38) == 22 && cond_ref_video_encode_frames(39) == 39,
          "snap");
    /* audio limits */
    CHECK(cond_check_audio_seconds(63999, 32000, "--ref-audio a.wav", 0, &e) == -1 && strstr(e.msg, "at least 2"), "%s", e.msg);
    CHECK(cond_check_audio_seconds(64000, 32000, "--ref-audio a.wav", 0, &e) == 0, "%s", e.msg);
    /* a soundtrack under 2 s is short by itself (the output lasts >= 5.17 s): no hint to ask for more frames */
    CHECK(cond_check_audio_seconds(32000, 32000, "--ref-video v.mp4", 1, &e) == -1 &&
              strstr(e.msg, "the soundtrack lasts 1.00 s, at least 2 s") && strstr(e.msg, "longer soundtrack") &&
              !strstr(e.msg, "frames"), "%s", e.msg);
    CHECK(cond_check_audio_seconds(480001, 32000, "--ref-audio a.wav", 0, &e) == -1 && strstr(e.msg, "at most 15"), "%s", e.msg);
    st_set_free(s);
}

static void check_encode(video_vae *v, const char *label, const uint8_t *pix, int T, int H, int W, const h3_tensor *ref) {
    float *lat = NULL;
    int Lt, lh, lw;
    h3_err e;
    int rc = cond_encode_vae(v, pix, T, H, W, COND_ENCODE_SEED, &lat, &Lt, &lh, &lw, &e);
    CHECK(rc == 0, "%s: %s", label, e.msg);
    if (rc) return;
    CHECK(ref->shape[1] == 24 && ref->shape[2] == Lt && ref->shape[3] == lh && ref->shape[4] == lw,
          "%s: latents (24, %d, %d, %d) vs reference (%lld, %lld, %lld, %lld)", label, Lt, lh, lw,
          (long long)ref->shape[1], (long long)ref->shape[2], (long long)ref->shape[3], (long long)ref->shape[4]);
    /* fp16 rounding can move a value by one fp16 ulp where torch's exp/randn differ in the last bit */
    compare(label, lat, ref->data, numel(ref), 1e-4);
    free(lat);
}

static void test_encode(h3_backend *be) {
    st_set *s = open_gold("encode.safetensors");
    if (!s) return;
    h3_err e;
    video_vae *v = video_vae_new(be, "tests/fixtures/tiny/vae", VIDEO_VAE_ENCODER, &e);
    CHECK(v != NULL, "%s", e.msg);
    audio_vae *a = audio_vae_load(be, "tests/fixtures/tiny/audio_vae", AVAE_ENCODER, &e);
    CHECK(a != NULL, "%s", e.msg);
    if (!v || !a) goto done;
    const video_vae_config *c = video_vae_get_config(v);
    h3_tensor pv, lv, mv, ev;
    /* 1. the arithmetic after encode(), exact from the reference's own moments and noise */
    const uint8_t *pix = get(s, "image.pixels", &pv);
    const float *moments = get(s, "image.moments", &mv), *eps = get(s, "image.eps", &ev);
    get(s, "image.latents", &lv);
    int64_t n = numel(&ev) / c->latent_channels;
    float *lat = malloc(sizeof(float) * (size_t)numel(&ev));
    cond_latents_from_moments(c, moments, eps, n, lat);
    compare("posterior sample -> fp16 -> normalize (given eps)", lat, lv.data, numel(&lv), 1e-6);
    free(lat);
    /* 2. the same noise from our torch.randn(seed 42) */
    float *eps2 = malloc(sizeof(float) * (size_t)numel(&ev));
    torch_rng g;
    torch_rng_seed(&g, COND_ENCODE_SEED);
    torch_randn(&g, eps2, numel(&ev));
    compare("randn(seed 42) vs torch", eps2, eps, numel(&ev), 1e-6);
    free(eps2);
    /* 3. encode_vae_condition end to end: a 320x64 frame (two 256-px tiles), image and video references */
    check_encode(v, "encode_vae_condition 320x64 keyframe", pix, 1, (int)pv.shape[0], (int)pv.shape[1], &lv);
    pix = get(s, "ref_image.pixels", &pv);
    get(s, "ref_image.latents", &lv);
    check_encode(v, "reference encoder: image 64x32", pix, 1, (int)pv.shape[0], (int)pv.shape[1], &lv);
    pix = get(s, "ref_video.frames", &pv);
    get(s, "ref_video.latents", &lv);
    int T = cond_ref_video_encode_frames((int)pv.shape[0]);
    check_encode(v, "reference encoder: video 25 -> 22 frames", pix, T, (int)pv.shape[1], (int)pv.shape[2], &lv);
    /* 4. reference audio rows: posterior mean, normalized, channel-major */
    const char *wn[2] = {"ref_video.sound", "ref_audio.wave"}, *rn[2] = {"ref_video.rows", "ref_audio.rows"};
    for (int k = 0; k < 2; k++) {
        h3_tensor wv, rv;
        const float *wave = get(s, wn[k], &wv);
        get(s, rn[k], &rv);
        float *rows = NULL;
        int64_t N = 0;
        int rc = cond_audio_rows(a, wave, wv.shape[1], &rows, &N, &e);
        CHECK(rc == 0, "%s", e.msg);
        if (rc) continue;
        CHECK(2 * N == rv.shape[0] && rv.shape[1] == 32, "%s: %lld rows vs %lld", rn[k], (long long)(2 * N),
              (long long)rv.shape[0]);
        if (2 * N == rv.shape[0]) compare(k ? "reference audio rows (clip)" : "reference audio rows (soundtrack)", rows, rv.data, numel(&rv), 1e-5);
        free(rows);
    }
done:
    video_vae_free(v);
    audio_vae_free(a);
    st_set_free(s);
}

/* The float resampler (render canvas upscale, docs/model/features.md 5.6) uses the PIL path's taps unquantized: on an
 * 8-bit smooth image it lands within 1.5 levels of the PIL-exact 8-bit result (which rounds after each
 * of its two passes), keeps a flat image flat and
 * stays in [0, 1]. */
static void test_resize_float(void) {
    const int sw = 48, sh = 27, dw = 64, dh = 36;
    uint8_t *src = malloc((size_t)sw * sh * 3), *d8 = malloc((size_t)dw * dh * 3);
    float *sf = malloc(sizeof(float) * (size_t)sw * sh * 3), *df = malloc(sizeof(float) * (size_t)dw * dh * 3);
    /* a smooth picture (random noise would make both paths clip Lanczos overshoots, the 8-bit one after
     * each pass, and differ by far more than rounding) */
    for (int y = 0; y < sh; y++)
        for (int x = 0; x < sw; x++)
            for (int c = 0; c < 3; c++) {
                double v = 0.5 + 0.3 * sin(0.21 * x + 1.3 * c) * cos(0.17 * y) + 0.1 * sin(0.05 * (x + y));
                int i = (y * sw + x) * 3 + c;
                src[i] = (uint8_t)lround(v * 255.0);
                sf[i] = (float)src[i] / 255.0f;
            }
    h3_err e;
    CHECK(h3_resize_rgb(src, sw, sh, d8, dw, dh, H3_RESAMPLE_LANCZOS, &e) == 0, "%s", e.msg);
    CHECK(h3_resize_rgbf(sf, sw, sh, df, dw, dh, H3_RESAMPLE_LANCZOS, &e) == 0, "%s", e.msg);
    double worst = 0.0;
    int out_of_range = 0;
    for (int i = 0; i < dw * dh * 3; i++) {
        worst = fmax(worst, fabs((double)df[i] * 255.0 - (double)d8[i]));
        out_of_range += df[i] < 0.0f || df[i] > 1.0f;
    }
    printf("  %-48s max |float*255 - uint8| %.3f levels\n", "lanczos 48x27 -> 64x36 (smooth), float vs PIL 8-bit", worst);
    CHECK(worst <= 1.5 && out_of_range == 0, "float resize: %.3f levels from the 8-bit path, %d out of [0, 1]", worst,
          out_of_range);
    for (int i = 0; i < sw * sh * 3; i++) sf[i] = 0.25f;
    CHECK(h3_resize_rgbf(sf, sw, sh, df, dw, dh, H3_RESAMPLE_LANCZOS, &e) == 0, "%s", e.msg);
    int flat = 1;
    for (int i = 0; i < dw * dh * 3; i++) flat &= fabsf(df[i] - 0.25f) < 1e-6f;
    CHECK(flat, "a flat image stays flat");
    CHECK(h3_resize_rgbf(sf, 0, sh, df, dw, dh, H3_RESAMPLE_LANCZOS, &e) == -1, "zero width refused");
    free(src), free(d8), free(sf), free(df);
}

int main(void) {
    h3_err e;
    test_resize();
    test_resize_float();
    test_keyframes();
    test_references();
    h3_backend *be = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    CHECK(be != NULL, "%s", e.msg);
    if (be) test_encode(be);
    h3_backend_free(be);
    TEST_END();
}
