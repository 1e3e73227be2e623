/* The GGUF reader (src/io/gguf.h) against the gguf package (tools/reference/gen_gguf.py): the file's key/values,
 * every tensor's type, shape and dequantized values bit for bit against the package's reference dequantizers; then
 * every way the header can lie, each refused with one line naming the rule: every truncation of the file, a wrong
 * magic or version, a count or string length past the end, an unknown type, a row that is not whole blocks, a
 * misaligned, overlapping or out-of-file tensor, a duplicate name, a bad alignment. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../src/io/gguf.h"
#include "../src/io/safetensors.h"
#include "test.h"

#define FIX "tests/fixtures/gguf/"

static uint8_t *read_all(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)len);
    *n = b ? fread(b, 1, (size_t)len, f) : 0;
    fclose(f);
    return b;
}

static void test_reference(void) {
    h3_err e = {0};
    gguf_file *g = gguf_open(FIX "types.gguf", &e);
    st_file *ex = st_open(FIX "types.expected.safetensors", &e);
    CHECK(g && ex, "open: %s", e.msg);
    if (!g || !ex) return;
    CHECK(g->version == 3 && g->alignment == 32, "version %u alignment %u", g->version, g->alignment);
    const gguf_kv *kv = gguf_find_kv(g, "general.name");
    CHECK(kv && kv->type == GGUF_KV_STRING && !strcmp(kv->str, "h3 gguf reader fixture"), "general.name");
    kv = gguf_find_kv(g, "general.architecture");
    CHECK(kv && kv->str && !strcmp(kv->str, "minimax_h3"), "general.architecture");
    kv = gguf_find_kv(g, "h3.test.u32");
    CHECK(kv && kv->type == GGUF_KV_U32 && kv->u == 4000000000u, "u32");
    kv = gguf_find_kv(g, "h3.test.i32");
    CHECK(kv && kv->type == GGUF_KV_I32 && (int64_t)kv->u == -7, "i32 sign-extended");
    kv = gguf_find_kv(g, "h3.test.f32");
    CHECK(kv && kv->type == GGUF_KV_F32 && kv->f == 0.5, "f32");
    kv = gguf_find_kv(g, "h3.test.bool");
    CHECK(kv && kv->type == GGUF_KV_BOOL && kv->u == 1, "bool");
    kv = gguf_find_kv(g, "h3.test.strings");
    CHECK(kv && kv->type == GGUF_KV_ARRAY && kv->elem_type == GGUF_KV_STRING && kv->count == 3, "string array");
    CHECK(ex->n == g->n_tensors, "%d expected tensors, the file has %lld", ex->n, (long long)g->n_tensors);
    for (int i = 0; i < ex->n; i++) {
        const st_entry *en = &ex->entries[i];
        const gguf_tensor *t = gguf_find(g, en->name);
        CHECK(t != NULL, "%s: not in the GGUF file", en->name);
        if (!t) continue;
        int same_shape = t->ndim == en->ndim;
        int64_t n = 1;
        for (int d = 0; d < en->ndim && same_shape; d++) same_shape = t->shape[d] == en->shape[d], n *= en->shape[d];
        CHECK(same_shape, "%s: shape differs from the package's", en->name);
        if (!same_shape) continue;
        float *y = malloc((size_t)n * sizeof *y);
        CHECK(gguf_dequantize(t->type, gguf_data(g, t), y, n) == 0, "%s: dequantize refused", en->name);
        const float *want = st_data(ex, en);
        int64_t diff = 0;
        for (int64_t k = 0; k < n; k++) diff += memcmp(&y[k], &want[k], 4) != 0;
        const char *tn = "?";
        gguf_type_block(t->type, NULL, NULL, &tn);
        printf("  %-8s %-5s %lldx%lld: %lld of %lld values differ from gguf.quants.dequantize\n", en->name, tn,
               (long long)t->shape[0], (long long)t->shape[t->ndim - 1], (long long)diff, (long long)n);
        CHECK(diff == 0, "%s (%s): %lld values differ", en->name, tn, (long long)diff);
        free(y);
    }
    gguf_close(g);
    st_close(ex);
}

/* The parse of buf must fail with exactly one line that holds want. */
static void refused(const uint8_t *buf, size_t n, const char *want, const char *what) {
    gguf_file f;
    h3_err e = {0};
    int rc = gguf_parse(buf, n, "x.gguf", &f, &e);
    if (rc == 0) gguf_parse_free(&f);
    CHECK(rc != 0 && strstr(e.msg, want) && !strchr(e.msg, '\n'), "%s: rc %d, message '%s' (want '%s')", what, rc, e.msg, want);
    printf("  refused %-44s %s\n", what, e.msg);
}

/* Where the GGUF string s (its u64 length, then its bytes: a tensor info's name) starts in b; 0 if nowhere. */
static size_t find(const uint8_t *b, size_t n, const char *s) {
    uint8_t key[64];
    const uint64_t k = strlen(s);
    memcpy(key, &k, 8), memcpy(key + 8, s, (size_t)k);
    for (size_t i = 0; i + 8 + k <= n; i++)
        if (!memcmp(b + i, key, 8 + (size_t)k)) return i;
    return 0;
}

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

static void test_refusals(void) {
    size_t n;
    uint8_t *orig = read_all(FIX "types.gguf", &n), *b = malloc(n);
    CHECK(orig && b && n > 1000, "read the fixture");
    if (!orig || !b) return;
    /* every truncation: the header's, then the data's */
    int all = 1;
    for (size_t k = 0; k < n; k++) {
        gguf_file f;
        h3_err e = {0};
        if (gguf_parse(orig, k, "x.gguf", &f, &e) == 0) {
            gguf_parse_free(&f);
            all = 0;
            printf("  a %zu-byte prefix of %zu parsed\n", k, n);
            break;
        }
        if (!e.msg[0] || strchr(e.msg, '\n')) all = 0;
    }
    CHECK(all, "every proper prefix of the file is refused with one line");
    printf("  refused every one of the %zu proper prefixes\n", n);
    memcpy(b, orig, n), b[0] = 'X';
    refused(b, n, "not a GGUF file", "a wrong magic");
    memcpy(b, orig, n), put_u32(b + 4, 1);
    refused(b, n, "GGUF version 1", "version 1");
    memcpy(b, orig, n), put_u64(b + 8, (uint64_t)1 << 40);
    refused(b, n, "tensors cannot fit", "a tensor count of 2^40");
    memcpy(b, orig, n), put_u64(b + 16, UINT64_MAX);
    refused(b, n, "key/values cannot fit", "a key/value count of 2^64-1");
    memcpy(b, orig, n), put_u64(b + 24, UINT64_MAX - 3);
    refused(b, n, "runs past the end of the file", "the first key's length 2^64-4");
    /* the tensor info of t.f32: name, n_dims u32, dims u64 x n, type u32, offset u64 */
    size_t at = find(orig, n, "t.f32");
    CHECK(at > 8, "t.f32's info found");
    size_t nd = at + 8 + 5, dims = nd + 4, type = dims + 16, off = type + 4;
    memcpy(b, orig, n), put_u32(b + nd, 5);
    refused(b, n, "5 dimensions", "five dimensions");
    memcpy(b, orig, n), put_u64(b + dims, 0);
    refused(b, n, "dimension 0 is 0", "a zero dimension");
    memcpy(b, orig, n), put_u32(b + type, 10); /* Q2_K */
    refused(b, n, "ggml type 10 is not one h3 reads", "an unsupported type (Q2_K)");
    memcpy(b, orig, n), put_u32(b + type, GGUF_Q8_0), put_u64(b + dims, 500);
    refused(b, n, "not whole Q8_0 blocks", "a row of 500 values as Q8_0");
    memcpy(b, orig, n), put_u64(b + off, 4);
    refused(b, n, "not a multiple of the alignment", "a misaligned offset");
    memcpy(b, orig, n), put_u64(b + off, (uint64_t)1 << 30);
    refused(b, n, "run past its end", "a tensor beyond the file");
    memcpy(b, orig, n);
    { /* t.f32 moved onto the next tensor's bytes */
        gguf_file f;
        h3_err e = {0};
        CHECK(gguf_parse(orig, n, "x.gguf", &f, &e) == 0, "%s", e.msg);
        const gguf_tensor *t1 = gguf_find(&f, "t.f16");
        put_u64(b + off, t1 ? t1->offset : 0);
        gguf_parse_free(&f);
    }
    refused(b, n, "overlap in the data area", "two tensors on the same bytes");
    memcpy(b, orig, n), memcpy(b + find(orig, n, "t.f16") + 8, "t.f32", 5);
    refused(b, n, "t.f32 is listed twice", "a duplicate name");
    memcpy(b, orig, n), b[at + 8 + 2] = 0;
    refused(b, n, "NUL byte", "a NUL inside a tensor name");
    /* a name holding a newline is quoted (\x0a), so the message stays one line (found by fuzz_gguf) */
    size_t kb = find(orig, n, "h3.test.bool");
    CHECK(kb > 0, "h3.test.bool found");
    memcpy(b, orig, n), b[kb + 8 + 2] = '\n', b[kb + 8 + 12 + 4] = 2;
    refused(b, n, "key h3\\x0atest.bool: a bool of value 2", "a bool of 2 under a key with a newline");
    free(orig), free(b);
}

int main(void) {
    test_reference();
    test_refusals();
    TEST_END();
}
