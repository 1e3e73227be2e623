/* A random LoRA (h3 make-lora --random, dit_lora_write_random; docs/lora.md "Random LoRAs") merged at load into
 * random weights (dit_new_random_lora) against a model merged by hand: this test regenerates dit_new_random's weights
 * (the same counter-based values), applies peft's merge with its own code (delta = fp32 sum over the rank of
 * fused multiply-adds from 0, times the scaling, rounded to bf16; W = bf16(W + delta)), writes them as a snapshot and
 * loads that with dit_load: the two models' forwards must be the same bits. On the CPU (CI) at the tiny shapes with
 * rank 8; tests/cuda/test_cuda_lora64.c is this file on CUDA at the release width (tests/fixtures/skeleton, blocks
 * 0..LORA_LAYERS-1) with rank 64 and the forwards at the release shape 544x960x124, and prints the merge's cost.
 * Then with --ssd-streaming (STREAM_LAYERS blocks, so the two slots are filled again with other blocks): the LoRA
 * merged into each slot as it is filled gives the resident merged model's forward bit for bit, twice; and in fp32 with
 * the LoRA on all blocks but the last (its parts widened to F32 in the slots, the last block's kept BF16). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend_bench.h"
#include "core/dtype.h"
#include "io/expect.h"
#include "io/safetensors.h"
#include "model/dit.h"
#include "model/dit_lora.h"
#include "pipeline/layout.h"
#include "test.h"

#ifdef LORA_CUDA
#define BACKEND H3_BACKEND_CUDA
#define CONFIG "tests/fixtures/skeleton/transformer"
#define RANK 64
#define LAYERS 1
#define STREAM_LAYERS 3
/* the forwards at the release shape, h3 bench's 544x960x124 (256 text tokens, 18,870 video and 414 audio rows) */
#define TEXT_T 256
#define SHAPE_W 544
#define SHAPE_H 960
#define SHAPE_FRAMES 124
#else
#define BACKEND H3_BACKEND_CPU
#define CONFIG "tests/fixtures/tiny/transformer"
#define RANK 8
#define LAYERS 2
#define STREAM_LAYERS 4
#endif
#define SEED 7

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* config.json of CONFIG with num_layers = LAYERS, into dir */
static int write_config(const char *dir) {
    FILE *f = fopen(CONFIG "/config.json", "rb");
    if (!f) return -1;
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *k = strstr(buf, "\"num_layers\"");
    if (!k) return -1;
    char *v = strchr(k, ':') + 1, *end = v;
    while (*end == ' ' || (*end >= '0' && *end <= '9')) end++;
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (!(f = fopen(path, "wb"))) return -1;
    fprintf(f, "%.*s %d%s", (int)(v - buf), buf, LAYERS, end);
    return fclose(f);
}

/* the random weights of dit_new_random (src/model/dit.c: the same seeds, scales and offsets), tensor i of ex */
static h3_tensor *random_weight(const dit_config *c, const h3_expect *x, int i, h3_err *e) {
    const int is_norm = x->ndim == 1 && strstr(x->name, "norm") != NULL;
    const float scale = x->ndim == 2 ? sqrtf(3.0f / (float)x->shape[1]) : is_norm ? 0.2f : 0.1f;
    h3_tensor *t = h3_tensor_new(x->dtype, x->ndim, x->shape, e);
    if (!t) return NULL;
    h3_fill_random_host(t->data, t->dtype, h3_tensor_numel(t), SEED ^ ((uint64_t)i * 0x9e3779b97f4a7c15ull), scale,
                        is_norm ? 1.0f : 0.0f);
    if (!strcmp(x->name, "rope.inv_freq")) dit_rope_inv_freq(t->data, c->rope_freq_dim, c->rope_theta);
    return t;
}

/* peft's merge of one module, written here from docs/lora.md "The merge and its rounding" (scaling 1: alpha-less) */
static int hand_merge(h3_tensor *w, const st_set *lora, const char *module, h3_err *e) {
    char an[320], bn[320];
    snprintf(an, sizeof an, "transformer.%s.lora_A.weight", module);
    snprintf(bn, sizeof bn, "transformer.%s.lora_B.weight", module);
    h3_tensor A, B;
    if (st_set_get(lora, an, &A, e) != 0 || st_set_get(lora, bn, &B, e) != 0) return -1;
    const int64_t r = A.shape[0], in = A.shape[1], out = B.shape[0];
    if (w->dtype != H3_BF16 || w->shape[0] != out || w->shape[1] != in) return h3_fail(e, "%s: shapes", module);
    const uint16_t *a = A.data, *b = B.data;
    uint16_t *W = w->data;
#pragma omp parallel for schedule(static)
    for (int64_t o = 0; o < out; o++)
        for (int64_t i = 0; i < in; i++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < r; k++) acc = fmaf(h3_bf16_to_f32(b[o * r + k]), h3_bf16_to_f32(a[k * in + i]), acc);
            const float d = h3_round_bf16(acc * 1.0f);
            W[o * in + i] = h3_f32_to_bf16(h3_bf16_to_f32(W[o * in + i]) + d);
        }
    return 0;
}

/* the module a diffusers-layout weight name belongs to ("transformer_blocks.N.attn.to_q"), NULL for others */
static int lora_module(const char *name, char *mod, size_t cap) {
    static const char *const tails[6] = {".attn.to_q.weight", ".attn.to_k.weight", ".attn.to_v.weight",
                                         ".attn.to_out.0.weight", ".ff.net.0.proj.weight", ".ff.net.2.weight"};
    if (strncmp(name, "transformer_blocks.", 19)) return 0;
    const size_t l = strlen(name);
    for (int j = 0; j < 6; j++) {
        const size_t t = strlen(tails[j]);
        if (l > t && !strcmp(name + l - t, tails[j])) {
            snprintf(mod, cap, "%.*s", (int)(l - 7), name);
            return 1;
        }
    }
    return 0;
}

int main(void) {
    h3_err e = {{0}};
    h3_backend *be = h3_backend_new(BACKEND, 0, &e);
    if (!be) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    dit_config c;
    CHECK(dit_config_load(CONFIG, &c, &e) == 0, "config: %s", e.msg);
    c.num_layers = LAYERS;
    char dir[] = "/tmp/h3_lora_random_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char lpath[512], spath[512];
    snprintf(lpath, sizeof lpath, "%s.lora.safetensors", dir); /* beside: the snapshot folder holds one file */
    snprintf(spath, sizeof spath, "%s/diffusion_pytorch_model.safetensors", dir);
    double t0 = now_s();
    CHECK(dit_lora_write_random(&c, RANK, 3, lpath, &e) == 0, "write the LoRA: %s", e.msg);
    const double t_write = now_s() - t0;
    /* the hand-merged snapshot */
    t0 = now_s();
    h3_expect_list ex = {0};
    st_set *lora = st_set_open(lpath, &e);
    st_writer *w = st_writer_new();
    int rc = lora && dit_expected_tensors(&c, &ex, &e) == 0 ? 0 : -1;
    int merged_n = 0;
    for (int i = 0; rc == 0 && i < ex.n; i++) {
        h3_tensor *t = random_weight(&c, &ex.v[i], i, &e);
        char mod[256];
        if (!t) rc = -1;
        if (rc == 0 && lora_module(ex.v[i].name, mod, sizeof mod)) rc = hand_merge(t, lora, mod, &e), merged_n++;
        if (rc == 0) rc = st_writer_add_tensor(w, ex.v[i].name, t, &e);
        h3_tensor_free(t);
    }
    if (rc == 0) rc = st_writer_save(w, spath, NULL, &e);
    st_writer_free(w);
    st_set_free(lora);
    h3_expect_list_free(&ex);
    CHECK(rc == 0 && write_config(dir) == 0, "the hand-merged snapshot: %s", e.msg);
    const double t_hand = now_s() - t0;
    /* the library's merge at load, and the hand-merged snapshot loaded */
    dit_lora_spec spec = {lpath, 1.0, 0};
    t0 = now_s();
    dit_model *a = dit_new_random_lora(be, &c, DIT_BF16, SEED, &spec, 1, &e);
    h3_sync(be);
    const double t_load = now_s() - t0;
    CHECK(a != NULL, "random weights + LoRA: %s", e.msg);
    dit_model *b = a ? dit_load(be, dir, DIT_BF16, &e) : NULL;
    CHECK(b != NULL, "the hand-merged snapshot: %s", e.msg);
    dit_model *plain = b ? dit_new_random(be, &c, DIT_BF16, SEED, &e) : NULL;
    CHECK(plain != NULL, "random weights: %s", e.msg);
    if (a && b && plain) {
#ifdef TEXT_T
        enum { NT = TEXT_T };
        int aligned = 0, F = 0;
        CHECK(layout_align_num_frames(SHAPE_FRAMES, &aligned, &e) == 0 && layout_latent_frames(aligned, &F, &e) == 0,
              "%s", e.msg);
        int64_t tags[NT];
        for (int i = 0; i < NT; i++) tags[i] = 1;
        layout *L = layout_new_t2va(tags, NT, F, SHAPE_H / 16, SHAPE_W / 16, layout_audio_latents(aligned), NULL, 0, &e);
        printf("  forwards at %dx%dx%d: S=%lld (%lld video, %lld audio rows)\n", SHAPE_W, SHAPE_H, SHAPE_FRAMES,
               (long long)L->S, (long long)L->Nv, (long long)L->Na);
#else
        enum { NT = 3 };
        const int64_t tags[NT] = {1, 1, 1};
        layout *L = layout_new_t2va(tags, NT, 2, 4, 4, 5, NULL, 0, &e);
#endif
        int64_t *tidx = malloc(sizeof(int64_t) * (size_t)L->S);
        float tv[LAYOUT_MAX_TIMESTEPS];
        int K;
        layout_row_timesteps(L, 0.75f, 0.5f, tv, &K, tidx);
        const int64_t pd = (int64_t)c.in_channels * c.patch_size[0] * c.patch_size[1] * c.patch_size[2];
        const int64_t nv = L->Nv * pd, na = L->Na * c.audio_in_channels;
        float *video = malloc(sizeof(float) * (size_t)nv), *audio = malloc(sizeof(float) * (size_t)na);
        float *text = malloc(sizeof(float) * (size_t)(NT * c.text_dim));
        for (int64_t i = 0; i < nv; i++) video[i] = sinf(0.37f * (float)i);
        for (int64_t i = 0; i < na; i++) audio[i] = cosf(0.11f * (float)i);
        for (int64_t i = 0; i < NT * c.text_dim; i++) text[i] = 0.2f * sinf((float)i);
        dit_inputs in = {.video = video, .Nv = L->Nv, .audio = audio, .Na = L->Na, .text = text, .Nt = L->T,
                         .timestep = tv, .K = K, .S = L->S, .timestep_indices = tidx, .token_tags = L->token_tags,
                         .position_ids = L->position_ids, .video_indices = L->video_indices,
                         .audio_indices = L->audio_indices, .text_indices = L->text_indices};
        float *out[3][2];
        dit_model *ms[3] = {a, b, plain};
        for (int k = 0; k < 3; k++) {
            out[k][0] = malloc(sizeof(float) * (size_t)nv), out[k][1] = malloc(sizeof(float) * (size_t)na);
            CHECK(dit_forward(ms[k], &in, out[k][0], out[k][1], &e) == 0, "forward %d: %s", k, e.msg);
        }
        const int same = !memcmp(out[0][0], out[1][0], sizeof(float) * (size_t)nv) &&
                         !memcmp(out[0][1], out[1][1], sizeof(float) * (size_t)na);
        CHECK(same, "merged at load differs from the hand-merged model (rel L2 %.3e)", h3_rel_l2(out[0][0], out[1][0], (size_t)nv));
        const double moved = h3_rel_l2(out[0][0], out[2][0], (size_t)nv);
        CHECK(moved > 0, "the LoRA changed nothing");
        printf("  rank %d LoRA on %d blocks of %s (%d weights merged): merged at load == merged by hand, bit for bit; "
               "vs no LoRA rel L2 %.3e\n", RANK, LAYERS, CONFIG, merged_n, moved);
        printf("  times: LoRA written %.2f s; hand merge + snapshot %.2f s; random weights + LoRA load %.2f s, of which "
               "the merge %.2f s (%.2f s a block)\n", t_write, t_hand, t_load, dit_lora_seconds(a),
               dit_lora_seconds(a) / LAYERS);
        /* --ssd-streaming: the LoRA merged into each slot as it is filled (h3_lora_merge_into, docs/lora.md); two
         * forwards, so every slot is filled again (STREAM_LAYERS blocks, two slots) onto a slot merged before */
        c.num_layers = STREAM_LAYERS;
        dit_model *sm = NULL;
        char slpath[600];
        snprintf(slpath, sizeof slpath, "%s.stream.lora.safetensors", dir);
        dit_lora_spec sspec = {slpath, 1.0, 0};
        dit_model *sr = dit_lora_write_random(&c, RANK, 5, slpath, &e) == 0
                            ? dit_new_random_lora(be, &c, DIT_BF16, SEED, &sspec, 1, &e) : NULL;
        CHECK(sr != NULL, "resident %d blocks + LoRA: %s", STREAM_LAYERS, e.msg);
        if (sr) sm = dit_new_random_lora(be, &c, DIT_BF16 | DIT_STREAM, SEED, &sspec, 1, &e);
        CHECK(sm != NULL, "streamed %d blocks + LoRA: %s", STREAM_LAYERS, e.msg);
        if (sr && sm) {
            float *so[3][2];
            dit_model *sms[3] = {sr, sm, sm};
            for (int k = 0; k < 3; k++) {
                so[k][0] = malloc(sizeof(float) * (size_t)nv), so[k][1] = malloc(sizeof(float) * (size_t)na);
                CHECK(dit_forward(sms[k], &in, so[k][0], so[k][1], &e) == 0, "stream forward %d: %s", k, e.msg);
            }
            dit_stream_stats ss;
            dit_get_stream_stats(sm, &ss);
            for (int k = 1; k < 3; k++) {
                const int same_s = !memcmp(so[0][0], so[k][0], sizeof(float) * (size_t)nv) &&
                                   !memcmp(so[0][1], so[k][1], sizeof(float) * (size_t)na);
                CHECK(same_s, "--ssd-streaming forward %d differs from the resident merged model (rel L2 %.3e)", k,
                      h3_rel_l2(so[0][0], so[k][0], (size_t)nv));
            }
            CHECK(ss.lora_merges >= 6 * STREAM_LAYERS && ss.lora_bytes > 0, "%lld pieces merged at fill",
                  (long long)ss.lora_merges);
            printf("  --ssd-streaming, %d blocks, rank %d: two forwards == the resident merged model, bit for bit; %lld "
                   "slot fills, %lld LoRA pieces merged at fill, factors %.3g MB\n", STREAM_LAYERS, RANK,
                   (long long)ss.fills, (long long)ss.lora_merges, ss.lora_bytes / 1e6);
            for (int k = 0; k < 3; k++) free(so[k][0]), free(so[k][1]);
        }
        dit_free(sr), dit_free(sm);
        remove(slpath);
        /* fp32: the touched parts held F32 in the slots, widened as filled (docs/lora.md "With --ssd-streaming"), as
         * the resident model's merged copies are F32; the LoRA on blocks 0..STREAM_LAYERS-2 only, so the last block's
         * parts stay BF16 and the slots change their parts' dtypes as they are filled again */
        c.num_layers = STREAM_LAYERS - 1;
        const int wrote = dit_lora_write_random(&c, RANK, 9, slpath, &e) == 0;
        c.num_layers = STREAM_LAYERS;
        sr = wrote ? dit_new_random_lora(be, &c, 0, SEED, &sspec, 1, &e) : NULL;
        sm = sr ? dit_new_random_lora(be, &c, DIT_STREAM, SEED, &sspec, 1, &e) : NULL;
        CHECK(sr && sm, "fp32, %d blocks + LoRA on %d: %s", STREAM_LAYERS, STREAM_LAYERS - 1, e.msg);
        if (sr && sm) {
            float *so[3][2];
            dit_model *sms[3] = {sr, sm, sm};
            for (int k = 0; k < 3; k++) {
                so[k][0] = malloc(sizeof(float) * (size_t)nv), so[k][1] = malloc(sizeof(float) * (size_t)na);
                CHECK(dit_forward(sms[k], &in, so[k][0], so[k][1], &e) == 0, "fp32 stream forward %d: %s", k, e.msg);
            }
            dit_stream_stats ss;
            dit_get_stream_stats(sm, &ss);
            for (int k = 1; k < 3; k++) {
                const int same_s = !memcmp(so[0][0], so[k][0], sizeof(float) * (size_t)nv) &&
                                   !memcmp(so[0][1], so[k][1], sizeof(float) * (size_t)na);
                CHECK(same_s, "fp32 --ssd-streaming forward %d differs from the resident merged model (rel L2 %.3e)", k,
                      h3_rel_l2(so[0][0], so[k][0], (size_t)nv));
            }
            CHECK(ss.lora_f32_parts == 6 * (STREAM_LAYERS - 1) && ss.fills > STREAM_LAYERS,
                  "fp32: %lld parts held F32 (want %d), %lld fills", (long long)ss.lora_f32_parts, 6 * (STREAM_LAYERS - 1),
                  (long long)ss.fills);
            printf("  fp32 --ssd-streaming, %d blocks, LoRA on %d, rank %d: two forwards == the resident merged model, "
                   "bit for bit; %lld slot fills, %lld parts held F32, %lld LoRA pieces merged at fill\n", STREAM_LAYERS,
                   STREAM_LAYERS - 1, RANK, (long long)ss.fills, (long long)ss.lora_f32_parts, (long long)ss.lora_merges);
            for (int k = 0; k < 3; k++) free(so[k][0]), free(so[k][1]);
        }
        dit_free(sr), dit_free(sm);
        remove(slpath);
        c.num_layers = LAYERS;
        for (int k = 0; k < 3; k++) free(out[k][0]), free(out[k][1]);
        free(video), free(audio), free(text), free(tidx);
        layout_free(L);
    }
    dit_free(a), dit_free(b), dit_free(plain);
    remove(lpath), remove(spath);
    char cpath[512];
    snprintf(cpath, sizeof cpath, "%s/config.json", dir);
    remove(cpath), rmdir(dir);
    h3_backend_free(be);
    TEST_END();
}
