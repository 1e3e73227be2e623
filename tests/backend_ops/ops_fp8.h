/* Cases of the FP8 W8A8 ops (ops_linear.h): formerly tests/cuda/test_cuda_fp8.c (and its `bench`: the --perf
 * rows at the DiT's block shapes). Included once by tests/test_backend_ops.c after ops_bf16.h. Quantization must
 * be bit-identical (codes and scales) on every backend; the GEMM differs from the twin by its fp32 summation
 * order only. tests/test_fp8.c checks the CPU twin against torch's fixture and the quantizer's edge rows. */
#include "backend/ops.h"
#include "io/safetensors.h"

/* rows with a spread of magnitudes, a zero row, an outlier */
static uint16_t *bo_fp8_rows(int64_t rows, int64_t ld, float scale) {
    uint16_t *x = malloc((size_t)(rows * ld) * 2);
    for (int64_t r = 0; r < rows; r++) {
        float m = scale * powf(10.0f, 3.0f * (float)(r % 7) / 6.0f - 2.0f);
        for (int64_t col = 0; col < ld; col++) x[r * ld + col] = h3_f32_to_bf16(r == 1 ? 0.0f : frand() * m);
    }
    if (rows > 2) x[2 * ld + 3] = h3_f32_to_bf16(-7000.0f);
    return x;
}

/* the CPU pass's check of quantized rows: the scale is max(absmax, 1e-5) / 448 exactly, and every code is within
 * half an E4M3 step of x / scale */
static void bo_fp8_ref(bo_ctx *c, const char *name, const uint16_t *x, int64_t rows, int64_t dim, int64_t ldx,
                       const uint8_t *q, const float *s) {
    int64_t bad_scale = 0;
    double worst = 0;
    for (int64_t r = 0; r < rows; r++) {
        float amax = 0.0f;
        for (int64_t k = 0; k < dim; k++) amax = fmaxf(amax, fabsf(h3_bf16_to_f32(x[r * ldx + k])));
        float want = fmaxf(amax, H3_FP8_MIN_AMAX) / H3_FP8_MAX;
        bad_scale += memcmp(&want, &s[r], 4) != 0;
        for (int64_t k = 0; k < dim; k++) {
            double v = h3_bf16_to_f32(x[r * ldx + k]), a = fabs(v / s[r]), d = h3_f8e4m3_to_f32(q[r * dim + k]) * (double)s[r];
            double step = a >= 0x1p-6 ? ldexp(1.0, (int)floor(log2(a)) - 3) : 0x1p-9;
            double err = fabs(d - v) / (0.5 * step * s[r]);
            if (err > worst) worst = err;
        }
    }
    char what[160];
    snprintf(what, sizeof what, "scales vs max(absmax, 1e-5) / 448: %lld differ; worst code error %.3f half steps",
             (long long)bad_scale, worst);
    bo_assert(c, name, bad_scale == 0 && worst <= 1.0 + 1e-6, what);
}

/* ---- fp8_quant_rows: a = rows, dim, ldx ---- */
static void c_fp8_quant(bo_ctx *c, const bo_row *r) {
    const int64_t rows = r->a[0], dim = r->a[1], ldx = r->a[2];
    bo_buf *x;
    if (c->perf) {
        x = bo_rand(c, BO_BF16, rows * ldx, 1.0f, 0);
    } else {
        uint16_t *xh = bo_fp8_rows(rows, ldx, 1.0f);
        x = bo_in(c, BO_BF16, rows * ldx, xh);
        free(xh);
    }
    bo_buf *q = bo_out(c, BO_U8, rows * dim), *s = bo_out(c, BO_F32, rows);
    bo_cost(c, NULL, 0, 3.0 * rows * dim);
    BO_OP(c, be, h3_fp8_quant_rows(be, PU(q), PF(s), PB(x), rows, dim, ldx));
    bo_check(c, "codes", q, 0.0, 0);
    bo_check(c, "scales", s, 0.0, 0);
    if (!bo_refs(c)) return;
    uint8_t *qh = bo_get(c, q, 0);
    float *sh = bo_get(c, s, 0);
    bo_fp8_ref(c, "codes and scales", x->h, rows, dim, ldx, qh, sh);
    free(qh), free(sh);
}

/* ---- fp8_matmul on the twin's quantized x: a = M, N, K, ldy, bias (1: a bf16 bias on the linear, as the video
 * decoder's); columns past N stay (NaN) ---- */
static void c_fp8_matmul(bo_ctx *c, const bo_row *r) {
    const int64_t M = r->a[0], N = r->a[1], K = r->a[2], ldy = r->a[3], with_bias = r->a[4];
    h3_err e = {{0}};
    int64_t shape[2] = {N, K};
    uint16_t *xh = c->perf ? rand_bf16(1, 1.0f) : bo_fp8_rows(M, K, 1.0f), *wh = bo_fp8_rows(N, K, 0.05f);
    h3_tensor *wt = h3_tensor_view(H3_BF16, 2, shape, wh, &e);
    h3_tensor *wd[2] = {NULL, NULL};
    h3_fp8_linear l[2];
    int ok[2] = {0, 0};
    for (int s = 0; s < 2; s++)
        if (bo_has(c, s)) {
            wd[s] = h3_weight_upload(c->be[s], wt, &e);
            ok[s] = wd[s] && h3_fp8_linear_new(c->be[s], &l[s], wd[s], &e) == 0;
            if (!c->perf) bo_assert(c, s ? "h3_fp8_linear_new (side 1)" : "h3_fp8_linear_new (twin)", ok[s], e.msg[0] ? e.msg : "ok");
        }
    if (!(ok[1] && (c->perf || ok[0]))) goto done;
    uint16_t *bh = with_bias ? rand_bf16(N, 0.5f) : NULL;
    bo_buf *bias = with_bias ? bo_in(c, BO_BF16, N, bh) : NULL;
    for (int s = 0; s < 2; s++)
        if (bias && bo_has(c, s)) l[s].bias = bias->p[s];
    bo_buf *xq, *xs;
    if (c->perf) {
        xq = bo_out(c, BO_U8, M * K), xs = bo_rand(c, BO_F32, M, 0.01f, 0);
    } else {
        uint8_t *q = malloc((size_t)(M * K));
        float *s = malloc((size_t)M * sizeof(float));
        omp_set_num_threads(c->threads[0]);
        h3_fp8_quant_rows(c->be[0], q, s, xh, M, K, K); /* the twin's codes, for both sides */
        xq = bo_in(c, BO_U8, M * K, q), xs = bo_in(c, BO_F32, M, s);
        free(q), free(s);
    }
    bo_buf *y = bo_out(c, BO_BF16, M * ldy);
    bo_cost(c, NULL, 2.0 * M * N * K, 0);
    BO_OP(c, be, h3_fp8_matmul(be, PB(y), ldy, PU(xq), PF(xs), M, &l[c->side]));
    if (!c->perf) {
        uint16_t *y1 = bo_get(c, y, 1);
        int pad_ok = 1;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = N; j < ldy; j++) pad_ok &= y1[i * ldy + j] == 0x7fc0;
        bo_assert(c, "columns past N untouched", pad_ok, "ok");
        /* the written columns only */
        uint16_t *y0 = bo_get(c, y, 0);
        float *f0 = malloc((size_t)(M * N) * sizeof(float)), *f1 = malloc((size_t)(M * N) * sizeof(float));
        int64_t flips = 0;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                f0[i * N + j] = h3_bf16_to_f32(y0[i * ldy + j]), f1[i * N + j] = h3_bf16_to_f32(y1[i * ldy + j]);
                flips += y0[i * ldy + j] != y1[i * ldy + j];
            }
        double rel = h3_rel_l2(f1, f0, (size_t)(M * N)), tol = c->cpu_pass ? 0.0 : r->tol;
        if (rel != rel) rel = INFINITY;
        char what[160];
        snprintf(what, sizeof what, "rel_l2 %.3e (tol %.0e), %lld of %lld bf16 outputs differ", rel, tol,
                 (long long)flips, (long long)(M * N));
        bo_assert(c, "y vs the twin", rel <= tol && (tol > 0 || flips == 0), what);
        if (bo_refs(c)) { /* the twin against the float64 product of the dequantized operands */
            const uint8_t *qx = xq->h;
            const float *sx = xs->h;
            double *ref = malloc((size_t)(M * N) * sizeof(double));
            /* the codes decoded once (the decode per product made this row the suite's slowest) */
            double *dx = malloc((size_t)(M * K) * sizeof(double)), *dw = malloc((size_t)(N * K) * sizeof(double));
            for (int64_t i = 0; i < M * K; i++) dx[i] = h3_f8e4m3_to_f32(qx[i]);
            for (int64_t i = 0; i < N * K; i++) dw[i] = h3_f8e4m3_to_f32(l[0].q[i]);
            for (int64_t i = 0; i < M; i++)
                for (int64_t j = 0; j < N; j++) {
                    const double *a = dx + i * K, *b = dw + j * K;
                    double acc = 0;
                    for (int64_t k = 0; k < K; k++) acc += a[k] * b[k];
                    ref[i * N + j] = acc * sx[i] * l[0].scale[j] + (bh ? (double)h3_bf16_to_f32(bh[j]) : 0.0);
                }
            bo_ref(c, "y", f0, ref, M * N, 4e-3);
            free(ref), free(dx), free(dw);
        }
        free(y0), free(y1), free(f0), free(f1);
    }
    free(bh);
done:
    for (int s = 0; s < 2; s++) {
        if (ok[s]) h3_fp8_linear_free(c->be[s], &l[s]);
        if (wd[s]) h3_weight_free(c->be[s], wd[s]);
    }
    h3_tensor_free(wt);
    free(xh), free(wh);
}

/* ---- PyTorch's fixture (tests/fixtures/fp8/linear.safetensors: LightX2V's quantization in torch,
 * torch._scaled_mm): every side's codes bit for bit, its GEMM within 2e-3 of torch's ---- */
static void c_fp8_fixture(bo_ctx *c, const bo_row *r) {
    if (c->perf) return;
    h3_err e = {{0}};
    st_set *st = st_set_open("tests/fixtures/fp8/linear.safetensors", &e);
    bo_assert(c, "fixture", st != NULL, st ? "opened" : e.msg);
    if (!st) return;
    h3_tensor x, w, xq, xs, y;
    int got = st_set_get(st, "x", &x, &e) == 0 && st_set_get(st, "w", &w, &e) == 0 && st_set_get(st, "xq", &xq, &e) == 0 &&
              st_set_get(st, "xs", &xs, &e) == 0 && st_set_get(st, "y", &y, &e) == 0;
    bo_assert(c, "fixture tensors", got, got ? "x w xq xs y" : e.msg);
    if (!got) {
        st_set_free(st);
        return;
    }
    const int64_t M = x.shape[0], K = x.shape[1], N = w.shape[0];
    bo_buf *dx = bo_in(c, BO_BF16, M * K, x.data), *q = bo_out(c, BO_U8, M * K), *s = bo_out(c, BO_F32, M);
    bo_buf *dy = bo_out(c, BO_BF16, M * N);
    h3_tensor *wd[2] = {NULL, NULL};
    h3_fp8_linear l[2];
    int ok = 1;
    for (int sd = 0; sd < 2; sd++) {
        wd[sd] = h3_weight_upload(c->be[sd], &w, &e);
        ok &= wd[sd] && h3_fp8_linear_new(c->be[sd], &l[sd], wd[sd], &e) == 0;
    }
    bo_assert(c, "h3_fp8_linear_new", ok, ok ? "ok" : e.msg);
    if (ok) {
        BO_OP(c, be, h3_fp8_quant_rows(be, PU(q), PF(s), PB(dx), M, K, K));
        BO_OP(c, be, h3_fp8_matmul(be, PB(dy), N, PU(q), PF(s), M, &l[c->side]));
        float *yt = malloc((size_t)(M * N) * sizeof(float)), *yg = malloc((size_t)(M * N) * sizeof(float));
        for (int64_t i = 0; i < M * N; i++) yt[i] = h3_bf16_to_f32(((const uint16_t *)y.data)[i]);
        for (int sd = 0; sd < 2; sd++) {
            uint8_t *qh = bo_get(c, q, sd);
            uint16_t *yh = bo_get(c, dy, sd);
            int64_t dc = 0;
            for (int64_t i = 0; i < M * K; i++) dc += qh[i] != ((const uint8_t *)xq.data)[i];
            for (int64_t i = 0; i < M * N; i++) yg[i] = h3_bf16_to_f32(yh[i]);
            double rel = h3_rel_l2(yg, yt, (size_t)(M * N));
            if (rel != rel) rel = INFINITY;
            char what[200];
            snprintf(what, sizeof what, "side %d: codes %lld of %lld differ from torch", sd, (long long)dc, (long long)(M * K));
            bo_assert(c, "activation codes vs torch", dc == 0, what);
            snprintf(what, sizeof what, "side %d: vs torch._scaled_mm rel_l2 %.3e (tol 2e-3)", sd, rel);
            bo_assert(c, "fp8 GEMM vs torch", rel <= 2e-3, what);
            free(qh), free(yh);
        }
        free(yt), free(yg);
    }
    for (int sd = 0; sd < 2; sd++) {
        if (ok) h3_fp8_linear_free(c->be[sd], &l[sd]);
        if (wd[sd]) h3_weight_free(c->be[sd], wd[sd]);
    }
    st_set_free(st);
    (void)r;
}
