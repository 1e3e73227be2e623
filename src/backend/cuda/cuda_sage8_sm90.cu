/* Hopper (sm_90a) 8-bit attention forward (ops_attention.h, docs/fast.md): head_dim 128, non-causal, on the codes of
 * h3_sage8_quantize. cuda_sage8_sm90() launches it; cuda_sage8.cu calls it and falls back to the plain kernel.
 *
 * The structure of cuda_flash_sm90.cu (its exact bf16 twin): one CTA = 128 query rows of one head, 384 threads:
 *   warpgroup 0  producer: one thread issues the TMA loads (Q once, then K and V^T tiles of 128 keys into an
 *                ST-deep ring of 128B-swizzled stages; mbarriers: transaction counts for "full", per-warp arrivals
 *                for "empty");
 *   warpgroups 1, 2  consumers, 64 query rows each (one Q scale each: H3_SAGE8_BQ = 64):
 *                S = Qc Kc^T with wgmma m64n128k32 s32.s8.s8 (both operands from shared memory, K-major), exact
 *                int32; S to fp32 by the magic-number trick (|S| <= 127^2 * 128 < 2^22, so int + 0x4B400000 read
 *                as a float, minus 1.5 * 2^23, is exact and costs no I2F); fp32 online softmax with the scale and
 *                log2(e) folded into fsc = q_scale * sl2 * k_scale (one FFMA per score, exp2 of the log2 domain);
 *                P * 448 to E4M3 in registers (cvt.rn.satfinite.e4m3x2) as the register A operand of
 *                wgmma m64n128k32 f32.e4m3.e4m3 with B = V^T (K-major: tokens contiguous) into a fresh fp32
 *                accumulator per tile, added to the fp32 output registers (the two-level accumulation).
 * Every tile is 128 rows of 128 bytes (Q and K: 128 int8 channels; V^T: 128 fp8 tokens per channel), so each is
 * one TMA box of one 128B swizzle span and the wgmma k32 steps are +32-byte descriptor offsets.
 * The QK^T accumulator of a thread holds, for k-step kk, keys {2t, 2t+1, 8+2t, 9+2t, 16+2t, ...} of its rows,
 * while the 8-bit A fragment's register r holds logical columns 4t..4t+3 (+16): the quantizer stores V^T's tokens
 * in that order (h3_sage8_vt_token), so the accumulator bytes are used as they are, with no shuffles.
 * Variants (template parameters, tuning; measured in docs/fast.md 5): ST stages; OV = 1 overlaps the softmax of
 * tile j with P V of tile j-1; PP = 1 adds the ping-pong between the two consumer warpgroups; CV = 1 converts S
 * with the int32 -> fp32 instruction instead of the magic-number trick (the same values); EP > 0 computes EP of
 * every 16 score chunks' exp2 with a polynomial on the FMA pipe instead of the MUFU (ex2_poly: the same
 * approximation class); CV = 2 leaves the trick's offset in the float and takes it out in the softmax's FFMA (not the
 * twin's bits: the product's rounding); MX = 1 takes the row maxima on the int32 accumulator with the three-input
 * integer max; AF = 1 keeps the output one tile behind and updates it with one FFMA per value (o * c + pv) instead
 * of an add and, when the max moved, a multiply. A deeper overlap (Q K^T of tile j+1 before the output update of
 * tile j-1, double-buffered P fragments) spilled and lost; it was removed after the measurement. The default
 * (variant 17: ST 3, MX, AF) is the fastest of session 15's run (docs/fast.md 5, run 3). */
#include "cuda_internal.h"

#include <cuda.h> /* CUtensorMap and its enums only: the encoder comes from cudaGetDriverEntryPoint */
#include <limits.h>
#include <math.h>

#include "cuda_sage8.h"

namespace {

#include "cuda_sm90_common.h" /* mbarriers, TMA loads, wgmma fences and descriptors, named barriers, the map encoder */

constexpr int BM = 128, BN = 128, HD = 128, THREADS = 384;
constexpr uint32_t TILE = 128 * 128; /* bytes of every shared-memory tile */

struct Params {
    uint16_t    *out;
    int64_t      o_rs;
    const float *q_scale, *k_scale, *v_scale;
    int          Sq, Skv, group, n_tiles, nqb, nkb;
    float        sl2; /* scale * log2(e) */
};

#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)

/* four E4M3 codes (round to nearest even, saturating), x0 in the lowest byte */
__device__ __forceinline__ uint32_t e4m3x4(float x0, float x1, float x2, float x3) {
    uint16_t lo, hi;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(lo) : "f"(x1), "f"(x0));
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(hi) : "f"(x3), "f"(x2));
    return (uint32_t)lo | ((uint32_t)hi << 16);
}
/* 2^x on the FMA pipe (EP variants: a share of the scores off the MUFU, the softmax's narrowest unit): x rounded to
 * an integer n by the 1.5 * 2^23 trick, 2^(x - n) by its degree-6 Taylor polynomial (relative error ~2e-7 on
 * [-0.5, 0.5], the class of ex2.approx's), n added to the exponent bits; x clamped at -126 (2^-126 is code 0) */
__device__ __forceinline__ float ex2_poly(float x) {
    x = fmaxf(x, -126.0f);
    const float t = x + 12582912.0f;
    const float f = x - (t - 12582912.0f);
    float p = 1.5403530393381606e-4f;
    p = fmaf(p, f, 1.3333558146428443e-3f);
    p = fmaf(p, f, 9.618129107628477e-3f);
    p = fmaf(p, f, 5.550410866482158e-2f);
    p = fmaf(p, f, 0.2402265069591007f);
    p = fmaf(p, f, 0.6931471805599453f);
    p = fmaf(p, f, 1.0f);
    return __int_as_float((int)((unsigned)__float_as_int(p) + ((unsigned)__float_as_int(t) << 23)));
}

/* S (s32, m64 x 128) [+]= Qc Kc^T over one k32 step, both from shared memory (K-major) */
static __device__ __forceinline__ void wgmma_s8_n128(int32_t (&d)[64], uint64_t da, uint64_t db, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, %64, %65, p;\n}\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
        : "l"(da), "l"(db), "r"(scale_d));
}

/* PV (f32, m64 x 128) [+]= P (E4M3, registers) Vt (E4M3, shared memory, K-major) over one k32 step */
static __device__ __forceinline__ void wgmma_e4m3_rs_n128(float (&d)[64], const uint32_t (&a)[4], uint64_t db, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
        "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}, {%64,%65,%66,%67}, %68, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scale_d));
}

/* The shared-memory descriptors are made once (tile_desc) and moved by plain adds: the start address field holds
 * address / 16 in its low 14 bits, and every tile of the ring lies below 2^18 bytes, so adding (bytes / 16) to the
 * descriptor never carries out of that field. One add per wgmma instead of the field masks and shifts. */
__device__ __forceinline__ uint64_t tile_desc(uint32_t addr) { return sm_desc(addr, 16, 1024); }
constexpr uint64_t TILE_D = TILE >> 4, K32_D = 32 >> 4; /* one tile, one k32 step (32 bytes), in descriptor units */

/* S (64 x 128 keys, this warpgroup's rows) = Qc Kc^T over the 4 k32 steps of the 128 channels */
__device__ __forceinline__ void gemm_qk(int32_t (&s)[64], uint64_t qd, uint64_t kd) {
#pragma unroll
    for (int kk = 0; kk < 4; kk++) wgmma_s8_n128(s, qd + kk * K32_D, kd + kk * K32_D, kk > 0);
}
/* pv (64 x 128 channels) = P (64 x 128 keys, E4M3 registers) Vt^T, a fresh accumulator */
__device__ __forceinline__ void gemm_pv(float (&pv)[64], const uint32_t (&pa)[4][4], uint64_t vd) {
#pragma unroll
    for (int kk = 0; kk < 4; kk++) wgmma_e4m3_rs_n128(pv, pa[kk], vd + kk * K32_D, kk > 0);
}

/* the row maxima of this thread's scores taken on the int32 accumulator (MX variants) with the three-input integer
 * max (VIMNMX3, one instruction per two values), then converted: the same values as the fp32 tree, since the
 * conversion is exact and monotonic; masked keys hold INT_MIN */
__device__ __forceinline__ float row_max_i32(const int32_t (&a)[64], int r) {
    int t[11];
#pragma unroll
    for (int i = 0; i < 10; i++) { /* values 3i .. 3i+2 of the row's 32: value v is a[8 (v / 4) + (v % 4 < 2 ? 0 : 4) + 2r + v % 2] */
        int v3[3];
#pragma unroll
        for (int u = 0; u < 3; u++) {
            const int v = 3 * i + u;
            v3[u] = a[8 * (v / 4) + (v % 4 < 2 ? 0 : 4) + 2 * r + v % 2];
        }
        t[i] = __vimax3_s32(v3[0], v3[1], v3[2]);
    }
    t[10] = max(a[8 * 7 + 4 + 2 * r], a[8 * 7 + 5 + 2 * r]); /* values 30, 31 */
    const int u0 = __vimax3_s32(t[0], t[1], t[2]), u1 = __vimax3_s32(t[3], t[4], t[5]);
    const int u2 = __vimax3_s32(t[6], t[7], t[8]), u3 = max(t[9], t[10]);
    int mi = max(__vimax3_s32(u0, u1, u2), u3);
    mi = max(mi, __shfl_xor_sync(0xffffffffu, mi, 1));
    mi = max(mi, __shfl_xor_sync(0xffffffffu, mi, 2));
    return __int2float_rn(mi);
}

/* exact int32 -> fp32 (|x| < 2^22: CV 0 the magic-number trick, 1 the conversion instruction; CV 2 leaves the
 * trick's 1.5 * 2^23 in, for softmax_tile to take out in the FFMA it does anyway), masking keys at or
 * past `valid` (the last tile) to -inf; MX: the row maxima from the integers first (mx), so that each integer dies
 * as its float is made (no second 64-register array live) */
template <int CV, int MX>
__device__ __forceinline__ void to_scores(float (&s)[64], int32_t (&a)[64], int valid, int lane, float (&mx)[2]) {
    if (MX) {
        if (valid < BN) {
#pragma unroll
            for (int j = 0; j < 16; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    if (j * 8 + (lane & 3) * 2 + (e & 1) >= valid) a[4 * j + e] = INT_MIN;
        }
        mx[0] = row_max_i32(a, 0), mx[1] = row_max_i32(a, 1);
    }
#pragma unroll
    for (int i = 0; i < 64; i++)
        s[i] = CV == 1 ? __int2float_rn(a[i])
             : CV == 2 ? __int_as_float(a[i] + 0x4B400000) /* 1.5 * 2^23 + a, exact; the offset is folded into cb */
                       : __int_as_float(a[i] + 0x4B400000) - 12582912.0f;
    if (valid < BN) {
#pragma unroll
        for (int j = 0; j < 16; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                if (j * 8 + (lane & 3) * 2 + (e & 1) >= valid) s[4 * j + e] = -INFINITY;
    }
}

/* online softmax of one tile in the log2 domain (ops_attention.h): p * 448 in place, row sums, corrections */
template <int EP, int MX, int CV>
__device__ __forceinline__ void softmax_tile(float (&s)[64], float (&mx)[2], float (&m)[2], float (&l)[2],
                                             float (&corr)[2], float fsc) {
    const float l448 = 8.807354922057604f; /* log2(448) */
    float cb[2];
    if (!MX) { /* MX: mx holds the row maxima (to_scores) */
        /* row maxima as a tree (max is exact in any order; short dependency chains) */
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float t[8];
#pragma unroll
            for (int j = 0; j < 8; j++)
                t[j] = fmaxf(fmaxf(s[8 * j + 2 * r], s[8 * j + 2 * r + 1]), fmaxf(s[8 * j + 4 + 2 * r], s[8 * j + 5 + 2 * r]));
#pragma unroll
            for (int w = 4; w; w >>= 1)
#pragma unroll
                for (int j = 0; j < w; j++) t[j] = fmaxf(t[j], t[j + w]);
            mx[r] = t[0];
        }
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        }
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        float mn = fmaxf(m[r], mx[r] * fsc);
        corr[r] = ex2(m[r] - mn); /* 0 while m was -inf */
        m[r] = mn;
        cb[r] = l448 - mn;
        /* CV 2: s holds 1.5 * 2^23 + score, and s * fsc + (cb - 1.5 * 2^23 * fsc) is the score's exponent, with an
         * error of ~0.75 fsc from the product's rounding (~1e-4 in the log2 domain at the release scales: far below
         * one E4M3 step of P, but not the twin's bits) */
        if (CV == 2) cb[r] = fmaf(-12582912.0f, fsc, cb[r]);
    }
    float rs[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}}; /* two partial sums per row: half the dependency chain */
#pragma unroll
    for (int j = 0; j < 16; j++)
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const float x0 = fmaf(s[4 * j + 2 * r], fsc, cb[r]), x1 = fmaf(s[4 * j + 2 * r + 1], fsc, cb[r]);
            const bool poly = (j & 7) < EP / 2; /* EP of the 16 column chunks on the FMA pipe */
            const float p0 = poly ? ex2_poly(x0) : ex2(x0), p1 = poly ? ex2_poly(x1) : ex2(x1);
            s[4 * j + 2 * r] = p0, s[4 * j + 2 * r + 1] = p1;
            rs[r][j & 1] += p0 + p1;
        }
#pragma unroll
    for (int r = 0; r < 2; r++) l[r] = l[r] * corr[r] + (rs[r][0] + rs[r][1]);
}

/* the accumulator values of k-step kk as the 8-bit A fragment (the V^T token order makes them line up) */
__device__ __forceinline__ void to_e4m3(uint32_t (&pa)[4][4], const float (&s)[64]) {
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        const float *x = s + 16 * kk;
        pa[kk][0] = e4m3x4(x[0], x[1], x[4], x[5]);
        pa[kk][1] = e4m3x4(x[2], x[3], x[6], x[7]);
        pa[kk][2] = e4m3x4(x[8], x[9], x[12], x[13]);
        pa[kk][3] = e4m3x4(x[10], x[11], x[14], x[15]);
    }
}

/* o = (o + pv) * corr; an unchanged max (corr == 1 exactly in every row of the warp) skips the product */
__device__ __forceinline__ void accumulate(float (&o)[64], const float (&pv)[64], const float (&corr)[2]) {
    if (__all_sync(0xffffffffu, corr[0] == 1.0f && corr[1] == 1.0f)) {
#pragma unroll
        for (int i = 0; i < 64; i++) o[i] += pv[i];
        return;
    }
#pragma unroll
    for (int j = 0; j < 16; j++) {
        o[4 * j] = (o[4 * j] + pv[4 * j]) * corr[0], o[4 * j + 1] = (o[4 * j + 1] + pv[4 * j + 1]) * corr[0];
        o[4 * j + 2] = (o[4 * j + 2] + pv[4 * j + 2]) * corr[1], o[4 * j + 3] = (o[4 * j + 3] + pv[4 * j + 3]) * corr[1];
    }
}

/* o = o * c + pv, one rounding (AF variants): o, relative to the max before the tile of pv, moved to that tile's
 * max (c, the correction of pv's tile) and pv added; the output is kept one tile behind the softmax */
__device__ __forceinline__ void accumulate_fma(float (&o)[64], const float (&pv)[64], const float (&c)[2]) {
#pragma unroll
    for (int j = 0; j < 16; j++) {
        o[4 * j] = fmaf(o[4 * j], c[0], pv[4 * j]), o[4 * j + 1] = fmaf(o[4 * j + 1], c[0], pv[4 * j + 1]);
        o[4 * j + 2] = fmaf(o[4 * j + 2], c[1], pv[4 * j + 2]), o[4 * j + 3] = fmaf(o[4 * j + 3], c[1], pv[4 * j + 3]);
    }
}

#endif /* sm_90a device code */

template <int ST, int OV, int PP, int CV, int EP, int MX, int AF>
__global__ void __launch_bounds__(THREADS, 1)
k_sage8_90(const __grid_constant__ CUtensorMap tmQ, const __grid_constant__ CUtensorMap tmK,
           const __grid_constant__ CUtensorMap tmV, const Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ uint8_t smem_raw[];
    const uint32_t base = (su32(smem_raw) + 1023u) & ~1023u;
    const uint32_t sQ = base, sK = base + TILE, sV = base + TILE + ST * TILE;
    const uint32_t bars = base + TILE + 2 * ST * TILE;
    const uint32_t q_full = bars;
    auto k_full = [&](int s) { return bars + 8u * (1 + s); };
    auto v_full = [&](int s) { return bars + 8u * (1 + ST + s); };
    auto k_empty = [&](int s) { return bars + 8u * (1 + 2 * ST + s); };
    auto v_empty = [&](int s) { return bars + 8u * (1 + 3 * ST + s); };

    const int wg = threadIdx.x / 128;
    const int h = blockIdx.y, hk = h / p.group;
    const int q0 = blockIdx.x * BM;
    const int n = p.n_tiles;

    if (threadIdx.x == 0) {
        mbar_init(q_full, 1);
        for (int s = 0; s < ST; s++) {
            mbar_init(k_full(s), 1);
            mbar_init(v_full(s), 1);
            mbar_init(k_empty(s), 8); /* one arrival per consumer warp */
            mbar_init(v_empty(s), 8);
        }
        mbar_init_fence();
    }
    __syncthreads();

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
        if (threadIdx.x == 0) {
            prefetch_maps(&tmQ, &tmK, &tmV);
            mbar_expect_tx(q_full, TILE);
            tma_load3(sQ, &tmQ, q_full, 0, q0, h);
            for (int j = 0; j < n; j++) {
                int s = j % ST;
                unsigned par = (unsigned)((j / ST) + 1) & 1u; /* phase j/ST - 1 of the empty barrier */
                if (j >= ST) mbar_wait_guarded(k_empty(s), par);
                mbar_expect_tx(k_full(s), TILE);
                tma_load3(sK + s * TILE, &tmK, k_full(s), 0, j * BN, hk);
                if (j >= ST) mbar_wait_guarded(v_empty(s), par);
                mbar_expect_tx(v_full(s), TILE);
                tma_load3(sV + s * TILE, &tmV, v_full(s), j * BN, 0, hk);
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
        const int cw = wg - 1;
        const int t = threadIdx.x & 127, warp = t >> 5, lane = t & 31;
        const uint64_t qd = tile_desc(sQ + cw * 64 * 128), kd0 = tile_desc(sK), vd0 = tile_desc(sV);
        const int qb = 2 * blockIdx.x + cw;
        const float fq = qb < p.nqb ? p.q_scale[(int64_t)h * p.nqb + qb] * p.sl2 : 0.0f;
        const float *ks = p.k_scale + (int64_t)hk * p.nkb;
        const int last_valid = p.Skv - (n - 1) * BN;
        float o[64], pv[64], s[64];
        int32_t sa[64];
        uint32_t pa[4][4];
#pragma unroll
        for (int i = 0; i < 64; i++) o[i] = 0.0f;
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, corr[2], mx[2];
        const int my_bar = 1 + cw, other_bar = 1 + (cw ^ 1);
        mbar_wait(q_full, 0);
        if (!OV) {
            for (int j = 0; j < n; j++) {
                int st = j % ST;
                unsigned par = (unsigned)(j / ST) & 1u;
                const float fsc = fq * __ldg(ks + j);
                mbar_wait(k_full(st), par);
                keep(sa);
                wg_fence();
                gemm_qk(sa, qd, kd0 + st * TILE_D);
                wg_commit();
                wg_wait<0>();
                keep(sa);
                release(k_empty(st), lane);
                to_scores<CV, MX>(s, sa, j == n - 1 ? last_valid : BN, lane, mx);
                softmax_tile<EP, MX, CV>(s, mx, m, l, corr, fsc);
                to_e4m3(pa, s);
                mbar_wait(v_full(st), par);
                keep(pv);
                wg_fence();
                gemm_pv(pv, pa, vd0 + st * TILE_D);
                wg_commit();
                wg_wait<0>();
                keep(pv);
                release(v_empty(st), lane);
                if (j == 0) {
#pragma unroll
                    for (int i = 0; i < 64; i++) o[i] = pv[i];
                } else {
                    /* o, relative to the previous max, to this tile's max first: (o * corr) + pv */
#pragma unroll
                    for (int jj = 0; jj < 16; jj++) {
                        o[4 * jj] = o[4 * jj] * corr[0] + pv[4 * jj], o[4 * jj + 1] = o[4 * jj + 1] * corr[0] + pv[4 * jj + 1];
                        o[4 * jj + 2] = o[4 * jj + 2] * corr[1] + pv[4 * jj + 2], o[4 * jj + 3] = o[4 * jj + 3] * corr[1] + pv[4 * jj + 3];
                    }
                }
            }
        } else {
            if (PP && cw == 1) nbar_arrive(other_bar); /* consumer 0 issues first */
            float fsc = fq * __ldg(ks);
            mbar_wait(k_full(0), 0);
            if (PP) nbar_sync(my_bar);
            keep(sa);
            wg_fence();
            gemm_qk(sa, qd, kd0);
            wg_commit();
            if (PP) nbar_arrive(other_bar);
            wg_wait<0>();
            keep(sa);
            release(k_empty(0), lane);
            to_scores<CV, MX>(s, sa, n == 1 ? last_valid : BN, lane, mx);
            softmax_tile<EP, MX, CV>(s, mx, m, l, corr, fsc);
            to_e4m3(pa, s);
            for (int j = 1; j < n; j++) {
                int st = j % ST, pst = (j - 1) % ST;
                unsigned par = (unsigned)(j / ST) & 1u, ppar = (unsigned)((j - 1) / ST) & 1u;
                fsc = fq * __ldg(ks + j);
                mbar_wait(k_full(st), par);
                mbar_wait(v_full(pst), ppar);
                if (PP) nbar_sync(my_bar);
                keep(sa);
                keep(pv);
                wg_fence();
                gemm_qk(sa, qd, kd0 + st * TILE_D);
                wg_commit();
                gemm_pv(pv, pa, vd0 + pst * TILE_D);
                wg_commit();
                if (PP) nbar_arrive(other_bar);
                wg_wait<1>();
                keep(sa);
                release(k_empty(st), lane);
                const float cp[2] = {corr[0], corr[1]}; /* tile j - 1's correction (AF) */
                to_scores<CV, MX>(s, sa, j == n - 1 ? last_valid : BN, lane, mx);
                softmax_tile<EP, MX, CV>(s, mx, m, l, corr, fsc);
                wg_wait<0>();
                keep(pv);
                release(v_empty(pst), lane);
                if (AF) accumulate_fma(o, pv, cp);
                else accumulate(o, pv, corr);
                to_e4m3(pa, s);
            }
            int pst = (n - 1) % ST;
            unsigned ppar = (unsigned)((n - 1) / ST) & 1u;
            mbar_wait(v_full(pst), ppar);
            if (PP) nbar_sync(my_bar);
            keep(pv);
            wg_fence();
            gemm_pv(pv, pa, vd0 + pst * TILE_D);
            wg_commit();
            if (PP && cw == 0) nbar_arrive(other_bar); /* consumer 1's last turn needs no successor */
            wg_wait<0>();
            keep(pv);
            if (AF) {
                accumulate_fma(o, pv, corr); /* o was relative to tile n - 2's max (n == 1: o and corr are 0) */
            } else {
#pragma unroll
                for (int i = 0; i < 64; i++) o[i] += pv[i];
            }
        }

        /* epilogue: (O / l) * v_scale per channel, one bf16 rounding, rows past Sq dropped */
#pragma unroll
        for (int r = 0; r < 2; r++) {
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        }
        float inv[2] = {l[0] > 0.0f ? 1.0f / l[0] : 0.0f, l[1] > 0.0f ? 1.0f / l[1] : 0.0f};
        const int row0 = q0 + cw * 64 + warp * 16 + (lane >> 2), c0 = 2 * (lane & 3);
        const float *vs = p.v_scale + (int64_t)hk * HD + c0;
        uint16_t *ob = p.out + (int64_t)h * HD + c0;
#pragma unroll
        for (int r = 0; r < 2; r++) {
            int row = row0 + 8 * r;
            if (row < p.Sq) {
                uint32_t *dst = (uint32_t *)(ob + (int64_t)row * p.o_rs);
#pragma unroll
                for (int j = 0; j < 16; j++)
                    dst[4 * j] = bf16x2((o[4 * j + 2 * r] * inv[r]) * __ldg(vs + 8 * j),
                                        (o[4 * j + 2 * r + 1] * inv[r]) * __ldg(vs + 8 * j + 1));
            }
        }
    }
#endif
}

/* ---------------- host side ---------------- */

/* 3-D byte map (inner, rows, heads), box 128 x 128 x 1, 128B swizzle; rows past `rows` are zero-filled by TMA */
int make_map(encode_tiled_fn enc, CUtensorMap *m, const void *ptr, int64_t inner, int64_t rows, int heads) {
    cuuint64_t dims[3] = {(cuuint64_t)inner, (cuuint64_t)rows, (cuuint64_t)heads};
    cuuint64_t strides[2] = {(cuuint64_t)inner, (cuuint64_t)(inner * rows)};
    cuuint32_t box[3] = {128, 128, 1}, es[3] = {1, 1, 1};
    CUresult r = enc(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 3, (void *)ptr, dims, strides, box, es,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? 0 : -1;
}

template <int ST, int OV, int PP, int CV, int EP = 0, int MX = 0, int AF = 0>
int launch(h3_backend *be, uint16_t *out, int64_t o_rs, const h3_sage8_codes *c, float scale) {
    constexpr size_t smem = TILE + 2 * ST * TILE + 8 * (1 + 4 * ST) + 1024;
    static_assert(smem <= 232448, "shared memory");
    encode_tiled_fn enc = encoder();
    CUtensorMap mq, mk, mv;
    if (!enc || make_map(enc, &mq, c->q, HD, c->Sq, c->Hq) || make_map(enc, &mk, c->k, HD, c->Skv, c->Hkv) ||
        make_map(enc, &mv, c->vt, c->Skv_pad, HD, c->Hkv))
        return -1;
    Params p;
    p.out = out, p.o_rs = o_rs;
    p.q_scale = c->q_scale, p.k_scale = c->k_scale, p.v_scale = c->v_scale;
    p.Sq = (int)c->Sq, p.Skv = (int)c->Skv, p.group = c->Hq / c->Hkv;
    p.n_tiles = (int)((c->Skv + BN - 1) / BN);
    p.nqb = (int)((c->Sq + H3_SAGE8_BQ - 1) / H3_SAGE8_BQ), p.nkb = p.n_tiles;
    p.sl2 = scale * 1.4426950408889634f;
    auto kern = k_sage8_90<ST, OV, PP, CV, EP, MX, AF>;
    if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess) return -1;
    dim3 grid((unsigned)((c->Sq + BM - 1) / BM), (unsigned)c->Hq, 1);
    kern<<<grid, THREADS, smem, cuda_of(be)->stream>>>(mq, mk, mv, p);
    CUDA_LAUNCHED(be, "sage8 attention (sm90)");
    return 0;
}

} /* namespace */

static_assert(H3_SAGE8_BQ == 64 && H3_SAGE8_BK == BN, "the kernel's tiles are the scale blocks");

extern "C" int cuda_sage8_sm90_variants(void) { return 23; }

extern "C" int cuda_sage8_sm90(h3_backend *be, uint16_t *out, int64_t o_rs, const h3_sage8_codes *c, float scale) {
    if (cuda_of(be)->sm_arch != 90 || c->D != HD || c->Sq < 1 || c->Skv < 1 || c->Hq < 1 || c->Hkv < 1 ||
        c->Hq % c->Hkv || !(scale > 0.0f))
        return -1;
    if (c->Sq >= (1LL << 31) - BM || c->Skv >= (1LL << 31) - 256 || c->Hq > 65535) return -1;
    if (((uintptr_t)out & 3) || (o_rs & 1)) return -1;
    const int v = cuda_of(be)->sage8_variant;
    /* default: measured on the H200 at the release shape (docs/fast.md 5) */
    switch (v < 0 ? 17 : v) { /* stages, overlap, ping-pong, int32 -> fp32 (CV), int32 row max (MX), FFMA accumulation (AF) */
    case 0: return launch<2, 0, 0, 0>(be, out, o_rs, c, scale);
    case 1: return launch<2, 1, 0, 0>(be, out, o_rs, c, scale);
    case 2: return launch<2, 1, 1, 0>(be, out, o_rs, c, scale);
    case 3: return launch<3, 1, 1, 0>(be, out, o_rs, c, scale);
    case 4: return launch<3, 1, 0, 0>(be, out, o_rs, c, scale);
    case 5: return launch<4, 1, 1, 0>(be, out, o_rs, c, scale);
    case 6: return launch<3, 1, 1, 1>(be, out, o_rs, c, scale);
    case 7: return launch<2, 0, 0, 1>(be, out, o_rs, c, scale);
    case 8: return launch<2, 1, 0, 1>(be, out, o_rs, c, scale);
    case 9: return launch<3, 1, 0, 1>(be, out, o_rs, c, scale);
    case 10: return launch<4, 1, 0, 1>(be, out, o_rs, c, scale);
    case 11: return launch<2, 1, 1, 1>(be, out, o_rs, c, scale);
    case 12: return launch<2, 1, 0, 1, 2>(be, out, o_rs, c, scale); /* 1/8 of the exp2 on the FMA pipe */
    case 13: return launch<2, 1, 0, 1, 4>(be, out, o_rs, c, scale); /* 1/4 */
    case 14: return launch<3, 1, 1, 1, 2>(be, out, o_rs, c, scale); /* 1/8, ST 3, ping-pong */
    case 15: return launch<2, 1, 0, 1, 0, 1, 0>(be, out, o_rs, c, scale); /* 8 with the int32 row max */
    case 16: return launch<2, 1, 0, 1, 0, 1, 1>(be, out, o_rs, c, scale); /* 15 with the one-FFMA accumulation */
    case 17: return launch<3, 1, 0, 1, 0, 1, 1>(be, out, o_rs, c, scale); /* 16 with ST 3 */
    case 18: return launch<2, 1, 1, 1, 0, 1, 1>(be, out, o_rs, c, scale); /* 16 with ping-pong */
    case 19: return launch<3, 1, 0, 2, 0, 1, 1>(be, out, o_rs, c, scale); /* 17, the conversion folded in the FFMA */
    case 20: return launch<4, 1, 0, 1, 0, 1, 1>(be, out, o_rs, c, scale); /* 17 with ST 4 */
    case 21: return launch<3, 1, 1, 1, 0, 1, 1>(be, out, o_rs, c, scale); /* 17 with ping-pong */
    default: return launch<4, 1, 0, 2, 0, 1, 1>(be, out, o_rs, c, scale); /* 19 with ST 4 */
    }
}
