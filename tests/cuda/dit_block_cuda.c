/* One full-width MiniMax-H3 DiT block (docs/model/dit.md 4.6: hidden 5376, 56 heads x 128, ffn 14336) on
 * the CUDA backend, random weights (dit_new_random, the release dtypes).
 *   dit_block_cuda parity [rows]   CUDA block vs the CPU block on the same weights and rows, fp32
 *                                  mode (tol 1e-5) and bf16 mode (tol 3e-2); prints RESULT lines
 *   dit_block_cuda bench [rows...] block time (median of 3, device events) and x50 for the 50 blocks
 * Built with CUDA=1 (make cuda-tests); run on the GPU machine by tests/cuda/run_device.sh. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "backend/backend.h"
#include "backend/cuda/cuda_ops.h"
#include "core/tensor.h"
#include "model/dit.h"

static const dit_config release_block = {
    .num_attention_heads = 56, .attention_head_dim = 128, .hidden_size = 5376, .num_layers = 1,
    .num_refiner_layers = 0, .ffn_dim = 14336, .in_channels = 24, .audio_in_channels = 32,
    .patch_size = {1, 2, 2}, .text_dim = 5120, .freq_dim = 256, .time_embed_hidden_dim = 5376,
    .time_embed_dim = 2688, .rope_freq_dim = 16, .rope_theta = 10000.0f, .norm_eps = 1e-5f,
    .qk_norm_eps = 1e-5f, .final_norm_eps = 1e-5f};

/* a t2va-like row plan (bench/bench_dit_block.c): 256 text rows, 74 audio rows, the rest video */
typedef struct { int64_t *tix, *tags; double *pos; float ts[2]; dit_inputs in; } row_plan;

static void make_plan(row_plan *p, int64_t S) {
    p->tix = malloc((size_t)S * 8), p->tags = malloc((size_t)S * 8), p->pos = malloc((size_t)S * 3 * 8);
    p->ts[0] = 0.3f, p->ts[1] = 0.6f;
    for (int64_t s = 0; s < S; s++) {
        p->tags[s] = s < 256 ? 1 : s < 330 ? 2 : 0;
        p->tix[s] = p->tags[s] == 2 ? 1 : 0;
        p->pos[s * 3 + 0] = s < 256 ? (double)s : 256.0 + (double)((s - 256) / 256) * 5.0 / 3.0;
        p->pos[s * 3 + 1] = (double)((s / 16) % 16) * 2.0;
        p->pos[s * 3 + 2] = (double)(s % 16) * 2.0;
    }
    dit_inputs in = {.timestep = p->ts, .K = 2, .S = S, .timestep_indices = p->tix, .token_tags = p->tags,
                     .position_ids = p->pos};
    p->in = in;
}

static void free_plan(row_plan *p) { free(p->tix), free(p->tags), free(p->pos); }

static dit_model *model(h3_backend *be, int bf16) {
    h3_err e = {{0}};
    dit_model *m = dit_new_random(be, &release_block, bf16, 42, &e);
    float ts[2] = {0.3f, 0.6f};
    if (!m || dit_prepare_timesteps(m, ts, 2, &e) != 0) {
        fprintf(stderr, "dit_block_cuda: %s\n", e.msg);
        exit(1);
    }
    return m;
}

static void parity(int64_t S) {
    h3_err e = {{0}};
    h3_backend *cpu = h3_backend_new(H3_BACKEND_CPU, 0, &e), *gpu = h3_backend_new(H3_BACKEND_CUDA, 0, &e);
    if (!gpu) {
        fprintf(stderr, "dit_block_cuda: %s\n", e.msg);
        exit(1);
    }
    row_plan p;
    make_plan(&p, S);
    int64_t n = S * release_block.hidden_size;
    float *x0 = malloc((size_t)n * 4), *xc = malloc((size_t)n * 4), *xg = malloc((size_t)n * 4);
    float *dx = h3_alloc(gpu, (size_t)n * 4);
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        uint64_t st = 7;
        for (int64_t i = 0; i < n; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            float v = (float)(st >> 40) * (2.0f / 16777216.0f) - 1.0f;
            x0[i] = bf16 ? h3_round_bf16(v) : v;
        }
        dit_model *mc = model(cpu, bf16), *mg = model(gpu, bf16);
        memcpy(xc, x0, (size_t)n * 4);
        h3_upload(gpu, dx, x0, (size_t)n * 4);
        int rc = dit_block_forward(mc, 0, xc, &p.in, &e);
        CHECK(rc == 0, "cpu block: %s", e.msg);
        rc = dit_block_forward(mg, 0, dx, &p.in, &e);
        CHECK(rc == 0, "cuda block: %s", e.msg);
        h3_download(gpu, xg, dx, (size_t)n * 4);
        /* the block's change to X (the residual stream dominates X itself) */
        double num = 0, den = 0;
        for (int64_t i = 0; i < n; i++) {
            double d = (double)xg[i] - xc[i], r = (double)xc[i] - x0[i];
            num += d * d, den += r * r;
        }
        char name[96];
        snprintf(name, sizeof name, "DiT block S=%lld %s: X", (long long)S, bf16 ? "[bf16]" : "fp32");
        CHECK_CLOSE(name, h3_rel_l2(xg, xc, (size_t)n), bf16 ? 3e-2 : 1e-5);
        snprintf(name, sizeof name, "DiT block S=%lld %s: X - X0", (long long)S, bf16 ? "[bf16]" : "fp32");
        CHECK_CLOSE(name, den > 0 ? sqrt(num / den) : INFINITY, bf16 ? 3e-2 : 1e-5);
        dit_free(mc), dit_free(mg);
    }
    CHECK(cuda_backend_check(gpu, &e) == 0, "%s", e.msg);
    h3_free(gpu, dx);
    free(x0), free(xc), free(xg);
    free_plan(&p);
    h3_backend_free(gpu), h3_backend_free(cpu);
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

static void bench(const int64_t *Ss, int nS) {
    h3_err e = {{0}};
    h3_backend *gpu = h3_backend_new(H3_BACKEND_CUDA, 0, &e);
    if (!gpu) {
        fprintf(stderr, "dit_block_cuda: %s\n", e.msg);
        exit(1);
    }
    dit_model *m = model(gpu, 1);
    printf("# one DiT block, bf16 mode, fp32 activations (current interface); x50 = the 50 main blocks\n");
    for (int i = 0; i < nS; i++) {
        int64_t S = Ss[i], n = S * release_block.hidden_size;
        row_plan p;
        make_plan(&p, S);
        float *dx = h3_alloc(gpu, (size_t)n * 4);
        float t[3];
        for (int r = 0; r < 4; r++) { /* r = 0: warm-up (plans, pool growth) */
            cuda_fill_random(gpu, dx, n, 11, 1.0f);
            h3_round_bf16_buf(gpu, dx, n);
            cuda_mark(gpu, 0);
            if (dit_block_forward(m, 0, dx, &p.in, &e) != 0) {
                fprintf(stderr, "dit_block_cuda: %s\n", e.msg);
                exit(1);
            }
            cuda_mark(gpu, 1);
            float ms = cuda_elapsed_ms(gpu);
            if (r > 0) t[r - 1] = ms;
        }
        qsort(t, 3, sizeof(float), cmp_float);
        double flop = 2.0 * S * (5376.0 * 21504 + 7168.0 * 5376 + 5376.0 * 28672 + 14336.0 * 5376) + 4.0 * S * S * 7168;
        printf("block S=%-6lld %9.3f ms  %6.1f TFLOP/s   x50 = %.3f s\n", (long long)S, t[1],
               flop / (t[1] * 1e-3) / 1e12, 50.0 * t[1] / 1e3);
        h3_free(gpu, dx);
        free_plan(&p);
    }
    if (cuda_backend_check(gpu, &e) != 0) fprintf(stderr, "dit_block_cuda: %s\n", e.msg);
    dit_free(m);
    h3_backend_free(gpu);
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "bench")) {
        int64_t Ss[8] = {2122, 19540, 37966};
        int nS = 3;
        if (argc > 2) {
            nS = 0;
            for (int i = 2; i < argc && nS < 8; i++) Ss[nS++] = atoll(argv[i]);
        }
        bench(Ss, nS);
        return 0;
    }
    parity(argc > 2 ? atoll(argv[2]) : 300);
    TEST_END();
}
