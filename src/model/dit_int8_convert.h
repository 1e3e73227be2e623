/* `h3 quantize`'s work on one DiT tree (docs/int8.md): every shard of SRC rewritten into DST with the profile's
 * weights as I8 codes + F32 [N, 1] scales (the rule of ops_linear.h, h3_int8_quantize_row) and every other tensor's
 * bytes copied as they are; the index rewritten (scales added beside their weights, total_size the tensor bytes);
 * the shards' "__metadata__" keep their keys and gain the scheme and the profile. Streamed: one tensor at a time
 * from the mapping, whose pages are given back after each tensor, so memory stays bounded. */
#ifndef H3_DIT_INT8_CONVERT_H
#define H3_DIT_INT8_CONVERT_H

#include <stdint.h>

#include "../core/error.h"

/* Called after each tensor (bytes: the source bytes it read) and at the start of each shard (bytes 0). */
typedef void (*dit_int8_progress_fn)(void *ctx, const char *shard, uint64_t bytes);

/* The bytes of tensor data of the tree's shards (for the caller's progress total); 0 with e filled on error. */
uint64_t dit_int8_tree_bytes(const char *src, h3_err *e);

/* 1 when a file name of a tree is one the conversion writes (a shard or the index): the caller links the rest. */
int dit_int8_written_name(const char *name);

/* src: a transformer folder (either layout, sharded with an index or one file); dst: an existing empty folder.
 * Refuses a tree that is int8 already, a missing or non-float in-scope weight, a non-finite weight value. */
int dit_int8_convert_tree(const char *src, const char *dst, int profile, dit_int8_progress_fn progress, void *ctx,
                          h3_err *e);

#endif
