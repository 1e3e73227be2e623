/* --show's previews (gen_preview.h). */
#include "gen_preview.h"

#include <stdlib.h>
#include <string.h>

#include "../media/resize.h"
#include "denoise.h"
#include "gen_resident.h"

video_vae *preview_vae_new(gen *s, h3_backend *be, h3_err *e) {
    char dir[4096], key[RKEY];
    const int parts = video_decoder_key(s, be, dir, sizeof dir, key); /* phase_video's: the same decoder */
    if (s->res && s->res->vvae && !strcmp(s->res->vvae_key, key)) { /* docs/model/features.md 3: the kept decoder serves */
        s->pv_borrowed = 1;
        video_vae_set_log(s->res->vvae, s->r->log, s->r->log_user);
        return s->res->vvae;
    }
    video_vae *v = NULL;
    begin_on(s, s->r->random_weights ? "make random preview VAE" : "load preview VAE", be, 0);
    if (s->r->random_weights) {
        video_vae_config vc;
        if (video_vae_config_load(dir, &vc, e) == 0) v = video_vae_new_random(be, &vc, parts, s->r->seed ^ RANDOM_VIDEO, e);
    } else {
        v = video_vae_new(be, dir, parts, e);
    }
    if (v) progress_end(&s->pg), video_vae_set_log(v, s->r->log, s->r->log_user);
    return v;
}

typedef struct preview_pick {
    int64_t want, W, H;
    float  *rgb; /* [H][W][3] */
    int     got;
} preview_pick;

static int preview_pick_sink(void *ctx, int64_t index, const float *frame, h3_err *e) {
    preview_pick *p = ctx;
    (void)e;
    if (index == p->want) video_vae_pixels_to_hwc(frame, p->rgb, p->W * p->H), p->got = 1;
    return 0;
}

int preview_emit(gen *s, const float *rgb, int64_t W, int64_t H, int half, int pass, int passes, int64_t frame,
                 h3_err *e) {
    float *out = NULL;
    const int ow = half ? (s->out_w + 1) / 2 : s->out_w, oh = half ? (s->out_h + 1) / 2 : s->out_h;
    if (W != ow || H != oh) {
        if (!(out = malloc(sizeof(float) * 3 * (size_t)ow * (size_t)oh)))
            return h3_fail(e, "out of memory for a preview frame");
        if (h3_resize_rgbf(rgb, (int)W, (int)H, out, ow, oh, H3_RESAMPLE_LANCZOS, e)) {
            free(out);
            return -1;
        }
    }
    h3_preview p = {out ? out : rgb, ow, oh, pass, passes, frame};
    int stop = s->r->preview(s->r->preview_user, &p);
    free(out);
    return stop ? h3_fail(e, "--show: the preview callback cancelled the generation") : 0;
}

/* zs [C][L][h][w] -> zp [C][L][(h+1)/2][(w+1)/2], each cell the mean of the (up to) 2x2 cells it covers. */
static void pool_latents_2x2(const float *zs, float *zp, int64_t CL, int64_t h, int64_t w) {
    const int64_t ph = (h + 1) / 2, pw = (w + 1) / 2;
    for (int64_t t = 0; t < CL; t++)
        for (int64_t y = 0; y < ph; y++)
            for (int64_t x = 0; x < pw; x++) {
                float sum = 0.0f;
                int   n = 0;
                for (int64_t dy = 0; dy < 2 && 2 * y + dy < h; dy++)
                    for (int64_t dx = 0; dx < 2 && 2 * x + dx < w; dx++, n++) sum += zs[(t * h + 2 * y + dy) * w + 2 * x + dx];
                zp[(t * ph + y) * pw + x] = sum / (float)n;
            }
}

/* After denoising pass `pass` of `passes`: the middle of the current video latents (one decodable stretch of
 * latent frames, the reference clip length where the latents allow) through the preview decoder, and its middle
 * frame to the callback. The loop's rows and its random state are only read. When the caller wants previews at
 * most half the canvas wide (preview_width, docs/api.md), the stretch is 2x2-averaged first: the decoder does a
 * quarter of the work (a preview costs ~1/7 of the final decode at full size, four times a 4-pass clip) and the
 * preview is an approximation at half the canvas, not the final decode's frame. */
int preview_pass(gen *s, int pass, int passes, h3_err *e) {
    const layout_geometry *g = &s->g;
    const video_vae_config *c = video_vae_get_config(s->pv);
    const int64_t F = g->num_latent_frames, lh = g->latent_height, lw = g->latent_width, plane = lh * lw;
    int64_t Lp = c->K + c->O < F ? c->K + c->O : F;
    h3_err probe;
    while (Lp < F && video_vae_decoded_frames(c, Lp, &probe) <= 0) Lp++;
    int64_t nf = video_vae_decoded_frames(c, Lp, e);
    if (nf <= 0) return -1;
    const int64_t t0 = (F - Lp) / 2;
    const int     half = s->r->preview_width > 0 && 2 * s->r->preview_width <= s->out_w && lh >= 2 && lw >= 2;
    size_t nv = (size_t)(VIDEO_CHANNELS * F * plane);
    float *z = malloc(sizeof(float) * nv), *za = malloc(sizeof(float) * 2 * AUDIO_CHANNELS * (size_t)g->num_audio_latents);
    float *zs = malloc(sizeof(float) * (size_t)(VIDEO_CHANNELS * Lp * plane));
    preview_pick pk = {nf / 2, g->width, g->height, malloc(sizeof(float) * 3 * (size_t)g->width * (size_t)g->height), 0};
    int rc = -1;
    if (!z || !za || !zs || !pk.rgb) {
        h3_fail(e, "out of memory for a preview");
        goto done;
    }
    if (denoise_unpack(s->pv_L, VIDEO_CHANNELS, AUDIO_CHANNELS, s->pv_vrows, s->pv_arows, z, za, e)) goto done;
    for (int64_t ch = 0; ch < VIDEO_CHANNELS; ch++) /* (1, C, F, lh, lw): latent frames t0 .. t0 + Lp of each channel */
        memcpy(zs + ch * Lp * plane, z + (ch * F + t0) * plane, sizeof(float) * (size_t)(Lp * plane));
    video_vae_denormalize_latents(c, zs, Lp * plane);
    int64_t dh = lh, dw = lw;
    if (half) { /* in place: the pooled stretch is smaller than the one it is made from */
        float *zp = malloc(sizeof(float) * (size_t)(VIDEO_CHANNELS * Lp * ((lh + 1) / 2) * ((lw + 1) / 2)));
        if (!zp) {
            h3_fail(e, "out of memory for a preview");
            goto done;
        }
        pool_latents_2x2(zs, zp, VIDEO_CHANNELS * Lp, lh, lw);
        free(zs), zs = zp, dh = (lh + 1) / 2, dw = (lw + 1) / 2;
        pk.W = dw * c->S, pk.H = dh * c->S;
    }
    video_vae_tiling tiling = video_vae_tiling_default();
    if (video_vae_decode_stream(s->pv, zs, Lp, dh, dw, &tiling, preview_pick_sink, &pk, e) || phase_check(s->be, e))
        goto done;
    if (!pk.got) {
        h3_fail(e, "--show: the preview decoder produced no frame %lld", (long long)pk.want);
        goto done;
    }
    /* where that frame sits in the whole video: the same fraction of the frames as of the latents */
    int64_t frame = (int64_t)((double)(t0 * nf + pk.want * Lp) / (double)(nf * F) * (double)g->num_frames);
    rc = preview_emit(s, pk.rgb, pk.W, pk.H, half, pass, passes, frame, e);
done:
    free(z), free(za), free(zs), free(pk.rgb);
    return rc;
}
