/* The bf16 activation ops (backend_bf16.h): every CUDA twin against its CPU twin on fresh random
 * bf16 inputs, device outputs poisoned with NaN first. Built with CUDA=1 (make cuda-tests), run on the
 * GPU machine (tests/cuda/run_device.sh). Tolerances (relative L2): element-wise ops and norms 1e-6
 * (same operation order: expect 0), SwiGLU 1e-3 (GPU expf ulps can flip a bf16 rounding), GEMMs 1e-2
 * (tensor-core summation order, one bf16 rounding), attention 1e-2 (the GPU also rounds P to bf16). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "test_data.h"
#include "backend/backend.h"
#include "backend/backend_bf16.h"
#include "core/dtype.h"
#include "core/tensor.h"

static h3_backend *cpu, *gpu;
static void *dev(const void *host, size_t bytes) {
    void *d = h3_alloc(gpu, bytes);
    h3_upload(gpu, d, host, bytes);
    return d;
}

/* a device copy of host data in which the listed output elements are NaN (bf16 0x7fc0) */
static h3_bf16 *dev_poisoned16(const h3_bf16 *host, int64_t n) {
    h3_bf16 *p = malloc((size_t)n * 2);
    for (int64_t i = 0; i < n; i++) p[i] = host ? host[i] : 0x7fc0;
    h3_bf16 *d = dev(p, (size_t)n * 2);
    free(p);
    return d;
}

static void compare16(const char *name, const h3_bf16 *d, const h3_bf16 *ref, int64_t n, double tol) {
    h3_bf16 *g = malloc((size_t)n * 2);
    float *gf = malloc((size_t)n * sizeof(float)), *rf = malloc((size_t)n * sizeof(float));
    h3_download(gpu, g, d, (size_t)n * 2);
    int64_t diff = 0;
    for (int64_t i = 0; i < n; i++) {
        gf[i] = h3_bf16_to_f32(g[i]), rf[i] = h3_bf16_to_f32(ref[i]);
        diff += g[i] != ref[i];
    }
    double rel = h3_rel_l2(gf, rf, (size_t)n), mx = h3_max_abs(gf, rf, (size_t)n);
    if (rel != rel) rel = INFINITY;
    printf("  %-58s max_abs %.3e, %lld of %lld differ\n", name, mx, (long long)diff, (long long)n);
    CHECK_CLOSE(name, rel, tol);
    free(g), free(gf), free(rf);
}

/* a BF16 weight [N, K] on both backends */
typedef struct { h3_tensor *host, *dev; } weight;

static weight make_weight(h3_dtype t, int ndim, const int64_t *shape, float scale) {
    h3_err e;
    weight w;
    w.host = h3_tensor_new(t, ndim, shape, &e);
    int64_t n = h3_tensor_numel(w.host);
    float *v = rand_offset(n, scale, 0.0f);
    h3_convert_from_f32(w.host->data, t, v, (size_t)n);
    free(v);
    w.dev = h3_weight_upload(gpu, w.host, &e);
    return w;
}

static void free_weight(weight w) {
    h3_weight_free(gpu, w.dev);
    h3_tensor_free(w.host);
}

static void test_matmul(const char *name, int64_t M, int64_t N, int64_t K, int64_t ldx, int64_t ldy, int bias,
                        h3_dtype bt) {
    int64_t ws[2] = {N, K}, bs[1] = {N};
    weight w = make_weight(H3_BF16, 2, ws, 1.0f / sqrtf((float)K)), b = {0};
    if (bias) b = make_weight(bt, 1, bs, 0.5f);
    h3_bf16 *x = rand_bf16(M * ldx, 1.0f), *y = rand_bf16(M * ldy, 1.0f); /* y: columns >= N must stay */
    h3_bf16 *dx = dev(x, (size_t)(M * ldx) * 2);
    h3_bf16 *poison = malloc((size_t)(M * ldy) * 2);
    for (int64_t i = 0; i < M * ldy; i++) poison[i] = i % ldy < N ? 0x7fc0 : y[i];
    h3_bf16 *dy = dev_poisoned16(poison, M * ldy);
    h3_bf16_matmul(cpu, y, ldy, x, ldx, M, w.host, bias ? b.host : NULL);
    h3_bf16_matmul(gpu, dy, ldy, dx, ldx, M, w.dev, bias ? b.dev : NULL);
    compare16(name, dy, y, M * ldy, 1e-2);
    h3_free(gpu, dx), h3_free(gpu, dy);
    free(x), free(y), free(poison);
    free_weight(w);
    if (bias) free_weight(b);
}

static void test_norm_modulate(const char *name, int64_t rows, int64_t dim, int with_table, int with_gain) {
    int K3 = 6;
    int64_t stride = 6 * dim;
    h3_bf16 *x = rand_bf16(rows * dim, 2.0f), *y = malloc((size_t)(rows * dim) * 2);
    float *w = rand_offset(dim, 0.2f, 1.0f), *tab = rand_offset(K3 * stride, 0.5f, 0.0f);
    for (int64_t i = 0; i < K3 * stride; i++) tab[i] = h3_round_bf16(tab[i]);
    int32_t *idx = malloc((size_t)rows * sizeof(int32_t));
    for (int64_t r = 0; r < rows; r++) idx[r] = (int32_t)((r * 7) % K3);
    h3_bf16_rmsnorm_modulate(cpu, y, x, rows, dim, with_gain ? w : NULL, 1e-5f, with_table ? tab : NULL, stride, idx,
                             3 * dim, 4 * dim);
    h3_bf16 *dx = dev(x, (size_t)(rows * dim) * 2), *dy = dev_poisoned16(NULL, rows * dim);
    float *dw = dev(w, (size_t)dim * 4), *dt = dev(tab, (size_t)(K3 * stride) * 4);
    int32_t *di = dev(idx, (size_t)rows * 4);
    h3_bf16_rmsnorm_modulate(gpu, dy, dx, rows, dim, with_gain ? dw : NULL, 1e-5f, with_table ? dt : NULL, stride,
                             di, 3 * dim, 4 * dim);
    compare16(name, dy, y, rows * dim, 1e-6);
    /* in place (y aliases x), as the refiner's final norm */
    h3_bf16_rmsnorm_modulate(gpu, dx, dx, rows, dim, with_gain ? dw : NULL, 1e-5f, with_table ? dt : NULL, stride,
                             di, 3 * dim, 4 * dim);
    compare16("  ... in place", dx, y, rows * dim, 1e-6);
    h3_free(gpu, dx), h3_free(gpu, dy), h3_free(gpu, dw), h3_free(gpu, dt), h3_free(gpu, di);
    free(x), free(y), free(w), free(tab), free(idx);
}

/* heads of a fused [rows][3 * heads * D] buffer: planar (q | k | v) or per-head interleaved */
static void test_head_norm_rope(const char *name, int64_t rows, int heads, int D, int rot, int interleaved, int rope) {
    int64_t I = (int64_t)heads * D, rs = 3 * I, hs = interleaved ? 3 * D : D, koff = interleaved ? D : I;
    h3_bf16 *x = rand_bf16(rows * rs, 3.0f);
    float *w = rand_offset(D, 0.2f, 1.0f), *cs = rand_offset(rows * rot, 1.0f, 0.0f), *sn = rand_offset(rows * rot, 1.0f, 0.0f);
    h3_bf16 *dx = dev(x, (size_t)(rows * rs) * 2);
    float *dw = dev(w, (size_t)D * 4), *dc = dev(cs, (size_t)(rows * rot) * 4), *ds = dev(sn, (size_t)(rows * rot) * 4);
    h3_bf16_head_norm_rope(cpu, x + koff, rows, rs, heads, hs, D, w, 1e-5f, rot, rope ? cs : NULL, rope ? sn : NULL);
    h3_bf16_head_norm_rope(gpu, dx + koff, rows, rs, heads, hs, D, dw, 1e-5f, rot, rope ? dc : NULL, rope ? ds : NULL);
    compare16(name, dx, x, rows * rs, 1e-6); /* the whole buffer: q and v must be untouched */
    h3_free(gpu, dx), h3_free(gpu, dw), h3_free(gpu, dc), h3_free(gpu, ds);
    free(x), free(w), free(cs), free(sn);
}

static void test_attention(const char *name, int64_t Sq, int64_t Skv, int Hq, int Hkv, int D, int interleaved) {
    /* q, k, v as the DiT reads them: heads of one fused buffer (Sq == Skv), or separate buffers */
    int fused = Sq == Skv && Hq == Hkv;
    int64_t I = (int64_t)Hq * D, Ikv = (int64_t)Hkv * D;
    int64_t rs = fused ? 3 * I : I + 8, rskv = fused ? 3 * I : Ikv + 24;
    int64_t hs = fused && interleaved ? 3 * D : D;
    int64_t koff = fused ? (interleaved ? D : I) : 0, voff = fused ? (interleaved ? 2 * D : 2 * I) : 0;
    int64_t ors = I + 16;
    h3_bf16 *qb = rand_bf16(Sq * rs, 2.0f), *kb = fused ? qb : rand_bf16(Skv * rskv, 2.0f), *vb = fused ? qb : rand_bf16(Skv * rskv, 1.0f);
    h3_bf16 *o = malloc((size_t)(Sq * ors) * 2);
    for (int64_t i = 0; i < Sq * ors; i++) o[i] = 0;
    float scale = 1.0f / sqrtf((float)D);
    h3_bf16_attention(cpu, o, ors, qb, rs, hs, kb + koff, rskv, hs, vb + voff, rskv, hs, Sq, Skv, Hq, Hkv, D, scale);
    h3_bf16 *dq = dev(qb, (size_t)(Sq * rs) * 2);
    h3_bf16 *dk = fused ? dq : dev(kb, (size_t)(Skv * rskv) * 2), *dv = fused ? dq : dev(vb, (size_t)(Skv * rskv) * 2);
    h3_bf16 *poison = malloc((size_t)(Sq * ors) * 2);
    for (int64_t i = 0; i < Sq * ors; i++) poison[i] = i % ors < I ? 0x7fc0 : 0;
    h3_bf16 *dout = dev_poisoned16(poison, Sq * ors);
    h3_bf16_attention(gpu, dout, ors, dq, rs, hs, dk + koff, rskv, hs, dv + voff, rskv, hs, Sq, Skv, Hq, Hkv, D, scale);
    compare16(name, dout, o, Sq * ors, 1e-2);
    h3_free(gpu, dq), h3_free(gpu, dout);
    if (!fused) h3_free(gpu, dk), h3_free(gpu, dv), free(kb), free(vb);
    free(qb), free(o), free(poison);
}

static void test_gated_residual(const char *name, int64_t rows, int64_t dim, int with_table) {
    int K3 = 3;
    int64_t stride = 6 * dim;
    h3_bf16 *x = rand_bf16(rows * dim, 2.0f), *br = rand_bf16(rows * dim, 2.0f);
    float *tab = rand_offset(K3 * stride, 0.5f, 0.0f);
    int32_t *idx = malloc((size_t)rows * sizeof(int32_t));
    for (int64_t r = 0; r < rows; r++) idx[r] = (int32_t)((r * 5) % K3);
    h3_bf16 *dx = dev(x, (size_t)(rows * dim) * 2), *db = dev(br, (size_t)(rows * dim) * 2);
    float *dt = dev(tab, (size_t)(K3 * stride) * 4);
    int32_t *di = dev(idx, (size_t)rows * 4);
    h3_bf16_gated_residual(cpu, x, br, rows, dim, with_table ? tab : NULL, stride, idx, 2 * dim);
    h3_bf16_gated_residual(gpu, dx, db, rows, dim, with_table ? dt : NULL, stride, di, 2 * dim);
    compare16(name, dx, x, rows * dim, 1e-6);
    h3_free(gpu, dx), h3_free(gpu, db), h3_free(gpu, dt), h3_free(gpu, di);
    free(x), free(br), free(tab), free(idx);
}

/* compare16 with tolerance 0 and every bf16 bit pattern equal (the sign of zeros too) */
static void compare16_bits(const char *name, const h3_bf16 *d, const h3_bf16 *ref, int64_t n) {
    compare16(name, d, ref, n, 0.0);
    h3_bf16 *g = malloc((size_t)n * 2);
    h3_download(gpu, g, d, (size_t)n * 2);
    int64_t diff = 0;
    for (int64_t i = 0; i < n; i++) diff += g[i] != ref[i];
    CHECK(diff == 0, "%s: %lld bf16 values differ", name, (long long)diff);
    free(g);
}

/* The DiT's AdaLN row of each packed row, timestep * 3 + tag: video rows first (the first 1/32 at a second
 * timestep, like conditioning frames), then audio rows, then text rows. */
static int32_t *dit_row_index(int64_t rows) {
    int32_t *idx = malloc((size_t)rows * sizeof(int32_t));
    const int64_t nt = rows > 1024 ? 256 : rows / 4, na = rows / 8;
    for (int64_t r = 0; r < rows; r++) {
        int tag = r >= rows - nt ? 1 : r >= rows - nt - na ? 2 : 0, t = tag == 0 && r < rows / 32;
        idx[r] = (int32_t)(t * 3 + tag);
    }
    return idx;
}

/* The fused gated residual + RMSNorm/modulation against its CPU twin, x and y bit for bit. The tables as in the DiT:
 * per block 2 timesteps x 3 modalities rows of 6 slots (bf16 values); the gate is block 0's slot 2 with the
 * modulation of its slots 3/4 (norm2), or next_block: slot 5 with block 1's slots 0/1 (the next block's norm1).
 * tables 0: no gate, no modulation (the refiner); in_place: y = x (the refiner's final norm); y_off: y that many
 * elements into its buffer (odd: not 16-byte aligned, the fallback). */
static void test_residual_norm(const char *name, int64_t rows, int64_t dim, int tables, int gain, int next_block,
                               int in_place, int64_t y_off) {
    const int64_t row6 = 6 * dim, per_block = 2 * 3 * row6, n = rows * dim;
    h3_bf16 *x = rand_bf16(n, 2.0f), *br = rand_bf16(n, 2.0f), *xc = malloc((size_t)n * 2), *yc = malloc((size_t)n * 2);
    float *w = rand_offset(dim, 0.2f, 1.0f), *tab = rand_offset(2 * per_block, 0.5f, 0.0f);
    for (int64_t i = 0; i < 2 * per_block; i++) tab[i] = h3_round_bf16(tab[i]);
    int32_t *idx = dit_row_index(rows);
    memcpy(xc, x, (size_t)n * 2);
    h3_bf16 *dx = dev(x, (size_t)n * 2), *db = dev(br, (size_t)n * 2), *dy = dev_poisoned16(NULL, n + y_off);
    float *dw = dev(w, (size_t)dim * 4), *dt = dev(tab, (size_t)(2 * per_block) * 4);
    int32_t *di = dev(idx, (size_t)rows * 4);
    const int64_t mod = next_block ? per_block : 0, sh = next_block ? 0 : 3 * dim, sc = next_block ? dim : 4 * dim;
    const int64_t gate_off = next_block ? 5 * dim : 2 * dim;
    h3_bf16_gated_residual_rmsnorm_modulate(cpu, xc, br, in_place ? xc : yc, rows, dim, tables ? tab : NULL, row6, idx,
                                            gate_off, gain ? w : NULL, 1e-6f, tables ? tab + mod : NULL, row6, idx, sh,
                                            sc);
    h3_bf16_gated_residual_rmsnorm_modulate(gpu, dx, db, in_place ? dx : dy + y_off, rows, dim, tables ? dt : NULL,
                                            row6, di, gate_off, gain ? dw : NULL, 1e-6f, tables ? dt + mod : NULL, row6,
                                            di, sh, sc);
    char label[120];
    snprintf(label, sizeof label, "%s: x", name);
    compare16_bits(label, dx, xc, n);
    if (!in_place) {
        snprintf(label, sizeof label, "%s: y", name);
        compare16_bits(label, dy + y_off, yc, n);
    }
    h3_free(gpu, dx), h3_free(gpu, db), h3_free(gpu, dy), h3_free(gpu, dw), h3_free(gpu, dt), h3_free(gpu, di);
    free(x), free(br), free(xc), free(yc), free(w), free(tab), free(idx);
}

static void test_swiglu(const char *name, int64_t rows, int64_t ff, int gate_first) {
    int64_t ldz = 2 * ff;
    h3_bf16 *z = rand_bf16(rows * ldz, 4.0f), *y = malloc((size_t)(rows * ff) * 2);
    int64_t voff = gate_first ? ff : 0, goff = gate_first ? 0 : ff;
    h3_bf16_swiglu(cpu, y, z, rows, ff, ldz, voff, goff);
    h3_bf16 *dz = dev(z, (size_t)(rows * ldz) * 2), *dy = dev_poisoned16(NULL, rows * ff);
    h3_bf16_swiglu(gpu, dy, dz, rows, ff, ldz, voff, goff);
    compare16(name, dy, y, rows * ff, 1e-3);
    h3_free(gpu, dz), h3_free(gpu, dy);
    free(z), free(y);
}

/* --token-reduction's pool / restore: a DiT-like table (prefix rows, then a 3-wide token grid: pairs and a singleton) */
static void test_token_reduction(void) {
    const int64_t P = 40, F = 5, gh = 7, gw = 3, gwr = 2, dim = 5376, S = P + F * gh * gw, Sr = P + F * gh * gwr;
    int32_t *pairs = malloc((size_t)(2 * Sr) * 4), *parent = malloc((size_t)S * 4);
    for (int64_t i = 0; i < Sr; i++) {
        int64_t a = i, b = i;
        if (i >= P) {
            int64_t l = i - P, col = 2 * (l % gwr);
            a = P + (l / gwr) * gw + col, b = col + 1 < gw ? a + 1 : a;
        }
        pairs[2 * i] = (int32_t)a, pairs[2 * i + 1] = (int32_t)b;
    }
    for (int64_t r = 0; r < S; r++) parent[r] = (int32_t)(r < P ? r : P + ((r - P) / gw) * gwr + ((r - P) % gw) / 2);
    h3_bf16 *x = rand_bf16(S * dim, 4.0f), *red = rand_bf16(Sr * dim, 4.0f), *base = rand_bf16(Sr * dim, 4.0f);
    h3_bf16 *y = malloc((size_t)(Sr * dim) * 2);
    h3_bf16 *dx = dev(x, (size_t)(S * dim) * 2), *dred = dev(red, (size_t)(Sr * dim) * 2), *dbase = dev(base, (size_t)(Sr * dim) * 2);
    int32_t *dpairs = dev(pairs, (size_t)(2 * Sr) * 4), *dparent = dev(parent, (size_t)S * 4);
    h3_bf16 *dy = dev_poisoned16(NULL, Sr * dim);
    h3_bf16_rows_pool_pairs(cpu, y, x, pairs, Sr, dim);
    h3_bf16_rows_pool_pairs(gpu, dy, dx, dpairs, Sr, dim);
    compare16("rows_pool_pairs 775 -> 390 rows x 5376", dy, y, Sr * dim, 0.0);
    h3_bf16_rows_expand_delta(cpu, x, red, base, parent, S, P, dim, 0.75f);
    h3_bf16_rows_expand_delta(gpu, dx, dred, dbase, dparent, S, P, dim, 0.75f);
    compare16("rows_expand_delta 390 -> 775 rows, scale 0.75", dx, x, S * dim, 0.0);
    h3_free(gpu, dx), h3_free(gpu, dred), h3_free(gpu, dbase), h3_free(gpu, dpairs), h3_free(gpu, dparent), h3_free(gpu, dy);
    free(pairs), free(parent), free(x), free(red), free(base), free(y);
}

static void test_rows(void) {
    int64_t n = 300, dim = 96, S = 500;
    int32_t *idx = malloc((size_t)n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++) idx[i] = (int32_t)((i * 37 + 11) % S); /* distinct: 37 and 500 coprime */
    h3_bf16 *src = rand_bf16(n * dim, 1.0f), *dst = rand_bf16(S * dim, 1.0f);
    float *srcf = rand_offset(n * dim, 1.0f, 0.0f);
    h3_bf16 *dsrc = dev(src, (size_t)(n * dim) * 2), *ddst = dev(dst, (size_t)(S * dim) * 2);
    float *dsrcf = dev(srcf, (size_t)(n * dim) * 4);
    int32_t *di = dev(idx, (size_t)n * 4);
    h3_bf16_rows_scatter(cpu, dst, src, idx, n, dim);
    h3_bf16_rows_scatter(gpu, ddst, dsrc, di, n, dim);
    compare16("rows_scatter bf16 (300 of 500 rows)", ddst, dst, S * dim, 0.0);
    h3_bf16_rows_scatter_f32(cpu, dst, srcf, idx, n, dim);
    h3_bf16_rows_scatter_f32(gpu, ddst, dsrcf, di, n, dim);
    compare16("rows_scatter_f32 (rounding)", ddst, dst, S * dim, 0.0);
    float *g = malloc((size_t)(n * dim) * 4), *gd = malloc((size_t)(n * dim) * 4);
    h3_bf16_rows_gather_f32(cpu, g, dst, idx, n, dim);
    float *dg = dev(g, (size_t)(n * dim) * 4);
    h3_bf16_rows_gather_f32(gpu, dg, ddst, di, n, dim);
    h3_download(gpu, gd, dg, (size_t)(n * dim) * 4);
    CHECK_CLOSE("rows_gather_f32 (exact)", h3_rel_l2(gd, g, (size_t)(n * dim)), 0.0);
    /* pack / unpack */
    h3_bf16 *p = malloc((size_t)(n * dim) * 2);
    h3_bf16_pack(cpu, p, srcf, n * dim);
    h3_bf16 *dp = dev_poisoned16(NULL, n * dim);
    h3_bf16_pack(gpu, dp, dsrcf, n * dim);
    compare16("pack fp32 -> bf16", dp, p, n * dim, 0.0);
    h3_bf16_unpack(cpu, g, p, n * dim);
    h3_bf16_unpack(gpu, dg, dp, n * dim);
    h3_download(gpu, gd, dg, (size_t)(n * dim) * 4);
    CHECK_CLOSE("unpack bf16 -> fp32", h3_rel_l2(gd, g, (size_t)(n * dim)), 0.0);
    h3_free(gpu, dsrc), h3_free(gpu, ddst), h3_free(gpu, dsrcf), h3_free(gpu, di), h3_free(gpu, dg), h3_free(gpu, dp);
    free(idx), free(src), free(dst), free(srcf), free(g), free(gd), free(p);
}

int main(int argc, char **argv) {
    h3_err e;
    test_seed(0x9E3779B97F4A7C15ull);
    cpu = h3_backend_new(H3_BACKEND_CPU, 0, &e);
    gpu = h3_backend_new(H3_BACKEND_CUDA, 0, &e);
    if (!cpu || !gpu) {
        fprintf(stderr, "test_cuda_bf16: %s\n", e.msg);
        return 2;
    }
    test_rows();
    test_token_reduction();
    test_matmul("matmul 300x384x512, strided x/y, F32 bias", 300, 384, 512, 520, 400, 1, H3_F32);
    test_matmul("matmul 300x384x512, BF16 bias", 300, 384, 512, 512, 384, 1, H3_BF16);
    test_matmul("matmul 257x3000x5376, no bias, y slice of 9000", 257, 3000, 5376, 5376, 9000, 0, H3_F32);
    test_matmul("matmul 2122x2048x2048 + bias (VAE width)", 2122, 2048, 2048, 2048, 2048, 1, H3_F32);
    test_norm_modulate("rmsnorm+modulate 300x5376", 300, 5376, 1, 1);
    test_norm_modulate("rmsnorm (no table) 300x5376", 300, 5376, 0, 1);
    test_norm_modulate("rmsnorm+modulate 77x100 (unvectorized)", 77, 100, 1, 1);
    test_norm_modulate("rmsnorm no gain 50x2048", 50, 2048, 0, 0);
    test_head_norm_rope("head norm+rope D128 rot96, planar", 200, 4, 128, 96, 0, 1);
    test_head_norm_rope("head norm+rope D128 rot96, interleaved", 200, 4, 128, 96, 1, 1);
    test_head_norm_rope("head norm (no rope) D128, planar", 150, 3, 128, 96, 0, 0);
    test_head_norm_rope("head norm+rope D64 rot48 (VAE)", 180, 5, 64, 48, 0, 1);
    test_head_norm_rope("head norm+rope D32 rot12 (tiny model, generic kernel)", 90, 3, 32, 12, 1, 1);
    test_head_norm_rope("head norm+rope D128 rot40 (generic kernel)", 60, 2, 128, 40, 0, 1);
    test_attention("attention S300 H4 D128, fused planar", 300, 300, 4, 4, 128, 0);
    test_attention("attention S300 H4 D128, fused interleaved", 300, 300, 4, 4, 128, 1);
    test_attention("attention Sq100 Skv700 H4/2 D64, separate", 100, 700, 4, 2, 64, 0);
    test_attention("attention S2122 H56 D128, fused planar", 2122, 2122, 56, 56, 128, 0);
    test_attention("attention S77 H3 D32, fused interleaved (fp32 kernel)", 77, 77, 3, 3, 32, 1);
    test_attention("attention S1797 H32 D64, fused planar (VAE tile)", 1797, 1797, 32, 32, 64, 0);
    test_gated_residual("gated residual 300x5376", 300, 5376, 1);
    test_gated_residual("residual add (no table) 300x5376", 300, 5376, 0);
    test_gated_residual("gated residual 33x100 (unvectorized)", 33, 100, 1);
    test_residual_norm("residual+norm2 19540x5376 (DiT table, gate 2, mod 3/4)", 19540, 5376, 1, 1, 0, 0, 0);
    test_residual_norm("residual+next norm1 19540x5376 (gate 5, next block 0/1)", 19540, 5376, 1, 1, 1, 0, 0);
    test_residual_norm("add+rmsnorm 300x5376 (refiner: no tables)", 300, 5376, 0, 1, 0, 0, 0);
    test_residual_norm("add+rmsnorm in place 300x5376 (refiner final)", 300, 5376, 0, 1, 0, 1, 0);
    test_residual_norm("residual+norm no gain 50x2048", 50, 2048, 1, 0, 0, 0, 0);
    test_residual_norm("residual+norm 33x100 (fallback: dim % 8)", 33, 100, 1, 1, 1, 0, 0);
    test_residual_norm("residual+norm 50x2048, y unaligned (fallback)", 50, 2048, 1, 1, 0, 0, 1);
    /* the other rounding forms (H3_BF16_ROUND=sw: integer, hw: hardware with the NaN test everywhere; the default
     * adds the packed pair conversions) on backends of their own: the same bits as the CPU twins */
    static const char *const forms[2] = {"sw", "hw"};
    for (int f = 0; f < 2; f++) {
        const char *prev_env = getenv("H3_BF16_ROUND");
        char *prev = prev_env ? strdup(prev_env) : NULL;
        setenv("H3_BF16_ROUND", forms[f], 1);
        h3_backend *dflt = gpu;
        gpu = h3_backend_new(H3_BACKEND_CUDA, 0, &e);
        if (prev) setenv("H3_BF16_ROUND", prev, 1);
        else unsetenv("H3_BF16_ROUND");
        free(prev);
        CHECK(gpu != NULL, "a second CUDA backend (H3_BF16_ROUND=%s): %s", forms[f], e.msg);
        if (gpu) {
            char nm[96];
            snprintf(nm, sizeof nm, "residual+norm 300x5376, H3_BF16_ROUND=%s", forms[f]);
            test_residual_norm(nm, 300, 5376, 1, 1, 1, 0, 0);
            snprintf(nm, sizeof nm, "rmsnorm+modulate 300x5376, H3_BF16_ROUND=%s", forms[f]);
            test_norm_modulate(nm, 300, 5376, 1, 1);
            snprintf(nm, sizeof nm, "head norm+rope D128 rot96, H3_BF16_ROUND=%s", forms[f]);
            test_head_norm_rope(nm, 200, 4, 128, 96, 0, 1);
            snprintf(nm, sizeof nm, "gated residual 300x5376, H3_BF16_ROUND=%s", forms[f]);
            test_gated_residual(nm, 300, 5376, 1);
            snprintf(nm, sizeof nm, "swiglu 300x14336, H3_BF16_ROUND=%s", forms[f]);
            test_swiglu(nm, 300, 14336, 0);
            h3_sync(gpu);
            CHECK(h3_backend_check(gpu, &e) == 0, "H3_BF16_ROUND=%s backend: %s", forms[f], e.msg);
            h3_backend_free(gpu);
        }
        gpu = dflt;
    }
    test_swiglu("swiglu 300x14336 value first", 300, 14336, 0);
    test_swiglu("swiglu 300x1000 gate first", 300, 1000, 1);
    test_swiglu("swiglu 20x99 (unvectorized)", 20, 99, 0);
    h3_sync(gpu);
    if (h3_backend_check(gpu, &e) != 0) {
        fprintf(stderr, "test_cuda_bf16: %s\n", e.msg);
        CHECK(0, "cuda backend recorded an error");
    }
    h3_backend_free(gpu);
    h3_backend_free(cpu);
    TEST_END();
}
