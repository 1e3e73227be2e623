/* The decoder phases (gen_decode.h). */
#include "gen_decode.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/backend_check.h"
#include "../media/resize.h"
#include "../model/audio_vae.h"
#include "gen_resident.h"

enum { MP4_HOST_THREADS = 4 }; /* OpenMP threads of a GPU decode's host part while the MP4 encoder runs */

/* ---- phase 3: decoders ---- */
int phase_audio(gen *s, h3_err *e) {
    char dir[4096];
    path_in(s, "audio_vae", dir, sizeof dir);
    h3_backend *be = phase_backend(s, "audio VAE decoder", 1, "");
    char key[RKEY];
    model_key(s, dir, "decoder", RANDOM_AUDIO, key);
    resident *res = s->r->resident == H3_RESIDENT_ALL ? s->res : NULL; /* the session default keeps no audio decoder */
    audio_vae *m = res ? resident_take(res, (void **)&res->avae, res->avae_key, key, resident_free_avae) : NULL;
    if (m) {
    } else if (s->r->random_weights) {
        audio_vae_config ac;
        begin_on(s, "make random audio VAE", be, 0);
        if (audio_vae_config_load(dir, &ac, e) == 0) m = audio_vae_new_random(be, &ac, AVAE_DECODER, s->r->seed ^ RANDOM_AUDIO, e);
        if (m) progress_end(&s->pg);
    } else {
        m = audio_vae_load(be, dir, AVAE_DECODER, e);
    }
    begin_on(s, "audio VAE decode", be, 0);
    if (!m) return -1;
    const audio_vae_config *c = audio_vae_get_config(m);
    int rc = -1;
    int64_t A = s->g.num_audio_latents;
    float *z = malloc(sizeof(float) * 2 * AUDIO_CHANNELS * (size_t)A);
    s->samples = (int64_t)c->hop * A;
    s->audio = malloc(sizeof(float) * 2 * (size_t)s->samples);
    if (!z || !s->audio) {
        h3_fail(e, "out of memory for the audio");
        goto done;
    }
    if (c->latent_channels != AUDIO_CHANNELS) {
        h3_fail(e, "%s: latent_channels %d, the DiT produces %d", dir, c->latent_channels, AUDIO_CHANNELS);
        goto done;
    }
    memcpy(z, s->audio_latents, sizeof(float) * 2 * AUDIO_CHANNELS * (size_t)A);
    if (audio_vae_denormalize(c, z, 2, A, e) || audio_vae_decode(m, z, 2, A, 0, s->audio, NULL, e) || phase_check(be, e) ||
        h3_check_finite(s->cpu, s->audio, 2 * s->samples, "audio decoder: the samples", e))
        goto done;
    rc = 0;
    progress_end(&s->pg);
    if (s->r->on_audio && s->r->on_audio(s->r->sink_user, s->audio, s->audio + s->samples, s->samples, H3_MEDIA_SAMPLE_RATE))
        rc = h3_fail(e, "the audio sink cancelled the generation");
done:
    free(z);
    if (rc == 0 && res) resident_keep(res, (void **)&res->avae, res->avae_key, m, key, resident_free_avae);
    else audio_vae_free(m);
    return rc;
}

typedef struct frame_sink_ctx {
    gen    *s;
    int64_t H, W;       /* decoded (render canvas) */
    float  *render;     /* [H][W][3] scratch when the output canvas is larger (docs/model/features.md 5.6), else NULL */
} frame_sink_ctx;

/* Decoded frame [3, H, W] in the VAE's normalized pixel space -> [H, W, 3] in [0, 1]. */
static int frame_sink(void *ctx, int64_t index, const float *frame, h3_err *e) {
    frame_sink_ctx *c = ctx;
    gen *s = c->s;
    if (index >= s->nframes) return h3_fail(e, "video decoder produced more frames than %lld", (long long)s->nframes);
    int64_t n = c->H * c->W, n_out = (int64_t)s->out_h * s->out_w;
    float *dst = s->frames + index * n_out * 3;
    if (c->render) { /* render canvas -> output canvas, Lanczos on float RGB */
        video_vae_pixels_to_hwc(frame, c->render, n);
        if (h3_resize_rgbf(c->render, (int)c->W, (int)c->H, dst, s->out_w, s->out_h, H3_RESAMPLE_LANCZOS, e)) return -1;
    } else {
        video_vae_pixels_to_hwc(frame, dst, n); /* one pass, threaded */
    }
    if (h3_check_finite(s->cpu, dst, n_out * 3, "video decoder: a frame's pixels", e)) return -1; /* before any write */
    if (s->r->preview) { /* --show: every final frame */
        h3_preview p = {dst, s->out_w, s->out_h, 0, s->r->steps, index};
        if (s->r->preview(s->r->preview_user, &p)) return h3_fail(e, "--show: the preview callback cancelled the generation");
    }
    if (s->r->on_frame && s->r->on_frame(s->r->sink_user, dst, s->out_w, s->out_h, index, s->nframes))
        return h3_fail(e, "the frame sink cancelled the generation");
    if (s->mp4) { /* frames arrive in order; audio interleaved by time as h3_write_mp4 does */
        if (index != s->mp4_frames) return h3_fail(e, "video decoder delivered frame %lld out of order", (long long)index);
        h3_frames_view one = {.frames = 1, .height = s->out_h, .width = s->out_w, .f32 = dst};
        if (h3_mp4_writer_frames(s->mp4, &one, e)) return -1;
        int64_t upto = (index + 1) * H3_MEDIA_SAMPLE_RATE / H3_MEDIA_FPS;
        if (index == s->nframes - 1 || upto > s->samples) upto = s->samples;
        if (upto > s->mp4_samples &&
            h3_mp4_writer_audio(s->mp4, s->audio + s->mp4_samples, s->audio + s->samples + s->mp4_samples,
                                upto - s->mp4_samples, e))
            return -1;
        if (upto > s->mp4_samples) s->mp4_samples = upto;
        s->mp4_frames++;
    }
    progress_update(&s->pg, index + 1);
    return 0;
}

int phase_video(gen *s, h3_err *e) {
    h3_backend *be = phase_backend(s, "video VAE decoder", 1, "");
    char dir[4096], key[RKEY];
    const int parts = video_decoder_key(s, be, dir, sizeof dir, key);
    resident *res = s->res;
    video_vae *v = res ? resident_take(res, (void **)&res->vvae, res->vvae_key, key, resident_free_vvae) : NULL;
    if (v) {
        gen_log(s->r, "video VAE decoder resident (kept from the previous generation)");
    } else if (s->r->random_weights) {
        video_vae_config vc;
        begin_on(s, "make random video VAE", be, 0);
        if (video_vae_config_load(dir, &vc, e) == 0) v = video_vae_new_random(be, &vc, parts, s->r->seed ^ RANDOM_VIDEO, e);
        if (v) progress_end(&s->pg);
    } else {
        v = video_vae_new(be, dir, parts, e);
    }
    if (!v) return -1;
    video_vae_set_log(v, s->r->log, s->r->log_user); /* H3_VAE_PROFILE's line */
    if (parts & VIDEO_VAE_FP8) gen_log(s->r, "video VAE decoder: block GEMMs as FP8 W8A8 (--vae-quant fp8, docs/fast.md)");
    const video_vae_config *c = video_vae_get_config(v);
    const layout_geometry *g = &s->g;
    frame_sink_ctx fc = {s, g->height, g->width, NULL};
    int rc = -1;
    /* --parallel N (docs/parallel.md): the decoder on every rank, its tiles dealt to them (frames as one rank's) */
    video_vae *vv[8] = {v};
    int nv = 1;
    int64_t nz = (int64_t)VIDEO_CHANNELS * g->num_latent_frames * g->latent_height * g->latent_width;
    float *z = malloc(sizeof(float) * (size_t)nz);
    s->nframes = video_vae_decoded_frames(c, g->num_latent_frames, e);
    if (s->nframes < 0) goto done;
    if (s->nframes != g->num_frames) {
        h3_fail(e, "video decoder gives %lld frames for %d latent frames, expected %d", (long long)s->nframes,
                g->num_latent_frames, g->num_frames);
        goto done;
    }
    s->frames = malloc(sizeof(float) * 3 * (size_t)(s->nframes * s->out_h * s->out_w));
    if (!z || !s->frames) {
        h3_fail(e, "out of memory for %lld decoded frames", (long long)s->nframes);
        goto done;
    }
    memcpy(z, s->video_latents, sizeof(float) * (size_t)nz);
    video_vae_denormalize_latents(c, z, nz / VIDEO_CHANNELS);
    if (s->parallel > 1 && be == s->be) {
        for (; nv < s->parallel; nv++) {
            video_vae *p = NULL;
            video_vae_config pc;
            if (s->r->random_weights) {
                if (video_vae_config_load(dir, &pc, e) == 0)
                    p = video_vae_new_random(s->peers[nv - 1], &pc, parts, s->r->seed ^ RANDOM_VIDEO, e);
            } else {
                p = video_vae_new(s->peers[nv - 1], dir, parts, e);
            }
            if (!p) goto done;
            vv[nv] = p;
        }
        gen_log(s->r, "--parallel %d: the video decoder's tiles dealt to the %d ranks", s->parallel, nv);
    }
    begin_on(s, "video VAE decode", be, s->nframes);
    video_vae_tiling tiling = video_vae_tiling_default();
    if ((s->out_h != g->height || s->out_w != g->width) &&
        !(fc.render = malloc(sizeof(float) * 3 * (size_t)g->height * (size_t)g->width))) {
        h3_fail(e, "out of memory for the render-canvas frame");
        goto done;
    }
    /* --preset fast encodes with x264's veryfast (docs/media.md: the encode beside the decoder and its tail) */
    h3_mp4_opts mo = {.preset = s->r->x264_preset ? s->r->x264_preset : s->r->preset_fast ? "veryfast" : NULL};
    if (s->o_mp4 && !(s->mp4 = h3_mp4_writer_new_to(s->o_mp4, s->out_w, s->out_h, s->audio != NULL, &mo, e)))
        goto done;
    /* A GPU decode with the MP4 encoder beside it: the host part's OpenMP team kept at MP4_HOST_THREADS, so its idle
     * threads do not spin on the cores x264's threads need (docs/fast.md 8: decode + encode 3.92 s with all 16 cores'
     * threads on the H200, 2.24 s with OMP_NUM_THREADS=4) */
    const int omp_prev = omp_get_max_threads();
    const int narrow = s->mp4 && be->kind == H3_BACKEND_CUDA && omp_prev > MP4_HOST_THREADS;
    if (narrow) omp_set_num_threads(MP4_HOST_THREADS);
    int drc = nv > 1 ? video_vae_decode_stream_parallel(vv, nv, z, g->num_latent_frames, g->latent_height, g->latent_width,
                                                        &tiling, frame_sink, &fc, e)
                     : video_vae_decode_stream(v, z, g->num_latent_frames, g->latent_height, g->latent_width, &tiling,
                                               frame_sink, &fc, e);
    if (narrow) omp_set_num_threads(omp_prev);
    if (drc || phase_check(be, e)) goto done;
    progress_end(&s->pg);
    rc = 0;
done:
    for (int r = 1; r < nv; r++) video_vae_free(vv[r]);
    free(z);
    free(fc.render);
    /* the session default keeps the decoder only beside a kept transformer */
    if (rc == 0 && res && (s->r->resident != H3_RESIDENT_AUTO || res->dit))
        resident_keep(res, (void **)&res->vvae, res->vvae_key, v, key, resident_free_vvae);
    else
        video_vae_free(v);
    return rc;
}
