/* Phase 4 of `h3 generate`: the outputs, each written atomically (docs/robustness.md), and --profile's table. */
#ifndef H3_GEN_OUTPUT_H
#define H3_GEN_OUTPUT_H

#include "gen_state.h"

/* Every output location checked and its temporary made before the first phase. */
int outputs_open(gen *s, h3_err *e);
/* The uncommitted temporaries go. */
void outputs_free(gen *s);
/* --dump-latents, the MP4 (encoded during the decode), --frames-dir, --wav: committed. */
int phase_outputs(gen *s, h3_err *e);
/* --profile: progress_report's table, line by line through the request's log */
void profile_log(gen *s);

#endif
