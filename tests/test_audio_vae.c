/* Audio VAE: ops vs naive loops, config/tensor-list checks, parity with diffusers'
 * AutoencoderKLMiniMaxH3Audio on the goldens of tools/reference/gen_audio_vae.py, chunking, the
 * pipeline's latent normalization, and error paths. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/ops.h"
#include "io/safetensors.h"
#include "model/audio_vae.h"
#include "test.h"
#include "test_data.h"

#define TINY "tests/fixtures/tiny/audio_vae"
#define GOLD "tests/fixtures/golden/audio_vae"
#define SKELETON "tests/fixtures/skeleton/audio_vae"

static h3_backend *be;

/* ---------------------------------------------------------------- naive references of the ops */

static void naive_conv1d(float *y, const float *x, int B, int Cin, int64_t L, const float *w, const float *bias,
                         int Cout, int K, int s, int p, int d) {
    int64_t Lo = h3_conv1d_out_len(L, K, s, p, d);
    for (int b = 0; b < B; b++)
        for (int o = 0; o < Cout; o++)
            for (int64_t t = 0; t < Lo; t++) {
                double acc = bias ? bias[o] : 0.0;
                for (int c = 0; c < Cin; c++)
                    for (int k = 0; k < K; k++) {
                        int64_t i = t * s + (int64_t)k * d - p;
                        if (i >= 0 && i < L) acc += (double)w[((int64_t)o * Cin + c) * K + k] * x[((int64_t)b * Cin + c) * L + i];
                    }
                y[((int64_t)b * Cout + o) * Lo + t] = (float)acc;
            }
}

static void naive_convt1d(float *y, const float *x, int B, int Cin, int64_t L, const float *w, const float *bias,
                          int Cout, int K, int s, int p) {
    int64_t Lo = (L - 1) * s - 2 * p + K;
    double *acc = calloc((size_t)Lo, sizeof(double));
    for (int b = 0; b < B; b++)
        for (int o = 0; o < Cout; o++) {
            for (int64_t n = 0; n < Lo; n++) acc[n] = bias ? bias[o] : 0.0;
            for (int c = 0; c < Cin; c++)
                for (int64_t i = 0; i < L; i++)
                    for (int k = 0; k < K; k++) {
                        int64_t n = i * s + k - p;
                        if (n >= 0 && n < Lo) acc[n] += (double)x[((int64_t)b * Cin + c) * L + i] * w[((int64_t)c * Cout + o) * K + k];
                    }
            for (int64_t n = 0; n < Lo; n++) y[((int64_t)b * Cout + o) * Lo + n] = (float)acc[n];
        }
    free(acc);
}

static double snake_d(double v, double f, double inv) {
    double s = sin(f * v);
    return v + inv * s * s;
}

/* PyTorch's recipe literally (docs/model/audio_vae.md 4.7/4.8): replicate-pad 5, transposed depthwise conv stride 2, x2,
 * crop 15/15, SnakeBeta, replicate-pad 5/6, conv stride 2. In double. */
static void naive_alias_free(float *y, const float *x, int64_t L, double f, double inv, const float *filt) {
    int64_t Lp = L + 10, Lfull = (Lp - 1) * 2 + 12;
    double *full = calloc((size_t)Lfull, sizeof(double)), *v = malloc((size_t)(2 * L + 11) * sizeof(double));
    for (int64_t i = 0; i < Lp; i++) {
        int64_t src = i - 5 < 0 ? 0 : (i - 5 >= L ? L - 1 : i - 5);
        for (int k = 0; k < 12; k++) full[i * 2 + k] += x[src] * (double)filt[k];
    }
    for (int64_t m = 0; m < 2 * L; m++) v[m + 5] = snake_d(2.0 * full[m + 15], f, inv);
    for (int i = 0; i < 5; i++) v[i] = v[5];
    for (int i = 0; i < 6; i++) v[2 * L + 5 + i] = v[2 * L + 4];
    for (int64_t t = 0; t < L; t++) {
        double acc = 0.0;
        for (int k = 0; k < 12; k++) acc += filt[k] * v[2 * t + k];
        y[t] = (float)acc;
    }
    free(full);
    free(v);
}

static const float FILT[12] = {0.0020289646927267313f, 0.009389465674757957f, -0.0255434587597847f,
                               -0.057657383382320404f, 0.12857258319854736f,  0.44320979714393616f,
                               0.44320979714393616f,   0.12857258319854736f,  -0.057657383382320404f,
                               -0.0255434587597847f,   0.009389465674757957f, 0.0020289646927267313f};

static void test_conv_ops(void) {
    struct { int B, Cin, L, Cout, K, s, p, d; } cv[] = {
        {2, 3, 17, 4, 5, 2, 3, 2}, {2, 4, 30, 8, 10, 5, 3, 1}, {1, 5, 9, 3, 1, 1, 0, 1},
        {2, 4, 20, 4, 7, 1, 27, 9}, /* padding wider than the input */
        {1, 64, 5000, 8, 7, 1, 15, 5}, /* several im2col tiles */
    };
    for (size_t i = 0; i < sizeof cv / sizeof cv[0]; i++) {
        int64_t Lo = h3_conv1d_out_len(cv[i].L, cv[i].K, cv[i].s, cv[i].p, cv[i].d);
        float *x = rand_host((int64_t)cv[i].B * cv[i].Cin * cv[i].L, 1.0f, 0);
        float *w = rand_host((int64_t)cv[i].Cout * cv[i].Cin * cv[i].K, 0.5f, 0), *b = rand_host(cv[i].Cout, 1.0f, 0);
        int64_t ny = (int64_t)cv[i].B * cv[i].Cout * Lo;
        float *y = malloc((size_t)ny * sizeof(float)), *r = malloc((size_t)ny * sizeof(float));
        h3_conv1d(be, y, x, cv[i].B, cv[i].Cin, cv[i].L, w, i == 2 ? NULL : b, cv[i].Cout, cv[i].K, cv[i].s, cv[i].p,
                  cv[i].d);
        naive_conv1d(r, x, cv[i].B, cv[i].Cin, cv[i].L, w, i == 2 ? NULL : b, cv[i].Cout, cv[i].K, cv[i].s, cv[i].p,
                     cv[i].d);
        char name[96];
        snprintf(name, sizeof name, "conv1d K%d s%d p%d d%d L%d vs naive", cv[i].K, cv[i].s, cv[i].p, cv[i].d, cv[i].L);
        CHECK_CLOSE(name, h3_rel_l2(y, r, (size_t)ny), 1e-6);
        free(x), free(w), free(b), free(y), free(r);
    }
    CHECK(h3_conv1d_out_len(4, 10, 5, 0, 1) == 0, "too-short input gives no output");

    struct { int B, Cin, L, Cout, K, s, p; } ct[] = {
        {2, 6, 7, 3, 9, 5, 2}, {2, 4, 5, 2, 4, 2, 1}, {1, 3, 1, 2, 9, 5, 2}, {1, 8, 4000, 64, 9, 5, 2},
    };
    for (size_t i = 0; i < sizeof ct / sizeof ct[0]; i++) {
        int64_t Lo = (int64_t)(ct[i].L - 1) * ct[i].s - 2 * ct[i].p + ct[i].K;
        float *x = rand_host((int64_t)ct[i].B * ct[i].Cin * ct[i].L, 1.0f, 0);
        float *w = rand_host((int64_t)ct[i].Cin * ct[i].Cout * ct[i].K, 0.5f, 0), *b = rand_host(ct[i].Cout, 1.0f, 0);
        int64_t ny = (int64_t)ct[i].B * ct[i].Cout * Lo;
        float *y = malloc((size_t)ny * sizeof(float)), *r = malloc((size_t)ny * sizeof(float));
        h3_conv_transpose1d(be, y, x, ct[i].B, ct[i].Cin, ct[i].L, w, b, ct[i].Cout, ct[i].K, ct[i].s, ct[i].p);
        naive_convt1d(r, x, ct[i].B, ct[i].Cin, ct[i].L, w, b, ct[i].Cout, ct[i].K, ct[i].s, ct[i].p);
        char name[96];
        snprintf(name, sizeof name, "conv_transpose1d K%d s%d p%d L%d vs naive", ct[i].K, ct[i].s, ct[i].p, ct[i].L);
        CHECK_CLOSE(name, h3_rel_l2(y, r, (size_t)ny), 1e-6);
        CHECK(Lo == (int64_t)ct[i].L * ct[i].s, "K - u even gives exactly u*L samples");
        free(x), free(w), free(b), free(y), free(r);
    }
}

static void test_snake_ops(void) {
    int B = 2, C = 3;
    int64_t Ls[] = {1, 2, 3, 6, 11, 600, 1100}; /* 1100: crosses the 512-output tiles */
    float freq[3] = {0.7f, 2.3f, 13.0f}, inv[3] = {1.3f, 0.4f, 2.0f};
    for (size_t li = 0; li < sizeof Ls / sizeof Ls[0]; li++) {
        int64_t L = Ls[li], n = (int64_t)B * C * L;
        float *x = rand_host(n, 2.0f, 0), *y = malloc((size_t)n * sizeof(float)), *r = malloc((size_t)n * sizeof(float));
        h3_snake_alias_free(be, y, x, B, C, L, freq, inv, FILT);
        for (int64_t row = 0; row < B * C; row++)
            naive_alias_free(r + row * L, x + row * L, L, freq[row % C], inv[row % C], FILT);
        char name[96];
        snprintf(name, sizeof name, "alias-free SnakeBeta L=%lld vs PyTorch recipe", (long long)L);
        CHECK_CLOSE(name, h3_rel_l2(y, r, (size_t)n), 2e-6);
        h3_snake(be, y, x, B, C, L, freq, inv);
        for (int64_t i = 0; i < n; i++) r[i] = (float)snake_d(x[i], freq[(i / L) % C], inv[(i / L) % C]);
        snprintf(name, sizeof name, "snake L=%lld vs naive", (long long)L);
        CHECK_CLOSE(name, h3_rel_l2(y, r, (size_t)n), 1e-6);
        free(x), free(y), free(r);
    }
    /* a constant input stays constant through the resampler (filter sums to 1) when the snake is ~identity */
    float c4[4] = {0.25f, 0.25f, 0.25f, 0.25f}, o4[4], z1 = 1e-4f, big = 0.0f;
    h3_snake_alias_free(be, o4, c4, 1, 1, 4, &z1, &big, FILT);
    CHECK(fabsf(o4[0] - 0.25f) < 1e-6f && fabsf(o4[3] - 0.25f) < 1e-6f, "constant passes: %g %g", o4[0], o4[3]);
}

static void test_small_ops(void) {
    float x[6] = {-3.0f, -0.5f, 0.0f, 0.999f, 1.0f, 7.0f}, y[6];
    h3_clamp(be, y, x, -1.0f, 1.0f, 6);
    CHECK(y[0] == -1.0f && y[1] == -0.5f && y[3] == 0.999f && y[5] == 1.0f, "clamp");
    h3_div_scalar(be, y, x, 3.0f, 6);
    CHECK(y[5] == 7.0f / 3.0f && y[1] == -0.5f / 3.0f, "division (not a reciprocal multiply)");
    float t[2 * 3 * 4], tt[2 * 4 * 3];
    for (int i = 0; i < 24; i++) t[i] = (float)i;
    h3_transpose_last2(be, tt, t, 2, 3, 4);
    int ok = 1;
    for (int b = 0; b < 2; b++)
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 4; c++) ok &= tt[b * 12 + c * 3 + r] == t[b * 12 + r * 4 + c];
    CHECK(ok, "transpose_last2");
    /* head mean + adaptive average pooling: even (64 -> 32) and uneven, overlapping (10 -> 8) bins */
    int cases[2][3] = {{2, 64, 32}, {4, 10, 8}};
    for (int ci = 0; ci < 2; ci++) {
        int H = cases[ci][0], hd = cases[ci][1], O = cases[ci][2], rows = 3;
        float *in = rand_host((int64_t)rows * H * hd, 1.0f, 0), *out = malloc((size_t)rows * O * sizeof(float));
        float *ref = malloc((size_t)rows * O * sizeof(float));
        h3_head_mean_pool(be, out, in, rows, H, hd, O);
        for (int r = 0; r < rows; r++)
            for (int o = 0; o < O; o++) {
                int e0 = (int)floor((double)o * hd / O), e1 = (int)ceil((double)(o + 1) * hd / O);
                double s = 0;
                for (int e = e0; e < e1; e++)
                    for (int h = 0; h < H; h++) s += in[(r * H + h) * hd + e] / (double)H;
                ref[r * O + o] = (float)(s / (e1 - e0));
            }
        char name[64];
        snprintf(name, sizeof name, "head mean pool H%d hd%d -> %d", H, hd, O);
        CHECK_CLOSE(name, h3_rel_l2(out, ref, (size_t)rows * O), 1e-6);
        free(in), free(out), free(ref);
    }
}

/* ---------------------------------------------------------------- config and tensor list */

static void test_config(void) {
    audio_vae_config c;
    h3_err e = {{0}};
    CHECK(audio_vae_config_load(SKELETON, &c, &e) == 0, "release config: %s", e.msg);
    CHECK(c.hop == 800 && c.latent_channels == 32 && c.n_decoder_rates == 7 && c.has_latent_stats, "release values");
    CHECK(c.latents_mean[0] == (float)-0.020211687488382354 && c.latents_std[31] == (float)1.5613768203168363,
          "latent stats parsed as doubles rounded to float");
    h3_expect_list l = {0};
    CHECK(audio_vae_expected_tensors(&c, &l, &e) == 0, "expected tensors: %s", e.msg);
    int64_t values = 0, filters = 0;
    for (int i = 0; i < l.n; i++) {
        int64_t n = 1;
        for (int d = 0; d < l.v[i].ndim; d++) n *= l.v[i].shape[d];
        values += n;
        filters += strstr(l.v[i].name, ".filter") != NULL;
    }
    printf("  release tensor list: %d tensors, %lld values, %lld filters\n", l.n, (long long)values, (long long)filters);
    CHECK(l.n == 1087 && values == 151326585 && filters == 254, "docs/model/audio_vae.md 3.3 counts (1087 / 151,326,585 / 254)");
    const h3_expect *x = h3_expect_find(&l, "decoder.ups.0.0.weight_v");
    CHECK(x && x->shape[0] == 1024 && x->shape[1] == 512 && x->shape[2] == 9, "ups.0 transposed layout");
    x = h3_expect_find(&l, "encoder.block.5.block.4.weight_v");
    CHECK(x && x->shape[0] == 2048 && x->shape[1] == 1024 && x->shape[2] == 10, "block.5 strided conv");
    h3_expect_list_free(&l);
    int64_t md = audio_vae_decode_margin(&c), me = audio_vae_encode_margin(&c);
    printf("  release chunk margins: decode %lld latents (docs/model/audio_vae.md 9.1: 29 exact), encode %lld (docs/model/audio_vae.md 9.2: ~12)\n",
           (long long)md, (long long)me);
    CHECK(md >= 29 && md <= 34 && me >= 12 && me <= 16, "margins cover the receptive fields");

    /* the tiny snapshot's tensor file holds exactly the implied tensors */
    CHECK(audio_vae_config_load(TINY, &c, &e) == 0, "tiny config: %s", e.msg);
    CHECK(c.hop == 10 && c.latent_channels == 32, "tiny hop 10, 32 channels");
    memset(&l, 0, sizeof l);
    audio_vae_expected_tensors(&c, &l, &e);
    st_set *s = st_set_open(TINY, &e);
    CHECK(s != NULL, "open tiny: %s", e.msg);
    if (s) {
        int bad = 0;
        for (int i = 0; i < l.n; i++) {
            const st_entry *en = st_set_entry(s, l.v[i].name, NULL);
            if (!en || en->dtype != H3_F32 || en->ndim != l.v[i].ndim) { bad++; continue; }
            for (int d = 0; d < en->ndim; d++) bad += en->shape[d] != l.v[i].shape[d];
        }
        CHECK(bad == 0 && st_set_count(s) == l.n, "tiny file = expected list (%d vs %d tensors, %d mismatches)",
              st_set_count(s), l.n, bad);
        st_set_free(s);
    }
    h3_expect_list_free(&l);
}

/* ---------------------------------------------------------------- goldens */

static const float *gold(st_file *f, const char *name, int64_t *n) {
    const st_entry *en = f ? st_find(f, name) : NULL;
    if (!en) return NULL;
    int64_t k = 1;
    for (int d = 0; d < en->ndim; d++) k *= en->shape[d];
    if (n) *n = k;
    return st_data(f, en);
}

static void run_case(audio_vae *m, const char *c, int decode) {
    char pin[256], pout[256], label[128];
    snprintf(pin, sizeof pin, GOLD "/%s.in.safetensors", c);
    snprintf(pout, sizeof pout, GOLD "/%s.out.safetensors", c);
    h3_err e = {{0}};
    st_file *fi = st_open(pin, &e), *fo = st_open(pout, &e);
    CHECK(fi && fo, "%s: %s", c, e.msg);
    if (!fi || !fo) goto done;
    const audio_vae_config *cfg = audio_vae_get_config(m);
    const st_entry *ei = st_find(fi, decode ? "latents" : "sample");
    int B = (int)ei->shape[0];
    int64_t T = ei->shape[2];
    if (decode) {
        int64_t n = B * T * cfg->hop, nr;
        float *y = malloc((size_t)n * sizeof(float)), *pre = malloc((size_t)n * sizeof(float));
        CHECK(audio_vae_decode(m, st_data(fi, ei), B, T, 0, y, pre, &e) == 0, "%s: %s", c, e.msg);
        const float *r = gold(fo, "sample", &nr), *rp = gold(fo, "sample_pre_clamp", NULL);
        CHECK(r && nr == n, "%s: golden sample has %lld values, want %lld", c, (long long)nr, (long long)n);
        if (r && nr == n) {
            snprintf(label, sizeof label, "%s sample_pre_clamp", c);
            compare(label, pre, rp, n, 1e-4);
            snprintf(label, sizeof label, "%s sample", c);
            compare(label, y, r, n, 1e-4);
        }
        free(y), free(pre);
    } else {
        int64_t N = (T + cfg->hop - 1) / cfg->hop, n = B * cfg->latent_channels * N, nr;
        float *mean = malloc((size_t)n * sizeof(float)), *logs = malloc((size_t)n * sizeof(float));
        CHECK(audio_vae_encode(m, st_data(fi, ei), B, T, 0, mean, logs, &e) == 0, "%s: %s", c, e.msg);
        const float *r = gold(fo, "mean", &nr), *rl = gold(fo, "logs", NULL);
        CHECK(r && nr == n, "%s: golden mean has %lld values, want %lld", c, (long long)nr, (long long)n);
        if (r && nr == n) {
            snprintf(label, sizeof label, "%s mean", c);
            compare(label, mean, r, n, 1e-4);
            snprintf(label, sizeof label, "%s logs", c);
            compare(label, logs, rl, n, 1e-4);
        }
        free(mean), free(logs);
    }
done:
    st_close(fi);
    st_close(fo);
}

static void test_goldens(void) {
    h3_err e = {{0}};
    struct { const char *dir; const char *cases[8]; int decode[8]; } models[] = {
        {TINY, {"decode_t12", "decode_t4", "decode_t1", "encode_n123", "encode_n47", "encode_n7", "encode_n40"},
         {1, 1, 1, 0, 0, 0, 0}},
        {GOLD "/model", {"full_decode_t12", "full_encode_n123"}, {1, 0}},
        {GOLD "/model_pool", {"pool_encode_n123"}, {0}},
    };
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
        audio_vae *m = audio_vae_load(be, models[i].dir, AVAE_ALL, &e);
        CHECK(m != NULL, "load %s: %s", models[i].dir, e.msg);
        if (!m) continue;
        for (int k = 0; k < 8 && models[i].cases[k]; k++) run_case(m, models[i].cases[k], models[i].decode[k]);
        audio_vae_free(m);
    }
}

/* chunked runs (docs/model/audio_vae.md 9) equal the whole-clip runs */
static void test_chunking(void) {
    h3_err e = {{0}};
    audio_vae *m = audio_vae_load(be, TINY, AVAE_ALL, &e);
    CHECK(m != NULL, "load: %s", e.msg);
    if (!m) return;
    const audio_vae_config *c = audio_vae_get_config(m);
    int B = 2;
    int64_t T = 96, n = B * T * c->hop;
    float *z = rand_host(B * c->latent_channels * T, 1.0f, 0);
    float *whole = malloc((size_t)n * sizeof(float)), *chunked = malloc((size_t)n * sizeof(float));
    float *pw = malloc((size_t)n * sizeof(float)), *pc = malloc((size_t)n * sizeof(float));
    CHECK(audio_vae_decode(m, z, B, T, 0, whole, pw, &e) == 0, "%s", e.msg);
    CHECK(audio_vae_decode(m, z, B, T, 7, chunked, pc, &e) == 0, "%s", e.msg);
    printf("  decode T=%lld in chunks of 7 (+%lld margin): max_abs %.2e vs whole\n", (long long)T,
           (long long)audio_vae_decode_margin(c), h3_max_abs(pc, pw, (size_t)n));
    /* not bit-identical: OpenBLAS's kernels round edge columns differently at other offsets */
    CHECK_CLOSE("chunked decode vs whole (pre-clamp)", h3_rel_l2(pc, pw, (size_t)n), 1e-5);
    /* the margin bounds the receptive field: perturbing latent t0 leaves every sample of latents
     * outside [t0 - M, t0 + M] bit-identical (same sizes, so the same GEMM paths) */
    int64_t M = audio_vae_decode_margin(c), t0 = 48, hop = c->hop;
    for (int ch = 0; ch < c->latent_channels; ch++) z[(int64_t)ch * T + t0] += 1.0f;
    CHECK(audio_vae_decode(m, z, B, T, 0, chunked, pc, &e) == 0, "%s", e.msg);
    int far_same = 1, near_diff = 0;
    for (int b = 0; b < B; b++)
        for (int64_t t = 0; t < T * hop; t++) {
            int64_t lat = t / hop;
            int same = pc[b * T * hop + t] == pw[b * T * hop + t];
            if (lat < t0 - M || lat > t0 + M) far_same &= same;
            if (lat == t0) near_diff += !same;
        }
    CHECK(far_same && near_diff > 0, "decode receptive field within +-%lld latents", (long long)M);

    int64_t S = 613, N = (S + c->hop - 1) / c->hop, nl = B * c->latent_channels * N;
    float *wave = rand_host(B * S, 0.5f, 0);
    float *mw = malloc((size_t)nl * sizeof(float)), *mc = malloc((size_t)nl * sizeof(float));
    CHECK(audio_vae_encode(m, wave, B, S, 0, mw, NULL, &e) == 0, "%s", e.msg);
    CHECK(audio_vae_encode(m, wave, B, S, 5, mc, NULL, &e) == 0, "%s", e.msg);
    printf("  encode N=%lld latents in trunk chunks of 5 (+%lld margin): max_abs %.2e vs whole\n", (long long)N,
           (long long)audio_vae_encode_margin(c), h3_max_abs(mc, mw, (size_t)nl));
    CHECK_CLOSE("chunked encode vs whole", h3_rel_l2(mc, mw, (size_t)nl), 1e-5);
    /* causal: perturbing samples of latent 40 leaves latents before 40 - margin bit-identical */
    int64_t Me = audio_vae_encode_margin(c);
    for (int b = 0; b < B; b++) wave[b * S + 40 * c->hop + 3] += 0.5f;
    CHECK(audio_vae_encode(m, wave, B, S, 0, mc, NULL, &e) == 0, "%s", e.msg);
    int before_same = 1, after_diff = 0;
    for (int64_t r = 0; r < B * c->latent_channels; r++)
        for (int64_t t = 0; t < N; t++) {
            int same = mc[r * N + t] == mw[r * N + t];
            if (t < 40 - Me) before_same &= same;
            if (t >= 40) after_diff += !same;
        }
    CHECK(before_same && after_diff > 0, "encode: earlier latents unaffected beyond %lld latents", (long long)Me);
    free(z), free(whole), free(chunked), free(pw), free(pc), free(wave), free(mw), free(mc);
    audio_vae_free(m);
}

static void test_normalization(void) {
    h3_err e = {{0}};
    audio_vae_config c;
    audio_vae_config_load(TINY, &c, &e);
    st_file *f = st_open(GOLD "/latent_norm.safetensors", &e);
    CHECK(f != NULL, "%s", e.msg);
    if (!f) return;
    int64_t n;
    const float *zn = gold(f, "z_norm", &n), *z = gold(f, "z", NULL), *mu = gold(f, "mean", NULL),
                *mn = gold(f, "mean_norm", NULL);
    int64_t T = n / (2 * c.latent_channels);
    float *buf = malloc((size_t)n * sizeof(float));
    memcpy(buf, zn, (size_t)n * sizeof(float));
    CHECK(audio_vae_denormalize(&c, buf, 2, T, &e) == 0, "%s", e.msg);
    CHECK(memcmp(buf, z, (size_t)n * sizeof(float)) == 0, "denormalize bit-exact vs the pipeline (max_abs %.2e)",
          h3_max_abs(buf, z, (size_t)n));
    memcpy(buf, mu, (size_t)n * sizeof(float));
    CHECK(audio_vae_normalize(&c, buf, 2, T, &e) == 0, "%s", e.msg);
    CHECK(memcmp(buf, mn, (size_t)n * sizeof(float)) == 0, "normalize bit-exact vs the pipeline (max_abs %.2e)",
          h3_max_abs(buf, mn, (size_t)n));
    float *rows = malloc((size_t)n * sizeof(float)), *back = malloc((size_t)n * sizeof(float));
    audio_vae_latents_to_rows(z, 2, T, c.latent_channels, rows);
    CHECK(rows[1] == z[T] && rows[T * c.latent_channels] == z[(int64_t)c.latent_channels * T],
          "rows: first T rows are item 0, channel-major");
    audio_vae_rows_to_latents(rows, 2, T, c.latent_channels, back);
    CHECK(memcmp(back, z, (size_t)n * sizeof(float)) == 0, "rows <-> latents round trip");
    c.has_latent_stats = 0;
    CHECK(audio_vae_normalize(&c, buf, 2, T, &e) == -1 && strstr(e.msg, "latents_mean"), "no stats: %s", e.msg);
    free(buf), free(rows), free(back);
    st_close(f);
}

/* ---------------------------------------------------------------- error paths */

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = calloc((size_t)n + 1, 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = 0;
    fclose(f);
    return s;
}

/* Copies the tiny model to dir, leaving out tensor `drop` and reshaping tensor `reshape` (either may be NULL). */
static void write_variant(const char *dir, const char *drop, const char *reshape) {
    h3_err e = {{0}};
    mkdir(dir, 0755);
    char p[512];
    char *cfg = read_text(TINY "/config.json");
    snprintf(p, sizeof p, "%s/config.json", dir);
    write_text(p, cfg);
    free(cfg);
    st_file *f = st_open(TINY "/diffusion_pytorch_model.safetensors", &e);
    st_writer *w = st_writer_new();
    for (int i = 0; i < f->n; i++) {
        const st_entry *en = &f->entries[i];
        if (drop && !strcmp(en->name, drop)) continue;
        int64_t shape[H3_MAX_DIMS];
        memcpy(shape, en->shape, sizeof shape);
        int nd = en->ndim;
        if (reshape && !strcmp(en->name, reshape)) { /* same bytes, different shape */
            int64_t k = 1;
            for (int d = 0; d < nd; d++) k *= shape[d];
            nd = 1, shape[0] = k;
        }
        st_writer_add(w, en->name, en->dtype, nd, shape, st_data(f, en), &e);
    }
    snprintf(p, sizeof p, "%s/diffusion_pytorch_model.safetensors", dir);
    st_writer_save(w, p, NULL, &e);
    st_writer_free(w);
    st_close(f);
}

static void test_errors(void) {
    h3_err e = {{0}};
    char dir[] = "/tmp/h3_avae_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char p[512], sub[512];
    audio_vae_config c;

    snprintf(p, sizeof p, "%s/config.json", dir);
    write_text(p, "{\"encoder_dim\": 4}");
    CHECK(audio_vae_config_load(dir, &c, &e) == -1 && strstr(e.msg, "encoder_rates"), "missing key: %s", e.msg);
    char *good = read_text(TINY "/config.json");
    struct { const char *from, *to, *expect; } bad[] = {
        {"\"decoder_rates\": [\n    5,", "\"decoder_rates\": [\n    3,", "prod(decoder_rates)"},
        {"\"num_attention_heads\": 2", "\"num_attention_heads\": 3", "num_attention_heads"},
        {"\"latent_dim\": 128", "\"latent_dim\": 100", "latent_channels"},
        {"\"encoder_dim\": 4", "\"encoder_dim\": -4", "encoder_dim"},
        {"\"decoder_kernel_sizes\": [\n    9,", "\"decoder_kernel_sizes\": [\n    8,", "decoder_kernel_sizes[0]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *at = strstr(good, bad[i].from);
        CHECK(at != NULL, "fixture config has '%s'", bad[i].from);
        if (!at) continue;
        size_t pre = (size_t)(at - good);
        char *t = malloc(strlen(good) + 64);
        snprintf(t, strlen(good) + 64, "%.*s%s%s", (int)pre, good, bad[i].to, at + strlen(bad[i].from));
        write_text(p, t);
        free(t);
        e.msg[0] = 0;
        CHECK(audio_vae_config_load(dir, &c, &e) == -1 && strstr(e.msg, bad[i].expect) && strstr(e.msg, "config.json"),
              "bad config %zu: %s", i, e.msg);
    }
    free(good);
    unlink(p);

    snprintf(sub, sizeof sub, "%s/missing", dir);
    write_variant(sub, "decoder.resblocks.4.activations.3.act.beta", NULL);
    CHECK(audio_vae_load(be, sub, AVAE_ALL, &e) == NULL && strstr(e.msg, "decoder.resblocks.4.activations.3.act.beta"),
          "missing tensor: %s", e.msg);
    audio_vae *m = audio_vae_load(be, sub, AVAE_ENCODER, &e); /* the encoder does not need it */
    CHECK(m != NULL, "encoder-only load ignores decoder tensors: %s", e.msg);
    float z[32], out[10];
    CHECK(m && audio_vae_decode(m, z, 1, 1, 0, out, NULL, &e) == -1 && strstr(e.msg, "decoder"), "decode without "
          "decoder: %s", e.msg);
    audio_vae_free(m);
    snprintf(sub, sizeof sub, "%s/reshaped", dir);
    write_variant(sub, NULL, "pre_block.attn.qkv.weight");
    CHECK(audio_vae_load(be, sub, AVAE_ALL, &e) == NULL && strstr(e.msg, "pre_block.attn.qkv.weight") &&
          strstr(e.msg, "[384,128]"), "wrong shape: %s", e.msg);
    m = audio_vae_load(be, TINY, AVAE_DECODER, &e);
    CHECK(m && audio_vae_decode(m, z, 1, 0, 0, out, NULL, &e) == -1 && strstr(e.msg, "T >= 1"), "T = 0: %s", e.msg);
    CHECK(m && audio_vae_encode(m, z, 1, 5, 0, out, NULL, &e) == -1 && strstr(e.msg, "encoder"), "encode without "
          "encoder: %s", e.msg);
    audio_vae_free(m);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0, "cleanup");
}

int main(void) {
    test_seed(12345);
    h3_err e = {{0}};
    be = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    if (!be) {
        fprintf(stderr, "backend: %s\n", e.msg);
        return 1;
    }
    test_conv_ops();
    test_snake_ops();
    test_small_ops();
    test_config();
    test_goldens();
    test_chunking();
    test_normalization();
    test_errors();
    h3_backend_free(be);
    TEST_END();
}
