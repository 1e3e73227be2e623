/* MiniMax-H3 video VAE: the spatial tile plan and the stitching of tiles (docs/model/video_vae.md 8.1, 8.2), shared by the decoder
 * (video_vae.c, pixels) and the encoder (video_vae_encoder.c, latents). */
#include "video_vae_tiling.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------------
 * Tiling (docs/model/video_vae.md 8.1, 8.2)
 * ---------------------------------------------------------------------------------------------- */

video_vae_tiling video_vae_tiling_default(void) {
    video_vae_tiling t = {1, 256, 256, 64, 64};
    return t;
}

/* Tile count along one axis, for sizing the plan arrays. */
static int plan_count(int64_t length, int tile, int min_overlap) {
    if (tile >= length) return 1;
    int64_t n = (length + tile - 1) / tile;
    while ((int64_t)tile * n - (int64_t)min_overlap * (n - 1) < length) n++;
    return (int)n;
}

int video_vae_split_tiles(int64_t length, int tile, int min_overlap, int ratio, int64_t *starts, int64_t *overlaps,
                          int cap, h3_err *e) {
    if (tile <= 0 || min_overlap < 0 || min_overlap >= tile)
        return h3_fail(e, "tiling: need tile > min_overlap >= 0 (tile %d, overlap %d)", tile, min_overlap);
    int n = plan_count(length, tile, min_overlap);
    if (n > cap) return h3_fail(e, "tiling: %d tiles exceed the plan capacity %d", n, cap);
    starts[0] = 0;
    if (n == 1) return 1;
    int64_t rem = (int64_t)tile * n - (int64_t)min_overlap * (n - 1) - length;
    for (int i = 0; i < n - 1; i++) overlaps[i] = min_overlap;
    for (int64_t i = 0; i < rem / ratio; i++) overlaps[i % (n - 1)] += ratio; /* round robin, whole latents */
    for (int i = 0; i < n - 1; i++) starts[i + 1] = starts[i] + tile - overlaps[i];
    return n;
}

void vv_stitch_free(vv_stitch *s) {
    if (s->bottom)
        for (int j = 0; j < s->nx; j++) free(s->bottom[j]);
    free(s->bottom);
    free(s->sb);
    free(s->right);
    free(s->ys);
    memset(s, 0, sizeof *s);
}

/* Plans both axes in pixel units (`length`, tile, overlap) and converts to the stitched unit by dividing
 * by `div` (1 for decode, S for encode). */
int vv_stitch_init(vv_stitch *s, int64_t Hpx, int64_t Wpx, const video_vae_tiling *t, int ratio, int div,
                       int64_t planes, h3_err *e) {
    memset(s, 0, sizeof *s);
    int tile_h = t->enabled ? t->tile_h : (int)Hpx, tile_w = t->enabled ? t->tile_w : (int)Wpx;
    int ov_h = t->enabled ? t->overlap_h : 0, ov_w = t->enabled ? t->overlap_w : 0;
    if (tile_h <= ov_h || tile_w <= ov_w)
        return h3_fail(e, "tiling: tile (%d x %d) must exceed the minimum overlap (%d x %d)", tile_h, tile_w, ov_h, ov_w);
    int ny = plan_count(Hpx, tile_h, ov_h), nx = plan_count(Wpx, tile_w, ov_w);
    int64_t *buf = calloc((size_t)(3 * (ny + nx) + 2), sizeof(int64_t) * 2);
    if (!buf) return h3_fail(e, "out of memory");
    s->ys = buf;
    s->oy = buf + ny;
    s->th = buf + 2 * ny;
    s->xs = buf + 3 * ny;
    s->ox = buf + 3 * ny + nx;
    s->tw = buf + 3 * ny + 2 * nx;
    if (video_vae_split_tiles(Hpx, tile_h, ov_h, ratio, s->ys, s->oy, ny, e) < 0 ||
        video_vae_split_tiles(Wpx, tile_w, ov_w, ratio, s->xs, s->ox, nx, e) < 0) {
        vv_stitch_free(s);
        return -1;
    }
    s->ny = ny;
    s->nx = nx;
    s->H = Hpx / div;
    s->W = Wpx / div;
    s->planes = planes;
    for (int i = 0; i < ny; i++) {
        s->ys[i] /= div;
        int64_t end = s->ys[i] + tile_h / div;
        s->th[i] = (end > s->H ? s->H : end) - s->ys[i]; /* slicing clamps at the edge */
        if (i < ny - 1) s->oy[i] /= div;
    }
    for (int j = 0; j < nx; j++) {
        s->xs[j] /= div;
        int64_t end = s->xs[j] + tile_w / div;
        s->tw[j] = (end > s->W ? s->W : end) - s->xs[j];
        if (j < nx - 1) s->ox[j] /= div;
    }
    s->bottom = calloc((size_t)nx, sizeof(float *));
    s->sb = calloc((size_t)nx, sizeof(int64_t));
    if (!s->bottom || !s->sb) {
        vv_stitch_free(s);
        return h3_fail(e, "out of memory");
    }
    return 0;
}

/* Blends raw tile (i, j) [planes][th][tw] into dst [planes][H][W] (docs/model/video_vae.md 8.2): the kept region, blended
 * first with the raw tile above, then with the raw tile to the left; then keeps this tile's own
 * bottom / right strips for the tiles that follow. */
int vv_stitch_tile(vv_stitch *s, int i, int j, const float *tile, float *dst, h3_err *e) {
    const int64_t th = s->th[i], tw = s->tw[j], H = s->H, W = s->W;
    const int64_t ey = i > 0 ? min3(s->oy[i - 1], s->th[i - 1], th) : 0;
    const int64_t ex = j > 0 ? min3(s->ox[j - 1], s->tw[j - 1], tw) : 0;
    int64_t ky = i < s->ny - 1 ? th - s->oy[i] : th, kx = j < s->nx - 1 ? tw - s->ox[j] : tw;
    if (ky < 0) ky = 0;
    if (kx < 0) kx = 0;
    const float *up = s->bottom[j];
    const int64_t sb = s->sb[j], sr = s->sr;
#pragma omp parallel for schedule(static) if (s->planes * ky * kx >= (1 << 15))
    for (int64_t p = 0; p < s->planes; p++) {
        const float *tp = tile + p * th * tw;
        float *dp = dst + p * H * W;
        for (int64_t y = 0; y < ky; y++) {
            for (int64_t x = 0; x < kx; x++) {
                float v = tp[y * tw + x];
                if (y < ey) {
                    float a = up[(p * sb + sb - ey + y) * tw + x];
                    float wb = (float)y / (float)ey, wa = 1.0f - wb;
                    v = a * wa + v * wb;
                }
                if (x < ex) {
                    float a = s->right[(p * th + y) * sr + sr - ex + x];
                    float wb = (float)x / (float)ex, wa = 1.0f - wb;
                    v = a * wa + v * wb;
                }
                dp[(s->ys[i] + y) * W + s->xs[j] + x] = v;
            }
        }
    }
    if (i < s->ny - 1) { /* raw bottom strip for tile (i+1, j) */
        int64_t n = s->oy[i] < th ? s->oy[i] : th;
        free(s->bottom[j]);
        s->bottom[j] = malloc((size_t)(s->planes * n * tw) * sizeof(float) + 1);
        if (!s->bottom[j]) return h3_fail(e, "out of memory");
        s->sb[j] = n;
        for (int64_t p = 0; p < s->planes; p++)
            memcpy(s->bottom[j] + p * n * tw, tile + (p * th + th - n) * tw, (size_t)(n * tw) * sizeof(float));
    }
    if (j < s->nx - 1) { /* raw right strip for tile (i, j+1) */
        int64_t n = s->ox[j] < tw ? s->ox[j] : tw;
        free(s->right);
        s->right = malloc((size_t)(s->planes * th * n) * sizeof(float) + 1);
        if (!s->right) return h3_fail(e, "out of memory");
        s->sr = n;
        for (int64_t p = 0; p < s->planes; p++)
            for (int64_t y = 0; y < th; y++)
                memcpy(s->right + (p * th + y) * n, tile + (p * th + y) * tw + tw - n, (size_t)n * sizeof(float));
    }
    return 0;
}

/* The tiling a call uses; zero sizes mean "reference default" as enable_tiling's `or` does. */
int vv_resolve_tiling(const video_vae_tiling *in, int ratio, video_vae_tiling *out, h3_err *e) {
    *out = video_vae_tiling_default();
    if (!in) return 0;
    if (!in->enabled) {
        out->enabled = 0;
        return 0;
    }
    if (in->tile_h < 0 || in->tile_w < 0 || in->overlap_h < 0 || in->overlap_w < 0)
        return h3_fail(e, "tiling: sizes must be >= 0");
    if (in->tile_h) out->tile_h = in->tile_h;
    if (in->tile_w) out->tile_w = in->tile_w;
    if (in->overlap_h) out->overlap_h = in->overlap_h;
    if (in->overlap_w) out->overlap_w = in->overlap_w;
    if (out->tile_h % ratio || out->tile_w % ratio || out->overlap_h % ratio || out->overlap_w % ratio)
        return h3_fail(e, "tiling: tile %dx%d and overlap %dx%d must be multiples of the spatial ratio %d", out->tile_h,
                       out->tile_w, out->overlap_h, out->overlap_w, ratio);
    if (out->overlap_h >= out->tile_h || out->overlap_w >= out->tile_w)
        return h3_fail(e, "tiling: the minimum overlap must be smaller than the tile");
    return 0;
}
