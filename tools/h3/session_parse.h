/* The interactive session's line syntax (cmd_session.c, docs/session.md), apart from the engine so that
 * fuzz/fuzz_session.c links it alone: a line is blank, a prompt, or '!' NAME [ARG]; the values of the commands
 * use the strict number syntax of src/core/text.h. Nothing here prints: errors are one line in e. */
#ifndef H3_SESSION_PARSE_H
#define H3_SESSION_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

typedef enum session_line_kind { SESSION_BLANK = 0, SESSION_PROMPT, SESSION_COMMAND } session_line_kind;

typedef struct session_line {
    session_line_kind kind;
    const char       *name; /* SESSION_COMMAND: the word after '!' */
    const char       *arg;  /* SESSION_COMMAND: the rest without its surrounding blanks, or NULL */
    const char       *text; /* SESSION_PROMPT: the line as typed */
} session_line;

/* Splits line (len bytes as read, the line end removed; the text is edited in place). A line holding a NUL byte
 * is refused (-1 with e filled): it would silently cut the prompt or the command. */
int session_line_parse(char *line, size_t len, session_line *out, h3_err *e);

/* !CMD values. Each returns 0, or -1 with one line in e naming !cmd, the rule and (quoted, truncated) the value. */
int session_parse_int(const char *cmd, const char *arg, long lo, long hi, int *out, h3_err *e);
/* !seed: N (unsigned 64-bit) -> *fixed = 1; "random" or "-1" -> *fixed = 0 */
int session_parse_seed(const char *arg, int *fixed, uint64_t *seed, h3_err *e);
/* !size / !render-size: WxH, both 1..2^20 (the one-shot flags' parse range; the rules are checked at generation) */
int session_parse_wxh(const char *cmd, const char *arg, int *w, int *h, h3_err *e);
/* !seconds: a decimal number > 0 that gives at least one frame at 24 fps */
int session_parse_seconds(const char *arg, double *out, h3_err *e);
/* on / off */
int session_parse_toggle(const char *cmd, const char *arg, int *on, h3_err *e);

#endif
