/* h3_params (include/h3.h) -> the pipeline's h3_request (src/pipeline/request.h). The defaults are the CLI's
 * (h3_request_init), so a generation through the API with the same values is the same as `h3 generate`'s.
 * In-memory images and audio go to the pipeline's file readers through lossless temporary files (docs/api.md). */
#include "api_internal.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tuning.h"
#include <unistd.h>

#include "../media/media.h"

void h3_params_init(h3_params *p) {
    h3_request r;
    h3_request_init(&r);
    memset(p, 0, sizeof *p);
    p->struct_size = sizeof *p;
    p->steps = r.steps;
    p->reuse = r.reuse;
    p->layers = r.layers;
    p->core_reuse = r.core_reuse;
    p->seed = r.seed;
}

static const char *temp_path(api_temps *t, const char *name, h3_err *e) {
    if (!t->dir[0]) {
        const char *tmp = h3_knob_get(H3_KNOB_TMPDIR);
        snprintf(t->dir, sizeof t->dir, "%s/h3-api-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
        if (!mkdtemp(t->dir)) {
            h3_fail(e, "%s: cannot create a folder for the in-memory inputs: %s", t->dir, strerror(errno));
            t->dir[0] = 0;
            return NULL;
        }
    }
    char *p = t->paths[t->n];
    size_t d = strlen(t->dir), n = strlen(name);
    if (d + 1 + n >= API_PATH_CAP) return h3_fail(e, "%s: TMPDIR is too long", t->dir), NULL;
    memcpy(p, t->dir, d);
    p[d] = '/';
    memcpy(p + d + 1, name, n + 1);
    t->n++;
    return p;
}

void api_temps_remove(api_temps *t) {
    for (int i = 0; i < t->n; i++) unlink(t->paths[i]);
    if (t->dir[0]) rmdir(t->dir);
    memset(t, 0, sizeof *t);
}

/* An RGB8 image: PNG where FFmpeg reads it, else binary PPM (the MEDIA=0 build's keyframe format). */
static const char *image_file(api_temps *t, const char *what, const h3_rgb_image *im, const char *name, h3_err *e) {
    if (!im->rgb || im->width <= 0 || im->height <= 0 || im->width > 1 << 16 || im->height > 1 << 16)
        return h3_fail(e, "%s: an in-memory image needs rgb and a width and height in 1..65536", what), NULL;
    char file[64];
    snprintf(file, sizeof file, "%s.%s", name, h3_media_available() ? "png" : "ppm");
    const char *path = temp_path(t, file, e);
    if (!path) return NULL;
    if (h3_media_available()) return h3_write_png(path, im->rgb, im->height, im->width, e) ? NULL : path;
    FILE *f = fopen(path, "wb"); /* the PPM file itself: fprintf writes its header */
    size_t n = (size_t)im->width * (size_t)im->height * 3;
    int ok = f && fprintf(f, "P6\n%d %d\n255\n", im->width, im->height) > 0 && fwrite(im->rgb, 1, n, f) == n;
    if (f && fclose(f)) ok = 0;
    return ok ? path : (h3_fail(e, "%s: cannot write %s: %s", what, path, strerror(errno)), NULL);
}

/* Audio: 32-bit float WAV (exact), stereo or mono as given. */
static const char *audio_file(api_temps *t, const char *what, const h3_pcm *a, const char *name, h3_err *e) {
    if (!a->samples || a->frames <= 0 || (a->channels != 1 && a->channels != 2) || a->sample_rate <= 0)
        return h3_fail(e, "%s: in-memory audio needs samples, frames > 0, 1 or 2 channels and a sample rate", what), NULL;
    char file[64];
    snprintf(file, sizeof file, "%s.wav", name);
    const char *path = temp_path(t, file, e);
    if (!path) return NULL;
    return h3_write_wav(path, a->samples, a->channels, a->frames, a->sample_rate, 32, e) ? NULL : path;
}

int api_request_from(const h3_engine *eng, const h3_params *p, h3_request *r, api_temps *t, h3_err *e) {
    memset(t, 0, sizeof *t);
    h3_request_init(r);
    if (!p || p->struct_size < sizeof(size_t) || p->struct_size > sizeof *p)
        return h3_fail(e, "params: not set up by h3_params_init (struct_size %zu, this library's is %zu)",
                       p ? p->struct_size : 0, sizeof *p);
    r->model_dir = eng->dir;
    r->transformer_file = eng->transformer[0] ? eng->transformer : NULL;
    r->prompt = p->prompt;
    r->output = p->output_mp4 ? p->output_mp4 : "";
    r->frames_dir = p->frames_dir;
    r->wav = p->wav;
    r->dump_latents = p->dump_latents;
    r->width = p->width, r->height = p->height;
    r->render_width = p->render_width, r->render_height = p->render_height;
    r->frames = p->frames;
    r->seconds = p->seconds;
    r->steps = p->steps, r->reuse = p->reuse, r->layers = p->layers, r->core_reuse = p->core_reuse;
    r->seed = p->seed;
    r->token_reduction = p->token_reduction;
    r->reference_rope = p->reference_rope;
    r->ref_image_size = p->ref_image_size;
    r->profile = p->profile;
    /* appended fields: only when the caller's struct has them (struct_size, docs/api.md) */
    if (p->struct_size >= offsetof(h3_params, shift_audio) + sizeof p->shift_audio) {
        if (p->nloras < 0 || p->nloras > H3_MAX_LORAS)
            return h3_fail(e, "--lora: at most %d LoRAs, got %d", H3_MAX_LORAS, p->nloras);
        for (int i = 0; i < p->nloras; i++)
            r->loras[i] = (dit_lora_spec){p->loras[i].path, p->loras[i].scale, p->loras[i].ref != 0};
        r->n_loras = p->nloras;
        r->shift_video = p->shift_video, r->shift_audio = p->shift_audio;
    }
    if (p->struct_size >= offsetof(h3_params, step_update) + sizeof p->step_update) r->step_update = p->step_update;
    if (p->struct_size >= offsetof(h3_params, preview_width) + sizeof p->preview_width) {
        if (p->preview_width < 0) return h3_fail(e, "preview_width: must be >= 0 (0 = the canvas), got %d", p->preview_width);
        r->preview_width = p->preview_width;
    }
    if (p->struct_size >= offsetof(h3_params, x264_preset) + sizeof p->x264_preset && p->x264_preset) {
        static const char *const names[] = {"ultrafast", "superfast", "veryfast", "faster", "fast", "medium",
                                            "slow", "slower", "veryslow", "placebo"};
        int ok = 0;
        for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) ok |= !strcmp(p->x264_preset, names[k]);
        if (!ok)
            return h3_fail(e, "--x264-preset must be one of ultrafast, superfast, veryfast, faster, fast, medium, "
                              "slow, slower, veryslow, placebo; got '%.32s'", p->x264_preset);
        r->x264_preset = p->x264_preset;
    }
    /* the engine's settings */
    r->cuda = eng->cuda;
    r->device = eng->opt.device;
    r->threads = eng->opt.threads;
    r->parallel = eng->opt.parallel;
    r->bf16 = eng->bf16;
    r->quant_fp8 = eng->quant_fp8;
    r->quant_int8 = eng->quant_int8;
    r->vae_fp8 = eng->vae_fp8;
    r->preset_fast = eng->preset_fast;
    r->attention_sage8 = eng->attention_sage8;
    r->int8_fc2_groups = eng->opt.int8_fc2_groups;
    r->resident = eng->opt.memory;
    r->ssd_streaming = eng->opt.ssd_streaming;
    r->random_weights = eng->opt.random_weights;
    if (p->ref_image_size < 0 || p->ref_image_size > 2)
        return h3_fail(e, "--ref-image-size must be reference, match or max (0..2), got %d", p->ref_image_size);
    /* keyframes */
    r->first_frame = p->first_frame, r->last_frame = p->last_frame;
    if (!r->first_frame && p->first_image.rgb && !(r->first_frame = image_file(t, "first_image", &p->first_image, "first", e)))
        return -1;
    if (!r->last_frame && p->last_image.rgb && !(r->last_frame = image_file(t, "last_image", &p->last_image, "last", e)))
        return -1;
    /* references */
    if (p->nrefs < 0 || p->nrefs > H3_MAX_REFERENCES)
        return h3_fail(e, "nrefs: at most %d references in total, got %d", H3_MAX_REFERENCES, p->nrefs);
    for (int i = 0; i < p->nrefs; i++) {
        const h3_reference *f = &p->refs[i];
        h3_ref *q = &r->refs[r->nrefs++];
        char what[32], name[32];
        snprintf(what, sizeof what, "refs[%d]", i);
        snprintf(name, sizeof name, "ref%02d", i);
        if (f->kind < H3_REFERENCE_IMAGE || f->kind > H3_REFERENCE_AUDIO)
            return h3_fail(e, "%s: kind %d is none of H3_REFERENCE_IMAGE..H3_REFERENCE_AUDIO", what, f->kind);
        q->kind = (h3_ref_kind)f->kind; /* the same order as request.h's */
        q->path = f->path;
        q->audio_path = f->kind == H3_REFERENCE_VIDEO_AUDIO ? f->audio_path : NULL;
        if (!q->path && f->kind == H3_REFERENCE_IMAGE && !(q->path = image_file(t, what, &f->image, name, e))) return -1;
        if (!q->path && f->kind == H3_REFERENCE_AUDIO && !(q->path = audio_file(t, what, &f->audio, name, e))) return -1;
        if (!q->path) return h3_fail(e, "%s: no path (in memory only images and audio)", what);
        if (f->kind == H3_REFERENCE_VIDEO_AUDIO && !q->audio_path) return h3_fail(e, "%s: video + audio needs audio_path", what);
    }
    return 0;
}
