/* Cases of the INT8 W8A8 ops (backend_int8.h, docs/int8.md). Included once by tests/test_backend_ops.c after
 * ops_fp8.h. Everything is exact: codes, scales, int32 products and the bf16 outputs are bit-identical across
 * backends, and the CPU pass checks the twin against the rule recomputed here. The rows are BO_CPU: the ops have
 * no CUDA twin yet. tests/test_int8.c checks the twin against the torch fixture. */
#include "backend/backend_int8.h"

/* ---- int8_quant_rows: a = rows, dim, ldx, group (0: one scale per row) ---- */
static void c_int8_quant(bo_ctx *c, const bo_row *r) {
    const int64_t rows = r->a[0], dim = r->a[1], ldx = r->a[2], group = r->a[3], g = group ? group : dim;
    uint16_t *xh = bo_fp8_rows(rows, ldx, 1.0f);
    bo_buf *x = bo_in(c, BO_BF16, rows * ldx, xh);
    free(xh);
    bo_buf *q = bo_out(c, BO_U8, rows * dim), *s = bo_out(c, BO_F32, rows * (dim / g));
    bo_cost(c, NULL, 0, 3.0 * rows * dim);
    BO_OP(c, be, h3_int8_quant_rows(be, (int8_t *)PU(q), PF(s), PB(x), rows, dim, ldx, group));
    bo_check(c, "codes", q, 0.0, 0);
    bo_check(c, "scales", s, 0.0, 0);
    if (!bo_refs(c)) return;
    int8_t *qh = bo_get(c, q, 0);
    float *sh = bo_get(c, s, 0);
    const uint16_t *xv = x->h;
    int64_t bad = 0;
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < dim / g; j++) {
            float amax = 0.0f;
            for (int64_t k = 0; k < g; k++) amax = fmaxf(amax, fabsf(h3_bf16_to_f32(xv[i * ldx + j * g + k])));
            const float sc = fmaxf(amax, H3_INT8_MIN_AMAX) / H3_INT8_MAX;
            bad += memcmp(&sc, &sh[i * (dim / g) + j], 4) != 0;
            for (int64_t k = 0; k < g; k++) {
                double v = nearbyint((double)(h3_bf16_to_f32(xv[i * ldx + j * g + k]) / sc));
                v = v > 127 ? 127 : v < -127 ? -127 : v;
                bad += (int8_t)v != qh[i * dim + j * g + k];
            }
        }
    char what[120];
    snprintf(what, sizeof what, "%lld codes or scales differ from max(absmax, 1e-5) / 127, rne, clamp 127", (long long)bad);
    bo_assert(c, "codes and scales vs the rule", bad == 0, what);
    free(qh), free(sh);
}

/* ---- int8_matmul (+ int8_gemm_s32 on the CPU pass): a = M, N, K, ldy, group, bias ---- */
static void c_int8_matmul(bo_ctx *c, const bo_row *r) {
    const int64_t M = r->a[0], N = r->a[1], K = r->a[2], ldy = r->a[3], group = r->a[4], g = group ? group : K;
    h3_err e = {{0}};
    int64_t shape[2] = {N, K};
    uint16_t *xh = bo_fp8_rows(M, K, 1.0f), *wh = bo_fp8_rows(N, K, 0.05f), *bh = bo_fp8_rows(1, N, 0.1f);
    h3_tensor *wt = h3_tensor_view(H3_BF16, 2, shape, wh, &e);
    h3_tensor *wd[2] = {NULL, NULL};
    h3_int8_linear l[2];
    int ok[2] = {0, 0};
    for (int s = 0; s < 2; s++)
        if (bo_has(c, s)) {
            wd[s] = h3_weight_upload(c->be[s], wt, &e);
            ok[s] = wd[s] && h3_int8_linear_new(c->be[s], &l[s], wd[s], &e) == 0;
            if (ok[s]) l[s].group = group;
            bo_assert(c, s ? "h3_int8_linear_new (side 1)" : "h3_int8_linear_new (twin)", ok[s], e.msg[0] ? e.msg : "ok");
        }
    if (!(ok[0] && ok[1])) goto done;
    int8_t *qx = malloc((size_t)(M * K));
    float *sx = malloc((size_t)(M * (K / g)) * sizeof(float));
    omp_set_num_threads(c->threads[0]);
    h3_int8_quant_rows(c->be[0], qx, sx, xh, M, K, K, group); /* the twin's codes, for both sides */
    bo_buf *xq = bo_in(c, BO_U8, M * K, qx), *xs = bo_in(c, BO_F32, M * (K / g), sx);
    bo_buf *bias = r->a[5] ? bo_in(c, BO_BF16, N, bh) : NULL;
    bo_buf *y = bo_out(c, BO_BF16, M * ldy);
    bo_cost(c, NULL, 2.0 * M * N * K, 0);
    BO_OP(c, be, h3_int8_matmul(be, PB(y), ldy, (const int8_t *)PU(xq), PF(xs), M, &l[c->side], bias ? PB(bias) : NULL));
    if (ldy == N) {
        bo_check(c, "y", y, 0.0, 0);
    } else if (!c->perf) { /* the written columns, bit for bit (the padding is NaN on both sides) */
        uint16_t *y0 = bo_get(c, y, 0), *y1 = bo_get(c, y, 1);
        int64_t flips = 0;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < ldy; j++) flips += y0[i * ldy + j] != y1[i * ldy + j];
        char what[96];
        snprintf(what, sizeof what, "%lld of %lld bf16 values differ", (long long)flips, (long long)(M * ldy));
        bo_assert(c, "y vs the twin (every column)", flips == 0, what);
        free(y0), free(y1);
    }
    if (bo_refs(c)) {
        uint16_t *y0 = bo_get(c, y, 0);
        int64_t bad = 0, pad = 0;
        for (int64_t i = 0; i < M; i++) {
            for (int64_t j = 0; j < N; j++) {
                float v = 0.0f;
                for (int64_t gi = 0; gi < K / g; gi++) {
                    int64_t acc = 0; /* int64 here: the twin's int32 must not have overflowed */
                    for (int64_t k = gi * g; k < (gi + 1) * g; k++) acc += (int64_t)qx[i * K + k] * l[0].q[j * K + k];
                    v = group ? v + (float)acc * sx[i * (K / g) + gi] : (float)acc * sx[i];
                }
                v = v * l[0].scale[j];
                if (r->a[5]) v += h3_bf16_to_f32(bh[j]);
                bad += h3_f32_to_bf16(v) != y0[i * ldy + j];
            }
            for (int64_t j = N; j < ldy; j++) pad += y0[i * ldy + j] != 0x7fc0;
        }
        char what[120];
        snprintf(what, sizeof what, "%lld of %lld outputs differ from the exact product and the epilogue; %lld padding written",
                 (long long)bad, (long long)(M * N), (long long)pad);
        bo_assert(c, "y vs int64 products + fp32 epilogue", bad == 0 && pad == 0, what);
        /* int8_gemm_s32 over two K ranges adds up to the full one */
        int32_t *a0 = malloc((size_t)(M * N) * 4), *a1 = malloc((size_t)(M * N) * 4), *a2 = malloc((size_t)(M * N) * 4);
        h3_int8_gemm_s32(c->be[0], a0, qx, M, &l[0], 0, K);
        h3_int8_gemm_s32(c->be[0], a1, qx, M, &l[0], 0, K / 2);
        h3_int8_gemm_s32(c->be[0], a2, qx, M, &l[0], K / 2, K - K / 2);
        bad = 0;
        for (int64_t i = 0; i < M * N; i++) {
            int64_t acc = 0;
            for (int64_t k = 0; k < K; k++) acc += (int64_t)qx[(i / N) * K + k] * l[0].q[(i % N) * K + k];
            bad += a0[i] != acc || a1[i] + a2[i] != a0[i];
        }
        snprintf(what, sizeof what, "%lld int32 accumulators wrong", (long long)bad);
        bo_assert(c, "int8_gemm_s32 exact (full K and two K ranges)", bad == 0, what);
        free(a0), free(a1), free(a2), free(y0);
    }
    free(qx), free(sx);
done:
    for (int s = 0; s < 2; s++) {
        if (ok[s]) h3_int8_linear_free(c->be[s], &l[s]);
        if (wd[s]) h3_weight_free(c->be[s], wd[s]);
    }
    h3_tensor_free(wt);
    free(xh), free(wh), free(bh);
}
