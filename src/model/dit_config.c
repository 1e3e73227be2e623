/* The DiT's config (docs/model/dit.md 1: every field in a plausible range), the tensor list it implies in either
 * checkpoint layout (section 2), and how a single-file transformer is told apart (docs/checkpoints.md). Pure
 * functions of the config and the files' headers: dit.c loads the weights they describe. */
#include "dit.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "../io/config.h"
#include "../io/gguf.h"
#include "../io/safetensors.h"
#include "dit_internal.h"

/* ---------------------------------------------------------------- config (docs/model/dit.md 1) */

/* Plausible ranges (docs/robustness.md): a little beyond the release's sizes; the tensor shapes are then checked
 * against the shard headers, whose extents are checked against the files. */
enum { DIT_MAX_LAYERS = 1024, DIT_MAX_DIM = 1 << 16, DIT_MAX_FFN = 1 << 18 };

int dit_config_parse(const json_t *root, const char *path, dit_config *cfg, h3_err *e) {
    memset(cfg, 0, sizeof *cfg);
    if (!json_is_object(root)) return h3_fail(e, "%s: not a JSON object", path);
    const char *cls = json_string_value(json_object_get(root, "_class_name"));
    /* The original FL2VA/Ref2VA config (class MiniMaxH3DiTModel) names the same values differently. */
    int orig = (cls && !strcmp(cls, "MiniMaxH3DiTModel")) ||
               (!cls && json_object_get(root, "ffn_hidden_size") != NULL);
    cfg->original_layout = orig;
    h3_cfg c = h3_cfg_of(root, path, "", e);
    /* Missing keys take the release values, as diffusers' register_to_config defaults do. */
    h3_cfg_int(&c, "num_attention_heads", 56, 1, 1024, &cfg->num_attention_heads);
    h3_cfg_int(&c, "attention_head_dim", 128, 1, 4096, &cfg->attention_head_dim);
    h3_cfg_int(&c, "hidden_size", 5376, 1, DIT_MAX_DIM, &cfg->hidden_size);
    h3_cfg_int(&c, "num_layers", 50, 1, DIT_MAX_LAYERS, &cfg->num_layers);
    h3_cfg_int(&c, orig ? "token_refiner_num_layers" : "num_refiner_layers", 2, 1, DIT_MAX_LAYERS, &cfg->num_refiner_layers);
    h3_cfg_int(&c, orig ? "ffn_hidden_size" : "ffn_dim", 14336, 1, DIT_MAX_FFN, &cfg->ffn_dim);
    h3_cfg_int(&c, orig ? "latents_dim" : "in_channels", 24, 1, 4096, &cfg->in_channels);
    h3_cfg_int(&c, orig ? "audio_latents_dim" : "audio_in_channels", 32, 1, 4096, &cfg->audio_in_channels);
    h3_cfg_int(&c, "text_dim", 5120, 1, DIT_MAX_DIM, &cfg->text_dim);
    h3_cfg_int(&c, orig ? "timestep_input_dim" : "freq_dim", 256, 2, DIT_MAX_DIM, &cfg->freq_dim);
    h3_cfg_int(&c, orig ? "time_embed_hidden_size" : "time_embed_hidden_dim", 5376, 1, DIT_MAX_DIM,
               &cfg->time_embed_hidden_dim);
    h3_cfg_int(&c, "time_embed_dim", 2688, 1, DIT_MAX_DIM, &cfg->time_embed_dim);
    h3_cfg_int(&c, orig ? "rope_inv_freq_len" : "rope_freq_dim", 16, 1, 4096, &cfg->rope_freq_dim);
    double th, eps[3];
    h3_cfg_num(&c, "rope_theta", 10000.0, 1e-3, 1e12, &th);
    h3_cfg_num(&c, "norm_eps", 1e-5, 1e-30, 1.0, &eps[0]);
    h3_cfg_num(&c, "qk_norm_eps", 1e-5, 1e-30, 1.0, &eps[1]);
    h3_cfg_num(&c, "final_norm_eps", 1e-5, 1e-30, 1.0, &eps[2]);
    cfg->patch_size[0] = 1, cfg->patch_size[1] = 2, cfg->patch_size[2] = 2;
    int np = 3;
    h3_cfg_int_list(&c, "patch_size", 0, 3, 3, 1, 64, cfg->patch_size, &np);
    if (c.rc) return -1;
    cfg->rope_theta = (float)th;
    cfg->norm_eps = (float)eps[0], cfg->qk_norm_eps = (float)eps[1], cfg->final_norm_eps = (float)eps[2];
    if (orig) {
        /* derived sizes the original config spells out (docs/model/dit.md 1) must agree */
        int64_t a = 18 * (int64_t)cfg->hidden_size, f = 2 * (int64_t)cfg->hidden_size, got;
        if (h3_cfg_i64(&c, "adaln_out_features", a, 1, INT32_MAX, &got) == 0 && got != a)
            h3_cfg_fail(&c, "'adaln_out_features' must be 18 x hidden_size = %lld", (long long)a);
        if (h3_cfg_i64(&c, "final_adaln_out_features", f, 1, INT32_MAX, &got) == 0 && got != f)
            h3_cfg_fail(&c, "'final_adaln_out_features' must be 2 x hidden_size = %lld", (long long)f);
        if (c.rc) return -1;
    }
    if (6 * cfg->rope_freq_dim > cfg->attention_head_dim)
        return h3_fail(e, "%s: 6 x rope_freq_dim (%d) must not exceed attention_head_dim (%d)", path,
                       6 * cfg->rope_freq_dim, cfg->attention_head_dim);
    if (cfg->freq_dim % 2) return h3_fail(e, "%s: freq_dim (%d) must be even", path, cfg->freq_dim);
    return 0;
}

static int parse_untyped(const json_t *root, const char *path, void *cfg, h3_err *e) {
    return dit_config_parse(root, path, cfg, e);
}

int dit_config_load(const char *dir, dit_config *cfg, h3_err *e) {
    return h3_json_parse_config_in(dir, parse_untyped, cfg, sizeof *cfg, e);
}

/* ---------------------------------------------------------------- tensor names (docs/model/dit.md 2) */

#define SHAPE(...) ((int64_t[]){__VA_ARGS__})

/* A main or refiner block's tensors in one layout (docs/model/dit.md 2.4), p its name prefix, in the order of the
 * stored files. */
static int expect_block(const dit_config *c, h3_expect_list *l, const char *p) {
    int64_t H = c->hidden_size, I = (int64_t)c->num_attention_heads * c->attention_head_dim;
    int64_t D = c->attention_head_dim, FF = c->ffn_dim;
    int rc = 0;
    if (!c->original_layout) {
        rc |= h3_expect_add(l, H3_BF16, 1, SHAPE(H), "%s.norm1.weight", p);
        rc |= h3_expect_add(l, H3_BF16, 2, SHAPE(I, H), "%s.attn.to_q.weight", p);
        rc |= h3_expect_add(l, H3_BF16, 2, SHAPE(I, H), "%s.attn.to_k.weight", p);
        rc |= h3_expect_add(l, H3_BF16, 2, SHAPE(I, H), "%s.attn.to_v.weight", p);
        rc |= h3_expect_add(l, H3_BF16, 1, SHAPE(D), "%s.attn.norm_q.weight", p);
        rc |= h3_expect_add(l, H3_BF16, 1, SHAPE(D), "%s.attn.norm_k.weight", p);
        rc |= h3_expect_add(l, H3_BF16, 2, SHAPE(H, I), "%s.attn.to_out.0.weight", p);
        rc |= h3_expect_add(l, H3_BF16, 1, SHAPE(H), "%s.norm2.weight", p);
        rc |= h3_expect_add(l, H3_BF16, 2, SHAPE(2 * FF, H), "%s.ff.net.0.proj.weight", p);
        rc |= h3_expect_add(l, H3_BF16, 2, SHAPE(H, FF), "%s.ff.net.2.weight", p);
    } else {
        rc |= h3_expect_add(l, H3_BF16, 1, SHAPE(H), "%s.norm1.weight", p);
        rc |= h3_expect_add(l, H3_BF16, 1, SHAPE(H), "%s.norm2.weight", p);
        rc |= h3_expect_add(l, H3_BF16, 2, SHAPE(3 * I, H), "%s.attn.qkv_proj.weight", p);
        rc |= h3_expect_add(l, H3_BF16, 1, SHAPE(D), "%s.attn.q_norm.weight", p);
        rc |= h3_expect_add(l, H3_BF16, 1, SHAPE(D), "%s.attn.k_norm.weight", p);
        rc |= h3_expect_add(l, H3_BF16, 2, SHAPE(H, I), "%s.attn.out_proj.weight", p);
        rc |= h3_expect_add(l, H3_BF16, 2, SHAPE(2 * FF, H), "%s.mlp.fc1.weight", p);
        rc |= h3_expect_add(l, H3_BF16, 2, SHAPE(H, FF), "%s.mlp.fc2.weight", p);
    }
    return rc;
}

int dit_expected_tensors(const dit_config *c, h3_expect_list *l, h3_err *e) {
    int64_t H = c->hidden_size, TD = c->time_embed_dim, TH = c->time_embed_hidden_dim;
    int64_t VP = (int64_t)c->in_channels * c->patch_size[0] * c->patch_size[1] * c->patch_size[2];
    int64_t CA = c->audio_in_channels, TX = c->text_dim, FD = c->freq_dim;
    const int orig = c->original_layout, R = c->num_refiner_layers;
    int rc = 0;
    /* the input and output layers: the same tensors in the same order in both layouts, under their two names */
#define IO(dtype, ndim, shape, dname, oname) (rc |= h3_expect_add(l, dtype, ndim, shape, "%s", orig ? oname : dname))
    IO(H3_F32, 2, SHAPE(H, VP), "proj_in.weight", "video_patch_proj.weight");
    IO(H3_F32, 1, SHAPE(H), "proj_in.bias", "video_patch_proj.bias");
    IO(H3_F32, 2, SHAPE(H, CA), "audio_proj_in.weight", "audio_patch_proj.weight");
    IO(H3_F32, 1, SHAPE(H), "audio_proj_in.bias", "audio_patch_proj.bias");
    IO(H3_BF16, 2, SHAPE(H, TX), "context_embedder.weight", "condition_proj.weight");
    IO(H3_BF16, 1, SHAPE(H), "context_embedder.bias", "condition_proj.bias");
    IO(H3_F32, 2, SHAPE(TH, FD), "time_embedder.linear_1.weight", "time_embedder.proj_in.weight");
    IO(H3_F32, 1, SHAPE(TH), "time_embedder.linear_1.bias", "time_embedder.proj_in.bias");
    IO(H3_F32, 2, SHAPE(TD, TH), "time_embedder.linear_2.weight", "time_embedder.proj_out.weight");
    IO(H3_F32, 1, SHAPE(TD), "time_embedder.linear_2.bias", "time_embedder.proj_out.bias");
    if (orig && !c->qkv_stacked) /* single files: diffusers recomputes the table from the config, and so does h3 */
        rc |= h3_expect_add(l, H3_F32, 1, SHAPE(c->rope_freq_dim), "rope.inv_freq");
    for (int b = 0; b < R + c->num_layers && !rc; b++) {
        int ref = b < R;
        char p[96];
        if (ref) snprintf(p, sizeof p, orig ? "token_refiner.blocks.%d" : "token_refiner.refiner_blocks.%d", b);
        else snprintf(p, sizeof p, orig ? "blocks.%d" : "transformer_blocks.%d", b - R);
        rc |= expect_block(c, l, p);
        if (!ref) {
            rc |= h3_expect_add(l, H3_BF16, 2, SHAPE(18 * H, TD), "%s.adaln_proj.linear.weight", p);
            rc |= h3_expect_add(l, H3_BF16, 1, SHAPE(18 * H), "%s.adaln_proj.linear.bias", p);
        }
        if (!orig && b == R - 1) /* diffusers: the refiner's final norm right after its blocks */
            rc |= h3_expect_add(l, H3_BF16, 1, SHAPE(H), "token_refiner.final_norm.weight");
    }
    if (orig || R == 0) rc |= h3_expect_add(l, H3_BF16, 1, SHAPE(H), "token_refiner.final_norm.weight");
    IO(H3_BF16, 1, SHAPE(H), "norm_out.norm.weight", "final_layer.norm.weight");
    IO(H3_BF16, 2, SHAPE(2 * H, TD), "norm_out.linear.weight", "final_layer.adaln_proj.linear.weight");
    IO(H3_BF16, 1, SHAPE(2 * H), "norm_out.linear.bias", "final_layer.adaln_proj.linear.bias");
    IO(H3_F32, 2, SHAPE(VP, H), "proj_out.weight", "final_layer.video_out.weight");
    IO(H3_F32, 1, SHAPE(VP), "proj_out.bias", "final_layer.video_out.bias");
    IO(H3_F32, 2, SHAPE(CA, H), "audio_proj_out.weight", "final_layer.audio_out.weight");
    IO(H3_F32, 1, SHAPE(CA), "audio_proj_out.bias", "final_layer.audio_out.bias");
#undef IO
    if (rc) return h3_expect_fail(l, "DiT", e);
    return 0;
}

/* Whether file starts with GGUF's magic. */
int dit_is_gguf(const char *file) {
    char b[4] = {0};
    FILE *f = fopen(file, "rb");
    size_t n = f ? fread(b, 1, sizeof b, f) : 0;
    if (f) fclose(f);
    return n == 4 && !memcmp(b, "GGUF", 4);
}

/* The name prefix of a single-file transformer held by st or g ("" or a ComfyUI prefix), or NULL with e filled when
 * the file is not one (docs/checkpoints.md: told by its key names, as diffusers tells it) or is a pruned one. */
const char *dit_single_file_prefix(const st_set *st, const gguf_file *g, const char *file, h3_err *e) {
    static const char *const prefixes[] = {"", "model.diffusion_model.", "diffusion_model."};
    const char *found = NULL;
    for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes && !found; i++) {
        char key[128];
        snprintf(key, sizeof key, "%stoken_refiner.blocks.0.attn.qkv_proj.weight", prefixes[i]);
        if (st ? st_set_entry(st, key, NULL) != NULL : gguf_find(g, key) != NULL) found = prefixes[i];
    }
    if (!found) {
        h3_fail(e, "%s: not a MiniMax-H3 single-file transformer (no tensor token_refiner.blocks.0.attn.qkv_proj.weight, "
                   "with or without a model.diffusion_model. or diffusion_model. prefix)", file);
        return NULL;
    }
    char pruned[128];
    snprintf(pruned, sizeof pruned, "%sadaln_t_table", found);
    if (st ? st_set_entry(st, pruned, NULL) != NULL : gguf_find(g, pruned) != NULL) {
        h3_fail(e, "%s: a pruned MiniMax-H3 checkpoint (adaln_t_table in place of time_embedder): not supported, as in "
                   "diffusers; use an unpruned file", file);
        return NULL;
    }
    return found;
}

int dit_single_file_check(const char *dir, const char *file, h3_err *e) {
    dit_config c;
    if (dit_config_load(dir, &c, e) != 0) return -1;
    if (c.original_layout)
        return h3_fail(e, "%s: a single-file transformer needs the diffusers config (MiniMaxH3Transformer3DModel), not "
                          "the original one", dir);
    st_set *st = NULL;
    gguf_file *g = NULL;
    if (dit_is_gguf(file) ? !(g = gguf_open(file, e)) : !(st = st_set_open_headers(file, e))) return -1;
    const int rc = dit_single_file_prefix(st, g, file, e) ? 0 : -1;
    st_set_free(st);
    gguf_close(g);
    return rc;
}
