/* The MEDIA=0 build (no FFmpeg on the machine): the media API, every call failing clearly.
 * The frees are real so callers can clean up the same way in both builds. */
#include "../media.h"

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

int h3_read_image(const char *path, const h3_read_opts *opts, h3_image *out, h3_err *e)
{ memset(out, 0, sizeof *out); return NO_FFMPEG(path); }
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
int h3_mp4_writer_frames(h3_mp4_writer *w, const h3_frames_view *frames, h3_err *e)
{ return h3_fail(e, "built without FFmpeg (MEDIA=0)"); }
int h3_mp4_writer_audio(h3_mp4_writer *w, const float *left, const float *right, int64_t samples, h3_err *e)
{ return h3_fail(e, "built without FFmpeg (MEDIA=0)"); }
int h3_mp4_writer_close(h3_mp4_writer *w, h3_err *e) { return h3_fail(e, "built without FFmpeg (MEDIA=0)"); }
void h3_mp4_writer_free(h3_mp4_writer *w) { (void)w; }
int h3_write_png_frames(const char *dir, const h3_frames_view *frames, h3_err *e) { return NO_FFMPEG(dir); }
int h3_write_png(const char *path, const uint8_t *rgb, int height, int width, h3_err *e) { return NO_FFMPEG(path); }
int h3_write_wav(const char *path, const float *audio, int channels, int64_t samples, int sample_rate,
                 int bits, h3_err *e)
{ return NO_FFMPEG(path); }
