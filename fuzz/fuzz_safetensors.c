/* libFuzzer target: safetensors headers and index files from untrusted bytes.
 * The first byte picks the parser; the rest is the input. Build: make fuzz.
 *  bit 0 set: st_index_parse.
 *  bit 1 set: the bytes as a file (memfd), through the one validator both ways it is used: st_open (mapped; generate)
 *             and st_open_header (header + file size only; h3 info and the pre-flight check): same verdict, same
 *             tensors.
 *  else:      st_parse on the buffer, then the layout rule is re-checked on what it accepted. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io/safetensors.h"

static int cmp_begin(const void *a, const void *b) {
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end < y->end ? -1 : x->end > y->end);
}

/* Accepted means: sorted by offset, the tensors tile [0, data size) exactly (the reference's rule). */
static void check_tiling(const st_file *f, uint64_t data_size) {
    const st_entry **v = malloc((size_t)(f->n ? f->n : 1) * sizeof *v);
    if (!v) return;
    for (int i = 0; i < f->n; i++) v[i] = &f->entries[i];
    qsort(v, (size_t)f->n, sizeof *v, cmp_begin);
    uint64_t at = 0;
    for (int i = 0; i < f->n; i++) {
        if (v[i]->begin != at || v[i]->end < v[i]->begin) __builtin_trap();
        at = v[i]->end;
    }
    if (at != data_size) __builtin_trap();
    free(v);
}

static void via_file(const uint8_t *data, size_t size) {
    int fd = memfd_create("fuzz-st", 0);
    if (fd < 0) return;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    h3_err e1, e2;
    st_file *a = st_open(path, &e1), *b = st_open_header(path, &e2);
    if (!a != !b) __builtin_trap(); /* one validator: the same verdict */
    if (a) {
        if (a->n != b->n || a->data_off != b->data_off) __builtin_trap();
        for (int i = 0; i < a->n; i++)
            if (strcmp(a->entries[i].name, b->entries[i].name) || a->entries[i].begin != b->entries[i].begin ||
                a->entries[i].end != b->entries[i].end || a->entries[i].dtype != b->entries[i].dtype)
                __builtin_trap();
        check_tiling(a, size - a->data_off);
    } else if (strcmp(e1.msg, e2.msg)) {
        __builtin_trap(); /* and the same message */
    }
    st_close(a);
    st_close(b);
    close(fd);
}

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
    if (data[0] & 2) {
        via_file(data + 1, size - 1);
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
        check_tiling(&f, size - 1 - f.data_off);
        st_parse_free(&f);
    }
    return 0;
}
