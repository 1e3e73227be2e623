/* Qwen3-VL vision tower of the MiniMax-H3 conditioner (docs/model/text_encoder.md section 3):
 * image/video preprocessing (smart_resize check, normalization, patch order), the ViT blocks, the
 * final merger and the deepstack mergers, and the reference-video frame sampling of diffusers.
 * Weights are the `model.visual.*` tensors of text_encoder/ (shard 14 in the release). */
#ifndef H3_VISION_H
#define H3_VISION_H

#include <stdint.h>

#include "../backend/backend.h"
#include "../core/error.h"
#include "../io/expect.h"
#include "../io/safetensors.h"

#define VISION_MAX_DEEPSTACK 8

typedef struct vision_config {
    int    depth;                    /* 27 */
    int    hidden_size;              /* 1152 */
    int    intermediate_size;        /* 4304 */
    int    num_heads;                /* 16 (head dim 72) */
    int    in_channels;              /* 3 */
    int    patch_size;               /* 16 */
    int    temporal_patch_size;      /* 2 */
    int    spatial_merge_size;       /* 2 */
    int    out_hidden_size;          /* 5120 = LM hidden */
    int    num_position_embeddings;  /* 2304 = 48 x 48 */
    int    n_deepstack;              /* 3 */
    int    deepstack_indexes[VISION_MAX_DEEPSTACK]; /* 8, 16, 24 */
    double rope_theta;               /* 10000 */
} vision_config;

/* Parses a `vision_config` JSON object (jansson json_t*, passed as void* to keep jansson out of
 * this header). Missing keys take the transformers defaults. */
int vision_config_parse(const void *json_obj, vision_config *cfg, const char *path_for_errors, h3_err *e);
/* The model.visual.* tensors (bf16), appended to out. */
int vision_expected_tensors(const vision_config *cfg, h3_expect_list *out, h3_err *e);

/* ---- preprocessing (docs/model/text_encoder.md 3.2, 3.3; processor/preprocessor_config.json) ---- */
typedef struct vision_proc_config {
    int64_t min_pixels, max_pixels;  /* size.shortest_edge / size.longest_edge */
    int     patch_size, temporal_patch_size, merge_size;
    float   mean[3], std[3];
} vision_proc_config;

/* dir: the snapshot's processor/ folder; video = 1 reads video_preprocessor_config.json. */
int vision_proc_config_load(const char *dir, int video, vision_proc_config *pc, h3_err *e);

/* Qwen2-VL smart_resize: the size the processor would resize (h, w) to (num_frames > 0: the
 * Qwen3-VL video variant whose pixel budget covers the clip). Python half-to-even rounding. */
int vision_smart_resize(int64_t h, int64_t w, int num_frames, const vision_proc_config *pc, int64_t *oh,
                        int64_t *ow, h3_err *e);

/* Frames (uint8 RGB, [n_frames][h][w][3]) -> pixel_values [grid_t*grid_h*grid_w, 3*tp*p*p] in the
 * processor's row order (t, bh, bw, mh, mw) and vector order (c, tau, py, px). One frame = an image
 * (duplicated to fill the temporal patch); more frames = a video (the last repeated to even).
 * An image whose smart_resize size differs is resized first as transformers' PIL processor
 * (Qwen2VLImageProcessorPil) does: PIL BICUBIC on the uint8 RGB image; grid_thw is then that of
 * the resized image. Videos needing a resize (the torchvision-only video processor) are rejected.
 * *pixel_values is malloc'd (caller frees). */
int vision_preprocess(const uint8_t *frames, int n_frames, int h, int w, const vision_proc_config *pc,
                      float **pixel_values, int64_t grid_thw[3], h3_err *e);

/* diffusers _sample_video_condition_frames: indices of the frames the conditioner reads
 * (every fps/sample_fps-th, Python rounding, deduplicated) and one timestamp per vision block
 * (mean of the first and last time of each temporal_patch group, the last time repeated to fill).
 * indices: capacity n_frames; block_ts: capacity n_frames. Fails when fewer than temporal_patch
 * frames are sampled (as diffusers). */
int vision_sample_video(int n_frames, double fps, double sample_fps, int temporal_patch, int *indices,
                        int *n_indices, double *block_ts, int *n_blocks, h3_err *e);

/* ---- the tower ---- */
typedef struct vision_model vision_model;

/* Opens the tower over an already-open tensor set (not owned; must outlive the model). Weights
 * are streamed block by block at forward time. bf16: compute as the release runs. */
vision_model *vision_new(h3_backend *be, const vision_config *cfg, const st_set *weights, int bf16, h3_err *e);
void          vision_free(vision_model *m);

/* pixel_values [N, C*tp*p*p] (host), grid_thw [n_items][3]; N = sum t*h*w. Writes (host)
 * merged [N/4, out_hidden] and deep [n_deepstack][N/4][out_hidden] (deep may be NULL).
 * Attention never crosses an item or a temporal block (docs/model/text_encoder.md 3.5 step 4d). */
int vision_forward(vision_model *m, const float *pixel_values, int64_t N, const int64_t *grid_thw, int n_items,
                   float *merged, float *deep, h3_err *e);

#endif
