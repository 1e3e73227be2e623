/* A request's conditioning inputs end to end: media reading (src/media), preparation
 * (condition.c, as diffusers before_encoder.py) and VAE encoding (encoders.py). See condition.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../media/media.h"
#include "../media/resize.h"
#include "condition.h"
#include "layout.h"
#include "request.h"

void cond_set_free(cond_set *s) {
    for (int i = 0; i < s->n; i++) {
        cond_item *it = &s->items[i];
        free(it->pixels);
        free(it->wave);
        free(it->latents);
        free(it->audio_rows);
    }
    memset(s, 0, sizeof *s);
}

static cond_item *add_item(cond_set *s, int kind, const char *flag, const char *path, h3_err *e) {
    if (s->n >= COND_MAX_ITEMS) {
        h3_fail(e, "%s: at most %d conditioning inputs", flag, COND_MAX_ITEMS);
        return NULL;
    }
    cond_item *it = &s->items[s->n++];
    memset(it, 0, sizeof *it);
    it->kind = kind;
    snprintf(it->what, sizeof it->what, "%s %s", flag, path);
    return it;
}

int cond_set_keyframes(cond_set *s, const char *first, const char *last, int *height, int *width, h3_err *e) {
    memset(s, 0, sizeof *s);
    const char *paths[2] = {first, last}, *flags[2] = {"--first-frame", "--last-frame"};
    h3_image im[2] = {{0}, {0}};
    int rc = -1, n = 0;
    for (int k = 0; k < 2; k++) {
        if (!paths[k]) continue;
        if (h3_read_image(paths[k], NULL, &im[n], e)) {
            char why[sizeof e->msg];
            memcpy(why, e->msg, sizeof why);
            h3_fail(e, "%s %s: %s", flags[k], paths[k], why);
            goto done;
        }
        cond_item *it = add_item(s, LAYOUT_REF_IMAGE, flags[k], paths[k], e);
        s->anchors[n] = k == 0 ? LAYOUT_ANCHOR_FIRST : LAYOUT_ANCHOR_LAST;
        (void)it;
        n++;
    }
    if (n == 0) return h3_fail(e, "fl2va: no keyframe given");
    /* MiniMaxH3ResizeStep: the canvas follows the first keyframe's aspect unless it was given */
    if (!*height && cond_fl2va_canvas(im[0].width, im[0].height, height, width, e)) {
        char why[sizeof e->msg];
        memcpy(why, e->msg, sizeof why);
        h3_fail(e, "%s: %s", s->items[0].what, why);
        goto done;
    }
    for (int k = 0; k < n; k++) {
        cond_item *it = &s->items[k];
        it->T = 1, it->H = *height, it->W = *width;
        it->pixels = malloc((size_t)it->H * it->W * 3);
        if (!it->pixels) {
            h3_fail(e, "%s: out of memory", it->what);
            goto done;
        }
        if (cond_fit_keyframe(im[k].rgb, im[k].width, im[k].height, k, it->W, it->H, it->pixels, e)) goto done;
    }
    rc = 0;
done:
    h3_image_free(&im[0]);
    h3_image_free(&im[1]);
    if (rc) cond_set_free(s);
    return rc;
}

static int fail_with(h3_err *e, const char *what) {
    char why[sizeof e->msg];
    memcpy(why, e->msg, sizeof why);
    return h3_fail(e, "%s: %s", what, why);
}

/* The soundtrack of a reference as _normalize_audio_condition leaves it (truncated to the target
 * duration at the native rate, stereo, 32 kHz), moved into the item. */
static void take_audio(cond_item *it, h3_audio *a) {
    it->wave = a->data;
    it->samples = a->samples;
    a->data = NULL;
}

int cond_set_references(cond_set *s, const h3_request *r, int num_frames, int canvas_w, int canvas_h, h3_err *e) {
    memset(s, 0, sizeof *s);
    s->ref2va = 1;
    static const char *const flag[] = {"--ref-image", "--ref-silent-video", "--ref-video", "--ref-video-audio", "--ref-audio"};
    const double duration = (double)num_frames / H3_MEDIA_FPS; /* max_duration of the soundtracks */
    int64_t total_audio = 0;
    for (int i = 0; i < r->nrefs; i++) {
        const h3_ref *ref = &r->refs[i];
        int kind = ref->kind == H3_REF_IMAGE ? LAYOUT_REF_IMAGE : ref->kind == H3_REF_AUDIO ? LAYOUT_REF_AUDIO : LAYOUT_REF_VIDEO;
        cond_item *it = add_item(s, kind, flag[ref->kind], ref->path, e);
        if (!it) goto fail;
        if (ref->kind == H3_REF_IMAGE) {
            h3_image im = {0};
            if (h3_read_image(ref->path, NULL, &im, e)) { fail_with(e, it->what); goto fail; }
            int w, h;
            if (cond_ref_image_size(im.width, im.height, it->what, (cond_ref_size)r->ref_image_size, canvas_w, canvas_h, &w,
                                    &h, e)) {
                h3_image_free(&im);
                goto fail;
            }
            it->T = 1, it->H = h, it->W = w;
            it->pixels = malloc((size_t)w * h * 3);
            int rc = !it->pixels ? h3_fail(e, "%s: out of memory for %dx%d", it->what, w, h)
                                 : h3_resize_rgb(im.rgb, im.width, im.height, it->pixels, w, h, H3_RESAMPLE_LANCZOS, e);
            h3_image_free(&im);
            if (rc) goto fail;
        } else if (ref->kind == H3_REF_AUDIO) {
            h3_read_opts o = {.max_seconds = COND_MAX_AUDIO_SECONDS + 0.001, .truncate_seconds = duration};
            h3_audio a = {0};
            if (h3_read_audio(ref->path, &o, &a, e)) { fail_with(e, it->what); goto fail; }
            take_audio(it, &a);
            h3_audio_free(&a);
            if (cond_check_audio_seconds(it->samples, H3_MEDIA_SAMPLE_RATE, it->what, 0, e)) goto fail;
        } else {
            h3_read_opts o = {.max_frames = num_frames, .skip_audio = ref->kind != H3_REF_VIDEO, .truncate_seconds = duration};
            h3_video v = {0};
            if (h3_read_video(ref->path, &o, &v, e)) { fail_with(e, it->what); goto fail; }
            if (ref->kind == H3_REF_VIDEO) {
                if (!v.has_audio) {
                    h3_video_free(&v);
                    h3_fail(e, "%s: the file has no audio stream (use --ref-silent-video, or --ref-video-audio VIDEO AUDIO)",
                            it->what);
                    goto fail;
                }
                take_audio(it, &v.audio);
            }
            int rc = cond_ref_video_frames(v.rgb, v.frames, v.width, v.height, num_frames, LAYOUT_CANVAS_SHORT_EDGE,
                                           LAYOUT_CANVAS_MAX_PIXELS, it->what, &it->pixels, &it->T, &it->W, &it->H, e);
            h3_video_free(&v);
            if (rc) goto fail;
            if (ref->kind == H3_REF_VIDEO_AUDIO) {
                h3_read_opts ao = {.truncate_seconds = duration};
                h3_audio a = {0};
                if (h3_read_audio(ref->audio_path, &ao, &a, e)) {
                    char what[700];
                    snprintf(what, sizeof what, "--ref-video-audio %s %s", ref->path, ref->audio_path);
                    fail_with(e, what);
                    goto fail;
                }
                take_audio(it, &a);
                h3_audio_free(&a);
            }
            if (it->wave && cond_check_audio_seconds(it->samples, H3_MEDIA_SAMPLE_RATE, it->what, 1, e)) goto fail;
        }
        total_audio += it->wave ? it->samples : 0;
    }
    if ((double)total_audio / H3_MEDIA_SAMPLE_RATE > COND_MAX_AUDIO_SECONDS + 1e-9) {
        h3_fail(e, "--ref-*: the reference audio totals %.2f s, at most %g s are allowed",
                (double)total_audio / H3_MEDIA_SAMPLE_RATE, COND_MAX_AUDIO_SECONDS);
        goto fail;
    }
    return 0;
fail:
    cond_set_free(s);
    return -1;
}

int cond_set_encode(cond_set *s, h3_backend *be, const char *vae_dir, const char *audio_vae_dir, h3_err *e) {
    int need_video = 0, need_audio = 0;
    for (int i = 0; i < s->n; i++) need_video |= s->items[i].pixels != NULL, need_audio |= s->items[i].wave != NULL;
    if (need_video) {
        video_vae *v = video_vae_new(be, vae_dir, VIDEO_VAE_ENCODER, e);
        if (!v) return -1;
        for (int i = 0; i < s->n; i++) {
            cond_item *it = &s->items[i];
            if (!it->pixels) continue;
            /* encoders.py: a video reference is snapped down to 17n + 5 frames before the VAE */
            int T = it->kind == LAYOUT_REF_VIDEO ? cond_ref_video_encode_frames(it->T) : it->T;
            if (cond_encode_vae(v, it->pixels, T, it->H, it->W, COND_ENCODE_SEED, &it->latents, &it->Lt, &it->lh, &it->lw, e)) {
                fail_with(e, it->what);
                video_vae_free(v);
                return -1;
            }
        }
        video_vae_free(v);
    }
    if (need_audio) {
        audio_vae *a = audio_vae_load(be, audio_vae_dir, AVAE_ENCODER, e);
        if (!a) return -1;
        for (int i = 0; i < s->n; i++) {
            cond_item *it = &s->items[i];
            if (!it->wave) continue;
            if (cond_audio_rows(a, it->wave, it->samples, &it->audio_rows, &it->audio_latents, e)) {
                fail_with(e, it->what);
                audio_vae_free(a);
                return -1;
            }
        }
        audio_vae_free(a);
    }
    return 0;
}
