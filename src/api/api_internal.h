/* libh3's public API (include/h3.h) over the pipeline (src/pipeline/): the engine object, the mapping of
 * h3_params to an h3_request, the sink trampolines and the wording of errors (docs/api.md). */
#ifndef H3_API_INTERNAL_H
#define H3_API_INTERNAL_H

#include <pthread.h>
#include <signal.h>

#include "../../include/h3.h"
#include "../core/error.h"
#include "../pipeline/generate.h"
#include "../pipeline/request.h"

#define API_PATH_CAP 4096
#define API_NOTE_CAP 512

struct h3_engine {
    h3_engine_options     opt;           /* as given; the strings below are our copies */
    char                  dir[API_PATH_CAP];
    char                  transformer[API_PATH_CAP]; /* options.transformer, "" when none */
    int                   cuda;          /* the resolved backend */
    int                   bf16, quant_fp8, quant_int8, vae_fp8, attention_sage8, preset_fast;
    char                  note[API_NOTE_CAP];   /* why "auto" chose the CPU, or "" */
    char                  header_note[API_NOTE_CAP + 16]; /* " (auto: ...)" on the generation's first log line */
    h3_gen_ctx           *ctx;
    pthread_mutex_t       lock;          /* generations on one engine are serialized */
    volatile sig_atomic_t cancel;        /* h3_engine_cancel, a sink's nonzero return */
    int                   status;
    h3_err                err;
    int                   opened;        /* 0: the engine only holds h3_engine_open's error */
};

/* The temporary files that carry in-memory images and audio to the pipeline's file readers (lossless: PNG or PPM
 * for RGB8, 32-bit float WAV for audio), removed after the generation. */
typedef struct api_temps {
    char dir[API_PATH_CAP]; /* a mkdtemp folder, "" when none was needed */
    char paths[2 + H3_MAX_REFERENCES][API_PATH_CAP];
    int  n;
} api_temps;

/* h3_params -> the pipeline's request (engine settings included); in-memory inputs written into t. */
int  api_request_from(const h3_engine *eng, const h3_params *p, h3_request *r, api_temps *t, h3_err *e);
void api_temps_remove(api_temps *t);

/* The pipeline's request hooks for the caller's sinks and log (the request's user pointers get a api_hooks). */
typedef struct api_hooks {
    h3_engine      *eng;
    const h3_sinks *sinks;
} api_hooks;
void api_hooks_install(api_hooks *h, h3_request *r);

/* The status of a pipeline failure: rc (H3_GENERATE_BAD_INPUT or -1) and the message. */
int  api_status_of(int rc, const char *msg, int cancelled);
/* The message in the API's terms: the CLI's flags named by the h3_params / h3_engine_options fields (in place). */
void api_reword(char *msg, size_t cap);

/* --backend auto: 1 = CUDA (this build has it and GPU `device` is usable), 0 = the CPU with why filled. */
int  api_backend_auto(int device, char *why, size_t cap);

#endif
