/* libFuzzer target for `h3 serve`'s parsers of request bytes (tools/h3/cmd_serve_parse.c, docs/serve.md): the job
 * request as JSON and as multipart/form-data, base64, Range and the path routing.
 *
 * The input's first byte picks the Content-Type (JSON, multipart with the boundary "b", or none); the rest is the
 * body; the same bytes also go to serve_parse_range (as a Range header against a size from the first bytes),
 * serve_route (as a path) and serve_base64_decode. Oracles: a refused request has a non-empty one-line message and
 * no settings; an accepted one has a prompt, settings that parse again to the same values (the restart path),
 * inputs within the upload limit and at most H3_MAX_REFERENCES references; a range lies inside the file; a route
 * with an id has exactly the id syntax; base64 round-trips through the encoder.
 *
 *   make fuzz && build-fuzz/fuzz_serve -max_total_time=600 fuzz/corpus/serve */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/h3/cmd_serve.h"

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
        serve_spec_free(&s);
    }
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
    int route = serve_route(data[0] & 1 ? "GET" : "DELETE", text, id, &allowed);
    if (id[0] && !serve_is_id(id)) abort();
    if ((route == SERVE_R_VIDEO || route == SERVE_R_CONTENT || route == SERVE_R_EVENTS) && !id[0]) abort();
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
