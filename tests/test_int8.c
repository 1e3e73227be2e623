/* INT8 W8A8 (docs/int8.md) against the torch reference (tools/reference/gen_int8.py): activation and weight codes
 * and scales bit-identical, exact int32 dot products, the dequantization epilogue (per token, grouped, with bias)
 * bit for bit, LightX2V's bf16 scales taken as stored; the tiny DiT's W8A8 forward (--quant int8, a converted
 * profile-all tree, the LightX2V-made checkpoint) against the torch W8A8 forward. Run from the repo root. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/ops.h"
#include "core/dtype.h"
#include "io/safetensors.h"
#include "model/dit.h"
#include "model/dit_int8.h"
#include "model/dit_int8_convert.h"
#include "test.h"
#include "test_data.h"

#define FIX "tests/fixtures/"

static st_set *lin;

static h3_tensor get(const char *name) {
    h3_tensor v = {0};
    h3_err e = {{0}};
    if (st_set_get(lin, name, &v, &e) != 0) fprintf(stderr, "%s\n", e.msg);
    return v;
}

static void same_bytes(const char *what, const void *a, const void *b, size_t n) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += ((const uint8_t *)a)[i] != ((const uint8_t *)b)[i];
    CHECK(bad == 0, "%s: %zu of %zu bytes differ from the torch reference", what, bad, n);
}

static void test_ops(h3_backend *be) {
    h3_err e = {{0}};
    h3_tensor x = get("x"), w = get("w"), w32 = get("w32"), bias = get("bias");
    const int64_t M = x.shape[0], K = x.shape[1], N = w.shape[0], G = 128;
    int8_t *xq = malloc((size_t)(M * K));
    float *xs = malloc((size_t)(M * K / G) * sizeof(float));
    int32_t *acc = malloc((size_t)(M * N) * sizeof(int32_t));
    h3_bf16 *y = malloc((size_t)(M * N) * sizeof(h3_bf16));
    /* per-token activations, then grouped */
    h3_int8_quant_rows(be, xq, xs, x.data, M, K, K, 0);
    h3_tensor r = get("xq");
    same_bytes("activation codes (per token)", xq, r.data, (size_t)(M * K));
    r = get("xs");
    same_bytes("activation scales (per token)", xs, r.data, (size_t)M * 4);
    int8_t *xqg = malloc((size_t)(M * K));
    float *xsg = malloc((size_t)(M * K / G) * sizeof(float));
    h3_int8_quant_rows(be, xqg, xsg, x.data, M, K, K, G);
    r = get("xqg");
    same_bytes("activation codes (groups of 128)", xqg, r.data, (size_t)(M * K));
    r = get("xsg");
    same_bytes("activation scales (groups of 128)", xsg, r.data, (size_t)(M * K / G) * 4);
    /* weights: bf16 and f32 stored values */
    h3_int8_linear l = {0}, l32 = {0}, llx = {0};
    CHECK(h3_int8_linear_new(be, &l, &w, &e) == 0, "linear_new bf16: %s", e.msg);
    CHECK(h3_int8_linear_new(be, &l32, &w32, &e) == 0, "linear_new f32: %s", e.msg);
    r = get("wq");
    same_bytes("weight codes (bf16 weight)", l.q, r.data, (size_t)(N * K));
    r = get("ws");
    same_bytes("weight scales (bf16 weight)", l.scale, r.data, (size_t)N * 4);
    r = get("wq32");
    same_bytes("weight codes (f32 weight)", l32.q, r.data, (size_t)(l32.N * K));
    r = get("ws32");
    same_bytes("weight scales (f32 weight)", l32.scale, r.data, (size_t)l32.N * 4);
    /* exact int32 products, also over a K range */
    h3_int8_gemm_s32(be, acc, xq, M, &l, 0, K);
    r = get("acc");
    same_bytes("int32 accumulators", acc, r.data, (size_t)(M * N) * 4);
    int32_t *a1 = malloc((size_t)(M * N) * 4), *a2 = malloc((size_t)(M * N) * 4);
    h3_int8_gemm_s32(be, a1, xq, M, &l, 0, 100);
    h3_int8_gemm_s32(be, a2, xq, M, &l, 100, K - 100);
    int64_t bad = 0;
    for (int64_t i = 0; i < M * N; i++) bad += a1[i] + a2[i] != acc[i];
    CHECK(bad == 0, "int32 products over [0,100) + [100,K) != over [0,K): %lld", (long long)bad);
    /* the epilogue */
    h3_int8_matmul(be, y, N, xq, xs, M, &l, NULL);
    r = get("y");
    same_bytes("y = bf16(acc * sx * sw)", y, r.data, (size_t)(M * N) * 2);
    h3_int8_matmul(be, y, N, xq, xs, M, &l, bias.data);
    r = get("yb");
    same_bytes("y = bf16(acc * sx * sw + bias)", y, r.data, (size_t)(M * N) * 2);
    l.group = G;
    h3_int8_matmul(be, y, N, xqg, xsg, M, &l, NULL);
    r = get("yg");
    same_bytes("grouped y = bf16(sum_g acc_g * sx_g * sw)", y, r.data, (size_t)(M * N) * 2);
    /* LightX2V's codes (clamp [-128, 127]) and bf16 [N, 1] scales, taken as stored */
    h3_tensor wq_lx = get("wq_lx"), ws_lx = get("ws_lx");
    CHECK(h3_int8_linear_from(be, &llx, &wq_lx, &ws_lx, &e) == 0, "linear_from (LightX2V): %s", e.msg);
    if (llx.q) {
        same_bytes("LightX2V codes taken as stored", llx.q, wq_lx.data, (size_t)(N * K));
        bad = 0;
        for (int64_t n = 0; n < N; n++) bad += llx.scale[n] != h3_bf16_to_f32(((const h3_bf16 *)ws_lx.data)[n]);
        CHECK(bad == 0, "LightX2V bf16 scales widened exactly: %lld differ", (long long)bad);
    }
    h3_int8_linear_free(be, &l), h3_int8_linear_free(be, &l32), h3_int8_linear_free(be, &llx);
    free(xq), free(xs), free(xqg), free(xsg), free(acc), free(y), free(a1), free(a2);
}

/* The tiny DiT's t2va case through the W8A8 path vs the torch W8A8 forward of the same weights. */
static void forward_case(h3_backend *be, const char *label, const char *dir, int quantize, const char *golden) {
    h3_err e = {{0}};
    st_set *in = st_set_open(FIX "golden/dit/t2va.in.safetensors", &e), *ref = st_set_open(golden, &e);
    CHECK(in && ref, "%s: fixtures: %s", label, e.msg);
    if (!in || !ref) goto out0;
    static const char *names[10] = {"hidden_states", "audio_hidden_states", "encoder_hidden_states", "timestep",
                                    "timestep_indices", "token_tags", "position_ids", "video_indices",
                                    "audio_indices", "text_indices"};
    h3_tensor *t[10] = {0};
    dit_tensors dt;
    const h3_tensor **d = (const h3_tensor **)&dt;
    for (int i = 0; i < 10; i++) {
        h3_tensor v;
        if (st_set_get(in, names[i], &v, &e) != 0) break;
        if (v.dtype == H3_F32 || v.dtype == H3_I64 || v.dtype == H3_F64) {
            t[i] = h3_tensor_new(v.dtype, v.ndim, v.shape, &e);
            if (t[i]) memcpy(t[i]->data, v.data, h3_tensor_nbytes(&v));
        } else {
            t[i] = h3_tensor_to_f32(&v, &e);
        }
        d[i] = t[i];
    }
    dit_model *m = dit_load(be, dir, DIT_BF16, &e);
    CHECK(m != NULL, "%s: load: %s", label, e.msg);
    if (!m) goto out;
    if (quantize) CHECK(dit_quantize_int8(m, 0, &e) == 0, "%s: --quant int8: %s", label, e.msg);
    CHECK(dit_int8_profile(m) != DIT_INT8_NONE, "%s: the model runs int8", label);
    dit_inputs di;
    if (dit_inputs_from_tensors(dit_get_config(m), &dt, 0, &di, &e) == 0) {
        const dit_config *c = dit_get_config(m);
        int64_t nv = di.Nv * c->in_channels * 4, na = di.Na * c->audio_in_channels;
        float *v = malloc((size_t)nv * 4), *a = malloc((size_t)na * 4);
        int rc = dit_forward(m, &di, v, a, &e);
        CHECK(rc == 0, "%s: forward: %s", label, e.msg);
        h3_tensor rv, ra;
        if (rc == 0 && st_set_get(ref, "sample", &rv, &e) == 0 && st_set_get(ref, "audio_sample", &ra, &e) == 0) {
            char nm[200];
            snprintf(nm, sizeof nm, "%s video vs torch W8A8 (max_abs %.2e)", label,
                     h3_max_abs(v, rv.data, (size_t)nv));
            CHECK_CLOSE(nm, h3_rel_l2(v, rv.data, (size_t)nv), 3e-2);
            snprintf(nm, sizeof nm, "%s audio vs torch W8A8 (max_abs %.2e)", label,
                     h3_max_abs(a, ra.data, (size_t)na));
            CHECK_CLOSE(nm, h3_rel_l2(a, ra.data, (size_t)na), 3e-2);
            st_set *f32 = st_set_open(FIX "golden/dit/t2va.out.safetensors", &e);
            h3_tensor fv, fa;
            if (f32 && st_set_get(f32, "sample", &fv, &e) == 0 && st_set_get(f32, "audio_sample", &fa, &e) == 0)
                printf("  %s vs the fp32 reference (diffusers, fp32): video rel L2 %.3e max_abs %.2e, audio %.3e / %.2e\n",
                       label, h3_rel_l2(v, fv.data, (size_t)nv), h3_max_abs(v, fv.data, (size_t)nv),
                       h3_rel_l2(a, fa.data, (size_t)na), h3_max_abs(a, fa.data, (size_t)na));
            st_set_free(f32);
        }
        free(v), free(a);
    } else {
        CHECK(0, "%s: inputs: %s", label, e.msg);
    }
    dit_free(m);
out:
    for (int i = 0; i < 10; i++) h3_tensor_free(t[i]);
out0:
    st_set_free(in), st_set_free(ref);
}

static int copy_file(const char *src, const char *dst) {
    FILE *a = fopen(src, "rb"), *b = a ? fopen(dst, "wb") : NULL;
    char buf[4096];
    size_t n;
    int ok = a && b;
    while (ok && (n = fread(buf, 1, sizeof buf, a)) > 0) ok = fwrite(buf, 1, n, b) == n;
    if (a) fclose(a);
    if (b) fclose(b);
    return ok ? 0 : -1;
}

int main(void) {
    h3_err e = {{0}};
    h3_backend *be = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    if (!be || !(lin = st_set_open(FIX "int8/linear.safetensors", &e))) {
        fprintf(stderr, "%s\n", e.msg);
        return 1;
    }
    printf("int8 ops vs the torch fixture:\n");
    test_ops(be);
    printf("tiny DiT t2va, W8A8:\n");
    forward_case(be, "--quant int8", FIX "tiny/transformer", 1, FIX "golden/dit/t2va.int8.out.safetensors");
    forward_case(be, "--quant int8 original layout", FIX "tiny/FL2VA/transformer", 1,
                 FIX "golden/dit/t2va.int8.out.safetensors");
    forward_case(be, "LightX2V checkpoint (parts)", FIX "int8/lightx2v", 0, FIX "golden/dit/t2va.int8lx.out.safetensors");
    forward_case(be, "LightX2V checkpoint (single)", FIX "int8/lightx2v_single", 0,
                 FIX "golden/dit/t2va.int8lx.out.safetensors");
    char tmp[] = "/tmp/h3_int8_XXXXXX";
    if (mkdtemp(tmp)) {
        char dst[256], cfg[300];
        snprintf(dst, sizeof dst, "%s/all", tmp);
        snprintf(cfg, sizeof cfg, "%s/config.json", dst);
        mkdir(dst, 0755);
        int rc = dit_int8_convert_tree(FIX "tiny/transformer", dst, DIT_INT8_ALL, NULL, NULL, &e);
        CHECK(rc == 0 && copy_file(FIX "tiny/transformer/config.json", cfg) == 0, "convert profile all: %s", e.msg);
        if (rc == 0) forward_case(be, "converted profile all", dst, 0, FIX "golden/dit/t2va.int8all.out.safetensors");
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    }
    st_set_free(lin);
    h3_backend_free(be);
    TEST_END();
}
