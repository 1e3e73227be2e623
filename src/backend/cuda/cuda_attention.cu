/* Scaled dot-product attention on the GPU (backend.h h3_attention), two kernels:
 *  - k_flash_bf16: the fast path (H3_BF16_OUT, head_dim 64 or 128). Flash-attention style: a block
 *    owns 128 query rows of one head (8 warps x 16 rows), streams 64-key tiles of K and V through
 *    shared memory (cp.async, double buffered, XOR-swizzled 16-byte chunks for conflict-free
 *    ldmatrix), computes S = Q K^T and O += P V on bf16 tensor cores (mma.sync m16n8k16, fp32
 *    accumulation) with an fp32 online softmax; P is rounded to bf16 before P V, as in torch's flash
 *    SDPA. Inputs are head-major bf16 copies made by k_to_heads_bf16.
 *  - k_attn_f32: the exact path. One warp per 4 query rows, lane j scores key j of a 32-key tile, an
 *    fp32 online softmax, lanes own output channels. Slow but fp32 throughout. */
#include "cuda_internal.h"

#include <math.h>


/* ======================= fp32 path ======================= */

enum { F32_ROWS = 4, F32_WARPS = 4, F32_KEYS = 32 };

template <int DPL>
static __global__ void __launch_bounds__(F32_WARPS * 32)
k_attn_f32(float *out, int64_t o_stride, const float *q, int64_t q_stride, const float *k, int64_t k_stride,
           const float *v, int64_t v_stride, int64_t Sq, int64_t Skv, int group, int D, float scale, int causal,
           int round) {
    extern __shared__ float sm[];
    const int QR = F32_WARPS * F32_ROWS;
    float *Qs = sm;                    /* [QR][D] */
    float *Ks = Qs + QR * D;           /* [32][D + 1]: padded so lane j reading row j is conflict-free */
    float *Vs = Ks + F32_KEYS * (D + 1); /* [32][D] */
    int h = blockIdx.y, hk = h / group;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int64_t q0 = (int64_t)blockIdx.x * QR;

    for (int i = threadIdx.x; i < QR * D; i += blockDim.x) {
        int64_t r = q0 + i / D;
        Qs[i] = r < Sq ? q[r * q_stride + (int64_t)h * D + i % D] : 0.0f;
    }
    float m[F32_ROWS], l[F32_ROWS], acc[F32_ROWS][DPL];
#pragma unroll
    for (int r = 0; r < F32_ROWS; r++) {
        m[r] = -INFINITY, l[r] = 0.0f;
#pragma unroll
        for (int i = 0; i < DPL; i++) acc[r][i] = 0.0f;
    }
    int64_t kv_end = causal ? (q0 + QR < Skv ? q0 + QR : Skv) : Skv;
    for (int64_t j0 = 0; j0 < kv_end; j0 += F32_KEYS) {
        __syncthreads();
        for (int i = threadIdx.x; i < F32_KEYS * D; i += blockDim.x) {
            int64_t j = j0 + i / D;
            int d = i % D;
            int ok = j < Skv;
            Ks[(i / D) * (D + 1) + d] = ok ? k[j * k_stride + (int64_t)hk * D + d] : 0.0f;
            Vs[i] = ok ? v[j * v_stride + (int64_t)hk * D + d] : 0.0f;
        }
        __syncthreads();
        int64_t key = j0 + lane;
#pragma unroll
        for (int r = 0; r < F32_ROWS; r++) {
            int row = warp * F32_ROWS + r;
            int64_t qi = q0 + row;
            const float *qr = Qs + row * D, *kr = Ks + lane * (D + 1);
            float dot = 0.0f;
            for (int d = 0; d < D; d++) dot = fmaf(qr[d], kr[d], dot);
            float s = dot * scale;
            int valid = key < Skv && (!causal || key <= qi);
            if (!valid) s = -INFINITY;
            float mt = s;
            for (int o = 16; o > 0; o >>= 1) mt = fmaxf(mt, __shfl_xor_sync(0xffffffffu, mt, o));
            float m_new = fmaxf(m[r], mt);
            if (m_new == -INFINITY) continue; /* every key so far masked (uniform across the warp) */
            float p = valid ? expf(s - m_new) : 0.0f;
            float corr = expf(m[r] - m_new);
            float ps = p;
            for (int o = 16; o > 0; o >>= 1) ps += __shfl_xor_sync(0xffffffffu, ps, o);
            l[r] = l[r] * corr + ps;
#pragma unroll
            for (int i = 0; i < DPL; i++) acc[r][i] *= corr;
            for (int jj = 0; jj < F32_KEYS; jj++) {
                float pj = __shfl_sync(0xffffffffu, p, jj);
#pragma unroll
                for (int i = 0; i < DPL; i++) {
                    int d = lane + 32 * i;
                    if (d < D) acc[r][i] = fmaf(pj, Vs[jj * D + d], acc[r][i]);
                }
            }
            m[r] = m_new;
        }
    }
#pragma unroll
    for (int r = 0; r < F32_ROWS; r++) {
        int64_t qi = q0 + warp * F32_ROWS + r;
        if (qi >= Sq) continue;
        float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            int d = lane + 32 * i;
            if (d < D) {
                float o = acc[r][i] * inv;
                out[qi * o_stride + (int64_t)h * D + d] = round ? round_bf16(o) : o;
            }
        }
    }
}

template <int DPL>
static void launch_attn_f32(h3_backend *be, float *out, int64_t o_stride, const float *q, int64_t q_stride,
                            const float *k, int64_t k_stride, const float *v, int64_t v_stride, int64_t Sq,
                            int64_t Skv, int Hq, int Hkv, int D, float scale, int causal, int round) {
    size_t smem = (size_t)(F32_WARPS * F32_ROWS * D + F32_KEYS * (D + 1) + F32_KEYS * D) * sizeof(float);
    CUDA_OK(be, cudaFuncSetAttribute(k_attn_f32<DPL>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid((unsigned)((Sq + F32_WARPS * F32_ROWS - 1) / (F32_WARPS * F32_ROWS)), (unsigned)Hq);
    k_attn_f32<DPL><<<grid, F32_WARPS * 32, smem, cuda_of(be)->stream>>>(out, o_stride, q, q_stride, k, k_stride, v,
                                                                        v_stride, Sq, Skv, Hq / Hkv, D, scale,
                                                                        causal, round);
    CUDA_LAUNCHED(be, "attention (fp32)");
}

/* ======================= bf16 flash path ======================= */

/* Block: FL_WARPS warps x 32 query rows (two m16 tiles per warp, so every K/V fragment read from
 * shared memory feeds two MMAs), BN keys per tile. 2 blocks per SM (96 KB of shared memory each at
 * HD = 128), so one block's softmax and barriers overlap the other's MMAs. */
enum { FL_WARPS = 4, FL_MT = 2, FL_BM = FL_WARPS * FL_MT * 16, FL_THREADS = FL_WARPS * 32 };

static __device__ __forceinline__ void cp_async16(void *smem, const void *gmem, int valid) {
    unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    int bytes = valid ? 16 : 0; /* 0: the 16 bytes are zero-filled */
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
static __device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
static __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

static __device__ __forceinline__ void ldsm_x4(unsigned r[4], const void *p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
static __device__ __forceinline__ void ldsm_x4_t(unsigned r[4], const void *p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}
/* c[4] += a (16x16 bf16, row) . b (16x8 bf16, col), fp32 accumulate */
static __device__ __forceinline__ void mma_bf16(float c[4], const unsigned a[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
    return (unsigned)f32_to_bf16_bits(lo) | ((unsigned)f32_to_bf16_bits(hi) << 16);
}

/* 16-byte chunk `ch` of tile row `row`, XOR-swizzled over 8 chunks: the 8 rows one ldmatrix reads
 * land in 8 different bank groups. */
template <int CH>
static __device__ __forceinline__ int swz(int row, int ch) {
    return row * CH + (ch ^ (row & 7));
}

template <int CH>
static __device__ __forceinline__ void load_tile(uint4 *tile, const uint16_t *base, int64_t r0, int rows,
                                                 int64_t S) {
    for (int i = threadIdx.x; i < rows * CH; i += FL_THREADS) {
        int r = i / CH, ch = i % CH;
        int64_t gr = r0 + r;
        int ok = gr < S;
        cp_async16(&tile[swz<CH>(r, ch)], base + (ok ? gr : 0) * (CH * 8) + ch * 8, ok);
    }
}

template <int HD, int BN>
static __global__ void __launch_bounds__(FL_THREADS, 2)
k_flash_bf16(float *out, int64_t o_stride, const uint16_t *Q, const uint16_t *K, const uint16_t *V, int64_t Sq,
             int64_t Skv, int group, float scale_log2, int causal, int round) {
    constexpr int CH = HD / 8;   /* 16-byte chunks per row */
    constexpr int KS = HD / 16;  /* k-steps of Q K^T */
    constexpr int NT = BN / 8;   /* score n-tiles */
    constexpr int OT = HD / 8;   /* output n-tiles */
    extern __shared__ uint4 fsm[];
    uint4 *Qs = fsm;
    uint4 *Ks = Qs + FL_BM * CH; /* two buffers of BN * CH */
    uint4 *Vs = Ks + 2 * BN * CH;

    int h = blockIdx.y, hk = h / group;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int64_t q0 = (int64_t)blockIdx.x * FL_BM;
    const uint16_t *Qh = Q + (int64_t)h * Sq * HD, *Kh = K + (int64_t)hk * Skv * HD, *Vh = V + (int64_t)hk * Skv * HD;

    int64_t n_tiles = (Skv + BN - 1) / BN;
    if (causal) {
        int64_t lim = (q0 + FL_BM + BN - 1) / BN;
        if (lim < n_tiles) n_tiles = lim;
    }
    load_tile<CH>(Qs, Qh, q0, FL_BM, Sq);
    load_tile<CH>(Ks, Kh, 0, BN, Skv);
    load_tile<CH>(Vs, Vh, 0, BN, Skv);
    cp_async_commit();

    float o[FL_MT][OT][4];
#pragma unroll
    for (int mt = 0; mt < FL_MT; mt++)
#pragma unroll
        for (int i = 0; i < OT; i++) o[mt][i][0] = o[mt][i][1] = o[mt][i][2] = o[mt][i][3] = 0.0f;
    /* per m-tile: rows lane/4 (index 0) and lane/4 + 8 (index 1); max in raw-score units */
    float m[FL_MT][2], l[FL_MT][2];
#pragma unroll
    for (int mt = 0; mt < FL_MT; mt++) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;
    int64_t wrow0 = q0 + warp * (FL_MT * 16); /* first query row of this warp */

    for (int64_t t = 0; t < n_tiles; t++) {
        int buf = (int)(t & 1);
        if (t + 1 < n_tiles) {
            load_tile<CH>(Ks + (buf ^ 1) * BN * CH, Kh, (t + 1) * BN, BN, Skv);
            load_tile<CH>(Vs + (buf ^ 1) * BN * CH, Vh, (t + 1) * BN, BN, Skv);
            cp_async_commit();
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        const uint4 *Kt = Ks + buf * BN * CH, *Vt = Vs + buf * BN * CH;

        /* S = Q K^T: this warp's 32 rows x BN keys; Q fragments re-read from shared memory */
        float s[FL_MT][NT][4];
#pragma unroll
        for (int mt = 0; mt < FL_MT; mt++)
#pragma unroll
            for (int i = 0; i < NT; i++) s[mt][i][0] = s[mt][i][1] = s[mt][i][2] = s[mt][i][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            unsigned qa[FL_MT][4];
#pragma unroll
            for (int mt = 0; mt < FL_MT; mt++)
                ldsm_x4(qa[mt], &Qs[swz<CH>(warp * FL_MT * 16 + mt * 16 + (lane & 15), kk * 2 + (lane >> 4))]);
#pragma unroll
            for (int np = 0; np < NT / 2; np++) {
                unsigned b[4];
                ldsm_x4(b, &Kt[swz<CH>(np * 16 + (lane & 7) + ((lane >> 4) << 3), kk * 2 + ((lane >> 3) & 1))]);
#pragma unroll
                for (int mt = 0; mt < FL_MT; mt++) {
                    mma_bf16(s[mt][2 * np], qa[mt], b[0], b[1]);
                    mma_bf16(s[mt][2 * np + 1], qa[mt], b[2], b[3]);
                }
            }
        }

        /* mask keys past the end and (causal) keys after the query */
        int64_t kbase = t * BN;
        if (kbase + BN > Skv || (causal && kbase + BN - 1 > wrow0)) {
#pragma unroll
            for (int mt = 0; mt < FL_MT; mt++)
#pragma unroll
                for (int nt = 0; nt < NT; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        int64_t key = kbase + nt * 8 + (lane % 4) * 2 + (e & 1);
                        int64_t qr = wrow0 + mt * 16 + lane / 4 + (e >> 1) * 8;
                        if (key >= Skv || (causal && key > qr)) s[mt][nt][e] = -INFINITY;
                    }
        }

        /* online softmax: p = 2^(s*scale_log2 - m*scale_log2) (scale > 0, so the max commutes) */
#pragma unroll
        for (int mt = 0; mt < FL_MT; mt++) {
#pragma unroll
            for (int r = 0; r < 2; r++) {
                float mx = -INFINITY;
#pragma unroll
                for (int nt = 0; nt < NT; nt++) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
                float mn = fmaxf(m[mt][r], mx);
                float mb = mn == -INFINITY ? 0.0f : mn * scale_log2;
                float corr = exp2f(fmaf(m[mt][r], scale_log2, -mb)); /* 0 while m was -inf */
                m[mt][r] = mn;
                float rs = 0.0f;
#pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    float p0 = exp2f(fmaf(s[mt][nt][2 * r], scale_log2, -mb));
                    float p1 = exp2f(fmaf(s[mt][nt][2 * r + 1], scale_log2, -mb));
                    s[mt][nt][2 * r] = p0, s[mt][nt][2 * r + 1] = p1;
                    rs += p0 + p1;
                }
                l[mt][r] = l[mt][r] * corr + rs;
#pragma unroll
                for (int i = 0; i < OT; i++) o[mt][i][2 * r] *= corr, o[mt][i][2 * r + 1] *= corr;
            }
        }

        /* O += P V: the score accumulators of two n-tiles are exactly one A fragment */
#pragma unroll
        for (int kk = 0; kk < BN / 16; kk++) {
            unsigned a[FL_MT][4];
#pragma unroll
            for (int mt = 0; mt < FL_MT; mt++) {
                a[mt][0] = pack_bf16(s[mt][2 * kk][0], s[mt][2 * kk][1]);
                a[mt][1] = pack_bf16(s[mt][2 * kk][2], s[mt][2 * kk][3]);
                a[mt][2] = pack_bf16(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);
                a[mt][3] = pack_bf16(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);
            }
#pragma unroll
            for (int dp = 0; dp < OT / 2; dp++) {
                unsigned b[4];
                ldsm_x4_t(b, &Vt[swz<CH>(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, dp * 2 + (lane >> 4))]);
#pragma unroll
                for (int mt = 0; mt < FL_MT; mt++) {
                    mma_bf16(o[mt][2 * dp], a[mt], b[0], b[1]);
                    mma_bf16(o[mt][2 * dp + 1], a[mt], b[2], b[3]);
                }
            }
        }
        __syncthreads(); /* the next iteration refills this buffer */
    }

#pragma unroll
    for (int mt = 0; mt < FL_MT; mt++) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float lr = l[mt][r];
            lr += __shfl_xor_sync(0xffffffffu, lr, 1);
            lr += __shfl_xor_sync(0xffffffffu, lr, 2);
            float inv = lr > 0.0f ? 1.0f / lr : 0.0f;
            int64_t row = wrow0 + mt * 16 + lane / 4 + r * 8;
            if (row >= Sq) continue;
            float *orow = out + row * o_stride + (int64_t)h * HD + (lane % 4) * 2;
#pragma unroll
            for (int nt = 0; nt < OT; nt++) {
                float v0 = o[mt][nt][2 * r] * inv, v1 = o[mt][nt][2 * r + 1] * inv;
                if (round) v0 = round_bf16(v0), v1 = round_bf16(v1);
                orow[nt * 8] = v0, orow[nt * 8 + 1] = v1;
            }
        }
    }
}

template <int HD, int BN>
static void launch_flash(h3_backend *be, float *out, int64_t o_stride, const uint16_t *q, const uint16_t *k,
                         const uint16_t *v, int64_t Sq, int64_t Skv, int Hq, int Hkv, float scale, int causal,
                         int round) {
    size_t smem = (size_t)(FL_BM + 4 * BN) * (HD / 8) * 16;
    CUDA_OK(be, cudaFuncSetAttribute(k_flash_bf16<HD, BN>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid((unsigned)((Sq + FL_BM - 1) / FL_BM), (unsigned)Hq);
    k_flash_bf16<HD, BN><<<grid, FL_THREADS, smem, cuda_of(be)->stream>>>(out, o_stride, q, k, v, Sq, Skv, Hq / Hkv,
                                                                        scale * 1.4426950408889634f, causal, round);
    CUDA_LAUNCHED(be, "attention (flash bf16)");
}

extern "C" void cuda_flash_attention_bf16(h3_backend *be, float *out, int64_t o_stride, const uint16_t *q,
                                          const uint16_t *k, const uint16_t *v, int64_t Sq, int64_t Skv, int Hq,
                                          int Hkv, int D, float scale, int causal, int round_out) {
    if (Sq <= 0 || Hq <= 0) return;
    /* keys per tile at head_dim 128: 64 unless H3_FLASH_BN=32 (kept for tuning runs) */
    if (D == 128 && cuda_of(be)->flash_bn == 32)
        launch_flash<128, 32>(be, out, o_stride, q, k, v, Sq, Skv, Hq, Hkv, scale, causal, round_out);
    else if (D == 128) launch_flash<128, 64>(be, out, o_stride, q, k, v, Sq, Skv, Hq, Hkv, scale, causal, round_out);
    else if (D == 64) launch_flash<64, 64>(be, out, o_stride, q, k, v, Sq, Skv, Hq, Hkv, scale, causal, round_out);
    else cuda_record_error(be, "flash attention", "head_dim must be 64 or 128");
}

/* [S][stride] fp32 rows, head h at column h*D -> head-major bf16 [H][S][D] */
static __global__ void k_to_heads_bf16(uint16_t *dst, const float *src, int64_t S, int64_t stride, int H, int D) {
    FOR_ROWS_COLS(s, c, S, (int64_t)H * D) {
        int h = (int)c / D, d = (int)c - h * D; /* 32-bit division */
        dst[((int64_t)h * S + s) * D + d] = f32_to_bf16_bits(src[s * stride + c]);
    }
}

/* bf16 rows [S][w] -> fp32 rows with stride o_stride (exact) */
static __global__ void k_rows_bf16_to_f32(float *out, int64_t o_stride, const uint16_t *src, int64_t S, int64_t w) {
    FOR_ROWS_COLS(s, c, S, w) out[s * o_stride + c] = __uint_as_float((uint32_t)src[s * w + c] << 16);
}

extern "C" void cuda_attention(h3_backend *be, float *out, int64_t o_stride, const float *q, int64_t q_stride,
                               const float *k, int64_t k_stride, const float *v, int64_t v_stride, int64_t Sq,
                               int64_t Skv, int Hq, int Hkv, int D, float scale, int causal, int flags) {
    cuda_impl *c = cuda_of(be);
    if (Sq <= 0 || Hq <= 0) return;
    int round = (flags & H3_BF16_OUT) != 0;
    if (round && !c->force_fp32 && (D == 64 || D == 128) && Skv > 0 && scale > 0.0f) {
        size_t nq = (size_t)Hq * Sq * D, nkv = (size_t)Hkv * Skv * D;
        uint16_t *qb = (uint16_t *)cuda_scratch(be, (nq + 2 * nkv) * 2);
        if (!qb) return;
        uint16_t *kb = qb + nq, *vb = kb + nkv;
        k_to_heads_bf16<<<grid_rows_cols(Sq, (int64_t)Hq * D, 256), 256, 0, c->stream>>>(qb, q, Sq, q_stride, Hq, D);
        k_to_heads_bf16<<<grid_rows_cols(Skv, (int64_t)Hkv * D, 256), 256, 0, c->stream>>>(kb, k, Skv, k_stride, Hkv, D);
        k_to_heads_bf16<<<grid_rows_cols(Skv, (int64_t)Hkv * D, 256), 256, 0, c->stream>>>(vb, v, Skv, v_stride, Hkv, D);
        CUDA_LAUNCHED(be, "attention (to bf16 heads)");
        int done = 0;
        if (!causal) { /* cuDNN's fused SDPA first (no causal graph built); bf16 rows out, widened exactly */
            uint16_t *ob = (uint16_t *)cuda_scratch(be, (size_t)Sq * Hq * D * 2);
            if (ob && cuda_cudnn_attention_bf16(be, ob, qb, kb, vb, Sq, Skv, Hq, Hkv, D, scale) == 0) {
                int64_t w = (int64_t)Hq * D;
                k_rows_bf16_to_f32<<<grid_rows_cols(Sq, w, 256), 256, 0, c->stream>>>(out, o_stride, ob, Sq, w);
                CUDA_LAUNCHED(be, "attention (bf16 rows to fp32)");
                done = 1;
            }
            cuda_free(be, ob);
        }
        if (!done) cuda_flash_attention_bf16(be, out, o_stride, qb, kb, vb, Sq, Skv, Hq, Hkv, D, scale, causal, 1);
        cuda_free(be, qb);
        return;
    }
    if (D > 256) {
        cuda_record_error(be, "attention", "head_dim above 256 is not supported");
        return;
    }
    int dpl = (D + 31) / 32;
    if (dpl <= 1) launch_attn_f32<1>(be, out, o_stride, q, q_stride, k, k_stride, v, v_stride, Sq, Skv, Hq, Hkv, D, scale, causal, round);
    else if (dpl == 2) launch_attn_f32<2>(be, out, o_stride, q, q_stride, k, k_stride, v, v_stride, Sq, Skv, Hq, Hkv, D, scale, causal, round);
    else if (dpl <= 4) launch_attn_f32<4>(be, out, o_stride, q, q_stride, k, k_stride, v, v_stride, Sq, Skv, Hq, Hkv, D, scale, causal, round);
    else launch_attn_f32<8>(be, out, o_stride, q, q_stride, k, k_stride, v, v_stride, Sq, Skv, Hq, Hkv, D, scale, causal, round);
}
