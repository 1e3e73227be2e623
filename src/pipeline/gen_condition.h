/* The conditioning phases of `h3 generate`, in data-flow order: the canvas and the condition media (phase 0),
 * the prompt through the tokenizer, vision tower and Qwen3-VL prefix (phase 1), the condition latents (phase 1b). */
#ifndef H3_GEN_CONDITION_H
#define H3_GEN_CONDITION_H

#include "gen_state.h"

/* phase 0: flags, schedulers, keyframes / references, the output and render canvases */
int resolve_geometry(gen *s, h3_err *e);
/* phase 1: s->pres, s->text (from the conditioning cache on a hit) */
int phase_text(gen *s, h3_err *e);
/* phase 1b: the fl2va / ref2va condition latents and audio rows (VAE encoders, freed before the DiT) */
int phase_encode(gen *s, h3_err *e);

#endif
