/* MiniMax-H3 video VAE: the spatial tile plan and the stitching of tiles (docs/model/video_vae.md 8.1, 8.2), shared by
 * the decoder (pixels) and the encoder (latents). It depends on nothing of the model, so the model's files include it
 * and it includes none of theirs. */
#ifndef H3_VIDEO_VAE_TILING_H
#define H3_VIDEO_VAE_TILING_H

#include <stdint.h>

#include "../core/error.h"

/* Spatial tiling (AutoencoderKLMiniMaxH3.enable_tiling); sizes in pixels. */
typedef struct video_vae_tiling {
    int enabled;
    int tile_h, tile_w, overlap_h, overlap_w;
} video_vae_tiling;
/* The released behaviour: enabled, 256 x 256 tiles, minimum overlap 64. */
video_vae_tiling video_vae_tiling_default(void);
/* Tile plan along one axis (_split_tiles, docs/model/video_vae.md 8.1): fills starts/overlaps (capacity `cap`), returns the
 * tile count (every tile is `tile` long except a single tile covering a shorter axis), -1 on error. */
int video_vae_split_tiles(int64_t length, int tile, int min_overlap, int ratio, int64_t *starts,
                          int64_t *overlaps, int cap, h3_err *e);

/* A tile grid in the unit being stitched (pixels for decode, latents for encode) plus the raw strips
 * of neighbouring tiles the blend needs, so tiles can be stitched one at a time in row-major order. */
static inline int64_t min3(int64_t a, int64_t b, int64_t c) { return a < b ? (a < c ? a : c) : (b < c ? b : c); }

typedef struct vv_stitch {
    int      ny, nx;
    int64_t *ys, *xs, *oy, *ox, *th, *tw; /* starts, overlaps (n-1), actual sizes */
    int64_t  H, W, planes;
    float  **bottom;  /* per column: [planes][sb][tw] last rows of the raw tile above */
    int64_t *sb;
    float   *right;   /* [planes][th][sr] last columns of the raw tile to the left */
    int64_t  sr;
} vv_stitch;

void vv_stitch_free(vv_stitch *s);
/* Plans both axes in pixel units (`length`, tile, overlap) and converts to the stitched unit by dividing
 * by `div` (1 for decode, S for encode). */
int  vv_stitch_init(vv_stitch *s, int64_t Hpx, int64_t Wpx, const video_vae_tiling *t, int ratio, int div,
                    int64_t planes, h3_err *e);
/* Blends raw tile (i, j) [planes][th][tw] into dst [planes][H][W] (tiles in row-major order). */
int  vv_stitch_tile(vv_stitch *s, int i, int j, const float *tile, float *dst, h3_err *e);
/* The tiling a call uses; zero sizes mean "reference default" as enable_tiling's `or` does. */
int  vv_resolve_tiling(const video_vae_tiling *in, int ratio, video_vae_tiling *out, h3_err *e);

#endif
