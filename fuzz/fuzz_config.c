/* libFuzzer target: config.json files from untrusted bytes through the config-field reader and every component's
 * config parser (DiT, video VAE, audio VAE, text encoder + vision), then the tensor list each accepted config implies
 * (capped, as h3 info caps it by the index). Odd first byte: the bytes go through a file (memfd) and h3_json_load, the
 * opener every snapshot JSON file takes. Build: make fuzz; seeds: fuzz/corpus/config (the skeleton's configs). */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "io/config.h"
#include "io/expect.h"
#include "model/audio_vae.h"
#include "model/dit.h"
#include "model/text_encoder.h"
#include "model/video_vae.h"

static void list_done(h3_expect_list *l, int rc) {
    if (!rc && l->max && l->n > l->max) __builtin_trap(); /* the cap holds */
    for (int i = 0; i < l->n; i++)
        for (int d = 0; d < l->v[i].ndim; d++)
            if (l->v[i].shape[d] < 0) __builtin_trap(); /* sizes from accepted configs never wrap */
    h3_expect_list_free(l);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    h3_err e;
    json_t *root = NULL;
    if (data[0] & 1) {
        int fd = memfd_create("fuzz-config", 0);
        if (fd < 0) return 0;
        if (write(fd, data + 1, size - 1) == (ssize_t)(size - 1)) {
            char path[64];
            snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
            root = h3_json_load(path, &e);
        }
        close(fd);
    } else {
        root = h3_json_parse((const char *)data + 1, size - 1, "fuzz/config.json", &e);
    }
    if (!root) return 0;
    const int cap = 1 << 16;
    {
        dit_config c;
        h3_expect_list l = {.max = cap};
        if (dit_config_parse(root, "fuzz/config.json", &c, &e) == 0) list_done(&l, dit_expected_tensors(&c, &l, &e));
    }
    {
        video_vae_config c;
        h3_expect_list l = {.max = cap};
        if (video_vae_config_parse(root, "fuzz/config.json", &c, &e) == 0) list_done(&l, video_vae_expected_tensors(&c, &l, &e));
    }
    {
        audio_vae_config c;
        h3_expect_list l = {.max = cap};
        if (audio_vae_config_parse(root, "fuzz/config.json", &c, &e) == 0) list_done(&l, audio_vae_expected_tensors(&c, &l, &e));
    }
    {
        te_config c;
        h3_expect_list l = {.max = cap};
        if (text_encoder_config_parse(root, "fuzz/config.json", &c, &e) == 0)
            list_done(&l, text_encoder_expected_tensors(&c, &l, &e));
    }
    json_decref(root);
    return 0;
}
