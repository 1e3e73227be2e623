/* The video decoder's pinned download buffers, made on a second thread while the DiT phase runs. */
#ifndef H3_GEN_PIN_PREFETCH_H
#define H3_GEN_PIN_PREFETCH_H

#include <pthread.h>

#include "gen_state.h"

/* ---- the video decoder's pinned download buffers, made while the earlier phases run ----
 * cudaHostAlloc pins page by page: the tile-batched decoder's two ~400 MB slots took ~0.4 s of a one-shot decode on
 * the lent H200 (a VM). A second thread makes them in the backend's pinned-buffer cache while the DiT phase runs
 * (h3_host_prefetch), where the decoder then finds them; a session's later requests find them there anyway.
 * H3_PIN_PREFETCH=0 turns it off (an A/B switch). */
typedef struct pin_prefetch {
    pthread_t          th;
    int                started;
    h3_backend        *be;
    video_vae_config   vc;
    int64_t            lh, lw;
} pin_prefetch;

/* Starts the thread when it helps (bf16 on CUDA: the batched decoder); p is cleared either way. */
void pin_prefetch_start(gen *s, pin_prefetch *p);
/* Waits for it (a no-op when it never started). */
void pin_prefetch_join(pin_prefetch *p);

#endif
