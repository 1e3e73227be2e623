/* Micro-benchmarks of the CUDA backend at DiT shapes (docs/model/dit.md sections 4 and 9): BF16 GEMMs
 * (cuBLASLt), flash attention (56 heads x 128), and the memory-bound ops, with TFLOP/s or GB/s.
 * Random data from a device hash (never zeros). Each case: warm-up, then the median of `reps`
 * event-timed runs. Baseline to compare (diffusers/PyTorch on one H200, BF16): cuBLAS GEMM
 * 730-830 TFLOP/s, flash SDPA 591 TFLOP/s at 19,400 rows. Usage: bench_cuda_ops [quick | attn | cudnn | sustained [S]] */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "backend/backend.h"
#include "backend/backend_bf16.h"
#include "backend/backend_dit.h"
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

/* ---- GEMM ---- */
typedef struct { uint16_t *y, *x, *w; int64_t M, N, K; } gemm_arg;
static void run_gemm(void *p) {
    gemm_arg *a = p;
    cuda_gemm_bf16(be, a->y, a->x, a->w, a->M, a->N, a->K);
}

typedef struct { float *y, *x; h3_tensor *w; int64_t M; int flags; } matmul_arg;
static void run_matmul(void *p) {
    matmul_arg *a = p;
    h3_matmul(be, a->y, a->x, a->M, a->w, NULL, a->flags);
}

/* ---- attention ---- */
typedef struct { float *out; uint16_t *q, *k, *v; int64_t S; int H, D; } flash_arg;
static void run_cudnn(void *p) {
    flash_arg *a = p;
    cuda_cudnn_attention_bf16(be, (uint16_t *)a->out, a->q, a->k, a->v, a->S, a->S, a->H, a->H, a->D,
                              1.0f / sqrtf((float)a->D));
}
static void run_flash(void *p) {
    flash_arg *a = p;
    cuda_flash_attention_bf16(be, a->out, (int64_t)a->H * a->D, a->q, a->k, a->v, a->S, a->S, a->H, a->H, a->D,
                              1.0f / sqrtf((float)a->D), 0, 1);
}

typedef struct { float *out, *qkv; int64_t S; int H, D, flags; } attn_arg;
static void run_attn(void *p) {
    attn_arg *a = p;
    int64_t w = (int64_t)a->H * a->D;
    h3_attention(be, a->out, w, a->qkv, 3 * w, a->qkv + w, 3 * w, a->qkv + 2 * w, 3 * w, a->S, a->S, a->H, a->H, a->D,
                 1.0f / sqrtf((float)a->D), 0, a->flags);
}

/* h3_bf16_attention on the heads of a fused [S][3 * H * D] qkv buffer (the DiT's call) */
typedef struct { uint16_t *out, *qkv; int64_t S; int H, D; } attn16_arg;
static void run_attn16(void *p) {
    attn16_arg *a = p;
    int64_t w = (int64_t)a->H * a->D;
    h3_bf16_attention(be, a->out, w, a->qkv, 3 * w, a->D, a->qkv + w, 3 * w, a->D, a->qkv + 2 * w, 3 * w, a->D, a->S,
                      a->S, a->H, a->H, a->D, 1.0f / sqrtf((float)a->D));
}

/* ---- memory-bound ops at S x 5376 ---- */
typedef struct { float *x, *y, *w, *table; int32_t *idx; int64_t rows, dim; int op; } mem_arg;
static void run_mem(void *p) {
    mem_arg *a = p;
    if (a->op == 0) h3_rmsnorm(be, a->y, a->x, a->rows, a->dim, a->w, 1e-5f, H3_BF16_OUT);
    else if (a->op == 1) h3_adaln_modulate(be, a->y, a->x, a->rows, a->dim, a->table, 6 * a->dim, a->idx, 0, a->dim, H3_BF16_OUT);
    else if (a->op == 4) h3_rmsnorm(be, a->y, a->x, a->rows * a->dim / 128, 128, NULL, 1e-5f, H3_BF16_OUT);
    else if (a->op == 2) h3_gated_residual(be, a->y, a->x, a->rows, a->dim, a->table, 6 * a->dim, a->idx, 2 * a->dim, H3_BF16_OUT);
    else h3_copy(be, a->y, a->x, (size_t)(a->rows * a->dim) * sizeof(float));
}

/* `bench_cuda_ops sustained [S]`: the forward's two kinds of heavy kernels back to back for a whole forward each,
 * as the DiT runs them (not one kernel's median): 50 blocks x the four block GEMMs (cuBLASLt, BF16 out) alone, 50
 * attentions (h3_bf16_attention on the fused qkv rows) alone, and both interleaved in the block's order. Three
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
    double best[3] = {1e30, 1e30, 1e30};
    for (int pass = 0; pass < 4; pass++) { /* pass 0: warm-up (plans, module loads), not reported */
        for (int what = 0; what < 3; what++) {
            cuda_mark(be, 0);
            for (int b = 0; b < blocks; b++) {
                if (what != 1) /* the GEMMs read x (S x K values) and write act; the qkv rows stay fixed */
                    cuda_gemm_bf16(be, act, x, w[0], S, N[0], K[0]);
                if (what != 0)
                    h3_bf16_attention(be, att, I, qkv, 3 * I, D, qkv + I, 3 * I, D, qkv + 2 * I, 3 * I, D, S, S, H,
                                      H, D, scale);
                if (what != 1)
                    for (int g = 1; g < 4; g++) cuda_gemm_bf16(be, act, x, w[g], S, N[g], K[g]);
            }
            cuda_mark(be, 1);
            double sec = cuda_elapsed_ms(be) / 1e3, flop = what == 0 ? gemm_flop : what == 1 ? attn_flop : gemm_flop + attn_flop;
            const char *nm[3] = {"block GEMMs only (cuBLASLt)", "attention only (h3_bf16_attention)",
                                 "both, in the block's order"};
            if (pass == 0) continue;
            if (sec < best[what]) best[what] = sec;
            printf("%-44s %5d %10.4f %9.1f\n", nm[what], pass, sec, flop / sec / 1e12);
        }
    }
    printf("floor (best GEMMs-only + best attention-only): %.4f s; interleaved best %.4f s\n", best[0] + best[1], best[2]);
    for (int g = 0; g < 4; g++) h3_free(be, w[g]);
    h3_free(be, qkv), h3_free(be, act), h3_free(be, x), h3_free(be, att);
    return 0;
}

int main(int argc, char **argv) {
    int quick = argc > 1 && strcmp(argv[1], "quick") == 0;
    if (argc > 1 && strcmp(argv[1], "sustained") == 0) {
        h3_err e = {{0}};
        be = h3_backend_new(H3_BACKEND_CUDA, 0, &e);
        if (!be) {
            fprintf(stderr, "bench_cuda_ops: %s\n", e.msg);
            return 1;
        }
        int rc = sustained(argc > 2 ? atoll(argv[2]) : 19540);
        h3_sync(be);
        if (cuda_backend_check(be, &e)) {
            fprintf(stderr, "bench_cuda_ops: %s\n", e.msg);
            rc = 1;
        }
        h3_backend_free(be);
        return rc ? 1 : 0;
    }
    int attn_only = argc > 1 && strcmp(argv[1], "attn") == 0; /* flash attention rows only */
    h3_err e;
    if (argc > 1 && strcmp(argv[1], "cudnn") == 0) { /* does cuDNN SDPA build and run? (graph variants) */
        be = h3_backend_new(H3_BACKEND_CUDA, 0, &e);
        if (!be) return 1;
        int64_t S = 2122;
        int H = 56, D = 128;
        uint16_t *q = h3_alloc(be, (size_t)(4 * S * H * D) * 2);
        cuda_fill_random_bf16(be, q, 3 * S * H * D, 9, 2.0f);
        flash_arg a = {(float *)(q + 3 * S * H * D), q, q + S * H * D, q + 2 * S * H * D, S, H, D};
        int rc = cuda_cudnn_attention_bf16(be, (uint16_t *)a.out, a.q, a.k, a.v, S, S, H, H, D, 0.088f);
        if (rc == 0) {
            float ms = median_ms(run_cudnn, &a, 11);
            printf("cudnn variant ok: S %lld %.3f ms %.1f TFLOP/s\n", (long long)S, ms, 4.0 * S * S * H * D / (ms * 1e-3) / 1e12);
        } else {
            printf("cudnn variant failed\n");
        }
        h3_sync(be);
        rc |= cuda_backend_check(be, &e);
        h3_backend_free(be);
        return rc ? 1 : 0;
    }
    be = h3_backend_new(H3_BACKEND_CUDA, 0, &e);
    if (!be) {
        fprintf(stderr, "bench_cuda_ops: %s\n", e.msg);
        return 1;
    }
    if (attn_only) goto attention;
    printf("# GEMM y[M,N] = x[M,K] . W[N,K]^T, BF16 in, fp32 accumulate, BF16 out (cuBLASLt); baseline 730-830 TFLOP/s\n");
    printf("%-34s %7s %7s %7s %10s %9s\n", "gemm", "M", "N", "K", "ms", "TFLOP/s");
    struct { const char *name; int64_t N, K; } shapes[] = {
        {"qkv (fused to_q/k/v)", 21504, 5376}, {"attn out (to_out)", 5376, 7168},
        {"ffn up (W1 value+gate)", 28672, 5376}, {"ffn down (W2)", 5376, 14336}};
    int64_t Ms[] = {2122, 19540, 37966};
    double block_gemm_ms[3] = {0, 0, 0};
    int64_t maxMK = 37966LL * 14336, maxMN = 37966LL * 28672, maxNK = 28672LL * 5376;
    uint16_t *x = h3_alloc(be, (size_t)maxMK * 2), *y = h3_alloc(be, (size_t)maxMN * 2), *w = h3_alloc(be, (size_t)maxNK * 2);
    cuda_fill_random_bf16(be, x, maxMK, 1, 1.0f);
    cuda_fill_random_bf16(be, w, maxNK, 2, 0.02f);
    for (int mi = 0; mi < 3; mi++) {
        if (quick && mi == 1) continue;
        for (int si = 0; si < 4; si++) {
            gemm_arg a = {y, x, w, Ms[mi], shapes[si].N, shapes[si].K};
            float ms = median_ms(run_gemm, &a, Ms[mi] > 10000 ? 7 : 21);
            double tf = 2.0 * a.M * a.N * a.K / (ms * 1e-3) / 1e12;
            block_gemm_ms[mi] += ms;
            printf("%-34s %7lld %7lld %7lld %10.3f %9.1f\n", shapes[si].name, (long long)a.M, (long long)a.N,
                   (long long)a.K, ms, tf);
        }
    }
    h3_free(be, y);

    /* the interface path: fp32 activations, BF16 weight, H3_BF16_OUT (x -> bf16, GEMM to fp32, rounding) */
    {
        int64_t M = 19540, N = 21504, K = 5376;
        int64_t shape[2] = {N, K};
        h3_tensor *wt = h3_tensor_view(H3_BF16, 2, shape, w, &e);
        float *xf = h3_alloc(be, (size_t)(M * K) * 4), *yf = h3_alloc(be, (size_t)(M * N) * 4);
        cuda_fill_random(be, xf, M * K, 3, 1.0f);
        matmul_arg a = {yf, xf, wt, M, H3_BF16_OUT};
        float ms = median_ms(run_matmul, &a, 5);
        printf("%-34s %7lld %7lld %7lld %10.3f %9.1f\n", "h3_matmul fp32 act, BF16 w [bf16]", (long long)M,
               (long long)N, (long long)K, ms, 2.0 * M * N * K / (ms * 1e-3) / 1e12);
        /* the exact fp32 paths (SGEMM on widened weights), smaller M */
        a.M = 2122, a.flags = 0;
        ms = median_ms(run_matmul, &a, 3);
        printf("%-34s %7lld %7lld %7lld %10.3f %9.1f\n", "h3_matmul fp32 exact (BF16 widened)", 2122LL, (long long)N,
               (long long)K, ms, 2.0 * 2122 * N * K / (ms * 1e-3) / 1e12);
        h3_free(be, xf), h3_free(be, yf);
        h3_tensor_free(wt);
    }
    h3_free(be, x), h3_free(be, w);

attention:
    printf("\n# attention, 56 heads x 128, non-causal, FLOP = 4*S^2*56*128; baseline flash SDPA 591 TFLOP/s at S=19400\n");
    printf("%-34s %7s %10s %9s\n", "attention", "S", "ms", "TFLOP/s");
    int64_t Ss[] = {2122, 19400, 19540, 37966};
    double attn_ms[4] = {0, 0, 0, 0};
    const int H = 56, D = 128;
    int64_t maxS = 37966;
    uint16_t *qkv = h3_alloc(be, (size_t)(3 * maxS * H * D) * 2);
    float *out = h3_alloc(be, (size_t)(maxS * H * D) * 4);
    cuda_fill_random_bf16(be, qkv, 3 * maxS * H * D, 4, 2.0f);
    for (int i = 0; i < 4; i++) {
        if (quick && i > 1) continue;
        int64_t S = Ss[i];
        flash_arg a = {out, qkv, qkv + S * H * D, qkv + 2 * S * H * D, S, H, D};
        float ms = median_ms(run_flash, &a, S > 10000 ? 3 : 11);
        attn_ms[i] = ms;
        printf("%-34s %7lld %10.3f %9.1f\n", "flash bf16 (head-major bf16 in)", (long long)S, ms,
               4.0 * S * S * H * D / (ms * 1e-3) / 1e12);
        if (cuda_cudnn_attention_bf16(be, (uint16_t *)out, a.q, a.k, a.v, S, S, H, H, D, 0.088f) == 0) {
            float cms = median_ms(run_cudnn, &a, S > 10000 ? 3 : 11);
            if (cms < ms) attn_ms[i] = cms;
            printf("%-34s %7lld %10.3f %9.1f\n", "cuDNN SDPA bf16 (same inputs)", (long long)S, cms,
                   4.0 * S * S * H * D / (cms * 1e-3) / 1e12);
        } else {
            printf("%-34s %7lld   (no cuDNN engine)\n", "cuDNN SDPA bf16", (long long)S);
        }
    }
    for (int i = 0; i < 4; i++) { /* the DiT's call: strided heads of the fused qkv (vs packed copies) */
        if (quick && i > 1) continue;
        int64_t S = Ss[i];
        attn16_arg a = {(uint16_t *)out, qkv, S, H, D};
        for (int pack = 0; pack < 2; pack++) {
            setenv("H3_ATTN_STRIDED", pack ? "0" : "1", 1);
            float ms = median_ms(run_attn16, &a, S > 10000 ? 3 : 11);
            printf("%-34s %7lld %10.3f %9.1f\n", pack ? "h3_bf16_attention, packed copies" : "h3_bf16_attention, strided qkv",
                   (long long)S, ms, 4.0 * S * S * H * D / (ms * 1e-3) / 1e12);
        }
        unsetenv("H3_ATTN_STRIDED");
    }
    h3_free(be, qkv), h3_free(be, out);
    if (attn_only) goto done;
    {
        int64_t S = quick ? 2122 : 19400;
        float *qkvf = h3_alloc(be, (size_t)(3 * S * H * D) * 4), *of = h3_alloc(be, (size_t)(S * H * D) * 4);
        cuda_fill_random(be, qkvf, 3 * S * H * D, 5, 2.0f);
        attn_arg a = {of, qkvf, S, H, D, H3_BF16_OUT};
        float ms = median_ms(run_attn, &a, 3);
        printf("%-34s %7lld %10.3f %9.1f\n", "h3_attention fp32 rows [bf16]", (long long)S, ms,
               4.0 * S * S * H * D / (ms * 1e-3) / 1e12);
        a.S = 2122, a.flags = 0;
        ms = median_ms(run_attn, &a, 1);
        printf("%-34s %7lld %10.3f %9.1f\n", "h3_attention fp32 exact kernel", 2122LL, ms,
               4.0 * 2122 * 2122 * H * D / (ms * 1e-3) / 1e12);
        h3_free(be, qkvf), h3_free(be, of);
    }

    printf("\n# memory-bound ops on fp32 rows, S=37966 x 5376 (GB/s counts bytes read + written)\n");
    {
        int64_t rows = 37966, dim = 5376, n = rows * dim;
        float *xm = h3_alloc(be, (size_t)n * 4), *ym = h3_alloc(be, (size_t)n * 4), *wm = h3_alloc(be, (size_t)dim * 4);
        float *table = h3_alloc(be, (size_t)(3 * 6 * dim) * 4);
        int32_t *idx = h3_alloc(be, (size_t)rows * 4); /* zeros: every row reads table row 0 */
        cuda_fill_random(be, xm, n, 6, 3.0f);
        cuda_fill_random(be, wm, dim, 7, 1.0f);
        cuda_fill_random(be, table, 3 * 6 * dim, 8, 1.0f);
        const char *names[] = {"rmsnorm (+gain) [bf16]", "adaln_modulate [bf16]", "gated_residual [bf16]",
                               "device copy (ceiling)", "rmsnorm 128-wide rows (q/k) [bf16]"};
        double bytes[] = {8.0 * n, 8.0 * n, 12.0 * n, 8.0 * n, 8.0 * n};
        for (int op = 0; op < 5; op++) {
            mem_arg a = {xm, ym, wm, table, idx, rows, dim, op};
            float ms = median_ms(run_mem, &a, 5);
            printf("%-34s %10.3f ms %8.0f GB/s\n", names[op], ms, bytes[op] / (ms * 1e-3) / 1e9);
        }
        h3_free(be, xm), h3_free(be, ym), h3_free(be, wm), h3_free(be, table), h3_free(be, idx);
    }

    printf("\n# DiT forward floor from these kernels: 50 x (4 block GEMMs + attention), no element-wise ops\n");
    const char *cases[] = {"512x512x22 (S=2122)", "544x960x124 (S=19540)", "1344x768x124 (S=37966)"};
    double base[] = {0.170, 2.43, 6.51};
    int ai[] = {0, 2, 3};
    for (int i = 0; i < 3; i++) {
        if (quick && i > 0) continue;
        double s = 50.0 * (block_gemm_ms[i] + attn_ms[ai[i]]) / 1e3;
        printf("%-26s gemm+attention %.3f s  (diffusers BF16 forward %.2f s)\n", cases[i], s, base[i]);
    }
done:
    h3_sync(be);
    int rc = cuda_backend_check(be, &e);
    if (rc) fprintf(stderr, "bench_cuda_ops: %s\n", e.msg);
    h3_backend_free(be);
    return rc ? 1 : 0;
}
