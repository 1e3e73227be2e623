/* libFuzzer target for the tokenizer (src/model/tokenizer.c).
 *
 * The first byte picks what the rest is:
 *   0, 1  a prompt, encoded with the real MiniMax-H3 tokenizer (tests/fixtures/skeleton/tokenizer,
 *         or $H3_TOKENIZER_DIR). Oracles: encode fails exactly when the bytes are not valid UTF-8;
 *         every id is a real token; decode(encode(x)) == NFC(x) when x holds no '<' (so no added
 *         token can split the normalization).
 *   2     three tokenizer files (vocab.json, merges.txt, tokenizer_config.json) separated by 0xFF
 *         bytes, loaded from memory; if they load, a few prompts are encoded.
 *   3     merges.txt and tokenizer_config.json (separated by 0xFF) over a fixed small vocabulary
 *         (all 256 bytes plus a few merged tokens), so mutations reach the merge and added-token
 *         parsers instead of dying in the JSON of the vocab.
 *
 *   make fuzz && build-fuzz/fuzz_tokenizer -max_total_time=300 fuzz/corpus/tokenizer */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "model/tokenizer.h"

static h3_tokenizer *real_tok;
static char *small_vocab;
static size_t small_vocab_len;

/* {"Ā":0, ..., "!":.., ..., "ab":256, ...}: the 256 single bytes in the byte-level alphabet plus a
 * few merged tokens, so small merge files can be valid. */
static void build_small_vocab(void) {
    static const char *extra[] = {"ab", "abc", "\xc4\xa0t", "he", "\xc4\xa0the", "th", "the", "<d>", "\xc4\xa0\xc4\xa0"};
    size_t cap = 8192, n = 0;
    small_vocab = malloc(cap);
    n += (size_t)snprintf(small_vocab + n, cap - n, "{");
    int next = 0x100, id = 0;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        int cp = keep ? b : next++;
        uint8_t u[4];
        utf8proc_ssize_t k = utf8proc_encode_char(cp, u);
        char key[16] = {0};
        if (cp == '"' || cp == '\\') {
            key[0] = '\\';
            key[1] = (char)cp;
        } else {
            memcpy(key, u, (size_t)k);
        }
        n += (size_t)snprintf(small_vocab + n, cap - n, "%s\"%s\":%d", id ? "," : "", key, id);
        id++;
    }
    for (size_t i = 0; i < sizeof extra / sizeof *extra; i++)
        n += (size_t)snprintf(small_vocab + n, cap - n, ",\"%s\":%d", extra[i], id++);
    n += (size_t)snprintf(small_vocab + n, cap - n, "}");
    small_vocab_len = n;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *dir = getenv("H3_TOKENIZER_DIR");
    h3_err e;
    real_tok = tokenizer_load(dir ? dir : "tests/fixtures/skeleton/tokenizer", &e);
    if (!real_tok) {
        fprintf(stderr, "fuzz_tokenizer: %s (run from the repository root or set H3_TOKENIZER_DIR)\n", e.msg);
        exit(1);
    }
    build_small_vocab();
    return 0;
}

static int valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - i), &c);
        if (k <= 0) return 0;
        i += (size_t)k;
    }
    return 1;
}

static void fuzz_prompt(const h3_tokenizer *t, const uint8_t *s, size_t n, int oracles) {
    int32_t *ids = NULL;
    size_t m = 0;
    h3_err e;
    int rc = tokenizer_encode(t, (const char *)s, n, &ids, &m, &e);
    if (!oracles) {
        free(ids);
        return;
    }
    if ((rc == 0) != valid_utf8(s, n)) {
        fprintf(stderr, "encode rc %d but valid_utf8 %d: %s\n", rc, valid_utf8(s, n), rc ? e.msg : "");
        __builtin_trap();
    }
    if (rc) return;
    if (m > n) __builtin_trap(); /* every token covers at least one byte */
    for (size_t i = 0; i < m; i++)
        if (!tokenizer_id_to_token(t, ids[i])) __builtin_trap();
    if (!memchr(s, '<', n)) {
        char *back = NULL;
        size_t back_len = 0;
        uint8_t *nfc = NULL;
        utf8proc_ssize_t nl = utf8proc_map(s, (utf8proc_ssize_t)n, &nfc, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        if (tokenizer_decode(t, ids, m, &back, &back_len, &e) != 0 || nl < 0 || (size_t)nl != back_len ||
            memcmp(back, nfc, back_len) != 0) {
            fprintf(stderr, "decode(encode(x)) != NFC(x)\n");
            __builtin_trap();
        }
        free(back);
        free(nfc);
    }
    free(ids);
}

/* Splits at 0xFF bytes into up to k parts (missing parts are empty). */
static void split_ff(const uint8_t *s, size_t n, int k, const char **part, size_t *len) {
    for (int i = 0; i < k; i++) {
        part[i] = "";
        len[i] = 0;
    }
    int i = 0;
    size_t start = 0;
    for (size_t j = 0; j <= n && i < k; j++)
        if (j == n || (s[j] == 0xFF && i < k - 1)) {
            part[i] = (const char *)s + start;
            len[i] = j - start;
            i++;
            start = j + 1;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    int mode = data[0] & 3;
    data++;
    size--;
    if (mode <= 1) {
        fuzz_prompt(real_tok, data, size, 1);
        return 0;
    }
    const char *part[3];
    size_t len[3];
    h3_err e;
    h3_tokenizer *t;
    if (mode == 2) {
        split_ff(data, size, 3, part, len);
        t = tokenizer_load_buffers(part[0], len[0], "vocab.json", part[1], len[1], "merges.txt", part[2], len[2],
                                   "tokenizer_config.json", &e);
    } else {
        split_ff(data, size, 2, part, len);
        t = tokenizer_load_buffers(small_vocab, small_vocab_len, "vocab.json", part[0], len[0], "merges.txt", part[1],
                                   len[1], "tokenizer_config.json", &e);
    }
    if (!t) {
        if (!memchr(e.msg, 0, sizeof e.msg) || strchr(e.msg, '\n')) __builtin_trap(); /* one terminated line */
        return 0;
    }
    static const char *prompts[] = {"the abc he<d>th  the\n\n x", "a'S 123 \xe4\xb8\xad\xe6\x96\x87 e\xcc\x81", ""};
    for (size_t i = 0; i < 3; i++) fuzz_prompt(t, (const uint8_t *)prompts[i], strlen(prompts[i]), 0);
    tokenizer_size(t);
    tokenizer_free(t);
    return 0;
}
