/* libFuzzer target for the interactive session's line parser (tools/h3/session_parse.c) and the strict number
 * syntax (src/core/text.c).
 *
 * The input is one session line as read (any bytes, NULs included). Oracles: a line with a NUL byte is refused; a
 * command's name holds no blank and its argument has no surrounding blanks; every value parser either fails with a
 * message or returns a value inside its stated range that the argument's digits spell exactly; h3_quote's output
 * stays within its bound and is printable ASCII.
 *
 *   make fuzz && build-fuzz/fuzz_session -max_total_time=600 fuzz/corpus/session */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/text.h"
#include "../tools/h3/session_parse.h"

static int all_digits(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9') return 0;
    return 1;
}

/* the decimal value of a digit string, as u64, when it fits (no leading-zero trouble: zeros add nothing) */
static int spelled(const char *s, uint64_t v) {
    char buf[32];
    while (s[0] == '0' && s[1]) s++;
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    return !strcmp(buf, s);
}

static void check_quote(const char *s) {
    const char *q = h3_quote(s);
    size_t n = strlen(q);
    if (n > H3_QUOTE_MAX * 4 + 40) abort();
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)q[i] < 0x20 || (unsigned char)q[i] >= 0x7f) abort();
}

static void values(const char *name, const char *arg) {
    h3_err e;
    int i, w, h, on, fixed = 0;
    uint64_t seed = 0;
    double d;
    if (!session_parse_int(name, arg, 1, 1000, &i, &e) && (i < 1 || i > 1000 || !all_digits(arg) || !spelled(arg, (uint64_t)i)))
        abort();
    if (!session_parse_seed(arg, &fixed, &seed, &e) && fixed && (!all_digits(arg) || !spelled(arg, seed))) abort();
    if (!session_parse_wxh(name, arg, &w, &h, &e)) {
        if (w < 1 || h < 1 || w > 1 << 20 || h > 1 << 20) abort();
        char buf[64];
        snprintf(buf, sizeof buf, "%dx%d", w, h);
        const char *x = strpbrk(arg, "xX");
        if (!x || !all_digits(x + 1)) abort();
    }
    if (!session_parse_seconds(arg, &d, &e) && (!isfinite(d) || d <= 0 || nearbyint(d * 24) < 1)) abort();
    if (!session_parse_toggle(name, arg, &on, &e) && strcmp(arg, on ? "on" : "off")) abort();
    long v;
    if (!h3_parse_int(arg, 0, 345, &v) && (v < 0 || v > 345)) abort();
    if (!h3_parse_decimal(arg, &d) && (!(d >= 0) || strpbrk(arg, "eE+- xXinfINF"))) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *line = malloc(size + 1);
    if (!line) return 0;
    memcpy(line, data, size);
    line[size] = 0;
    check_quote(line);
    session_line sl;
    h3_err e;
    int nul = memchr(data, 0, size) != NULL;
    int rc = session_line_parse(line, size, &sl, &e);
    if (nul != (rc != 0)) abort();
    if (!rc && sl.kind == SESSION_COMMAND) {
        if (strpbrk(sl.name, " \t")) abort();
        if (sl.arg) {
            size_t n = strlen(sl.arg);
            if (!n || sl.arg[0] == ' ' || sl.arg[0] == '\t' || sl.arg[n - 1] == ' ' || sl.arg[n - 1] == '\t') abort();
            values(sl.name, sl.arg);
            check_quote(sl.arg);
        }
        check_quote(sl.name);
    } else if (!rc && sl.kind == SESSION_PROMPT) {
        if (sl.text[0] == '!' || !sl.text[strspn(sl.text, " \t")]) abort();
    }
    free(line);
    return 0;
}
