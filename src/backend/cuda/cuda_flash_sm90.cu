/* Hopper (sm_90a) flash-attention forward for bf16, head_dim 128 or 64, non-causal: cuda_flash_sm90() and
 * cuda_flash_sm90_batched() (a batch of independent equally shaped problems, e.g. the video decoder's tiles).
 *
 * One CTA = 128 query rows of one head of one batch item (grid x / y / z), 384 threads in three warpgroups:
 *   warpgroup 0  producer: setmaxnreg 24; one thread issues the TMA loads (Q once, then K and V tiles of
 *                BN keys into an ST-deep ring of 128B-swizzled shared-memory stages, mbarriers with
 *                transaction counts for "full", per-warp arrivals for "empty");
 *   warpgroups 1, 2  consumers: setmaxnreg 240; 64 query rows each. S = Q K^T with wgmma m64nBNk16
 *                (A = Q and B = K from shared memory), fp32 online softmax in registers (exp2 with
 *                scale*log2e), P rounded to bf16 in registers (cvt.rn.bf16x2) and used as the register A
 *                operand of wgmma m64n{HD}k16 for O += P V (B = V from shared memory, N-major).
 * Variants (template parameters, chosen at run time for tuning): OV = 1 overlaps the softmax of tile j
 * with the P V product of tile j-1 inside a warpgroup (S_j and PV_{j-1} issued back to back); PP = 1 adds
 * the ping-pong schedule between the two consumer warpgroups (named barriers: one warpgroup issues its
 * GEMMs while the other does its softmax).
 * Shared-memory tiles: a [rows][HD] bf16 tile is stored as HD / 64 [rows][64] halves (128-byte rows, the
 * TMA box inner size for SWIZZLE_128B); the 16-byte chunk c of row r sits at chunk c ^ (r & 7).
 * Tensor maps are 4-D (d, head, row, item) or (d, row, head, item): rows past Sq / Skv of each item are
 * zero-filled by TMA, so every item sees exactly what an unbatched call on it sees (bit-identical results).
 * Numerics as k_flash_bf16 (cuda_attention.cu): fp32 scores, max and sums in fp32, P rounded to bf16 before
 * P V, fp32 accumulation, output rounded once to bf16 (round to nearest even). */
#include "cuda_internal.h"

#include <cuda.h> /* CUtensorMap and its enums only: the encoder comes from cudaGetDriverEntryPoint */
#include <math.h>

namespace {

#include "cuda_sm90_common.h" /* mbarriers, TMA loads, wgmma fences and descriptors, named barriers, the map encoder */

constexpr int BM = 128;      /* query rows per CTA */
constexpr int THREADS = 384; /* producer warpgroup + 2 consumer warpgroups */

struct Params {
    uint16_t *out;
    int64_t   o_rs, o_hs, o_bs; /* o_bs: element stride between batch items (blockIdx.z) */
    int       Sq, Skv, group, n_tiles;
    float     sl2; /* scale * log2(e) */
    int       q_swap, kv_swap; /* tensor map dims are (d, row, head) instead of (d, head, row) */
};

/* The device code below exists for the sm_90a target only (wgmma, TMA, mbarrier waits, setmaxnreg); the build's
 * other targets (Makefile NVCC_ARCH) compile an empty kernel (k_flash90) that is never launched. */
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)


/* generated operand lists: D (fp32, m64 x N) [+]= A . B */
static __device__ __forceinline__ void wgmma_ss_n128(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{"
        "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
        "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
        "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
        "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(scale_d));
}

static __device__ __forceinline__ void wgmma_ss_n176(float (&d)[88], uint64_t da, uint64_t db, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %90, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n176k16.f32.bf16.bf16 "
        "{"
        "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
        "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
        "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
        "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"
        "%80,%81,%82,%83,%84,%85,%86,%87"
        "}, %88, %89, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87])
        : "l"(da), "l"(db), "r"(scale_d));
}

static __device__ __forceinline__ void wgmma_rs_n128_tb(float (&d)[64], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint64_t db) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{"
        "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
        "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
        "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
        "}, {%64,%65,%66,%67}, %68, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(db), "r"(1));
}

/* O (m64 x 64) += P V for head_dim 64: as wgmma_rs_n128_tb with half the accumulators */
static __device__ __forceinline__ void wgmma_rs_n64_tb(float (&d)[32], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint64_t db) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
        "{"
        "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
        "}, {%32,%33,%34,%35}, %36, p, 1, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(db), "r"(1));
}

static __device__ __forceinline__ void wgmma_rs_n128_kb_sc(float (&d)[64], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint64_t db, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{"
        "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
        "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
        "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
        "}, {%64,%65,%66,%67}, %68, p, 1, 1, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(db), "r"(scale_d));
}

template <int BN> struct QK;
template <> struct QK<128> {
    static __device__ __forceinline__ void mma(float (&d)[64], uint64_t da, uint64_t db, int sc) { wgmma_ss_n128(d, da, db, sc); }
};
template <> struct QK<176> {
    static __device__ __forceinline__ void mma(float (&d)[88], uint64_t da, uint64_t db, int sc) { wgmma_ss_n176(d, da, db, sc); }
};
/* P V by head dim: N = HD */
template <int HD> struct PV;
template <> struct PV<128> {
    static __device__ __forceinline__ void mma(float (&d)[64], const uint32_t (&a)[4], uint64_t db) { wgmma_rs_n128_tb(d, a[0], a[1], a[2], a[3], db); }
};
template <> struct PV<64> {
    static __device__ __forceinline__ void mma(float (&d)[32], const uint32_t (&a)[4], uint64_t db) { wgmma_rs_n64_tb(d, a[0], a[1], a[2], a[3], db); }
};


/* S (64 x BN, this warpgroup's rows) = Q K^T over the HD / 16 k-steps (4 per 64-column half) */
template <int HD, int BN>
__device__ __forceinline__ void gemm_qk(float (&s)[BN / 2], uint32_t q_addr, uint32_t k_addr) {
    constexpr uint32_t QHALF = BM * 128, KHALF = BN * 128;
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
        uint32_t off = (kk & 3) * 32;
        uint64_t da = sm_desc(q_addr + (kk >> 2) * QHALF + off, 16, 1024);
        uint64_t db = sm_desc(k_addr + (kk >> 2) * KHALF + off, 16, 1024);
        QK<BN>::mma(s, da, db, kk > 0);
    }
}

/* the same with Q's A fragments in registers (BN 128 only) */
template <int HD, int BN>
__device__ __forceinline__ void gemm_qk_rq(float (&s)[BN / 2], const uint32_t (&qa)[HD / 16][4], uint32_t k_addr) {
    static_assert(BN == 128, "Q fragments in registers: BN 128 only");
    constexpr uint32_t KHALF = 128 * 128;
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
        uint64_t db = sm_desc(k_addr + (kk >> 2) * KHALF + (kk & 3) * 32, 16, 1024);
        wgmma_rs_n128_kb_sc(s, qa[kk][0], qa[kk][1], qa[kk][2], qa[kk][3], db, kk > 0);
    }
}

/* Q's A fragments (rows row0 .. row0+15 of the 128-row tile, all HD / 16 k-steps) from the swizzled tile */
template <int HD>
__device__ __forceinline__ void load_q_frags(uint32_t (&qa)[HD / 16][4], uint32_t sQ, int row0, int lane) {
    int r = row0 + (lane & 15);
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk++) {
        int c = kk * 2 + (lane >> 4); /* 16-byte chunk of the 256-byte row */
        uint32_t addr = sQ + (c >> 3) * (BM * 128) + r * 128 + (((c & 7) ^ (r & 7)) << 4);
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(qa[kk][0]), "=r"(qa[kk][1]), "=r"(qa[kk][2]), "=r"(qa[kk][3])
                     : "r"(addr));
    }
}

/* O (64 x HD) += P (64 x BN, bf16 registers) V (BN x HD, N-major: LBO = the d-half stride, unused at HD 64) */
template <int HD, int BN>
__device__ __forceinline__ void gemm_pv(float (&o)[HD / 2], const uint32_t (&pa)[BN / 16][4], uint32_t v_addr) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) {
        uint64_t db = sm_desc(v_addr + kk * 16 * 128, BN * 128, 1024);
        PV<HD>::mma(o, pa[kk], db);
    }
}

/* keys at or past `valid` of this tile -> -inf */
template <int BN>
__device__ __forceinline__ void mask_tail(float (&s)[BN / 2], int valid, int lane) {
#pragma unroll
    for (int j = 0; j < BN / 8; j++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            int col = j * 8 + (lane & 3) * 2 + (e & 1);
            if (col >= valid) s[4 * j + e] = -INFINITY;
        }
}

/* online softmax of one tile: row max (quad shuffles), p = 2^(s*sl2 - m*sl2) in place, row sums;
 * returns the correction factors for O and l */
template <int BN, int SR>
__device__ __forceinline__ void softmax_tile(float (&s)[BN / 2], float (&m)[2], float (&l)[2], float (&corr)[2],
                                             float sl2) {
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
        mx[0] = fmaxf(mx[0], fmaxf(s[4 * j], s[4 * j + 1]));
        mx[1] = fmaxf(mx[1], fmaxf(s[4 * j + 2], s[4 * j + 3]));
    }
    float mb[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        float mn = fmaxf(m[r], mx[r]);
        mb[r] = mn == -INFINITY ? 0.0f : mn * sl2;
        corr[r] = ex2(fmaf(m[r], sl2, -mb[r])); /* 0 while m was -inf */
        if (SR && mn == m[r]) corr[r] = 1.0f;    /* exact, so an unchanged max skips the rescale */
        m[r] = mn;
    }
    float rs[2] = {0.0f, 0.0f};
#pragma unroll
    for (int j = 0; j < BN / 8; j++) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float p0 = ex2(fmaf(s[4 * j + 2 * r], sl2, -mb[r]));
            float p1 = ex2(fmaf(s[4 * j + 2 * r + 1], sl2, -mb[r]));
            s[4 * j + 2 * r] = p0, s[4 * j + 2 * r + 1] = p1;
            rs[r] += p0 + p1;
        }
    }
#pragma unroll
    for (int r = 0; r < 2; r++) l[r] = l[r] * corr[r] + rs[r];
}

template <int HD, int SR>
__device__ __forceinline__ void rescale(float (&o)[HD / 2], const float (&corr)[2]) {
    if (SR && __all_sync(0xffffffffu, corr[0] == 1.0f && corr[1] == 1.0f)) return;
#pragma unroll
    for (int j = 0; j < HD / 8; j++) {
        o[4 * j] *= corr[0], o[4 * j + 1] *= corr[0];
        o[4 * j + 2] *= corr[1], o[4 * j + 3] *= corr[1];
    }
}

/* the score accumulators of n-chunks 2kk, 2kk+1 are exactly the A fragment of k-step kk */
template <int BN>
__device__ __forceinline__ void to_bf16(uint32_t (&pa)[BN / 16][4], const float (&s)[BN / 2]) {
#pragma unroll
    for (int kk = 0; kk < BN / 16; kk++) {
        pa[kk][0] = bf16x2(s[8 * kk + 0], s[8 * kk + 1]);
        pa[kk][1] = bf16x2(s[8 * kk + 2], s[8 * kk + 3]);
        pa[kk][2] = bf16x2(s[8 * kk + 4], s[8 * kk + 5]);
        pa[kk][3] = bf16x2(s[8 * kk + 6], s[8 * kk + 7]);
    }
}

#endif /* sm_90a device code */

template <int HD, int BN, int ST, int OV, int PP, int QR, int SR>
__global__ void __launch_bounds__(THREADS, 1)
k_flash90(const __grid_constant__ CUtensorMap tmQ, const __grid_constant__ CUtensorMap tmK,
          const __grid_constant__ CUtensorMap tmV, const Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) /* wgmma, TMA and setmaxnreg: sm_90a only; other targets get an empty kernel that
                                        * cuda_flash_sm90 never launches (it checks the device's compute capability) */
    constexpr uint32_t QB = BM * HD * 2, KVB = BN * HD * 2;
    extern __shared__ uint8_t smem_raw[];
    const uint32_t base = (su32(smem_raw) + 1023u) & ~1023u;
    const uint32_t sQ = base, sK = base + QB, sV = base + QB + ST * KVB;
    const uint32_t bars = base + QB + 2 * ST * KVB;
    const uint32_t q_full = bars;
    auto k_full = [&](int s) { return bars + 8u * (1 + s); };
    auto v_full = [&](int s) { return bars + 8u * (1 + ST + s); };
    auto k_empty = [&](int s) { return bars + 8u * (1 + 2 * ST + s); };
    auto v_empty = [&](int s) { return bars + 8u * (1 + 3 * ST + s); };

    const int wg = threadIdx.x / 128;
    const int h = blockIdx.y, hk = h / p.group, item = blockIdx.z;
    const int q0 = blockIdx.x * BM;
    constexpr int HALVES = HD / 64;                  /* 64-column halves per tile */
    constexpr uint32_t QH = BM * 128, KVH = BN * 128; /* bytes of one half */
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
            mbar_expect_tx(q_full, QB);
            for (int half = 0; half < HALVES; half++) {
                if (p.q_swap) tma_load4(sQ + half * QH, &tmQ, q_full, half * 64, q0, h, item);
                else tma_load4(sQ + half * QH, &tmQ, q_full, half * 64, h, q0, item);
            }
            for (int j = 0; j < n; j++) {
                int s = j % ST;
                unsigned par = (unsigned)((j / ST) + 1) & 1u; /* phase j/ST - 1 of the empty barrier */
                int row = j * BN;
                if (j >= ST) mbar_wait_guarded(k_empty(s), par);
                mbar_expect_tx(k_full(s), KVB);
                for (int half = 0; half < HALVES; half++) {
                    if (p.kv_swap) tma_load4(sK + s * KVB + half * KVH, &tmK, k_full(s), half * 64, row, hk, item);
                    else tma_load4(sK + s * KVB + half * KVH, &tmK, k_full(s), half * 64, hk, row, item);
                }
                if (j >= ST) mbar_wait_guarded(v_empty(s), par);
                mbar_expect_tx(v_full(s), KVB);
                for (int half = 0; half < HALVES; half++) {
                    if (p.kv_swap) tma_load4(sV + s * KVB + half * KVH, &tmV, v_full(s), half * 64, row, hk, item);
                    else tma_load4(sV + s * KVB + half * KVH, &tmV, v_full(s), half * 64, hk, row, item);
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
        const int cw = wg - 1; /* consumer warpgroup 0 / 1 */
        const int t = threadIdx.x & 127, warp = t >> 5, lane = t & 31;
        const uint32_t q_addr = sQ + cw * 64 * 128; /* this warpgroup's 64 rows in each Q half */
        const float sl2 = p.sl2;
        const int last_valid = p.Skv - (n - 1) * BN; /* keys of the last tile, 1..BN */
        float o[HD / 2];
#pragma unroll
        for (int i = 0; i < HD / 2; i++) o[i] = 0.0f;
        float s[BN / 2];
        uint32_t pa[BN / 16][4];
        float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f}, corr[2];
        const int my_bar = 1 + cw, other_bar = 1 + (cw ^ 1);

        static_assert(!QR || BN == 128, "Q fragments in registers: BN 128 only");
        uint32_t qa[HD / 16][4];
        mbar_wait(q_full, 0);
        if (QR) load_q_frags<HD>(qa, sQ, cw * 64 + warp * 16, lane);
        auto qk = [&](uint32_t k_addr) {
            if constexpr (QR) gemm_qk_rq<HD, BN>(s, qa, k_addr);
            else gemm_qk<HD, BN>(s, q_addr, k_addr);
        };
        if (!OV) {
            for (int j = 0; j < n; j++) {
                int st = j % ST;
                unsigned par = (unsigned)(j / ST) & 1u;
                mbar_wait(k_full(st), par);
                keep(s);
                wg_fence();
                qk(sK + st * KVB);
                wg_commit();
                wg_wait<0>();
                keep(s);
                release(k_empty(st), lane);
                if (j == n - 1 && last_valid < BN) mask_tail<BN>(s, last_valid, lane);
                softmax_tile<BN, SR>(s, m, l, corr, sl2);
                rescale<HD, SR>(o, corr);
                to_bf16<BN>(pa, s);
                mbar_wait(v_full(st), par);
                keep(o);
                wg_fence();
                gemm_pv<HD, BN>(o, pa, sV + st * KVB);
                wg_commit();
                wg_wait<0>();
                keep(o);
                release(v_empty(st), lane);
            }
        } else {
            if (PP && cw == 1) nbar_arrive(other_bar); /* consumer 0 issues first */
            /* tile 0: S only */
            mbar_wait(k_full(0), 0);
            if (PP) nbar_sync(my_bar);
            keep(s);
            wg_fence();
            qk(sK);
            wg_commit();
            if (PP) nbar_arrive(other_bar);
            wg_wait<0>();
            keep(s);
            release(k_empty(0), lane);
            if (n == 1 && last_valid < BN) mask_tail<BN>(s, last_valid, lane);
            softmax_tile<BN, SR>(s, m, l, corr, sl2);
            to_bf16<BN>(pa, s);
            for (int j = 1; j < n; j++) {
                int st = j % ST, pst = (j - 1) % ST;
                unsigned par = (unsigned)(j / ST) & 1u, ppar = (unsigned)((j - 1) / ST) & 1u;
                mbar_wait(k_full(st), par);
                mbar_wait(v_full(pst), ppar);
                if (PP) nbar_sync(my_bar);
                keep(s);
                keep(o);
                wg_fence();
                qk(sK + st * KVB);
                wg_commit();
                gemm_pv<HD, BN>(o, pa, sV + pst * KVB);
                wg_commit();
                if (PP) nbar_arrive(other_bar);
                wg_wait<1>();
                keep(s);
                release(k_empty(st), lane);
                if (j == n - 1 && last_valid < BN) mask_tail<BN>(s, last_valid, lane);
                softmax_tile<BN, SR>(s, m, l, corr, sl2);
                wg_wait<0>();
                keep(o);
                release(v_empty(pst), lane);
                rescale<HD, SR>(o, corr);
                to_bf16<BN>(pa, s);
            }
            /* P V of the last tile */
            int pst = (n - 1) % ST;
            unsigned ppar = (unsigned)((n - 1) / ST) & 1u;
            mbar_wait(v_full(pst), ppar);
            if (PP) nbar_sync(my_bar);
            keep(o);
            wg_fence();
            gemm_pv<HD, BN>(o, pa, sV + pst * KVB);
            wg_commit();
            if (PP && cw == 0) nbar_arrive(other_bar); /* consumer 1's last turn needs no successor */
            wg_wait<0>();
            keep(o);
        }

        /* epilogue: O / l, one bf16 rounding, rows past Sq dropped */
#pragma unroll
        for (int r = 0; r < 2; r++) {
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
            l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        }
        float inv[2] = {l[0] > 0.0f ? 1.0f / l[0] : 0.0f, l[1] > 0.0f ? 1.0f / l[1] : 0.0f};
        const int row0 = q0 + cw * 64 + warp * 16 + (lane >> 2);
        uint16_t *ob = p.out + (int64_t)item * p.o_bs + (int64_t)h * p.o_hs + 2 * (lane & 3);
#pragma unroll
        for (int r = 0; r < 2; r++) {
            int row = row0 + 8 * r;
            if (row < p.Sq) {
                uint32_t *dst = (uint32_t *)(ob + (int64_t)row * p.o_rs);
#pragma unroll
                for (int j = 0; j < HD / 8; j++) dst[4 * j] = bf16x2(o[4 * j + 2 * r] * inv[r], o[4 * j + 2 * r + 1] * inv[r]);
            }
        }
    }
#endif
}

/* ---------------- host side ---------------- */

/* one call's problem: batch items of Sq x Skv at element strides (*_bs between items, *_rs rows, *_hs heads) */
struct Prob {
    uint16_t       *out;
    const uint16_t *q, *k, *v;
    int64_t         o_rs, o_hs, o_bs, q_rs, q_hs, q_bs, k_rs, k_hs, k_bs, v_rs, v_hs, v_bs;
    int64_t         batch, Sq, Skv;
    int             Hq, Hkv;
    float           scale;
};

/* 4-D map over (d, head, row, item) or, when the head stride is the larger one, (d, row, head, item); box
 * 64 x 1 x rows x 1 (or 64 x rows x 1 x 1): either way a [rows][64] 128B-swizzled tile of one item. The row
 * extent is the item's own, so TMA zero-fills rows past it per item. */
int make_map(CUtensorMap *m, const uint16_t *ptr, int64_t rows, int heads, int64_t batch, int64_t rs, int64_t hs,
             int64_t bs, int hd, int box_rows, int *swap) {
    encode_tiled_fn enc = encoder();
    if (!enc) return -1;
    if (heads == 1) hs = rs;
    cuuint64_t dims[4], strides[3];
    cuuint32_t box[4], es[4] = {1, 1, 1, 1};
    dims[0] = (cuuint64_t)hd;
    if (hs <= rs) {
        *swap = 0;
        dims[1] = (cuuint64_t)heads, dims[2] = (cuuint64_t)rows;
        strides[0] = (cuuint64_t)hs * 2, strides[1] = (cuuint64_t)rs * 2;
        box[0] = 64, box[1] = 1, box[2] = (cuuint32_t)box_rows;
    } else {
        *swap = 1;
        dims[1] = (cuuint64_t)rows, dims[2] = (cuuint64_t)heads;
        strides[0] = (cuuint64_t)rs * 2, strides[1] = (cuuint64_t)hs * 2;
        box[0] = 64, box[1] = (cuuint32_t)box_rows, box[2] = 1;
    }
    dims[3] = (cuuint64_t)batch, box[3] = 1;
    /* one item: the stride is never used; give the encoder the nested extent of the first three dims */
    strides[2] = batch > 1 ? (cuuint64_t)bs * 2 : strides[1] * dims[2];
    if (strides[2] >= (1ull << 40)) strides[2] = strides[1];
    CUresult r = enc(m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, (void *)ptr, dims, strides, box, es,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? 0 : -1;
}

template <int HD, int BN, int ST, int OV, int PP, int QR, int SR>
int launch(h3_backend *be, const Prob &pr) {
    constexpr size_t QB = BM * HD * 2, KVB = BN * HD * 2;
    constexpr size_t smem = QB + 2 * ST * KVB + 8 * (1 + 4 * ST) + 1024;
    static_assert(smem <= 232448, "shared memory");
    CUtensorMap mq, mk, mv;
    Params p;
    int swap_k, swap_v;
    if (make_map(&mq, pr.q, pr.Sq, pr.Hq, pr.batch, pr.q_rs, pr.q_hs, pr.q_bs, HD, BM, &p.q_swap) ||
        make_map(&mk, pr.k, pr.Skv, pr.Hkv, pr.batch, pr.k_rs, pr.k_hs, pr.k_bs, HD, BN, &swap_k) ||
        make_map(&mv, pr.v, pr.Skv, pr.Hkv, pr.batch, pr.v_rs, pr.v_hs, pr.v_bs, HD, BN, &swap_v) || swap_k != swap_v)
        return -1;
    p.kv_swap = swap_k;
    p.out = pr.out, p.o_rs = pr.o_rs, p.o_hs = pr.o_hs, p.o_bs = pr.batch > 1 ? pr.o_bs : 0;
    p.Sq = (int)pr.Sq, p.Skv = (int)pr.Skv, p.group = pr.Hq / pr.Hkv;
    p.n_tiles = (int)((pr.Skv + BN - 1) / BN);
    p.sl2 = pr.scale * 1.4426950408889634f;
    /* per launch (cheap), as the own flash kernel does: no process-wide "already set" flag */
    auto kern = k_flash90<HD, BN, ST, OV, PP, QR, SR>;
    if (cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) != cudaSuccess) return -1;
    dim3 grid((unsigned)((pr.Sq + BM - 1) / BM), (unsigned)pr.Hq, (unsigned)pr.batch);
    kern<<<grid, THREADS, smem, cuda_of(be)->stream>>>(mq, mk, mv, p);
    CUDA_LAUNCHED(be, "attention (flash sm90)");
    return 0;
}

template <int HD>
int dispatch(h3_backend *be, const Prob &pr, int var) {
    switch (var) { /* BN, stages, overlap, ping-pong, Q in registers, skip-rescale */
    case 0: return launch<HD, 128, 2, 0, 0, 0, 0>(be, pr);
    case 1: return launch<HD, 128, 2, 1, 0, 0, 0>(be, pr);
    case 2: return launch<HD, 128, 2, 1, 1, 0, 0>(be, pr);
    case 3: return launch<HD, 176, 2, 1, 1, 0, 0>(be, pr);
    case 4: return launch<HD, 128, 3, 1, 1, 0, 0>(be, pr);
    case 5: return launch<HD, 128, 2, 1, 0, 1, 0>(be, pr);
    case 6: return launch<HD, 128, 2, 1, 0, 1, 1>(be, pr);
    case 7: return launch<HD, 128, 2, 1, 1, 1, 1>(be, pr);
    case 8: return launch<HD, 176, 2, 1, 0, 0, 1>(be, pr);
    case 9: return launch<HD, 128, 2, 1, 0, 0, 1>(be, pr);
    case 10: return launch<HD, 128, 3, 1, 0, 1, 1>(be, pr);
    default: return launch<HD, 176, 2, 1, 1, 0, 1>(be, pr);
    }
}

} /* namespace */

extern "C" int cuda_flash_sm90_variants(void) { return 12; }
extern "C" void cuda_flash_sm90_set_variant(h3_backend *be, int v) { cuda_of(be)->flash_variant = v; }

extern "C" int cuda_flash_sm90_batched(h3_backend *be, int64_t batch, int64_t q_bs, int64_t k_bs, int64_t v_bs,
                                       int64_t o_bs, uint16_t *out, int64_t o_rs, int64_t o_hs, const uint16_t *q,
                                       int64_t q_rs, int64_t q_hs, const uint16_t *k, int64_t k_rs, int64_t k_hs,
                                       const uint16_t *v, int64_t v_rs, int64_t v_hs, int64_t Sq, int64_t Skv, int Hq,
                                       int Hkv, int D, float scale) {
    if (cuda_of(be)->sm_arch != 90 || (D != 128 && D != 64) || Sq < 1 || Skv < 1 || Hq < 1 || Hkv < 1 || Hq % Hkv ||
        !(scale > 0.0f))
        return -1;
    if (Sq >= (1LL << 31) - BM || Skv >= (1LL << 31) - 256 || Hq > 65535) return -1;
    if (batch < 1 || batch > 65535) return -1; /* grid.z */
    /* TMA: 16-byte aligned bases and strides; output: 4-byte stores of bf16 pairs */
    if (((uintptr_t)q | (uintptr_t)k | (uintptr_t)v) & 15) return -1;
    if ((q_rs | q_hs | k_rs | k_hs | v_rs | v_hs) & 7) return -1;
    if (q_rs <= 0 || k_rs <= 0 || v_rs <= 0 || q_hs < 0 || k_hs < 0 || v_hs < 0) return -1;
    if (((uintptr_t)out & 3) || (o_rs & 1) || (o_hs & 1)) return -1;
    if (batch > 1 && (((q_bs | k_bs | v_bs) & 7) || (o_bs & 1) || q_bs <= 0 || k_bs <= 0 || v_bs <= 0 || o_bs <= 0))
        return -1;
    const Prob pr = {out, q, k, v, o_rs, o_hs, o_bs, q_rs, q_hs, q_bs, k_rs, k_hs, k_bs, v_rs, v_hs, v_bs,
                     batch, Sq, Skv, Hq, Hkv, scale};
    /* default (measured on the H200 at head_dim 128, docs/cuda.md): 176-key tiles with skip-rescale and
     * ping-pong for long key sequences, 128-key tiles in 3 stages with ping-pong for short ones */
    int fv = cuda_of(be)->flash_variant, var = fv >= 0 ? fv : Skv >= 8192 ? 11 : 4;
    return D == 128 ? dispatch<128>(be, pr, var) : dispatch<64>(be, pr, var);
}

extern "C" int cuda_flash_sm90(h3_backend *be, uint16_t *out, int64_t o_rs, int64_t o_hs, const uint16_t *q,
                               int64_t q_rs, int64_t q_hs, const uint16_t *k, int64_t k_rs, int64_t k_hs,
                               const uint16_t *v, int64_t v_rs, int64_t v_hs, int64_t Sq, int64_t Skv, int Hq, int Hkv,
                               int D, float scale) {
    return cuda_flash_sm90_batched(be, 1, 0, 0, 0, 0, out, o_rs, o_hs, q, q_rs, q_hs, k, k_rs, k_hs, v, v_rs, v_hs, Sq,
                                   Skv, Hq, Hkv, D, scale);
}
