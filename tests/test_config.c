/* The untrusted-file opener, JSON loading, the config-field reader and the tensor-list cap (io/config.h,
 * io/expect.h; docs/robustness.md, "Snapshots, configs and safetensors"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/config.h"
#include "io/expect.h"
#include "model/dit.h"
#include "model/text_encoder.h"
#include "test.h"

static char dir[256];

static const char *put(const char *name, const char *text) {
    static char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    fputs(text, f);
    fclose(f);
    return p;
}

static int fails_with(json_t *j, const h3_err *e, const char *needle) {
    if (j) {
        json_decref(j);
        fprintf(stderr, "  unexpectedly loaded\n");
        return 0;
    }
    if (!strstr(e->msg, needle)) {
        fprintf(stderr, "  message '%s' lacks '%s'\n", e->msg, needle);
        return 0;
    }
    return 1;
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/h3_test_config_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    h3_err e = {{0}};
    char p[512];

    /* The opener: regular files only, a FIFO refused at once (the alarm turns a hang into a failure). */
    json_t *j = h3_json_load(put("ok.json", "{\"a\": 1}"), &e);
    CHECK(j && json_integer_value(json_object_get(j, "a")) == 1, "a JSON file loads: %s", e.msg);
    json_decref(j);
    snprintf(p, sizeof p, "%s/fifo.json", dir);
    CHECK(mkfifo(p, 0644) == 0, "mkfifo");
    alarm(20);
    CHECK(fails_with(h3_json_load(p, &e), &e, "not a regular file (a FIFO)"), "FIFO refused");
    alarm(0);
    CHECK(fails_with(h3_json_load(dir, &e), &e, "not a regular file (a directory)"), "directory refused");
    snprintf(p, sizeof p, "%s/absent.json", dir);
    CHECK(fails_with(h3_json_load(p, &e), &e, "absent.json: cannot open: No such file"), "missing file worded");
    CHECK(fails_with(h3_json_load(put("bad.json", "{\"a\": "), &e), &e, "bad.json: not valid JSON"), "bad JSON");
    CHECK(fails_with(h3_json_load(put("dup.json", "{\"a\": 1, \"a\": 2}"), &e), &e, "not valid JSON"), "duplicate keys");
    CHECK(fails_with(h3_json_load_object(put("arr.json", "[1]"), &e), &e, "not a JSON object"), "not an object");
    char *buf;
    size_t len;
    CHECK(h3_read_small(put("big.txt", "0123456789"), 4, &buf, &len, &e) != 0 && strstr(e.msg, "4-byte limit"),
          "size cap: %s", e.msg);
    CHECK(h3_read_small(put("small.txt", "0123"), 4, &buf, &len, &e) == 0 && len == 4 && buf[4] == 0, "at the cap");
    free(buf);

    /* The field reader: ranges, types, defaults, required fields, a sticky first error. */
    json_t *o = json_loads("{\"n\": 5, \"big\": 1073741824, \"neg\": -1, \"f\": 0.5, \"s\": \"x\", \"l\": [1, 2, 3],"
                           " \"b\": true}", 0, NULL);
    CHECK(o != NULL, "test object");
    h3_cfg c = h3_cfg_of(o, "cfg.json", "", &e);
    int v = 0, n = 0, L[4] = {0};
    double d = 0;
    CHECK(h3_cfg_int(&c, "n", 1, 1, 10, &v) == 0 && v == 5, "int in range");
    CHECK(h3_cfg_int(&c, "absent", 7, 1, 10, &v) == 0 && v == 7, "default");
    CHECK(h3_cfg_num(&c, "f", 1.0, 0.0, 1.0, &d) == 0 && d == 0.5, "number in range");
    CHECK(h3_cfg_int_list(&c, "l", 1, 1, 4, 1, 3, L, &n) == 0 && n == 3 && L[2] == 3, "list");
    CHECK(h3_cfg_bool(&c, "b", 0, &v) == 0 && v == 1, "bool");
    CHECK(c.rc == 0, "no error so far");
    CHECK(h3_cfg_int(&c, "big", 1, 1, 1024, &v) != 0 && strstr(e.msg, "cfg.json: \"big\" must be an integer in [1, 1024]"),
          "2^30 out of range: %s", e.msg);
    CHECK(h3_cfg_int(&c, "n", 1, 1, 10, &v) != 0 && strstr(e.msg, "\"big\""), "the first error sticks: %s", e.msg);
    c = h3_cfg_of(o, "cfg.json", "text_config ", &e);
    CHECK(h3_cfg_int(&c, "neg", 1, 0, 10, &v) != 0 && strstr(e.msg, "text_config \"neg\""), "negative: %s", e.msg);
    c = h3_cfg_of(o, "cfg.json", "", &e);
    CHECK(h3_cfg_int(&c, "s", 1, 0, 10, &v) != 0, "a string is no integer");
    c = h3_cfg_of(o, "cfg.json", "", &e);
    CHECK(h3_cfg_int(&c, "req", H3_CFG_REQUIRED, 0, 10, &v) != 0 && strstr(e.msg, "missing integer \"req\""),
          "required: %s", e.msg);
    c = h3_cfg_of(o, "cfg.json", "", &e);
    CHECK(h3_cfg_num(&c, "f", 1.0, 0.75, 1.0, &d) != 0 && strstr(e.msg, "\"f\" must be a number in [0.75, 1]"),
          "number out of range: %s", e.msg);
    c = h3_cfg_of(o, "cfg.json", "", &e);
    CHECK(h3_cfg_int_list(&c, "l", 1, 1, 2, 1, 3, L, &n) != 0 && strstr(e.msg, "1..2"), "list too long: %s", e.msg);
    c = h3_cfg_of(o, "cfg.json", "", &e);
    CHECK(h3_cfg_int(&c, "n", 1, INT64_MIN + 1, INT64_MAX, &v) == 0 && v == 5, "int ranges clamp to int");
    json_decref(o);

    /* Sizes from configs: the DiT's layers in [1, 1024]; 2^31 - 1 layers (which made num_layers + num_refiner_layers
     * overflow) refused; the text encoder's layers likewise. */
    dit_config dc;
    o = json_loads("{\"num_layers\": 1073741824}", 0, NULL);
    CHECK(dit_config_parse(o, "dit.json", &dc, &e) != 0 && strstr(e.msg, "\"num_layers\" must be an integer in [1, 1024]"),
          "DiT num_layers 2^30: %s", e.msg);
    json_decref(o);
    o = json_loads("{\"num_layers\": 2147483647, \"num_refiner_layers\": 2}", 0, NULL);
    CHECK(dit_config_parse(o, "dit.json", &dc, &e) != 0 && strstr(e.msg, "num_layers"), "INT_MAX layers: %s", e.msg);
    json_decref(o);
    o = json_loads("{}", 0, NULL);
    CHECK(dit_config_parse(o, "dit.json", &dc, &e) == 0 && dc.num_layers == 50, "release defaults: %s", e.msg);
    json_decref(o);
    te_config tc;
    snprintf(p, sizeof p, "tests/fixtures/tiny/text_encoder/config.json");
    o = h3_json_load(p, &e);
    CHECK(o != NULL, "tiny text config: %s", e.msg);
    if (o) {
        json_object_set_new(json_object_get(o, "text_config"), "num_hidden_layers", json_integer(1 << 30));
        CHECK(text_encoder_config_parse(o, p, &tc, &e) != 0 && strstr(e.msg, "text_config \"num_hidden_layers\""),
              "text num_hidden_layers 2^30: %s", e.msg);
        json_decref(o);
    }

    /* The tensor list: capped by the weights' count, failing at once after the first refused entry. */
    o = json_loads("{}", 0, NULL);
    dit_config_parse(o, "dit.json", &dc, &e);
    json_decref(o);
    h3_expect_list l = {.max = 100};
    CHECK(dit_expected_tensors(&dc, &l, &e) != 0 && l.n == 100 &&
              strstr(e.msg, "DiT: the config implies more tensors than the 100 the weights hold"),
          "cap: %s", e.msg);
    h3_expect_list_free(&l);
    l = (h3_expect_list){0};
    CHECK(dit_expected_tensors(&dc, &l, &e) == 0 && l.n == 638, "uncapped release list: %d", l.n);
    /* The one dtype/shape rule of info and the loaders. */
    const h3_expect *x = h3_expect_find(&l, "context_embedder.weight");
    CHECK(x && h3_expect_check(x, H3_BF16, 2, x->shape, "w", &e) == 0, "exact match passes");
    CHECK(x && h3_expect_check(x, H3_F16, 2, x->shape, "w", &e) != 0 &&
              strstr(e.msg, "w: tensor 'context_embedder.weight': F16 [5376,5120], config implies BF16 [5376,5120]"),
          "F16 in place of BF16 refused: %s", e.msg);
    h3_expect_list_free(&l);

    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) return 1;
    TEST_END();
}
