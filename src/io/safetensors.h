/* safetensors: an 8-byte little-endian header length, a JSON header, then raw tensor bytes.
 * Reader: mmaps the file and validates everything before handing out views, by the reference format's rules
 * (docs/robustness.md): dtype names, shapes, byte size = numel x dtype size, and the tensors sorted by offset tile
 * the data area exactly (from byte 0, no overlap, no gap, no trailing bytes).
 * Set: one file, or a sharded set described by *.safetensors.index.json.
 * Writer: collects tensors and writes them atomically (temp file + rename). */
#ifndef H3_SAFETENSORS_H
#define H3_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "../core/error.h"
#include "../core/tensor.h"
#include "outfile.h"

typedef struct st_entry {
    char    *name;
    h3_dtype dtype;
    int      ndim;
    int64_t  shape[H3_MAX_DIMS];
    uint64_t begin, end; /* byte offsets relative to the data area */
} st_entry;

typedef struct st_file {
    char          *path;
    const uint8_t *map;       /* whole file, read-only; NULL for a header-only parse */
    size_t         map_size;
    size_t         data_off;  /* 8 + header length */
    int            n;
    st_entry      *entries;   /* sorted by name */
    char          *metadata_json; /* the "__metadata__" object re-serialized, or NULL */
} st_file;

/* Parses and validates a header. buf/len is the whole file (or at least 8 + header bytes when
 * file_size says how large the file is). name_for_errors is used in messages. Fuzzed. */
int st_parse(const uint8_t *buf, size_t len, uint64_t file_size, const char *name_for_errors,
             st_file *out, h3_err *e);

/* Frees what st_parse allocated (not the mapping). */
void            st_parse_free(st_file *f);
st_file        *st_open(const char *path, h3_err *e);
/* The same validation from the 8-byte length, the header and the file's size only (no mapping, no data read):
 * map is NULL, st_data must not be used. The pre-flight check of a request's shards and `h3 info` use it. */
st_file        *st_open_header(const char *path, h3_err *e);
void            st_close(st_file *f);
const st_entry *st_find(const st_file *f, const char *name);
const void     *st_data(const st_file *f, const st_entry *ent);
/* A non-owning tensor view into the mapping. */
int             st_view(const st_file *f, const st_entry *ent, h3_tensor *out);

/* A set of shards addressed by tensor name. */
typedef struct st_set st_set;

/* path: a .safetensors file, an index .json, or a directory holding exactly one of
 * "*.safetensors.index.json" or a single "*.safetensors". */
st_set *st_set_open(const char *path, h3_err *e);
/* The same checks (index, every shard's header and extent, every tensor of a shard listed by the index for that
 * shard) on headers only; st_set_get then fails (no data). One validator for info, generate and the pre-flight. */
st_set *st_set_open_headers(const char *path, h3_err *e);
/* st_set_open_headers + free: 0 when the set would open. */
int     st_set_check(const char *path, h3_err *e);
void    st_set_free(st_set *s);
int     st_set_count(const st_set *s);
const char *st_set_name(const st_set *s, int i);          /* names in sorted order */
/* Finds a tensor; returns 0 and fills a view, or -1 with "PATH: tensor 'NAME' not found". */
int     st_set_get(const st_set *s, const char *name, h3_tensor *view, h3_err *e);
const st_entry *st_set_entry(const st_set *s, const char *name, const st_file **file);
const char *st_set_path(const st_set *s);

/* Writer. Tensor data is copied at add time. */
typedef struct st_writer st_writer;
st_writer *st_writer_new(void);
int        st_writer_add(st_writer *w, const char *name, h3_dtype dtype, int ndim, const int64_t *shape,
                         const void *data, h3_err *e);
int        st_writer_add_tensor(st_writer *w, const char *name, const h3_tensor *t, h3_err *e);
/* metadata: optional JSON object text for "__metadata__" (string values only), or NULL. */
/* Written through a temporary beside path (outfile.h) and renamed into place. */
int        st_writer_save(st_writer *w, const char *path, const char *metadata_json, h3_err *e);
/* Writes into an opened output's temporary file (h3_outfile_open); the caller commits (h3_outfile_commit). */
int        st_writer_save_to(st_writer *w, h3_outfile *o, const char *metadata_json, h3_err *e);
void       st_writer_free(st_writer *w);



#ifndef H3_SAFETENSORS_INDEX
#define H3_SAFETENSORS_INDEX
/* A parsed *.safetensors.index.json without opening shards (h3 info on a skeleton). */
typedef struct st_index {
    int       n;            /* tensors */
    char    **names;        /* sorted */
    int      *file_of;      /* shard index per tensor */
    int       nfiles;
    char    **files;        /* shard basenames, in order of first appearance */
    uint64_t  total_size;
    int       has_total_size;
} st_index;

int  st_index_load(const char *path, st_index *out, h3_err *e);
/* Parses index JSON text (fuzzed); path is used in messages. */
int  st_index_parse(const char *text, size_t len, const char *path, st_index *out, h3_err *e);
void st_index_free(st_index *ix);
#endif

#endif
