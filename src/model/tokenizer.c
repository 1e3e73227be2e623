/* Qwen2 byte-level BPE for MiniMax-H3 (docs/model/text_encoder.md §1). See tokenizer.h and docs/tokenizer.md.
 *
 * Layout of the loaded tokenizer:
 *   - every id's token string as written in the files and its raw bytes (decoded from the
 *     byte-level alphabet once at load time, §1.6), both in one arena addressed by offsets;
 *   - a hash map raw bytes -> id (vocab) and a hash map (left id, right id) -> (rank, merged id);
 *   - the added tokens, bucketed by first byte, longest first (leftmost-longest split, §1.3).
 * Encoding never touches the byte-level alphabet: BPE runs on raw UTF-8 bytes. */
#include "tokenizer.h"

#include "../io/config.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* Ids above this are refused at load (a hostile file must not make us allocate gigabytes). */
#define TOK_MAX_ID (1 << 24)
#define TOK_MAX_ADDED 65536
#define NO_TOKEN UINT32_MAX

#define ID_STR(t, id) ((t)->str_off[id] == NO_TOKEN ? NULL : (t)->arena + (t)->str_off[id])
#define STR_AT(t, id) ((t)->arena + (t)->str_off[id]) /* for a used id */
#define ID_BYTES(t, id) ((const uint8_t *)(t)->arena + (t)->bytes_off[id])

typedef struct added_token {
    char   *text;
    size_t  len;
    int32_t id;
} added_token;

struct h3_tokenizer {
    int32_t   n_ids;        /* max id + 1 */
    int32_t   cap_ids;      /* allocated length of the id_* arrays */
    char     *arena;        /* token strings (NUL-terminated) and token bytes */
    size_t    arena_len, arena_cap;
    uint32_t *str_off;      /* [n_ids] arena offset of the token string, NO_TOKEN for unused ids */
    uint32_t *bytes_off;    /* [n_ids] arena offset of the token's raw bytes */
    uint32_t *id_len;       /* [n_ids] byte count of the raw bytes */
    uint8_t  *is_added;     /* [n_ids] */

    /* vocab: open addressing over raw token bytes -> id; a slot keeps a hash fingerprint so a probe
     * touches the token bytes only on a likely hit */
    struct vocab_slot { uint32_t fp; int32_t id; } *vocab_slots; /* id -1 = empty */
    uint64_t  vocab_mask;

    /* merges: key (left << 32 | right), UINT64_MAX = empty slot */
    uint64_t *merge_keys;
    int32_t  *merge_rank;
    int32_t  *merge_new;
    uint64_t  merge_mask;

    int32_t   byte_id[256]; /* id of each single-byte token */
    int32_t  *odd_ids;      /* vocab ids whose key is outside the byte-level alphabet (not in the map) */
    int       n_odd;

    added_token *added;     /* sorted by first byte, then longest first */
    int          n_added;
    int          added_first[257]; /* added[added_first[b] .. added_first[b+1]) start with byte b */
};

/* ------------------------------------------------------------------------------------------------
 * Byte-level alphabet (§1.6): bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF map to themselves; the other
 * 68 bytes, in increasing order, map to U+0100.. U+0143. */

static void byte_alphabet(int32_t cp_of_byte[256], int16_t byte_of_cp[0x144]) {
    for (int c = 0; c < 0x144; c++) byte_of_cp[c] = -1;
    int next = 0x100;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        cp_of_byte[b] = keep ? b : next++;
        byte_of_cp[cp_of_byte[b]] = (int16_t)b;
    }
}

/* Decodes a byte-level token string into raw bytes (out must hold len bytes). Returns the byte
 * count, or -1 if a character is outside the alphabet (such a token can never come out of BPE). */
static long alphabet_decode(const int16_t byte_of_cp[0x144], const char *s, size_t len, uint8_t *out) {
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0;
    long n = 0;
    while (i < len) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(p + i, (utf8proc_ssize_t)(len - i), &cp);
        if (k <= 0 || cp >= 0x144 || byte_of_cp[cp] < 0) return -1;
        out[n++] = (uint8_t)byte_of_cp[cp];
        i += (size_t)k;
    }
    return n;
}

/* ------------------------------------------------------------------------------------------------
 * Hash maps */

/* splitmix64 finalizer: every input bit reaches the low bits the tables index with */
static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t hash_bytes(const uint8_t *s, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return mix64(h);
}

static uint64_t hash_pair(uint64_t key) { return mix64(key); }

static uint64_t table_size_for(size_t n) {
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)n + 16) cap <<= 1;
    return cap;
}

/* Id of the token with exactly these raw bytes, or -1. */
static int32_t vocab_find(const h3_tokenizer *t, const uint8_t *s, size_t n) {
    uint64_t hash = hash_bytes(s, n);
    uint32_t fp = (uint32_t)(hash >> 32);
    for (uint64_t h = hash & t->vocab_mask;; h = (h + 1) & t->vocab_mask) {
        int32_t id = t->vocab_slots[h].id;
        if (id < 0) return -1;
        if (t->vocab_slots[h].fp == fp && t->id_len[id] == n && memcmp(ID_BYTES(t, id), s, n) == 0) return id;
    }
}

static void vocab_insert(h3_tokenizer *t, int32_t id) {
    uint64_t hash = hash_bytes(ID_BYTES(t, id), t->id_len[id]);
    uint64_t h = hash & t->vocab_mask;
    while (t->vocab_slots[h].id >= 0) h = (h + 1) & t->vocab_mask;
    t->vocab_slots[h].fp = (uint32_t)(hash >> 32);
    t->vocab_slots[h].id = id;
}

/* Appends n bytes (+ a NUL when nul) to the arena; returns the offset or NO_TOKEN when out of memory. */
static uint32_t arena_put(h3_tokenizer *t, const void *data, size_t n, int nul) {
    size_t need = t->arena_len + n + (nul ? 1 : 0);
    if (need >= NO_TOKEN) return NO_TOKEN;
    if (need > t->arena_cap) {
        size_t cap = t->arena_cap ? t->arena_cap : 1 << 16;
        while (cap < need) cap *= 2;
        char *a = realloc(t->arena, cap);
        if (!a) return NO_TOKEN;
        t->arena = a;
        t->arena_cap = cap;
    }
    uint32_t off = (uint32_t)t->arena_len;
    if (n) memcpy(t->arena + off, data, n);
    if (nul) t->arena[off + n] = 0;
    t->arena_len = need;
    return off;
}

/* Slot of the merge (a, b): either holding it or the empty slot where it belongs. */
static uint64_t merge_slot(const h3_tokenizer *t, int32_t a, int32_t b) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint64_t h = hash_pair(key) & t->merge_mask;
    while (t->merge_keys[h] != UINT64_MAX && t->merge_keys[h] != key) h = (h + 1) & t->merge_mask;
    return h;
}

/* ------------------------------------------------------------------------------------------------
 * Loading */

/* vocab.json, merges.txt, tokenizer_config.json: regular files only, never blocking, size-capped (io/config.h) */
static int read_whole_file(const char *path, char **buf, size_t *len, h3_err *e) {
    return h3_read_small(path, H3_JSON_MAX, buf, len, e);
}

/* Grows the id tables to hold id (capacity doubles, so loading is linear). */
static int ensure_ids(h3_tokenizer *t, int32_t id, h3_err *e) {
    if (id < t->n_ids) return 0;
    if (id >= t->cap_ids) {
        int32_t cap = t->cap_ids ? t->cap_ids : 1024;
        while (cap <= id) cap = cap > TOK_MAX_ID / 2 ? TOK_MAX_ID + 1 : cap * 2;
        uint32_t *s = realloc(t->str_off, (size_t)cap * sizeof *s);
        if (s) t->str_off = s;
        uint32_t *b = realloc(t->bytes_off, (size_t)cap * sizeof *b);
        if (b) t->bytes_off = b;
        uint32_t *l = realloc(t->id_len, (size_t)cap * sizeof *l);
        if (l) t->id_len = l;
        uint8_t *a = realloc(t->is_added, (size_t)cap);
        if (a) t->is_added = a;
        if (!s || !b || !l || !a) return h3_fail(e, "tokenizer: out of memory for %d ids", cap);
        t->cap_ids = cap;
    }
    for (int32_t i = t->n_ids; i <= id; i++) {
        t->str_off[i] = NO_TOKEN;
        t->bytes_off[i] = NO_TOKEN;
        t->id_len[i] = 0;
        t->is_added[i] = 0;
    }
    t->n_ids = id + 1;
    return 0;
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

static int load_vocab(h3_tokenizer *t, const char *buf, size_t len, const char *name, h3_err *e) {
    json_error_t jerr;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
    if (!root) return h3_fail(e, "%s: invalid JSON at line %d column %d: %s", name, jerr.line, jerr.column, jerr.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return h3_fail(e, "%s: expected a JSON object of token -> id", name);
    }
    size_t n = json_object_size(root);
    if (n == 0) {
        json_decref(root);
        return h3_fail(e, "%s: the vocabulary is empty", name);
    }
    int16_t byte_of_cp[0x144];
    int32_t cp_of_byte[256];
    byte_alphabet(cp_of_byte, byte_of_cp);
    int rc = 0;
    uint8_t *scratch = NULL;
    size_t scratch_cap = 0;
    for (void *it = json_object_iter(root); it; it = json_object_iter_next(root, it)) {
        const char *key = json_object_iter_key(it);
        size_t klen = json_object_iter_key_len(it);
        json_t *v = json_object_iter_value(it);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= TOK_MAX_ID) {
            rc = h3_fail(e, "%s: token '%.64s' needs an integer id in [0, %d)", name, key, TOK_MAX_ID);
            break;
        }
        int32_t id = (int32_t)json_integer_value(v);
        if ((rc = ensure_ids(t, id, e)) != 0) break;
        if (t->str_off[id] != NO_TOKEN) {
            rc = h3_fail(e, "%s: id %d is used by both '%.64s' and '%.64s'", name, id, ID_STR(t, id), key);
            break;
        }
        if (klen > scratch_cap) {
            free(scratch);
            scratch_cap = 2 * klen;
            scratch = malloc(scratch_cap);
            if (!scratch) {
                rc = h3_fail(e, "%s: out of memory", name);
                break;
            }
        }
        long nb = alphabet_decode(byte_of_cp, key, klen, scratch);
        if (nb <= 0) {
            /* Outside the byte-level alphabet: unreachable by BPE, kept for id -> token only. */
            if (klen) memcpy(scratch, key, klen); /* klen 0: the empty key "" */
            nb = (long)klen;
            t->is_added[id] = 2; /* marker: not in the BPE map */
        }
        t->str_off[id] = arena_put(t, key, klen, 1);
        t->bytes_off[id] = arena_put(t, scratch, (size_t)nb, 0);
        t->id_len[id] = (uint32_t)nb;
        if (t->str_off[id] == NO_TOKEN || t->bytes_off[id] == NO_TOKEN) {
            rc = h3_fail(e, "%s: out of memory", name);
            break;
        }
    }
    free(scratch);
    json_decref(root);
    if (rc) return rc;

    t->vocab_mask = table_size_for(n) - 1;
    t->vocab_slots = malloc((t->vocab_mask + 1) * sizeof *t->vocab_slots);
    if (!t->vocab_slots) return h3_fail(e, "%s: out of memory", name);
    memset(t->vocab_slots, 0xff, (t->vocab_mask + 1) * sizeof *t->vocab_slots);
    for (int32_t id = 0; id < t->n_ids; id++) {
        if (t->str_off[id] == NO_TOKEN) continue;
        if (t->is_added[id] == 2) {
            t->is_added[id] = 0;
            int32_t *o = realloc(t->odd_ids, (size_t)(t->n_odd + 1) * sizeof *o);
            if (!o) return h3_fail(e, "%s: out of memory", name);
            t->odd_ids = o;
            t->odd_ids[t->n_odd++] = id;
            continue;
        }
        vocab_insert(t, id);
    }
    for (int b = 0; b < 256; b++) {
        uint8_t c = (uint8_t)b;
        t->byte_id[b] = vocab_find(t, &c, 1);
        if (t->byte_id[b] < 0)
            return h3_fail(e, "%s: no token for byte 0x%02X (byte-level BPE needs all 256 single bytes)", name, b);
    }
    return 0;
}

/* Looks up one merge operand (a vocab key string) and returns its id, or -1. */
static int32_t operand_id(const h3_tokenizer *t, const int16_t byte_of_cp[0x144], const char *s, size_t n,
                          uint8_t *scratch) {
    long nb = alphabet_decode(byte_of_cp, s, n, scratch);
    if (nb <= 0) return -1;
    return vocab_find(t, scratch, (size_t)nb);
}

/* merges.txt: one "LEFT RIGHT" per line, rank = order of the merge lines; a first line starting
 * with "#version" is skipped (this snapshot has none: trap 10). Lines end in LF or CRLF. */
static int load_merges(h3_tokenizer *t, const char *buf, size_t len, const char *name, h3_err *e) {
    int16_t byte_of_cp[0x144];
    int32_t cp_of_byte[256];
    byte_alphabet(cp_of_byte, byte_of_cp);

    size_t n_lines = 0;
    for (size_t i = 0; i < len; i++) n_lines += buf[i] == '\n';
    n_lines++;
    t->merge_mask = table_size_for(n_lines) - 1;
    size_t cap = t->merge_mask + 1;
    t->merge_keys = malloc(cap * sizeof *t->merge_keys);
    t->merge_rank = malloc(cap * sizeof *t->merge_rank);
    t->merge_new = malloc(cap * sizeof *t->merge_new);
    uint8_t *scratch = malloc(len + 1);
    if (!t->merge_keys || !t->merge_rank || !t->merge_new || !scratch) {
        free(scratch);
        return h3_fail(e, "%s: out of memory", name);
    }
    memset(t->merge_keys, 0xff, cap * sizeof *t->merge_keys);

    int rc = 0;
    int32_t rank = 0;
    size_t line_no = 0, pos = 0;
    while (pos < len) {
        const char *line = buf + pos;
        const char *nl = memchr(line, '\n', len - pos);
        size_t ll = nl ? (size_t)(nl - line) : len - pos;
        pos += ll + (nl ? 1 : 0);
        line_no++;
        if (ll && line[ll - 1] == '\r') ll--;
        if (ll >= 8 && memcmp(line, "#version", 8) == 0) continue;
        for (size_t i = 0; i < ll;) {
            utf8proc_int32_t cp;
            utf8proc_ssize_t k = utf8proc_iterate((const uint8_t *)line + i, (utf8proc_ssize_t)(ll - i), &cp);
            if (k <= 0) {
                rc = h3_fail(e, "%s line %zu: invalid UTF-8", name, line_no);
                goto done;
            }
            i += (size_t)k;
        }
        const char *sp = memchr(line, ' ', ll);
        if (!sp || sp == line || sp == line + ll - 1 || memchr(sp + 1, ' ', (size_t)(line + ll - sp - 1))) {
            rc = h3_fail(e, "%s line %zu: expected 'LEFT RIGHT' (two tokens separated by one space), got '%.*s'",
                         name, line_no, (int)(ll > 80 ? 80 : ll), line);
            goto done;
        }
        size_t la = (size_t)(sp - line), lb = ll - la - 1;
        int32_t a = operand_id(t, byte_of_cp, line, la, scratch);
        int32_t b = operand_id(t, byte_of_cp, sp + 1, lb, scratch);
        if (a < 0 || b < 0) {
            rc = h3_fail(e, "%s line %zu: token '%.*s' is not in the vocabulary", name, line_no,
                         (int)(a < 0 ? la : lb), a < 0 ? line : sp + 1);
            goto done;
        }
        /* the merged token must exist too (as in HF tokenizers' BPE builder) */
        memcpy(scratch, ID_BYTES(t, a), t->id_len[a]);
        memcpy(scratch + t->id_len[a], ID_BYTES(t, b), t->id_len[b]);
        int32_t ab = vocab_find(t, scratch, (size_t)t->id_len[a] + t->id_len[b]);
        if (ab < 0) {
            rc = h3_fail(e, "%s line %zu: merged token '%.*s%.*s' is not in the vocabulary", name, line_no,
                         (int)la, line, (int)lb, sp + 1);
            goto done;
        }
        /* a repeated pair keeps its later rank, as HF's hash map does */
        uint64_t s = merge_slot(t, a, b);
        t->merge_keys[s] = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
        t->merge_rank[s] = rank++;
        t->merge_new[s] = ab;
    }
done:
    free(scratch);
    return rc;
}

/* The id of the vocab.json key (byte-level alphabet text) key[0..len), or -1. */
static int32_t vocab_id_of_key(const h3_tokenizer *t, const char *key, size_t len) {
    int16_t byte_of_cp[0x144];
    int32_t cp_of_byte[256];
    byte_alphabet(cp_of_byte, byte_of_cp);
    uint8_t *scratch = malloc(len + 1);
    if (!scratch) return -1;
    long nb = alphabet_decode(byte_of_cp, key, len, scratch);
    int32_t id = nb > 0 ? vocab_find(t, scratch, (size_t)nb) : -1;
    free(scratch);
    for (int i = 0; i < t->n_odd && id < 0; i++)
        if (strlen(STR_AT(t, t->odd_ids[i])) == len && memcmp(STR_AT(t, t->odd_ids[i]), key, len) == 0)
            id = t->odd_ids[i];
    if (id >= 0 && (strlen(STR_AT(t, id)) != len || memcmp(STR_AT(t, id), key, len) != 0)) id = -1;
    return id;
}

/* Adds (or re-marks) an added token. id < 0: take the id of an existing token with this text, else
 * the next free id the way HF's AddedVocabulary assigns it. */
static int add_token(h3_tokenizer *t, const char *text, size_t len, int32_t id, int32_t vocab_count,
                     const char *name, h3_err *e) {
    if (len == 0) return h3_fail(e, "%s: an added token has empty content", name);
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].len == len && memcmp(t->added[i].text, text, len) == 0) {
            if (id >= 0 && id != t->added[i].id)
                return h3_fail(e, "%s: added token '%.64s' has two ids (%d and %d)", name, t->added[i].text,
                               t->added[i].id, id);
            return 0;
        }
    if (t->n_added >= TOK_MAX_ADDED) return h3_fail(e, "%s: more than %d added tokens", name, TOK_MAX_ADDED);
    if (id < 0) {
        /* an existing vocab token with exactly this text keeps its id */
        id = vocab_id_of_key(t, text, len);
        if (id < 0) {
            int32_t max_added = -1;
            for (int i = 0; i < t->n_added; i++)
                if (t->added[i].id > max_added) max_added = t->added[i].id;
            id = max_added >= vocab_count ? max_added + 1 : vocab_count;
            while (id < t->n_ids && t->str_off[id] != NO_TOKEN) id++;
        }
    }
    if (id >= TOK_MAX_ID) return h3_fail(e, "%s: added token id %d out of range", name, id);
    if (ensure_ids(t, id, e)) return -1;
    if (t->str_off[id] != NO_TOKEN && (strlen(STR_AT(t, id)) != len || memcmp(STR_AT(t, id), text, len) != 0))
        return h3_fail(e, "%s: id %d is both '%.64s' and added token '%.*s'", name, id, ID_STR(t, id),
                       (int)(len > 64 ? 64 : len), text);
    added_token *na = realloc(t->added, (size_t)(t->n_added + 1) * sizeof *na);
    if (!na) return h3_fail(e, "%s: out of memory", name);
    t->added = na;
    added_token *tok = &t->added[t->n_added];
    tok->text = dup_n(text, len);
    if (!tok->text) return h3_fail(e, "%s: out of memory", name);
    tok->len = len;
    tok->id = id;
    t->n_added++;
    if (t->str_off[id] == NO_TOKEN) {
        t->str_off[id] = arena_put(t, text, len, 1);
        t->bytes_off[id] = arena_put(t, text, len, 0);
        if (t->str_off[id] == NO_TOKEN || t->bytes_off[id] == NO_TOKEN) return h3_fail(e, "%s: out of memory", name);
        t->id_len[id] = (uint32_t)len;
    }
    t->is_added[id] = 1;
    return 0;
}

static int json_flag(json_t *obj, const char *key) {
    json_t *v = json_object_get(obj, key);
    return v && json_is_true(v);
}

/* A special-token entry is a string or an object with "content" (AddedToken serialization). */
static int special_entry(h3_tokenizer *t, json_t *v, int32_t vocab_count, const char *name, h3_err *e) {
    if (!v || json_is_null(v)) return 0;
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (!json_is_string(v)) return h3_fail(e, "%s: a special token entry is not a string", name);
    return add_token(t, json_string_value(v), json_string_length(v), -1, vocab_count, name, e);
}

static int cmp_added(const void *pa, const void *pb) {
    const added_token *a = pa, *b = pb;
    uint8_t fa = (uint8_t)a->text[0], fb = (uint8_t)b->text[0];
    if (fa != fb) return fa < fb ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return memcmp(a->text, b->text, a->len);
}

static int load_config(h3_tokenizer *t, const char *buf, size_t len, int32_t vocab_count, const char *name,
                       h3_err *e) {
    json_error_t jerr;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return h3_fail(e, "%s: invalid JSON at line %d column %d: %s", name, jerr.line, jerr.column, jerr.text);
    int rc = 0;
    if (!json_is_object(root)) {
        rc = h3_fail(e, "%s: expected a JSON object", name);
        goto out;
    }
    json_t *dec = json_object_get(root, "added_tokens_decoder");
    if (dec && !json_is_object(dec)) {
        rc = h3_fail(e, "%s: added_tokens_decoder must be an object of id -> token", name);
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach(dec, key, val) {
        char *end;
        errno = 0;
        long id = strtol(key, &end, 10);
        if (!*key || *end || errno || id < 0 || id >= TOK_MAX_ID) {
            rc = h3_fail(e, "%s: added_tokens_decoder key '%.32s' is not an id in [0, %d)", name, key, TOK_MAX_ID);
            goto out;
        }
        json_t *content = json_is_object(val) ? json_object_get(val, "content") : NULL;
        if (!json_is_string(content)) {
            rc = h3_fail(e, "%s: added_tokens_decoder[%ld] has no string 'content'", name, id);
            goto out;
        }
        /* This tokenizer implements the flags MiniMax-H3 uses (all false, docs/model/text_encoder.md §1.3); refuse others
         * rather than tokenize differently from the reference. */
        if (json_flag(val, "lstrip") || json_flag(val, "rstrip") || json_flag(val, "single_word") ||
            json_flag(val, "normalized")) {
            rc = h3_fail(e, "%s: added token '%.64s' sets lstrip/rstrip/single_word/normalized, which is not supported",
                         name, json_string_value(content));
            goto out;
        }
        if ((rc = add_token(t, json_string_value(content), json_string_length(content), (int32_t)id, vocab_count,
                            name, e)) != 0)
            goto out;
    }
    /* transformers then registers every special token (named ones in SPECIAL_TOKENS_ATTRIBUTES order,
     * then additional_special_tokens); those not known yet get the next free ids (§1.3, trap 2). */
    static const char *named[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                                  "mask_token"};
    for (size_t i = 0; i < sizeof named / sizeof *named; i++)
        if ((rc = special_entry(t, json_object_get(root, named[i]), vocab_count, name, e)) != 0) goto out;
    static const char *lists[] = {"additional_special_tokens", "extra_special_tokens"};
    for (size_t l = 0; l < 2; l++) {
        json_t *list = json_object_get(root, lists[l]);
        if (!list || json_is_null(list)) continue;
        if (json_is_array(list)) {
            size_t i;
            json_t *v;
            json_array_foreach(list, i, v) if ((rc = special_entry(t, v, vocab_count, name, e)) != 0) goto out;
        } else if (json_is_object(list)) {
            const char *k;
            json_t *v;
            json_object_foreach(list, k, v) if ((rc = special_entry(t, v, vocab_count, name, e)) != 0) goto out;
        } else {
            rc = h3_fail(e, "%s: %s must be a list", name, lists[l]);
            goto out;
        }
    }
out:
    json_decref(root);
    if (rc) return rc;
    if (t->n_added > 1) qsort(t->added, (size_t)t->n_added, sizeof *t->added, cmp_added);
    int k = 0;
    for (int b = 0; b <= 256; b++) {
        while (k < t->n_added && (uint8_t)t->added[k].text[0] < b) k++;
        t->added_first[b] = k;
    }
    return 0;
}

/* Messages quote file content (tokens, merge lines, JSON near-text): keep them one printable line. */
static void one_line(h3_err *e) {
    if (!e) return;
    for (char *c = e->msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7F) *c = '?';
}

h3_tokenizer *tokenizer_load_buffers(const char *vocab_json, size_t vocab_len, const char *vocab_name,
                                     const char *merges_txt, size_t merges_len, const char *merges_name,
                                     const char *config_json, size_t config_len, const char *config_name,
                                     h3_err *e) {
    h3_tokenizer *t = calloc(1, sizeof *t);
    if (!t) {
        h3_fail(e, "tokenizer: out of memory");
        return NULL;
    }
    if (load_vocab(t, vocab_json, vocab_len, vocab_name, e) != 0) goto fail;
    int32_t vocab_count = 0;
    for (int32_t i = 0; i < t->n_ids; i++) vocab_count += t->str_off[i] != NO_TOKEN;
    if (load_merges(t, merges_txt, merges_len, merges_name, e) != 0) goto fail;
    if (load_config(t, config_json, config_len, vocab_count, config_name, e) != 0) goto fail;
    return t;
fail:
    one_line(e);
    tokenizer_free(t);
    return NULL;
}

h3_tokenizer *tokenizer_load(const char *dir, h3_err *e) {
    static const char *names[3] = {"vocab.json", "merges.txt", "tokenizer_config.json"};
    char path[3][4096];
    char *buf[3] = {0};
    size_t len[3] = {0};
    h3_tokenizer *t = NULL;
    for (int i = 0; i < 3; i++) {
        if ((size_t)snprintf(path[i], sizeof path[i], "%s/%s", dir, names[i]) >= sizeof path[i]) {
            h3_fail(e, "%s: tokenizer path too long", dir);
            goto out;
        }
        if (read_whole_file(path[i], &buf[i], &len[i], e) != 0) goto out;
    }
    t = tokenizer_load_buffers(buf[0], len[0], path[0], buf[1], len[1], path[1], buf[2], len[2], path[2], e);
out:
    for (int i = 0; i < 3; i++) free(buf[i]);
    return t;
}

void tokenizer_free(h3_tokenizer *t) {
    if (!t) return;
    free(t->arena);
    free(t->str_off);
    free(t->bytes_off);
    free(t->id_len);
    free(t->is_added);
    free(t->vocab_slots);
    free(t->odd_ids);
    free(t->merge_keys);
    free(t->merge_rank);
    free(t->merge_new);
    for (int i = 0; i < t->n_added; i++) free(t->added[i].text);
    free(t->added);
    free(t);
}

/* ------------------------------------------------------------------------------------------------
 * Encoding */

typedef struct id_vec {
    int32_t *v;
    size_t   n, cap;
} id_vec;

static int push_id(id_vec *o, int32_t id) {
    if (o->n == o->cap) {
        size_t cap = o->cap ? 2 * o->cap : 256;
        int32_t *v = realloc(o->v, cap * sizeof *v);
        if (!v) return -1;
        o->v = v;
        o->cap = cap;
    }
    o->v[o->n++] = id;
    return 0;
}

/* Scratch reused across pieces and segments of one encode call. */
typedef struct work {
    uint32_t *cp;   /* code points of the normalized segment */
    uint32_t *off;  /* byte offset of each code point (+1 entry for the end) */
    uint8_t  *cls;  /* CLS_* flags */
    size_t    cap_cp;   /* entries allocated in cp, off, cls */
    /* BPE symbols and heap */
    int32_t  *sym_id, *sym_prev, *sym_next;
    uint32_t *sym_len;
    struct bpe_merge { int32_t rank, pos, new_id; } *heap;
    size_t    cap_sym, cap_heap, n_heap;
} work;

enum { CLS_L = 1, CLS_N = 2, CLS_S = 4, CLS_NL = 8 };

/* Character classes of the pre-tokenizer regex (§1.5), from utf8proc's general categories:
 * \p{L} = Lu Ll Lt Lm Lo; \p{N} = Nd Nl No; \s = Unicode White_Space, which is exactly
 * Zs + Zl + Zp + U+0009..U+000D + U+0085. */
static uint8_t char_class(int32_t cp) {
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM: case UTF8PROC_CATEGORY_LO:
        return CLS_L;
    case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_NO:
        return CLS_N;
    case UTF8PROC_CATEGORY_ZS: case UTF8PROC_CATEGORY_ZL: case UTF8PROC_CATEGORY_ZP:
        return CLS_S;
    default:
        if (cp == '\n' || cp == '\r') return CLS_S | CLS_NL;
        if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x85) return CLS_S;
        return 0;
    }
}

/* (?i) match of one code point against a lowercase ASCII letter: ASCII case plus any code point whose
 * Unicode case folding is exactly that letter (U+017F LONG S -> s; trap 7). */
static int fold_is(int32_t cp, char letter) {
    if (cp == letter || cp == letter - 32) return 1;
    if (cp < 128) return 0;
    utf8proc_int32_t buf[4];
    int last = 0;
    utf8proc_ssize_t n = utf8proc_decompose_char(cp, buf, 4, UTF8PROC_CASEFOLD, &last);
    return n == 1 && buf[0] == letter;
}

/* The Qwen2 regex as a scanner: returns the end of the piece that starts at i (docs/model/text_encoder.md §1.5 steps 1-7):
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t next_piece(const uint32_t *cp, const uint8_t *cls, size_t n, size_t i) {
    /* 1. contractions: apostrophe + 1-2 letters, nothing after them */
    if (cp[i] == '\'' && i + 1 < n) {
        int32_t c1 = (int32_t)cp[i + 1];
        if (fold_is(c1, 's') || fold_is(c1, 't') || fold_is(c1, 'm') || fold_is(c1, 'd')) return i + 2;
        if (i + 2 < n) {
            int32_t c2 = (int32_t)cp[i + 2];
            if ((fold_is(c1, 'r') && fold_is(c2, 'e')) || (fold_is(c1, 'v') && fold_is(c2, 'e')) ||
                (fold_is(c1, 'l') && fold_is(c2, 'l')))
                return i + 3;
        }
    }
    /* 2. a letter run, optionally after one char that is not CR/LF, letter or number */
    size_t j = n;
    if (cls[i] & CLS_L) j = i;
    else if (!(cls[i] & (CLS_NL | CLS_N)) && i + 1 < n && (cls[i + 1] & CLS_L)) j = i + 1;
    if (j < n) {
        while (j < n && (cls[j] & CLS_L)) j++;
        return j;
    }
    /* 3. one number */
    if (cls[i] & CLS_N) return i + 1;
    /* 4. optional plain space, a run of "other" chars, then any CR/LF */
    j = cp[i] == ' ' ? i + 1 : i;
    if (j < n && !(cls[j] & (CLS_S | CLS_L | CLS_N))) {
        while (j < n && !(cls[j] & (CLS_S | CLS_L | CLS_N))) j++;
        while (j < n && (cls[j] & CLS_NL)) j++;
        return j;
    }
    /* 5-7. whitespace run W = [i, j) */
    size_t last_nl = n;
    for (j = i; j < n && (cls[j] & CLS_S); j++)
        if (cls[j] & CLS_NL) last_nl = j;
    if (j == i) return i + 1; /* unreachable: every char matches one of the alternatives above */
    if (last_nl < n) return last_nl + 1;   /* 5. \s*[\r\n]+ */
    if (j == n) return n;                  /* 6. \s+(?!\S) at the end */
    if (j - i >= 2) return j - 1;          /* 6. leave the last space for the next word */
    return j;                              /* 7. \s+ */
}

/* Makes room for `need` entries in the parallel arrays p[0..k) of element sizes elem[]. */
static int grow(void **p[], const size_t elem[], int k, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need) c *= 2;
    for (int i = 0; i < k; i++) {
        void *q = realloc(*p[i], c * elem[i]);
        if (!q) return -1;
        *p[i] = q;
    }
    *cap = c;
    return 0;
}

static int heap_less(const struct bpe_merge *a, const struct bpe_merge *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(work *w, struct bpe_merge m) {
    size_t i = w->n_heap++;
    w->heap[i] = m;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&w->heap[i], &w->heap[p])) break;
        struct bpe_merge tmp = w->heap[i];
        w->heap[i] = w->heap[p];
        w->heap[p] = tmp;
        i = p;
    }
}

static struct bpe_merge heap_pop(work *w) {
    struct bpe_merge top = w->heap[0];
    w->heap[0] = w->heap[--w->n_heap];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < w->n_heap && heap_less(&w->heap[l], &w->heap[m])) m = l;
        if (r < w->n_heap && heap_less(&w->heap[r], &w->heap[m])) m = r;
        if (m == i) break;
        struct bpe_merge tmp = w->heap[i];
        w->heap[i] = w->heap[m];
        w->heap[m] = tmp;
        i = m;
    }
    return top;
}

/* Queues the merge of symbol pos with its right neighbour, if the pair has a rank. */
static void queue_pair(const h3_tokenizer *t, work *w, int32_t pos) {
    int32_t nx = w->sym_next[pos];
    if (nx < 0) return;
    uint64_t s = merge_slot(t, w->sym_id[pos], w->sym_id[nx]);
    if (t->merge_keys[s] == UINT64_MAX) return;
    heap_push(w, (struct bpe_merge){t->merge_rank[s], pos, t->merge_new[s]});
}

/* BPE over the bytes of one piece (§1.7): repeatedly apply the lowest-rank merge, leftmost first.
 * Stale heap entries (a side already merged away) are skipped when popped. */
static int bpe_piece(const h3_tokenizer *t, work *w, const uint8_t *s, size_t n, id_vec *out) {
    if (n == 1) return push_id(out, t->byte_id[s[0]]);
    void **sym[4] = {(void **)&w->sym_id, (void **)&w->sym_prev, (void **)&w->sym_next, (void **)&w->sym_len};
    const size_t sym_elem[4] = {sizeof *w->sym_id, sizeof *w->sym_prev, sizeof *w->sym_next, sizeof *w->sym_len};
    void **heap[1] = {(void **)&w->heap};
    const size_t heap_elem[1] = {sizeof *w->heap};
    /* n-1 initial pairs, at most 2 more per merge */
    if (grow(sym, sym_elem, 4, &w->cap_sym, n) || grow(heap, heap_elem, 1, &w->cap_heap, 3 * n)) return -1;
    for (size_t i = 0; i < n; i++) {
        w->sym_id[i] = t->byte_id[s[i]];
        w->sym_prev[i] = (int32_t)i - 1;
        w->sym_next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
        w->sym_len[i] = 1;
    }
    w->n_heap = 0;
    for (size_t i = 0; i + 1 < n; i++) queue_pair(t, w, (int32_t)i);
    while (w->n_heap) {
        struct bpe_merge m = heap_pop(w);
        int32_t pos = m.pos;
        if (w->sym_len[pos] == 0) continue;
        int32_t nx = w->sym_next[pos];
        if (nx < 0) continue;
        uint64_t slot = merge_slot(t, w->sym_id[pos], w->sym_id[nx]);
        if (t->merge_keys[slot] == UINT64_MAX || t->merge_new[slot] != m.new_id) continue;
        /* merge pos with nx */
        w->sym_id[pos] = m.new_id;
        w->sym_len[pos] += w->sym_len[nx];
        w->sym_len[nx] = 0;
        w->sym_next[pos] = w->sym_next[nx];
        if (w->sym_next[nx] >= 0) w->sym_prev[w->sym_next[nx]] = pos;
        if (w->sym_prev[pos] >= 0) queue_pair(t, w, w->sym_prev[pos]);
        queue_pair(t, w, pos);
    }
    for (int32_t i = 0; i >= 0; i = w->sym_next[i])
        if (push_id(out, w->sym_id[i])) return -1;
    return 0;
}

/* NFC-normalizes one plain segment, pre-tokenizes it and BPE-encodes every piece. */
static int encode_segment(const h3_tokenizer *t, work *w, const uint8_t *s, size_t n, id_vec *out, h3_err *e) {
    if (n == 0) return 0;
    /* §1.4 fast path: code points below U+0300 (lead bytes below 0xCC) are already NFC */
    int ascii_like = 1;
    for (size_t i = 0; i < n && ascii_like; i++) ascii_like = s[i] < 0xCC;
    uint8_t *norm = NULL;
    if (!ascii_like) {
        utf8proc_ssize_t r = utf8proc_map(s, (utf8proc_ssize_t)n, &norm, UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        if (r < 0) return h3_fail(e, "prompt: NFC normalization failed: %s", utf8proc_errmsg(r));
        s = norm;
        n = (size_t)r;
    }
    int rc = 0;
    void **arr[3] = {(void **)&w->cp, (void **)&w->off, (void **)&w->cls};
    const size_t elem[3] = {sizeof *w->cp, sizeof *w->off, sizeof *w->cls};
    if (grow(arr, elem, 3, &w->cap_cp, n + 1)) goto oom;
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(n - i), &c);
        if (k <= 0) { /* cannot happen: the input was validated and NFC keeps it valid */
            rc = h3_fail(e, "prompt: invalid UTF-8 after normalization");
            goto done;
        }
        w->cp[m] = (uint32_t)c;
        w->off[m] = (uint32_t)i;
        w->cls[m] = char_class(c);
        m++;
        i += (size_t)k;
    }
    w->off[m] = (uint32_t)n;
    for (size_t i = 0; i < m;) {
        size_t j = next_piece(w->cp, w->cls, m, i);
        if (bpe_piece(t, w, s + w->off[i], w->off[j] - w->off[i], out)) goto oom;
        i = j;
    }
    goto done;
oom:
    rc = h3_fail(e, "prompt: out of memory while tokenizing %zu bytes", n);
done:
    free(norm);
    return rc;
}

int tokenizer_encode(const h3_tokenizer *t, const char *text, size_t len, int32_t **ids, size_t *n, h3_err *e) {
    *ids = NULL;
    *n = 0;
    const uint8_t *s = (const uint8_t *)text;
    if (len > (size_t)UINT32_MAX / 2) return h3_fail(e, "prompt: %zu bytes is too long", len);
    /* 1. validate UTF-8 (utf8proc rejects overlong forms, surrogates and code points > U+10FFFF) */
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t c;
        utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(len - i), &c);
        if (k <= 0) return h3_fail(e, "prompt: invalid UTF-8 at byte %zu (0x%02X)", i, s[i]);
        i += (size_t)k;
    }
    id_vec out = {0};
    work w = {0};
    int rc = 0;
    /* 2. split out added tokens: leftmost match, longest first (§1.3), on the raw text */
    size_t seg = 0;
    for (size_t i = 0; i < len;) {
        int b = s[i], hit = -1;
        for (int k = t->added_first[b]; k < t->added_first[b + 1]; k++)
            if (t->added[k].len <= len - i && memcmp(t->added[k].text, s + i, t->added[k].len) == 0) {
                hit = k;
                break;
            }
        if (hit < 0) {
            i++;
            continue;
        }
        if ((rc = encode_segment(t, &w, s + seg, i - seg, &out, e)) != 0) break;
        if (push_id(&out, t->added[hit].id)) {
            rc = h3_fail(e, "prompt: out of memory");
            break;
        }
        i += t->added[hit].len;
        seg = i;
    }
    if (rc == 0) rc = encode_segment(t, &w, s + seg, len - seg, &out, e);
    free(w.cp);
    free(w.off);
    free(w.cls);
    free(w.sym_id);
    free(w.sym_prev);
    free(w.sym_next);
    free(w.sym_len);
    free(w.heap);
    if (rc) {
        free(out.v);
        return rc;
    }
    *ids = out.v;
    *n = out.n;
    if (out.n == 0) {
        free(out.v);
        *ids = NULL;
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------------
 * Lookups */

int tokenizer_decode(const h3_tokenizer *t, const int32_t *ids, size_t n, char **out, size_t *out_len, h3_err *e) {
    *out = NULL;
    *out_len = 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_ids || t->str_off[ids[i]] == NO_TOKEN)
            return h3_fail(e, "decode: id %d at position %zu has no token", ids[i], i);
        total += t->id_len[ids[i]];
    }
    char *s = malloc(total + 1);
    if (!s) return h3_fail(e, "decode: out of memory");
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        memcpy(s + k, ID_BYTES(t, ids[i]), t->id_len[ids[i]]);
        k += t->id_len[ids[i]];
    }
    s[k] = 0;
    *out = s;
    *out_len = k;
    return 0;
}

int32_t tokenizer_size(const h3_tokenizer *t) { return t->n_ids; }

int32_t tokenizer_token_to_id(const h3_tokenizer *t, const char *token) {
    size_t len = strlen(token);
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].len == len && memcmp(t->added[i].text, token, len) == 0) return t->added[i].id;
    return vocab_id_of_key(t, token, len);
}

const char *tokenizer_id_to_token(const h3_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_ids ? ID_STR(t, id) : NULL;
}

int tokenizer_is_added(const h3_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_ids && t->is_added[id] == 1;
}

int tokenizer_special(const h3_tokenizer *t, tokenizer_special_ids *o, h3_err *e) {
    static const char *names[] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>",
                                  "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<d>",
                                  "</d>", "<|cutoff|>", "<|lyrics_start|>", "<|lyrics_end|>",
                                  "<|caption_start|>", "<|caption_end|>"};
    int32_t *dst[] = {&o->endoftext, &o->im_start, &o->im_end, &o->vision_start, &o->vision_end, &o->vision_pad,
                      &o->image_pad, &o->video_pad, &o->d_open, &o->d_close, &o->cutoff, &o->lyrics_start,
                      &o->lyrics_end, &o->caption_start, &o->caption_end};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        int32_t id = -1;
        for (int k = 0; k < t->n_added && id < 0; k++)
            if (strcmp(t->added[k].text, names[i]) == 0) id = t->added[k].id;
        if (id < 0) return h3_fail(e, "tokenizer: special token %s is missing (tokenizer_config.json)", names[i]);
        *dst[i] = id;
    }
    return 0;
}
