/* --show (docs/model/features.md 2): the previews during the denoising. */
#ifndef H3_GEN_PREVIEW_H
#define H3_GEN_PREVIEW_H

#include "gen_state.h"

/* The preview decoder (the video VAE decoder the final decode uses, same parts), made or loaded for the denoising;
 * the session's kept decoder when it is that one (s->pv_borrowed). */
video_vae *preview_vae_new(gen *s, h3_backend *be, h3_err *e);
/* After denoising pass `pass` of `passes`: a middle frame of the current latents to the preview callback. */
int preview_pass(gen *s, int pass, int passes, h3_err *e);
/* Hands an [H][W][3] frame to the request's preview callback, resized to the output canvas (half: to half of it,
 * rounded up). */
int preview_emit(gen *s, const float *rgb, int64_t W, int64_t H, int half, int pass, int passes, int64_t frame,
                 h3_err *e);

#endif
