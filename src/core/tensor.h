/* A host tensor: dtype, shape and a pointer. It either owns its buffer (h3_tensor_new) or is a view
 * into memory someone else owns (an mmap'd safetensors file, a caller's array). */
#ifndef H3_TENSOR_H
#define H3_TENSOR_H

#include <stdint.h>
#include <stddef.h>

#include "dtype.h"
#include "error.h"

#define H3_MAX_DIMS 8

typedef struct h3_tensor {
    h3_dtype dtype;
    int      ndim;
    int64_t  shape[H3_MAX_DIMS];
    void    *data;
    int      owns_data; /* 1: h3_tensor_free releases data */
} h3_tensor;

/* Allocates a zeroed tensor; returns NULL (with e filled) on a bad shape or out of memory. */
h3_tensor *h3_tensor_new(h3_dtype dtype, int ndim, const int64_t *shape, h3_err *e);
/* A non-owning view over data. */
h3_tensor *h3_tensor_view(h3_dtype dtype, int ndim, const int64_t *shape, void *data, h3_err *e);
void       h3_tensor_free(h3_tensor *t);

int64_t h3_tensor_numel(const h3_tensor *t);
size_t  h3_tensor_nbytes(const h3_tensor *t);
/* Formats "[2,3,4]" into buf. */
const char *h3_shape_str(const int64_t *shape, int ndim, char *buf, size_t cap);

/* New fp32 copy of any tensor (bf16/f16/f8/f64/ints converted by value). */
h3_tensor *h3_tensor_to_f32(const h3_tensor *t, h3_err *e);

/* memcpy with OpenMP threads in pieces of 1..8 MiB, two or more per thread where n allows (large copies out of file
 * mappings: the page faults, i.e. the reads from disk or page cache, run in parallel; copies into pinned staging
 * buffers). */
void h3_memcpy_par(void *dst, const void *src, size_t n);

/* Comparison metrics used by every parity test: relative L2 = ||a-b|| / ||b||, max |a-b|. */
double h3_rel_l2(const float *a, const float *ref, size_t n);
double h3_max_abs(const float *a, const float *ref, size_t n);

#endif
