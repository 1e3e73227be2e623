/* Reading byte ranges of large files with parallel pread calls, optionally uncached (O_DIRECT: the page cache keeps no
 * second copy; docs/model/features.md 7.3's "uncached reads"). Used by --ssd-streaming's weight slots. */
#ifndef H3_FILE_READ_H
#define H3_FILE_READ_H

#include <stddef.h>
#include <stdint.h>

#include "../core/error.h"

#ifdef __cplusplus
extern "C" { /* also included by CUDA sources (backend_stream.h) */
#endif

enum { H3_DIRECT_ALIGN = 4096 }; /* O_DIRECT offsets, lengths and buffers are multiples of this */

typedef struct h3_read_file {
    int   fd;
    int   direct;     /* opened with O_DIRECT */
    char *path;       /* for messages */
} h3_read_file;

/* Opens path read-only, with O_DIRECT when direct is set and the file system takes it (else buffered, direct = 0). */
int  h3_read_file_open(h3_read_file *f, const char *path, int direct, h3_err *e);
void h3_read_file_close(h3_read_file *f);

/* Reads [off, off + n) of the file into buf (cap bytes). With O_DIRECT the read covers the aligned range around it
 * (buf must be H3_DIRECT_ALIGN-aligned, cap >= n + 2 * H3_DIRECT_ALIGN): the wanted bytes then start at buf + *skip
 * (0 when buffered). Pieces of the range are read by OpenMP threads. A short file is an error naming it. */
int h3_read_span(const h3_read_file *f, uint64_t off, size_t n, void *buf, size_t cap, size_t *skip, h3_err *e);

#ifdef __cplusplus
}
#endif

#endif
