/* fl2va / ref2va conditioning inputs (see condition.h; diffusers minimax_h3 before_encoder.py,
 * encoders.py). */
#include "condition.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../core/dtype.h"
#include "../media/resize.h"
#include "layout.h"
#include "noise.h"

/* Python round(): half to even. */
static double py_round(double x) { return nearbyint(x); }

/* Python floor division for the crop offsets (operands are >= 0 here, but keep the semantics). */
static int floordiv(int a, int b) { return (int)floor((double)a / b); }

int cond_fl2va_canvas(int image_width, int image_height, int *height, int *width, h3_err *e) {
    return layout_resolve_canvas(image_width, image_height, height, width, e);
}

void cond_cover_geometry(int w, int h, int W, int H, int *resized_w, int *resized_h, int *left, int *top) {
    double scale = fmax((double)W / w, (double)H / h);
    int rw = (int)py_round(w * scale), rh = (int)py_round(h * scale);
    if (rw < W) rw = W;
    if (rh < H) rh = H;
    int l = floordiv(rw - W, 2), t = floordiv(rh - H, 2);
    *resized_w = rw, *resized_h = rh;
    *left = l > 0 ? l : 0, *top = t > 0 ? t : 0;
}

int cond_fit_keyframe(const uint8_t *rgb, int w, int h, int index, int W, int H, uint8_t *out, h3_err *e) {
    if (w == W && h == H) {
        memcpy(out, rgb, (size_t)W * H * 3);
        return 0;
    }
    if (index == 0) return h3_resize_rgb(rgb, w, h, out, W, H, H3_RESAMPLE_LANCZOS, e); /* stretched */
    int rw, rh, left, top;
    cond_cover_geometry(w, h, W, H, &rw, &rh, &left, &top);
    uint8_t *tmp = malloc((size_t)rw * rh * 3);
    if (!tmp) return h3_fail(e, "keyframe: out of memory for a %dx%d resize", rw, rh);
    int rc = h3_resize_rgb(rgb, w, h, tmp, rw, rh, H3_RESAMPLE_LANCZOS, e) ||
             h3_crop_rgb(tmp, rw, rh, left, top, out, W, H, e);
    free(tmp);
    return rc ? -1 : 0;
}

int cond_ref_image_size(int w, int h, const char *what, cond_ref_size policy, int canvas_w, int canvas_h, int *out_w,
                        int *out_h, h3_err *e) {
    if (w <= 0 || h <= 0) return h3_fail(e, "%s: the image has no pixels (%dx%d)", what, w, h);
    if (w > 4 * h || h > 4 * w)
        return h3_fail(e, "%s: a reference image must be within 1:4 and 4:1, got %dx%d", what, w, h);
    const int m = LAYOUT_CANVAS_MULTIPLE;
    double scale = (double)COND_REF_IMAGE_SHORT_EDGE / (w < h ? w : h);
    if (policy == COND_REF_SIZE_MATCH) { /* scale down only, to the canvas's pixel area */
        const double area = (double)canvas_w * canvas_h, have = (double)w * h;
        scale = have > area ? sqrt(area / have) : 1.0;
    } else if (policy == COND_REF_SIZE_MAX && scale > 1.0) {
        scale = 1.0; /* down only, to a 2048 short edge */
    }
    int th = (int)py_round(h * scale / m) * m, tw = (int)py_round(w * scale / m) * m;
    *out_h = th > m ? th : m;
    *out_w = tw > m ? tw : m;
    return 0;
}

int cond_resolve_canvas(double aw, double ah, int short_edge, int64_t max_pixels, int *height, int *width, h3_err *e) {
    if (!(aw > 0) || !(ah > 0)) return h3_fail(e, "aspect ratio: must be positive, got %g:%g", aw, ah);
    const double ratio = aw / ah;
    if (!(ratio >= 1.0 / 4 && ratio <= 4.0))
        return h3_fail(e, "aspect ratio: MiniMax-H3 supports aspect ratios from 1:4 to 4:1, got %g:%g", aw, ah);
    double w, h;
    if (ratio >= 1.0) w = short_edge * ratio, h = short_edge;
    else w = short_edge, h = short_edge / ratio;
    const double area = w * h;
    if (area > (double)max_pixels) {
        const double scale = pow((double)max_pixels / area, 0.5);
        w = w * scale, h = h * scale;
    }
    const int m = LAYOUT_CANVAS_MULTIPLE;
    int hh = (int)py_round(h / m) * m, ww = (int)py_round(w / m) * m;
    *height = hh > m ? hh : m;
    *width = ww > m ? ww : m;
    return 0;
}

int cond_ref_video_frames(const uint8_t *frames, int n, int w, int h, int num_frames, int short_edge,
                          int64_t max_pixels, const char *what, uint8_t **out, int *n_out, int *out_w, int *out_h,
                          h3_err *e) {
    *out = NULL;
    if (n < COND_MIN_VIDEO_FRAMES)
        return h3_fail(e, "%s: %d frames at 24 fps decoded, at least %d are needed", what, n, COND_MIN_VIDEO_FRAMES);
    if (n > num_frames) n = num_frames; /* truncated to the generated frame count */
    int H, W;
    if (cond_resolve_canvas(w, h, short_edge, max_pixels, &H, &W, e)) {
        char why[sizeof e->msg];
        memcpy(why, e->msg, sizeof why);
        return h3_fail(e, "%s: %dx%d frames: %s", what, w, h, why);
    }
    size_t fin = (size_t)w * h * 3, fout = (size_t)W * H * 3;
    uint8_t *o = malloc(fout * (size_t)n);
    if (!o) return h3_fail(e, "%s: out of memory for %d frames of %dx%d", what, n, W, H);
    for (int i = 0; i < n; i++)
        if (h3_resize_rgb(frames + fin * i, w, h, o + fout * i, W, H, H3_RESAMPLE_LANCZOS, e)) {
            free(o);
            return -1;
        }
    *out = o, *n_out = n, *out_w = W, *out_h = H;
    return 0;
}

int cond_ref_video_encode_frames(int n) {
    int k = (n - 5) / 17; /* Python // on n >= 5; n < 5 never reaches here (min 5 frames) */
    if (n - 5 < 0) k = -1;
    int snapped = (k > 1 ? k : 1) * 17 + 5;
    return snapped < n ? snapped : n;
}

void cond_latents_from_moments(const video_vae_config *c, const float *moments, const float *eps, int64_t n,
                               float *latents) {
    const int64_t C = c->latent_channels;
    for (int64_t ch = 0; ch < C; ch++)
        for (int64_t i = 0; i < n; i++) {
            float mean = moments[ch * n + i], lv = moments[(C + ch) * n + i];
            lv = lv < -30.0f ? -30.0f : (lv > 20.0f ? 20.0f : lv); /* DiagonalGaussianDistribution clamp */
            float z = mean + expf(0.5f * lv) * eps[ch * n + i];
            z = h3_f16_to_f32(h3_f32_to_f16(z)); /* the released recipe rounds through float16 */
            latents[ch * n + i] = (z - c->latents_mean[ch]) / c->latents_std[ch];
        }
}

int cond_encode_vae(video_vae *v, const uint8_t *pixels, int T, int H, int W, uint64_t encode_seed, float **latents,
                    int *Lt, int *lh, int *lw, h3_err *e) {
    const video_vae_config *c = video_vae_get_config(v);
    *latents = NULL;
    if (T < 1 || H % c->S || W % c->S)
        return h3_fail(e, "VAE condition: %d frames of %dx%d (sides must be multiples of %d)", T, W, H, c->S);
    const int64_t npix = (int64_t)T * H * W, C = c->latent_channels;
    const int64_t L = video_vae_encoded_frames(c, T), h = H / c->S, w = W / c->S, n = L * h * w;
    uint8_t *planar = malloc((size_t)npix * 3);
    float *x = malloc(sizeof(float) * (size_t)npix * 3);
    float *moments = malloc(sizeof(float) * (size_t)(2 * C * n));
    float *eps = malloc(sizeof(float) * (size_t)(C * n));
    float *out = malloc(sizeof(float) * (size_t)(C * n));
    int rc = -1;
    if (!planar || !x || !moments || !eps || !out) {
        h3_fail(e, "VAE condition: out of memory for %d frames of %dx%d", T, W, H);
        goto done;
    }
    /* [T][H][W][3] -> [3][T*H*W], then (p/255 - m_c)/s_c */
    for (int64_t i = 0; i < npix; i++)
        for (int ch = 0; ch < 3; ch++) planar[ch * npix + i] = pixels[i * 3 + ch];
    video_vae_pixels_from_u8(planar, x, npix);
    video_vae_tiling tiling = video_vae_tiling_default();
    if (video_vae_encode(v, x, T, H, W, &tiling, moments, e)) goto done;
    torch_rng g; /* a fresh generator per condition, independent of the request seed */
    torch_rng_seed(&g, encode_seed);
    torch_randn(&g, eps, C * n);
    cond_latents_from_moments(c, moments, eps, n, out);
    *latents = out, out = NULL;
    *Lt = (int)L, *lh = (int)h, *lw = (int)w;
    rc = 0;
done:
    free(planar);
    free(x);
    free(moments);
    free(eps);
    free(out);
    return rc;
}

int cond_audio_rows(audio_vae *m, const float *wave, int64_t S, float **rows, int64_t *n_latents, h3_err *e) {
    const audio_vae_config *c = audio_vae_get_config(m);
    *rows = NULL;
    if (S < 1) return h3_fail(e, "reference audio: no samples");
    const int64_t N = (S + c->hop - 1) / c->hop, C = c->latent_channels;
    float *mean = malloc(sizeof(float) * (size_t)(2 * C * N));
    float *r = malloc(sizeof(float) * (size_t)(2 * C * N));
    if (!mean || !r) {
        free(mean);
        free(r);
        return h3_fail(e, "reference audio: out of memory for %lld latents", (long long)N);
    }
    /* the two stereo channels are two batch items of the mono VAE; soundtracks take the mean */
    if (audio_vae_encode(m, wave, 2, S, 0, mean, NULL, e) || audio_vae_normalize(c, mean, 2, N, e)) {
        free(mean);
        free(r);
        return -1;
    }
    audio_vae_latents_to_rows(mean, 2, N, (int)C, r);
    free(mean);
    *rows = r, *n_latents = N;
    return 0;
}

int cond_check_audio_seconds(int64_t samples, int sample_rate, const char *what, int soundtrack, h3_err *e) {
    double s = (double)samples / sample_rate;
    if (s < COND_MIN_AUDIO_SECONDS) {
        if (soundtrack) /* the output lasts >= 5.17 s, so the truncation never made it this short: the audio is */
            return h3_fail(e, "%s: the soundtrack lasts %.2f s, at least %g s are needed (give a longer soundtrack)", what,
                           s, COND_MIN_AUDIO_SECONDS);
        return h3_fail(e, "%s: the audio lasts %.2f s, at least %g s are needed", what, s, COND_MIN_AUDIO_SECONDS);
    }
    if (s > COND_MAX_AUDIO_SECONDS + 1e-9)
        return h3_fail(e, "%s: the audio lasts %.2f s, at most %g s are allowed (it is not trimmed)", what, s,
                       COND_MAX_AUDIO_SECONDS);
    return 0;
}
