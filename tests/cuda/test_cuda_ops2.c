/* The CUDA twins of backend_text.h (Qwen3-VL conditioner), backend_audio.h (audio VAE) and
 * backend_conv.h (video VAE encoder) against their CPU twins (built with CUDA=1 only: make CUDA=1
 * MEDIA=0 cuda-tests; run on a GPU machine). As tests/cuda/test_cuda_ops.c: fresh random inputs per
 * case, device outputs poisoned with NaN first (an unwritten element fails), relative L2 and max-abs
 * printed for every case. Tolerances: fp32 paths 1e-5 (GEMM-based: summation order differs) and
 * 1e-6 (element-wise and statistics: the twin's operation order; "bit" cases must be identical);
 * bf16 forms 1e-2. Last line: RESULT <passed> <failed>. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_data.h"
#include "backend/backend.h"
#include "backend/backend_audio.h"
#include "backend/backend_conv.h"
#include "backend/backend_text.h"
#include "backend/cuda/cuda_ops.h"
#include "core/dtype.h"
#include "core/tensor.h"

static h3_backend *cpu, *gpu;
static float *dev_f(const float *host, int64_t n) {
    float *d = h3_alloc(gpu, (size_t)n * sizeof(float));
    h3_upload(gpu, d, host, (size_t)n * sizeof(float));
    return d;
}

static float *dev_poison(int64_t n) {
    float *h = malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) h[i] = NAN;
    float *d = dev_f(h, n);
    free(h);
    return d;
}

/* the device buffer against the host reference (tests/test_data.h's compare; tol 0: bit-identical too) */
static void dev_compare(const char *name, const float *dev, const float *ref, int64_t n, double tol) {
    float *got = malloc((size_t)n * sizeof(float));
    h3_download(gpu, got, dev, (size_t)n * sizeof(float));
    compare(name, got, ref, n, tol);
    free(got);
}

/* ---- text (backend_text.h) ---- */

static void test_rmsnorm_qwen(int64_t rows, int64_t dim, int inplace, int flags, double tol) {
    char name[128];
    float *x = rand_host(rows * dim, 3.0f, flags), *w = rand_host(dim, 1.5f, flags);
    float *y = host_nan(rows * dim);
    float *dx = dev_f(x, rows * dim), *dw = dev_f(w, dim), *dy = inplace ? dx : dev_poison(rows * dim);
    if (inplace) {
        memcpy(y, x, (size_t)(rows * dim) * sizeof(float));
        h3_rmsnorm_qwen(cpu, y, y, rows, dim, w, 1e-6f, flags);
    } else {
        h3_rmsnorm_qwen(cpu, y, x, rows, dim, w, 1e-6f, flags);
    }
    h3_rmsnorm_qwen(gpu, dy, dx, rows, dim, dw, 1e-6f, flags);
    snprintf(name, sizeof name, "rmsnorm_qwen %lldx%lld%s%s", (long long)rows, (long long)dim,
             inplace ? " in place" : "", flags ? " [bf16]" : "");
    dev_compare(name, dy, y, rows * dim, tol);
    h3_free(gpu, dx), h3_free(gpu, dw);
    if (!inplace) h3_free(gpu, dy);
    free(x), free(w), free(y);
}

static void test_rows_add(int flags) {
    int64_t L = 90, dim = 1000, n = 33;
    int64_t rows[33];
    for (int64_t a = 0; a < n; a++) rows[a] = (a * 7 + 3) % L; /* distinct: 7 coprime to 90 */
    float *x = rand_host(L * dim, 2.0f, flags), *src = rand_host(n * dim, 1.0f, flags);
    float *dx = dev_f(x, L * dim), *ds = dev_f(src, n * dim);
    h3_rows_add(cpu, x, rows, src, n, dim, flags);
    h3_rows_add(gpu, dx, rows, ds, n, dim, flags);
    dev_compare(flags ? "rows_add 33 of 90 rows x 1000 [bf16]" : "rows_add 33 of 90 rows x 1000", dx, x, L * dim, 0.0);
    h3_free(gpu, dx), h3_free(gpu, ds);
    free(x), free(src);
}

/* q/k/v as column slices of wider rows (strides), like the fused qkv buffer of the vision tower */
static void test_attention_eager(const char *name, int64_t S, int Hq, int Hkv, int D, int causal, float amp,
                                 double tol) {
    int64_t qs = (int64_t)Hq * D + 8, ks = (int64_t)Hkv * D + 24, os = (int64_t)Hq * D + 16;
    float *q = rand_host(S * qs, amp, 1), *k = rand_host(S * ks, amp, 1), *v = rand_host(S * ks, 1.0f, 1);
    float *o = malloc((size_t)(S * os) * sizeof(float));
    for (int64_t i = 0; i < S * os; i++) o[i] = 0.0f;
    float scale = 1.0f / sqrtf((float)D);
    h3_attention_eager(cpu, o, os, q + 4, qs, k + 8, ks, v + 16, ks, S, S, Hq, Hkv, D, scale, causal, H3_BF16_OUT);
    float *dq = dev_f(q, S * qs), *dk = dev_f(k, S * ks), *dv = dev_f(v, S * ks);
    float *poison = malloc((size_t)(S * os) * sizeof(float));
    for (int64_t r = 0; r < S; r++)
        for (int64_t c = 0; c < os; c++) poison[r * os + c] = c < (int64_t)Hq * D ? NAN : 0.0f;
    float *dout = dev_f(poison, S * os);
    h3_attention_eager(gpu, dout, os, dq + 4, qs, dk + 8, ks, dv + 16, ks, S, S, Hq, Hkv, D, scale, causal,
                       H3_BF16_OUT);
    dev_compare(name, dout, o, S * os, tol);
    h3_free(gpu, dq), h3_free(gpu, dk), h3_free(gpu, dv), h3_free(gpu, dout);
    free(q), free(k), free(v), free(o), free(poison);
}

/* ---- audio (backend_audio.h) ---- */

static void test_conv1d(int B, int Cin, int64_t L, int Cout, int K, int stride, int pad, int dil, int bias) {
    char name[128];
    int64_t Lout = h3_conv1d_out_len(L, K, stride, pad, dil);
    float *x = rand_host((int64_t)B * Cin * L, 1.0f, 0), *w = rand_host((int64_t)Cout * Cin * K, 1.0f / sqrtf((float)(Cin * K)), 0);
    float *b = rand_host(Cout, 0.5f, 0), *y = host_nan((int64_t)B * Cout * Lout);
    float *dx = dev_f(x, (int64_t)B * Cin * L), *dw = dev_f(w, (int64_t)Cout * Cin * K), *db = dev_f(b, Cout);
    float *dy = dev_poison((int64_t)B * Cout * Lout);
    h3_conv1d(cpu, y, x, B, Cin, L, w, bias ? b : NULL, Cout, K, stride, pad, dil);
    h3_conv1d(gpu, dy, dx, B, Cin, L, dw, bias ? db : NULL, Cout, K, stride, pad, dil);
    snprintf(name, sizeof name, "conv1d B%d %d->%d L%lld K%d s%d p%d d%d%s", B, Cin, Cout, (long long)L, K, stride, pad,
             dil, bias ? " +bias" : "");
    dev_compare(name, dy, y, (int64_t)B * Cout * Lout, 1e-5);
    h3_free(gpu, dx), h3_free(gpu, dw), h3_free(gpu, db), h3_free(gpu, dy);
    free(x), free(w), free(b), free(y);
}

static void test_conv_transpose1d(int B, int Cin, int64_t L, int Cout, int K, int stride, int pad, int bias) {
    char name[128];
    int64_t Lout = (L - 1) * stride - 2 * (int64_t)pad + K;
    float *x = rand_host((int64_t)B * Cin * L, 1.0f, 0), *w = rand_host((int64_t)Cin * Cout * K, 1.0f / sqrtf((float)Cin), 0);
    float *b = rand_host(Cout, 0.5f, 0), *y = host_nan((int64_t)B * Cout * Lout);
    float *dx = dev_f(x, (int64_t)B * Cin * L), *dw = dev_f(w, (int64_t)Cin * Cout * K), *db = dev_f(b, Cout);
    float *dy = dev_poison((int64_t)B * Cout * Lout);
    h3_conv_transpose1d(cpu, y, x, B, Cin, L, w, bias ? b : NULL, Cout, K, stride, pad);
    h3_conv_transpose1d(gpu, dy, dx, B, Cin, L, dw, bias ? db : NULL, Cout, K, stride, pad);
    snprintf(name, sizeof name, "conv_transpose1d B%d %d->%d L%lld K%d s%d p%d%s", B, Cin, Cout, (long long)L, K, stride,
             pad, bias ? " +bias" : "");
    dev_compare(name, dy, y, (int64_t)B * Cout * Lout, 1e-5);
    h3_free(gpu, dx), h3_free(gpu, dw), h3_free(gpu, db), h3_free(gpu, dy);
    free(x), free(w), free(b), free(y);
}

/* Snake1d (freq = alpha, inv = 1/(alpha+1e-9)) or SnakeBeta-like parameters */
static void snake_params(int C, float **freq, float **inv) {
    *freq = malloc((size_t)C * sizeof(float));
    *inv = malloc((size_t)C * sizeof(float));
    for (int c = 0; c < C; c++) {
        float a = 0.2f + 1.5f * (frand() + 1.0f);
        (*freq)[c] = a;
        (*inv)[c] = 1.0f / (a + 1e-9f);
    }
}

static void test_snake(int B, int C, int64_t L, int alias_free) {
    char name[128];
    int64_t n = (int64_t)B * C * L;
    float *x = rand_host(n, 3.0f, 0), *freq, *inv, *y = host_nan(n);
    snake_params(C, &freq, &inv);
    float filt[H3_AF_TAPS];
    float fs = 0.0f;
    for (int k = 0; k < H3_AF_TAPS; k++) filt[k] = 0.5f + 0.4f * frand(), fs += filt[k];
    for (int k = 0; k < H3_AF_TAPS; k++) filt[k] /= fs;
    float *dx = dev_f(x, n), *df = dev_f(freq, C), *di = dev_f(inv, C), *dfl = dev_f(filt, H3_AF_TAPS);
    float *dy = dev_poison(n);
    if (alias_free) {
        float *fl = malloc(sizeof filt); /* the twin reads the filter from backend (host) memory */
        memcpy(fl, filt, sizeof filt);
        h3_snake_alias_free(cpu, y, x, B, C, L, freq, inv, fl);
        h3_snake_alias_free(gpu, dy, dx, B, C, L, df, di, dfl);
        free(fl);
    } else {
        h3_snake(cpu, y, x, B, C, L, freq, inv);
        h3_snake(gpu, dy, dx, B, C, L, df, di);
    }
    snprintf(name, sizeof name, "%s B%d C%d L%lld", alias_free ? "snake_alias_free" : "snake", B, C, (long long)L);
    dev_compare(name, dy, y, n, 1e-6);
    if (!alias_free) { /* in place */
        h3_snake(cpu, x, x, B, C, L, freq, inv);
        h3_snake(gpu, dx, dx, B, C, L, df, di);
        dev_compare("snake in place", dx, x, n, 1e-6);
    }
    h3_free(gpu, dx), h3_free(gpu, df), h3_free(gpu, di), h3_free(gpu, dfl), h3_free(gpu, dy);
    free(x), free(freq), free(inv), free(y);
}

static void test_audio_small(void) {
    int64_t n = 1000003;
    float *x = rand_host(n, 2.0f, 0), *y = host_nan(n);
    float *dx = dev_f(x, n), *dy = dev_poison(n);
    h3_clamp(cpu, y, x, -1.0f, 1.0f, n), h3_clamp(gpu, dy, dx, -1.0f, 1.0f, n);
    dev_compare("clamp [-1, 1] n=1000003", dy, y, n, 0.0);
    h3_div_scalar(cpu, y, x, 3.0f, n), h3_div_scalar(gpu, dy, dx, 3.0f, n);
    dev_compare("div_scalar /3 n=1000003", dy, y, n, 0.0);
    h3_div_scalar(cpu, x, x, 7.0f, n), h3_div_scalar(gpu, dx, dx, 7.0f, n);
    dev_compare("div_scalar /7 in place", dx, x, n, 0.0);
    h3_free(gpu, dx), h3_free(gpu, dy);
    free(x), free(y);

    int B = 2;
    int64_t R = 130, C = 77;
    int64_t nt = B * R * C > 2048 * 46 ? B * R * C : 2048 * 46;
    float *t = rand_host(nt, 1.0f, 0), *ty = host_nan(nt);
    float *dt = dev_f(t, nt), *dty = dev_poison(nt);
    h3_transpose_last2(cpu, ty, t, B, R, C), h3_transpose_last2(gpu, dty, dt, B, R, C);
    dev_compare("transpose_last2 B2 130x77", dty, ty, B * R * C, 0.0);
    h3_transpose_last2(cpu, ty, t, 1, 2048, 46), h3_transpose_last2(gpu, dty, dt, 1, 2048, 46);
    dev_compare("transpose_last2 B1 2048x46", dty, ty, 2048 * 46, 0.0);
    h3_free(gpu, dt), h3_free(gpu, dty);
    free(t), free(ty);

    struct { int64_t rows; int H, hd, O; } pc[] = {{50, 8, 256, 32}, {37, 8, 100, 32}, {9, 3, 20, 7}};
    for (int i = 0; i < 3; i++) {
        int64_t rows = pc[i].rows, nx = rows * pc[i].H * pc[i].hd, ny = rows * pc[i].O;
        float *hx = rand_host(nx, 1.0f, 0), *hy = host_nan(ny);
        float *dhx = dev_f(hx, nx), *dhy = dev_poison(ny);
        h3_head_mean_pool(cpu, hy, hx, rows, pc[i].H, pc[i].hd, pc[i].O);
        h3_head_mean_pool(gpu, dhy, dhx, rows, pc[i].H, pc[i].hd, pc[i].O);
        char name[96];
        snprintf(name, sizeof name, "head_mean_pool %lld rows H%d hd%d -> %d", (long long)rows, pc[i].H, pc[i].hd,
                 pc[i].O);
        dev_compare(name, dhy, hy, ny, 0.0);
        h3_free(gpu, dhx), h3_free(gpu, dhy);
        free(hx), free(hy);
    }
}

/* ---- video VAE encoder (backend_conv.h) ---- */

static void test_conv3d(const char *label, h3_conv3d_geom g, int bias) {
    char name[160];
    h3_err e;
    int64_t to, ho, wo;
    if (h3_conv3d_check(&g, &to, &ho, &wo, label, &e) != 0) {
        CHECK(0, "%s", e.msg);
        return;
    }
    int64_t nx = g.cin * g.tin * g.hin * g.win, ny = g.cout * to * ho * wo, nw = g.cout * g.cin * g.kt * g.kh * g.kw;
    float *x = rand_host(nx, 1.0f, 0), *w = rand_host(nw, 1.0f / sqrtf((float)(nw / g.cout)), 0);
    float *b = rand_host(g.cout, 0.5f, 0), *y = host_nan(ny);
    float *dx = dev_f(x, nx), *dw = dev_f(w, nw), *db = dev_f(b, g.cout), *dy = dev_poison(ny);
    h3_conv3d(cpu, y, x, &g, w, bias ? b : NULL);
    h3_conv3d(gpu, dy, dx, &g, dw, bias ? db : NULL);
    snprintf(name, sizeof name, "conv3d %s %lld->%lld %lldx%lldx%lld -> %lldx%lldx%lld", label, (long long)g.cin,
             (long long)g.cout, (long long)g.tin, (long long)g.hin, (long long)g.win, (long long)to, (long long)ho,
             (long long)wo);
    dev_compare(name, dy, y, ny, 1e-5);
    h3_free(gpu, dx), h3_free(gpu, dw), h3_free(gpu, db), h3_free(gpu, dy);
    free(x), free(w), free(b), free(y);
}

static void test_groupnorm_frames(int64_t C, int64_t T, int64_t HW, int groups, int affine, int silu, int inplace) {
    char name[128];
    int64_t n = C * T * HW;
    float *x = rand_host(n, 2.0f, 0), *w = rand_host(C, 1.0f, 0), *b = rand_host(C, 1.0f, 0), *y = host_nan(n);
    for (int64_t i = 0; i < n; i++) x[i] += 0.7f; /* a non-zero mean */
    float *dx = dev_f(x, n), *dw = dev_f(w, C), *db = dev_f(b, C), *dy = inplace ? dx : dev_poison(n);
    h3_groupnorm_frames(cpu, inplace ? x : y, x, C, T, HW, groups, affine ? w : NULL, affine ? b : NULL, 1e-6f, silu);
    h3_groupnorm_frames(gpu, dy, dx, C, T, HW, groups, affine ? dw : NULL, affine ? db : NULL, 1e-6f, silu);
    snprintf(name, sizeof name, "groupnorm_frames C%lld T%lld HW%lld g%d%s%s%s", (long long)C, (long long)T,
             (long long)HW, groups, affine ? " w+b" : "", silu ? " silu" : "", inplace ? " in place" : "");
    dev_compare(name, dy, inplace ? x : y, n, 1e-6);
    h3_free(gpu, dw), h3_free(gpu, db), h3_free(gpu, dx);
    if (!inplace) h3_free(gpu, dy);
    free(x), free(w), free(b), free(y);
}

/* ---- timings at release shapes (GPU only, device-side random inputs; not checks) ---- */

static float *dev_rand(int64_t n, uint64_t seed, float scale) {
    float *d = h3_alloc(gpu, (size_t)n * sizeof(float));
    if (d) cuda_fill_random(gpu, d, n, seed, scale);
    return d;
}

#define TIME_MS(ms, reps, call)                                                       \
    do {                                                                              \
        call;                                                                         \
        h3_sync(gpu);                                                                 \
        cuda_mark(gpu, 0);                                                            \
        for (int r_ = 0; r_ < (reps); r_++) call;                                     \
        cuda_mark(gpu, 1);                                                            \
        ms = cuda_elapsed_ms(gpu) / (reps);                                           \
    } while (0)

static void bench_conv3d(const char *label, h3_conv3d_geom g) {
    int64_t to, ho, wo;
    if (h3_conv3d_check(&g, &to, &ho, &wo, label, NULL)) return;
    int64_t nx = g.cin * g.tin * g.hin * g.win, ny = g.cout * to * ho * wo, K = g.cin * g.kt * g.kh * g.kw;
    float *x = dev_rand(nx, 1, 1.0f), *w = dev_rand(g.cout * K, 2, 0.02f), *b = dev_rand(g.cout, 3, 0.1f);
    float *y = h3_alloc(gpu, (size_t)ny * sizeof(float));
    float ms;
    TIME_MS(ms, 3, h3_conv3d(gpu, y, x, &g, w, b));
    double fl = 2.0 * (double)g.cout * (double)K * (double)(to * ho * wo);
    printf("  bench conv3d %-40s %8.3f ms  %6.1f TFLOP/s\n", label, ms, fl / (ms * 1e-3) / 1e12);
    h3_free(gpu, x), h3_free(gpu, w), h3_free(gpu, b), h3_free(gpu, y);
}

static void run_bench(void) {
    printf("timings (release shapes, GPU only)\n");
    bench_conv3d("128->128 k3 1x544x960 (level 0)", (h3_conv3d_geom){128, 1, 544, 960, 128, 3, 3, 3, 1, 1, 1, 2, 1, 1, 1, 1, H3_PAD_REFLECT});
    bench_conv3d("256->256 k3 9x272x480 (level 1)", (h3_conv3d_geom){256, 9, 272, 480, 256, 3, 3, 3, 1, 1, 1, 2, 1, 1, 1, 1, H3_PAD_REFLECT});
    bench_conv3d("3->128 k3 1x544x960 (conv_in)", (h3_conv3d_geom){3, 1, 544, 960, 128, 3, 3, 3, 1, 1, 1, 2, 1, 1, 1, 1, H3_PAD_REFLECT});
    {
        int64_t C = 128, T = 5, HW = 544 * 960;
        float *x = dev_rand(C * T * HW, 4, 2.0f), *w = dev_rand(C, 5, 1.0f), *b = dev_rand(C, 6, 1.0f), ms;
        TIME_MS(ms, 3, h3_groupnorm_frames(gpu, x, x, C, T, HW, 32, w, b, 1e-6f, 1));
        printf("  bench groupnorm_frames C128 T5 544x960 silu in place   %8.3f ms  %6.0f GB/s\n", ms,
               8.0 * (double)(C * T * HW) * 1.5 / (ms * 1e-3) / 1e9);
        h3_free(gpu, x), h3_free(gpu, w), h3_free(gpu, b);
    }
    {
        int B = 2, C = 512;
        int64_t L = 5175;
        float *x = dev_rand((int64_t)B * C * L, 7, 1.0f), *w = dev_rand((int64_t)C * C * 11, 8, 0.01f);
        float *b = dev_rand(C, 9, 0.1f), *y = h3_alloc(gpu, (size_t)((int64_t)B * C * L) * sizeof(float)), ms;
        TIME_MS(ms, 3, h3_conv1d(gpu, y, x, B, C, L, w, b, C, 11, 1, 25, 5));
        printf("  bench conv1d B2 512->512 K11 d5 L5175                  %8.3f ms  %6.1f TFLOP/s\n", ms,
               2.0 * B * C * C * 11.0 * L / (ms * 1e-3) / 1e12);
        float *fr = dev_rand(C, 10, 1.0f), *iv = dev_rand(C, 11, 1.0f), *fl = dev_rand(H3_AF_TAPS, 12, 0.1f);
        TIME_MS(ms, 3, h3_snake_alias_free(gpu, y, x, B, C, L, fr, iv, fl));
        printf("  bench snake_alias_free B2 C512 L5175                   %8.3f ms\n", ms);
        float *xt = dev_rand((int64_t)B * 1024 * 207, 13, 1.0f), *wt = dev_rand((int64_t)1024 * 512 * 9, 14, 0.01f);
        TIME_MS(ms, 3, h3_conv_transpose1d(gpu, y, xt, B, 1024, 207, wt, b, 512, 9, 5, 2));
        printf("  bench conv_transpose1d B2 1024->512 K9 s5 L207         %8.3f ms\n", ms);
        h3_free(gpu, x), h3_free(gpu, w), h3_free(gpu, b), h3_free(gpu, y), h3_free(gpu, fr), h3_free(gpu, iv);
        h3_free(gpu, fl), h3_free(gpu, xt), h3_free(gpu, wt);
    }
    {
        int64_t S = 1000;
        int Hq = 32, Hkv = 8, D = 128;
        float *q = dev_rand(S * Hq * D, 15, 1.0f), *k = dev_rand(S * Hkv * D, 16, 1.0f), *v = dev_rand(S * Hkv * D, 17, 1.0f);
        float *o = h3_alloc(gpu, (size_t)(S * Hq * D) * sizeof(float)), ms;
        TIME_MS(ms, 3, h3_attention_eager(gpu, o, Hq * D, q, Hq * D, k, Hkv * D, v, Hkv * D, S, S, Hq, Hkv, D, 0.088f, 1, H3_BF16_OUT));
        printf("  bench attention_eager [bf16] causal S1000 32/8 x 128    %8.3f ms\n", ms);
        TIME_MS(ms, 3, h3_rmsnorm_qwen(gpu, q, q, S * Hq, D, v, 1e-6f, H3_BF16_OUT));
        printf("  bench rmsnorm_qwen [bf16] 32000 x 128 in place         %8.3f ms\n", ms);
        TIME_MS(ms, 3, h3_rmsnorm_qwen(gpu, o, q, S, 4096, v, 1e-6f, H3_BF16_OUT));
        printf("  bench rmsnorm_qwen [bf16] 1000 x 4096                  %8.3f ms\n", ms);
        h3_free(gpu, q), h3_free(gpu, k), h3_free(gpu, v), h3_free(gpu, o);
    }
    {
        int64_t S = 4096;
        int H = 16, D = 72;
        float *qkv = dev_rand(S * 3 * H * D, 18, 1.0f), *o = h3_alloc(gpu, (size_t)(S * H * D) * sizeof(float)), ms;
        TIME_MS(ms, 2, h3_attention_eager(gpu, o, H * D, qkv, 3 * H * D, qkv + H * D, 3 * H * D, qkv + 2 * H * D, 3 * H * D, S,
                                          S, H, H, D, 0.118f, 0, H3_BF16_OUT));
        printf("  bench attention_eager [bf16] S4096 16 x 72 (vision)     %8.3f ms\n", ms);
        h3_free(gpu, qkv), h3_free(gpu, o);
    }
}

int main(void) {
    h3_err e;
    setvbuf(stdout, NULL, _IOLBF, 0); /* a crash keeps the lines before it */
    /* H3_TEST_GPU_AS_CPU=1: the "device" is a second CPU backend (checks the harness itself, e.g.
     * under ASan on a machine without a GPU; the timings are skipped) */
    const char *as_cpu = getenv("H3_TEST_GPU_AS_CPU");
    int self_check = as_cpu && as_cpu[0] == '1';
    test_seed(0x9E3779B97F4A7C15ull);
    cpu = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    gpu = h3_backend_new(self_check ? H3_BACKEND_CPU : H3_BACKEND_CUDA, 0, &e);
    if (!gpu) {
        fprintf(stderr, "test_cuda_ops2: %s\n", e.msg);
        CHECK(0, "no CUDA backend");
        TEST_END();
    }
    CHECK(h3_audio_supported(gpu), "h3_audio_supported(cuda)");
    CHECK(h3_conv_supported(gpu), "h3_conv_supported(cuda)");

    printf("text encoder ops (backend_text.h)\n");
    test_rmsnorm_qwen(37, 4096, 0, 0, 0.0);
    test_rmsnorm_qwen(37, 4096, 0, H3_BF16_OUT, 0.0);
    test_rmsnorm_qwen(2000, 128, 1, 0, 0.0);
    test_rmsnorm_qwen(2000, 128, 1, H3_BF16_OUT, 0.0);
    test_rmsnorm_qwen(5, 1001, 0, 0, 0.0);
    test_rows_add(0);
    test_rows_add(H3_BF16_OUT);
    test_attention_eager("attention_eager [bf16] causal S300 Hq8 Hkv2 D128 (text)", 300, 8, 2, 128, 1, 2.0f, 1e-2);
    test_attention_eager("attention_eager [bf16] causal S77 Hq4 Hkv1 D64", 77, 4, 1, 64, 1, 3.0f, 1e-2);
    test_attention_eager("attention_eager [bf16] S500 H4 D72 (vision)", 500, 4, 4, 72, 0, 2.0f, 1e-2);
    test_attention_eager("attention_eager [bf16] S2100 H16 D72 (2 query blocks)", 2100, 16, 16, 72, 0, 2.0f, 1e-2);

    printf("audio VAE ops (backend_audio.h)\n");
    test_conv1d(2, 64, 1000, 48, 7, 1, 9, 3, 1);
    test_conv1d(2, 32, 777, 40, 1, 1, 0, 1, 1);      /* 1x1: x read directly */
    test_conv1d(2, 64, 1000, 128, 8, 4, 2, 1, 1);    /* strided downsample */
    test_conv1d(2, 512, 600, 512, 11, 1, 25, 5, 1);  /* large channel counts */
    test_conv1d(1, 256, 8000, 32, 11, 1, 5, 1, 0);   /* several im2col tiles */
    test_conv1d(2, 8, 5, 1, 7, 1, 3, 1, 1);          /* short, one output channel */
    test_conv_transpose1d(2, 64, 300, 32, 9, 5, 2, 1);
    test_conv_transpose1d(2, 16, 5000, 8, 4, 2, 1, 1);
    test_conv_transpose1d(2, 128, 2000, 256, 10, 5, 3, 1); /* 3 tiles of the twin's tiling */
    test_conv_transpose1d(1, 40, 17, 24, 9, 5, 2, 0);
    test_snake(2, 48, 3001, 0);
    test_snake(2, 20, 1234, 1);
    test_snake(2, 5, 7, 1);
    test_snake(1, 3, 1, 1);
    test_snake(2, 64, 70001, 1);
    test_audio_small();

    printf("video VAE encoder ops (backend_conv.h)\n");
    test_conv3d("k3 causal reflect", (h3_conv3d_geom){8, 5, 20, 24, 16, 3, 3, 3, 1, 1, 1, 2, 1, 1, 1, 1, H3_PAD_REFLECT}, 1);
    test_conv3d("k3 causal zero", (h3_conv3d_geom){3, 1, 33, 17, 12, 3, 3, 3, 1, 1, 1, 2, 1, 1, 1, 1, H3_PAD_ZERO}, 1);
    test_conv3d("k3 down s(2,2,2) pad b/r", (h3_conv3d_geom){16, 9, 20, 22, 16, 3, 3, 3, 2, 2, 2, 2, 0, 1, 0, 1, H3_PAD_REFLECT}, 1);
    test_conv3d("k3 down s(1,2,2)", (h3_conv3d_geom){16, 3, 16, 16, 32, 3, 3, 3, 1, 2, 2, 2, 0, 1, 0, 1, H3_PAD_REFLECT}, 0);
    test_conv3d("pointwise", (h3_conv3d_geom){32, 4, 15, 13, 24, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, H3_PAD_ZERO}, 1);
    test_conv3d("k3 tiled (3 im2col tiles)", (h3_conv3d_geom){64, 1, 224, 224, 64, 3, 3, 3, 1, 1, 1, 2, 1, 1, 1, 1, H3_PAD_REFLECT}, 1);
    test_groupnorm_frames(64, 3, 20000, 32, 1, 1, 0);
    test_groupnorm_frames(64, 3, 20000, 32, 1, 0, 1);
    test_groupnorm_frames(128, 5, 700, 32, 0, 1, 1);
    test_groupnorm_frames(24, 1, 9, 4, 1, 1, 0);

    h3_sync(gpu);
    int bad = h3_backend_check(gpu, &e);
    CHECK(bad == 0, "CUDA error during the tests: %s", e.msg);
    if (!bad && !self_check) run_bench();
    h3_sync(gpu);
    bad = h3_backend_check(gpu, &e);
    CHECK(bad == 0, "CUDA error during the timings: %s", e.msg);
    h3_backend_free(gpu);
    h3_backend_free(cpu);
    TEST_END();
}
