/* The prompt presentation of each task (docs/model/text_encoder.md section 4; diffusers
 * minimax_h3 encoders.py): token ids with one MiniMax modality tag per row (1 text, 0 every row of
 * a vision block), and the Qwen3-VL rope position ids of the sequence (get_rope_index, docs/model/text_encoder.md 2.8).
 *
 * Text segments (labels, timestamps, the prompt) are tokenized separately through a callback, so
 * the presentation does not depend on a particular tokenizer object. */
#ifndef H3_PRESENTATION_H
#define H3_PRESENTATION_H

#include <stdint.h>

#include "../core/error.h"

enum { PRES_TAG_VIDEO = 0, PRES_TAG_TEXT = 1, PRES_TAG_AUDIO = 2 };

/* Special ids (snapshot text_encoder/config.json; the tokenizer's added tokens). */
#define PRES_VISION_START 151652
#define PRES_VISION_END   151653
#define PRES_IMAGE_PAD    151655
#define PRES_VIDEO_PAD    151656

/* Tokenizes one UTF-8 segment with add_special_tokens=False. *ids is malloc'd (caller frees). */
typedef int (*pres_encode_fn)(void *ctx, const char *text, int64_t **ids, int64_t *n, h3_err *e);

/* h3's limit on the prompt's own tokens (docs/robustness.md): the reference tokenizes without truncation (no
 * max_sequence_length), so the conditioner's cost grows with the square of any prompt's length. */
#define PRES_MAX_PROMPT_TOKENS 4096
/* The prompt's token count against PRES_MAX_PROMPT_TOKENS, before any model loads: 0, or -1 with one line in e. */
int presentation_check_prompt_tokens(pres_encode_fn enc, void *ctx, const char *prompt, h3_err *e);

typedef struct presentation {
    int64_t *ids;
    int64_t *tags; /* PRES_TAG_TEXT / PRES_TAG_VIDEO per row */
    int64_t  L;
} presentation;

void presentation_free(presentation *p);

/* pres_encode_fn over the real tokenizer (ctx: a const h3_tokenizer *, src/model/tokenizer.h). */
int presentation_tokenizer_encode(void *tokenizer, const char *text, int64_t **ids, int64_t *n, h3_err *e);

/* Rejects a prompt that contains a vision special token string (<|vision_start|>, <|vision_end|>,
 * <|vision_pad|>, <|image_pad|>, <|video_pad|>): those would desynchronize rows and features. */
int presentation_check_prompt(const char *prompt, h3_err *e);

/* t2va: the prompt verbatim (an empty prompt is rejected). */
int presentation_t2va(pres_encode_fn enc, void *ctx, const char *prompt, presentation *out, h3_err *e);

/* fl2va: for keyframe i: "<Picture i>: " + vision block of tokens[i] image pads; then the prompt. */
int presentation_fl2va(pres_encode_fn enc, void *ctx, const char *prompt, int n_keyframes, const int64_t *tokens,
                       presentation *out, h3_err *e);

typedef enum pres_ref_kind { PRES_REF_IMAGE, PRES_REF_VIDEO, PRES_REF_AUDIO } pres_ref_kind;

typedef struct pres_ref {
    pres_ref_kind kind;
    int           has_audio;        /* audio reference, or a video with a soundtrack */
    int64_t       tokens;           /* image: merged tokens; video: merged tokens per block */
    int           n_blocks;         /* video: temporal blocks */
    const double *block_timestamps; /* video: one per block (seconds) */
} pres_ref;

/* ref2va: per reference in order: "<Audio j>: " if it carries audio; "<Picture i>: " + block; or
 * "<Video k>: " then per block "<t seconds>" ("%.1f", half-even) + block. Then the prompt. */
int presentation_ref2va(pres_encode_fn enc, void *ctx, const char *prompt, const pres_ref *refs, int n_refs,
                        presentation *out, h3_err *e);

/* Qwen3-VL get_rope_index (docs/model/text_encoder.md 2.8): positions [3][L] (T, H, W). image_grid / video_grid are
 * [n][3] (t, h, w) patch grids in order; a video grid is split into t blocks of one frame pair. */
int presentation_rope_index(const int64_t *ids, int64_t L, const int64_t *image_grid, int n_images,
                            const int64_t *video_grid, int n_videos, int spatial_merge, int64_t *positions, h3_err *e);

#endif
