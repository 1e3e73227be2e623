/* Parallel, optionally uncached reads of byte ranges (file_read.h). */
#include "file_read.h"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int h3_read_file_open(h3_read_file *f, const char *path, int direct, h3_err *e) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    if (!(f->path = strdup(path))) return h3_fail(e, "out of memory");
    h3_err ignored;
    if (direct && (f->fd = h3_open_regular(path, O_DIRECT, NULL, &ignored)) >= 0) {
        f->direct = 1;
        return 0;
    }
    /* also where the file system refuses O_DIRECT (EINVAL); a FIFO or other non-regular file is refused */
    if ((f->fd = h3_open_regular(path, 0, NULL, e)) < 0) {
        free(f->path);
        f->path = NULL;
        return -1;
    }
    return 0;
}

void h3_read_file_close(h3_read_file *f) {
    if (f->fd >= 0) close(f->fd);
    free(f->path);
    f->fd = -1, f->path = NULL;
}

int h3_read_span(const h3_read_file *f, uint64_t off, size_t n, void *buf, size_t cap, size_t *skip, h3_err *e) {
    const uint64_t A = f->direct ? H3_DIRECT_ALIGN : 1;
    const uint64_t lo = off / A * A, hi = (off + n + A - 1) / A * A;
    if (f->direct && ((uintptr_t)buf % H3_DIRECT_ALIGN))
        return h3_fail(e, "internal: %s: an O_DIRECT read into an unaligned buffer", f->path);
    if (hi - lo > cap) return h3_fail(e, "internal: %s: a read of %llu bytes into %zu", f->path, (unsigned long long)(hi - lo), cap);
    *skip = (size_t)(off - lo);
    const size_t total = (size_t)(hi - lo), piece = (size_t)4 << 20; /* a multiple of H3_DIRECT_ALIGN */
    const int64_t np = (int64_t)((total + piece - 1) / piece);
    int failed = 0, err = 0;
    size_t got_short = 0;
#pragma omp parallel for schedule(dynamic, 1) if (np > 1)
    for (int64_t i = 0; i < np; i++) {
        size_t done = 0, len = total - (size_t)i * piece < piece ? total - (size_t)i * piece : piece;
        while (done < len) {
            ssize_t r = pread(f->fd, (char *)buf + (size_t)i * piece + done, len - done, (off_t)(lo + (size_t)i * piece + done));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
#pragma omp critical(h3_read_span_err)
                {
                    failed = 1;
                    if (r < 0) err = errno;
                    else got_short = (size_t)i * piece + done;
                }
                break;
            }
            done += (size_t)r;
        }
    }
    if (!failed) return 0;
    /* O_DIRECT may stop at the file's end inside the aligned range: only a shortfall before off + n is an error */
    if (!err && got_short >= *skip + n) return 0;
    if (err) return h3_fail(e, "%s: read at offset %llu failed (%s)", f->path, (unsigned long long)off, strerror(err));
    return h3_fail(e, "%s: file ends before byte %llu (truncated?)", f->path, (unsigned long long)(off + n));
}
