/* Tokenizer parity and robustness (docs/model/text_encoder.md §1).
 * Ids must equal the HF reference for every case of tests/fixtures/golden/tokenizer/cases.json
 * (tools/reference/gen_tokenizer_cases.py) and tests/fixtures/tokenizer_cases.json. Extra case files
 * in the same format may be given as arguments (e.g. a large random corpus made by the generator).
 * Malformed tokenizer files and invalid UTF-8 must fail with a clear message, never crash. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utf8proc.h>

#include "io/safetensors.h"
#include "model/tokenizer.h"
#include "test.h"

#define TOK_DIR "tests/fixtures/skeleton/tokenizer"

/* CPU time of this process: the build machine is shared, wall time says little */
static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) b[n] = 0;
    *len = (size_t)n;
    return b;
}

static void spit(const char *dir, const char *name, const char *data, size_t len) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, len, f);
    fclose(f);
}

/* Checks every case of one file; returns the number of cases run. */
static int check_case_file(const h3_tokenizer *t, const char *path, int check_roundtrip) {
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_ALLOW_NUL, &jerr);
    CHECK(root != NULL, "%s: %s (line %d)", path, jerr.text, jerr.line);
    if (!root) return 0;
    json_t *cases = json_object_get(root, "cases");
    CHECK(json_is_array(cases) && json_array_size(cases) > 0, "%s: no cases", path);
    size_t i, n_ok = 0, n_bad = 0, n_tokens = 0, n_rt = 0;
    json_t *c;
    json_array_foreach(cases, i, c) {
        json_t *jt = json_object_get(c, "text"), *jids = json_object_get(c, "ids");
        const char *text = json_string_value(jt);
        size_t len = json_string_length(jt);
        int32_t *ids = NULL;
        size_t n = 0;
        h3_err e = {{0}};
        int rc = tokenizer_encode(t, text, len, &ids, &n, &e);
        int same = rc == 0 && n == json_array_size(jids);
        for (size_t k = 0; same && k < n; k++) same = ids[k] == json_integer_value(json_array_get(jids, k));
        if (same) {
            n_ok++;
        } else if (n_bad++ < 10) {
            fprintf(stderr, "  mismatch case %zu (%s): got %zu ids, want %zu; first diff:", i,
                    rc ? e.msg : "ok", n, json_array_size(jids));
            for (size_t k = 0; k < n && k < json_array_size(jids); k++)
                if (ids[k] != json_integer_value(json_array_get(jids, k))) {
                    fprintf(stderr, " [%zu] %d vs %lld", k, ids[k], json_integer_value(json_array_get(jids, k)));
                    break;
                }
            fprintf(stderr, "\n");
        }
        n_tokens += n;
        /* decode(encode(x)) == NFC(x) when x holds no added token (nothing splits the NFC) */
        if (check_roundtrip && rc == 0 && !memchr(text, '<', len)) {
            char *back = NULL;
            size_t back_len = 0;
            uint8_t *nfc = NULL;
            utf8proc_ssize_t nl = utf8proc_map((const uint8_t *)text, (utf8proc_ssize_t)len, &nfc,
                                               UTF8PROC_STABLE | UTF8PROC_COMPOSE);
            int ok = tokenizer_decode(t, ids, n, &back, &back_len, &e) == 0 && nl >= 0 &&
                     back_len == (size_t)nl && memcmp(back, nfc, back_len) == 0;
            CHECK(ok, "%s case %zu: decode(encode(text)) != NFC(text)", path, i);
            n_rt++;
            free(back);
            free(nfc);
        }
        free(ids);
    }
    printf("  %-48s %zu/%zu cases identical (%zu tokens, %zu round trips)\n", path, n_ok, n_ok + n_bad,
           n_tokens, n_rt);
    CHECK(n_bad == 0, "%s: %zu of %zu cases differ from the reference", path, n_bad, n_ok + n_bad);
    json_decref(root);
    return (int)(n_ok + n_bad);
}

/* The probe goldens (PROBE.md `tokenize`): IN text u8 [n] -> OUT input_ids i64 [L]. */
static void check_probe_goldens(const h3_tokenizer *t) {
    static const char *names[] = {"mixed", "guide", "empty"};
    for (size_t c = 0; c < sizeof names / sizeof *names; c++) {
        char pin[256], pout[256];
        snprintf(pin, sizeof pin, "tests/fixtures/golden/tokenizer/%s.in.safetensors", names[c]);
        snprintf(pout, sizeof pout, "tests/fixtures/golden/tokenizer/%s.out.safetensors", names[c]);
        h3_err e = {{0}};
        st_file *fin = st_open(pin, &e), *fout = fin ? st_open(pout, &e) : NULL;
        CHECK(fin && fout, "%s", e.msg);
        const st_entry *te = fin ? st_find(fin, "text") : NULL, *ie = fout ? st_find(fout, "input_ids") : NULL;
        CHECK(te && ie && te->dtype == H3_U8 && ie->dtype == H3_I64, "%s: tensors", names[c]);
        if (te && ie) {
            int32_t *ids = NULL;
            size_t n = 0;
            int rc = tokenizer_encode(t, st_data(fin, te), (size_t)te->shape[0], &ids, &n, &e);
            const int64_t *want = st_data(fout, ie);
            int same = rc == 0 && (int64_t)n == ie->shape[0];
            for (size_t k = 0; same && k < n; k++) same = ids[k] == want[k];
            CHECK(same, "probe golden %s: ids differ (%s)", names[c], rc ? e.msg : "");
            printf("  probe golden %-10s %zu bytes -> %zu ids %s\n", names[c], (size_t)te->shape[0], n,
                   same ? "identical" : "DIFFER");
            free(ids);
        }
        st_close(fin);
        st_close(fout);
    }
}

static void check_special_ids(const h3_tokenizer *t) {
    json_error_t jerr;
    json_t *root = json_load_file("tests/fixtures/golden/tokenizer/cases.json", 0, &jerr);
    if (!root) return;
    CHECK(tokenizer_size(t) == json_integer_value(json_object_get(root, "vocab_size")), "size %d", tokenizer_size(t));
    const char *k;
    json_t *v;
    int n = 0;
    json_object_foreach(json_object_get(root, "added_ids"), k, v) {
        int32_t id = tokenizer_token_to_id(t, k);
        CHECK(id == json_integer_value(v), "%s: id %d, reference %lld", k, id, json_integer_value(v));
        CHECK(tokenizer_is_added(t, id), "%s not marked added", k);
        CHECK(tokenizer_id_to_token(t, id) && strcmp(tokenizer_id_to_token(t, id), k) == 0, "%s: reverse", k);
        n++;
    }
    CHECK(n == 33, "%d added tokens in the reference file", n);
    tokenizer_special_ids s;
    h3_err e;
    CHECK(tokenizer_special(t, &s, &e) == 0, "%s", e.msg);
    CHECK(s.vision_start == 151652 && s.vision_end == 151653 && s.image_pad == 151655 && s.video_pad == 151656 &&
              s.d_open == 151669 && s.d_close == 151670 && s.caption_end == 151675,
          "special ids");
    /* vocab keys round-trip through the byte-level alphabet */
    CHECK(tokenizer_token_to_id(t, "\xc4\xa0") == 220, "'Ġ' -> %d", tokenizer_token_to_id(t, "\xc4\xa0"));
    CHECK(tokenizer_token_to_id(t, "!") == 0, "'!'");
    CHECK(strcmp(tokenizer_id_to_token(t, 198), "\xc4\x8a") == 0, "198 -> 'Ċ'");
    CHECK(tokenizer_token_to_id(t, "no such token at all") == -1, "unknown token");
    CHECK(tokenizer_id_to_token(t, 151676) == NULL && tokenizer_id_to_token(t, -1) == NULL, "out of range ids");
    json_decref(root);
}

static void check_invalid_utf8(const h3_tokenizer *t) {
    static const struct { const char *s; size_t n; } bad[] = {
        {"\x80", 1}, {"abc\xff", 4}, {"\xc0\x80", 2}, {"\xc1\xbf", 2}, {"\xe0\x80\x80", 3},
        {"\xed\xa0\x80", 3}, {"\xed\xbf\xbf", 3}, {"\xf4\x90\x80\x80", 4}, {"\xf5\x80\x80\x80", 4},
        {"\xf0\x80\x80\x80", 4}, {"caf\xc3", 4}, {"\xe4\xb8", 2}, {"ok <d> \xa0", 9}, {"\xfe\xff", 2},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int32_t *ids = (int32_t *)1;
        size_t n = 99;
        h3_err e = {{0}};
        int rc = tokenizer_encode(t, bad[i].s, bad[i].n, &ids, &n, &e);
        CHECK(rc != 0 && strstr(e.msg, "invalid UTF-8") && ids == NULL && n == 0, "bad utf-8 #%zu accepted (%s)", i,
              e.msg);
        if (i == 1) printf("  invalid UTF-8 -> \"%s\"\n", e.msg);
    }
    /* valid edge code points are accepted */
    const char *ok = "\x00\x7f\xc2\x80\xdf\xbf\xe0\xa0\x80\xef\xbf\xbf\xf0\x90\x80\x80\xf4\x8f\xbf\xbf";
    int32_t *ids;
    size_t n;
    h3_err e;
    CHECK(tokenizer_encode(t, ok, 20, &ids, &n, &e) == 0 && n > 0, "edge code points: %s", e.msg);
    free(ids);
    CHECK(tokenizer_encode(t, "", 0, &ids, &n, &e) == 0 && n == 0 && ids == NULL, "empty prompt");
}

/* Writes the three files to dir (any of them may be NULL = absent) and expects the load to fail
 * with a message containing `want`. */
static void expect_load_error(const char *dir, const char *label, const char *vocab, size_t vl, const char *merges,
                              size_t ml, const char *config, size_t cl, const char *want) {
    const char *names[3] = {"vocab.json", "merges.txt", "tokenizer_config.json"};
    const char *data[3] = {vocab, merges, config};
    size_t lens[3] = {vl, ml, cl};
    for (int i = 0; i < 3; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
        if (data[i]) spit(dir, names[i], data[i], lens[i]);
    }
    h3_err e = {{0}};
    h3_tokenizer *t = tokenizer_load(dir, &e);
    CHECK(t == NULL && strstr(e.msg, want) && !strchr(e.msg, '\n'), "%s: want an error with '%s', got '%s'", label, want,
          t ? "(loaded)" : e.msg);
    printf("  %-22s -> \"%s\"\n", label, e.msg);
    tokenizer_free(t);
}

static char *str_replace_once(const char *s, size_t len, const char *find, const char *repl, size_t *out_len) {
    const char *p = strstr(s, find);
    if (!p) return NULL;
    size_t a = (size_t)(p - s), fl = strlen(find), rl = strlen(repl);
    char *o = malloc(len - fl + rl + 1);
    memcpy(o, s, a);
    memcpy(o + a, repl, rl);
    memcpy(o + a + rl, p + fl, len - a - fl);
    *out_len = len - fl + rl;
    o[*out_len] = 0;
    return o;
}

static void check_malformed_files(void) {
    size_t vl, ml, cl;
    char *vocab = slurp(TOK_DIR "/vocab.json", &vl), *merges = slurp(TOK_DIR "/merges.txt", &ml),
         *config = slurp(TOK_DIR "/tokenizer_config.json", &cl);
    CHECK(vocab && merges && config, "cannot read %s", TOK_DIR);
    if (!vocab || !merges || !config) return;
    char dir[] = "/tmp/h3_tok_test_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");

    h3_err e = {{0}};
    CHECK(tokenizer_load("/nonexistent/tokenizer", &e) == NULL && strstr(e.msg, "cannot open"), "missing dir: %s", e.msg);
    expect_load_error(dir, "missing vocab.json", NULL, 0, merges, ml, config, cl, "vocab.json: cannot open");
    expect_load_error(dir, "missing merges.txt", vocab, vl, NULL, 0, config, cl, "merges.txt: cannot open");
    expect_load_error(dir, "missing config", vocab, vl, merges, ml, NULL, 0, "tokenizer_config.json: cannot open");
    expect_load_error(dir, "truncated vocab.json", vocab, vl / 2, merges, ml, config, cl, "vocab.json: invalid JSON");
    expect_load_error(dir, "empty vocab.json", "", 0, merges, ml, config, cl, "vocab.json: invalid JSON");
    expect_load_error(dir, "vocab.json not object", "[1,2]", 5, merges, ml, config, cl, "expected a JSON object");
    size_t l2;
    /* edits of the first entry, "!":0 */
    char *v2 = str_replace_once(vocab, vl, "\"!\":0", "\"!\":\"zero\"", &l2);
    CHECK(v2 != NULL, "vocab.json does not contain \"!\":0");
    if (v2) expect_load_error(dir, "string id", v2, l2, merges, ml, config, cl, "integer id");
    free(v2);
    v2 = str_replace_once(vocab, vl, "\"!\":0", "\"!\":1", &l2);
    if (v2) expect_load_error(dir, "duplicate id", v2, l2, merges, ml, config, cl, "id 1 is used by both");
    free(v2);
    v2 = str_replace_once(vocab, vl, "\"!\":0", "\"!zzqqxx\":0", &l2); /* byte '!' has no token now */
    if (v2) expect_load_error(dir, "missing byte token", v2, l2, merges, ml, config, cl, "no token for byte 0x21");
    free(v2);
    v2 = str_replace_once(vocab, vl, "\"!\":0", "\"!\":-5", &l2);
    if (v2) expect_load_error(dir, "negative id", v2, l2, merges, ml, config, cl, "integer id");
    free(v2);

    /* merges.txt: a three-field line at line 3, an unknown token, a merged token missing from the
     * vocab, a blank line, invalid UTF-8 */
    const char *line3 = strchr(strchr(merges, '\n') + 1, '\n') + 1;
    size_t head = (size_t)(line3 - merges);
    char *m2 = malloc(ml + 256);
    const char *inserts[] = {"a b c\n", "a \xe2\x98\x83\n", "\n", "a\xff b\n", "ab\n"};
    const char *wants[] = {"merges.txt line 3: expected 'LEFT RIGHT'", "merges.txt line 3: token",
                           "merges.txt line 3: expected", "merges.txt line 3: invalid UTF-8",
                           "merges.txt line 3: expected"};
    const char *labels[] = {"merges 3 fields", "merges unknown token", "merges blank line", "merges bad UTF-8",
                            "merges 1 field"};
    for (int k = 0; k < 5; k++) {
        size_t il = strlen(inserts[k]);
        memcpy(m2, merges, head);
        memcpy(m2 + head, inserts[k], il);
        memcpy(m2 + head + il, merges + head, ml - head);
        expect_load_error(dir, labels[k], vocab, vl, m2, ml + il, config, cl, wants[k]);
    }
    /* "Ġthe Ġthe": both operands exist, their concatenation does not */
    {
        const char *line = "\xc4\xa0the \xc4\xa0the\n";
        size_t il = strlen(line);
        memcpy(m2, merges, head);
        memcpy(m2 + head, line, il);
        memcpy(m2 + head + il, merges + head, ml - head);
        expect_load_error(dir, "merges unknown result", vocab, vl, m2, ml + il, config, cl, "merged token");
    }
    free(m2);

    expect_load_error(dir, "config not JSON", vocab, vl, merges, ml, "{\"added_tokens_decoder\": ", 25,
                      "tokenizer_config.json: invalid JSON");
    const char *c_lstrip = "{\"added_tokens_decoder\": {\"151643\": {\"content\": \"<|x|>\", \"lstrip\": true}}}";
    expect_load_error(dir, "config lstrip", vocab, vl, merges, ml, c_lstrip, strlen(c_lstrip), "not supported");
    const char *c_badid = "{\"added_tokens_decoder\": {\"-3\": {\"content\": \"<|x|>\"}}}";
    expect_load_error(dir, "config bad id", vocab, vl, merges, ml, c_badid, strlen(c_badid), "is not an id");
    const char *c_clash = "{\"added_tokens_decoder\": {\"5\": {\"content\": \"<|x|>\"}}}";
    expect_load_error(dir, "config id clash", vocab, vl, merges, ml, c_clash, strlen(c_clash), "id 5 is both");

    /* a "#version" header and CRLF line ends are accepted and change nothing (trap 10) */
    {
        char *m3 = malloc(2 * ml + 32);
        size_t k = 0;
        k += (size_t)sprintf(m3, "#version: 0.2\r\n");
        for (size_t i = 0; i < ml; i++) {
            if (merges[i] == '\n') m3[k++] = '\r';
            m3[k++] = merges[i];
        }
        h3_tokenizer *t = tokenizer_load_buffers(vocab, vl, "vocab.json", m3, k, "merges.txt", config, cl,
                                                 "tokenizer_config.json", &e);
        CHECK(t != NULL, "#version + CRLF merges: %s", t ? "" : e.msg);
        if (t) {
            printf("  #version header + CRLF merges.txt:\n");
            check_case_file(t, "tests/fixtures/golden/tokenizer/cases.json", 0);
        }
        tokenizer_free(t);
        free(m3);
    }
    const char *names[3] = {"vocab.json", "merges.txt", "tokenizer_config.json"};
    for (int i = 0; i < 3; i++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        unlink(p);
    }
    rmdir(dir);
    free(vocab);
    free(merges);
    free(config);
}

static void bench(const h3_tokenizer *t) {
    /* a long mixed prompt: the golden texts concatenated until ~2 MB */
    json_t *root = json_load_file("tests/fixtures/golden/tokenizer/cases.json", JSON_ALLOW_NUL, NULL);
    if (!root) return;
    size_t cap = 2u << 20, len = 0;
    char *buf = malloc(cap);
    while (len < cap - 100000) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(root, "cases"), i, c) {
            size_t l = json_string_length(json_object_get(c, "text"));
            if (len + l + 1 >= cap) break;
            memcpy(buf + len, json_string_value(json_object_get(c, "text")), l);
            len += l;
            buf[len++] = ' ';
        }
    }
    int32_t *ids;
    size_t n;
    h3_err e;
    double t0 = now_s();
    int rc = tokenizer_encode(t, buf, len, &ids, &n, &e);
    double dt = now_s() - t0;
    CHECK(rc == 0, "long prompt: %s", e.msg);
    printf("  long prompt: %zu bytes -> %zu tokens in %.1f ms CPU (%.1f MB/s)\n", len, n, dt * 1e3, len / dt / 1e6);
    free(ids);
    /* pathological single pieces: 200k spaces and 200k '!' are one pre-token each */
    memset(buf, ' ', 200000);
    t0 = now_s();
    rc = tokenizer_encode(t, buf, 200000, &ids, &n, &e);
    printf("  200000 spaces -> %zu tokens in %.1f ms CPU\n", n, (now_s() - t0) * 1e3);
    CHECK(rc == 0, "spaces: %s", e.msg);
    free(ids);
    free(buf);
    json_decref(root);
}

int main(int argc, char **argv) {
    h3_err e = {{0}};
    double t0 = now_s();
    h3_tokenizer *t = tokenizer_load(TOK_DIR, &e);
    CHECK(t != NULL, "load %s: %s", TOK_DIR, e.msg);
    if (!t) TEST_END();
    printf("  loaded %s in %.0f ms CPU: %d ids\n", TOK_DIR, (now_s() - t0) * 1e3, tokenizer_size(t));
    check_special_ids(t);
    int n = check_case_file(t, "tests/fixtures/golden/tokenizer/cases.json", 1);
    CHECK(n >= 300, "only %d golden cases", n);
    CHECK(check_case_file(t, "tests/fixtures/tokenizer_cases.json", 1) >= 18, "tokenizer_cases.json");
    for (int i = 1; i < argc; i++) check_case_file(t, argv[i], 1);
    check_probe_goldens(t);
    check_invalid_utf8(t);
    check_malformed_files();
    bench(t);
    tokenizer_free(t);
    TEST_END();
}
