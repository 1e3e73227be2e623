/* Where the components of a MiniMax-H3 snapshot live. Two layouts are accepted:
 *  - diffusers (repo root): model_index.json with _class_name MiniMaxH3ModularPipeline and the
 *    folders transformer/, transformer_ref/, vae/, audio_vae/, text_encoder/, tokenizer/, ...
 *  - original partitions: FL2VA/ and Ref2VA/ (model_index.json _class_name MiniMaxH3Pipeline)
 *    with transformer/ (fused names), video_vae/, audio_vae/.
 * A release snapshot has both: the root plus the two partition trees. */
#ifndef H3_SNAPSHOT_H
#define H3_SNAPSHOT_H

#include <stddef.h>

#include "../core/error.h"

typedef enum snap_kind { SNAP_UNKNOWN = 0, SNAP_DIFFUSERS_ROOT, SNAP_ORIGINAL_PARTITION } snap_kind;

/* Reads DIR/model_index.json and says which layout it is; -1 with a message when absent/invalid. */
int snapshot_kind(const char *dir, snap_kind *kind, h3_err *e);

/* Joins dir and name into out (cap bytes); returns out. */
char *snapshot_path(char *out, size_t cap, const char *dir, const char *name);
int   snapshot_exists(const char *path);   /* file or directory */
int   snapshot_is_dir(const char *path);

/* Path of the DiT folder for a task partition: "transformer" (t2va/fl2va) or "transformer_ref"
 * (ref2va) at a diffusers root, or "transformer" inside FL2VA/ or Ref2VA/. */
int snapshot_dit_dir(const char *root, int ref2va, char *out, size_t cap, h3_err *e);

#endif
