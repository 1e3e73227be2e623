/* safetensors reader, sharded sets and writer. Format: u64 little-endian header length N, N bytes
 * of JSON {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__":
 * {...}}, then the data area. Everything is validated before a view is handed out. */
#include "safetensors.h"

#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ST_MAX_HEADER 100000000u /* the reference implementation's MAX_HEADER_SIZE (100 MB) */

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static void st_file_clear(st_file *f);

static int cmp_entry_name(const void *a, const void *b) {
    return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

static int cmp_entry_ptr_begin(const void *a, const void *b) {
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end < y->end ? -1 : x->end > y->end);
}

void st_parse_free(st_file *f) { st_file_clear(f); }

static void st_file_clear(st_file *f) {
    for (int i = 0; i < f->n; i++) free(f->entries[i].name);
    free(f->entries);
    free(f->metadata_json);
    f->entries = NULL;
    f->metadata_json = NULL;
    f->n = 0;
}

/* Parses one tensor description; fills ent (name already set). */
static int parse_entry(json_t *v, st_entry *ent, uint64_t data_size, const char *file, h3_err *e) {
    const char *nm = ent->name;
    if (!json_is_object(v)) return h3_fail(e, "%s: tensor '%s': description is not a JSON object", file, nm);
    json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
           *jo = json_object_get(v, "data_offsets");
    if (!json_is_string(jd)) return h3_fail(e, "%s: tensor '%s': missing or non-string \"dtype\"", file, nm);
    int dt = h3_dtype_from_name(json_string_value(jd));
    if (dt < 0) return h3_fail(e, "%s: tensor '%s': unknown dtype \"%s\"", file, nm, json_string_value(jd));
    ent->dtype = (h3_dtype)dt;
    if (!json_is_array(js)) return h3_fail(e, "%s: tensor '%s': missing or non-array \"shape\"", file, nm);
    size_t nd = json_array_size(js);
    if (nd > H3_MAX_DIMS) return h3_fail(e, "%s: tensor '%s': rank %zu exceeds %d", file, nm, nd, H3_MAX_DIMS);
    ent->ndim = (int)nd;
    uint64_t numel = 1;
    int overflow = 0;
    for (size_t i = 0; i < nd; i++) {
        json_t *d = json_array_get(js, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return h3_fail(e, "%s: tensor '%s': shape[%zu] is not a non-negative integer", file, nm, i);
        uint64_t dim = (uint64_t)json_integer_value(d);
        ent->shape[i] = (int64_t)dim;
        if (dim && numel > UINT64_MAX / dim) overflow = 1;
        else numel *= dim;
    }
    if (!json_is_array(jo) || json_array_size(jo) != 2)
        return h3_fail(e, "%s: tensor '%s': \"data_offsets\" must be an array of two integers", file, nm);
    json_t *b = json_array_get(jo, 0), *en = json_array_get(jo, 1);
    if (!json_is_integer(b) || !json_is_integer(en) || json_integer_value(b) < 0 || json_integer_value(en) < 0)
        return h3_fail(e, "%s: tensor '%s': \"data_offsets\" must be non-negative integers", file, nm);
    ent->begin = (uint64_t)json_integer_value(b);
    ent->end = (uint64_t)json_integer_value(en);
    if (ent->end < ent->begin)
        return h3_fail(e, "%s: tensor '%s': data_offsets [%llu, %llu] end before begin", file, nm,
                       (unsigned long long)ent->begin, (unsigned long long)ent->end);
    if (ent->end > data_size)
        return h3_fail(e, "%s: tensor '%s': data_offsets end %llu beyond the data area (%llu bytes; file truncated?)",
                       file, nm, (unsigned long long)ent->end, (unsigned long long)data_size);
    uint64_t esz = h3_dtype_size(ent->dtype);
    if (overflow || (numel && esz > UINT64_MAX / numel) || numel * esz != ent->end - ent->begin) {
        char s[160];
        return h3_fail(e, "%s: tensor '%s': %llu bytes at data_offsets but shape %s x %s needs %llu", file, nm,
                       (unsigned long long)(ent->end - ent->begin), h3_shape_str(ent->shape, ent->ndim, s, sizeof s),
                       h3_dtype_name(ent->dtype), overflow ? 0ULL : (unsigned long long)(numel * esz));
    }
    return 0;
}

int st_parse(const uint8_t *buf, size_t len, uint64_t file_size, const char *name, st_file *out, h3_err *e) {
    memset(out, 0, sizeof *out);
    if (file_size < 8 || len < 8)
        return h3_fail(e, "%s: not a safetensors file (%llu bytes, need at least 8)", name,
                       (unsigned long long)file_size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    if (hlen > ST_MAX_HEADER)
        return h3_fail(e, "%s: header length %llu exceeds the 100 MB (100000000-byte) limit", name, (unsigned long long)hlen);
    if (8 + hlen > file_size || 8 + hlen > len)
        return h3_fail(e, "%s: header length %llu runs past the end of the file (%llu bytes)", name,
                       (unsigned long long)hlen, (unsigned long long)file_size);
    json_error_t je;
    json_t *root = json_loadb((const char *)buf + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    if (!root) return h3_fail(e, "%s: header is not valid JSON: %s (at byte %d)", name, je.text, je.position);
    if (!json_is_object(root)) {
        json_decref(root);
        return h3_fail(e, "%s: header is not a JSON object", name);
    }
    uint64_t data_size = file_size - 8 - hlen;
    size_t cap = json_object_size(root);
    out->entries = calloc(cap ? cap : 1, sizeof *out->entries);
    if (!out->entries) {
        json_decref(root);
        return h3_fail(e, "%s: out of memory", name);
    }
    out->data_off = 8 + (size_t)hlen;
    const char *key;
    json_t *val;
    int rc = 0;
    json_object_foreach(root, key, val) {
        if (!strcmp(key, "__metadata__")) {
            if (!json_is_object(val)) {
                rc = h3_fail(e, "%s: \"__metadata__\" is not an object", name);
                break;
            }
            const char *mk;
            json_t *mv;
            json_object_foreach(val, mk, mv) {
                if (!json_is_string(mv)) {
                    rc = h3_fail(e, "%s: \"__metadata__\" value of '%s' is not a string", name, mk);
                    break;
                }
            }
            if (rc) break;
            out->metadata_json = json_dumps(val, JSON_COMPACT | JSON_SORT_KEYS);
            continue;
        }
        if (!key[0]) {
            rc = h3_fail(e, "%s: empty tensor name", name);
            break;
        }
        st_entry *ent = &out->entries[out->n];
        ent->name = xstrdup(key);
        if (!ent->name) {
            rc = h3_fail(e, "%s: out of memory", name);
            break;
        }
        out->n++;
        if (parse_entry(val, ent, data_size, name, e)) {
            rc = -1;
            break;
        }
    }
    json_decref(root);
    if (rc) {
        st_file_clear(out);
        return -1;
    }
    qsort(out->entries, (size_t)out->n, sizeof *out->entries, cmp_entry_name);
    /* The reference's layout rule (safetensors Metadata::validate + read_metadata): sorted by data_offsets, the
     * tensors tile the data area from byte 0, each beginning where the one before ends (zero-size ones included),
     * and the file ends where the last one does: no overlap, no gap, no trailing bytes. */
    st_entry **by_off = malloc((size_t)(out->n ? out->n : 1) * sizeof *by_off);
    if (!by_off) {
        st_file_clear(out);
        return h3_fail(e, "%s: out of memory", name);
    }
    for (int i = 0; i < out->n; i++) by_off[i] = &out->entries[i];
    qsort(by_off, (size_t)out->n, sizeof *by_off, cmp_entry_ptr_begin);
    uint64_t at = 0;
    const st_entry *last = NULL; /* the tensor whose end is `at` */
    for (int i = 0; i < out->n && !rc; i++) {
        const st_entry *t = by_off[i];
        if (t->begin < at)
            rc = h3_fail(e, "%s: tensors '%s' and '%s' overlap in the data area ('%s' begins at %llu, inside [%llu, %llu))",
                         name, last->name, t->name, t->name, (unsigned long long)t->begin,
                         (unsigned long long)last->begin, (unsigned long long)last->end);
        else if (t->begin > at)
            rc = h3_fail(e, "%s: a gap in the data area: bytes [%llu, %llu) before tensor '%s' belong to no tensor", name,
                         (unsigned long long)at, (unsigned long long)t->begin, t->name);
        at = t->end;
        last = t;
    }
    if (!rc && at != data_size)
        rc = h3_fail(e, "%s: %llu trailing bytes after the data area (the tensors end at byte %llu of %llu)", name,
                     (unsigned long long)(data_size - at), (unsigned long long)at, (unsigned long long)data_size);
    free(by_off);
    if (rc) st_file_clear(out);
    return rc;
}

st_file *st_open(const char *path, h3_err *e) {
    uint64_t size64;
    int fd = h3_open_regular(path, 0, &size64, e);
    if (fd < 0) return NULL;
    size_t size = (size_t)size64;
    const uint8_t *map = NULL;
    if (size > 0) {
        void *m = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            close(fd);
            h3_fail(e, "%s: mmap failed: %s", path, strerror(errno));
            return NULL;
        }
        map = m;
    }
    close(fd);
    st_file *f = calloc(1, sizeof *f);
    if (!f) {
        if (map) munmap((void *)map, size);
        h3_fail(e, "out of memory");
        return NULL;
    }
    static const uint8_t empty[8];
    if (st_parse(map ? map : empty, size, size, path, f, e) != 0) {
        if (map) munmap((void *)map, size);
        free(f);
        return NULL;
    }
    f->path = xstrdup(path);
    f->map = map;
    f->map_size = size;
    return f;
}

static int pread_all(int fd, void *buf, size_t n, uint64_t off) {
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, (char *)buf + done, n - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        done += (size_t)r;
    }
    return 0;
}

st_file *st_open_header(const char *path, h3_err *e) {
    uint64_t size;
    int fd = h3_open_regular(path, 0, &size, e);
    if (fd < 0) return NULL;
    uint8_t len8[8] = {0};
    uint64_t hlen = 0;
    if (size >= 8 && pread_all(fd, len8, 8, 0) != 0) {
        close(fd);
        h3_fail(e, "%s: read failed: %s", path, strerror(errno));
        return NULL;
    }
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | len8[i];
    /* st_parse words the length errors; read only a header that fits the limit and the file */
    size_t got = size >= 8 ? 8 : (size_t)size;
    if (size >= 8 && hlen <= ST_MAX_HEADER && 8 + hlen <= size) got = (size_t)(8 + hlen);
    uint8_t *buf = malloc(got > 8 ? got : 8);
    if (!buf) {
        close(fd);
        h3_fail(e, "%s: out of memory", path);
        return NULL;
    }
    memcpy(buf, len8, 8);
    if (got > 8 && pread_all(fd, buf + 8, got - 8, 8) != 0) {
        close(fd);
        free(buf);
        h3_fail(e, "%s: read failed (file changed while reading?)", path);
        return NULL;
    }
    close(fd);
    st_file *f = calloc(1, sizeof *f);
    if (!f || st_parse(buf, got, size, path, f, e) != 0) {
        if (!f) h3_fail(e, "out of memory");
        free(f);
        free(buf);
        return NULL;
    }
    free(buf);
    f->path = xstrdup(path);
    return f;
}

void st_close(st_file *f) {
    if (!f) return;
    st_file_clear(f);
    if (f->map) munmap((void *)f->map, f->map_size);
    free(f->path);
    free(f);
}

const st_entry *st_find(const st_file *f, const char *name) {
    st_entry key = {.name = (char *)name};
    return bsearch(&key, f->entries, (size_t)f->n, sizeof *f->entries, cmp_entry_name);
}

const void *st_data(const st_file *f, const st_entry *ent) { return f->map + f->data_off + ent->begin; }

int st_view(const st_file *f, const st_entry *ent, h3_tensor *out) {
    memset(out, 0, sizeof *out);
    out->dtype = ent->dtype;
    out->ndim = ent->ndim;
    memcpy(out->shape, ent->shape, sizeof out->shape);
    out->data = (void *)st_data(f, ent);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Index files and sets                                                                        */

static int cmp_str_ptr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int valid_shard_name(const char *s) {
    return s[0] && !strchr(s, '/') && !strchr(s, '\\') && strcmp(s, ".") && strcmp(s, "..");
}

void st_index_free(st_index *ix) {
    for (int i = 0; i < ix->n; i++) free(ix->names[i]);
    for (int i = 0; i < ix->nfiles; i++) free(ix->files[i]);
    free(ix->names);
    free(ix->file_of);
    free(ix->files);
    memset(ix, 0, sizeof *ix);
}

int st_index_load(const char *path, st_index *ix, h3_err *e) {
    memset(ix, 0, sizeof *ix);
    char *buf;
    size_t n;
    if (h3_read_small(path, H3_JSON_MAX, &buf, &n, e) != 0) return -1;
    int rc = st_index_parse(buf, n, path, ix, e);
    free(buf);
    return rc;
}

int st_index_parse(const char *text, size_t len, const char *path, st_index *ix, h3_err *e) {
    memset(ix, 0, sizeof *ix);
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) return h3_fail(e, "%s: not valid JSON: %s (line %d)", path, je.text, je.line);
    int rc = 0;
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(root) || !json_is_object(wm)) {
        json_decref(root);
        return h3_fail(e, "%s: no \"weight_map\" object", path);
    }
    json_t *meta = json_object_get(root, "metadata");
    json_t *ts = json_is_object(meta) ? json_object_get(meta, "total_size") : NULL;
    if (ts) {
        if (json_is_integer(ts) && json_integer_value(ts) >= 0) {
            ix->total_size = (uint64_t)json_integer_value(ts);
            ix->has_total_size = 1;
        } else if (json_is_real(ts) && json_real_value(ts) >= 0) {
            ix->total_size = (uint64_t)json_real_value(ts);
            ix->has_total_size = 1;
        } else {
            json_decref(root);
            return h3_fail(e, "%s: metadata.total_size is not a non-negative number", path);
        }
    }
    size_t n = json_object_size(wm);
    ix->names = calloc(n ? n : 1, sizeof *ix->names);
    ix->file_of = calloc(n ? n : 1, sizeof *ix->file_of);
    ix->files = calloc(n ? n : 1, sizeof *ix->files);
    if (!ix->names || !ix->file_of || !ix->files) {
        json_decref(root);
        st_index_free(ix);
        return h3_fail(e, "out of memory");
    }
    /* Collect (name, file) pairs, then sort names keeping their file. */
    char **pairs = calloc(n ? n : 1, sizeof *pairs);
    if (!pairs) {
        json_decref(root);
        st_index_free(ix);
        return h3_fail(e, "out of memory");
    }
    const char *key;
    json_t *val;
    json_object_foreach(wm, key, val) {
        if (!json_is_string(val) || !valid_shard_name(json_string_value(val))) {
            rc = h3_fail(e, "%s: weight_map['%s'] is not a plain shard file name", path, key);
            break;
        }
        const char *fname = json_string_value(val);
        int fi = -1;
        for (int j = 0; j < ix->nfiles; j++)
            if (!strcmp(ix->files[j], fname)) fi = j;
        if (fi < 0) {
            if (!(ix->files[ix->nfiles] = xstrdup(fname))) {
                rc = h3_fail(e, "out of memory");
                break;
            }
            fi = ix->nfiles++;
        }
        size_t kl = strlen(key);
        char *p = malloc(kl + 1 + sizeof(int));
        if (!p) {
            rc = h3_fail(e, "out of memory");
            break;
        }
        memcpy(p, key, kl + 1);
        memcpy(p + kl + 1, &fi, sizeof(int));
        pairs[ix->n++] = p;
    }
    json_decref(root);
    if (rc) {
        for (int i = 0; i < ix->n; i++) free(pairs[i]);
        free(pairs);
        ix->n = 0;
        st_index_free(ix);
        return -1;
    }
    qsort(pairs, (size_t)ix->n, sizeof *pairs, cmp_str_ptr);
    for (int i = 0; i < ix->n; i++) {
        size_t kl = strlen(pairs[i]);
        memcpy(&ix->file_of[i], pairs[i] + kl + 1, sizeof(int));
        ix->names[i] = xstrdup(pairs[i]);
        free(pairs[i]);
        if (!ix->names[i]) rc = -1;
    }
    free(pairs);
    if (rc) {
        st_index_free(ix);
        return h3_fail(e, "out of memory");
    }
    return 0;
}

typedef struct set_item {
    const char     *name;
    int             file;
    const st_entry *ent;
} set_item;

struct st_set {
    char     *path;
    int       nfiles;
    st_file **files;
    int       n;
    set_item *items; /* sorted by name */
};

static int cmp_item(const void *a, const void *b) {
    return strcmp(((const set_item *)a)->name, ((const set_item *)b)->name);
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

static char *path_join(const char *dir, const char *name) {
    size_t a = strlen(dir), b = strlen(name);
    char *p = malloc(a + b + 2);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, name, b + 1);
    return p;
}

static char *dir_of(const char *path) {
    const char *s = strrchr(path, '/');
    if (!s) return xstrdup(".");
    size_t n = (size_t)(s - path);
    char *d = malloc(n + 1);
    memcpy(d, path, n);
    d[n] = 0;
    if (!n) {
        free(d);
        return xstrdup("/");
    }
    return d;
}

/* Finds the one index (preferred) or the one .safetensors file in dir. */
static char *find_in_dir(const char *dir, h3_err *e) {
    DIR *d = opendir(dir);
    if (!d) {
        h3_fail(e, "%s: cannot open directory: %s", dir, strerror(errno));
        return NULL;
    }
    char *index = NULL, *single = NULL;
    int nindex = 0, nsingle = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (ends_with(de->d_name, ".safetensors.index.json")) {
            nindex++;
            free(index);
            index = xstrdup(de->d_name);
        } else if (ends_with(de->d_name, ".safetensors")) {
            nsingle++;
            free(single);
            single = xstrdup(de->d_name);
        }
    }
    closedir(d);
    char *pick = NULL;
    if (nindex > 1) h3_fail(e, "%s: %d *.safetensors.index.json files; expected one", dir, nindex);
    else if (nindex == 1) pick = path_join(dir, index);
    else if (nsingle == 1) pick = path_join(dir, single);
    else if (nsingle > 1) h3_fail(e, "%s: %d .safetensors files and no index", dir, nsingle);
    else h3_fail(e, "%s: no .safetensors file or index", dir);
    free(index);
    free(single);
    return pick;
}

void st_set_free(st_set *s) {
    if (!s) return;
    for (int i = 0; i < s->nfiles; i++) st_close(s->files[i]);
    free(s->files);
    free(s->items);
    free(s->path);
    free(s);
}

static st_set *set_open(const char *path, int headers_only, h3_err *e);
st_set *st_set_open(const char *path, h3_err *e) { return set_open(path, 0, e); }
st_set *st_set_open_headers(const char *path, h3_err *e) { return set_open(path, 1, e); }

int st_set_check(const char *path, h3_err *e) {
    st_set *s = set_open(path, 1, e);
    st_set_free(s);
    return s ? 0 : -1;
}

static st_set *set_open(const char *path, int headers_only, h3_err *e) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        h3_fail(e, "%s: %s", path, strerror(errno));
        return NULL;
    }
    char *file = S_ISDIR(sb.st_mode) ? find_in_dir(path, e) : xstrdup(path);
    if (!file) return NULL;
    st_set *s = calloc(1, sizeof *s);
    if (!s) {
        free(file);
        h3_fail(e, "out of memory");
        return NULL;
    }
    s->path = file;
    if (!ends_with(file, ".json")) {
        s->files = calloc(1, sizeof *s->files);
        if (!s->files) h3_fail(e, "out of memory");
        else s->files[0] = headers_only ? st_open_header(file, e) : st_open(file, e);
        if (!s->files || !s->files[0]) {
            st_set_free(s);
            return NULL;
        }
        s->nfiles = 1;
        s->n = s->files[0]->n;
        s->items = calloc((size_t)(s->n ? s->n : 1), sizeof *s->items);
        if (!s->items) {
            st_set_free(s);
            h3_fail(e, "out of memory");
            return NULL;
        }
        for (int i = 0; i < s->n; i++)
            s->items[i] = (set_item){s->files[0]->entries[i].name, 0, &s->files[0]->entries[i]};
        return s;
    }
    st_index ix;
    if (st_index_load(file, &ix, e) != 0) {
        st_set_free(s);
        return NULL;
    }
    char *dir = dir_of(file);
    s->files = calloc((size_t)(ix.nfiles ? ix.nfiles : 1), sizeof *s->files);
    int rc = 0;
    for (int i = 0; i < ix.nfiles && !rc; i++) {
        char *sp = path_join(dir, ix.files[i]);
        s->files[i] = !sp ? NULL : headers_only ? st_open_header(sp, e) : st_open(sp, e);
        if (!sp) h3_fail(e, "out of memory");
        free(sp);
        if (!s->files[i]) rc = h3_fail_prefix(e, "%s lists shard '%s'", file, ix.files[i]);
        else s->nfiles = i + 1;
    }
    free(dir);
    if (!rc) {
        s->items = calloc((size_t)(ix.n ? ix.n : 1), sizeof *s->items);
        for (int i = 0; i < ix.n && !rc; i++) {
            st_file *f = s->files[ix.file_of[i]];
            const st_entry *ent = st_find(f, ix.names[i]);
            if (!ent) rc = h3_fail(e, "%s: tensor '%s' is not in shard %s", file, ix.names[i], f->path);
            else s->items[s->n++] = (set_item){ent->name, ix.file_of[i], ent};
        }
        /* Every tensor of every shard must be listed by the index. */
        for (int fi = 0; fi < s->nfiles && !rc; fi++) {
            for (int j = 0; j < s->files[fi]->n && !rc; j++) {
                const char *nm = s->files[fi]->entries[j].name;
                char **hit = bsearch(&nm, ix.names, (size_t)ix.n, sizeof *ix.names, cmp_str_ptr);
                if (!hit || ix.file_of[hit - ix.names] != fi)
                    rc = h3_fail(e, "%s: shard %s holds tensor '%s' that the index does not map to it", file,
                                 s->files[fi]->path, nm);
            }
        }
    }
    st_index_free(&ix);
    if (rc) {
        st_set_free(s);
        return NULL;
    }
    qsort(s->items, (size_t)s->n, sizeof *s->items, cmp_item);
    return s;
}

int st_set_count(const st_set *s) { return s->n; }
const char *st_set_name(const st_set *s, int i) { return s->items[i].name; }
const char *st_set_path(const st_set *s) { return s->path; }

const st_entry *st_set_entry(const st_set *s, const char *name, const st_file **file) {
    set_item key = {.name = name};
    const set_item *it = bsearch(&key, s->items, (size_t)s->n, sizeof *s->items, cmp_item);
    if (!it) return NULL;
    if (file) *file = s->files[it->file];
    return it->ent;
}

int st_set_get(const st_set *s, const char *name, h3_tensor *view, h3_err *e) {
    const st_file *f;
    const st_entry *ent = st_set_entry(s, name, &f);
    if (!ent) return h3_fail(e, "%s: tensor '%s' not found", s->path, name);
    if (!f->map && ent->end > ent->begin) return h3_fail(e, "internal: %s: a header-only set has no data", s->path);
    return st_view(f, ent, view);
}

/* ------------------------------------------------------------------------------------------ */
/* Writer                                                                                      */

typedef struct w_item {
    char    *name;
    h3_dtype dtype;
    int      ndim;
    int64_t  shape[H3_MAX_DIMS];
    void    *data;
    size_t   nbytes;
} w_item;

struct st_writer {
    int     n, cap;
    w_item *items;
};

st_writer *st_writer_new(void) { return calloc(1, sizeof(st_writer)); }

void st_writer_free(st_writer *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) {
        free(w->items[i].name);
        free(w->items[i].data);
    }
    free(w->items);
    free(w);
}

int st_writer_add(st_writer *w, const char *name, h3_dtype dtype, int ndim, const int64_t *shape,
                  const void *data, h3_err *e) {
    if (!name[0] || !strcmp(name, "__metadata__")) return h3_fail(e, "safetensors writer: invalid tensor name '%s'", name);
    for (int i = 0; i < w->n; i++)
        if (!strcmp(w->items[i].name, name)) return h3_fail(e, "safetensors writer: duplicate tensor '%s'", name);
    if (ndim < 0 || ndim > H3_MAX_DIMS) return h3_fail(e, "safetensors writer: tensor '%s': bad rank %d", name, ndim);
    if ((unsigned)dtype >= H3_DTYPE_COUNT) return h3_fail(e, "safetensors writer: tensor '%s': bad dtype", name);
    size_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return h3_fail(e, "safetensors writer: tensor '%s': negative dimension", name);
        numel *= (size_t)shape[i];
    }
    if (w->n == w->cap) {
        int cap = w->cap ? w->cap * 2 : 16;
        w_item *v = realloc(w->items, (size_t)cap * sizeof *v);
        if (!v) return h3_fail(e, "out of memory");
        w->items = v;
        w->cap = cap;
    }
    w_item *it = &w->items[w->n];
    memset(it, 0, sizeof *it);
    it->nbytes = numel * h3_dtype_size(dtype);
    it->data = malloc(it->nbytes ? it->nbytes : 1);
    it->name = xstrdup(name);
    if (!it->data || !it->name) {
        free(it->data);
        free(it->name);
        return h3_fail(e, "out of memory");
    }
    if (it->nbytes) memcpy(it->data, data, it->nbytes);
    it->dtype = dtype;
    it->ndim = ndim;
    for (int i = 0; i < ndim; i++) it->shape[i] = shape[i];
    w->n++;
    return 0;
}

int st_writer_add_tensor(st_writer *w, const char *name, const h3_tensor *t, h3_err *e) {
    return st_writer_add(w, name, t->dtype, t->ndim, t->shape, t->data, e);
}

static int write_all(int fd, const void *buf, size_t n) {
    const uint8_t *p = buf;
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int st_writer_save_to(st_writer *w, h3_outfile *o, const char *metadata_json, h3_err *e) {
    if (!o || o->fd < 0) return h3_fail(e, "safetensors writer: no open output");
    json_t *root = json_object();
    if (metadata_json) {
        json_error_t je;
        json_t *m = json_loads(metadata_json, 0, &je);
        if (!json_is_object(m)) {
            json_decref(m);
            json_decref(root);
            return h3_fail(e, "safetensors writer: metadata is not a JSON object");
        }
        json_object_set_new(root, "__metadata__", m);
    }
    uint64_t off = 0;
    for (int i = 0; i < w->n; i++) {
        w_item *it = &w->items[i];
        json_t *d = json_object(), *sh = json_array(), *of = json_array();
        json_object_set_new(d, "dtype", json_string(h3_dtype_name(it->dtype)));
        for (int k = 0; k < it->ndim; k++) json_array_append_new(sh, json_integer(it->shape[k]));
        json_object_set_new(d, "shape", sh);
        json_array_append_new(of, json_integer((json_int_t)off));
        json_array_append_new(of, json_integer((json_int_t)(off + it->nbytes)));
        json_object_set_new(d, "data_offsets", of);
        json_object_set_new(root, it->name, d);
        off += it->nbytes;
    }
    char *hdr = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!hdr) return h3_fail(e, "safetensors writer: cannot serialize the header");
    size_t hl = strlen(hdr), padded = (hl + 7) / 8 * 8;
    uint8_t len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    int fd = o->fd;
    int bad = write_all(fd, len8, 8) || write_all(fd, hdr, hl);
    for (size_t i = hl; i < padded && !bad; i++) bad = write_all(fd, " ", 1);
    for (int i = 0; i < w->n && !bad; i++) bad = write_all(fd, w->items[i].data, w->items[i].nbytes);
    free(hdr);
    if (bad) return h3_fail(e, "%s: write failed: %s", o->path, strerror(errno));
    return 0;
}

int st_writer_save(st_writer *w, const char *path, const char *metadata_json, h3_err *e) {
    h3_outfile *o = h3_outfile_open("", path, H3_OUT_FILE, NULL, e);
    if (!o) return -1;
    int rc = st_writer_save_to(w, o, metadata_json, e);
    if (!rc) rc = h3_outfile_commit(o, 1, e);
    h3_outfile_free(o);
    return rc;
}
