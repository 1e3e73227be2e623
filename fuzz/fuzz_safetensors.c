/* libFuzzer target: safetensors headers and index files from untrusted bytes.
 * The first byte picks the parser; the rest is the input. Build: make fuzz. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    h3_err e;
    if (data[0] & 1) {
        st_index ix;
        if (st_index_parse((const char *)data + 1, size - 1, "fuzz.index.json", &ix, &e) == 0) {
            for (int i = 0; i < ix.n; i++) (void)strlen(ix.names[i]), (void)ix.files[ix.file_of[i]];
            st_index_free(&ix);
        }
        return 0;
    }
    st_file f;
    if (st_parse(data + 1, size - 1, size - 1, "fuzz.safetensors", &f, &e) == 0) {
        /* Touch every tensor's bytes: validation promised they are in bounds. */
        volatile uint8_t acc = 0;
        for (int i = 0; i < f.n; i++) {
            const st_entry *ent = &f.entries[i];
            const uint8_t *p = data + 1 + f.data_off + ent->begin;
            for (uint64_t k = 0; k < ent->end - ent->begin; k++) acc ^= p[k];
            if (st_find(&f, ent->name) != ent) __builtin_trap();
        }
        st_parse_free(&f);
    }
    return 0;
}
