/* Cases of the 8-bit attention (ops_attention.h, docs/fast.md). Included once by tests/test_backend_ops.c after
 * ops_int8.h. The quantization is exact: the whole codes buffer (codes, scales, K mean) is compared bit for bit.
 * The attention on the same codes agrees with the twin to the row's tolerance (exp2 approximation, summation
 * order; a P code can move one E4M3 step). The CPU pass also checks the twin against the exact attention in
 * double (the scheme's own error, bounded loosely: it is an approximation by design) and h3_sage8_attention
 * (scratch codes) against the two-step calls bit for bit. tests/test_sage8.c checks the twin against the torch
 * reference's fixture. */
#include "backend/ops.h"
#ifdef H3_CUDA
#include "backend/cuda/cuda_sage8.h"
#endif

/* q/k/v as separate strided buffers (row strides with padding, heads D apart); outliers: K channels d % 16 == 3
 * get a large per-channel offset (what smoothing removes). a = Sq, Skv, Hq, Hkv, D, outliers, CUDA variant
 * (-1 default; cuda_sage8_sm90_variants(): the plain kernel) */
static void c_sage8(bo_ctx *c, const bo_row *r) {
    const int64_t Sq = r->a[0], Skv = r->a[1];
    const int Hq = (int)r->a[2], Hkv = (int)r->a[3], D = (int)r->a[4], outl = (int)r->a[5], var = (int)r->a[6];
    (void)var; /* CUDA builds only */
    const int64_t I = (int64_t)Hq * D, Ikv = (int64_t)Hkv * D, rs = I + 8, rskv = Ikv + 24, ors = I + 16;
    uint16_t *kh = rand_bf16(Skv * rskv, 2.0f);
    if (outl)
        for (int64_t s = 0; s < Skv; s++)
            for (int64_t i = 0; i < Ikv; i++)
                if (i % 16 == 3) kh[s * rskv + i] = h3_f32_to_bf16(h3_bf16_to_f32(kh[s * rskv + i]) + 24.0f + (float)(i % 5));
    bo_buf *q = bo_rand(c, BO_BF16, Sq * rs, 2.0f, 0), *k = bo_in(c, BO_BF16, Skv * rskv, kh);
    bo_buf *v = bo_rand(c, BO_BF16, Skv * rskv, 1.0f, 0);
    free(kh);
    const int64_t nb = (int64_t)h3_sage8_codes_bytes(Sq, Skv, Hq, Hkv, D);
    bo_buf *cb = bo_out(c, BO_U8, nb), *o, *o2;
    if (c->perf) {
        o = bo_out(c, BO_BF16, Sq * ors), o2 = bo_out(c, BO_BF16, Sq * ors);
    } else { /* the head columns NaN (an unwritten one fails), the padding columns 0 (must stay so) */
        uint16_t *poison = malloc((size_t)(Sq * ors) * 2);
        for (int64_t i = 0; i < Sq * ors; i++) poison[i] = i % ors < I ? 0x7fc0 : 0;
        o = bo_in(c, BO_BF16, Sq * ors, poison), o2 = bo_in(c, BO_BF16, Sq * ors, poison);
        free(poison);
    }
    const float scale = 1.0f / sqrtf((float)D);
#ifdef H3_CUDA
    if (bo_is_cuda(c->be[1])) cuda_sage8_set_variant(c->be[1], var);
#endif
    h3_sage8_codes cs[2];
    for (int s = 0; s < 2; s++)
        if (bo_has(c, s)) h3_sage8_codes_layout(&cs[s], cb->p[s], Sq, Skv, Hq, Hkv, D);
    bo_cost(c, "quantize", 0, 2.0 * (Sq * I + 2 * Skv * Ikv) * 2);
    BO_OP(c, be, h3_sage8_quantize(be, &cs[c->side], PB(q), rs, D, PB(k), rskv, D, PB(v), rskv, D));
    bo_check(c, "codes, scales, K mean (bit for bit)", cb, 0.0, 0);
    bo_cost(c, "attention on the codes", 4.0 * Sq * Skv * Hq * D, 0);
    BO_OP(c, be, h3_sage8_attention_codes(be, PB(o), ors, &cs[c->side], scale));
    bo_check_range(c, "out vs the twin (same codes)", o, 0, Sq * ors, r->tol, 0);
    BO_OP(c, be, h3_sage8_attention(be, PB(o2), ors, PB(q), rs, D, PB(k), rskv, D, PB(v), rskv, D, Sq, Skv, Hq, Hkv,
                                    D, scale));
    if (!c->perf) bo_same(c, "h3_sage8_attention == quantize + attention_codes", o, o2);
#ifdef H3_CUDA
    if (bo_is_cuda(c->be[1])) cuda_sage8_set_variant(c->be[1], -1);
#endif
    if (!bo_refs(c)) return;
    /* the twin against the exact attention (double), every 7th row */
    uint16_t *oh = bo_get(c, o, 0);
    int64_t st = Sq > 40 ? 7 : 1, n = 0;
    double *ref = malloc((size_t)((Sq / st + 1) * I) * sizeof(double)), *p = malloc((size_t)Skv * sizeof(double));
    float *got = malloc((size_t)((Sq / st + 1) * I) * sizeof(float));
    for (int64_t i = 0; i < Sq; i += st)
        for (int h = 0; h < Hq; h++) {
            int hk = h / (Hq / Hkv);
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < Skv; j++) {
                double s = 0;
                for (int d = 0; d < D; d++) s += bo_bf(q, i * rs + h * D + d) * bo_bf(k, j * rskv + hk * D + d);
                p[j] = s * scale, mx = p[j] > mx ? p[j] : mx;
            }
            for (int64_t j = 0; j < Skv; j++) sum += p[j] = exp(p[j] - mx);
            for (int d = 0; d < D; d++, n++) {
                double acc = 0;
                for (int64_t j = 0; j < Skv; j++) acc += p[j] * bo_bf(v, j * rskv + hk * D + d);
                ref[n] = acc / sum, got[n] = h3_bf16_to_f32(oh[i * ors + h * D + d]);
            }
        }
    bo_ref(c, "out vs exact attention (the scheme's error)", got, ref, n, 8e-2);
    free(oh), free(ref), free(p), free(got);
}
