/* The benchmark ops on CUDA against their CPU twins (built with CUDA=1: make CUDA=1 MEDIA=0
 * BUILD=build-cuda build-cuda/tests/cuda/test_cuda_bench; run on the GPU machine):
 *   - h3_fill_random: bit-identical F32 and BF16 values (the random-weight model is the same model
 *     on both backends);
 *   - dit_new_random (matrices made on the device, owned by the model) vs the CPU's host-made model:
 *     one tiny-config forward, fp32 mode, same inputs;
 *   - h3_memory_query: the pool's high-water mark sees a 1 GiB allocation. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "backend/backend.h"
#include "backend/backend_bench.h"
#include "core/tensor.h"
#include "model/dit.h"
#include "pipeline/layout.h"

static void test_fill(h3_backend *gpu) {
    const int64_t n = 1000003;
    for (int bf = 0; bf < 2; bf++) {
        h3_dtype dt = bf ? H3_BF16 : H3_F32;
        size_t bytes = (size_t)n * (bf ? 2 : 4);
        void *host = malloc(bytes), *back = malloc(bytes), *dev = h3_alloc(gpu, bytes);
        h3_fill_random_host(host, dt, n, 0x1234567ull, 0.37f, 1.0f);
        h3_fill_random(gpu, dev, dt, n, 0x1234567ull, 0.37f, 1.0f);
        h3_download(gpu, back, dev, bytes);
        CHECK(memcmp(host, back, bytes) == 0, "fill_random %s differs from the CPU twin", bf ? "bf16" : "f32");
        printf("  fill_random %-4s %lld elements: %s\n", bf ? "bf16" : "f32", (long long)n,
               memcmp(host, back, bytes) ? "DIFFERENT" : "bit-identical");
        free(host), free(back), h3_free(gpu, dev);
    }
}

static void test_dit_random(h3_backend *cpu, h3_backend *gpu) {
    h3_err e = {{0}};
    dit_config cfg;
    CHECK(dit_config_load("tests/fixtures/tiny/transformer", &cfg, &e) == 0, "%s", e.msg);
    dit_model *mc = dit_new_random(cpu, &cfg, 0, 42, &e), *mg = dit_new_random(gpu, &cfg, 0, 42, &e);
    CHECK(mc && mg, "dit_new_random: %s", e.msg);
    if (!mc || !mg) return;
    int64_t T = 16, text_tags[16];
    for (int i = 0; i < T; i++) text_tags[i] = 1;
    layout *L = layout_new_t2va(text_tags, T, 7, 4, 6, 37, NULL, 0, &e);
    CHECK(L != NULL, "layout: %s", e.msg);
    int64_t pd = (int64_t)cfg.in_channels * 4;
    float *video = malloc((size_t)(L->Nv * pd) * 4), *audio = malloc((size_t)(L->Na * cfg.audio_in_channels) * 4);
    float *text = malloc((size_t)(T * cfg.text_dim) * 4);
    float *vc = malloc((size_t)(L->Nv * pd) * 4), *vg = malloc((size_t)(L->Nv * pd) * 4);
    float *ac = malloc((size_t)(L->Na * cfg.audio_in_channels) * 4), *ag = malloc((size_t)(L->Na * cfg.audio_in_channels) * 4);
    int64_t *tix = malloc((size_t)L->S * 8);
    h3_fill_random_host(video, H3_F32, L->Nv * pd, 1, 1.0f, 0.0f);
    h3_fill_random_host(audio, H3_F32, L->Na * cfg.audio_in_channels, 2, 1.0f, 0.0f);
    h3_fill_random_host(text, H3_F32, T * cfg.text_dim, 3, 1.0f, 0.0f);
    float tv[LAYOUT_MAX_TIMESTEPS];
    int K;
    layout_row_timesteps(L, 0.75f, 0.5f, tv, &K, tix);
    dit_inputs in = {.video = video, .Nv = L->Nv, .audio = audio, .Na = L->Na, .text = text, .Nt = T,
                     .timestep = tv, .K = K, .S = L->S, .timestep_indices = tix, .token_tags = L->token_tags,
                     .position_ids = L->position_ids, .video_indices = L->video_indices,
                     .audio_indices = L->audio_indices, .text_indices = L->text_indices};
    CHECK(dit_forward(mc, &in, vc, ac, &e) == 0, "cpu forward: %s", e.msg);
    CHECK(dit_forward(mg, &in, vg, ag, &e) == 0, "cuda forward: %s", e.msg);
    CHECK(dit_weight_bytes(mc) == dit_weight_bytes(mg), "weight bytes %zu vs %zu", dit_weight_bytes(mc),
          dit_weight_bytes(mg));
    CHECK_CLOSE("random tiny DiT fp32 forward, video (CUDA vs CPU)", h3_rel_l2(vg, vc, (size_t)(L->Nv * pd)), 1e-5);
    CHECK_CLOSE("random tiny DiT fp32 forward, audio (CUDA vs CPU)",
                h3_rel_l2(ag, ac, (size_t)(L->Na * cfg.audio_in_channels)), 1e-5);
    /* release + forward again on the device (the released AdaLN weights were the model's own) */
    CHECK(dit_prepare_timesteps(mg, tv, K, &e) == 0, "%s", e.msg);
    dit_release_adaln(mg);
    CHECK(dit_forward(mg, &in, vg, ag, &e) == 0, "cuda forward after release: %s", e.msg);
    CHECK_CLOSE("same after dit_release_adaln", h3_rel_l2(vg, vc, (size_t)(L->Nv * pd)), 1e-5);
    free(video), free(audio), free(text), free(vc), free(vg), free(ac), free(ag), free(tix);
    layout_free(L);
    dit_free(mc), dit_free(mg);
}

static void test_memory(h3_backend *gpu) {
    h3_err e = {{0}};
    h3_memory_stats s0, s1;
    h3_memory_reset_peak(gpu);
    CHECK(h3_memory_query(gpu, &s0, &e) == 0, "%s", e.msg);
    void *p = h3_alloc(gpu, (size_t)1 << 30);
    h3_sync(gpu);
    CHECK(h3_memory_query(gpu, &s1, &e) == 0, "%s", e.msg);
    printf("  memory: pool peak %.3f -> %.3f GiB, device in use %.2f of %.2f GiB\n", s0.peak_bytes / 1073741824.0,
           s1.peak_bytes / 1073741824.0, s1.in_use_bytes / 1073741824.0, s1.total_bytes / 1073741824.0);
    CHECK(s1.peak_bytes >= s0.peak_bytes + ((size_t)1 << 30), "peak did not grow by 1 GiB");
    CHECK(s1.total_bytes > 0 && s1.in_use_bytes >= ((size_t)1 << 30), "device totals");
    h3_free(gpu, p);
}

int main(void) {
    h3_err e = {{0}};
    h3_backend *cpu = h3_backend_new(H3_BACKEND_CPU, 0, &e), *gpu = h3_backend_new(H3_BACKEND_CUDA, 0, &e);
    if (!cpu || !gpu) {
        fprintf(stderr, "h3: %s\n", e.msg);
        return 1;
    }
    test_fill(gpu);
    test_dit_random(cpu, gpu);
    test_memory(gpu);
    h3_backend_free(gpu);
    h3_backend_free(cpu);
    TEST_END();
}
