/* The helpers every phase of `h3 generate` uses (gen_state.h). */
#include "gen_state.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "../io/snapshot.h"

void gen_log(const h3_request *r, const char *fmt, ...) {
    if (!r->log) return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    r->log(r->log_user, 0, line);
}

void path_in(const gen *s, const char *sub, char *out, size_t cap) { snapshot_path(out, cap, s->r->model_dir, sub); }

/* "folder|settings|weights": random weights are keyed by their seed */
void model_key(const gen *s, const char *dir, const char *settings, uint64_t salt, char *key) {
    if (s->r->random_weights)
        snprintf(key, RKEY, "%s|%s|random %llx", dir, settings, (unsigned long long)(s->r->seed ^ salt));
    else
        snprintf(key, RKEY, "%s|%s|file", dir, settings);
}

/* The video decoder a request decodes with on be: its folder, parts and cache key. On the GPU, --precision bf16
 * decodes with the bf16 decoder (the reference decodes under autocast); the CPU keeps the fp32 decoder, the
 * numerical reference, unless --vae-quant fp8 asks for the FP8 decoder (an explicit choice, on either backend). */
int video_decoder_key(const gen *s, const h3_backend *be, char *dir, size_t cap, char *key) {
    path_in(s, "vae", dir, cap);
    const int parts = VIDEO_VAE_DECODER | (s->r->bf16 && be->kind == H3_BACKEND_CUDA ? VIDEO_VAE_BF16 : 0) |
                      (s->r->vae_fp8 ? VIDEO_VAE_FP8 : 0);
    char settings[32];
    snprintf(settings, sizeof settings, "parts %d", parts);
    model_key(s, dir, settings, RANDOM_VIDEO, key);
    return parts;
}

/* The backend of one phase: the requested one when all of the phase's ops have twins there, else
 * the CPU. Says so on stderr (one line per phase). */
h3_backend *phase_backend(gen *s, const char *phase, int has_cuda_twins, const char *why_not) {
    h3_backend *be = has_cuda_twins ? s->be : s->cpu;
    int moved = be != s->be;
    gen_log(s->r, "%s on %s%s%s%s", phase, h3_backend_name(be), moved ? " (" : "", moved ? why_not : "",
            moved ? ")" : "");
    return be;
}

/* A progress phase named "<name> [<backend>]" (--profile's table shows where each phase ran). */
void begin_on(gen *s, const char *name, const h3_backend *be, int64_t total) {
    char label[48];
    snprintf(label, sizeof label, "%s [%s]", name, h3_backend_name(be));
    progress_begin(&s->pg, label, total);
}

/* After a phase on the GPU: waits for it and turns the first recorded failure into the error. */
int phase_check(h3_backend *be, h3_err *e) {
    h3_sync(be);
    return h3_backend_check(be, e);
}
