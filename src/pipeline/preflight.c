/* The pre-flight check of a request's weights (preflight.h). */
#include "preflight.h"

#include <string.h>

#include "../io/expect.h"
#include "../io/safetensors.h"
#include "../io/snapshot.h"
#include "../model/audio_vae.h"
#include "../model/dit.h"
#include "../model/dit_int8.h"
#include "../model/dit_lora.h"
#include "../model/text_encoder.h"
#include "../model/video_vae.h"

enum { PF_TEXT, PF_DIT, PF_AUDIO, PF_VIDEO };

/* The tensor list a component's config implies (DiT: capped by the weights' count, as dit_load caps it). */
static int expected(int comp, const char *dir, int held, h3_expect_list *l, h3_err *e) {
    switch (comp) {
    case PF_TEXT: {
        te_config c;
        return text_encoder_config_load(dir, &c, e) || text_encoder_expected_tensors(&c, l, e) ? -1 : 0;
    }
    case PF_DIT: {
        dit_config c;
        l->max = held;
        if (dit_config_load(dir, &c, e) || dit_expected_tensors(&c, l, e)) return -1;
        /* an int8 snapshot (docs/int8.md): its profile's tensors expected as I8 + scales, any breach refused here */
        h3_err ignored = {{0}};
        st_set *s = st_set_open_headers(dir, &ignored);
        int profile, rc = s ? dit_int8_expect(&c, s, l, &profile, e) : 0;
        st_set_free(s);
        return rc;
    }
    case PF_AUDIO: {
        audio_vae_config c;
        return audio_vae_config_load(dir, &c, e) || audio_vae_expected_tensors(&c, l, e) ? -1 : 0;
    }
    default: {
        video_vae_config c;
        return video_vae_config_load(dir, &c, e) || video_vae_expected_tensors(&c, l, e) ? -1 : 0;
    }
    }
}

/* The set (index, headers, extents, listing) and every stored tensor the config names: the dtype and shape it
 * implies (h3_expect_check, as h3 info and the loaders apply it). A tensor the config implies but the files lack is
 * left to the loader, which knows which parts it reads (an encoder-only audio VAE file is valid). */
static int check_component(int comp, const char *dir, const char *weights, h3_err *e) {
    st_set *s = st_set_open_headers(weights, e);
    if (!s) return -1;
    h3_expect_list l = {0};
    int rc = expected(comp, dir, st_set_count(s), &l, e);
    for (int i = 0; i < l.n && !rc; i++) {
        const st_entry *ent = st_set_entry(s, l.v[i].name, NULL);
        if (ent) rc = h3_expect_check(&l.v[i], ent->dtype, ent->ndim, ent->shape, st_set_path(s), e);
    }
    h3_expect_list_free(&l);
    st_set_free(s);
    return rc;
}

int h3_preflight_weights(const h3_request *r, h3_task task, int need_text, h3_err *e) {
    if (r->random_weights) return 0; /* weights made from the configs: no shard is read */
    char dir[4096], path[4096];
    /* in the phases' order: text encoder (+ vision tower, same files), the DiT of the task, the audio VAE and the
     * video VAE (their decoders, and their encoders for fl2va/ref2va conditions) */
    if (need_text) {
        snapshot_path(dir, sizeof dir, r->model_dir, "text_encoder");
        if (check_component(PF_TEXT, dir, dir, e)) return -1;
    }
    if (r->transformer_file && task == H3_REF2VA)
        return h3_fail(e, "--transformer replaces the t2va/fl2va transformer; ref2va runs transformer_ref (not replaced)");
    if (snapshot_dit_dir(r->model_dir, task == H3_REF2VA, dir, sizeof dir, e)) return -1;
    if (r->transformer_file ? dit_single_file_check(dir, r->transformer_file, e) : check_component(PF_DIT, dir, dir, e))
        return -1;
    if (r->n_loras) { /* every LoRA converted and checked against the DiT's config before the first phase */
        dit_config dc;
        if (dit_config_load(dir, &dc, e)) return -1;
        dit_lora_set *ls = dit_lora_set_new(r->loras, r->n_loras, &dc, task == H3_REF2VA, e);
        if (!ls) return -1;
        dit_lora_set_free(ls);
    }
    snapshot_path(dir, sizeof dir, r->model_dir, "audio_vae");
    if (check_component(PF_AUDIO, dir, audio_vae_weights_path(dir, path, sizeof path), e)) return -1;
    snapshot_path(dir, sizeof dir, r->model_dir, "vae");
    return check_component(PF_VIDEO, dir, dir, e);
}
