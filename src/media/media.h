/* Media in and out through FFmpeg's libraries (libavformat/libavcodec/libswscale/libswresample).
 *
 * Out: an MP4 (H.264 yuv420p + AAC, 24 fps, 32 kHz stereo; docs/model/features.md 8.1), PNG frames into a
 * directory (8.2), a WAV file, a single PNG. Every output is written to a temporary in the target
 * folder and renamed into place (src/io/outfile.h), so a failed write leaves nothing half-written.
 * The *_to variants write into an output opened beforehand (h3_outfile_open, e.g. before hours of
 * compute) and leave the commit to the caller.
 *
 * In: images (PNG, JPEG, WebP) -> RGB uint8; videos -> RGB uint8 frames resampled onto 24 fps by
 * the reference's whole-frame rule (docs/model/text_encoder.md 3.1, diffusers before_encoder.py) plus the
 * first audio stream; audio files -> stereo float planar at 32 kHz (docs/model/audio_vae.md 7.2).
 *
 * The MEDIA=0 build (src/media/none/) has the same functions, each failing with
 * "built without FFmpeg (MEDIA=0)".
 *
 * Layouts: frames are [frames][height][width][3] (RGB, row-major); audio is planar float,
 * channel c at data + c * samples. */
#ifndef H3_MEDIA_H
#define H3_MEDIA_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include "../core/error.h"
#include "../io/outfile.h"

#define H3_MEDIA_FPS         24     /* the model's frame rate (docs/model/features.md 0) */
#define H3_MEDIA_SAMPLE_RATE 32000  /* the audio VAE's sample rate (docs/model/audio_vae.md 7) */

/* 1 when this build can read and write media, 0 for the MEDIA=0 build. */
int h3_media_available(void);

/* ---------------------------------------------------------------------------------------------
 * Decoded media (owned; free with the matching *_free, which also zeroes the struct). */

typedef struct h3_image {
    int      width, height;
    uint8_t *rgb;               /* [height][width][3] */
} h3_image;

typedef struct h3_audio {
    int      channels;          /* 2 from the readers */
    int      sample_rate;
    int64_t  samples;           /* per channel */
    float   *data;              /* planar: channel c at data + c * samples */
} h3_audio;

typedef struct h3_video {
    int      frames, width, height;
    uint8_t *rgb;               /* [frames][height][width][3] at 24 fps */
    double   source_fps;        /* the rate the container reports (avg, else guessed) */
    int      source_frames;     /* frames decoded from the file (before resampling) */
    int      rotation_turns;    /* clockwise quarter turns applied from the display matrix */
    int      has_audio;         /* 1 when the file's first audio stream was decoded into audio */
    h3_audio audio;
} h3_video;

void h3_image_free(h3_image *im);
void h3_audio_free(h3_audio *a);
void h3_video_free(h3_video *v);

/* Reader options. A zeroed struct (or NULL) means the defaults. */
typedef struct h3_read_opts {
    int     sample_rate;   /* audio output rate: 0 = 32000; -1 = the file's own rate */
    int     max_frames;    /* video: keep at most this many 24 fps frames; 0 = all */
    int     skip_audio;    /* video: do not decode the soundtrack (a silent reference) */
    int     ffmpeg_rotation; /* video: turn +-90 degree display matrices the way ffmpeg shows them
                                (upright) instead of the reference's opposite turn; docs/media.md */
    double  max_seconds;   /* refuse audio longer than this; 0 = 600 s */
    double  truncate_seconds; /* keep the first int(truncate_seconds * native rate) samples before
                                 resampling, as the reference's max_duration (= num_frames / 24);
                                 0 = keep all */
    int64_t max_bytes;     /* refuse decoded frames larger than this; 0 = 8 GiB */
    int64_t max_pixels;    /* refuse a picture larger than this (width x height); 0 = 2^28 */
} h3_read_opts;

/* Images: PNG, JPEG or WebP (first frame), converted to 8-bit RGB the way PIL's
 * Image.convert("RGB") does for diffusers' load_image: alpha dropped without compositing, gray
 * replicated, palette looked up, 16-bit samples reduced to their high byte, EXIF orientation
 * applied. */
int h3_read_image(const char *path, const h3_read_opts *opts, h3_image *out, h3_err *e);

/* Audio: the first audio stream of any supported audio or video file, decoded to float at its
 * native rate (libswresample converts the sample format only, as PyAV's AudioResampler in the
 * reference), optionally truncated (opts->truncate_seconds), then resampled to
 * opts->sample_rate (32 kHz by default) with torchaudio's Resample kernel (media_resample.c), as
 * _normalize_audio_condition does. Mono is duplicated to both channels, stereo kept; more
 * channels are an error (the reference raises too). */
int h3_read_audio(const char *path, const h3_read_opts *opts, h3_audio *out, h3_err *e);

/* Video: every frame of the first video stream as RGB, turned by the display matrix the way
 * diffusers does (for +-90 degrees that is the opposite of ffmpeg's upright display; see
 * opts->ffmpeg_rotation), then put on the 24 fps grid by repeating/dropping whole frames
 * (h3_media_fps_slot below), truncated to opts->max_frames. Unless opts->skip_audio, the first
 * audio stream (if any) is decoded as by h3_read_audio (has_audio says whether there was one). */
int h3_read_video(const char *path, const h3_read_opts *opts, h3_video *out, h3_err *e);

/* The same readers over bytes in memory; name is used in messages. */
int h3_read_image_mem(const void *data, size_t size, const char *name, const h3_read_opts *opts,
                      h3_image *out, h3_err *e);
int h3_read_audio_mem(const void *data, size_t size, const char *name, const h3_read_opts *opts,
                      h3_audio *out, h3_err *e);
int h3_read_video_mem(const void *data, size_t size, const char *name, const h3_read_opts *opts,
                      h3_video *out, h3_err *e);

/* The 24 fps slot of source frame i of a clip at `fps` (diffusers before_encoder.py
 * _normalize_video_condition): slot(i) = floor(i * (24 / fps) + 0.5) in double precision. Frame i
 * is repeated slot(i + 1) - slot(i) times (possibly zero: dropped); a clip of N frames becomes
 * slot(N) frames. Pure arithmetic, available in every build. */
static inline int64_t h3_media_fps_slot(int64_t i, double fps)
{
    double scale = (double)H3_MEDIA_FPS / fps;
    return (int64_t)floor((double)i * scale + 0.5);
}

/* ---------------------------------------------------------------------------------------------
 * Writing. Frames come as uint8 RGB or as float RGB in [0, 1] (converted like the reference:
 * round-half-even of x * 255, clipped to [0, 255]; NaN becomes 0). */

typedef struct h3_frames_view {
    int            frames, height, width;
    const uint8_t *u8;     /* [frames][height][width][3], or NULL */
    const float   *f32;    /* [frames][height][width][3] in [0, 1], or NULL (exactly one is set) */
} h3_frames_view;

typedef struct h3_mp4_opts {
    int         crf;            /* 0 = 18 */
    const char *preset;         /* NULL = "fast" */
    int         audio_bitrate;  /* 0 = 192000 */
    int         sync;           /* 1 = encode in the caller's thread (the same file; no overlap with the caller) */
} h3_mp4_opts;

/* One-shot MP4: frames at 24 fps, audio planar [2][samples] float at 32 kHz in [-1, 1]
 * (NULL = no audio track). Width and height must be even (yuv420p). */
int h3_write_mp4(const char *path, const h3_frames_view *frames, const float *audio,
                 int64_t samples, const h3_mp4_opts *opts, h3_err *e);

/* Streaming MP4 writer for frames that arrive in chunks. Nothing appears at `path` until
 * h3_mp4_writer_close succeeds; h3_mp4_writer_free on an unclosed writer removes the temp file. */
typedef struct h3_mp4_writer h3_mp4_writer;
h3_mp4_writer *h3_mp4_writer_new(const char *path, int width, int height, int with_audio,
                                 const h3_mp4_opts *opts, h3_err *e);
int  h3_mp4_writer_frames(h3_mp4_writer *w, const h3_frames_view *frames, h3_err *e);
int  h3_mp4_writer_audio(h3_mp4_writer *w, const float *left, const float *right, int64_t samples,
                         h3_err *e);
int  h3_mp4_writer_close(h3_mp4_writer *w, h3_err *e);
/* The same writer on an opened output (kind FILE): close finishes the file, the caller commits o (after
 * h3_mp4_writer_free, or before: the writer does not touch o after close) and frees it. */
h3_mp4_writer *h3_mp4_writer_new_to(h3_outfile *o, int width, int height, int with_audio,
                                    const h3_mp4_opts *opts, h3_err *e);
void h3_mp4_writer_free(h3_mp4_writer *w);

/* PNG frames dir/frame_00000.png, ... The directory is assembled under a temporary name and
 * renamed into place; an existing directory is replaced only if it holds nothing but
 * frame_*.png files (anything else is an error, so user files are never deleted). */
int h3_write_png_frames(const char *dir, const h3_frames_view *frames, h3_err *e);
/* Into an opened output of kind DIR (accept h3_out_frame_name); the caller commits and frees o. */
int h3_write_png_frames_to(h3_outfile *o, const h3_frames_view *frames, h3_err *e);

/* One PNG image (rgb [height][width][3]). */
int h3_write_png(const char *path, const uint8_t *rgb, int height, int width, h3_err *e);

/* WAV: planar float audio; bits = 32 writes IEEE float, bits = 16 writes PCM
 * (round(x * 32768) clipped to [-32768, 32767], FFmpeg's convention). */
int h3_write_wav(const char *path, const float *audio, int channels, int64_t samples,
                 int sample_rate, int bits, h3_err *e);
/* Into an opened output of kind FILE; the caller commits and frees o. */
int h3_write_wav_to(h3_outfile *o, const float *audio, int channels, int64_t samples, int sample_rate,
                    int bits, h3_err *e);

#endif
