/* The MEDIA=0 build (no FFmpeg on the machine): the media API, every call failing clearly.
 * The frees are real so callers can clean up the same way in both builds. */
#include "../media.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_FFMPEG(what) h3_fail(e, "%s: built without FFmpeg (MEDIA=0)", (what) ? (what) : "<memory>")

int h3_media_available(void) { return 0; }

void h3_image_free(h3_image *im) { if (im) { free(im->rgb); memset(im, 0, sizeof *im); } }
void h3_audio_free(h3_audio *a) { if (a) { free(a->data); memset(a, 0, sizeof *a); } }
void h3_video_free(h3_video *v)
{
    if (!v) return;
    free(v->rgb);
    h3_audio_free(&v->audio);
    memset(v, 0, sizeof *v);
}

/* Binary PPM (P6, maxval 255) is the one image format read without FFmpeg, so fl2va keyframes can
 * be given to a MEDIA=0 build (the GPU machine has no FFmpeg: tests/cuda/run_e2e_device.sh, whose
 * PPMs hold the pixels of the e2e golden's PNGs). FFmpeg builds read PNG/JPEG/WebP, not PPM. */
static int ppm_token(FILE *f, long *v)
{
    int c;
    do {
        c = fgetc(f);
        if (c == '#') while (c != '\n' && c != EOF) c = fgetc(f);
    } while (c == ' ' || c == '\t' || c == '\n' || c == '\r');
    if (c < '0' || c > '9') return -1;
    for (*v = 0; c >= '0' && c <= '9' && *v < 100000000; c = fgetc(f)) *v = *v * 10 + (c - '0');
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' ? 0 : -1; /* one whitespace before the pixels */
}

static int read_ppm(const char *path, h3_image *out, h3_err *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) return h3_fail(e, "%s: cannot open", path);
    long w = 0, h = 0, maxval = 0;
    int ok = fgetc(f) == 'P' && fgetc(f) == '6' && !ppm_token(f, &w) && !ppm_token(f, &h) && !ppm_token(f, &maxval) &&
             w > 0 && h > 0 && w <= 65536 && h <= 65536 && w * h <= (1L << 28) && maxval == 255;
    size_t n = ok ? (size_t)w * (size_t)h * 3 : 0;
    if (ok && !(out->rgb = malloc(n))) ok = 0;
    if (ok && fread(out->rgb, 1, n, f) != n) ok = 0;
    fclose(f);
    if (!ok) {
        h3_image_free(out);
        return h3_fail(e, "%s: not a binary PPM (P6, maxval 255) of at most 2^28 pixels, or truncated "
                          "(the only image format of a MEDIA=0 build)", path);
    }
    out->width = (int)w, out->height = (int)h;
    return 0;
}

int h3_read_image(const char *path, const h3_read_opts *opts, h3_image *out, h3_err *e)
{
    memset(out, 0, sizeof *out);
    size_t n = path ? strlen(path) : 0;
    if (n > 4 && !strcmp(path + n - 4, ".ppm")) return read_ppm(path, out, e);
    return NO_FFMPEG(path);
}
int h3_read_audio(const char *path, const h3_read_opts *opts, h3_audio *out, h3_err *e)
{ memset(out, 0, sizeof *out); return NO_FFMPEG(path); }
int h3_read_video(const char *path, const h3_read_opts *opts, h3_video *out, h3_err *e)
{ memset(out, 0, sizeof *out); return NO_FFMPEG(path); }
int h3_read_image_mem(const void *data, size_t size, const char *name, const h3_read_opts *opts,
                      h3_image *out, h3_err *e)
{ memset(out, 0, sizeof *out); return NO_FFMPEG(name); }
int h3_read_audio_mem(const void *data, size_t size, const char *name, const h3_read_opts *opts,
                      h3_audio *out, h3_err *e)
{ memset(out, 0, sizeof *out); return NO_FFMPEG(name); }
int h3_read_video_mem(const void *data, size_t size, const char *name, const h3_read_opts *opts,
                      h3_video *out, h3_err *e)
{ memset(out, 0, sizeof *out); return NO_FFMPEG(name); }

int h3_write_mp4(const char *path, const h3_frames_view *frames, const float *audio, int64_t samples,
                 const h3_mp4_opts *opts, h3_err *e)
{ return NO_FFMPEG(path); }
h3_mp4_writer *h3_mp4_writer_new(const char *path, int width, int height, int with_audio,
                                 const h3_mp4_opts *opts, h3_err *e)
{ NO_FFMPEG(path); return NULL; }
h3_mp4_writer *h3_mp4_writer_new_to(h3_outfile *o, int width, int height, int with_audio, const h3_mp4_opts *opts,
                                    h3_err *e)
{ NO_FFMPEG(o ? o->path : NULL); return NULL; }
int h3_mp4_writer_frames(h3_mp4_writer *w, const h3_frames_view *frames, h3_err *e)
{ return h3_fail(e, "built without FFmpeg (MEDIA=0)"); }
int h3_mp4_writer_audio(h3_mp4_writer *w, const float *left, const float *right, int64_t samples, h3_err *e)
{ return h3_fail(e, "built without FFmpeg (MEDIA=0)"); }
int h3_mp4_writer_close(h3_mp4_writer *w, h3_err *e) { return h3_fail(e, "built without FFmpeg (MEDIA=0)"); }
void h3_mp4_writer_free(h3_mp4_writer *w) { (void)w; }
int h3_write_png_frames(const char *dir, const h3_frames_view *frames, h3_err *e) { return NO_FFMPEG(dir); }
int h3_write_png_frames_to(h3_outfile *o, const h3_frames_view *frames, h3_err *e) { return NO_FFMPEG(o ? o->path : NULL); }
int h3_write_png(const char *path, const uint8_t *rgb, int height, int width, h3_err *e) { return NO_FFMPEG(path); }
int h3_write_wav(const char *path, const float *audio, int channels, int64_t samples, int sample_rate,
                 int bits, h3_err *e)
{ return NO_FFMPEG(path); }
int h3_write_wav_to(h3_outfile *o, const float *audio, int channels, int64_t samples, int sample_rate, int bits,
                    h3_err *e)
{ return NO_FFMPEG(o ? o->path : NULL); }
