/* Conditioning inputs of fl2va and ref2va, prepared exactly as the diffusers pipeline does
 * (diffusers 0.42.1 modular_pipelines/minimax_h3: before_encoder.py, references.py, encoders.py;
 * docs/model/features.md 1.2-1.3, docs/model/video_vae.md 9.1, docs/model/audio_vae.md 7.2, docs/model/text_encoder.md 3):
 *
 *   keyframes   first keyframe stretched (LANCZOS) onto the canvas, follower cover-scaled and
 *               centre-cropped; the fl2va default canvas comes from the first keyframe's aspect.
 *   references  images to a 2048 short edge (multiples of 32, no area cap); videos at 24 fps,
 *               truncated to the target frame count, on the canvas of their own aspect, snapped
 *               down to 17n+5 frames before the VAE; soundtracks truncated to the target duration.
 *   latents     encode_vae_condition: ImageNet-normalized pixels -> tiled VAE encode -> posterior
 *               sample with a FRESH generator seeded 42 (per condition) -> fp16 rounding ->
 *               per-channel normalization. Audio: posterior mean, normalized, channel-major rows.
 *
 * Every function is a separate step so parity tooling can check each one against its Python
 * counterpart. Media decoding stays in src/media (h3_read_*); nothing here needs FFmpeg. */
#ifndef H3_CONDITION_H
#define H3_CONDITION_H

#include <stdint.h>

#include "../core/error.h"
#include "../model/audio_vae.h"
#include "../model/video_vae.h"

#define COND_ENCODE_SEED 42            /* keyframe_encode_seed */
#define COND_REF_IMAGE_SHORT_EDGE 2048 /* reference_image_short_edge */
#define COND_VIDEO_SAMPLE_FPS 2.0      /* the conditioner reads reference videos at 2 fps */

/* h3.c's media limits (docs/model/features.md 1.3, 2.2) on top of the pipeline's count rules. */
#define COND_MIN_AUDIO_SECONDS 2.0
#define COND_MAX_AUDIO_SECONDS 15.0
#define COND_MIN_VIDEO_FRAMES 5

/* ---- geometry ---- */

/* fl2va default canvas: resolve_canvas_size of the first keyframe's (width, height). */
int cond_fl2va_canvas(int image_width, int image_height, int *height, int *width, h3_err *e);

/* Follower keyframe geometry (MiniMaxH3ResizeStep): scale = max(W/w, H/h), resized =
 * (max(W, round(w*scale)), max(H, round(h*scale))) with Python round, crop offsets
 * ((rw - W)//2, (rh - H)//2). */
void cond_cover_geometry(int w, int h, int W, int H, int *resized_w, int *resized_h, int *left, int *top);

/* One keyframe onto the W x H canvas: index 0 (the geometry anchor) is stretched, index 1 (the
 * follower) cover-scaled then centre-cropped; an image already W x H is copied. out [H][W][3]. */
int cond_fit_keyframe(const uint8_t *rgb, int w, int h, int index, int W, int H, uint8_t *out, h3_err *e);

/* --ref-image-size: the reference's rule (diffusers and LightX2V: short edge 2048, scaled up or down; the
 * default), or the Metal engine's policies (docs/model/features.md 1.3): `match` scales down only so the pixel area is
 * at most the render canvas's, `max` scales down only so the short edge is at most 2048. */
typedef enum cond_ref_size { COND_REF_SIZE_REFERENCE = 0, COND_REF_SIZE_MATCH, COND_REF_SIZE_MAX } cond_ref_size;

/* Image reference size: aspect within 1:4..4:1 (else an error naming `what`), then the policy's scale, each side
 * max(32, round(side*scale/32)*32) (Python round). canvas_w x canvas_h: the render canvas (`match` only). */
int cond_ref_image_size(int w, int h, const char *what, cond_ref_size policy, int canvas_w, int canvas_h, int *out_w,
                        int *out_h, h3_err *e);

/* resolve_canvas_size(aw, ah, 32, short_edge, max_pixels) (the released rule: 768, 768*1344). */
int cond_resolve_canvas(double aspect_width, double aspect_height, int short_edge, int64_t max_pixels, int *height,
                        int *width, h3_err *e);

/* A video reference's frames (already on the 24 fps grid, [n][h][w][3]) truncated to num_frames
 * and put on the canvas of their own aspect by the rule (short_edge, max_pixels) (LANCZOS per
 * frame; the release uses 768, 768*1344). *out is malloc'd [*n_out][*out_h][*out_w][3]. */
int cond_ref_video_frames(const uint8_t *frames, int n, int w, int h, int num_frames, int short_edge,
                          int64_t max_pixels, const char *what, uint8_t **out, int *n_out, int *out_w, int *out_h,
                          h3_err *e);

/* Frames the VAE encodes of an n-frame reference: min(n, max(1, (n-5)//17)*17 + 5). */
int cond_ref_video_encode_frames(int n);

/* ---- latents ---- */

/* encode_vae_condition: pixels uint8 [T][H][W][3] -> normalized latents (1, C, Lt, H/16, W/16),
 * *latents malloc'd [C][Lt][lh][lw]. Tiled encode as released (video_vae_tiling_default).
 * The posterior noise is torch.randn under a generator seeded `encode_seed` (42). */
int cond_encode_vae(video_vae *v, const uint8_t *pixels, int T, int H, int W, uint64_t encode_seed, float **latents,
                    int *Lt, int *lh, int *lw, h3_err *e);

/* The parts of cond_encode_vae after encode(), for step-by-step checks: moments [2C][n] ->
 * (mean + std * eps) -> fp16 round -> normalized latents [C][n]. eps [C][n]. */
void cond_latents_from_moments(const video_vae_config *c, const float *moments, const float *eps, int64_t n,
                               float *latents);

/* Reference audio rows: wave planar [2][S] (32 kHz stereo) -> audio VAE posterior mean
 * [2][32][N], N = ceil(S/hop) -> normalized -> channel-major rows [2N][32] (*rows malloc'd). */
int cond_audio_rows(audio_vae *m, const float *wave, int64_t S, float **rows, int64_t *n_latents, h3_err *e);

/* Audio limits: a clip (or a soundtrack after truncation) must last 2..15 s; total <= 15 s is
 * checked by the caller. `what` names the input. */
int cond_check_audio_seconds(int64_t samples, int sample_rate, const char *what, int soundtrack, h3_err *e);

/* ---- a request's conditioning, end to end (condition_set.c, used by generate.c) ---- */

#define COND_MAX_ITEMS 12

/* One keyframe or reference. Visual items carry their prepared pixels (canvas keyframe, 2048-edge
 * image, 24 fps canvas video) and, after cond_set_encode, their normalized latents; items with
 * sound carry the 32 kHz stereo waveform and, after encoding, their rows. */
typedef struct cond_item {
    int      kind;             /* layout_ref_kind: LAYOUT_REF_IMAGE / _VIDEO / _AUDIO */
    char     what[600];        /* the flag and path, for messages */
    uint8_t *pixels;           /* [T][H][W][3] or NULL (audio) */
    int      T, H, W;
    float   *wave;             /* planar [2][samples] at 32 kHz, or NULL */
    int64_t  samples;
    float   *latents;          /* [C][Lt][lh][lw] normalized (cond_encode_vae) */
    int      Lt, lh, lw;
    float   *audio_rows;       /* [2 * audio_latents][32] (cond_audio_rows) */
    int64_t  audio_latents;
} cond_item;

typedef struct cond_set {
    int       ref2va;          /* 0: fl2va keyframes, 1: ref2va references */
    int       n;
    cond_item items[COND_MAX_ITEMS];
    int       anchors[2];      /* fl2va: LAYOUT_ANCHOR_FIRST/LAST per item */
} cond_set;

void cond_set_free(cond_set *s);

/* fl2va: reads --first-frame / --last-frame, resolves the canvas from the first keyframe when
 * *height and *width are 0, and fits every keyframe onto it. */
int cond_set_keyframes(cond_set *s, const char *first, const char *last, int *height, int *width, h3_err *e);

/* ref2va: reads the references in order (h3_ref of request.h), prepares them as
 * the setup step does for an aligned target of num_frames frames, and applies the media limits. */
struct h3_request;
int cond_set_references(cond_set *s, const struct h3_request *r, int num_frames, int canvas_w, int canvas_h, h3_err *e);

/* VAE encodes (video VAE encoder for visual items, audio VAE encoder for sound), each model
 * loaded, used and freed here. vae_dir / audio_vae_dir: the snapshot folders. */
int cond_set_encode(cond_set *s, h3_backend *be, const char *vae_dir, const char *audio_vae_dir, h3_err *e);

#endif
