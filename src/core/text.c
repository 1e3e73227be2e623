#include "text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_digit(char c) { return c >= '0' && c <= '9'; }

int h3_parse_u64(const char *s, uint64_t *out) {
    if (!s || !is_digit(*s)) return -1;
    uint64_t v = 0;
    for (; *s; s++) {
        if (!is_digit(*s)) return -1;
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int h3_parse_int(const char *s, long lo, long hi, long *out) {
    uint64_t v;
    if (h3_parse_u64(s, &v) || v > (uint64_t)hi || (long)v < lo) return -1;
    *out = (long)v;
    return 0;
}

int h3_parse_decimal(const char *s, double *out) {
    if (!s) return -1;
    size_t digits = 0, dots = 0;
    for (const char *c = s; *c; c++) {
        if (is_digit(*c)) digits++;
        else if (*c == '.') dots++;
        else return -1;
    }
    if (!digits || dots > 1) return -1;
    /* the syntax is checked: strtod reads exactly this (the CLI keeps the C locale's '.') */
    char *end;
    double v = strtod(s, &end);
    if (*end) return -1;
    *out = v;
    return 0;
}

const char *h3_quote(const char *s) {
    static _Thread_local char buf[4][H3_QUOTE_MAX * 4 + 48];
    static _Thread_local int next;
    char *b = buf[next];
    next = (next + 1) % 4;
    if (!s) return "(null)";
    size_t n = strlen(s), o = 0, i = 0;
    for (; i < n && i < H3_QUOTE_MAX; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f) b[o++] = (char)c;
        else o += (size_t)snprintf(b + o, 5, "\\x%02x", c);
    }
    if (i < n) snprintf(b + o, sizeof buf[0] - o, "... (%zu bytes)", n);
    else b[o] = 0;
    return b;
}
