/* Error reporting: functions that can fail return an int (0 = ok, -1 = error) and fill an
 * h3_err the caller owns. The message is one line that names the file/tensor/flag and the rule. */
#ifndef H3_ERROR_H
#define H3_ERROR_H

typedef struct h3_err {
    char msg[1024];
} h3_err;

/* Formats the message into e (if not NULL) and returns -1, so callers can `return h3_fail(...)`. */
int h3_fail(h3_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prefixes an existing message with more context: "ctx: old message". Returns -1. */
int h3_fail_prefix(h3_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
