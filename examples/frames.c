/* frames SNAPSHOT OUT_DIR [PROMPT]: one clip through libh3's sinks (docs/api.md): every video frame and the audio
 * track are copied into this program's own buffers as the decoders produce them (nothing is written by the
 * library), then saved from those buffers as OUT_DIR/frame_00000.png ... and OUT_DIR/audio.wav (a build without
 * FFmpeg keeps them in memory only).
 * Build: cc frames.c $(pkg-config --cflags --libs h3) -o frames
 * H3_EXAMPLE_SIZE=WxH, H3_EXAMPLE_STEPS=N: a smaller canvas / fewer steps (the tests' tiny snapshot). */
#include <h3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct clip {
    float  *video;          /* [frames][height][width][3], allocated at the first frame (its count is the video's) */
    int64_t frames, got;
    int     width, height;
    float  *left, *right;   /* the audio, planar */
    int64_t samples;
    int     rate;
} clip;

static int on_frame(void *user, const h3_frame *f) {
    clip *c = user;
    size_t n = (size_t)f->width * (size_t)f->height * 3;
    if (!c->video) {
        c->frames = f->count, c->width = f->width, c->height = f->height;
        if (!(c->video = malloc(n * sizeof(float) * (size_t)c->frames))) return 1; /* nonzero cancels */
    }
    if (f->index < 0 || f->index >= c->frames || f->width != c->width || f->height != c->height) return 1;
    memcpy(c->video + (size_t)f->index * n, f->rgb, n * sizeof(float));
    c->got++;
    return 0;
}

static int on_audio(void *user, const float *left, const float *right, int64_t samples, int sample_rate) {
    clip *c = user;
    c->left = malloc(sizeof(float) * (size_t)samples), c->right = malloc(sizeof(float) * (size_t)samples);
    if (!c->left || !c->right) return 1;
    memcpy(c->left, left, sizeof(float) * (size_t)samples);
    memcpy(c->right, right, sizeof(float) * (size_t)samples);
    c->samples = samples, c->rate = sample_rate;
    return 0;
}

static void log_line(void *user, int kind, const char *line) {
    (void)user;
    fprintf(stderr, kind == H3_LOG_MESSAGE ? "h3: %s\n" : "%s\n", line);
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: frames SNAPSHOT OUT_DIR [PROMPT]   (libh3 %s)\n", h3_version());
        return 2;
    }
    h3_engine_options o;
    h3_engine_options_init(&o);
    o.log = log_line;
    h3_engine *eng;
    clip c = {0};
    char path[4096], err[512] = "";
    int rc = h3_engine_open(argv[1], &o, &eng);
    if (rc == H3_OK) {
        h3_params p;
        h3_params_init(&p);
        p.prompt = argc > 3 ? argv[3] : "A red fox runs through fresh snow at dawn.";
        p.output_mp4 = NULL; /* no file from the library: the sinks get everything */
        const char *size = getenv("H3_EXAMPLE_SIZE"), *steps = getenv("H3_EXAMPLE_STEPS");
        if (size) sscanf(size, "%dx%d", &p.width, &p.height);
        if (steps) p.steps = atoi(steps);
        h3_sinks s = {.video_frame = on_frame, .audio = on_audio, .user = &c};
        rc = h3_engine_check(eng, &p, NULL); /* the settings, before any model loads */
        if (rc == H3_OK) rc = h3_engine_generate(eng, &p, &s);
        if (rc != H3_OK) fprintf(stderr, "frames: %s: %s\n", h3_status_name(rc), h3_engine_error(eng));
    } else {
        fprintf(stderr, "frames: %s: %s\n", h3_status_name(rc), eng ? h3_engine_error(eng) : "out of memory");
    }
    size_t n = (size_t)c.width * (size_t)c.height * 3;
    int save = h3_has_media();
    for (int64_t i = 0; rc == H3_OK && save && i < c.frames; i++) {
        snprintf(path, sizeof path, "%s/frame_%05lld.png", argv[2], (long long)i);
        rc = h3_save_png(path, c.video + (size_t)i * n, c.width, c.height, err, sizeof err);
    }
    snprintf(path, sizeof path, "%s/audio.wav", argv[2]);
    if (rc == H3_OK && save && c.samples) rc = h3_save_wav(path, c.left, c.right, c.samples, c.rate, err, sizeof err);
    if (err[0]) fprintf(stderr, "frames: %s\n", err);
    if (rc == H3_OK)
        printf("%lld of %lld frames %dx%d, %lld audio samples at %d Hz, on %s%s\n", (long long)c.got,
               (long long)c.frames, c.width, c.height, (long long)c.samples, c.rate, h3_engine_backend(eng),
               save ? "" : " (no FFmpeg in this build: nothing saved)");
    free(c.video), free(c.left), free(c.right);
    h3_engine_close(eng);
    return rc == H3_OK ? 0 : rc == H3_ERR_BAD_INPUT ? 2 : 1;
}
