/* LoRA files for the DiT (docs/lora.md): every layout diffusers' MiniMax-H3 loader accepts, converted onto the
 * diffusers module names, checked against the model's config, and merged into the weights at load as diffusers'
 * fuse_lora does (bit for bit, docs/lora.md "Rounding"). */
#ifndef H3_DIT_LORA_H
#define H3_DIT_LORA_H

#include "../core/error.h"
#include "../core/tensor.h"
#include "dit.h"

#define DIT_LORA_MAX 8
#define DIT_LORA_MAX_SCALE 100.0

/* One --lora FILE[:SCALE] (to_ref 0) or --lora-ref FILE[:SCALE] (to_ref 1: the ref2va partition). */
typedef struct dit_lora_spec {
    const char *path;
    double      scale;
    int         to_ref;
} dit_lora_spec;

/* "FILE[:SCALE]" -> spec (path points into arg: the caller keeps arg alive; a path with a ':' needs the ":SCALE").
 * flag names the option in messages. The scale: a finite number with |scale| <= DIT_LORA_MAX_SCALE. */
int dit_lora_parse_arg(char *arg, const char *flag, dit_lora_spec *out, h3_err *e);

typedef struct dit_lora_set dit_lora_set;

/* Opens, converts and checks n (<= DIT_LORA_MAX) LoRAs for the partition a model of config cfg is (ref: the
 * transformer_ref one, which ref2va runs). Every key must map onto a weight of cfg with the right shape; DoRA
 * files, and LoRAs that target the other partition, are refused. One line naming the file and key. */
dit_lora_set *dit_lora_set_new(const dit_lora_spec *specs, int n, const dit_config *cfg, int ref, h3_err *e);
void          dit_lora_set_free(dit_lora_set *s);

/* The same conversion and checks on one parsed file (its mapping in f->map), for the fuzz target and the pre-flight:
 * 0 when it would load. */
struct st_file;
int dit_lora_check_file(const struct st_file *f, const dit_config *cfg, int ref, int to_ref, h3_err *e);

/* If any LoRA of s touches the stored weight `name` (a 2-D tensor of cfg's layout, either checkpoint layout), a new
 * malloc'd buffer (*merged, the caller frees it) holding base + every LoRA's delta in order, in dtype out_dtype (the
 * base's dtype, or F32 for the fp32 mode); *merged = NULL when none does. */
int dit_lora_merge(dit_lora_set *s, const dit_config *cfg, const char *name, const h3_tensor *base,
                   h3_dtype out_dtype, void **merged, h3_err *e);

/* The merge of every LoRA of s into the stored weight `name` as pieces, in the order dit_lora_merge applies them
 * (*np = 0 when none touches it): piece i adds its delta to the rows row0 + dest(o) of the weight in out_dtype
 * (h3_lora_delta's dest; the fused QKV's heads and fc1's swapped halves). The modules count as merged. */
typedef struct dit_lora_piece {
    float  *A, *B; /* [rank][k], [n][rank], malloc'd: values rounded to out_dtype */
    int64_t n, k, row0, row_group, group_stride;
    int     rank;
    float   scaling;
} dit_lora_piece;
int  dit_lora_pieces(dit_lora_set *s, const dit_config *cfg, const char *name, const h3_tensor *base,
                     h3_dtype out_dtype, dit_lora_piece **pieces, int *np, h3_err *e);
void dit_lora_pieces_free(dit_lora_piece *p, int n);

/* Writes a random rank-`rank` LoRA of every main block's six linears of cfg (diffusers / peft keys, BF16,
 * alpha-less; dit_lora_random.c, docs/lora.md) to path, deterministic in seed. */
int dit_lora_write_random(const dit_config *cfg, int rank, uint64_t seed, const char *path, h3_err *e);

/* 1 when some LoRA of s has a module of the stored weight `name` (dit_new_random_lora makes those in host memory). */
int dit_lora_touches(const dit_lora_set *s, const dit_config *cfg, const char *name);

/* Modules in the set (all files), and those merged so far: a load that merged fewer than it holds names the first
 * one it never met (a module of a weight the model does not hold, e.g. a layout mismatch). */
int dit_lora_check_all_merged(const dit_lora_set *s, h3_err *e);

#endif
