/* cuda_flash_sm90 / cuda_flash_sm90_batched (the wgmma flash-attention kernel, cuda_flash_sm90.cu) against the
 * CPU twin and the own mma.sync flash kernel. Built with CUDA=1 only (make CUDA=1 MEDIA=0 cuda-tests); runs on
 * an H100/H200.
 *
 *   test_flash_sm90 [quick|big] [v0,2,..]   correctness: the kernel variants (all, or the listed ones) on
 *                             every case (quick: without the S = 19540 cases, big: those only); last line
 *                             RESULT <pass> <fail>
 *   test_flash_sm90 bench [vae] [v0,2,..]  TFLOP/s (4*Sq*Skv*D*H*batch / median time): at S = 2122, 19540,
 *                             37966, 56 heads x 128, next to cuDNN's fused SDPA and the own kernel, then the
 *                             video decoder's tile batch (18 x 1797 rows, 16 x 128 and 32 x 64 heads): sm90
 *                             batched vs cuDNN batched, in the same process (vae: the decoder shapes only)
 *
 * Correctness: fresh random bf16 inputs (not zeros), scattered into the case's device layout (plain
 * [S][H*D] rows, the fused qkv GEMM output [S][3*H*D] with q/k/v at column 0/H*D/2*H*D, or the
 * checkpoint's per-head interleave with head stride 3*D); the output (bf16, optionally padded rows) is
 * poisoned with NaN and the padding with a sentinel before every run. References: cpu_attention (h3_attention
 * on the CPU backend, fp32 on the bf16 inputs, P kept in fp32) on all rows and heads, or on a subset of
 * heads and rows for the large cases; the own kernel (cuda_flash_attention_bf16 on head-major copies) on
 * everything. Tolerance: relative L2 1e-2 for both. Batched cases (several items in one launch): the same
 * references per item (the worst item checked), NaN in the input gaps between items (a read past an item's
 * rows would poison its result), sentinel rows between the output items (must stay untouched), and the
 * whole output buffer against one unbatched cuda_flash_sm90 call per item: 0 differing elements. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_data.h"
#include "backend/backend.h"
#include "backend/cuda/cuda_ops.h"
#include "backend/cuda/cuda_vae.h"
#include "core/dtype.h"
#include "core/tensor.h"

enum { HD_DEF = 128 };
enum { L_PLAIN = 0, L_FUSED = 1, L_INTERLEAVE = 2 };
enum { POISON = 0x7FC0, SENTINEL = 0x1234 }; /* bf16 NaN; the padding's marker */

static h3_backend *cpu, *gpu;
static int var_on[16]; /* variants to run */

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
    int         batch;      /* 0 / 1: one problem (cuda_flash_sm90); else cuda_flash_sm90_batched */
    int         hd;         /* head dim, 0: 128 */
    int64_t     gap;        /* NaN elements after each item's inputs (multiple of 8) */
    int64_t     o_rows;     /* sentinel rows after each item's output rows */
} tcase;

static double finite_or_inf(double x) { return x == x ? x : INFINITY; }

static void run_case(const tcase *c) {
    const int B = c->batch > 1 ? c->batch : 1, D = c->hd ? c->hd : HD_DEF;
    int64_t Sq = c->Sq, Skv = c->Skv;
    int Hq = c->Hq, Hkv = c->Hkv, g = Hq / Hkv;
    int64_t qw = (int64_t)Hq * D, kw = (int64_t)Hkv * D, nq = Sq * qw, nkv = Skv * kw;
    float scale = 1.0f / sqrtf((float)D);
    char bdesc[32] = "";
    if (B > 1) snprintf(bdesc, sizeof bdesc, "batch %d, ", B);
    printf("%s: %sSq %lld Skv %lld Hq %d Hkv %d head_dim %d layout %s%s\n", c->name, bdesc, (long long)Sq,
           (long long)Skv, Hq, Hkv, D,
           c->layout == L_PLAIN ? "plain [S][H*D]" : c->layout == L_FUSED ? "fused qkv [S][3*H*D]" : "interleaved (head stride 3*D)",
           c->o_pad ? ", padded output rows" : "");

    /* logical inputs of each item, bf16 values in fp32: q [B][Sq][Hq*D], k/v [B][Skv][Hkv*D] */
    float *q = malloc((size_t)(B * nq) * 4), *k = malloc((size_t)(B * nkv) * 4), *v = malloc((size_t)(B * nkv) * 4);
    for (int64_t i = 0; i < B * nq; i++) q[i] = h3_round_bf16(frand() * c->amp);
    for (int64_t i = 0; i < B * nkv; i++) k[i] = h3_round_bf16(frand() * c->amp);
    for (int64_t i = 0; i < B * nkv; i++) v[i] = h3_round_bf16(frand());

    /* device layout of one item; item b at b * ibs (its inputs, then `gap` NaNs) */
    int64_t q_rs, q_hs, k_rs, k_hs, v_rs, v_hs, qoff, koff, voff, nitem;
    if (c->layout == L_PLAIN) {
        q_rs = qw, k_rs = v_rs = kw, q_hs = k_hs = v_hs = D;
        qoff = 0, koff = nq, voff = koff + nkv, nitem = voff + nkv;
    } else { /* self-attention only: Sq == Skv, Hq == Hkv */
        q_rs = k_rs = v_rs = 3 * qw;
        if (c->layout == L_FUSED) q_hs = k_hs = v_hs = D, qoff = 0, koff = qw, voff = 2 * qw;
        else q_hs = k_hs = v_hs = 3 * D, qoff = 0, koff = D, voff = 2 * D;
        nitem = Sq * 3 * qw;
    }
    const int64_t ibs = nitem + c->gap, nbuf = B * ibs;
    uint16_t *hb = calloc((size_t)nbuf, 2);
    for (int b = 0; b < B; b++) {
        uint16_t *it = hb + b * ibs;
        const float *qb = q + b * nq, *kb = k + b * nkv, *vb = v + b * nkv;
        for (int64_t s = 0; s < Sq; s++)
            for (int h = 0; h < Hq; h++)
                for (int d = 0; d < D; d++) it[qoff + s * q_rs + h * q_hs + d] = bits_of(qb[s * qw + h * D + d]);
        for (int64_t s = 0; s < Skv; s++)
            for (int h = 0; h < Hkv; h++)
                for (int d = 0; d < D; d++) {
                    it[koff + s * k_rs + h * k_hs + d] = bits_of(kb[s * kw + h * D + d]);
                    it[voff + s * v_rs + h * v_hs + d] = bits_of(vb[s * kw + h * D + d]);
                }
        for (int64_t i = nitem; i < ibs; i++) it[i] = POISON;
    }
    uint16_t *dbuf = h3_alloc(gpu, (size_t)nbuf * 2);
    h3_upload(gpu, dbuf, hb, (size_t)nbuf * 2);

    /* the own kernel on head-major copies, per item */
    uint16_t *hm = malloc((size_t)(nq + 2 * nkv) * 2), *hmk = hm + nq, *hmv = hmk + nkv;
    uint16_t *dhm = h3_alloc(gpu, (size_t)(nq + 2 * nkv) * 2);
    float *down = h3_alloc(gpu, (size_t)nq * 4), *own = malloc((size_t)(B * nq) * 4);
    for (int b = 0; b < B; b++) {
        const float *qb = q + b * nq, *kb = k + b * nkv, *vb = v + b * nkv;
        for (int h = 0; h < Hq; h++)
            for (int64_t s = 0; s < Sq; s++)
                for (int d = 0; d < D; d++) hm[((int64_t)h * Sq + s) * D + d] = bits_of(qb[s * qw + h * D + d]);
        for (int h = 0; h < Hkv; h++)
            for (int64_t s = 0; s < Skv; s++)
                for (int d = 0; d < D; d++) {
                    hmk[((int64_t)h * Skv + s) * D + d] = bits_of(kb[s * kw + h * D + d]);
                    hmv[((int64_t)h * Skv + s) * D + d] = bits_of(vb[s * kw + h * D + d]);
                }
        h3_upload(gpu, dhm, hm, (size_t)(nq + 2 * nkv) * 2);
        cuda_flash_attention_bf16(gpu, down, qw, dhm, dhm + nq, dhm + nq + nkv, Sq, Skv, Hq, Hkv, D, scale, 0, 1);
        h3_download(gpu, own + b * nq, down, (size_t)nq * 4);
    }

    /* CPU twin (fp32) on the checked heads / rows of each item; chk marks the checked elements */
    float *ref = calloc((size_t)(B * nq), 4);
    unsigned char *chk = calloc((size_t)nq, 1);
    for (int b = 0; b < B; b++) {
        const float *qb = q + b * nq, *kb = k + b * nkv, *vb = v + b * nkv;
        float *rf = ref + b * nq;
        if (!c->cpu_heads) {
            h3_attention(cpu, rf, qw, qb, qw, kb, kw, vb, kw, Sq, Skv, Hq, Hkv, D, scale, 0, 0);
            memset(chk, 1, (size_t)nq);
            continue;
        }
        for (int i = 0; i < c->cpu_heads; i++) {
            int h = c->cpu_heads == 1 ? 0 : (int)((int64_t)i * (Hq - 1) / (c->cpu_heads - 1));
            for (int part = 0; part < 2; part++) {
                int64_t r0 = part ? Sq - c->cpu_rows : 0, nr = c->cpu_rows;
                if (r0 < 0) r0 = 0;
                h3_attention(cpu, rf + r0 * qw + h * D, qw, qb + r0 * qw + h * D, qw, kb + (h / g) * D, kw,
                             vb + (h / g) * D, kw, nr, Skv, 1, 1, D, scale, 0, 0);
                for (int64_t r = r0; r < r0 + nr; r++) memset(chk + r * qw + h * D, 1, (size_t)D);
            }
        }
    }
    int64_t nchk = 0;
    for (int64_t i = 0; i < nq; i++) nchk += chk[i];
    float *ra = malloc((size_t)nchk * 4), *rb = malloc((size_t)(B * nchk) * 4);
    {
        double worst = 0.0, wabs = 0.0;
        for (int b = 0; b < B; b++) {
            int64_t j = 0;
            for (int64_t i = 0; i < nq; i++)
                if (chk[i]) ra[j] = own[b * nq + i], rb[b * nchk + j] = ref[b * nq + i], j++;
            double r = h3_rel_l2(ra, rb + b * nchk, (size_t)nchk), m = h3_max_abs(ra, rb + b * nchk, (size_t)nchk);
            if (r > worst) worst = r;
            if (m > wabs) wabs = m;
        }
        printf("  own kernel vs CPU twin (%lld elements%s)            rel_l2 %.3e max_abs %.3e\n", (long long)nchk,
               B > 1 ? " per item, worst item" : "", worst, wabs);
    }

    /* the sm90 kernel, every variant; output item b at b * o_bs: Sq rows of o_rs, then o_rows sentinel rows */
    const int64_t o_rs = qw + c->o_pad, o_bs = (Sq + c->o_rows) * o_rs, nout = B * o_bs;
    uint16_t *hout = malloc((size_t)nout * 2), *hout1 = B > 1 ? malloc((size_t)nout * 2) : NULL;
    uint16_t *poison = malloc((size_t)nout * 2);
    for (int64_t i = 0; i < nout; i++) {
        int64_t r = (i % o_bs) / o_rs, cc = i % o_rs;
        poison[i] = r < Sq && cc < qw ? POISON : SENTINEL;
    }
    uint16_t *dout = h3_alloc(gpu, (size_t)nout * 2);
    float *got = malloc((size_t)nq * 4);
    char name[160];
    for (int var = 0; var < cuda_flash_sm90_variants(); var++) {
        if (!var_on[var]) continue;
        cuda_flash_sm90_set_variant(gpu, var);
        h3_upload(gpu, dout, poison, (size_t)nout * 2);
        int rc = B > 1 ? cuda_flash_sm90_batched(gpu, B, ibs, ibs, ibs, o_bs, dout, o_rs, D, dbuf + qoff, q_rs, q_hs,
                                                 dbuf + koff, k_rs, k_hs, dbuf + voff, v_rs, v_hs, Sq, Skv, Hq, Hkv, D,
                                                 scale)
                       : cuda_flash_sm90(gpu, dout, o_rs, D, dbuf + qoff, q_rs, q_hs, dbuf + koff, k_rs, k_hs,
                                         dbuf + voff, v_rs, v_hs, Sq, Skv, Hq, Hkv, D, scale);
        h3_sync(gpu);
        h3_err e;
        int bad = cuda_backend_check(gpu, &e);
        snprintf(name, sizeof name, "%s v%d runs", c->name, var);
        CHECK(rc == 0 && bad == 0, "%s: rc %d, cuda error %s", name, rc, bad ? e.msg : "none");
        if (rc != 0 || bad) continue;
        h3_download(gpu, hout, dout, (size_t)nout * 2);
        int64_t pad_bad = 0;
        for (int64_t i = 0; i < nout; i++) pad_bad += poison[i] == SENTINEL && hout[i] != SENTINEL;
        double rel_cpu = 0.0, rel_own = 0.0, abs_cpu = 0.0, abs_own = 0.0;
        for (int b = 0; b < B; b++) {
            for (int64_t r = 0; r < Sq; r++)
                for (int64_t cc = 0; cc < qw; cc++) got[r * qw + cc] = of_bits(hout[b * o_bs + r * o_rs + cc]);
            int64_t j = 0;
            for (int64_t i = 0; i < nq; i++)
                if (chk[i]) ra[j++] = got[i];
            double rc_ = finite_or_inf(h3_rel_l2(ra, rb + b * nchk, (size_t)nchk));
            double ro_ = finite_or_inf(h3_rel_l2(got, own + b * nq, (size_t)nq));
            double ac_ = h3_max_abs(ra, rb + b * nchk, (size_t)nchk), ao_ = h3_max_abs(got, own + b * nq, (size_t)nq);
            if (rc_ > rel_cpu) rel_cpu = rc_;
            if (ro_ > rel_own) rel_own = ro_;
            if (!(ac_ <= abs_cpu)) abs_cpu = ac_;
            if (!(ao_ <= abs_own)) abs_own = ao_;
        }
        printf("  v%d: max_abs vs CPU %.3e, vs own %.3e%s\n", var, abs_cpu, abs_own, B > 1 ? " (worst item)" : "");
        snprintf(name, sizeof name, "%s v%d vs CPU twin", c->name, var);
        CHECK_CLOSE(name, rel_cpu, 1e-2);
        snprintf(name, sizeof name, "%s v%d vs own kernel", c->name, var);
        CHECK_CLOSE(name, rel_own, 1e-2);
        CHECK(pad_bad == 0, "%s v%d: %lld padding elements overwritten", c->name, var, (long long)pad_bad);
        if (B > 1) { /* one unbatched call per item into a fresh poisoned buffer: the same bits everywhere */
            h3_upload(gpu, dout, poison, (size_t)nout * 2);
            int rc1 = 0;
            for (int b = 0; b < B && rc1 == 0; b++) {
                const uint16_t *it = dbuf + b * ibs;
                rc1 = cuda_flash_sm90(gpu, dout + b * o_bs, o_rs, D, it + qoff, q_rs, q_hs, it + koff, k_rs, k_hs,
                                      it + voff, v_rs, v_hs, Sq, Skv, Hq, Hkv, D, scale);
            }
            h3_sync(gpu);
            bad = cuda_backend_check(gpu, &e);
            CHECK(rc1 == 0 && bad == 0, "%s v%d unbatched: rc %d, cuda error %s", c->name, var, rc1,
                  bad ? e.msg : "none");
            h3_download(gpu, hout1, dout, (size_t)nout * 2);
            int64_t ndiff = 0;
            for (int64_t i = 0; i < nout; i++) ndiff += hout[i] != hout1[i];
            printf("  v%d: batched vs %d unbatched calls: %lld of %lld elements differ\n", var, B, (long long)ndiff,
                   (long long)nout);
            CHECK(ndiff == 0, "%s v%d: batched differs from unbatched in %lld elements", c->name, var,
                  (long long)ndiff);
        }
    }
    cuda_flash_sm90_set_variant(gpu, -1);

    h3_free(gpu, dbuf), h3_free(gpu, dhm), h3_free(gpu, down), h3_free(gpu, dout);
    free(q), free(k), free(v), free(hb), free(hm), free(own), free(ref), free(chk), free(ra), free(rb);
    free(hout), free(hout1), free(poison), free(got);
}

/* unsupported shapes are refused (the caller falls back) */
static void test_refusals(void) {
    uint16_t *b = h3_alloc(gpu, 1 << 20);
    float sc = 0.1f;
    CHECK(cuda_flash_sm90(gpu, b, 96, 96, b, 96, 96, b, 96, 96, b, 96, 96, 4, 4, 1, 1, 96, sc) == -1, "D 96 refused");
    CHECK(cuda_flash_sm90(gpu, b, 32, 32, b, 32, 32, b, 32, 32, b, 32, 32, 4, 4, 1, 1, 32, sc) == -1, "D 32 refused");
    CHECK(cuda_flash_sm90(gpu, b, 128, 128, b, 128, 128, b, 128, 128, b, 128, 128, 4, 4, 3, 2, 128, sc) == -1,
          "Hq %% Hkv refused");
    CHECK(cuda_flash_sm90(gpu, b, 128, 128, b + 1, 128, 128, b, 128, 128, b, 128, 128, 4, 4, 1, 1, 128, sc) == -1,
          "misaligned q refused");
    CHECK(cuda_flash_sm90(gpu, b, 128, 128, b, 132, 128, b, 128, 128, b, 128, 128, 4, 4, 1, 1, 128, sc) == -1,
          "row stride not a multiple of 8 refused");
    CHECK(cuda_flash_sm90(gpu, b, 128, 128, b, 128, 128, b, 128, 128, b, 128, 128, 0, 4, 1, 1, 128, sc) == -1,
          "Sq 0 refused");
    /* batch limits and item strides */
    const int64_t is = 4 * 128;
    CHECK(cuda_flash_sm90_batched(gpu, 0, is, is, is, is, b, 128, 128, b, 128, 128, b, 128, 128, b, 128, 128, 4, 4, 1,
                                  1, 128, sc) == -1, "batch 0 refused");
    CHECK(cuda_flash_sm90_batched(gpu, 65536, is, is, is, is, b, 128, 128, b, 128, 128, b, 128, 128, b, 128, 128, 4, 4,
                                  1, 1, 128, sc) == -1, "batch 65536 refused");
    CHECK(cuda_flash_sm90_batched(gpu, 2, is + 4, is, is, is, b, 128, 128, b, 128, 128, b, 128, 128, b, 128, 128, 4, 4,
                                  1, 1, 128, sc) == -1, "q item stride not a multiple of 8 refused");
    CHECK(cuda_flash_sm90_batched(gpu, 2, is, is, is, is + 1, b, 128, 128, b, 128, 128, b, 128, 128, b, 128, 128, 4, 4,
                                  1, 1, 128, sc) == -1, "odd output item stride refused");
    CHECK(cuda_flash_sm90_batched(gpu, 2, is, 0, is, is, b, 128, 128, b, 128, 128, b, 128, 128, b, 128, 128, 4, 4, 1, 1,
                                  128, sc) == -1, "zero k item stride refused");
    h3_free(gpu, b);
}

/* ---------------- benchmark ---------------- */

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

typedef struct {
    int      which; /* 0 cuDNN, 1 own, 2 sm90 fused layout, 3 sm90 interleaved layout; decoder tiles (fused
                     * [q|k|v] rows per tile): 4 sm90 batched, 5 cuDNN batched, 6 sm90 one call per tile */
    uint16_t *qkv, *hm, *obf;
    float    *of;
    int64_t  S, B; /* B: tiles of S rows (which >= 4) */
    int      H, hd;
} bench_arg;

static void bench_once(bench_arg *a) {
    const int D = a->which >= 4 ? a->hd : HD_DEF;
    int64_t S = a->S, w = (int64_t)a->H * D, ld = 3 * w;
    float scale = 1.0f / sqrtf((float)D);
    if (a->which == 0) cuda_cudnn_attention_bf16(gpu, a->obf, a->hm, a->hm + S * w, a->hm + 2 * S * w, S, S, a->H, a->H, D, scale);
    else if (a->which == 1) cuda_flash_attention_bf16(gpu, a->of, w, a->hm, a->hm + S * w, a->hm + 2 * S * w, S, S, a->H, a->H, D, scale, 0, 1);
    else if (a->which == 2)
        cuda_flash_sm90(gpu, a->obf, w, D, a->qkv, 3 * w, D, a->qkv + w, 3 * w, D, a->qkv + 2 * w, 3 * w, D, S, S, a->H, a->H, D, scale);
    else if (a->which == 3)
        cuda_flash_sm90(gpu, a->obf, w, D, a->qkv, 3 * w, 3 * D, a->qkv + D, 3 * w, 3 * D, a->qkv + 2 * D, 3 * w, 3 * D, S, S, a->H, a->H, D, scale);
    else if (a->which == 4)
        cuda_flash_sm90_batched(gpu, a->B, S * ld, S * ld, S * ld, S * w, a->obf, w, D, a->qkv, ld, D, a->qkv + w, ld, D,
                                a->qkv + 2 * w, ld, D, S, S, a->H, a->H, D, scale);
    else if (a->which == 5) {
        const int64_t bst[4] = {S * ld, S * ld, S * ld, S * w};
        cuda_cudnn_attention_bf16_batched(gpu, a->B, bst, a->obf, w, a->qkv, ld, D, a->qkv + w, ld, D, a->qkv + 2 * w, ld,
                                          D, S, S, a->H, a->H, D, scale);
    } else
        for (int64_t t = 0; t < a->B; t++) {
            const uint16_t *q = a->qkv + t * S * ld;
            cuda_flash_sm90(gpu, a->obf + t * S * w, w, D, q, ld, D, q + w, ld, D, q + 2 * w, ld, D, S, S, a->H, a->H, D,
                            scale);
        }
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

static int bench_dit(void) {
    const int H = 56, D = HD_DEF;
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
    return 0;
}

/* the video decoder's tile batch: 18 tiles of 1797 rows, fused [q|k|v] rows of 3 x 2048 per tile (the
 * layout cuda_vae_tile_attention gets), at 16 heads x 128 and at the release config's 32 heads x 64 */
static int bench_vae(void) {
    const int64_t B = 18, S = 1797, w = 2048;
    const int hds[2] = {128, 64};
    printf("video decoder tile attention, %lld tiles x %lld rows, non-causal, TFLOP/s = 4*N^2*hd*heads*tiles / median time\n",
           (long long)B, (long long)S);
    printf("%-9s %-34s %10s %10s\n", "heads", "kernel", "ms", "TFLOP/s");
    bench_arg a = {0};
    a.S = S, a.B = B;
    a.qkv = h3_alloc(gpu, (size_t)(B * S * 3 * w) * 2);
    a.obf = h3_alloc(gpu, (size_t)(B * S * w) * 2);
    uint16_t *o2 = h3_alloc(gpu, (size_t)(B * S * w) * 2);
    float *h1 = malloc((size_t)(B * S * w) * 4), *h2 = malloc((size_t)(B * S * w) * 4);
    uint16_t *hb = malloc((size_t)(B * S * w) * 2);
    if (!a.qkv || !a.obf || !o2 || !h1 || !h2 || !hb) {
        printf("out of memory for the decoder shape\n");
        return 1;
    }
    cuda_fill_random_bf16(gpu, a.qkv, B * S * 3 * w, 31, 2.0f);
    for (int hi = 0; hi < 2; hi++) {
        a.hd = hds[hi], a.H = (int)(w / a.hd);
        double flop = 4.0 * (double)S * (double)S * a.hd * a.H * B;
        char hs[16], nm[64];
        snprintf(hs, sizeof hs, "%d x %d", a.H, a.hd);
        a.which = 5;
        const int64_t bst[4] = {S * 3 * w, S * 3 * w, S * 3 * w, S * w};
        int cudnn_ok = cuda_cudnn_attention_bf16_batched(gpu, B, bst, a.obf, w, a.qkv, 3 * w, a.hd, a.qkv + w, 3 * w,
                                                         a.hd, a.qkv + 2 * w, 3 * w, a.hd, S, S, a.H, a.H, a.hd,
                                                         1.0f / sqrtf((float)a.hd)) == 0;
        if (cudnn_ok) {
            float ms = median_ms(&a, 20);
            printf("%-9s %-34s %10.3f %10.1f\n", hs, "cuDNN SDPA batched", ms, flop / (ms * 1e-3) / 1e12);
        } else
            printf("%-9s %-34s   (no cuDNN engine)\n", hs, "cuDNN SDPA batched");
        for (int var = 0; var < cuda_flash_sm90_variants(); var++) {
            if (!var_on[var]) continue;
            cuda_flash_sm90_set_variant(gpu, var);
            a.which = 4;
            float ms = median_ms(&a, 20);
            snprintf(nm, sizeof nm, "sm90 batched v%d", var);
            printf("%-9s %-34s %10.3f %10.1f\n", hs, nm, ms, flop / (ms * 1e-3) / 1e12);
        }
        cuda_flash_sm90_set_variant(gpu, -1);
        a.which = 4;
        float ms = median_ms(&a, 20);
        printf("%-9s %-34s %10.3f %10.1f\n", hs, "sm90 batched default", ms, flop / (ms * 1e-3) / 1e12);
        a.which = 6;
        ms = median_ms(&a, 20);
        printf("%-9s %-34s %10.3f %10.1f\n", hs, "sm90 default, one call per tile", ms, flop / (ms * 1e-3) / 1e12);
        /* sanity: the sm90 batched output against cuDNN's (both bf16 P; different roundings) */
        if (cudnn_ok) {
            a.which = 4;
            bench_once(&a);
            h3_download(gpu, hb, a.obf, (size_t)(B * S * w) * 2);
            for (int64_t i = 0; i < B * S * w; i++) h1[i] = of_bits(hb[i]);
            cuda_cudnn_attention_bf16_batched(gpu, B, bst, o2, w, a.qkv, 3 * w, a.hd, a.qkv + w, 3 * w, a.hd,
                                              a.qkv + 2 * w, 3 * w, a.hd, S, S, a.H, a.H, a.hd, 1.0f / sqrtf((float)a.hd));
            h3_download(gpu, hb, o2, (size_t)(B * S * w) * 2);
            for (int64_t i = 0; i < B * S * w; i++) h2[i] = of_bits(hb[i]);
            printf("%-9s sm90 batched vs cuDNN batched: rel_l2 %.3e max_abs %.3e\n", hs,
                   h3_rel_l2(h1, h2, (size_t)(B * S * w)), h3_max_abs(h1, h2, (size_t)(B * S * w)));
        }
    }
    h3_free(gpu, a.qkv), h3_free(gpu, a.obf), h3_free(gpu, o2);
    free(h1), free(h2), free(hb);
    h3_sync(gpu);
    return 0;
}

static int bench(int vae_only) {
    int rc = vae_only ? 0 : bench_dit();
    if (rc == 0) rc = bench_vae();
    h3_err e;
    if (cuda_backend_check(gpu, &e)) {
        printf("CUDA error: %s\n", e.msg);
        return 1;
    }
    return rc;
}

/* one launch per listed variant at S = 19540 (for a profiler) */
static int prof(void) {
    const int H = 56;
    const int64_t S = 19540, w = (int64_t)H * HD_DEF;
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
    test_seed(0x9E3779B97F4A7C15ull);
    cpu = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    gpu = h3_backend_new(H3_BACKEND_CUDA, 0, &e);
    if (!gpu) {
        fprintf(stderr, "test_flash_sm90: %s\n", e.msg);
        CHECK(0, "no CUDA backend");
        TEST_END();
    }
    int quick = 0, big = 0, do_bench = 0, do_prof = 0, listed = 0, vae_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "bench")) do_bench = 1;
        else if (!strcmp(argv[i], "prof")) do_prof = 1;
        else if (!strcmp(argv[i], "quick")) quick = 1;
        else if (!strcmp(argv[i], "big")) big = 1;
        else if (!strcmp(argv[i], "vae")) vae_only = 1;
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
        int rc = do_bench ? bench(vae_only) : prof();
        h3_backend_free(gpu);
        h3_backend_free(cpu);
        return rc;
    }
    static const tcase cases[] = {
        {"S300 H4 (tails)", 300, 300, 4, 4, L_PLAIN, 0, 2.0f, 0, 0, 0, 0, 0, 0},
        {"Sq100 Skv700 H4", 100, 700, 4, 4, L_PLAIN, 8, 2.0f, 0, 0, 0, 0, 0, 0},
        {"Sq700 Skv100 GQA 8/2", 700, 100, 8, 2, L_PLAIN, 0, 2.0f, 0, 0, 0, 0, 0, 0},
        {"Sq1 Skv1", 1, 1, 2, 2, L_PLAIN, 0, 2.0f, 0, 0, 0, 0, 0, 0},
        {"Sq129 Skv5 peaky", 129, 5, 2, 1, L_PLAIN, 8, 6.0f, 0, 0, 0, 0, 0, 0},
        {"S1000 H8 peaky", 1000, 1000, 8, 8, L_PLAIN, 0, 5.0f, 0, 0, 0, 0, 0, 0},
        {"S2122 H56 fused qkv", 2122, 2122, 56, 56, L_FUSED, 0, 2.0f, 0, 0, 0, 0, 0, 0},
        {"S777 H56 interleaved", 777, 777, 56, 56, L_INTERLEAVE, 8, 2.0f, 0, 0, 0, 0, 0, 0},
        {"S19540 H56 fused qkv", 19540, 19540, 56, 56, L_FUSED, 0, 2.0f, 3, 200, 0, 0, 0, 0},
        {"S19540 H56 interleaved", 19540, 19540, 56, 56, L_INTERLEAVE, 0, 2.0f, 2, 150, 0, 0, 0, 0},
        /* head_dim 64 (the release video decoder's) */
        {"S300 H4 hd64 (tails)", 300, 300, 4, 4, L_PLAIN, 8, 2.0f, 0, 0, 0, 64, 0, 0},
        {"Sq129 Skv5 GQA 2/1 hd64 peaky", 129, 5, 2, 1, L_PLAIN, 0, 6.0f, 0, 0, 0, 64, 0, 0},
        {"S777 H32 hd64 interleaved", 777, 777, 32, 32, L_INTERLEAVE, 8, 2.0f, 0, 0, 0, 64, 0, 0},
        /* batched: name, Sq, Skv, Hq, Hkv, layout, o_pad, amp, cpu_heads, cpu_rows, batch, hd, gap, o_rows.
         * The fused cases are the decoder's layout (tile t at t*N*3*H*D, out at t*N*H*D: no gaps). */
        {"B3 N1797 H16 fused qkv (decoder layout)", 1797, 1797, 16, 16, L_FUSED, 0, 2.0f, 3, 200, 3, 128, 0, 0},
        {"B4 N77 H4 (tails)", 77, 77, 4, 4, L_PLAIN, 8, 2.0f, 0, 0, 4, 128, 2 * 4 * 128, 3},
        {"B2 Sq300 Skv500 GQA 8/2", 300, 500, 8, 2, L_PLAIN, 0, 2.0f, 0, 0, 2, 128, 8 * 2 * 128, 2},
        {"B3 N1797 32x64 fused qkv (decoder)", 1797, 1797, 32, 32, L_FUSED, 0, 2.0f, 4, 200, 3, 64, 0, 0},
        {"B4 Sq100 Skv333 GQA 4/2 hd64", 100, 333, 4, 2, L_PLAIN, 8, 2.0f, 0, 0, 4, 64, 3 * 2 * 64, 1},
        {"B5 Sq1 Skv1 hd64", 1, 1, 2, 2, L_PLAIN, 0, 2.0f, 0, 0, 5, 64, 8, 1},
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
