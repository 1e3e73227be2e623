/* Phase 3 of `h3 generate`: the audio and video decoders (the MP4 is encoded as the frames arrive). */
#ifndef H3_GEN_DECODE_H
#define H3_GEN_DECODE_H

#include "gen_state.h"

/* s->audio from s->audio_latents (and the request's audio sink) */
int phase_audio(gen *s, h3_err *e);
/* s->frames from s->video_latents, each frame to the sinks / the MP4 writer as it is decoded */
int phase_video(gen *s, h3_err *e);

#endif
