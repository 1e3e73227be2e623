/* The denoising loop (docs/model/dit.md 7.4 and 8.2), as diffusers' MiniMaxH3DenoiseStep +
 * MiniMaxH3AfterDenoiseStep: per step the row timestep plan (6.5), ONE dit_forward, an Euler step
 * per modality on the target rows only (condition/reference rows are never written), and at the
 * end the unpack of the target rows into (1, C, F, lh, lw) video and (2, Ca, A) audio latents. */
#ifndef H3_DENOISE_H
#define H3_DENOISE_H

#include <stdint.h>

#include "../core/error.h"
#include "../model/dit.h"
#include "layout.h"
#include "sched.h"

/* Called after every step (i = 0 .. evaluations-1); a nonzero return stops the loop with an error. */
typedef int (*denoise_progress_fn)(void *user, int step, int evaluations);

typedef struct denoise_args {
    const layout *L;
    const float  *text;          /* [L->T, text_dim] prompt embeddings, in text_indices order */
    const sched  *video_sched;   /* shift 12 */
    const sched  *audio_sched;   /* shift 3 */
    float        *video_rows;    /* in/out [L->Nv, C*4]: conditions first, then targets */
    float        *audio_rows;    /* in/out [L->Na, Ca]: references first, then targets */
    int           release_adaln; /* 1: after the AdaLN tables of every timestep the loop uses are built,
                                    drop the AdaLN weights (dit_release_adaln; 39% of the release's bytes) */
    int           reuse;         /* docs/model/features.md 5.2 (--reuse R, 1..3; 0 = 1): a fresh evaluation at pass 0, at
                                    every pass divisible by R and at the last pass; the other passes
                                    extrapolate each modality's velocity from its last two fresh ones */
    int          *evaluations;   /* optional out: dit_forward calls made */
    int           core_reuse;    /* docs/model/features.md 5.4 (--core-reuse C, 1..6; 0 = 1): the DiT core runs on the first
                                    forward, every C-th and the last; the others add its stored residual */
    int           layers;        /* docs/model/features.md 5.3 (--layers L): blocks kept, gate-ranked (dit_select_layers)
                                    once the tables are built; 0 or >= num_layers: all */
    /* --token-reduction (docs/model/features.md 5.5; denoise_token_reduction fills these): blocks reduce_begin ..
     * reduce_end - 1 run on the pooled target video (reduce_end <= reduce_begin: off); the first
     * reduce_early_passes passes restore before reduce_early_end instead */
    int           reduce_begin, reduce_end, reduce_early_passes, reduce_early_end;
    float         reduce_scale;
    float         rope_spatial_scale; /* docs/model/features.md 5.7: every row's h and w RoPE coordinates times this (0.5 at a
                                         256x256 render canvas); 0 or 1: the released coordinates */
    int           check_blocks;  /* --profile: every DiT block's output checked for non-finite values (dit_inputs) */
    denoise_progress_fn progress;
    void         *progress_user;
    struct dit_team *team;       /* --parallel (docs/parallel.md): the forwards run on this team (m is its rank 0); NULL: m */
} denoise_args;

/* --token-reduction's block schedule for a model of num_layers blocks: blocks 4..29, 4..39 for the first 10
 * passes, restore scale 1 (the Metal engine's defaults, docs/model/features.md 5.5), overridable by environment:
 * H3_TOKEN_REDUCTION_BLOCKS=BEGIN:END (0 <= BEGIN < END <= num_layers), H3_TOKEN_REDUCTION_EARLY=STEPS:END
 * (END > the base END) or 0 (none), H3_TOKEN_REDUCTION_SCALE=S (0..2). -1 with a one-line error. */
int denoise_token_reduction(denoise_args *a, int num_layers, h3_err *e);

/* Runs min(video, audio) passes (the two schedules have the same length in practice), each a model
 * evaluation unless --reuse skips it. */
int denoise_run(dit_model *m, const denoise_args *a, h3_err *e);
/* 1 when m can run a's loop: its AdaLN weights are still loaded, or the tables of every timestep the loop
 * presents were built before they were released (a model kept from an earlier request, docs/session.md). */
int denoise_model_ready(const dit_model *m, const denoise_args *a);
/* Builds the AdaLN tables of every timestep a's loop presents (denoise_run does it too, as a no-op then): a
 * pipeline calls it as its own phase, since on a GPU it reads the AdaLN projections from host memory (26 GB in
 * the release) and so belongs with the loading of the weights. */
int denoise_prepare(dit_model *m, const denoise_args *a, h3_err *e);
/* 1 when those tables exist already (denoise_prepare has nothing to do). */
int denoise_tables_cached(const dit_model *m, const denoise_args *a);

/* --core-reuse (docs/model/features.md 5.4): whether forward f (of a loop whose last pass is `last`) runs the core. */
int denoise_core_is_fresh(int f, int is_last_pass, int core_reuse);
/* --reuse (docs/model/features.md 5.2): whether pass i of `passes` evaluates the model; how many passes do. */
int denoise_pass_is_fresh(int i, int passes, int reuse);
int denoise_fresh_passes(int passes, int reuse);
/* The velocity of a skipped pass at sigma `now` from the fresh ones at sigma `last` (newest) and `prev`:
 * v = v_last + r (v_last - v_prev), r = (now - last) / (last - prev) clamped to [-2, 2]; n values. */
void denoise_extrapolate(float *v, const float *v_last, const float *v_prev, int64_t n, float now, float last,
                         float prev);

/* Drops the condition/reference rows and unpacks the targets: video (1, C, F, lh, lw), audio
 * (2, Ca, A), C = video row width / 4. */
int denoise_unpack(const layout *L, int C, int Ca, const float *video_rows, const float *audio_rows,
                   float *video_latents, float *audio_latents, h3_err *e);

#endif
