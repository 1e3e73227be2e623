/* The pinned-buffer prefetch (gen_pin_prefetch.h). */
#include "gen_pin_prefetch.h"

#include <stdlib.h>
#include <string.h>

#include "../core/tuning.h"

#include "../backend/ops.h"

static void *pin_prefetch_main(void *arg) {
    pin_prefetch *p = arg;
    video_vae_tiling t = video_vae_tiling_default();
    size_t bytes = video_vae_download_slot_bytes(&p->vc, p->lh, p->lw, &t);
    if (bytes) h3_host_prefetch(p->be, bytes, 2); /* a failure only costs the decoder its own allocation */
    return NULL;
}

void pin_prefetch_start(gen *s, pin_prefetch *p) {
    memset(p, 0, sizeof *p);
        if (s->be->kind != H3_BACKEND_CUDA || !s->r->bf16 || h3_knob_is(H3_KNOB_PIN_PREFETCH, "0")) return; /* bf16 on CUDA: batched */
    char dir[4096];
    h3_err e;
    path_in(s, "vae", dir, sizeof dir);
    if (video_vae_config_load(dir, &p->vc, &e) != 0) return; /* the video phase reports it */
    p->be = s->be, p->lh = s->g.latent_height, p->lw = s->g.latent_width;
    p->started = pthread_create(&p->th, NULL, pin_prefetch_main, p) == 0;
}

void pin_prefetch_join(pin_prefetch *p) {
    if (p->started) pthread_join(p->th, NULL);
    p->started = 0;
}
