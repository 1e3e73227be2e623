/* MiniMax-H3 video VAE: the config (docs/model/video_vae.md 1) and the tensor list of each part (2.1, Appendix A),
 * apart from the model and the decoder (video_vae.c). */
#include "video_vae.h"
#include "video_vae_internal.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "../io/config.h"

/* ------------------------------------------------------------------------------------------------
 * Configuration (docs/model/video_vae.md 1)
 * ---------------------------------------------------------------------------------------------- */

static const int default_blocks[6] = {128, 256, 256, 512, 512, 1024};
static const int default_sfac[6] = {2, 2, 2, 2, 1, 1};
static const int default_tfac[6] = {1, 2, 2, 1, 1, 1};

static int pos_mod(int a, int m) { return ((a % m) + m) % m; }

static int cfg_derive(video_vae_config *c, double rope_ratio, const char *path, h3_err *e) {
    if (c->in_channels <= 0 || c->out_channels <= 0 || c->latent_channels <= 0 || c->latent_channels > VVAE_MAX_LATENT)
        return h3_fail(e, "%s: in/out/latent channels must be positive (latent at most %d)", path, VVAE_MAX_LATENT);
    if (c->num_levels < 1) return h3_fail(e, "%s: block_out_channels must not be empty", path);
    if (c->layers_per_block < 1) return h3_fail(e, "%s: layers_per_block must be >= 1", path);
    if (c->norm_num_groups < 1) return h3_fail(e, "%s: norm_num_groups must be >= 1", path);
    c->S = 1;
    c->R = 1;
    for (int l = 0; l < c->num_levels; l++) {
        if (c->block_out_channels[l] <= 0 || c->block_out_channels[l] % c->norm_num_groups)
            return h3_fail(e, "%s: block_out_channels[%d] = %d must be a positive multiple of norm_num_groups %d", path,
                           l, c->block_out_channels[l], c->norm_num_groups);
        if (c->spatial_factors[l] < 1 || c->spatial_factors[l] > 2 || c->temporal_factors[l] < 1 ||
            c->temporal_factors[l] > 2)
            return h3_fail(e, "%s: downsample factors of level %d must be 1 or 2 (got %d spatial, %d temporal)", path,
                           l, c->spatial_factors[l], c->temporal_factors[l]);
        c->S *= c->spatial_factors[l];
        c->R *= c->temporal_factors[l];
    }
    if (c->dec_layers < 0 || c->dec_heads < 1 || c->dec_head_dim < 1 || c->dec_registers < 0 || c->dec_ffn_mult < 1)
        return h3_fail(e, "%s: decoder sizes must be positive", path);
    c->dim = c->dec_heads * c->dec_head_dim;
    c->rope_dim = (int)((double)c->dec_head_dim * rope_ratio); /* Python int(head_dim * ratio) */
    if (c->rope_dim <= 0 || c->rope_dim % 6 || c->rope_dim > c->dec_head_dim || c->rope_dim > 384)
        return h3_fail(e, "%s: rotary dims int(%d * %g) = %d must be a positive multiple of 6, <= head dim and <= 384", path,
                       c->dec_head_dim, rope_ratio, c->rope_dim);
    if (c->clip_length < 1 || c->token_drop < 0)
        return h3_fail(e, "%s: clip_length must be >= 1 and token_drop >= 0", path);
    c->P = pos_mod(-c->clip_length, c->R);
    c->K = (c->clip_length + c->R - 1) / c->R;
    c->O = pos_mod(-c->token_drop, c->K);
    c->FO = c->O * c->R - c->P > 0 ? c->O * c->R - c->P : 0;
    c->CF = c->K * c->R;
    c->patch_dim = c->out_channels * c->R * c->S * c->S;
    c->ffn_inner = c->dim * c->dec_ffn_mult;
    if (c->clip_length < c->R) return h3_fail(e, "%s: clip_length must be >= the temporal ratio %d", path, c->R);
    for (int i = 0; i < c->latent_channels; i++)
        if (!(c->latents_std[i] != 0.0f)) return h3_fail(e, "%s: latents_std[%d] must be non-zero", path, i);
    return 0;
}

int video_vae_config_parse(const json_t *root, const char *path, video_vae_config *c, h3_err *e) {
    memset(c, 0, sizeof *c);
    if (!json_is_object(root)) return h3_fail(e, "%s: expected a JSON object", path);
    c->num_levels = 6;
    for (int l = 0; l < 6; l++) {
        c->block_out_channels[l] = default_blocks[l];
        c->spatial_factors[l] = default_sfac[l];
        c->temporal_factors[l] = default_tfac[l];
    }
    c->reflect = 1;
    double norm_eps, theta, ratio, dec_eps;
    double mean[VVAE_MAX_LATENT], std[VVAE_MAX_LATENT];
    int n_blocks = 6, n_sf = 6, n_tf = 6, n_mean = 24, n_std = 24;
    for (int i = 0; i < 24; i++) mean[i] = 0.0, std[i] = 1.0;
    /* Missing keys keep the diffusers constructor default (ConfigMixin does the same); every field has a plausible
     * range (docs/robustness.md). */
    h3_cfg g = h3_cfg_of(root, path, "", e);
    h3_cfg_int(&g, "in_channels", 3, 1, 64, &c->in_channels);
    h3_cfg_int(&g, "out_channels", 3, 1, 64, &c->out_channels);
    h3_cfg_int(&g, "latent_channels", 24, 1, VVAE_MAX_LATENT, &c->latent_channels);
    h3_cfg_int(&g, "layers_per_block", 2, 1, 64, &c->layers_per_block);
    h3_cfg_int(&g, "norm_num_groups", 32, 1, 4096, &c->norm_num_groups);
    h3_cfg_num(&g, "norm_eps", 1e-6, 0.0, 1.0, &norm_eps);
    h3_cfg_int(&g, "decoder_num_layers", 36, 0, 1024, &c->dec_layers);
    h3_cfg_int(&g, "decoder_num_attention_heads", 32, 1, 1024, &c->dec_heads);
    h3_cfg_int(&g, "decoder_attention_head_dim", 64, 1, 4096, &c->dec_head_dim);
    h3_cfg_int(&g, "decoder_num_register_tokens", 4, 0, 4096, &c->dec_registers);
    h3_cfg_int(&g, "decoder_ffn_mult", 4, 1, 64, &c->dec_ffn_mult);
    h3_cfg_num(&g, "decoder_rope_theta", 100.0, 1e-3, 1e12, &theta);
    h3_cfg_num(&g, "decoder_rope_dim_ratio", 0.75, 0.0, 1.0, &ratio);
    h3_cfg_num(&g, "decoder_norm_eps", 1e-5, 0.0, 1.0, &dec_eps);
    h3_cfg_int(&g, "clip_length", 17, 1, 4096, &c->clip_length);
    h3_cfg_int(&g, "token_drop", 3, 0, 4096, &c->token_drop);
    h3_cfg_int_list(&g, "block_out_channels", 0, 1, VVAE_MAX_LEVELS, 1, 1 << 16, c->block_out_channels, &n_blocks);
    h3_cfg_int_list(&g, "spatial_downsample_factors", 0, 1, VVAE_MAX_LEVELS, 1, 2, c->spatial_factors, &n_sf);
    h3_cfg_int_list(&g, "temporal_downsample_factors", 0, 1, VVAE_MAX_LEVELS, 1, 2, c->temporal_factors, &n_tf);
    h3_cfg_num_list(&g, "latents_mean", 0, 0, VVAE_MAX_LATENT, -1e30, 1e30, mean, &n_mean);
    h3_cfg_num_list(&g, "latents_std", 0, 0, VVAE_MAX_LATENT, -1e30, 1e30, std, &n_std);
    if (g.rc) return -1;
    if (n_sf != n_blocks || n_tf != n_blocks)
        return h3_fail(e, "%s: block_out_channels, spatial_downsample_factors and temporal_downsample_factors need the "
                          "same length (%d, %d, %d)", path, n_blocks, n_sf, n_tf);
    c->num_levels = n_blocks;
    if (n_mean != c->latent_channels || n_std != c->latent_channels)
        return h3_fail(e, "%s: latents_mean/latents_std need latent_channels = %d entries (got %d, %d)", path,
                       c->latent_channels, n_mean, n_std);
    for (int i = 0; i < c->latent_channels; i++) c->latents_mean[i] = (float)mean[i], c->latents_std[i] = (float)std[i];
    json_t *mode = json_object_get(root, "spatial_padding_mode");
    if (mode) {
        const char *m = json_string_value(mode);
        if (m && !strcmp(m, "reflect")) c->reflect = 1;
        else if (m && (!strcmp(m, "constant") || !strcmp(m, "zeros"))) c->reflect = 0;
        else return h3_fail(e, "%s: spatial_padding_mode must be \"reflect\" or \"constant\"", path);
    }
    c->norm_eps = (float)norm_eps;
    c->rope_theta = (float)theta;
    c->rope_dim_ratio = (float)ratio;
    c->dec_norm_eps = (float)dec_eps;
    return cfg_derive(c, ratio, path, e);
}

static int parse_untyped(const json_t *root, const char *path, void *cfg, h3_err *e) {
    return video_vae_config_parse(root, path, cfg, e);
}

int video_vae_config_load(const char *vae_dir, video_vae_config *c, h3_err *e) {
    return h3_json_parse_config_in(vae_dir, parse_untyped, c, sizeof *c, e);
}

/* ------------------------------------------------------------------------------------------------
 * Tensor list (docs/model/video_vae.md 2.1, Appendix A)
 * ---------------------------------------------------------------------------------------------- */

#define SHAPE(...) (int64_t[]){__VA_ARGS__}

int video_vae_expect_parts(const video_vae_config *c, int parts, h3_expect_list *l, h3_err *e) {
    int bad = 0;
    if (parts & VIDEO_VAE_ENCODER) {
        int64_t c0 = c->block_out_channels[0], z2 = 2 * c->latent_channels;
        bad |= h3_expect_add(l, H3_F32, 5, SHAPE(c0, c->in_channels, 3, 3, 3), "encoder.conv_in.weight");
        bad |= h3_expect_add(l, H3_F32, 1, SHAPE(c0), "encoder.conv_in.bias");
        for (int L = 0; L < c->num_levels; L++) {
            int64_t co = c->block_out_channels[L], cin = L ? c->block_out_channels[L - 1] : c0;
            for (int r = 0; r < c->layers_per_block; r++) {
                int64_t ci = r ? co : cin;
                const char *p = "encoder.down_blocks.%d.resnets.%d.%s";
                bad |= h3_expect_add(l, H3_F32, 1, SHAPE(ci), p, L, r, "norm1.weight");
                bad |= h3_expect_add(l, H3_F32, 1, SHAPE(ci), p, L, r, "norm1.bias");
                bad |= h3_expect_add(l, H3_F32, 5, SHAPE(co, ci, 3, 3, 3), p, L, r, "conv1.weight");
                bad |= h3_expect_add(l, H3_F32, 1, SHAPE(co), p, L, r, "conv1.bias");
                bad |= h3_expect_add(l, H3_F32, 1, SHAPE(co), p, L, r, "norm2.weight");
                bad |= h3_expect_add(l, H3_F32, 1, SHAPE(co), p, L, r, "norm2.bias");
                bad |= h3_expect_add(l, H3_F32, 5, SHAPE(co, co, 3, 3, 3), p, L, r, "conv2.weight");
                bad |= h3_expect_add(l, H3_F32, 1, SHAPE(co), p, L, r, "conv2.bias");
                if (ci != co) {
                    bad |= h3_expect_add(l, H3_F32, 5, SHAPE(co, ci, 1, 1, 1), p, L, r, "conv_shortcut.weight");
                    bad |= h3_expect_add(l, H3_F32, 1, SHAPE(co), p, L, r, "conv_shortcut.bias");
                }
            }
            if (c->spatial_factors[L] * c->temporal_factors[L] > 1) {
                bad |= h3_expect_add(l, H3_F32, 5, SHAPE(co, co, 3, 3, 3), "encoder.down_blocks.%d.downsamplers.0.conv.weight", L);
                bad |= h3_expect_add(l, H3_F32, 1, SHAPE(co), "encoder.down_blocks.%d.downsamplers.0.conv.bias", L);
            }
        }
        int64_t cl = c->block_out_channels[c->num_levels - 1];
        bad |= h3_expect_add(l, H3_F32, 1, SHAPE(cl), "encoder.norm_out.weight");
        bad |= h3_expect_add(l, H3_F32, 1, SHAPE(cl), "encoder.norm_out.bias");
        bad |= h3_expect_add(l, H3_F32, 5, SHAPE(z2, cl, 3, 3, 3), "encoder.conv_out.weight");
        bad |= h3_expect_add(l, H3_F32, 1, SHAPE(z2), "encoder.conv_out.bias");
        bad |= h3_expect_add(l, H3_F32, 5, SHAPE(z2, z2, 1, 1, 1), "quant_conv.weight");
        bad |= h3_expect_add(l, H3_F32, 1, SHAPE(z2), "quant_conv.bias");
    }
    if (parts & VIDEO_VAE_DECODER) {
        int64_t z = c->latent_channels, D = c->dim, F = c->ffn_inner;
        bad |= h3_expect_add(l, H3_F32, 5, SHAPE(z, z, 1, 1, 1), "post_quant_conv.weight");
        bad |= h3_expect_add(l, H3_F32, 1, SHAPE(z), "post_quant_conv.bias");
        bad |= h3_expect_add(l, H3_F32, 2, SHAPE(D, z), "decoder.proj_in.weight");
        bad |= h3_expect_add(l, H3_F32, 1, SHAPE(D), "decoder.proj_in.bias");
        bad |= h3_expect_add(l, H3_F32, 3, SHAPE(1, c->dec_registers, D), "decoder.register_tokens");
        for (int i = 0; i < c->dec_layers && !bad; i++) {
            const char *p = "decoder.transformer_blocks.%d.%s";
            bad |= h3_expect_add(l, H3_F32, 1, SHAPE(D), p, i, "norm1.weight");
            bad |= h3_expect_add(l, H3_F32, 2, SHAPE(D, D), p, i, "attn.to_q.weight");
            bad |= h3_expect_add(l, H3_F32, 1, SHAPE(D), p, i, "attn.to_q.bias");
            bad |= h3_expect_add(l, H3_F32, 2, SHAPE(D, D), p, i, "attn.to_k.weight");
            bad |= h3_expect_add(l, H3_F32, 1, SHAPE(D), p, i, "attn.to_k.bias");
            bad |= h3_expect_add(l, H3_F32, 2, SHAPE(D, D), p, i, "attn.to_v.weight");
            bad |= h3_expect_add(l, H3_F32, 1, SHAPE(D), p, i, "attn.to_v.bias");
            bad |= h3_expect_add(l, H3_F32, 2, SHAPE(D, D), p, i, "attn.to_out.0.weight");
            bad |= h3_expect_add(l, H3_F32, 1, SHAPE(D), p, i, "attn.to_out.0.bias");
            bad |= h3_expect_add(l, H3_F32, 1, SHAPE(D), p, i, "scale1");
            bad |= h3_expect_add(l, H3_F32, 1, SHAPE(D), p, i, "norm2.weight");
            bad |= h3_expect_add(l, H3_F32, 2, SHAPE(2 * F, D), p, i, "ff.net.0.proj.weight");
            bad |= h3_expect_add(l, H3_F32, 1, SHAPE(2 * F), p, i, "ff.net.0.proj.bias");
            bad |= h3_expect_add(l, H3_F32, 2, SHAPE(D, F), p, i, "ff.net.2.weight");
            bad |= h3_expect_add(l, H3_F32, 1, SHAPE(D), p, i, "ff.net.2.bias");
            bad |= h3_expect_add(l, H3_F32, 1, SHAPE(D), p, i, "scale2");
        }
        bad |= h3_expect_add(l, H3_F32, 1, SHAPE(D), "decoder.norm_out.weight");
        bad |= h3_expect_add(l, H3_F32, 1, SHAPE(D), "decoder.norm_out.bias");
        bad |= h3_expect_add(l, H3_F32, 2, SHAPE(c->patch_dim, D), "decoder.proj_out.weight");
        bad |= h3_expect_add(l, H3_F32, 1, SHAPE(c->patch_dim), "decoder.proj_out.bias");
    }
    return bad ? h3_expect_fail(l, "video VAE", e) : 0;
}

int video_vae_expected_tensors(const video_vae_config *cfg, h3_expect_list *out, h3_err *e) {
    return video_vae_expect_parts(cfg, VIDEO_VAE_ENCODER | VIDEO_VAE_DECODER, out, e);
}
