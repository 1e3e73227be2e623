/* --resident (sessions, docs/session.md): the model-residency cache of a generation context. */
#ifndef H3_GEN_RESIDENT_H
#define H3_GEN_RESIDENT_H

#include "../model/audio_vae.h"
#include "../model/dit.h"
#include "../model/text_encoder.h"
#include "../model/tokenizer.h"
#include "gen_state.h"

/* ---- --resident (sessions, docs/session.md): a phase's model kept for the next request ----
 * A phase takes its model out of the cache when the key (what it would load: folder, precision, --quant,
 * --layers, the seed of --random-weights) matches, else drops the cached one and loads; after a successful
 * phase the model goes back. A failed phase frees its model. */
typedef struct resident {
    text_encoder *te;
    h3_tokenizer *tok;
    dit_model    *dit;
    audio_vae    *avae;
    video_vae    *vvae;
    char          te_key[RKEY], dit_key[RKEY], avae_key[RKEY], vvae_key[RKEY];
    /* --parallel: the transformers of ranks 1.. (on the context's peer backends), kept with dit under peer_key */
    dit_model    *dit_peer[7];
    int           n_dit_peers;
    char          peer_key[RKEY];
    /* H3_RESIDENT_AUTO: the most GPU memory any other phase added in this context's generations, and the verdict
     * that the kept models do not fit (set once, kept until the models are dropped: !resident off, !cache clear) */
    int64_t       auto_need;
    int           auto_off;
} resident;

/* Frees the kept text encoder + tokenizer + audio decoder (phases) and / or transformer + video decoder (core). */
void resident_free(resident *r, int phases, int core);
/* Frees the kept --parallel transformers of ranks 1.. (rank 0's stays). */
void resident_free_peers(resident *r);
/* Frees everything and clears the verdicts. */
void resident_drop(resident *r);
/* The cached model of a slot, taken out of the cache, when it was cached under key; else NULL (and a cached
 * model of another key is freed, so the phase's own load has the memory). */
void *resident_take(resident *r, void **slot, const char *slot_key, const char *key, void (*free_fn)(void *));
/* After the phase: the model goes (back) into the cache when r (--resident), else it is freed. */
void resident_keep(resident *r, void **slot, char *slot_key, void *p, const char *key, void (*free_fn)(void *));
/* H3_RESIDENT_AUTO: may the transformer stay beside the other phases (1) or not (0, said in the log). */
int resident_auto_room(const h3_request *q, const resident *r, h3_backend *be, const dit_model *m, int random_weights);
/* H3_RESIDENT_AUTO after a generation that kept them: 1 when the kept models still leave the phases their room. */
int resident_auto_fits(const gen *s, h3_backend *be, resident *r);

/* the free functions resident_take/keep are given */
void resident_free_te(void *p);
void resident_free_tok(void *p);
void resident_free_dit(void *p);
void resident_free_avae(void *p);
void resident_free_vvae(void *p);

#endif
