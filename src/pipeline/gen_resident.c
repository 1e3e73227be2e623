/* The model-residency cache (gen_resident.h, docs/session.md). */
#include "gen_resident.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/backend_bench.h" /* h3_memory_query */
#include "../core/tuning.h"

/* Frees the kept text encoder + tokenizer + audio decoder (phases) and / or transformer + video decoder (core). */
void resident_free(resident *r, int phases, int core) {
    if (phases) {
        text_encoder_free(r->te), tokenizer_free(r->tok), audio_vae_free(r->avae);
        r->te = NULL, r->tok = NULL, r->avae = NULL;
        r->te_key[0] = r->avae_key[0] = 0;
    }
    if (core) {
        dit_free(r->dit), video_vae_free(r->vvae);
        for (int i = 0; i < r->n_dit_peers; i++) dit_free(r->dit_peer[i]);
        r->n_dit_peers = 0, r->peer_key[0] = 0;
        r->dit = NULL, r->vvae = NULL;
        r->dit_key[0] = r->vvae_key[0] = 0;
    }
}

void resident_drop(resident *r) {
    resident_free(r, 1, 1);
    memset(r, 0, sizeof *r);
}

void resident_free_peers(resident *r) {
    for (int i = 0; i < r->n_dit_peers; i++) dit_free(r->dit_peer[i]);
    r->n_dit_peers = 0, r->peer_key[0] = 0;
}

void resident_free_te(void *p) { text_encoder_free(p); }
void resident_free_tok(void *p) { tokenizer_free(p); }
void resident_free_dit(void *p) { dit_free(p); }
void resident_free_avae(void *p) { audio_vae_free(p); }
void resident_free_vvae(void *p) { video_vae_free(p); }

void *resident_take(resident *r, void **slot, const char *slot_key, const char *key, void (*free_fn)(void *)) {
    if (!r || !*slot) return NULL;
    void *p = *slot;
    *slot = NULL;
    if (strcmp(slot_key, key)) {
        free_fn(p);
        return NULL;
    }
    return p;
}

void resident_keep(resident *r, void **slot, char *slot_key, void *p, const char *key, void (*free_fn)(void *)) {
    if (!r || !p) {
        if (p) free_fn(p);
        return;
    }
    if (*slot) free_fn(*slot);
    *slot = p;
    snprintf(slot_key, RKEY, "%s", key);
}


/* H3_RESIDENT_AUTO: may the transformer stay, beside the decoders of this generation and the phases of the next? On a
 * GPU only when it has the transformer's bytes plus AUTO_HEADROOM: the largest other phase measured at the release
 * shapes (the random text encoder, 45 GiB), the video decoder's ~8 GiB and a margin; that is a 141 GB H200, not an
 * 80 GB card (measured on the H200: the kept models peaked at 87.5 GiB beside the random text encoder). Not after a
 * generation showed that they do not fit (auto_off). H3_SESSION_GPU_GIB=N pretends an N GiB GPU (tests). */
#define AUTO_HEADROOM ((int64_t)60 << 30)
int resident_auto_room(const h3_request *q, const resident *r, h3_backend *be, const dit_model *m, int random_weights) {
    if (r->auto_off) return 0;
    const char *gib = h3_knob_get(H3_KNOB_SESSION_GPU_GIB);
    int64_t total;
    h3_err e;
    if (gib && *gib) {
        total = (int64_t)(atof(gib) * 1073741824.0);
    } else {
        /* the CPU: file weights are views of the page cache; random weights are host copies (66 GB at the release
         * shapes, beside the next random text encoder's 67 GB): those go as in a one-shot run */
        if (be->kind != H3_BACKEND_CUDA) return !random_weights;
        h3_memory_stats ms;
        if (h3_memory_query(be, &ms, &e) != 0) return 0;
        total = (int64_t)ms.total_bytes;
    }
    const int64_t w = (int64_t)dit_gpu_weight_bytes(dit_get_config(m), dit_get_mode(m), &e);
    if (total >= w + AUTO_HEADROOM) return 1;
    gen_log(q, "session: the transformer and the video decoder are not kept between generations: the GPU has "
                    "%.1f GiB, keeping them takes the transformer's %.1f GiB + %.0f (!resident on keeps them anyway)",
            total / 1073741824.0, w / 1073741824.0, AUTO_HEADROOM / 1073741824.0);
    return 0;
}

/* H3_RESIDENT_AUTO after a generation that kept them, the second guard: the memory left beside the kept models must
 * cover the most any other phase of this context's generations added over its start (its peak less its base; the
 * phases that made the kept models do not count) plus 2 GiB, else they go now and stay off for the session. A
 * conditioning-cache hit runs no text phase: the need is remembered across generations for that. Returns 1 kept. */
int resident_auto_fits(const gen *s, h3_backend *be, resident *r) {
    if (!r->dit && !r->vvae) return 1;
    for (int i = 0; i < s->pg.nphases; i++) {
        const progress_phase *ph = &s->pg.phases[i];
        if (ph->peak_dev < 0 || ph->base_dev < 0) continue;
        if (!strncmp(ph->name, "make random transformer", 23) || !strncmp(ph->name, "load transformer", 16) ||
            !strncmp(ph->name, "prepare AdaLN tables", 20) || !strncmp(ph->name, "make random video VAE", 21))
            continue;
        if (ph->peak_dev - ph->base_dev > r->auto_need) r->auto_need = ph->peak_dev - ph->base_dev;
    }
    if (be->kind != H3_BACKEND_CUDA) return 1;
    h3_memory_stats ms;
    h3_err e;
    if (h3_memory_query(be, &ms, &e) != 0) {
        gen_log(s->r, "session: the transformer and the video decoder are not kept: %s", e.msg);
        return 0;
    }
    const int64_t margin = (int64_t)2 << 30;
    if ((int64_t)ms.available_bytes >= r->auto_need + margin) return 1;
    gen_log(s->r, "session: the transformer and the video decoder are not kept between generations: %.1f GiB would "
                    "be left beside them, the phases needed up to %.1f GiB (+2; !resident on keeps them anyway)",
            ms.available_bytes / 1073741824.0, r->auto_need / 1073741824.0);
    return 0;
}

