/* Shared pieces of the `h3` command line. */
#ifndef H3_CLI_H
#define H3_CLI_H

#include "h3.h"

/* Prints "h3: MESSAGE" on stderr and returns 2 (the exit code for bad input). */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The pipeline's log (request.h's log): "h3: LINE" for messages, the --profile table's lines as they are, on stderr. */
void cli_log(void *user, int kind, const char *line);

int cmd_info(int argc, char **argv);
int cmd_probe(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_make_tiny(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_make_lora(int argc, char **argv);
int cmd_serve(int argc, char **argv); /* cmd_serve.c, when built with libmicrohttpd (docs/serve.md) */

/* "FILE[:SCALE]" (--lora, --lora-ref, a session's !lora) into *out, the ':' of arg overwritten (a path with a ':'
 * needs the ":SCALE"): a finite scale with |scale| <= 100 [1]. 0, or one line (cli_error, 2) naming flag. */
int cli_parse_lora(char *arg, const char *flag, h3_lora *out);
/* "VIDEO[:AUDIO]" (--shift, !shift): two numbers in (0, 1e6]; AUDIO defaults to the snapshot's (0). 0 or 2. */
int cli_parse_shift(const char *arg, const char *flag, double *video, double *audio);

/* The flags of `h3 generate` (cmd_generate.c), in the public API's terms (include/h3.h). */
typedef struct cli_generate {
    h3_engine_options opt;
    h3_params         par;          /* output_mp4 "h3.mp4" unless -o; "" (-o ''): no MP4 */
    int               seed_given;   /* --seed */
    int               output_given; /* -o */
    int               resident;     /* --resident */
    int               show, zoom;   /* --show (previews wanted), --zoom */
} cli_generate;

/* `h3 generate -d DIR` without -p: the interactive session (cmd_session.c, docs/session.md), on the engine
 * cmd_generate opened for -d (the caller closes it). g holds the start-up flags (they seed the session's state).
 * Returns the exit status. */
int cmd_session(h3_engine *eng, const cli_generate *g);

#endif
