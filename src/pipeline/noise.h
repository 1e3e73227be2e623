/* Noise, conditioning rows and row packing (docs/model/dit.md section 8):
 * - torch's CPU generator (MT19937) and torch.randn on fp32 tensors, so a seed gives the same
 *   noise as torch.Generator().manual_seed(seed) (within ~1e-6: torch evaluates log/sin/cos with
 *   its own vector polynomials; the uniforms and the draw order are exact);
 * - the request's draw order: condition noises, then video noise (1,24,F,lh,lw), then audio noise
 *   drawn directly as (2A, 32) rows;
 * - the 0.999 condition augmentation;
 * - patchify/unpatchify (patch (1,2,2)) and audio rows <-> (2, 32, A) latents. */
#ifndef H3_NOISE_H
#define H3_NOISE_H

#include <stdint.h>

#include "../core/error.h"

/* at::CPUGeneratorImpl: an mt19937 plus the cached second Box-Muller sample of the scalar path. */
typedef struct torch_rng {
    uint32_t state[624];
    int      next;
    int      has_cached_normal;
    double   cached_normal;
} torch_rng;

/* manual_seed(seed): mt19937 init_genrand with the seed's low 32 bits; clears the cache. */
void     torch_rng_seed(torch_rng *g, uint64_t seed);
uint32_t torch_rng_u32(torch_rng *g);
/* torch.randn(n, generator=g) into a contiguous fp32 tensor of n elements (any n >= 0):
 * n >= 16: uniforms, Box-Muller in blocks of 16, tail refill; n < 16: the scalar double path. */
void torch_randn(torch_rng *g, float *out, int64_t n);

/* ---- patch (1, 2, 2) packing of video latents (1, C, F, lh, lw) <-> rows (F*lh/2*lw/2, C*4) ---- */
int  noise_patchify(const float *latents, int C, int F, int lh, int lw, float *rows, h3_err *e);
int  noise_unpatchify(const float *rows, int C, int F, int lh, int lw, float *latents, h3_err *e);
/* Audio rows (2A, Ca) <-> latents (2, Ca, A): row c*A + i, column k = latent[c][k][i]. */
void noise_audio_rows_to_latents(const float *rows, int Ca, int A, float *latents);
void noise_audio_latents_to_rows(const float *latents, int Ca, int A, float *rows);

/* scale_noise(x, 0.999, n) = fp32(0.999)*x + (1 - fp32(0.999))*n, elementwise, in place on x. */
void noise_augment_condition(float *x, const float *noise, int64_t n);

/* One visual condition latent (1, C, frames, lh, lw), in packed order. */
typedef struct noise_condition {
    const float *latents;
    int frames, latent_height, latent_width;
} noise_condition;

/* The packed starting rows of a request (MiniMaxH3PrepareConditionLatentsStep, PrepareLatentsStep,
 * the FL2VA/Ref2VA prepare-latents steps), all from ONE generator in this order:
 *  1. per condition: noise of its shape; rows = patchify(augment(latents, noise));
 *  2. video noise (1, C, F, lh, lw) unless video_noise is given (then no draw), patchified;
 *  3. audio noise (2A, Ca) in row layout unless audio_noise (2, Ca, A) is given (then converted).
 * Reference audio rows (ref2va, never noised) go first in audio_rows.
 * Outputs: video_rows [ncv + F*P, C*4] (ncv = condition rows), audio_rows [nca + 2A, Ca].
 * expected_condition_video_rows / expected_condition_audio_rows: what the layout reserved (the
 * mismatch errors of docs/model/dit.md 8.4). */
typedef struct noise_request {
    uint64_t               seed;
    int                    C, Ca;            /* 24, 32 */
    int                    F, lh, lw, A;     /* target geometry */
    const noise_condition *conditions;
    int                    num_conditions;
    const float           *reference_audio_rows;  /* [nca, Ca] or NULL */
    int64_t                num_reference_audio_rows;
    const float           *video_noise;      /* (1, C, F, lh, lw) or NULL */
    const float           *audio_noise;      /* (2, Ca, A) or NULL */
    int64_t                expected_condition_video_rows;
    int64_t                expected_condition_audio_rows;
} noise_request;

int noise_prepare_rows(const noise_request *r, float *video_rows, float *audio_rows, h3_err *e);

#endif
