/* `h3 generate`, end to end (docs/model/features.md 4): conditioning (tokenizer, Qwen3-VL prefix) ->
 * DiT denoising (layout, noise, scheduler) -> audio and video decoders -> outputs.
 * One phase's weights are resident at a time: the text encoder is freed before the DiT loads,
 * the DiT before the decoders (docs/model/features.md 7.1), so peak memory is the largest phase.
 * With --backend cuda a phase runs on the GPU when every op it uses has a CUDA twin (the DiT, the
 * video VAE decoder) and on a CPU backend otherwise (text encoder + vision tower: ops.h's
 * bf16 ops; audio VAE: ops.h; video VAE encoder: ops.h); each phase says where
 * it ran (one stderr line, and the --profile table's phase names). */
#include "generate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/backend.h"
#include "../backend/backend_check.h"
#include "../core/tuning.h"
#include "gen_cond_cache.h"
#include "gen_condition.h"
#include "gen_decode.h"
#include "gen_dit.h"
#include "gen_output.h"
#include "gen_pin_prefetch.h"
#include "gen_resident.h"
#include "gen_state.h"
#include "denoise.h"
#include "preflight.h"

/* ---- the backends, made once per context (a session keeps them between generations) ---- */
struct h3_gen_ctx {
    int         cuda, threads, device; /* the backend every request of this context must ask for */
    h3_backend *be, *cpu;        /* NULL until started; cpu == be with --backend cpu */
    resident    res;             /* --resident / the session default: the models kept between requests (on be / cpu) */
    cond_cache  cc;              /* the last request's conditioning (host memory) */
    int         knobs_checked;   /* the unknown H3_* variables were said (once per context) */
    h3_backend *peers[7];        /* --parallel: ranks 1.. (CPU backends, or CUDA devices device+1..), made when first asked */
    int         n_peers;
};

/* --parallel n: the backends of ranks 1..n-1, made once (more when a later request asks for more) */
static int ensure_peers(h3_gen_ctx *c, int n, h3_err *e) {
    for (int r = c->n_peers + 1; r < n; r++) {
        h3_err why;
        h3_backend *b = h3_backend_new_on(c->cuda ? H3_BACKEND_CUDA : H3_BACKEND_CPU, c->threads, c->device + r, &why);
        if (!b && c->cuda)
            return h3_fail(e, "--parallel %d: needs GPUs %d..%d, GPU %d cannot start (%s)", n, c->device,
                           c->device + n - 1, c->device + r, why.msg);
        if (!b) return h3_fail(e, "--parallel %d: CPU rank %d: %s", n, r, why.msg);
        c->peers[c->n_peers++] = b;
    }
    return 0;
}

h3_gen_ctx *h3_gen_ctx_new(const h3_request *r, h3_err *e) {
    h3_gen_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        h3_fail(e, "out of memory");
        return NULL;
    }
    c->cuda = r->cuda;
    c->threads = r->threads;
    c->device = r->device;
    return c;
}

static void gen_ctx_stop(h3_gen_ctx *c) {
    resident_drop(&c->res); /* its models live on the backends */
    for (int r = 0; r < c->n_peers; r++) h3_backend_free(c->peers[r]);
    c->n_peers = 0;
    if (c->cpu != c->be) h3_backend_free(c->cpu);
    h3_backend_free(c->be);
    c->be = c->cpu = NULL;
}

int h3_gen_ctx_start(h3_gen_ctx *c, h3_err *e) {
    if (c->be) return 0;
    c->be = h3_backend_new_on(c->cuda ? H3_BACKEND_CUDA : H3_BACKEND_CPU, c->threads, c->device, e);
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

/* request.h's cancel flag, checked between phases: -1 with "cancelled (Ctrl-C) before PHASE" */
static int cancelled(const gen *s, const char *next, h3_err *e) {
    return (s->r->cancel && *s->r->cancel) || s->pg.stopped ? h3_fail(e, "cancelled (Ctrl-C) before the %s", next) : 0;
}

/* Everything one request held (a failed run: the output temporaries go, nothing half-written stays). */
static void gen_release(gen *s) {
    h3_mp4_writer_free(s->mp4);
    outputs_free(s); /* a failed run: the temporaries go, nothing half-written stays */
    presentation_free(&s->pres);
    cond_set_free(&s->cond);
    free(s->text);
    free(s->video_latents);
    free(s->audio_latents);
    free(s->frames);
    free(s->audio);
}

/* The request in one line (task, canvas, frames, steps, seed, precision, backend), and --reuse's count. */
static void log_request(const gen *s) {
    char canvas[64];
    if (s->out_w != s->g.width || s->out_h != s->g.height)
        snprintf(canvas, sizeof canvas, "%dx%d (rendered at %dx%d)", s->out_w, s->out_h, s->g.width, s->g.height);
    else
        snprintf(canvas, sizeof canvas, "%dx%d", s->g.width, s->g.height);
    gen_log(s->r, "%s %s, %d frames (%d latent), %d audio latents, %d steps, seed %llu, %s on %s%s",
            s->task == H3_T2VA ? "t2va" : s->task == H3_FL2VA ? "fl2va" : "ref2va", canvas, s->g.num_frames,
            s->g.num_latent_frames, s->g.num_audio_latents, s->r->steps, (unsigned long long)s->r->seed,
            s->r->bf16 ? "bf16" : "fp32", h3_backend_name(s->be), s->r->backend_note ? s->r->backend_note : "");
    if (s->r->reuse > 1) {
        gen_log(s->r, "--reuse %d: %d model evaluations for %d passes", s->r->reuse,
                denoise_fresh_passes(s->r->steps, s->r->reuse), s->r->steps);
        if (s->r->steps >= 2 && s->r->steps <= 7)
            gen_log(s->r, "warning: --reuse %d with %d steps: keep reuse at 1 for 7 steps or fewer "
                            "(docs/model/features.md 5.1)", s->r->reuse, s->r->steps);
    }
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
    if (r->parallel > 1 && ensure_peers(c, r->parallel, e)) {
        outputs_free(&s);
        free(ckey);
        cond_set_free(&s.cond);
        return -1;
    }
    s.be = c->be;
    s.cpu = c->cpu;
    s.peers = c->peers, s.parallel = r->parallel > 1 ? r->parallel : 1;
    s.cc = &c->cc;
    if (r->resident) s.res = &c->res;
    else resident_drop(&c->res); /* !resident off: the kept models go */
    if (r->resident == H3_RESIDENT_AUTO) resident_free(&c->res, 1, 0); /* what --resident kept of the others goes */
    if (r->cuda) s.pg.device = s.be; /* --profile's peak GPU memory per phase */
    log_request(&s);
    if (!c->knobs_checked) { /* a misspelt knob would silently change nothing (docs/tuning.md) */
        char names[512];
        if (h3_knob_unknown(names, sizeof names))
            gen_log(r, "warning: unknown environment variable(s) %s: not knobs of docs/tuning.md", names);
        c->knobs_checked = 1;
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
    gen_release(&s);
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
