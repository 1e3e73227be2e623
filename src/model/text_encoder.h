/* The MiniMax-H3 conditioner: the 50-layer prefix of the Qwen3-VL language model
 * (docs/model/text_encoder.md section 2). Produces hidden_states[50] = the raw residual stream
 * after decoder layer index 49, before the final norm. Layers are streamed from the mmap'd shards
 * one at a time (uploaded, run, released), so only one layer's weights are resident. */
#ifndef H3_TEXT_ENCODER_H
#define H3_TEXT_ENCODER_H

#include <stdint.h>

#include "../backend/backend.h"
#include "../core/error.h"
#include "../io/expect.h"
#include "../io/safetensors.h"
#include "vision.h"

#define TE_OUTPUT_LAYER 50 /* diffusers' text_encoder_layer: hidden_states[50] */

typedef struct te_text_config {
    int    vocab_size;         /* 151936 */
    int    hidden_size;        /* 5120 */
    int    intermediate_size;  /* 25600 */
    int    num_layers;         /* 64 (only 0..49 are run) */
    int    num_heads;          /* 64 */
    int    num_kv_heads;       /* 8 */
    int    head_dim;           /* 128 */
    float  rms_norm_eps;       /* 1e-6 */
    double rope_theta;         /* 5e6 (v4 rope_theta or v5 rope_parameters.rope_theta) */
    int    mrope_section[3];   /* 24, 20, 20 */
    int    mrope_interleaved;  /* 1 (the only layout implemented) */
} te_text_config;

typedef struct te_config {
    te_text_config text;
    vision_config  vision;
    int64_t image_token_id, video_token_id, vision_start_token_id, vision_end_token_id;
    int     tie_word_embeddings;
} te_config;

/* dir: a text_encoder/ folder (reads config.json). */
int text_encoder_config_load(const char *dir, te_config *cfg, h3_err *e);
/* The same from a parsed config.json (path names it in messages); every field in a plausible range. Fuzzed. */
struct json_t;
int text_encoder_config_parse(const struct json_t *root, const char *path, te_config *cfg, h3_err *e);
/* Every tensor of the checkpoint (1058 for the release): LM (all layers, final norm, lm_head) and
 * model.visual.*, bf16. */
int text_encoder_expected_tensors(const te_config *cfg, h3_expect_list *out, h3_err *e);
/* Same, from a folder (for `h3 info`). */
int text_encoder_expected_dir(const char *dir, h3_expect_list *out, h3_err *e);

typedef struct text_encoder text_encoder;

/* Opens config and shards (mmap, nothing read yet). bf16: compute as the release runs
 * (docs/model/text_encoder.md 2.3 roundings); 0: fp32 from the stored weights. */
text_encoder *text_encoder_load(h3_backend *be, const char *dir, int bf16, h3_err *e);
/* Random weights at cfg's shapes, made in backend memory (backend_bench.h fills), all TE_OUTPUT_LAYER
 * layers resident: for benchmarks of the whole pipeline without a checkpoint (text prompts only; the
 * vision tower needs real weights). */
text_encoder *text_encoder_new_random(h3_backend *be, const te_config *cfg, int bf16, uint64_t seed, h3_err *e);
void          text_encoder_free(text_encoder *te);
/* on: each streamed layer stays resident on the backend after the forward that first loads it, so later
 * forwards read no weights (a session's --resident: about 49 GB on the GPU for the release). */
void          text_encoder_keep_layers(text_encoder *te, int on);
const te_config *text_encoder_get_config(const text_encoder *te);
const st_set    *text_encoder_weights(const text_encoder *te);

/* Vision rows for one forward (host memory). Row k of image_embeds goes to the k-th image-pad
 * row of the sequence, likewise for videos; deep[l] is added to the same rows after LM layer l. */
typedef struct te_vision_rows {
    const float *image_embeds; /* [n_image, hidden] */
    const float *image_deep;   /* [n_deep][n_image][hidden] or NULL */
    int64_t      n_image;
    const float *video_embeds; /* [n_video, hidden] */
    const float *video_deep;   /* [n_deep][n_video][hidden] or NULL */
    int64_t      n_video;
    int          n_deep;
} te_vision_rows;

/* ids [L] (< vocab_size), positions [3][L] (T, H, W rows; NULL = 0..L-1 on every axis),
 * vis may be NULL (text only). out_layer: which hidden state (1..num_layers-1; 50 for MiniMax-H3):
 * the raw output of decoder layer out_layer-1. out: host [L, hidden]. */
int text_encoder_forward(text_encoder *te, const int64_t *ids, int64_t L, const int64_t *positions,
                         const te_vision_rows *vis, int out_layer, float *out, h3_err *e);

/* Optional progress report from text_encoder_forward: called after each streamed layer with
 * (user, layers done, layers to run). */
typedef void (*text_encoder_progress_fn)(void *user, int done, int total);
void text_encoder_set_progress(text_encoder *te, text_encoder_progress_fn fn, void *user);

/* Peak bytes the forward holds for L rows besides the streamed layer (activations, fp32). */
int64_t text_encoder_activation_bytes(const te_config *cfg, int64_t L);
/* Bytes of one decoder layer's weights as stored (bf16). */
int64_t text_encoder_layer_bytes(const te_config *cfg);

#endif
