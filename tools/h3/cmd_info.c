/* `h3 info -d DIR [--index-only]`: describes a snapshot component by component and validates
 * every tensor name, shape and dtype against what each config implies. Problems are listed and
 * the exit code is 2; a clean snapshot exits 0. --index-only validates a weightless skeleton
 * (indexes and configs only; absent shards are listed but are not problems). */
#include <dirent.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "info_components.h"
#include "io/config.h"
#include "io/expect.h"
#include "io/safetensors.h"
#include "io/snapshot.h"

typedef struct info_ctx {
    int index_only;
    int problems;
} info_ctx;

static void problem(info_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(info_ctx *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    printf("  PROBLEM: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    c->problems++;
}

static const char *commas(uint64_t v, char *buf) {
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%" PRIu64, v), o = 0;
    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = 0;
    return buf;
}

static uint64_t expect_bytes(const h3_expect *x) {
    uint64_t n = h3_dtype_size(x->dtype);
    for (int i = 0; i < x->ndim; i++) n *= (uint64_t)x->shape[i];
    return n;
}

static void print_by_dtype(const uint64_t *count, const uint64_t *bytes) {
    char b[40];
    printf("  by dtype:");
    for (int t = 0; t < H3_DTYPE_COUNT; t++)
        if (count[t]) printf(" %s %" PRIu64 " tensors %s bytes;", h3_dtype_name((h3_dtype)t), count[t], commas(bytes[t], b));
    printf("\n");
}

/* Finds the index (preferred) or single .safetensors in dir. Returns 1 index, 2 single, 0 none. */
static int find_weights(const char *dir, char *out, size_t cap) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *de;
    int kind = 0;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n > 23 && !strcmp(de->d_name + n - 23, ".safetensors.index.json")) {
            snapshot_path(out, cap, dir, de->d_name);
            kind = 1;
        } else if (kind != 1 && n > 12 && !strcmp(de->d_name + n - 12, ".safetensors")) {
            snapshot_path(out, cap, dir, de->d_name);
            kind = 2;
        }
    }
    closedir(d);
    return kind;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Validates the weights in dir against exp (NULL: names not checked). */
static void check_weights(info_ctx *c, const char *dir, const h3_expect_list *exp, const char *default_file) {
    char wpath[4096];
    int kind = find_weights(dir, wpath, sizeof wpath);
    uint64_t cnt[H3_DTYPE_COUNT] = {0}, bytes[H3_DTYPE_COUNT] = {0};
    char b1[40], b2[40];
    h3_err e = {{0}};
    if (kind == 0) {
        if (c->index_only) printf("  weights: no index and no %s (absent in this skeleton)\n", default_file);
        else problem(c, "%s: no *.safetensors.index.json and no %s", dir, default_file);
        if (exp) {
            uint64_t tot = 0;
            for (int i = 0; i < exp->n; i++) tot += expect_bytes(&exp->v[i]);
            printf("  config implies %d tensors, %s bytes\n", exp->n, commas(tot, b1));
        }
        return;
    }
    int n = 0;
    char **names = NULL;
    st_index ix = {0};
    st_set *set = NULL; /* headers only, through the validator generate uses (st_set_open's checks) */
    int missing = 0, unreadable = 0;
    uint64_t file_total = 0; /* the shards' file sizes: LightX2V's converter writes that as total_size (docs/int8.md) */
    if (kind == 1) {
        if (st_index_load(wpath, &ix, &e) != 0) {
            problem(c, "%s", e.msg);
            return;
        }
        n = ix.n;
        names = ix.names;
        printf("  index: %s: %d tensors in %d shards", wpath, ix.n, ix.nfiles);
        if (ix.has_total_size) printf(", total_size %s bytes", commas(ix.total_size, b1));
        printf("\n");
        for (int i = 0; i < ix.nfiles; i++) {
            char sp[4096];
            struct stat fsb;
            if (!snapshot_exists(snapshot_path(sp, sizeof sp, dir, ix.files[i]))) missing++;
            else if (stat(sp, &fsb) == 0) file_total += (uint64_t)fsb.st_size;
        }
        if (missing) {
            printf("  shards missing (%d of %d):", missing, ix.nfiles);
            for (int i = 0, shown = 0; i < ix.nfiles; i++) {
                char sp[4096];
                if (snapshot_exists(snapshot_path(sp, sizeof sp, dir, ix.files[i]))) continue;
                if (shown++ < 4) printf(" %s", ix.files[i]);
                else if (shown == 5) printf(" ...");
            }
            printf("\n");
            if (!c->index_only) problem(c, "%d of %d shards listed by %s are missing", missing, ix.nfiles, wpath);
        } else if (!c->index_only && !(set = st_set_open_headers(wpath, &e))) {
            problem(c, "%s", e.msg);
            unreadable = 1; /* no byte total can be compared */
        }
    } else {
        printf("  weights: %s (single file)\n", wpath);
        if (c->index_only) {
            printf("  (--index-only: single-file weights not opened)\n");
        } else {
            if (!(set = st_set_open_headers(wpath, &e))) {
                problem(c, "%s", e.msg);
                return;
            }
            n = st_set_count(set);
            names = malloc((size_t)(n ? n : 1) * sizeof *names);
            if (!names) {
                problem(c, "out of memory");
                st_set_free(set);
                return;
            }
            for (int i = 0; i < n; i++) names[i] = (char *)st_set_name(set, i);
        }
    }
    /* Names against the config, shapes/dtypes against the shard headers. */
    uint64_t hdr_total = 0, exp_total = 0;
    int unexpected = 0, absent = 0, bad_shape = 0;
    for (int i = 0; i < n; i++) {
        const h3_expect *x = exp ? h3_expect_find(exp, names[i]) : NULL;
        if (exp && !x) {
            if (unexpected++ < 5) problem(c, "tensor '%s' is not implied by the config", names[i]);
            continue;
        }
        const st_file *sf = NULL;
        const st_entry *ent = set ? st_set_entry(set, names[i], &sf) : NULL;
        if (set && !ent) problem(c, "tensor '%s' is listed in the index but absent from its shard", names[i]);
        if (ent) {
            hdr_total += ent->end - ent->begin;
            cnt[ent->dtype]++;
            bytes[ent->dtype] += ent->end - ent->begin;
            if (x && h3_expect_check(x, ent->dtype, ent->ndim, ent->shape, NULL, &e) != 0 && bad_shape++ < 10)
                problem(c, "%s", e.msg);
        } else if (x) {
            cnt[x->dtype]++;
            bytes[x->dtype] += expect_bytes(x);
        }
    }
    if (unexpected > 5) problem(c, "... %d unexpected tensors in all", unexpected);
    if (bad_shape > 10) problem(c, "... %d tensors with a wrong shape or dtype in all", bad_shape);
    if (exp) {
        for (int i = 0; i < exp->n; i++) {
            exp_total += expect_bytes(&exp->v[i]);
            const char *key = exp->v[i].name;
            if (!n || !bsearch(&key, names, (size_t)n, sizeof *names, cmp_str)) {
                if (absent++ < 5) problem(c, "tensor '%s' implied by the config is missing", key);
            }
        }
        if (absent > 5) problem(c, "... %d tensors missing in all", absent);
        printf("  tensors: %d (config implies %d, %s bytes)\n", n, exp->n, commas(exp_total, b1));
    } else {
        printf("  tensors: %d (no expected-tensor list for this component yet: names not validated)\n", n);
    }
    if (n) print_by_dtype(cnt, bytes);
    if (kind == 1 && ix.has_total_size && !missing && ix.total_size == file_total) {
        printf("  index total_size is the shards' file sizes (as LightX2V's converter writes it)\n");
    } else if (kind == 1 && ix.has_total_size) {
        if (exp && !absent && !unexpected && exp_total != ix.total_size)
            problem(c, "index total_size %s bytes but the config implies %s", commas(ix.total_size, b1), commas(exp_total, b2));
        if (set && !missing && !unreadable && hdr_total != ix.total_size)
            problem(c, "index total_size %s bytes but the shards hold %s", commas(ix.total_size, b1), commas(hdr_total, b2));
    }
    st_set_free(set);
    if (kind == 1) st_index_free(&ix);
    else free(names);
}

/* The tensors the component's weights hold (index or single-file header), 0 when unknown: the expected list may not
 * be longer (a config implying more is rejected before its list grows). */
static int weights_count(const char *dir) {
    char wpath[4096];
    int kind = find_weights(dir, wpath, sizeof wpath), n = 0;
    h3_err e;
    if (kind == 1) {
        st_index ix;
        if (st_index_load(wpath, &ix, &e) == 0) {
            n = ix.n;
            st_index_free(&ix);
        }
    } else if (kind == 2) {
        st_file *f = st_open_header(wpath, &e);
        if (f) n = f->n;
        st_close(f);
    }
    return n;
}

static json_t *load_json(info_ctx *c, const char *path) {
    if (!snapshot_exists(path)) {
        problem(c, "%s: missing", path);
        return NULL;
    }
    h3_err e = {{0}};
    json_t *j = h3_json_load(path, &e);
    if (!j) problem(c, "%s", e.msg);
    return j;
}

static void print_keys(json_t *cfg, const char *const *keys) {
    printf("  config:");
    for (int i = 0; keys[i]; i++) {
        json_t *v = json_object_get(cfg, keys[i]);
        if (!v) continue;
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        printf(" %s=%s", keys[i], s ? s : "?");
        free(s);
    }
    printf("\n");
}

static void info_component(info_ctx *c, const char *root, const info_component_def *def) {
    char dir[4096], cfgp[4096];
    snapshot_path(dir, sizeof dir, root, def->subdir);
    printf("%s (%s)\n", def->subdir, def->what);
    if (!snapshot_is_dir(dir)) {
        if (def->optional) printf("  not in this tree (the release shares it with another partition)\n");
        else problem(c, "%s: missing folder", dir);
        return;
    }
    if (def->config_file) {
        json_t *cfg = load_json(c, snapshot_path(cfgp, sizeof cfgp, dir, def->config_file));
        if (cfg && def->keys) print_keys(def->keys_in ? json_object_get(cfg, def->keys_in) : cfg, def->keys);
        json_decref(cfg);
    }
    if (def->check) def->check(dir, c->index_only, &c->problems);
    if (!def->has_weights) return;
    h3_expect_list exp = {.max = weights_count(dir)};
    h3_err e = {{0}};
    int have = 0;
    if (def->expected) {
        if (def->expected(dir, &exp, &e) == 0) have = 1;
        else problem(c, "%s", e.msg);
    }
    check_weights(c, dir, have ? &exp : NULL, def->weights_file);
    h3_expect_list_free(&exp);
}

static void info_tree(info_ctx *c, const char *root, snap_kind kind) {
    int n;
    const info_component_def *defs = kind == SNAP_DIFFUSERS_ROOT ? info_diffusers_components(&n)
                                                                 : info_original_components(&n);
    for (int i = 0; i < n; i++) info_component(c, root, &defs[i]);
}

int cmd_info(int argc, char **argv) {
    const char *dir = NULL;
    info_ctx c = {0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-d") || !strcmp(argv[i], "--dir")) {
            if (i + 1 >= argc) return cli_error("info: %s needs a value", argv[i]);
            dir = argv[++i];
        } else if (!strcmp(argv[i], "--index-only")) {
            c.index_only = 1;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: h3 info -d SNAPSHOT_DIR [--index-only]\n"
                   "  Describes every component and validates tensor names, shapes and dtypes against\n"
                   "  the configs. --index-only validates a weightless skeleton (configs + indexes).\n");
            return 0;
        } else {
            return cli_error("info: unknown option '%s'", argv[i]);
        }
    }
    if (!dir) return cli_error("info: -d SNAPSHOT_DIR is required");
    if (!snapshot_is_dir(dir)) return cli_error("info: -d %s: not a directory", dir);
    h3_err e = {{0}};
    snap_kind kind;
    if (snapshot_kind(dir, &kind, &e) != 0) return cli_error("info: %s", e.msg);
    printf("snapshot %s: %s layout%s\n", dir, kind == SNAP_DIFFUSERS_ROOT ? "diffusers" : "original partition",
           c.index_only ? " (index only)" : "");
    info_tree(&c, dir, kind);
    if (kind == SNAP_DIFFUSERS_ROOT) {
        static const char *const parts[] = {"FL2VA", "Ref2VA"};
        for (int i = 0; i < 2; i++) {
            char sub[4096];
            snapshot_path(sub, sizeof sub, dir, parts[i]);
            if (!snapshot_is_dir(sub)) continue;
            snap_kind k2;
            printf("\n%s/ (original %s partition)\n", parts[i], parts[i]);
            if (snapshot_kind(sub, &k2, &e) != 0) {
                problem(&c, "%s", e.msg);
                continue;
            }
            info_tree(&c, sub, k2);
        }
    }
    if (c.problems) {
        printf("\n%d problem%s found\n", c.problems, c.problems == 1 ? "" : "s");
        return 2;
    }
    printf("\nok\n");
    return 0;
}
