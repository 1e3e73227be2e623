/* `h3 serve`: a local HTTP service on the public API (docs/serve.md). The flags, the server (libmicrohttpd, a
 * thread per connection: the event streams block), authentication, the limits and the handlers of the routes;
 * the parsers are cmd_serve_parse.c, the jobs and the worker cmd_serve_jobs.c, the page cmd_serve_page.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cmd_serve.h"
#include "core/text.h"

typedef struct serve_http {
    serve_server *sv;
    char          key[512];      /* --api-key-file's key, "" = no authentication */
    char          session[65];   /* the page's cookie value (random per start; docs/serve.md "Authentication") */
} serve_http;

/* one request's state: its body, read in pieces */
typedef struct conn_state {
    char  *body;
    size_t len, cap;
    int    too_big;
} conn_state;

static void usage(FILE *f) {
    fprintf(f,
            "usage: h3 serve -d SNAPSHOT [--host 127.0.0.1] [--port 8080] [--data DIR] [--api-key-file F] [--queue N]\n"
            "                [engine flags]      a local HTTP service generating videos (docs/serve.md)\n"
            "  -d, --model-dir DIR      MiniMax-H3 snapshot (diffusers layout at the root)\n"
            "  --host ADDR              numeric IPv4/IPv6 address to bind [127.0.0.1]; an address that is not loopback\n"
            "                           needs --api-key-file\n"
            "  --port N                 TCP port, 0 = any free one (the chosen port is printed) [8080]\n"
            "  --data DIR               job table and outputs, kept across restarts [./h3-serve-data]\n"
            "  --api-key-file F         every request but GET /healthz and the page needs 'Authorization: Bearer KEY'\n"
            "                           (the file's first line) or the page's session cookie\n"
            "  --queue N                jobs queued or running at most, 1..10000; more are refused with 429 [16]\n"
            "  --max-body BYTES         request body limit, 413 above [67108864]\n"
            "  --max-upload BYTES       one uploaded keyframe / reference limit, 413 above [33554432]\n"
            "  engine flags (as h3 generate): --backend cpu|cuda|auto, --device N, --threads N, --parallel N, --precision bf16|fp32,\n"
            "  --quant none|fp8|int8, --int8-fc2-groups, --attention exact|sage8, --vae-quant none|fp8,\n"
            "  --preset exact|fast, --transformer FILE, --ssd-streaming, --random-weights (benchmarks: noise),\n"
            "  --resident               keep every phase's model loaded between jobs (default: the session's auto rule,\n"
            "                           the transformer and the video decoder when they fit; docs/session.md)\n");
}

/* ---- responses ---- */

static enum MHD_Result queue(struct MHD_Connection *c, unsigned status, struct MHD_Response *r) {
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result respond_json(struct MHD_Connection *c, unsigned status, json_t *o) {
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!text) return MHD_NO;
    size_t n = strlen(text);
    text = realloc(text, n + 2);
    text[n] = '\n', text[n + 1] = 0;
    struct MHD_Response *r = MHD_create_response_from_buffer(n + 1, text, MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    return queue(c, status, r);
}

static enum MHD_Result respond_error(struct MHD_Connection *c, unsigned status, const char *code, const char *msg) {
    return respond_json(c, status, json_pack("{s:{s:s, s:s, s:s}}", "error", "message", msg, "type",
                                             status == 401 ? "authentication_error"
                                             : status >= 500 ? "server_error" : "invalid_request_error",
                                             "code", code));
}

/* ---- authentication ---- */

static int same_secret(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    unsigned char d = na != nb;
    for (size_t i = 0; i < na && i < nb; i++) d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

static int authenticated(serve_http *h, struct MHD_Connection *c) {
    if (!h->key[0]) return 1;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (a && !strncmp(a, "Bearer ", 7) && same_secret(a + 7, h->key)) return 1;
    const char *ck = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, "h3_session");
    return ck && same_secret(ck, h->session);
}

/* ---- handlers ---- */

static enum MHD_Result h_page(struct MHD_Connection *c) {
    size_t n;
    const unsigned char *page = serve_page(&n);
    struct MHD_Response *r = MHD_create_response_from_buffer(n, (void *)page, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self'; img-src 'self' data:; media-src 'self'; style-src 'unsafe-inline'; "
                            "script-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'");
    return queue(c, MHD_HTTP_OK, r);
}

static void counts(serve_server *sv, int *queued, int *running, int *total) {
    *queued = *running = *total = 0;
    for (serve_job *j = sv->jobs; j; j = j->next)
        (*total)++, *queued += j->status == SERVE_QUEUED, *running += j->status == SERVE_IN_PROGRESS;
}

static enum MHD_Result h_health(serve_http *h, struct MHD_Connection *c) {
    int q, r, t;
    pthread_mutex_lock(&h->sv->mu);
    counts(h->sv, &q, &r, &t);
    pthread_mutex_unlock(&h->sv->mu);
    return respond_json(c, 200, json_pack("{s:s, s:s, s:i, s:i, s:i, s:I}", "status", "ok", "version", h3_version(),
                                          "queued", q, "in_progress", r, "jobs", t, "uptime_s",
                                          (json_int_t)(time(NULL) - h->sv->started)));
}

static enum MHD_Result h_models(serve_http *h, struct MHD_Connection *c) {
    json_t *tasks = json_array();
    static const char *const names[] = {"t2va", "fl2va", "ref2va"};
    pthread_mutex_lock(&h->sv->check_mu);
    for (int t = 0; t < 3; t++)
        if (h3_engine_has_task(h->sv->check, t) == H3_OK) json_array_append_new(tasks, json_string(names[t]));
    pthread_mutex_unlock(&h->sv->check_mu);
    return respond_json(c, 200, json_pack("{s:s, s:[{s:s, s:s, s:s, s:I, s:s, s:o, s:b}]}", "object", "list", "data",
                                          "id", "h3", "object", "model", "owned_by", "h3", "created",
                                          (json_int_t)h->sv->started, "backend", h3_engine_backend(h->sv->eng), "tasks",
                                          tasks, "media", h3_has_media()));
}

static enum MHD_Result h_auth(serve_http *h, struct MHD_Connection *c) {
    /* reached only when authenticated: the page trades the key for a session cookie its <video> and event stream
     * carry (they cannot send headers) */
    char cookie[160];
    snprintf(cookie, sizeof cookie, "h3_session=%s; Path=/; HttpOnly; SameSite=Strict", h->session);
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (h->key[0]) MHD_add_response_header(r, "Set-Cookie", cookie);
    MHD_add_response_header(r, "Cache-Control", "no-store");
    return queue(c, MHD_HTTP_NO_CONTENT, r);
}

/* a submission's answer: 202 and the queued job's video object, or the error of status */
static enum MHD_Result respond_queued(serve_http *h, struct MHD_Connection *c, int status, serve_job *j, const char *err) {
    if (status)
        return respond_error(c, (unsigned)status,
                             status == 429 ? "queue_full" : status == 404 ? "not_found" : status == 413 ? "too_large"
                             : status < 500 ? "invalid_request" : "server_error", err);
    pthread_mutex_lock(&h->sv->mu);
    json_t *o = serve_job_json(j);
    pthread_mutex_unlock(&h->sv->mu);
    serve_job_release(h->sv, j);
    return respond_json(c, MHD_HTTP_ACCEPTED, o);
}

static enum MHD_Result h_submit(serve_http *h, struct MHD_Connection *c, conn_state *cs) {
    serve_spec s;
    char err[SERVE_MSG_CAP];
    int status;
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    if (serve_spec_parse(ct, cs->body ? cs->body : "", cs->len, &h->sv->lim, &s, &status, err, sizeof err))
        return respond_error(c, (unsigned)status, status == 413 ? "too_large" : "invalid_request", err);
    serve_job *j = NULL;
    status = serve_jobs_submit(h->sv, &s, NULL, &j, err, sizeof err);
    serve_spec_free(&s);
    return respond_queued(h, c, status, j, err);
}

/* POST /v1/videos/{id}/remix (docs/serve.md "Remix") */
static enum MHD_Result h_remix(serve_http *h, struct MHD_Connection *c, conn_state *cs, const char *id) {
    char err[SERVE_MSG_CAP];
    serve_job *j = NULL;
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Type");
    int status = serve_jobs_remix(h->sv, id, ct, cs->body ? cs->body : "", cs->len, &j, err, sizeof err);
    return respond_queued(h, c, status, j, err);
}

static enum MHD_Result h_list(serve_http *h, struct MHD_Connection *c) {
    const char *ls = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit"),
               *order = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "order"),
               *after = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "after");
    long limit = 20;
    if (ls && h3_parse_int(ls, 1, 1000, &limit))
        return respond_error(c, 400, "invalid_request", "limit expects an integer in 1..1000");
    if (order && strcmp(order, "asc") && strcmp(order, "desc"))
        return respond_error(c, 400, "invalid_request", "order must be asc or desc");
    int asc = order && !strcmp(order, "asc");
    if (after && !serve_is_id(after)) return respond_error(c, 400, "invalid_request", "after must be a video id");
    json_t *data = json_array();
    pthread_mutex_lock(&h->sv->mu);
    int n = 0;
    for (serve_job *j = h->sv->jobs; j; j = j->next) n++;
    serve_job **all = malloc(sizeof *all * (size_t)(n ? n : 1));
    int k = 0;
    for (serve_job *j = h->sv->jobs; j; j = j->next) all[asc ? k : n - 1 - k] = j, k++;
    int start = 0, more = 0;
    if (after)
        for (int i = 0; i < n; i++)
            if (!strcmp(all[i]->id, after)) start = i + 1;
    for (int i = start; i < n; i++) {
        if ((long)json_array_size(data) == limit) {
            more = 1;
            break;
        }
        json_array_append_new(data, serve_job_json(all[i]));
    }
    pthread_mutex_unlock(&h->sv->mu);
    free(all);
    size_t m = json_array_size(data);
    json_t *o = json_pack("{s:s, s:o, s:b}", "object", "list", "data", data, "has_more", more);
    json_object_set_new(o, "first_id", m ? json_copy(json_object_get(json_array_get(data, 0), "id")) : json_null());
    json_object_set_new(o, "last_id", m ? json_copy(json_object_get(json_array_get(data, m - 1), "id")) : json_null());
    return respond_json(c, 200, o);
}

static enum MHD_Result h_video(serve_http *h, struct MHD_Connection *c, const char *id, int del) {
    if (del) {
        int rc = serve_jobs_delete(h->sv, id);
        if (rc < 0) return respond_error(c, 404, "not_found", "no video with this id");
        if (rc == 1) return respond_json(c, 200, json_pack("{s:s, s:s, s:b}", "id", id, "object", "video.deleted", "deleted", 1));
    }
    serve_job *j = serve_jobs_get(h->sv, id);
    if (!j) return respond_error(c, 404, "not_found", "no video with this id");
    pthread_mutex_lock(&h->sv->mu);
    json_t *o = serve_job_json(j);
    if (del) json_object_set_new(o, "cancel_requested", json_true());
    pthread_mutex_unlock(&h->sv->mu);
    serve_job_release(h->sv, j);
    return respond_json(c, 200, o);
}

static enum MHD_Result h_content(serve_http *h, struct MHD_Connection *c, const char *id) {
    serve_job *j = serve_jobs_get(h->sv, id);
    if (!j) return respond_error(c, 404, "not_found", "no video with this id");
    pthread_mutex_lock(&h->sv->mu);
    int st = j->status;
    pthread_mutex_unlock(&h->sv->mu);
    serve_job_release(h->sv, j);
    if (st != SERVE_COMPLETED)
        return respond_error(c, 409, "not_ready", st == SERVE_FAILED ? "the video failed: no content" : "the video is not finished yet");
    char path[1200];
    serve_job_path(h->sv, id, "video.mp4", path, sizeof path); /* the id is the table's (looked up above) */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat stt;
    if (fd < 0 || fstat(fd, &stt) || !S_ISREG(stt.st_mode)) {
        if (fd >= 0) close(fd);
        return respond_error(c, 500, "server_error", "the video's file is missing");
    }
    int64_t off = 0, len = stt.st_size;
    int rr = serve_parse_range(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range"), stt.st_size, &off, &len);
    if (rr < 0) {
        close(fd);
        char cr[64];
        snprintf(cr, sizeof cr, "bytes */%lld", (long long)stt.st_size);
        struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Content-Range", cr);
        return queue(c, MHD_HTTP_RANGE_NOT_SATISFIABLE, r);
    }
    struct MHD_Response *r = MHD_create_response_from_fd_at_offset64((uint64_t)len, fd, (uint64_t)off);
    if (!r) return close(fd), MHD_NO;
    MHD_add_response_header(r, "Content-Type", "video/mp4");
    MHD_add_response_header(r, "Accept-Ranges", "bytes");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    if (rr == 1) {
        char cr[96];
        snprintf(cr, sizeof cr, "bytes %lld-%lld/%lld", (long long)off, (long long)(off + len - 1), (long long)stt.st_size);
        MHD_add_response_header(r, "Content-Range", cr);
    }
    return queue(c, rr == 1 ? MHD_HTTP_PARTIAL_CONTENT : MHD_HTTP_OK, r);
}

/* ---- server-sent events: the job's state on every change, a preview after every denoising pass ---- */

typedef struct sse_stream {
    serve_http *h;
    serve_job  *j;
    unsigned    version;
    int         previews_sent; /* the job's previews this stream has sent */
    int         first, done;
    char       *buf;
    size_t      n, off;
} sse_stream;

static void sse_append(sse_stream *s, const char *event, json_t *o) {
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text) return;
    size_t add = strlen(event) + strlen(text) + 32;
    char *b = realloc(s->buf, s->n + add);
    if (!b) return free(text);
    s->buf = b;
    s->n += (size_t)sprintf(b + s->n, "event: %s\ndata: %s\n\n", event, text);
    free(text);
}

static ssize_t sse_read(void *cls, uint64_t pos, char *out, size_t max) {
    (void)pos;
    sse_stream *s = cls;
    if (s->off == s->n) {
        free(s->buf), s->buf = NULL, s->n = s->off = 0;
        if (s->done) return MHD_CONTENT_READER_END_OF_STREAM;
        serve_server *sv = s->h->sv;
        pthread_mutex_lock(&sv->mu);
        int timed_out = 0;
        while (!s->first && !sv->stop && !s->j->deleted && s->j->version == s->version && !timed_out) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 15;
            timed_out = pthread_cond_timedwait(&sv->changed, &sv->mu, &ts) == ETIMEDOUT;
        }
        serve_job *j = s->j;
        if (j->deleted || sv->stop) {
            sse_append(s, j->deleted ? "deleted" : "shutdown", json_pack("{s:s}", "id", j->id));
            s->done = 1;
        } else if (j->version != s->version || s->first) {
            /* a stream opened on a finished job gets its done event alone; a followed one every preview */
            int end = j->status == SERVE_COMPLETED || j->status == SERVE_FAILED, opened_finished = end && s->first;
            s->first = 0, s->version = j->version;
            for (; !opened_finished && s->previews_sent < j->npreviews; s->previews_sent++) {
                int k = s->previews_sent;
                sse_append(s, "preview", json_pack("{s:s, s:i, s:i, s:s}", "id", j->id, "pass", j->preview_pass[k],
                                                   "passes", j->preview_passes, "image", j->previews[k]));
            }
            sse_append(s, end ? "done" : "progress", serve_job_json(j));
            s->done = end;
        }
        pthread_mutex_unlock(&sv->mu);
        if (!s->n) { /* a comment keeps the connection (and proxies) alive */
            s->buf = strdup(": keepalive\n\n");
            s->n = s->buf ? strlen(s->buf) : 0;
            if (!s->n) return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
    size_t k = s->n - s->off < max ? s->n - s->off : max;
    memcpy(out, s->buf + s->off, k);
    s->off += k;
    return (ssize_t)k;
}

static void sse_free(void *cls) {
    sse_stream *s = cls;
    serve_job_release(s->h->sv, s->j);
    free(s->buf);
    free(s);
}

static enum MHD_Result h_events(serve_http *h, struct MHD_Connection *c, const char *id) {
    serve_job *j = serve_jobs_get(h->sv, id);
    if (!j) return respond_error(c, 404, "not_found", "no video with this id");
    sse_stream *s = calloc(1, sizeof *s);
    if (!s) return serve_job_release(h->sv, j), MHD_NO;
    s->h = h, s->j = j, s->first = 1;
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, sse_read, s, sse_free);
    if (!r) return sse_free(s), MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-store");
    return queue(c, MHD_HTTP_OK, r);
}

/* ---- the request handler ---- */

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    (void)version;
    serve_http *h = cls;
    conn_state *cs = *con_cls;
    char id[SERVE_ID_LEN + 1];
    int allowed;
    int route = serve_route(method, url, id, &allowed);
    if (!cs) { /* the headers: errors that need no body are answered before it is read */
        if (!(cs = calloc(1, sizeof *cs))) return MHD_NO;
        *con_cls = cs;
        if (route == SERVE_R_NOT_FOUND) return respond_error(c, 404, "not_found", "no such path");
        if (!allowed) return respond_error(c, 405, "method_not_allowed", "method not allowed on this path");
        if (route != SERVE_R_PAGE && route != SERVE_R_HEALTH && !authenticated(h, c))
            return respond_error(c, 401, "unauthorized", "missing or wrong API key (Authorization: Bearer KEY)");
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        uint64_t n;
        if (cl && (h3_parse_u64(cl, &n) || n > h->sv->lim.max_body)) {
            char m[128];
            snprintf(m, sizeof m, "the request body is larger than the limit of %zu bytes", h->sv->lim.max_body);
            return respond_error(c, 413, "too_large", m);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cs->too_big && cs->len + *upload_size > h->sv->lim.max_body) cs->too_big = 1;
        if (!cs->too_big) {
            if (cs->len + *upload_size + 1 > cs->cap) {
                size_t cap = (cs->len + *upload_size + 1) * 2;
                if (cap > h->sv->lim.max_body + 1) cap = h->sv->lim.max_body + 1;
                char *b = realloc(cs->body, cap);
                if (!b) return MHD_NO;
                cs->body = b, cs->cap = cap;
            }
            memcpy(cs->body + cs->len, upload, *upload_size);
            cs->len += *upload_size;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (cs->too_big) {
        char m[128];
        snprintf(m, sizeof m, "the request body is larger than the limit of %zu bytes", h->sv->lim.max_body);
        return respond_error(c, 413, "too_large", m);
    }
    int del = !strcmp(method, "DELETE");
    switch (route) {
    case SERVE_R_PAGE: return h_page(c);
    case SERVE_R_HEALTH: return h_health(h, c);
    case SERVE_R_MODELS: return h_models(h, c);
    case SERVE_R_AUTH: return h_auth(h, c);
    case SERVE_R_VIDEOS: return !strcmp(method, "POST") ? h_submit(h, c, cs) : h_list(h, c);
    case SERVE_R_VIDEO: return h_video(h, c, id, del);
    case SERVE_R_CONTENT: return h_content(h, c, id);
    case SERVE_R_EVENTS: return h_events(h, c, id);
    case SERVE_R_REMIX: return h_remix(h, c, cs, id);
    default: return respond_error(c, 404, "not_found", "no such path");
    }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)cls, (void)c, (void)toe;
    conn_state *cs = *con_cls;
    if (cs) free(cs->body), free(cs);
    *con_cls = NULL;
}

/* ---- start-up ---- */

static int read_key(const char *path, char *key, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return cli_error("serve: --api-key-file %s: %s", h3_quote(path), strerror(errno));
    size_t n = fread(key, 1, cap - 1, f);
    int more = fgetc(f) != EOF && n == cap - 1;
    fclose(f);
    key[n] = 0;
    char *nl = strpbrk(key, "\r\n");
    if (nl) *nl = 0;
    else if (more) return cli_error("serve: --api-key-file %s: the key is longer than %zu bytes", h3_quote(path), cap - 2);
    n = strlen(key);
    if (n < 16) return cli_error("serve: --api-key-file %s: the key (the first line) must have at least 16 characters", h3_quote(path));
    for (size_t i = 0; i < n; i++)
        if (key[i] <= ' ' || key[i] > '~')
            return cli_error("serve: --api-key-file %s: the key must be printable ASCII without spaces", h3_quote(path));
    return 0;
}

static int parse_num(const char *flag, const char *v, long lo, long hi, long *out) {
    if (h3_parse_int(v, lo, hi, out))
        return cli_error("serve: %s expects an integer in %ld..%ld, got '%s'", flag, lo, hi, h3_quote(v));
    return 0;
}

int cmd_serve(int argc, char **argv) {
    const char *dir = NULL, *host = "127.0.0.1", *data = "h3-serve-data", *key_file = NULL;
    long port = 8080, queue_max = 16, max_body = 64l << 20, max_upload = 32l << 20, v;
    int resident = 0;
    h3_engine_options o;
    h3_engine_options_init(&o);
    o.log = cli_log;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage(stdout), 0;
        if (!strcmp(a, "--resident")) { resident = 1; continue; }
        if (!strcmp(a, "--ssd-streaming")) { o.ssd_streaming = 1; continue; }
        if (!strcmp(a, "--int8-fc2-groups")) { o.int8_fc2_groups = 1; continue; }
        if (!strcmp(a, "--random-weights")) { o.random_weights = 1; continue; }
        static const char *const takes[] = {"-d", "--model-dir", "--host", "--port", "--data", "--api-key-file", "--queue",
            "--max-body", "--max-upload", "--backend", "--device", "--threads", "--parallel", "--precision", "--quant", "--transformer",
            "--attention", "--vae-quant", "--preset", NULL};
        int known = 0;
        for (int k = 0; takes[k]; k++) known |= !strcmp(a, takes[k]);
        if (!known) return cli_error("serve: unknown option '%s' (see h3 serve --help)", h3_quote(a));
        if (i + 1 >= argc) return cli_error("serve: %s needs a value (see h3 serve --help)", a);
        const char *val = argv[++i];
        if (!strcmp(a, "-d") || !strcmp(a, "--model-dir")) dir = val;
        else if (!strcmp(a, "--host")) host = val;
        else if (!strcmp(a, "--data")) data = val;
        else if (!strcmp(a, "--api-key-file")) key_file = val;
        else if (!strcmp(a, "--port")) { if (parse_num(a, val, 0, 65535, &port)) return 2; }
        else if (!strcmp(a, "--queue")) { if (parse_num(a, val, 1, 10000, &queue_max)) return 2; }
        else if (!strcmp(a, "--max-body")) { if (parse_num(a, val, 1024, 1l << 32, &max_body)) return 2; }
        else if (!strcmp(a, "--max-upload")) { if (parse_num(a, val, 1024, 1l << 32, &max_upload)) return 2; }
        else if (!strcmp(a, "--device")) { if (parse_num(a, val, 0, 1023, &v)) return 2; o.device = (int)v; }
        else if (!strcmp(a, "--threads")) { if (parse_num(a, val, 1, 4096, &v)) return 2; o.threads = (int)v; }
        else if (!strcmp(a, "--parallel")) { if (parse_num(a, val, 1, 8, &v)) return 2; o.parallel = (int)v; }
        else if (!strcmp(a, "--backend")) o.backend = val;
        else if (!strcmp(a, "--precision")) o.precision = val;
        else if (!strcmp(a, "--quant")) o.quant = val;
        else if (!strcmp(a, "--transformer")) o.transformer = val;
        else if (!strcmp(a, "--attention")) o.attention = val;
        else if (!strcmp(a, "--vae-quant")) o.vae_quant = val;
        else if (!strcmp(a, "--preset")) o.preset = val;
    }
    /* the address: numeric only (no name lookups), loopback unless a key guards it */
    struct sockaddr_in sa4;
    struct sockaddr_in6 sa6;
    memset(&sa4, 0, sizeof sa4), memset(&sa6, 0, sizeof sa6);
    int v6 = 0, loopback;
    if (inet_pton(AF_INET, host, &sa4.sin_addr) == 1) {
        sa4.sin_family = AF_INET, sa4.sin_port = htons((uint16_t)port);
        loopback = (ntohl(sa4.sin_addr.s_addr) >> 24) == 127;
    } else if (inet_pton(AF_INET6, host, &sa6.sin6_addr) == 1) {
        sa6.sin6_family = AF_INET6, sa6.sin6_port = htons((uint16_t)port), v6 = 1;
        loopback = !memcmp(&sa6.sin6_addr, &in6addr_loopback, sizeof in6addr_loopback);
    } else {
        return cli_error("serve: --host must be a numeric IPv4 or IPv6 address (e.g. 127.0.0.1 or ::1), got '%s'", h3_quote(host));
    }
    serve_http h;
    memset(&h, 0, sizeof h);
    if (key_file && read_key(key_file, h.key, sizeof h.key)) return 2;
    if (!loopback && !h.key[0])
        return cli_error("serve: --host %s is not a loopback address: give --api-key-file (every request then needs the key)",
                         h3_quote(host));
    if (!h3_has_media()) return cli_error("serve: this build has no FFmpeg (MEDIA=0): it cannot write MP4 videos");
    if (strlen(data) >= 900) return cli_error("serve: --data: the path is longer than 900 bytes");
    unsigned char rnd[32];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) return cli_error("serve: no random bytes for the session cookie");
    for (int i = 0; i < 32; i++) snprintf(h.session + 2 * i, 3, "%02x", rnd[i]);

    serve_server *svp = calloc(1, sizeof *svp);
    if (!svp) return cli_error("serve: out of memory");
    pthread_mutex_init(&svp->mu, NULL), pthread_mutex_init(&svp->check_mu, NULL);
    pthread_cond_init(&svp->work, NULL), pthread_cond_init(&svp->changed, NULL);
    snprintf(svp->data, sizeof svp->data, "%s", data);
    svp->queue_max = (int)queue_max, svp->lim.max_body = (size_t)max_body, svp->lim.max_upload = (size_t)max_upload;
    svp->snapshot = dir, svp->started = time(NULL), svp->next_seq = 1;
    o.memory = resident ? H3_MEMORY_RESIDENT : H3_MEMORY_AUTO; /* the session's rules (docs/session.md) */
    h.sv = svp;
    int rc = 2;
    char err[SERVE_MSG_CAP];
    /* -d and the engine flags checked first in the CLI's words (flag_messages); the two engines then word their
     * messages in the API's field names, which the HTTP answers and the jobs' errors use */
    h3_engine *probe = NULL;
    o.flag_messages = 1;
    if (h3_engine_open(dir, &o, &probe) != H3_OK) {
        rc = h3_engine_status(probe) == H3_ERR_BAD_INPUT ? cli_error("serve: %s", h3_engine_error(probe))
                                                         : (fprintf(stderr, "h3: serve: %s\n", h3_engine_error(probe)), 1);
        h3_engine_close(probe);
        goto out;
    }
    h3_engine_close(probe);
    o.flag_messages = 0;
    if (h3_engine_open(dir, &o, &svp->eng) != H3_OK || h3_engine_open(dir, &o, &svp->check) != H3_OK) {
        h3_engine *bad = svp->check ? svp->check : svp->eng;
        rc = h3_engine_status(bad) == H3_ERR_BAD_INPUT ? cli_error("serve: %s", h3_engine_error(bad))
                                                       : (fprintf(stderr, "h3: serve: %s\n", h3_engine_error(bad)), 1);
        goto out;
    }
    if (serve_jobs_load(svp, err, sizeof err)) {
        rc = cli_error("serve: %s", err);
        goto out;
    }
    /* SIGINT/SIGTERM are taken by sigwait below (blocked in every thread made from here on) */
    sigset_t sigs;
    sigemptyset(&sigs), sigaddset(&sigs, SIGINT), sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    if (serve_jobs_start(svp, err, sizeof err)) {
        rc = (fprintf(stderr, "h3: serve: %s\n", err), 1);
        goto out;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | (v6 ? MHD_USE_IPv6 : 0);
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, on_request, &h, MHD_OPTION_SOCK_ADDR,
        v6 ? (struct sockaddr *)&sa6 : (struct sockaddr *)&sa4, MHD_OPTION_NOTIFY_COMPLETED, on_completed, &h,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_CONNECTION_LIMIT, (unsigned)128, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "h3: serve: cannot listen on %s port %ld: %s\n", host, port, strerror(errno));
        serve_jobs_stop(svp);
        rc = 1;
        goto out;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "h3 serve: listening on http://%s%s%s:%u (data %s, backend %s, queue %ld%s)\n", v6 ? "[" : "", host,
            v6 ? "]" : "", info ? info->port : (unsigned)port, data, h3_engine_backend(svp->eng), queue_max,
            h.key[0] ? ", API key required" : "");
    int sig = 0;
    sigwait(&sigs, &sig);
    fprintf(stderr, "h3 serve: signal %d: stopping\n", sig);
    pthread_mutex_lock(&svp->mu);
    svp->stop = 1; /* the running job stops at its next step; the event streams end */
    pthread_cond_broadcast(&svp->changed);
    pthread_mutex_unlock(&svp->mu);
    MHD_stop_daemon(d);
    serve_jobs_stop(svp);
    rc = 0;
out:
    h3_engine_close(svp->eng);
    h3_engine_close(svp->check);
    free(svp);
    return rc;
}
