/* Cases of the GGUF block ops (ops_linear.h). Included once by tests/test_backend_ops.c. Everything bit for bit
 * (tolerance 0): the blocks h3_gguf_fill_random writes, and the bf16 values h3_gguf_dequant expands them into. The
 * CPU pass also checks the twin against gguf_dequantize + h3_f32_to_bf16 computed here from the host bytes (the
 * dequantize-at-load path's bf16 view, src/io/gguf_dequant.c) and that random blocks are well formed (finite values
 * within 8x the asked scale). */
#include "backend/ops.h"
#include "io/gguf.h"

/* the fp16 fields of a block (scales, mins) and plain values made finite (the top exponent lowered by one): no
 * product is inf * 0, whose NaN's bits differ between x86 and CUDA, and the comparisons see finite values */
static void bo_gguf_finite_scales(uint8_t *b, uint32_t type) {
    int at[2] = {-1, -1};
    switch (type) {
    case GGUF_Q4_0: case GGUF_Q5_0: case GGUF_Q8_0: at[0] = 0; break;
    case GGUF_Q4_1: case GGUF_Q5_1: case GGUF_Q4_K: case GGUF_Q5_K: at[0] = 0, at[1] = 2; break;
    case GGUF_Q6_K: at[0] = 208; break;
    case GGUF_F16: /* plain values too: the harness compares finite values */
        if (((b[1] >> 2) & 31) == 31) b[1] &= (uint8_t)~0x04;
        break;
    case GGUF_BF16:
        if ((b[1] & 0x7f) == 0x7f && (b[0] & 0x80)) b[0] &= 0x7f;
        break;
    case GGUF_F32:
        if ((b[3] & 0x7f) == 0x7f && (b[2] & 0x80)) b[2] &= 0x7f;
        break;
    default: break;
    }
    for (int i = 0; i < 2; i++)
        if (at[i] >= 0 && ((b[at[i] + 1] >> 2) & 31) == 31) b[at[i] + 1] &= (uint8_t)~0x04;
}

/* ---- gguf_dequant: a = type, values, source (0: random bytes, scales made finite; 1: h3_gguf_fill_random) ---- */
static void c_gguf_dequant(bo_ctx *c, const bo_row *r) {
    const uint32_t type = (uint32_t)r->a[0];
    const int64_t n = r->a[1], from_fill = r->a[2];
    int64_t bv, bb;
    const char *tname;
    if (!gguf_type_block(type, &bv, &bb, &tname)) {
        bo_assert(c, "type", 0, "a type h3 reads");
        return;
    }
    const int64_t nblk = n / bv, nbytes = nblk * bb;
    const float scale = 0.0375f;
    bo_buf *q;
    if (from_fill || c->perf) {
        q = bo_out(c, BO_U8, nbytes);
        bo_cost(c, "fill", 0, (double)nbytes);
        BO_OP(c, be, h3_gguf_fill_random(be, PU(q), type, nblk, 1234, scale));
        bo_check(c, "random blocks", q, 0.0, 0);
    } else {
        uint8_t *h = malloc((size_t)nbytes);
        uint64_t s = 0x243f6a8885a308d3ull;
        for (int64_t i = 0; i < nbytes; i++) s = s * 6364136223846793005ull + 1442695040888963407ull, h[i] = (uint8_t)(s >> 56);
        for (int64_t i = 0; i < nblk; i++) bo_gguf_finite_scales(h + i * bb, type);
        q = bo_in(c, BO_U8, nbytes, h);
        free(h);
    }
    bo_buf *y = bo_out(c, BO_BF16, n);
    bo_cost(c, "dequant", 0, (double)nbytes + 2.0 * (double)n);
    BO_OP(c, be, h3_gguf_dequant(be, PB(y), PU(q), type, n));
    bo_check(c, "bf16 values", y, 0.0, 0);
    if (!bo_refs(c)) return;
    uint8_t *qh = bo_get(c, q, 0);
    uint16_t *yh = bo_get(c, y, 0);
    float *ref = malloc((size_t)n * sizeof(float));
    int ok = gguf_dequantize(type, qh, ref, n) == 0;
    int64_t diff = 0, nonfinite = 0;
    double mx = 0, ss = 0;
    for (int64_t i = 0; ok && i < n; i++) {
        diff += yh[i] != h3_f32_to_bf16(ref[i]);
        nonfinite += !isfinite(ref[i]);
        mx = fmax(mx, fabs(ref[i])), ss += (double)ref[i] * ref[i];
    }
    char what[200];
    snprintf(what, sizeof what, "twin vs gguf_dequantize + bf16 rounding: %lld of %lld differ", (long long)diff, (long long)n);
    bo_assert(c, "the dequantize-at-load bytes", ok && diff == 0, what);
    if (from_fill) {
        const double rms = sqrt(ss / (double)n);
        snprintf(what, sizeof what, "%s: %lld not finite, max |v| %.3g, rms %.3g (scale %.3g)", tname, (long long)nonfinite,
                 mx, rms, scale);
        bo_assert(c, "well formed", nonfinite == 0 && mx <= 8.0 * scale && rms >= scale / 64.0, what);
    }
    free(qh), free(yh), free(ref);
}
