/* cuda_flash_sm90 (the wgmma flash-attention kernel, cuda_flash_sm90.cu) against the CPU twin and the own
 * mma.sync flash kernel. Built with CUDA=1 only (make CUDA=1 MEDIA=0 cuda-tests); runs on an H100/H200.
 *
 *   test_flash_sm90 [quick|big] [v0,2,..]   correctness: the kernel variants (all, or the listed ones) on
 *                             every case (quick: without the S = 19540 cases, big: those only); last line
 *                             RESULT <pass> <fail>
 *   test_flash_sm90 bench [v0,2,..]  TFLOP/s (4*Sq*Skv*D*H / median time) at S = 2122, 19540, 37966, 56 heads x 128,
 *                             next to cuDNN's fused SDPA and the own kernel, in the same process
 *
 * Correctness: fresh random bf16 inputs (not zeros), scattered into the case's device layout (plain
 * [S][H*128] rows, the fused qkv GEMM output [S][3*7168] with q/k/v at column 0/7168/14336, or the
 * checkpoint's per-head interleave with head stride 384); the output (bf16, optionally padded rows) is
 * poisoned with NaN and the padding with a sentinel before every run. References: cpu_attention (h3_attention
 * on the CPU backend, fp32 on the bf16 inputs, P kept in fp32) on all rows and heads, or on a subset of
 * heads and rows for the large cases; the own kernel (cuda_flash_attention_bf16 on head-major copies) on
 * everything. Tolerance: relative L2 1e-2 for both. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "backend/backend.h"
#include "backend/cuda/cuda_ops.h"
#include "core/dtype.h"
#include "core/tensor.h"

enum { D = 128 };
enum { L_PLAIN = 0, L_FUSED = 1, L_INTERLEAVE = 2 };

static h3_backend *cpu, *gpu;
static int var_on[16]; /* variants to run */
static uint64_t rng = 0x9E3779B97F4A7C15ull;

static float frand(void) { /* uniform [-1, 1) */
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (float)((rng * 0x2545F4914F6CDD1Dull) >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

static uint16_t bits_of(float bf16_value) {
    uint32_t u;
    memcpy(&u, &bf16_value, 4);
    return (uint16_t)(u >> 16);
}
static float of_bits(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

typedef struct {
    const char *name;
    int64_t     Sq, Skv;
    int         Hq, Hkv, layout, o_pad;
    float       amp;
    int         cpu_heads;  /* 0: all heads and rows against the CPU twin; else this many heads ... */
    int64_t     cpu_rows;   /* ... on the first and last cpu_rows query rows */
} tcase;

static void run_case(const tcase *c) {
    int64_t Sq = c->Sq, Skv = c->Skv;
    int Hq = c->Hq, Hkv = c->Hkv, g = Hq / Hkv;
    int64_t qw = (int64_t)Hq * D, kw = (int64_t)Hkv * D;
    float scale = 1.0f / sqrtf((float)D);
    printf("%s: Sq %lld Skv %lld Hq %d Hkv %d layout %s%s\n", c->name, (long long)Sq, (long long)Skv, Hq, Hkv,
           c->layout == L_PLAIN ? "plain [S][H*128]" : c->layout == L_FUSED ? "fused qkv [S][3*H*128]" : "interleaved (head stride 384)",
           c->o_pad ? ", padded output rows" : "");

    /* logical inputs, bf16 values in fp32: q [Sq][Hq*D], k/v [Skv][Hkv*D] */
    float *q = malloc((size_t)(Sq * qw) * 4), *k = malloc((size_t)(Skv * kw) * 4), *v = malloc((size_t)(Skv * kw) * 4);
    for (int64_t i = 0; i < Sq * qw; i++) q[i] = h3_round_bf16(frand() * c->amp);
    for (int64_t i = 0; i < Skv * kw; i++) k[i] = h3_round_bf16(frand() * c->amp);
    for (int64_t i = 0; i < Skv * kw; i++) v[i] = h3_round_bf16(frand());

    /* device layout */
    int64_t q_rs, q_hs, k_rs, k_hs, v_rs, v_hs, qoff, koff, voff, nbuf;
    if (c->layout == L_PLAIN) {
        q_rs = qw, k_rs = v_rs = kw, q_hs = k_hs = v_hs = D;
        qoff = 0, koff = Sq * qw, voff = koff + Skv * kw, nbuf = voff + Skv * kw;
    } else { /* self-attention only: Sq == Skv, Hq == Hkv */
        q_rs = k_rs = v_rs = 3 * qw;
        if (c->layout == L_FUSED) q_hs = k_hs = v_hs = D, qoff = 0, koff = qw, voff = 2 * qw;
        else q_hs = k_hs = v_hs = 3 * D, qoff = 0, koff = D, voff = 2 * D;
        nbuf = Sq * 3 * qw;
    }
    uint16_t *hb = calloc((size_t)nbuf, 2);
    for (int64_t s = 0; s < Sq; s++)
        for (int h = 0; h < Hq; h++)
            for (int d = 0; d < D; d++) hb[qoff + s * q_rs + h * q_hs + d] = bits_of(q[s * qw + h * D + d]);
    for (int64_t s = 0; s < Skv; s++)
        for (int h = 0; h < Hkv; h++)
            for (int d = 0; d < D; d++) {
                hb[koff + s * k_rs + h * k_hs + d] = bits_of(k[s * kw + h * D + d]);
                hb[voff + s * v_rs + h * v_hs + d] = bits_of(v[s * kw + h * D + d]);
            }
    uint16_t *dbuf = h3_alloc(gpu, (size_t)nbuf * 2);
    h3_upload(gpu, dbuf, hb, (size_t)nbuf * 2);

    /* head-major copies for the own kernel */
    uint16_t *hm = malloc((size_t)(Sq * qw + 2 * Skv * kw) * 2);
    for (int h = 0; h < Hq; h++)
        for (int64_t s = 0; s < Sq; s++)
            for (int d = 0; d < D; d++) hm[((int64_t)h * Sq + s) * D + d] = bits_of(q[s * qw + h * D + d]);
    uint16_t *hmk = hm + Sq * qw, *hmv = hmk + Skv * kw;
    for (int h = 0; h < Hkv; h++)
        for (int64_t s = 0; s < Skv; s++)
            for (int d = 0; d < D; d++) {
                hmk[((int64_t)h * Skv + s) * D + d] = bits_of(k[s * kw + h * D + d]);
                hmv[((int64_t)h * Skv + s) * D + d] = bits_of(v[s * kw + h * D + d]);
            }
    uint16_t *dhm = h3_alloc(gpu, (size_t)(Sq * qw + 2 * Skv * kw) * 2);
    h3_upload(gpu, dhm, hm, (size_t)(Sq * qw + 2 * Skv * kw) * 2);
    float *down = h3_alloc(gpu, (size_t)(Sq * qw) * 4);
    cuda_flash_attention_bf16(gpu, down, qw, dhm, dhm + Sq * qw, dhm + Sq * qw + Skv * kw, Sq, Skv, Hq, Hkv, D, scale, 0, 1);
    float *own = malloc((size_t)(Sq * qw) * 4);
    h3_download(gpu, own, down, (size_t)(Sq * qw) * 4);

    /* CPU twin (fp32) on the checked heads / rows; mask marks the checked elements */
    float *ref = calloc((size_t)(Sq * qw), 4);
    unsigned char *chk = calloc((size_t)(Sq * qw), 1);
    if (!c->cpu_heads) {
        h3_attention(cpu, ref, qw, q, qw, k, kw, v, kw, Sq, Skv, Hq, Hkv, D, scale, 0, 0);
        memset(chk, 1, (size_t)(Sq * qw));
    } else {
        for (int i = 0; i < c->cpu_heads; i++) {
            int h = c->cpu_heads == 1 ? 0 : (int)((int64_t)i * (Hq - 1) / (c->cpu_heads - 1));
            for (int part = 0; part < 2; part++) {
                int64_t r0 = part ? Sq - c->cpu_rows : 0, nr = c->cpu_rows;
                if (r0 < 0) r0 = 0;
                h3_attention(cpu, ref + r0 * qw + h * D, qw, q + r0 * qw + h * D, qw, k + (h / g) * D, kw,
                             v + (h / g) * D, kw, nr, Skv, 1, 1, D, scale, 0, 0);
                for (int64_t r = r0; r < r0 + nr; r++) memset(chk + r * qw + h * D, 1, D);
            }
        }
    }
    int64_t nchk = 0;
    for (int64_t i = 0; i < Sq * qw; i++) nchk += chk[i];
    float *ra = malloc((size_t)nchk * 4), *rb = malloc((size_t)nchk * 4);
    {
        int64_t j = 0;
        for (int64_t i = 0; i < Sq * qw; i++)
            if (chk[i]) ra[j] = own[i], rb[j] = ref[i], j++;
        printf("  own kernel vs CPU twin (%lld elements)              rel_l2 %.3e max_abs %.3e\n", (long long)nchk,
               h3_rel_l2(ra, rb, (size_t)nchk), h3_max_abs(ra, rb, (size_t)nchk));
    }

    /* the sm90 kernel, every variant */
    int64_t o_rs = qw + c->o_pad;
    uint16_t *hout = malloc((size_t)(Sq * o_rs) * 2), *poison = malloc((size_t)(Sq * o_rs) * 2);
    for (int64_t r = 0; r < Sq; r++)
        for (int64_t cc = 0; cc < o_rs; cc++) poison[r * o_rs + cc] = cc < qw ? 0x7FC0 : 0x1234; /* NaN / sentinel */
    uint16_t *dout = h3_alloc(gpu, (size_t)(Sq * o_rs) * 2);
    float *got = malloc((size_t)(Sq * qw) * 4);
    char name[160];
    for (int var = 0; var < cuda_flash_sm90_variants(); var++) {
        if (!var_on[var]) continue;
        cuda_flash_sm90_set_variant(gpu, var);
        h3_upload(gpu, dout, poison, (size_t)(Sq * o_rs) * 2);
        int rc = cuda_flash_sm90(gpu, dout, o_rs, D, dbuf + qoff, q_rs, q_hs, dbuf + koff, k_rs, k_hs, dbuf + voff, v_rs,
                                 v_hs, Sq, Skv, Hq, Hkv, D, scale);
        h3_sync(gpu);
        h3_err e;
        int bad = cuda_backend_check(gpu, &e);
        snprintf(name, sizeof name, "%s v%d runs", c->name, var);
        CHECK(rc == 0 && bad == 0, "%s: rc %d, cuda error %s", name, rc, bad ? e.msg : "none");
        if (rc != 0 || bad) continue;
        h3_download(gpu, hout, dout, (size_t)(Sq * o_rs) * 2);
        int64_t pad_bad = 0;
        for (int64_t r = 0; r < Sq; r++) {
            for (int64_t cc = 0; cc < qw; cc++) got[r * qw + cc] = of_bits(hout[r * o_rs + cc]);
            for (int64_t cc = qw; cc < o_rs; cc++) pad_bad += hout[r * o_rs + cc] != 0x1234;
        }
        int64_t j = 0;
        for (int64_t i = 0; i < Sq * qw; i++)
            if (chk[i]) ra[j++] = got[i];
        double rel_cpu = h3_rel_l2(ra, rb, (size_t)nchk), rel_own = h3_rel_l2(got, own, (size_t)(Sq * qw));
        if (rel_cpu != rel_cpu) rel_cpu = INFINITY;
        if (rel_own != rel_own) rel_own = INFINITY;
        printf("  v%d: max_abs vs CPU %.3e, vs own %.3e\n", var, h3_max_abs(ra, rb, (size_t)nchk),
               h3_max_abs(got, own, (size_t)(Sq * qw)));
        snprintf(name, sizeof name, "%s v%d vs CPU twin", c->name, var);
        CHECK_CLOSE(name, rel_cpu, 1e-2);
        snprintf(name, sizeof name, "%s v%d vs own kernel", c->name, var);
        CHECK_CLOSE(name, rel_own, 1e-2);
        CHECK(pad_bad == 0, "%s v%d: %lld padding elements overwritten", c->name, var, (long long)pad_bad);
    }
    cuda_flash_sm90_set_variant(gpu, -1);

    h3_free(gpu, dbuf), h3_free(gpu, dhm), h3_free(gpu, down), h3_free(gpu, dout);
    free(q), free(k), free(v), free(hb), free(hm), free(own), free(ref), free(chk), free(ra), free(rb);
    free(hout), free(poison), free(got);
}

/* unsupported shapes are refused (the caller falls back) */
static void test_refusals(void) {
    uint16_t *b = h3_alloc(gpu, 1 << 20);
    float sc = 0.1f;
    CHECK(cuda_flash_sm90(gpu, b, 64, 64, b, 64, 64, b, 64, 64, b, 64, 64, 4, 4, 1, 1, 64, sc) == -1, "D 64 refused");
    CHECK(cuda_flash_sm90(gpu, b, 128, 128, b, 128, 128, b, 128, 128, b, 128, 128, 4, 4, 3, 2, 128, sc) == -1,
          "Hq %% Hkv refused");
    CHECK(cuda_flash_sm90(gpu, b, 128, 128, b + 1, 128, 128, b, 128, 128, b, 128, 128, 4, 4, 1, 1, 128, sc) == -1,
          "misaligned q refused");
    CHECK(cuda_flash_sm90(gpu, b, 128, 128, b, 132, 128, b, 128, 128, b, 128, 128, 4, 4, 1, 1, 128, sc) == -1,
          "row stride not a multiple of 8 refused");
    CHECK(cuda_flash_sm90(gpu, b, 128, 128, b, 128, 128, b, 128, 128, b, 128, 128, 0, 4, 1, 1, 128, sc) == -1,
          "Sq 0 refused");
    h3_free(gpu, b);
}

/* ---------------- benchmark ---------------- */

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    int      which; /* 0 cuDNN, 1 own, 2 sm90 fused layout, 3 sm90 interleaved layout */
    uint16_t *qkv, *hm, *obf;
    float    *of;
    int64_t  S;
    int      H;
} bench_arg;

static void bench_once(bench_arg *a) {
    int64_t S = a->S, w = (int64_t)a->H * D;
    float scale = 1.0f / sqrtf((float)D);
    if (a->which == 0) cuda_cudnn_attention_bf16(gpu, a->obf, a->hm, a->hm + S * w, a->hm + 2 * S * w, S, S, a->H, a->H, D, scale);
    else if (a->which == 1) cuda_flash_attention_bf16(gpu, a->of, w, a->hm, a->hm + S * w, a->hm + 2 * S * w, S, S, a->H, a->H, D, scale, 0, 1);
    else if (a->which == 2)
        cuda_flash_sm90(gpu, a->obf, w, D, a->qkv, 3 * w, D, a->qkv + w, 3 * w, D, a->qkv + 2 * w, 3 * w, D, S, S, a->H, a->H, D, scale);
    else
        cuda_flash_sm90(gpu, a->obf, w, D, a->qkv, 3 * w, 3 * D, a->qkv + D, 3 * w, 3 * D, a->qkv + 2 * D, 3 * w, 3 * D, S, S, a->H, a->H, D, scale);
}

static float median_ms(bench_arg *a, int reps) {
    float t[64];
    if (reps > 64) reps = 64;
    bench_once(a); /* warm-up: plan / attribute setup */
    for (int i = 0; i < reps; i++) {
        cuda_mark(gpu, 0);
        bench_once(a);
        cuda_mark(gpu, 1);
        t[i] = cuda_elapsed_ms(gpu);
    }
    qsort(t, (size_t)reps, sizeof(float), cmp_float);
    return t[reps / 2];
}

static int bench(void) {
    const int H = 56;
    const int64_t sizes[3] = {2122, 19540, 37966};
    printf("attention, %d heads x %d, non-causal, TFLOP/s = 4*S^2*D*H / median time\n", H, D);
    printf("%-7s %-34s %10s %10s\n", "S", "kernel", "ms", "TFLOP/s");
    for (int si = 0; si < 3; si++) {
        int64_t S = sizes[si], w = (int64_t)H * D;
        int reps = S < 5000 ? 30 : 10;
        bench_arg a = {0};
        a.S = S, a.H = H;
        a.qkv = h3_alloc(gpu, (size_t)(S * 3 * w) * 2);
        a.hm = h3_alloc(gpu, (size_t)(S * 3 * w) * 2);
        a.obf = h3_alloc(gpu, (size_t)(S * w) * 2);
        a.of = h3_alloc(gpu, (size_t)(S * w) * 4);
        if (!a.qkv || !a.hm || !a.obf || !a.of) {
            printf("out of device memory at S %lld\n", (long long)S);
            return 1;
        }
        cuda_fill_random_bf16(gpu, a.qkv, S * 3 * w, 11 + si, 2.0f);
        cuda_fill_random_bf16(gpu, a.hm, S * 3 * w, 23 + si, 2.0f);
        double flop = 4.0 * (double)S * (double)S * D * H;
        const char *names[2] = {"cuDNN SDPA (head-major)", "own mma.sync (head-major)"};
        for (int which = 0; which < 2; which++) {
            a.which = which;
            float ms = median_ms(&a, which == 1 && S > 30000 ? 5 : reps);
            printf("%-7lld %-34s %10.3f %10.1f\n", (long long)S, names[which], ms, flop / (ms * 1e-3) / 1e12);
        }
        for (int var = 0; var < cuda_flash_sm90_variants(); var++) {
            if (!var_on[var]) continue;
            cuda_flash_sm90_set_variant(gpu, var);
            a.which = 2;
            float ms = median_ms(&a, reps);
            char nm[64];
            snprintf(nm, sizeof nm, "sm90 v%d (fused qkv)", var);
            printf("%-7lld %-34s %10.3f %10.1f\n", (long long)S, nm, ms, flop / (ms * 1e-3) / 1e12);
        }
        cuda_flash_sm90_set_variant(gpu, -1);
        a.which = 2;
        float ms = median_ms(&a, reps);
        printf("%-7lld %-34s %10.3f %10.1f\n", (long long)S, "sm90 default (fused qkv)", ms, flop / (ms * 1e-3) / 1e12);
        a.which = 3;
        ms = median_ms(&a, reps);
        printf("%-7lld %-34s %10.3f %10.1f\n", (long long)S, "sm90 default (interleaved)", ms, flop / (ms * 1e-3) / 1e12);
        h3_free(gpu, a.qkv), h3_free(gpu, a.hm), h3_free(gpu, a.obf), h3_free(gpu, a.of);
        h3_sync(gpu);
    }
    h3_err e;
    if (cuda_backend_check(gpu, &e)) {
        printf("CUDA error: %s\n", e.msg);
        return 1;
    }
    return 0;
}

/* one launch per listed variant at S = 19540 (for a profiler) */
static int prof(void) {
    const int H = 56;
    const int64_t S = 19540, w = (int64_t)H * D;
    bench_arg a = {0};
    a.S = S, a.H = H, a.which = 2;
    a.qkv = h3_alloc(gpu, (size_t)(S * 3 * w) * 2);
    a.obf = h3_alloc(gpu, (size_t)(S * w) * 2);
    cuda_fill_random_bf16(gpu, a.qkv, S * 3 * w, 5, 2.0f);
    for (int var = 0; var < cuda_flash_sm90_variants(); var++) {
        if (!var_on[var]) continue;
        cuda_flash_sm90_set_variant(gpu, var);
        bench_once(&a);
        h3_sync(gpu);
        printf("prof: variant %d launched\n", var);
    }
    h3_free(gpu, a.qkv), h3_free(gpu, a.obf);
    h3_sync(gpu);
    return 0;
}

int main(int argc, char **argv) {
    h3_err e;
    cpu = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    gpu = h3_backend_new(H3_BACKEND_CUDA, 0, &e);
    if (!gpu) {
        fprintf(stderr, "test_flash_sm90: %s\n", e.msg);
        CHECK(0, "no CUDA backend");
        TEST_END();
    }
    int quick = 0, big = 0, do_bench = 0, do_prof = 0, listed = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "bench")) do_bench = 1;
        else if (!strcmp(argv[i], "prof")) do_prof = 1;
        else if (!strcmp(argv[i], "quick")) quick = 1;
        else if (!strcmp(argv[i], "big")) big = 1;
        else if (argv[i][0] == 'v') {
            listed = 1;
            for (char *t = argv[i] + 1; *t;) {
                long n = strtol(t, &t, 10);
                if (n >= 0 && n < 16) var_on[n] = 1;
                if (*t == ',') t++;
                else if (*t) break;
            }
        }
    }
    if (!listed)
        for (int i = 0; i < 16; i++) var_on[i] = 1;
    if (do_bench || do_prof) {
        int rc = do_bench ? bench() : prof();
        h3_backend_free(gpu);
        h3_backend_free(cpu);
        return rc;
    }
    static const tcase cases[] = {
        {"S300 H4 (tails)", 300, 300, 4, 4, L_PLAIN, 0, 2.0f, 0, 0},
        {"Sq100 Skv700 H4", 100, 700, 4, 4, L_PLAIN, 8, 2.0f, 0, 0},
        {"Sq700 Skv100 GQA 8/2", 700, 100, 8, 2, L_PLAIN, 0, 2.0f, 0, 0},
        {"Sq1 Skv1", 1, 1, 2, 2, L_PLAIN, 0, 2.0f, 0, 0},
        {"Sq129 Skv5 peaky", 129, 5, 2, 1, L_PLAIN, 8, 6.0f, 0, 0},
        {"S1000 H8 peaky", 1000, 1000, 8, 8, L_PLAIN, 0, 5.0f, 0, 0},
        {"S2122 H56 fused qkv", 2122, 2122, 56, 56, L_FUSED, 0, 2.0f, 0, 0},
        {"S777 H56 interleaved", 777, 777, 56, 56, L_INTERLEAVE, 8, 2.0f, 0, 0},
        {"S19540 H56 fused qkv", 19540, 19540, 56, 56, L_FUSED, 0, 2.0f, 3, 200},
        {"S19540 H56 interleaved", 19540, 19540, 56, 56, L_INTERLEAVE, 0, 2.0f, 2, 150},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if ((!quick || cases[i].Sq < 10000) && (!big || cases[i].Sq >= 10000)) run_case(&cases[i]);
    test_refusals();
    h3_sync(gpu);
    int bad = cuda_backend_check(gpu, &e);
    CHECK(bad == 0, "CUDA error during the tests: %s", e.msg);
    h3_backend_free(gpu);
    h3_backend_free(cpu);
    TEST_END();
}
