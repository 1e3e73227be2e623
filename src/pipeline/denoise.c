/* The denoising loop (docs/model/dit.md 7.4). The DiT is reached only through src/model/dit.h. */
#include "denoise.h"

#include "../model/dit_parallel.h"

#include <stdlib.h>
#include <string.h>

#include "../core/tuning.h"
#include "noise.h"

/* Every timestep value the loop will present to the DiT (vals: steps * LAYOUT_MAX_TIMESTEPS room); returns the count. */
static int all_timesteps(const layout *L, const sched *sv, const sched *sa, int steps, int reuse, float *vals) {
    int n = 0;
    for (int i = 0; i < steps; i++) {
        float ts[LAYOUT_MAX_TIMESTEPS];
        int K;
        if (!denoise_pass_is_fresh(i, steps, reuse)) continue; /* never presented to the DiT */
        layout_row_timesteps(L, sv->timesteps[i], sa->timesteps[i], ts, &K, NULL);
        for (int k = 0; k < K; k++) {
            int dup = 0;
            for (int j = 0; j < n && !dup; j++) dup = vals[j] == ts[k];
            if (!dup) vals[n++] = ts[k];
        }
    }
    return n;
}

static int steps_of(const sched *sv, const sched *sa) {
    int steps = sched_evaluations(sv);
    return sched_evaluations(sa) < steps ? sched_evaluations(sa) : steps;
}

/* Every timestep value a's loop presents (*vals malloc'd, the caller frees it); the count, or -1 when out of memory. */
static int loop_timesteps(const denoise_args *a, float **vals) {
    const int steps = steps_of(a->video_sched, a->audio_sched), reuse = a->reuse > 1 ? a->reuse : 1;
    if (!(*vals = malloc(sizeof(float) * (size_t)(steps * LAYOUT_MAX_TIMESTEPS + 1)))) return -1;
    return all_timesteps(a->L, a->video_sched, a->audio_sched, steps, reuse, *vals);
}

/* test(m, the loop's values) (0 when out of memory) */
static int loop_timesteps_test(const dit_model *m, const denoise_args *a,
                               int (*test)(const dit_model *, const float *, int)) {
    float *vals;
    const int n = loop_timesteps(a, &vals);
    const int ok = n >= 0 && test(m, vals, n);
    free(vals);
    return ok;
}

int denoise_model_ready(const dit_model *m, const denoise_args *a) {
    return loop_timesteps_test(m, a, dit_timesteps_available);
}

int denoise_tables_cached(const dit_model *m, const denoise_args *a) {
    return loop_timesteps_test(m, a, dit_timesteps_cached);
}

/* The AdaLN tables of every timestep the loop will present, built in one pass. */
int denoise_prepare(dit_model *m, const denoise_args *a, h3_err *e) {
    float *vals;
    const int n = loop_timesteps(a, &vals);
    const int rc = n < 0 ? h3_fail(e, "denoise: out of memory") : dit_prepare_timesteps(m, vals, n, e);
    free(vals);
    return rc;
}

int denoise_pass_is_fresh(int i, int passes, int reuse) {
    if (reuse <= 1) return 1;
    return i == 0 || i % reuse == 0 || i == passes - 1;
}

int denoise_core_is_fresh(int f, int is_last_pass, int core_reuse) {
    if (core_reuse <= 1) return 1;
    return f == 0 || f % core_reuse == 0 || is_last_pass;
}

int denoise_fresh_passes(int passes, int reuse) {
    int n = 0;
    for (int i = 0; i < passes; i++) n += denoise_pass_is_fresh(i, passes, reuse);
    return n;
}

void denoise_extrapolate(float *v, const float *v_last, const float *v_prev, int64_t n, float now, float last,
                         float prev) {
    float r = (now - last) / (last - prev);
    if (!(r >= -2.0f)) r = -2.0f; /* also NaN (equal sigmas cannot happen on a strictly decreasing grid) */
    if (r > 2.0f) r = 2.0f;
    for (int64_t j = 0; j < n; j++) v[j] = v_last[j] + r * (v_last[j] - v_prev[j]);
}

/* The last two fresh velocities of one modality's target rows (--reuse). */
typedef struct vel_history {
    float  *last, *prev;
    int64_t n;
    int     count;            /* fresh evaluations seen */
    float   s_last, s_prev;   /* their sigmas */
} vel_history;

static void history_push(vel_history *h, const float *v, float sigma) {
    float *t = h->prev;
    h->prev = h->last, h->last = t;
    memcpy(h->last, v, sizeof(float) * (size_t)h->n);
    h->s_prev = h->s_last, h->s_last = sigma;
    h->count++;
}

/* v for a skipped pass at sigma `now` */
static void history_velocity(const vel_history *h, float *v, float now) {
    if (h->count < 2) memcpy(v, h->last, sizeof(float) * (size_t)h->n);
    else denoise_extrapolate(v, h->last, h->prev, h->n, now, h->s_last, h->s_prev);
}

int denoise_run(dit_model *m, const denoise_args *a, h3_err *e) {
    const layout *L = a->L;
    const dit_config *cfg = dit_get_config(m);
    const int64_t Q = (int64_t)cfg->in_channels * cfg->patch_size[0] * cfg->patch_size[1] * cfg->patch_size[2];
    const int64_t Ca = cfg->audio_in_channels;
    const int64_t ncv = L->num_condition_video_rows, nca = L->num_condition_audio_rows;
    if (cfg->patch_size[0] != 1 || cfg->patch_size[1] != 2 || cfg->patch_size[2] != 2)
        return h3_fail(e, "denoise: the pipeline packs patch (1, 2, 2), the transformer has (%d, %d, %d)",
                       cfg->patch_size[0], cfg->patch_size[1], cfg->patch_size[2]);
    if (L->Nv - ncv != (int64_t)L->num_latent_frames * (L->latent_height / 2) * (L->latent_width / 2) ||
        L->Na - nca != 2 * (int64_t)L->num_audio_latents)
        return h3_fail(e, "denoise: layout row counts disagree with its target geometry");
    int steps = sched_evaluations(a->video_sched);
    if (sched_evaluations(a->audio_sched) < steps) steps = sched_evaluations(a->audio_sched);

    const int reuse = a->reuse > 1 ? a->reuse : 1, core_reuse = a->core_reuse > 1 ? a->core_reuse : 1;
    if (reuse > 1 && core_reuse > 1)
        return h3_fail(e, "denoise: --core-reuse cannot be combined with --reuse > 1 (docs/model/features.md 5.4)");
    /* docs/model/features.md 5.7: the spatial coordinates scaled (the t coordinate and the layout stay as they are) */
    const int scaled = a->rope_spatial_scale > 0.0f && a->rope_spatial_scale != 1.0f;
    double *pos = scaled ? malloc(sizeof(double) * 3 * (size_t)(L->S > 0 ? L->S : 1)) : NULL;
    if (scaled && !pos) return h3_fail(e, "denoise: out of memory");
    for (int64_t r = 0; scaled && r < L->S; r++) {
        pos[3 * r] = L->position_ids[3 * r];
        pos[3 * r + 1] = (double)((float)L->position_ids[3 * r + 1] * a->rope_spatial_scale);
        pos[3 * r + 2] = (double)((float)L->position_ids[3 * r + 2] * a->rope_spatial_scale);
    }
    float *v_out = malloc(sizeof(float) * (size_t)(L->Nv * Q));
    float *a_out = malloc(sizeof(float) * (size_t)(L->Na * Ca));
    int64_t *tidx = malloc(sizeof(int64_t) * (size_t)(L->S > 0 ? L->S : 1));
    const int64_t ntv = (L->Nv - ncv) * Q, nta = (L->Na - nca) * Ca;
    vel_history hv = {.n = ntv}, ha = {.n = nta};
    int rc = -1, evals = 0;
    if (reuse > 1) {
        hv.last = malloc(sizeof(float) * (size_t)(ntv ? ntv : 1)), hv.prev = malloc(sizeof(float) * (size_t)(ntv ? ntv : 1));
        ha.last = malloc(sizeof(float) * (size_t)(nta ? nta : 1)), ha.prev = malloc(sizeof(float) * (size_t)(nta ? nta : 1));
    }
    if (!v_out || !a_out || !tidx || (reuse > 1 && (!hv.last || !hv.prev || !ha.last || !ha.prev))) {
        h3_fail(e, "denoise: out of memory");
        goto done;
    }
    if (denoise_prepare(m, a, e)) goto done;
    if (a->layers > 0 && a->layers < cfg->num_layers && dit_select_layers(m, a->layers, e)) goto done;
    if (a->release_adaln) dit_release_adaln(m);

    for (int i = 0; i < steps; i++) {
        const float tv = a->video_sched->timesteps[i], ta = a->audio_sched->timesteps[i];
        float ts[LAYOUT_MAX_TIMESTEPS];
        int K;
        layout_row_timesteps(L, tv, ta, ts, &K, tidx);
        int core = core_reuse <= 1 ? DIT_CORE_RUN
                   : denoise_core_is_fresh(evals, i == steps - 1, core_reuse) ? DIT_CORE_RUN_STORE
                                                                             : DIT_CORE_REUSE;
        const dit_inputs in = {
            .video = a->video_rows, .Nv = L->Nv,
            .audio = a->audio_rows, .Na = L->Na,
            .text = a->text, .Nt = L->T,
            .timestep = ts, .K = K,
            .S = L->S,
            .timestep_indices = tidx,
            .token_tags = L->token_tags,
            .position_ids = scaled ? pos : L->position_ids,
            .video_indices = L->video_indices,
            .audio_indices = L->audio_indices,
            .text_indices = L->text_indices,
            .core = core,
            .reduce_begin = a->reduce_begin,
            .reduce_end = a->reduce_early_passes && i < a->reduce_early_passes ? a->reduce_early_end : a->reduce_end,
            .reduce_scale = a->reduce_scale,
            .reduce_frames = L->num_latent_frames, .reduce_h = L->latent_height / 2, .reduce_w = L->latent_width / 2,
            .check_blocks = a->check_blocks,
        };
        const float sv_i = a->video_sched->sigmas[i], sa_i = a->audio_sched->sigmas[i];
        if (denoise_pass_is_fresh(i, steps, reuse)) {
            if (a->team ? dit_team_forward(a->team, &in, v_out, a_out, e) : dit_forward(m, &in, v_out, a_out, e)) {
                h3_fail_prefix(e, "denoise step %d/%d", i + 1, steps);
                goto done;
            }
            evals++;
            if (reuse > 1) history_push(&hv, v_out + ncv * Q, sv_i), history_push(&ha, a_out + nca * Ca, sa_i);
        } else { /* docs/model/features.md 5.2: each modality on its own sigma grid */
            history_velocity(&hv, v_out + ncv * Q, sv_i);
            history_velocity(&ha, a_out + nca * Ca, sa_i);
        }
        /* Masking: only the target rows are stepped; condition/reference velocities are discarded. */
        sched_step(a->video_sched, i, v_out + ncv * Q, a->video_rows + ncv * Q, (L->Nv - ncv) * Q);
        sched_step(a->audio_sched, i, a_out + nca * Ca, a->audio_rows + nca * Ca, (L->Na - nca) * Ca);
        if (a->progress && a->progress(a->progress_user, i, steps)) {
            h3_fail(e, "denoise: stopped after step %d/%d", i + 1, steps);
            goto done;
        }
    }
    rc = 0;
    if (a->evaluations) *a->evaluations = evals;
done:
    free(pos);
    free(v_out);
    free(a_out);
    free(tidx);
    free(hv.last), free(hv.prev), free(ha.last), free(ha.prev);
    return rc;
}

int denoise_unpack(const layout *L, int C, int Ca, const float *video_rows, const float *audio_rows,
                   float *video_latents, float *audio_latents, h3_err *e) {
    const int64_t ncv = L->num_condition_video_rows, nca = L->num_condition_audio_rows;
    if (noise_unpatchify(video_rows + ncv * C * 4, C, L->num_latent_frames, L->latent_height, L->latent_width,
                         video_latents, e))
        return -1;
    noise_audio_rows_to_latents(audio_rows + nca * Ca, Ca, L->num_audio_latents, audio_latents);
    return 0;
}

/* "A:B" -> two unsigned integers; 0 on success */
static int parse_pair(const char *s, long *a, long *b) {
    char *mid, *end;
    *a = strtol(s, &mid, 10);
    if (mid == s || *mid != ':') return -1;
    *b = strtol(mid + 1, &end, 10);
    return end == mid + 1 || *end ? -1 : 0;
}

int denoise_token_reduction(denoise_args *a, int num_layers, h3_err *e) {
    long begin = 4, end = 30, early_steps, early_end;
    const char *blocks = h3_knob_get(H3_KNOB_TOKEN_REDUCTION_BLOCKS);
    if (blocks && *blocks) {
        if (parse_pair(blocks, &begin, &end) || begin < 0 || begin >= end || end > num_layers)
            return h3_fail(e, "H3_TOKEN_REDUCTION_BLOCKS must be BEGIN:END with 0 <= BEGIN < END <= %d, got '%s'",
                           num_layers, blocks);
    } else if (end > num_layers) {
        return h3_fail(e, "--token-reduction: the default blocks 4..29 need a 30-block model (this one has %d): "
                          "set H3_TOKEN_REDUCTION_BLOCKS=BEGIN:END", num_layers);
    }
    /* coarse structure tolerates a deeper reduced stack while the first noisy samples form (docs/model/features.md 5.5) */
    early_steps = end < 40 ? 10 : 0;
    early_end = end < 40 ? 40 : end;
    if (early_end > num_layers) early_steps = 0, early_end = end;
    const char *early = h3_knob_get(H3_KNOB_TOKEN_REDUCTION_EARLY);
    if (early && *early) {
        if (!strcmp(early, "0")) {
            early_steps = 0, early_end = end;
        } else if (parse_pair(early, &early_steps, &early_end) || early_steps < 1 || early_steps > 1000 ||
                   early_end <= end || early_end > num_layers) {
            return h3_fail(e, "H3_TOKEN_REDUCTION_EARLY must be 0 or STEPS:END with 1 <= STEPS <= 1000 and "
                              "%ld < END <= %d, got '%s'", end, num_layers, early);
        }
    }
    float scale = 1.0f;
    const char *sc = h3_knob_get(H3_KNOB_TOKEN_REDUCTION_SCALE);
    if (sc && *sc) {
        char *tail;
        scale = strtof(sc, &tail);
        if (tail == sc || *tail || !(scale >= 0.0f && scale <= 2.0f))
            return h3_fail(e, "H3_TOKEN_REDUCTION_SCALE must be a number in [0, 2], got '%s'", sc);
    }
    a->reduce_begin = (int)begin, a->reduce_end = (int)end;
    a->reduce_early_passes = (int)early_steps, a->reduce_early_end = (int)early_end;
    a->reduce_scale = scale;
    return 0;
}
