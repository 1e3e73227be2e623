/* The 8-bit attention's CPU twin (ops_attention.h, docs/fast.md) against the torch reference
 * (tools/reference/gen_sage8.py, tests/fixtures/sage8/attn.safetensors): the K mean, the Q/K INT8 codes and
 * scales, the V^T E4M3 codes (transposed, permuted runs of 32) and scales bit for bit; the output to fp32 noise
 * (the reference sums in fp64); the scheme's own error against the exact attention reported and bounded; the
 * strided call (padded rows, heads of a fused buffer) the same bits as the packed one; bad shapes reported.
 * Run from the repo root. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ops.h"
#include "core/dtype.h"
#include "io/safetensors.h"
#include "test.h"
#include "test_data.h"

static st_set *fx;

static h3_tensor get(const char *c, const char *what) {
    char name[64];
    snprintf(name, sizeof name, "%s.%s", c, what);
    h3_tensor v = {0};
    h3_err e = {{0}};
    if (st_set_get(fx, name, &v, &e) != 0) fprintf(stderr, "%s\n", e.msg);
    return v;
}

static void same_bytes(const char *c, const char *what, const void *a, const h3_tensor *ref, size_t n) {
    size_t bad = 0;
    CHECK(ref->data && h3_tensor_nbytes(ref) == n, "%s %s: fixture tensor missing or %zu bytes, want %zu", c, what,
          ref->data ? (size_t)h3_tensor_nbytes(ref) : 0, n);
    if (!ref->data || h3_tensor_nbytes(ref) != n) return;
    for (size_t i = 0; i < n; i++) bad += ((const uint8_t *)a)[i] != ((const uint8_t *)ref->data)[i];
    printf("  %s %-34s %zu of %zu bytes differ\n", c, what, bad, n);
    CHECK(bad == 0, "%s %s: %zu of %zu bytes differ from the torch reference", c, what, bad, n);
}

static void test_case(h3_backend *be, const char *c) {
    h3_tensor meta = get(c, "meta"), q = get(c, "q"), k = get(c, "k"), v = get(c, "v");
    h3_tensor out_ref = get(c, "out");
    if (!meta.data || !q.data || !k.data || !v.data || !out_ref.data) {
        CHECK(0, "%s: fixture tensors missing", c);
        return;
    }
    const int64_t *m = meta.data;
    const int64_t Sq = m[0], Skv = m[1];
    const int Hq = (int)m[2], Hkv = (int)m[3], D = (int)m[4];
    const int64_t I = (int64_t)Hq * D, Ikv = (int64_t)Hkv * D;
    void *buf = calloc(1, h3_sage8_codes_bytes(Sq, Skv, Hq, Hkv, D));
    h3_sage8_codes cs;
    h3_sage8_codes_layout(&cs, buf, Sq, Skv, Hq, Hkv, D);
    h3_sage8_quantize(be, &cs, q.data, I, D, k.data, Ikv, D, v.data, Ikv, D);
    h3_tensor r;
    r = get(c, "km"), same_bytes(c, "K mean", cs.k_mean, &r, (size_t)Ikv * 4);
    r = get(c, "qc"), same_bytes(c, "Q codes", cs.q, &r, (size_t)(Hq * Sq * D));
    r = get(c, "qs"), same_bytes(c, "Q scales (64-row blocks)", cs.q_scale, &r, (size_t)(Hq * ((Sq + 63) / 64)) * 4);
    r = get(c, "kc"), same_bytes(c, "K codes (smoothed)", cs.k, &r, (size_t)(Hkv * Skv * D));
    r = get(c, "ks"), same_bytes(c, "K scales (128-row blocks)", cs.k_scale, &r, (size_t)(Hkv * ((Skv + 127) / 128)) * 4);
    r = get(c, "vs"), same_bytes(c, "V scales (per channel)", cs.v_scale, &r, (size_t)Ikv * 4);
    r = get(c, "vt"), same_bytes(c, "V^T codes (E4M3, permuted)", cs.vt, &r, (size_t)(Ikv * cs.Skv_pad));
    const float scale = 1.0f / sqrtf((float)D);
    h3_bf16 *out = malloc((size_t)(Sq * I) * 2);
    h3_sage8_attention_codes(be, out, I, &cs, scale);
    float *got = malloc((size_t)(Sq * I) * 4), *ref = malloc((size_t)(Sq * I) * 4);
    const uint16_t *orf = out_ref.data;
    for (int64_t i = 0; i < Sq * I; i++) got[i] = h3_bf16_to_f32(out[i]), ref[i] = h3_bf16_to_f32(orf[i]);
    char name[96];
    snprintf(name, sizeof name, "%s out vs the torch reference", c);
    compare(name, got, ref, Sq * I, 1e-5);
    /* the exact attention in double on the same bf16 inputs: the scheme's own error */
    float *ex = malloc((size_t)(Sq * I) * 4);
    double *p = malloc((size_t)Skv * sizeof(double));
    const uint16_t *qh = q.data, *kh = k.data, *vh = v.data;
    for (int64_t i = 0; i < Sq; i++)
        for (int h = 0; h < Hq; h++) {
            const int hk = h / (Hq / Hkv);
            double mx = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < Skv; j++) {
                double sc = 0.0;
                for (int d = 0; d < D; d++)
                    sc += (double)h3_bf16_to_f32(qh[i * I + h * D + d]) * h3_bf16_to_f32(kh[j * Ikv + hk * D + d]);
                p[j] = sc * scale, mx = p[j] > mx ? p[j] : mx;
            }
            for (int64_t j = 0; j < Skv; j++) sum += p[j] = exp(p[j] - mx);
            for (int d = 0; d < D; d++) {
                double acc = 0.0;
                for (int64_t j = 0; j < Skv; j++) acc += p[j] * h3_bf16_to_f32(vh[j * Ikv + hk * D + d]);
                ex[i * I + h * D + d] = (float)(acc / sum);
            }
        }
    snprintf(name, sizeof name, "%s out vs the exact attention (the scheme's error)", c);
    compare(name, got, ex, Sq * I, 6e-2);
    free(ex), free(p);
    /* strided: q/k/v as heads of one padded fused row buffer (rows of 3 I + 8), output rows padded */
    if (Sq == Skv && Hq == Hkv) {
        const int64_t rs = 3 * I + 8, ors = I + 4;
        h3_bf16 *f = malloc((size_t)(Sq * rs) * 2), *o2 = malloc((size_t)(Sq * ors) * 2);
        for (int64_t s = 0; s < Sq; s++)
            for (int64_t i = 0; i < I; i++) {
                f[s * rs + i] = ((const uint16_t *)q.data)[s * I + i];
                f[s * rs + I + i] = ((const uint16_t *)k.data)[s * I + i];
                f[s * rs + 2 * I + i] = ((const uint16_t *)v.data)[s * I + i];
            }
        h3_sage8_attention(be, o2, ors, f, rs, D, f + I, rs, D, f + 2 * I, rs, D, Sq, Skv, Hq, Hkv, D, scale);
        int64_t bad = 0;
        for (int64_t s = 0; s < Sq; s++) bad += memcmp(o2 + s * ors, out + s * I, (size_t)I * 2) != 0;
        CHECK(bad == 0, "%s: the strided call differs from the packed one in %lld rows", c, (long long)bad);
        free(f), free(o2);
    } else { /* GQA: the one-call op on the packed layout */
        h3_bf16 *o2 = malloc((size_t)(Sq * I) * 2);
        h3_sage8_attention(be, o2, I, q.data, I, D, k.data, Ikv, D, v.data, Ikv, D, Sq, Skv, Hq, Hkv, D, scale);
        CHECK(memcmp(o2, out, (size_t)(Sq * I) * 2) == 0, "%s: h3_sage8_attention differs from the two-step calls", c);
        free(o2);
    }
    free(buf), free(out), free(got), free(ref);
}

int main(void) {
    h3_err e = {{0}};
    h3_backend *be = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    if (!be || !(fx = st_set_open("tests/fixtures/sage8/attn.safetensors", &e))) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    printf("sage8 twin vs the torch fixture:\n");
    test_case(be, "a");
    test_case(be, "b");
    /* bad shapes: reported by the backend, nothing written */
    h3_bf16 x[64] = {0}, o[16];
    for (int i = 0; i < 16; i++) o[i] = 0x7fc0;
    h3_sage8_attention(be, o, 16, x, 16, 8, x, 16, 8, x, 16, 8, 1, 1, 3, 2, 8, 0.3f);
    CHECK(h3_backend_check(be, &e) != 0 && strstr(e.msg, "multiple"), "Hq not a multiple of Hkv: reported (%s)", e.msg);
    CHECK(o[0] == 0x7fc0, "nothing written on a bad shape");
    st_set_free(fx);
    h3_backend_free(be);
    TEST_END();
}
