/* Probe op of the tokenizer (the probe contract, docs/probe.md):
 *   tokenize   text u8 [n] (UTF-8 bytes) -> input_ids i64 [L] (no special tokens added)
 * --model is a snapshot (its tokenizer/ folder is used) or a tokenizer folder itself. */
#include <stdlib.h>

#include "io/snapshot.h"
#include "model/tokenizer.h"
#include "probe.h"

int probe_tokenize(probe_ctx *p, h3_err *e) {
    char dir[4096], vocab[4096];
    snapshot_path(dir, sizeof dir, p->model, "tokenizer");
    if (!snapshot_exists(snapshot_path(vocab, sizeof vocab, dir, "vocab.json")) &&
        snapshot_exists(snapshot_path(vocab, sizeof vocab, p->model, "vocab.json")))
        snapshot_path(dir, sizeof dir, p->model, "."); /* --model is the tokenizer folder */
    h3_tensor *text = NULL;
    if (probe_input(p, "text", H3_U8, 1, &text, e)) return -1;
    h3_tokenizer *tok = tokenizer_load(dir, e);
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = -1;
    if (!tok) goto out;
    if (tokenizer_encode(tok, text->data, (size_t)text->shape[0], &ids, &n, e)) {
        h3_fail_prefix(e, "input 'text'");
        goto out;
    }
    int64_t shape[1] = {(int64_t)n};
    h3_tensor *out = h3_tensor_new(H3_I64, 1, shape, e);
    if (!out) goto out;
    for (size_t i = 0; i < n; i++) ((int64_t *)out->data)[i] = ids[i];
    rc = probe_output(p, "input_ids", out, e);
    h3_tensor_free(out);
out:
    free(ids);
    tokenizer_free(tok);
    h3_tensor_free(text);
    return rc;
}
