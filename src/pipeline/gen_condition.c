/* The conditioning phases (gen_condition.h; docs/condition.md). */
#include "gen_condition.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../io/snapshot.h"
#include "../model/text_encoder.h"
#include "../model/tokenizer.h"
#include "../model/vision.h"
#include "gen_cond_cache.h"
#include "gen_resident.h"
#include "sched.h"

/* ---- the vision side of the fl2va / ref2va presentations (docs/model/text_encoder.md 3-4; encoders.py) ---- */
typedef struct vision_inputs {
    te_vision_rows rows;
    float   *merged[2], *deep[2];    /* [0] images, [1] videos */
    int64_t  image_grid[3 * COND_MAX_ITEMS], video_grid[3 * COND_MAX_ITEMS];
    int      n_image_grids, n_video_grids;
    double  *timestamps[COND_MAX_ITEMS];
} vision_inputs;

static void vision_inputs_free(vision_inputs *v) {
    for (int k = 0; k < 2; k++) free(v->merged[k]), free(v->deep[k]);
    for (int i = 0; i < COND_MAX_ITEMS; i++) free(v->timestamps[i]);
    memset(v, 0, sizeof *v);
}

/* One batch of items through the processor and the tower, per modality as diffusers batches them
 * (all images in one call, all videos in another). frames[i]/n_frames[i]: the pixels of item i. */
static int vision_batch(vision_model *vm, const vision_proc_config *pc, const te_config *tc, const uint8_t **frames,
                        const int *n_frames, const cond_item **items, int n, int64_t *grid, float **merged, float **deep,
                        int64_t *n_rows, h3_err *e) {
    float *pv[COND_MAX_ITEMS] = {0};
    int64_t N = 0, vec = 3LL * pc->temporal_patch_size * pc->patch_size * pc->patch_size;
    int rc = -1;
    for (int i = 0; i < n; i++) {
        if (vision_preprocess(frames[i], n_frames[i], items[i]->H, items[i]->W, pc, &pv[i], grid + 3 * i, e)) {
            char why[sizeof e->msg];
            memcpy(why, e->msg, sizeof why);
            h3_fail(e, "%s: %s", items[i]->what, why);
            goto done;
        }
        N += grid[3 * i] * grid[3 * i + 1] * grid[3 * i + 2];
    }
    const int64_t U = (int64_t)tc->vision.spatial_merge_size * tc->vision.spatial_merge_size, O = tc->vision.out_hidden_size;
    float *all = malloc(sizeof(float) * (size_t)(N * vec));
    *merged = malloc(sizeof(float) * (size_t)(N / U * O));
    *deep = malloc(sizeof(float) * (size_t)(N / U * O * (tc->vision.n_deepstack > 0 ? tc->vision.n_deepstack : 1)));
    if (!all || !*merged || !*deep) {
        free(all);
        h3_fail(e, "vision: out of memory for %lld patches", (long long)N);
        goto done;
    }
    for (int i = 0, off = 0; i < n; i++) {
        int64_t r = grid[3 * i] * grid[3 * i + 1] * grid[3 * i + 2];
        memcpy(all + off * vec, pv[i], sizeof(float) * (size_t)(r * vec));
        off += (int)r;
    }
    rc = vision_forward(vm, all, N, grid, n, *merged, *deep, e);
    free(all);
    *n_rows = N / U;
done:
    for (int i = 0; i < n; i++) free(pv[i]);
    return rc;
}

static int vision_features(gen *s, h3_backend *be, text_encoder *te, h3_tokenizer *tok, vision_inputs *v, h3_err *e) {
    const te_config *tc = text_encoder_get_config(te);
    char dir[4096];
    path_in(s, "processor", dir, sizeof dir);
    vision_proc_config ipc, vpc;
    if (vision_proc_config_load(dir, 0, &ipc, e) || vision_proc_config_load(dir, 1, &vpc, e)) return -1;
    begin_on(s, "vision tower", be, 0);
    vision_model *vm = vision_new(be, &tc->vision, text_encoder_weights(te), s->r->bf16, e);
    if (!vm) return -1;
    const cond_set *cs = &s->cond;
    const uint8_t *img_px[COND_MAX_ITEMS], *vid_px[COND_MAX_ITEMS];
    uint8_t *sampled[COND_MAX_ITEMS] = {0};
    const cond_item *img_it[COND_MAX_ITEMS], *vid_it[COND_MAX_ITEMS];
    int img_n[COND_MAX_ITEMS], vid_n[COND_MAX_ITEMS], nb[COND_MAX_ITEMS] = {0}, ni = 0, nv = 0, rc = -1;
    int item_slot[COND_MAX_ITEMS];
    for (int i = 0; i < cs->n; i++) {
        const cond_item *it = &cs->items[i];
        if (it->kind == LAYOUT_REF_IMAGE) {
            item_slot[i] = ni, img_it[ni] = it, img_px[ni] = it->pixels, img_n[ni++] = 1;
        } else if (it->kind == LAYOUT_REF_VIDEO) {
            /* _sample_video_condition_frames: every 12th frame of the 24 fps reference, 2 per block */
            int *idx = malloc(sizeof(int) * (size_t)it->T), n_idx = 0;
            v->timestamps[nv] = malloc(sizeof(double) * (size_t)it->T);
            size_t fsz = (size_t)it->H * it->W * 3;
            if (!idx || !v->timestamps[nv]) {
                free(idx);
                h3_fail(e, "%s: out of memory", it->what);
                goto done;
            }
            if (vision_sample_video(it->T, H3_MEDIA_FPS, COND_VIDEO_SAMPLE_FPS, vpc.temporal_patch_size, idx, &n_idx,
                                    v->timestamps[nv], &nb[nv], e)) {
                free(idx);
                char why[sizeof e->msg];
                memcpy(why, e->msg, sizeof why);
                h3_fail(e, "%s: %s", it->what, why);
                goto done;
            }
            sampled[nv] = malloc(fsz * (size_t)n_idx);
            if (!sampled[nv]) {
                free(idx);
                h3_fail(e, "%s: out of memory", it->what);
                goto done;
            }
            for (int k = 0; k < n_idx; k++) memcpy(sampled[nv] + fsz * k, it->pixels + fsz * (size_t)idx[k], fsz);
            free(idx);
            item_slot[i] = nv, vid_it[nv] = it, vid_px[nv] = sampled[nv], vid_n[nv++] = n_idx;
        }
    }
    int64_t n_img_rows = 0, n_vid_rows = 0;
    if (ni && vision_batch(vm, &ipc, tc, img_px, img_n, img_it, ni, v->image_grid, &v->merged[0], &v->deep[0], &n_img_rows, e))
        goto done;
    if (nv && vision_batch(vm, &vpc, tc, vid_px, vid_n, vid_it, nv, v->video_grid, &v->merged[1], &v->deep[1], &n_vid_rows, e))
        goto done;
    for (int k = 0; k < nv; k++)
        if (v->video_grid[3 * k] != nb[k]) {
            h3_fail(e, "%s: the processor merged the video into %lld vision blocks, but %d are labelled", vid_it[k]->what,
                    (long long)v->video_grid[3 * k], nb[k]);
            goto done;
        }
    v->n_image_grids = ni, v->n_video_grids = nv;
    v->rows = (te_vision_rows){.image_embeds = v->merged[0], .image_deep = v->deep[0], .n_image = n_img_rows,
                               .video_embeds = v->merged[1], .video_deep = v->deep[1], .n_video = n_vid_rows,
                               .n_deep = tc->vision.n_deepstack};
    const int64_t U = (int64_t)tc->vision.spatial_merge_size * tc->vision.spatial_merge_size;
    if (!cs->ref2va) {
        int64_t tokens[2];
        for (int k = 0; k < ni; k++) tokens[k] = v->image_grid[3 * k + 1] * v->image_grid[3 * k + 2] / U;
        if (presentation_fl2va(presentation_tokenizer_encode, tok, s->r->prompt, ni, tokens, &s->pres, e)) goto done;
    } else {
        pres_ref refs[COND_MAX_ITEMS];
        for (int i = 0; i < cs->n; i++) {
            const cond_item *it = &cs->items[i];
            memset(&refs[i], 0, sizeof refs[i]);
            refs[i].has_audio = it->wave != NULL;
            if (it->kind == LAYOUT_REF_IMAGE) {
                const int64_t *g = v->image_grid + 3 * item_slot[i];
                refs[i].kind = PRES_REF_IMAGE, refs[i].tokens = g[1] * g[2] / U;
            } else if (it->kind == LAYOUT_REF_VIDEO) {
                const int64_t *g = v->video_grid + 3 * item_slot[i];
                refs[i].kind = PRES_REF_VIDEO, refs[i].tokens = g[1] * g[2] / U;
                refs[i].n_blocks = nb[item_slot[i]], refs[i].block_timestamps = v->timestamps[item_slot[i]];
            } else {
                refs[i].kind = PRES_REF_AUDIO;
            }
        }
        if (presentation_ref2va(presentation_tokenizer_encode, tok, s->r->prompt, refs, cs->n, &s->pres, e)) goto done;
    }
    progress_end(&s->pg);
    begin_on(s, "text encoder", be, 0);
    rc = 0;
done:
    for (int k = 0; k < nv; k++) free(sampled[k]);
    vision_free(vm);
    return rc;
}

/* ---- phase 1: the prompt through the tokenizer and the Qwen3-VL prefix (hidden_states[50]) ---- */
static void text_progress(void *user, int done, int total) {
    gen *s = user;
    (void)total;
    progress_update(&s->pg, done);
}

/* The tokenizer and text encoder of phase 1: the kept pair (--resident), else the tokenizer loaded and, with
 * --random-weights, the encoder made (a loaded encoder comes later, after the prompt checks). 0, -1, or
 * H3_GENERATE_BAD_INPUT (the snapshot's tokenizer files are input). */
static int text_models_get(gen *s, h3_backend *be, resident *res, const char *key, text_encoder **te_out,
                           h3_tokenizer **tok_out, h3_err *e) {
    text_encoder *te = res ? resident_take(res, (void **)&res->te, res->te_key, key, resident_free_te) : NULL;
    h3_tokenizer *tok = te ? resident_take(res, (void **)&res->tok, res->te_key, key, resident_free_tok) : NULL;
    if (te && !tok) { /* keep the pair together */
        text_encoder_free(te);
        te = NULL;
    }
    if (!te && res) { /* another model was cached: given back before this one loads */
        tokenizer_free(res->tok);
        res->tok = NULL;
    }
    if (te) gen_log(s->r, "text encoder resident (kept from the previous generation)");
    if (!tok) { /* first: CPU work only, while the backend's cuBLASLt warm-up thread runs (cuda_backend.cu) */
        char dir[4096];
        path_in(s, "tokenizer", dir, sizeof dir);
        begin_on(s, "load tokenizer", be, 0);
        tok = tokenizer_load(dir, e);
        if (!tok) { /* the snapshot's tokenizer files are input: exit 2 */
            text_encoder_free(te);
            return H3_GENERATE_BAD_INPUT;
        }
        progress_end(&s->pg);
    }
    if (!te && s->r->random_weights) {
        char tdir[4096];
        te_config tcfg;
        path_in(s, "text_encoder", tdir, sizeof tdir);
        begin_on(s, "make random text encoder", be, 0);
        if (text_encoder_config_load(tdir, &tcfg, e) ||
            !(te = text_encoder_new_random(be, &tcfg, s->r->bf16, s->r->seed ^ RANDOM_TEXT, e)) || phase_check(be, e)) {
            text_encoder_free(te);
            tokenizer_free(tok);
            return -1;
        }
        progress_end(&s->pg);
    }
    *te_out = te, *tok_out = tok;
    return 0;
}

/* A conditioning-cache hit: the previous request's rows instead of the text phase. */
static int text_from_cache(gen *s, h3_err *e) {
    const cond_cache *cc = s->cc;
    if (copy_rows(&cc->pres, cc->text, cc->text_dim, &s->pres, &s->text))
        return h3_fail(e, "out of memory for the cached prompt embedding");
    s->T = s->pres.L, s->text_dim = cc->text_dim;
    gen_log(s->r, "conditioning cached (the same prompt, text encoder and conditions as the previous generation)");
    return 0;
}

int phase_text(gen *s, h3_err *e) {
    if (s->cond_hit) return text_from_cache(s, e);
    char dir[4096], key[RKEY];
    path_in(s, "text_encoder", dir, sizeof dir);
    model_key(s, dir, s->r->bf16 ? "bf16" : "fp32", RANDOM_TEXT, key);
    h3_backend *be = phase_backend(s, s->task == H3_T2VA ? "text encoder" : "text encoder + vision tower", 1, "");
    resident *res = s->r->resident == H3_RESIDENT_ALL ? s->res : NULL; /* the session default keeps no text encoder */
    text_encoder *te = NULL;
    h3_tokenizer *tok = NULL;
    int got = text_models_get(s, be, res, key, &te, &tok, e);
    if (got) return got;
    begin_on(s, "text encoder", be, 0);
    int rc = -1;
    int64_t *pos = NULL;
    vision_inputs vis;
    memset(&vis, 0, sizeof vis);
    if (presentation_check_prompt(s->r->prompt, e)) goto done;
    if (presentation_check_prompt_tokens(presentation_tokenizer_encode, tok, s->r->prompt, e)) { /* before the model */
        s->bad_input = 1;
        goto done;
    }
    if (!te) te = text_encoder_load(be, dir, s->r->bf16, e);
    if (!te) goto done;
    const te_config *tc = text_encoder_get_config(te);
    if (s->task == H3_T2VA) {
        if (presentation_t2va(presentation_tokenizer_encode, tok, s->r->prompt, &s->pres, e)) goto done;
    } else if (vision_features(s, be, te, tok, &vis, e) || phase_check(be, e)) {
        goto done;
    }
    s->T = s->pres.L;
    s->text_dim = tc->text.hidden_size;
    pos = malloc(sizeof(int64_t) * 3 * (size_t)s->T);
    s->text = malloc(sizeof(float) * (size_t)(s->T * s->text_dim));
    if (!pos || !s->text) {
        h3_fail(e, "out of memory for %lld prompt tokens", (long long)s->T);
        goto done;
    }
    if (presentation_rope_index(s->pres.ids, s->T, vis.image_grid, vis.n_image_grids, vis.video_grid, vis.n_video_grids,
                                tc->vision.spatial_merge_size, pos, e))
        goto done;
    if (res) text_encoder_keep_layers(te, 1); /* --resident: the streamed layers stay for the next generation */
    s->pg.total = TE_OUTPUT_LAYER; /* the bar now counts streamed layers */
    text_encoder_set_progress(te, text_progress, s);
    if (text_encoder_forward(te, s->pres.ids, s->T, pos, s->task == H3_T2VA ? NULL : &vis.rows, TE_OUTPUT_LAYER, s->text, e) ||
        phase_check(be, e))
        goto done;
    rc = 0;
done:
    vision_inputs_free(&vis);
    free(pos);
    /* released before the DiT loads, unless --resident keeps it */
    if (rc == 0 && res) {
        resident_keep(res, (void **)&res->te, res->te_key, te, key, resident_free_te);
        resident_keep(res, (void **)&res->tok, res->te_key, tok, key, resident_free_tok);
    } else {
        text_encoder_free(te);
        tokenizer_free(tok);
    }
    if (rc == 0) progress_end(&s->pg);
    return rc;
}

/* ---- phase 0: conditioning media, read and prepared (condition.h), then the canvas ---- */
int resolve_geometry(gen *s, h3_err *e) {
    int aligned, h = s->r->height, w = s->r->width;
    if (h3_request_validate(s->r, &aligned, e)) return -1;
    char sdir[4096];
    path_in(s, "scheduler", sdir, sizeof sdir);
    if (sched_config_load(sdir, &s->shift_video, e)) return -1;
    path_in(s, "audio_scheduler", sdir, sizeof sdir);
    if (sched_config_load(sdir, &s->shift_audio, e)) return -1;
    if (s->r->shift_video > 0) s->shift_video = s->r->shift_video; /* --shift (docs/lora.md: the Turbo LoRAs' 6:3) */
    if (s->r->shift_audio > 0) s->shift_audio = s->r->shift_audio;
    if (s->task == H3_REF2VA && !h3_media_available()) /* fl2va: a MEDIA=0 build reads PPM keyframes */
        return h3_fail(e, "--ref-*: this build has no FFmpeg (MEDIA=0) to read media");
    int rh = s->r->render_height, rw = s->r->render_width;
    if (s->task == H3_FL2VA) { /* the canvas follows the first keyframe unless --width/--height say otherwise */
        progress_begin(&s->pg, "read keyframes", 0);
        /* with a render canvas the keyframes are fitted onto it (request.c: --width/--height given) */
        if (cond_set_keyframes(&s->cond, s->r->first_frame, s->r->last_frame, rw ? &rh : &h, rw ? &rw : &w, e)) return -1;
        progress_end(&s->pg);
    }
    if (!w && layout_resolve_canvas(16, 9, &h, &w, e)) return -1; /* t2va/ref2va default: 16:9 */
    if (layout_resolve_geometry(h, w, aligned, &s->g, e)) return -1; /* the output canvas's rules */
    s->out_h = h, s->out_w = w;
    if (rw) { /* docs/model/features.md 5.6: the model and the VAE run at the render canvas */
        if (rw > w || rh > h || (int64_t)rw * h != (int64_t)rh * w)
            return h3_fail(e, "--render-width/--render-height %dx%d: must not exceed the output %dx%d on either side "
                              "and must have exactly its aspect (render_w x H == render_h x W)", rw, rh, w, h);
        if (layout_resolve_geometry(rh, rw, aligned, &s->g, e)) return h3_fail_prefix(e, "--render-width/--render-height");
    }
    if (s->task == H3_REF2VA) {
        progress_begin(&s->pg, "read references", 0);
        if (cond_set_references(&s->cond, s->r, s->g.num_frames, s->g.width, s->g.height, e)) return -1;
        progress_end(&s->pg);
        /* the size an image reference is encoded at drives the conditioner's and the DiT's cost (docs/condition.md:
         * the reference's rule enlarges a small image to a 2048 short edge) */
        static const char *const policy[] = {"reference", "match", "max"};
        const int p = s->r->ref_image_size >= 0 && s->r->ref_image_size <= 2 ? s->r->ref_image_size : 0;
        for (int i = 0; i < s->cond.n; i++) {
            const cond_item *it = &s->cond.items[i];
            if (it->kind == LAYOUT_REF_IMAGE)
                gen_log(s->r, "%s: encoded at %dx%d (--ref-image-size %s)", it->what, it->W, it->H, policy[p]);
        }
    }
    return 0;
}

/* ---- phase 1b: conditioning latents (VAE encoders, loaded and freed here, before the DiT) ---- */
int phase_encode(gen *s, h3_err *e) {
    if (s->task == H3_T2VA) return 0;
    if (s->cond_hit) { /* the cached latents of the same files at the same canvas */
        const cond_cache *cc = s->cc;
        if (cc->n != s->cond.n) return h3_fail(e, "conditioning cache: %d conditions cached, %d read", cc->n, s->cond.n);
        for (int i = 0; i < s->cond.n; i++) {
            cond_item *it = &s->cond.items[i];
            it->Lt = cc->Lt[i], it->lh = cc->lh[i], it->lw = cc->lw[i], it->audio_latents = cc->audio_latents[i];
            if (cc->latents[i] && !(it->latents = dup_floats(cc->latents[i], cc->n_latents[i])))
                return h3_fail(e, "out of memory for the cached condition latents");
            if (cc->audio_rows[i] && !(it->audio_rows = dup_floats(cc->audio_rows[i], cc->n_audio[i])))
                return h3_fail(e, "out of memory for the cached condition audio rows");
        }
        return 0;
    }
    char vdir[4096], adir[4096];
    path_in(s, "vae", vdir, sizeof vdir);
    path_in(s, "audio_vae", adir, sizeof adir);
    h3_backend *be = phase_backend(s, "VAE encoders (conditions)", 1, "");
    begin_on(s, "encode conditions", be, 0);
    if (cond_set_encode(&s->cond, be, vdir, adir, e) || phase_check(be, e)) return -1;
    progress_end(&s->pg);
    return 0;
}
