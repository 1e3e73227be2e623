#include "request.h"

#include "denoise.h"
#include "layout.h"
#include "../core/text.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#define MAX_PIXELS (768 * 1344)
#define FPS 24

void h3_request_init(h3_request *r) {
    memset(r, 0, sizeof *r);
    r->output = "h3.mp4";
    r->steps = 20;
    r->reuse = 1;
    r->layers = 50;
    r->core_reuse = 1;
    r->seed = 42;
    r->bf16 = 1;
}

h3_task h3_request_task(const h3_request *r) {
    if (r->nrefs) return H3_REF2VA;
    if (r->first_frame || r->last_frame) return H3_FL2VA;
    return H3_T2VA;
}

int h3_seconds_to_frames(double seconds) { return (int)nearbyint(seconds * FPS); }

static int parent_dir_exists(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) return 1;
    if (slash == dir) return 1;
    *slash = 0;
    struct stat sb;
    return stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int file_readable(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISREG(sb.st_mode);
}

int h3_request_validate(const h3_request *r, int *aligned_frames, h3_err *e) {
    if (!r->model_dir || !r->model_dir[0]) return h3_fail(e, "-d SNAPSHOT_DIR is required");
    if (!r->prompt) return h3_fail(e, "-p PROMPT is required");
    if (!r->prompt[0]) return h3_fail(e, "-p: the prompt is empty");
    if ((r->width != 0) != (r->height != 0)) return h3_fail(e, "--width and --height must be given together");
    if (r->width) {
        if (r->width < 32 || r->height < 32 || r->width % 32 || r->height % 32)
            return h3_fail(e, "--width %d --height %d: both must be multiples of 32 and at least 32", r->width, r->height);
        if ((long)r->width * r->height > MAX_PIXELS)
            return h3_fail(e, "--width %d --height %d: %ld pixels exceed the 768x1344 = %d pixel cap", r->width,
                           r->height, (long)r->width * r->height, MAX_PIXELS);
        if (r->width > 4 * r->height || r->height > 4 * r->width)
            return h3_fail(e, "--width %d --height %d: aspect ratio outside 1:4..4:1", r->width, r->height);
    }
    if (r->frames && r->seconds != 0) return h3_fail(e, "--frames and --seconds are mutually exclusive");
    int frames = 124; /* the diffusers default for t2va/fl2va */
    if (r->seconds != 0) {
        if (!isfinite(r->seconds) || r->seconds <= 0) return h3_fail(e, "--seconds must be a finite number > 0");
        frames = h3_seconds_to_frames(r->seconds);
        if (frames < 1) return h3_fail(e, "--seconds %g gives no frame at 24 fps", r->seconds);
    } else if (r->frames) {
        if (r->frames < 1) return h3_fail(e, "--frames must be at least 1, got %d", r->frames);
        frames = r->frames;
    } else if (r->nrefs) {
        return h3_fail(e, "ref2va needs --frames or --seconds (the diffusers pipeline requires num_frames)");
    }
    int aligned;
    if (layout_align_num_frames(frames, &aligned, e)) return h3_fail_prefix(e, r->seconds != 0 ? "--seconds" : "--frames");
    if (layout_check_duration(frames, aligned, e)) { /* the reference's rule, said in the flags' terms */
        char what[64];
        if (r->seconds != 0) snprintf(what, sizeof what, "--seconds %g = num_frames %d", r->seconds, frames);
        else snprintf(what, sizeof what, "--frames: num_frames %d", frames);
        return h3_fail(e, "%s, rounded up to %d (17n+5), lasts %.3f s: MiniMax-H3 generates 5 to 15 s (aligned 120..360 "
                          "frames): --frames %d..%d, --seconds %g..%g (%d frames = %.3f s is the longest)",
                       what, aligned, aligned / (double)FPS, H3_MIN_REQUEST_FRAMES, H3_MAX_REQUEST_FRAMES,
                       H3_MIN_REQUEST_SECONDS, H3_MAX_REQUEST_SECONDS, H3_MAX_REQUEST_FRAMES, H3_MAX_REQUEST_FRAMES / (double)FPS);
    }
    *aligned_frames = aligned;
    if (r->steps < 1 || r->steps > 1000) return h3_fail(e, "--steps must be 1..1000 model evaluations, got %d", r->steps);
    if (r->reuse < 1 || r->reuse > 3) return h3_fail(e, "--reuse must be 1..3 (docs/model/features.md 5.2), got %d", r->reuse);
    if (r->layers < 35 || r->layers > 50) return h3_fail(e, "--layers must be 35..50 DiT blocks, got %d", r->layers);
    if (!r->render_width != !r->render_height)
        return h3_fail(e, "--render-width and --render-height must be given together");
    if (r->render_width && (r->render_width < 32 || r->render_height < 32 || r->render_width % 32 || r->render_height % 32))
        return h3_fail(e, "--render-width/--render-height %dx%d: must be multiples of 32, at least 32", r->render_width,
                       r->render_height);
    if (r->render_width && h3_request_task(r) == H3_FL2VA && !r->width)
        return h3_fail(e, "--render-width/--render-height with keyframes need --width/--height (the output canvas)");
    if (r->core_reuse < 1 || r->core_reuse > 6)
        return h3_fail(e, "--core-reuse must be 1..6 (docs/model/features.md 5.4), got %d", r->core_reuse);
#ifndef H3_CUDA
    if (r->cuda) return h3_fail(e, "--backend cuda: this binary was built without CUDA (rebuild with make CUDA=1)");
#endif
    if ((r->quant_int8 || r->int8_fc2_groups) && !r->bf16)
        return h3_fail(e, "--quant int8 and --int8-fc2-groups need --precision bf16 (the fp32 mode is the reference)");
    if (r->quant_int8 && r->ssd_streaming)
        return h3_fail(e, "--ssd-streaming cannot be combined with --quant int8 (the int8 blocks are made resident)");
    if (r->quant_fp8 && !r->bf16) return h3_fail(e, "--quant fp8 needs --precision bf16 (the fp32 mode is the reference)");
    if (r->vae_fp8 && !r->bf16) return h3_fail(e, "--vae-quant fp8 needs --precision bf16 (the fp32 mode is the reference)");
    if (r->parallel < 0 || r->parallel > 8) return h3_fail(e, "--parallel must be 1..8, got %d", r->parallel);
    if (r->parallel > 1 && r->token_reduction)
        return h3_fail(e, "--parallel %d with --token-reduction: its token pairs would cross the ranks' rows; use one of "
                          "the two (docs/parallel.md)", r->parallel);
    if (r->attention_sage8 && !r->bf16)
        return h3_fail(e, "--attention sage8 needs --precision bf16 (the fp32 mode is the reference)");
    if (r->quant_fp8 && r->ssd_streaming)
        return h3_fail(e, "--ssd-streaming cannot be combined with --quant fp8 (the FP8 blocks are made resident)");
    if (r->token_reduction && !r->bf16)
        return h3_fail(e, "--token-reduction needs --precision bf16 (the fp32 mode is the reference)");
    if (r->token_reduction) { /* the H3_TOKEN_REDUCTION_* overrides' syntax and ranges now; END <= the model's blocks
                                 once its config is read (denoise_token_reduction again in the DiT phase) */
        denoise_args probe = {0};
        if (denoise_token_reduction(&probe, 1 << 20, e)) return -1;
    }
    if (r->core_reuse > 1 && r->reuse > 1)
        return h3_fail(e, "--core-reuse %d cannot be combined with --reuse %d (docs/model/features.md 5.4)", r->core_reuse, r->reuse);
    if ((r->first_frame || r->last_frame) && r->nrefs)
        return h3_fail(e, "--first-frame/--last-frame cannot be combined with --ref-* references");
    if (r->first_frame && !file_readable(r->first_frame)) return h3_fail(e, "--first-frame %s: not a readable file", h3_quote(r->first_frame));
    if (r->last_frame && !file_readable(r->last_frame)) return h3_fail(e, "--last-frame %s: not a readable file", h3_quote(r->last_frame));
    int images = 0, videos = 0, audios = 0;
    static const char *const flag[] = {"--ref-image", "--ref-silent-video", "--ref-video", "--ref-video-audio", "--ref-audio"};
    for (int i = 0; i < r->nrefs; i++) {
        const h3_ref *f = &r->refs[i];
        if (!f->path || !f->path[0]) return h3_fail(e, "%s: missing path", flag[f->kind]);
        if (!file_readable(f->path)) return h3_fail(e, "%s %s: not a readable file", flag[f->kind], h3_quote(f->path));
        if (f->kind == H3_REF_VIDEO_AUDIO && (!f->audio_path || !file_readable(f->audio_path)))
            return h3_fail(e, "--ref-video-audio %s: the soundtrack '%s' is not a readable file", f->path,
                           h3_quote(f->audio_path ? f->audio_path : ""));
        switch (f->kind) {
        case H3_REF_IMAGE: images++; break;
        case H3_REF_SILENT_VIDEO: videos++; break;
        case H3_REF_VIDEO:
        case H3_REF_VIDEO_AUDIO: videos++, audios++; break;
        case H3_REF_AUDIO: audios++; break;
        }
    }
    if (images > 9) return h3_fail(e, "--ref-image: at most 9 image references, got %d", images);
    if (videos > 3) return h3_fail(e, "--ref-*video*: at most 3 video references, got %d", videos);
    if (audios > 3) return h3_fail(e, "--ref-audio/--ref-video: at most 3 audio inputs (a video with sound counts as one), got %d", audios);
    if (r->nrefs && !images && !videos) return h3_fail(e, "--ref-audio: audio-only references are not allowed; add an image or video reference");
    if (r->output && r->output[0] && !parent_dir_exists(r->output))
        return h3_fail(e, "-o %s: the folder does not exist", h3_quote(r->output));
    if (r->wav && !parent_dir_exists(r->wav)) return h3_fail(e, "--wav %s: the folder does not exist", h3_quote(r->wav));
    if (r->dump_latents && !parent_dir_exists(r->dump_latents))
        return h3_fail(e, "--dump-latents %s: the folder does not exist", h3_quote(r->dump_latents));
    if (r->n_loras < 0 || r->n_loras > DIT_LORA_MAX)
        return h3_fail(e, "--lora: at most %d LoRAs, got %d", DIT_LORA_MAX, r->n_loras);
    for (int i = 0; i < r->n_loras; i++) {
        const dit_lora_spec *l = &r->loras[i];
        const char *flag = l->to_ref ? "--lora-ref" : "--lora";
        if (!l->path || !l->path[0]) return h3_fail(e, "%s: the LoRA file is missing", flag);
        if (!isfinite(l->scale) || fabs(l->scale) > DIT_LORA_MAX_SCALE)
            return h3_fail(e, "%s %s: the scale must be a finite number in [-%g, %g], got %g", flag, l->path,
                           DIT_LORA_MAX_SCALE, DIT_LORA_MAX_SCALE, l->scale);
        if (!file_readable(l->path)) return h3_fail(e, "%s %s: no such file", flag, l->path);
    }
    if (r->n_loras && r->random_weights) return h3_fail(e, "--lora: needs the checkpoint's weights, not --random-weights");
    if ((r->shift_video != 0 && !(r->shift_video > 0 && r->shift_video <= SCHED_MAX_SHIFT)) ||
        (r->shift_audio != 0 && !(r->shift_audio > 0 && r->shift_audio <= SCHED_MAX_SHIFT)))
        return h3_fail(e, "--shift VIDEO[:AUDIO]: each shift must be a number in (0, %g], got %g:%g", (double)SCHED_MAX_SHIFT,
                       r->shift_video, r->shift_audio);
    if (r->step_update != 0 && r->step_update != 1)
        return h3_fail(e, "--step-update must be euler or training_euler (0 or 1), got %d", r->step_update);
    if (r->random_weights && h3_request_task(r) != H3_T2VA)
        return h3_fail(e, "--random-weights: only t2va (text prompts) runs on random weights; drop the keyframes/references");
    if ((!r->output || !r->output[0]) && !r->frames_dir && !r->wav && !r->dump_latents && !r->random_weights &&
        !r->on_frame && !r->on_audio) /* the API's frame/audio sinks take the output */
        return h3_fail(e, "-o '': with no MP4, give --frames-dir, --wav or --dump-latents, or nothing would be written");
    return 0;
}
