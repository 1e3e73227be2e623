/* Private to the video VAE (video_vae.c: weights, the decoder's tile work; video_vae_decode.c: the decode drivers;
 * video_vae_tiling.c; video_vae_encoder.c): the model
 * structure and the spatial stitching shared by the encoder and the decoder drivers. */
#ifndef H3_VIDEO_VAE_INTERNAL_H
#define H3_VIDEO_VAE_INTERNAL_H

#include "../backend/ops.h"
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
    float       *pin[2];     /* bf16 decode: host buffers of the asynchronous tile downloads (h3_host_alloc) */
    size_t       pin_bytes;
    int          small_tail; /* H3_VAE_TAIL (default 1): the batched decode ends on a small batch */
    int          vp_on;      /* H3_VAE_PROFILE: per-op wall time of the batched decode (video_vae.c) */
    double       vp_acc[16], vp_t0;
};

/* The tensors of the given parts (VIDEO_VAE_ENCODER / _DECODER) into l (video_vae_config.c). */
int  video_vae_expect_parts(const video_vae_config *c, int parts, h3_expect_list *l, h3_err *e);

/* ---- the decoder's tile work (video_vae.c), which the decode drivers (video_vae_decode.c) run ---- */
#define FFN_ROWS 256 /* tokens per FFN block: bounds the [rows, ffn_inner] intermediates */
#define VV_OUT_BUDGET ((int64_t)400 << 20) /* bytes of proj_out output per batch (one of two download slots) */
#define VV_MAX_BATCH 32

typedef struct vv_dec_ws { /* backend buffers for tiles of up to np_cap patch tokens */
    int64_t  np_cap;
    int64_t  ffn_rows; /* tokens per FFN block */
    int64_t  rope_Tl, rope_h, rope_w; /* grid of the RoPE tables in cos/sin (0: none yet) */
    float   *tok, *pq, *x, *a, *q, *k, *v, *o, *fv, *fg, *cos, *sin, *out;
    int32_t *rowidx; /* zeros: every row reads scale1/scale2 through h3_gated_residual's table */
    /* host */
    float   *h_tok, *h_out, *h_cos, *h_sin, *h_zero;
    int32_t *h_idx;
} vv_dec_ws;
void    vv_dec_ws_free(h3_backend *be, vv_dec_ws *w);
/* ffn_rows: FFN_ROWS, or 0 for the whole tile at once */
int     vv_dec_ws_new(h3_backend *be, const video_vae_config *c, int64_t np, int64_t ffn_rows, vv_dec_ws *w, h3_err *e);
int64_t vv_dec_tokens(const video_vae_config *c, int64_t np);
/* One tile of Tl x h x w latents from ws->h_tok through the decoder, queued; _finish: its output in ws->h_out. */
void    vv_decode_tile(video_vae *v, vv_dec_ws *ws, int64_t Tl, int64_t h, int64_t w);
void    vv_decode_tile_finish(video_vae *v, vv_dec_ws *ws, int64_t np);

typedef struct vv_bat_ws { /* backend buffers for batches of up to B tiles of up to np patch tokens */
    int64_t  B, np, N, fr;            /* capacity; fr: rows per FFN pass */
    int64_t  rope_Tl, rope_h, rope_w; /* grid of the RoPE tables in cos/sin (0: none yet) */
    float   *tok, *pq, *x, *out[2], *cos, *sin, *zero, *lnf;
    h3_bf16 *a, *qkv, *o, *br, *g, *z;
    uint8_t *xq;                      /* VIDEO_VAE_FP8: a GEMM input's E4M3 codes [M][max(D, F)] */
    float   *xs;                      /* and its per-row scales [M] */
    uint8_t *xqa;                     /* VIDEO_VAE_FP8: the residual norms' output codes [M][D] (fused, docs/fast.md) */
    float   *xsa;                     /* and their scales [M] */
    float   *qkv32, *o32;             /* head dims other than 64 / 128 only: h3_attention's fp32 rows */
    float   *h_cos, *h_sin; /* host */
} vv_bat_ws;
void vv_bat_ws_free(h3_backend *be, vv_bat_ws *w);
int  vv_bat_ws_new(h3_backend *be, const video_vae_config *c, int64_t B, int64_t np, int fp8, vv_bat_ws *w, h3_err *e);
/* B tiles (host tokens h_tok [B][np][C] in a h3_host_alloc buffer) -> backend w->out[slot], queued. */
void vv_decode_batch(video_vae *v, vv_bat_ws *w, const float *h_tok, int64_t B, int64_t Tl, int64_t h, int64_t wd, int slot);
/* H3_VAE_PROFILE (docs/model/video_vae.md 13): the kinds of op the batched decode times, and the clock */
enum { VP_IN, VP_QKV, VP_QK, VP_ATTN, VP_OUT, VP_NORM, VP_FF1, VP_SWIGLU, VP_FF2, VP_PROJ, VP_N };
double vv_now(void);
/* H3_VAE_BATCH (docs/tuning.md): the decode batch a model starts with (0: automatic) */
int    vv_env_decode_batch(void);

#endif
