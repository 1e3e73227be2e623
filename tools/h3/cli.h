/* Shared pieces of the `h3` command line. */
#ifndef H3_CLI_H
#define H3_CLI_H

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

/* `h3 generate -d DIR` without -p: the interactive session (cmd_session.c, docs/session.md).
 * r holds the start-up flags (they seed the session's state); seed_given / output_given: --seed /
 * -o were on the command line; zoom: --zoom (!show's previews). Returns the exit status. */
struct h3_request;
int cmd_session(const struct h3_request *r, int seed_given, int output_given, int zoom);

#endif
