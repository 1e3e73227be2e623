#include "expect.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int h3_expect_add(h3_expect_list *l, h3_dtype dtype, int ndim, const int64_t *shape, const char *fmt, ...) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 256;
        h3_expect *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
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
}

const h3_expect *h3_expect_find(const h3_expect_list *l, const char *name) {
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].name, name)) return &l->v[i];
    return NULL;
}
