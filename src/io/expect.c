#include "expect.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int h3_expect_add(h3_expect_list *l, h3_dtype dtype, int ndim, const int64_t *shape, const char *fmt, ...) {
    if (l->failed) return -1;
    if (l->max > 0 && l->n >= l->max) {
        l->failed = 1;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(l->over, sizeof l->over, fmt, ap);
        va_end(ap);
        return -1;
    }
    if (l->n == l->cap) {
        if (l->cap > (1 << 24)) { /* far beyond any model: no list grows without end */
            l->failed = 2;
            return -1;
        }
        int cap = l->cap ? l->cap * 2 : 256;
        h3_expect *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) {
            l->failed = 2;
            return -1;
        }
        l->v = v;
        l->cap = cap;
    }
    h3_expect *x = &l->v[l->n++];
    memset(x, 0, sizeof *x);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->name, sizeof x->name, fmt, ap);
    va_end(ap);
    x->dtype = dtype;
    x->ndim = ndim;
    for (int i = 0; i < ndim && i < H3_MAX_DIMS; i++) x->shape[i] = shape[i];
    return 0;
}

void h3_expect_list_free(h3_expect_list *l) {
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
    l->failed = 0;
}

int h3_expect_fail(const h3_expect_list *l, const char *what, h3_err *e) {
    if (l->failed == 1)
        return h3_fail(e, "%s: the config implies more tensors than the %d the weights hold ('%s' is one too many)", what,
                       l->max, l->over);
    return h3_fail(e, "%s: out of memory building the tensor list", what);
}

const h3_expect *h3_expect_find(const h3_expect_list *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].name, name)) return &l->v[i];
    return NULL;
}

int h3_expect_check(const h3_expect *x, h3_dtype dtype, int ndim, const int64_t *shape, const char *where, h3_err *e) {
    int same = dtype == x->dtype && ndim == x->ndim;
    for (int d = 0; same && d < x->ndim; d++) same = shape[d] == x->shape[d];
    if (same) return 0;
    char s1[128], s2[128];
    return h3_fail(e, "%s%stensor '%s': %s %s, config implies %s %s", where ? where : "", where ? ": " : "", x->name,
                   h3_dtype_name(dtype), h3_shape_str(shape, ndim, s1, sizeof s1), h3_dtype_name(x->dtype),
                   h3_shape_str(x->shape, x->ndim, s2, sizeof s2));
}
