/* Helpers shared by test_text_encoder.c and test_vision.c: golden tensors of
 * tests/fixtures/golden/text_encoder/ (made by tools/reference/gen_text_encoder.py). */
#ifndef H3_TEXT_ENCODER_GOLDEN_H
#define H3_TEXT_ENCODER_GOLDEN_H

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "core/tensor.h"
#include "io/safetensors.h"
#include "model/text_encoder.h"
#include "model/vision.h"
#include "pipeline/presentation.h"
#include "test.h"

#define TE_TINY "tests/fixtures/tiny/text_encoder"
#define TE_PROC "tests/fixtures/tiny/processor"
#define TE_GOLD "tests/fixtures/golden/text_encoder/"

/* Opens GOLD/name; NULL (and a failed CHECK) when missing. */
static __attribute__((unused)) st_set *gold_open(const char *name) {
    char path[512];
    snprintf(path, sizeof path, TE_GOLD "%s", name);
    h3_err e = {{0}};
    st_set *s = st_set_open(path, &e);
    CHECK(s != NULL, "%s", e.msg);
    return s;
}

/* An fp32 (or i64, want = H3_I64) copy of tensor name; NULL with a failed CHECK when absent. */
static __attribute__((unused)) h3_tensor *gold_get(const st_set *s, const char *name, h3_dtype want) {
    h3_err e = {{0}};
    h3_tensor v;
    if (!s || st_set_get(s, name, &v, &e)) {
        CHECK(0, "golden tensor %s: %s", name, e.msg);
        return NULL;
    }
    if (want == H3_F32) return h3_tensor_to_f32(&v, &e);
    h3_tensor *t = h3_tensor_new(v.dtype, v.ndim, v.shape, &e);
    if (t) memcpy(t->data, v.data, h3_tensor_nbytes(t));
    return t;
}

/* Encoder callback for the presentations: looks segments up in the golden JSON's "segments" map
 * (ids the reference tokenizer produced), so presentation logic is tested on its own. */
static __attribute__((unused)) int gold_segment_encode(void *ctx, const char *text, int64_t **ids, int64_t *n, h3_err *e) {
    json_t *seg = json_object_get((json_t *)ctx, "segments");
    json_t *a = seg ? json_object_get(seg, text) : NULL;
    if (!json_is_array(a)) return h3_fail(e, "segment '%s' not in the golden table", text);
    *n = (int64_t)json_array_size(a);
    *ids = malloc((size_t)(*n + 1) * sizeof(int64_t));
    for (int64_t i = 0; i < *n; i++) (*ids)[i] = json_integer_value(json_array_get(a, (size_t)i));
    return 0;
}

static __attribute__((unused)) void check_close(const char *what, const float *got, const float *ref, size_t n,
                                                double tol) {
    char name[160];
    snprintf(name, sizeof name, "%s max_abs %.2e", what, h3_max_abs(got, ref, n));
    CHECK_CLOSE(name, h3_rel_l2(got, ref, n), tol);
}

#endif
