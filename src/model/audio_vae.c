/* MiniMax-H3 audio VAE on backend ops (docs/model/audio_vae.md). Layout: channel-major [B][C][L]
 * for the convolution parts, time-major [B*N][D] inside the attention projection (docs/model/audio_vae.md 11). */
#include "audio_vae.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../backend/ops.h"
#include "../backend/backend_bench.h"
#include "../io/config.h"
#include "../io/safetensors.h"

/* ------------------------------------------------------------------------------------------------
 * Config (docs/model/audio_vae.md 2) */

static int cfg_check(audio_vae_config *c, const char *path, h3_err *e) {
    int64_t hop = 1, dhop = 1;
    for (int i = 0; i < c->n_encoder_rates; i++) hop *= c->encoder_rates[i];
    for (int i = 0; i < c->n_decoder_rates; i++) dhop *= c->decoder_rates[i];
    if (hop > (1 << 20)) return h3_fail(e, "%s: prod(encoder_rates) %lld is too large", path, (long long)hop);
    if (dhop != hop)
        return h3_fail(e, "%s: prod(decoder_rates) %lld must equal prod(encoder_rates) %lld", path, (long long)dhop,
                       (long long)hop);
    c->hop = (int)hop;
    if (c->latent_channels > AVAE_MAX_LATENT)
        return h3_fail(e, "%s: latent_channels %d exceeds %d", path, c->latent_channels, AVAE_MAX_LATENT);
    if (c->latent_dim % c->latent_channels)
        return h3_fail(e, "%s: latent_dim %d must be a multiple of latent_channels %d", path, c->latent_dim,
                       c->latent_channels);
    if (c->latent_dim % c->num_attention_heads)
        return h3_fail(e, "%s: latent_dim %d must be a multiple of num_attention_heads %d", path, c->latent_dim,
                       c->num_attention_heads);
    if ((int64_t)c->encoder_dim << c->n_encoder_rates > (1 << 20))
        return h3_fail(e, "%s: encoder_dim * 2^len(encoder_rates) is too large", path);
    if (c->decoder_dim % (1 << c->n_decoder_rates))
        return h3_fail(e, "%s: decoder_dim %d must be divisible by 2^len(decoder_rates) = %d", path, c->decoder_dim,
                       1 << c->n_decoder_rates);
    for (int i = 0; i < c->n_decoder_rates; i++) {
        int K = c->decoder_kernel_sizes[i], u = c->decoder_rates[i];
        if (K < u || (K - u) % 2)
            return h3_fail(e, "%s: decoder_kernel_sizes[%d] = %d must be >= decoder_rates[%d] = %d with an even "
                           "difference (the upsampler must give exactly rate x length)", path, i, K, i, u);
    }
    for (int j = 0; j < c->n_resblocks; j++)
        if (c->resblock_kernel_sizes[j] % 2 == 0)
            return h3_fail(e, "%s: resblock_kernel_sizes[%d] = %d must be odd", path, j, c->resblock_kernel_sizes[j]);
    return 0;
}

int audio_vae_config_parse(const json_t *root, const char *path, audio_vae_config *cfg, h3_err *e) {
    memset(cfg, 0, sizeof *cfg);
    if (!json_is_object(root)) return h3_fail(e, "%s: not a JSON object", path);
    const char *cls = json_string_value(json_object_get(root, "_class_name"));
    if (cls && strcmp(cls, "AutoencoderKLMiniMaxH3Audio"))
        return h3_fail(e, "%s: _class_name is '%s', expected AutoencoderKLMiniMaxH3Audio", path, cls);
    /* every field required, each in a plausible range (docs/robustness.md) */
    const int64_t R = H3_CFG_REQUIRED;
    h3_cfg g = h3_cfg_of(root, path, "", e);
    h3_cfg_int(&g, "encoder_dim", R, 1, 1 << 16, &cfg->encoder_dim);
    h3_cfg_int_list(&g, "encoder_rates", 1, 1, AVAE_MAX_STAGES, 1, 64, cfg->encoder_rates, &cfg->n_encoder_rates);
    h3_cfg_int(&g, "latent_dim", R, 1, 1 << 16, &cfg->latent_dim);
    h3_cfg_int(&g, "latent_channels", R, 1, AVAE_MAX_LATENT, &cfg->latent_channels);
    h3_cfg_int(&g, "num_attention_heads", R, 1, 1024, &cfg->num_attention_heads);
    h3_cfg_int(&g, "decoder_dim", R, 1, 1 << 16, &cfg->decoder_dim);
    h3_cfg_int_list(&g, "decoder_rates", 1, 1, AVAE_MAX_STAGES, 1, 64, cfg->decoder_rates, &cfg->n_decoder_rates);
    h3_cfg_int(&g, "sampling_rate", R, 1, 1 << 20, &cfg->sampling_rate);
    int nk = 0;
    h3_cfg_int_list(&g, "decoder_kernel_sizes", 1, 1, AVAE_MAX_STAGES, 1, 1024, cfg->decoder_kernel_sizes, &nk);
    h3_cfg_int_list(&g, "resblock_kernel_sizes", 1, 1, AVAE_MAX_KERNELS, 1, 1024, cfg->resblock_kernel_sizes,
                    &cfg->n_resblocks);
    if (g.rc) return -1;
    if (nk != cfg->n_decoder_rates)
        return h3_fail(e, "%s: decoder_kernel_sizes has %d entries, decoder_rates %d", path, nk, cfg->n_decoder_rates);
    json_t *dil = json_object_get(root, "resblock_dilation_sizes");
    if (!json_is_array(dil) || json_array_size(dil) != (size_t)cfg->n_resblocks)
        return h3_fail(e, "%s: resblock_dilation_sizes must be a list of %d lists (one per resblock kernel)", path,
                       cfg->n_resblocks);
    for (int j = 0; j < cfg->n_resblocks; j++)
        if (h3_cfg_int_list_v(&g, json_array_get(dil, (size_t)j), "resblock_dilation_sizes[j]", 1, AVAE_MAX_DIL, 1,
                              1024, cfg->resblock_dilation_sizes[j], &cfg->n_dilations[j]))
            return -1;
    if (cfg_check(cfg, path, e)) return -1;
    json_t *mean = json_object_get(root, "latents_mean"), *std = json_object_get(root, "latents_std");
    if (mean && !json_is_null(mean) && std && !json_is_null(std)) {
        double m[AVAE_MAX_LATENT], s[AVAE_MAX_LATENT];
        int nm = 0, ns = 0, L = cfg->latent_channels;
        h3_cfg_num_list(&g, "latents_mean", 1, L, L, -1e30, 1e30, m, &nm);
        h3_cfg_num_list(&g, "latents_std", 1, L, L, -1e30, 1e30, s, &ns);
        if (g.rc) return -1;
        /* parse as double, round to float (docs/model/audio_vae.md 2) */
        for (int i = 0; i < L; i++) cfg->latents_mean[i] = (float)m[i], cfg->latents_std[i] = (float)s[i];
        cfg->has_latent_stats = 1;
    }
    return 0;
}

const char *audio_vae_weights_path(const char *dir, char *out, size_t cap) {
    /* diffusers' file name (or its sharded index); else whatever single file the folder holds. stat only: a FIFO
     * is then refused by the opener instead of blocking here. */
    struct stat sb;
    snprintf(out, cap, "%s/diffusion_pytorch_model.safetensors", dir);
    if (stat(out, &sb) == 0) return out;
    snprintf(out, cap, "%s/diffusion_pytorch_model.safetensors.index.json", dir);
    if (stat(out, &sb) == 0) return out;
    snprintf(out, cap, "%s", dir);
    return out;
}

static int parse_untyped(const json_t *root, const char *path, void *cfg, h3_err *e) {
    return audio_vae_config_parse(root, path, cfg, e);
}

int audio_vae_config_load(const char *dir, audio_vae_config *cfg, h3_err *e) {
    return h3_json_parse_config_in(dir, parse_untyped, cfg, sizeof *cfg, e);
}

/* ------------------------------------------------------------------------------------------------
 * Tensor names (docs/model/audio_vae.md 3.3) */

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
#define ADD(nd, shp, ...) \
    do { if (h3_expect_add(l, H3_F32, nd, shp, __VA_ARGS__)) return h3_expect_fail(l, "audio VAE", e); } while (0)

/* A weight-normed conv: weight_g [dim0,1,1], weight_v [dim0, dim1, K], bias [nbias] when nbias > 0. */
static int add_wn(h3_expect_list *l, const char *prefix, int64_t d0, int64_t d1, int64_t K, int64_t nbias,
                  h3_err *e) {
    ADD(3, SHAPE(d0, 1, 1), "%s.weight_g", prefix);
    ADD(3, SHAPE(d0, d1, K), "%s.weight_v", prefix);
    if (nbias > 0) ADD(1, SHAPE(nbias), "%s.bias", prefix);
    return 0;
}

static int add_snake_beta(h3_expect_list *l, const char *prefix, int64_t C, h3_err *e) {
    ADD(1, SHAPE(C), "%s.act.alpha", prefix);
    ADD(1, SHAPE(C), "%s.act.beta", prefix);
    ADD(3, SHAPE(1, 1, H3_AF_TAPS), "%s.upsample.filter", prefix);
    ADD(3, SHAPE(1, 1, H3_AF_TAPS), "%s.downsample.lowpass.filter", prefix);
    return 0;
}

int audio_vae_expected_tensors(const audio_vae_config *c, h3_expect_list *l, h3_err *e) {
    char p[192];
    int64_t E = c->encoder_dim, LD = c->latent_dim, O = c->latent_channels, D = c->decoder_dim;
    int R = c->n_encoder_rates;
    /* encoder (DAC) */
    if (add_wn(l, "encoder.block.0", E, 1, 7, E, e)) return -1;
    for (int b = 1; b <= R; b++) {
        int64_t C = E << (b - 1);
        int s = c->encoder_rates[b - 1];
        for (int r = 0; r < 3; r++) {
            ADD(3, SHAPE(1, C, 1), "encoder.block.%d.block.%d.block.0.alpha", b, r);
            snprintf(p, sizeof p, "encoder.block.%d.block.%d.block.1", b, r);
            if (add_wn(l, p, C, C, 7, C, e)) return -1;
            ADD(3, SHAPE(1, C, 1), "encoder.block.%d.block.%d.block.2.alpha", b, r);
            snprintf(p, sizeof p, "encoder.block.%d.block.%d.block.3", b, r);
            if (add_wn(l, p, C, C, 1, C, e)) return -1;
        }
        ADD(3, SHAPE(1, C, 1), "encoder.block.%d.block.3.alpha", b);
        snprintf(p, sizeof p, "encoder.block.%d.block.4", b);
        if (add_wn(l, p, 2 * C, C, 2 * s, 2 * C, e)) return -1;
    }
    ADD(3, SHAPE(1, E << R, 1), "encoder.block.%d.alpha", R + 1);
    snprintf(p, sizeof p, "encoder.block.%d", R + 2);
    if (add_wn(l, p, LD, E << R, 3, LD, e)) return -1;
    /* attention projection */
    static const char *wide[] = {"norm1", "norm3"}, *narrow[] = {"norm2", "mlp.norm"};
    for (int i = 0; i < 2; i++) {
        ADD(1, SHAPE(LD), "pre_block.%s.weight", wide[i]);
        ADD(1, SHAPE(LD), "pre_block.%s.bias", wide[i]);
        ADD(1, SHAPE(O), "pre_block.%s.weight", narrow[i]);
        ADD(1, SHAPE(O), "pre_block.%s.bias", narrow[i]);
    }
    ADD(2, SHAPE(3 * LD, LD), "pre_block.attn.qkv.weight");
    ADD(1, SHAPE(LD), "pre_block.attn.q_bias");
    ADD(1, SHAPE(LD), "pre_block.attn.v_bias");
    ADD(1, SHAPE(LD), "pre_block.attn.zero_k_bias");
    ADD(2, SHAPE(O, O), "pre_block.attn.proj.weight");
    ADD(1, SHAPE(O), "pre_block.attn.proj.bias");
    ADD(2, SHAPE(O, LD), "pre_block.proj.weight");
    ADD(1, SHAPE(O), "pre_block.proj.bias");
    ADD(2, SHAPE(2 * O, O), "pre_block.mlp.w0.weight");
    ADD(1, SHAPE(2 * O), "pre_block.mlp.w0.bias");
    ADD(2, SHAPE(2 * O, O), "pre_block.mlp.w1.weight");
    ADD(1, SHAPE(2 * O), "pre_block.mlp.w1.bias");
    ADD(2, SHAPE(O, 2 * O), "pre_block.mlp.w2.weight");
    ADD(1, SHAPE(O), "pre_block.mlp.w2.bias");
    /* posterior heads, decoder input */
    ADD(3, SHAPE(O, O, 1), "mean_proj.weight");
    ADD(1, SHAPE(O), "mean_proj.bias");
    ADD(3, SHAPE(O, O, 1), "logs_proj.weight");
    ADD(1, SHAPE(O), "logs_proj.bias");
    ADD(3, SHAPE(LD, O, 1), "dec_in_proj.weight");
    ADD(1, SHAPE(LD), "dec_in_proj.bias");
    /* decoder (BigVGAN) */
    if (add_wn(l, "decoder.conv_pre", D, LD, 7, D, e)) return -1;
    for (int i = 0; i < c->n_decoder_rates; i++) {
        snprintf(p, sizeof p, "decoder.ups.%d.0", i);
        if (add_wn(l, p, D >> i, D >> (i + 1), c->decoder_kernel_sizes[i], D >> (i + 1), e)) return -1;
    }
    for (int i = 0; i < c->n_decoder_rates; i++) {
        int64_t C = D >> (i + 1);
        for (int j = 0; j < c->n_resblocks; j++) {
            int m = i * c->n_resblocks + j, k = c->resblock_kernel_sizes[j];
            for (int q = 0; q < c->n_dilations[j]; q++) {
                snprintf(p, sizeof p, "decoder.resblocks.%d.convs1.%d", m, q);
                if (add_wn(l, p, C, C, k, C, e)) return -1;
                snprintf(p, sizeof p, "decoder.resblocks.%d.convs2.%d", m, q);
                if (add_wn(l, p, C, C, k, C, e)) return -1;
            }
            for (int q = 0; q < 2 * c->n_dilations[j]; q++) {
                snprintf(p, sizeof p, "decoder.resblocks.%d.activations.%d", m, q);
                if (add_snake_beta(l, p, C, e)) return -1;
            }
        }
    }
    int64_t Cl = D >> c->n_decoder_rates;
    if (add_snake_beta(l, "decoder.activation_post", Cl, e)) return -1;
    if (add_wn(l, "decoder.conv_post", 1, Cl, 7, 0, e)) return -1;
    return 0;
}

/* ------------------------------------------------------------------------------------------------
 * Receptive-field margins (docs/model/audio_vae.md 9): reaches of every op, in latents, summed and rounded up. */

int64_t audio_vae_decode_margin(const audio_vae_config *c) {
    double reach = 3.0, rate = 1.0; /* conv_pre k7 at the latent rate (dec_in_proj is 1x1) */
    for (int i = 0; i < c->n_decoder_rates; i++) {
        int K = c->decoder_kernel_sizes[i], u = c->decoder_rates[i];
        reach += (double)((K + u - 1) / u) / rate; /* transposed conv: ceil(K/u) input samples */
        rate *= u;
        double amp = 0.0;
        for (int j = 0; j < c->n_resblocks; j++) {
            double a = 0.0; /* per dilation: 2 activations (+-5 each) + dilated conv + plain conv */
            for (int q = 0; q < c->n_dilations[j]; q++)
                a += 10.0 + (c->resblock_kernel_sizes[j] - 1) / 2 * (double)(c->resblock_dilation_sizes[j][q] + 1);
            if (a > amp) amp = a;
        }
        reach += amp / rate;
    }
    reach += 8.0 / rate; /* activation_post +-5, conv_post k7 +-3 */
    return (int64_t)ceil(reach) + 1;
}

int64_t audio_vae_encode_margin(const audio_vae_config *c) {
    double rate = c->hop, reach = 3.0 / rate; /* samples per latent at the current point */
    for (int b = 0; b < c->n_encoder_rates; b++) {
        int s = c->encoder_rates[b], p = (s + 1) / 2;
        reach += 39.0 / rate; /* residual units: k7 at dilations 1, 3, 9 */
        reach += (double)(p > 2 * s - 1 - p ? p : 2 * s - 1 - p) / rate;
        rate /= s;
    }
    reach += 1.0; /* final k3 conv at the latent rate */
    return (int64_t)ceil(reach) + 1;
}

/* ------------------------------------------------------------------------------------------------
 * Model and loading */

typedef struct avae_conv {
    float *w, *b; /* backend memory; w [Cout, Cin, K] (transposed conv: [Cin, Cout, K]); b may be NULL */
    int    cin, cout, k, stride, pad, dil;
} avae_conv;

typedef struct avae_snake {
    float *freq, *inv; /* per channel: sin frequency and 1/(magnitude + 1e-9) */
} avae_snake;

typedef struct avae_amp { /* one AMP block (docs/model/audio_vae.md 5 step 3.2) */
    int        ndil;
    avae_conv  c1[AVAE_MAX_DIL], c2[AVAE_MAX_DIL];
    avae_snake act[2 * AVAE_MAX_DIL];
} avae_amp;

typedef struct avae_eblock { /* one DAC encoder block (docs/model/audio_vae.md 6 step 3) */
    avae_snake s0[3], s2[3], s3;
    avae_conv  c1[3], c3[3], down;
} avae_eblock;

struct audio_vae {
    h3_backend      *be;
    audio_vae_config cfg;
    int              parts;
    void           **allocs;
    int              n_allocs, cap_allocs;
    /* decoder */
    avae_conv  dec_in, conv_pre, ups[AVAE_MAX_STAGES], conv_post;
    avae_amp   amp[AVAE_MAX_STAGES * AVAE_MAX_KERNELS];
    avae_snake act_post;
    float     *filter; /* the 12 resampling taps (all 2 x 127 stored copies are checked equal) */
    /* encoder */
    avae_conv   enc_in, enc_out, mean_proj, logs_proj;
    avae_eblock eb[AVAE_MAX_STAGES];
    avae_snake  enc_snake;
    float      *norm1_w, *norm1_b, *norm3_w, *norm3_b, *norm2_w, *norm2_b, *mlpn_w, *mlpn_b;
    h3_tensor   qkv_w, qkv_b, attn_proj_w, attn_proj_b, proj_w, proj_b, w0, b0, w1, b1, w2, b2;
};

typedef struct loader {
    audio_vae  *m;
    st_set     *st;
    const h3_expect_list *random; /* audio_vae_new_random: values made from the names, no file */
    uint64_t    seed;
    h3_err     *e;
    float       filt[H3_AF_TAPS];
    int         have_filt;
} loader;

static void *track(audio_vae *m, void *p) {
    if (!p) return NULL;
    if (m->n_allocs == m->cap_allocs) {
        int cap = m->cap_allocs ? 2 * m->cap_allocs : 256;
        void **v = realloc(m->allocs, (size_t)cap * sizeof *v);
        if (!v) {
            h3_free(m->be, p);
            return NULL;
        }
        m->allocs = v;
        m->cap_allocs = cap;
    }
    m->allocs[m->n_allocs++] = p;
    return p;
}

static float *upload(loader *ld, const float *host, int64_t n) {
    float *d = track(ld->m, h3_alloc(ld->m->be, (size_t)n * sizeof(float)));
    if (!d) {
        h3_fail(ld->e, "out of memory loading the audio VAE (%lld floats)", (long long)n);
        return NULL;
    }
    h3_upload(ld->m->be, d, host, (size_t)n * sizeof(float));
    return d;
}

/* A host fp32 copy of a tensor (shapes were checked against the expected list already). */
static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* audio_vae_new_random's values, by what the name says the tensor is (as make-tiny's): weight-norm
 * gains and Snake parameters near 1 (log-scale ones near 0), one shared low-pass filter, small biases,
 * matrices with the variance of N(0, 1/fan_in). */
static float *random_host(loader *ld, const char *name, int64_t *n) {
    const h3_expect *x = h3_expect_find(ld->random, name);
    if (!x) {
        h3_fail(ld->e, "audio VAE (random weights): tensor '%s' is not in the config's list", name);
        return NULL;
    }
    int64_t cnt = 1;
    for (int d = 0; d < x->ndim; d++) cnt *= x->shape[d];
    *n = cnt;
    float *h = malloc((size_t)(cnt > 0 ? cnt : 1) * sizeof(float));
    if (!h) {
        h3_fail(ld->e, "out of memory");
        return NULL;
    }
    uint64_t key = ld->seed;
    for (const char *c = name; *c; c++) key = (key ^ (uint8_t)*c) * 0x100000001b3ull; /* FNV-1a of the name */
    int64_t fan_in = x->ndim >= 2 && x->shape[0] ? cnt / x->shape[0] : 1;
    if (ends_with(name, ".filter")) { /* a Hann-windowed sinc low-pass at a quarter of the rate, unit gain */
        double sum = 0.0;
        for (int64_t i = 0; i < cnt; i++) {
            double t = (double)i - (double)(cnt - 1) / 2.0, a = 0.5 * t;
            double sinc = fabs(a) < 1e-9 ? 1.0 : sin(M_PI * a) / (M_PI * a);
            h[i] = (float)(sinc * (0.5 - 0.5 * cos(2.0 * M_PI * (double)(i + 1) / (double)(cnt + 1))));
            sum += h[i];
        }
        for (int64_t i = 0; i < cnt; i++) h[i] = (float)(h[i] / sum);
    } else if (ends_with(name, "weight_g")) {
        h3_fill_random_host(h, H3_F32, cnt, key, 0.1f, 1.0f);
    } else if (ends_with(name, ".alpha") || ends_with(name, ".beta")) {
        int logscale = strstr(name, "decoder") != NULL;
        h3_fill_random_host(h, H3_F32, cnt, key, 0.1f, logscale ? 0.0f : 1.0f);
    } else if (ends_with(name, "bias")) {
        h3_fill_random_host(h, H3_F32, cnt, key, 0.05f, 0.0f);
    } else if (x->ndim >= 2) {
        h3_fill_random_host(h, H3_F32, cnt, key, sqrtf(3.0f / (float)fan_in), 0.0f);
    } else {
        h3_fill_random_host(h, H3_F32, cnt, key, 0.1f, 0.0f);
    }
    return h;
}

static float *read_host(loader *ld, const char *name, int64_t *n) {
    if (ld->random) return random_host(ld, name, n);
    h3_tensor v;
    if (st_set_get(ld->st, name, &v, ld->e)) return NULL;
    *n = h3_tensor_numel(&v);
    float *h = malloc((size_t)(*n > 0 ? *n : 1) * sizeof(float));
    if (!h) {
        h3_fail(ld->e, "out of memory reading '%s'", name);
        return NULL;
    }
    h3_convert_to_f32(h, v.data, v.dtype, (size_t)*n);
    return h;
}

static float *load_plain(loader *ld, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static float *load_plain(loader *ld, const char *fmt, ...) {
    char name[192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    int64_t n;
    float *h = read_host(ld, name, &n);
    if (!h) return NULL;
    float *d = upload(ld, h, n);
    free(h);
    return d;
}

/* A plain (not weight-normed) linear as an h3_tensor for h3_matmul. */
static int load_linear(loader *ld, h3_tensor *w, h3_tensor *b, const char *prefix, int64_t out, int64_t in) {
    memset(w, 0, sizeof *w);
    memset(b, 0, sizeof *b);
    w->dtype = b->dtype = H3_F32;
    w->ndim = 2, w->shape[0] = out, w->shape[1] = in;
    b->ndim = 1, b->shape[0] = out;
    w->data = load_plain(ld, "%s.weight", prefix);
    b->data = w->data ? load_plain(ld, "%s.bias", prefix) : NULL;
    return w->data && b->data ? 0 : -1;
}

/* Weight-norm fold (docs/model/audio_vae.md 3.2): w[r] = v[r] * (g[r] / ||v[r]||), the norm over all dims but dim 0
 * (the output channel of a conv, the input channel of a transposed conv). Sum of squares in double. */
static float *load_wn_weight(loader *ld, const char *prefix) {
    char name[192];
    int64_t nv, ng;
    snprintf(name, sizeof name, "%s.weight_v", prefix);
    float *v = read_host(ld, name, &nv);
    if (!v) return NULL;
    snprintf(name, sizeof name, "%s.weight_g", prefix);
    float *g = read_host(ld, name, &ng);
    if (!g) {
        free(v);
        return NULL;
    }
    int64_t per = nv / ng;
    for (int64_t r = 0; r < ng; r++) {
        float *vr = v + r * per;
        double ss = 0.0;
        for (int64_t i = 0; i < per; i++) ss += (double)vr[i] * vr[i];
        float scale = g[r] / (float)sqrt(ss);
        for (int64_t i = 0; i < per; i++) vr[i] = vr[i] * scale;
    }
    float *d = upload(ld, v, nv);
    free(v);
    free(g);
    return d;
}

static int load_conv(loader *ld, avae_conv *c, const char *prefix, int wn, int bias, int cin, int cout, int k,
                     int stride, int pad, int dil) {
    *c = (avae_conv){.cin = cin, .cout = cout, .k = k, .stride = stride, .pad = pad, .dil = dil};
    if (wn) {
        c->w = load_wn_weight(ld, prefix);
    } else {
        c->w = load_plain(ld, "%s.weight", prefix);
    }
    if (!c->w) return -1;
    if (bias && !(c->b = load_plain(ld, "%s.bias", prefix))) return -1;
    return 0;
}

/* freq/inv from Snake1d alpha (linear) or SnakeBeta alpha/beta (log scale), docs/model/audio_vae.md 4.4/4.5. */
static int load_snake(loader *ld, avae_snake *s, const char *alpha_name, const char *beta_name) {
    int64_t C, Cb;
    float *a = read_host(ld, alpha_name, &C);
    if (!a) return -1;
    float *buf = malloc((size_t)(2 * C) * sizeof(float));
    float *b = beta_name ? read_host(ld, beta_name, &Cb) : NULL;
    if (!buf || (beta_name && !b)) {
        free(a), free(b), free(buf);
        return buf ? -1 : h3_fail(ld->e, "out of memory");
    }
    for (int64_t c = 0; c < C; c++) {
        if (beta_name) {
            buf[c] = expf(a[c]);
            buf[C + c] = 1.0f / (expf(b[c]) + 1e-9f);
        } else {
            buf[c] = a[c];
            buf[C + c] = 1.0f / (a[c] + 1e-9f);
        }
    }
    float *d = upload(ld, buf, 2 * C);
    free(a), free(b), free(buf);
    if (!d) return -1;
    s->freq = d;
    s->inv = d + C;
    return 0;
}

static int check_filter(loader *ld, const char *name) {
    int64_t n;
    float *f = read_host(ld, name, &n);
    if (!f) return -1;
    int rc = 0;
    if (!ld->have_filt) {
        memcpy(ld->filt, f, sizeof ld->filt);
        ld->have_filt = 1;
    } else if (memcmp(ld->filt, f, sizeof ld->filt)) {
        rc = h3_fail(ld->e, "%s: tensor '%s' differs from the other resampling filters (all must be equal)",
                     ld->st ? st_set_path(ld->st) : "random weights", name);
    }
    free(f);
    return rc;
}

static int load_snake_beta_af(loader *ld, avae_snake *s, const char *prefix) {
    char a[192], b[192], f[192];
    snprintf(a, sizeof a, "%s.act.alpha", prefix);
    snprintf(b, sizeof b, "%s.act.beta", prefix);
    if (load_snake(ld, s, a, b)) return -1;
    snprintf(f, sizeof f, "%s.upsample.filter", prefix);
    if (check_filter(ld, f)) return -1;
    snprintf(f, sizeof f, "%s.downsample.lowpass.filter", prefix);
    return check_filter(ld, f);
}

static int is_decoder_tensor(const char *name) {
    return !strncmp(name, "decoder.", 8) || !strncmp(name, "dec_in_proj.", 12);
}

/* Every expected tensor of the loaded parts is present with its shape and a float dtype. */
static int check_tensors(loader *ld, int parts) {
    h3_expect_list l = {0}; /* no cap from the weights: a partial (encoder- or decoder-only) file is valid */
    if (audio_vae_expected_tensors(&ld->m->cfg, &l, ld->e)) {
        h3_expect_list_free(&l);
        return -1;
    }
    int rc = 0;
    for (int i = 0; i < l.n && !rc; i++) {
        const h3_expect *x = &l.v[i];
        if (!(parts & (is_decoder_tensor(x->name) ? AVAE_DECODER : AVAE_ENCODER))) continue;
        const st_entry *ent = st_set_entry(ld->st, x->name, NULL);
        if (!ent) {
            rc = h3_fail(ld->e, "%s: tensor '%s' not found", st_set_path(ld->st), x->name);
            break;
        }
        rc = h3_expect_check(x, ent->dtype, ent->ndim, ent->shape, st_set_path(ld->st), ld->e);
    }
    h3_expect_list_free(&l);
    return rc;
}

static int load_decoder(loader *ld) {
    audio_vae *m = ld->m;
    const audio_vae_config *c = &m->cfg;
    char p[192];
    int D = c->decoder_dim;
    if (load_conv(ld, &m->dec_in, "dec_in_proj", 0, 1, c->latent_channels, c->latent_dim, 1, 1, 0, 1) ||
        load_conv(ld, &m->conv_pre, "decoder.conv_pre", 1, 1, c->latent_dim, D, 7, 1, 3, 1))
        return -1;
    for (int i = 0; i < c->n_decoder_rates; i++) {
        int K = c->decoder_kernel_sizes[i], u = c->decoder_rates[i], C = D >> (i + 1);
        snprintf(p, sizeof p, "decoder.ups.%d.0", i);
        if (load_conv(ld, &m->ups[i], p, 1, 1, 2 * C, C, K, u, (K - u) / 2, 1)) return -1;
        for (int j = 0; j < c->n_resblocks; j++) {
            int mi = i * c->n_resblocks + j, k = c->resblock_kernel_sizes[j];
            avae_amp *a = &m->amp[mi];
            a->ndil = c->n_dilations[j];
            for (int q = 0; q < a->ndil; q++) {
                int d = c->resblock_dilation_sizes[j][q];
                snprintf(p, sizeof p, "decoder.resblocks.%d.convs1.%d", mi, q);
                if (load_conv(ld, &a->c1[q], p, 1, 1, C, C, k, 1, d * (k - 1) / 2, d)) return -1;
                snprintf(p, sizeof p, "decoder.resblocks.%d.convs2.%d", mi, q);
                if (load_conv(ld, &a->c2[q], p, 1, 1, C, C, k, 1, (k - 1) / 2, 1)) return -1;
            }
            for (int q = 0; q < 2 * a->ndil; q++) {
                snprintf(p, sizeof p, "decoder.resblocks.%d.activations.%d", mi, q);
                if (load_snake_beta_af(ld, &a->act[q], p)) return -1;
            }
        }
    }
    int Cl = D >> c->n_decoder_rates;
    if (load_snake_beta_af(ld, &m->act_post, "decoder.activation_post") ||
        load_conv(ld, &m->conv_post, "decoder.conv_post", 1, 0, Cl, 1, 7, 1, 3, 1))
        return -1;
    m->filter = upload(ld, ld->filt, H3_AF_TAPS);
    return m->filter ? 0 : -1;
}

static int load_encoder(loader *ld) {
    audio_vae *m = ld->m;
    const audio_vae_config *c = &m->cfg;
    char p[192], q[192];
    int E = c->encoder_dim, R = c->n_encoder_rates, LD = c->latent_dim, O = c->latent_channels;
    if (load_conv(ld, &m->enc_in, "encoder.block.0", 1, 1, 1, E, 7, 1, 3, 1)) return -1;
    static const int unit_dil[3] = {1, 3, 9};
    for (int b = 1; b <= R; b++) {
        int C = E << (b - 1), s = c->encoder_rates[b - 1];
        avae_eblock *eb = &m->eb[b - 1];
        for (int r = 0; r < 3; r++) {
            snprintf(p, sizeof p, "encoder.block.%d.block.%d.block.0.alpha", b, r);
            snprintf(q, sizeof q, "encoder.block.%d.block.%d.block.2.alpha", b, r);
            if (load_snake(ld, &eb->s0[r], p, NULL) || load_snake(ld, &eb->s2[r], q, NULL)) return -1;
            snprintf(p, sizeof p, "encoder.block.%d.block.%d.block.1", b, r);
            if (load_conv(ld, &eb->c1[r], p, 1, 1, C, C, 7, 1, 3 * unit_dil[r], unit_dil[r])) return -1;
            snprintf(p, sizeof p, "encoder.block.%d.block.%d.block.3", b, r);
            if (load_conv(ld, &eb->c3[r], p, 1, 1, C, C, 1, 1, 0, 1)) return -1;
        }
        snprintf(p, sizeof p, "encoder.block.%d.block.3.alpha", b);
        if (load_snake(ld, &eb->s3, p, NULL)) return -1;
        snprintf(p, sizeof p, "encoder.block.%d.block.4", b);
        if (load_conv(ld, &eb->down, p, 1, 1, C, 2 * C, 2 * s, s, (s + 1) / 2, 1)) return -1;
    }
    snprintf(p, sizeof p, "encoder.block.%d.alpha", R + 1);
    if (load_snake(ld, &m->enc_snake, p, NULL)) return -1;
    snprintf(p, sizeof p, "encoder.block.%d", R + 2);
    if (load_conv(ld, &m->enc_out, p, 1, 1, E << R, LD, 3, 1, 1, 1)) return -1;

    if (!(m->norm1_w = load_plain(ld, "pre_block.norm1.weight")) || !(m->norm1_b = load_plain(ld, "pre_block.norm1.bias")) ||
        !(m->norm3_w = load_plain(ld, "pre_block.norm3.weight")) || !(m->norm3_b = load_plain(ld, "pre_block.norm3.bias")) ||
        !(m->norm2_w = load_plain(ld, "pre_block.norm2.weight")) || !(m->norm2_b = load_plain(ld, "pre_block.norm2.bias")) ||
        !(m->mlpn_w = load_plain(ld, "pre_block.mlp.norm.weight")) ||
        !(m->mlpn_b = load_plain(ld, "pre_block.mlp.norm.bias")))
        return -1;
    /* qkv: one bias-less linear plus the bias [q_bias ; zero_k_bias ; v_bias] (docs/model/audio_vae.md 6 step 6.2) */
    int64_t n;
    float *qkv_bias = malloc((size_t)(3 * LD) * sizeof(float));
    if (!qkv_bias) return h3_fail(ld->e, "out of memory");
    static const char *bias_names[3] = {"pre_block.attn.q_bias", "pre_block.attn.zero_k_bias", "pre_block.attn.v_bias"};
    for (int i = 0; i < 3; i++) {
        float *h = read_host(ld, bias_names[i], &n);
        if (!h) {
            free(qkv_bias);
            return -1;
        }
        memcpy(qkv_bias + (int64_t)i * LD, h, (size_t)LD * sizeof(float));
        free(h);
    }
    m->qkv_w = (h3_tensor){.dtype = H3_F32, .ndim = 2, .shape = {3 * LD, LD}};
    m->qkv_b = (h3_tensor){.dtype = H3_F32, .ndim = 1, .shape = {3 * LD}};
    m->qkv_b.data = upload(ld, qkv_bias, 3 * LD);
    free(qkv_bias);
    if (!m->qkv_b.data || !(m->qkv_w.data = load_plain(ld, "pre_block.attn.qkv.weight"))) return -1;
    if (load_linear(ld, &m->attn_proj_w, &m->attn_proj_b, "pre_block.attn.proj", O, O) ||
        load_linear(ld, &m->proj_w, &m->proj_b, "pre_block.proj", O, LD) ||
        load_linear(ld, &m->w0, &m->b0, "pre_block.mlp.w0", 2 * O, O) ||
        load_linear(ld, &m->w1, &m->b1, "pre_block.mlp.w1", 2 * O, O) ||
        load_linear(ld, &m->w2, &m->b2, "pre_block.mlp.w2", O, 2 * O))
        return -1;
    return load_conv(ld, &m->mean_proj, "mean_proj", 0, 1, O, O, 1, 1, 0, 1) ||
                   load_conv(ld, &m->logs_proj, "logs_proj", 0, 1, O, O, 1, 1, 0, 1)
               ? -1
               : 0;
}

void audio_vae_free(audio_vae *m) {
    if (!m) return;
    for (int i = 0; i < m->n_allocs; i++) h3_free(m->be, m->allocs[i]);
    free(m->allocs);
    free(m);
}

audio_vae *audio_vae_load(h3_backend *be, const char *dir, int parts, h3_err *e) {
    if (!(parts & AVAE_ALL)) {
        h3_fail(e, "audio_vae_load: parts must include AVAE_DECODER and/or AVAE_ENCODER");
        return NULL;
    }
    if (!h3_ops_supported(be)) {
        h3_fail(e, "%s: the audio VAE ops have no %s twins (ops.h: h3_ops_supported); load it on a CPU backend", dir,
                h3_backend_name(be));
        return NULL;
    }
    audio_vae *m = calloc(1, sizeof *m);
    if (!m) {
        h3_fail(e, "out of memory");
        return NULL;
    }
    m->be = be;
    m->parts = parts & AVAE_ALL;
    loader ld = {.m = m, .e = e};
    if (audio_vae_config_load(dir, &m->cfg, e)) goto fail;
    char path[4096];
    audio_vae_weights_path(dir, path, sizeof path);
    if (!(ld.st = st_set_open(path, e))) goto fail;
    if (check_tensors(&ld, m->parts)) goto fail;
    if ((m->parts & AVAE_DECODER) && load_decoder(&ld)) goto fail;
    if ((m->parts & AVAE_ENCODER) && load_encoder(&ld)) goto fail;
    st_set_free(ld.st);
    return m;
fail:
    st_set_free(ld.st);
    audio_vae_free(m);
    return NULL;
}

audio_vae *audio_vae_new_random(h3_backend *be, const audio_vae_config *cfg, int parts, uint64_t seed, h3_err *e) {
    if (!(parts & AVAE_ALL)) {
        h3_fail(e, "audio_vae_new_random: parts must include AVAE_DECODER and/or AVAE_ENCODER");
        return NULL;
    }
    if (!h3_ops_supported(be)) {
        h3_fail(e, "random audio VAE: the audio VAE ops have no %s twins (ops.h)", h3_backend_name(be));
        return NULL;
    }
    audio_vae *m = calloc(1, sizeof *m);
    h3_expect_list l = {0};
    if (!m) {
        h3_fail(e, "out of memory");
        return NULL;
    }
    m->be = be;
    m->parts = parts & AVAE_ALL;
    m->cfg = *cfg;
    loader ld = {.m = m, .random = &l, .seed = seed, .e = e};
    if (audio_vae_expected_tensors(cfg, &l, e)) goto fail;
    if ((m->parts & AVAE_DECODER) && load_decoder(&ld)) goto fail;
    if ((m->parts & AVAE_ENCODER) && load_encoder(&ld)) goto fail;
    h3_expect_list_free(&l);
    return m;
fail:
    h3_expect_list_free(&l);
    audio_vae_free(m);
    return NULL;
}

const audio_vae_config *audio_vae_get_config(const audio_vae *m) { return &m->cfg; }

/* ------------------------------------------------------------------------------------------------
 * Forward helpers */

static void conv_run(h3_backend *be, const avae_conv *c, float *y, const float *x, int B, int64_t L) {
    h3_conv1d(be, y, x, B, c->cin, L, c->w, c->b, c->cout, c->k, c->stride, c->pad, c->dil);
}

static int64_t conv_len(const avae_conv *c, int64_t L) { return h3_conv1d_out_len(L, c->k, c->stride, c->pad, c->dil); }

static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* Scratch buffers in backend memory, freed together. */
typedef struct workspace {
    h3_backend *be;
    float      *buf[6];
    int         n;
} workspace;

static int ws_alloc(workspace *w, h3_backend *be, int n, const int64_t *elems, h3_err *e) {
    memset(w, 0, sizeof *w);
    w->be = be;
    for (int i = 0; i < n; i++) {
        w->buf[i] = h3_alloc(be, (size_t)max64(elems[i], 1) * sizeof(float));
        w->n = i + 1;
        if (!w->buf[i]) return h3_fail(e, "audio VAE: out of memory allocating %lld floats of scratch",
                                       (long long)elems[i]);
    }
    return 0;
}

static void ws_free(workspace *w) {
    for (int i = 0; i < w->n; i++) h3_free(w->be, w->buf[i]);
    w->n = 0;
}

/* ------------------------------------------------------------------------------------------------
 * Decoder (docs/model/audio_vae.md 5) */

/* Largest [B, C, L] activation of a decode of W latents. */
static int64_t dec_max_elems(const audio_vae_config *c, int B, int64_t W) {
    int64_t mx = max64((int64_t)c->latent_dim, c->decoder_dim) * W, L = W;
    for (int i = 0; i < c->n_decoder_rates; i++) {
        L *= c->decoder_rates[i];
        mx = max64(mx, (int64_t)(c->decoder_dim >> (i + 1)) * L);
    }
    return B * mx;
}

/* One AMP block on h [B, C, L]; x receives the block output; t1/t2 are temps. */
static void amp_forward(audio_vae *m, const avae_amp *a, const float *h, float *x, float *t1, float *t2, int B,
                        int C, int64_t L) {
    h3_backend *be = m->be;
    int64_t n = (int64_t)B * C * L;
    h3_copy(be, x, h, (size_t)n * sizeof(float));
    for (int q = 0; q < a->ndil; q++) {
        h3_snake_alias_free(be, t1, x, B, C, L, a->act[2 * q].freq, a->act[2 * q].inv, m->filter);
        conv_run(be, &a->c1[q], t2, t1, B, L);
        h3_snake_alias_free(be, t1, t2, B, C, L, a->act[2 * q + 1].freq, a->act[2 * q + 1].inv, m->filter);
        conv_run(be, &a->c2[q], t2, t1, B, L);
        h3_add(be, x, t2, x, n, 0); /* hidden = residual + hidden */
    }
}

/* z [B, O, W] -> buf[0] = clamped sample [B, 1, hop*W], buf[4] = conv_post output. */
static void decode_window(audio_vae *m, float *const *buf, const float *z, int B, int64_t W) {
    h3_backend *be = m->be;
    const audio_vae_config *c = &m->cfg;
    float *H = buf[0], *ACC = buf[1], *X = buf[2], *T1 = buf[3], *T2 = buf[4];
    conv_run(be, &m->dec_in, T1, z, B, W);
    conv_run(be, &m->conv_pre, X, T1, B, W);
    int64_t L = W;
    for (int i = 0; i < c->n_decoder_rates; i++) {
        const avae_conv *u = &m->ups[i];
        int C = u->cout;
        h3_conv_transpose1d(be, H, X, B, u->cin, L, u->w, u->b, C, u->k, u->stride, u->pad);
        L *= u->stride;
        for (int j = 0; j < c->n_resblocks; j++) {
            float *x = j == 0 ? ACC : X;
            amp_forward(m, &m->amp[i * c->n_resblocks + j], H, x, T1, T2, B, C, L);
            if (j > 0) h3_add(be, ACC, ACC, X, (int64_t)B * C * L, 0); /* ((r0 + r1) + r2) */
        }
        h3_div_scalar(be, X, ACC, (float)c->n_resblocks, (int64_t)B * C * L);
    }
    int Cl = c->decoder_dim >> c->n_decoder_rates;
    h3_snake_alias_free(be, T1, X, B, Cl, L, m->act_post.freq, m->act_post.inv, m->filter);
    conv_run(be, &m->conv_post, T2, T1, B, L);
    h3_clamp(be, H, T2, -1.0f, 1.0f, (int64_t)B * L);
}

int audio_vae_decode(audio_vae *m, const float *z, int B, int64_t T, int64_t chunk, float *sample,
                     float *pre_clamp, h3_err *e) {
    const audio_vae_config *c = &m->cfg;
    if (!(m->parts & AVAE_DECODER)) return h3_fail(e, "audio VAE: decode needs the decoder (loaded without it)");
    if (B < 1 || T < 1) return h3_fail(e, "audio VAE decode: latents need B >= 1 and T >= 1 (got B %d, T %lld)", B,
                                       (long long)T);
    if (T > INT32_MAX / c->hop) /* lengths are GEMM leading dimensions (int) */
        return h3_fail(e, "audio VAE decode: T %lld latents is too long (at most %d)", (long long)T,
                       INT32_MAX / c->hop);
    int64_t M = audio_vae_decode_margin(c), O = c->latent_channels, hop = c->hop;
    if (chunk <= 0 || chunk > T) chunk = T;
    int64_t maxW = chunk + 2 * M < T ? chunk + 2 * M : T;
    int64_t act = dec_max_elems(c, B, maxW);
    workspace ws;
    if (ws_alloc(&ws, m->be, 6, (int64_t[]){act, act, act, act, act, B * O * maxW}, e)) {
        ws_free(&ws);
        return -1;
    }
    float *zw = malloc((size_t)(B * O * maxW) * sizeof(float));
    if (!zw) {
        ws_free(&ws);
        return h3_fail(e, "out of memory");
    }
    for (int64_t a = 0; a < T; a += chunk) {
        int64_t b = a + chunk < T ? a + chunk : T;
        int64_t lo = a - M > 0 ? a - M : 0, hi = b + M < T ? b + M : T, W = hi - lo;
        /* window [lo, hi): the true clip ends are kept, so edge padding matches the whole decode */
        for (int64_t r = 0; r < B * O; r++) memcpy(zw + r * W, z + r * T + lo, (size_t)W * sizeof(float));
        h3_upload(m->be, ws.buf[5], zw, (size_t)(B * O * W) * sizeof(float));
        decode_window(m, ws.buf, ws.buf[5], B, W);
        for (int i = 0; i < B; i++) {
            size_t off = (size_t)(i * hop * W + (a - lo) * hop), n = (size_t)((b - a) * hop) * sizeof(float);
            h3_download(m->be, sample + i * hop * T + a * hop, ws.buf[0] + off, n);
            if (pre_clamp) h3_download(m->be, pre_clamp + i * hop * T + a * hop, ws.buf[4] + off, n);
        }
    }
    free(zw);
    ws_free(&ws);
    return 0;
}

/* ------------------------------------------------------------------------------------------------
 * Encoder (docs/model/audio_vae.md 6) */

static int64_t enc_max_elems(const audio_vae_config *c, int B, int64_t W) {
    int64_t L = W * c->hop, mx = (int64_t)c->encoder_dim * L;
    for (int b = 0; b < c->n_encoder_rates; b++) {
        int64_t C = (int64_t)c->encoder_dim << b;
        mx = max64(mx, C * L);
        L = L / c->encoder_rates[b] + 2; /* generous: the true length is L / rate */
        mx = max64(mx, 2 * C * L);
    }
    mx = max64(mx, (int64_t)c->latent_dim * (W + 2));
    return B * mx;
}

/* Conv trunk on wave [B, 1, hop*W] -> [B, latent_dim, W], returned in one of buf[0..2]. */
static float *trunk_window(audio_vae *m, float *const *buf, const float *wave, int B, int64_t W, h3_err *e) {
    h3_backend *be = m->be;
    const audio_vae_config *c = &m->cfg;
    float *H = buf[0], *T1 = buf[1], *T2 = buf[2];
    int64_t L = W * c->hop;
    conv_run(be, &m->enc_in, H, wave, B, L);
    for (int bi = 0; bi < c->n_encoder_rates; bi++) {
        const avae_eblock *eb = &m->eb[bi];
        int C = eb->down.cin;
        int64_t n = (int64_t)B * C * L;
        for (int r = 0; r < 3; r++) {
            h3_snake(be, T1, H, B, C, L, eb->s0[r].freq, eb->s0[r].inv);
            conv_run(be, &eb->c1[r], T2, T1, B, L);
            h3_snake(be, T1, T2, B, C, L, eb->s2[r].freq, eb->s2[r].inv);
            conv_run(be, &eb->c3[r], T2, T1, B, L);
            h3_add(be, H, H, T2, n, 0); /* hidden + residual ("same" convs: no crop) */
        }
        h3_snake(be, T1, H, B, C, L, eb->s3.freq, eb->s3.inv);
        int64_t L2 = conv_len(&eb->down, L);
        if (L2 * c->encoder_rates[bi] != L) {
            h3_fail(e, "audio VAE encode: encoder_rates[%d] = %d does not divide the length %lld exactly", bi,
                    c->encoder_rates[bi], (long long)L);
            return NULL;
        }
        conv_run(be, &eb->down, T2, T1, B, L);
        float *t = H;
        H = T2, T2 = t, L = L2;
    }
    h3_snake(be, T1, H, B, m->enc_out.cin, L, m->enc_snake.freq, m->enc_snake.inv);
    conv_run(be, &m->enc_out, T2, T1, B, L);
    return T2;
}

/* pre_block (docs/model/audio_vae.md 6 step 6) + posterior heads on trunk [B, LD, N]; mean/logs [B, O, N] (logs may be NULL). */
static int pre_block_forward(audio_vae *m, const float *trunk, int B, int64_t N, float *mean, float *logs,
                             h3_err *e) {
    h3_backend *be = m->be;
    const audio_vae_config *c = &m->cfg;
    int64_t LD = c->latent_dim, O = c->latent_channels, rows = (int64_t)B * N;
    int H = c->num_attention_heads, hd = (int)(LD / H);
    workspace ws;
    if (ws_alloc(&ws, be, 6, (int64_t[]){rows * LD, rows * LD, rows * 3 * LD, rows * O, rows * O, rows * 4 * O},
                 e)) {
        ws_free(&ws);
        return -1;
    }
    float *X = ws.buf[0], *nrm = ws.buf[1], *qkv = ws.buf[2], *base = ws.buf[3], *Y = ws.buf[4];
    float *s0 = ws.buf[5], *s1 = s0 + rows * O, *h0 = s0 + 2 * rows * O; /* h0: rows x 2O */
    h3_transpose_last2(be, X, trunk, B, LD, N);                      /* [B, N, LD] */
    h3_layernorm(be, nrm, X, rows, LD, m->norm3_w, m->norm3_b, 1e-5f, 0);
    h3_matmul(be, base, nrm, rows, &m->proj_w, &m->proj_b, 0);       /* shortcut 2048 -> 32 */
    h3_layernorm(be, nrm, X, rows, LD, m->norm1_w, m->norm1_b, 1e-5f, 0);
    h3_matmul(be, qkv, nrm, rows, &m->qkv_w, &m->qkv_b, 0);          /* [q | k | v], heads contiguous */
    float scale = (float)(1.0 / sqrt((double)hd));
    for (int b = 0; b < B; b++) {
        const float *q = qkv + (int64_t)b * N * 3 * LD;
        h3_attention(be, X + (int64_t)b * N * LD, LD, q, 3 * LD, q + LD, 3 * LD, q + 2 * LD, 3 * LD, N, N, H, H, hd,
                     scale, 1, 0);
    }
    h3_head_mean_pool(be, s0, X, rows, H, hd, (int)O);                /* mean over heads, pool hd -> O */
    h3_matmul(be, s1, s0, rows, &m->attn_proj_w, &m->attn_proj_b, 0);
    h3_add(be, Y, base, s1, rows * O, 0);                             /* proj(norm3 x) + attn(norm1 x) */
    h3_layernorm(be, s0, Y, rows, O, m->norm2_w, m->norm2_b, 1e-5f, 0);
    h3_layernorm(be, s1, s0, rows, O, m->mlpn_w, m->mlpn_b, 1e-5f, 0); /* the MLP's own norm */
    h3_matmul(be, h0, s1, rows, &m->w0, &m->b0, 0);
    h3_gelu_tanh(be, h0, h0, rows * 2 * O, 0);
    h3_matmul(be, nrm, s1, rows, &m->w1, &m->b1, 0);
    h3_mul(be, h0, h0, nrm, rows * 2 * O, 0);
    h3_matmul(be, base, h0, rows, &m->w2, &m->b2, 0);
    h3_add(be, Y, Y, base, rows * O, 0);
    h3_transpose_last2(be, s0, Y, B, N, O);                           /* [B, O, N] */
    conv_run(be, &m->mean_proj, mean, s0, B, N);
    if (logs) conv_run(be, &m->logs_proj, logs, s0, B, N);
    ws_free(&ws);
    return 0;
}

int audio_vae_encode(audio_vae *m, const float *wave, int B, int64_t S, int64_t chunk, float *mean, float *logs,
                     h3_err *e) {
    const audio_vae_config *c = &m->cfg;
    if (!(m->parts & AVAE_ENCODER)) return h3_fail(e, "audio VAE: encode needs the encoder (loaded without it)");
    if (B < 1 || S < 1) return h3_fail(e, "audio VAE encode: sample needs B >= 1 and N >= 1 samples (got B %d, N %lld)",
                                       B, (long long)S);
    if (S > INT32_MAX - c->hop)
        return h3_fail(e, "audio VAE encode: %lld samples is too long (at most %d)", (long long)S, INT32_MAX - c->hop);
    int64_t hop = c->hop, N = (S + hop - 1) / hop, Sp = N * hop, LD = c->latent_dim, O = c->latent_channels;
    int64_t M = audio_vae_encode_margin(c);
    if (chunk <= 0 || chunk > N) chunk = N;
    int64_t maxW = chunk + 2 * M < N ? chunk + 2 * M : N;
    int64_t act = enc_max_elems(c, B, maxW);
    int rc = -1;
    float *wp = calloc((size_t)(B * Sp), sizeof(float)); /* right zero-padding to a hop multiple (docs/model/audio_vae.md 6 step 1) */
    float *trunk = h3_alloc(m->be, (size_t)(B * LD * N) * sizeof(float));
    float *dmean = h3_alloc(m->be, (size_t)(B * O * N) * sizeof(float));
    float *dlogs = logs ? h3_alloc(m->be, (size_t)(B * O * N) * sizeof(float)) : NULL;
    workspace ws = {0};
    if (!wp || !trunk || !dmean || (logs && !dlogs)) {
        h3_fail(e, "audio VAE encode: out of memory");
        goto done;
    }
    for (int i = 0; i < B; i++) memcpy(wp + i * Sp, wave + i * S, (size_t)S * sizeof(float));
    if (ws_alloc(&ws, m->be, 4, (int64_t[]){act, act, act, B * hop * maxW}, e)) goto done;
    for (int64_t a = 0; a < N; a += chunk) {
        int64_t b = a + chunk < N ? a + chunk : N;
        int64_t lo = a - M > 0 ? a - M : 0, hi = b + M < N ? b + M : N, W = hi - lo;
        /* windows start on hop multiples, so every strided conv keeps its phase (docs/model/audio_vae.md 9.2) */
        for (int i = 0; i < B; i++)
            h3_upload(m->be, ws.buf[3] + i * hop * W, wp + i * Sp + lo * hop, (size_t)(hop * W) * sizeof(float));
        float *res = trunk_window(m, ws.buf, ws.buf[3], B, W, e);
        if (!res) goto done;
        for (int64_t r = 0; r < B * LD; r++)
            h3_copy(m->be, trunk + r * N + a, res + r * W + (a - lo), (size_t)(b - a) * sizeof(float));
    }
    ws_free(&ws); /* the trunk scratch is the big part; release it before the attention */
    if (pre_block_forward(m, trunk, B, N, dmean, dlogs, e)) goto done;
    h3_download(m->be, mean, dmean, (size_t)(B * O * N) * sizeof(float));
    if (logs) h3_download(m->be, logs, dlogs, (size_t)(B * O * N) * sizeof(float));
    rc = 0;
done:
    ws_free(&ws);
    free(wp);
    h3_free(m->be, trunk);
    h3_free(m->be, dmean);
    h3_free(m->be, dlogs);
    return rc;
}

/* ------------------------------------------------------------------------------------------------
 * Pipeline helpers (docs/model/audio_vae.md 7) */

int audio_vae_denormalize(const audio_vae_config *cfg, float *z, int B, int64_t T, h3_err *e) {
    if (!cfg->has_latent_stats) return h3_fail(e, "audio_vae config: latents_mean/latents_std missing");
    int C = cfg->latent_channels;
    for (int64_t r = 0; r < (int64_t)B * C; r++) {
        float s = cfg->latents_std[r % C], mu = cfg->latents_mean[r % C];
        for (int64_t t = 0; t < T; t++) {
            float v = z[r * T + t] * s; /* two roundings, as the reference's mul then add */
            z[r * T + t] = v + mu;
        }
    }
    return 0;
}

int audio_vae_normalize(const audio_vae_config *cfg, float *z, int B, int64_t T, h3_err *e) {
    if (!cfg->has_latent_stats) return h3_fail(e, "audio_vae config: latents_mean/latents_std missing");
    int C = cfg->latent_channels;
    for (int64_t r = 0; r < (int64_t)B * C; r++) {
        float s = cfg->latents_std[r % C], mu = cfg->latents_mean[r % C];
        for (int64_t t = 0; t < T; t++) z[r * T + t] = (z[r * T + t] - mu) / s;
    }
    return 0;
}

void audio_vae_rows_to_latents(const float *rows, int B, int64_t T, int C, float *z) {
    for (int b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int c = 0; c < C; c++) z[((int64_t)b * C + c) * T + t] = rows[((int64_t)b * T + t) * C + c];
}

void audio_vae_latents_to_rows(const float *z, int B, int64_t T, int C, float *rows) {
    for (int b = 0; b < B; b++)
        for (int64_t t = 0; t < T; t++)
            for (int c = 0; c < C; c++) rows[((int64_t)b * T + t) * C + c] = z[((int64_t)b * C + c) * T + t];
}
