/* The GGUF reader (gguf.h; docs/checkpoints.md). A cursor walks the header with every length checked against the
 * bytes left, so no count or length read from the file can make it allocate or read more than the file holds. */
#include "gguf.h"

#include "../core/text.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { GGUF_MAX_DIMS = 4, GGUF_MAX_NAME = 1 << 16, GGUF_MAX_ARRAY_DEPTH = 4 };

int gguf_type_block(uint32_t type, int64_t *elems, int64_t *bytes, const char **name) {
    static const struct { uint32_t type; int64_t elems, bytes; const char *name; } T[] = {
        {GGUF_F32, 1, 4, "F32"},        {GGUF_F16, 1, 2, "F16"},        {GGUF_BF16, 1, 2, "BF16"},
        {GGUF_Q4_0, 32, 18, "Q4_0"},    {GGUF_Q4_1, 32, 20, "Q4_1"},    {GGUF_Q5_0, 32, 22, "Q5_0"},
        {GGUF_Q5_1, 32, 24, "Q5_1"},    {GGUF_Q8_0, 32, 34, "Q8_0"},    {GGUF_Q4_K, 256, 144, "Q4_K"},
        {GGUF_Q5_K, 256, 176, "Q5_K"},  {GGUF_Q6_K, 256, 210, "Q6_K"},
    };
    for (size_t i = 0; i < sizeof T / sizeof *T; i++)
        if (T[i].type == type) {
            if (elems) *elems = T[i].elems;
            if (bytes) *bytes = T[i].bytes;
            if (name) *name = T[i].name;
            return 1;
        }
    return 0;
}

typedef struct cursor {
    const uint8_t *p;
    size_t         left;
    const char    *name; /* the file, for messages */
    h3_err        *e;
} cursor;

static int take(cursor *c, void *dst, size_t n, const char *what) {
    if (c->left < n) return h3_fail(c->e, "%s: truncated GGUF header (%s needs %zu bytes, %zu left)", c->name, h3_quote(what), n, c->left);
    if (dst) memcpy(dst, c->p, n); /* little-endian host (x86-64, aarch64): GGUF is little-endian */
    c->p += n, c->left -= n;
    return 0;
}

static int take_u32(cursor *c, uint32_t *v, const char *what) { return take(c, v, 4, what); }
static int take_u64(cursor *c, uint64_t *v, const char *what) { return take(c, v, 8, what); }

/* A GGUF string (u64 length, bytes) as a NUL-terminated copy; a NUL inside or a length over max is refused. */
static int take_string(cursor *c, char **out, uint64_t max, const char *what) {
    uint64_t n = 0;
    if (take_u64(c, &n, what)) return -1;
    if (n > c->left) return h3_fail(c->e, "%s: %s: a string of %llu bytes runs past the end of the file", c->name, h3_quote(what), (unsigned long long)n);
    if (n > max) return h3_fail(c->e, "%s: %s: a string of %llu bytes (at most %llu)", c->name, h3_quote(what), (unsigned long long)n, (unsigned long long)max);
    if (memchr(c->p, 0, (size_t)n)) return h3_fail(c->e, "%s: %s: the string holds a NUL byte", c->name, h3_quote(what));
    if (out) {
        if (!(*out = malloc((size_t)n + 1))) return h3_fail(c->e, "%s: out of memory", c->name);
        memcpy(*out, c->p, (size_t)n);
        (*out)[n] = 0;
    }
    c->p += n, c->left -= (size_t)n;
    return 0;
}

static size_t kv_scalar_size(uint32_t t) {
    switch (t) {
    case GGUF_KV_U8: case GGUF_KV_I8: case GGUF_KV_BOOL: return 1;
    case GGUF_KV_U16: case GGUF_KV_I16: return 2;
    case GGUF_KV_U32: case GGUF_KV_I32: case GGUF_KV_F32: return 4;
    case GGUF_KV_U64: case GGUF_KV_I64: case GGUF_KV_F64: return 8;
    default: return 0;
    }
}

/* One scalar value into kv (integers widened, signed ones sign-extended; a bool must be 0 or 1). */
static int take_scalar(cursor *c, uint32_t t, gguf_kv *kv, const char *key) {
    uint8_t b[8] = {0};
    const size_t n = kv_scalar_size(t);
    if (take(c, b, n, key)) return -1;
    uint64_t u = 0;
    memcpy(&u, b, n);
    if (t == GGUF_KV_I8) u = (uint64_t)(int64_t)(int8_t)u;
    if (t == GGUF_KV_I16) u = (uint64_t)(int64_t)(int16_t)u;
    if (t == GGUF_KV_I32) u = (uint64_t)(int64_t)(int32_t)u;
    if (t == GGUF_KV_BOOL && u > 1) return h3_fail(c->e, "%s: key %s: a bool of value %llu (0 or 1)", c->name, h3_quote(key), (unsigned long long)u);
    if (kv) {
        kv->u = u;
        if (t == GGUF_KV_F32) { float f; memcpy(&f, b, 4); kv->f = f; }
        if (t == GGUF_KV_F64) memcpy(&kv->f, b, 8);
    }
    return 0;
}

/* An array's items (skipped; their types and lengths checked), nested at most GGUF_MAX_ARRAY_DEPTH deep. */
static int skip_array(cursor *c, uint32_t et, uint64_t count, int depth, const char *key) {
    if (depth > GGUF_MAX_ARRAY_DEPTH) return h3_fail(c->e, "%s: key %s: arrays nested deeper than %d", c->name, h3_quote(key), GGUF_MAX_ARRAY_DEPTH);
    const size_t sz = kv_scalar_size(et);
    if (sz) {
        if (count > c->left / sz) return h3_fail(c->e, "%s: key %s: an array of %llu items runs past the end of the file", c->name, h3_quote(key), (unsigned long long)count);
        if (et == GGUF_KV_BOOL)
            for (uint64_t i = 0; i < count; i++)
                if (c->p[i] > 1) return h3_fail(c->e, "%s: key %s: item %llu is a bool of value %u (0 or 1)", c->name, h3_quote(key), (unsigned long long)i, c->p[i]);
        return take(c, NULL, (size_t)(count * sz), key);
    }
    if (et == GGUF_KV_STRING) {
        if (count > c->left / 8) return h3_fail(c->e, "%s: key %s: an array of %llu strings runs past the end of the file", c->name, h3_quote(key), (unsigned long long)count);
        for (uint64_t i = 0; i < count; i++)
            if (take_string(c, NULL, UINT64_MAX, key)) return -1;
        return 0;
    }
    if (et == GGUF_KV_ARRAY) {
        if (count > c->left / 12) return h3_fail(c->e, "%s: key %s: an array of %llu arrays runs past the end of the file", c->name, h3_quote(key), (unsigned long long)count);
        for (uint64_t i = 0; i < count; i++) {
            uint32_t t2 = 0;
            uint64_t n2 = 0;
            if (take_u32(c, &t2, key) || take_u64(c, &n2, key) || skip_array(c, t2, n2, depth + 1, key)) return -1;
        }
        return 0;
    }
    return h3_fail(c->e, "%s: key %s: array items of unknown type %u", c->name, h3_quote(key), et);
}

static int parse_kv(cursor *c, gguf_kv *kv) {
    if (take_string(c, &kv->key, GGUF_MAX_NAME, "a key")) return -1;
    if (take_u32(c, &kv->type, kv->key)) return -1;
    kv->count = 1;
    if (kv->type == GGUF_KV_STRING) return take_string(c, &kv->str, UINT64_MAX, kv->key);
    if (kv->type == GGUF_KV_ARRAY) {
        if (take_u32(c, &kv->elem_type, kv->key) || take_u64(c, &kv->count, kv->key)) return -1;
        return skip_array(c, kv->elem_type, kv->count, 1, kv->key);
    }
    if (!kv_scalar_size(kv->type)) return h3_fail(c->e, "%s: key %s: unknown value type %u", c->name, h3_quote(kv->key), kv->type);
    return take_scalar(c, kv->type, kv, kv->key);
}

static int parse_tensor(cursor *c, gguf_tensor *t) {
    if (take_string(c, &t->name, GGUF_MAX_NAME, "a tensor name")) return -1;
    uint32_t nd = 0;
    if (take_u32(c, &nd, t->name)) return -1;
    if (nd < 1 || nd > GGUF_MAX_DIMS) return h3_fail(c->e, "%s: tensor %s: %u dimensions (1 to %d)", c->name, h3_quote(t->name), nd, GGUF_MAX_DIMS);
    t->ndim = (int)nd;
    uint64_t ne[GGUF_MAX_DIMS], count = 1;
    for (uint32_t i = 0; i < nd; i++) {
        if (take_u64(c, &ne[i], t->name)) return -1;
        if (ne[i] == 0 || ne[i] > ((uint64_t)1 << 40) || count > ((uint64_t)1 << 48) / ne[i])
            return h3_fail(c->e, "%s: tensor %s: dimension %u is %llu (positive, and at most 2^48 values in all)", c->name, h3_quote(t->name), i, (unsigned long long)ne[i]);
        count *= ne[i];
        t->shape[nd - 1 - i] = (int64_t)ne[i]; /* GGUF lists the innermost dimension first */
    }
    if (take_u32(c, &t->type, t->name) || take_u64(c, &t->offset, t->name)) return -1;
    int64_t be, bb;
    const char *tn;
    if (!gguf_type_block(t->type, &be, &bb, &tn))
        return h3_fail(c->e, "%s: tensor %s: ggml type %u is not one h3 reads (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)", c->name, h3_quote(t->name), t->type);
    if (ne[0] % (uint64_t)be)
        return h3_fail(c->e, "%s: tensor %s: its rows of %llu values are not whole %s blocks of %lld", c->name, h3_quote(t->name), (unsigned long long)ne[0], tn, (long long)be);
    t->bytes = count / (uint64_t)be * (uint64_t)bb;
    return 0;
}

static int by_offset(const void *a, const void *b) {
    const gguf_tensor *x = *(const gguf_tensor *const *)a, *y = *(const gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

static int by_name(const void *a, const void *b) {
    return strcmp((*(const gguf_tensor *const *)a)->name, (*(const gguf_tensor *const *)b)->name);
}

/* Tensors inside the data area, aligned, not overlapping, names unique. */
static int check_layout(gguf_file *f, const char *name, h3_err *e) {
    const uint64_t data = f->size - f->data_off;
    gguf_tensor **s = malloc((size_t)(f->n_tensors ? f->n_tensors : 1) * sizeof *s);
    if (!s) return h3_fail(e, "%s: out of memory", name);
    int rc = 0;
    for (int64_t i = 0; i < f->n_tensors && !rc; i++) {
        gguf_tensor *t = &f->tensors[i];
        s[i] = t;
        if (t->offset % f->alignment)
            rc = h3_fail(e, "%s: tensor %s: offset %llu is not a multiple of the alignment %u", name, h3_quote(t->name), (unsigned long long)t->offset, f->alignment);
        else if (t->offset > data || t->bytes > data - t->offset)
            rc = h3_fail(e, "%s: tensor %s: bytes [%llu, %llu) of the data area run past its end (%llu bytes: truncated file?)", name, h3_quote(t->name),
                         (unsigned long long)t->offset, (unsigned long long)(t->offset + t->bytes), (unsigned long long)data);
    }
    if (!rc) {
        qsort(s, (size_t)f->n_tensors, sizeof *s, by_offset);
        for (int64_t i = 1; i < f->n_tensors && !rc; i++)
            if (s[i]->offset < s[i - 1]->offset + s[i - 1]->bytes)
                rc = h3_fail(e, "%s: tensors %s and %s overlap in the data area", name, h3_quote(s[i - 1]->name), h3_quote(s[i]->name));
    }
    if (!rc) {
        qsort(s, (size_t)f->n_tensors, sizeof *s, by_name);
        for (int64_t i = 1; i < f->n_tensors && !rc; i++)
            if (!strcmp(s[i]->name, s[i - 1]->name)) rc = h3_fail(e, "%s: tensor %s is listed twice", name, h3_quote(s[i]->name));
    }
    free(s);
    return rc;
}

int gguf_parse(const uint8_t *buf, size_t len, const char *name, gguf_file *f, h3_err *e) {
    memset(f, 0, sizeof *f);
    f->size = len;
    cursor c = {.p = buf, .left = len, .name = name, .e = e};
    char magic[4];
    if (len < 4 || memcmp(buf, "GGUF", 4)) return h3_fail(e, "%s: not a GGUF file (it does not start with \"GGUF\")", name);
    if (take(&c, magic, 4, "the magic") || take_u32(&c, &f->version, "the version")) return -1;
    if (f->version != 2 && f->version != 3)
        return h3_fail(e, "%s: GGUF version %u (h3 reads versions 2 and 3)", name, f->version);
    uint64_t nt = 0, nkv = 0;
    if (take_u64(&c, &nt, "the tensor count") || take_u64(&c, &nkv, "the key/value count")) return -1;
    /* every key/value takes at least 12 bytes and every tensor info at least 28: counts beyond that are lies */
    if (nkv > c.left / 12) return h3_fail(e, "%s: %llu key/values cannot fit in the file", name, (unsigned long long)nkv);
    if (nt > c.left / 28) return h3_fail(e, "%s: %llu tensors cannot fit in the file", name, (unsigned long long)nt);
    f->kv = calloc((size_t)(nkv ? nkv : 1), sizeof *f->kv);
    f->tensors = calloc((size_t)(nt ? nt : 1), sizeof *f->tensors);
    if (!f->kv || !f->tensors) {
        gguf_parse_free(f);
        return h3_fail(e, "%s: out of memory", name);
    }
    f->alignment = 32;
    for (uint64_t i = 0; i < nkv; i++) {
        f->n_kv = (int64_t)i + 1;
        gguf_kv *kv = &f->kv[i];
        if (parse_kv(&c, kv)) goto fail;
        if (!strcmp(kv->key, "general.alignment")) {
            if (kv->type != GGUF_KV_U32 || kv->u == 0 || (kv->u & (kv->u - 1)) || kv->u > 4096) {
                h3_fail(e, "%s: general.alignment must be a UINT32 power of two up to 4096", name);
                goto fail;
            }
            f->alignment = (uint32_t)kv->u;
        }
    }
    for (uint64_t i = 0; i < nt; i++) {
        f->n_tensors = (int64_t)i + 1;
        if (parse_tensor(&c, &f->tensors[i])) goto fail;
    }
    const uint64_t end = len - c.left, pad = (f->alignment - end % f->alignment) % f->alignment;
    if (pad > c.left && nt) {
        h3_fail(e, "%s: the data area (after %llu bytes of header and padding) lies past the end of the file", name, (unsigned long long)(end + pad));
        goto fail;
    }
    f->data_off = end + (pad > c.left ? c.left : pad);
    if (check_layout(f, name, e)) goto fail;
    return 0;
fail:
    gguf_parse_free(f);
    return -1;
}

void gguf_parse_free(gguf_file *f) {
    for (int64_t i = 0; i < f->n_kv; i++) free(f->kv[i].key), free(f->kv[i].str);
    for (int64_t i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->kv), free(f->tensors);
    f->kv = NULL, f->tensors = NULL, f->n_kv = f->n_tensors = 0;
}

gguf_file *gguf_open(const char *path, h3_err *e) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return h3_fail(e, "%s: cannot open", path), NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return h3_fail(e, "%s: not a regular file", path), NULL;
    }
    if (st.st_size == 0) {
        close(fd);
        return h3_fail(e, "%s: empty file (not a GGUF file)", path), NULL;
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return h3_fail(e, "%s: cannot map the file", path), NULL;
    gguf_file *f = calloc(1, sizeof *f);
    char *p = strdup(path);
    if (!f || !p || gguf_parse(map, (size_t)st.st_size, path, f, e) != 0) {
        if (!f || !p) h3_fail(e, "%s: out of memory", path);
        munmap(map, (size_t)st.st_size);
        free(f), free(p);
        return NULL;
    }
    f->map = map, f->path = p;
    return f;
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    if (f->map) munmap((void *)f->map, f->size);
    gguf_parse_free(f);
    free(f->path);
    free(f);
}

const gguf_tensor *gguf_find(const gguf_file *f, const char *name) {
    for (int64_t i = 0; i < f->n_tensors; i++)
        if (!strcmp(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key) {
    for (int64_t i = 0; i < f->n_kv; i++)
        if (!strcmp(f->kv[i].key, key)) return &f->kv[i];
    return NULL;
}

const void *gguf_data(const gguf_file *f, const gguf_tensor *t) {
    return f->map ? f->map + f->data_off + t->offset : NULL;
}
