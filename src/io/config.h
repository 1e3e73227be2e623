/* Untrusted small files and config fields (docs/robustness.md, "Snapshots, configs and safetensors").
 *  - h3_open_regular: every snapshot file (JSON, tokenizer file, shard) is opened through it: it never blocks on a
 *    FIFO or device (O_NONBLOCK while opening), refuses anything but a regular file, and words open errors as such.
 *  - h3_read_small / h3_json_load: the whole file, at most a cap of bytes, then parsed from memory.
 *  - h3_cfg_*: one reader for config fields, each with a plausible range; a sticky error (the first one wins). */
#ifndef H3_CONFIG_H
#define H3_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../core/error.h"

#define H3_JSON_MAX ((size_t)64 << 20) /* the largest JSON/tokenizer file read (the release's largest is ~11 MB) */

/* Opens path read-only (plus extra open flags, e.g. O_DIRECT) without blocking; refuses non-regular files.
 * Returns the fd (blocking mode restored) and the size in *size (may be NULL), or -1 with a message. */
int h3_open_regular(const char *path, int extra_flags, uint64_t *size, h3_err *e);

/* Reads the whole regular file (at most cap bytes, else an error) into a malloc'd buffer with a trailing NUL. */
int h3_read_small(const char *path, size_t cap, char **buf, size_t *len, h3_err *e);

/* Parses JSON text (duplicate keys rejected); path names it in messages. NULL with a message on failure. */
json_t *h3_json_parse(const char *buf, size_t len, const char *path, h3_err *e);
/* h3_read_small(path, H3_JSON_MAX) + h3_json_parse. */
json_t *h3_json_load(const char *path, h3_err *e);
/* The same, and the root must be a JSON object. */
json_t *h3_json_load_object(const char *path, h3_err *e);
/* h3_json_load of "<dir>/<name>", the path left in path[cap] for the caller's messages; a path that does not fit
 * is an error, not a truncated name. */
json_t *h3_json_load_in(const char *dir, const char *name, char *path, size_t cap, h3_err *e);
/* The model config loaders' one body: cfg (size bytes) zeroed, then parse(root, path, cfg, e) on
 * "<dir>/config.json", path naming it in messages; parse's result, or -1 when the file does not load. */
typedef int (*h3_json_parse_fn)(const json_t *root, const char *path, void *cfg, h3_err *e);
int h3_json_parse_config_in(const char *dir, h3_json_parse_fn parse, void *cfg, size_t size, h3_err *e);

/* Config field reader: every field has a range; an absent field takes def, or is an error when def is
 * H3_CFG_REQUIRED. After the first error every later call fails at once (rc stays -1), so a loader may read all
 * its fields and check rc once. */
typedef struct h3_cfg {
    const json_t *o;     /* the object holding the fields */
    const char   *path;  /* file, for messages */
    const char   *where; /* "" or a prefix such as "text_config " */
    h3_err       *e;
    int           rc;
} h3_cfg;

#define H3_CFG_REQUIRED INT64_MIN
#define H3_CFG_NUM_REQUIRED (-__builtin_inf())

h3_cfg h3_cfg_of(const json_t *o, const char *path, const char *where, h3_err *e);
int    h3_cfg_fail(h3_cfg *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* An integer in [lo, hi]. */
int h3_cfg_int(h3_cfg *c, const char *key, int64_t def, int64_t lo, int64_t hi, int *out);
int h3_cfg_i64(h3_cfg *c, const char *key, int64_t def, int64_t lo, int64_t hi, int64_t *out);
/* A finite number in [lo, hi]. */
int h3_cfg_num(h3_cfg *c, const char *key, double def, double lo, double hi, double *out);
/* A list of nmin..nmax integers in [lo, hi]; when absent, out and *n are left as they are (unless nmin > 0 and
 * the list is required: required = 1). v may be given directly (key then only names it). */
int h3_cfg_int_list(h3_cfg *c, const char *key, int required, int nmin, int nmax, int64_t lo, int64_t hi, int *out,
                    int *n);
int h3_cfg_int_list_v(h3_cfg *c, const json_t *v, const char *key, int nmin, int nmax, int64_t lo, int64_t hi,
                      int *out, int *n);
int h3_cfg_num_list(h3_cfg *c, const char *key, int required, int nmin, int nmax, double lo, double hi, double *out,
                    int *n);
/* A boolean (absent: def). */
int h3_cfg_bool(h3_cfg *c, const char *key, int def, int *out);

/* 64-bit size arithmetic with overflow checks: 0 and *out on success, -1 on overflow. */
static inline int h3_mul_u64(uint64_t a, uint64_t b, uint64_t *out) { return __builtin_mul_overflow(a, b, out) ? -1 : 0; }
static inline int h3_add_u64(uint64_t a, uint64_t b, uint64_t *out) { return __builtin_add_overflow(a, b, out) ? -1 : 0; }

#endif
