/* `h3 serve` (docs/serve.md): a local HTTP service on the public API. Three parts:
 *   cmd_serve_parse.c  pure parsers of untrusted request bytes (the request JSON / multipart body -> a job spec,
 *                      Range, the path routing, base64), fuzzed by fuzz/fuzz_serve.c; no engine, no files
 *   cmd_serve_jobs.c   the job table, its persistence under --data, the worker thread on the engine, events
 *   cmd_serve.c        the flags, the HTTP server (libmicrohttpd), auth, the handlers; cmd_serve_page.c the page */
#ifndef H3_CMD_SERVE_H
#define H3_CMD_SERVE_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "h3.h"

#define SERVE_ID_LEN 38    /* "video_" + 32 hex digits */
#define SERVE_MSG_CAP 512

/* ---- request parsing (cmd_serve_parse.c) ---- */

/* an uploaded input: the role it plays and its bytes (decoded from base64 or a multipart part) */
enum { SERVE_IN_FIRST = 0, SERVE_IN_LAST = 1, SERVE_IN_REF = 2 };
typedef struct serve_input {
    int            role;      /* SERVE_IN_* */
    int            kind;      /* H3_REFERENCE_* for SERVE_IN_REF */
    unsigned char *data;      /* owned */
    size_t         len;
    unsigned char *audio;     /* H3_REFERENCE_VIDEO_AUDIO: the audio file's bytes (owned) */
    size_t         audio_len;
} serve_input;

#define SERVE_MAX_INPUTS (2 + H3_MAX_REFERENCES)

/* A validated-by-syntax job request (no library call: the fuzz target links cmd_serve_parse.c alone). The ranges and combinations are checked later by h3_engine_check (the rules
 * the CLI uses), after the inputs were written. */
typedef struct serve_spec {
    json_t     *settings;     /* the accepted fields without input bytes (persisted, echoed, re-run by the page) */
    const char *prompt;       /* inside settings */
    int         width, height, frames, steps, reuse, layers, core_reuse, token_reduction; /* 0 = not given */
    int         render_width, render_height, reference_rope, previews;
    int         ref_image_size;                                               /* -1 = not given */
    double      seconds;
    uint64_t    seed;
    int         seed_given;
    serve_input inputs[SERVE_MAX_INPUTS];
    int         ninputs;
} serve_spec;

/* Limits of one request (bytes). */
typedef struct serve_limits {
    size_t max_body, max_upload;
} serve_limits;

/* The request body (JSON, or multipart/form-data when content_type says so) -> *s. 0, or -1 with the one-line
 * message in err (the cause of a 400; *status 413 when an upload is over max_upload). s is reset first. */
int  serve_spec_parse(const char *content_type, const char *body, size_t len, const serve_limits *lim, serve_spec *s,
                      int *status, char *err, size_t cap);
/* The persisted settings (job.json) -> *s without inputs (the job's input files are on disk). 0 or -1. */
int  serve_spec_from_settings(json_t *settings, serve_spec *s, char *err, size_t cap);
void serve_spec_free(serve_spec *s);
/* POST /v1/videos/{id}/remix (docs/serve.md "Remix"): the body (JSON or empty: no overrides) holds fields of the
 * request but no uploads; they replace the original's settings (a size replaces width/height and the reverse,
 * seconds replaces frames and the reverse) and the result is checked by the request's own rules and messages.
 * 0 = *s (no inputs: the caller adds the original's), or -1 with err and *status (400, 415). */
int  serve_remix_parse(const char *content_type, const char *body, size_t len, json_t *original, serve_spec *s,
                       int *status, char *err, size_t cap);

/* Base64 (RFC 4648, padding optional, no whitespace; a "data:...;base64," prefix skipped). malloc'd bytes or NULL. */
unsigned char *serve_base64_decode(const char *s, size_t n, size_t *out_len);
/* The base64 text of data (malloc'd, NUL-terminated). */
char *serve_base64_encode(const unsigned char *data, size_t n);

/* Range: "bytes=A-B" / "A-" / "-N" against a file of size bytes. 0: no range or one to ignore (serve it all),
 * 1: *off / *len set (206), -1: not satisfiable (416). */
int serve_parse_range(const char *h, int64_t size, int64_t *off, int64_t *len);

/* The routes. */
enum {
    SERVE_R_NOT_FOUND = 0, SERVE_R_PAGE, SERVE_R_HEALTH, SERVE_R_MODELS, SERVE_R_AUTH, SERVE_R_VIDEOS,
    SERVE_R_VIDEO, SERVE_R_CONTENT, SERVE_R_EVENTS, SERVE_R_REMIX,
};
/* method + url (without the query) -> a route; *allowed = 0 when the path exists but not for this method; id gets
 * the job id of /v1/videos/{id}[/...] (only the exact id syntax is taken). */
int serve_route(const char *method, const char *url, char id[SERVE_ID_LEN + 1], int *allowed);
/* 1 when s is a job id: "video_" + 32 lowercase hex digits */
int serve_is_id(const char *s);

/* ---- the job table and the worker (cmd_serve_jobs.c) ---- */

enum { SERVE_QUEUED = 0, SERVE_IN_PROGRESS = 1, SERVE_COMPLETED = 2, SERVE_FAILED = 3 };

typedef struct serve_job {
    char              id[SERVE_ID_LEN + 1];
    uint64_t          seq;            /* FIFO order */
    int               status;
    int               progress;       /* 0..100 */
    char              phase[64];
    double            eta;            /* seconds left of the whole job (job_eta in cmd_serve_jobs.c), -1 unknown */
    double            phase_eta;      /* seconds left of the current phase (the progress sink's), -1 unknown */
    int64_t           created_at, started_at, completed_at;
    char              error[SERVE_MSG_CAP];
    char              error_code[32];
    json_t           *settings;
    json_t           *inputs;         /* [{role, kind, file[, audio_file]}]: the uploads, in order */
    char              remixed_from[SERVE_ID_LEN + 1]; /* the job a remix copied ("" = none) */
    int               frames;         /* the aligned frame count (h3_engine_check) */
    int               cancel;         /* DELETE: the sinks stop the generation */
    int               deleted;        /* gone from the table; freed when refs reaches 0 */
    int               refs;           /* the table's reference + each event stream's */
    unsigned          version;        /* bumped on every change (events) */
    /* the running job's pass previews as data URLs, in order: a stream sends each one it has not sent, so none is
     * lost to a slow reader; freed once the job has finished and no stream or worker holds it (refs back to 1) */
    char            **previews;
    int              *preview_pass;
    int               npreviews, preview_cap, preview_passes;
    struct serve_job *next;
} serve_job;

/* The phases of one generation in the order they ran, with their durations: the last completed job's predict
 * the running one's remaining time when both have the same settings key (docs/serve.md "The video object"). */
enum { SERVE_PHASES = 24 };
typedef struct serve_timeline {
    char   key[160];                 /* size, frames, steps, preset, reuse, layers: what the durations depend on */
    int    n;
    char   name[SERVE_PHASES][48];
    double secs[SERVE_PHASES];
} serve_timeline;

typedef struct serve_server {
    pthread_mutex_t mu;
    pthread_cond_t  work;            /* the worker waits for a queued job */
    pthread_cond_t  changed;         /* event streams wait for a job's change */
    serve_job      *jobs;            /* in seq order */
    uint64_t        next_seq;
    int             queue_max;       /* jobs queued or running at most */
    int             stop;
    char            data[1024];      /* --data */
    h3_engine      *eng;             /* the worker's */
    h3_engine      *check;           /* request checks on the HTTP threads (never generates) */
    pthread_mutex_t check_mu;
    pthread_t       worker;
    serve_limits    lim;
    const char     *snapshot;
    int             pending;         /* submissions between the queue check and their entry in the table */
    int64_t         started;         /* the server's start (healthz's uptime) */
    serve_timeline  last, cur;       /* the phases of the last finished job and of the running one (the job's ETA) */
} serve_server;

/* Loads the table from --data (interrupted jobs marked failed, stale temporaries swept). 0 or -1 with err. */
int  serve_jobs_load(serve_server *sv, char *err, size_t cap);
int  serve_jobs_start(serve_server *sv, char *err, size_t cap);    /* the worker thread */
void serve_jobs_stop(serve_server *sv);                             /* cancels the running job, joins the worker */
/* Submits a parsed spec: writes its inputs, checks it by the CLI's rules, queues it; remixed_from (or NULL) is
 * the job it copies. 0 = *out (a reference the caller releases with serve_job_release); else the HTTP status
 * (400, 429, 500) with err. */
int  serve_jobs_submit(serve_server *sv, serve_spec *s, const char *remixed_from, serve_job **out, char *err,
                       size_t cap);
/* POST /v1/videos/{id}/remix: the job of id again with the body's overrides (serve_remix_parse) and a copy of its
 * uploads. 0 = *out as serve_jobs_submit; else the HTTP status (400, 404, 413, 415, 429, 500) with err. */
int  serve_jobs_remix(serve_server *sv, const char *id, const char *content_type, const char *body, size_t len,
                      serve_job **out, char *err, size_t cap);
/* The job of id with a reference taken, or NULL. */
serve_job *serve_jobs_get(serve_server *sv, const char *id);
void serve_job_release(serve_server *sv, serve_job *j);
/* DELETE: a queued or running job is cancelled (failed, code "cancelled"), a finished one deleted. 1 deleted,
 * 0 cancelled, -1 unknown id. */
int  serve_jobs_delete(serve_server *sv, const char *id);
/* The video object of j (the caller holds sv->mu). */
json_t *serve_job_json(const serve_job *j);
/* The path of a job's file (video.mp4, job.json, input-K.EXT) under --data: built from the table's id only. */
void serve_job_path(const serve_server *sv, const char *id, const char *name, char *out, size_t cap);

/* ---- the page (cmd_serve_page.c) ---- */
/* the page's HTML (web/index.html, embedded at build time) */
const unsigned char *serve_page(size_t *len);

/* An RGB8 PNG (stored deflate blocks: no compression library) from float RGB in [0, 1], malloc'd; NULL on OOM. */
unsigned char *serve_png_encode(const float *rgb, int width, int height, int step, size_t *out_len);

#endif
