/* Untrusted small files and config fields (config.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int h3_open_regular(const char *path, int extra_flags, uint64_t *size, h3_err *e) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | extra_flags);
    if (fd < 0) {
        int err = errno;
        if (err == EACCES || err == EPERM) return h3_fail(e, "%s: cannot open: permission denied", path);
        return h3_fail(e, "%s: cannot open: %s", path, strerror(err));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int err = errno;
        close(fd);
        return h3_fail(e, "%s: cannot stat: %s", path, strerror(err));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        const char *what = S_ISDIR(sb.st_mode) ? "a directory" : S_ISFIFO(sb.st_mode) ? "a FIFO"
                         : S_ISCHR(sb.st_mode) || S_ISBLK(sb.st_mode) ? "a device" : S_ISSOCK(sb.st_mode) ? "a socket"
                                                                                                         : "special";
        return h3_fail(e, "%s: not a regular file (%s)", path, what);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) {
        int err = errno;
        close(fd);
        return h3_fail(e, "%s: fcntl failed: %s", path, strerror(err));
    }
    if (size) *size = (uint64_t)sb.st_size;
    return fd;
}

int h3_read_small(const char *path, size_t cap, char **buf, size_t *len, h3_err *e) {
    *buf = NULL;
    *len = 0;
    uint64_t size;
    int fd = h3_open_regular(path, 0, &size, e);
    if (fd < 0) return -1;
    if (size > cap) {
        close(fd);
        return h3_fail(e, "%s: %" PRIu64 " bytes, more than the %zu-byte limit for this file", path, size, cap);
    }
    char *b = malloc((size_t)size + 1);
    if (!b) {
        close(fd);
        return h3_fail(e, "%s: out of memory (%" PRIu64 " bytes)", path, size);
    }
    size_t n = 0;
    while (n < (size_t)size) {
        ssize_t r = read(fd, b + n, (size_t)size - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int err = errno;
            free(b);
            close(fd);
            if (err == EISDIR) return h3_fail(e, "%s: is a directory", path);
            return h3_fail(e, "%s: read failed: %s", path, strerror(err));
        }
        if (r == 0) break; /* shrank while reading: parse what is there */
        n += (size_t)r;
    }
    close(fd);
    b[n] = 0;
    *buf = b;
    *len = n;
    return 0;
}

json_t *h3_json_parse(const char *buf, size_t len, const char *path, h3_err *e) {
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) h3_fail(e, "%s: not valid JSON: %s (line %d)", path, je.text, je.line);
    return root;
}

json_t *h3_json_load(const char *path, h3_err *e) {
    char *buf;
    size_t len;
    if (h3_read_small(path, H3_JSON_MAX, &buf, &len, e) != 0) return NULL;
    json_t *root = h3_json_parse(buf, len, path, e);
    free(buf);
    return root;
}

json_t *h3_json_load_in(const char *dir, const char *name, char *path, size_t cap, h3_err *e) {
    int n = snprintf(path, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap) {
        h3_fail(e, "%s: folder path too long for %s", dir, name);
        return NULL;
    }
    return h3_json_load(path, e);
}

int h3_json_parse_config_in(const char *dir, h3_json_parse_fn parse, void *cfg, size_t size, h3_err *e) {
    char path[4096];
    memset(cfg, 0, size);
    json_t *root = h3_json_load_in(dir, "config.json", path, sizeof path, e);
    if (!root) return -1;
    int rc = parse(root, path, cfg, e);
    json_decref(root);
    return rc;
}

json_t *h3_json_load_object(const char *path, h3_err *e) {
    json_t *root = h3_json_load(path, e);
    if (root && !json_is_object(root)) {
        json_decref(root);
        h3_fail(e, "%s: not a JSON object", path);
        return NULL;
    }
    return root;
}

/* ------------------------------------------------------------------------------------------ config fields */

h3_cfg h3_cfg_of(const json_t *o, const char *path, const char *where, h3_err *e) {
    return (h3_cfg){o, path, where ? where : "", e, 0};
}

int h3_cfg_fail(h3_cfg *c, const char *fmt, ...) {
    if (c->rc) return -1; /* the first error stays */
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    c->rc = -1;
    return h3_fail(c->e, "%s: %s%s", c->path, c->where, msg);
}

int h3_cfg_i64(h3_cfg *c, const char *key, int64_t def, int64_t lo, int64_t hi, int64_t *out) {
    if (c->rc) return -1;
    json_t *v = json_is_object(c->o) ? json_object_get(c->o, key) : NULL;
    if (!v) {
        if (def == H3_CFG_REQUIRED) return h3_cfg_fail(c, "missing integer \"%s\"", key);
        *out = def;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return h3_cfg_fail(c, "\"%s\" must be an integer in [%" PRId64 ", %" PRId64 "]", key, lo, hi);
    *out = (int64_t)json_integer_value(v);
    return 0;
}

int h3_cfg_int(h3_cfg *c, const char *key, int64_t def, int64_t lo, int64_t hi, int *out) {
    if (lo < INT32_MIN) lo = INT32_MIN;
    if (hi > INT32_MAX) hi = INT32_MAX;
    int64_t v;
    if (h3_cfg_i64(c, key, def, lo, hi, &v) != 0) return -1;
    *out = (int)v;
    return 0;
}

static int num_ok(const json_t *v, double lo, double hi, double *out) {
    if (!json_is_number(v)) return 0;
    double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi) return 0;
    *out = d;
    return 1;
}

int h3_cfg_num(h3_cfg *c, const char *key, double def, double lo, double hi, double *out) {
    if (c->rc) return -1;
    json_t *v = json_is_object(c->o) ? json_object_get(c->o, key) : NULL;
    if (!v) {
        if (isinf(def) && def < 0) return h3_cfg_fail(c, "missing number \"%s\"", key);
        *out = def;
        return 0;
    }
    if (!num_ok(v, lo, hi, out)) return h3_cfg_fail(c, "\"%s\" must be a number in [%g, %g]", key, lo, hi);
    return 0;
}

int h3_cfg_int_list_v(h3_cfg *c, const json_t *v, const char *key, int nmin, int nmax, int64_t lo, int64_t hi,
                      int *out, int *n) {
    if (c->rc) return -1;
    if (lo < INT32_MIN) lo = INT32_MIN;
    if (hi > INT32_MAX) hi = INT32_MAX;
    if (!json_is_array(v) || json_array_size(v) < (size_t)nmin || json_array_size(v) > (size_t)nmax)
        return h3_cfg_fail(c, "\"%s\" must be a list of %d..%d integers", key, nmin, nmax);
    size_t k = json_array_size(v);
    for (size_t i = 0; i < k; i++) {
        json_t *x = json_array_get(v, i);
        if (!json_is_integer(x) || json_integer_value(x) < lo || json_integer_value(x) > hi)
            return h3_cfg_fail(c, "\"%s\"[%zu] must be an integer in [%" PRId64 ", %" PRId64 "]", key, i, lo, hi);
    }
    for (size_t i = 0; i < k; i++) out[i] = (int)json_integer_value(json_array_get(v, i));
    *n = (int)k;
    return 0;
}

int h3_cfg_int_list(h3_cfg *c, const char *key, int required, int nmin, int nmax, int64_t lo, int64_t hi, int *out,
                    int *n) {
    if (c->rc) return -1;
    json_t *v = json_is_object(c->o) ? json_object_get(c->o, key) : NULL;
    if (!v) return required ? h3_cfg_fail(c, "missing list \"%s\"", key) : 0;
    return h3_cfg_int_list_v(c, v, key, nmin, nmax, lo, hi, out, n);
}

int h3_cfg_num_list(h3_cfg *c, const char *key, int required, int nmin, int nmax, double lo, double hi, double *out,
                    int *n) {
    if (c->rc) return -1;
    json_t *v = json_is_object(c->o) ? json_object_get(c->o, key) : NULL;
    if (!v) return required ? h3_cfg_fail(c, "missing list \"%s\"", key) : 0;
    if (!json_is_array(v) || json_array_size(v) < (size_t)nmin || json_array_size(v) > (size_t)nmax)
        return h3_cfg_fail(c, "\"%s\" must be a list of %d..%d numbers", key, nmin, nmax);
    size_t k = json_array_size(v);
    for (size_t i = 0; i < k; i++)
        if (!num_ok(json_array_get(v, i), lo, hi, &out[i]))
            return h3_cfg_fail(c, "\"%s\"[%zu] must be a number in [%g, %g]", key, i, lo, hi);
    *n = (int)k;
    return 0;
}

int h3_cfg_bool(h3_cfg *c, const char *key, int def, int *out) {
    if (c->rc) return -1;
    json_t *v = json_is_object(c->o) ? json_object_get(c->o, key) : NULL;
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v)) return h3_cfg_fail(c, "\"%s\" must be true or false", key);
    *out = json_is_true(v);
    return 0;
}
