/* libFuzzer target: the GGUF reader (src/io/gguf.c) on untrusted bytes. Whatever parses must describe tensors
 * that lie inside the buffer: the first row of each is dequantized from there (ASan catches any read outside),
 * and every failure must be one line.
 * Build: make fuzz; run: build-fuzz/fuzz_gguf fuzz/corpus/gguf */
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a copy of exactly size bytes, so that a read past the end is a heap overflow ASan reports */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    memcpy(buf, data, size);
    gguf_file f;
    h3_err e = {0};
    if (gguf_parse(buf, size, "fuzz", &f, &e) == 0) {
        for (int64_t i = 0; i < f.n_tensors; i++) {
            const gguf_tensor *t = &f.tensors[i];
            const int64_t row = t->shape[t->ndim - 1];
            if (row > (1 << 16)) continue; /* the check below is about bounds, not time */
            float *y = malloc((size_t)row * sizeof *y);
            if (y && gguf_dequantize(t->type, buf + f.data_off + t->offset, y, row) != 0) __builtin_trap();
            free(y);
        }
        gguf_parse_free(&f);
    } else if (!e.msg[0] || strchr(e.msg, '\n')) {
        __builtin_trap();
    }
    free(buf);
    return 0;
}
