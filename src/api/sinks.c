/* The caller's sinks and log (include/h3.h) on the pipeline's request hooks (request.h), and the atomic writers. */
#include "api_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../io/outfile.h"
#include "../media/media.h"

_Static_assert(H3_REFERENCE_AUDIO == (int)H3_REF_AUDIO && H3_REFERENCE_VIDEO_AUDIO == (int)H3_REF_VIDEO_AUDIO &&
                   H3_REFERENCE_IMAGE == (int)H3_REF_IMAGE,
               "h3.h's reference kinds are request.h's");
_Static_assert((int)H3_MEMORY_PHASES == (int)H3_RESIDENT_OFF && (int)H3_MEMORY_RESIDENT == (int)H3_RESIDENT_ALL &&
                   (int)H3_MEMORY_AUTO == (int)H3_RESIDENT_AUTO,
               "h3.h's memory modes are request.h's");

static void on_log(void *user, int kind, const char *line) {
    const api_hooks *h = user;
    const h3_engine_options *o = &h->eng->opt;
    if (!o->log) return;
    if (o->flag_messages || kind != H3_LOG_MESSAGE) {
        o->log(o->log_user, kind, line);
        return;
    }
    char buf[sizeof ((h3_err *)0)->msg];
    snprintf(buf, sizeof buf, "%s", line);
    api_reword(buf, sizeof buf);
    o->log(o->log_user, kind, buf);
}

static int on_progress(void *user, int event, const char *phase, int64_t done, int64_t total, double elapsed) {
    const api_hooks *h = user;
    int stop = h->eng->cancel != 0;
    if (h->sinks && h->sinks->progress) {
        h3_progress p = {event, phase, done, total, elapsed, -1};
        if (event == H3_PROGRESS_END) p.eta = 0;
        else if (done > 0 && total > 0) p.eta = elapsed / (double)done * (double)(total - done);
        stop |= h->sinks->progress(h->sinks->user, &p) != 0;
    }
    if (stop) h->eng->cancel = 1;
    return stop;
}

static int on_preview(void *user, const h3_preview *p) {
    const api_hooks *h = user;
    h3_frame f = {p->rgb, p->width, p->height, p->frame, 0, p->pass, p->passes};
    int stop = h->sinks->preview(h->sinks->user, &f) != 0;
    if (stop) h->eng->cancel = 1;
    return stop;
}

static int on_frame(void *user, const float *rgb, int width, int height, int64_t index, int64_t frames) {
    const api_hooks *h = user;
    h3_frame f = {rgb, width, height, index, frames, 0, 0};
    int stop = h->sinks->video_frame(h->sinks->user, &f) != 0;
    if (stop) h->eng->cancel = 1;
    return stop;
}

static int on_audio(void *user, const float *left, const float *right, int64_t samples, int sample_rate) {
    const api_hooks *h = user;
    int stop = h->sinks->audio(h->sinks->user, left, right, samples, sample_rate) != 0;
    if (stop) h->eng->cancel = 1;
    return stop;
}

void api_hooks_install(api_hooks *h, h3_request *r) {
    const h3_sinks *s = h->sinks;
    r->log = on_log, r->log_user = h;
    r->progress = on_progress, r->progress_user = h;
    r->progress_out = h->eng->opt.progress_stream;
    r->cancel = &h->eng->cancel;
    if (s && s->preview) r->preview = on_preview, r->preview_user = h;
    if (s && s->video_frame) r->on_frame = on_frame;
    if (s && s->audio) r->on_audio = on_audio;
    r->sink_user = h;
    r->backend_note = h->eng->header_note;
}

/* ---- writers ---- */

static int writer_done(int rc, const h3_err *e, char *err, size_t cap) {
    if (err && cap) snprintf(err, cap, "%s", rc ? e->msg : "");
    if (!rc) return H3_OK;
    return api_status_of(-1, e->msg, 0) == H3_ERR_OUT_OF_MEMORY ? H3_ERR_OUT_OF_MEMORY
           : strstr(e->msg, "must") || strstr(e->msg, "FFmpeg")  ? H3_ERR_BAD_INPUT
                                                                 : H3_ERR_IO;
}

int h3_save_mp4(const char *path, const float *frames, int count, int width, int height, const float *left,
                const float *right, int64_t samples, char *err, size_t err_cap) {
    h3_err e = {{0}};
    int rc = 0;
    float *audio = NULL;
    if (!path || !frames || count <= 0 || width <= 0 || height <= 0 || (left && (!right || samples <= 0)))
        rc = h3_fail(&e, "h3_save_mp4: needs a path, frames, count/width/height > 0 and, with audio, both channels");
    if (!rc && left && !(audio = malloc(sizeof(float) * 2 * (size_t)samples))) rc = h3_fail(&e, "out of memory");
    if (!rc && audio) {
        memcpy(audio, left, sizeof(float) * (size_t)samples);
        memcpy(audio + samples, right, sizeof(float) * (size_t)samples);
    }
    h3_frames_view v = {.frames = count, .height = height, .width = width, .f32 = frames};
    if (!rc) rc = h3_write_mp4(path, &v, audio, audio ? samples : 0, NULL, &e);
    free(audio);
    return writer_done(rc, &e, err, err_cap);
}

int h3_save_png(const char *path, const float *rgb, int width, int height, char *err, size_t err_cap) {
    h3_err e = {{0}};
    int rc = 0;
    uint8_t *px = NULL;
    size_t n = (size_t)(width > 0 ? width : 0) * (size_t)(height > 0 ? height : 0) * 3;
    if (!path || !rgb || !n) rc = h3_fail(&e, "h3_save_png: needs a path, rgb and width/height > 0");
    if (!rc && !(px = malloc(n))) rc = h3_fail(&e, "out of memory");
    for (size_t i = 0; !rc && i < n; i++) { /* as the PNG frames (media_common.c): rint(clip(x * 255)), NaN -> 0 */
        float x = rgb[i] * 255.0f;
        if (!(x > 0.0f)) x = 0.0f;
        if (x > 255.0f) x = 255.0f;
        px[i] = (uint8_t)rintf(x);
    }
    if (!rc) rc = h3_write_png(path, px, height, width, &e);
    free(px);
    return writer_done(rc, &e, err, err_cap);
}

int h3_save_wav(const char *path, const float *left, const float *right, int64_t samples, int sample_rate, char *err,
                size_t err_cap) {
    h3_err e = {{0}};
    int rc = 0, ch = right ? 2 : 1;
    float *audio = NULL;
    if (!path || !left || samples <= 0 || sample_rate <= 0)
        rc = h3_fail(&e, "h3_save_wav: needs a path, left, samples > 0 and a sample rate");
    if (!rc && !(audio = malloc(sizeof(float) * (size_t)ch * (size_t)samples))) rc = h3_fail(&e, "out of memory");
    if (!rc) {
        memcpy(audio, left, sizeof(float) * (size_t)samples);
        if (right) memcpy(audio + samples, right, sizeof(float) * (size_t)samples);
        rc = h3_write_wav(path, audio, ch, samples, sample_rate, 16, &e);
    }
    free(audio);
    return writer_done(rc, &e, err, err_cap);
}
