/* Private to the video VAE (video_vae.c: weights, decoder, tiling; video_vae_encoder.c): the model
 * structure and the spatial stitching shared by the encoder and the decoder drivers. */
#ifndef H3_VIDEO_VAE_INTERNAL_H
#define H3_VIDEO_VAE_INTERNAL_H

#include "../backend/backend_fp8.h"
#include "../io/safetensors.h"
#include "video_vae.h"

typedef struct vv_resnet {
    int cin, cout;
    const float *n1w, *n1b, *c1w, *c1b, *n2w, *n2b, *c2w, *c2b, *scw, *scb; /* sc*: NULL without shortcut */
} vv_resnet;

typedef struct vv_level {
    vv_resnet  *res;
    const float *dw, *db; /* downsampler conv, NULL without */
} vv_level;

typedef struct vv_block {
    const float *norm1, *norm2, *scale1, *scale2;
    h3_tensor    q, qb, k, kb, v, vb, o, ob;
    h3_tensor    ffv, ffvb, ffg, ffgb, ff2, ff2b; /* ff.net.0.proj split into its value / gate halves */
    h3_tensor    ff1, ff1b;                        /* ff.net.0.proj whole: [value; gate] (one GEMM) */
    h3_tensor   *qkv, *qkvb; /* bf16 mode: [to_q; to_k; to_v] (BF16) and their biases (F32), owned; q/k/v view it */
    h3_fp8_linear qkv8, o8, ff18, ff28; /* VIDEO_VAE_FP8: the four block GEMMs' FP8 copies (biases: the bf16 ones) */
} vv_block;

struct video_vae {
    video_vae_config cfg;
    h3_backend      *be;
    st_set          *set;
    int              parts;
    int              bf16;    /* VIDEO_VAE_BF16: decoder block matrices BF16, H3_BF16_OUT on them */
    int              fp8;     /* VIDEO_VAE_FP8: the block GEMMs through their FP8 copies (implies bf16) */
    h3_expect_list   names;   /* tensors loaded, same order as `w` */
    void           (*log)(void *user, int kind, const char *line); /* video_vae_set_log: H3_VAE_PROFILE's line */
    void            *log_user;
    h3_tensor      **w;       /* resident weights (h3_weight_upload) */
    /* encoder */
    const float *conv_in_w, *conv_in_b, *norm_out_w, *norm_out_b, *conv_out_w, *conv_out_b, *quant_w, *quant_b;
    vv_level     levels[VVAE_MAX_LEVELS];
    /* decoder */
    h3_tensor    pq, pqb, proj_in, proj_in_b, proj_out, proj_out_b;
    const float *registers, *dnorm_w, *dnorm_b;
    vv_block    *blocks;
    int          batch;      /* bf16 decode: most tiles per batched pass (0: automatic); 1: per-tile path */
    int          proj_out_f16; /* bf16 mode: proj_out as an fp16 GEMM (default; H3_VAE_PROJ_OUT=fp32: the fp32 SGEMM) */
    float       *pin[2];     /* bf16 decode: host buffers of the asynchronous tile downloads (h3_vae_host_alloc) */
    size_t       pin_bytes;
    int          small_tail; /* H3_VAE_TAIL (default 1): the batched decode ends on a small batch */
    int          vp_on;      /* H3_VAE_PROFILE: per-op wall time of the batched decode (video_vae.c) */
    double       vp_acc[16], vp_t0;
};

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
/* The tensors of the given parts (VIDEO_VAE_ENCODER / _DECODER) into l (video_vae_config.c). */
int  video_vae_expect_parts(const video_vae_config *c, int parts, h3_expect_list *l, h3_err *e);

#endif
