/* `h3 generate`, end to end (features.md 4): conditioning (tokenizer, Qwen3-VL prefix) ->
 * DiT denoising (layout, noise, scheduler) -> audio and video decoders -> outputs.
 * One phase's weights are resident at a time: the text encoder is freed before the DiT loads,
 * the DiT before the decoders (features.md 7.1), so peak memory is the largest phase. */
#include "generate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/backend.h"
#include "../io/safetensors.h"
#include "../io/snapshot.h"
#include "../media/media.h"
#include "../model/audio_vae.h"
#include "../model/dit.h"
#include "../model/text_encoder.h"
#include "../model/tokenizer.h"
#include "../model/video_vae.h"
#include "denoise.h"
#include "layout.h"
#include "noise.h"
#include "presentation.h"
#include "progress.h"
#include "sched.h"

#define VIDEO_CHANNELS 24
#define AUDIO_CHANNELS 32

typedef struct gen {
    const h3_request *r;
    h3_backend       *be;
    progress          pg;
    h3_task           task;
    layout_geometry   g;
    /* conditioning */
    presentation      pres;
    float            *text;      /* [T, text_dim] */
    int64_t           T;
    int               text_dim;
    /* results */
    float            *video_latents; /* (1, 24, F, lh, lw), normalized */
    float            *audio_latents; /* (2, 32, A), normalized */
    float            *frames;        /* [frames, H, W, 3] in [0, 1] */
    int64_t           nframes;
    float            *audio;         /* [2, samples] in [-1, 1] */
    int64_t           samples;
} gen;

static void path_in(const gen *s, const char *sub, char *out, size_t cap) { snapshot_path(out, cap, s->r->model_dir, sub); }

/* ---- phase 1: the prompt through the tokenizer and the Qwen3-VL prefix (hidden_states[50]) ---- */
static int phase_text(gen *s, h3_err *e) {
    char dir[4096];
    path_in(s, "tokenizer", dir, sizeof dir);
    progress_begin(&s->pg, "text encoder", 0);
    h3_tokenizer *tok = tokenizer_load(dir, e);
    if (!tok) return -1;
    int rc = -1;
    text_encoder *te = NULL;
    int64_t *pos = NULL;
    if (presentation_check_prompt(s->r->prompt, e)) goto done;
    if (s->task != H3_T2VA) {
        h3_fail(e, "%s is not wired into `h3 generate` yet (only t2va is)", s->task == H3_FL2VA ? "fl2va" : "ref2va");
        goto done;
    }
    if (presentation_t2va(presentation_tokenizer_encode, tok, s->r->prompt, &s->pres, e)) goto done;
    path_in(s, "text_encoder", dir, sizeof dir);
    te = text_encoder_load(s->be, dir, s->r->bf16, e);
    if (!te) goto done;
    const te_config *tc = text_encoder_get_config(te);
    s->T = s->pres.L;
    s->text_dim = tc->text.hidden_size;
    pos = malloc(sizeof(int64_t) * 3 * (size_t)s->T);
    s->text = malloc(sizeof(float) * (size_t)(s->T * s->text_dim));
    if (!pos || !s->text) {
        h3_fail(e, "out of memory for %lld prompt tokens", (long long)s->T);
        goto done;
    }
    if (presentation_rope_index(s->pres.ids, s->T, NULL, 0, NULL, 0, tc->vision.spatial_merge_size, pos, e)) goto done;
    if (text_encoder_forward(te, s->pres.ids, s->T, pos, NULL, TE_OUTPUT_LAYER, s->text, e)) goto done;
    rc = 0;
done:
    free(pos);
    text_encoder_free(te); /* released before the DiT loads */
    tokenizer_free(tok);
    if (rc == 0) progress_end(&s->pg);
    return rc;
}

/* ---- phase 2: layout, noise and the denoising loop ---- */
static int denoise_progress(void *user, int step, int steps) {
    gen *s = user;
    progress_update(&s->pg, step + 1);
    (void)steps;
    return 0;
}

static int phase_dit(gen *s, h3_err *e) {
    char dir[4096];
    if (snapshot_dit_dir(s->r->model_dir, s->task == H3_REF2VA, dir, sizeof dir, e)) return -1;
    progress_begin(&s->pg, "load transformer", 0);
    dit_model *m = dit_load(s->be, dir, s->r->bf16, e);
    if (!m) return -1;
    progress_end(&s->pg);
    const dit_config *c = dit_get_config(m);
    int rc = -1, n_inf;
    sched vs = {0}, as = {0};
    layout *L = NULL;
    float *vrows = NULL, *arows = NULL;
    if (c->in_channels != VIDEO_CHANNELS || c->audio_in_channels != AUDIO_CHANNELS) {
        h3_fail(e, "%s: in_channels %d / audio_in_channels %d, the pipeline packs %d / %d", dir, c->in_channels,
                c->audio_in_channels, VIDEO_CHANNELS, AUDIO_CHANNELS);
        goto done;
    }
    if (c->text_dim != s->text_dim) {
        h3_fail(e, "%s: text_dim %d but the text encoder's hidden size is %d", dir, c->text_dim, s->text_dim);
        goto done;
    }
    if (sched_num_inference_steps_for_evaluations(s->r->steps, &n_inf, e) || sched_init(&vs, n_inf, SCHED_VIDEO_SHIFT, e) ||
        sched_init(&as, n_inf, SCHED_AUDIO_SHIFT, e))
        goto done;
    const layout_geometry *g = &s->g;
    L = layout_new_t2va(s->pres.tags, s->T, g->num_latent_frames, g->latent_height, g->latent_width, g->num_audio_latents,
                        NULL, 0, e);
    if (!L) goto done;
    const int64_t Q = VIDEO_CHANNELS * 4;
    vrows = malloc(sizeof(float) * (size_t)(L->Nv * Q));
    arows = malloc(sizeof(float) * (size_t)(L->Na * AUDIO_CHANNELS));
    if (!vrows || !arows) {
        h3_fail(e, "out of memory for the packed rows");
        goto done;
    }
    noise_request nr = {
        .seed = s->r->seed, .C = VIDEO_CHANNELS, .Ca = AUDIO_CHANNELS,
        .F = g->num_latent_frames, .lh = g->latent_height, .lw = g->latent_width, .A = g->num_audio_latents,
        .expected_condition_video_rows = L->num_condition_video_rows,
        .expected_condition_audio_rows = L->num_condition_audio_rows,
    };
    if (noise_prepare_rows(&nr, vrows, arows, e)) goto done;
    progress_begin(&s->pg, "denoise", sched_evaluations(&vs));
    denoise_args da = {.L = L, .text = s->text, .video_sched = &vs, .audio_sched = &as, .video_rows = vrows,
                       .audio_rows = arows, .progress = denoise_progress, .progress_user = s};
    if (denoise_run(m, &da, e)) goto done;
    progress_end(&s->pg);
    size_t nv = (size_t)VIDEO_CHANNELS * g->num_latent_frames * g->latent_height * g->latent_width;
    s->video_latents = malloc(sizeof(float) * nv);
    s->audio_latents = malloc(sizeof(float) * 2 * AUDIO_CHANNELS * (size_t)g->num_audio_latents);
    if (!s->video_latents || !s->audio_latents) {
        h3_fail(e, "out of memory for the latents");
        goto done;
    }
    if (denoise_unpack(L, VIDEO_CHANNELS, AUDIO_CHANNELS, vrows, arows, s->video_latents, s->audio_latents, e)) goto done;
    rc = 0;
done:
    free(vrows);
    free(arows);
    layout_free(L);
    sched_free(&vs);
    sched_free(&as);
    dit_free(m); /* released before the decoders load */
    return rc;
}

/* ---- phase 3: decoders ---- */
static int phase_audio(gen *s, h3_err *e) {
    char dir[4096];
    path_in(s, "audio_vae", dir, sizeof dir);
    progress_begin(&s->pg, "audio VAE decode", 0);
    audio_vae *m = audio_vae_load(s->be, dir, AVAE_DECODER, e);
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
    if (audio_vae_denormalize(c, z, 2, A, e) || audio_vae_decode(m, z, 2, A, 0, s->audio, NULL, e)) goto done;
    rc = 0;
    progress_end(&s->pg);
done:
    free(z);
    audio_vae_free(m);
    return rc;
}

typedef struct frame_sink_ctx {
    gen    *s;
    int64_t H, W;
} frame_sink_ctx;

/* Decoded frame [3, H, W] in the VAE's normalized pixel space -> [H, W, 3] in [0, 1]. */
static int frame_sink(void *ctx, int64_t index, const float *frame, h3_err *e) {
    frame_sink_ctx *c = ctx;
    gen *s = c->s;
    if (index >= s->nframes) return h3_fail(e, "video decoder produced more frames than %lld", (long long)s->nframes);
    int64_t n = c->H * c->W;
    float *tmp = malloc(sizeof(float) * 3 * (size_t)n);
    if (!tmp) return h3_fail(e, "out of memory");
    memcpy(tmp, frame, sizeof(float) * 3 * (size_t)n);
    video_vae_denormalize_pixels(tmp, n);
    float *dst = s->frames + index * n * 3;
    for (int64_t i = 0; i < n; i++)
        for (int ch = 0; ch < 3; ch++) dst[i * 3 + ch] = tmp[ch * n + i];
    free(tmp);
    progress_update(&s->pg, index + 1);
    return 0;
}

static int phase_video(gen *s, h3_err *e) {
    char dir[4096];
    path_in(s, "vae", dir, sizeof dir);
    video_vae *v = video_vae_new(s->be, dir, VIDEO_VAE_DECODER, e);
    if (!v) return -1;
    const video_vae_config *c = video_vae_get_config(v);
    const layout_geometry *g = &s->g;
    int rc = -1;
    int64_t nz = (int64_t)VIDEO_CHANNELS * g->num_latent_frames * g->latent_height * g->latent_width;
    float *z = malloc(sizeof(float) * (size_t)nz);
    s->nframes = video_vae_decoded_frames(c, g->num_latent_frames, e);
    if (s->nframes < 0) goto done;
    if (s->nframes != g->num_frames) {
        h3_fail(e, "video decoder gives %lld frames for %d latent frames, expected %d", (long long)s->nframes,
                g->num_latent_frames, g->num_frames);
        goto done;
    }
    s->frames = malloc(sizeof(float) * 3 * (size_t)(s->nframes * g->height * g->width));
    if (!z || !s->frames) {
        h3_fail(e, "out of memory for %lld decoded frames", (long long)s->nframes);
        goto done;
    }
    memcpy(z, s->video_latents, sizeof(float) * (size_t)nz);
    video_vae_denormalize_latents(c, z, nz / VIDEO_CHANNELS);
    progress_begin(&s->pg, "video VAE decode", s->nframes);
    video_vae_tiling tiling = video_vae_tiling_default();
    frame_sink_ctx fc = {s, g->height, g->width};
    if (video_vae_decode_stream(v, z, g->num_latent_frames, g->latent_height, g->latent_width, &tiling, frame_sink, &fc, e))
        goto done;
    progress_end(&s->pg);
    rc = 0;
done:
    free(z);
    video_vae_free(v);
    return rc;
}

/* ---- phase 4: outputs, each written atomically ---- */
static int phase_outputs(gen *s, h3_err *e) {
    const h3_request *r = s->r;
    const layout_geometry *g = &s->g;
    if (r->dump_latents) {
        st_writer *w = st_writer_new();
        int64_t vs[5] = {1, VIDEO_CHANNELS, g->num_latent_frames, g->latent_height, g->latent_width};
        int64_t as[3] = {2, AUDIO_CHANNELS, g->num_audio_latents};
        int64_t fs[4] = {s->nframes, g->height, g->width, 3};
        int64_t ws[2] = {2, s->samples};
        int rc = st_writer_add(w, "video_latents", H3_F32, 5, vs, s->video_latents, e) ||
                 st_writer_add(w, "audio_latents", H3_F32, 3, as, s->audio_latents, e) ||
                 st_writer_add(w, "frames", H3_F32, 4, fs, s->frames, e) ||
                 st_writer_add(w, "audio", H3_F32, 2, ws, s->audio, e) ||
                 st_writer_save(w, r->dump_latents, NULL, e);
        st_writer_free(w);
        if (rc) return -1;
    }
    h3_frames_view fv = {.frames = (int)s->nframes, .height = g->height, .width = g->width, .f32 = s->frames};
    if (r->output && r->output[0]) {
        progress_begin(&s->pg, "mux MP4", 0);
        if (h3_write_mp4(r->output, &fv, s->audio, s->samples, NULL, e)) return -1;
        progress_end(&s->pg);
    }
    if (r->frames_dir && h3_write_png_frames(r->frames_dir, &fv, e)) return -1;
    if (r->wav && h3_write_wav(r->wav, s->audio, 2, s->samples, H3_MEDIA_SAMPLE_RATE, 16, e)) return -1;
    return 0;
}

static int resolve_geometry(gen *s, h3_err *e) {
    int aligned, h = s->r->height, w = s->r->width;
    if (h3_request_validate(s->r, &aligned, e)) return -1;
    if (!w && layout_resolve_canvas(16, 9, &h, &w, e)) return -1; /* t2va/ref2va default: 16:9 */
    return layout_resolve_geometry(h, w, aligned, &s->g, e);
}

int h3_generate(const h3_request *r, h3_err *e) {
    gen s;
    memset(&s, 0, sizeof s);
    s.r = r;
    s.task = h3_request_task(r);
    if (resolve_geometry(&s, e)) return -1;
    if ((r->output && r->output[0]) || r->frames_dir || r->wav) {
        if (!h3_media_available()) return h3_fail(e, "-o/--frames-dir/--wav: this build has no FFmpeg (MEDIA=0); use -o '' --dump-latents");
    }
    s.be = h3_backend_new(r->cuda ? H3_BACKEND_CUDA : H3_BACKEND_CPU, r->threads, e);
    if (!s.be) return -1;
    progress_init(&s.pg, stderr, 0);
    fprintf(stderr, "h3: %s %dx%d, %d frames (%d latent), %d audio latents, %d steps, seed %llu, %s on %s\n",
            s.task == H3_T2VA ? "t2va" : s.task == H3_FL2VA ? "fl2va" : "ref2va", s.g.width, s.g.height, s.g.num_frames,
            s.g.num_latent_frames, s.g.num_audio_latents, r->steps, (unsigned long long)r->seed,
            r->bf16 ? "bf16" : "fp32", h3_backend_name(s.be));
    int rc = phase_text(&s, e);
    if (!rc) rc = phase_dit(&s, e);
    if (!rc) rc = phase_audio(&s, e);
    if (!rc) rc = phase_video(&s, e);
    if (!rc) rc = phase_outputs(&s, e);
    if (!rc && r->profile) progress_report(&s.pg, stderr);
    presentation_free(&s.pres);
    free(s.text);
    free(s.video_latents);
    free(s.audio_latents);
    free(s.frames);
    free(s.audio);
    h3_backend_free(s.be);
    return rc;
}
