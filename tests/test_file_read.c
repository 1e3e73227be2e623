/* h3_read_span (src/io/file_read.h): byte ranges of a file at unaligned offsets and lengths, read with O_DIRECT (when
 * the file system of the scratch folder takes it) and buffered, against the bytes written; a range past the end of the
 * file is an error naming it; an O_DIRECT read into an unaligned buffer is refused. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "io/file_read.h"

int main(void) {
    char dir[] = "/tmp/h3_file_read_XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "mkdtemp failed\n");
        return 1;
    }
    char path[256];
    snprintf(path, sizeof path, "%s/data.bin", dir);
    const size_t size = (9u << 20) + 12345; /* not a multiple of the alignment */
    uint8_t *data = malloc(size);
    uint32_t x = 12345;
    for (size_t i = 0; i < size; i++) x = x * 1664525u + 1013904223u, data[i] = (uint8_t)(x >> 24);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, size, f) == size, "write %s", path);
    if (f) fclose(f);
    const size_t cap = (10u << 20) + 2 * H3_DIRECT_ALIGN;
    uint8_t *buf = aligned_alloc(H3_DIRECT_ALIGN, cap);
    const struct { uint64_t off; size_t n; } spans[] = {
        {0, 1}, {1, 4095}, {4095, 2}, {4096, 4096}, {777, (5u << 20) + 3}, {size - 1, 1}, {size - 12345, 12345},
        {0, size - 1}, {123, (8u << 20) + 17},
    };
    for (int direct = 1; direct >= 0; direct--) {
        h3_err e = {{0}};
        h3_read_file rf;
        CHECK(h3_read_file_open(&rf, path, direct, &e) == 0, "open: %s", e.msg);
        int good = 1;
        for (size_t k = 0; k < sizeof spans / sizeof spans[0]; k++) {
            size_t skip = 0;
            memset(buf, 0xa5, cap);
            int rc = h3_read_span(&rf, spans[k].off, spans[k].n, buf, cap, &skip, &e);
            CHECK(rc == 0 && !memcmp(buf + skip, data + spans[k].off, spans[k].n), "%s span %zu (+%llu, %zu bytes): rc %d %s",
                  rf.direct ? "direct" : "buffered", k, (unsigned long long)spans[k].off, spans[k].n, rc, e.msg);
            good &= rc == 0;
        }
        size_t skip;
        CHECK(h3_read_span(&rf, size - 10, 20, buf, cap, &skip, &e) == -1 && strstr(e.msg, "file ends before") &&
                  strstr(e.msg, "data.bin"),
              "past the end: '%s'", e.msg);
        if (rf.direct)
            CHECK(h3_read_span(&rf, 0, 10, buf + 1, cap - 1, &skip, &e) == -1 && strstr(e.msg, "unaligned"),
                  "unaligned buffer: '%s'", e.msg);
        printf("  %-34s %zu spans %s\n", direct ? (rf.direct ? "O_DIRECT reads" : "O_DIRECT refused: buffered reads")
                                              : "buffered reads", sizeof spans / sizeof spans[0], good ? "equal" : "DIFFER");
        h3_read_file_close(&rf);
    }
    h3_err e = {{0}};
    h3_read_file none;
    CHECK(h3_read_file_open(&none, "/nonexistent/h3/file", 1, &e) == -1 && strstr(e.msg, "/nonexistent/h3/file"),
          "missing file: '%s'", e.msg);
    unlink(path);
    rmdir(dir);
    free(data), free(buf);
    TEST_END();
}
