/* Whole-forward benchmarks of the CUDA backend at DiT shapes (docs/model/dit.md sections 4 and 9). The per-op
 * timings moved to the backend-ops harness (`test_backend_ops --perf`, docs/testing.md); what stays here is not one
 * op's median: `sustained [S]` (a forward's GEMMs and attentions back to back, the floor of a forward) and `cudnn`
 * (does a cuDNN SDPA graph variant build and run), `sage8 [S]` (the 8-bit attention, docs/fast.md: its error against the
 * exact attention on random tensors and on K with channel outliers, the time of each part and of each sm90 variant).
 * Random data from a device hash (never zeros).
 * Usage: bench_cuda_ops [sustained [S] | cudnn | sage8 [S]] (default: sustained 19540) */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "backend/backend.h"
#include "backend/ops.h"
#include "backend/cuda/cuda_sage8.h"
#include "backend/cuda/cuda_ops.h"

static h3_backend *be;

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

typedef void (*bench_fn)(void *arg);

static float median_ms(bench_fn fn, void *arg, int reps) {
    float t[64];
    if (reps > 64) reps = 64;
    fn(arg); /* warm-up: plan selection, module load, pool growth */
    for (int i = 0; i < reps; i++) {
        cuda_mark(be, 0);
        fn(arg);
        cuda_mark(be, 1);
        t[i] = cuda_elapsed_ms(be);
    }
    qsort(t, (size_t)reps, sizeof(float), cmp_float);
    return t[reps / 2];
}

/* ---- cuDNN attention ---- */
typedef struct { float *out; uint16_t *q, *k, *v; int64_t S; int H, D; } flash_arg;
static void run_cudnn(void *p) {
    flash_arg *a = p;
    cuda_cudnn_attention_bf16(be, (uint16_t *)a->out, a->q, a->k, a->v, a->S, a->S, a->H, a->H, a->D,
                              1.0f / sqrtf((float)a->D));
}

/* `bench_cuda_ops sustained [S]`: the forward's two kinds of heavy kernels back to back for a whole forward each,
 * as the DiT runs them (not one kernel's median): 50 blocks x the four block GEMMs (cuBLASLt, BF16 out) alone, 50
 * attentions (h3_bf16_attention on the fused qkv rows) alone, both interleaved in the block's order, and the 50
 * attentions with --attention sage8 (h3_sage8_attention: quantization included). Three
 * passes of each, event-timed as a whole, so the power-limited clock of a long run is what is measured: the sum
 * of the first two is the floor of a forward built from these kernels (the element-wise ops come on top). */
static int sustained(int64_t S) {
    const int H = 56, D = 128, blocks = 50;
    const int64_t Hd = 5376, I = (int64_t)H * D, F = 14336;
    const int64_t N[4] = {3 * I, Hd, 2 * F, Hd}, K[4] = {Hd, I, Hd, F};
    if (S < 1 || S > 200000) {
        fprintf(stderr, "bench_cuda_ops sustained: S must be 1..200000, got %lld\n", (long long)S);
        return 1;
    }
    uint16_t *w[4], *qkv = h3_alloc(be, (size_t)(S * 3 * I) * 2), *act = h3_alloc(be, (size_t)(S * 2 * F) * 2);
    uint16_t *x = h3_alloc(be, (size_t)(S * F) * 2), *att = h3_alloc(be, (size_t)(S * I) * 2);
    int ok = qkv && act && x && att;
    for (int g = 0; g < 4; g++) ok &= (w[g] = h3_alloc(be, (size_t)(N[g] * K[g]) * 2)) != NULL;
    if (!ok) {
        fprintf(stderr, "bench_cuda_ops sustained: out of device memory at S %lld\n", (long long)S);
        for (int g = 0; g < 4; g++) h3_free(be, w[g]);
        h3_free(be, qkv), h3_free(be, act), h3_free(be, x), h3_free(be, att);
        return 1;
    }
    for (int g = 0; g < 4; g++) cuda_fill_random_bf16(be, w[g], N[g] * K[g], 40 + g, 0.02f);
    cuda_fill_random_bf16(be, x, S * F, 50, 1.0f);
    cuda_fill_random_bf16(be, qkv, S * 3 * I, 51, 2.0f);
    double gemm_flop = 0.0;
    for (int g = 0; g < 4; g++) gemm_flop += 2.0 * S * N[g] * K[g];
    gemm_flop *= blocks;
    const double attn_flop = 4.0 * S * S * I * blocks;
    const float scale = 1.0f / sqrtf((float)D);
    printf("# sustained, S = %lld, %d blocks: GEMMs %.1f TFLOP, attention %.1f TFLOP per forward\n", (long long)S,
           blocks, gemm_flop / 1e12, attn_flop / 1e12);
    printf("%-44s %5s %10s %9s\n", "what (one forward's worth, back to back)", "pass", "s", "TFLOP/s");
    double best[4] = {1e30, 1e30, 1e30, 1e30};
    for (int pass = 0; pass < 4; pass++) { /* pass 0: warm-up (plans, module loads), not reported */
        for (int what = 0; what < 4; what++) {
            cuda_mark(be, 0);
            for (int b = 0; b < blocks; b++) {
                if (what == 0 || what == 2) /* the GEMMs read x (S x K values) and write act; the qkv rows stay fixed */
                    cuda_gemm_bf16(be, act, x, w[0], S, N[0], K[0]);
                if (what == 1 || what == 2)
                    h3_bf16_attention(be, att, I, qkv, 3 * I, D, qkv + I, 3 * I, D, qkv + 2 * I, 3 * I, D, S, S, H,
                                      H, D, scale);
                if (what == 3)
                    h3_sage8_attention(be, att, I, qkv, 3 * I, D, qkv + I, 3 * I, D, qkv + 2 * I, 3 * I, D, S, S, H,
                                       H, D, scale);
                if (what == 0 || what == 2)
                    for (int g = 1; g < 4; g++) cuda_gemm_bf16(be, act, x, w[g], S, N[g], K[g]);
            }
            cuda_mark(be, 1);
            double sec = cuda_elapsed_ms(be) / 1e3, flop = what == 0 ? gemm_flop : what == 2 ? gemm_flop + attn_flop : attn_flop;
            const char *nm[4] = {"block GEMMs only (cuBLASLt)", "attention only (h3_bf16_attention)",
                                 "both, in the block's order", "attention only, sage8 (h3_sage8_attention)"};
            if (pass == 0) continue;
            if (sec < best[what]) best[what] = sec;
            printf("%-44s %5d %10.4f %9.1f\n", nm[what], pass, sec, flop / sec / 1e12);
        }
    }
    printf("floor (best GEMMs-only + best attention-only): %.4f s; interleaved best %.4f s; sage8 attention best %.4f s\n",
           best[0] + best[1], best[2], best[3]);
    for (int g = 0; g < 4; g++) h3_free(be, w[g]);
    h3_free(be, qkv), h3_free(be, act), h3_free(be, x), h3_free(be, att);
    return 0;
}

/* ---- `bench_cuda_ops sage8 [S]` ---- */
typedef struct {
    uint16_t *out, *qkv;
    h3_sage8_codes *codes;
    int64_t S;
    int H, D, what; /* 0 exact, 1 sage8 (all), 2 quantize only, 3 attention on the codes only */
} sage8_arg;
static void run_sage8(void *p) {
    sage8_arg *a = p;
    const int64_t I = (int64_t)a->H * a->D;
    const float scale = 1.0f / sqrtf((float)a->D);
    const uint16_t *q = a->qkv, *k = a->qkv + I, *v = a->qkv + 2 * I;
    if (a->what == 0) h3_bf16_attention(be, a->out, I, q, 3 * I, a->D, k, 3 * I, a->D, v, 3 * I, a->D, a->S, a->S, a->H, a->H, a->D, scale);
    if (a->what == 1) h3_sage8_attention(be, a->out, I, q, 3 * I, a->D, k, 3 * I, a->D, v, 3 * I, a->D, a->S, a->S, a->H, a->H, a->D, scale);
    if (a->what == 2) h3_sage8_quantize(be, a->codes, q, 3 * I, a->D, k, 3 * I, a->D, v, 3 * I, a->D);
    if (a->what == 3) h3_sage8_attention_codes(be, a->out, I, a->codes, scale);
}

static void rel_err(const uint16_t *got, const uint16_t *ref, int64_t n, double *rel, double *mx) {
    double num = 0, den = 0, m = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = h3_bf16_to_f32(got[i]), r = h3_bf16_to_f32(ref[i]), d = g - r;
        num += d * d, den += r * r;
        if (!(fabs(d) <= m)) m = fabs(d);
    }
    *rel = den > 0 ? sqrt(num / den) : sqrt(num), *mx = m;
}

static int sage8_mode(int64_t S) {
    const int H = 56, D = 128;
    const int64_t I = (int64_t)H * D, n = S * I;
    if (S < 1 || S > 100000) {
        fprintf(stderr, "bench_cuda_ops sage8: S must be 1..100000, got %lld\n", (long long)S);
        return 1;
    }
    uint16_t *qkv = h3_alloc(be, (size_t)(S * 3 * I) * 2), *ex = h3_alloc(be, (size_t)n * 2), *sg = h3_alloc(be, (size_t)n * 2);
    void *cb = h3_alloc(be, h3_sage8_codes_bytes(S, S, H, H, D));
    uint16_t *h_ex = malloc((size_t)n * 2), *h_sg = malloc((size_t)n * 2), *h_qkv = malloc((size_t)(S * 3 * I) * 2);
    int rc = 1;
    if (!qkv || !ex || !sg || !cb || !h_ex || !h_sg || !h_qkv) {
        fprintf(stderr, "bench_cuda_ops sage8: out of memory at S %lld\n", (long long)S);
        goto done;
    }
    h3_sage8_codes codes;
    h3_sage8_codes_layout(&codes, cb, S, S, H, H, D);
    printf("# sage8, S = %lld, H %d, D %d: one attention (q/k/v strided in fused qkv rows)\n", (long long)S, H, D);
    cuda_fill_random_bf16(be, qkv, S * 3 * I, 51, 2.0f);
    sage8_arg a = {ex, qkv, &codes, S, H, D, 0};
    for (int outl = 0; outl < 2; outl++) {
        if (outl) { /* K channels d % 16 == 3 of every head get +24..+28 (the channel outliers smoothing removes) */
            h3_download(be, h_qkv, qkv, (size_t)(S * 3 * I) * 2);
            for (int64_t s = 0; s < S; s++)
                for (int64_t i = 0; i < I; i++)
                    if (i % 16 == 3) {
                        uint16_t *e = &h_qkv[s * 3 * I + I + i];
                        *e = h3_f32_to_bf16(h3_bf16_to_f32(*e) + 24.0f + (float)(i % 5));
                    }
            h3_upload(be, qkv, h_qkv, (size_t)(S * 3 * I) * 2);
        }
        a.out = ex, a.what = 0;
        run_sage8(&a);
        a.out = sg, a.what = 1;
        run_sage8(&a);
        h3_sync(be);
        h3_download(be, h_ex, ex, (size_t)n * 2);
        h3_download(be, h_sg, sg, (size_t)n * 2);
        double rel, mx;
        rel_err(h_sg, h_ex, n, &rel, &mx);
        printf("accuracy %-26s sage8 vs exact (h3_bf16_attention): rel_l2 %.4e max_abs %.4e\n",
               outl ? "K with channel outliers:" : "random q/k/v:", rel, mx);
        /* every sm90 variant (and the default) against the default's bits */
        for (int vv = 0; vv < cuda_sage8_sm90_variants(); vv++) {
            cuda_sage8_set_variant(be, vv);
            a.out = ex, a.what = 1;
            run_sage8(&a);
            h3_sync(be);
            h3_download(be, h_ex, ex, (size_t)n * 2);
            rel_err(h_ex, h_sg, n, &rel, &mx);
            printf("  variant %d vs the default: rel_l2 %.3e max_abs %.3e\n", vv, rel, mx);
        }
        cuda_sage8_set_variant(be, -1);
    }
    const double flop = 4.0 * S * S * I;
    const char *nm[4] = {"exact (h3_bf16_attention)", "sage8 (quantize + attention)", "sage8 quantize only",
                         "sage8 attention on the codes"};
    a.out = sg;
    for (int w = 0; w < 4; w++) {
        a.what = w;
        float ms = median_ms(run_sage8, &a, 9);
        printf("time %-32s %8.3f ms %7.1f TFLOP/s (x50: %.3f s)\n", nm[w], ms, w == 2 ? 0.0 : flop / (ms * 1e-3) / 1e12,
               ms * 50e-3);
    }
    a.what = 3;
    for (int vv = 0; vv < cuda_sage8_sm90_variants(); vv++) {
        cuda_sage8_set_variant(be, vv);
        float ms = median_ms(run_sage8, &a, 9);
        printf("time variant %d attention on the codes %8.3f ms %7.1f TFLOP/s\n", vv, ms, flop / (ms * 1e-3) / 1e12);
    }
    cuda_sage8_set_variant(be, -1);
    rc = 0;
done:
    h3_free(be, qkv), h3_free(be, ex), h3_free(be, sg), h3_free(be, cb);
    free(h_ex), free(h_sg), free(h_qkv);
    return rc;
}

static int cudnn_variant(void) {
    int64_t S = 2122;
    int H = 56, D = 128;
    uint16_t *q = h3_alloc(be, (size_t)(4 * S * H * D) * 2);
    if (!q) return 1;
    cuda_fill_random_bf16(be, q, 3 * S * H * D, 9, 2.0f);
    flash_arg a = {(float *)(q + 3 * S * H * D), q, q + S * H * D, q + 2 * S * H * D, S, H, D};
    int rc = cuda_cudnn_attention_bf16(be, (uint16_t *)a.out, a.q, a.k, a.v, S, S, H, H, D, 0.088f);
    if (rc == 0) {
        float ms = median_ms(run_cudnn, &a, 11);
        printf("cudnn variant ok: S %lld %.3f ms %.1f TFLOP/s\n", (long long)S, ms, 4.0 * S * S * H * D / (ms * 1e-3) / 1e12);
    } else {
        printf("cudnn variant failed\n");
    }
    h3_free(be, q);
    return rc;
}

int main(int argc, char **argv) {
    const int cudnn = argc > 1 && strcmp(argv[1], "cudnn") == 0, sage8 = argc > 1 && strcmp(argv[1], "sage8") == 0;
    if (argc > 1 && !cudnn && !sage8 && strcmp(argv[1], "sustained") != 0) {
        fprintf(stderr, "bench_cuda_ops: unknown mode '%s' (usage: [sustained [S] | cudnn | sage8 [S]]; per-op timings: "
                        "test_backend_ops --perf)\n", argv[1]);
        return 2;
    }
    h3_err e = {{0}};
    be = h3_backend_new(H3_BACKEND_CUDA, 0, &e);
    if (!be) {
        fprintf(stderr, "bench_cuda_ops: %s\n", e.msg);
        return 1;
    }
    int rc = cudnn ? cudnn_variant() : sage8 ? sage8_mode(argc > 2 ? atoll(argv[2]) : 19540)
                                             : sustained(argc > 2 ? atoll(argv[2]) : 19540);
    h3_sync(be);
    if (cuda_backend_check(be, &e)) {
        fprintf(stderr, "bench_cuda_ops: %s\n", e.msg);
        rc = 1;
    }
    h3_backend_free(be);
    return rc ? 1 : 0;
}
