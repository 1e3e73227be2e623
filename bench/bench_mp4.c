/* MP4 writer timing: bench_mp4 [W H FRAMES [DECODE_MS [X264_PRESET]]]   (default 960 544 124 0 fast)
 * Writes a synthetic clip (moving gradients + a stereo tone, float frames as the pipeline hands them over) through
 * the streaming writer, once with the encoder in the caller's thread (h3_mp4_opts.sync) and once with the
 * encoder thread (the default, docs/media.md "Encoding off the critical path"). DECODE_MS > 0 makes the caller
 * sleep that long before each frame, standing in for a decoder that produces frames at that pace: then the
 * "caller" time is what the encode adds to the decode. Prints, per mode, the time the caller spends inside the
 * writer (frames + audio + close) and the wall time. Not a test: numbers depend on the machine. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "media/media.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static void fill_frame(float *f, int w, int h, int t) {
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            float *p = f + ((size_t)y * w + x) * 3;
            p[0] = 0.5f + 0.5f * sinf(0.02f * (float)(x + 3 * t));
            p[1] = 0.5f + 0.5f * sinf(0.03f * (float)(y - 2 * t));
            p[2] = (float)((x ^ y) & 255) / 255.0f;
        }
}

static int run(const char *path, int sync, int w, int h, int frames, double decode_ms, const char *preset, double *inside,
               double *wall) {
    h3_err e = {{0}};
    const int64_t spf = H3_MEDIA_SAMPLE_RATE / H3_MEDIA_FPS;
    float *f = malloc(sizeof(float) * 3 * (size_t)w * h), *pcm = malloc(sizeof(float) * 2 * (size_t)(spf + 1));
    if (!f || !pcm) return 1;
    h3_mp4_opts o = {.sync = sync, .preset = preset};
    double t0 = now(), in = 0;
    double a = now();
    h3_mp4_writer *wr = h3_mp4_writer_new(path, w, h, 1, &o, &e);
    in += now() - a;
    if (!wr) {
        fprintf(stderr, "bench_mp4: %s\n", e.msg);
        return 1;
    }
    int rc = 0;
    for (int t = 0; t < frames && !rc; t++) {
        if (decode_ms > 0) {
            struct timespec ts = {(time_t)(decode_ms / 1000), (long)(fmod(decode_ms, 1000.0) * 1e6)};
            nanosleep(&ts, NULL);
        }
        fill_frame(f, w, h, t); /* the decoder's output; not counted */
        for (int64_t i = 0; i < spf; i++) {
            float s = 0.25f * sinf(6.2831853f * 440.0f * (float)(t * spf + i) / H3_MEDIA_SAMPLE_RATE);
            pcm[i] = s, pcm[spf + i] = -s;
        }
        h3_frames_view v = {.frames = 1, .height = h, .width = w, .f32 = f};
        a = now();
        rc = h3_mp4_writer_frames(wr, &v, &e) || h3_mp4_writer_audio(wr, pcm, pcm + spf, spf, &e);
        in += now() - a;
    }
    a = now();
    if (!rc) rc = h3_mp4_writer_close(wr, &e);
    in += now() - a;
    h3_mp4_writer_free(wr);
    *wall = now() - t0, *inside = in;
    if (rc) fprintf(stderr, "bench_mp4: %s\n", e.msg);
    free(f);
    free(pcm);
    return rc;
}

int main(int argc, char **argv) {
    int w = argc > 3 ? atoi(argv[1]) : 960, h = argc > 3 ? atoi(argv[2]) : 544, n = argc > 3 ? atoi(argv[3]) : 124;
    double dms = argc > 4 ? atof(argv[4]) : 0;
    const char *preset = argc > 5 ? argv[5] : "fast";
    if (w < 2 || h < 2 || w % 2 || h % 2 || n < 1 || dms < 0) {
        fprintf(stderr, "usage: bench_mp4 [W H FRAMES [DECODE_MS [X264_PRESET]]] (even W and H)\n");
        return 2;
    }
    const char *path = "bench_mp4_out.mp4";
    for (int sync = 1; sync >= 0; sync--) {
        double in, wall;
        if (run(path, sync, w, h, n, dms, preset, &in, &wall)) return 1;
        printf("bench_mp4 %dx%dx%d decode %.1f ms/frame, x264 %s, %-14s: caller inside the writer %.3f s, wall %.3f s\n",
               w, h, n, dms, preset, sync ? "sync" : "encoder thread", in, wall);
    }
    remove(path);
    return 0;
}
