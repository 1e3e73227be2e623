/* Hopper (sm_90a) INT8 GEMM with the dequantization fused into its epilogue (docs/int8.md): cuda_int8_matmul_sm90()
 * computes y[m, n] = bf16(fp32(acc[m, n]) * xs[m] * ws[n] (+ bias[n])) with acc = sum_k xq[m, k] wq[n, k] exact in
 * int32, the same bits as the CPU twin (cpu/cpu_int8.c) and as cuBLASLt's int32 output + k_dequant (cuda_int8.cu),
 * without the int32 tile's round trip through memory.
 *
 * One CTA = a 128 x 256 output tile (tiles in groups of 8 row tiles, so the CTAs running together share their
 * operands in L2), 384 threads in three warpgroups:
 *   warpgroup 0  producer: setmaxnreg 24; one thread issues the TMA loads of A (xq, 128 rows x 128 bytes of K) and
 *                B (wq, 256 rows x 128 bytes) into an ST-deep ring of 128B-swizzled stages, "full" mbarriers with
 *                transaction counts, "empty" ones with one arrival per consumer warp;
 *   warpgroups 1, 2  consumers: setmaxnreg 240; 64 rows each, wgmma m64n256k32 s32.s8.s8 (4 per stage), 128 int32
 *                accumulators per thread; the stage of the group before is released once the current one is issued
 *                (wgmma.wait_group 1). Epilogue straight from the registers: __int2float_rn, __fmul_rn twice,
 *                __fadd_rn for the bias, the CPU's bf16 rounding, masked rows (TMA zero-fills rows past M).
 * Needs K % 128 == 0, N % 8 == 0, 16-byte aligned operands (the release's shapes: K 5376 / 7168 / 14336, N multiples
 * of 256); anything else goes to the cuBLASLt path. Per token only (no groups). */
#include "cuda_internal.h"
#include "cuda_int8.h"

#include <cuda.h> /* CUtensorMap and its enums only: the encoder comes from cudaGetDriverEntryPoint */

namespace {

#include "cuda_sm90_common.h" /* mbarriers, TMA loads, wgmma fences and descriptors, the map encoder */

constexpr int BM = 128, BN = 256, BK = 128, ST = 4, THREADS = 384, GROUP_M = 8;
constexpr uint32_t A_BYTES = BM * BK, B_BYTES = BN * BK, STAGE = A_BYTES + B_BYTES;
constexpr size_t SMEM = (size_t)ST * STAGE + 16 * ST + 1024;

struct Params {
    uint16_t       *y;
    int64_t         ldy;
    const float    *xs, *ws;
    const uint16_t *bias;
    int             M, N, nk, num_m, num_n;
};

#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)

/* D (s32, m64 x 256) += A (m64 x k32, s8) . B (n256 x k32, s8)^T, both K-major from 128B-swizzled shared memory */
static __device__ __forceinline__ void wgmma_s8_n256(int32_t (&d)[128], uint64_t da, uint64_t db, int scale_d) {
    asm volatile(
        "{\n.reg .pred p;\n"
        "setp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 "
        "{"
        "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"
        "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"
        "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"
        "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,"
        "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"
        "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,"
        "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,"
        "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
        "}, %128, %129, p;\n}\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
        : "l"(da), "l"(db), "r"(scale_d));
}
#endif

__global__ void __launch_bounds__(THREADS, 1)
k_s8_gemm90(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB, const Params p) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) /* wgmma, TMA, setmaxnreg: sm_90a only; other targets get an empty kernel that
                                        * is never launched (the host checks the compute capability) */
    extern __shared__ uint8_t smem_raw[];
    const uint32_t base = (su32(smem_raw) + 1023u) & ~1023u;
    const uint32_t bars = base + ST * STAGE;
    auto full = [&](int s) { return bars + 8u * s; };
    auto empty = [&](int s) { return bars + 8u * (ST + s); };
    /* grouped tile order: GROUP_M row tiles side by side walk the column tiles together */
    const int pid = blockIdx.x, per_group = GROUP_M * p.num_n, first_m = (pid / per_group) * GROUP_M;
    const int gsize = min(p.num_m - first_m, GROUP_M);
    const int mt = first_m + (pid % per_group) % gsize, nt = (pid % per_group) / gsize;
    const int m0 = mt * BM, n0 = nt * BN;
    const int wg = threadIdx.x / 128;
    if (threadIdx.x == 0) {
        for (int s = 0; s < ST; s++) {
            mbar_init(full(s), 1);
            mbar_init(empty(s), 8); /* one arrival per consumer warp */
        }
        mbar_init_fence();
    }
    __syncthreads();
    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
        if (threadIdx.x == 0) {
            prefetch_maps(&tmA, &tmB);
            for (int kt = 0; kt < p.nk; kt++) {
                const int s = kt % ST;
                if (kt >= ST) mbar_wait_guarded(empty(s), (unsigned)((kt / ST) + 1) & 1u);
                mbar_expect_tx(full(s), STAGE);
                tma_load2(base + s * STAGE, &tmA, full(s), kt * BK, m0);
                tma_load2(base + s * STAGE + A_BYTES, &tmB, full(s), kt * BK, n0);
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
        const int cw = wg - 1, t = threadIdx.x & 127, warp = t >> 5, lane = t & 31;
        int32_t d[128];
#pragma unroll
        for (int i = 0; i < 128; i++) d[i] = 0;
        for (int kt = 0; kt < p.nk; kt++) {
            const int s = kt % ST;
            mbar_wait(full(s), (unsigned)(kt / ST) & 1u);
            const uint32_t a = base + s * STAGE + cw * 64 * 128, b = base + s * STAGE + A_BYTES;
            wg_fence();
#pragma unroll
            for (int kk = 0; kk < BK / 32; kk++) wgmma_s8_n256(d, sm_desc(a + kk * 32, 16, 1024), sm_desc(b + kk * 32, 16, 1024), 1);
            wg_commit();
            wg_wait<1>(); /* the group of stage kt - 1 is done: give its stage back */
            if (kt > 0 && lane == 0) mbar_arrive(empty((kt - 1) % ST));
        }
        wg_wait<0>();
        keep(d);
        /* accumulator (row, column) of register 4 j + 2 h + i: row warp*16 + lane/4 + 8 h, column 8 j + 2 (lane % 4) + i */
        const int mrow = m0 + cw * 64 + warp * 16 + (lane >> 2), ncol = n0 + 2 * (lane & 3);
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int m = mrow + 8 * h;
            if (m >= p.M) continue;
            const float sx = p.xs[m];
            uint16_t *yr = p.y + (int64_t)m * p.ldy;
#pragma unroll
            for (int j = 0; j < 32; j++) {
                const int n = ncol + 8 * j;
                if (n >= p.N) continue;
                float v0 = __fmul_rn(__fmul_rn(__int2float_rn(d[4 * j + 2 * h]), sx), p.ws[n]);
                float v1 = __fmul_rn(__fmul_rn(__int2float_rn(d[4 * j + 2 * h + 1]), sx), p.ws[n + 1]);
                if (p.bias) {
                    v0 = __fadd_rn(v0, __uint_as_float((uint32_t)p.bias[n] << 16));
                    v1 = __fadd_rn(v1, __uint_as_float((uint32_t)p.bias[n + 1] << 16));
                }
                *(uint32_t *)(yr + n) = (uint32_t)f32_to_bf16_bits(v0) | ((uint32_t)f32_to_bf16_bits(v1) << 16);
            }
        }
    }
#endif
}

/* rows x cols bytes (row stride cols), box box_rows x 128 bytes, 128B swizzle, rows past `rows` zero-filled */
int make_map(encode_tiled_fn enc, CUtensorMap *m, const int8_t *ptr, int64_t rows, int64_t cols, int box_rows) {
    cuuint64_t dims[2] = {(cuuint64_t)cols, (cuuint64_t)rows}, strides[1] = {(cuuint64_t)cols};
    cuuint32_t box[2] = {(cuuint32_t)BK, (cuuint32_t)box_rows}, es[2] = {1, 1};
    CUresult r = enc(m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, (void *)ptr, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                     CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? 0 : -1;
}

} // namespace

/* 0 when the kernel ran; -1 (nothing launched) when the device, shape or alignment does not suit it. */
extern "C" int cuda_int8_matmul_sm90(h3_backend *be, h3_bf16 *y, int64_t ldy, const int8_t *xq, const float *xs, int64_t M,
                                     const h3_int8_linear *w, const h3_bf16 *bias) {
    cuda_impl *c = cuda_of(be);
    const int64_t N = w->N, K = w->K;
    if (c->sm_arch != 90 || w->group > 0 || M <= 0 || M > (1 << 30) || N > (1 << 30) || K > (1 << 30) || K % BK ||
        N % 8 || ldy % 2 || ((uintptr_t)xq & 15u) || ((uintptr_t)w->q & 15u) || ((uintptr_t)y & 3u))
        return -1;
    encode_tiled_fn enc = encoder();
    CUtensorMap ma, mb;
    if (!enc || make_map(enc, &ma, xq, M, K, BM) || make_map(enc, &mb, w->q, N, K, BN)) return -1;
    Params p;
    p.y = y, p.ldy = ldy, p.xs = xs, p.ws = w->scale, p.bias = bias, p.M = (int)M, p.N = (int)N, p.nk = (int)(K / BK);
    p.num_m = (int)((M + BM - 1) / BM), p.num_n = (int)((N + BN - 1) / BN);
    if (cudaFuncSetAttribute(k_s8_gemm90, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    k_s8_gemm90<<<(unsigned)(p.num_m * p.num_n), THREADS, SMEM, c->stream>>>(ma, mb, p);
    CUDA_LAUNCHED(be, "int8_matmul (sm90 kernel)");
    return 0;
}
