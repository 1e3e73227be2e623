/* safetensors reader, sharded sets and writer: round trips and every validation rule. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "test.h"

static char tmpdir[256];

static void write_file(const char *name, const void *data, size_t n) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    FILE *f = fopen(p, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}

/* Builds a raw safetensors file from a header string and n data bytes. */
static void write_raw(const char *name, const char *hdr, size_t ndata) {
    size_t hl = strlen(hdr);
    uint8_t *buf = calloc(8 + hl + ndata + 1, 1);
    for (int i = 0; i < 8; i++) buf[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, hdr, hl);
    write_file(name, buf, 8 + hl + ndata);
    free(buf);
}

static int open_fails_with(const char *name, const char *needle) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", tmpdir, name);
    h3_err e = {{0}};
    st_file *f = st_open(p, &e);
    if (f) {
        st_close(f);
        fprintf(stderr, "  %s: unexpectedly opened\n", name);
        return 0;
    }
    if (!strstr(e.msg, needle)) {
        fprintf(stderr, "  %s: message '%s' lacks '%s'\n", name, e.msg, needle);
        return 0;
    }
    return 1;
}

static int set_fails_with(const char *path, const char *needle) {
    h3_err e = {{0}};
    st_set *s = st_set_open(path, &e);
    if (s) {
        st_set_free(s);
        fprintf(stderr, "  %s: unexpectedly opened\n", path);
        return 0;
    }
    if (!strstr(e.msg, needle)) {
        fprintf(stderr, "  %s: message '%s' lacks '%s'\n", path, e.msg, needle);
        return 0;
    }
    return 1;
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/h3_test_st_XXXXXX");
    if (!mkdtemp(tmpdir)) return 1;
    h3_err e = {{0}};
    char p[1024];

    /* Round trip of every dtype through the writer and reader. */
    st_writer *w = st_writer_new();
    uint8_t payload[64];
    for (int i = 0; i < 64; i++) payload[i] = (uint8_t)(i * 7 + 1);
    for (int t = 0; t < H3_DTYPE_COUNT; t++) {
        char name[32];
        snprintf(name, sizeof name, "t.%s", h3_dtype_name((h3_dtype)t));
        int64_t shape[2] = {2, (int64_t)(8 / h3_dtype_size((h3_dtype)t)) * 2};
        CHECK(st_writer_add(w, name, (h3_dtype)t, 2, shape, payload, &e) == 0, "add %s: %s", name, e.msg);
    }
    int64_t zshape[2] = {0, 5};
    CHECK(st_writer_add(w, "empty", H3_F32, 2, zshape, NULL, &e) == 0, "zero-size tensor: %s", e.msg);
    int64_t sc[1];
    CHECK(st_writer_add(w, "scalar", H3_F32, 0, sc, payload, &e) == 0, "scalar: %s", e.msg);
    CHECK(st_writer_add(w, "empty", H3_F32, 2, zshape, NULL, &e) != 0 && strstr(e.msg, "duplicate"), "duplicate name rejected");
    snprintf(p, sizeof p, "%s/all.safetensors", tmpdir);
    CHECK(st_writer_save(w, p, "{\"format\":\"pt\"}", &e) == 0, "save: %s", e.msg);
    st_writer_free(w);
    st_file *f = st_open(p, &e);
    CHECK(f != NULL, "open written file: %s", e.msg);
    if (f) {
        CHECK(f->n == H3_DTYPE_COUNT + 2, "tensor count %d", f->n);
        CHECK(f->metadata_json && strstr(f->metadata_json, "\"format\""), "metadata kept");
        CHECK(f->data_off % 8 == 0, "header padded to 8 bytes");
        int all_ok = 1;
        for (int t = 0; t < H3_DTYPE_COUNT; t++) {
            char name[32];
            snprintf(name, sizeof name, "t.%s", h3_dtype_name((h3_dtype)t));
            const st_entry *ent = st_find(f, name);
            if (!ent || ent->dtype != (h3_dtype)t || ent->ndim != 2 || memcmp(st_data(f, ent), payload, 16)) all_ok = 0;
        }
        CHECK(all_ok, "every dtype round-trips with its bytes");
        const st_entry *sc_ent = st_find(f, "scalar");
        CHECK(sc_ent && sc_ent->ndim == 0 && sc_ent->end - sc_ent->begin == 4, "scalar entry");
        CHECK(st_find(f, "nope") == NULL, "missing name");
        st_close(f);
    }

    /* Header validation: each rule named in the message. */
    write_file("short.safetensors", "abc", 3);
    CHECK(open_fails_with("short.safetensors", "need at least 8"), "file shorter than 8 bytes");
    write_file("empty.safetensors", "", 0);
    CHECK(open_fails_with("empty.safetensors", "need at least 8"), "empty file");
    {
        uint8_t b[16] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, '{', '}'};
        write_file("huge.safetensors", b, 10);
        CHECK(open_fails_with("huge.safetensors", "100 MB"), "header length over the limit");
        uint8_t c[12] = {200, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
        write_file("past.safetensors", c, 10);
        CHECK(open_fails_with("past.safetensors", "past the end"), "header length past EOF");
    }
    write_raw("json.safetensors", "{\"a\": {\"dtype\": ", 0);
    CHECK(open_fails_with("json.safetensors", "not valid JSON"), "truncated JSON");
    write_raw("arr.safetensors", "[1,2]", 0);
    CHECK(open_fails_with("arr.safetensors", "not a JSON object"), "header not an object");
    write_raw("dtype.safetensors", "{\"w\":{\"dtype\":\"F31\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    CHECK(open_fails_with("dtype.safetensors", "unknown dtype \"F31\""), "unknown dtype");
    write_raw("shape.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4);
    CHECK(open_fails_with("shape.safetensors", "shape[0]"), "negative dim");
    write_raw("shape2.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4);
    CHECK(open_fails_with("shape2.safetensors", "shape[0]"), "fractional dim");
    write_raw("oob.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4);
    CHECK(open_fails_with("oob.safetensors", "tensor 'w': data_offsets end 8 beyond"), "offset past the data");
    write_raw("size.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8);
    CHECK(open_fails_with("size.safetensors", "needs 12"), "size mismatch");
    write_raw("rev.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 8);
    CHECK(open_fails_with("rev.safetensors", "end before begin"), "reversed offsets");
    write_raw("ovl.safetensors",
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
              12);
    CHECK(open_fails_with("ovl.safetensors", "overlap"), "overlapping tensors");
    write_raw("dup.safetensors",
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
              "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
              8);
    CHECK(open_fails_with("dup.safetensors", "not valid JSON"), "duplicate keys");
    write_raw("meta.safetensors", "{\"__metadata__\":{\"a\":1}}", 0);
    CHECK(open_fails_with("meta.safetensors", "not a string"), "non-string metadata");
    write_raw("offs.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4);
    CHECK(open_fails_with("offs.safetensors", "two integers"), "one offset");
    write_raw("ok.safetensors", "{\"w\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4);
    {
        snprintf(p, sizeof p, "%s/ok.safetensors", tmpdir);
        st_file *g = st_open(p, &e);
        CHECK(g != NULL, "hand-written valid file opens: %s", e.msg);
        st_close(g);
    }

    /* The reference format's layout rules (safetensors' Metadata::validate and read_metadata): the tensors, sorted
     * by data_offsets, tile the data area from byte 0 with no gap and no overlap, and the file ends where the last
     * tensor does. A zero-size tensor between two overlapping ones must not hide the overlap. */
    write_raw("zhide.safetensors",
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
              "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
              12);
    CHECK(open_fails_with("zhide.safetensors", "overlap"), "an overlap hidden by a zero-size tensor");
    write_raw("gap.safetensors",
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
              "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
              12);
    CHECK(open_fails_with("gap.safetensors", "gap"), "a gap between tensors");
    write_raw("late.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8);
    CHECK(open_fails_with("late.safetensors", "gap"), "data not starting at byte 0");
    write_raw("trail.safetensors", "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8);
    CHECK(open_fails_with("trail.safetensors", "trailing"), "trailing bytes after the data area");
    write_raw("trail0.safetensors", "{}", 4);
    CHECK(open_fails_with("trail0.safetensors", "trailing"), "trailing bytes after an empty header");
    {
        uint8_t b[16] = {0x01, 0xe1, 0xf5, 0x05, 0, 0, 0, 0, '{', '}'}; /* 100,000,001: the reference's limit + 1 */
        write_file("limit.safetensors", b, 10);
        CHECK(open_fails_with("limit.safetensors", "100 MB"), "header length one past the reference's 100,000,000");
    }
    write_raw("zok.safetensors",
              "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
              "\"z\":{\"dtype\":\"F32\",\"shape\":[0,3],\"data_offsets\":[4,4]},"
              "\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[4,8]}}",
              8);
    {
        snprintf(p, sizeof p, "%s/zok.safetensors", tmpdir);
        st_file *g = st_open(p, &e);
        CHECK(g != NULL, "a zero-size tensor in its place opens: %s", e.msg);
        st_close(g);
    }
    /* A FIFO is refused at once (the alarm turns a hang into a failure). */
    {
        char fp[512];
        snprintf(fp, sizeof fp, "%s/fifo.safetensors", tmpdir);
        CHECK(mkfifo(fp, 0644) == 0, "mkfifo");
        alarm(20);
        CHECK(open_fails_with("fifo.safetensors", "not a regular file"), "a FIFO shard");
        alarm(0);
        unlink(fp);
    }

    /* Sharded set: two shards + index; lookups across shards. */
    char sd[512];
    snprintf(sd, sizeof sd, "%s/sharded", tmpdir);
    mkdir(sd, 0755);
    float v1[4] = {1, 2, 3, 4}, v2[2] = {5, 6};
    int64_t s4[1] = {4}, s2[1] = {2};
    w = st_writer_new();
    st_writer_add(w, "a.weight", H3_F32, 1, s4, v1, &e);
    snprintf(p, sizeof p, "%s/m-00001-of-00002.safetensors", sd);
    st_writer_save(w, p, NULL, &e);
    st_writer_free(w);
    w = st_writer_new();
    st_writer_add(w, "b.weight", H3_F32, 1, s2, v2, &e);
    snprintf(p, sizeof p, "%s/m-00002-of-00002.safetensors", sd);
    st_writer_save(w, p, NULL, &e);
    st_writer_free(w);
    const char *index = "{\"metadata\":{\"total_size\":24},\"weight_map\":{\"a.weight\":\"m-00001-of-00002.safetensors\","
                        "\"b.weight\":\"m-00002-of-00002.safetensors\"}}";
    snprintf(p, sizeof p, "%s/m.safetensors.index.json", sd);
    FILE *fi = fopen(p, "w");
    fputs(index, fi);
    fclose(fi);
    st_set *set = st_set_open(sd, &e);
    CHECK(set != NULL, "open sharded set from its folder: %s", e.msg);
    if (set) {
        h3_tensor v;
        CHECK(st_set_count(set) == 2, "two tensors");
        CHECK(st_set_get(set, "b.weight", &v, &e) == 0 && ((float *)v.data)[1] == 6.0f, "tensor from shard 2");
        CHECK(st_set_get(set, "c", &v, &e) != 0 && strstr(e.msg, "'c' not found"), "missing tensor named: %s", e.msg);
        st_set_free(set);
    }
    st_index ix;
    CHECK(st_index_load(p, &ix, &e) == 0 && ix.n == 2 && ix.nfiles == 2 && ix.has_total_size && ix.total_size == 24,
          "index parsed");
    st_index_free(&ix);

    /* Index problems: missing shard, tensor absent from its shard, unlisted tensor, path escape. */
    char bad[1024];
    snprintf(bad, sizeof bad, "%s/missing.safetensors.index.json", sd);
    fi = fopen(bad, "w");
    fputs("{\"weight_map\":{\"a.weight\":\"m-00001-of-00002.safetensors\",\"x\":\"gone.safetensors\"}}", fi);
    fclose(fi);
    CHECK(set_fails_with(bad, "gone.safetensors"), "index pointing at a missing shard");
    fi = fopen(bad, "w");
    fputs("{\"weight_map\":{\"a.weight\":\"m-00001-of-00002.safetensors\",\"z\":\"m-00001-of-00002.safetensors\"}}", fi);
    fclose(fi);
    CHECK(set_fails_with(bad, "tensor 'z' is not in shard"), "index entry absent from its shard");
    fi = fopen(bad, "w");
    fputs("{\"weight_map\":{\"a.weight\":\"m-00001-of-00002.safetensors\"}}", fi);
    fclose(fi);
    h3_err e2;
    st_set *ok1 = st_set_open(bad, &e2);
    CHECK(ok1 != NULL, "subset index over one shard opens: %s", e2.msg);
    st_set_free(ok1);
    fi = fopen(bad, "w");
    fputs("{\"weight_map\":{\"a.weight\":\"m-00001-of-00002.safetensors\",\"c\":\"m-00002-of-00002.safetensors\"}}", fi);
    fclose(fi);
    CHECK(set_fails_with(bad, "tensor 'c' is not in shard"), "wrong name for a shard's tensor");
    fi = fopen(bad, "w");
    fputs("{\"weight_map\":{\"a.weight\":\"../x.safetensors\"}}", fi);
    fclose(fi);
    CHECK(set_fails_with(bad, "plain shard file name"), "path escape in the index");
    fi = fopen(bad, "w");
    fputs("{\"weight_map\":{\"a.weight\":\"m-00001-of-00002.safetensors\"", fi);
    fclose(fi);
    CHECK(set_fails_with(bad, "not valid JSON"), "truncated index");
    /* A shard holding a tensor its index does not map to it. */
    fi = fopen(bad, "w");
    fputs("{\"weight_map\":{\"b.weight\":\"m-00002-of-00002.safetensors\",\"a.weight\":\"m-00002-of-00002.safetensors\"}}", fi);
    fclose(fi);
    CHECK(set_fails_with(bad, "'a.weight' is not in shard"), "index maps a tensor to the wrong shard");
    unlink(bad);

    /* Atomic writes: a failed save leaves nothing behind. */
    w = st_writer_new();
    st_writer_add(w, "a", H3_F32, 1, s4, v1, &e);
    CHECK(st_writer_save(w, "/nonexistent-dir/x.safetensors", NULL, &e) != 0 && strstr(e.msg, "/nonexistent-dir/x"),
          "unwritable path reported: %s", e.msg);
    st_writer_free(w);

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) return 1;
    TEST_END();
}
