/* CUDA parity of the tile-batched bf16 video decoder (ops.h ops and video_vae.c's batched path).
 *   1. ops: h3_vae_residual_rmsnorm (residual + norm, residual only, norm only; 16-byte and odd rows) and
 *      h3_vae_qk_norm_rope (the fused qkv layout, period < rows; each kernel, the head-dim-64 ones bit for bit) on
 *      random inputs, CUDA vs CPU twin;
 *   2. the golden tiny models (head dims 16 / 8): CUDA bf16 decode (batched) vs the CPU bf16 decode, vs the
 *      CUDA per-tile path, and vs the fp32 diffusers goldens;
 *   3. a random release-width decoder (skeleton config: dim 2048, 32 heads x 64, 1 layer) on 2 tiles
 *      (256 x 384 px, 7 latents): CUDA batched vs CPU batched and vs CUDA per-tile;
 *   4. the full release decoder (36 layers, random weights) on the same 2 tiles: CUDA bf16 batched and per-tile
 *      vs the CUDA fp32 decoder (the bf16 mode's pixel error at release width).
 * Built with CUDA=1 (make cuda-tests); run on the GPU machine. Prints RESULT <passed> <failed>. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_data.h"
#include "backend/backend.h"
#include "backend/backend_bench.h"
#include "backend/ops.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "model/video_vae.h"

#define GOLD "tests/fixtures/golden/video_vae"
#define SKELETON "tests/fixtures/skeleton/vae"

/* seeded random data (tests/test_data.h's generator): uniform [lo, hi) / bf16 of uniform [-scale, scale) */
static float *rand_f32(int64_t n, uint64_t seed, float lo, float hi) {
    test_seed(seed);
    return rand_offset(n, 0.5f * (hi - lo), 0.5f * (lo + hi));
}

static h3_bf16 *rand_bf16_seeded(int64_t n, uint64_t seed, float scale) {
    test_seed(seed);
    return rand_bf16(n, scale);
}

static void *up(h3_backend *g, const void *h, size_t bytes) {
    void *d = h3_alloc(g, bytes);
    h3_upload(g, d, h, bytes);
    return d;
}

static float *widen(const h3_bf16 *x, int64_t n) {
    float *y = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) y[i] = h3_bf16_to_f32(x[i]);
    return y;
}

static void report(const char *what, const float *got, const float *ref, int64_t n, double tol) {
    printf("    max_abs %.3e ", h3_max_abs(got, ref, (size_t)n));
    CHECK_CLOSE(what, h3_rel_l2(got, ref, (size_t)n), tol);
}

/* h3_vae_qk_norm_rope on the q and k heads of a fused [q | k | v] buffer of 2 tiles of 1797 rows (the rotary table's
 * period), CUDA vs CPU twin. exact: the kernel must give the twin's bits (the 64-channel kernels); every row's v
 * columns must stay as they were. */
static void test_qk_norm_rope(h3_backend *cpu, h3_backend *gpu, int heads, int hd, int rot, int exact,
                              const char *tag) {
    const int64_t period = 1797, rows = 2 * period, ld = (int64_t)heads * hd * 3 / 2, n = rows * ld;
    h3_bf16 *x = rand_bf16_seeded(n, 21, 4.0f), *xc = malloc((size_t)n * 2), *xg = malloc((size_t)n * 2);
    memcpy(xc, x, (size_t)n * 2);
    float *cs = rand_f32(period * rot, 22, -1.0f, 1.0f), *sn = rand_f32(period * rot, 23, -1.0f, 1.0f);
    h3_bf16 *dx = up(gpu, x, (size_t)n * 2);
    float *dcs = up(gpu, cs, (size_t)(period * rot) * 4), *dsn = up(gpu, sn, (size_t)(period * rot) * 4);
    h3_vae_qk_norm_rope(cpu, xc, rows, ld, period, heads, hd, 1e-5f, rot, cs, sn);
    h3_vae_qk_norm_rope(gpu, dx, rows, ld, period, heads, hd, 1e-5f, rot, dcs, dsn);
    h3_download(gpu, xg, dx, (size_t)n * 2);
    float *a = widen(xc, n), *b = widen(xg, n);
    char label[128];
    snprintf(label, sizeof label, "qk_norm_rope 2 x 1797 rows, %d heads x %d, rope %d%s", heads, hd, rot, tag);
    report(label, b, a, n, 1e-6);
    int64_t ndiff = 0;
    for (int64_t i = 0; i < n; i++) ndiff += xg[i] != xc[i];
    printf("    %lld of %lld bf16 values differ from the CPU twin\n", (long long)ndiff, (long long)n);
    if (exact) CHECK(ndiff == 0, "%s: %lld values differ from the CPU twin", label, (long long)ndiff);
    const int64_t qk = (int64_t)heads * hd;
    int64_t touched = 0;
    for (int64_t r = 0; r < rows; r++) touched += memcmp(xg + r * ld + qk, x + r * ld + qk, (size_t)(ld - qk) * 2) != 0;
    CHECK(touched == 0, "qk_norm_rope touched v in %lld rows", (long long)touched);
    free(a), free(b), free(x), free(xc), free(xg), free(cs), free(sn);
    h3_free(gpu, dx), h3_free(gpu, dcs), h3_free(gpu, dsn);
}

static void test_ops(h3_backend *cpu, h3_backend *gpu) {
    printf("ops: CUDA vs CPU twin\n");
    const int64_t dims[2] = {2048, 1030};
    for (int di = 0; di < 2; di++)
        for (int mode = 0; mode < 3; mode++) { /* 0: residual + norm, 1: residual only, 2: norm only */
            const int64_t rows = 1797, dim = dims[di], n = rows * dim;
            float *x = rand_f32(n, 11 + di, -3.0f, 3.0f), *sc = rand_f32(dim, 12, -0.6f, 0.6f);
            float *w = rand_f32(dim, 13, 0.8f, 1.2f);
            h3_bf16 *br = rand_bf16_seeded(n, 14, 2.0f), *yc = calloc((size_t)n, 2), *yg = calloc((size_t)n, 2);
            float *xc = malloc((size_t)n * 4), *xg = malloc((size_t)n * 4);
            memcpy(xc, x, (size_t)n * 4);
            float *dx = up(gpu, x, (size_t)n * 4), *dsc = up(gpu, sc, (size_t)dim * 4), *dw = up(gpu, w, (size_t)dim * 4);
            h3_bf16 *dbr = up(gpu, br, (size_t)n * 2), *dy = h3_alloc(gpu, (size_t)n * 2);
            const h3_bf16 *b_c = mode == 2 ? NULL : br, *b_g = mode == 2 ? NULL : dbr;
            h3_vae_residual_rmsnorm(cpu, xc, mode == 1 ? NULL : yc, b_c, sc, rows, dim, w, 1e-5f);
            h3_vae_residual_rmsnorm(gpu, dx, mode == 1 ? NULL : dy, b_g, dsc, rows, dim, dw, 1e-5f);
            h3_download(gpu, xg, dx, (size_t)n * 4);
            h3_download(gpu, yg, dy, (size_t)n * 2);
            char label[96];
            snprintf(label, sizeof label, "residual_rmsnorm dim %lld mode %d: x", (long long)dim, mode);
            report(label, xg, xc, n, 0);
            if (mode != 1) {
                float *a = widen(yc, n), *b = widen(yg, n);
                snprintf(label, sizeof label, "residual_rmsnorm dim %lld mode %d: y (bf16)", (long long)dim, mode);
                report(label, b, a, n, 1e-6);
                free(a), free(b);
            }
            free(x), free(sc), free(w), free(br), free(yc), free(yg), free(xc), free(xg);
            h3_free(gpu, dx), h3_free(gpu, dsc), h3_free(gpu, dw), h3_free(gpu, dbr), h3_free(gpu, dy);
        }
    /* q/k of a fused [q | k | v] buffer, 2 tiles (period 1797 < rows): the release decoder's 64 heads of 64 with rope
     * 48 (the register-shuffle kernel), the paired one (6 heads), the generic one (head dim 16); then the shuffle kernel
     * with 5 groups of 4 heads (a part-filled 16-head item) at rope 32 and with the whole head rotated, and rope 40
     * (rope / 2 not a multiple of 8: the shared-memory 4-heads-per-warp kernel); the shuffle kernel with the integer
     * bf16 rounding (H3_BF16_ROUND=sw) on a backend of its own. */
    test_qk_norm_rope(cpu, gpu, 64, 64, 48, 1, "");
    test_qk_norm_rope(cpu, gpu, 6, 64, 48, 0, "");
    test_qk_norm_rope(cpu, gpu, 4, 16, 12, 0, "");
    test_qk_norm_rope(cpu, gpu, 20, 64, 32, 1, "");
    test_qk_norm_rope(cpu, gpu, 8, 64, 64, 1, "");
    test_qk_norm_rope(cpu, gpu, 64, 64, 40, 1, "");
    {
        const char *prev_env = getenv("H3_BF16_ROUND");
        char *prev = prev_env ? strdup(prev_env) : NULL;
        setenv("H3_BF16_ROUND", "sw", 1);
        h3_err e;
        h3_backend *sw = h3_backend_new(H3_BACKEND_CUDA, 0, &e);
        if (prev) setenv("H3_BF16_ROUND", prev, 1);
        else unsetenv("H3_BF16_ROUND");
        free(prev);
        CHECK(sw != NULL, "a second CUDA backend (H3_BF16_ROUND=sw): %s", e.msg);
        if (sw) {
            test_qk_norm_rope(cpu, sw, 64, 64, 48, 1, ", H3_BF16_ROUND=sw");
            h3_sync(sw);
            CHECK(h3_backend_check(sw, &e) == 0, "H3_BF16_ROUND=sw backend: %s", e.msg);
            h3_backend_free(sw);
        }
    }
    /* tile attention: 2 tiles of 1797 rows, 32 heads x 64 against the CPU twin (P in fp32 there): the default
     * (the own sm90 kernel over both tiles in one launch), H3_VAE_ATTN=cudnn (one batched cuDNN call) and
     * H3_VAE_ATTN=tile (one call per tile: the sm90 kernel per tile, bit-identical to the batched launch) */
    {
        const int64_t N = 1797, T = 2, D = 2048, nq = T * N * 3 * D, no = T * N * D;
        h3_bf16 *qkv = rand_bf16_seeded(nq, 31, 2.0f), *oc = calloc((size_t)no, 2), *og[3];
        h3_bf16 *dq = up(gpu, qkv, (size_t)nq * 2), *dout = h3_alloc(gpu, (size_t)no * 2);
        h3_vae_tile_attention(cpu, oc, qkv, T, N, 32, 64, 0.125f);
        float *a = widen(oc, no);
        const char *modes[3] = {NULL, "cudnn", "tile"}, *env = getenv("H3_VAE_ATTN");
        char *prev = env ? strdup(env) : NULL; /* restored below: the decoder tests run as the caller asked */
        for (int m = 0; m < 3; m++) {
            if (modes[m]) setenv("H3_VAE_ATTN", modes[m], 1);
            else unsetenv("H3_VAE_ATTN");
            og[m] = calloc((size_t)no, 2);
            h3_vae_tile_attention(gpu, dout, dq, T, N, 32, 64, 0.125f);
            h3_download(gpu, og[m], dout, (size_t)no * 2);
            float *b = widen(og[m], no);
            char label[96];
            snprintf(label, sizeof label, "tile_attention 2 x 1797 rows, 32 x 64, %s (CUDA vs CPU)",
                     modes[m] ? modes[m] : "default");
            report(label, b, a, no, 5e-3);
            free(b);
        }
        if (prev) setenv("H3_VAE_ATTN", prev, 1);
        else unsetenv("H3_VAE_ATTN");
        free(prev);
        int64_t ndiff = 0;
        for (int64_t i = 0; i < no; i++) ndiff += og[0][i] != og[2][i];
        printf("    tile_attention default (batched) vs H3_VAE_ATTN=tile: %lld of %lld elements differ\n",
               (long long)ndiff, (long long)no);
        CHECK(ndiff == 0, "tile_attention: batched and per-tile differ in %lld elements", (long long)ndiff);
        free(a), free(qkv), free(oc), free(og[0]), free(og[1]), free(og[2]);
        h3_free(gpu, dq), h3_free(gpu, dout);
    }
}

static h3_tensor *load_f32(st_set *s, const char *name) {
    h3_tensor v;
    h3_err e;
    if (st_set_get(s, name, &v, &e) != 0) return NULL;
    return h3_tensor_to_f32(&v, &e);
}

static void test_goldens(h3_backend *cpu, h3_backend *gpu) {
    printf("golden tiny models, bf16 mode\n");
    const char *models[3] = {GOLD "/model/vae", GOLD "/model/vae", "tests/fixtures/tiny/vae"};
    const char *cases[3] = {"decode_L7", "decode_L11", "tiny_decode"};
    for (int i = 0; i < 3; i++) {
        h3_err e = {{0}};
        char pin[256], pout[256];
        snprintf(pin, sizeof pin, GOLD "/%s.in.safetensors", cases[i]);
        snprintf(pout, sizeof pout, GOLD "/%s.out.safetensors", cases[i]);
        st_set *in = st_set_open(pin, &e), *out = in ? st_set_open(pout, &e) : NULL;
        video_vae *vc = video_vae_new(cpu, models[i], VIDEO_VAE_DECODER | VIDEO_VAE_BF16, &e);
        video_vae *vg = vc ? video_vae_new(gpu, models[i], VIDEO_VAE_DECODER | VIDEO_VAE_BF16, &e) : NULL;
        CHECK(in && out && vc && vg, "%s: %s", cases[i], e.msg);
        if (in && out && vc && vg) {
            h3_tensor *z = load_f32(in, "latents"), *ref = load_f32(out, "sample");
            video_vae_tiling t = video_vae_tiling_default();
            h3_tensor tl;
            if (st_set_get(in, "tiling", &tl, &e) == 0) {
                const int64_t *p = tl.data;
                t.enabled = p[0] != 0, t.tile_h = (int)p[0], t.tile_w = (int)p[1], t.overlap_h = (int)p[2],
                t.overlap_w = (int)p[3];
            }
            const int64_t L = z->shape[2], h = z->shape[3], w = z->shape[4], n = h3_tensor_numel(ref);
            float *oc = malloc((size_t)n * 4), *og = malloc((size_t)n * 4), *ot = malloc((size_t)n * 4);
            CHECK(video_vae_decode(vc, z->data, L, h, w, &t, oc, &e) == 0, "cpu: %s", e.msg);
            CHECK(video_vae_decode(vg, z->data, L, h, w, &t, og, &e) == 0, "cuda: %s", e.msg);
            video_vae_set_decode_batch(vg, 1);
            CHECK(video_vae_decode(vg, z->data, L, h, w, &t, ot, &e) == 0, "cuda per-tile: %s", e.msg);
            CHECK(h3_backend_check(gpu, &e) == 0, "%s", e.msg);
            char label[96];
            /* both bf16 decoders: tensor-core GEMMs and cuDNN attention round differently from the CPU
             * twins (single bf16 flips), so the bf16 bar of the release-width checks below */
            snprintf(label, sizeof label, "%s CUDA batched vs CPU batched (bf16)", cases[i]);
            report(label, og, oc, n, 5e-3);
            snprintf(label, sizeof label, "%s CUDA batched vs CUDA per-tile", cases[i]);
            report(label, og, ot, n, 1e-5);
            snprintf(label, sizeof label, "%s CUDA batched vs fp32 golden", cases[i]);
            report(label, og, ref->data, n, 1.2e-2);
            free(oc), free(og), free(ot);
            h3_tensor_free(z), h3_tensor_free(ref);
        }
        video_vae_free(vc), video_vae_free(vg);
        st_set_free(in), st_set_free(out);
    }
}

/* 2 tiles of 256 x 256 px (256 x 384 canvas), one 7-latent clip -> 22 frames. */
static void test_release(h3_backend *cpu, h3_backend *gpu) {
    h3_err e = {{0}};
    video_vae_config cfg;
    CHECK(video_vae_config_load(SKELETON, &cfg, &e) == 0, "%s", e.msg);
    const int64_t L = 7, h = 16, w = 24, nz = (int64_t)cfg.latent_channels * L * h * w;
    float *z = malloc((size_t)nz * 4);
    h3_fill_random_host(z, H3_F32, nz, 4, 1.0f, 0.0f);
    video_vae_tiling t = video_vae_tiling_default();
    const int64_t n = video_vae_decoded_frames(&cfg, L, &e) * 3 * h * 16 * w * 16;
    float *oc = malloc((size_t)n * 4), *og = malloc((size_t)n * 4), *ot = malloc((size_t)n * 4), *of = malloc((size_t)n * 4);

    printf("random release-width decoder, 1 layer, 256 x 384 px x 22 frames (2 tiles)\n");
    video_vae_config c1 = cfg;
    c1.dec_layers = 1;
    video_vae *vc = video_vae_new_random(cpu, &c1, VIDEO_VAE_DECODER | VIDEO_VAE_BF16, 7, &e);
    video_vae *vg = vc ? video_vae_new_random(gpu, &c1, VIDEO_VAE_DECODER | VIDEO_VAE_BF16, 7, &e) : NULL;
    video_vae *vf = vg ? video_vae_new_random(gpu, &c1, VIDEO_VAE_DECODER, 7, &e) : NULL;
    CHECK(vc && vg && vf, "%s", e.msg);
    if (vc && vg && vf) {
        CHECK(video_vae_decode(vc, z, L, h, w, &t, oc, &e) == 0, "cpu: %s", e.msg);
        CHECK(video_vae_decode(vg, z, L, h, w, &t, og, &e) == 0, "cuda: %s", e.msg);
        video_vae_set_decode_batch(vg, 1);
        CHECK(video_vae_decode(vg, z, L, h, w, &t, ot, &e) == 0, "cuda per-tile: %s", e.msg);
        CHECK(video_vae_decode(vf, z, L, h, w, &t, of, &e) == 0, "cuda fp32: %s", e.msg);
        CHECK(h3_backend_check(gpu, &e) == 0, "%s", e.msg);
        report("1 layer: CUDA batched vs CPU batched (bf16)", og, oc, n, 5e-3);
        report("1 layer: CUDA batched vs CUDA per-tile (bf16)", og, ot, n, 5e-3);
        report("1 layer: CUDA per-tile vs CPU batched (bf16)", ot, oc, n, 5e-3);
        report("1 layer: CUDA bf16 batched vs CUDA fp32", og, of, n, 1e-2);
        report("1 layer: CPU bf16 vs CUDA fp32", oc, of, n, 1e-2);
    }
    video_vae_free(vc), video_vae_free(vg), video_vae_free(vf);

    printf("random release decoder, 36 layers, 256 x 384 px x 22 frames (2 tiles)\n");
    vg = video_vae_new_random(gpu, &cfg, VIDEO_VAE_DECODER | VIDEO_VAE_BF16, 7, &e);
    vf = vg ? video_vae_new_random(gpu, &cfg, VIDEO_VAE_DECODER, 7, &e) : NULL;
    CHECK(vg && vf, "%s", e.msg);
    if (vg && vf) {
        CHECK(video_vae_decode(vg, z, L, h, w, &t, og, &e) == 0, "cuda: %s", e.msg);
        video_vae_set_decode_batch(vg, 1);
        CHECK(video_vae_decode(vg, z, L, h, w, &t, ot, &e) == 0, "cuda per-tile: %s", e.msg);
        CHECK(video_vae_decode(vf, z, L, h, w, &t, of, &e) == 0, "cuda fp32: %s", e.msg);
        CHECK(h3_backend_check(gpu, &e) == 0, "%s", e.msg);
        report("36 layers: CUDA bf16 batched vs CUDA fp32", og, of, n, 1e-2);
        report("36 layers: CUDA bf16 per-tile vs CUDA fp32", ot, of, n, 1e-2);
        report("36 layers: CUDA bf16 batched vs per-tile", og, ot, n, 1e-2);
    }
    video_vae_free(vg), video_vae_free(vf);
    free(z), free(oc), free(og), free(ot), free(of);
}

int main(int argc, char **argv) {
    h3_err e = {{0}};
    h3_backend *cpu = h3_backend_new(H3_BACKEND_CPU, 0, &e), *gpu = cpu ? h3_backend_new(H3_BACKEND_CUDA, 0, &e) : NULL;
    if (!cpu || !gpu) {
        fprintf(stderr, "backend: %s\n", e.msg);
        return 1;
    }
    const char *only = argc > 1 ? argv[1] : "";
    if (!*only || strstr(only, "ops")) test_ops(cpu, gpu);
    if (!*only || strstr(only, "gold")) test_goldens(cpu, gpu);
    if (!*only || strstr(only, "release")) test_release(cpu, gpu);
    CHECK(h3_backend_check(gpu, &e) == 0, "%s", e.msg);
    h3_backend_free(gpu);
    h3_backend_free(cpu);
    TEST_END();
}
