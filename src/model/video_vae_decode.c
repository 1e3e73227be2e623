/* The video VAE's decode drivers (docs/model/video_vae.md 8.3, 13): the plan of jobs (clip, tile row, tile column),
 * the per-tile and tile-batched paths over the decoder's tile work (video_vae.c), the host part (unpatchify,
 * stitch, the temporal cross-fade, the frames to the sink in order). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../backend/backend_bench.h"
#include "../backend/ops.h"
#include "../core/tuning.h"
#include "video_vae.h"
#include "video_vae_internal.h"

static const char *const vp_names[VP_N] = {"in", "qkv", "qk_norm_rope", "attention", "to_out", "residual_norm",
                                           "ff1", "swiglu", "ff2", "norm_out+proj_out"};

/* ---- decode driver (docs/model/video_vae.md 8.3) ---- */

/* One decode's plan and clip buffers: jobs k = (chunk, tile row i, tile column j) in order. */
typedef struct vv_dec {
    video_vae           *v;
    const float         *z;
    int64_t              L, h, w;
    video_vae_frame_sink sink;
    void                *ctx;
    vv_stitch            s;
    int64_t              cl, main_n, tail_n, nsel, frame, total, chunks, per_chunk, njobs;
    float               *tile, *chunk, *pend;
    int64_t             *slot; /* decoded frame of a clip -> kept slot, or -1 */
    int64_t              have_pend, emitted;
} vv_dec;

static void job_tile(const vv_dec *d, int64_t k, int *i, int *j) {
    *i = (int)(k % d->per_chunk / d->s.nx);
    *j = (int)(k % d->s.nx);
}

static int64_t job_tokens_count(const vv_dec *d, int64_t k) {
    int i, j;
    job_tile(d, k, &i, &j);
    return d->cl * (d->s.th[i] / d->v->cfg.S) * (d->s.tw[j] / d->v->cfg.S);
}

/* Tokens (t, y, x) of job k's latent slab into dst [np][C]; frames past L repeat the last (docs/model/video_vae.md 8.3 step 2). */
static void job_tokens(const vv_dec *d, int64_t k, float *dst) {
    const video_vae_config *c = &d->v->cfg;
    const int64_t S = c->S, Cz = c->latent_channels, ch = k / d->per_chunk, L = d->L, h = d->h, w = d->w;
    int i, j;
    job_tile(d, k, &i, &j);
    const int64_t th = d->s.th[i] / S, tw = d->s.tw[j] / S, ly = d->s.ys[i] / S, lx = d->s.xs[j] / S;
    for (int64_t tt = 0; tt < d->cl; tt++) {
        int64_t src_t = ch * c->K + tt < L ? ch * c->K + tt : L - 1;
        for (int64_t y = 0; y < th; y++)
            for (int64_t x = 0; x < tw; x++) {
                float *o = dst + ((tt * th + y) * tw + x) * Cz;
                for (int64_t cz = 0; cz < Cz; cz++) o[cz] = d->z[((cz * L + src_t) * h + ly + y) * w + lx + x];
            }
    }
}

/* The host part of job k from its decoder output out [np][patch_dim]: unpatchify the kept frames (docs/model/video_vae.md 7 step 9),
 * stitch; after a clip's last tile the temporal cross-fade (docs/model/video_vae.md 8.3 step 3.3) and the frames to the sink. */
static int job_finish(vv_dec *d, int64_t k, const float *out, h3_err *e) {
    const video_vae_config *c = &d->v->cfg;
    const int64_t S = c->S, R = c->R, frame = d->frame;
    int i, j;
    job_tile(d, k, &i, &j);
    const int64_t th = d->s.th[i] / S, tw = d->s.tw[j] / S, np = d->cl * th * tw, TH = th * S, TW = tw * S;
    float *tile = d->tile;
    const int64_t *slot = d->slot;
#pragma omp parallel for schedule(static) if (np * c->patch_dim >= (1 << 15))
    for (int64_t n = 0; n < np; n++) {
        const int64_t lt = n / (th * tw), y = n / tw % th, x = n % tw;
        const float *src = out + n * c->patch_dim;
        for (int64_t cc = 0; cc < c->out_channels; cc++)
            for (int64_t a = 0; a < R; a++) {
                int64_t sl = slot[R * lt + a];
                if (sl < 0) continue;
                for (int64_t u = 0; u < S; u++)
                    memcpy(tile + ((sl * c->out_channels + cc) * TH + y * S + u) * TW + x * S,
                           src + ((cc * R + a) * S + u) * S, (size_t)S * sizeof(float));
            }
    }
    if (vv_stitch_tile(&d->s, i, j, tile, d->chunk, e) != 0) return -1;
    if (k % d->per_chunk != d->per_chunk - 1) return 0; /* the chunk is complete after its last tile */
    if (d->have_pend) {
        int64_t ext = min3(d->have_pend, d->main_n, c->FO);
        for (int64_t m = 0; m < ext; m++) {
            float wb = (float)m / (float)ext, wa = 1.0f - wb;
            float *cur = d->chunk + m * frame;
            const float *prev = d->pend + m * frame;
#pragma omp parallel for schedule(static) if (frame >= (1 << 15))
            for (int64_t p = 0; p < frame; p++) cur[p] = prev[p] * wa + cur[p] * wb;
        }
    }
    for (int64_t m = 0; m < d->main_n && d->emitted < d->total; m++, d->emitted++)
        if (d->sink(d->ctx, d->emitted, d->chunk + m * frame, e) != 0) return -1;
    if (d->tail_n > 0) {
        memcpy(d->pend, d->chunk + d->main_n * frame, (size_t)(d->tail_n * frame) * sizeof(float));
        d->have_pend = d->tail_n;
    }
    return 0;
}

/* Per-tile path (fp32 mode, and the bf16 mode with batch 1): tile k+1 is queued on the backend before the host
 * unpatchifies and stitches tile k (CUDA: the GPU works meanwhile; CPU: the same order of work). */
static int decode_jobs_per_tile(vv_dec *d, h3_err *e) {
    video_vae *v = d->v;
    const video_vae_config *c = &v->cfg;
    vv_dec_ws ws = {0};
    int rc = -1;
    if (vv_dec_ws_new(v->be, c, job_tokens_count(d, 0), v->bf16 ? 0 : FFN_ROWS, &ws, e) != 0) return -1;
    for (int64_t k = 0; k <= d->njobs; k++) {
        if (k > 0) vv_decode_tile_finish(v, &ws, job_tokens_count(d, k - 1)); /* ws.h_out and the buffers free again */
        if (k < d->njobs) {
            int i, j;
            job_tile(d, k, &i, &j);
            job_tokens(d, k, ws.h_tok);
            vv_decode_tile(v, &ws, d->cl, d->s.th[i] / c->S, d->s.tw[j] / c->S);
        }
        /* a kernel the backend could not run leaves garbage: its error, not the tile, reaches the caller */
        if (k > 0 && (h3_backend_check(v->be, e) != 0 || job_finish(d, k - 1, ws.h_out, e) != 0)) goto done;
    }
    rc = 0;
done:
    vv_dec_ws_free(v->be, &ws);
    return rc;
}

/* Batched path (bf16 mode): consecutive jobs of one tile shape in batches; batch g is queued (compute, then an
 * asynchronous download into host slot g % 2) before the host waits for batch g-1's download and finishes its
 * tiles, so the GPU computes batch g while batch g-1 is copied and stitched. */
/* Tiles per batch (before the batches are evened out) for tiles of np tokens; batch: video_vae_set_decode_batch's. */
static int64_t batch_cap(const video_vae_config *c, int64_t np, int batch) {
    int64_t cap = batch > 0 ? batch : VV_OUT_BUDGET / (np * c->patch_dim * (int64_t)sizeof(float));
    if (cap > VV_MAX_BATCH && batch <= 0) cap = VV_MAX_BATCH;
    return cap < 1 ? 1 : cap;
}

/* Bytes of one pinned download slot: a full batch's output, then its tokens (uploaded from there: the host fills
 * the other slot's tokens while this upload may still be queued), + the tokens' alignment. */
static size_t slot_bytes(const video_vae_config *c, int64_t np, int64_t cap) {
    return (size_t)(cap * np * (c->patch_dim + c->latent_channels) * (int64_t)sizeof(float)) + 256;
}

/* The jobs of the batch starting at job k0 (prev_n: the batch before it had jobs), consecutive jobs of one tile shape:
 * the one-rank batched path and the parallel decode form the very same batches (bit-identical outputs). */
static int64_t batch_jobs(const vv_dec *d, int64_t k0, int64_t cap, int64_t prev_n) {
    const video_vae *v = d->v;
    int i0, j0;
    job_tile(d, k0, &i0, &j0);
    /* the last batch's download and host part are the decode's tail (no GPU work beside them): automatic batching
     * ends on a batch of a quarter (H3_VAE_TAIL=0: equal batches), its predecessor's host part running beside its
     * compute */
    int64_t lim = cap, rest = d->njobs - k0, small = (cap + 3) / 4, n = 0;
    if (v->small_tail && v->batch <= 0 && rest <= cap && rest > small && prev_n > 0) lim = rest - small;
    while (n < lim && k0 + n < d->njobs) { /* same tile shape */
        int i, j;
        job_tile(d, k0 + n, &i, &j);
        if (d->s.th[i] != d->s.th[i0] || d->s.tw[j] != d->s.tw[j0]) break;
        n++;
    }
    return n;
}

/* Tiles per batch of a decode (equal batches, and at least two when there are 4+ jobs: the host stitches batch g-1
 * while the GPU computes batch g, so only the last batch's host part is not overlapped). */
static int64_t batch_plan_cap(const vv_dec *d) {
    const video_vae *v = d->v;
    int64_t cap = batch_cap(&v->cfg, job_tokens_count(d, 0), v->batch);
    int64_t nbat = (d->njobs + cap - 1) / cap;
    if (nbat < 2 && d->njobs >= 4 && v->batch <= 0) nbat = 2;
    return (d->njobs + nbat - 1) / nbat;
}

static int decode_jobs_batched(vv_dec *d, h3_err *e) {
    video_vae *v = d->v;
    h3_backend *be = v->be;
    const video_vae_config *c = &v->cfg;
    const int64_t np0 = job_tokens_count(d, 0), tile_tok = np0 * c->latent_channels * (int64_t)sizeof(float);
    int64_t cap = batch_cap(c, np0, v->batch);
    /* Kept by the model (pinned allocations are slow), sized for a full batch even when this decode has fewer
     * jobs (video_vae_download_slot_bytes gives the same size ahead of time). */
    size_t need = slot_bytes(c, np0, cap);
    cap = batch_plan_cap(d);
    if (v->pin_bytes < need) {
        for (int s = 0; s < 2; s++) {
            h3_host_free(be, v->pin[s]);
            v->pin[s] = h3_host_alloc(be, need);
        }
        v->pin_bytes = v->pin[0] && v->pin[1] ? need : 0;
        if (!v->pin_bytes) return h3_fail(e, "video VAE decoder: out of host memory for %zu-byte download buffers", need);
    }
    vv_bat_ws w;
    if (vv_bat_ws_new(be, c, cap, np0, v->fp8, &w, e) != 0) return -1;
    v->vp_on = h3_knob_int(H3_KNOB_VAE_PROFILE, 0) > 0;
    memset(v->vp_acc, 0, sizeof v->vp_acc);
    double vp_start = vv_now();
    h3_xfer *xf = h3_xfer_new(be);
    int rc = -1, slot = 0;
    int64_t prev_k0 = -1, prev_n = 0;
    if (!xf) {
        h3_fail(e, "video VAE decoder: cannot create the download stream");
        goto done;
    }
    for (int64_t k0 = 0; k0 < d->njobs || prev_n > 0;) {
        int64_t n = 0;
        if (k0 < d->njobs) {
            int i0, j0;
            job_tile(d, k0, &i0, &j0);
            const int64_t th = d->s.th[i0], tw = d->s.tw[j0], np = job_tokens_count(d, k0);
            const size_t tok_off = (v->pin_bytes - (size_t)(cap * tile_tok)) / 256 * 256; /* tokens at the end */
            float *h_tok = (float *)((uint8_t *)v->pin[slot] + tok_off);
            n = batch_jobs(d, k0, cap, prev_n);
            for (int64_t t = 0; t < n; t++) job_tokens(d, k0 + t, h_tok + t * np * c->latent_channels);
            vv_decode_batch(v, &w, h_tok, n, d->cl, th / c->S, tw / c->S, slot);
            h3_download_async(be, xf, slot, v->pin[slot], w.out[slot], (size_t)(n * np * c->patch_dim) * sizeof(float));
        }
        if (prev_n > 0) {
            h3_download_wait(be, xf, slot ^ 1);
            if (h3_backend_check(be, e) != 0) goto done; /* as decode_jobs_per_tile */
            const float *out = v->pin[slot ^ 1];
            for (int64_t t = 0; t < prev_n; t++) {
                if (job_finish(d, prev_k0 + t, out, e) != 0) goto done;
                out += job_tokens_count(d, prev_k0 + t) * c->patch_dim;
            }
        }
        prev_k0 = k0, prev_n = n;
        k0 += n;
        slot ^= 1;
    }
    rc = 0;
    if (v->vp_on) {
        h3_sync(be);
        double all = vv_now() - vp_start, sum = 0;
        char line[512];
        int off = snprintf(line, sizeof line, "vae profile: %lld jobs, batch %lld, %.3f s:", (long long)d->njobs,
                           (long long)cap, all);
        for (int k = 0; k < VP_N && off > 0 && off < (int)sizeof line; k++)
            off += snprintf(line + off, sizeof line - off, " %s %.3f", vp_names[k], v->vp_acc[k]), sum += v->vp_acc[k];
        if (off > 0 && off < (int)sizeof line) snprintf(line + off, sizeof line - off, " host/other %.3f", all - sum);
        if (v->log) v->log(v->log_user, 0, line);
    }
done:
    if (xf) {
        h3_download_wait(be, xf, 0);
        h3_download_wait(be, xf, 1);
        h3_xfer_free(be, xf);
    }
    vv_bat_ws_free(be, &w);
    return rc;
}

/* ---- the parallel decode (docs/parallel.md): the one-rank plan's units (a job on the per-tile path, a batch on the
 * batched one) dealt round-robin to the ranks, each rank's decoder computing its units' outputs into host buffers;
 * the calling thread runs the host part of every unit in order, so the frames are those of one rank, bit for bit ---- */

typedef struct par_unit {
    int64_t k0, n;
    float  *out;   /* [jobs][np][patch_dim], host; NULL until ready */
} par_unit;

typedef struct par_dec {
    vv_dec          *d;
    video_vae *const *vs;
    int              n, batched;
    int64_t          cap, nunits, done; /* units finished by the host part */
    par_unit        *u;
    pthread_mutex_t  mu;
    pthread_cond_t   cv;
    int              failed; /* a rank failed (err) or the host part stopped: every rank stops */
    h3_err           err;
} par_dec;

typedef struct par_rank {
    par_dec *p;
    int      rank;
} par_rank;

static void *par_rank_main(void *arg) {
    par_rank *pr = arg;
    par_dec *p = pr->p;
    vv_dec *d = p->d;
    video_vae *v = p->vs[pr->rank];
    const video_vae_config *c = &v->cfg;
    h3_backend *be = v->be;
    h3_backend_bind_thread(be);
    const int64_t np0 = job_tokens_count(d, 0);
    h3_err e = {{0}};
    vv_dec_ws ws = {0};
    vv_bat_ws w = {0};
    float *tok = NULL;
    int ok = p->batched ? vv_bat_ws_new(be, c, p->cap, np0, v->fp8, &w, &e) == 0 &&
                              (tok = h3_host_alloc(be, (size_t)(p->cap * np0 * c->latent_channels) * sizeof(float)))
                        : vv_dec_ws_new(be, c, np0, v->bf16 ? 0 : FFN_ROWS, &ws, &e) == 0;
    if (!ok && !e.msg[0]) h3_fail(&e, "video VAE decoder: out of host memory for a batch's tokens");
    for (int64_t k = pr->rank; ok && k < p->nunits; k += p->n) {
        pthread_mutex_lock(&p->mu); /* at most two units per rank ahead of the host part */
        while (!p->failed && k >= p->done + 2 * p->n) pthread_cond_wait(&p->cv, &p->mu);
        const int stop = p->failed;
        pthread_mutex_unlock(&p->mu);
        if (stop) break;
        par_unit *u = &p->u[k];
        int i, j;
        job_tile(d, u->k0, &i, &j);
        const int64_t np = job_tokens_count(d, u->k0), th = d->s.th[i] / c->S, tw = d->s.tw[j] / c->S;
        float *out = malloc((size_t)(u->n * np * c->patch_dim) * sizeof(float));
        if (!out) {
            ok = h3_fail(&e, "video VAE decoder: out of memory for a unit's output") == 0;
            break;
        }
        if (p->batched) {
            for (int64_t t = 0; t < u->n; t++) job_tokens(d, u->k0 + t, tok + t * np * c->latent_channels);
            vv_decode_batch(v, &w, tok, u->n, d->cl, th, tw, 0);
            h3_download(be, out, w.out[0], (size_t)(u->n * np * c->patch_dim) * sizeof(float));
        } else {
            job_tokens(d, u->k0, ws.h_tok);
            vv_decode_tile(v, &ws, d->cl, th, tw);
            vv_decode_tile_finish(v, &ws, np);
            memcpy(out, ws.h_out, (size_t)(np * c->patch_dim) * sizeof(float));
        }
        if (h3_backend_check(be, &e) != 0) {
            free(out);
            ok = 0;
            break;
        }
        pthread_mutex_lock(&p->mu);
        u->out = out;
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    if (!ok) {
        pthread_mutex_lock(&p->mu);
        if (!p->failed) p->failed = 1, h3_fail(&p->err, "video VAE decoder rank %d: %s", pr->rank, e.msg);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    if (p->batched) vv_bat_ws_free(be, &w), h3_host_free(be, tok);
    else vv_dec_ws_free(be, &ws);
    return NULL;
}

static int decode_jobs_parallel(vv_dec *d, video_vae *const *vs, int n, int batched, h3_err *e) {
    par_dec p = {.d = d, .vs = vs, .n = n, .batched = batched};
    p.cap = batched ? batch_plan_cap(d) : 1;
    if (!(p.u = calloc((size_t)d->njobs, sizeof *p.u))) return h3_fail(e, "out of memory");
    for (int64_t k0 = 0, prev = 0; k0 < d->njobs; k0 += prev) { /* the one-rank plan */
        prev = batched ? batch_jobs(d, k0, p.cap, prev) : 1;
        p.u[p.nunits].k0 = k0, p.u[p.nunits++].n = prev;
    }
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.cv, NULL);
    par_rank pr[8];
    pthread_t th[8];
    int started = 0, rc = 0;
    for (; started < n; started++) {
        pr[started] = (par_rank){&p, started};
        if (pthread_create(&th[started], NULL, par_rank_main, &pr[started]) != 0) {
            p.failed = 1, rc = h3_fail(e, "video VAE decoder: cannot start rank %d's thread", started);
            break;
        }
    }
    const video_vae_config *c = &d->v->cfg;
    for (int64_t k = 0; rc == 0 && k < p.nunits; k++) { /* the host part, in the plan's order */
        pthread_mutex_lock(&p.mu);
        while (!p.failed && !p.u[k].out) pthread_cond_wait(&p.cv, &p.mu);
        const int stop = p.failed;
        pthread_mutex_unlock(&p.mu);
        if (stop) break;
        const float *out = p.u[k].out;
        for (int64_t t = 0; rc == 0 && t < p.u[k].n; t++) {
            rc = job_finish(d, p.u[k].k0 + t, out, e);
            out += job_tokens_count(d, p.u[k].k0 + t) * c->patch_dim;
        }
        free(p.u[k].out), p.u[k].out = NULL;
        pthread_mutex_lock(&p.mu);
        p.done = k + 1;
        if (rc) p.failed = 1;
        pthread_cond_broadcast(&p.cv);
        pthread_mutex_unlock(&p.mu);
    }
    if (rc == 0 && p.failed) {
        pthread_mutex_lock(&p.mu); /* a rank's failure */
        p.failed = 1;
        pthread_cond_broadcast(&p.cv);
        pthread_mutex_unlock(&p.mu);
    }
    for (int r = 0; r < started; r++) pthread_join(th[r], NULL);
    if (rc == 0 && p.err.msg[0]) rc = h3_fail(e, "%s", p.err.msg);
    for (int64_t k = 0; k < p.nunits; k++) free(p.u[k].out);
    free(p.u);
    pthread_mutex_destroy(&p.mu);
    pthread_cond_destroy(&p.cv);
    return rc;
}

int video_vae_decode_stream(video_vae *v, const float *z, int64_t L, int64_t h, int64_t w,
                            const video_vae_tiling *tiling, video_vae_frame_sink sink, void *ctx, h3_err *e) {
    return video_vae_decode_stream_parallel(&v, 1, z, L, h, w, tiling, sink, ctx, e);
}

int video_vae_decode_stream_parallel(video_vae *const *vs, int nranks, const float *z, int64_t L, int64_t h, int64_t w,
                                     const video_vae_tiling *tiling, video_vae_frame_sink sink, void *ctx, h3_err *e) {
    video_vae *v = vs[0];
    const video_vae_config *c = &v->cfg;
    if (nranks < 1 || nranks > 8) return h3_fail(e, "video VAE decoder: %d ranks, the range is 1..8", nranks);
    if (!(v->parts & VIDEO_VAE_DECODER)) return h3_fail(e, "video VAE: decoder weights were not loaded");
    if (h < 1 || w < 1) return h3_fail(e, "latents: height and width must be >= 1");
    int64_t total = video_vae_decoded_frames(c, L, e);
    if (total < 0) return -1;
    video_vae_tiling t;
    if (vv_resolve_tiling(tiling, c->S, &t, e) != 0) return -1;

    vv_dec d;
    memset(&d, 0, sizeof d);
    d.v = v, d.z = z, d.L = L, d.h = h, d.w = w, d.sink = sink, d.ctx = ctx, d.total = total;
    const int64_t S = c->S, R = c->R, td = c->token_drop;
    d.cl = c->K + c->O; /* latent frames per clip */
    const int64_t H = h * S, W = w * S, tc = d.cl * R;
    d.frame = (int64_t)c->out_channels * H * W;
    d.main_n = (tc < c->CF ? tc : c->CF) - c->P;
    d.tail_n = td > 0 ? (tc < 2 * c->CF ? tc : 2 * c->CF) - c->CF - c->P : 0;
    if (d.main_n < 0) d.main_n = 0;
    if (d.tail_n < 0) d.tail_n = 0;
    d.nsel = d.main_n + d.tail_n; /* decoded frames kept from each clip: main part, then the tail */
    const int64_t tokens = L + td, pad = ((-tokens) % c->K + c->K) % c->K;
    d.chunks = (tokens + pad) / c->K - (td > 0);

    if (vv_stitch_init(&d.s, H, W, &t, (int)S, 1, d.nsel * c->out_channels, e) != 0) return -1;
    d.per_chunk = (int64_t)d.s.ny * d.s.nx;
    d.njobs = d.chunks * d.per_chunk;
    int rc = -1;
    d.tile = malloc((size_t)(d.nsel * c->out_channels * d.s.th[0] * d.s.tw[0]) * sizeof(float));
    d.chunk = malloc((size_t)(d.nsel * d.frame) * sizeof(float));
    d.pend = malloc((size_t)((d.tail_n ? d.tail_n : 1) * d.frame) * sizeof(float));
    d.slot = malloc((size_t)tc * sizeof(int64_t));
    if (!d.tile || !d.chunk || !d.pend || !d.slot) {
        h3_fail(e, "out of memory");
        goto done;
    }
    /* decoded frame f -> slot (or -1): f = R*t + a comes from latent t, component a */
    for (int64_t f = 0; f < tc; f++) d.slot[f] = -1;
    for (int64_t m = 0; m < d.main_n; m++) d.slot[c->P + m] = m;
    for (int64_t m = 0; m < d.tail_n; m++) d.slot[c->CF + c->P + m] = d.main_n + m;

    /* the per-tile path has no FP8 GEMMs: VIDEO_VAE_FP8 always batches (a batch of one tile with batch 1) */
    const int batched = v->bf16 && (v->batch != 1 || v->fp8);
    if (nranks > 1 ? decode_jobs_parallel(&d, vs, nranks, batched, e) != 0
                   : (batched ? decode_jobs_batched(&d, e) : decode_jobs_per_tile(&d, e)) != 0)
        goto done;
    for (int64_t m = 0; m < d.have_pend && d.emitted < total; m++, d.emitted++)
        if (sink(ctx, d.emitted, d.pend + m * d.frame, e) != 0) goto done;
    rc = 0;
done:
    vv_stitch_free(&d.s);
    free(d.tile);
    free(d.chunk);
    free(d.pend);
    free(d.slot);
    return rc;
}

size_t video_vae_download_slot_bytes(const video_vae_config *c, int64_t h, int64_t w, const video_vae_tiling *tiling) {
    video_vae_tiling t;
    vv_stitch s;
    h3_err e;
    const int batch = vv_env_decode_batch();
    if (batch == 1 || h < 1 || w < 1 || vv_resolve_tiling(tiling, c->S, &t, &e) != 0) return 0; /* per-tile path */
    if (vv_stitch_init(&s, h * c->S, w * c->S, &t, (int)c->S, 1, 1, &e) != 0) return 0;
    /* job 0's tokens, as job_tokens_count: clip frames x the first tile's latent rows x columns */
    const int64_t np0 = (c->K + c->O) * (s.th[0] / c->S) * (s.tw[0] / c->S);
    vv_stitch_free(&s);
    return slot_bytes(c, np0, batch_cap(c, np0, batch));
}

typedef struct vv_collect {
    float  *out;
    int64_t T, frame_hw, channels;
} vv_collect;

static int collect_frame(void *ctx, int64_t index, const float *frame, h3_err *e) {
    vv_collect *c = ctx;
    for (int64_t ch = 0; ch < c->channels; ch++)
        memcpy(c->out + (ch * c->T + index) * c->frame_hw, frame + ch * c->frame_hw, (size_t)c->frame_hw * sizeof(float));
    return 0;
}

int video_vae_decode(video_vae *v, const float *z, int64_t L, int64_t h, int64_t w, const video_vae_tiling *tiling,
                     float *out, h3_err *e) {
    int64_t T = video_vae_decoded_frames(&v->cfg, L, e);
    if (T < 0) return -1;
    vv_collect c = {out, T, h * v->cfg.S * w * v->cfg.S, v->cfg.out_channels};
    return video_vae_decode_stream(v, z, L, h, w, tiling, collect_frame, &c, e);
}

