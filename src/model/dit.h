/* MiniMax-H3 diffusion transformer (docs/model/dit.md). This header is the contract between
 * the model (dit.c) and the pipeline (src/pipeline/): keep these signatures stable. */
#ifndef H3_DIT_H
#define H3_DIT_H

#include <stddef.h>
#include <stdint.h>

#include "../backend/backend.h"
#include "../core/error.h"
#include "../io/expect.h"

typedef struct dit_config {
    int   num_attention_heads;  /* 56 */
    int   attention_head_dim;   /* 128 */
    int   hidden_size;          /* 5376 */
    int   num_layers;           /* 50 */
    int   num_refiner_layers;   /* 2 */
    int   ffn_dim;              /* 14336 */
    int   in_channels;          /* 24 */
    int   audio_in_channels;    /* 32 */
    int   patch_size[3];        /* 1,2,2 */
    int   text_dim;             /* 5120 */
    int   freq_dim;             /* 256 */
    int   time_embed_hidden_dim;/* 5376 */
    int   time_embed_dim;       /* 2688 */
    int   rope_freq_dim;        /* 16 */
    float rope_theta;           /* 10000 */
    float norm_eps, qk_norm_eps, final_norm_eps;
    int   original_layout;      /* 1: FL2VA/Ref2VA names (fused qkv_proj, [gate;value] fc1) */
    int   qkv_stacked;          /* with original_layout: qkv_proj rows [q; k; v] (single files), not per head */
} dit_config;

/* dir: a transformer folder (diffusers `transformer/` or original `FL2VA/transformer/`). */
int dit_config_load(const char *dir, dit_config *cfg, h3_err *e);
/* The same from a parsed config.json (path names it in messages); every field in a plausible range. Fuzzed. */
struct json_t;
int dit_config_parse(const struct json_t *root, const char *path, dit_config *cfg, h3_err *e);
/* Every tensor name/dtype/shape the config implies, in the layout cfg->original_layout says. */
int dit_expected_tensors(const dit_config *cfg, h3_expect_list *out, h3_err *e);

typedef struct dit_model dit_model;

/* How a model is loaded (the `mode` argument of dit_load / dit_new_random; 0 is the fp32 reference, fully resident):
 * DIT_BF16    compute as the release runs (docs/model/dit.md 4, "[bf16]" roundings);
 * DIT_STREAM  --ssd-streaming (docs/model/features.md 7.3): the main blocks' four linears stay in host memory (the file
 *             mapping) and are copied block by block into two backend slots, the next block's copy overlapping
 *             the current block's compute; outputs are bit-identical to the resident model. Only the blocks' norm
 *             gains, the token refiner and the input/output layers are resident. Cannot be combined with
 *             dit_quantize_fp8.
 * On GPU backends the AdaLN projections (docs/model/dit.md 1: 39% of the bytes) always stay in host memory: the tables are
 * computed one block at a time (docs/model/features.md 7.1), so they are never resident as a whole. */
enum { DIT_BF16 = 1, DIT_STREAM = 2 };

/* Loads (mmap, zero-copy on the CPU) a transformer folder in either layout, `mode` as above. */
dit_model *dit_load(h3_backend *be, const char *dir, int mode, h3_err *e);
/* The same with the weights from a single-file transformer (docs/checkpoints.md "Single files": the original module
 * names in one safetensors file, qkv_proj stacked [q; k; v], an optional "model.diffusion_model." or
 * "diffusion_model." prefix) and the config of dir, a diffusers transformer folder. */
dit_model *dit_load_single_file(h3_backend *be, const char *dir, const char *file, int mode, h3_err *e);
/* Either of the two (file NULL: dir's own weights) with n_loras LoRAs merged into the weights as they are read
 * (docs/lora.md, dit_lora.h); ref: the model is the transformer_ref partition (ref2va). Not with DIT_STREAM. */
struct dit_lora_spec;
dit_model *dit_load_lora(h3_backend *be, const char *dir, const char *file, int mode, const struct dit_lora_spec *loras,
                         int n_loras, int ref, h3_err *e);
/* The pre-flight check of one (headers only): dir's config is the diffusers one, the file opens, is a MiniMax-H3
 * single file and not a pruned one. */
int dit_single_file_check(const char *dir, const char *file, h3_err *e);
void       dit_free(dit_model *m);
const dit_config *dit_get_config(const dit_model *m);
/* The mode the model was loaded in (DIT_BF16, DIT_STREAM). */
int               dit_get_mode(const dit_model *m);

/* AdaLN tables (docs/model/dit.md 4.5) for these timestep values; later forwards with these values use the
 * tables. dit_release_adaln gives the AdaLN projections' memory back: a model loaded from files keeps them readable
 * through the file mapping (later values still get tables); a random-weight model drops them, and its forwards then
 * only accept precomputed values. */
int  dit_prepare_timesteps(dit_model *m, const float *t, int n, h3_err *e);
/* 1 when dit_prepare_timesteps(t, n) can succeed: the AdaLN weights are still there, or every value has its table. */
int  dit_timesteps_available(const dit_model *m, const float *t, int n);
/* 1 when every value already has its table (dit_prepare_timesteps would compute nothing). */
int  dit_timesteps_cached(const dit_model *m, const float *t, int n);
void dit_release_adaln(dit_model *m);
/* --layers (docs/model/features.md 5.3): keeps `active` of the blocks. A block's score is the mean |value| of its
 * attention and MLP gate rows (AdaLN slots 2 and 5) over every prepared timestep and all three modalities;
 * blocks 0, 1 and the last are kept, and the num_layers - active lowest-scoring of the others are skipped
 * by every later forward, their weights given back. Needs dit_prepare_timesteps first; active >= num_layers
 * keeps all. dit_gate_scores fills scores[num_layers]. */
int dit_select_layers(dit_model *m, int active, h3_err *e);
int dit_gate_scores(dit_model *m, double *scores, h3_err *e);
int dit_layer_skipped(const dit_model *m, int block);
/* --quant fp8 (docs/fp8.md): quantizes the attention and FFN linears of the main blocks to FP8 E4M3 with
 * per-output-channel scales and runs them as W8A8 GEMMs with per-token activation scales (the token refiner,
 * AdaLN and I/O projections stay as they are); gives the bf16 weights back. bf16 mode only; once. */
int dit_quantize_fp8(dit_model *m, h3_err *e);
/* --attention exact|sage8 (docs/fast.md): sage8 runs the bf16 mode's self-attention as h3_sage8_attention (INT8
 * Q K^T, FP8 P V); exact (0, the default) as h3_bf16_attention. A setting of the model, changed between forwards. */
void dit_set_attention(dit_model *m, int sage8);
/* Block `block`'s AdaLN table rows for a prepared timestep value: [3 modalities][6 slots][hidden] in
 * backend memory, or NULL (for tests). */
const float *dit_adaln_block_table(const dit_model *m, float t, int block);
/* Stored bytes of the AdaLN projections (what dit_release_adaln gives back) and of all weights. */
size_t dit_adaln_weight_bytes(const dit_model *m);
size_t dit_weight_bytes(const dit_model *m);

/* One forward (docs/model/dit.md 4), batch 1. Host pointers; rows as in PROBE.md's `dit` op. */
typedef struct dit_inputs {
    const float   *video;            /* [Nv, in_channels*pt*ph*pw] */
    int64_t        Nv;
    const float   *audio;            /* [Na, audio_in_channels] */
    int64_t        Na;
    const float   *text;             /* [Nt, text_dim] */
    int64_t        Nt;
    const float   *timestep;         /* [K] */
    int            K;
    int64_t        S;                /* packed rows = Nt + Nv + Na */
    const int64_t *timestep_indices; /* [S] */
    const int64_t *token_tags;       /* [S] */
    const double  *position_ids;     /* [S, 3] */
    const int64_t *video_indices;    /* [Nv] */
    const int64_t *audio_indices;    /* [Na] */
    const int64_t *text_indices;     /* [Nt] */
    int            core;             /* dit_core_mode (docs/model/features.md 5.4 --core-reuse); 0: run the core */
    /* --token-reduction (docs/model/features.md 5.5, bf16 mode only): blocks reduce_begin .. reduce_end - 1 run on a shorter
     * sequence in which each pair of horizontally adjacent target-video tokens is replaced by its average; the full
     * rows are restored before block reduce_end as their own value + reduce_scale x (pooled output - pooled input).
     * reduce_end <= reduce_begin: off. The target video must be the last reduce_frames x reduce_h x reduce_w packed
     * rows (its 2x2-patch token grid, row-major per frame). */
    int            reduce_begin, reduce_end;
    float          reduce_scale;
    int64_t        reduce_frames, reduce_h, reduce_w;
    /* --profile: count the non-finite values of the residual stream after every block (one device reduction and
     * sync per block); the first block with any stops the forward with an error naming it */
    int            check_blocks;
} dit_inputs;

/* --core-reuse (docs/model/features.md 5.4): what a forward does with the transformer core (every active block).
 * STORE runs it and keeps residual = core output - core input (fp32, [S, hidden], in the model); REUSE
 * skips it: the packed input + that residual (one rounding to bf16 in bf16 mode). The projections, the
 * packing, the final norm and heads run every time. REUSE needs a STORE of the same S before it. */
enum { DIT_CORE_RUN = 0, DIT_CORE_RUN_STORE = 1, DIT_CORE_REUSE = 2 };

/* Validates the inputs (index ranges, partitions, K) and writes video_out [Nv, 96-ish] and
 * audio_out [Na, audio_in_channels]. */
int dit_forward(dit_model *m, const dit_inputs *in, float *video_out, float *audio_out, h3_err *e);

/* The probe's tensors (PROBE.md `dit`, already converted: f32 / i64 / f64) -> inputs of batch item b.
 * Checks every shape the reference checks or relies on (docs/model/dit.md 3): position_ids [S,3], token_tags and
 * timestep_indices [S], timestep 1-D, hidden_states [B,Nv,patch dim] with Nv = len(video_indices),
 * audio [B,Na,audio_in_channels], text [B,Nt,text_dim]. One-line errors naming the tensor. */
typedef struct dit_tensors {
    const h3_tensor *hidden_states, *audio_hidden_states, *encoder_hidden_states, *timestep;
    const h3_tensor *timestep_indices, *token_tags, *position_ids, *video_indices, *audio_indices, *text_indices;
} dit_tensors;
int dit_inputs_from_tensors(const dit_config *cfg, const dit_tensors *t, int64_t b, dit_inputs *out, h3_err *e);

/* One main block (docs/model/dit.md 4.6) in place on the packed rows X [S, hidden] (backend memory), using the
 * per-row fields of `in` (timestep, timestep_indices, token_tags, position_ids; S, K). For
 * benchmarks and tests; dit_forward runs the whole model. */
int dit_block_forward(dit_model *m, int block, float *X, const dit_inputs *in, h3_err *e);

/* A model with random weights in memory (no files), for benchmarks: every tensor of
 * dit_expected_tensors(cfg) in its release dtype, deterministic in seed. */
dit_model *dit_new_random(h3_backend *be, const dit_config *cfg, int mode, uint64_t seed, h3_err *e);
/* dit_new_random with the main blocks' linears made as random GGUF blocks of ggml type gguf_type (Q8_0, Q4_K, ...:
 * h3_gguf_fill_random, every row's width a multiple of the type's block) kept in that form in backend memory and
 * expanded into two bf16 slots per forward, as a GGUF transformer is (docs/checkpoints.md); -1: dit_new_random.
 * Not with DIT_STREAM. */
dit_model *dit_new_random_gguf(h3_backend *be, const dit_config *cfg, int mode, uint64_t seed, int gguf_type, h3_err *e);
/* dit_new_random with LoRAs merged at load as dit_load_lora merges them (docs/lora.md): the weights they touch are made
 * in host memory (the same values as on the device), merged there and uploaded. */
struct dit_lora_spec;
dit_model *dit_new_random_lora(h3_backend *be, const dit_config *cfg, int mode, uint64_t seed,
                               const struct dit_lora_spec *loras, int n_loras, h3_err *e);
/* Both: random GGUF blocks kept quantized, the LoRAs' pieces on them merged into each slot as it is expanded (as for a
 * GGUF file, docs/lora.md), the other touched weights merged at load. */
dit_model *dit_new_random_gguf_lora(h3_backend *be, const dit_config *cfg, int mode, uint64_t seed, int gguf_type,
                                    const struct dit_lora_spec *loras, int n_loras, h3_err *e);
/* 1 when file starts with GGUF's magic (a GGUF single-file transformer, docs/checkpoints.md; dit_config.c). */
int        dit_is_gguf(const char *file);
/* Seconds spent merging LoRAs into this model's weights at load (the merge itself; 0 without LoRAs). */
double     dit_lora_seconds(const dit_model *m);

/* Memory planning on a GPU backend: the backend bytes of the weights of a model loaded in `mode` (0 and e filled on
 * a bad config), and of one forward's activation buffers over S packed rows. */
size_t dit_gpu_weight_bytes(const dit_config *cfg, int mode, h3_err *e);
size_t dit_activation_bytes(const dit_config *cfg, int mode, int64_t S);
/* The backend bytes a resident model in `mode` needs for forwards over S packed rows: its weights, one forward's
 * activations and a 3 GiB margin (the AdaLN tables, the allocator's rounding). 1 when that exceeds `available`, i.e.
 * when --ssd-streaming should be on (*need gets the figure). */
int    dit_should_stream(const dit_config *cfg, int mode, int64_t S, double available, double *need);

/* --ssd-streaming's totals since the model was made (all 0 for a resident model): block copies, their bytes and
 * the host seconds spent in the copy calls (reading the source into staging buffers, and waiting for a slot whose
 * last reader is still running: with the copies hidden that is most of a forward). */
typedef struct dit_stream_stats {
    int64_t fills;
    double  bytes, host_seconds;
    int     gguf;  /* 1: a GGUF kept quantized (docs/checkpoints.md): the fills expanded GGUF blocks (bytes: theirs) */
    double  slot_bytes; /* backend memory of the two slots together */
    int     reads;      /* where the copies come from: 0 the file mapping (or host copies), 1 the files read with O_DIRECT
                           (uncached), 2 the files read through the page cache */
    int64_t lora_merges; /* --lora: LoRA pieces merged into the slots as they were filled (docs/lora.md) */
    double  lora_bytes;  /* --lora: backend memory of the kept LoRA factors */
    int64_t lora_f32_parts; /* --lora in the fp32 mode: streamed parts held F32 in the slots (widened as filled) */
} dit_stream_stats;
void dit_get_stream_stats(const dit_model *m, dit_stream_stats *out);

/* The rotary frequency table (docs/model/dit.md 4.1), as the reference computes it. */
void dit_rope_inv_freq(float *out, int rope_freq_dim, float theta);

#endif
