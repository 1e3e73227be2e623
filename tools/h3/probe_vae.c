/* Probe ops of the video VAE (the probe contract, docs/probe.md): `vae-decode` (latents -> sample) and `vae-encode`
 * (sample -> mean, logvar). Optional input `tiling` i64 [4] = (tile_h, tile_w, min_overlap_h,
 * min_overlap_w) in pixels mirrors enable_tiling (0 entries keep the default 256/64; tile_h = 0
 * turns tiling off); without it the reference default applies (docs/video_vae.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/video_vae.h"
#include "probe.h"

static int read_tiling(probe_ctx *p, video_vae_tiling *t, h3_err *e) {
    *t = video_vae_tiling_default();
    if (!probe_has_input(p, "tiling")) return 0;
    h3_tensor *x = NULL;
    if (probe_input(p, "tiling", H3_I64, 1, &x, e) != 0) return -1;
    int rc = 0;
    if (x->shape[0] != 4) {
        rc = h3_fail(e, "input 'tiling': expected 4 values (tile_h, tile_w, overlap_h, overlap_w), got %lld",
                     (long long)x->shape[0]);
    } else {
        const int64_t *v = x->data;
        for (int i = 0; i < 4 && rc == 0; i++)
            if (v[i] < 0 || v[i] > (1 << 20)) rc = h3_fail(e, "input 'tiling': value %lld out of range", (long long)v[i]);
        if (rc == 0) {
            t->enabled = v[0] != 0;
            t->tile_h = (int)v[0];
            t->tile_w = (int)v[1];
            t->overlap_h = (int)v[2];
            t->overlap_w = (int)v[3];
        }
    }
    h3_tensor_free(x);
    return rc;
}

static video_vae *open_vae(probe_ctx *p, int parts, h3_err *e) {
    if (!p->model) {
        h3_fail(e, "--model is required (a snapshot directory with vae/)");
        return NULL;
    }
    if (p->bf16 && (parts & VIDEO_VAE_ENCODER)) {
        h3_fail(e, "--precision bf16 is not implemented for the video VAE encoder (fp32 only)");
        return NULL;
    }
    if (p->bf16) parts |= VIDEO_VAE_BF16; /* the decoder's bf16 mode (docs/model/video_vae.md 11) */
    if (p->vae_fp8) parts |= VIDEO_VAE_FP8; /* its FP8 block GEMMs (docs/fast.md 7) */
    /* SNAPSHOT/vae, or the vae folder itself */
    char dir[4096], probe_path[4200];
    snprintf(dir, sizeof dir, "%s/vae", p->model);
    snprintf(probe_path, sizeof probe_path, "%s/config.json", dir);
    if (access(probe_path, R_OK) != 0) {
        snprintf(probe_path, sizeof probe_path, "%s/config.json", p->model);
        if (access(probe_path, R_OK) == 0) snprintf(dir, sizeof dir, "%s", p->model);
    }
    return video_vae_new(p->be, dir, parts, e);
}

int probe_vae_decode(probe_ctx *p, h3_err *e) {
    h3_tensor *z = NULL;
    video_vae *v = NULL;
    float *out = NULL;
    int rc = -1;
    video_vae_tiling t;
    if (probe_input(p, "latents", H3_F32, 5, &z, e) != 0 || read_tiling(p, &t, e) != 0) goto done;
    if (!(v = open_vae(p, VIDEO_VAE_DECODER, e))) goto done;
    const video_vae_config *c = video_vae_get_config(v);
    const int64_t B = z->shape[0], C = z->shape[1], L = z->shape[2], h = z->shape[3], w = z->shape[4];
    if (B < 1 || C != c->latent_channels || h < 1 || w < 1) {
        char s[96];
        h3_fail(e, "input 'latents': shape %s must be [B>=1, %d, L, h>=1, w>=1]", h3_shape_str(z->shape, 5, s, sizeof s),
                c->latent_channels);
        goto done;
    }
    int64_t T = video_vae_decoded_frames(c, L, e);
    if (T < 0) goto done;
    const int64_t H = h * c->S, W = w * c->S, per_out = (int64_t)c->out_channels * T * H * W, per_in = C * L * h * w;
    out = malloc((size_t)(B * per_out) * sizeof(float));
    if (!out) {
        h3_fail(e, "out of memory for the decoded video");
        goto done;
    }
    for (int64_t b = 0; b < B; b++)
        if (video_vae_decode(v, (const float *)z->data + b * per_in, L, h, w, &t, out + b * per_out, e) != 0) goto done;
    rc = probe_output_f32(p, "sample", out, 5, (int64_t[]){B, c->out_channels, T, H, W}, e);
done:
    free(out);
    video_vae_free(v);
    h3_tensor_free(z);
    return rc;
}

int probe_vae_encode(probe_ctx *p, h3_err *e) {
    h3_tensor *x = NULL;
    video_vae *v = NULL;
    float *mom = NULL, *mean = NULL, *logvar = NULL;
    int rc = -1;
    video_vae_tiling t;
    if (probe_input(p, "sample", H3_F32, 5, &x, e) != 0 || read_tiling(p, &t, e) != 0) goto done;
    if (!(v = open_vae(p, VIDEO_VAE_ENCODER, e))) goto done;
    const video_vae_config *c = video_vae_get_config(v);
    const int64_t B = x->shape[0], C = x->shape[1], T = x->shape[2], H = x->shape[3], W = x->shape[4];
    if (B < 1 || C != c->in_channels || T < 1) {
        char s[96];
        h3_fail(e, "input 'sample': shape %s must be [B>=1, %d, T>=1, H, W]", h3_shape_str(x->shape, 5, s, sizeof s),
                c->in_channels);
        goto done;
    }
    const int64_t Tl = video_vae_encoded_frames(c, T), h = H / c->S, w = W / c->S, Cz = c->latent_channels;
    const int64_t n = Tl * h * w, per_in = C * T * H * W;
    mom = malloc((size_t)(2 * Cz * (n > 0 ? n : 1)) * sizeof(float));
    mean = malloc((size_t)(B * Cz * (n > 0 ? n : 1)) * sizeof(float));
    logvar = malloc((size_t)(B * Cz * (n > 0 ? n : 1)) * sizeof(float));
    if (!mom || !mean || !logvar) {
        h3_fail(e, "out of memory for the moments");
        goto done;
    }
    for (int64_t b = 0; b < B; b++) {
        if (video_vae_encode(v, (const float *)x->data + b * per_in, T, H, W, &t, mom, e) != 0) goto done;
        video_vae_posterior(c, mom, n, mean + b * Cz * n, logvar + b * Cz * n);
    }
    int64_t shape[5] = {B, Cz, Tl, h, w};
    if (probe_output_f32(p, "mean", mean, 5, shape, e) != 0) goto done;
    rc = probe_output_f32(p, "logvar", logvar, 5, shape, e);
done:
    free(mom);
    free(mean);
    free(logvar);
    video_vae_free(v);
    h3_tensor_free(x);
    return rc;
}
