/* torch's CPU RNG and the request's starting rows (docs/model/dit.md 8; docs/model/video_vae.md 9.2). Written from the
 * algorithm descriptions: MT19937 (Matsumoto & Nishimura), torch's uniform and Box-Muller recipes. */
#include "noise.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"

/* ---- MT19937 ---- */

enum { MT_N = 624, MT_M = 397 };

void torch_rng_seed(torch_rng *g, uint64_t seed) {
    g->state[0] = (uint32_t)(seed & 0xffffffffu);
    for (int j = 1; j < MT_N; j++)
        g->state[j] = 1812433253u * (g->state[j - 1] ^ (g->state[j - 1] >> 30)) + (uint32_t)j;
    g->next = MT_N; /* twist before the first output */
    g->has_cached_normal = 0;
    g->cached_normal = 0.0;
}

static void mt_twist(torch_rng *g) {
    uint32_t *s = g->state;
    for (int i = 0; i < MT_N; i++) {
        uint32_t y = (s[i] & 0x80000000u) | (s[(i + 1) % MT_N] & 0x7fffffffu);
        uint32_t v = s[(i + MT_M) % MT_N] ^ (y >> 1);
        if (y & 1u) v ^= 0x9908b0dfu;
        s[i] = v;
    }
    g->next = 0;
}

uint32_t torch_rng_u32(torch_rng *g) {
    if (g->next >= MT_N) mt_twist(g);
    uint32_t y = g->state[g->next++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

/* uniform_real_distribution<float>(0, 1): the low 24 bits of one 32-bit draw, times 2^-24. */
static float uniform_f32(torch_rng *g) { return (float)(torch_rng_u32(g) & 0xffffffu) * (1.0f / 16777216.0f); }

/* uniform_real_distribution<double>(0, 1): random64() = (first draw << 32) | second draw, low 53 bits. */
static double uniform_f64(torch_rng *g) {
    uint64_t hi = torch_rng_u32(g), lo = torch_rng_u32(g);
    uint64_t x = (hi << 32) | lo;
    return (double)(x & ((1ull << 53) - 1)) * (1.0 / 9007199254740992.0);
}

/* Box-Muller on 16 uniforms in place (torch's NormalFill16, fp32): pairs (j, j+8). torch's AVX2
 * kernel evaluates log/sin/cos with fp32 polynomials; the correctly rounded fp32 values used here
 * agree with them to about an ulp. */
static void normal_fill_16(float *d) {
    const float two_pi = (float)(2.0 * 3.14159265358979323846);
    for (int j = 0; j < 8; j++) {
        const float u1 = 1.0f - d[j];
        const float u2 = d[j + 8];
        const float lg = (float)log((double)u1);
        const float radius = sqrtf(-2.0f * lg);
        const float theta = two_pi * u2;
        d[j] = radius * (float)cos((double)theta);
        d[j + 8] = radius * (float)sin((double)theta);
    }
}

/* at::normal_distribution<double> with the generator's one-sample cache (numel < 16 path). */
static double normal_f64(torch_rng *g) {
    if (g->has_cached_normal) {
        g->has_cached_normal = 0;
        return g->cached_normal;
    }
    const double u1 = uniform_f64(g);
    const double u2 = uniform_f64(g);
    const double r = sqrt(-2.0 * log1p(-u2));
    const double theta = 2.0 * 3.14159265358979323846 * u1;
    g->cached_normal = r * sin(theta);
    g->has_cached_normal = 1;
    return r * cos(theta);
}

void torch_randn(torch_rng *g, float *out, int64_t n) {
    if (n < 16) {
        for (int64_t i = 0; i < n; i++) out[i] = (float)normal_f64(g);
        return;
    }
    for (int64_t i = 0; i < n; i++) out[i] = uniform_f32(g);
    /* the uniforms are drawn serially above; the transform of each block is independent */
#pragma omp parallel for if (n > 65536) schedule(static)
    for (int64_t i = 0; i < n / 16 * 16; i += 16) normal_fill_16(out + i);
    if (n % 16) {
        /* the tail is redrawn: 16 fresh uniforms over the last 16 elements, transformed again */
        float *tail = out + n - 16;
        for (int i = 0; i < 16; i++) tail[i] = uniform_f32(g);
        normal_fill_16(tail);
    }
}

/* ---- packing ---- */

int noise_patchify(const float *L, int C, int F, int lh, int lw, float *rows, h3_err *e) {
    if (lh % 2 || lw % 2)
        return h3_fail(e, "patchify: latents of shape (1, %d, %d, %d, %d) are not divisible by the patch (1, 2, 2)", C,
                       F, lh, lw);
    const int ph = lh / 2, pw = lw / 2, Q = C * 4;
    for (int f = 0; f < F; f++)
        for (int y = 0; y < ph; y++)
            for (int x = 0; x < pw; x++) {
                float *row = rows + ((int64_t)(f * ph + y) * pw + x) * Q;
                for (int c = 0; c < C; c++)
                    for (int dy = 0; dy < 2; dy++)
                        for (int dx = 0; dx < 2; dx++)
                            row[c * 4 + dy * 2 + dx] = L[(((int64_t)c * F + f) * lh + 2 * y + dy) * lw + 2 * x + dx];
            }
    return 0;
}

int noise_unpatchify(const float *rows, int C, int F, int lh, int lw, float *L, h3_err *e) {
    if (lh % 2 || lw % 2)
        return h3_fail(e, "unpatchify: latent grid %dx%d is not divisible by the patch (2, 2)", lh, lw);
    const int ph = lh / 2, pw = lw / 2, Q = C * 4;
    for (int f = 0; f < F; f++)
        for (int y = 0; y < ph; y++)
            for (int x = 0; x < pw; x++) {
                const float *row = rows + ((int64_t)(f * ph + y) * pw + x) * Q;
                for (int c = 0; c < C; c++)
                    for (int dy = 0; dy < 2; dy++)
                        for (int dx = 0; dx < 2; dx++)
                            L[(((int64_t)c * F + f) * lh + 2 * y + dy) * lw + 2 * x + dx] = row[c * 4 + dy * 2 + dx];
            }
    return 0;
}

void noise_audio_rows_to_latents(const float *rows, int Ca, int A, float *lat) {
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < A; i++)
            for (int k = 0; k < Ca; k++) lat[((int64_t)c * Ca + k) * A + i] = rows[((int64_t)c * A + i) * Ca + k];
}

void noise_audio_latents_to_rows(const float *lat, int Ca, int A, float *rows) {
    for (int c = 0; c < 2; c++)
        for (int i = 0; i < A; i++)
            for (int k = 0; k < Ca; k++) rows[((int64_t)c * A + i) * Ca + k] = lat[((int64_t)c * Ca + k) * A + i];
}

void noise_augment_condition(float *x, const float *n, int64_t count) {
    /* scale_noise: t * x + (1 - t) * n with t = fp32(0.999) as a 0-d fp32 tensor. */
    const float t = (float)LAYOUT_CONDITION_TIMESTEP;
    const float one_minus_t = 1.0f - t;
    for (int64_t i = 0; i < count; i++) x[i] = t * x[i] + one_minus_t * n[i];
}

int noise_prepare_rows(const noise_request *r, float *video_rows, float *audio_rows, h3_err *e) {
    if (r->C <= 0 || r->Ca <= 0 || r->F <= 0 || r->A <= 0 || r->lh % 2 || r->lw % 2 || r->lh <= 0 || r->lw <= 0)
        return h3_fail(e, "noise: bad target geometry (C %d, F %d, %dx%d, A %d)", r->C, r->F, r->lh, r->lw, r->A);
    torch_rng g;
    torch_rng_seed(&g, r->seed);
    const int Q = r->C * 4;

    /* 1. conditions, one draw each, in packed order */
    int64_t row = 0;
    for (int k = 0; k < r->num_conditions; k++) {
        const noise_condition *c = &r->conditions[k];
        if (c->frames < 1 || c->latent_height < 2 || c->latent_width < 2 || c->latent_height % 2 ||
            c->latent_width % 2)
            return h3_fail(e, "condition %d: latents of shape (1, %d, %d, %d, %d) are not divisible by the patch "
                              "(1, 2, 2)", k, r->C, c->frames, c->latent_height, c->latent_width);
        const int64_t n = (int64_t)r->C * c->frames * c->latent_height * c->latent_width;
        const int64_t rows_k = n / Q;
        if (row + rows_k > r->expected_condition_video_rows)
            return h3_fail(e, "condition %d: the layout reserved %lld conditioning rows but the encoded conditioning "
                              "latents pack into more", k, (long long)r->expected_condition_video_rows);
        float *buf = malloc(sizeof(float) * (size_t)n * 2);
        if (!buf) return h3_fail(e, "noise: out of memory");
        float *noise = buf + n;
        torch_randn(&g, noise, n);
        memcpy(buf, c->latents, sizeof(float) * (size_t)n);
        noise_augment_condition(buf, noise, n);
        noise_patchify(buf, r->C, c->frames, c->latent_height, c->latent_width, video_rows + row * Q, e);
        free(buf);
        row += rows_k;
    }
    if (row != r->expected_condition_video_rows)
        return h3_fail(e, "conditions: the layout reserved %lld conditioning rows but the encoded conditioning latents "
                          "pack into %lld", (long long)r->expected_condition_video_rows, (long long)row);

    /* 2. video noise as a latent tensor, then patchified */
    const int64_t nv = (int64_t)r->C * r->F * r->lh * r->lw;
    float *vid = malloc(sizeof(float) * (size_t)nv);
    if (!vid) return h3_fail(e, "noise: out of memory");
    if (r->video_noise) memcpy(vid, r->video_noise, sizeof(float) * (size_t)nv);
    else torch_randn(&g, vid, nv);
    noise_patchify(vid, r->C, r->F, r->lh, r->lw, video_rows + row * Q, e);
    free(vid);

    /* 3. reference audio rows (clean), then audio noise drawn in row layout (2A, Ca) */
    if (r->num_reference_audio_rows != r->expected_condition_audio_rows)
        return h3_fail(e, "reference audio: the layout reserved %lld reference audio rows but the encoded soundtracks "
                          "pack into %lld", (long long)r->expected_condition_audio_rows,
                       (long long)r->num_reference_audio_rows);
    const int64_t nra = r->num_reference_audio_rows * r->Ca;
    if (nra) memcpy(audio_rows, r->reference_audio_rows, sizeof(float) * (size_t)nra);
    float *target_audio = audio_rows + nra;
    if (r->audio_noise) noise_audio_latents_to_rows(r->audio_noise, r->Ca, r->A, target_audio);
    else torch_randn(&g, target_audio, (int64_t)2 * r->A * r->Ca);
    return 0;
}
