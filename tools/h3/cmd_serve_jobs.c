/* `h3 serve`'s job table (docs/serve.md "Jobs"): submission (the inputs written, the request checked by
 * h3_engine_check, the rules of the CLI), one worker thread generating the queued jobs in FIFO order on the one
 * engine, the progress / preview sinks feeding the event streams, and the persistence under --data:
 *   DATA/jobs/<id>/job.json      the job (written atomically through src/io/outfile.h on every change of state)
 *   DATA/jobs/<id>/video.mp4     the output (the engine writes it atomically: it exists only when complete)
 *   DATA/jobs/<id>/input-K.EXT   the uploads (names made here, never taken from a request)
 * A restart lists the finished jobs, queues the queued ones again and marks the one that was running failed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cmd_serve.h"
#include "io/outfile.h"

static int64_t now_s(void) { return (int64_t)time(NULL); }

static const char *const status_names[] = {"queued", "in_progress", "completed", "failed"};
static const char *const role_names[] = {"first_frame", "last_frame", "reference"};
static const char *const kind_names[] = {"image", "silent_video", "video", "video_audio", "audio"};

void serve_job_path(const serve_server *sv, const char *id, const char *name, char *out, size_t cap) {
    if (snprintf(out, cap, "%s/jobs/%s%s%s", sv->data, id, name ? "/" : "", name ? name : "") >= (int)cap) out[0] = 0;
}

static int write_atomic(const char *what, const char *path, const void *data, size_t len, char *err, size_t cap) {
    h3_err e = {{0}};
    h3_outfile *o = h3_outfile_open(what, path, H3_OUT_FILE, NULL, &e);
    if (!o) return snprintf(err, cap, "%s", e.msg), -1;
    const char *p = data;
    size_t left = len;
    while (left) {
        ssize_t w = write(o->fd, p, left);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            snprintf(err, cap, "%s: write failed: %s", path, strerror(errno));
            h3_outfile_free(o);
            return -1;
        }
        p += w, left -= (size_t)w;
    }
    int rc = h3_outfile_commit(o, 1, &e);
    if (rc) snprintf(err, cap, "%s", e.msg);
    h3_outfile_free(o);
    return rc;
}

/* job.json (the caller holds sv->mu) */
static int persist(serve_server *sv, const serve_job *j) {
    json_t *o = json_pack("{s:s, s:I, s:s, s:i, s:I, s:I, s:I, s:s, s:s, s:i, s:O, s:O}", "id", j->id, "seq",
                          (json_int_t)j->seq, "status", status_names[j->status], "progress", j->progress, "created_at",
                          (json_int_t)j->created_at, "started_at", (json_int_t)j->started_at, "completed_at",
                          (json_int_t)j->completed_at, "error", j->error, "error_code", j->error_code, "frames",
                          j->frames, "settings", j->settings, "inputs", j->inputs);
    if (o && j->remixed_from[0]) json_object_set_new(o, "remixed_from_video_id", json_string(j->remixed_from));
    char *text = o ? json_dumps(o, JSON_INDENT(1) | JSON_SORT_KEYS) : NULL;
    json_decref(o);
    char path[1200], err[SERVE_MSG_CAP];
    serve_job_path(sv, j->id, "job.json", path, sizeof path);
    int rc = text ? write_atomic("job.json", path, text, strlen(text), err, sizeof err) : -1;
    if (rc) fprintf(stderr, "h3 serve: %s: %s\n", j->id, text ? err : "out of memory");
    free(text);
    return rc;
}

static void previews_free(serve_job *j) {
    for (int k = 0; k < j->npreviews; k++) free(j->previews[k]);
    free(j->previews), free(j->preview_pass);
    j->previews = NULL, j->preview_pass = NULL, j->npreviews = j->preview_cap = 0;
}

static void job_free(serve_job *j) {
    json_decref(j->settings);
    json_decref(j->inputs);
    previews_free(j);
    free(j);
}

/* the files of a job folder (only names this file makes), then the folder */
static void remove_job_dir(const serve_server *sv, const char *id) {
    char dir[1100], path[1400];
    serve_job_path(sv, id, NULL, dir, sizeof dir);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            snprintf(path, sizeof path, "%s/%s", dir, de->d_name), unlink(path);
    closedir(d);
    rmdir(dir);
}

json_t *serve_job_json(const serve_job *j) {
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:i, s:I, s:O, s:O, s:i}", "id", j->id, "object", "video", "model", "h3",
                          "status", status_names[j->status], "progress", j->progress, "created_at",
                          (json_int_t)j->created_at, "settings", j->settings, "inputs", j->inputs, "frames", j->frames);
    if (!o) return NULL;
    json_t *pr = json_object_get(j->settings, "prompt");
    if (pr) json_object_set(o, "prompt", pr);
    if (json_object_get(j->settings, "size")) json_object_set(o, "size", json_object_get(j->settings, "size"));
    json_object_set_new(o, "seconds", json_sprintf("%.3f", j->frames / 24.0));
    json_object_set_new(o, "remixed_from_video_id", j->remixed_from[0] ? json_string(j->remixed_from) : json_null());
    json_object_set_new(o, "started_at", j->started_at ? json_integer(j->started_at) : json_null());
    json_object_set_new(o, "completed_at", j->completed_at ? json_integer(j->completed_at) : json_null());
    json_object_set_new(o, "error", j->status == SERVE_FAILED
                                        ? json_pack("{s:s, s:s}", "code", j->error_code, "message", j->error)
                                        : json_null());
    if (j->status == SERVE_IN_PROGRESS) {
        json_object_set_new(o, "phase", json_string(j->phase));
        json_object_set_new(o, "eta_seconds", j->eta >= 0 ? json_real(j->eta) : json_null());
        json_object_set_new(o, "phase_eta_seconds", j->phase_eta >= 0 ? json_real(j->phase_eta) : json_null());
    }
    return o;
}

/* ---- loading ---- */

static int role_of(const char *s) {
    for (int i = 0; i < 3; i++)
        if (s && !strcmp(s, role_names[i])) return i;
    return -1;
}
static int kind_of(const char *s) {
    for (int i = 0; i < 5; i++)
        if (s && !strcmp(s, kind_names[i])) return i;
    return -1;
}

/* the input file names this file makes: input-K.EXT / input-K-audio.EXT, K < SERVE_MAX_INPUTS, EXT 3..4 letters */
static int is_input_name(const char *s) {
    if (strncmp(s, "input-", 6)) return 0;
    const char *p = s + 6;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
    if (!strncmp(p, "-audio", 6)) p += 6;
    if (*p++ != '.') return 0;
    size_t n = strlen(p);
    if (n < 3 || n > 4) return 0;
    for (size_t i = 0; i < n; i++)
        if (p[i] < 'a' || p[i] > 'z') return 0;
    return 1;
}

static void insert_sorted(serve_server *sv, serve_job *j) {
    serve_job **pp = &sv->jobs;
    while (*pp && (*pp)->seq < j->seq) pp = &(*pp)->next;
    j->next = *pp, *pp = j;
}

static serve_job *load_one(serve_server *sv, const char *id, char *why, size_t cap) {
    char path[1200];
    serve_job_path(sv, id, "job.json", path, sizeof path);
    json_error_t je;
    json_t *o = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!o) return snprintf(why, cap, "job.json: %s", je.text), NULL;
    serve_job *j = calloc(1, sizeof *j);
    json_int_t seq = 0, created = 0, started = 0, completed = 0;
    const char *st = NULL, *jid = NULL, *err = "", *code = "", *from = NULL;
    json_t *settings = NULL, *inputs = NULL;
    int progress = 0, frames = 0;
    if (!j || json_unpack_ex(o, &je, 0, "{s:s, s:I, s:s, s:i, s:I, s:I, s:I, s?s, s?s, s:i, s:o, s:o, s?s}", "id",
                             &jid, "seq", &seq, "status", &st, "progress", &progress, "created_at", &created,
                             "started_at", &started, "completed_at", &completed, "error", &err, "error_code", &code,
                             "frames", &frames, "settings", &settings, "inputs", &inputs, "remixed_from_video_id",
                             &from) ||
        strcmp(jid, id) || !json_is_array(inputs) || json_array_size(inputs) > SERVE_MAX_INPUTS ||
        (from && !serve_is_id(from))) {
        snprintf(why, cap, "job.json: %s", j ? je.text : "out of memory");
        json_decref(o), free(j);
        return NULL;
    }
    serve_spec s;
    char msg[SERVE_MSG_CAP];
    if (serve_spec_from_settings(settings, &s, msg, sizeof msg)) {
        snprintf(why, cap, "job.json: settings: %.400s", msg);
        json_decref(o), free(j);
        return NULL;
    }
    serve_spec_free(&s);
    size_t i;
    json_t *in;
    json_array_foreach(inputs, i, in) {
        const char *f = json_string_value(json_object_get(in, "file")), *af = json_string_value(json_object_get(in, "audio_file"));
        if (role_of(json_string_value(json_object_get(in, "role"))) < 0 ||
            kind_of(json_string_value(json_object_get(in, "kind"))) < 0 || !f || !is_input_name(f) ||
            (af && !is_input_name(af))) {
            snprintf(why, cap, "job.json: inputs[%zu] is malformed", i);
            json_decref(o), free(j);
            return NULL;
        }
    }
    memcpy(j->id, id, SERVE_ID_LEN), j->id[SERVE_ID_LEN] = 0; /* serve_is_id checked it */
    j->seq = (uint64_t)seq, j->progress = progress, j->frames = frames;
    j->created_at = created, j->started_at = started, j->completed_at = completed;
    snprintf(j->error, sizeof j->error, "%s", err ? err : "");
    snprintf(j->error_code, sizeof j->error_code, "%s", code ? code : "");
    snprintf(j->remixed_from, sizeof j->remixed_from, "%s", from ? from : "");
    j->settings = json_incref(settings), j->inputs = json_incref(inputs);
    j->status = -1;
    for (int k = 0; k < 4; k++)
        if (!strcmp(st, status_names[k])) j->status = k;
    json_decref(o);
    j->refs = 1, j->eta = j->phase_eta = -1;
    if (j->status < 0) return snprintf(why, cap, "job.json: unknown status"), job_free(j), NULL;
    return j;
}

int serve_jobs_load(serve_server *sv, char *err, size_t cap) {
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/jobs", sv->data);
    if (mkdir(sv->data, 0700) && errno != EEXIST) return snprintf(err, cap, "--data %s: %s", sv->data, strerror(errno)), -1;
    if (mkdir(dir, 0700) && errno != EEXIST) return snprintf(err, cap, "--data %s: %s", dir, strerror(errno)), -1;
    DIR *d = opendir(dir);
    if (!d) return snprintf(err, cap, "--data %s: %s", dir, strerror(errno)), -1;
    struct dirent *de;
    int n = 0, requeued = 0, interrupted = 0;
    while ((de = readdir(d))) {
        if (!serve_is_id(de->d_name)) continue;
        char why[SERVE_MSG_CAP], path[1200];
        serve_job_path(sv, de->d_name, "video.mp4", path, sizeof path);
        h3_out_sweep(path, NULL); /* a killed generation's temporary */
        serve_job_path(sv, de->d_name, "job.json", path, sizeof path);
        h3_out_sweep(path, NULL);
        serve_job *j = load_one(sv, de->d_name, why, sizeof why);
        if (!j) {
            /* a submission that died before its job.json, or a damaged one: the folder is ours, it goes */
            fprintf(stderr, "h3 serve: %s: %s: removed\n", de->d_name, why);
            remove_job_dir(sv, de->d_name);
            continue;
        }
        struct stat stt;
        serve_job_path(sv, j->id, "video.mp4", path, sizeof path);
        if (j->status == SERVE_IN_PROGRESS) {
            j->status = SERVE_FAILED, j->completed_at = now_s(), interrupted++;
            snprintf(j->error_code, sizeof j->error_code, "interrupted");
            snprintf(j->error, sizeof j->error, "interrupted: the server stopped during this job (it was not finished)");
            persist(sv, j);
        } else if (j->status == SERVE_COMPLETED && (lstat(path, &stt) || !S_ISREG(stt.st_mode))) {
            j->status = SERVE_FAILED;
            snprintf(j->error_code, sizeof j->error_code, "output_missing");
            snprintf(j->error, sizeof j->error, "the job's video.mp4 is missing from --data");
            persist(sv, j);
        } else if (j->status == SERVE_QUEUED) {
            requeued++;
        }
        if (j->seq >= sv->next_seq) sv->next_seq = j->seq + 1;
        insert_sorted(sv, j);
        n++;
    }
    closedir(d);
    if (n) fprintf(stderr, "h3 serve: %d jobs in %s (%d queued again, %d interrupted marked failed)\n", n, dir, requeued,
                   interrupted);
    return 0;
}

/* ---- the table ---- */

serve_job *serve_jobs_get(serve_server *sv, const char *id) {
    pthread_mutex_lock(&sv->mu);
    serve_job *j = sv->jobs;
    while (j && strcmp(j->id, id)) j = j->next;
    if (j) j->refs++;
    pthread_mutex_unlock(&sv->mu);
    return j;
}

static void release_locked(serve_job *j) {
    if (--j->refs == 0) job_free(j);
    else if (j->refs == 1 && (j->status == SERVE_COMPLETED || j->status == SERVE_FAILED))
        previews_free(j); /* the table's reference alone: nobody follows the finished job any more */
}

void serve_job_release(serve_server *sv, serve_job *j) {
    if (!j) return;
    pthread_mutex_lock(&sv->mu);
    release_locked(j);
    pthread_mutex_unlock(&sv->mu);
}

static void changed(serve_server *sv, serve_job *j) {
    j->version++;
    pthread_cond_broadcast(&sv->changed);
}

static void finish_cancelled(serve_server *sv, serve_job *j, const char *msg) {
    j->status = SERVE_FAILED, j->completed_at = now_s();
    snprintf(j->error_code, sizeof j->error_code, "cancelled");
    snprintf(j->error, sizeof j->error, "%s", msg);
    persist(sv, j);
    changed(sv, j);
}

int serve_jobs_delete(serve_server *sv, const char *id) {
    pthread_mutex_lock(&sv->mu);
    serve_job **pp = &sv->jobs;
    while (*pp && strcmp((*pp)->id, id)) pp = &(*pp)->next;
    serve_job *j = *pp;
    int rc = -1;
    if (j && j->status == SERVE_QUEUED) {
        finish_cancelled(sv, j, "cancelled by DELETE before it started");
        rc = 0;
    } else if (j && j->status == SERVE_IN_PROGRESS) {
        j->cancel = 1; /* the sinks return nonzero: the engine stops before its next step, nothing is written */
        rc = 0;
    } else if (j) {
        *pp = j->next;
        j->deleted = 1;
        changed(sv, j);
        remove_job_dir(sv, j->id);
        release_locked(j);
        rc = 1;
    }
    pthread_mutex_unlock(&sv->mu);
    return rc;
}

/* ---- submission ---- */

static const char *ext_of(const unsigned char *d, size_t n) {
    if (n >= 8 && !memcmp(d, "\x89PNG\r\n\x1a\n", 8)) return "png";
    if (n >= 3 && !memcmp(d, "\xff\xd8\xff", 3)) return "jpg";
    if (n >= 12 && !memcmp(d, "RIFF", 4) && !memcmp(d + 8, "WAVE", 4)) return "wav";
    if (n >= 12 && !memcmp(d, "RIFF", 4) && !memcmp(d + 8, "WEBP", 4)) return "webp";
    if (n >= 8 && !memcmp(d + 4, "ftyp", 4)) return "mp4";
    if (n >= 4 && !memcmp(d, "\x1a\x45\xdf\xa3", 4)) return "mkv";
    if (n >= 4 && !memcmp(d, "OggS", 4)) return "ogg";
    if (n >= 4 && !memcmp(d, "fLaC", 4)) return "flac";
    if (n >= 3 && (!memcmp(d, "ID3", 3) || (d[0] == 0xff && (d[1] & 0xe0) == 0xe0))) return "mp3";
    if (n >= 2 && d[0] == 'P' && d[1] >= '1' && d[1] <= '6') return "ppm";
    if (n >= 6 && !memcmp(d, "GIF8", 4)) return "gif";
    return "bin";
}

static int new_id(char id[SERVE_ID_LEN + 1]) {
    unsigned char r[16];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) return -1;
    memcpy(id, "video_", 6);
    for (int i = 0; i < 16; i++) snprintf(id + 6 + 2 * i, 3, "%02x", r[i]);
    return 0;
}

/* h3_params from s: the API's defaults, then the fields the request gave */
static void spec_params(const serve_spec *s, h3_params *p) {
    h3_params_init(p);
    p->prompt = s->prompt;
    p->width = s->width, p->height = s->height, p->frames = s->frames, p->seconds = s->seconds;
    p->render_width = s->render_width, p->render_height = s->render_height;
    if (s->steps) p->steps = s->steps;
    if (s->reuse) p->reuse = s->reuse;
    if (s->layers) p->layers = s->layers;
    if (s->core_reuse) p->core_reuse = s->core_reuse;
    if (s->seed_given) p->seed = s->seed;
    if (s->ref_image_size >= 0) p->ref_image_size = s->ref_image_size;
    p->token_reduction = s->token_reduction, p->reference_rope = s->reference_rope;
}

/* the job's h3_params (paths into the caller's buffers) */
typedef struct job_paths {
    char out[1200];
    char in[SERVE_MAX_INPUTS][1200], audio[SERVE_MAX_INPUTS][1200];
} job_paths;

static void job_params(const serve_server *sv, const char *id, const serve_spec *s, json_t *inputs, h3_params *p,
                       job_paths *jp) {
    spec_params(s, p);
    p->preview_width = 320; /* the event stream's previews are at most 320 pixels wide (on_preview) */
    serve_job_path(sv, id, "video.mp4", jp->out, sizeof jp->out);
    p->output_mp4 = jp->out;
    size_t i;
    json_t *in;
    json_array_foreach(inputs, i, in) {
        const char *f = json_string_value(json_object_get(in, "file")), *af = json_string_value(json_object_get(in, "audio_file"));
        int role = role_of(json_string_value(json_object_get(in, "role")));
        serve_job_path(sv, id, f, jp->in[i], sizeof jp->in[i]);
        if (af) serve_job_path(sv, id, af, jp->audio[i], sizeof jp->audio[i]);
        if (role == SERVE_IN_FIRST) p->first_frame = jp->in[i];
        else if (role == SERVE_IN_LAST) p->last_frame = jp->in[i];
        else if (p->nrefs < H3_MAX_REFERENCES) {
            h3_reference *r = &p->refs[p->nrefs++];
            r->kind = kind_of(json_string_value(json_object_get(in, "kind")));
            r->path = jp->in[i];
            r->audio_path = af ? jp->audio[i] : NULL;
        }
    }
}

static int active_jobs(const serve_server *sv) {
    int n = sv->pending;
    for (const serve_job *j = sv->jobs; j; j = j->next) n += j->status == SERVE_QUEUED || j->status == SERVE_IN_PROGRESS;
    return n;
}

int serve_jobs_submit(serve_server *sv, serve_spec *s, const char *remixed_from, serve_job **out, char *err,
                      size_t cap) {
    pthread_mutex_lock(&sv->mu);
    if (sv->stop || active_jobs(sv) >= sv->queue_max) {
        int n = active_jobs(sv);
        pthread_mutex_unlock(&sv->mu);
        if (sv->stop) return snprintf(err, cap, "the server is stopping"), 503;
        return snprintf(err, cap, "the queue is full: %d jobs queued or running (--queue %d); retry later", n, sv->queue_max), 429;
    }
    sv->pending++;
    pthread_mutex_unlock(&sv->mu);
    serve_job *j = calloc(1, sizeof *j);
    json_t *inputs = json_array();
    int status = 500;
    char dir[1100];
    if (!j || !inputs || new_id(j->id)) {
        snprintf(err, cap, "out of memory or no random bytes");
        goto fail;
    }
    if (remixed_from) snprintf(j->remixed_from, sizeof j->remixed_from, "%s", remixed_from);
    serve_job_path(sv, j->id, NULL, dir, sizeof dir);
    if (mkdir(dir, 0700)) {
        snprintf(err, cap, "--data: cannot make the job's folder: %s", strerror(errno));
        goto fail;
    }
    for (int i = 0; i < s->ninputs; i++) {
        const serve_input *in = &s->inputs[i];
        char name[64], aname[64], path[1200];
        snprintf(name, sizeof name, "input-%d.%s", i, ext_of(in->data, in->len));
        serve_job_path(sv, j->id, name, path, sizeof path);
        if (write_atomic("input", path, in->data, in->len, err, cap)) goto fail_dir;
        json_t *o = json_pack("{s:s, s:s, s:s, s:I}", "role", role_names[in->role], "kind",
                              kind_names[in->role == SERVE_IN_REF ? in->kind : 0], "file", name, "bytes", (json_int_t)in->len);
        if (in->audio) {
            snprintf(aname, sizeof aname, "input-%d-audio.%s", i, ext_of(in->audio, in->audio_len));
            serve_job_path(sv, j->id, aname, path, sizeof path);
            if (write_atomic("input", path, in->audio, in->audio_len, err, cap)) goto fail_dir;
            json_object_set_new(o, "audio_file", json_string(aname));
        }
        json_array_append_new(inputs, o);
    }
    /* the CLI's rules (h3_engine_check, messages in the API's field names) on a second engine that never
     * generates: the worker's engine may be busy */
    h3_params p;
    job_paths *jp = malloc(sizeof *jp);
    if (!jp) {
        snprintf(err, cap, "out of memory");
        goto fail_dir;
    }
    job_params(sv, j->id, s, inputs, &p, jp);
    pthread_mutex_lock(&sv->check_mu);
    int rc = h3_engine_check(sv->check, &p, &j->frames);
    if (rc) snprintf(err, cap, "%s", h3_engine_error(sv->check));
    pthread_mutex_unlock(&sv->check_mu);
    free(jp);
    if (rc) {
        status = rc == H3_ERR_BAD_INPUT ? 400 : 500;
        goto fail_dir;
    }
    if (!s->seed_given) /* the seed used is always in the settings (the history shows it, a re-run changes it) */
        json_object_set_new(s->settings, "seed", json_integer((json_int_t)p.seed));
    j->settings = json_incref(s->settings), j->inputs = inputs, inputs = NULL;
    j->created_at = now_s(), j->eta = j->phase_eta = -1, j->refs = 2; /* the table's and the caller's */
    pthread_mutex_lock(&sv->mu);
    j->seq = sv->next_seq++;
    j->status = SERVE_QUEUED;
    sv->pending--;
    if (persist(sv, j)) {
        pthread_mutex_unlock(&sv->mu);
        snprintf(err, cap, "--data: job.json could not be written");
        json_decref(j->settings), j->settings = NULL;
        inputs = j->inputs, j->inputs = NULL;
        pthread_mutex_lock(&sv->mu), sv->pending++, pthread_mutex_unlock(&sv->mu);
        goto fail_dir;
    }
    insert_sorted(sv, j);
    pthread_cond_signal(&sv->work);
    pthread_mutex_unlock(&sv->mu);
    *out = j;
    return 0;
fail_dir:
    remove_job_dir(sv, j->id);
fail:
    json_decref(inputs);
    free(j);
    pthread_mutex_lock(&sv->mu);
    sv->pending--;
    pthread_mutex_unlock(&sv->mu);
    return status;
}

/* ---- remix (docs/serve.md "Remix"): the original's settings with overrides, a copy of its uploads ---- */

/* one of the original job's input files, whole, under the upload limit of a request; 0 or the HTTP status */
static int read_input(const serve_server *sv, const char *id, const char *name, const char *what, unsigned char **out,
                      size_t *len, char *err, size_t cap) {
    char path[1200];
    serve_job_path(sv, id, name, path, sizeof path); /* the table's id and a name is_input_name / submit made */
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size == 0) {
        int e = fd < 0 ? errno : 0;
        if (fd >= 0) close(fd);
        snprintf(err, cap, "%s's upload %s is gone from --data (%s): it cannot be remixed", id, name,
                 e ? strerror(e) : "not a file with bytes");
        return 404;
    }
    if ((uint64_t)st.st_size > sv->lim.max_upload) {
        close(fd);
        snprintf(err, cap, "%s: the upload is larger than the limit of %zu bytes", what, sv->lim.max_upload);
        return 413;
    }
    size_t n = (size_t)st.st_size, got = 0;
    unsigned char *d = malloc(n);
    while (d && got < n) {
        ssize_t r = read(fd, d + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (!d || got < n) {
        free(d);
        snprintf(err, cap, d ? "%s: reading the original's upload %s failed" : "%s: out of memory", what, name);
        return 500;
    }
    *out = d, *len = n;
    return 0;
}

int serve_jobs_remix(serve_server *sv, const char *id, const char *ctype, const char *body, size_t len,
                     serve_job **out, char *err, size_t cap) {
    serve_job *o = serve_jobs_get(sv, id);
    if (!o) return snprintf(err, cap, "no video with this id (a deleted video cannot be remixed: its uploads went with it)"), 404;
    pthread_mutex_lock(&sv->mu);
    json_t *settings = json_deep_copy(o->settings), *inputs = json_deep_copy(o->inputs);
    pthread_mutex_unlock(&sv->mu);
    serve_job_release(sv, o);
    serve_spec s;
    int status = 500, refs = 0;
    if (!settings || !inputs) {
        snprintf(err, cap, "out of memory");
        goto done;
    }
    if (serve_remix_parse(ctype, body, len, settings, &s, &status, err, cap)) goto done;
    status = 0;
    size_t i;
    json_t *in;
    json_array_foreach(inputs, i, in) { /* in the original's order: the copies get the same names */
        const char *f = json_string_value(json_object_get(in, "file")), *af = json_string_value(json_object_get(in, "audio_file"));
        int role = role_of(json_string_value(json_object_get(in, "role"))), kind = kind_of(json_string_value(json_object_get(in, "kind")));
        if (role < 0 || kind < 0 || !f || s.ninputs == SERVE_MAX_INPUTS) { /* load_one and submit made them valid */
            status = 500, snprintf(err, cap, "%s: its inputs in job.json are malformed", id);
            break;
        }
        char what[48];
        if (role == SERVE_IN_REF) snprintf(what, sizeof what, "references[%d].data", refs);
        else snprintf(what, sizeof what, "%s", role_names[role]);
        serve_input *si = &s.inputs[s.ninputs];
        memset(si, 0, sizeof *si);
        si->role = role, si->kind = role == SERVE_IN_REF ? kind : 0;
        if ((status = read_input(sv, id, f, what, &si->data, &si->len, err, cap))) break;
        s.ninputs++; /* the spec owns the bytes from here */
        snprintf(what, sizeof what, "references[%d].audio_data", refs);
        if (af && (status = read_input(sv, id, af, what, &si->audio, &si->audio_len, err, cap))) break;
        refs += role == SERVE_IN_REF;
    }
    if (!status) status = serve_jobs_submit(sv, &s, id, out, err, cap);
    serve_spec_free(&s);
done:
    json_decref(settings), json_decref(inputs);
    return status;
}

/* ---- the worker ---- */

typedef struct worker_ctx {
    serve_server *sv;
    serve_job    *j;
} worker_ctx;

/* The job's time left: the current phase's (its own estimate, else the last job's duration of it less what has
 * run) plus the durations the last job with the same settings took for the phases after it; -1 when the last job
 * had other settings and the phase gives no estimate. The caller holds sv->mu. */
static double job_eta(serve_server *sv, const h3_progress *p) {
    const serve_timeline *l = &sv->last;
    int i = -1;
    if (l->n && !strcmp(l->key, sv->cur.key))
        for (int k = 0; k < l->n && i < 0; k++)
            if (!strcmp(l->name[k], p->phase)) i = k;
    if (i < 0) return p->eta;
    double left = p->eta >= 0 ? p->eta : l->secs[i] - p->elapsed;
    if (left < 0) left = 0;
    for (int k = i + 1; k < l->n; k++) left += l->secs[k];
    return left;
}

/* overall progress 0..99 from the phases (the denoising dominates; docs/serve.md "Progress") */
static int on_progress(void *user, const h3_progress *p) {
    worker_ctx *w = user;
    pthread_mutex_lock(&w->sv->mu);
    serve_job *j = w->j;
    serve_timeline *cur = &w->sv->cur;
    if (p->event == H3_PROGRESS_END && cur->n < SERVE_PHASES) { /* the running job's phases, for the next one */
        snprintf(cur->name[cur->n], sizeof cur->name[0], "%s", p->phase);
        cur->secs[cur->n++] = p->elapsed;
    }
    /* the phase names carry the device: "denoise [cpu]" */
    double f = p->total > 0 ? (double)p->done / (double)p->total : 0;
    int pr = j->progress;
    if (!strncmp(p->phase, "denoise", 7)) pr = 5 + (int)(80 * f);
    else if (!strncmp(p->phase, "video VAE decode", 16)) pr = 85 + (int)(13 * f);
    else if (!strncmp(p->phase, "mux MP4", 7)) pr = 98;
    int news = strncmp(j->phase, p->phase, sizeof j->phase - 1) != 0 || (pr > j->progress && pr < 100);
    snprintf(j->phase, sizeof j->phase, "%s", p->phase);
    if (pr > j->progress && pr < 100) j->progress = pr;
    j->eta = job_eta(w->sv, p), j->phase_eta = p->eta;
    if (news) changed(w->sv, j); /* an event per percent or phase, not per unit */
    int stop = j->cancel || w->sv->stop;
    pthread_mutex_unlock(&w->sv->mu);
    return stop;
}

/* a preview after each denoising pass: a PNG data URL for the event stream (final frames are not sent) */
static int on_preview(void *user, const h3_frame *f) {
    worker_ctx *w = user;
    if (f->pass > 0) {
        int step = 1;
        while (f->width / step > 320) step++; /* a preview at most 320 pixels wide */
        size_t n;
        unsigned char *png = serve_png_encode(f->rgb, f->width, f->height, step, &n);
        char *b64 = png ? serve_base64_encode(png, n) : NULL;
        free(png);
        char *url = b64 ? malloc(strlen(b64) + 32) : NULL;
        if (url) sprintf(url, "data:image/png;base64,%s", b64);
        free(b64);
        pthread_mutex_lock(&w->sv->mu);
        serve_job *j = w->j;
        if (url && j->npreviews == j->preview_cap) { /* one per pass: grows to the pass count */
            int cap = j->preview_cap ? 2 * j->preview_cap : 8;
            char **pv = realloc(j->previews, sizeof *pv * (size_t)cap);
            if (pv) j->previews = pv;
            int *pp = pv ? realloc(j->preview_pass, sizeof *pp * (size_t)cap) : NULL;
            if (pp) j->preview_pass = pp, j->preview_cap = cap;
        }
        if (url && j->npreviews < j->preview_cap) {
            j->previews[j->npreviews] = url, j->preview_pass[j->npreviews++] = f->pass;
            j->preview_passes = f->passes;
            url = NULL;
            changed(w->sv, j);
        }
        pthread_mutex_unlock(&w->sv->mu);
        free(url); /* out of memory: this preview is skipped */
    }
    pthread_mutex_lock(&w->sv->mu);
    int stop = w->j->cancel || w->sv->stop;
    pthread_mutex_unlock(&w->sv->mu);
    return stop;
}

static void run_job(serve_server *sv, serve_job *j) {
    serve_spec s;
    char msg[SERVE_MSG_CAP];
    h3_params p;
    job_paths *jp = malloc(sizeof *jp);
    int rc, previews = 0;
    pthread_mutex_lock(&sv->mu);
    json_t *settings = json_incref(j->settings), *inputs = json_incref(j->inputs);
    pthread_mutex_unlock(&sv->mu);
    if (!jp) {
        rc = H3_ERR_OUT_OF_MEMORY, snprintf(msg, sizeof msg, "out of memory");
    } else if (serve_spec_from_settings(settings, &s, msg, sizeof msg)) {
        rc = H3_ERR_BAD_INPUT;
    } else {
        job_params(sv, j->id, &s, inputs, &p, jp);
        previews = s.previews;
        pthread_mutex_lock(&sv->mu); /* what the phase durations depend on: the last job's predict this one's */
        sv->cur.n = 0;
        snprintf(sv->cur.key, sizeof sv->cur.key, "%dx%d r%dx%d f%d s%.3f n%d reuse%d layers%d core%d tr%d inputs%d pv%d",
                 p.width, p.height, p.render_width, p.render_height, p.frames, p.seconds, p.steps, p.reuse, p.layers,
                 p.core_reuse, p.token_reduction, s.ninputs, previews);
        pthread_mutex_unlock(&sv->mu);
        worker_ctx w = {sv, j};
        h3_sinks sinks = {.progress = on_progress, .preview = previews ? on_preview : NULL, .user = &w};
        fprintf(stderr, "h3 serve: %s: started (%s)\n", j->id, s.prompt);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        rc = h3_engine_generate(sv->eng, &p, &sinks);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        /* the generation's own time, finer than the job's whole-second timestamps (docs/serve.md) */
        fprintf(stderr, "h3 serve: %s: generation took %.2f s\n", j->id,
                (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
        snprintf(msg, sizeof msg, "%s", h3_engine_error(sv->eng));
        serve_spec_free(&s);
    }
    free(jp);
    json_decref(settings), json_decref(inputs);
    pthread_mutex_lock(&sv->mu);
    j->completed_at = now_s();
    if (rc == H3_OK) {
        j->status = SERVE_COMPLETED, j->progress = 100;
        sv->last = sv->cur;
    } else if (rc == H3_ERR_CANCELLED && j->cancel) {
        finish_cancelled(sv, j, "cancelled by DELETE while it ran");
    } else if (rc == H3_ERR_CANCELLED && sv->stop) {
        j->status = SERVE_FAILED;
        snprintf(j->error_code, sizeof j->error_code, "interrupted");
        snprintf(j->error, sizeof j->error, "interrupted: the server stopped during this job");
    } else {
        j->status = SERVE_FAILED;
        snprintf(j->error_code, sizeof j->error_code, "%s", rc == H3_ERR_BAD_INPUT ? "bad_input" : "generation_failed");
        snprintf(j->error, sizeof j->error, "%s: %.480s", h3_status_name(rc), msg);
    }
    persist(sv, j);
    changed(sv, j);
    fprintf(stderr, "h3 serve: %s: %s%s%s\n", j->id, status_names[j->status], j->error[0] ? ": " : "", j->error);
    pthread_mutex_unlock(&sv->mu);
}

static void *worker_main(void *arg) {
    serve_server *sv = arg;
    pthread_mutex_lock(&sv->mu);
    for (;;) {
        serve_job *j = sv->jobs;
        while (j && j->status != SERVE_QUEUED) j = j->next;
        if (sv->stop) break;
        if (!j) {
            pthread_cond_wait(&sv->work, &sv->mu);
            continue;
        }
        j->status = SERVE_IN_PROGRESS, j->started_at = now_s(), j->progress = 0, j->refs++;
        snprintf(j->phase, sizeof j->phase, "starting");
        persist(sv, j);
        changed(sv, j);
        pthread_mutex_unlock(&sv->mu);
        run_job(sv, j);
        pthread_mutex_lock(&sv->mu);
        release_locked(j);
    }
    pthread_mutex_unlock(&sv->mu);
    return NULL;
}

int serve_jobs_start(serve_server *sv, char *err, size_t cap) {
    if (pthread_create(&sv->worker, NULL, worker_main, sv)) return snprintf(err, cap, "cannot start the worker thread"), -1;
    return 0;
}

void serve_jobs_stop(serve_server *sv) {
    pthread_mutex_lock(&sv->mu);
    sv->stop = 1;
    pthread_cond_broadcast(&sv->work);
    pthread_cond_broadcast(&sv->changed);
    pthread_mutex_unlock(&sv->mu);
    pthread_join(sv->worker, NULL);
    while (sv->jobs) {
        serve_job *j = sv->jobs;
        sv->jobs = j->next;
        j->deleted = 1;
        release_locked(j);
    }
}
