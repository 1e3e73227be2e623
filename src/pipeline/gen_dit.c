/* The DiT phase (gen_dit.h). */
#include "gen_dit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../backend/backend_bench.h" /* h3_memory_query */
#include "../backend/backend_check.h"
#include "../io/snapshot.h"
#include "../model/dit.h"
#include "../model/dit_int8.h"
#include "../model/dit_parallel.h"
#include "denoise.h"
#include "gen_preview.h"
#include "gen_resident.h"
#include "noise.h"
#include "sched.h"

static int denoise_progress(void *user, int step, int steps) {
    gen *s = user;
    progress_update(&s->pg, step + 1);
    if ((s->r->cancel && *s->r->cancel) || s->pg.stopped) {
        h3_fail(&s->pv_err, "cancelled (Ctrl-C) during the denoising, after step %d of %d", step + 1, steps);
        return 1;
    }
    if (s->pv && preview_pass(s, step + 1, steps, &s->pv_err)) return 1;
    return 0;
}

/* --ssd-streaming, or automatically on a GPU when the resident transformer (weights + one forward's activations +
 * a margin for the AdaLN tables and the allocator) would not fit in the memory available: the dit_load mode. A kept
 * model's own weights (`kept` bytes, a session's resident transformer) count as available: it would give them back. */
static int dit_mode(gen *s, h3_backend *be, const dit_config *dc, size_t kept) {
    const int mode = s->r->bf16 ? DIT_BF16 : 0;
    if (be->kind == H3_BACKEND_CPU) { /* the CPU reads every weight from the file mapping anyway */
        if (s->r->ssd_streaming)
            gen_log(s->r, "--ssd-streaming: no effect on the CPU backend (its weights are the file mapping)");
        return mode;
    }
    if (s->r->ssd_streaming) return mode | DIT_STREAM;
    /* a GGUF is not streamed (its blocks stay quantized on the GPU instead, docs/checkpoints.md); a safetensors single
     * file streams from its mapping like the shards */
    if (s->r->transformer_file && dit_is_gguf(s->r->transformer_file)) return mode;
    h3_memory_stats ms;
    h3_err e;
    if (s->r->quant_fp8 || s->r->quant_int8 || h3_memory_query(be, &ms, &e) != 0 || !ms.total_bytes) return mode;
    const layout_geometry *g = &s->g;
    /* packed rows: the target video's tokens, two per audio latent, the text; references and rounding in the 4096 */
    const int64_t S = (int64_t)g->num_latent_frames * (g->latent_height / 2) * (g->latent_width / 2) +
                      2 * (int64_t)g->num_audio_latents + s->T + 4096;
    const double avail = (double)ms.available_bytes + (double)kept;
    double need;
    if (!dit_should_stream(dc, mode, S, avail, &need)) return mode;
    gen_log(s->r, "the resident transformer needs ~%.1f GiB, the GPU has %.1f GiB available: streaming its "
                    "blocks (--ssd-streaming, docs/model/features.md 7.3)", need / (1u << 30), avail / (1u << 30));
    return mode | DIT_STREAM;
}

/* The LoRA list (paths, scales, routes and the files' sizes and times) hashed (FNV-1a): another list keys another
 * model, loaded and merged from the untouched files again (docs/lora.md: never compounded). */
static uint64_t lora_key(const h3_request *r) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < r->n_loras; i++) {
        struct stat sb;
        char item[4200];
        int n = snprintf(item, sizeof item, "%s|%.17g|%d|", r->loras[i].path, r->loras[i].scale, r->loras[i].to_ref);
        if (stat(r->loras[i].path, &sb) == 0)
            n += snprintf(item + n, sizeof item - (size_t)n, "%lld|%lld.%09ld", (long long)sb.st_size,
                          (long long)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
        for (int k = 0; k < n && k < (int)sizeof item; k++) h = (h ^ (uint8_t)item[k]) * 1099511628211ull;
    }
    return r->n_loras ? h : 0;
}

/* The transformer as the request wants it, in `mode` (dit_mode): made from random weights or loaded, --quant fp8
 * applied. */
static dit_model *dit_make(gen *s, h3_backend *be, const char *dir, int mode, h3_err *e) {
    dit_config dc;
    if (dit_config_load(dir, &dc, e) != 0) return NULL;
    begin_on(s, s->r->random_weights ? "make random transformer" : "load transformer", be, 0);
    dit_model *m = NULL;
    if (s->r->random_weights) m = dit_new_random(be, &dc, mode, s->r->seed ^ RANDOM_DIT, e);
    else m = dit_load_lora(be, dir, s->r->transformer_file, mode, s->r->loras, s->r->n_loras, s->task == H3_REF2VA, e);
    if (!m) return NULL;
    if ((s->r->quant_fp8 && dit_quantize_fp8(m, e)) ||
        ((s->r->quant_int8 || s->r->int8_fc2_groups) && dit_quantize_int8(m, s->r->int8_fc2_groups, e)) ||
        phase_check(be, e)) {
        dit_free(m);
        return NULL;
    }
    progress_end(&s->pg);
    if (dit_int8_profile(m))
        gen_log(s->r, "DiT int8 W8A8 (docs/int8.md): profile %s%s, activations quantized per token%s", dit_int8_profile_name(dit_int8_profile(m)),
                s->r->quant_int8 ? " (quantized at load)" : " (the snapshot's codes)",
                s->r->int8_fc2_groups ? ", the FFN down input per 1024 channels" : "");
    return m;
}

/* What one denoising run holds: the schedules, the packed layout and its rows (the noise drawn into them). */
typedef struct dit_run {
    sched   vs, as;
    layout *L;
    float  *vrows, *arows, *ref_audio;
} dit_run;

static void dit_run_free(dit_run *d) {
    free(d->vrows), free(d->arows), free(d->ref_audio);
    layout_free(d->L);
    sched_free(&d->vs), sched_free(&d->as);
    memset(d, 0, sizeof *d);
}

/* The model's shapes against what the pipeline packs and the text phase produced. */
static int dit_check_model(const gen *s, const dit_config *c, const char *dir, h3_err *e) {
    if (c->in_channels != VIDEO_CHANNELS || c->audio_in_channels != AUDIO_CHANNELS)
        return h3_fail(e, "%s: in_channels %d / audio_in_channels %d, the pipeline packs %d / %d", dir, c->in_channels,
                       c->audio_in_channels, VIDEO_CHANNELS, AUDIO_CHANNELS);
    if (c->text_dim != s->text_dim)
        return h3_fail(e, "%s: text_dim %d but the text encoder's hidden size is %d", dir, c->text_dim, s->text_dim);
    return 0;
}

/* The schedules, the layout of the packed sequence, the reference audio rows and the seed's noise in the rows. */
static int dit_run_prepare(gen *s, dit_run *d, h3_err *e) {
    int n_inf;
    if (sched_num_inference_steps_for_evaluations(s->r->steps, &n_inf, e) || sched_init(&d->vs, n_inf, s->shift_video, e) ||
        sched_init(&d->as, n_inf, s->shift_audio, e))
        return -1;
    d->vs.training_euler = d->as.training_euler = s->r->step_update == 1; /* --step-update (docs/lora.md) */
    const layout_geometry *g = &s->g;
    const cond_set *cs = &s->cond;
    noise_condition conds[COND_MAX_ITEMS];
    layout_ref lrefs[COND_MAX_ITEMS];
    int ncond = 0;
    int64_t nca = 0;
    for (int i = 0; i < cs->n; i++) {
        const cond_item *it = &cs->items[i];
        if (it->latents) conds[ncond++] = (noise_condition){it->latents, it->Lt, it->lh, it->lw};
        lrefs[i] = (layout_ref){.kind = (layout_ref_kind)it->kind, .frames = it->Lt, .latent_height = it->lh,
                                .latent_width = it->lw, .audio_latents = (int)it->audio_latents};
        nca += 2 * it->audio_latents;
    }
    if (s->task == H3_REF2VA)
        d->L = layout_new_ref2va(s->pres.tags, s->T, lrefs, cs->n, g->num_latent_frames, g->latent_height,
                                 g->latent_width, g->num_audio_latents, e);
    else
        d->L = layout_new_t2va(s->pres.tags, s->T, g->num_latent_frames, g->latent_height, g->latent_width,
                               g->num_audio_latents, cs->anchors, cs->n, e);
    if (!d->L) return -1;
    if (nca) { /* reference audio rows (never noised), concatenated in request order */
        if (!(d->ref_audio = malloc(sizeof(float) * (size_t)(nca * AUDIO_CHANNELS))))
            return h3_fail(e, "out of memory for the reference audio rows");
        for (int i = 0, off = 0; i < cs->n; i++) {
            const cond_item *it = &cs->items[i];
            size_t n = (size_t)(2 * it->audio_latents * AUDIO_CHANNELS);
            if (n) memcpy(d->ref_audio + off, it->audio_rows, sizeof(float) * n);
            off += (int)n;
        }
    }
    const int64_t Q = VIDEO_CHANNELS * 4;
    d->vrows = malloc(sizeof(float) * (size_t)(d->L->Nv * Q));
    d->arows = malloc(sizeof(float) * (size_t)(d->L->Na * AUDIO_CHANNELS));
    if (!d->vrows || !d->arows) return h3_fail(e, "out of memory for the packed rows");
    noise_request nr = {
        .seed = s->r->seed, .C = VIDEO_CHANNELS, .Ca = AUDIO_CHANNELS,
        .F = g->num_latent_frames, .lh = g->latent_height, .lw = g->latent_width, .A = g->num_audio_latents,
        .conditions = conds, .num_conditions = ncond, .reference_audio_rows = d->ref_audio, .num_reference_audio_rows = nca,
        .expected_condition_video_rows = d->L->num_condition_video_rows,
        .expected_condition_audio_rows = d->L->num_condition_audio_rows,
    };
    return noise_prepare_rows(&nr, d->vrows, d->arows, e);
}

/* The loop's arguments: the request's reuse / layers / RoPE / token-reduction settings, each said in the log. 0, -1,
 * or H3_GENERATE_BAD_INPUT (an H3_TOKEN_REDUCTION_BLOCKS beyond this model's blocks). */
static int dit_args(gen *s, dit_run *d, const dit_config *c, denoise_args *da, h3_err *e) {
    const layout_geometry *g = &s->g;
    *da = (denoise_args){.L = d->L, .text = s->text, .video_sched = &d->vs, .audio_sched = &d->as, .video_rows = d->vrows,
                         .audio_rows = d->arows, .progress = denoise_progress, .progress_user = s, .reuse = s->r->reuse,
                         .layers = s->r->layers, .core_reuse = s->r->core_reuse, .check_blocks = s->r->profile,
                         .release_adaln = 0 /* done in the tables' load phase (docs/model/dit.md 4.5: 39% of the weights) */};
    if (g->width == 256 && g->height == 256 && !s->r->reference_rope) { /* docs/model/features.md 5.7 */
        da->rope_spatial_scale = 0.5f;
        gen_log(s->r, "256x256: spatial RoPE coordinates halved against lattice artefacts (docs/model/features.md 5.7; "
                        "--use-reference-rope keeps the released ones)");
    }
    if (!s->r->token_reduction) return 0;
    if (denoise_token_reduction(da, c->num_layers, e)) return H3_GENERATE_BAD_INPUT;
    char early[64] = "";
    if (da->reduce_early_passes)
        snprintf(early, sizeof early, " (%d..%d for the first %d passes)", da->reduce_begin, da->reduce_early_end - 1,
                 da->reduce_early_passes);
    gen_log(s->r, "--token-reduction: blocks %d..%d on paired video tokens%s, restore scale %g",
            da->reduce_begin, da->reduce_end - 1, early, (double)da->reduce_scale);
    if (g->width == 256 && g->height == 256)
        gen_log(s->r, "warning: --token-reduction at 256x256: keep it off at 256 square (docs/model/features.md 5.5)");
    if (s->r->layers <= 40 && s->r->reuse >= 3)
        gen_log(s->r, "warning: --token-reduction with --layers %d and --reuse %d rings and ghosts "
                        "(docs/model/features.md 5.5)", s->r->layers, s->r->reuse);
    return 0;
}

/* The AdaLN tables when the model has none for this schedule, then the denoising loop (the preview's message when
 * a preview stopped it), then the --ssd-streaming report. */
static int dit_loop(gen *s, h3_backend *be, dit_model *m, denoise_args *da, h3_err *e) {
    if (!denoise_tables_cached(m, da)) { /* the AdaLN tables: weight preparation (host-resident projections on GPUs) */
        begin_on(s, "prepare AdaLN tables", be, 0);
        if (denoise_prepare(m, da, e) || phase_check(be, e)) return -1;
        /* the projections' memory goes back here, in this load phase, not in the loop's first step: freeing random
         * weights' 26 GB of host memory took ~1.5 s on a lent machine (tables cached: released when they were built) */
        dit_release_adaln(m);
        progress_end(&s->pg);
    }
    begin_on(s, "denoise", be, sched_evaluations(da->video_sched));
    dit_stream_stats st0, st1;
    dit_get_stream_stats(m, &st0);
    if (denoise_run(m, da, e) || phase_check(be, e)) {
        if (s->pv_err.msg[0]) *e = s->pv_err; /* the preview's own message */
        return -1;
    }
    progress_end(&s->pg);
    dit_get_stream_stats(m, &st1);
    if (st1.slot_bytes > 0 && st1.gguf) /* docs/checkpoints.md: the GGUF blocks expanded into the slots */
        gen_log(s->r, "GGUF blocks kept quantized on the %s: %lld block expansions of %.2f GB of blocks, slots %.2f GiB",
                be->kind == H3_BACKEND_CPU ? "CPU" : "GPU", (long long)(st1.fills - st0.fills), (st1.bytes - st0.bytes) / 1e9, st1.slot_bytes / (double)(1u << 30));
    else if (st1.slot_bytes > 0) /* docs/model/features.md 7.3's report: what the slots copied during the loop */
        gen_log(s->r, "--ssd-streaming: %lld block copies, %.2f GB from host memory, %.2f s of host time in the "
                        "copy calls (waits for a free slot included), slots %.2f GiB", (long long)(st1.fills - st0.fills),
                (st1.bytes - st0.bytes) / 1e9, st1.host_seconds - st0.host_seconds, st1.slot_bytes / (double)(1u << 30));
    if (st1.lora_bytes > 0) /* docs/lora.md: --lora merged into each slot as it was filled (fp32: some parts F32) */
        gen_log(s->r, "--lora with %s: %lld LoRA pieces merged into the slots as they were filled (%lld in "
                        "the loop), factors %.3f GiB, %lld parts held F32", st1.gguf ? "the GGUF kept quantized" : "--ssd-streaming",
                (long long)st1.lora_merges, (long long)(st1.lora_merges - st0.lora_merges),
                st1.lora_bytes / (double)(1u << 30), (long long)st1.lora_f32_parts);
    return 0;
}

/* After the loop: which blocks --layers dropped, the latents unpacked and checked finite. */
static int dit_results(gen *s, const dit_model *m, const dit_run *d, h3_err *e) {
    const dit_config *c = dit_get_config(m);
    const layout_geometry *g = &s->g;
    if (s->r->layers < c->num_layers) { /* which blocks --layers dropped */
        char list[256];
        int n = 0, off = 0;
        for (int b = 0; b < c->num_layers; b++)
            if (dit_layer_skipped(m, b) && off < (int)sizeof list - 8) off += snprintf(list + off, sizeof list - off, "%s%d", n++ ? ", " : "", b);
        if (n) gen_log(s->r, "--layers %d: skipped blocks %s", s->r->layers, list);
    }
    size_t nv = (size_t)VIDEO_CHANNELS * g->num_latent_frames * g->latent_height * g->latent_width;
    s->video_latents = malloc(sizeof(float) * nv);
    s->audio_latents = malloc(sizeof(float) * 2 * AUDIO_CHANNELS * (size_t)g->num_audio_latents);
    if (!s->video_latents || !s->audio_latents) return h3_fail(e, "out of memory for the latents");
    if (denoise_unpack(d->L, VIDEO_CHANNELS, AUDIO_CHANNELS, d->vrows, d->arows, s->video_latents, s->audio_latents, e))
        return -1;
    /* results checked (docs/robustness.md): host buffers here, so the CPU twin counts */
    if (h3_check_finite(s->cpu, s->video_latents, (int64_t)nv, "denoise: the video latents after the DiT", e) ||
        h3_check_finite(s->cpu, s->audio_latents, 2 * AUDIO_CHANNELS * (int64_t)g->num_audio_latents,
                        "denoise: the audio latents after the DiT", e))
        return -1;
    return 0;
}

/* --parallel N (docs/parallel.md): the transformers of ranks 1..N-1, made like rank 0's on the peer backends (or kept
 * from the last generation under the same key), their AdaLN projections given back (rank 0 makes the tables), and
 * the team over all N. */
typedef struct par_dit {
    dit_team  *team;
    dit_model *peer[7];
    int        n;
} par_dit;

static int par_begin(gen *s, const char *dir, int mode, const char *key, dit_model *m, par_dit *p, h3_err *e) {
    memset(p, 0, sizeof *p);
    if (s->parallel <= 1) return 0;
    if (s->r->token_reduction)
        return h3_fail(e, "--parallel %d with --token-reduction: its token pairs would cross the ranks' rows; use one of "
                          "the two (docs/parallel.md)", s->parallel);
    resident *res = s->res;
    if (res && res->n_dit_peers == s->parallel - 1 && !strcmp(res->peer_key, key)) { /* kept with rank 0's */
        for (int r = 0; r < res->n_dit_peers; r++) p->peer[r] = res->dit_peer[r];
        p->n = res->n_dit_peers, res->n_dit_peers = 0;
        gen_log(s->r, "--parallel %d: ranks 1..%d's transformers resident", s->parallel, p->n);
    } else {
        if (res) resident_free_peers(res);
        for (int r = 1; r < s->parallel; r++) {
            if (!(p->peer[r - 1] = dit_make(s, s->peers[r - 1], dir, mode, e))) return -1;
            p->n = r;
            dit_release_adaln(p->peer[r - 1]);
        }
    }
    dit_model *all[8] = {m};
    for (int r = 0; r < p->n; r++) all[r + 1] = p->peer[r];
    if (!(p->team = dit_team_new(all, s->parallel, s->be->kind == H3_BACKEND_CUDA ? H3_COMM_NCCL : H3_COMM_CPU, e)))
        return -1;
    gen_log(s->r, "--parallel %d: the DiT on %d %s ranks (Ulysses: rows split, attention heads exchanged; docs/parallel.md)",
            s->parallel, s->parallel, s->be->kind == H3_BACKEND_CUDA ? "GPU (NCCL)" : "CPU");
    return 0;
}

/* keep: rank 0's transformer stays resident under key, so do the peers */
static void par_end(gen *s, par_dit *p, const char *key, int keep) {
    dit_team_free(p->team);
    if (keep && s->res) {
        for (int r = 0; r < p->n; r++) s->res->dit_peer[r] = p->peer[r];
        s->res->n_dit_peers = p->n;
        snprintf(s->res->peer_key, sizeof s->res->peer_key, "%s", key);
    } else {
        for (int r = 0; r < p->n; r++) dit_free(p->peer[r]);
    }
    memset(p, 0, sizeof *p);
}

int phase_dit(gen *s, h3_err *e) {
    char dir[4096];
    if (snapshot_dit_dir(s->r->model_dir, s->task == H3_REF2VA, dir, sizeof dir, e)) return -1;
    h3_backend *be = phase_backend(s, "DiT", 1, "");
    dit_config dc;
    if (dit_config_load(dir, &dc, e)) return -1;
    resident *res = s->res;
    /* the mode this request needs, decided as if a kept transformer had given its memory back; the key holds it, so a
     * kept model in the other mode is freed and this one loaded */
    const dit_model *kept = res ? res->dit : NULL;
    const int mode = dit_mode(s, be, &dc, kept ? dit_gpu_weight_bytes(dit_get_config(kept), dit_get_mode(kept), e) : 0);
    char key[RKEY], settings[96];
    snprintf(settings, sizeof settings, "%s|quant %s%s|layers %d|stream %d", s->r->bf16 ? "bf16" : "fp32",
             s->r->quant_fp8 ? "fp8" : s->r->quant_int8 ? "int8" : "none", s->r->int8_fc2_groups ? " fc2g" : "",
             s->r->layers, (mode & DIT_STREAM) != 0);
    char where[4096 + 64];
    snprintf(where, sizeof where, "%s%s%s|lora %016llx", dir, s->r->transformer_file ? "|file " : "",
             s->r->transformer_file ? s->r->transformer_file : "", (unsigned long long)lora_key(s->r));
    model_key(s, where, settings, RANDOM_DIT, key);
    dit_model *m = res ? resident_take(res, (void **)&res->dit, res->dit_key, key, resident_free_dit) : NULL;
    if (m) gen_log(s->r, "transformer resident (kept from the previous generation)");
    if (!m && !(m = dit_make(s, be, dir, mode, e))) return -1;
    int rc = -1;
    dit_run d;
    memset(&d, 0, sizeof d);
    par_dit pd;
    memset(&pd, 0, sizeof pd);
    denoise_args da;
    if (dit_check_model(s, dit_get_config(m), dir, e) || dit_run_prepare(s, &d, e)) goto done;
    if ((rc = dit_args(s, &d, dit_get_config(m), &da, e)) != 0) goto done;
    rc = -1;
    if (!denoise_model_ready(m, &da)) { /* a kept model lacks this schedule's AdaLN tables (weights released) */
        gen_log(s->r, "the resident transformer has no AdaLN tables for these timesteps: loading it again");
        dit_free(m);
        if (!(m = dit_make(s, be, dir, dit_mode(s, be, &dc, 0), e))) goto done;
    }
    if (s->r->preview) { /* --show: a decoder for the passes' previews, kept until the loop ends */
        if (!(s->pv = preview_vae_new(s, be, e))) goto done;
        s->pv_L = d.L, s->pv_vrows = d.vrows, s->pv_arows = d.arows, s->pv_err.msg[0] = 0;
    }
    dit_set_attention(m, s->r->attention_sage8); /* a setting of the forward, not of the weights: a kept model takes it */
    if (par_begin(s, dir, mode, key, m, &pd, e)) goto done;
    da.team = pd.team;
    if (s->r->preset_fast)
        gen_log(s->r, "preset fast: DiT linears %s, attention %s, video decoder %s (docs/fast.md; not the reference's arithmetic)",
                s->r->quant_fp8 ? "fp8" : s->r->quant_int8 ? "int8" : "bf16", s->r->attention_sage8 ? "sage8" : "exact",
                s->r->vae_fp8 ? "fp8" : "bf16");
    if (dit_loop(s, be, m, &da, e)) goto done;
    if (!s->pv_borrowed) video_vae_free(s->pv);
    s->pv = NULL, s->pv_borrowed = 0;
    if (dit_results(s, m, &d, e)) goto done;
    rc = 0;
done:
    if (!s->pv_borrowed) video_vae_free(s->pv);
    s->pv = NULL, s->pv_borrowed = 0;
    dit_run_free(&d);
    /* released before the decoders load, unless --resident keeps it (the session default: when it has the room) */
    const int keep = rc == 0 && res && (s->r->resident != H3_RESIDENT_AUTO || resident_auto_room(s->r, res, be, m, s->r->random_weights));
    par_end(s, &pd, key, keep);
    if (keep) resident_keep(res, (void **)&res->dit, res->dit_key, m, key, resident_free_dit);
    else dit_free(m);
    return rc;
}
