/* The engine of the public API (include/h3.h; docs/api.md): a snapshot, the resolved backend and the pipeline's
 * generation context (h3_gen_ctx: the backends and the models kept between generations), behind one lock. */
#include "api_internal.h"

#include <stdlib.h>
#include <string.h>

#include "../io/snapshot.h"
#include "../media/media.h"

const char *h3_version(void) {
#ifdef H3_CUDA
    return h3_media_available() ? H3_VERSION_STRING " (api 1, cpu+cuda, ffmpeg)" : H3_VERSION_STRING " (api 1, cpu+cuda, no media)";
#else
    return h3_media_available() ? H3_VERSION_STRING " (api 1, cpu, ffmpeg)" : H3_VERSION_STRING " (api 1, cpu, no media)";
#endif
}

int h3_api_version(void) { return H3_API_VERSION; }
int h3_has_media(void) { return h3_media_available(); }
int h3_frames_of_seconds(double seconds) { return h3_seconds_to_frames(seconds); }

const char *h3_status_name(int status) {
    static const char *const names[] = {"ok", "bad input", "out of memory", "i/o", "backend", "cancelled", "failed"};
    return status >= 0 && status <= H3_ERR_FAILED ? names[status] : "unknown status";
}

void h3_engine_options_init(h3_engine_options *o) {
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
    o->backend = "auto";
    o->precision = "bf16";
    o->quant = "none";
    o->vae_quant = "none";
    o->preset = "exact";
    o->attention = "exact";
    o->memory = H3_MEMORY_PHASES;
}

/* fails with status s and message e (reworded unless the options ask for the CLI's flags); returns s */
static int fail_with(h3_engine *eng, int s, const h3_err *e) {
    eng->status = s;
    if (e != &eng->err) eng->err = *e;
    if (s != H3_OK && !eng->opt.flag_messages) api_reword(eng->err.msg, sizeof eng->err.msg);
    if (s == H3_OK) eng->err.msg[0] = 0;
    return s;
}

static int open_options(h3_engine *eng, const h3_engine_options *o, h3_err *e) {
    if (o && (o->struct_size < sizeof(size_t) || o->struct_size > sizeof *o))
        return h3_fail(e, "options: not set up by h3_engine_options_init (struct_size %zu, this library's is %zu)",
                       o->struct_size, sizeof *o);
    if (o) memcpy(&eng->opt, o, o->struct_size);
    h3_engine_options *p = &eng->opt;
    /* --preset fast (docs/fast.md): the fast modes wherever the fields are at their defaults */
    const char *ps = p->preset ? p->preset : "exact";
    if (!strcmp(ps, "fast")) {
        eng->preset_fast = 1;
        if (!p->quant || !strcmp(p->quant, "none")) p->quant = "fp8";
        if (!p->attention || !strcmp(p->attention, "exact")) p->attention = "sage8";
        if (!p->vae_quant || !strcmp(p->vae_quant, "none")) p->vae_quant = "fp8";
        if (p->precision && strcmp(p->precision, "bf16"))
            return h3_fail(e, "--preset fast needs --precision bf16 (its modes are bf16 only)");
    } else if (strcmp(ps, "exact")) {
        return h3_fail(e, "--preset must be exact or fast, got '%.64s'", ps);
    }
    const char *b = p->backend ? p->backend : "auto", *pr = p->precision ? p->precision : "bf16",
               *q = p->quant ? p->quant : "none";
    if (!strcmp(pr, "bf16")) eng->bf16 = 1;
    else if (!strcmp(pr, "fp32")) eng->bf16 = 0;
    else return h3_fail(e, "--precision must be bf16 or fp32, got '%.64s'", pr);
    if (!strcmp(q, "fp8")) eng->quant_fp8 = 1;
    else if (!strcmp(q, "int8")) eng->quant_int8 = 1;
    else if (strcmp(q, "none")) return h3_fail(e, "--quant must be none, fp8 or int8, got '%.64s'", q);
    const char *vq = p->vae_quant ? p->vae_quant : "none";
    if (!strcmp(vq, "fp8")) eng->vae_fp8 = 1;
    else if (strcmp(vq, "none")) return h3_fail(e, "--vae-quant must be none or fp8, got '%.64s'", vq);
    const char *at = p->attention ? p->attention : "exact";
    if (!strcmp(at, "sage8")) eng->attention_sage8 = 1;
    else if (strcmp(at, "exact")) return h3_fail(e, "--attention must be exact or sage8, got '%.64s'", at);
    if (p->memory < H3_MEMORY_PHASES || p->memory > H3_MEMORY_AUTO)
        return h3_fail(e, "memory must be H3_MEMORY_PHASES, H3_MEMORY_RESIDENT or H3_MEMORY_AUTO, got %d", p->memory);
    if (p->threads < 0 || p->threads > 4096) return h3_fail(e, "--threads must be 0..4096 (0: all cores), got %d", p->threads);
    if (p->device < 0 || p->device > 1023) return h3_fail(e, "--device must be 0..1023, got %d", p->device);
    if (p->parallel < 0 || p->parallel > 8)
        return h3_fail(e, "--parallel must be 1..8 (the DiT's ranks: GPUs, or CPU ranks with --backend cpu), got %d",
                       p->parallel);
    if (!strcmp(b, "cpu")) {
        eng->cuda = 0;
        if (p->device) return h3_fail(e, "--device %d: a GPU index, with --backend cuda or auto", p->device);
    } else if (!strcmp(b, "cuda") || !strcmp(b, "auto")) {
        char why[API_NOTE_CAP];
        int usable = api_backend_auto(p->device, why, sizeof why);
        /* a GPU other than 0 is asked for by name: when it cannot run, that is the caller's mistake, not a reason
         * to fall back to the CPU */
        if (p->device && !usable) return h3_fail(e, "--device %d: not a usable GPU (%s)", p->device, why);
        if (!strcmp(b, "cuda")) {
            eng->cuda = 1; /* a CPU build refuses it with the request's own check; a failing GPU 0 when starting */
        } else {
            eng->cuda = usable;
            snprintf(eng->note, sizeof eng->note, "%s", usable ? "" : why);
            if (!eng->cuda) snprintf(eng->header_note, sizeof eng->header_note, " (auto: %s)", eng->note);
        }
    } else {
        return h3_fail(e, "--backend must be auto, cpu or cuda, got '%.64s'", b);
    }
    /* the strings are the caller's: only the parsed values above are kept */
    p->backend = eng->cuda ? "cuda" : "cpu", p->precision = p->quant = p->transformer = p->vae_quant = p->attention = p->preset = NULL;
    return 0;
}

int h3_engine_open(const char *snapshot_dir, const h3_engine_options *o, h3_engine **out) {
    h3_engine *eng = calloc(1, sizeof *eng);
    *out = eng;
    if (!eng) return H3_ERR_OUT_OF_MEMORY;
    pthread_mutex_init(&eng->lock, NULL);
    h3_engine_options_init(&eng->opt);
    if (o && o->struct_size >= offsetof(h3_engine_options, flag_messages) + sizeof o->flag_messages)
        eng->opt.flag_messages = o->flag_messages; /* the wording of open's own errors */
    h3_err e = {{0}};
    snap_kind kind;
    if (open_options(eng, o, &e)) return fail_with(eng, H3_ERR_BAD_INPUT, &e);
    if (!snapshot_dir || !snapshot_dir[0]) return h3_fail(&e, "-d SNAPSHOT_DIR is required"), fail_with(eng, H3_ERR_BAD_INPUT, &e);
    if (strlen(snapshot_dir) >= sizeof eng->dir)
        return h3_fail(&e, "-d: the path is longer than %zu bytes", sizeof eng->dir - 1), fail_with(eng, H3_ERR_BAD_INPUT, &e);
    if (!snapshot_is_dir(snapshot_dir))
        return h3_fail(&e, "-d %s: not a directory", snapshot_dir), fail_with(eng, H3_ERR_BAD_INPUT, &e);
    if (snapshot_kind(snapshot_dir, &kind, &e) != 0) return fail_with(eng, H3_ERR_BAD_INPUT, &e);
    if (kind != SNAP_DIFFUSERS_ROOT)
        return h3_fail(&e, "-d %s: an original partition tree; give the snapshot's root (the folder holding "
                           "transformer/, vae/, tokenizer/, ...)", snapshot_dir),
               fail_with(eng, H3_ERR_BAD_INPUT, &e);
    snprintf(eng->dir, sizeof eng->dir, "%s", snapshot_dir);
    if (o && o->struct_size >= offsetof(h3_engine_options, transformer) + sizeof o->transformer && o->transformer) {
        if (strlen(o->transformer) >= sizeof eng->transformer)
            return h3_fail(&e, "--transformer: the path is longer than %zu bytes", sizeof eng->transformer - 1),
                   fail_with(eng, H3_ERR_BAD_INPUT, &e);
        snprintf(eng->transformer, sizeof eng->transformer, "%s", o->transformer);
    }
    h3_request r;
    h3_request_init(&r);
    r.cuda = eng->cuda, r.threads = eng->opt.threads, r.device = eng->opt.device;
    if (!(eng->ctx = h3_gen_ctx_new(&r, &e))) return fail_with(eng, H3_ERR_OUT_OF_MEMORY, &e);
    eng->opened = 1;
    return fail_with(eng, H3_OK, &e);
}

void h3_engine_close(h3_engine *eng) {
    if (!eng) return;
    h3_gen_ctx_free(eng->ctx);
    pthread_mutex_destroy(&eng->lock);
    free(eng);
}

const char *h3_engine_error(const h3_engine *eng) { return eng ? eng->err.msg : "out of memory"; }
int h3_engine_status(const h3_engine *eng) { return eng ? eng->status : H3_ERR_OUT_OF_MEMORY; }
const char *h3_engine_backend(const h3_engine *eng) { return eng && eng->cuda ? "cuda" : "cpu"; }
const char *h3_engine_backend_note(const h3_engine *eng) { return eng ? eng->note : ""; }
void h3_engine_cancel(h3_engine *eng) {
    if (eng) eng->cancel = 1;
}

static int not_opened(h3_engine *eng) {
    h3_err e;
    if (eng->status == H3_OK) h3_fail(&e, "the engine was not opened"), fail_with(eng, H3_ERR_BAD_INPUT, &e);
    return eng->status;
}

int h3_engine_start(h3_engine *eng) {
    if (!eng->opened) return not_opened(eng);
    pthread_mutex_lock(&eng->lock);
    h3_err e = {{0}};
    int rc = h3_gen_ctx_start(eng->ctx, &e) ? fail_with(eng, api_status_of(-1, e.msg, 0), &e) : fail_with(eng, H3_OK, &e);
    pthread_mutex_unlock(&eng->lock);
    return rc;
}

int h3_engine_started(const h3_engine *eng) { return eng && eng->opened && h3_gen_ctx_started(eng->ctx); }

int h3_engine_set_memory(h3_engine *eng, int memory) {
    h3_err e = {{0}};
    if (memory < H3_MEMORY_PHASES || memory > H3_MEMORY_AUTO)
        return h3_fail(&e, "memory must be H3_MEMORY_PHASES, H3_MEMORY_RESIDENT or H3_MEMORY_AUTO, got %d", memory),
               fail_with(eng, H3_ERR_BAD_INPUT, &e);
    pthread_mutex_lock(&eng->lock);
    eng->opt.memory = memory;
    if (memory == H3_MEMORY_PHASES && eng->opened) h3_gen_ctx_drop_models(eng->ctx);
    pthread_mutex_unlock(&eng->lock);
    return fail_with(eng, H3_OK, &e);
}

int h3_engine_set_ssd_streaming(h3_engine *eng, int on) {
    h3_err e = {{0}};
    if (on != 0 && on != 1) return h3_fail(&e, "ssd_streaming must be 0 or 1, got %d", on), fail_with(eng, H3_ERR_BAD_INPUT, &e);
    if (on && eng->quant_fp8)
        return h3_fail(&e, "--ssd-streaming cannot be combined with --quant fp8 (the FP8 blocks are made resident)"),
               fail_with(eng, H3_ERR_BAD_INPUT, &e);
    if (on && eng->quant_int8)
        return h3_fail(&e, "--ssd-streaming cannot be combined with --quant int8 (the int8 blocks are made resident)"),
               fail_with(eng, H3_ERR_BAD_INPUT, &e);
    pthread_mutex_lock(&eng->lock);
    eng->opt.ssd_streaming = on;
    pthread_mutex_unlock(&eng->lock);
    return fail_with(eng, H3_OK, &e);
}

int h3_engine_set_quant(h3_engine *eng, const char *quant, int int8_fc2_groups) {
    h3_err e = {{0}};
    const char *q = quant ? quant : "none";
    const int fp8 = !strcmp(q, "fp8"), int8 = !strcmp(q, "int8");
    if (!fp8 && !int8 && strcmp(q, "none"))
        return h3_fail(&e, "--quant must be none, fp8 or int8, got '%.64s'", q), fail_with(eng, H3_ERR_BAD_INPUT, &e);
    if (int8_fc2_groups != 0 && int8_fc2_groups != 1)
        return h3_fail(&e, "--int8-fc2-groups must be 0 or 1, got %d", int8_fc2_groups), fail_with(eng, H3_ERR_BAD_INPUT, &e);
    if (int8_fc2_groups && !int8)
        return h3_fail(&e, "--int8-fc2-groups needs --quant int8"), fail_with(eng, H3_ERR_BAD_INPUT, &e);
    if ((fp8 || int8) && !eng->bf16)
        return h3_fail(&e, "--quant %s needs --precision bf16 (the fp32 mode is the reference)", q),
               fail_with(eng, H3_ERR_BAD_INPUT, &e);
    if ((fp8 || int8) && eng->opt.ssd_streaming)
        return h3_fail(&e, "--ssd-streaming cannot be combined with --quant %s (the quantized blocks are made resident)", q),
               fail_with(eng, H3_ERR_BAD_INPUT, &e);
    pthread_mutex_lock(&eng->lock);
    /* the kept transformer's key holds these settings (gen_dit.c), so the next load quantizes as asked */
    eng->quant_fp8 = fp8, eng->quant_int8 = int8, eng->opt.int8_fc2_groups = int8_fc2_groups;
    eng->opt.quant = fp8 ? "fp8" : int8 ? "int8" : "none";
    pthread_mutex_unlock(&eng->lock);
    return fail_with(eng, H3_OK, &e);
}

int h3_engine_has_task(h3_engine *eng, int task) {
    if (!eng->opened) return not_opened(eng);
    h3_err e = {{0}};
    char dir[API_PATH_CAP];
    if (task < H3_TASK_T2VA || task > H3_TASK_REF2VA)
        return h3_fail(&e, "task must be H3_TASK_T2VA, H3_TASK_FL2VA or H3_TASK_REF2VA, got %d", task),
               fail_with(eng, H3_ERR_BAD_INPUT, &e);
    if (snapshot_dit_dir(eng->dir, task == H3_TASK_REF2VA, dir, sizeof dir, &e)) return fail_with(eng, H3_ERR_BAD_INPUT, &e);
    return fail_with(eng, H3_OK, &e);
}

int h3_engine_cached_models(const h3_engine *eng, char *buf, size_t cap) {
    if (cap) buf[0] = 0;
    if (!eng || !eng->opened) return 0;
    pthread_mutex_lock((pthread_mutex_t *)&eng->lock);
    int n = h3_gen_ctx_models(eng->ctx, buf, cap);
    pthread_mutex_unlock((pthread_mutex_t *)&eng->lock);
    return n;
}

void h3_engine_drop_models(h3_engine *eng) {
    if (!eng || !eng->opened) return;
    pthread_mutex_lock(&eng->lock);
    h3_gen_ctx_drop_models(eng->ctx);
    pthread_mutex_unlock(&eng->lock);
}

static int check_frame_sink(void *user, const float *rgb, int width, int height, int64_t index, int64_t frames) {
    (void)user, (void)rgb, (void)width, (void)height, (void)index, (void)frames;
    return 0;
}

int h3_engine_check(h3_engine *eng, const h3_params *p, int *frames) {
    if (!eng->opened) return not_opened(eng);
    h3_request r;
    api_temps t;
    h3_err e = {{0}};
    int aligned = 0;
    /* in-memory inputs are checked by their writers here too, then their temporaries go */
    int rc = api_request_from(eng, p, &r, &t, &e);
    if (!rc) {
        /* the sinks are h3_engine_generate's: here a request with no output file is taken as one that has them */
        if (!r.on_frame) r.on_frame = check_frame_sink;
        rc = h3_request_validate(&r, &aligned, &e);
    }
    api_temps_remove(&t);
    if (rc) return fail_with(eng, H3_ERR_BAD_INPUT, &e);
    if (frames) *frames = aligned;
    return fail_with(eng, H3_OK, &e);
}

int h3_engine_generate(h3_engine *eng, const h3_params *p, const h3_sinks *sinks) {
    if (!eng->opened) return not_opened(eng);
    pthread_mutex_lock(&eng->lock);
    h3_request r;
    api_temps t;
    h3_err e = {{0}};
    int status;
    if (api_request_from(eng, p, &r, &t, &e)) {
        status = fail_with(eng, H3_ERR_BAD_INPUT, &e);
    } else {
        api_hooks hooks = {eng, sinks};
        api_hooks_install(&hooks, &r);
        int rc = h3_generate_in(eng->ctx, &r, &e);
        status = fail_with(eng, api_status_of(rc, e.msg, rc && eng->cancel), &e);
    }
    api_temps_remove(&t);
    eng->cancel = 0;
    pthread_mutex_unlock(&eng->lock);
    return status;
}
