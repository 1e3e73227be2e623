/* The conditioning cache of a generation context (docs/model/features.md 3, one entry). */
#ifndef H3_GEN_COND_CACHE_H
#define H3_GEN_COND_CACHE_H

#include <stddef.h>

#include "gen_state.h"

/* ---- the conditioning cache (docs/model/features.md 3, one entry, kept by the context) ----
 * A request whose conditioning key matches the previous one's takes its presentation rows, hidden states and (fl2va /
 * ref2va) condition latents and audio rows instead of running the text phase and the condition encoders: a session's
 * !again or a new seed loads no text encoder, vision tower or VAE encoder. The key: the text encoder (folder,
 * precision, the seed of random weights), the task, the prompt, the canvas and frame count, and every keyframe /
 * reference file's identity (path, size, modification time). The condition noise is drawn per seed later
 * (phase_dit), so a hit gives the same generation as a miss. */
typedef struct cond_cache {
    char        *key;  /* NULL: empty */
    presentation pres;
    float       *text; /* [pres.L, text_dim] */
    int          text_dim;
    int          n;
    float       *latents[COND_MAX_ITEMS], *audio_rows[COND_MAX_ITEMS];
    size_t       n_latents[COND_MAX_ITEMS], n_audio[COND_MAX_ITEMS];
    int          Lt[COND_MAX_ITEMS], lh[COND_MAX_ITEMS], lw[COND_MAX_ITEMS];
    int64_t      audio_latents[COND_MAX_ITEMS];
} cond_cache;

void cond_cache_free(cond_cache *cc);
/* the request's conditioning key (malloc'd), or NULL when a condition file cannot be read (no cache then) */
char *cond_key(const gen *s);
/* after the text phase and the encoders: the entry for the next request; takes key (out of memory: no entry) */
void cond_cache_store(gen *s, cond_cache *cc, char *key);
/* a hit: the cached presentation rows and hidden states into pres / *out (-1: out of memory) */
int copy_rows(const presentation *src, const float *text, int text_dim, presentation *pres, float **out);
/* a malloc'd copy of n floats (NULL: out of memory) */
void *dup_floats(const float *src, size_t n);

#endif
