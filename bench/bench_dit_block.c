/* One full-width MiniMax-H3 DiT block (hidden 5376, 56 heads x 128, ffn 14336; docs/model/dit.md 4.6)
 * on the CPU backend, random bf16 weights, S packed rows (default 2048). Not a test.
 *   build-x/bench/bench_dit_block [rows] [repeats] [fp32]
 * Compare with tools/reference/bench_dit_block.py (PyTorch CPU, same shapes). The AdaLN tables are
 * precomputed (as the engine does per timestep value); the timing covers the block itself. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "model/dit.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    int64_t S = argc > 1 ? atoll(argv[1]) : 2048;
    int reps = argc > 2 ? atoi(argv[2]) : 2;
    int bf16 = !(argc > 3 && !strcmp(argv[3], "fp32"));
    if (S < 16 || reps < 1) {
        fprintf(stderr, "usage: bench_dit_block [rows >= 16] [repeats >= 1] [fp32]\n");
        return 2;
    }
    h3_err e = {{0}};
    h3_backend *be = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    if (!be) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    /* the release config (docs/model/dit.md 1), one block, no refiner */
    dit_config cfg = {.num_attention_heads = 56, .attention_head_dim = 128, .hidden_size = 5376, .num_layers = 1,
                      .num_refiner_layers = 0, .ffn_dim = 14336, .in_channels = 24, .audio_in_channels = 32,
                      .patch_size = {1, 2, 2}, .text_dim = 5120, .freq_dim = 256, .time_embed_hidden_dim = 5376,
                      .time_embed_dim = 2688, .rope_freq_dim = 16, .rope_theta = 10000.0f, .norm_eps = 1e-5f,
                      .qk_norm_eps = 1e-5f, .final_norm_eps = 1e-5f};
    double t0 = now_s();
    dit_model *m = dit_new_random(be, &cfg, bf16, 42, &e);
    if (!m) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    /* a t2va-like row plan: 256 text rows (tag 1), 74 audio rows (tag 2), the rest video (tag 0) */
    float ts[2] = {0.3f, 0.6f};
    int64_t *tix = malloc((size_t)S * 8), *tags = malloc((size_t)S * 8);
    double *pos = malloc((size_t)S * 3 * 8);
    float *X = h3_alloc(be, (size_t)(S * cfg.hidden_size) * sizeof(float));
    float *X0 = malloc((size_t)(S * cfg.hidden_size) * sizeof(float));
    for (int64_t s = 0; s < S; s++) {
        tags[s] = s < 256 ? 1 : s < 330 ? 2 : 0;
        tix[s] = tags[s] == 2 ? 1 : 0;
        pos[s * 3 + 0] = s < 256 ? (double)s : 256.0 + (double)((s - 256) / 256) * 5.0 / 3.0;
        pos[s * 3 + 1] = (double)((s / 16) % 16) * 2.0;
        pos[s * 3 + 2] = (double)(s % 16) * 2.0;
    }
    unsigned seed = 1;
    for (int64_t i = 0; i < S * cfg.hidden_size; i++) {
        seed = seed * 1664525u + 1013904223u;
        float v = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
        X0[i] = bf16 ? h3_round_bf16(v) : v;
    }
    if (dit_prepare_timesteps(m, ts, 2, &e) != 0) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    double t_setup = now_s() - t0;
    dit_inputs in = {.timestep = ts, .K = 2, .S = S, .timestep_indices = tix, .token_tags = tags, .position_ids = pos};
    double best = 1e30, sum = 0.0;
    for (int r = 0; r <= reps; r++) { /* r = 0: warm-up */
        memcpy(X, X0, (size_t)(S * cfg.hidden_size) * sizeof(float));
        double a = now_s();
        if (dit_block_forward(m, 0, X, &in, &e) != 0) {
            fprintf(stderr, "%s\n", e.msg);
            return 1;
        }
        double dt = now_s() - a;
        if (r > 0) {
            sum += dt;
            best = dt < best ? dt : best;
        }
    }
    double H = 5376, I = 7168, FF = 14336;
    double flop = 2.0 * (double)S * (H * 3 * I + I * H + H * 2 * FF + FF * H) + 4.0 * (double)S * (double)S * I;
    double cks = 0;
    for (int64_t i = 0; i < S * cfg.hidden_size; i++) cks += fabs((double)X[i]);
    printf("bench_dit_block: C %s, rows %lld, threads %d, setup %.1f s\n", bf16 ? "bf16 mode" : "fp32 mode",
           (long long)S, be->nthreads, t_setup);
    printf("block: best %.3f s, mean %.3f s over %d runs, %.1f GFLOP/s (%.3f TFLOP/block), checksum %.6e\n", best,
           sum / reps, reps, flop / best * 1e-9, flop * 1e-12, cks / (double)(S * cfg.hidden_size));
    printf("RESULT_SECONDS %.4f\n", best);
    free(tix), free(tags), free(pos), free(X0);
    h3_free(be, X);
    dit_free(m);
    h3_backend_free(be);
    return 0;
}
