/* Cases of the LoRA merge into a weight (ops_linear.def h3_lora_merge_into, docs/lora.md "The merge and its
 * rounding"). Included once by tests/test_backend_ops.c. Bit for bit (tolerance 0): the CUDA kernel against the CPU
 * twin, and on the CPU pass the twin against a hand merge written here from the documented rule (an fmaf chain over
 * the rank from 0, times the scaling, rounded to the weight's dtype, added, rounded again), the rows outside the
 * delta's destination untouched. */
#include "backend/backend_stream.h"
#include "backend/ops.h"

/* a buffer of n values of weight dtype dt (F16 as bytes: the harness has no F16 buffers) from host floats */
static bo_buf *bo_lora_buf(bo_ctx *c, h3_dtype dt, int64_t n, const float *v) {
    const size_t es = h3_dtype_size(dt);
    void *h = malloc((size_t)(n > 0 ? n : 1) * es);
    h3_convert_from_f32(h, dt, v, (size_t)n);
    bo_buf *b = bo_in(c, dt == H3_F32 ? BO_F32 : dt == H3_BF16 ? BO_BF16 : BO_U8, dt == H3_F16 ? 2 * n : n, h);
    free(h);
    return b;
}

static float bo_lora_round(float x, h3_dtype dt) {
    return dt == H3_BF16 ? h3_round_bf16(x) : dt == H3_F16 ? h3_f16_to_f32(h3_f32_to_f16(x)) : x;
}

/* one call on side `side`: in place on W, or (host: its bytes) through a slot filled from host */
static int bo_lora_run(h3_backend *be, int side, bo_buf *W, const bo_buf *A, const bo_buf *B, const h3_lora_delta *d0,
                       h3_dtype dt, const void *host, size_t wbytes, h3_err *e) {
    h3_lora_delta d = *d0;
    d.A = A->p[side], d.B = B->p[side];
    if (!host) return h3_lora_merge_into(be, NULL, W->p[side], dt, &d), h3_backend_check(be, e);
    h3_slot *s = h3_slot_new(be, wbytes);
    const h3_slot_piece pc = {.src = host, .bytes = wbytes, .offset = 0};
    int rc = -1;
    if (s && h3_slot_fill(be, s, &pc, 1, e) == 0 &&
        (h3_lora_merge_into(be, s, h3_slot_data(s), dt, &d), h3_backend_check(be, e)) == 0) {
        h3_slot_acquire(be, s); /* the copy below waits for the fill and the merge on the slot's queue */
        h3_copy_2d(be, W->p[side], wbytes, h3_slot_data(s), wbytes, wbytes, 1);
        h3_slot_release(be, s);
        rc = 0;
    }
    if (!s) h3_fail(e, "out of backend memory for a slot");
    h3_slot_free(be, s);
    return rc;
}

/* ---- lora_merge_into: a = dtype, n, k, rank, row_group (0: n), group_stride, weight rows (0: n), through a slot
 * (1: the slot is filled from the host bytes, merged on its copy stream, acquired, and copied out) ---- */
static void c_lora_merge(bo_ctx *c, const bo_row *r) {
    const h3_dtype dt = (h3_dtype)r->a[0];
    const int64_t n = r->a[1], k = r->a[2], group = r->a[4] ? r->a[4] : n, stride = r->a[4] ? r->a[5] : n;
    const int rank = (int)r->a[3], via_slot = (int)r->a[7];
    const int64_t rows = r->a[6] ? r->a[6] : n;
    const size_t es = h3_dtype_size(dt), wbytes = (size_t)(rows * k) * es;
    /* W near 1 / sqrt(k) like a trained linear, A like peft's init, B small: the delta moves W by about 2 % */
    float *w = rand_host(rows * k, 1.0f / sqrtf((float)k), 0), *a = rand_host((int64_t)rank * k, 1.7f / sqrtf((float)k), 0),
          *b = rand_host(n * rank, 0.05f / sqrtf((float)rank), 0);
    for (int64_t i = 0; i < rows * k; i++) w[i] = bo_lora_round(w[i], dt); /* every value exact in dt */
    for (int64_t i = 0; i < (int64_t)rank * k; i++) a[i] = bo_lora_round(a[i], dt);
    for (int64_t i = 0; i < n * rank; i++) b[i] = bo_lora_round(b[i], dt);
    const float scaling = 0.75f;
    bo_buf *W = bo_lora_buf(c, dt, rows * k, w), *A = bo_lora_buf(c, dt, (int64_t)rank * k, a),
           *B = bo_lora_buf(c, dt, n * rank, b);
    void *whost = W->h;
    bo_cost(c, via_slot ? "through a slot" : NULL, 2.0 * (double)n * (double)k * rank,
            2.0 * (double)(n * k) * (double)es + (double)((n + k) * rank) * (double)es);
    int rc[2] = {0, 0};
    h3_err e = {0};
    const h3_lora_delta d0 = {.n = n, .k = k, .row_group = group, .group_stride = stride, .rank = rank, .scaling = scaling};
    BO_OP(c, be, rc[c->side & 1] |= bo_lora_run(be, c->side, W, A, B, &d0, dt, via_slot ? whost : NULL, wbytes, &e));
    if (!c->perf) {
        char what[200];
        snprintf(what, sizeof what, "%.150s", rc[0] || rc[1] ? e.msg : "ok");
        bo_line(c, "the op", what);
        CHECK(rc[0] == 0 && rc[1] == 0, "[%s] lora_merge_into %s: %s", c->tag, r->name, e.msg);
    }
    bo_check(c, "merged weight", W, 0.0, 0);
    if (bo_refs(c)) { /* the hand merge */
        float *want = malloc((size_t)(rows * k) * sizeof *want);
        memcpy(want, w, (size_t)(rows * k) * sizeof *want);
        for (int64_t o = 0; o < n; o++) {
            const int64_t row = (o / group) * stride + o % group;
            for (int64_t i = 0; i < k; i++) {
                float acc = 0.0f;
                for (int q = 0; q < rank; q++) acc = fmaf(b[o * rank + q], a[(int64_t)q * k + i], acc);
                want[row * k + i] = bo_lora_round(want[row * k + i] + bo_lora_round(acc * scaling, dt), dt);
            }
        }
        void *wb = malloc(wbytes), *got = bo_get(c, W, 0);
        h3_convert_from_f32(wb, dt, want, (size_t)(rows * k));
        int64_t diff = 0, moved = 0;
        for (int64_t i = 0; i < rows * k; i++) {
            diff += memcmp((char *)got + i * es, (char *)wb + i * es, es) != 0;
            moved += want[i] != w[i];
        }
        char what[200];
        snprintf(what, sizeof what, "%lld of %lld differ (%lld values moved by the delta)", (long long)diff,
                 (long long)(rows * k), (long long)moved);
        bo_line(c, "twin vs the hand merge", what);
        CHECK(diff == 0 && moved > 0, "[%s] lora_merge_into %s: twin vs the hand merge: %s", c->tag, r->name, what);
        free(want), free(wb), free(got);
    }
    free(w), free(a), free(b);
}
