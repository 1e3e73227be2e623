/* Media I/O: write/read round trips, reference parity on fixture files, error paths.
 * Fixtures: tests/fixtures/media/ made by tools/reference/gen_media.py (diffusers 0.42.1 + PyAV).
 * `test_media --write-mp4 PATH` only writes the synthetic clip (for tests/cli/media_ffprobe.sh). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"
#include "media/media.h"
#include "io/safetensors.h"

#define FIX "tests/fixtures/media/"
#define CLIP_T 22
#define CLIP_W 64
#define CLIP_H 48
#define CLIP_SAMPLES (37 * 800)   /* 22 frames -> 37 audio latents -> 29600 samples */

static char tmpdir[256];

static const char *tmp(const char *name)
{
    static char buf[4][512];
    static int k;
    k = (k + 1) & 3;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static int one_line(const h3_err *e) { return e->msg[0] && !strchr(e->msg, '\n'); }

/* A moving gradient with a soft bright blob (smooth, so 4:2:0 chroma keeps it); a 440 Hz
 * left / 660 Hz right tone. */
/* The whole file, malloc'd (NULL if unreadable). */
static uint8_t *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = sz > 0 ? malloc((size_t)sz) : NULL;
    if (b && fread(b, 1, (size_t)sz, f) != (size_t)sz) {
        free(b);
        b = NULL;
    }
    fclose(f);
    *n = b ? (size_t)sz : 0;
    return b;
}

static uint8_t *clip_frames(void)
{
    uint8_t *f = malloc((size_t)CLIP_T * CLIP_H * CLIP_W * 3);
    for (int t = 0; t < CLIP_T; t++)
        for (int y = 0; y < CLIP_H; y++)
            for (int x = 0; x < CLIP_W; x++) {
                uint8_t *p = f + (((size_t)t * CLIP_H + y) * CLIP_W + x) * 3;
                double dx = x - (8 + 2.0 * t), dy = y - 20;
                double blob = exp(-(dx * dx + dy * dy) / 60.0);
                p[0] = (uint8_t)(40 + x * 2 + t * 2 + 120 * blob);
                p[1] = (uint8_t)(60 + y * 2 + 100 * blob);
                p[2] = (uint8_t)(150 - x + y - 80 * blob);
            }
    return f;
}

static float *clip_audio(void)
{
    float *a = malloc(sizeof(float) * 2 * CLIP_SAMPLES);
    for (int i = 0; i < CLIP_SAMPLES; i++) {
        a[i] = 0.5f * sinf(2.0f * (float)M_PI * 440.0f * i / 32000.0f);
        a[CLIP_SAMPLES + i] = 0.3f * sinf(2.0f * (float)M_PI * 660.0f * i / 32000.0f);
    }
    return a;
}

static int write_clip(const char *path, h3_err *e)
{
    uint8_t *f = clip_frames();
    float *a = clip_audio();
    h3_frames_view v = {.frames = CLIP_T, .height = CLIP_H, .width = CLIP_W, .u8 = f};
    int rc = h3_write_mp4(path, &v, a, CLIP_SAMPLES, NULL, e);
    free(f);
    free(a);
    return rc;
}

static double psnr_u8(const uint8_t *a, const uint8_t *b, size_t n)
{
    double se = 0;
    for (size_t i = 0; i < n; i++) se += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    return se == 0 ? 99.0 : 10.0 * log10(255.0 * 255.0 / (se / n));
}

static int max_abs_u8(const uint8_t *a, const uint8_t *b, size_t n, double *mean)
{
    int m = 0;
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)a[i] - (int)b[i]);
        if (d > m) m = d;
        s += d;
    }
    if (mean) *mean = s / (double)n;
    return m;
}

static double rel_l2(const float *a, const float *b, int64_t n)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), den += (double)b[i] * b[i];
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* No ".h3tmp" leftovers in dir. */
static int no_temp_files(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *de;
    int clean = 1;
    while ((de = readdir(d)))
        if (strstr(de->d_name, "h3tmp")) clean = 0;
    closedir(d);
    return clean;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
    closedir(d);
    return n;
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (n) fwrite(data, 1, n, f);
    fclose(f);
}

static void *read_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(*n ? *n : 1);
    if (fread(p, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return p;
}

/* ------------------------------------------------------------------------------------------ */

static void test_without_ffmpeg(void)
{
    h3_err e = {0};
    h3_image im;
    h3_audio au;
    h3_video vi;
    uint8_t px[12] = {0};
    float s[4] = {0};
    h3_frames_view v = {.frames = 1, .height = 2, .width = 2, .u8 = px};
#define NO(call) do { memset(&e, 0, sizeof e); CHECK((call) != 0 && strstr(e.msg, "built without FFmpeg (MEDIA=0)"), "%s", e.msg); } while (0)
    NO(h3_read_image("x.png", NULL, &im, &e));
    NO(h3_read_audio("x.wav", NULL, &au, &e));
    NO(h3_read_video("x.mp4", NULL, &vi, &e));
    NO(h3_read_image_mem(px, sizeof px, "mem", NULL, &im, &e));
    NO(h3_read_audio_mem(px, sizeof px, "mem", NULL, &au, &e));
    NO(h3_read_video_mem(px, sizeof px, "mem", NULL, &vi, &e));
    NO(h3_write_mp4("x.mp4", &v, s, 2, NULL, &e));
    NO(h3_write_png_frames("frames", &v, &e));
    NO(h3_write_png("x.png", px, 2, 2, &e));
    NO(h3_write_wav("x.wav", s, 2, 2, 32000, 16, &e));
    memset(&e, 0, sizeof e);
    CHECK(h3_mp4_writer_new("x.mp4", 2, 2, 1, NULL, &e) == NULL && strstr(e.msg, "MEDIA=0"), "%s", e.msg);
#undef NO
}

/* Checks the MP4's streams with libavformat-level facts exposed by our reader plus the file
 * header; the exact codec names are checked by tests/cli/media_ffprobe.sh with ffprobe. */
static void test_mp4_round_trip(void)
{
    h3_err e = {0};
    const char *path = tmp("clip.mp4");
    CHECK(write_clip(path, &e) == 0, "%s", e.msg);
    CHECK(no_temp_files(tmpdir), "temp file left behind");

    uint8_t *src = clip_frames();
    float *src_audio = clip_audio();
    h3_video v;
    CHECK(h3_read_video(path, NULL, &v, &e) == 0, "%s", e.msg);
    CHECK(v.frames == CLIP_T && v.source_frames == CLIP_T, "frames %d (source %d), want %d", v.frames, v.source_frames, CLIP_T);
    CHECK(v.width == CLIP_W && v.height == CLIP_H, "size %dx%d", v.width, v.height);
    CHECK(v.source_fps == 24.0, "fps %f", v.source_fps);
    if (v.rgb && v.frames == CLIP_T) {
        double worst = 99;
        for (int t = 0; t < CLIP_T; t++) {
            double p = psnr_u8(v.rgb + (size_t)t * CLIP_H * CLIP_W * 3, src + (size_t)t * CLIP_H * CLIP_W * 3,
                               (size_t)CLIP_H * CLIP_W * 3);
            if (p < worst) worst = p;
        }
        printf("  mp4 round trip: worst frame PSNR %.2f dB (CRF 18)\n", worst);
        CHECK(worst > 28.0, "worst frame PSNR %.2f dB", worst);  /* 64x48, 4:2:0 chroma bounds red */
    }
    CHECK(v.has_audio && v.audio.channels == 2 && v.audio.sample_rate == 32000, "audio %d ch %d Hz", v.audio.channels,
          v.audio.sample_rate);
    if (v.has_audio) {
        int64_t n = v.audio.samples;
        printf("  mp4 round trip: audio %lld samples for %d written\n", (long long)n, CLIP_SAMPLES);
        CHECK(n >= CLIP_SAMPLES && n <= CLIP_SAMPLES + 1024, "audio samples %lld", (long long)n);
        /* Sync: the best-matching lag of the decoded left channel is 0 (encoder delay trimmed). */
        int best_lag = 99999;
        double best = -1e30;
        for (int lag = -300; lag <= 300; lag++) {
            double c = 0;
            for (int i = 2000; i < 20000; i++) c += (double)v.audio.data[i + lag] * src_audio[i];
            if (c > best) best = c, best_lag = lag;
        }
        double err = rel_l2(v.audio.data + 2000, src_audio + 2000, 20000);
        double err_r = rel_l2(v.audio.data + n + 2000, src_audio + CLIP_SAMPLES + 2000, 20000);
        printf("  mp4 round trip: audio lag %d samples, rel L2 left %.3e right %.3e\n", best_lag, err, err_r);
        CHECK(best_lag == 0, "audio/video offset %d samples", best_lag);
        CHECK(err < 0.05 && err_r < 0.05, "AAC error %.3e / %.3e", err, err_r);
    }
    h3_video_free(&v);

    /* The same clip through the streaming writer, in uneven chunks, float frames. */
    const char *path2 = tmp("clip_stream.mp4");
    h3_mp4_writer *w = h3_mp4_writer_new(path2, CLIP_W, CLIP_H, 1, NULL, &e);
    CHECK(w != NULL, "%s", e.msg);
    if (w) {
        size_t fsz = (size_t)CLIP_H * CLIP_W * 3;
        float *ff = malloc(sizeof(float) * fsz * CLIP_T);
        for (size_t i = 0; i < fsz * CLIP_T; i++) ff[i] = src[i] / 255.0f;
        h3_frames_view a = {.frames = 7, .height = CLIP_H, .width = CLIP_W, .f32 = ff};
        h3_frames_view b = {.frames = CLIP_T - 7, .height = CLIP_H, .width = CLIP_W, .f32 = ff + 7 * fsz};
        CHECK(h3_mp4_writer_frames(w, &a, &e) == 0, "%s", e.msg);
        CHECK(h3_mp4_writer_audio(w, src_audio, src_audio + CLIP_SAMPLES, 1000, &e) == 0, "%s", e.msg);
        CHECK(h3_mp4_writer_frames(w, &b, &e) == 0, "%s", e.msg);
        CHECK(h3_mp4_writer_audio(w, src_audio + 1000, src_audio + CLIP_SAMPLES + 1000, CLIP_SAMPLES - 1000, &e) == 0,
              "%s", e.msg);
        struct stat sb;
        CHECK(stat(path2, &sb) != 0, "output visible before close");
        CHECK(h3_mp4_writer_close(w, &e) == 0, "%s", e.msg);
        h3_mp4_writer_free(w);
        /* The same calls with the encoder in the caller's thread (opts.sync) give the same bytes: the encoder
         * thread only moves the work (docs/media.md "Encoding off the critical path"). */
        const char *path3 = tmp("clip_sync.mp4");
        h3_mp4_opts so = {.sync = 1};
        h3_mp4_writer *ws = h3_mp4_writer_new(path3, CLIP_W, CLIP_H, 1, &so, &e);
        CHECK(ws && h3_mp4_writer_frames(ws, &a, &e) == 0 &&
                  h3_mp4_writer_audio(ws, src_audio, src_audio + CLIP_SAMPLES, 1000, &e) == 0 &&
                  h3_mp4_writer_frames(ws, &b, &e) == 0 &&
                  h3_mp4_writer_audio(ws, src_audio + 1000, src_audio + CLIP_SAMPLES + 1000, CLIP_SAMPLES - 1000, &e) == 0 &&
                  h3_mp4_writer_close(ws, &e) == 0,
              "%s", e.msg);
        h3_mp4_writer_free(ws);
        size_t n2 = 0, n3 = 0;
        uint8_t *b2 = read_all(path2, &n2), *b3 = read_all(path3, &n3);
        CHECK(b2 && b3 && n2 == n3 && !memcmp(b2, b3, n2), "threaded and sync MP4 writers differ (%zu vs %zu bytes)", n2, n3);
        if (b2 && b3 && n2 == n3 && !memcmp(b2, b3, n2))
            printf("  mp4 writer: encoder thread and sync give the same %zu bytes\n", n2);
        free(b2);
        free(b3);
        free(ff);
        h3_video v2, v1;
        CHECK(h3_read_video(path2, NULL, &v2, &e) == 0, "%s", e.msg);
        CHECK(h3_read_video(path, NULL, &v1, &e) == 0, "%s", e.msg);
        CHECK(v2.frames == CLIP_T && v1.frames == CLIP_T && !memcmp(v1.rgb, v2.rgb, fsz * CLIP_T),
              "float frames in chunks decode differently from uint8 frames in one go");
        CHECK(v2.audio.samples == v1.audio.samples, "audio %lld vs %lld", (long long)v2.audio.samples,
              (long long)v1.audio.samples);
        h3_video_free(&v1);
        h3_video_free(&v2);
    }

    /* A writer freed without close leaves nothing behind. */
    w = h3_mp4_writer_new(tmp("abandoned.mp4"), CLIP_W, CLIP_H, 1, NULL, &e);
    h3_frames_view one = {.frames = 1, .height = CLIP_H, .width = CLIP_W, .u8 = src};
    if (w) h3_mp4_writer_frames(w, &one, &e);
    h3_mp4_writer_free(w);
    struct stat sb;
    CHECK(stat(tmp("abandoned.mp4"), &sb) != 0 && no_temp_files(tmpdir), "abandoned writer left files");

    /* Odd sizes are rejected up front, naming the file and the rule. */
    uint8_t odd[33 * 17 * 3] = {0};
    h3_frames_view ov = {.frames = 1, .height = 17, .width = 33, .u8 = odd};
    memset(&e, 0, sizeof e);
    CHECK(h3_write_mp4(tmp("odd.mp4"), &ov, NULL, 0, NULL, &e) != 0 && strstr(e.msg, "odd.mp4") &&
              strstr(e.msg, "even") && one_line(&e), "%s", e.msg);
    CHECK(stat(tmp("odd.mp4"), &sb) != 0 && no_temp_files(tmpdir), "odd-size write left files");
    /* Non-finite audio samples are written as silence instead of failing the AAC encoder. */
    float *bad = clip_audio();
    bad[100] = NAN, bad[CLIP_SAMPLES + 7] = INFINITY;
    CHECK(h3_write_mp4(tmp("nan.mp4"), &one, bad, 2000, NULL, &e) == 0, "%s", e.msg);
    free(bad);
    /* Video only (no audio track). */
    CHECK(h3_write_mp4(tmp("silent.mp4"), &one, NULL, 0, NULL, &e) == 0, "%s", e.msg);
    h3_video sv;
    CHECK(h3_read_video(tmp("silent.mp4"), NULL, &sv, &e) == 0 && sv.frames == 1 && !sv.has_audio, "%s", e.msg);
    h3_video_free(&sv);
    /* Writing over an existing file replaces it. */
    CHECK(write_clip(path, &e) == 0, "%s", e.msg);
    free(src);
    free(src_audio);
}

static void test_png_and_wav(void)
{
    h3_err e = {0};
    enum { T = 3, H = 7, W = 13 };
    uint8_t px[T * H * W * 3];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(i * 37 + (i >> 3));
    h3_frames_view v = {.frames = T, .height = H, .width = W, .u8 = px};
    char dir[512];
    snprintf(dir, sizeof dir, "%s", tmp("frames"));
    CHECK(h3_write_png_frames(dir, &v, &e) == 0, "%s", e.msg);
    CHECK(count_entries(dir) == T, "%d entries", count_entries(dir));
    for (int t = 0; t < T; t++) {
        char name[64];
        snprintf(name, sizeof name, "frames/frame_%05d.png", t);
        h3_image im;
        CHECK(h3_read_image(tmp(name), NULL, &im, &e) == 0, "%s", e.msg);
        CHECK(im.width == W && im.height == H && !memcmp(im.rgb, px + (size_t)t * H * W * 3, (size_t)H * W * 3),
              "frame %d differs after PNG round trip", t);
        h3_image_free(&im);
    }
    /* Rewriting with fewer frames replaces the directory as a whole. */
    v.frames = 2;
    CHECK(h3_write_png_frames(dir, &v, &e) == 0 && count_entries(dir) == 2, "%s (%d entries)", e.msg, count_entries(dir));
    /* A directory with other files is never replaced. */
    write_bytes(tmp("frames/notes.txt"), "keep", 4);
    memset(&e, 0, sizeof e);
    CHECK(h3_write_png_frames(dir, &v, &e) != 0 && strstr(e.msg, "notes.txt") && one_line(&e), "%s", e.msg);
    CHECK(count_entries(dir) == 3 && no_temp_files(tmpdir), "directory changed on refusal");

    /* Float frames: round half to even of x * 255, clipped; NaN -> 0. */
    float fl[2 * 2 * 3] = {0.0f, 1.0f, 0.2f, -1.0f, 2.0f, NAN, 0.5f, 100.0f / 255.0f, 1e-9f, 0.99999f, 0.001f, 0.998f};
    uint8_t want[12] = {0, 255, 51, 0, 255, 0, 128, 100, 0, 255, 0, 254};
    h3_frames_view fv = {.frames = 1, .height = 2, .width = 2, .f32 = fl};
    CHECK(h3_write_png_frames(tmp("ffr"), &fv, &e) == 0, "%s", e.msg);
    h3_image im;
    CHECK(h3_read_image(tmp("ffr/frame_00000.png"), NULL, &im, &e) == 0 && im.rgb && !memcmp(im.rgb, want, 12),
          "float conversion: %s", e.msg);
    h3_image_free(&im);

    /* WAV: float bit-exact, 16-bit = FFmpeg's round(x * 32768) clipped. */
    enum { N = 1234 };
    float a[2 * N];
    for (int i = 0; i < N; i++) a[i] = sinf(i * 0.01f) * 1.2f, a[N + i] = cosf(i * 0.023f) * 0.7f;
    h3_read_opts native = {.sample_rate = -1};
    h3_audio au;
    CHECK(h3_write_wav(tmp("f.wav"), a, 2, N, 32000, 32, &e) == 0, "%s", e.msg);
    CHECK(h3_read_audio(tmp("f.wav"), &native, &au, &e) == 0, "%s", e.msg);
    CHECK(au.samples == N && au.channels == 2 && au.sample_rate == 32000 && !memcmp(au.data, a, sizeof a),
          "float WAV round trip not exact");
    h3_audio_free(&au);
    CHECK(h3_write_wav(tmp("s.wav"), a, 2, N, 32000, 16, &e) == 0, "%s", e.msg);
    CHECK(h3_read_audio(tmp("s.wav"), NULL, &au, &e) == 0, "%s", e.msg);
    int exact = au.samples == N;
    for (int i = 0; exact && i < 2 * N; i++) {
        float q = rintf(a[i] * 32768.0f);
        q = q > 32767 ? 32767 : q < -32768 ? -32768 : q;
        exact = au.data[i] == q / 32768.0f;
    }
    CHECK(exact, "16-bit WAV round trip differs from round(x * 32768) / 32768");
    h3_audio_free(&au);
    /* Mono is duplicated to both channels. */
    CHECK(h3_write_wav(tmp("m.wav"), a, 1, N, 22050, 32, &e) == 0, "%s", e.msg);
    CHECK(h3_read_audio(tmp("m.wav"), &native, &au, &e) == 0 && au.channels == 2 && au.samples == N &&
              !memcmp(au.data, a, N * 4) && !memcmp(au.data + N, a, N * 4),
          "mono WAV not duplicated exactly: %s", e.msg);
    h3_audio_free(&au);
    CHECK(h3_read_audio(tmp("m.wav"), NULL, &au, &e) == 0, "%s", e.msg);
    int64_t want_n = (int64_t)N * 32000 / 22050;
    CHECK(au.sample_rate == 32000 && llabs(au.samples - want_n) <= 2, "22050 -> 32000: %lld samples, want ~%lld",
          (long long)au.samples, (long long)want_n);
    h3_audio_free(&au);
    CHECK(no_temp_files(tmpdir), "temp files left");
}

/* ------------------------------------------------------------------------------------------ */

static void test_reference_images(st_file *ex)
{
    static const char *exact[] = {"rgb.png", "rgba.png", "gray.png", "gray_alpha.png", "palette.png", "bilevel.png",
                                  "rgb16.png", "gray16.png", "gray_alpha16.png", "rgba16.png", "gray4.png", "lossless.webp",
                                  "exif8.webp", "q420.jpg", "q444.jpg", "exif6.jpg"};
    static const struct { const char *name; int max; double mean; } lossy[] = {{"lossy.webp", 4, 0.6}};
    h3_err e = {0};
    for (size_t i = 0; i < sizeof exact / sizeof *exact; i++) {
        char key[128];
        snprintf(key, sizeof key, "image.%s", exact[i]);
        const st_entry *en = st_find(ex, key);
        h3_image im;
        char path[256];
        snprintf(path, sizeof path, FIX "%s", exact[i]);
        CHECK(h3_read_image(path, NULL, &im, &e) == 0, "%s", e.msg);
        int same = en && im.rgb && en->shape[0] == im.height && en->shape[1] == im.width &&
                   !memcmp(im.rgb, st_data(ex, en), (size_t)im.height * im.width * 3);
        double mean = 0;
        int mx = en && im.rgb && en->shape[0] == im.height && en->shape[1] == im.width
                     ? max_abs_u8(im.rgb, st_data(ex, en), (size_t)im.height * im.width * 3, &mean) : -1;
        printf("  image %-16s %dx%d vs PIL: %s (max abs %d)\n", exact[i], im.width, im.height, same ? "exact" : "DIFFERS", mx);
        CHECK(same, "%s differs from diffusers load_image", exact[i]);
        h3_image_free(&im);
    }
    for (size_t i = 0; i < sizeof lossy / sizeof *lossy; i++) {
        char key[128], path[256];
        snprintf(key, sizeof key, "image.%s", lossy[i].name);
        snprintf(path, sizeof path, FIX "%s", lossy[i].name);
        const st_entry *en = st_find(ex, key);
        h3_image im;
        CHECK(h3_read_image(path, NULL, &im, &e) == 0, "%s", e.msg);
        int shape_ok = en && im.rgb && en->shape[0] == im.height && en->shape[1] == im.width;
        CHECK(shape_ok, "%s: size %dx%d differs from PIL's", lossy[i].name, im.width, im.height);
        if (shape_ok) {
            double mean;
            int mx = max_abs_u8(im.rgb, st_data(ex, en), (size_t)im.height * im.width * 3, &mean);
            printf("  image %-16s %dx%d vs PIL (libwebp decoder): max abs %d, mean abs %.3f\n", lossy[i].name,
                   im.width, im.height, mx, mean);
            CHECK(mx <= lossy[i].max && mean <= lossy[i].mean, "%s: max %d mean %.3f", lossy[i].name, mx, mean);
        }
        h3_image_free(&im);
    }
}

/* JPEG keyframes of every kind users have (tools/reference/gen_media_jpeg.py): hard edges, odd sizes with partial
 * MCUs, 4:2:0 / 4:2:2 / 4:4:4, progressive, optimized Huffman tables, gray, EXIF orientations in both byte orders.
 * libjpeg with PIL's defaults gives the reference's pixels exactly (docs/media.md). */
static void test_reference_jpegs(void)
{
    static const char *names[] = {"edges_q90_420.jpg", "odd_13x7_420.jpg", "odd_37x21_422.jpg", "noise_q75_444.jpg",
                                  "progressive_420.jpg", "optimized_420.jpg", "gray.jpg", "exif3_420.jpg",
                                  "exif5_444.jpg", "exif8_mm_420.jpg"};
    h3_err e = {0};
    st_file *ex = st_open(FIX "jpeg/expected.safetensors", &e);
    CHECK(ex != NULL, "jpeg/expected.safetensors: %s", e.msg);
    if (!ex) return;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char key[128], path[256];
        snprintf(key, sizeof key, "image.%s", names[i]);
        snprintf(path, sizeof path, FIX "jpeg/%s", names[i]);
        const st_entry *en = st_find(ex, key);
        h3_image im = {0};
        CHECK(h3_read_image(path, NULL, &im, &e) == 0, "%s: %s", path, e.msg);
        int shape_ok = en && im.rgb && en->shape[0] == im.height && en->shape[1] == im.width;
        double mean = 0;
        int mx = shape_ok ? max_abs_u8(im.rgb, st_data(ex, en), (size_t)im.height * im.width * 3, &mean) : -1;
        printf("  image %-20s %dx%d vs PIL: %s (max abs %d)\n", names[i], im.width, im.height,
               mx == 0 ? "exact" : "DIFFERS", mx);
        CHECK(mx == 0, "%s differs from diffusers load_image (max abs %d, size %dx%d)", names[i], mx, im.width, im.height);
        h3_image_free(&im);
    }
    st_close(ex);
}

static void test_reference_videos(st_file *ex)
{
    static const char *names[] = {"v30.mov", "v25_rot90.mov", "v24_rot270.mov", "v23976.mov", "v60.mov", "v12.mov",
                                  "h264_aac.mp4"};
    h3_err e = {0};
    h3_read_opts native = {.sample_rate = -1};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char path[256], key[160];
        snprintf(path, sizeof path, FIX "%s", names[i]);
        int lossy = strstr(names[i], "h264") != NULL;
        h3_video v;
        CHECK(h3_read_video(path, &native, &v, &e) == 0, "%s", e.msg);
        snprintf(key, sizeof key, "video.%s.frames", names[i]);
        const st_entry *fr = st_find(ex, key);
        snprintf(key, sizeof key, "video.%s.fps", names[i]);
        const double *fps = st_find(ex, key) ? st_data(ex, st_find(ex, key)) : NULL;
        snprintf(key, sizeof key, "video.%s.source_frames", names[i]);
        const int64_t *nsrc = st_find(ex, key) ? st_data(ex, st_find(ex, key)) : NULL;
        int shape_ok = fr && v.rgb && fr->shape[0] == v.frames && fr->shape[1] == v.height && fr->shape[2] == v.width;
        CHECK(shape_ok, "%s: %d frames %dx%d, reference %lld frames %lldx%lld", names[i], v.frames, v.width, v.height,
              fr ? (long long)fr->shape[0] : -1LL, fr ? (long long)fr->shape[2] : -1LL, fr ? (long long)fr->shape[1] : -1LL);
        CHECK(fps && v.source_fps == fps[0], "%s: fps %.17g vs %.17g", names[i], v.source_fps, fps ? fps[0] : 0.0);
        CHECK(nsrc && v.source_frames == nsrc[0], "%s: %d source frames", names[i], v.source_frames);
        if (shape_ok) {
            double mean;
            int mx = max_abs_u8(v.rgb, st_data(ex, fr), (size_t)v.frames * v.height * v.width * 3, &mean);
            printf("  video %-14s %2d -> %2d frames @24 (%.3f fps, %d turns) vs PyAV+diffusers: max abs %d, mean %.3f\n",
                   names[i], v.source_frames, v.frames, v.source_fps, v.rotation_turns, mx, mean);
            CHECK(lossy ? (mx <= 3 && mean < 0.5) : mx == 0, "%s: frames differ (max %d)", names[i], mx);
        }
        snprintf(key, sizeof key, "video.%s.audio", names[i]);
        const st_entry *au = st_find(ex, key);
        CHECK((au != NULL) == (v.has_audio != 0), "%s: has_audio %d", names[i], v.has_audio);
        if (au && v.has_audio) {
            int64_t n = au->shape[1];
            const float *ref = st_data(ex, au);
            CHECK(v.audio.sample_rate == 44100, "%s: native rate %d", names[i], v.audio.sample_rate);
            int len_ok = v.audio.samples == n;
            CHECK(len_ok || lossy, "%s: %lld samples, reference %lld", names[i], (long long)v.audio.samples, (long long)n);
            int64_t m = v.audio.samples < n ? v.audio.samples : n;
            double err = rel_l2(v.audio.data, ref, m);
            int dup = !memcmp(v.audio.data, v.audio.data + v.audio.samples, (size_t)v.audio.samples * 4);
            printf("  video %-14s soundtrack %lld samples (reference %lld) rel L2 %.3e\n", names[i],
                   (long long)v.audio.samples, (long long)n, err);
            CHECK(lossy ? err < 1e-3 : err == 0.0, "%s: soundtrack rel L2 %.3e", names[i], err);
            CHECK(dup, "%s: mono soundtrack not duplicated", names[i]);
        }
        h3_video_free(&v);
    }
    /* ffmpeg's rotation direction: the red top-left marker lands top-right for a -90 matrix
     * (what `ffmpeg -i v25_rot90.mov` shows), bottom-left in the reference's direction. */
    h3_read_opts fo = {.ffmpeg_rotation = 1};
    h3_video rv;
    CHECK(h3_read_video(FIX "v25_rot90.mov", &fo, &rv, &e) == 0 && rv.width == 8 && rv.height == 16 &&
              rv.rotation_turns == 1, "%s (turns %d)", e.msg, rv.rotation_turns);
    if (rv.rgb && rv.width == 8) {
        const uint8_t *tr = rv.rgb + (size_t)(rv.width - 1) * 3;
        CHECK(tr[0] == 255 && tr[1] == 0 && tr[2] == 0, "ffmpeg rotation: top-right is %d,%d,%d", tr[0], tr[1], tr[2]);
    }
    h3_video_free(&rv);
    /* max_frames truncation and a silent read. */
    h3_read_opts o = {.max_frames = 5, .skip_audio = 1};
    h3_video v;
    CHECK(h3_read_video(FIX "v30.mov", &o, &v, &e) == 0 && v.frames == 5 && !v.has_audio, "%s", e.msg);
    const st_entry *fr = st_find(ex, "video.v30.mov.frames");
    CHECK(v.rgb && fr && !memcmp(v.rgb, st_data(ex, fr), (size_t)5 * v.height * v.width * 3), "max_frames prefix differs");
    h3_video_free(&v);
}

static void test_reference_audio(st_file *ex)
{
    static const char *names[] = {"stereo44k.wav", "mono32k.flac"};
    h3_err e = {0};
    h3_read_opts native = {.sample_rate = -1};
    for (size_t i = 0; i < 2; i++) {
        char path[256], key[128];
        snprintf(path, sizeof path, FIX "%s", names[i]);
        snprintf(key, sizeof key, "audio.%s", names[i]);
        const st_entry *en = st_find(ex, key);
        h3_audio a;
        CHECK(h3_read_audio(path, &native, &a, &e) == 0, "%s", e.msg);
        if (!en || !a.data) { h3_audio_free(&a); continue; }
        int ch = (int)en->shape[0];
        int64_t n = en->shape[1];
        const float *ref = st_data(ex, en);
        int same = a.samples == n;
        for (int c = 0; same && c < 2; c++) same = !memcmp(a.data + c * n, ref + (ch == 2 ? c : 0) * n, (size_t)n * 4);
        printf("  audio %-14s %d ch %d Hz %lld samples vs PyAV: %s\n", names[i], ch, a.sample_rate, (long long)a.samples,
               same ? "exact" : "DIFFERS");
        CHECK(same, "%s differs from the reference decode", names[i]);
        h3_audio_free(&a);
    }
    /* 44.1 kHz -> 32 kHz with libswresample: compare with the analytic tone inside the clip. */
    h3_audio a;
    CHECK(h3_read_audio(FIX "stereo44k.wav", NULL, &a, &e) == 0, "%s", e.msg);
    if (a.data) {
        CHECK(a.sample_rate == 32000 && llabs(a.samples - 3200) <= 2, "%lld samples at %d Hz", (long long)a.samples,
              a.sample_rate);
        static float want[2][3000];
        for (int m = 0; m < 3000; m++) {
            double src = (m + 100) * 44100.0 / 32000.0;
            want[0][m] = (float)(sin(src * 0.05) * 30000.0 / 32768.0);
            want[1][m] = (float)(0.5 * cos(src * 0.031) * 30000.0 / 32768.0);
        }
        double e0 = rel_l2(a.data + 100, want[0], 3000), e1 = rel_l2(a.data + a.samples + 100, want[1], 3000);
        printf("  audio 44100 -> 32000 Hz (torchaudio kernel) vs analytic tone: rel L2 %.3e / %.3e\n", e0, e1);
        CHECK(e0 < 2e-3 && e1 < 2e-3, "resampled tone rel L2 %.3e / %.3e", e0, e1);
    }
    h3_audio_free(&a);
}

/* Resampling to 32 kHz against the reference's _normalize_audio_condition (torchaudio). */
static void test_reference_resampling(st_file *ex)
{
    static const struct { const char *file; const char *key; double seconds; int video; } cases[] = {
        {"stereo44k.wav", "1000.0", 1000.0, 0}, {"stereo44k.wav", "0.05", 0.05, 0}, {"stereo48k.wav", "1000.0", 1000.0, 0},
        {"mono22k.wav", "1000.0", 1000.0, 0}, {"mono22k.wav", "0.0731", 0.0731, 0}, {"r37800.wav", "1000.0", 1000.0, 0},
        {"mono8k.wav", "1000.0", 1000.0, 0}, {"v30.mov", "0.25", 0.25, 1}};
    h3_err e = {0};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[256], key[160];
        snprintf(path, sizeof path, FIX "%s", cases[i].file);
        snprintf(key, sizeof key, "resampled.%s.%s", cases[i].file, cases[i].key);
        const st_entry *en = st_find(ex, key);
        h3_read_opts o = {.truncate_seconds = cases[i].seconds};
        h3_audio a = {0};
        h3_video v = {0};
        int rc = cases[i].video ? h3_read_video(path, &o, &v, &e) : h3_read_audio(path, &o, &a, &e);
        if (cases[i].video) a = v.audio;
        CHECK(rc == 0 && en, "%s: %s", key, e.msg);
        if (rc == 0 && en) {
            int64_t n = en->shape[1];
            CHECK(a.samples == n && a.sample_rate == 32000, "%s: %lld samples, reference %lld", key, (long long)a.samples,
                  (long long)n);
            if (a.samples == n) {
                const float *ref = st_data(ex, en);
                double mx = 0;
                for (int64_t k = 0; k < 2 * n; k++) mx = fmax(mx, fabs((double)a.data[k] - ref[k]));
                char label[200];
                snprintf(label, sizeof label, "resample %s (truncate %s s) vs torchaudio", cases[i].file, cases[i].key);
                printf("  max abs %.2e ", mx);
                CHECK_CLOSE(label, rel_l2(a.data, ref, 2 * n), 1e-6);
            }
        }
        if (cases[i].video) h3_video_free(&v); else h3_audio_free(&a);
    }
}

static void test_slot_rule(st_file *ex)
{
    static const struct { const char *key; double fps; } rates[] = {
        {"30.0", 30.0}, {"25.0", 25.0}, {"23.976023976023978", 24000.0 / 1001.0}, {"29.97002997002997", 30000.0 / 1001.0},
        {"60.0", 60.0}, {"50.0", 50.0}, {"12.0", 12.0}, {"15.0", 15.0}, {"24.0", 24.0}, {"10.0", 10.0}, {"7.5", 7.5},
        {"119.88", 119.88}};
    int all = 1;
    for (size_t r = 0; r < sizeof rates / sizeof *rates; r++) {
        char key[64];
        snprintf(key, sizeof key, "slots.%s", rates[r].key);
        const st_entry *en = st_find(ex, key);
        if (!en) { all = 0; CHECK(0, "missing %s", key); continue; }
        const int64_t *ref = st_data(ex, en);
        int64_t total = h3_media_fps_slot(100, rates[r].fps);
        int ok = total == en->shape[0];
        for (int64_t i = 0; ok && i < 100; i++)
            for (int64_t k = h3_media_fps_slot(i, rates[r].fps); ok && k < h3_media_fps_slot(i + 1, rates[r].fps); k++)
                ok = ref[k] == i;
        CHECK(ok, "24 fps slots differ for %s fps", rates[r].key);
        all &= ok;
    }
    printf("  24 fps whole-frame rule, 12 rates x 100 frames vs diffusers: %s\n", all ? "exact" : "DIFFERS");
}

static void expect_error(int rc, const h3_err *e, const char *must1, const char *must2, const char *what)
{
    CHECK(rc != 0 && strstr(e->msg, must1) && (!must2 || strstr(e->msg, must2)) && one_line(e), "%s: '%s'", what, e->msg);
    printf("  error %-26s -> %s\n", what, e->msg);
}

static void test_errors(void)
{
    h3_err e;
    h3_image im;
    h3_audio au;
    h3_video vi;
#define ERR(call, m1, m2, what) do { memset(&e, 0, sizeof e); expect_error((call), &e, (m1), (m2), (what)); } while (0)
    ERR(h3_read_image(tmp("missing.png"), NULL, &im, &e), "missing.png", "No such file", "missing file");
    write_bytes(tmp("empty.png"), "", 0);
    ERR(h3_read_image(tmp("empty.png"), NULL, &im, &e), "empty.png", "empty", "zero-length file");
    ERR(h3_read_video(tmp("empty.png"), NULL, &vi, &e), "empty.png", "empty", "zero-length video");
    write_bytes(tmp("notes.txt"), "just some text, not media at all\n", 33);
    ERR(h3_read_image(tmp("notes.txt"), NULL, &im, &e), "notes.txt", "not a recognised image", "text as image");
    ERR(h3_read_audio(tmp("notes.txt"), NULL, &au, &e), "notes.txt", NULL, "text as audio");
    ERR(h3_read_video(tmp("notes.txt"), NULL, &vi, &e), "notes.txt", NULL, "text as video");
    ERR(h3_read_image(tmpdir, NULL, &im, &e), "directory", NULL, "directory");
    ERR(h3_read_image(FIX "h264_aac.mp4", NULL, &im, &e), "h264_aac.mp4", "not a recognised image", "video as image");
    ERR(h3_read_video(FIX "stereo44k.wav", NULL, &vi, &e), "stereo44k.wav", "no video stream", "audio as video");
    ERR(h3_read_audio(FIX "v25_rot90.mov", NULL, &au, &e), "v25_rot90.mov", "no audio stream", "silent video as audio");
    ERR(h3_read_image_mem("", 0, "buffer", NULL, &im, &e), "buffer", "empty", "zero-length memory");
    { /* sizes near the fields' limits: a PNG IHDR of 2^32-1 x 2^32-1 (the pixel count overflowed int64: found by
       * fuzz_media under UBSan) and a JPEG whose frame header says 65500x65500 are named as too large */
        uint8_t png[33] = "\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR";
        memset(png + 16, 0xff, 8);
        ERR(h3_read_image_mem(png, sizeof png, "huge.png", NULL, &im, &e), "huge.png", "exceed the decoder's size limit",
            "PNG of 2^32-1 x 2^32-1");
        static uint8_t jpg[1 << 14];
        FILE *f = fopen(FIX "q420.jpg", "rb");
        size_t n = f ? fread(jpg, 1, sizeof jpg, f) : 0, sof = 0;
        if (f) fclose(f);
        for (size_t i = 2; i + 9 < n && !sof; i++)
            if (jpg[i] == 0xFF && jpg[i + 1] == 0xC0) sof = i;
        CHECK(sof > 0, "q420.jpg: no baseline frame header found");
        jpg[sof + 5] = jpg[sof + 7] = 0xFF, jpg[sof + 6] = jpg[sof + 8] = 0xDC; /* height, width = 65500 */
        ERR(h3_read_image_mem(jpg, n, "huge.jpg", NULL, &im, &e), "huge.jpg", "65500x65500 = 4290250000 pixels exceed",
            "JPEG of 65500x65500");
    }

    /* Truncated files: half of each fixture. */
    static const struct { const char *name; int kind; } cut[] = {
        {"rgb.png", 0}, {"q420.jpg", 0}, {"lossless.webp", 0}, {"h264_aac.mp4", 2}, {"v30.mov", 2}, {"mono32k.flac", 1},
        {"stereo44k.wav", 1}, {"clip.mp4", 2}, {"clip.mp4", 1}};
    for (size_t i = 0; i < sizeof cut / sizeof *cut; i++) {
        size_t n;
        char path[512], out[128];
        /* clip.mp4 is ours (moov first, "faststart"): cut, it still opens and fails mid-stream. */
        if (!strcmp(cut[i].name, "clip.mp4")) snprintf(path, sizeof path, "%s", tmp("clip.mp4"));
        else snprintf(path, sizeof path, FIX "%s", cut[i].name);
        uint8_t *b = read_bytes(path, &n);
        if (!b) { CHECK(0, "cannot read %s", path); continue; }
        snprintf(out, sizeof out, "cut_%s", cut[i].name);
        write_bytes(tmp(out), b, n / 2);
        free(b);
        char what[64];
        snprintf(what, sizeof what, "truncated %s", cut[i].name);
        memset(&e, 0, sizeof e);
        int rc = cut[i].kind == 0 ? h3_read_image(tmp(out), NULL, &im, &e)
               : cut[i].kind == 1 ? h3_read_audio(tmp(out), NULL, &au, &e)
                                  : h3_read_video(tmp(out), NULL, &vi, &e);
        expect_error(rc, &e, out, NULL, what);
    }
    /* Bad write arguments. */
    uint8_t px[12] = {0};
    float s[4] = {0};
    h3_frames_view both = {.frames = 1, .height = 2, .width = 2, .u8 = px, .f32 = s};
    ERR(h3_write_mp4(tmp("both.mp4"), &both, NULL, 0, NULL, &e), "both.mp4", "exactly one", "u8 and f32 both set");
    ERR(h3_write_wav(tmp("b.wav"), s, 2, 2, 32000, 24, &e), "b.wav", "16", "WAV 24 bits");
    ERR(h3_write_png(tmp("nodir/x.png"), px, 2, 2, &e), "x.png", NULL, "PNG into a missing dir");
#undef ERR
}

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char p[1024];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode)) remove_tree(p); else unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

/* A JPEG whose end marker lies past FFmpeg's first 2 KiB probe, named .jpg (PIL's output for any
 * photo-sized keyframe): probing ranks the extension's image2 demuxer (not on the list) above
 * jpeg_pipe, so the file was refused as "not a recognised image file". Read from the path it must
 * give the size and the very pixels of the same bytes read from memory (probed by content only). */
static void test_large_jpeg(void)
{
    const char *path = FIX "q420_large.jpg";
    h3_err e = {0};
    h3_image a = {0}, b = {0};
    FILE *f = fopen(path, "rb");
    static uint8_t buf[1 << 16];
    size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
    if (f) fclose(f);
    CHECK(n > 2048 && n < sizeof buf, "%s: %zu bytes (the case needs more than FFmpeg's 2 KiB probe)", path, n);
    int ra = h3_read_image(path, NULL, &a, &e);
    CHECK(ra == 0, "%s: %s", path, e.msg);
    int rb = h3_read_image_mem(buf, n, "q420_large.jpg", NULL, &b, &e);
    CHECK(rb == 0, "memory %s: %s", path, e.msg);
    int same = !ra && !rb && a.width == 64 && a.height == 48 && b.width == 64 && b.height == 48 &&
               !memcmp(a.rgb, b.rgb, (size_t)64 * 48 * 3);
    printf("  image %-16s %dx%d from the path: %s\n", "q420_large.jpg", a.width, a.height,
           ra ? "REFUSED" : same ? "read, = the memory read" : "DIFFERS from the memory read");
    CHECK(same, "%s: the path read (%dx%d) is not the 64x48 memory read", path, a.width, a.height);
    h3_image_free(&a);
    h3_image_free(&b);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--write-mp4")) {
        h3_err e = {0};
        if (write_clip(argv[2], &e)) { fprintf(stderr, "%s\n", e.msg); return 2; }
        return 0;
    }
    if (!h3_media_available()) {
        printf("  MEDIA=0 build: every media call must fail clearly\n");
        test_without_ffmpeg();
        TEST_END();
    }
    snprintf(tmpdir, sizeof tmpdir, "/tmp/h3_test_media_XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    test_mp4_round_trip();
    test_png_and_wav();
    test_large_jpeg();
    h3_err e = {0};
    st_file *ex = st_open(FIX "expected.safetensors", &e);
    CHECK(ex != NULL, "%s", e.msg);
    if (ex) {
        test_reference_images(ex);
        test_reference_jpegs();
        test_reference_videos(ex);
        test_reference_audio(ex);
        test_reference_resampling(ex);
        test_slot_rule(ex);
        st_close(ex);
    }
    test_errors();
    remove_tree(tmpdir);
    TEST_END();
}
