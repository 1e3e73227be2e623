/* MiniMax-H3 video VAE encoder: the causal 3D-CNN and its temporal chunking / spatial tiling driver
 * (docs/model/video_vae.md sections 4.2-4.6, 5, 6). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/ops.h"
#include "video_vae.h"
#include "video_vae_internal.h"

/* ------------------------------------------------------------------------------------------------
 * Encoder (docs/model/video_vae.md 4.2-4.6, 5, 6)
 * ---------------------------------------------------------------------------------------------- */

typedef struct vv_act { /* an activation [C, T, H, W] in backend memory */
    float  *d;
    int64_t C, T, H, W;
} vv_act;

static int act_new(h3_backend *be, vv_act *a, int64_t C, int64_t T, int64_t H, int64_t W, h3_err *e) {
    a->C = C, a->T = T, a->H = H, a->W = W;
    a->d = h3_alloc(be, (size_t)(C * T * H * W) * sizeof(float));
    return a->d ? 0 : h3_fail(e, "video VAE encoder: out of memory for a %lldx%lldx%lldx%lld activation", (long long)C,
                              (long long)T, (long long)H, (long long)W);
}

/* y = conv(x): k = 3 causal conv with reflect padding 1 (docs/model/video_vae.md 4.2), or the pointwise shortcut (k = 1). */
static int conv_op(video_vae *v, vv_act *y, const vv_act *x, int64_t cout, int k, int st, int ss, int down,
                   const float *w, const float *b, const char *what, h3_err *e) {
    h3_conv3d_geom g = {x->C, x->T, x->H, x->W, cout, k, k, k, st, ss, ss, 0, 0, 0, 0, 0, H3_PAD_ZERO};
    if (k == 3) {
        g.pt0 = 2;
        g.spatial_pad = v->cfg.reflect ? H3_PAD_REFLECT : H3_PAD_ZERO;
        if (down) { /* docs/model/video_vae.md 4.3: bottom/right pad by 1 only when the spatial stride is 2 */
            if (ss == 2) g.ph1 = g.pw1 = 1;
        } else {
            g.ph0 = g.ph1 = g.pw0 = g.pw1 = 1;
        }
    }
    int64_t to, ho, wo;
    if (h3_conv3d_check(&g, &to, &ho, &wo, what, e) != 0) return -1;
    if (act_new(v->be, y, cout, to, ho, wo, e) != 0) return -1;
    h3_conv3d(v->be, y->d, x->d, &g, w, b);
    return 0;
}

/* docs/model/video_vae.md 4.6; consumes *x and replaces it with the block output. */
static int resnet_fwd(video_vae *v, const vv_resnet *r, vv_act *x, h3_err *e) {
    h3_backend *be = v->be;
    const video_vae_config *c = &v->cfg;
    const int64_t HW = x->H * x->W;
    vv_act t1 = {0}, h = {0}, out = {0}, sc = {0};
    int rc = -1;
    if (act_new(be, &t1, x->C, x->T, x->H, x->W, e) != 0) goto done;
    h3_groupnorm_frames(be, t1.d, x->d, x->C, x->T, HW, c->norm_num_groups, r->n1w, r->n1b, c->norm_eps, 1);
    if (conv_op(v, &h, &t1, r->cout, 3, 1, 1, 0, r->c1w, r->c1b, "encoder conv1", e) != 0) goto done;
    h3_free(be, t1.d);
    t1.d = NULL;
    h3_groupnorm_frames(be, h.d, h.d, h.C, h.T, HW, c->norm_num_groups, r->n2w, r->n2b, c->norm_eps, 1);
    if (conv_op(v, &out, &h, r->cout, 3, 1, 1, 0, r->c2w, r->c2b, "encoder conv2", e) != 0) goto done;
    h3_free(be, h.d);
    h.d = NULL;
    int64_t n = out.C * out.T * out.H * out.W;
    if (r->scw) {
        if (conv_op(v, &sc, x, r->cout, 1, 1, 1, 0, r->scw, r->scb, "encoder conv_shortcut", e) != 0) goto done;
        h3_add(be, out.d, sc.d, out.d, n, 0); /* residual + hidden, in the reference's order */
    } else {
        h3_add(be, out.d, x->d, out.d, n, 0);
    }
    h3_free(be, x->d);
    *x = out;
    out.d = NULL;
    rc = 0;
done:
    h3_free(be, t1.d);
    h3_free(be, h.d);
    h3_free(be, out.d);
    h3_free(be, sc.d);
    return rc;
}

/* One tile of one clip through docs/model/video_vae.md 5: host pixels x [3, T, H, W] cropped at (y0, x0) to th x tw ->
 * host moments [2C, T', th/S, tw/S] (sizes returned). */
static int encode_tile(video_vae *v, const float *x, int64_t T, int64_t H, int64_t W, int64_t y0, int64_t x0,
                       int64_t th, int64_t tw, float *moments, int64_t *mt, int64_t *mh, int64_t *mw, h3_err *e) {
    h3_backend *be = v->be;
    const video_vae_config *c = &v->cfg;
    const int64_t cin = c->in_channels;
    float *crop = malloc((size_t)(cin * T * th * tw) * sizeof(float));
    if (!crop) return h3_fail(e, "out of memory");
    for (int64_t ch = 0; ch < cin * T; ch++)
        for (int64_t y = 0; y < th; y++)
            memcpy(crop + (ch * th + y) * tw, x + (ch * H + y0 + y) * W + x0, (size_t)tw * sizeof(float));
    vv_act in = {0}, cur = {0}, nx = {0};
    int rc = -1;
    if (act_new(be, &in, cin, T, th, tw, e) != 0) goto done;
    h3_upload(be, in.d, crop, (size_t)(cin * T * th * tw) * sizeof(float));
    if (conv_op(v, &cur, &in, c->block_out_channels[0], 3, 1, 1, 0, v->conv_in_w, v->conv_in_b, "encoder conv_in",
                e) != 0)
        goto done;
    h3_free(be, in.d);
    in.d = NULL;
    for (int L = 0; L < c->num_levels; L++) {
        for (int r = 0; r < c->layers_per_block; r++)
            if (resnet_fwd(v, &v->levels[L].res[r], &cur, e) != 0) goto done;
        if (v->levels[L].dw) {
            if (conv_op(v, &nx, &cur, cur.C, 3, c->temporal_factors[L], c->spatial_factors[L], 1, v->levels[L].dw,
                        v->levels[L].db, "encoder downsampler", e) != 0)
                goto done;
            h3_free(be, cur.d);
            cur = nx;
            nx.d = NULL;
        }
    }
    h3_groupnorm_frames(be, cur.d, cur.d, cur.C, cur.T, cur.H * cur.W, c->norm_num_groups, v->norm_out_w, v->norm_out_b,
                        c->norm_eps, 1);
    if (conv_op(v, &nx, &cur, 2 * c->latent_channels, 3, 1, 1, 0, v->conv_out_w, v->conv_out_b, "encoder conv_out",
                e) != 0)
        goto done;
    h3_free(be, cur.d);
    cur = nx;
    nx.d = NULL;
    if (conv_op(v, &nx, &cur, 2 * c->latent_channels, 1, 1, 1, 0, v->quant_w, v->quant_b, "quant_conv", e) != 0)
        goto done;
    h3_download(be, moments, nx.d, (size_t)(nx.C * nx.T * nx.H * nx.W) * sizeof(float));
    *mt = nx.T, *mh = nx.H, *mw = nx.W;
    rc = 0;
done:
    free(crop);
    h3_free(be, in.d);
    h3_free(be, cur.d);
    h3_free(be, nx.d);
    return rc;
}

/* Encoder output frames for T input frames: every temporal-stride-2 level maps T to ceil(T/2). */
static int64_t clip_latents(const video_vae_config *c, int64_t T) {
    for (int L = 0; L < c->num_levels; L++)
        if (c->spatial_factors[L] * c->temporal_factors[L] > 1) T = (T + 2 - 3) / c->temporal_factors[L] + 1;
    return T;
}

int64_t video_vae_encoded_frames(const video_vae_config *c, int64_t T) {
    if (T <= 0) return 0;
    if (T == 1) return clip_latents(c, 1);
    int64_t clips = (T + c->clip_length - 1) / c->clip_length;
    return clips * clip_latents(c, c->clip_length) - c->token_drop;
}

/* _encode_clip: x [3, T, H, W] -> moments [2C, T', H/S, W/S], stitched in latent space (docs/model/video_vae.md 6). */
static int encode_clip(video_vae *v, const float *x, int64_t T, int64_t H, int64_t W, const video_vae_tiling *t,
                       float *out, h3_err *e) {
    const video_vae_config *c = &v->cfg;
    const int64_t ct = clip_latents(c, T), planes = 2 * (int64_t)c->latent_channels * ct;
    vv_stitch s;
    if (vv_stitch_init(&s, H, W, t, c->S, c->S, planes, e) != 0) return -1;
    int64_t tile_max = planes * (s.th[0]) * (s.tw[0]);
    float *tile = malloc((size_t)tile_max * sizeof(float));
    int rc = -1;
    if (!tile) {
        h3_fail(e, "out of memory");
        goto done;
    }
    for (int i = 0; i < s.ny; i++) {
        for (int j = 0; j < s.nx; j++) {
            int64_t mt = 0, mh = 0, mw = 0;
            if (encode_tile(v, x, T, H, W, s.ys[i] * c->S, s.xs[j] * c->S, s.th[i] * c->S, s.tw[j] * c->S, tile, &mt,
                            &mh, &mw, e) != 0)
                goto done;
            if (mt != ct || mh != s.th[i] || mw != s.tw[j]) {
                h3_fail(e, "video VAE encoder: tile output %lldx%lldx%lld, expected %lldx%lldx%lld", (long long)mt,
                        (long long)mh, (long long)mw, (long long)ct, (long long)s.th[i], (long long)s.tw[j]);
                goto done;
            }
            if (vv_stitch_tile(&s, i, j, tile, out, e) != 0) goto done;
        }
    }
    rc = 0;
done:
    free(tile);
    vv_stitch_free(&s);
    return rc;
}

int video_vae_encode(video_vae *v, const float *x, int64_t T, int64_t H, int64_t W, const video_vae_tiling *tiling,
                     float *moments, h3_err *e) {
    const video_vae_config *c = &v->cfg;
    if (!(v->parts & VIDEO_VAE_ENCODER)) return h3_fail(e, "video VAE: encoder weights were not loaded");
    if (T < 1) return h3_fail(e, "sample: needs at least 1 frame");
    if (H % c->S || W % c->S || H < c->S || W < c->S)
        return h3_fail(e, "sample: height %lld and width %lld must be positive multiples of the spatial ratio %d",
                       (long long)H, (long long)W, c->S);
    video_vae_tiling t;
    if (vv_resolve_tiling(tiling, c->S, &t, e) != 0) return -1;
    /* Reflect padding needs >= 2 samples on every axis at the deepest level (docs/model/video_vae.md 15, trap 24). */
    int64_t min_h = t.enabled && t.tile_h < H ? t.tile_h : H, min_w = t.enabled && t.tile_w < W ? t.tile_w : W;
    if (c->reflect && (min_h / c->S < 2 || min_w / c->S < 2))
        return h3_fail(e, "sample: tiles of %lldx%lld px give %lldx%lld latents; reflect padding needs >= 2 (minimum %d "
                          "px per side)", (long long)min_h, (long long)min_w, (long long)(min_h / c->S),
                       (long long)(min_w / c->S), 2 * c->S);
    const int64_t h = H / c->S, w = W / c->S, hw = h * w, z2 = 2 * (int64_t)c->latent_channels;
    if (T == 1) return encode_clip(v, x, 1, H, W, &t, moments, e);

    const int64_t clip = c->clip_length, ck = clip_latents(c, clip), Tl = video_vae_encoded_frames(c, T);
    if (Tl <= 0) return h3_fail(e, "sample: %lld frames encode to no latent frames after token_drop", (long long)T);
    const int64_t frame = H * W;
    float *xc = malloc((size_t)(c->in_channels * clip * frame) * sizeof(float));
    float *mc = malloc((size_t)(z2 * ck * hw) * sizeof(float));
    int rc = -1;
    if (!xc || !mc) {
        h3_fail(e, "out of memory");
        goto done;
    }
    for (int64_t k = 0; k * clip < T; k++) {
        /* the clip's frames; past the end, copies of the last frame (docs/model/video_vae.md 6 step 3) */
        for (int64_t ch = 0; ch < c->in_channels; ch++)
            for (int64_t f = 0; f < clip; f++) {
                int64_t src = k * clip + f < T ? k * clip + f : T - 1;
                memcpy(xc + (ch * clip + f) * frame, x + (ch * T + src) * frame, (size_t)frame * sizeof(float));
            }
        if (encode_clip(v, xc, clip, H, W, &t, mc, e) != 0) goto done;
        for (int64_t ch = 0; ch < z2; ch++)
            for (int64_t f = 0; f < ck; f++) {
                int64_t dst = k * ck + f; /* the last token_drop frames of the whole video are dropped */
                if (dst < Tl) memcpy(moments + (ch * Tl + dst) * hw, mc + (ch * ck + f) * hw, (size_t)hw * sizeof(float));
            }
    }
    rc = 0;
done:
    free(xc);
    free(mc);
    return rc;
}

