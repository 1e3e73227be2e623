/* `h3 make-lora --random`: a random LoRA in the diffusers / peft layout at the shapes of a transformer config, without
 * Python (docs/lora.md "Random LoRAs"): the release-shape rank-64 LoRA of the GPU checks.
 *
 *   h3 make-lora --random [--rank 64] [--config TRANSFORMER_DIR] [--layers N] [--seed S] OUT.safetensors
 *
 * --config defaults to tests/fixtures/skeleton/transformer (the release shapes); --layers N writes blocks 0..N-1 only
 * (a model of N blocks). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/text.h"
#include "model/dit.h"
#include "model/dit_lora.h"
#include "cli.h"

int cmd_make_lora(int argc, char **argv) {
    const char *config = "tests/fixtures/skeleton/transformer", *out = NULL, *rank_arg = "64", *layers_arg = NULL,
               *seed_arg = "1";
    int random = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], **dst = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            printf("usage: h3 make-lora --random [--rank 64] [--config TRANSFORMER_DIR] [--layers N] [--seed S] "
                   "OUT.safetensors\n");
            return 0;
        }
        if (!strcmp(a, "--random")) {
            random = 1;
            continue;
        }
        if (!strcmp(a, "--rank")) dst = &rank_arg;
        else if (!strcmp(a, "--config")) dst = &config;
        else if (!strcmp(a, "--layers")) dst = &layers_arg;
        else if (!strcmp(a, "--seed")) dst = &seed_arg;
        else if (a[0] == '-') return cli_error("make-lora: unknown argument '%s' (see h3 make-lora --help)", a);
        else if (out) return cli_error("make-lora: one output file, got '%s' and '%s'", out, a);
        else {
            out = a;
            continue;
        }
        if (i + 1 >= argc) return cli_error("make-lora: %s needs a value", a);
        *dst = argv[++i];
    }
    if (!random) return cli_error("make-lora: only --random LoRAs are made (give --random)");
    if (!out) return cli_error("make-lora: give the output file (OUT.safetensors)");
    long rank, layers = -1, seed;
    if (h3_parse_int(rank_arg, 1, 4096, &rank)) return cli_error("make-lora: --rank must be an integer in 1..4096, got '%s'", rank_arg);
    if (layers_arg && h3_parse_int(layers_arg, 1, 1000, &layers))
        return cli_error("make-lora: --layers must be an integer in 1..1000, got '%s'", layers_arg);
    if (h3_parse_int(seed_arg, 0, 1L << 30, &seed)) return cli_error("make-lora: --seed must be an integer in 0..2^30, got '%s'", seed_arg);
    h3_err e = {{0}};
    dit_config cfg;
    if (dit_config_load(config, &cfg, &e) != 0) return cli_error("make-lora: %s", e.msg);
    if (layers > 0) cfg.num_layers = (int)layers;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (dit_lora_write_random(&cfg, (int)rank, (uint64_t)seed, out, &e) != 0) {
        fprintf(stderr, "h3: make-lora: %s\n", e.msg);
        return 1;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("make-lora: %s: rank %ld, %d blocks x 6 linears of %s, written in %.2f s\n", out, rank, cfg.num_layers, config,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    return 0;
}
