/* The strict number syntax of every flag and session command, and the quoting of user input in error lines
 * (docs/robustness.md, "Flags, numbers, results and messages").
 *
 * Numbers are plain decimal: one or more ASCII digits, nothing else (no sign, no leading or trailing space, no
 * hex, no exponent); h3_parse_decimal also takes one '.' with digits on at least one side. */
#ifndef H3_TEXT_H
#define H3_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* s as a decimal integer in lo..hi (lo >= 0). 0, or -1 when s breaks the syntax or the range. */
int h3_parse_int(const char *s, long lo, long hi, long *out);
/* s as an unsigned 64-bit decimal integer (0..18446744073709551615). 0 or -1. */
int h3_parse_u64(const char *s, uint64_t *out);
/* s as a non-negative decimal number: digits, optionally one '.' ("14.375", "5", "5.", ".5"). 0 or -1. */
int h3_parse_decimal(const char *s, double *out);

/* At most H3_QUOTE_MAX bytes of s for an error line: bytes outside printable ASCII written as \xNN, and
 * "... (N bytes)" appended when s is longer. Returns one of 4 rotating thread-local buffers, so up to 4 quotes
 * may appear in one printf. NULL quotes as "(null)". */
#define H3_QUOTE_MAX 160
const char *h3_quote(const char *s);

#endif
