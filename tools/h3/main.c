/* h3: a native inference engine for MiniMax-H3. This file only dispatches subcommands. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "io/outfile.h"

int cli_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("h3: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

void cli_log(void *user, int kind, const char *line) {
    (void)user;
    fprintf(stderr, kind == 0 ? "h3: %s\n" : "%s\n", line);
}

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"generate", cmd_generate, "generate a video with audio (t2va, fl2va, ref2va)"},
    {"info", cmd_info, "describe and validate a snapshot"},
    {"probe", cmd_probe, "run one component on named tensors (parity contract)"},
    {"make-tiny", cmd_make_tiny, "write a tiny random-weight snapshot (smoke tests)"},
    {"bench", cmd_bench, "benchmark at the released shapes with random weights"},
    {"quantize", cmd_quantize, "write an INT8 W8A8 copy of a snapshot (docs/int8.md)"},
    {"make-lora", cmd_make_lora, "write a random LoRA at a config's shapes (docs/lora.md)"},
#ifdef H3_SERVE
    {"serve", cmd_serve, "a local HTTP service generating videos (docs/serve.md)"},
#endif
};

static void usage(FILE *f) {
    fprintf(f, "usage: h3 COMMAND [options]   (h3 COMMAND --help for details)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
}

/* SIGTERM/SIGINT/SIGHUP: the library's recorded temporaries and claimed placeholders go (async-signal-safe),
 * then the signal takes its default course (docs/robustness.md "Outputs and temporary files"). */
static void on_fatal_signal(int sig) {
    h3_outfile_cleanup_signal();
    signal(sig, SIG_DFL);
    raise(sig);
}

static void install_cleanup(void) {
    const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal_signal;
        sigemptyset(&sa.sa_mask);
        for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++) sigaddset(&sa.sa_mask, sigs[k]);
        /* a signal ignored at start (nohup, a background job's SIGINT) stays ignored */
        if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(sigs[i], &sa, NULL);
    }
}

int main(int argc, char **argv) {
    install_cleanup();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    return cli_error("unknown command '%s' (see h3 --help)", argv[1]);
}
