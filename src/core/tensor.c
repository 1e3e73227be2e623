#include "tensor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static int check_shape(int ndim, const int64_t *shape, h3_dtype dtype, h3_err *e) {
    if (ndim < 0 || ndim > H3_MAX_DIMS) return h3_fail(e, "tensor rank %d outside 0..%d", ndim, H3_MAX_DIMS);
    if ((unsigned)dtype >= H3_DTYPE_COUNT) return h3_fail(e, "unknown dtype %d", (int)dtype);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return h3_fail(e, "negative dimension %lld", (long long)shape[i]);
        if (shape[i] && n > INT64_MAX / 8 / shape[i]) return h3_fail(e, "tensor too large");
        n *= shape[i];
    }
    return 0;
}

h3_tensor *h3_tensor_view(h3_dtype dtype, int ndim, const int64_t *shape, void *data, h3_err *e) {
    if (check_shape(ndim, shape, dtype, e)) return NULL;
    h3_tensor *t = calloc(1, sizeof *t);
    if (!t) {
        h3_fail(e, "out of memory");
        return NULL;
    }
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->data = data;
    return t;
}

h3_tensor *h3_tensor_new(h3_dtype dtype, int ndim, const int64_t *shape, h3_err *e) {
    h3_tensor *t = h3_tensor_view(dtype, ndim, shape, NULL, e);
    if (!t) return NULL;
    size_t bytes = h3_tensor_nbytes(t);
    t->data = calloc(bytes ? bytes : 1, 1);
    if (!t->data) {
        free(t);
        h3_fail(e, "out of memory allocating %zu bytes", bytes);
        return NULL;
    }
    t->owns_data = 1;
    return t;
}

void h3_tensor_free(h3_tensor *t) {
    if (!t) return;
    if (t->owns_data) free(t->data);
    free(t);
}

int64_t h3_tensor_numel(const h3_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

size_t h3_tensor_nbytes(const h3_tensor *t) { return (size_t)h3_tensor_numel(t) * h3_dtype_size(t->dtype); }

const char *h3_shape_str(const int64_t *shape, int ndim, char *buf, size_t cap) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, o < cap ? cap - o : 0, "[");
    for (int i = 0; i < ndim; i++)
        o += (size_t)snprintf(buf + o, o < cap ? cap - o : 0, i ? ",%lld" : "%lld", (long long)shape[i]);
    snprintf(buf + o, o < cap ? cap - o : 0, "]");
    return buf;
}

h3_tensor *h3_tensor_to_f32(const h3_tensor *t, h3_err *e) {
    h3_tensor *r = h3_tensor_new(H3_F32, t->ndim, t->shape, e);
    if (!r) return NULL;
    h3_convert_to_f32(r->data, t->data, t->dtype, (size_t)h3_tensor_numel(t));
    return r;
}

double h3_rel_l2(const float *a, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * (double)ref[i];
    }
    if (den == 0) return num == 0 ? 0 : INFINITY;
    return sqrt(num / den);
}

double h3_max_abs(const float *a, const float *ref, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)ref[i]);
        if (d > m || d != d) m = d;
    }
    return m;
}

void h3_memcpy_par(void *dst, const void *src, size_t n) {
    /* pieces of 1..8 MiB, at least two per thread when n allows (a 64 MiB staging chunk on 16 threads: 2 MiB) */
#ifdef _OPENMP
    const size_t threads = (size_t)omp_get_max_threads();
#else
    const size_t threads = 1;
#endif
    const size_t per = n / (2 * threads);
    size_t piece = per < ((size_t)1 << 20) ? (size_t)1 << 20 : per > ((size_t)8 << 20) ? (size_t)8 << 20 : per;
    piece = (piece + 65535) & ~(size_t)65535;
    const int64_t np = (int64_t)((n + piece - 1) / piece);
#pragma omp parallel for schedule(dynamic, 1) if (np > 1)
    for (int64_t i = 0; i < np; i++) {
        size_t off = (size_t)i * piece, len = n - off < piece ? n - off : piece;
        memcpy((char *)dst + off, (const char *)src + off, len);
    }
}
