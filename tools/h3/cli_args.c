/* The value parsers that `h3 generate`'s flags and the session's commands share (cli.h): one rule, one message,
 * whether the value came from --lora / --shift or from !lora / !shift. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/text.h"

int cli_parse_lora(char *arg, const char *flag, h3_lora *out) {
    out->path = arg, out->scale = 1.0, out->ref = 0;
    char *colon = strrchr(arg, ':');
    if (colon && !strchr(colon, '/')) {
        char *end;
        errno = 0;
        double s = strtod(colon + 1, &end);
        if (!colon[1] || *end || !isfinite(s) || fabs(s) > 100)
            return cli_error("%s %s: the scale after ':' must be a finite number in [-100, 100]", flag, h3_quote(arg));
        *colon = 0;
        out->scale = s;
    }
    if (!arg[0]) return cli_error("%s expects FILE[:SCALE] (docs/lora.md)", flag);
    return 0;
}

int cli_parse_shift(const char *arg, const char *flag, double *video, double *audio) {
    char *end;
    double v = strtod(arg, &end), a = 0;
    int ok = end != arg && v > 0 && v <= 1e6;
    if (ok && *end == ':') {
        const char *s = end + 1;
        a = strtod(s, &end);
        ok = end != s && a > 0 && a <= 1e6;
    }
    if (!ok || *end)
        return cli_error("%s expects VIDEO[:AUDIO], numbers in (0, 1e6] (e.g. 6:3), got '%s'", flag, h3_quote(arg));
    *video = v, *audio = a;
    return 0;
}
