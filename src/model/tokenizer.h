/* The MiniMax-H3 prompt tokenizer: Qwen2 byte-level BPE (docs/model/text_encoder.md §1).
 *
 * Loaded from a snapshot's tokenizer/ folder: vocab.json (byte-level token -> id), merges.txt
 * (merge ranks in file order) and tokenizer_config.json (added_tokens_decoder plus the special
 * tokens that exist only in additional_special_tokens, e.g. <d> = 151669; docs/model/text_encoder.md §1.3, trap 2).
 *
 * encode(text) = transformers' tokenizer(text, add_special_tokens=False)["input_ids"]:
 *   validate UTF-8 -> split out added tokens (leftmost-longest, raw text) -> NFC each plain segment
 *   -> Qwen2 pre-tokenizer regex (hand-written scanner over utf8proc categories) -> BPE per piece.
 * No BOS/EOS, no chat template, no truncation. See docs/tokenizer.md.
 *
 * A loaded tokenizer is read-only: tokenizer_encode may be called from several threads at once. */
#ifndef H3_TOKENIZER_H
#define H3_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef struct h3_tokenizer h3_tokenizer;

/* Loads DIR/vocab.json, DIR/merges.txt and DIR/tokenizer_config.json. NULL (e filled with one
 * line naming the file and the rule) on a missing or malformed file. */
h3_tokenizer *tokenizer_load(const char *dir, h3_err *e);

/* The same from in-memory file contents (used by tokenizer_load and the fuzzer). The *_name
 * arguments only label error messages. */
h3_tokenizer *tokenizer_load_buffers(const char *vocab_json, size_t vocab_len, const char *vocab_name,
                                     const char *merges_txt, size_t merges_len, const char *merges_name,
                                     const char *config_json, size_t config_len, const char *config_name,
                                     h3_err *e);

void tokenizer_free(h3_tokenizer *t);

/* Encodes len bytes of UTF-8 text (need not be NUL-terminated; NUL bytes are ordinary characters).
 * On success *ids is a malloc'd array of *n ids (NULL when *n == 0) the caller frees.
 * Fails on invalid UTF-8 ("prompt: invalid UTF-8 at byte N"). */
int tokenizer_encode(const h3_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n,
                     h3_err *e);

/* Decodes ids back to UTF-8 bytes (added tokens as their text). *out is malloc'd and
 * NUL-terminated; *out_len excludes the NUL. Fails on an id with no token. */
int tokenizer_decode(const h3_tokenizer *t, const int32_t *ids, size_t n, char **out, size_t *out_len,
                     h3_err *e);

/* Number of ids (max id + 1): 151676 for MiniMax-H3 (151643 vocab + 33 added). */
int32_t tokenizer_size(const h3_tokenizer *t);
/* The id of a token written as in the files: an added token's text ("<|vision_start|>", "<d>") or a
 * vocab.json key ("Ġthe"). -1 when there is no such token. */
int32_t tokenizer_token_to_id(const h3_tokenizer *t, const char *token);
/* The token string of an id as in the files (vocab.json key or added text); NULL when unused. */
const char *tokenizer_id_to_token(const h3_tokenizer *t, int32_t id);
/* 1 when id is an added token (split out of the text before BPE; docs/model/text_encoder.md §1.3). */
int tokenizer_is_added(const h3_tokenizer *t, int32_t id);

/* Ids the prompt presentations need (docs/model/text_encoder.md §4). */
typedef struct tokenizer_special_ids {
    int32_t endoftext, im_start, im_end;
    int32_t vision_start, vision_end, vision_pad, image_pad, video_pad;
    int32_t d_open, d_close, cutoff, lyrics_start, lyrics_end, caption_start, caption_end;
} tokenizer_special_ids;

/* Fills out; fails naming the first token the tokenizer lacks. */
int tokenizer_special(const h3_tokenizer *t, tokenizer_special_ids *out, h3_err *e);

#endif
