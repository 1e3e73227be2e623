/* The packed sequence of one request (docs/model/dit.md sections 5, 6 and 10), bit-exact with
 * diffusers' build_packed_sequence / build_ref2va_packed_sequence / build_row_timesteps:
 *   t2va/fl2va: [ text | keyframe condition blocks | target audio | target video ]
 *   ref2va:      [ text | reference blocks in request order | target audio | target video ]
 * plus the request geometry helpers with the pipeline's validation errors. Patch (1, 2, 2) and
 * stereo (2 audio channels, channel-major) are fixed by the released model. */
#ifndef H3_LAYOUT_H
#define H3_LAYOUT_H

#include <stdint.h>

#include "../core/error.h"

enum { LAYOUT_TAG_VIDEO = 0, LAYOUT_TAG_TEXT = 1, LAYOUT_TAG_AUDIO = 2 };
enum { LAYOUT_ANCHOR_FIRST = 0, LAYOUT_ANCHOR_LAST = 1 };
enum { LAYOUT_AUDIO_CHANNELS = 2, LAYOUT_PATCH = 2 };

#define LAYOUT_FPS 24
#define LAYOUT_CANVAS_MULTIPLE 32        /* VAE spatial 16 x patch 2 */
#define LAYOUT_CANVAS_SHORT_EDGE 768
#define LAYOUT_CANVAS_MAX_PIXELS (768 * 1344)
#define LAYOUT_CONDITION_TIMESTEP 0.999  /* keyframe_noise_aug */

/* ---- geometry (docs/model/dit.md 5) ---- */

/* align_num_frames: round up to the next 17n + 5. num_frames < 1 is an error. */
int layout_align_num_frames(int num_frames, int *aligned, h3_err *e);
/* The 5..15 s rule on the aligned count (t2va/fl2va layout step, ref2va setup step). */
int layout_check_duration(int requested, int aligned, h3_err *e);
/* video_latent_num_frames: (n - 5)/17*5 + 2; requires n % 17 == 5. */
int layout_latent_frames(int aligned, int *num_latent_frames, h3_err *e);
/* audio_latent_num_frames: int(round(n / 24 * 40)) (= (5n + 1) / 3 in integers). */
int layout_audio_latents(int num_frames);
/* resolve_canvas_size(aw, ah, 32, 768, 768*1344): aspect within [1/4, 4], short edge 768, area cap,
 * round-half-to-even to multiples of 32. */
int layout_resolve_canvas(double aspect_width, double aspect_height, int *height, int *width, h3_err *e);
/* height/width: both or neither (have_h != have_w fails), multiples of 32. */
int layout_check_canvas(int have_height, int have_width, int height, int width, h3_err *e);

/* Everything the t2va/fl2va layout step resolves from (height, width, num_frames). */
typedef struct layout_geometry {
    int height, width;          /* pixels */
    int num_frames;             /* aligned, 17n + 5 */
    int num_latent_frames;      /* F */
    int latent_height, latent_width;  /* lh = height/16, lw = width/16 */
    int num_audio_latents;      /* A */
} layout_geometry;

/* The layout step's geometry: canvas check, alignment, duration, latent shapes. height/width <= 0
 * means "not given" (both must then be absent): the 16:9 default canvas 768 x 1344 is used. */
int layout_resolve_geometry(int height, int width, int num_frames, layout_geometry *g, h3_err *e);

/* ---- packed layouts (docs/model/dit.md 6) ---- */

typedef enum layout_ref_kind { LAYOUT_REF_IMAGE = 0, LAYOUT_REF_VIDEO = 1, LAYOUT_REF_AUDIO = 2 } layout_ref_kind;

/* One ref2va reference as the layout sees it (geometry comes from its encoded latents). */
typedef struct layout_ref {
    layout_ref_kind kind;
    int frames;          /* latent frames: image 1, video Fr; unused for audio */
    int latent_height;   /* rh (even); unused for audio */
    int latent_width;    /* rw (even); unused for audio */
    int audio_latents;   /* audio clip: Ar (> 0); video: soundtrack Ar (0 = none); image: 0 */
} layout_ref;

typedef struct layout {
    int64_t S;                 /* packed rows */
    int64_t T, Nv, Na;         /* text, video (conditions + targets), audio (references + targets) */
    int64_t num_condition_video_rows, num_condition_audio_rows;
    int     num_latent_frames, latent_height, latent_width, num_audio_latents;  /* the target */
    double  *position_ids;     /* [S, 3] (t, h, w), fp64 */
    int64_t *token_tags;       /* [S] */
    int64_t *video_indices;    /* [Nv], conditions first */
    int64_t *audio_indices;    /* [Na], references first */
    int64_t *text_indices;     /* [T] = 0..T-1 */
} layout;

/* build_packed_sequence (6.3). text_tags: the presentation tag of each text row (1 text, 0 vision
 * rows). anchors: LAYOUT_ANCHOR_FIRST/LAST in packed order (0..2 of them). */
layout *layout_new_t2va(const int64_t *text_tags, int64_t T, int num_latent_frames, int latent_height,
                        int latent_width, int num_audio_latents, const int *anchors, int num_anchors, h3_err *e);
/* build_ref2va_packed_sequence (6.4). */
layout *layout_new_ref2va(const int64_t *text_tags, int64_t T, const layout_ref *refs, int num_refs,
                          int num_latent_frames, int latent_height, int latent_width, int num_audio_latents,
                          h3_err *e);
/* The ref2va setup step's request rules (1..12 references, <= 9 images / 3 videos / 3 audios, not
 * audio-only). */
int layout_check_references(const layout_ref *refs, int num_refs, h3_err *e);
void layout_free(layout *L);

/* A layout from explicit tensors (e.g. a probe input): validates shapes, that the three index
 * sets partition 0..S-1, tags in {0,1,2}, and the condition counts; the arrays are copied. */
layout *layout_new_from_tensors(int64_t S, const double *position_ids, const int64_t *token_tags,
                                const int64_t *video_indices, int64_t Nv, const int64_t *audio_indices,
                                int64_t Na, const int64_t *text_indices, int64_t T, int64_t num_condition_video_rows,
                                int64_t num_condition_audio_rows, int num_latent_frames, int latent_height,
                                int latent_width, int num_audio_latents, h3_err *e);

/* ---- per-step row timestep plan (6.5, build_row_timesteps) ---- */

#define LAYOUT_MAX_TIMESTEPS 4

/* Rows: all at tv; condition video rows at max(tv, 0.999); target audio rows at ta; reference audio
 * rows at 1.0. timestep[0..*K-1] = the sorted distinct fp32 values, timestep_indices[S] = the index
 * of each row's value (idx may be NULL: only the values). */
void layout_row_timesteps(const layout *L, float tv, float ta, float timestep[LAYOUT_MAX_TIMESTEPS], int *K,
                          int64_t *timestep_indices);

/* ---- spatial / temporal grids (6.1, 6.2), exposed for tests ---- */
/* numpy.linspace(left, left + ratio, dim/2, endpoint=False) * 32 with ratio = dim / sqrt_area. */
void layout_spatial_grid(int dim, double sqrt_area, double *grid);
/* origin + sequential running sum of the spans 5/3 * (1,4,4,4,4). */
void layout_temporal_grid(int num_latent_frames, double origin, double *times);
/* The "last" keyframe anchor: (T + pairwise_sum(spans)) - 5/3, numpy's pairwise summation. */
double layout_last_anchor_time(int64_t T, int num_latent_frames);

#endif
