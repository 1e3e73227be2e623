/* GGUF, the container of ggml (llama.cpp): "GGUF", a version (2 or 3), the tensor and key/value counts, the
 * key/values (typed, arrays of one type), the tensor infos (name, dims innermost first, ggml type, offset into the
 * data area), padding to the alignment, then the data. The format as h3 reads it, and the rules it checks, are in
 * docs/checkpoints.md. Reader: mmaps the file and validates everything before handing out views: every length
 * inside the file, known types only, each tensor's byte size from its type's block layout, offsets aligned, the
 * tensors inside the data area without overlap, names unique. Fuzzed (fuzz/fuzz_gguf.c). */
#ifndef H3_GGUF_H
#define H3_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "../core/error.h"
#include "../core/tensor.h"

/* ggml tensor types h3 reads (the ids are ggml's) */
typedef enum {
    GGUF_F32 = 0, GGUF_F16 = 1, GGUF_Q4_0 = 2, GGUF_Q4_1 = 3, GGUF_Q5_0 = 6, GGUF_Q5_1 = 7, GGUF_Q8_0 = 8,
    GGUF_Q4_K = 12, GGUF_Q5_K = 13, GGUF_Q6_K = 14, GGUF_BF16 = 30,
} gguf_type;

/* key/value types (GGUF's ids) */
typedef enum {
    GGUF_KV_U8 = 0, GGUF_KV_I8, GGUF_KV_U16, GGUF_KV_I16, GGUF_KV_U32, GGUF_KV_I32, GGUF_KV_F32, GGUF_KV_BOOL,
    GGUF_KV_STRING, GGUF_KV_ARRAY, GGUF_KV_U64, GGUF_KV_I64, GGUF_KV_F64,
} gguf_kv_type;

/* A type's block: elems values in bytes bytes; name as ggml spells it. 0 when the type is not one h3 reads. */
int gguf_type_block(uint32_t type, int64_t *elems, int64_t *bytes, const char **name);

typedef struct gguf_kv {
    char    *key;
    uint32_t type;      /* gguf_kv_type */
    uint32_t elem_type; /* arrays: the items' type */
    uint64_t count;     /* arrays: the item count; else 1 */
    uint64_t u;         /* integer and bool values (sign-extended for signed types) */
    double   f;         /* F32 / F64 values */
    char    *str;       /* STRING values (NUL-terminated copy; a NUL inside is refused) */
} gguf_kv;

typedef struct gguf_tensor {
    char    *name;
    uint32_t type;      /* gguf_type */
    int      ndim;
    int64_t  shape[4];  /* outermost first, as a row-major [N, K] weight (GGUF stores K first) */
    uint64_t offset;    /* into the data area */
    uint64_t bytes;
} gguf_tensor;

typedef struct gguf_file {
    char          *path;
    const uint8_t *map; /* the whole file, read-only; NULL after gguf_parse on a caller's buffer */
    size_t         size;
    uint32_t       version, alignment;
    uint64_t       data_off; /* where the data area starts */
    int64_t        n_kv, n_tensors;
    gguf_kv       *kv;
    gguf_tensor   *tensors;  /* in file order */
} gguf_file;

/* Parses and validates buf[0..len), the whole file; name is for messages. Fuzzed. */
int gguf_parse(const uint8_t *buf, size_t len, const char *name, gguf_file *out, h3_err *e);
/* Frees what gguf_parse allocated (not the mapping). */
void gguf_parse_free(gguf_file *f);

gguf_file *gguf_open(const char *path, h3_err *e);
void       gguf_close(gguf_file *f);

const gguf_tensor *gguf_find(const gguf_file *f, const char *name);
const gguf_kv     *gguf_find_kv(const gguf_file *f, const char *key);
/* The tensor's bytes in the mapping (gguf_open only). */
const void        *gguf_data(const gguf_file *f, const gguf_tensor *t);

/* Dequantizes n values of a tensor of type type, starting at a block boundary of src, into dst (fp32), with ggml's
 * reference arithmetic (docs/checkpoints.md): bit-identical to ggml's dequantize_row_* and the gguf package's.
 * n must be a multiple of the type's block. 0, or -1 for a type h3 does not read. */
int gguf_dequantize(uint32_t type, const void *src, float *dst, int64_t n);

/* Tensor t of f (gguf_open) as a view of dtype want (H3_F32, or H3_BF16: each dequantized value rounded to nearest
 * even, as torch's .to(torch.bfloat16) does; a BF16 tensor is copied as it is) in a malloc'd buffer, *buf, which
 * the caller frees after the view. */
int gguf_view_as(const gguf_file *f, const gguf_tensor *t, h3_dtype want, h3_tensor *view, void **buf, h3_err *e);

#endif
