/* `h3 generate`, end to end (docs/model/features.md 4): conditioning (tokenizer, Qwen3-VL prefix) ->
 * DiT denoising (layout, noise, scheduler) -> audio and video decoders -> outputs.
 * One phase's weights are resident at a time: the text encoder is freed before the DiT loads,
 * the DiT before the decoders (docs/model/features.md 7.1), so peak memory is the largest phase.
 * With --backend cuda a phase runs on the GPU when every op it uses has a CUDA twin (the DiT, the
 * video VAE decoder) and on a CPU backend otherwise (text encoder + vision tower: backend_text.h's
 * bf16 ops; audio VAE: backend_audio.h; video VAE encoder: backend_conv.h); each phase says where
 * it ran (one stderr line, and the --profile table's phase names). */
#include "generate.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/backend.h"
#include "../backend/backend_bench.h" /* h3_memory_query */
#include "../backend/backend_vae.h"
#include "../io/safetensors.h"
#include "../io/snapshot.h"
#include "../media/media.h"
#include "../media/resize.h"
#include "../model/audio_vae.h"
#include "../model/dit.h"
#include "../model/dit_int8.h"
#include "../model/text_encoder.h"
#include "../model/tokenizer.h"
#include "../backend/backend_check.h"
#include "../model/video_vae.h"
#include "../model/vision.h"
#include "condition.h"
#include "denoise.h"
#include "layout.h"
#include "noise.h"
#include "preflight.h"
#include "presentation.h"
#include "progress.h"
#include "sched.h"

/* One message line to the request's log callback (request.h); library code prints nothing itself. */
__attribute__((format(printf, 2, 3))) static void gen_log(const h3_request *r, const char *fmt, ...) {
    if (!r->log) return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    r->log(r->log_user, 0, line);
}

/* --random-weights: one seed per model, from the request's seed */
enum { RANDOM_TEXT = 0x7e47, RANDOM_DIT = 0xd17, RANDOM_AUDIO = 0xa0d10, RANDOM_VIDEO = 0x71de0 };

#define VIDEO_CHANNELS 24
#define AUDIO_CHANNELS 32

typedef struct gen {
    const h3_request *r;
    h3_backend       *be;        /* --backend: the DiT and the video VAE decoder run here */
    h3_backend       *cpu;       /* phases whose ops have no CUDA twins (== be with --backend cpu) */
    progress          pg;
    h3_task           task;
    layout_geometry   g;
    cond_set          cond;      /* fl2va keyframes / ref2va references (condition.h) */
    /* conditioning */
    presentation      pres;
    float            *text;      /* [T, text_dim] */
    int64_t           T;
    int               text_dim;
    /* results */
    float            *video_latents; /* (1, 24, F, lh, lw), normalized */
    float            *audio_latents; /* (2, 32, A), normalized */
    float            *frames;        /* [frames, H, W, 3] in [0, 1] */
    int64_t           nframes;
    float            *audio;         /* [2, samples] in [-1, 1] */
    int64_t           samples;
    /* -o OUT.mp4: frames and audio are encoded as the video decoder delivers them (the encoder's CPU
     * time overlaps the decode); the file appears when phase_outputs closes the writer */
    h3_mp4_writer    *mp4;
    int64_t           mp4_frames, mp4_samples;
    /* every output's temporary, made before the first phase (docs/robustness.md), committed by phase_outputs */
    h3_outfile       *o_mp4, *o_frames, *o_wav, *o_dump;
    int               out_h, out_w;  /* output canvas; the model runs at g's (the render canvas, 5.6) */
    struct resident  *res;           /* sessions (--resident, the auto default): the models kept between requests, else NULL */
    struct cond_cache *cc;           /* the context's conditioning cache */
    int               cond_hit;      /* this request's conditioning came from cc */
    /* --show: the preview decoder kept during the denoising, and the loop's rows it previews */
    video_vae        *pv;
    int               pv_borrowed;   /* pv is the session's kept video decoder (not freed after the loop) */
    const layout     *pv_L;
    const float      *pv_vrows, *pv_arows;
    h3_err            pv_err;        /* why a preview stopped the loop */
    double            shift_video, shift_audio; /* the snapshot's scheduler/ and audio_scheduler/ configs */
    int               bad_input;     /* a phase refused the user's input (the prompt's length): exit 2 */
} gen;

/* ---- --resident (sessions, docs/session.md): a phase's model kept for the next request ----
 * A phase takes its model out of the cache when the key (what it would load: folder, precision, --quant,
 * --layers, the seed of --random-weights) matches, else drops the cached one and loads; after a successful
 * phase the model goes back. A failed phase frees its model. */
enum { RKEY = 4400 };
typedef struct resident {
    text_encoder *te;
    h3_tokenizer *tok;
    dit_model    *dit;
    audio_vae    *avae;
    video_vae    *vvae;
    char          te_key[RKEY], dit_key[RKEY], avae_key[RKEY], vvae_key[RKEY];
    /* H3_RESIDENT_AUTO: the most GPU memory any other phase added in this context's generations, and the verdict
     * that the kept models do not fit (set once, kept until the models are dropped: !resident off, !cache clear) */
    int64_t       auto_need;
    int           auto_off;
} resident;

/* Frees the kept text encoder + tokenizer + audio decoder (phases) and / or transformer + video decoder (core). */
static void resident_free(resident *r, int phases, int core) {
    if (phases) {
        text_encoder_free(r->te), tokenizer_free(r->tok), audio_vae_free(r->avae);
        r->te = NULL, r->tok = NULL, r->avae = NULL;
        r->te_key[0] = r->avae_key[0] = 0;
    }
    if (core) {
        dit_free(r->dit), video_vae_free(r->vvae);
        r->dit = NULL, r->vvae = NULL;
        r->dit_key[0] = r->vvae_key[0] = 0;
    }
}

static void resident_drop(resident *r) {
    resident_free(r, 1, 1);
    memset(r, 0, sizeof *r);
}

/* "folder|settings|weights": random weights are keyed by their seed */
static void model_key(const gen *s, const char *dir, const char *settings, uint64_t salt, char *key) {
    if (s->r->random_weights)
        snprintf(key, RKEY, "%s|%s|random %llx", dir, settings, (unsigned long long)(s->r->seed ^ salt));
    else
        snprintf(key, RKEY, "%s|%s|file", dir, settings);
}

static void free_te(void *p) { text_encoder_free(p); }
static void free_tok(void *p) { tokenizer_free(p); }
static void free_dit(void *p) { dit_free(p); }
static void free_avae(void *p) { audio_vae_free(p); }
static void free_vvae(void *p) { video_vae_free(p); }

/* The cached model of a slot, taken out of the cache, when it was cached under key; else NULL (and a cached
 * model of another key is freed, so the phase's own load has the memory). */
static void *resident_take(resident *r, void **slot, const char *slot_key, const char *key, void (*free_fn)(void *)) {
    if (!r || !*slot) return NULL;
    void *p = *slot;
    *slot = NULL;
    if (strcmp(slot_key, key)) {
        free_fn(p);
        return NULL;
    }
    return p;
}

/* After the phase: the model goes (back) into the cache when --resident, else it is freed. */
static void resident_keep(resident *r, void **slot, char *slot_key, void *p, const char *key, void (*free_fn)(void *)) {
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
static int resident_auto_room(const h3_request *q, const resident *r, h3_backend *be, const dit_model *m, int random_weights) {
    if (r->auto_off) return 0;
    const char *gib = getenv("H3_SESSION_GPU_GIB");
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
static int resident_auto_fits(const gen *s, h3_backend *be, resident *r) {
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

static void path_in(const gen *s, const char *sub, char *out, size_t cap) { snapshot_path(out, cap, s->r->model_dir, sub); }

/* ---- the video decoder's pinned download buffers, made while the earlier phases run ----
 * cudaHostAlloc pins page by page: the tile-batched decoder's two ~400 MB slots took ~0.4 s of a one-shot decode on
 * the lent H200 (a VM). A second thread makes them in the backend's pinned-buffer cache while the DiT phase runs
 * (h3_vae_host_prefetch), where the decoder then finds them; a session's later requests find them there anyway.
 * H3_PIN_PREFETCH=0 turns it off (an A/B switch). */
typedef struct pin_prefetch {
    pthread_t          th;
    int                started;
    h3_backend        *be;
    video_vae_config   vc;
    int64_t            lh, lw;
} pin_prefetch;

static void *pin_prefetch_main(void *arg) {
    pin_prefetch *p = arg;
    video_vae_tiling t = video_vae_tiling_default();
    size_t bytes = video_vae_download_slot_bytes(&p->vc, p->lh, p->lw, &t);
    if (bytes) h3_vae_host_prefetch(p->be, bytes, 2); /* a failure only costs the decoder its own allocation */
    return NULL;
}

static void pin_prefetch_start(gen *s, pin_prefetch *p) {
    memset(p, 0, sizeof *p);
    const char *env = getenv("H3_PIN_PREFETCH");
    if (s->be->kind != H3_BACKEND_CUDA || !s->r->bf16 || (env && !strcmp(env, "0"))) return; /* bf16 on CUDA: batched */
    char dir[4096];
    h3_err e;
    path_in(s, "vae", dir, sizeof dir);
    if (video_vae_config_load(dir, &p->vc, &e) != 0) return; /* the video phase reports it */
    p->be = s->be, p->lh = s->g.latent_height, p->lw = s->g.latent_width;
    p->started = pthread_create(&p->th, NULL, pin_prefetch_main, p) == 0;
}

static void pin_prefetch_join(pin_prefetch *p) {
    if (p->started) pthread_join(p->th, NULL);
    p->started = 0;
}

/* The backend of one phase: the requested one when all of the phase's ops have twins there, else
 * the CPU. Says so on stderr (one line per phase). */
static h3_backend *phase_backend(gen *s, const char *phase, int has_cuda_twins, const char *why_not) {
    h3_backend *be = has_cuda_twins ? s->be : s->cpu;
    int moved = be != s->be;
    gen_log(s->r, "%s on %s%s%s%s", phase, h3_backend_name(be), moved ? " (" : "", moved ? why_not : "",
            moved ? ")" : "");
    return be;
}

/* A progress phase named "<name> [<backend>]" (--profile's table shows where each phase ran). */
static void begin_on(gen *s, const char *name, const h3_backend *be, int64_t total) {
    char label[48];
    snprintf(label, sizeof label, "%s [%s]", name, h3_backend_name(be));
    progress_begin(&s->pg, label, total);
}

/* After a phase on the GPU: waits for it and turns the first recorded failure into the error. */
static int phase_check(h3_backend *be, h3_err *e) {
    h3_sync(be);
    return h3_backend_check(be, e);
}

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

static void cond_cache_free(cond_cache *cc) {
    free(cc->key);
    presentation_free(&cc->pres);
    free(cc->text);
    for (int i = 0; i < COND_MAX_ITEMS; i++) free(cc->latents[i]), free(cc->audio_rows[i]);
    memset(cc, 0, sizeof *cc);
}

static void *dup_floats(const float *src, size_t n) {
    float *d = malloc(sizeof(float) * (n ? n : 1));
    if (d && n) memcpy(d, src, sizeof(float) * n);
    return d;
}

static int copy_rows(const presentation *src, const float *text, int text_dim, presentation *pres, float **out) {
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

/* one file's identity in the key; -1 when it cannot be read (the request then fails later anyway: no cache) */
static int key_file(FILE *k, const char *path) {
    struct stat sb;
    if (!path) return 0;
    if (stat(path, &sb)) return -1;
    fprintf(k, "|%s %lld %lld.%09ld", path, (long long)sb.st_size, (long long)sb.st_mtim.tv_sec, (long)sb.st_mtim.tv_nsec);
    return 0;
}

/* the request's conditioning key (malloc'd), or NULL */
static char *cond_key(const gen *s) {
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
static void cond_cache_store(gen *s, cond_cache *cc, char *key) {
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

/* ---- the vision side of the fl2va / ref2va presentations (docs/model/text_encoder.md 3-4; encoders.py) ---- */
typedef struct vision_inputs {
    te_vision_rows rows;
    float   *merged[2], *deep[2];    /* [0] images, [1] videos */
    int64_t  image_grid[3 * COND_MAX_ITEMS], video_grid[3 * COND_MAX_ITEMS];
    int      n_image_grids, n_video_grids;
    double  *timestamps[COND_MAX_ITEMS];
} vision_inputs;

static void vision_inputs_free(vision_inputs *v) {
    for (int k = 0; k < 2; k++) free(v->merged[k]), free(v->deep[k]);
    for (int i = 0; i < COND_MAX_ITEMS; i++) free(v->timestamps[i]);
    memset(v, 0, sizeof *v);
}

/* One batch of items through the processor and the tower, per modality as diffusers batches them
 * (all images in one call, all videos in another). frames[i]/n_frames[i]: the pixels of item i. */
static int vision_batch(vision_model *vm, const vision_proc_config *pc, const te_config *tc, const uint8_t **frames,
                        const int *n_frames, const cond_item **items, int n, int64_t *grid, float **merged, float **deep,
                        int64_t *n_rows, h3_err *e) {
    float *pv[COND_MAX_ITEMS] = {0};
    int64_t N = 0, vec = 3LL * pc->temporal_patch_size * pc->patch_size * pc->patch_size;
    int rc = -1;
    for (int i = 0; i < n; i++) {
        if (vision_preprocess(frames[i], n_frames[i], items[i]->H, items[i]->W, pc, &pv[i], grid + 3 * i, e)) {
            char why[sizeof e->msg];
            memcpy(why, e->msg, sizeof why);
            h3_fail(e, "%s: %s", items[i]->what, why);
            goto done;
        }
        N += grid[3 * i] * grid[3 * i + 1] * grid[3 * i + 2];
    }
    const int64_t U = (int64_t)tc->vision.spatial_merge_size * tc->vision.spatial_merge_size, O = tc->vision.out_hidden_size;
    float *all = malloc(sizeof(float) * (size_t)(N * vec));
    *merged = malloc(sizeof(float) * (size_t)(N / U * O));
    *deep = malloc(sizeof(float) * (size_t)(N / U * O * (tc->vision.n_deepstack > 0 ? tc->vision.n_deepstack : 1)));
    if (!all || !*merged || !*deep) {
        free(all);
        h3_fail(e, "vision: out of memory for %lld patches", (long long)N);
        goto done;
    }
    for (int i = 0, off = 0; i < n; i++) {
        int64_t r = grid[3 * i] * grid[3 * i + 1] * grid[3 * i + 2];
        memcpy(all + off * vec, pv[i], sizeof(float) * (size_t)(r * vec));
        off += (int)r;
    }
    rc = vision_forward(vm, all, N, grid, n, *merged, *deep, e);
    free(all);
    *n_rows = N / U;
done:
    for (int i = 0; i < n; i++) free(pv[i]);
    return rc;
}

static int vision_features(gen *s, h3_backend *be, text_encoder *te, h3_tokenizer *tok, vision_inputs *v, h3_err *e) {
    const te_config *tc = text_encoder_get_config(te);
    char dir[4096];
    path_in(s, "processor", dir, sizeof dir);
    vision_proc_config ipc, vpc;
    if (vision_proc_config_load(dir, 0, &ipc, e) || vision_proc_config_load(dir, 1, &vpc, e)) return -1;
    begin_on(s, "vision tower", be, 0);
    vision_model *vm = vision_new(be, &tc->vision, text_encoder_weights(te), s->r->bf16, e);
    if (!vm) return -1;
    const cond_set *cs = &s->cond;
    const uint8_t *img_px[COND_MAX_ITEMS], *vid_px[COND_MAX_ITEMS];
    uint8_t *sampled[COND_MAX_ITEMS] = {0};
    const cond_item *img_it[COND_MAX_ITEMS], *vid_it[COND_MAX_ITEMS];
    int img_n[COND_MAX_ITEMS], vid_n[COND_MAX_ITEMS], nb[COND_MAX_ITEMS] = {0}, ni = 0, nv = 0, rc = -1;
    int item_slot[COND_MAX_ITEMS];
    for (int i = 0; i < cs->n; i++) {
        const cond_item *it = &cs->items[i];
        if (it->kind == LAYOUT_REF_IMAGE) {
            item_slot[i] = ni, img_it[ni] = it, img_px[ni] = it->pixels, img_n[ni++] = 1;
        } else if (it->kind == LAYOUT_REF_VIDEO) {
            /* _sample_video_condition_frames: every 12th frame of the 24 fps reference, 2 per block */
            int *idx = malloc(sizeof(int) * (size_t)it->T), n_idx = 0;
            v->timestamps[nv] = malloc(sizeof(double) * (size_t)it->T);
            size_t fsz = (size_t)it->H * it->W * 3;
            if (!idx || !v->timestamps[nv]) {
                free(idx);
                h3_fail(e, "%s: out of memory", it->what);
                goto done;
            }
            if (vision_sample_video(it->T, H3_MEDIA_FPS, COND_VIDEO_SAMPLE_FPS, vpc.temporal_patch_size, idx, &n_idx,
                                    v->timestamps[nv], &nb[nv], e)) {
                free(idx);
                char why[sizeof e->msg];
                memcpy(why, e->msg, sizeof why);
                h3_fail(e, "%s: %s", it->what, why);
                goto done;
            }
            sampled[nv] = malloc(fsz * (size_t)n_idx);
            if (!sampled[nv]) {
                free(idx);
                h3_fail(e, "%s: out of memory", it->what);
                goto done;
            }
            for (int k = 0; k < n_idx; k++) memcpy(sampled[nv] + fsz * k, it->pixels + fsz * (size_t)idx[k], fsz);
            free(idx);
            item_slot[i] = nv, vid_it[nv] = it, vid_px[nv] = sampled[nv], vid_n[nv++] = n_idx;
        }
    }
    int64_t n_img_rows = 0, n_vid_rows = 0;
    if (ni && vision_batch(vm, &ipc, tc, img_px, img_n, img_it, ni, v->image_grid, &v->merged[0], &v->deep[0], &n_img_rows, e))
        goto done;
    if (nv && vision_batch(vm, &vpc, tc, vid_px, vid_n, vid_it, nv, v->video_grid, &v->merged[1], &v->deep[1], &n_vid_rows, e))
        goto done;
    for (int k = 0; k < nv; k++)
        if (v->video_grid[3 * k] != nb[k]) {
            h3_fail(e, "%s: the processor merged the video into %lld vision blocks, but %d are labelled", vid_it[k]->what,
                    (long long)v->video_grid[3 * k], nb[k]);
            goto done;
        }
    v->n_image_grids = ni, v->n_video_grids = nv;
    v->rows = (te_vision_rows){.image_embeds = v->merged[0], .image_deep = v->deep[0], .n_image = n_img_rows,
                               .video_embeds = v->merged[1], .video_deep = v->deep[1], .n_video = n_vid_rows,
                               .n_deep = tc->vision.n_deepstack};
    const int64_t U = (int64_t)tc->vision.spatial_merge_size * tc->vision.spatial_merge_size;
    if (!cs->ref2va) {
        int64_t tokens[2];
        for (int k = 0; k < ni; k++) tokens[k] = v->image_grid[3 * k + 1] * v->image_grid[3 * k + 2] / U;
        if (presentation_fl2va(presentation_tokenizer_encode, tok, s->r->prompt, ni, tokens, &s->pres, e)) goto done;
    } else {
        pres_ref refs[COND_MAX_ITEMS];
        for (int i = 0; i < cs->n; i++) {
            const cond_item *it = &cs->items[i];
            memset(&refs[i], 0, sizeof refs[i]);
            refs[i].has_audio = it->wave != NULL;
            if (it->kind == LAYOUT_REF_IMAGE) {
                const int64_t *g = v->image_grid + 3 * item_slot[i];
                refs[i].kind = PRES_REF_IMAGE, refs[i].tokens = g[1] * g[2] / U;
            } else if (it->kind == LAYOUT_REF_VIDEO) {
                const int64_t *g = v->video_grid + 3 * item_slot[i];
                refs[i].kind = PRES_REF_VIDEO, refs[i].tokens = g[1] * g[2] / U;
                refs[i].n_blocks = nb[item_slot[i]], refs[i].block_timestamps = v->timestamps[item_slot[i]];
            } else {
                refs[i].kind = PRES_REF_AUDIO;
            }
        }
        if (presentation_ref2va(presentation_tokenizer_encode, tok, s->r->prompt, refs, cs->n, &s->pres, e)) goto done;
    }
    progress_end(&s->pg);
    begin_on(s, "text encoder", be, 0);
    rc = 0;
done:
    for (int k = 0; k < nv; k++) free(sampled[k]);
    vision_free(vm);
    return rc;
}

/* ---- phase 1: the prompt through the tokenizer and the Qwen3-VL prefix (hidden_states[50]) ---- */
static void text_progress(void *user, int done, int total) {
    gen *s = user;
    (void)total;
    progress_update(&s->pg, done);
}

static int phase_text(gen *s, h3_err *e) {
    char dir[4096];
    path_in(s, "tokenizer", dir, sizeof dir);
    char key[RKEY], tdir0[4096];
    path_in(s, "text_encoder", tdir0, sizeof tdir0);
    model_key(s, tdir0, s->r->bf16 ? "bf16" : "fp32", RANDOM_TEXT, key);
    if (s->cond_hit) { /* the previous request's conditioning (cond_cache) */
        const cond_cache *cc = s->cc;
        if (copy_rows(&cc->pres, cc->text, cc->text_dim, &s->pres, &s->text))
            return h3_fail(e, "out of memory for the cached prompt embedding");
        s->T = s->pres.L, s->text_dim = cc->text_dim;
        gen_log(s->r, "conditioning cached (the same prompt, text encoder and conditions as the previous generation)");
        return 0;
    }
    h3_backend *be = phase_backend(s, s->task == H3_T2VA ? "text encoder" : "text encoder + vision tower", 1, "");
    resident *res = s->r->resident == H3_RESIDENT_ALL ? s->res : NULL; /* the session default keeps no text encoder */
    text_encoder *te = res ? resident_take(res, (void **)&res->te, res->te_key, key, free_te) : NULL;
    h3_tokenizer *tok = te ? resident_take(res, (void **)&res->tok, res->te_key, key, free_tok) : NULL;
    if (te && !tok) { /* keep the pair together */
        text_encoder_free(te);
        te = NULL;
    }
    if (!te && res) { /* another model was cached: given back before this one loads */
        tokenizer_free(res->tok);
        res->tok = NULL;
    }
    if (te) gen_log(s->r, "text encoder resident (kept from the previous generation)");
    if (!tok) { /* first: CPU work only, while the backend's cuBLASLt warm-up thread runs (cuda_backend.cu) */
        begin_on(s, "load tokenizer", be, 0);
        tok = tokenizer_load(dir, e);
        if (!tok) { /* the snapshot's tokenizer files are input: exit 2 */
            text_encoder_free(te);
            return H3_GENERATE_BAD_INPUT;
        }
        progress_end(&s->pg);
    }
    if (!te && s->r->random_weights) {
        char tdir[4096];
        te_config tcfg;
        path_in(s, "text_encoder", tdir, sizeof tdir);
        begin_on(s, "make random text encoder", be, 0);
        if (text_encoder_config_load(tdir, &tcfg, e) ||
            !(te = text_encoder_new_random(be, &tcfg, s->r->bf16, s->r->seed ^ RANDOM_TEXT, e)) || phase_check(be, e)) {
            text_encoder_free(te);
            tokenizer_free(tok);
            return -1;
        }
        progress_end(&s->pg);
    }
    begin_on(s, "text encoder", be, 0);
    int rc = -1;
    int64_t *pos = NULL;
    vision_inputs vis;
    memset(&vis, 0, sizeof vis);
    if (presentation_check_prompt(s->r->prompt, e)) goto done;
    if (presentation_check_prompt_tokens(presentation_tokenizer_encode, tok, s->r->prompt, e)) { /* before the model */
        s->bad_input = 1;
        goto done;
    }
    path_in(s, "text_encoder", dir, sizeof dir);
    if (!te) te = text_encoder_load(be, dir, s->r->bf16, e);
    if (!te) goto done;
    const te_config *tc = text_encoder_get_config(te);
    if (s->task == H3_T2VA) {
        if (presentation_t2va(presentation_tokenizer_encode, tok, s->r->prompt, &s->pres, e)) goto done;
    } else if (vision_features(s, be, te, tok, &vis, e) || phase_check(be, e)) {
        goto done;
    }
    s->T = s->pres.L;
    s->text_dim = tc->text.hidden_size;
    pos = malloc(sizeof(int64_t) * 3 * (size_t)s->T);
    s->text = malloc(sizeof(float) * (size_t)(s->T * s->text_dim));
    if (!pos || !s->text) {
        h3_fail(e, "out of memory for %lld prompt tokens", (long long)s->T);
        goto done;
    }
    if (presentation_rope_index(s->pres.ids, s->T, vis.image_grid, vis.n_image_grids, vis.video_grid, vis.n_video_grids,
                                tc->vision.spatial_merge_size, pos, e))
        goto done;
    if (res) text_encoder_keep_layers(te, 1); /* --resident: the streamed layers stay for the next generation */
    s->pg.total = TE_OUTPUT_LAYER; /* the bar now counts streamed layers */
    text_encoder_set_progress(te, text_progress, s);
    if (text_encoder_forward(te, s->pres.ids, s->T, pos, s->task == H3_T2VA ? NULL : &vis.rows, TE_OUTPUT_LAYER, s->text, e) ||
        phase_check(be, e))
        goto done;
    rc = 0;
done:
    vision_inputs_free(&vis);
    free(pos);
    /* released before the DiT loads, unless --resident keeps it */
    if (rc == 0 && res) {
        resident_keep(res, (void **)&res->te, res->te_key, te, key, free_te);
        resident_keep(res, (void **)&res->tok, res->te_key, tok, key, free_tok);
    } else {
        text_encoder_free(te);
        tokenizer_free(tok);
    }
    if (rc == 0) progress_end(&s->pg);
    return rc;
}

/* ---- phase 2: layout, noise and the denoising loop ---- */
/* ---- --show (docs/model/features.md 2): previews ---- */

/* The preview decoder (the video VAE decoder the final decode uses, same parts), made or loaded for the denoising. */
/* The video decoder a request decodes with on be: its folder, parts and cache key. On the GPU, --precision bf16
 * decodes with the bf16 decoder (the reference decodes under autocast); the CPU keeps the fp32 decoder, the
 * numerical reference. */
static int video_decoder_key(const gen *s, const h3_backend *be, char *dir, size_t cap, char *key) {
    path_in(s, "vae", dir, cap);
    const int parts = VIDEO_VAE_DECODER | (s->r->bf16 && be->kind == H3_BACKEND_CUDA ? VIDEO_VAE_BF16 : 0);
    char settings[32];
    snprintf(settings, sizeof settings, "parts %d", parts);
    model_key(s, dir, settings, RANDOM_VIDEO, key);
    return parts;
}

static video_vae *preview_vae_new(gen *s, h3_backend *be, h3_err *e) {
    char dir[4096], key[RKEY];
    const int parts = video_decoder_key(s, be, dir, sizeof dir, key); /* phase_video's: the same decoder */
    if (s->res && s->res->vvae && !strcmp(s->res->vvae_key, key)) { /* docs/model/features.md 3: the kept decoder serves */
        s->pv_borrowed = 1;
        return s->res->vvae;
    }
    video_vae *v = NULL;
    begin_on(s, s->r->random_weights ? "make random preview VAE" : "load preview VAE", be, 0);
    if (s->r->random_weights) {
        video_vae_config vc;
        if (video_vae_config_load(dir, &vc, e) == 0) v = video_vae_new_random(be, &vc, parts, s->r->seed ^ RANDOM_VIDEO, e);
    } else {
        v = video_vae_new(be, dir, parts, e);
    }
    if (v) progress_end(&s->pg);
    return v;
}

typedef struct preview_pick {
    int64_t want, W, H;
    float  *rgb; /* [H][W][3] */
    int     got;
} preview_pick;

static int preview_pick_sink(void *ctx, int64_t index, const float *frame, h3_err *e) {
    preview_pick *p = ctx;
    (void)e;
    if (index == p->want) video_vae_pixels_to_hwc(frame, p->rgb, p->W * p->H), p->got = 1;
    return 0;
}

/* Hands an [H][W][3] frame of the render canvas to the request's preview callback, resized to the output canvas. */
static int preview_emit(gen *s, const float *rgb, int64_t W, int64_t H, int pass, int passes, int64_t frame, h3_err *e) {
    float *out = NULL;
    if (W != s->out_w || H != s->out_h) {
        if (!(out = malloc(sizeof(float) * 3 * (size_t)s->out_w * (size_t)s->out_h)))
            return h3_fail(e, "out of memory for a preview frame");
        if (h3_resize_rgbf(rgb, (int)W, (int)H, out, s->out_w, s->out_h, H3_RESAMPLE_LANCZOS, e)) {
            free(out);
            return -1;
        }
    }
    h3_preview p = {out ? out : rgb, s->out_w, s->out_h, pass, passes, frame};
    int stop = s->r->preview(s->r->preview_user, &p);
    free(out);
    return stop ? h3_fail(e, "--show: the preview callback cancelled the generation") : 0;
}

/* After denoising pass `pass` of `passes`: the middle of the current video latents (one decodable stretch of
 * latent frames, the reference clip length where the latents allow) through the preview decoder, and its middle
 * frame to the callback. The loop's rows and its random state are only read. */
static int preview_pass(gen *s, int pass, int passes, h3_err *e) {
    const layout_geometry *g = &s->g;
    const video_vae_config *c = video_vae_get_config(s->pv);
    const int64_t F = g->num_latent_frames, lh = g->latent_height, lw = g->latent_width, plane = lh * lw;
    int64_t Lp = c->K + c->O < F ? c->K + c->O : F;
    h3_err probe;
    while (Lp < F && video_vae_decoded_frames(c, Lp, &probe) <= 0) Lp++;
    int64_t nf = video_vae_decoded_frames(c, Lp, e);
    if (nf <= 0) return -1;
    const int64_t t0 = (F - Lp) / 2;
    size_t nv = (size_t)(VIDEO_CHANNELS * F * plane);
    float *z = malloc(sizeof(float) * nv), *za = malloc(sizeof(float) * 2 * AUDIO_CHANNELS * (size_t)g->num_audio_latents);
    float *zs = malloc(sizeof(float) * (size_t)(VIDEO_CHANNELS * Lp * plane));
    preview_pick pk = {nf / 2, g->width, g->height, malloc(sizeof(float) * 3 * (size_t)g->width * (size_t)g->height), 0};
    int rc = -1;
    if (!z || !za || !zs || !pk.rgb) {
        h3_fail(e, "out of memory for a preview");
        goto done;
    }
    if (denoise_unpack(s->pv_L, VIDEO_CHANNELS, AUDIO_CHANNELS, s->pv_vrows, s->pv_arows, z, za, e)) goto done;
    for (int64_t ch = 0; ch < VIDEO_CHANNELS; ch++) /* (1, C, F, lh, lw): latent frames t0 .. t0 + Lp of each channel */
        memcpy(zs + ch * Lp * plane, z + (ch * F + t0) * plane, sizeof(float) * (size_t)(Lp * plane));
    video_vae_denormalize_latents(c, zs, Lp * plane);
    video_vae_tiling tiling = video_vae_tiling_default();
    if (video_vae_decode_stream(s->pv, zs, Lp, lh, lw, &tiling, preview_pick_sink, &pk, e) || phase_check(s->be, e))
        goto done;
    if (!pk.got) {
        h3_fail(e, "--show: the preview decoder produced no frame %lld", (long long)pk.want);
        goto done;
    }
    /* where that frame sits in the whole video: the same fraction of the frames as of the latents */
    int64_t frame = (int64_t)((double)(t0 * nf + pk.want * Lp) / (double)(nf * F) * (double)g->num_frames);
    rc = preview_emit(s, pk.rgb, g->width, g->height, pass, passes, frame, e);
done:
    free(z), free(za), free(zs), free(pk.rgb);
    return rc;
}

static int denoise_progress(void *user, int step, int steps) {
    gen *s = user;
    progress_update(&s->pg, step + 1);
    if ((s->r->cancel && *s->r->cancel) || s->pg.stopped) {
        h3_fail(&s->pv_err, "cancelled (Ctrl-C) during the denoising, after step %d of %d", step + 1, steps);
        return 1;
    }
    if (s->pv && preview_pass(s, step + 1, steps, &s->pv_err)) return 1;
    return 0;
}

/* --ssd-streaming, or automatically on a GPU when the resident transformer (weights + one forward's activations +
 * a margin for the AdaLN tables and the allocator) would not fit in the memory available: the dit_load mode. A kept
 * model's own weights (`kept` bytes, a session's resident transformer) count as available: it would give them back. */
static int dit_mode(gen *s, h3_backend *be, const dit_config *dc, size_t kept) {
    const int mode = s->r->bf16 ? DIT_BF16 : 0;
    if (be->kind == H3_BACKEND_CPU) { /* the CPU reads every weight from the file mapping anyway */
        if (s->r->ssd_streaming)
            gen_log(s->r, "--ssd-streaming: no effect on the CPU backend (its weights are the file mapping)");
        return mode;
    }
    if (s->r->ssd_streaming) return mode | DIT_STREAM;
    h3_memory_stats ms;
    h3_err e;
    if (s->r->quant_fp8 || s->r->quant_int8 || h3_memory_query(be, &ms, &e) != 0 || !ms.total_bytes) return mode;
    const layout_geometry *g = &s->g;
    /* packed rows: the target video's tokens, two per audio latent, the text; references and rounding in the 4096 */
    const int64_t S = (int64_t)g->num_latent_frames * (g->latent_height / 2) * (g->latent_width / 2) +
                      2 * (int64_t)g->num_audio_latents + s->T + 4096;
    const double avail = (double)ms.available_bytes + (double)kept;
    double need;
    if (!dit_should_stream(dc, mode, S, avail, &need)) return mode;
    gen_log(s->r, "the resident transformer needs ~%.1f GiB, the GPU has %.1f GiB available: streaming its "
                    "blocks (--ssd-streaming, docs/model/features.md 7.3)", need / (1u << 30), avail / (1u << 30));
    return mode | DIT_STREAM;
}

/* The transformer as the request wants it, in `mode` (dit_mode): made from random weights or loaded, --quant fp8
 * applied. */
static dit_model *dit_make(gen *s, h3_backend *be, const char *dir, int mode, h3_err *e) {
    dit_config dc;
    if (dit_config_load(dir, &dc, e) != 0) return NULL;
    begin_on(s, s->r->random_weights ? "make random transformer" : "load transformer", be, 0);
    dit_model *m = NULL;
    if (s->r->random_weights) m = dit_new_random(be, &dc, mode, s->r->seed ^ RANDOM_DIT, e);
    else m = dit_load(be, dir, mode, e);
    if (!m) return NULL;
    if ((s->r->quant_fp8 && dit_quantize_fp8(m, e)) ||
        ((s->r->quant_int8 || s->r->int8_fc2_groups) && dit_quantize_int8(m, s->r->int8_fc2_groups, e)) ||
        phase_check(be, e)) {
        dit_free(m);
        return NULL;
    }
    progress_end(&s->pg);
    return m;
}

static int phase_dit(gen *s, h3_err *e) {
    char dir[4096];
    if (snapshot_dit_dir(s->r->model_dir, s->task == H3_REF2VA, dir, sizeof dir, e)) return -1;
    h3_backend *be = phase_backend(s, "DiT", 1, "");
    dit_config dc;
    if (dit_config_load(dir, &dc, e)) return -1;
    resident *res = s->res;
    /* the mode this request needs, decided as if a kept transformer had given its memory back; the key holds it, so a
     * kept model in the other mode is freed and this one loaded */
    const dit_model *kept = res ? res->dit : NULL;
    const int mode = dit_mode(s, be, &dc, kept ? dit_gpu_weight_bytes(dit_get_config(kept), dit_get_mode(kept), e) : 0);
    char key[RKEY], settings[96];
    snprintf(settings, sizeof settings, "%s|quant %s%s|layers %d|stream %d", s->r->bf16 ? "bf16" : "fp32",
             s->r->quant_fp8 ? "fp8" : s->r->quant_int8 ? "int8" : "none", s->r->int8_fc2_groups ? " fc2g" : "",
             s->r->layers, (mode & DIT_STREAM) != 0);
    model_key(s, dir, settings, RANDOM_DIT, key);
    dit_model *m = res ? resident_take(res, (void **)&res->dit, res->dit_key, key, free_dit) : NULL;
    if (m) gen_log(s->r, "transformer resident (kept from the previous generation)");
    if (!m && !(m = dit_make(s, be, dir, mode, e))) return -1;
    const dit_config *c = dit_get_config(m);
    int rc = -1, n_inf;
    sched vs = {0}, as = {0};
    layout *L = NULL;
    float *vrows = NULL, *arows = NULL, *ref_audio = NULL;
    if (c->in_channels != VIDEO_CHANNELS || c->audio_in_channels != AUDIO_CHANNELS) {
        h3_fail(e, "%s: in_channels %d / audio_in_channels %d, the pipeline packs %d / %d", dir, c->in_channels,
                c->audio_in_channels, VIDEO_CHANNELS, AUDIO_CHANNELS);
        goto done;
    }
    if (c->text_dim != s->text_dim) {
        h3_fail(e, "%s: text_dim %d but the text encoder's hidden size is %d", dir, c->text_dim, s->text_dim);
        goto done;
    }
    if (sched_num_inference_steps_for_evaluations(s->r->steps, &n_inf, e) || sched_init(&vs, n_inf, s->shift_video, e) ||
        sched_init(&as, n_inf, s->shift_audio, e))
        goto done;
    const layout_geometry *g = &s->g;
    const cond_set *cs = &s->cond;
    noise_condition conds[COND_MAX_ITEMS];
    layout_ref lrefs[COND_MAX_ITEMS];
    int ncond = 0;
    int64_t nca = 0;
    for (int i = 0; i < cs->n; i++) {
        const cond_item *it = &cs->items[i];
        if (it->latents) conds[ncond++] = (noise_condition){it->latents, it->Lt, it->lh, it->lw};
        lrefs[i] = (layout_ref){.kind = (layout_ref_kind)it->kind, .frames = it->Lt, .latent_height = it->lh,
                                .latent_width = it->lw, .audio_latents = (int)it->audio_latents};
        nca += 2 * it->audio_latents;
    }
    if (s->task == H3_REF2VA)
        L = layout_new_ref2va(s->pres.tags, s->T, lrefs, cs->n, g->num_latent_frames, g->latent_height, g->latent_width,
                              g->num_audio_latents, e);
    else
        L = layout_new_t2va(s->pres.tags, s->T, g->num_latent_frames, g->latent_height, g->latent_width,
                            g->num_audio_latents, cs->anchors, cs->n, e);
    if (!L) goto done;
    /* reference audio rows (never noised), concatenated in request order */
    if (nca) {
        ref_audio = malloc(sizeof(float) * (size_t)(nca * AUDIO_CHANNELS));
        if (!ref_audio) {
            h3_fail(e, "out of memory for the reference audio rows");
            goto done;
        }
        for (int i = 0, off = 0; i < cs->n; i++) {
            const cond_item *it = &cs->items[i];
            size_t n = (size_t)(2 * it->audio_latents * AUDIO_CHANNELS);
            if (n) memcpy(ref_audio + off, it->audio_rows, sizeof(float) * n);
            off += (int)n;
        }
    }
    const int64_t Q = VIDEO_CHANNELS * 4;
    vrows = malloc(sizeof(float) * (size_t)(L->Nv * Q));
    arows = malloc(sizeof(float) * (size_t)(L->Na * AUDIO_CHANNELS));
    if (!vrows || !arows) {
        h3_fail(e, "out of memory for the packed rows");
        goto done;
    }
    noise_request nr = {
        .seed = s->r->seed, .C = VIDEO_CHANNELS, .Ca = AUDIO_CHANNELS,
        .F = g->num_latent_frames, .lh = g->latent_height, .lw = g->latent_width, .A = g->num_audio_latents,
        .conditions = conds, .num_conditions = ncond, .reference_audio_rows = ref_audio, .num_reference_audio_rows = nca,
        .expected_condition_video_rows = L->num_condition_video_rows,
        .expected_condition_audio_rows = L->num_condition_audio_rows,
    };
    if (noise_prepare_rows(&nr, vrows, arows, e)) goto done;
    denoise_args da = {.L = L, .text = s->text, .video_sched = &vs, .audio_sched = &as, .video_rows = vrows,
                       .audio_rows = arows, .progress = denoise_progress, .progress_user = s, .reuse = s->r->reuse,
                       .layers = s->r->layers, .core_reuse = s->r->core_reuse, .check_blocks = s->r->profile,
                       .release_adaln = 0 /* done below, in the tables' load phase (docs/model/dit.md 4.5: 39% of the weights) */};
    if (g->width == 256 && g->height == 256 && !s->r->reference_rope) { /* docs/model/features.md 5.7 */
        da.rope_spatial_scale = 0.5f;
        gen_log(s->r, "256x256: spatial RoPE coordinates halved against lattice artefacts (docs/model/features.md 5.7; "
                        "--use-reference-rope keeps the released ones)");
    }
    if (s->r->token_reduction) {
        if (denoise_token_reduction(&da, c->num_layers, e)) {
            rc = H3_GENERATE_BAD_INPUT; /* an H3_TOKEN_REDUCTION_BLOCKS beyond this model's blocks */
            goto done;
        }
        char early[64] = "";
        if (da.reduce_early_passes)
            snprintf(early, sizeof early, " (%d..%d for the first %d passes)", da.reduce_begin, da.reduce_early_end - 1,
                     da.reduce_early_passes);
        gen_log(s->r, "--token-reduction: blocks %d..%d on paired video tokens%s, restore scale %g",
                da.reduce_begin, da.reduce_end - 1, early, (double)da.reduce_scale);
        if (g->width == 256 && g->height == 256)
            gen_log(s->r, "warning: --token-reduction at 256x256: keep it off at 256 square (docs/model/features.md 5.5)");
        if (s->r->layers <= 40 && s->r->reuse >= 3)
            gen_log(s->r, "warning: --token-reduction with --layers %d and --reuse %d rings and ghosts "
                            "(docs/model/features.md 5.5)", s->r->layers, s->r->reuse);
    }
    if (!denoise_model_ready(m, &da)) { /* a kept model lacks this schedule's AdaLN tables (weights released) */
        gen_log(s->r, "the resident transformer has no AdaLN tables for these timesteps: loading it again");
        dit_free(m);
        if (!(m = dit_make(s, be, dir, dit_mode(s, be, &dc, 0), e))) goto done;
        c = dit_get_config(m);
    }
    if (s->r->preview) { /* --show: a decoder for the passes' previews, kept until the loop ends */
        if (!(s->pv = preview_vae_new(s, be, e))) goto done;
        s->pv_L = L, s->pv_vrows = vrows, s->pv_arows = arows, s->pv_err.msg[0] = 0;
    }
    if (!denoise_tables_cached(m, &da)) { /* the AdaLN tables: weight preparation (host-resident projections on GPUs) */
        begin_on(s, "prepare AdaLN tables", be, 0);
        if (denoise_prepare(m, &da, e) || phase_check(be, e)) goto done;
        /* the projections' memory goes back here, in this load phase, not in the loop's first step: freeing random
         * weights' 26 GB of host memory took ~1.5 s on a lent machine (tables cached: released when they were built) */
        dit_release_adaln(m);
        progress_end(&s->pg);
    }
    begin_on(s, "denoise", be, sched_evaluations(&vs));
    dit_stream_stats st0, st1;
    dit_get_stream_stats(m, &st0);
    if (denoise_run(m, &da, e) || phase_check(be, e)) {
        if (s->pv_err.msg[0]) *e = s->pv_err; /* the preview's own message */
        goto done;
    }
    progress_end(&s->pg);
    dit_get_stream_stats(m, &st1);
    if (st1.slot_bytes > 0) /* docs/model/features.md 7.3's report: what the slots copied during the loop */
        gen_log(s->r, "--ssd-streaming: %lld block copies, %.2f GB from host memory, %.2f s of host time in the "
                        "copy calls (waits for a free slot included), slots %.2f GiB", (long long)(st1.fills - st0.fills),
                (st1.bytes - st0.bytes) / 1e9, st1.host_seconds - st0.host_seconds, st1.slot_bytes / (double)(1u << 30));
    if (!s->pv_borrowed) video_vae_free(s->pv);
    s->pv = NULL, s->pv_borrowed = 0;
    if (s->r->layers < c->num_layers) { /* which blocks --layers dropped */
        char list[256];
        int n = 0, off = 0;
        for (int b = 0; b < c->num_layers; b++)
            if (dit_layer_skipped(m, b) && off < (int)sizeof list - 8) off += snprintf(list + off, sizeof list - off, "%s%d", n++ ? ", " : "", b);
        if (n) gen_log(s->r, "--layers %d: skipped blocks %s", s->r->layers, list);
    }
    size_t nv = (size_t)VIDEO_CHANNELS * g->num_latent_frames * g->latent_height * g->latent_width;
    s->video_latents = malloc(sizeof(float) * nv);
    s->audio_latents = malloc(sizeof(float) * 2 * AUDIO_CHANNELS * (size_t)g->num_audio_latents);
    if (!s->video_latents || !s->audio_latents) {
        h3_fail(e, "out of memory for the latents");
        goto done;
    }
    if (denoise_unpack(L, VIDEO_CHANNELS, AUDIO_CHANNELS, vrows, arows, s->video_latents, s->audio_latents, e)) goto done;
    /* results checked (docs/robustness.md): host buffers here, so the CPU twin counts */
    if (h3_check_finite(s->cpu, s->video_latents, (int64_t)nv, "denoise: the video latents after the DiT", e) ||
        h3_check_finite(s->cpu, s->audio_latents, 2 * AUDIO_CHANNELS * (int64_t)g->num_audio_latents,
                        "denoise: the audio latents after the DiT", e))
        goto done;
    rc = 0;
done:
    if (!s->pv_borrowed) video_vae_free(s->pv);
    s->pv = NULL, s->pv_borrowed = 0;
    free(vrows);
    free(arows);
    free(ref_audio);
    layout_free(L);
    sched_free(&vs);
    sched_free(&as);
    /* released before the decoders load, unless --resident keeps it (the session default: when it has the room) */
    if (rc == 0 && res && (s->r->resident != H3_RESIDENT_AUTO || resident_auto_room(s->r, res, be, m, s->r->random_weights)))
        resident_keep(res, (void **)&res->dit, res->dit_key, m, key, free_dit);
    else
        dit_free(m);
    return rc;
}

/* ---- phase 3: decoders ---- */
static int phase_audio(gen *s, h3_err *e) {
    char dir[4096];
    path_in(s, "audio_vae", dir, sizeof dir);
    h3_backend *be = phase_backend(s, "audio VAE decoder", 1, "");
    char key[RKEY];
    model_key(s, dir, "decoder", RANDOM_AUDIO, key);
    resident *res = s->r->resident == H3_RESIDENT_ALL ? s->res : NULL; /* the session default keeps no audio decoder */
    audio_vae *m = res ? resident_take(res, (void **)&res->avae, res->avae_key, key, free_avae) : NULL;
    if (m) {
    } else if (s->r->random_weights) {
        audio_vae_config ac;
        begin_on(s, "make random audio VAE", be, 0);
        if (audio_vae_config_load(dir, &ac, e) == 0) m = audio_vae_new_random(be, &ac, AVAE_DECODER, s->r->seed ^ RANDOM_AUDIO, e);
        if (m) progress_end(&s->pg);
    } else {
        m = audio_vae_load(be, dir, AVAE_DECODER, e);
    }
    begin_on(s, "audio VAE decode", be, 0);
    if (!m) return -1;
    const audio_vae_config *c = audio_vae_get_config(m);
    int rc = -1;
    int64_t A = s->g.num_audio_latents;
    float *z = malloc(sizeof(float) * 2 * AUDIO_CHANNELS * (size_t)A);
    s->samples = (int64_t)c->hop * A;
    s->audio = malloc(sizeof(float) * 2 * (size_t)s->samples);
    if (!z || !s->audio) {
        h3_fail(e, "out of memory for the audio");
        goto done;
    }
    if (c->latent_channels != AUDIO_CHANNELS) {
        h3_fail(e, "%s: latent_channels %d, the DiT produces %d", dir, c->latent_channels, AUDIO_CHANNELS);
        goto done;
    }
    memcpy(z, s->audio_latents, sizeof(float) * 2 * AUDIO_CHANNELS * (size_t)A);
    if (audio_vae_denormalize(c, z, 2, A, e) || audio_vae_decode(m, z, 2, A, 0, s->audio, NULL, e) || phase_check(be, e) ||
        h3_check_finite(s->cpu, s->audio, 2 * s->samples, "audio decoder: the samples", e))
        goto done;
    rc = 0;
    progress_end(&s->pg);
    if (s->r->on_audio && s->r->on_audio(s->r->sink_user, s->audio, s->audio + s->samples, s->samples, H3_MEDIA_SAMPLE_RATE))
        rc = h3_fail(e, "the audio sink cancelled the generation");
done:
    free(z);
    if (rc == 0 && res) resident_keep(res, (void **)&res->avae, res->avae_key, m, key, free_avae);
    else audio_vae_free(m);
    return rc;
}

typedef struct frame_sink_ctx {
    gen    *s;
    int64_t H, W;       /* decoded (render canvas) */
    float  *render;     /* [H][W][3] scratch when the output canvas is larger (docs/model/features.md 5.6), else NULL */
} frame_sink_ctx;

/* Decoded frame [3, H, W] in the VAE's normalized pixel space -> [H, W, 3] in [0, 1]. */
static int frame_sink(void *ctx, int64_t index, const float *frame, h3_err *e) {
    frame_sink_ctx *c = ctx;
    gen *s = c->s;
    if (index >= s->nframes) return h3_fail(e, "video decoder produced more frames than %lld", (long long)s->nframes);
    int64_t n = c->H * c->W, n_out = (int64_t)s->out_h * s->out_w;
    float *dst = s->frames + index * n_out * 3;
    if (c->render) { /* render canvas -> output canvas, Lanczos on float RGB */
        video_vae_pixels_to_hwc(frame, c->render, n);
        if (h3_resize_rgbf(c->render, (int)c->W, (int)c->H, dst, s->out_w, s->out_h, H3_RESAMPLE_LANCZOS, e)) return -1;
    } else {
        video_vae_pixels_to_hwc(frame, dst, n); /* one pass, threaded */
    }
    if (h3_check_finite(s->cpu, dst, n_out * 3, "video decoder: a frame's pixels", e)) return -1; /* before any write */
    if (s->r->preview) { /* --show: every final frame */
        h3_preview p = {dst, s->out_w, s->out_h, 0, s->r->steps, index};
        if (s->r->preview(s->r->preview_user, &p)) return h3_fail(e, "--show: the preview callback cancelled the generation");
    }
    if (s->r->on_frame && s->r->on_frame(s->r->sink_user, dst, s->out_w, s->out_h, index, s->nframes))
        return h3_fail(e, "the frame sink cancelled the generation");
    if (s->mp4) { /* frames arrive in order; audio interleaved by time as h3_write_mp4 does */
        if (index != s->mp4_frames) return h3_fail(e, "video decoder delivered frame %lld out of order", (long long)index);
        h3_frames_view one = {.frames = 1, .height = s->out_h, .width = s->out_w, .f32 = dst};
        if (h3_mp4_writer_frames(s->mp4, &one, e)) return -1;
        int64_t upto = (index + 1) * H3_MEDIA_SAMPLE_RATE / H3_MEDIA_FPS;
        if (index == s->nframes - 1 || upto > s->samples) upto = s->samples;
        if (upto > s->mp4_samples &&
            h3_mp4_writer_audio(s->mp4, s->audio + s->mp4_samples, s->audio + s->samples + s->mp4_samples,
                                upto - s->mp4_samples, e))
            return -1;
        if (upto > s->mp4_samples) s->mp4_samples = upto;
        s->mp4_frames++;
    }
    progress_update(&s->pg, index + 1);
    return 0;
}

static int phase_video(gen *s, h3_err *e) {
    h3_backend *be = phase_backend(s, "video VAE decoder", 1, "");
    char dir[4096], key[RKEY];
    const int parts = video_decoder_key(s, be, dir, sizeof dir, key);
    resident *res = s->res;
    video_vae *v = res ? resident_take(res, (void **)&res->vvae, res->vvae_key, key, free_vvae) : NULL;
    if (v) {
        gen_log(s->r, "video VAE decoder resident (kept from the previous generation)");
    } else if (s->r->random_weights) {
        video_vae_config vc;
        begin_on(s, "make random video VAE", be, 0);
        if (video_vae_config_load(dir, &vc, e) == 0) v = video_vae_new_random(be, &vc, parts, s->r->seed ^ RANDOM_VIDEO, e);
        if (v) progress_end(&s->pg);
    } else {
        v = video_vae_new(be, dir, parts, e);
    }
    if (!v) return -1;
    const video_vae_config *c = video_vae_get_config(v);
    const layout_geometry *g = &s->g;
    frame_sink_ctx fc = {s, g->height, g->width, NULL};
    int rc = -1;
    int64_t nz = (int64_t)VIDEO_CHANNELS * g->num_latent_frames * g->latent_height * g->latent_width;
    float *z = malloc(sizeof(float) * (size_t)nz);
    s->nframes = video_vae_decoded_frames(c, g->num_latent_frames, e);
    if (s->nframes < 0) goto done;
    if (s->nframes != g->num_frames) {
        h3_fail(e, "video decoder gives %lld frames for %d latent frames, expected %d", (long long)s->nframes,
                g->num_latent_frames, g->num_frames);
        goto done;
    }
    s->frames = malloc(sizeof(float) * 3 * (size_t)(s->nframes * s->out_h * s->out_w));
    if (!z || !s->frames) {
        h3_fail(e, "out of memory for %lld decoded frames", (long long)s->nframes);
        goto done;
    }
    memcpy(z, s->video_latents, sizeof(float) * (size_t)nz);
    video_vae_denormalize_latents(c, z, nz / VIDEO_CHANNELS);
    begin_on(s, "video VAE decode", be, s->nframes);
    video_vae_tiling tiling = video_vae_tiling_default();
    if ((s->out_h != g->height || s->out_w != g->width) &&
        !(fc.render = malloc(sizeof(float) * 3 * (size_t)g->height * (size_t)g->width))) {
        h3_fail(e, "out of memory for the render-canvas frame");
        goto done;
    }
    if (s->o_mp4 && !(s->mp4 = h3_mp4_writer_new_to(s->o_mp4, s->out_w, s->out_h, s->audio != NULL, NULL, e)))
        goto done;
    if (video_vae_decode_stream(v, z, g->num_latent_frames, g->latent_height, g->latent_width, &tiling, frame_sink, &fc, e) ||
        phase_check(be, e))
        goto done;
    progress_end(&s->pg);
    rc = 0;
done:
    free(z);
    free(fc.render);
    /* the session default keeps the decoder only beside a kept transformer */
    if (rc == 0 && res && (s->r->resident != H3_RESIDENT_AUTO || res->dit))
        resident_keep(res, (void **)&res->vvae, res->vvae_key, v, key, free_vvae);
    else
        video_vae_free(v);
    return rc;
}

/* The conditioning of fl2va/ref2va, for step-by-step parity checks: the presentation ids and
 * tags, every condition's normalized latents (1, 24, Lt, lh, lw) and reference audio rows
 * (2N, 32), and the prepared pixels of single-frame conditions (H, W, 3) uint8. */
static int dump_conditioning(gen *s, st_writer *w, h3_err *e) {
    if (s->task == H3_T2VA) return 0;
    int64_t L[1] = {s->pres.L};
    if (st_writer_add(w, "prompt_ids", H3_I64, 1, L, s->pres.ids, e) ||
        st_writer_add(w, "text_token_tags", H3_I64, 1, L, s->pres.tags, e))
        return -1;
    for (int i = 0; i < s->cond.n; i++) {
        const cond_item *it = &s->cond.items[i];
        char name[64];
        if (it->latents) {
            int64_t sh[5] = {1, VIDEO_CHANNELS, it->Lt, it->lh, it->lw};
            snprintf(name, sizeof name, "condition.%d.latents", i);
            if (st_writer_add(w, name, H3_F32, 5, sh, it->latents, e)) return -1;
        }
        if (it->audio_rows) {
            int64_t sh[2] = {2 * it->audio_latents, AUDIO_CHANNELS};
            snprintf(name, sizeof name, "condition.%d.audio_rows", i);
            if (st_writer_add(w, name, H3_F32, 2, sh, it->audio_rows, e)) return -1;
        }
        if (it->pixels && it->T == 1) {
            int64_t sh[3] = {it->H, it->W, 3};
            snprintf(name, sizeof name, "condition.%d.pixels", i);
            if (st_writer_add(w, name, H3_U8, 3, sh, it->pixels, e)) return -1;
        }
    }
    return 0;
}

/* ---- phase 4: outputs, each written atomically ---- */
static int phase_outputs(gen *s, h3_err *e) {
    const h3_request *r = s->r;
    const layout_geometry *g = &s->g;
    if (r->dump_latents) {
        st_writer *w = st_writer_new();
        int64_t vs[5] = {1, VIDEO_CHANNELS, g->num_latent_frames, g->latent_height, g->latent_width};
        int64_t as[3] = {2, AUDIO_CHANNELS, g->num_audio_latents};
        int64_t fs[4] = {s->nframes, s->out_h, s->out_w, 3};
        int64_t ws[2] = {2, s->samples};
        int rc = st_writer_add(w, "video_latents", H3_F32, 5, vs, s->video_latents, e) ||
                 st_writer_add(w, "audio_latents", H3_F32, 3, as, s->audio_latents, e) ||
                 st_writer_add(w, "frames", H3_F32, 4, fs, s->frames, e) ||
                 st_writer_add(w, "audio", H3_F32, 2, ws, s->audio, e) ||
                 dump_conditioning(s, w, e) || st_writer_save_to(w, s->o_dump, NULL, e) ||
                 h3_outfile_commit(s->o_dump, 1, e);
        st_writer_free(w);
        if (rc) return -1;
    }
    h3_frames_view fv = {.frames = (int)s->nframes, .height = s->out_h, .width = s->out_w, .f32 = s->frames};
    if (r->output && r->output[0]) { /* encoded during the decode; flushed and renamed into place here */
        progress_begin(&s->pg, "mux MP4", 0);
        int rc = !s->mp4 || s->mp4_frames != s->nframes
                     ? h3_fail(e, "-o %s: %lld of %lld frames were encoded", r->output, (long long)s->mp4_frames,
                               (long long)s->nframes)
                     : h3_mp4_writer_close(s->mp4, e);
        h3_mp4_writer_free(s->mp4);
        s->mp4 = NULL;
        if (!rc) rc = h3_outfile_commit(s->o_mp4, 1, e);
        if (rc) return -1;
        progress_end(&s->pg);
    }
    if (r->frames_dir && (h3_write_png_frames_to(s->o_frames, &fv, e) || h3_outfile_commit(s->o_frames, 1, e))) return -1;
    if (r->wav && (h3_write_wav_to(s->o_wav, s->audio, 2, s->samples, H3_MEDIA_SAMPLE_RATE, 16, e) ||
                   h3_outfile_commit(s->o_wav, 1, e)))
        return -1;
    return 0;
}

/* Every output location checked and its temporary made before the first phase: a FIFO, a directory, an
 * unwritable folder or a --frames-dir holding other files fails here, not after hours of compute. */
static int outputs_open(gen *s, h3_err *e) {
    const h3_request *r = s->r;
    if (r->dump_latents && !(s->o_dump = h3_outfile_open("--dump-latents", r->dump_latents, H3_OUT_FILE, NULL, e))) return -1;
    if (r->output && r->output[0] && !(s->o_mp4 = h3_outfile_open("-o", r->output, H3_OUT_FILE, NULL, e))) return -1;
    if (r->frames_dir &&
        !(s->o_frames = h3_outfile_open("--frames-dir", r->frames_dir, H3_OUT_DIR, h3_out_frame_name, e)))
        return -1;
    if (r->wav && !(s->o_wav = h3_outfile_open("--wav", r->wav, H3_OUT_FILE, NULL, e))) return -1;
    return 0;
}

static void outputs_free(gen *s) { /* the uncommitted temporaries go */
    h3_outfile_free(s->o_dump), h3_outfile_free(s->o_mp4), h3_outfile_free(s->o_frames), h3_outfile_free(s->o_wav);
}

/* ---- phase 0: conditioning media, read and prepared (condition.h), then the canvas ---- */
static int resolve_geometry(gen *s, h3_err *e) {
    int aligned, h = s->r->height, w = s->r->width;
    if (h3_request_validate(s->r, &aligned, e)) return -1;
    char sdir[4096];
    path_in(s, "scheduler", sdir, sizeof sdir);
    if (sched_config_load(sdir, &s->shift_video, e)) return -1;
    path_in(s, "audio_scheduler", sdir, sizeof sdir);
    if (sched_config_load(sdir, &s->shift_audio, e)) return -1;
    if (s->task == H3_REF2VA && !h3_media_available()) /* fl2va: a MEDIA=0 build reads PPM keyframes */
        return h3_fail(e, "--ref-*: this build has no FFmpeg (MEDIA=0) to read media");
    int rh = s->r->render_height, rw = s->r->render_width;
    if (s->task == H3_FL2VA) { /* the canvas follows the first keyframe unless --width/--height say otherwise */
        progress_begin(&s->pg, "read keyframes", 0);
        /* with a render canvas the keyframes are fitted onto it (request.c: --width/--height given) */
        if (cond_set_keyframes(&s->cond, s->r->first_frame, s->r->last_frame, rw ? &rh : &h, rw ? &rw : &w, e)) return -1;
        progress_end(&s->pg);
    }
    if (!w && layout_resolve_canvas(16, 9, &h, &w, e)) return -1; /* t2va/ref2va default: 16:9 */
    if (layout_resolve_geometry(h, w, aligned, &s->g, e)) return -1; /* the output canvas's rules */
    s->out_h = h, s->out_w = w;
    if (rw) { /* docs/model/features.md 5.6: the model and the VAE run at the render canvas */
        if (rw > w || rh > h || (int64_t)rw * h != (int64_t)rh * w)
            return h3_fail(e, "--render-width/--render-height %dx%d: must not exceed the output %dx%d on either side "
                              "and must have exactly its aspect (render_w x H == render_h x W)", rw, rh, w, h);
        if (layout_resolve_geometry(rh, rw, aligned, &s->g, e)) return h3_fail_prefix(e, "--render-width/--render-height");
    }
    if (s->task == H3_REF2VA) {
        progress_begin(&s->pg, "read references", 0);
        if (cond_set_references(&s->cond, s->r, s->g.num_frames, s->g.width, s->g.height, e)) return -1;
        progress_end(&s->pg);
    }
    return 0;
}

/* ---- phase 1b: conditioning latents (VAE encoders, loaded and freed here, before the DiT) ---- */
static int phase_encode(gen *s, h3_err *e) {
    if (s->task == H3_T2VA) return 0;
    if (s->cond_hit) { /* the cached latents of the same files at the same canvas */
        const cond_cache *cc = s->cc;
        if (cc->n != s->cond.n) return h3_fail(e, "conditioning cache: %d conditions cached, %d read", cc->n, s->cond.n);
        for (int i = 0; i < s->cond.n; i++) {
            cond_item *it = &s->cond.items[i];
            it->Lt = cc->Lt[i], it->lh = cc->lh[i], it->lw = cc->lw[i], it->audio_latents = cc->audio_latents[i];
            if (cc->latents[i] && !(it->latents = dup_floats(cc->latents[i], cc->n_latents[i])))
                return h3_fail(e, "out of memory for the cached condition latents");
            if (cc->audio_rows[i] && !(it->audio_rows = dup_floats(cc->audio_rows[i], cc->n_audio[i])))
                return h3_fail(e, "out of memory for the cached condition audio rows");
        }
        return 0;
    }
    char vdir[4096], adir[4096];
    path_in(s, "vae", vdir, sizeof vdir);
    path_in(s, "audio_vae", adir, sizeof adir);
    h3_backend *be = phase_backend(s, "VAE encoders (conditions)", 1, "");
    begin_on(s, "encode conditions", be, 0);
    if (cond_set_encode(&s->cond, be, vdir, adir, e) || phase_check(be, e)) return -1;
    progress_end(&s->pg);
    return 0;
}

/* ---- the backends, made once per context (a session keeps them between generations) ---- */
struct h3_gen_ctx {
    int         cuda, threads;   /* the backend every request of this context must ask for */
    h3_backend *be, *cpu;        /* NULL until started; cpu == be with --backend cpu */
    resident    res;             /* --resident / the session default: the models kept between requests (on be / cpu) */
    cond_cache  cc;              /* the last request's conditioning (host memory) */
};

h3_gen_ctx *h3_gen_ctx_new(const h3_request *r, h3_err *e) {
    h3_gen_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        h3_fail(e, "out of memory");
        return NULL;
    }
    c->cuda = r->cuda;
    c->threads = r->threads;
    return c;
}

static void gen_ctx_stop(h3_gen_ctx *c) {
    resident_drop(&c->res); /* its models live on the backends */
    if (c->cpu != c->be) h3_backend_free(c->cpu);
    h3_backend_free(c->be);
    c->be = c->cpu = NULL;
}

int h3_gen_ctx_start(h3_gen_ctx *c, h3_err *e) {
    if (c->be) return 0;
    c->be = h3_backend_new(c->cuda ? H3_BACKEND_CUDA : H3_BACKEND_CPU, c->threads, e);
    if (c->be) c->cpu = c->cuda ? h3_backend_new(H3_BACKEND_CPU, c->threads, e) : c->be;
    if (!c->cpu) {
        h3_backend_free(c->be);
        c->be = NULL;
        return -1;
    }
    return 0;
}

int h3_gen_ctx_started(const h3_gen_ctx *c) { return c && c->be != NULL; }

void h3_gen_ctx_drop_models(h3_gen_ctx *c) {
    if (c) resident_drop(&c->res), cond_cache_free(&c->cc);
}

int h3_gen_ctx_models(const h3_gen_ctx *c, char *buf, size_t cap) {
    const resident *r = &c->res;
    int n = 0;
    if (cap) buf[0] = 0;
    const char *names[4] = {"text encoder", "transformer", "audio VAE decoder", "video VAE decoder"};
    const void *ms[4] = {r->te, r->dit, r->avae, r->vvae};
    const char *keys[4] = {r->te_key, r->dit_key, r->avae_key, r->vvae_key};
    size_t off = 0;
    if (c->cc.key) {
        int k = snprintf(buf, cap, "conditioning (%lld prompt rows, %d conditions)", (long long)c->cc.pres.L, c->cc.n);
        if (k > 0) off += (size_t)k;
    }
    for (int i = 0; i < 4; i++) {
        if (!ms[i]) continue;
        int k = snprintf(buf + off, off < cap ? cap - off : 0, "%s%s (%s)", off ? "; " : "", names[i], keys[i]);
        n++;
        if (k > 0) off += (size_t)k;
    }
    return n;
}

void h3_gen_ctx_free(h3_gen_ctx *c) {
    if (!c) return;
    gen_ctx_stop(c);
    cond_cache_free(&c->cc);
    free(c);
}

/* --profile: progress_report's table, line by line through the request's log */
static void profile_log(gen *s) {
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    if (!m) return;
    progress_report(&s->pg, m);
    fclose(m);
    for (char *line = buf, *nl; line && *line; line = nl + 1) {
        if (!(nl = strchr(line, '\n'))) nl = line + strlen(line) - 1;
        else *nl = 0;
        if (s->r->log) s->r->log(s->r->log_user, 1, line);
    }
    free(buf);
}

/* request.h's cancel flag, checked between phases: -1 with "cancelled (Ctrl-C) before PHASE" */
static int cancelled(const gen *s, const char *next, h3_err *e) {
    return (s->r->cancel && *s->r->cancel) || s->pg.stopped ? h3_fail(e, "cancelled (Ctrl-C) before the %s", next) : 0;
}

int h3_generate_in(h3_gen_ctx *c, const h3_request *r, h3_err *e) {
    if (r->cuda != c->cuda || r->threads != c->threads)
        return h3_fail(e, "--backend/--threads: the request asks for %s with %d threads, the context runs %s with %d",
                       r->cuda ? "cuda" : "cpu", r->threads, c->cuda ? "cuda" : "cpu", c->threads);
    gen s;
    memset(&s, 0, sizeof s);
    s.r = r;
    s.task = h3_request_task(r);
    progress_init(&s.pg, r->progress_out, 0);
    s.pg.cb = r->progress, s.pg.cb_user = r->progress_user;
    if (resolve_geometry(&s, e)) { /* flags and input media: the user's input is at fault */
        cond_set_free(&s.cond);
        return H3_GENERATE_BAD_INPUT;
    }
    if ((r->output && r->output[0]) || r->frames_dir || r->wav) {
        if (!h3_media_available()) {
            cond_set_free(&s.cond);
            return h3_fail(e, "-o/--frames-dir/--wav: this build has no FFmpeg (MEDIA=0); use -o '' --dump-latents");
        }
    }
    if (outputs_open(&s, e)) {
        outputs_free(&s);
        cond_set_free(&s.cond);
        return H3_GENERATE_BAD_INPUT;
    }
    char *ckey = cond_key(&s); /* NULL: an unreadable condition file (the phases say which) */
    s.cond_hit = ckey && c->cc.key && !strcmp(ckey, c->cc.key);
    /* every shard of every phase this request needs, headers and sizes only, before the first phase: a truncated
     * VAE or DiT shard fails here, not after the text encoder and the denoising (docs/robustness.md) */
    if (h3_preflight_weights(r, s.task, !s.cond_hit, e)) {
        free(ckey);
        outputs_free(&s);
        cond_set_free(&s.cond);
        return H3_GENERATE_BAD_INPUT;
    }
    /* made here on the first request, after its inputs were checked (a bad request starts no GPU) */
    if (h3_gen_ctx_start(c, e)) {
        outputs_free(&s);
        free(ckey);
        cond_set_free(&s.cond);
        return -1;
    }
    s.be = c->be;
    s.cpu = c->cpu;
    s.cc = &c->cc;
    if (r->resident) s.res = &c->res;
    else resident_drop(&c->res); /* !resident off: the kept models go */
    if (r->resident == H3_RESIDENT_AUTO) resident_free(&c->res, 1, 0); /* what --resident kept of the others goes */
    if (r->cuda) s.pg.device = s.be; /* --profile's peak GPU memory per phase */
    char canvas[64];
    if (s.out_w != s.g.width || s.out_h != s.g.height)
        snprintf(canvas, sizeof canvas, "%dx%d (rendered at %dx%d)", s.out_w, s.out_h, s.g.width, s.g.height);
    else
        snprintf(canvas, sizeof canvas, "%dx%d", s.g.width, s.g.height);
    gen_log(r, "%s %s, %d frames (%d latent), %d audio latents, %d steps, seed %llu, %s on %s%s",
            s.task == H3_T2VA ? "t2va" : s.task == H3_FL2VA ? "fl2va" : "ref2va", canvas, s.g.num_frames,
            s.g.num_latent_frames, s.g.num_audio_latents, r->steps, (unsigned long long)r->seed,
            r->bf16 ? "bf16" : "fp32", h3_backend_name(s.be), r->backend_note ? r->backend_note : "");
    if (r->reuse > 1) {
        gen_log(r, "--reuse %d: %d model evaluations for %d passes", r->reuse,
                denoise_fresh_passes(r->steps, r->reuse), r->steps);
        if (r->steps >= 2 && r->steps <= 7)
            gen_log(r, "warning: --reuse %d with %d steps: keep reuse at 1 for 7 steps or fewer "
                            "(docs/model/features.md 5.1)", r->reuse, r->steps);
    }
    pin_prefetch pf = {0};
    int rc = cancelled(&s, "text encoder", e);
    if (!rc) rc = phase_text(&s, e);
    if (!rc) rc = cancelled(&s, "conditioning encoders", e);
    if (!rc) rc = phase_encode(&s, e);
    if (!rc && !s.cond_hit) cond_cache_store(&s, &c->cc, ckey), ckey = NULL; /* the store owns the key */
    free(ckey);
    if (!rc) pin_prefetch_start(&s, &pf); /* after the uploads of the text phase, beside the DiT's seconds */
    if (!rc) rc = cancelled(&s, "transformer", e);
    if (!rc) rc = phase_dit(&s, e);
    if (!rc) rc = cancelled(&s, "audio decoder", e);
    if (!rc) rc = phase_audio(&s, e);
    pin_prefetch_join(&pf); /* before the decoder takes its buffers, and on every path */
    if (!rc) rc = cancelled(&s, "video decoder", e);
    if (!rc) rc = phase_video(&s, e);
    if (!rc) rc = cancelled(&s, "outputs", e);
    if (!rc) rc = phase_outputs(&s, e);
    if (!rc && r->profile) profile_log(&s);
    if (rc && s.bad_input) rc = H3_GENERATE_BAD_INPUT;
    /* the session default: a failed generation (out of memory, say) keeps nothing; one that shows no room keeps
     * nothing from then on */
    if (r->resident == H3_RESIDENT_AUTO && rc) {
        resident_free(&c->res, 0, 1);
    } else if (r->resident == H3_RESIDENT_AUTO && !resident_auto_fits(&s, c->be, &c->res)) {
        resident_free(&c->res, 0, 1);
        c->res.auto_off = 1;
    }
    h3_mp4_writer_free(s.mp4);
    outputs_free(&s); /* a failed run: the temporaries go, nothing half-written stays */
    presentation_free(&s.pres);
    cond_set_free(&s.cond);
    free(s.text);
    free(s.video_latents);
    free(s.audio_latents);
    free(s.frames);
    free(s.audio);
    h3_err sticky;
    if (rc && (h3_backend_check(c->be, &sticky) || h3_backend_check(c->cpu, &sticky)))
        gen_ctx_stop(c); /* a backend with a recorded failure is not reused: the next request makes new ones */
    return rc;
}

int h3_generate(const h3_request *r, h3_err *e) {
    h3_gen_ctx *c = h3_gen_ctx_new(r, e);
    if (!c) return -1;
    int rc = h3_generate_in(c, r, e);
    h3_gen_ctx_free(c);
    return rc;
}
