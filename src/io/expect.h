/* The tensors a component's config implies: name, dtype and shape. Each model file provides
 * `<comp>_expected_tensors(cfg, ..., list)`; `h3 info` checks a snapshot against that list. */
#ifndef H3_EXPECT_H
#define H3_EXPECT_H

#include <stdint.h>

#include "../core/dtype.h"
#include "../core/error.h"
#include "../core/tensor.h"

typedef struct h3_expect {
    char     name[192];
    h3_dtype dtype;
    int      ndim;
    int64_t  shape[H3_MAX_DIMS];
} h3_expect;

typedef struct h3_expect_list {
    h3_expect *v;
    int        n, cap;
    int        max;    /* > 0: more entries than this is an error (set from the tensor index before the list is built) */
    int        failed; /* 1 over max, 2 out of memory; later adds then fail at once */
    char       over[192]; /* the first name beyond max */
} h3_expect_list;

/* Appends one entry: name is a printf format; then ndim and ndim int64_t dims follow the name's
 * format arguments are given first. Example:
 *   h3_expect_add(l, H3_BF16, 2, (int64_t[]){7168, 5376}, "transformer_blocks.%d.attn.to_q.weight", i); */
int  h3_expect_add(h3_expect_list *l, h3_dtype dtype, int ndim, const int64_t *shape, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void h3_expect_list_free(h3_expect_list *l);
/* The one rule `h3 info` and the model loaders apply to a stored tensor: exactly the dtype, rank and dims the
 * config implies (no other dtype is read in its place). 0, or -1 with "[WHERE: ]tensor 'NAME': F16 [..], config
 * implies BF16 [..]" (where may be NULL). */
int  h3_expect_check(const h3_expect *x, h3_dtype dtype, int ndim, const int64_t *shape, const char *where, h3_err *e);
/* The message for a failed list: "WHAT: the config implies more than MAX tensors (the weights hold MAX)" or out of
 * memory. Returns -1. */
int  h3_expect_fail(const h3_expect_list *l, const char *what, h3_err *e);
const h3_expect *h3_expect_find(const h3_expect_list *l, const char *name);

#endif
