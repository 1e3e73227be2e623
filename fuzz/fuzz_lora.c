/* libFuzzer target: LoRA files from untrusted bytes (docs/lora.md). Build: make fuzz. The first byte picks the
 * partition (bit 0: transformer_ref), --lora-ref (bit 1) and a FILE[:SCALE] argument parse of the rest (bit 2); the
 * rest is the file, parsed by the project's safetensors reader (memfd) and then converted and checked against the
 * tiny snapshot's config (tests/fixtures/tiny/transformer) by the same code dit_load_lora runs. Accepted files are
 * merged into a zero weight of every LoRA-able linear, and every merged module must have met a weight. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io/expect.h"
#include "io/safetensors.h"
#include "model/dit.h"
#include "model/dit_lora.h"

static const dit_config tiny = {
    .num_attention_heads = 2, .attention_head_dim = 32, .hidden_size = 48, .num_layers = 2, .num_refiner_layers = 2,
    .ffn_dim = 64, .in_channels = 24, .audio_in_channels = 32, .patch_size = {1, 2, 2}, .text_dim = 16,
    .freq_dim = 16, .time_embed_hidden_dim = 40, .time_embed_dim = 24, .rope_freq_dim = 4, .rope_theta = 10000.0f,
    .norm_eps = 1e-5f, .qk_norm_eps = 1e-5f, .final_norm_eps = 1e-5f,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    const int ref = data[0] & 1, to_ref = (data[0] >> 1) & 1;
    data++, size--;
    h3_err e;
    if (data[-1] & 4) { /* FILE[:SCALE] */
        char *arg = malloc(size + 1);
        if (!arg) return 0;
        memcpy(arg, data, size), arg[size] = 0;
        dit_lora_spec s;
        if (dit_lora_parse_arg(arg, "--lora", &s, &e) == 0 && (!s.path || !s.path[0] || !(s.scale == s.scale)))
            __builtin_trap();
        free(arg);
        return 0;
    }
    int fd = memfd_create("fuzz-lora", 0);
    if (fd < 0) return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    st_file *f = st_open(path, &e);
    int ok = f && dit_lora_check_file(f, &tiny, ref, to_ref, &e) == 0;
    if (f) st_close(f);
    if (ok) { /* the full load's path: the set, a merge into every expected linear, every module met */
        dit_lora_spec spec = {path, 0.5, to_ref};
        dit_lora_set *s = dit_lora_set_new(&spec, 1, &tiny, ref, &e);
        if (!s) __builtin_trap(); /* the check accepted it */
        h3_expect_list ex = {0};
        if (dit_expected_tensors(&tiny, &ex, &e) == 0)
            for (int i = 0; i < ex.n; i++) {
                const h3_expect *x = &ex.v[i];
                if (x->ndim != 2) continue;
                h3_tensor w = {.dtype = H3_BF16, .ndim = 2, .shape = {x->shape[0], x->shape[1]}};
                w.data = calloc((size_t)(x->shape[0] * x->shape[1]), 2);
                void *out = NULL;
                if (w.data && dit_lora_merge(s, &tiny, x->name, &w, H3_BF16, &out, &e) != 0) __builtin_trap();
                free(out);
                free(w.data);
            }
        if (dit_lora_check_all_merged(s, &e) != 0) __builtin_trap();
        h3_expect_list_free(&ex);
        dit_lora_set_free(s);
    }
    close(fd);
    return 0;
}
