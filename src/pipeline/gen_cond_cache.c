/* The conditioning cache (gen_cond_cache.h). */
#include "gen_cond_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void cond_cache_free(cond_cache *cc) {
    free(cc->key);
    presentation_free(&cc->pres);
    free(cc->text);
    for (int i = 0; i < COND_MAX_ITEMS; i++) free(cc->latents[i]), free(cc->audio_rows[i]);
    memset(cc, 0, sizeof *cc);
}

void *dup_floats(const float *src, size_t n) {
    float *d = malloc(sizeof(float) * (n ? n : 1));
    if (d && n) memcpy(d, src, sizeof(float) * n);
    return d;
}

int copy_rows(const presentation *src, const float *text, int text_dim, presentation *pres, float **out) {
    const size_t L = (size_t)src->L;
    pres->ids = malloc(sizeof(int64_t) * (L ? L : 1));
    pres->tags = malloc(sizeof(int64_t) * (L ? L : 1));
    *out = dup_floats(text, L * (size_t)text_dim);
    if (!pres->ids || !pres->tags || !*out) {
        free(pres->ids), free(pres->tags), free(*out);
        pres->ids = pres->tags = NULL, *out = NULL;
        return -1;
    }
    memcpy(pres->ids, src->ids, sizeof(int64_t) * L);
    memcpy(pres->tags, src->tags, sizeof(int64_t) * L);
    pres->L = src->L;
    return 0;
}

static size_t item_latent_count(const cond_item *it) { return it->latents ? (size_t)VIDEO_CHANNELS * it->Lt * it->lh * it->lw : 0; }

/* (the fprintf calls here write the key into its memstream, not to a terminal) */
/* one file's identity in the key; -1 when it cannot be read (the request then fails later anyway: no cache) */
static int key_file(FILE *k, const char *path) {
    struct stat sb;
    if (!path) return 0;
    if (stat(path, &sb)) return -1;
    fprintf(k, "|%s %lld %lld.%09ld", path, (long long)sb.st_size, (long long)sb.st_mtim.tv_sec, (long)sb.st_mtim.tv_nsec);
    return 0;
}

char *cond_key(const gen *s) {
    char *buf = NULL, tdir[4096], mkey[RKEY];
    size_t len = 0;
    FILE *k = open_memstream(&buf, &len);
    if (!k) return NULL;
    path_in(s, "text_encoder", tdir, sizeof tdir);
    model_key(s, tdir, s->r->bf16 ? "bf16" : "fp32", RANDOM_TEXT, mkey);
    const layout_geometry *g = &s->g;
    fprintf(k, "%s|task %d|%dx%d|frames %d|ref size %d|prompt %s", mkey, (int)s->task, g->width, g->height, g->num_frames,
            s->r->ref_image_size,
            s->r->prompt ? s->r->prompt : "");
    int bad = key_file(k, s->r->first_frame) || key_file(k, s->r->last_frame);
    for (int i = 0; i < s->r->nrefs && !bad; i++) {
        fprintf(k, "|ref %d", (int)s->r->refs[i].kind);
        bad = key_file(k, s->r->refs[i].path) || key_file(k, s->r->refs[i].audio_path);
    }
    if (fclose(k) || bad) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* after the text phase and the encoders: the entry for the next request (out of memory: no entry, not an error) */
void cond_cache_store(gen *s, cond_cache *cc, char *key) {
    cond_cache_free(cc);
    if (!key || copy_rows(&s->pres, s->text, s->text_dim, &cc->pres, &cc->text)) {
        free(key);
        cond_cache_free(cc);
        return;
    }
    cc->text_dim = s->text_dim;
    cc->n = s->cond.n;
    for (int i = 0; i < s->cond.n; i++) {
        const cond_item *it = &s->cond.items[i];
        cc->n_latents[i] = item_latent_count(it);
        cc->Lt[i] = it->Lt, cc->lh[i] = it->lh, cc->lw[i] = it->lw, cc->audio_latents[i] = it->audio_latents;
        cc->n_audio[i] = it->audio_rows ? (size_t)(2 * it->audio_latents * AUDIO_CHANNELS) : 0;
        if ((it->latents && !(cc->latents[i] = dup_floats(it->latents, cc->n_latents[i]))) ||
            (it->audio_rows && !(cc->audio_rows[i] = dup_floats(it->audio_rows, cc->n_audio[i])))) {
            free(key);
            cond_cache_free(cc);
            return;
        }
    }
    cc->key = key;
}
