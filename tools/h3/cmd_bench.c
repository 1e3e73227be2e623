/* `h3 bench`: DiT forward and video VAE decode timings at given shapes with random weights made
 * directly in backend memory (no 66 GB file needed).
 *
 *   h3 bench [--backend cuda|cpu] [--shapes 512x512x22,544x960x124,1344x768x124] [--text 256]
 *            [--repeats N] [--vae-repeats N] [--precision bf16|fp32] [--quant none|fp8|int8] [--int8-fc2-groups 0|1]
 *            [--attention exact|sage8] [--token-reduction B:E] [--what dit,vae]
 *            [--config TRANSFORMER_DIR] [--vae-config VAE_DIR] [--vae-batch N,...] [--gguf-type Q8_0|Q4_K|...]
 *
 * --gguf-type makes the DiT's main-block linears random GGUF blocks of that ggml type, kept in that form on the
 * backend and expanded into two bf16 slots per block as a GGUF transformer is (docs/checkpoints.md): a release-shape
 * GGUF's time per forward and peak memory without the file.
 *
 * --vae-batch times the bf16 video decoder once per value at every shape (video_vae_set_decode_batch: tiles per
 * batched pass; 1 = the per-tile path, 0 = automatic), so old and new paths are compared in one run.
 *
 * A shape is WIDTHxHEIGHTxFRAMES (pixels, frames aligned to 17n + 5 as the pipeline does). The DiT
 * runs the t2va layout (docs/model/dit.md 6.3) with T text rows; FLOPs per forward follow docs/model/dit.md
 * section 9. Each measurement is one line `DIT key=value ...` / `VAE key=value ...` (parsed by
 * tests/cli/bench.sh), then a summary table. Random inputs; the timings do not depend on values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend_bench.h"
#include "io/gguf.h"
#include "model/dit.h"
#include "model/dit_int8.h"
#include "model/dit_parallel.h"
#include "model/dit_lora.h"
#include "model/video_vae.h"
#include "pipeline/layout.h"
#include "cli.h"
#include "core/text.h"

#define BENCH_MAX_SHAPES 16

typedef struct bench_shape {
    char name[48];
    int  width, height, frames; /* frames as requested */
    int  aligned, F, lh, lw, A; /* layout geometry (docs/model/dit.md 5) */
} bench_shape;

/* diffusers on one H200 (PyTorch 2.11, BF16, SDPA; VAE decode under fp16 autocast): docs/cuda.md. */
static const struct {
    const char *shape;
    double      dit_s, vae_s; /* 0: not measured */
} baselines[] = {
    {"512x512x22", 0.170, 0.285},
    {"544x960x124", 2.43, 3.29},
    {"1344x768x124", 6.51, 0},
};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double gib(size_t b) { return (double)b / (1024.0 * 1024.0 * 1024.0); }

static int parse_shapes(const char *list, bench_shape *out, int *n, h3_err *e) {
    *n = 0;
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        bench_shape s;
        memset(&s, 0, sizeof s);
        char tail;
        if (len == 0 || len >= sizeof s.name) return h3_fail(e, "--shapes: empty or overlong entry in '%s'", list);
        memcpy(s.name, p, len);
        if (sscanf(s.name, "%dx%dx%d%c", &s.width, &s.height, &s.frames, &tail) != 3 || s.width <= 0 ||
            s.height <= 0 || s.frames <= 0)
            return h3_fail(e, "--shapes: '%s' is not WIDTHxHEIGHTxFRAMES with positive integers", s.name);
        if (layout_check_canvas(1, 1, s.height, s.width, e) != 0 ||
            layout_align_num_frames(s.frames, &s.aligned, e) != 0 || layout_latent_frames(s.aligned, &s.F, e) != 0)
            return h3_fail(e, "--shapes: '%s': %s", s.name, e->msg);
        s.lh = s.height / 16, s.lw = s.width / 16; /* VAE spatial factor 16 (docs/model/dit.md 5) */
        s.A = layout_audio_latents(s.aligned);
        if (*n == BENCH_MAX_SHAPES) return h3_fail(e, "--shapes: at most %d shapes", BENCH_MAX_SHAPES);
        out[(*n)++] = s;
        p += len;
        if (*p == ',') p++;
    }
    if (*n == 0) return h3_fail(e, "--shapes: no shape given");
    return 0;
}

/* FLOPs of one forward (docs/model/dit.md 9): block linears + attention over S rows, the refiner on the T
 * text rows, the context embedder. I/O projections and AdaLN tables are left out as in docs/model/dit.md 9. */
static double dit_flops(const dit_config *c, int64_t S, int64_t T) {
    double H = c->hidden_size, I = (double)c->num_attention_heads * c->attention_head_dim, FF = c->ffn_dim;
    double per_row = 2.0 * (H * 3 * I + I * H + H * 2 * FF + FF * H);
    double blocks = c->num_layers * (per_row * (double)S + 4.0 * (double)S * (double)S * I);
    double refiner = c->num_refiner_layers * (per_row * (double)T + 4.0 * (double)T * (double)T * I);
    return blocks + refiner + 2.0 * c->text_dim * H * (double)T;
}

typedef struct bench_result {
    double dit_s, dit_tflop, dit_peak, vae_s, vae_peak;
    int64_t S;
    int    have_dit, have_vae;
} bench_result;

static double baseline_of(const char *shape, int vae) {
    for (size_t i = 0; i < sizeof baselines / sizeof *baselines; i++)
        if (!strcmp(baselines[i].shape, shape)) return vae ? baselines[i].vae_s : baselines[i].dit_s;
    return 0;
}

static int64_t *i64_fill(int64_t n, int64_t v) {
    int64_t *p = malloc((size_t)(n > 0 ? n : 1) * sizeof *p);
    for (int64_t i = 0; p && i < n; i++) p[i] = v;
    return p;
}

/* ---- DiT ---- */

/* --parallel N (docs/parallel.md): ranks 1..N-1's backends and models, and the team the forwards run on */
typedef struct bench_par {
    int         n;
    h3_backend *be[8];
    dit_model  *m[8];
    dit_team   *team;
} bench_par;
static bench_par par = {.n = 1};

static int forward(dit_model *m, const dit_inputs *in, float *vout, float *aout, h3_err *e) {
    return par.team ? dit_team_forward(par.team, in, vout, aout, e) : dit_forward(m, in, vout, aout, e);
}

/* the peers: the same random weights (seed 42) on their own backends (GPUs device 1.. or CPU backends), their AdaLN
 * projections released (rank 0 makes the tables), quantized and set as rank 0 */
static int par_make(h3_backend *be, dit_model *m0, const dit_config *cfg, int mode, int quant, int sage8, h3_err *e) {
    par.m[0] = m0;
    for (int r = 1; r < par.n; r++) {
        h3_err why;
        if (!(par.be[r] = h3_backend_new_on(be->kind, 0, r, &why)))
            return h3_fail(e, "--parallel %d: rank %d: %s", par.n, r, why.msg);
        if (!(par.m[r] = dit_new_random(par.be[r], cfg, mode, 42, e))) return -1;
        dit_release_adaln(par.m[r]);
        dit_set_attention(par.m[r], sage8);
        if (quant && (quant == 1 ? dit_quantize_fp8(par.m[r], e) : dit_quantize_int8(par.m[r], quant == 3, e)) != 0) return -1;
    }
    if (!(par.team = dit_team_new(par.m, par.n, be->kind == H3_BACKEND_CUDA ? H3_COMM_NCCL : H3_COMM_CPU, e))) return -1;
    printf("dit: --parallel %d: %d ranks (%s), Ulysses sequence parallelism\n", par.n, par.n,
           be->kind == H3_BACKEND_CUDA ? "GPUs 0.., NCCL" : "CPU backends");
    return 0;
}

static void par_free(void) {
    dit_team_free(par.team);
    for (int r = 1; r < par.n; r++) dit_free(par.m[r]), h3_backend_free(par.be[r]);
    par.team = NULL;
}
static const char *gguf_name;  /* --gguf-type, NULL: none */
static dit_lora_spec bench_lora; /* --lora FILE[:SCALE] (path NULL: none) */

/* ref (--compare-bf16 1 with --quant): NULL, or the bf16 forward's outputs at this shape: ref->want set: one forward
 * (no timing) whose outputs are kept in ref; else the timed forwards' outputs are compared with ref's. */
typedef struct bench_ref {
    int    want;
    float *video, *audio;
} bench_ref;

static void compare_line(const char *what, const float *got, const float *ref, int64_t n) {
    printf(" vs_bf16_%s_rel_l2=%.3e vs_bf16_%s_max_abs=%.3e", what, h3_rel_l2(got, ref, (size_t)n), what,
           h3_max_abs(got, ref, (size_t)n));
}

static int bench_dit_shape(h3_backend *be, dit_model *m, const bench_shape *s, int64_t T, const float *ts,
                           int repeats, int bf16, const int *reduce, int check_blocks, bench_ref *ref, bench_result *r,
                           h3_err *e) {
    const dit_config *c = dit_get_config(m);
    int rc = -1;
    int64_t *text_tags = i64_fill(T, 1);
    layout *L = text_tags ? layout_new_t2va(text_tags, T, s->F, s->lh, s->lw, s->A, NULL, 0, e) : NULL;
    float *video = NULL, *audio = NULL, *text = NULL, *vout = NULL, *aout = NULL;
    int64_t *tix = NULL;
    if (!L) goto done;
    int64_t pd = (int64_t)c->in_channels * c->patch_size[0] * c->patch_size[1] * c->patch_size[2];
    int64_t vo = (int64_t)c->in_channels * c->patch_size[0] * c->patch_size[1] * c->patch_size[2];
    video = malloc((size_t)(L->Nv * pd) * sizeof(float));
    audio = malloc((size_t)(L->Na * c->audio_in_channels + 1) * sizeof(float));
    text = malloc((size_t)(T * c->text_dim) * sizeof(float));
    vout = malloc((size_t)(L->Nv * vo) * sizeof(float));
    aout = malloc((size_t)(L->Na * c->audio_in_channels + 1) * sizeof(float));
    tix = malloc((size_t)L->S * sizeof *tix);
    if (!video || !audio || !text || !vout || !aout || !tix) {
        h3_fail(e, "out of memory for the inputs of shape %s", s->name);
        goto done;
    }
    h3_fill_random_host(video, H3_F32, L->Nv * pd, 1, 1.0f, 0.0f);
    h3_fill_random_host(audio, H3_F32, L->Na * c->audio_in_channels, 2, 1.0f, 0.0f);
    h3_fill_random_host(text, H3_F32, T * c->text_dim, 3, 1.0f, 0.0f);
    /* video rows at ts[0], audio rows at ts[1] (build_row_timesteps, docs/model/dit.md 6.5) */
    float tvals[LAYOUT_MAX_TIMESTEPS];
    int K;
    layout_row_timesteps(L, ts[0], ts[1], tvals, &K, tix);
    dit_inputs in = {.video = video, .Nv = L->Nv, .audio = audio, .Na = L->Na, .text = text, .Nt = T,
                     .timestep = tvals, .K = K, .S = L->S, .timestep_indices = tix,
                     .token_tags = L->token_tags, .position_ids = L->position_ids,
                     .video_indices = L->video_indices, .audio_indices = L->audio_indices,
                     .text_indices = L->text_indices, .check_blocks = check_blocks};
    if (reduce) { /* --token-reduction B:E: blocks B..E-1 on the pooled target video (docs/model/features.md 5.5) */
        in.reduce_begin = reduce[0], in.reduce_end = reduce[1], in.reduce_scale = 1.0f;
        in.reduce_frames = s->F, in.reduce_h = s->lh / 2, in.reduce_w = s->lw / 2;
    }
    h3_memory_reset_peak(be);
    /* warm-up: plans, scratch pool, cuDNN graphs */
    if (forward(m, &in, vout, aout, e) != 0) goto done;
    if (ref && ref->want) { /* the bf16 reference: kept, not timed */
        ref->video = vout, ref->audio = aout, vout = aout = NULL;
        printf("dit: bf16 forward at shape %s kept for --compare-bf16\n", s->name);
        rc = 0;
        goto done;
    }
    dit_stream_stats st0, st1;
    dit_get_stream_stats(m, &st0);
    double best = 1e30, sum = 0;
    for (int i = 0; i < repeats; i++) {
        h3_sync(be);
        double t0 = now_s();
        if (forward(m, &in, vout, aout, e) != 0) goto done;
        h3_sync(be);
        double dt = now_s() - t0;
        sum += dt;
        if (dt < best) best = dt;
    }
    for (int64_t i = 0; i < L->Nv * vo; i++)
        if (!isfinite(vout[i])) {
            h3_fail(e, "DiT output at shape %s is not finite (row %lld)", s->name, (long long)(i / vo));
            goto done;
        }
    if (getenv("H3_BENCH_HASH")) { /* two runs' outputs compared by their FNV-1a (tests/cuda/run_lora_fp32_gguf_device.sh) */
        uint64_t hv = 1469598103934665603ull, ha = hv;
        const uint8_t *pv = (const uint8_t *)vout, *pa = (const uint8_t *)aout;
        for (size_t i = 0; i < (size_t)(L->Nv * vo) * sizeof(float); i++) hv = (hv ^ pv[i]) * 1099511628211ull;
        for (size_t i = 0; i < (size_t)(L->Na * c->audio_in_channels) * sizeof(float); i++) ha = (ha ^ pa[i]) * 1099511628211ull;
        printf("dit: outputs at shape %s: video fnv1a %016llx, audio fnv1a %016llx\n", s->name, (unsigned long long)hv,
               (unsigned long long)ha);
    }
    h3_memory_stats ms;
    if (h3_memory_query(be, &ms, e) != 0) goto done;
    r->have_dit = 1;
    r->S = L->S;
    r->dit_s = sum / repeats;
    r->dit_tflop = dit_flops(c, L->S, T) / 1e12;
    r->dit_peak = gib(ms.peak_bytes);
    double base = bf16 ? baseline_of(s->name, 0) : 0; /* the baseline is BF16 */
    printf("DIT shape=%s S=%lld text=%lld video_rows=%lld audio_rows=%lld K=%d seconds=%.4g best=%.4g tflop=%.4g "
           "tflops=%.4g peak_gib=%.3g",
           s->name, (long long)L->S, (long long)T, (long long)L->Nv, (long long)L->Na, K, r->dit_s, best,
           r->dit_tflop, r->dit_tflop / r->dit_s, r->dit_peak);
    if (base > 0) printf(" baseline_s=%.3f ratio=%.2f", base, r->dit_s / base);
    if (reduce) printf(" token_reduction=%d:%d", reduce[0], reduce[1]);
    if (par.n > 1) printf(" parallel=%d", par.n);
    if (gguf_name) printf(" gguf_type=%s", gguf_name);
    if (ref && ref->video) {
        compare_line("video", vout, ref->video, L->Nv * vo);
        compare_line("audio", aout, ref->audio, L->Na * c->audio_in_channels);
    }
    dit_get_stream_stats(m, &st1);
    if (st1.slot_bytes > 0) /* --ssd-streaming, per forward: the bytes copied, the host time in the copy calls (waits for a free slot
                             * included) and bytes / forward time */
        printf(" stream_gb=%.4g stream_host_s=%.4g stream_gbps=%.4g slots_gib=%.3g", (st1.bytes - st0.bytes) / repeats / 1e9,
               (st1.host_seconds - st0.host_seconds) / repeats, (st1.bytes - st0.bytes) / 1e9 / sum, gib((size_t)st1.slot_bytes));
    if (st1.lora_bytes > 0) /* --lora with --ssd-streaming: the pieces merged into the slots per forward, the factors kept */
        printf(" lora_merges=%.4g lora_factors_gib=%.3g", (double)(st1.lora_merges - st0.lora_merges) / repeats,
               gib((size_t)st1.lora_bytes));
    printf("\n");
    fflush(stdout);
    rc = 0;
done:
    layout_free(L);
    free(text_tags), free(video), free(audio), free(text), free(vout), free(aout), free(tix);
    return rc;
}

/* quant: 0 none, 1 --quant fp8, 2 --quant int8, 3 --quant int8 with --int8-fc2-groups 1; sage8: --attention sage8 */
static int bench_dit(h3_backend *be, const char *config_dir, int bf16, int quant, int sage8, int compare, int stream,
                     const int *reduce, int check_blocks, const bench_shape *shapes, int n, int64_t T, int repeats,
                     int gguf_type, bench_result *res, h3_err *e) {
    dit_config cfg;
    if (dit_config_load(config_dir, &cfg, e) != 0) return -1;
    double t0 = now_s();
    const int mode = (bf16 ? DIT_BF16 : 0) | (stream ? DIT_STREAM : 0);
    /* --lora with --gguf-type: the pieces on the GGUF blocks merged into each slot as it is expanded (docs/lora.md) */
    dit_model *m = bench_lora.path ? dit_new_random_gguf_lora(be, &cfg, mode, 42, gguf_type, &bench_lora, 1, e)
                                   : dit_new_random_gguf(be, &cfg, mode, 42, gguf_type, e);
    if (!m) return -1;
    h3_sync(be);
    double t_build = now_s() - t0, t_quant = 0;
    /* every shape uses the same two timestep values: prepare their AdaLN tables once, then drop
     * the AdaLN projections as the pipeline does (docs/dit.md) */
    const float ts[2] = {0.75f, 0.5f};
    t0 = now_s();
    if (dit_prepare_timesteps(m, ts, 2, e) != 0) {
        dit_free(m);
        return -1;
    }
    h3_sync(be);
    double t_adaln = now_s() - t0;
    size_t wbytes = dit_weight_bytes(m), abytes = dit_adaln_weight_bytes(m);
    dit_release_adaln(m);
    printf("dit: config %s: %d layers, hidden %d, %d heads x %d; random weights %.4g GB made in %.2f s; AdaLN "
           "tables for 2 timestep values in %.2f s, then %.4g GB of AdaLN weights released%s\n",
           config_dir, cfg.num_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.attention_head_dim,
           (double)wbytes / 1e9, t_build, t_adaln, (double)abytes / 1e9,
           stream ? "; --ssd-streaming: the blocks' linears in host memory, two slots on the backend" : "");
    dit_stream_stats lst;
    dit_get_stream_stats(m, &lst);
    if (bench_lora.path && lst.lora_bytes > 0) /* docs/lora.md: the streamed blocks' LoRA merged per slot fill */
        printf("dit: --lora %s (scale %g) kept as factors for the streamed blocks, merged into each slot as it is filled "
               "(load: %.2f s of the %.2f s above)\n", bench_lora.path, bench_lora.scale, dit_lora_seconds(m), t_build);
    else if (bench_lora.path)
        printf("dit: --lora %s (scale %g) merged into the random weights at load: %.2f s of the %.2f s above\n",
               bench_lora.path, bench_lora.scale, dit_lora_seconds(m), t_build);
    if (gguf_name)
        printf("dit: --gguf-type %s: the main blocks' linears are random %s blocks on the backend, expanded into two "
               "bf16 slots per block\n", gguf_name, gguf_name);
    fflush(stdout);
    int rc = 0;
    /* --compare-bf16 1: the bf16 forward at the first shape on these weights before they are quantized */
    bench_ref ref = {.want = 1};
    if (compare && (quant || sage8) && (rc = bench_dit_shape(be, m, &shapes[0], T, ts, 1, bf16, reduce, check_blocks, &ref, &res[0], e)) != 0) {
        dit_free(m);
        return rc;
    }
    ref.want = 0;
    dit_set_attention(m, sage8); /* --attention sage8 (docs/fast.md), after the exact reference */
    if (quant) { /* --quant fp8 / int8: the blocks' linears quantized as a real generation does it at load */
        t0 = now_s();
        if ((quant == 1 ? dit_quantize_fp8(m, e) : dit_quantize_int8(m, quant == 3, e)) != 0 || h3_backend_check(be, e) != 0) {
            dit_free(m);
            free(ref.video), free(ref.audio);
            return -1;
        }
        h3_sync(be);
        t_quant = now_s() - t0;
        printf("dit: --quant %s: block linears quantized to %s in %.2f s\n", quant == 1 ? "fp8" : "int8",
               quant == 1 ? "FP8 E4M3" : quant == 3 ? "INT8 (FFN down input per 1024 channels)" : "INT8 (per token)", t_quant);
    }
    if (par.n > 1 && par_make(be, m, &cfg, (bf16 ? DIT_BF16 : 0) | (stream ? DIT_STREAM : 0), quant, sage8, e) != 0) {
        par_free();
        dit_free(m);
        free(ref.video), free(ref.audio);
        return -1;
    }
    for (int i = 0; i < n && rc == 0; i++)
        rc = bench_dit_shape(be, m, &shapes[i], T, ts, repeats, bf16, reduce, check_blocks, i == 0 && ref.video ? &ref : NULL,
                             &res[i], e);
    free(ref.video), free(ref.audio);
    par_free();
    dit_free(m);
    return rc;
}

/* ---- video VAE decode ---- */

static int count_frames(void *ctx, int64_t index, const float *frame, h3_err *e) {
    (void)index, (void)frame, (void)e;
    (*(int64_t *)ctx)++;
    return 0;
}

/* the decoder's H3_VAE_PROFILE line, on stderr as before the library stopped printing */
static void vae_log_stderr(void *user, int kind, const char *line) {
    (void)user, (void)kind;
    fprintf(stderr, "%s\n", line);
}

/* batches: the video_vae_set_decode_batch values to time at every shape (nb of them; nb = 0: the default only,
 * and the VAE line carries no vae_batch field). */
static int bench_vae(h3_backend *be, const char *config_dir, int bf16, int vae_fp8, const bench_shape *shapes, int n,
                     int repeats, const int *batches, int nb, bench_result *res, h3_err *e) {
    video_vae_config cfg;
    if (video_vae_config_load(config_dir, &cfg, e) != 0) return -1;
    double t0 = now_s();
    video_vae *v = video_vae_new_random(be, &cfg, VIDEO_VAE_DECODER | (bf16 ? VIDEO_VAE_BF16 : 0) | (vae_fp8 ? VIDEO_VAE_FP8 : 0),
                                        7, e);
    if (!v) return -1;
    video_vae_set_log(v, vae_log_stderr, NULL);
    h3_sync(be);
    printf("vae: config %s: decoder %d layers, dim %d, random weights made in %.2f s; released tiling "
           "(256 x 256, overlap 64); %s\n",
           config_dir, cfg.dec_layers, cfg.dim, now_s() - t0,
           vae_fp8 ? "fp8 mode (--vae-quant fp8: block linears FP8 W8A8 + bf16 attention, the rest as the bf16 mode)"
           : bf16  ? "bf16 mode (block linears BF16 + bf16 attention, proj_out fp16, norms/residual/proj_in fp32)"
                   : "fp32 (exact paths)");
    fflush(stdout);
    video_vae_tiling tiling = video_vae_tiling_default();
    int rc = -1;
    for (int i = 0; i < n; i++) {
        const bench_shape *s = &shapes[i];
        if (s->width % cfg.S || s->height % cfg.S) {
            h3_fail(e, "--shapes: %s is not a multiple of the VAE's spatial factor %d", s->name, cfg.S);
            goto done;
        }
        int64_t L = s->F, h = s->height / cfg.S, w = s->width / cfg.S;
        int64_t frames_out = video_vae_decoded_frames(&cfg, L, e);
        if (frames_out < 0) goto done;
        float *z = malloc((size_t)(cfg.latent_channels * L * h * w) * sizeof(float));
        if (!z) {
            h3_fail(e, "out of memory for the latents of shape %s", s->name);
            goto done;
        }
        h3_fill_random_host(z, H3_F32, cfg.latent_channels * L * h * w, 4, 1.0f, 0.0f);
        double first_s = 0;
        for (int b = 0; b < (nb ? nb : 1); b++) {
            video_vae_set_decode_batch(v, nb ? batches[b] : 0);
            h3_memory_reset_peak(be);
            int64_t got = 0;
            /* warm-up on the first shape only: every clip decodes the same 256 x 256 tile shapes */
            if (i == 0 && video_vae_decode_stream(v, z, L, h, w, &tiling, count_frames, &got, e) != 0) {
                free(z);
                goto done;
            }
            double sum = 0;
            for (int k = 0; k < repeats; k++) {
                got = 0;
                h3_sync(be);
                double t1 = now_s();
                if (video_vae_decode_stream(v, z, L, h, w, &tiling, count_frames, &got, e) != 0) {
                    free(z);
                    goto done;
                }
                h3_sync(be);
                sum += now_s() - t1;
            }
            h3_memory_stats ms;
            if (h3_memory_query(be, &ms, e) != 0) {
                free(z);
                goto done;
            }
            res[i].have_vae = 1;
            res[i].vae_s = sum / repeats;
            res[i].vae_peak = gib(ms.peak_bytes);
            double base = baseline_of(s->name, 1);
            printf("VAE shape=%s latents=%dx%lldx%lldx%lld frames=%lld seconds=%.4g peak_gib=%.3g", s->name,
                   cfg.latent_channels, (long long)L, (long long)h, (long long)w, (long long)got, res[i].vae_s,
                   res[i].vae_peak);
            if (base > 0) printf(" baseline_s=%.3f ratio=%.2f", base, res[i].vae_s / base);
            if (nb) printf(" vae_batch=%d", batches[b]);
            if (nb && b > 0) printf(" speedup_vs_batch%d=%.2f", batches[0], first_s / res[i].vae_s);
            if (b == 0) first_s = res[i].vae_s;
            printf("\n");
            fflush(stdout);
            if (got != frames_out) {
                h3_fail(e, "video VAE decode at %s gave %lld frames, expected %lld", s->name, (long long)got,
                        (long long)frames_out);
                free(z);
                goto done;
            }
        }
        free(z);
    }
    rc = 0;
done:
    video_vae_free(v);
    return rc;
}

static void usage(void) {
    fprintf(stderr,
            "usage: h3 bench [--backend cuda|cpu] [--shapes WxHxF,...] [--text T] [--repeats N] [--vae-repeats N]\n"
            "                [--precision bf16|fp32] [--quant none|fp8|int8] [--int8-fc2-groups 0|1] [--attention exact|sage8]\n"
            "                [--token-reduction B:E] [--what dit,vae] [--config TRANSFORMER_DIR] [--vae-config VAE_DIR]\n"
            "                [--vae-batch N,...] [--vae-quant none|fp8] [--ssd-streaming 0|1] [--check-blocks 0|1] [--compare-bf16 0|1]\n"
            "                [--parallel N]  (the DiT on N ranks: GPUs 0..N-1 through NCCL, or N CPU backends; docs/parallel.md)\n"
            "                [--gguf-type none|F16|BF16|Q4_0|Q4_1|Q5_0|Q5_1|Q8_0|Q4_K|Q5_K|Q6_K] [--lora FILE[:SCALE]]\n"
            "--lora FILE[:SCALE]: merged into the random weights at load (docs/lora.md; h3 make-lora --random makes one)\n"
            "--gguf-type T: the DiT blocks' linears as random GGUF blocks of type T kept on the backend (docs/checkpoints.md)\n"
            "--compare-bf16 1 (with --quant or --attention sage8): the first shape's outputs against the bf16 forward on the\n"
            "                same weights\n"
            "--check-blocks 1: the per-block non-finite check h3 generate --profile runs (its cost)\n"
            "defaults: --backend cuda --shapes 512x512x22,544x960x124,1344x768x124 --text 256 --repeats 2\n"
            "          --vae-repeats 1 --precision bf16 --what dit,vae\n"
            "          --config tests/fixtures/skeleton/transformer --vae-config tests/fixtures/skeleton/vae\n");
}

static int parse_count(const char *flag, const char *v, int lo, int hi, int *out) {
    long x;
    if (h3_parse_int(v, lo, hi, &x)) return -1; /* the strict decimal syntax (core/text.h) */
    (void)flag;
    *out = (int)x;
    return 0;
}

int cmd_bench(int argc, char **argv) {
    const char *backend = "cuda", *shapes_arg = "512x512x22,544x960x124,1344x768x124", *precision = "bf16";
    const char *what = "dit,vae", *config = "tests/fixtures/skeleton/transformer";
    const char *vae_config = "tests/fixtures/skeleton/vae", *text_arg = "256", *rep_arg = "2", *vrep_arg = "1";
    const char *vbatch_arg = NULL, *quant = "none", *reduce_arg = NULL, *stream_arg = "0", *check_arg = "0";
    const char *vae_quant = "none";
    const char *fc2g_arg = "0", *compare_arg = "0";
    const char *attention = "exact", *parallel_arg = "1";
    const char *gguf_arg = "none";
    char *lora_arg = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], **dst = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            return 0;
        }
        if (!strcmp(a, "--backend")) dst = &backend;
        else if (!strcmp(a, "--shapes")) dst = &shapes_arg;
        else if (!strcmp(a, "--text")) dst = &text_arg;
        else if (!strcmp(a, "--repeats")) dst = &rep_arg;
        else if (!strcmp(a, "--vae-repeats")) dst = &vrep_arg;
        else if (!strcmp(a, "--precision")) dst = &precision;
        else if (!strcmp(a, "--quant")) dst = &quant;
        else if (!strcmp(a, "--attention")) dst = &attention;
        else if (!strcmp(a, "--token-reduction")) dst = &reduce_arg;
        else if (!strcmp(a, "--what")) dst = &what;
        else if (!strcmp(a, "--config")) dst = &config;
        else if (!strcmp(a, "--vae-config")) dst = &vae_config;
        else if (!strcmp(a, "--vae-batch")) dst = &vbatch_arg;
        else if (!strcmp(a, "--vae-quant")) dst = &vae_quant;
        else if (!strcmp(a, "--ssd-streaming")) dst = &stream_arg;
        else if (!strcmp(a, "--check-blocks")) dst = &check_arg;
        else if (!strcmp(a, "--int8-fc2-groups")) dst = &fc2g_arg;
        else if (!strcmp(a, "--compare-bf16")) dst = &compare_arg;
        else if (!strcmp(a, "--parallel")) dst = &parallel_arg;
        else if (!strcmp(a, "--gguf-type")) dst = &gguf_arg;
        else if (!strcmp(a, "--lora")) dst = (const char **)&lora_arg;
        else return cli_error("bench: unknown argument '%s' (see h3 bench --help)", a);
        if (i + 1 >= argc) return cli_error("bench: %s needs a value", a);
        *dst = argv[++i];
    }
    h3_backend_kind kind;
    if (!strcmp(backend, "cpu")) kind = H3_BACKEND_CPU;
    else if (!strcmp(backend, "cuda")) kind = H3_BACKEND_CUDA;
    else return cli_error("bench: --backend must be cpu or cuda, got '%s'", backend);
    if (strcmp(precision, "fp32") && strcmp(precision, "bf16"))
        return cli_error("bench: --precision must be fp32 or bf16, got '%s'", precision);
    int bf16 = !strcmp(precision, "bf16"), T, repeats, vae_repeats;
    if (strcmp(quant, "none") && strcmp(quant, "fp8") && strcmp(quant, "int8"))
        return cli_error("bench: --quant must be none, fp8 or int8, got '%s'", quant);
    int fp8 = !strcmp(quant, "fp8"), int8 = !strcmp(quant, "int8");
    if ((fp8 || int8) && !bf16) return cli_error("bench: --quant %s needs --precision bf16", quant);
    if (strcmp(fc2g_arg, "0") && strcmp(fc2g_arg, "1"))
        return cli_error("bench: --int8-fc2-groups must be 0 or 1, got '%s'", fc2g_arg);
    const int fc2g = !strcmp(fc2g_arg, "1");
    if (fc2g && !int8) return cli_error("bench: --int8-fc2-groups 1 needs --quant int8");
    const int qmode = fp8 ? 1 : int8 ? (fc2g ? 3 : 2) : 0;
    if (strcmp(compare_arg, "0") && strcmp(compare_arg, "1"))
        return cli_error("bench: --compare-bf16 must be 0 or 1, got '%s'", compare_arg);
    const int compare = !strcmp(compare_arg, "1");
    if (strcmp(attention, "exact") && strcmp(attention, "sage8"))
        return cli_error("bench: --attention must be exact or sage8, got '%s'", attention);
    const int sage8 = !strcmp(attention, "sage8");
    if (sage8 && !bf16) return cli_error("bench: --attention sage8 needs --precision bf16");
    if (compare && !qmode && !sage8) return cli_error("bench: --compare-bf16 1 needs --quant fp8 / int8 or --attention sage8");
    if (strcmp(vae_quant, "none") && strcmp(vae_quant, "fp8"))
        return cli_error("bench: --vae-quant must be none or fp8, got '%s'", vae_quant);
    const int vae_fp8 = !strcmp(vae_quant, "fp8");
    if (vae_fp8 && !bf16) return cli_error("bench: --vae-quant fp8 needs --precision bf16");
    if (strcmp(stream_arg, "0") && strcmp(stream_arg, "1"))
        return cli_error("bench: --ssd-streaming must be 0 or 1, got '%s'", stream_arg);
    const int stream = !strcmp(stream_arg, "1");
    if (strcmp(check_arg, "0") && strcmp(check_arg, "1"))
        return cli_error("bench: --check-blocks must be 0 or 1, got '%s'", check_arg);
    const int check_blocks = !strcmp(check_arg, "1");
    if (stream && (fp8 || int8)) return cli_error("bench: --ssd-streaming 1 cannot be combined with --quant %s", quant);
    int gguf_type = -1;
    if (strcmp(gguf_arg, "none")) {
        static const int ids[] = {GGUF_F16, GGUF_BF16, GGUF_Q4_0, GGUF_Q4_1, GGUF_Q5_0, GGUF_Q5_1, GGUF_Q8_0,
                                  GGUF_Q4_K, GGUF_Q5_K, GGUF_Q6_K};
        for (size_t i = 0; i < sizeof ids / sizeof ids[0] && gguf_type < 0; i++) {
            const char *nm;
            if (gguf_type_block((uint32_t)ids[i], NULL, NULL, &nm) && !strcmp(nm, gguf_arg)) gguf_type = ids[i], gguf_name = nm;
        }
        if (gguf_type < 0)
            return cli_error("bench: --gguf-type must be none, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K or "
                             "Q6_K, got '%s'", gguf_arg);
        if (fp8 || int8) return cli_error("bench: --gguf-type cannot be combined with --quant %s", quant);
        if (stream) return cli_error("bench: --gguf-type cannot be combined with --ssd-streaming 1 (both fill the block slots)");
    }
    if (lora_arg) {
        h3_err le = {{0}};
        if (dit_lora_parse_arg(lora_arg, "--lora", &bench_lora, &le) != 0) return cli_error("bench: %s", le.msg);
    }
    int reduce[2] = {0, 0}, nreduce = 0;
    if (reduce_arg) {
        char *mid, *end;
        long b = strtol(reduce_arg, &mid, 10), en = mid != reduce_arg && *mid == ':' ? strtol(mid + 1, &end, 10) : -1;
        if (mid == reduce_arg || *mid != ':' || *end || b < 0 || en <= b || en > 1000)
            return cli_error("bench: --token-reduction expects BEGIN:END blocks (e.g. 4:30), got '%s'", reduce_arg);
        if (!bf16) return cli_error("bench: --token-reduction needs --precision bf16");
        reduce[0] = (int)b, reduce[1] = (int)en, nreduce = 1;
    }
    if (parse_count("--text", text_arg, 1, 1 << 20, &T) != 0)
        return cli_error("bench: --text must be an integer in 1..1048576, got '%s'", text_arg);
    if (parse_count("--parallel", parallel_arg, 1, 8, &par.n) != 0)
        return cli_error("bench: --parallel must be an integer in 1..8 (the DiT's ranks), got '%s'", parallel_arg);
    if (par.n > 1 && nreduce) return cli_error("bench: --parallel %d cannot be combined with --token-reduction", par.n);
    if (par.n > 1 && (strcmp(gguf_arg, "none") || lora_arg))
        return cli_error("bench: --parallel %d cannot be combined with --gguf-type or --lora (the other ranks' random "
                         "weights are plain)", par.n);
    if (parse_count("--repeats", rep_arg, 1, 1000, &repeats) != 0)
        return cli_error("bench: --repeats must be an integer in 1..1000, got '%s'", rep_arg);
    if (parse_count("--vae-repeats", vrep_arg, 1, 1000, &vae_repeats) != 0)
        return cli_error("bench: --vae-repeats must be an integer in 1..1000, got '%s'", vrep_arg);
    int vbatch[8], nvb = 0;
    if (vbatch_arg) { /* bf16 decoder: tiles per batched pass, each timed (1: the per-tile path, 0: automatic) */
        char buf[64];
        if (strlen(vbatch_arg) >= sizeof buf) return cli_error("bench: --vae-batch must be a list of integers in 0..64");
        strcpy(buf, vbatch_arg);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            if (nvb == 8 || parse_count("--vae-batch", tok, 0, 64, &vbatch[nvb]) != 0)
                return cli_error("bench: --vae-batch must be a list of at most 8 integers in 0..64, got '%s'",
                                 vbatch_arg);
            nvb++;
        }
        if (!nvb) return cli_error("bench: --vae-batch must be a list of integers in 0..64");
    }
    int do_dit = 0, do_vae = 0;
    {
        char buf[64];
        if (strlen(what) >= sizeof buf) return cli_error("bench: --what must be a list of dit, vae");
        strcpy(buf, what);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            if (!strcmp(tok, "dit")) do_dit = 1;
            else if (!strcmp(tok, "vae")) do_vae = 1;
            else return cli_error("bench: --what takes dit and/or vae (comma-separated), got '%s'", tok);
        }
        if (!do_dit && !do_vae) return cli_error("bench: --what must name dit and/or vae");
    }
    h3_err e = {{0}};
    bench_shape shapes[BENCH_MAX_SHAPES];
    int n;
    if (parse_shapes(shapes_arg, shapes, &n, &e) != 0) return cli_error("bench: %s", e.msg);
    h3_backend *be = h3_backend_new(kind, 0, &e);
    if (!be) {
        fprintf(stderr, "h3: bench: %s\n", e.msg);
        return 1;
    }
    h3_memory_stats ms = {0};
    if (h3_memory_query(be, &ms, &e) != 0) {
        fprintf(stderr, "h3: bench: %s\n", e.msg);
        h3_backend_free(be);
        return 1;
    }
    printf("h3 bench: backend %s, precision %s%s%s, text rows %d, repeats %d (DiT) / %d (VAE)", h3_backend_name(be),
           precision,
           fp8 ? " + fp8 DiT linears (--quant fp8)" : int8 ? (fc2g ? " + int8 DiT linears (--quant int8 --int8-fc2-groups 1)" : " + int8 DiT linears (--quant int8)") : "",
           sage8 ? " + 8-bit attention (--attention sage8)" : "", T, repeats, vae_repeats);
    if (ms.total_bytes) printf(", device memory %.1f GiB", gib(ms.total_bytes));
    printf("\n");
    fflush(stdout);
    bench_result res[BENCH_MAX_SHAPES];
    memset(res, 0, sizeof res);
    int rc = 0;
    if (do_dit && bench_dit(be, config, bf16, qmode, sage8, compare, stream, nreduce ? reduce : NULL, check_blocks, shapes, n, T, repeats, gguf_type, res, &e) != 0) {
        fprintf(stderr, "h3: bench: DiT: %s\n", e.msg);
        rc = 1;
    }
    if (rc == 0 && do_vae && bench_vae(be, vae_config, bf16, vae_fp8, shapes, n, vae_repeats, vbatch, nvb, res, &e) != 0) {
        fprintf(stderr, "h3: bench: video VAE decode: %s\n", e.msg);
        printf("VAE not measured: %s\n", e.msg);
        rc = 1;
    }
    /* summary: seconds per forward / decode; ratio = h3 / diffusers (> 1: slower) */
    printf("\n| shape | S | DiT s (%s) | TFLOP | TFLOP/s | peak GiB | diffusers s | ratio | VAE decode s | peak GiB | "
           "diffusers s | ratio |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n", precision);
    for (int i = 0; i < n; i++) {
        const bench_result *r = &res[i];
        double bd = bf16 ? baseline_of(shapes[i].name, 0) : 0, bv = baseline_of(shapes[i].name, 1);
        printf("| %s | ", shapes[i].name);
        if (r->have_dit) {
            printf("%lld | %.3f | %.1f | %.1f | %.1f | ", (long long)r->S, r->dit_s, r->dit_tflop,
                   r->dit_tflop / r->dit_s, r->dit_peak);
            if (bd > 0) printf("%.3f | %.2f | ", bd, r->dit_s / bd);
            else printf("- | - | ");
        } else {
            printf("- | - | - | - | - | - | - | ");
        }
        if (r->have_vae) {
            printf("%.3f | %.1f | ", r->vae_s, r->vae_peak);
            if (bv > 0) printf("%.3f | %.2f |\n", bv, r->vae_s / bv);
            else printf("- | - |\n");
        } else {
            printf("- | - | - | - |\n");
        }
    }
    h3_backend_free(be);
    return rc;
}
