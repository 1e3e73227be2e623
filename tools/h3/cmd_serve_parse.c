/* `h3 serve`'s parsers of untrusted request bytes (docs/serve.md "Requests"): the job request as JSON or
 * multipart/form-data, base64 inputs, Range, the path routing. Pure functions: no engine, no file system (the
 * fuzz target fuzz/fuzz_serve.c runs them), and a remix's overrides over the original's settings. Syntax and types are checked here with the CLI's flag ranges
 * (cmd_generate.c); the ranges and combinations of the generation itself are h3_engine_check's (cmd_serve_jobs.c). */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmd_serve.h"
#include "core/text.h"

static int failf(char *err, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int failf(char *err, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- base64 ---- */

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+' || c == '-') return 62;
    if (c == '/' || c == '_') return 63;
    return -1;
}

unsigned char *serve_base64_decode(const char *s, size_t n, size_t *out_len) {
    /* a data URL: "data:<type>;base64,<payload>" */
    if (n >= 5 && !memcmp(s, "data:", 5)) {
        const char *comma = memchr(s, ',', n);
        if (!comma || comma - s < 12 || memcmp(comma - 7, ";base64", 7)) return NULL;
        n -= (size_t)(comma + 1 - s), s = comma + 1;
    }
    while (n && s[n - 1] == '=') n--;
    if (n % 4 == 1) return NULL;
    unsigned char *out = malloc(n / 4 * 3 + 3);
    if (!out) return NULL;
    size_t o = 0;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_value((unsigned char)s[i]);
        if (v < 0) return free(out), NULL;
        acc = acc << 6 | (uint32_t)v, bits += 6;
        if (bits >= 8) bits -= 8, out[o++] = (unsigned char)(acc >> bits);
    }
    *out_len = o;
    return out;
}

char *serve_base64_encode(const unsigned char *d, size_t n) {
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1);
    if (!out) return NULL;
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];
        out[o++] = tab[v >> 18], out[o++] = tab[v >> 12 & 63], out[o++] = tab[v >> 6 & 63], out[o++] = tab[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)d[i] << 16 | (i + 1 < n ? (uint32_t)d[i + 1] << 8 : 0);
        out[o++] = tab[v >> 18], out[o++] = tab[v >> 12 & 63];
        out[o++] = i + 1 < n ? tab[v >> 6 & 63] : '=';
        out[o++] = '=';
    }
    out[o] = 0;
    return out;
}

/* ---- Range ---- */

/* digits only, no overflow past 2^62 */
static int parse_pos(const char *s, size_t n, int64_t *v) {
    if (!n || n > 18) return -1;
    int64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        x = x * 10 + (s[i] - '0');
    }
    *v = x;
    return 0;
}

int serve_parse_range(const char *h, int64_t size, int64_t *off, int64_t *len) {
    if (!h) return 0;
    while (*h == ' ') h++;
    if (strncmp(h, "bytes=", 6)) return 0; /* another unit: ignored (RFC 9110 14.2) */
    h += 6;
    size_t n = strlen(h);
    while (n && h[n - 1] == ' ') n--;
    if (memchr(h, ',', n)) return 0;       /* several ranges: the whole file (a 200 is allowed) */
    const char *dash = memchr(h, '-', n);
    if (!dash) return -1;
    size_t a = (size_t)(dash - h), b = n - a - 1;
    int64_t first, last;
    if (a == 0) { /* the last N bytes */
        if (parse_pos(dash + 1, b, &last) || last == 0 || size == 0) return -1;
        if (last > size) last = size;
        *off = size - last, *len = last;
        return 1;
    }
    if (parse_pos(h, a, &first)) return -1;
    if (b == 0) last = size - 1;
    else if (parse_pos(dash + 1, b, &last) || last < first) return -1;
    if (first >= size) return -1;
    if (last >= size) last = size - 1;
    *off = first, *len = last - first + 1;
    return 1;
}

/* ---- routing ---- */

int serve_is_id(const char *s) {
    if (strncmp(s, "video_", 6)) return 0;
    for (int i = 6; i < SERVE_ID_LEN; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return s[SERVE_ID_LEN] == 0;
}

int serve_route(const char *method, const char *url, char id[SERVE_ID_LEN + 1], int *allowed) {
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST"),
        del = !strcmp(method, "DELETE");
    id[0] = 0;
    *allowed = 1;
    struct { const char *path; int route, ok; } fixed[] = {
        {"/", SERVE_R_PAGE, get},          {"/index.html", SERVE_R_PAGE, get}, {"/healthz", SERVE_R_HEALTH, get},
        {"/v1/models", SERVE_R_MODELS, get}, {"/v1/auth", SERVE_R_AUTH, post},  {"/v1/videos", SERVE_R_VIDEOS, get || post},
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (!strcmp(url, fixed[i].path)) return *allowed = fixed[i].ok, fixed[i].route;
    if (strncmp(url, "/v1/videos/", 11)) return SERVE_R_NOT_FOUND;
    const char *rest = url + 11, *slash = strchr(rest, '/');
    size_t n = slash ? (size_t)(slash - rest) : strlen(rest);
    if (n != SERVE_ID_LEN) return SERVE_R_NOT_FOUND;
    char tmp[SERVE_ID_LEN + 1];
    memcpy(tmp, rest, n), tmp[n] = 0;
    if (!serve_is_id(tmp)) return SERVE_R_NOT_FOUND;
    int route;
    if (!slash) route = SERVE_R_VIDEO, *allowed = get || del;
    else if (!strcmp(slash, "/content")) route = SERVE_R_CONTENT, *allowed = get;
    else if (!strcmp(slash, "/events")) route = SERVE_R_EVENTS, *allowed = get;
    else if (!strcmp(slash, "/remix")) route = SERVE_R_REMIX, *allowed = post;
    else return SERVE_R_NOT_FOUND;
    memcpy(id, tmp, sizeof tmp);
    return route;
}

/* ---- the job request ---- */

void serve_spec_free(serve_spec *s) {
    json_decref(s->settings);
    for (int i = 0; i < s->ninputs; i++) free(s->inputs[i].data), free(s->inputs[i].audio);
    memset(s, 0, sizeof *s);
}

/* every numeric field 0 = not given (h3_params' "unset" or, in cmd_serve_jobs.c, the API's default) */
static void spec_reset(serve_spec *s) {
    memset(s, 0, sizeof *s);
    s->ref_image_size = -1;
    s->previews = 1;
    s->settings = json_object();
}

/* one field's value as text (form fields are text; JSON numbers are printed back as the CLI would read them) */
static const char *text_of(json_t *v, char *buf, size_t cap) {
    if (json_is_string(v)) return json_string_value(v);
    if (json_is_integer(v)) return snprintf(buf, cap, "%lld", (long long)json_integer_value(v)), buf;
    return NULL;
}

/* an integer field with the CLI flag's range (cmd_generate.c) */
static int get_int(json_t *v, const char *name, long lo, long hi, int form, int *out, char *err, size_t cap) {
    char buf[32];
    const char *t = json_is_integer(v) || form ? text_of(v, buf, sizeof buf) : NULL;
    long x;
    if (!t || h3_parse_int(t, lo, hi, &x))
        return failf(err, cap, "%s expects an integer in %ld..%ld, got %s%s%s", name, lo, hi, t ? "'" : "",
                     t ? h3_quote(t) : json_is_string(v) ? "a string" : "another type", t ? "'" : "");
    *out = (int)x;
    return 0;
}

static int get_bool(json_t *v, const char *name, int form, int *out, char *err, size_t cap) {
    if (json_is_boolean(v)) return *out = json_is_true(v), 0;
    if (form && json_is_string(v)) {
        const char *t = json_string_value(v);
        if (!strcmp(t, "true") || !strcmp(t, "1") || !strcmp(t, "on")) return *out = 1, 0;
        if (!strcmp(t, "false") || !strcmp(t, "0") || !strcmp(t, "off")) return *out = 0, 0;
    }
    return failf(err, cap, "%s must be true or false", name);
}

/* "WxH" */
static int get_size(json_t *v, const char *name, int *w, int *h, char *err, size_t cap) {
    const char *t = json_string_value(v), *x = t ? strchr(t, 'x') : NULL;
    char a[16], b[16];
    long lw, lh;
    if (!x || x - t >= (long)sizeof a || strlen(x + 1) >= sizeof b)
        return failf(err, cap, "%s must be \"WIDTHxHEIGHT\" (e.g. \"960x544\"), got %s%s%s", name, t ? "'" : "",
                     t ? h3_quote(t) : "another type", t ? "'" : "");
    memcpy(a, t, (size_t)(x - t)), a[x - t] = 0;
    snprintf(b, sizeof b, "%s", x + 1);
    if (h3_parse_int(a, 1, 1 << 20, &lw) || h3_parse_int(b, 1, 1 << 20, &lh))
        return failf(err, cap, "%s must be \"WIDTHxHEIGHT\" with integers in 1..1048576, got '%s'", name, h3_quote(t));
    *w = (int)lw, *h = (int)lh;
    return 0;
}

static int add_input(serve_spec *s, int role, int kind, unsigned char *data, size_t len, unsigned char *audio,
                     size_t audio_len, char *err, size_t cap) {
    if (s->ninputs == SERVE_MAX_INPUTS) {
        free(data), free(audio);
        return failf(err, cap, "references: at most %d references in total", H3_MAX_REFERENCES);
    }
    int refs = 0;
    for (int i = 0; i < s->ninputs; i++) refs += s->inputs[i].role == SERVE_IN_REF;
    if (role == SERVE_IN_REF && refs == H3_MAX_REFERENCES) {
        free(data), free(audio);
        return failf(err, cap, "references: at most %d references in total", H3_MAX_REFERENCES);
    }
    for (int i = 0; i < s->ninputs && role != SERVE_IN_REF; i++)
        if (s->inputs[i].role == role) {
            free(data), free(audio);
            return failf(err, cap, "%s given twice", role == SERVE_IN_FIRST ? "first_frame" : "last_frame");
        }
    s->inputs[s->ninputs++] = (serve_input){role, kind, data, len, audio, audio_len};
    return 0;
}

static int decode_b64(json_t *v, const char *name, const serve_limits *lim, unsigned char **out, size_t *len,
                      int *status, char *err, size_t cap) {
    if (!json_is_string(v)) return failf(err, cap, "%s must be a base64 string or a data URL", name);
    size_t n = json_string_length(v);
    if (lim && n / 4 * 3 > lim->max_upload + 3) {
        *status = 413;
        return failf(err, cap, "%s: the upload is larger than the limit of %zu bytes", name, lim->max_upload);
    }
    if (!(*out = serve_base64_decode(json_string_value(v), n, len)))
        return failf(err, cap, "%s: not valid base64 (RFC 4648) or a base64 data URL", name);
    if (*len == 0) return free(*out), *out = NULL, failf(err, cap, "%s: the upload is empty", name);
    if (lim && *len > lim->max_upload) {
        free(*out), *out = NULL, *status = 413;
        return failf(err, cap, "%s: the upload is larger than the limit of %zu bytes", name, lim->max_upload);
    }
    return 0;
}

static const char *const kind_names[] = {"image", "silent_video", "video", "video_audio", "audio"};

static int kind_of(const char *t) {
    for (int k = 0; k < 5; k++)
        if (t && !strcmp(t, kind_names[k])) return k;
    return -1;
}

static int parse_references(json_t *arr, const serve_limits *lim, serve_spec *s, int *status, char *err, size_t cap) {
    if (!json_is_array(arr)) return failf(err, cap, "references must be an array of {kind, data[, audio_data]}");
    size_t i;
    json_t *r;
    json_array_foreach(arr, i, r) {
        if (!json_is_object(r)) return failf(err, cap, "references[%zu] must be an object {kind, data[, audio_data]}", i);
        const char *key;
        json_t *v;
        json_object_foreach(r, key, v)
            if (strcmp(key, "kind") && strcmp(key, "data") && strcmp(key, "audio_data"))
                return failf(err, cap, "references[%zu]: unknown field '%s' (kind, data, audio_data)", i, h3_quote(key));
        int k = kind_of(json_string_value(json_object_get(r, "kind")));
        if (k < 0)
            return failf(err, cap, "references[%zu].kind must be image, silent_video, video, video_audio or audio", i);
        char name[48];
        snprintf(name, sizeof name, "references[%zu].data", i);
        unsigned char *d = NULL, *a = NULL;
        size_t dl = 0, al = 0;
        if (decode_b64(json_object_get(r, "data"), name, lim, &d, &dl, status, err, cap)) return -1;
        json_t *av = json_object_get(r, "audio_data");
        if ((k == H3_REFERENCE_VIDEO_AUDIO) != (av != NULL)) {
            free(d);
            return failf(err, cap, "references[%zu].audio_data: %s", i,
                         av ? "only with kind video_audio" : "kind video_audio needs the audio's bytes too");
        }
        snprintf(name, sizeof name, "references[%zu].audio_data", i);
        if (av && decode_b64(av, name, lim, &a, &al, status, err, cap)) return free(d), -1;
        if (add_input(s, SERVE_IN_REF, k, d, dl, a, al, err, cap)) return -1;
    }
    return 0;
}

/* The request object (JSON, or the text fields of a form) -> *s; the settings keep the accepted fields. */
static int spec_from_object(json_t *obj, int form, const serve_limits *lim, serve_spec *s, int *status, char *err,
                            size_t cap) {
    if (!json_is_object(obj)) return failf(err, cap, "the request body must be a JSON object");
    static const char *const known[] = {"prompt", "model", "size", "width", "height", "seconds", "frames", "steps",
        "reuse", "layers", "core_reuse", "seed", "preset", "token_reduction", "reference_rope", "render_size",
        "ref_image_size", "previews", "first_frame", "last_frame", "references", NULL};
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int ok = 0;
        for (int i = 0; known[i]; i++) ok |= !strcmp(key, known[i]);
        if (!ok) return failf(err, cap, "unknown field '%s' (docs/serve.md lists the fields)", h3_quote(key));
    }
    json_t *set = s->settings;
    v = json_object_get(obj, "prompt");
    if (!json_is_string(v) || !json_string_length(v)) return failf(err, cap, "prompt is required (a non-empty string)");
    if (strlen(json_string_value(v)) != json_string_length(v)) return failf(err, cap, "prompt must not contain NUL");
    json_object_set_new(set, "prompt", json_string(json_string_value(v)));
    s->prompt = json_string_value(json_object_get(set, "prompt"));
    if ((v = json_object_get(obj, "model")) && (!json_is_string(v) || strcmp(json_string_value(v), "h3")))
        return failf(err, cap, "model must be \"h3\" (the only model of this server; GET /v1/models)");
    /* the preset first (docs/model/features.md 5.8's presets in the CLI's terms), the explicit fields over it */
    if ((v = json_object_get(obj, "preset"))) {
        const char *t = json_string_value(v);
        if (t && !strcmp(t, "quality")) ;
        else if (t && !strcmp(t, "fast")) s->layers = 45, s->core_reuse = 4;
        else if (t && !strcmp(t, "preview")) s->layers = 40, s->core_reuse = 6;
        else return failf(err, cap, "preset must be quality, fast or preview, got %s%s%s", t ? "'" : "", t ? h3_quote(t) : "another type", t ? "'" : "");
        json_object_set_new(set, "preset", json_string(t));
    }
    if ((v = json_object_get(obj, "size"))) {
        if (json_object_get(obj, "width") || json_object_get(obj, "height"))
            return failf(err, cap, "size and width/height: give one of them");
        if (get_size(v, "size", &s->width, &s->height, err, cap)) return -1;
    }
    struct { const char *name; long lo, hi; int *out; } ints[] = {
        {"width", 1, 1 << 20, &s->width},  {"height", 1, 1 << 20, &s->height}, {"frames", 1, 1 << 20, &s->frames},
        {"steps", 1, 1000, &s->steps},     {"reuse", 1, 3, &s->reuse},          {"layers", 35, 50, &s->layers},
        {"core_reuse", 1, 6, &s->core_reuse},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if ((v = json_object_get(obj, ints[i].name))) {
            if (get_int(v, ints[i].name, ints[i].lo, ints[i].hi, form, ints[i].out, err, cap)) return -1;
            json_object_set_new(set, ints[i].name, json_integer(*ints[i].out));
        }
    if (json_object_get(obj, "size")) json_object_set_new(set, "size", json_string(json_string_value(json_object_get(obj, "size"))));
    if ((v = json_object_get(obj, "seconds"))) {
        const char *t = json_is_string(v) ? json_string_value(v) : NULL;
        if (json_is_number(v)) {
            double d = json_number_value(v);
            if (!isfinite(d) || d <= 0 || d > 1e6) return failf(err, cap, "seconds must be a finite number > 0");
            s->seconds = d;
        } else if (!t || h3_parse_decimal(t, &s->seconds) || s->seconds <= 0 || s->seconds > 1e6) {
            return failf(err, cap, "seconds must be a finite number > 0 in plain decimal (e.g. 10 or 14.375), got %s%s%s",
                         t ? "'" : "", t ? h3_quote(t) : "another type", t ? "'" : "");
        }
        if (json_object_get(obj, "frames")) return failf(err, cap, "seconds and frames: give one of them");
        json_object_set_new(set, "seconds", json_real(s->seconds));
    }
    if ((v = json_object_get(obj, "seed"))) {
        char buf[32];
        const char *t = text_of(v, buf, sizeof buf);
        if (!t || h3_parse_u64(t, &s->seed))
            return failf(err, cap, "seed expects an unsigned 64-bit integer (a number or a decimal string), got %s%s%s",
                         t ? "'" : "", t ? h3_quote(t) : "another type", t ? "'" : "");
        s->seed_given = 1;
        /* above 2^53 kept as a string (JavaScript's integers are doubles) */
        json_object_set_new(set, "seed", s->seed < (1ull << 53) ? json_integer((json_int_t)s->seed)
                                                               : json_sprintf("%llu", (unsigned long long)s->seed));
    }
    struct { const char *name; int *out; } bools[] = {
        {"token_reduction", &s->token_reduction}, {"reference_rope", &s->reference_rope}, {"previews", &s->previews}};
    for (size_t i = 0; i < sizeof bools / sizeof bools[0]; i++)
        if ((v = json_object_get(obj, bools[i].name))) {
            if (get_bool(v, bools[i].name, form, bools[i].out, err, cap)) return -1;
            json_object_set_new(set, bools[i].name, json_boolean(*bools[i].out));
        }
    if ((v = json_object_get(obj, "render_size"))) {
        if (get_size(v, "render_size", &s->render_width, &s->render_height, err, cap)) return -1;
        json_object_set_new(set, "render_size", json_string(json_string_value(v)));
    }
    if ((v = json_object_get(obj, "ref_image_size"))) {
        const char *t = json_string_value(v);
        if (t && !strcmp(t, "reference")) s->ref_image_size = H3_REF_SIZE_REFERENCE;
        else if (t && !strcmp(t, "match")) s->ref_image_size = H3_REF_SIZE_MATCH;
        else if (t && !strcmp(t, "max")) s->ref_image_size = H3_REF_SIZE_MAX;
        else return failf(err, cap, "ref_image_size must be reference, match or max");
        json_object_set_new(set, "ref_image_size", json_string(t));
    }
    const char *frames_names[] = {"first_frame", "last_frame"};
    for (int r = 0; r < 2; r++)
        if ((v = json_object_get(obj, frames_names[r]))) {
            unsigned char *d;
            size_t n;
            if (decode_b64(v, frames_names[r], lim, &d, &n, status, err, cap)) return -1;
            if (add_input(s, r, 0, d, n, NULL, 0, err, cap)) return -1;
        }
    if ((v = json_object_get(obj, "references")) && parse_references(v, lim, s, status, err, cap)) return -1;
    return 0;
}

/* ---- multipart/form-data (RFC 7578) ---- */

static const void *find_bytes(const void *hay, size_t n, const void *needle, size_t m) {
    if (m == 0 || n < m) return NULL;
    const char *h = hay, *end = h + n - m;
    for (const char *p = h; p <= end; p++) {
        p = memchr(p, *(const char *)needle, (size_t)(end - p) + 1);
        if (!p) return NULL;
        if (!memcmp(p, needle, m)) return p;
    }
    return NULL;
}

/* a parameter of a header value: name="value" or name=value (no escapes), into out */
static int header_param(const char *h, size_t n, const char *name, char *out, size_t cap) {
    size_t k = strlen(name);
    for (size_t i = 0; i + k < n; i++) {
        if ((i == 0 || h[i - 1] == ';' || h[i - 1] == ' ') && !strncasecmp(h + i, name, k) && h[i + k] == '=') {
            const char *v = h + i + k + 1, *end = h + n;
            size_t len = 0;
            if (v < end && *v == '"') {
                v++;
                while (v + len < end && v[len] != '"') len++;
                if (v + len == end) return -1;
            } else {
                while (v + len < end && v[len] != ';' && v[len] != ' ') len++;
            }
            if (len == 0 || len >= cap) return -1;
            memcpy(out, v, len), out[len] = 0;
            return 0;
        }
    }
    return 1;
}

/* the form's file fields: a part with one of these names is an upload */
static int upload_role(const char *name, int *role, int *kind) {
    if (!strcmp(name, "first_frame")) return *role = SERVE_IN_FIRST, *kind = 0, 1;
    if (!strcmp(name, "last_frame")) return *role = SERVE_IN_LAST, *kind = 0, 1;
    static const char *const refs[] = {"reference_image", "reference_silent_video", "reference_video", NULL,
                                       "reference_audio"};
    for (int k = 0; k < 5; k++)
        if (refs[k] && !strcmp(name, refs[k])) return *role = SERVE_IN_REF, *kind = k, 1;
    return 0;
}

static int parse_multipart(const char *ctype, const char *body, size_t len, const serve_limits *lim, json_t *fields,
                           serve_spec *s, int *status, char *err, size_t cap) {
    char boundary[80], delim[90];
    if (header_param(ctype, strlen(ctype), "boundary", boundary, sizeof boundary))
        return failf(err, cap, "multipart/form-data without a boundary (of 1..70 characters)");
    int dn = snprintf(delim, sizeof delim, "--%s", boundary);
    const char *p = body, *end = body + len;
    /* the first delimiter, then parts "\r\n" headers "\r\n\r\n" content "\r\n--boundary" */
    if ((size_t)(end - p) < (size_t)dn || memcmp(p, delim, (size_t)dn))
        return failf(err, cap, "multipart body does not start with its boundary");
    p += dn;
    for (int part = 0;; part++) {
        if (end - p >= 2 && !memcmp(p, "--", 2)) return 0; /* the closing delimiter */
        if (end - p < 2 || memcmp(p, "\r\n", 2)) return failf(err, cap, "multipart part %d: a CRLF must follow the boundary", part);
        p += 2;
        const char *hend = find_bytes(p, (size_t)(end - p), "\r\n\r\n", 4);
        if (!hend) return failf(err, cap, "multipart part %d: headers without an end", part);
        char name[64] = "";
        int has_name = 0;
        for (const char *h = p; h < hend + 2;) {
            const char *eol = find_bytes(h, (size_t)(hend + 2 - h), "\r\n", 2);
            size_t hl = (size_t)(eol - h);
            if (hl > 20 && !strncasecmp(h, "Content-Disposition:", 20)) {
                const char *v = h + 20;
                size_t vl = hl - 20;
                while (vl && *v == ' ') v++, vl--;
                if (vl < 9 || strncasecmp(v, "form-data", 9)) return failf(err, cap, "multipart part %d: not form-data", part);
                if (header_param(v, vl, "name", name, sizeof name))
                    return failf(err, cap, "multipart part %d: a field name of 1..63 characters is required", part);
                has_name = 1;
            }
            h = eol + 2;
        }
        if (!has_name) return failf(err, cap, "multipart part %d: no Content-Disposition form-data name", part);
        const char *content = hend + 4;
        char sep[96];
        int sn = snprintf(sep, sizeof sep, "\r\n%s", delim);
        const char *cend = find_bytes(content, (size_t)(end - content), sep, (size_t)sn);
        if (!cend) return failf(err, cap, "multipart part %d ('%s'): no closing boundary", part, h3_quote(name));
        size_t cl = (size_t)(cend - content);
        int role, kind;
        if (upload_role(name, &role, &kind)) {
            if (cl == 0) return failf(err, cap, "%s: the upload is empty", name);
            if (cl > lim->max_upload) {
                *status = 413;
                return failf(err, cap, "%s: the upload is larger than the limit of %zu bytes", name, lim->max_upload);
            }
            unsigned char *d = malloc(cl);
            if (!d) return failf(err, cap, "out of memory");
            memcpy(d, content, cl);
            if (add_input(s, role, kind, d, cl, NULL, 0, err, cap)) return -1;
        } else {
            if (json_object_get(fields, name)) return failf(err, cap, "field '%s' given twice", h3_quote(name));
            if (memchr(content, 0, cl)) return failf(err, cap, "field '%s' must not contain NUL", h3_quote(name));
            json_t *t = json_stringn(content, cl);
            if (!t) return failf(err, cap, "field '%s' is not UTF-8", h3_quote(name));
            json_object_set_new(fields, name, t);
        }
        p = cend + sn;
    }
}

int serve_spec_parse(const char *ctype, const char *body, size_t len, const serve_limits *lim, serve_spec *s,
                     int *status, char *err, size_t cap) {
    spec_reset(s);
    *status = 400;
    int rc;
    if (ctype && !strncasecmp(ctype, "multipart/form-data", 19)) {
        json_t *fields = json_object();
        rc = parse_multipart(ctype, body, len, lim, fields, s, status, err, cap);
        if (!rc) rc = spec_from_object(fields, 1, lim, s, status, err, cap);
        if (!rc && json_object_get(fields, "references"))
            rc = failf(err, cap, "references: in a form, upload each as a reference_image / reference_audio / ... part");
        json_decref(fields);
    } else if (ctype && *ctype && strncasecmp(ctype, "application/json", 16)) {
        rc = failf(err, cap, "Content-Type must be application/json or multipart/form-data");
        *status = 415;
    } else {
        json_error_t je;
        json_t *obj = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
        if (!obj) rc = failf(err, cap, "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
        else rc = spec_from_object(obj, 0, lim, s, status, err, cap);
        json_decref(obj);
    }
    if (rc) {
        json_decref(s->settings);
        for (int i = 0; i < s->ninputs; i++) free(s->inputs[i].data), free(s->inputs[i].audio);
        s->settings = NULL, s->ninputs = 0;
    }
    return rc;
}

int serve_spec_from_settings(json_t *settings, serve_spec *s, char *err, size_t cap) {
    int status;
    spec_reset(s);
    if (spec_from_object(settings, 0, NULL, s, &status, err, cap)) return serve_spec_free(s), -1;
    return 0;
}

/* ---- remix (docs/serve.md "Remix") ---- */

int serve_remix_parse(const char *ctype, const char *body, size_t len, json_t *original, serve_spec *s, int *status,
                      char *err, size_t cap) {
    memset(s, 0, sizeof *s);
    *status = 400;
    if (ctype && *ctype && strncasecmp(ctype, "application/json", 16)) {
        *status = 415;
        return failf(err, cap, "Content-Type must be application/json (a remix reuses the original's uploads)");
    }
    if (!json_is_object(original)) return failf(err, cap, "the original video has no settings");
    size_t lead = 0;
    while (lead < len && isspace((unsigned char)body[lead])) lead++;
    json_t *over = NULL;
    if (lead == len) { /* no body: the original's settings as they are */
        over = json_object();
    } else {
        json_error_t je;
        if (!(over = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je)))
            return failf(err, cap, "the body is not valid JSON: %s (line %d, column %d)", je.text, je.line, je.column);
    }
    if (!json_is_object(over)) return json_decref(over), failf(err, cap, "the request body must be a JSON object");
    static const char *const uploads[] = {"first_frame", "last_frame", "references"};
    for (int i = 0; i < 3; i++)
        if (json_object_get(over, uploads[i]))
            return json_decref(over), failf(err, cap, "%s: a remix reuses the original video's uploads and takes none "
                                                      "(POST /v1/videos submits new ones)", uploads[i]);
    json_t *merged = json_deep_copy(original);
    if (!merged) return json_decref(over), failf(err, cap, "out of memory");
    /* one way of giving the canvas or the length replaces the other */
    int has_size = json_object_get(over, "size") != NULL,
        has_wh = json_object_get(over, "width") || json_object_get(over, "height");
    if (has_size && !has_wh) {
        json_object_del(merged, "width"), json_object_del(merged, "height");
    } else if (has_wh && !has_size && json_object_get(merged, "size")) {
        int w, h;
        char tmp[SERVE_MSG_CAP];
        if (!get_size(json_object_get(merged, "size"), "size", &w, &h, tmp, sizeof tmp))
            json_object_set_new(merged, "width", json_integer(w)), json_object_set_new(merged, "height", json_integer(h));
        json_object_del(merged, "size");
    }
    if (json_object_get(over, "seconds") && !json_object_get(over, "frames")) json_object_del(merged, "frames");
    if (json_object_get(over, "frames") && !json_object_get(over, "seconds")) json_object_del(merged, "seconds");
    json_object_update(merged, over);
    json_decref(over);
    int rc = serve_spec_from_settings(merged, s, err, cap); /* the request's rules and messages */
    json_decref(merged);
    return rc;
}
