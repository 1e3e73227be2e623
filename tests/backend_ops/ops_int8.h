/* Cases of the INT8 W8A8 ops (ops_linear.h, docs/int8.md). Included once by tests/test_backend_ops.c after
 * ops_fp8.h. Everything is exact: codes, scales, the weight quantizer's codes, int32 products and the bf16 outputs
 * are bit-identical across backends (every comparison has tolerance 0), and the CPU pass checks the twin against
 * the rule recomputed here. tests/test_int8.c checks the twin against the torch fixture. */
#include "backend/ops.h"

/* ---- int8_quant_rows: a = rows, dim, ldx, group (0: one scale per row) ---- */
static void c_int8_quant(bo_ctx *c, const bo_row *r) {
    const int64_t rows = r->a[0], dim = r->a[1], ldx = r->a[2], group = r->a[3], g = group ? group : dim;
    bo_buf *x;
    if (c->perf) {
        x = bo_rand(c, BO_BF16, rows * ldx, 1.0f, 0);
    } else {
        uint16_t *xh = bo_fp8_rows(rows, ldx, 1.0f);
        x = bo_in(c, BO_BF16, rows * ldx, xh);
        free(xh);
    }
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

/* ---- int8_matmul and int8_gemm_s32 on the twin's quantized x: a = M, N, K, ldy, group, bias. Both sides quantize
 * the same bf16 weight (h3_int8_linear_new: the device's weight quantizer on CUDA); columns past N stay NaN. ---- */
static void c_int8_matmul(bo_ctx *c, const bo_row *r) {
    const int64_t M = r->a[0], N = r->a[1], K = r->a[2], ldy = r->a[3], group = r->a[4], g = group ? group : K;
    h3_err e = {{0}};
    int64_t shape[2] = {N, K};
    uint16_t *xh = c->perf ? NULL : bo_fp8_rows(M, K, 1.0f), *wh = bo_fp8_rows(N, K, 0.05f), *bh = bo_fp8_rows(1, N, 0.1f);
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
    int8_t *qx = NULL;
    float *sx = NULL;
    if (!(ok[1] && (c->perf || ok[0]))) goto done;
    bo_buf *xq, *xs;
    if (c->perf) {
        xq = bo_out(c, BO_U8, M * K), xs = bo_rand(c, BO_F32, M * (K / g), 0.01f, 0);
        h3_bf16 *x16 = h3_alloc(c->be[1], (size_t)(M * K) * 2); /* codes of random rows: any values do for timing */
        if (x16) {
#ifdef H3_CUDA
            if (bo_is_cuda(c->be[1])) cuda_fill_random_bf16(c->be[1], x16, M * K, 5, 1.0f);
#endif
            h3_int8_quant_rows(c->be[1], (int8_t *)xq->p[1], (float *)xs->p[1], x16, M, K, K, group);
            h3_free(c->be[1], x16);
        }
    } else {
        /* the weight quantizer: codes and scales of both sides bit for bit */
        int8_t *wq[2];
        float *ws[2];
        for (int s = 0; s < 2; s++) {
            wq[s] = malloc((size_t)(N * K)), ws[s] = malloc((size_t)N * sizeof(float));
            h3_sync(c->be[s]);
            h3_download(c->be[s], wq[s], l[s].q, (size_t)(N * K));
            h3_download(c->be[s], ws[s], l[s].scale, (size_t)N * sizeof(float));
        }
        int64_t dq = 0, ds = 0;
        for (int64_t i = 0; i < N * K; i++) dq += wq[0][i] != wq[1][i];
        for (int64_t i = 0; i < N; i++) ds += memcmp(&ws[0][i], &ws[1][i], 4) != 0;
        char what[120];
        snprintf(what, sizeof what, "%lld of %lld codes, %lld of %lld scales differ", (long long)dq, (long long)(N * K),
                 (long long)ds, (long long)N);
        bo_assert(c, "weight codes and scales vs the twin", dq == 0 && ds == 0, what);
        for (int s = 0; s < 2; s++) free(wq[s]), free(ws[s]);
        qx = malloc((size_t)(M * K));
        sx = malloc((size_t)(M * (K / g)) * sizeof(float));
        omp_set_num_threads(c->threads[0]);
        h3_int8_quant_rows(c->be[0], qx, sx, xh, M, K, K, group); /* the twin's codes, for both sides */
        xq = bo_in(c, BO_U8, M * K, qx), xs = bo_in(c, BO_F32, M * (K / g), sx);
    }
    bo_buf *bias = r->a[5] ? bo_in(c, BO_BF16, N, bh) : NULL;
    bo_buf *y = bo_out(c, BO_BF16, M * ldy);
    bo_cost(c, group ? "grouped" : NULL, 2.0 * M * N * K, 0);
    BO_OP(c, be, h3_int8_matmul(be, PB(y), ldy, (const int8_t *)PU(xq), PF(xs), M, &l[c->side], bias ? PB(bias) : NULL));
    /* the int32 accumulators, full K and in two K ranges (the grouped path's building block) */
    bo_buf *acc = bo_out(c, BO_I32, M * N), *lo = c->perf ? NULL : bo_out(c, BO_I32, M * N), *hi = c->perf ? NULL : bo_out(c, BO_I32, M * N);
    bo_cost(c, "int8_gemm_s32 (int32 out, full K)", 2.0 * M * N * K, 0);
    BO_OP(c, be, h3_int8_gemm_s32(be, PI(acc), (const int8_t *)PU(xq), M, &l[c->side], 0, K));
    if (!c->perf) {
        const int64_t kh = K / 2 / 4 * 4; /* a multiple of 4: the IMMA operands' alignment */
        BO_OP(c, be, h3_int8_gemm_s32(be, PI(lo), (const int8_t *)PU(xq), M, &l[c->side], 0, kh));
        BO_OP(c, be, h3_int8_gemm_s32(be, PI(hi), (const int8_t *)PU(xq), M, &l[c->side], kh, K - kh));
        bo_check(c, "int32 accumulators, full K", acc, 0.0, 0);
        bo_check(c, "int32 accumulators, first K range", lo, 0.0, 0);
        bo_check(c, "int32 accumulators, second K range", hi, 0.0, 0);
    }
    if (c->perf) goto done;
    { /* every column of y, the padding (NaN on both sides) included */
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
                    int64_t a = 0; /* int64 here: the twin's int32 must not have overflowed */
                    for (int64_t k = gi * g; k < (gi + 1) * g; k++) a += (int64_t)qx[i * K + k] * l[0].q[j * K + k];
                    v = group ? v + (float)a * sx[i * (K / g) + gi] : (float)a * sx[i];
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
        int32_t *a0 = bo_get(c, acc, 0), *a1 = bo_get(c, lo, 0), *a2 = bo_get(c, hi, 0);
        bad = 0;
        for (int64_t i = 0; i < M * N; i++) {
            int64_t a = 0;
            for (int64_t k = 0; k < K; k++) a += (int64_t)qx[(i / N) * K + k] * l[0].q[(i % N) * K + k];
            bad += a0[i] != a || a1[i] + a2[i] != a0[i];
        }
        snprintf(what, sizeof what, "%lld int32 accumulators wrong", (long long)bad);
        bo_assert(c, "int8_gemm_s32 exact (full K and two K ranges)", bad == 0, what);
        free(a0), free(a1), free(a2), free(y0);
    }
done:
    free(qx), free(sx);
    for (int s = 0; s < 2; s++) {
        if (ok[s]) h3_int8_linear_free(c->be[s], &l[s]);
        if (wd[s]) h3_weight_free(c->be[s], wd[s]);
    }
    h3_tensor_free(wt);
    free(xh), free(wh), free(bh);
}
