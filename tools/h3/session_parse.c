/* See session_parse.h. */
#include "session_parse.h"

#include <math.h>
#include <string.h>

#include "core/text.h"

static int blank(char c) { return c == ' ' || c == '\t'; }

int session_line_parse(char *line, size_t len, session_line *out, h3_err *e) {
    memset(out, 0, sizeof *out);
    const char *nul = memchr(line, 0, len);
    if (nul) return h3_fail(e, "the line holds a NUL byte (at byte %zu): refused", (size_t)(nul - line) + 1);
    size_t lead = strspn(line, " \t");
    if (!line[lead]) return out->kind = SESSION_BLANK, 0;
    if (line[0] != '!') {
        out->kind = SESSION_PROMPT;
        out->text = line;
        return 0;
    }
    char *name = line + 1, *arg = name + strcspn(name, " \t");
    if (*arg) *arg++ = 0;
    arg += strspn(arg, " \t");
    for (size_t n = strlen(arg); n && blank(arg[n - 1]); n--) arg[n - 1] = 0;
    out->kind = SESSION_COMMAND;
    out->name = name;
    out->arg = *arg ? arg : NULL;
    return 0;
}

int session_parse_int(const char *cmd, const char *arg, long lo, long hi, int *out, h3_err *e) {
    long v;
    if (!arg || h3_parse_int(arg, lo, hi, &v))
        return h3_fail(e, "!%s expects an integer in %ld..%ld, got '%s'", cmd, lo, hi, h3_quote(arg ? arg : ""));
    *out = (int)v;
    return 0;
}

int session_parse_seed(const char *arg, int *fixed, uint64_t *seed, h3_err *e) {
    if (arg && (!strcmp(arg, "random") || !strcmp(arg, "-1"))) return *fixed = 0, 0;
    uint64_t v;
    if (!arg || h3_parse_u64(arg, &v))
        return h3_fail(e, "!seed expects an unsigned 64-bit integer, 'random' or -1, got '%s'",
                       h3_quote(arg ? arg : ""));
    *seed = v;
    *fixed = 1;
    return 0;
}

int session_parse_wxh(const char *cmd, const char *arg, int *w, int *h, h3_err *e) {
    char a[32], b[32];
    const char *x = arg ? strpbrk(arg, "xX") : NULL;
    long vw, vh;
    size_t na = x ? (size_t)(x - arg) : 0;
    int ok = x && na < sizeof a && strlen(x + 1) < sizeof b;
    if (ok) {
        memcpy(a, arg, na), a[na] = 0;
        strcpy(b, x + 1);
        ok = !h3_parse_int(a, 1, 1 << 20, &vw) && !h3_parse_int(b, 1, 1 << 20, &vh);
    }
    if (!ok) return h3_fail(e, "!%s expects WxH, two decimal integers 1..%d (e.g. 864x480), got '%s'", cmd, 1 << 20,
                            h3_quote(arg ? arg : ""));
    *w = (int)vw, *h = (int)vh;
    return 0;
}

int session_parse_seconds(const char *arg, double *out, h3_err *e) {
    double v;
    if (!arg || h3_parse_decimal(arg, &v) || !isfinite(v) || v <= 0)
        return h3_fail(e, "!seconds expects a decimal number > 0 (e.g. 10 or 14.375), got '%s'", h3_quote(arg ? arg : ""));
    if (nearbyint(v * 24) < 1) return h3_fail(e, "!seconds %s gives no frame at 24 fps", h3_quote(arg));
    *out = v;
    return 0;
}

int session_parse_toggle(const char *cmd, const char *arg, int *on, h3_err *e) {
    if (arg && !strcmp(arg, "on")) *on = 1;
    else if (arg && !strcmp(arg, "off")) *on = 0;
    else return h3_fail(e, "!%s expects on or off, got '%s'", cmd, h3_quote(arg ? arg : ""));
    return 0;
}
