/* `h3 quantize` on one DiT tree (dit_int8_convert.h, docs/int8.md). */
#include "dit_int8_convert.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../backend/ops.h"
#include "../core/dtype.h"
#include "../io/outfile.h"
#include "../io/safetensors.h"
#include "dit_int8.h"

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

int dit_int8_written_name(const char *name) {
    return ends_with(name, ".safetensors") || ends_with(name, ".safetensors.index.json");
}

/* The tree's weight files: the index's shards in order (*index set), or its one .safetensors. */
typedef struct tree_files {
    char  *index;  /* basename of the index, NULL: one file */
    char **shards; /* basenames */
    int    n;
} tree_files;

static void tree_files_free(tree_files *t) {
    free(t->index);
    for (int i = 0; i < t->n; i++) free(t->shards[i]);
    free(t->shards);
    memset(t, 0, sizeof *t);
}

static int list_tree(const char *src, tree_files *t, h3_err *e) {
    memset(t, 0, sizeof *t);
    DIR *d = opendir(src);
    if (!d) return h3_fail(e, "%s: cannot open: %s", src, strerror(errno));
    char *single = NULL;
    int n_single = 0, n_index = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        if (ends_with(de->d_name, ".safetensors.index.json")) {
            n_index++;
            free(t->index);
            t->index = strdup(de->d_name);
        } else if (ends_with(de->d_name, ".safetensors")) {
            n_single++;
            free(single);
            single = strdup(de->d_name);
        }
    }
    closedir(d);
    if (n_index > 1) {
        free(single);
        return h3_fail(e, "%s: %d *.safetensors.index.json files (one expected)", src, n_index);
    }
    if (t->index) {
        free(single);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", src, t->index);
        st_index ix;
        if (st_index_load(path, &ix, e) != 0) return -1;
        t->shards = calloc((size_t)(ix.nfiles ? ix.nfiles : 1), sizeof *t->shards);
        for (int i = 0; t->shards && i < ix.nfiles; i++) t->shards[t->n++] = strdup(ix.files[i]);
        st_index_free(&ix);
        if (!t->shards) return h3_fail(e, "out of memory");
        return 0;
    }
    if (n_single != 1) {
        free(single);
        return h3_fail(e, "%s: %d .safetensors files and no index (one file or an index expected)", src, n_single);
    }
    t->shards = malloc(sizeof *t->shards);
    if (!t->shards) return free(single), h3_fail(e, "out of memory");
    t->shards[t->n++] = single;
    return 0;
}

uint64_t dit_int8_tree_bytes(const char *src, h3_err *e) {
    tree_files t;
    if (list_tree(src, &t, e) != 0) return 0;
    uint64_t total = 0;
    for (int i = 0; i < t.n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", src, t.shards[i]);
        st_file *f = st_open_header(path, e);
        if (!f) {
            tree_files_free(&t);
            return 0;
        }
        for (int k = 0; k < f->n; k++) total += f->entries[k].end - f->entries[k].begin;
        st_close(f);
    }
    tree_files_free(&t);
    return total ? total : 1;
}

static void give_back(const void *p, size_t n) {
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)p & ~((uintptr_t)page - 1), hi = ((uintptr_t)p + n + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
    if (hi > lo) madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

enum { ROWS = 256 };

/* Quantizes W [N, K] (BF16 / F32 / F16 stored values) into the file: codes row by row, then returns the scales. */
static int write_codes(FILE *fp, const st_file *f, const st_entry *ent, float *scales, const char *path, h3_err *e) {
    const int64_t N = ent->shape[0], K = ent->shape[1];
    const uint8_t *src = st_data(f, ent);
    const size_t es = h3_dtype_size(ent->dtype);
    int8_t *codes = malloc((size_t)(ROWS * K));
    if (!codes) return h3_fail(e, "out of memory (%lld x %lld codes)", (long long)ROWS, (long long)K);
    int rc = 0;
    for (int64_t r0 = 0; r0 < N && !rc; r0 += ROWS) {
        const int64_t nr = N - r0 < ROWS ? N - r0 : ROWS;
        int64_t bad = -1;
#pragma omp parallel
        {
            float *row = malloc((size_t)K * sizeof(float));
#pragma omp for schedule(static)
            for (int64_t r = 0; r < nr; r++) {
                if (!row) continue;
                h3_convert_to_f32(row, src + (size_t)((r0 + r) * K) * es, ent->dtype, (size_t)K);
                int finite = 1;
                for (int64_t k = 0; k < K; k++) finite &= isfinite(row[k]) != 0;
                if (!finite) {
#pragma omp critical
                    if (bad < 0 || r0 + r < bad) bad = r0 + r;
                    continue;
                }
                scales[r0 + r] = h3_int8_quantize_row(row, K, codes + r * K);
            }
            if (!row) {
#pragma omp critical
                bad = -2;
            }
            free(row);
        }
        if (bad == -2) rc = h3_fail(e, "out of memory");
        else if (bad >= 0) rc = h3_fail(e, "%s: tensor '%s' row %lld is not finite: it cannot be quantized", path, ent->name, (long long)bad);
        else if (fwrite(codes, 1, (size_t)(nr * K), fp) != (size_t)(nr * K)) rc = h3_fail(e, "write failed: %s", strerror(errno));
    }
    free(codes);
    return rc;
}

/* One output tensor: a copy of a stored one, the codes of one, or the scales of one. */
typedef struct out_tensor {
    const st_entry *src;
    int             kind; /* 0 copy, 1 codes, 2 scales */
    char           *name;
    uint64_t        bytes;
} out_tensor;

static int convert_shard(const dit_config *c, int profile, const char *src_path, const char *dst_path, json_t *wmap,
                         const char *shard_name, uint64_t *tensor_bytes, dit_int8_progress_fn progress, void *ctx, h3_err *e) {
    st_file *f = st_open(src_path, e);
    if (!f) return -1;
    out_tensor *ot = calloc((size_t)(2 * f->n + 1), sizeof *ot);
    json_t *hdr = json_object(), *meta = f->metadata_json ? json_loads(f->metadata_json, 0, NULL) : json_object();
    FILE *fp = NULL;
    float *scales = NULL;
    int rc = -1, no = 0;
    if (!ot || !hdr || !meta) {
        h3_fail(e, "out of memory");
        goto done;
    }
    json_object_set_new(meta, DIT_INT8_META_SCHEME, json_string(DIT_INT8_SCHEME));
    json_object_set_new(meta, DIT_INT8_META_PROFILE, json_string(dit_int8_profile_name(profile)));
    json_object_set(hdr, "__metadata__", meta);
    uint64_t off = 0;
    for (int i = 0; i < f->n; i++) { /* entries are sorted by name: a scale lands right after its weight */
        const st_entry *s = &f->entries[i];
        const int q = dit_int8_in_scope(c, s->name, profile);
        if (q && (s->ndim != 2 || (s->dtype != H3_BF16 && s->dtype != H3_F32 && s->dtype != H3_F16))) {
            h3_fail(e, "%s: tensor '%s' is %s of rank %d: profile %s quantizes it, which needs a float matrix", src_path,
                    s->name, h3_dtype_name(s->dtype), s->ndim, dit_int8_profile_name(profile));
            goto done;
        }
        const int64_t N = s->shape[0], K = s->ndim > 1 ? s->shape[1] : 0;
        for (int part = 0; part < (q ? 2 : 1); part++) {
            out_tensor *o = &ot[no++];
            o->src = s, o->kind = q ? 1 + part : 0;
            size_t len = strlen(s->name) + 8;
            o->name = malloc(len);
            if (!o->name) {
                h3_fail(e, "out of memory");
                goto done;
            }
            snprintf(o->name, len, "%s%s", s->name, part ? "_scale" : "");
            o->bytes = o->kind == 0 ? s->end - s->begin : o->kind == 1 ? (uint64_t)(N * K) : (uint64_t)N * 4;
            json_t *shape = json_array();
            if (o->kind == 0)
                for (int d = 0; d < s->ndim; d++) json_array_append_new(shape, json_integer(s->shape[d]));
            else
                json_array_append_new(shape, json_integer(N)), json_array_append_new(shape, json_integer(o->kind == 1 ? K : 1));
            json_t *t = json_pack("{s:s, s:o, s:[I, I]}", "dtype",
                                  o->kind == 0 ? h3_dtype_name(s->dtype) : o->kind == 1 ? "I8" : "F32", "shape", shape,
                                  "data_offsets", (json_int_t)off, (json_int_t)(off + o->bytes));
            if (!t || json_object_set_new(hdr, o->name, t) != 0) {
                h3_fail(e, "out of memory");
                goto done;
            }
            off += o->bytes;
            *tensor_bytes += o->bytes;
            if (wmap) json_object_set_new(wmap, o->name, json_string(shard_name));
        }
    }
    char *text = json_dumps(hdr, JSON_COMPACT | JSON_PRESERVE_ORDER);
    if (!text) {
        h3_fail(e, "out of memory");
        goto done;
    }
    size_t hl = strlen(text), padded = (hl + 7) / 8 * 8;
    int fd = h3_out_create(dst_path);
    if (fd < 0 || !(fp = fdopen(fd, "wb"))) {
        if (fd >= 0) close(fd);
        free(text);
        h3_fail(e, "%s: cannot create: %s", dst_path, strerror(errno));
        goto done;
    }
    setvbuf(fp, NULL, _IOFBF, 8 << 20);
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    int ok = fwrite(len8, 1, 8, fp) == 8 && fwrite(text, 1, hl, fp) == hl;
    for (size_t i = hl; i < padded && ok; i++) ok = fputc(' ', fp) != EOF;
    free(text);
    if (!ok) {
        h3_fail(e, "%s: write failed: %s", dst_path, strerror(errno));
        goto done;
    }
    if (progress) progress(ctx, shard_name, 0);
    for (int i = 0; i < no; i++) {
        const out_tensor *o = &ot[i];
        const st_entry *s = o->src;
        const void *data = st_data(f, s);
        if (o->kind == 0) {
            if (fwrite(data, 1, o->bytes, fp) != o->bytes) {
                h3_fail(e, "%s: write failed: %s", dst_path, strerror(errno));
                goto done;
            }
        } else if (o->kind == 1) {
            free(scales);
            if (!(scales = malloc((size_t)s->shape[0] * sizeof(float)))) {
                h3_fail(e, "out of memory");
                goto done;
            }
            if (write_codes(fp, f, s, scales, src_path, e) != 0) goto done;
        } else if (fwrite(scales, 4, (size_t)s->shape[0], fp) != (size_t)s->shape[0]) {
            h3_fail(e, "%s: write failed: %s", dst_path, strerror(errno));
            goto done;
        }
        if (o->kind != 1) { /* the source's pages go back: the conversion's memory stays bounded */
            give_back(data, s->end - s->begin);
            if (progress) progress(ctx, shard_name, s->end - s->begin);
        }
    }
    if (fflush(fp) != 0 || fsync(fileno(fp)) != 0) {
        h3_fail(e, "%s: write failed: %s", dst_path, strerror(errno));
        goto done;
    }
    rc = 0;
done:
    if (fp && fclose(fp) != 0 && rc == 0) rc = h3_fail(e, "%s: write failed: %s", dst_path, strerror(errno));
    for (int i = 0; i < no; i++) free(ot[i].name);
    free(ot), free(scales);
    json_decref(hdr), json_decref(meta);
    st_close(f);
    return rc;
}

int dit_int8_convert_tree(const char *src, const char *dst, int profile, dit_int8_progress_fn progress, void *ctx,
                          h3_err *e) {
    dit_config c;
    if (dit_config_load(src, &c, e) != 0) return -1;
    st_set *s = st_set_open_headers(src, e);
    if (!s) return -1;
    int have;
    if (dit_int8_expect(&c, s, NULL, &have, e) != 0) return st_set_free(s), -1;
    if (have) {
        h3_fail(e, "%s: already int8 (profile %s): convert its BF16 source instead", src, dit_int8_profile_name(have));
        st_set_free(s);
        return -1;
    }
    h3_expect_list ex = {0};
    int rc = dit_expected_tensors(&c, &ex, e);
    for (int i = 0; i < ex.n && !rc; i++)
        if (dit_int8_in_scope(&c, ex.v[i].name, profile) && !st_set_entry(s, ex.v[i].name, NULL))
            rc = h3_fail(e, "%s: tensor '%s' missing: profile %s quantizes it", src, ex.v[i].name,
                         dit_int8_profile_name(profile));
    h3_expect_list_free(&ex);
    st_set_free(s);
    if (rc) return -1;
    tree_files t;
    if (list_tree(src, &t, e) != 0) return -1;
    json_t *wmap = t.index ? json_object() : NULL;
    uint64_t bytes = 0;
    for (int i = 0; i < t.n && !rc; i++) {
        char sp[4096], dp[4096];
        snprintf(sp, sizeof sp, "%s/%s", src, t.shards[i]);
        snprintf(dp, sizeof dp, "%s/%s", dst, t.shards[i]);
        rc = convert_shard(&c, profile, sp, dp, wmap, t.shards[i], &bytes, progress, ctx, e);
    }
    if (!rc && t.index) {
        json_t *root = json_pack("{s:{s:I}, s:O}", "metadata", "total_size", (json_int_t)bytes, "weight_map", wmap);
        char *text = root ? json_dumps(root, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
        char ip[4096];
        snprintf(ip, sizeof ip, "%s/%s", dst, t.index);
        int fd = text ? h3_out_create(ip) : -1;
        size_t n = text ? strlen(text) : 0;
        if (!text) rc = h3_fail(e, "out of memory");
        else if (fd < 0 || write(fd, text, n) != (ssize_t)n || write(fd, "\n", 1) != 1 || fsync(fd) != 0)
            rc = h3_fail(e, "%s: cannot write: %s", ip, strerror(errno));
        if (fd >= 0) close(fd);
        free(text);
        json_decref(root);
    }
    json_decref(wmap);
    tree_files_free(&t);
    return rc;
}
