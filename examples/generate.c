/* generate SNAPSHOT OUT.mp4 [PROMPT]: one clip through libh3's public API (docs/api.md) with a progress bar.
 * Build: cc generate.c $(pkg-config --cflags --libs h3) -o generate
 * H3_EXAMPLE_SIZE=WxH, H3_EXAMPLE_STEPS=N: a smaller canvas / fewer steps (the tests' tiny snapshot). */
#include <h3.h>
#include <stdio.h>
#include <stdlib.h>

static int bar(void *user, const h3_progress *p) {
    (void)user;
    int width = 30, fill = p->total > 0 ? (int)(width * p->done / p->total) : 0;
    fprintf(stderr, "\r%-24s [%.*s%*s] %lld/%lld", p->phase, fill, "##############################", width - fill, "",
            (long long)p->done, (long long)p->total);
    if (p->event == H3_PROGRESS_END) fputc('\n', stderr);
    return 0; /* nonzero would cancel */
}

static void log_line(void *user, int kind, const char *line) {
    (void)user;
    fprintf(stderr, kind == H3_LOG_MESSAGE ? "h3: %s\n" : "%s\n", line);
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: generate SNAPSHOT OUT.mp4 [PROMPT]   (libh3 %s)\n", h3_version());
        return 2;
    }
    h3_engine_options o;
    h3_engine_options_init(&o); /* backend auto: CUDA when there is a usable GPU, else the CPU */
    o.log = log_line;
    h3_engine *eng;
    int rc = h3_engine_open(argv[1], &o, &eng);
    if (rc == H3_OK) {
        h3_params p;
        h3_params_init(&p);
        p.prompt = argc > 3 ? argv[3] : "A red fox runs through fresh snow at dawn.";
        p.output_mp4 = argv[2];
        const char *size = getenv("H3_EXAMPLE_SIZE"), *steps = getenv("H3_EXAMPLE_STEPS");
        if (size) sscanf(size, "%dx%d", &p.width, &p.height);
        if (steps) p.steps = atoi(steps);
        h3_sinks s = {.progress = bar};
        rc = h3_engine_generate(eng, &p, &s);
    }
    if (rc != H3_OK) fprintf(stderr, "generate: %s: %s\n", h3_status_name(rc), eng ? h3_engine_error(eng) : "out of memory");
    else fprintf(stderr, "generate: wrote %s on %s\n", argv[2], h3_engine_backend(eng));
    h3_engine_close(eng);
    return rc == H3_OK ? 0 : rc == H3_ERR_BAD_INPUT ? 2 : 1;
}
