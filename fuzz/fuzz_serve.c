/* libFuzzer target for `h3 serve`'s parsers of request bytes (tools/h3/cmd_serve_parse.c, docs/serve.md): the job
 * request as JSON and as multipart/form-data, a remix's overrides, base64, Range and the path routing.
 *
 * The input's first byte picks the Content-Type (JSON, multipart with the boundary "b", or none); the rest is the
 * body; the same bytes also go to serve_remix_parse (as the overrides of a fixed original job, and of the fuzzed
 * request's own settings when it was accepted), serve_parse_range (as a Range header against a size from the first
 * bytes), serve_route (as a path, with GET, DELETE or POST) and serve_base64_decode. Oracles: a refused request has
 * a non-empty one-line message and no settings; an accepted one has a prompt, settings that parse again to the same
 * values (the restart path), inputs within the upload limit and at most H3_MAX_REFERENCES references; an accepted
 * remix has no inputs and keeps the original's seed and steps unless the overrides name them, a refused one answers
 * 400 or 415; a range lies inside the file; a route with an id has exactly the id syntax; base64 round-trips
 * through the encoder.
 *
 *   make fuzz && build-fuzz/fuzz_serve -max_total_time=600 fuzz/corpus/serve */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/h3/cmd_serve.h"

/* the overrides body over original; aborts on a broken oracle */
static void check_remix(const char *ct, const char *body, size_t n, json_t *original) {
    serve_spec r;
    int status = 0;
    char err[SERVE_MSG_CAP];
    err[0] = 0;
    if (serve_remix_parse(ct, body, n, original, &r, &status, err, sizeof err)) {
        if (!err[0] || strchr(err, '\n') || r.settings || r.ninputs) abort();
        if (status != 400 && status != 415) abort();
        return;
    }
    if (!r.prompt || !r.prompt[0] || !r.settings || r.ninputs) abort();
    /* a field the overrides do not name keeps the original's value (their JSON parsed again to know) */
    json_t *over = json_loadb(body, n, JSON_REJECT_DUPLICATES, NULL);
    static const char *const kept[] = {"seed", "steps", "prompt"};
    for (int i = 0; i < 3; i++)
        if (!json_object_get(over, kept[i])) {
            json_t *a = json_object_get(original, kept[i]), *b = json_object_get(r.settings, kept[i]);
            if ((a || b) && !json_equal(a, b)) abort();
        }
    json_decref(over);
    serve_spec t;
    if (serve_spec_from_settings(r.settings, &t, err, sizeof err)) abort();
    if (t.seed != r.seed || t.steps != r.steps || t.width != r.width || strcmp(t.prompt, r.prompt)) abort();
    serve_spec_free(&t);
    serve_spec_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    static const char *const types[] = {"application/json", "multipart/form-data; boundary=b",
                                        "multipart/form-data; boundary=\"b\"", NULL};
    const char *ct = types[data[0] % 4];
    const char *body = (const char *)data + 1;
    size_t n = size - 1;
    serve_limits lim = {1 << 20, 4096};
    serve_spec s;
    int status = 0;
    char err[SERVE_MSG_CAP];
    err[0] = 0;
    if (serve_spec_parse(ct, body, n, &lim, &s, &status, err, sizeof err)) {
        if (!err[0] || strchr(err, '\n') || s.settings || s.ninputs) abort();
        if (status != 400 && status != 413 && status != 415) abort();
    } else {
        if (!s.prompt || !s.prompt[0] || !s.settings) abort();
        int refs = 0;
        for (int i = 0; i < s.ninputs; i++) {
            if (!s.inputs[i].data || !s.inputs[i].len || s.inputs[i].len > lim.max_upload) abort();
            refs += s.inputs[i].role == SERVE_IN_REF;
        }
        if (refs > H3_MAX_REFERENCES) abort();
        serve_spec t;
        if (serve_spec_from_settings(s.settings, &t, err, sizeof err)) abort();
        if (t.width != s.width || t.height != s.height || t.steps != s.steps || t.seed != s.seed ||
            t.frames != s.frames || t.seconds != s.seconds || t.layers != s.layers || t.core_reuse != s.core_reuse ||
            strcmp(t.prompt, s.prompt))
            abort();
        serve_spec_free(&t);
        check_remix(ct, body, n, s.settings); /* the accepted request as the original of a remix */
        serve_spec_free(&s);
    }
    /* a remix of a fixed fl2va-like job (its settings as POST /v1/videos stores them) */
    json_t *original = json_pack("{s:s, s:s, s:f, s:i, s:I, s:s, s:b}", "prompt", "A fox.", "size", "64x32", "seconds",
                                 5.0, "steps", 2, "seed", (json_int_t)7, "preset", "fast", "previews", 0);
    check_remix(data[0] & 2 ? "application/json" : NULL, body, n, original);
    json_decref(original);
    /* Range */
    char *text = malloc(n + 1);
    if (!text) return 0;
    memcpy(text, body, n), text[n] = 0;
    int64_t fsize = size > 3 ? (int64_t)data[1] << 8 | data[2] : 0, off = -1, len = -1;
    int rr = serve_parse_range(text, fsize, &off, &len);
    if (rr == 1 && (off < 0 || len <= 0 || off + len > fsize)) abort();
    /* routing */
    char id[SERVE_ID_LEN + 1];
    int allowed;
    static const char *const methods[] = {"GET", "DELETE", "POST", "PUT"};
    int route = serve_route(methods[data[0] >> 2 & 3], text, id, &allowed);
    if (id[0] && !serve_is_id(id)) abort();
    if ((route == SERVE_R_VIDEO || route == SERVE_R_CONTENT || route == SERVE_R_EVENTS || route == SERVE_R_REMIX) && !id[0])
        abort();
    if (route == SERVE_R_REMIX && allowed != !strcmp(methods[data[0] >> 2 & 3], "POST")) abort();
    /* base64 */
    size_t dl;
    unsigned char *d = serve_base64_decode(text, n, &dl);
    if (d) {
        char *e = serve_base64_encode(d, dl);
        size_t el;
        unsigned char *d2 = e ? serve_base64_decode(e, strlen(e), &el) : NULL;
        if (!d2 || el != dl || memcmp(d, d2, dl)) abort();
        free(d2), free(e), free(d);
    }
    free(text);
    return 0;
}
