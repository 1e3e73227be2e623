/* Private to the DiT (dit.c: weights and the forward's driver; dit_block.c: the blocks in either activation dtype):
 * the model structure and what a forward shares. */
#ifndef H3_DIT_INTERNAL_H
#define H3_DIT_INTERNAL_H

#include "../backend/ops.h"
#include "../backend/backend_stream.h"
#include "../backend/comm.h"
#include "../io/expect.h"
#include "../io/safetensors.h"
#include "dit.h"

#define MODALITIES 3 /* AdaLN table rows per timestep: 0 video, 1 text, 2 audio (docs/model/dit.md 4.5) */
#define ADALN_SLOTS 6

typedef struct dit_attn_w {
    h3_tensor *to_q, *to_k, *to_v; /* diffusers layout (NULL when fused into qkv_planar) */
    h3_tensor *qkv;                /* original layout: per-head [q k v] rows (docs/model/dit.md 2.4) */
    h3_tensor *qkv_planar;         /* diffusers layout, CUDA bf16 mode: [to_q; to_k; to_v] in one matrix */
    h3_tensor *to_out;
    float     *norm_q, *norm_k;    /* [head_dim] fp32, backend memory */
    /* --quant fp8 (dit_quantize_fp8, main blocks only): the quantized linears; their bf16 sources are
     * given back and set to NULL. f8_qkv holds qkv or qkv_planar, f8_q/k/v the separate matrices. */
    h3_fp8_linear f8_qkv, f8_q, f8_k, f8_v, f8_out;
    /* int8 (dit_int8.c, main blocks only): the same linears as INT8 W8A8, their sources given back */
    h3_int8_linear i8_qkv, i8_q, i8_k, i8_v, i8_out;
} dit_attn_w;

typedef struct dit_block_w {
    float     *norm1, *norm2;      /* [hidden] fp32 */
    dit_attn_w attn;
    h3_tensor *ff_in;              /* the fused FFN input weight: diffusers [value; gate], original [gate; value] */
    h3_tensor *ff_value, *ff_gate; /* row views of ff_in */
    h3_tensor *ff_down;
    h3_tensor *adaln_w, *adaln_b;  /* main blocks only; NULL after dit_release_adaln */
    h3_fp8_linear f8_in, f8_down;  /* --quant fp8: ff_in / ff_down quantized (ff_value / ff_gate unusable then) */
    h3_int8_linear i8_in, i8_down; /* int8: likewise */
    float     *adaln_scale;        /* int8 profile all: adaln_w holds I8 codes, these their fp32 scales (backend) */
} dit_block_w;

/* --ssd-streaming (dit_stream.c): the main blocks' streamed linears, by part */
enum { DIT_PART_QKV, DIT_PART_Q, DIT_PART_K, DIT_PART_V, DIT_PART_OUT, DIT_PART_FF_IN, DIT_PART_FF_DOWN, DIT_PARTS };

enum { DIT_STREAM_FILES = 32 };

typedef struct dit_stream {
    h3_tensor  **src;             /* [num_layers * DIT_PARTS] host tensors (file mapping or host copies), NULL: none */
    /* where each part is in its shard (file-backed models): read from there instead of the mapping when the model
     * streams with file reads (H3_STREAM_READ, dit_stream_setup) */
    int16_t     *file_of;         /* [num_layers * DIT_PARTS] index into paths, -1: not from a file */
    uint64_t    *file_off;        /* [num_layers * DIT_PARTS] byte offset in that file */
    char        *paths[DIT_STREAM_FILES];
    int          n_paths;
    h3_read_file files[DIT_STREAM_FILES]; /* opened by dit_stream_setup when reading files */
    int          reads;           /* 0: copies from the mapping; 1: O_DIRECT reads; 2: buffered file reads */
    size_t       offset[DIT_PARTS]; /* where each part sits in a slot */
    size_t       slot_bytes;
    h3_slot     *slot[2];
    int64_t      holds[2];        /* the block each slot holds (or is being filled with); -1: none */
    dit_block_w  view[2];         /* the slot's bytes as a block's streamed weights (views into the slot) */
    int          bound;           /* the slot of the block bound now, -1: none */
    h3_tensor   *view_list[24];   /* the views above, freed with the stream */
    int          n_views;
    dit_stream_stats stats;
    /* a GGUF transformer kept quantized (dit_gguf.c, docs/checkpoints.md): src[i] are bf16-shaped tensors whose data
     * is backend memory holding the part's GGUF blocks (qsrc keeps them for freeing), expanded into a slot per fill */
    int          quant;
    int          rand_type;       /* dit_new_random_gguf: the ggml type of the random blocks */
    h3_tensor  **qsrc;            /* [num_layers * DIT_PARTS] */
    uint32_t    *qtype;           /* their ggml types */
    size_t      *qbytes;          /* their block bytes */
    /* --lora (docs/lora.md): the LoRA pieces of the touched streamed parts, merged into a slot as it is filled */
    struct dit_stream_lora *lora;
    int          n_lora, cap_lora;
    /* the fp32 mode's LoRA parts (docs/lora.md "With --ssd-streaming"): held F32 in the slot (a widening fill), as the
     * resident model holds their merged F32 copies; wide_part: some block's part p is, so the slot has room for it */
    uint8_t     *wide;            /* [num_layers * DIT_PARTS] */
    int          wide_part[DIT_PARTS];
} dit_stream;

/* AdaLN tables of one timestep value (docs/model/dit.md 4.5): per block [3 modalities][6 slots][hidden], and the
 * final layer's [shift | scale]. Backend memory. */
typedef struct dit_adaln_entry {
    float  t;
    float *blocks; /* [L][3][6H] */
    float *final;  /* [2H] */
} dit_adaln_entry;

struct dit_model {
    h3_backend *be;
    dit_config  cfg;
    h3_dtype    act;  /* the activations' dtype: H3_BF16 in the DIT_BF16 mode, else H3_F32 (ops_act.h) */
    int         fp8;  /* dit_quantize_fp8 ran: the main blocks' linears are FP8 W8A8 (ops_linear.h) */
    int         int8_profile;    /* DIT_INT8_* (dit_int8.h): the int8 snapshot's profile, or dit_quantize_int8's */
    int         int8_fc2_groups; /* --int8-fc2-groups */
    int         attention_sage8; /* --attention sage8 (dit_set_attention): the bf16 blocks' attention in 8 bits */
    st_set     *st;
    struct gguf_file *gguf;     /* a GGUF single file (dit_load_single_file), instead of st */
    void      **gguf_bufs;      /* its tensors dequantized (gguf_view_as), freed with the model */
    int         n_gguf_bufs;
    int         gguf_rand_dequant; /* dit_new_random_gguf with H3_GGUF_RESIDENT=off: its ggml type + 1 (dit_gguf.c) */
    char        name_prefix[32]; /* single files: what every stored name starts with ("" or "model.diffusion_model.") */
    h3_expect_list mem_names; /* dit_new_random: weights held in memory instead of st */
    h3_tensor    **mem;
    uint8_t       *mem_on_backend; /* 1: mem[i]->data is backend memory (CUDA random matrices), handed
                                      to the model's owned list by load_w */
    /* every h3_tensor this model owns (uploads and views), freed in reverse */
    h3_tensor **owned;
    uint8_t    *owned_is_view; /* row views: no backend memory of their own */
    int         n_owned, cap_owned;
    float     **fbufs; /* fp32 backend buffers (norm gains) */
    int         n_fbufs, cap_fbufs;

    h3_tensor *proj_in_w, *proj_in_b, *audio_in_w, *audio_in_b, *ctx_w, *ctx_b;
    h3_tensor *te1_w, *te1_b, *te2_w, *te2_b;
    dit_block_w *refiner, *blocks;
    float       *refiner_final_norm, *out_norm;
    h3_tensor   *out_ada_w, *out_ada_b;
    h3_tensor   *proj_out_w, *proj_out_b, *audio_out_w, *audio_out_b;
    float        inv_freq[64];
    int          adaln_released;
    uint8_t     *skip;        /* [num_layers] or NULL: blocks dropped by dit_select_layers (docs/model/features.md 5.3) */
    float       *core_res;    /* --core-reuse: core output - core input [core_rows, hidden], fp32, backend */
    int64_t      core_rows;
    size_t       adaln_bytes; /* stored bytes of every AdaLN projection (weights + biases) */
    size_t       total_bytes; /* stored bytes of every loaded tensor */
    dit_adaln_entry *cache;
    int              n_cache, cap_cache;
    int              adaln_host; /* the AdaLN projections are host tensors (GPU backends): uploaded per block */
    dit_stream      *stream;     /* DIT_STREAM, else NULL */
    struct dit_lora_set *lora;   /* --lora (dit_lora.h): merged into the weights as load_all reads them, then freed */
    void           **lora_bufs;  /* the merged weights (host memory the views point into), freed with the model */
    int              n_lora_bufs;
    double           lora_seconds; /* time in the merges (dit_lora_seconds) */
};

/* A forward's activation scratch, in the model's activation dtype (dit_block.c). */
typedef struct dit_scratch {
    void    *n, *o; /* [S, H] */
    void    *q, *k, *v; /* fp32: [S, I] each (bf16: in big) */
    void    *big;   /* [S, max(3I, 2FF)]: q|k|v (bf16, per the weight layout), or the FFN's value|gate */
    void    *mid;   /* the attention output ([S, I]), bf16 also the SwiGLU product ([S, max(I, FF)]) */
    uint8_t *xq;    /* fp8 / int8 mode: [S, max(H, I, FF)] E4M3 or INT8 codes of a linear's input rows */
    float   *xs;    /* fp8 / int8 mode: [S] their scales ([S, FF / 1024] with --int8-fc2-groups) */
} dit_scratch;

/* Everything a forward shares between blocks: the AdaLN tables of its K timesteps, the per-row
 * table indices, the rotary tables and the activation scratch. */
typedef struct fwd_ctx {
    int64_t          S, K;
    float           *tab;     /* [L][K*3][6H] */
    float           *tab_f;   /* [K][2H] */
    int32_t         *ada_idx; /* [S] timestep_index * 3 + tag */
    int32_t         *t_idx;   /* [S] timestep_index */
    float           *cos, *sin;
    dit_scratch      s;
    int              have_scratch;
    dit_adaln_entry *tmp;
    int              n_tmp;
    struct dit_ulysses *par; /* --parallel (dit_ulysses.h): this rank's attention exchange; NULL: one rank */
} fwd_ctx;

/* --token-reduction (dit_reduce.c): the reduced sequence of one forward. ctx is the forward's context with the
 * reduced rows' AdaLN indices and rotary tables (the other fields shared with the full context). */
typedef struct dit_reduction {
    int64_t  S_full, S_red, prefix; /* prefix: rows before the target video (kept one to one) */
    int32_t *pairs;                 /* [S_red][2] source rows of each reduced row (backend) */
    int32_t *parent;                /* [S_full] the reduced row of each full row (backend) */
    h3_bf16 *X, *base;              /* [S_red, H]: the reduced rows, and their pooled input */
    fwd_ctx  ctx;
    int32_t *ada_idx;               /* owned by this struct (ctx.ada_idx), likewise cos / sin */
    float   *cos, *sin;
} dit_reduction;

int  dit_reduce_new(dit_model *m, const dit_inputs *in, const fwd_ctx *x, dit_reduction *r, h3_err *e);
void dit_reduce_free(dit_model *m, dit_reduction *r);
/* rotary tables [S, 6F] of positions pos [S, 3] (dit.c) */
void dit_rope_tables(const dit_model *m, const double *pos, int64_t S, float *cos_h, float *sin_h);

/* dit.c: weight memory. dit_drop_tensor gives a weight's memory back (file pages to the kernel, backend copies and
 * random weights' host memory freed); dit_give_back_pages only the pages of a view of the file mapping (it stays
 * readable). */
void dit_drop_tensor(dit_model *m, h3_tensor *w);
void dit_give_back_pages(const h3_tensor *w);
void dit_free_cache_entry(dit_model *m, dit_adaln_entry *c);
/* dit_weights.c: --quant fp8 / int8 at load (docs/fp8.md, docs/int8.md). Every kept main block's linears, in the order
 * qkv, qkv_planar, to_q, to_k, to_v, to_out, ff_in, ff_down (index j), become quantized copies: copy(be, w, j, src)
 * makes linear j's (qkv and qkv_planar share one), each source given back as soon as its copy exists (the peak is the
 * bf16 model plus one matrix). On a failure free_block frees the block's copies and the error names flag and block. */
enum { DIT_QUANT_LINEARS = 8 };
typedef int (*dit_quant_copy)(h3_backend *be, dit_block_w *w, int j, const h3_tensor *src, h3_err *e);
int  dit_quantize_blocks(dit_model *m, const char *flag, dit_quant_copy copy, void (*free_block)(h3_backend *, dit_block_w *),
                         h3_err *e);

/* dit.c: the forward of one rank of a --parallel group (docs/parallel.md; dit_parallel.c runs one per thread): c the
 * rank's communicator handle, NULL: the plain forward. Every rank writes its own rows of video_out / audio_out. */
int dit_forward_rank(dit_model *m, const dit_inputs *in, h3_comm *c, float *video_out, float *audio_out,
                     h3_err *e);

/* dit_inputs.c: a forward's input checks (docs/model/dit.md 3; rows_only: the per-row arrays only, for
 * dit_block_forward), and a host int64 index list as int32 (src[i] * mul + add[i]) in backend memory. */
int      dit_validate_inputs(const dit_inputs *in, h3_err *e, int rows_only);
int32_t *dit_upload_index(h3_backend *be, const int64_t *src, int64_t n, int64_t mul, const int64_t *add);

/* dit_adaln.c: the tables of n timestep values into out[0..n) (allocated here), and the cached table of a value. */
int              dit_compute_adaln(dit_model *m, const float *t, int n, dit_adaln_entry *out, h3_err *e);
dit_adaln_entry *dit_find_cached(dit_model *m, float t);

/* dit_stream.c. 1 when the named tensor stays in host memory for this model (a streamed part, or an AdaLN
 * projection on a GPU backend); *part is its DIT_PART_* or -1. */
int  dit_host_tensor(const dit_model *m, const char *name, int *part, int64_t *block);
/* The DIT_PART_* of a main block's streamed linear (its block in *block), else -1. */
int  dit_stream_part(const dit_config *c, const char *name, int64_t *block);
/* The stream's arrays (set_mode's DIT_STREAM, and dit_gguf_begin). */
int  dit_stream_alloc(dit_model *m, h3_err *e);
/* After every weight is loaded: the slots and their views (checks that every streamed block has block 0's shapes). */
int  dit_stream_setup(dit_model *m, h3_err *e);
/* Records where the streamed part `slot_index` (block * DIT_PARTS + part) named `name` lies in its shard. */
int  dit_stream_note_file(dit_model *m, const char *name, int64_t slot_index, h3_err *e);
void dit_stream_free(dit_model *m);
/* --lora: instead of a merged host copy, the LoRA pieces of the streamed part `slot_index` named `name` (view: its
 * stored tensor, or a GGUF part's dequantized shape) are kept in backend memory and merged into each slot filled with
 * it (dit_lora_load.c and dit_gguf.c call it); in the fp32 mode in F32, the part then held F32 in the slots. */
int  dit_stream_lora_add(dit_model *m, const char *name, int64_t slot_index, const h3_tensor *view, h3_err *e);
/* Block b's streamed weights into m->blocks[b] (copied into a slot first unless prefetched), the backend's later
 * ops waiting for the copy. */
int  dit_stream_bind(dit_model *m, int64_t b, h3_err *e);
/* Block b's ops are queued: its slot is released, its fields cleared, and block `prefetch` (>= 0) copied into the
 * other slot unless it is there already. */
int  dit_stream_unbind(dit_model *m, int64_t b, int64_t prefetch, h3_err *e);

/* dit_int8.c: after load_all, an int8 snapshot's I8 tensors become the blocks' int8 linears (scales from the
 * shards); the int8 linears of a block freed; profile all's AdaLN projection of block b (w I8, bias BF16). */
int  dit_int8_adopt(dit_model *m, h3_err *e);
void dit_int8_block_free(h3_backend *be, dit_block_w *w);
int  dit_int8_adaln(dit_model *m, int64_t b, float *y, const float *u, int n, const h3_tensor *w, const h3_tensor *bias,
                    h3_err *e);

/* dit_block.c: the blocks in the activation dtype m->act (docs/model/dit.md 4, with every "[bf16]" rounding in bf16). */
void dit_free_scratch(h3_backend *be, dit_scratch *s);
int  dit_alloc_scratch(dit_model *m, int64_t rows, dit_scratch *s);
/* Context embedder + token refiner (docs/model/dit.md 4.2 steps 3-4, 4.3): text rows -> xt [Nt, H] (m->act). */
int  dit_text_stream(dit_model *m, const float *text_host, int64_t Nt, void *xt, h3_err *e);
/* One main block (docs/model/dit.md 4.6) in place on X [S, H]. next >= 0: block `next` runs right after on the same rows (its
 * norm1 is fused into this block's last residual, into x->s.n); normed: that was done for this block. */
void dit_run_block(dit_model *m, fwd_ctx *x, int64_t b, void *X, int normed, int64_t next);

/* dit_lora_load.c (docs/lora.md): a model's LoRAs. begin opens the set for m->cfg (before load_all), view replaces a
 * weight's view by its merged host copy (kept with the model), end checks that every module met a weight and frees the factors; owns: p is one of the merged copies (never given back to the kernel or
 * re-read from a file); release frees the copies (dit_free). */
struct dit_lora_spec;
int  dit_lora_begin(dit_model *m, const struct dit_lora_spec *loras, int n, int ref, int mode, h3_err *e);
int  dit_lora_view(dit_model *m, const char *name, h3_tensor *view, int *mi, h3_err *e);
int  dit_lora_end(dit_model *m, h3_err *e);
int  dit_lora_owns(const dit_model *m, const void *p);
void dit_lora_release(dit_model *m);

/* dit_gguf.c (docs/checkpoints.md "Quantized on the GPU"). begin: after the file is opened (m->gguf) or for
 * dit_new_random_gguf (rand_type >= 0), decides whether the main blocks' linears stay in GGUF block form in backend
 * memory (H3_GGUF_RESIDENT) and sets the stream up for it; part: 1 when name is such a linear of this model; load:
 * uploads (or, random, makes) its blocks and records it as its block's stream source (with a LoRA on it, its pieces:
 * dit_stream_lora_add). */
int        dit_gguf_begin(dit_model *m, int rand_type, h3_err *e);
int        dit_gguf_part(const dit_model *m, const char *name);
h3_tensor *dit_gguf_load(dit_model *m, const h3_expect_list *ex, const char *name, h3_err *e);
/* dit_new_random_gguf with H3_GGUF_RESIDENT=off (m->gguf_rand_dequant): block linear x's random blocks, the very bytes
 * the kept-quantized model expands, dequantized into a new host BF16 tensor (the dequantize-at-load reference). */
h3_tensor *dit_gguf_random_dequant(dit_model *m, const h3_expect *x, h3_err *e);

/* dit_config.c: the name prefix of a single-file transformer held by st or g ("" or a ComfyUI prefix), or NULL with e
 * filled when it is none or a pruned one (docs/checkpoints.md); dit_is_gguf: dit.h. */
const char *dit_single_file_prefix(const st_set *st, const struct gguf_file *g, const char *file, h3_err *e);

#endif
