/* Phase 2 of `h3 generate`: layout, noise and the denoising loop (docs/model/features.md 4). */
#ifndef H3_GEN_DIT_H
#define H3_GEN_DIT_H

#include "gen_state.h"

/* s->video_latents, s->audio_latents (normalized), from s->text and s->cond */
int phase_dit(gen *s, h3_err *e);

#endif
