#include "info_components.h"
#include "pipeline/sched.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/config.h"
#include "io/snapshot.h"
#include "model/audio_vae.h"
#include "model/dit.h"
#include "model/dit_int8.h"
#include "model/text_encoder.h"
#include "model/video_vae.h"

/* The DiT's list, adjusted to an int8 snapshot's profile (dit_int8.h: the scope rule, scale values included, so
 * the weights are opened, not only their headers; a set that does not open is check_weights' message). */
static int dit_expected_dir(const char *dir, h3_expect_list *out, h3_err *e) {
    dit_config cfg;
    if (dit_config_load(dir, &cfg, e) != 0 || dit_expected_tensors(&cfg, out, e) != 0) return -1;
    h3_err ignored = {{0}};
    st_set *s = st_set_open(dir, &ignored);
    if (!s) return 0;
    int profile, rc = dit_int8_expect(&cfg, s, out, &profile, e);
    st_set_free(s);
    if (rc == 0 && profile) printf("  int8: W8A8 profile %s (docs/int8.md)\n", dit_int8_profile_name(profile));
    return rc;
}

static int video_vae_expected_dir(const char *dir, h3_expect_list *out, h3_err *e) {
    video_vae_config cfg;
    if (video_vae_config_load(dir, &cfg, e) != 0) return -1;
    return video_vae_expected_tensors(&cfg, out, e);
}

static int audio_vae_expected_dir(const char *dir, h3_expect_list *out, h3_err *e) {
    audio_vae_config cfg;
    if (audio_vae_config_load(dir, &cfg, e) != 0) return -1;
    return audio_vae_expected_tensors(&cfg, out, e);
}

static void report(int *problems, const char *fmt, const char *a, const char *b) {
    printf("  PROBLEM: ");
    printf(fmt, a, b);
    printf("\n");
    (*problems)++;
}

static void check_tokenizer(const char *dir, int index_only, int *problems) {
    char p[4096];
    h3_err e = {{0}};
    json_t *vocab = h3_json_load(snapshot_path(p, sizeof p, dir, "vocab.json"), &e);
    if (!vocab) report(problems, "%s%s", e.msg, "");
    else if (!json_is_object(vocab)) report(problems, "%s: %s", p, "not a JSON object");
    json_t *cfg = h3_json_load(snapshot_path(p, sizeof p, dir, "tokenizer_config.json"), &e);
    json_t *added = cfg ? json_object_get(cfg, "added_tokens_decoder") : NULL;
    if (!cfg) report(problems, "%s%s", e.msg, "");
    else if (!json_is_object(added)) report(problems, "%s: %s", p, "no added_tokens_decoder object");
    long merges = -1;
    char *text;
    size_t len;
    if (h3_read_small(snapshot_path(p, sizeof p, dir, "merges.txt"), H3_JSON_MAX, &text, &len, &e) == 0) {
        merges = 0;
        for (size_t i = 0; i < len; i++) { /* lines not starting with '#' */
            size_t j = i;
            while (j < len && text[j] != '\n') j++;
            if (text[i] != '#') merges++;
            i = j;
        }
        free(text);
    } else {
        report(problems, "%s%s", e.msg, "");
    }
    printf("  vocab %zu tokens, %ld merges, %zu added tokens\n", json_object_size(vocab), merges,
           json_object_size(added));
    json_decref(vocab);
    json_decref(cfg);
}

static void check_scheduler(const char *dir, int index_only, int *problems) {
    h3_err e = {{0}};
    double shift;
    if (sched_config_load(dir, &shift, &e)) report(problems, "%s%s", e.msg, ""); /* the rule generate applies */
}

static void check_files(const char *dir, int index_only, int *problems) {
    static const char *const files[] = {"preprocessor_config.json", "video_preprocessor_config.json", NULL};
    char p[4096];
    for (int i = 0; files[i]; i++)
        if (!snapshot_exists(snapshot_path(p, sizeof p, dir, files[i]))) report(problems, "%s: %s", p, "missing");
}

static const char *const dit_keys[] = {"num_layers", "hidden_size", "num_attention_heads", "attention_head_dim", "ffn_dim",
                                       "in_channels", "audio_in_channels", "text_dim", "patch_size", NULL};
static const char *const dit_orig_keys[] = {"num_layers", "hidden_size", "num_attention_heads", "attention_head_dim",
                                            "ffn_hidden_size", "latents_dim", "audio_latents_dim", "text_dim", NULL};
static const char *const vae_keys[] = {"latent_channels", "block_out_channels", "decoder_num_layers", "decoder_num_attention_heads",
                                       "decoder_attention_head_dim", "clip_length", "token_drop", NULL};
static const char *const avae_keys[] = {"latent_channels", "encoder_rates", "decoder_rates", "decoder_dim", "sampling_rate", NULL};
static const char *const te_keys[] = {"hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                                      "head_dim", "intermediate_size", "vocab_size", NULL};
static const char *const sched_keys[] = {"shift", NULL};
static const char *const ovae_keys[] = {"latent_channels", "vae_clip_length", "vae_token_drop", "vae_tile_size", NULL};
static const char *const oavae_keys[] = {"latent_channels", "sample_rate", NULL};

static const info_component_def diffusers_components[] = {
    {"transformer", "DiT, t2va + fl2va", "config.json", NULL, dit_keys, 1, "diffusion_pytorch_model.safetensors", dit_expected_dir, NULL, 0},
    {"transformer_ref", "DiT, ref2va", "config.json", NULL, dit_keys, 1, "diffusion_pytorch_model.safetensors", dit_expected_dir, NULL, 0},
    {"vae", "video VAE", "config.json", NULL, vae_keys, 1, "diffusion_pytorch_model.safetensors", video_vae_expected_dir, NULL, 0},
    {"audio_vae", "audio VAE", "config.json", NULL, avae_keys, 1, "diffusion_pytorch_model.safetensors", audio_vae_expected_dir, NULL, 0},
    {"text_encoder", "Qwen3-VL conditioner", "config.json", "text_config", te_keys, 1, "model.safetensors", text_encoder_expected_dir, NULL, 0},
    {"tokenizer", "Qwen2 tokenizer", NULL, NULL, NULL, 0, NULL, NULL, check_tokenizer, 0},
    {"processor", "Qwen3-VL processor configs", NULL, NULL, NULL, 0, NULL, NULL, check_files, 0},
    {"scheduler", "video schedule", "scheduler_config.json", NULL, sched_keys, 0, NULL, NULL, check_scheduler, 0},
    {"audio_scheduler", "audio schedule", "scheduler_config.json", NULL, sched_keys, 0, NULL, NULL, check_scheduler, 0},
};

static const info_component_def original_components[] = {
    {"transformer", "DiT, original names", "config.json", NULL, dit_orig_keys, 1, "model.safetensors", dit_expected_dir, NULL, 0},
    {"video_vae", "video VAE config (weights read from the diffusers vae/)", "config.json", NULL, ovae_keys, 0, NULL, NULL, NULL, 1},
    {"audio_vae", "audio VAE config (weights read from the diffusers audio_vae/)", "config.json", NULL, oavae_keys, 0, NULL, NULL, NULL, 1},
};

const info_component_def *info_diffusers_components(int *n) {
    *n = (int)(sizeof diffusers_components / sizeof diffusers_components[0]);
    return diffusers_components;
}

const info_component_def *info_original_components(int *n) {
    *n = (int)(sizeof original_components / sizeof original_components[0]);
    return original_components;
}
