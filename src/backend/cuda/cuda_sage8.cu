/* CUDA twins of the 8-bit attention ops (ops_attention.h): the quantization kernels, a plain attention kernel of
 * the same numerics for any head dim and GPU, and the dispatch to the sm_90a kernel (cuda_sage8_sm90.cu). */
#include "cuda_internal.h"

#include <cuda_fp8.h>
#include <math.h>

#include "cuda_sage8.h"

namespace {

constexpr int CH = 256; /* tokens per partial of the column statistics */

__device__ __forceinline__ float bf(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }
__device__ __forceinline__ uint8_t e4m3(float x) {
    return (uint8_t)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
}
__device__ __forceinline__ float e4m3f(uint8_t c) {
    __half_raw h = __nv_cvt_fp8_to_halfraw((__nv_fp8_storage_t)c, __NV_E4M3);
    return __half2float(__half(h));
}
__device__ __forceinline__ int vt_token(int c) { return (c >> 4) * 16 + ((c >> 1) & 1) * 8 + ((c >> 2) & 3) * 2 + (c & 1); }

/* per (chunk of CH tokens, kv head): fp64 column sums of K and column amax of |V| */
__global__ void k_colstats(double *ksum, float *vmax, const uint16_t *k, int64_t k_rs, int64_t k_hs, const uint16_t *v,
                           int64_t v_rs, int64_t v_hs, int64_t Skv, int D) {
    const int ch = blockIdx.x, h = blockIdx.y, H = gridDim.y;
    const int64_t s0 = (int64_t)ch * CH, s1 = s0 + CH < Skv ? s0 + CH : Skv;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        double sum = 0.0;
        float vm = 0.0f;
        for (int64_t s = s0; s < s1; s++) {
            sum += (double)bf(k[s * k_rs + h * k_hs + d]);
            vm = fmaxf(vm, fabsf(bf(v[s * v_rs + h * v_hs + d])));
        }
        ksum[((int64_t)ch * H + h) * D + d] = sum;
        vmax[((int64_t)ch * H + h) * D + d] = vm;
    }
}

/* the same with 4 channels per thread (8-byte loads; D % 4 == 0, 8-byte aligned rows) and 8 token phases per block,
 * the phases' partials added in phase order: the same fp64 sums (exact), the same maxima */
__global__ void k_colstats4(double *ksum, float *vmax, const uint16_t *k, int64_t k_rs, int64_t k_hs, const uint16_t *v,
                            int64_t v_rs, int64_t v_hs, int64_t Skv, int D) {
    __shared__ double ps[8][128];
    __shared__ float pm[8][128];
    const int ch = blockIdx.x, h = blockIdx.y, H = gridDim.y, tx = threadIdx.x, ty = threadIdx.y;
    const int64_t s0 = (int64_t)ch * CH, s1 = s0 + CH < Skv ? s0 + CH : Skv;
    for (int c0 = 0; c0 < D; c0 += 128) {
        const int d = c0 + 4 * tx;
        double sum[4] = {0.0, 0.0, 0.0, 0.0};
        float vm[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        if (d < D)
            for (int64_t s = s0 + ty; s < s1; s += 8) {
                uint2 kk = *(const uint2 *)(k + s * k_rs + h * k_hs + d), vv = *(const uint2 *)(v + s * v_rs + h * v_hs + d);
                uint32_t kw[2] = {kk.x, kk.y}, vw[2] = {vv.x, vv.y};
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    uint16_t kb = (uint16_t)(kw[i >> 1] >> (16 * (i & 1))), vb = (uint16_t)(vw[i >> 1] >> (16 * (i & 1)));
                    sum[i] += (double)bf(kb);
                    vm[i] = fmaxf(vm[i], fabsf(bf(vb)));
                }
            }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < 4; i++) ps[ty][4 * tx + i] = sum[i], pm[ty][4 * tx + i] = vm[i];
        __syncthreads();
        const int t = ty * 32 + tx; /* 256 threads: the first 128 finish one channel each */
        if (t < 128 && c0 + t < D) {
            double a = 0.0;
            float b = 0.0f;
            for (int y = 0; y < 8; y++) a += ps[y][t], b = fmaxf(b, pm[y][t]);
            ksum[((int64_t)ch * H + h) * D + c0 + t] = a;
            vmax[((int64_t)ch * H + h) * D + c0 + t] = b;
        }
    }
}

/* the partials in chunk order: mean = fp32(sum / Skv), v_scale = max(amax, MIN) / 448 */
__global__ void k_colfinal(float *mean, float *vscale, const double *ksum, const float *vmax, int nch, int64_t Skv,
                           int D) {
    const int h = blockIdx.x, H = gridDim.x;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        double sum = 0.0;
        float vm = 0.0f;
        for (int ch = 0; ch < nch; ch++) {
            sum += ksum[((int64_t)ch * H + h) * D + d];
            vm = fmaxf(vm, vmax[((int64_t)ch * H + h) * D + d]);
        }
        mean[h * D + d] = (float)(sum / (double)Skv);
        vscale[h * D + d] = __fdiv_rn(fmaxf(vm, H3_SAGE8_MIN_AMAX), H3_SAGE8_P_SCALE);
    }
}

__device__ __forceinline__ float block_max(float x, float *red) {
    for (int o = 16; o; o >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = x;
    __syncthreads();
    float r = red[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); w++) r = fmaxf(r, red[w]);
    return r;
}
__device__ __forceinline__ float block_sum(float x, float *red) {
    for (int o = 16; o; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    __syncthreads();
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = x;
    __syncthreads();
    float r = red[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); w++) r += red[w];
    return r;
}

/* INT8 codes of a block of R rows of one head (x - mean when mean is given) and its scale */
__global__ void k_quant_rows(int8_t *dst, float *scale, const uint16_t *x, int64_t rs, int64_t hs, int64_t S, int D,
                             int R, const float *mean) {
    __shared__ float red[32];
    const int b = blockIdx.x, h = blockIdx.y, nb = gridDim.x;
    const int64_t r0 = (int64_t)b * R;
    const int n = (int)(S - r0 < R ? S - r0 : R), tot = n * D;
    const uint16_t *xh = x + h * hs;
    const float *mh = mean ? mean + (int64_t)h * D : nullptr;
    float amax = 0.0f;
    for (int e = threadIdx.x; e < tot; e += blockDim.x) {
        int r = e / D, d = e - r * D;
        float val = bf(xh[(r0 + r) * rs + d]);
        if (mh) val = __fsub_rn(val, mh[d]);
        amax = fmaxf(amax, fabsf(val));
    }
    amax = block_max(amax, red);
    const float sc = __fdiv_rn(fmaxf(amax, H3_SAGE8_MIN_AMAX), 127.0f);
    int8_t *dh = dst + ((int64_t)h * S + r0) * D;
    for (int e = threadIdx.x; e < tot; e += blockDim.x) {
        int r = e / D, d = e - r * D;
        float val = bf(xh[(r0 + r) * rs + d]);
        if (mh) val = __fsub_rn(val, mh[d]);
        int cq = __float2int_rn(__fdiv_rn(val, sc));
        dh[e] = (int8_t)(cq > 127 ? 127 : cq < -127 ? -127 : cq);
    }
    if (threadIdx.x == 0) scale[(int64_t)h * nb + b] = sc;
}

/* k_quant_rows with 8 channels per 16-byte load (D % 8 == 0, D <= 256, 16-byte aligned rows), the block's values
 * kept in registers between the amax and the codes: the same codes and scales */
template <int R>
__global__ void __launch_bounds__(256) k_quant_rows8(int8_t *dst, float *scale, const uint16_t *x, int64_t rs, int64_t hs,
                                                     int64_t S, int D, const float *mean) {
    __shared__ float red[32];
    constexpr int MAXV = R / 8; /* 16-byte vectors per thread at D 256 */
    const int b = blockIdx.x, h = blockIdx.y, nb = gridDim.x, vpr = D / 8;
    const int64_t r0 = (int64_t)b * R;
    const int n = (int)(S - r0 < R ? S - r0 : R), tot = n * vpr;
    const uint16_t *xh = x + h * hs;
    const float *mh = mean ? mean + (int64_t)h * D : nullptr;
    uint4 raw[MAXV];
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < MAXV; i++) {
        const int e = threadIdx.x + i * 256;
        if (e < tot) {
            const int r = e / vpr, c = (e - r * vpr) * 8;
            raw[i] = *(const uint4 *)(xh + (r0 + r) * rs + c);
            const uint32_t w[4] = {raw[i].x, raw[i].y, raw[i].z, raw[i].w};
#pragma unroll
            for (int k = 0; k < 8; k++) {
                float val = bf((uint16_t)(w[k >> 1] >> (16 * (k & 1))));
                if (mh) val = __fsub_rn(val, mh[c + k]);
                amax = fmaxf(amax, fabsf(val));
            }
        }
    }
    amax = block_max(amax, red);
    const float sc = __fdiv_rn(fmaxf(amax, H3_SAGE8_MIN_AMAX), 127.0f);
    int8_t *dh = dst + ((int64_t)h * S + r0) * D;
#pragma unroll
    for (int i = 0; i < MAXV; i++) {
        const int e = threadIdx.x + i * 256;
        if (e < tot) {
            const int r = e / vpr, c = (e - r * vpr) * 8;
            const uint32_t w[4] = {raw[i].x, raw[i].y, raw[i].z, raw[i].w};
            uint32_t out[2] = {0u, 0u};
#pragma unroll
            for (int k = 0; k < 8; k++) {
                float val = bf((uint16_t)(w[k >> 1] >> (16 * (k & 1))));
                if (mh) val = __fsub_rn(val, mh[c + k]);
                int cq = __float2int_rn(__fdiv_rn(val, sc));
                cq = cq > 127 ? 127 : cq < -127 ? -127 : cq;
                out[k >> 2] |= ((uint32_t)cq & 0xffu) << (8 * (k & 3));
            }
            *(uint2 *)(dh + (int64_t)r * D + c) = make_uint2(out[0], out[1]);
        }
    }
    if (threadIdx.x == 0) scale[(int64_t)h * nb + b] = sc;
}

/* k_quant_vt with 16-byte loads of 8 channels and 4-byte stores of 4 columns (D % 8 == 0, aligned rows) */
__global__ void __launch_bounds__(256) k_quant_vt8(uint8_t *vt, const uint16_t *v, int64_t v_rs, int64_t v_hs,
                                                   const float *vscale, int64_t Skv, int64_t P, int D) {
    extern __shared__ uint8_t codes[]; /* [128][D + 4] */
    const int blk = blockIdx.x, h = blockIdx.y, ld = D + 4, vpr = D / 8;
    const int64_t s0 = (int64_t)blk * 128;
    const float *vs = vscale + (int64_t)h * D;
    for (int e = threadIdx.x; e < 128 * vpr; e += 256) {
        const int tk = e / vpr, c = (e - tk * vpr) * 8;
        const int64_t s = s0 + tk;
        uint32_t out[2] = {0u, 0u};
        if (s < Skv) {
            const uint4 raw = *(const uint4 *)(v + s * v_rs + h * v_hs + c);
            const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
            for (int k = 0; k < 8; k++)
                out[k >> 2] |= (uint32_t)e4m3(__fdiv_rn(bf((uint16_t)(w[k >> 1] >> (16 * (k & 1)))), vs[c + k])) << (8 * (k & 3));
        }
        *(uint32_t *)(codes + tk * ld + c) = out[0];
        *(uint32_t *)(codes + tk * ld + c + 4) = out[1];
    }
    __syncthreads();
    uint8_t *dh = vt + (int64_t)h * D * P + s0;
    for (int e = threadIdx.x; e < 32 * D; e += 256) {
        const int d = e >> 5, col = (e & 31) * 4;
        uint32_t w = 0;
#pragma unroll
        for (int i = 0; i < 4; i++) w |= (uint32_t)codes[((col & ~31) + vt_token((col + i) & 31)) * ld + d] << (8 * i);
        *(uint32_t *)(dh + (int64_t)d * P + col) = w;
    }
}

/* E4M3 codes of 128 tokens of one kv head, written transposed with the runs of 32 permuted (zero past Skv) */
__global__ void k_quant_vt(uint8_t *vt, const uint16_t *v, int64_t v_rs, int64_t v_hs, const float *vscale,
                           int64_t Skv, int64_t P, int D) {
    extern __shared__ uint8_t codes[]; /* [128][D + 4]: the padding puts the tokens a warp reads in distinct banks */
    const int blk = blockIdx.x, h = blockIdx.y, ld = D + 4;
    const int64_t s0 = (int64_t)blk * 128;
    const float *vs = vscale + (int64_t)h * D;
    for (int e = threadIdx.x; e < 128 * D; e += blockDim.x) {
        int tk = e / D, d = e - tk * D;
        int64_t s = s0 + tk;
        codes[tk * ld + d] = s < Skv ? e4m3(__fdiv_rn(bf(v[s * v_rs + h * v_hs + d]), vs[d])) : 0;
    }
    __syncthreads();
    uint8_t *dh = vt + (int64_t)h * D * P + s0;
    for (int e = threadIdx.x; e < 128 * D; e += blockDim.x) {
        int d = e >> 7, col = e & 127;
        dh[(int64_t)d * P + col] = codes[((col & ~31) + vt_token(col & 31)) * ld + d];
    }
}

/* the plain kernel: one block of 128 threads per (query row, head), thread t = key t of each tile; each thread
 * keeps the output channels d = t, t + 128 (D <= 256) */
__global__ void k_sage8_plain(uint16_t *out, int64_t o_rs, const int8_t *qc, const int8_t *kc, const uint8_t *vt,
                              const float *q_scale, const float *k_scale, const float *v_scale, int64_t Sq,
                              int64_t Skv, int64_t P, int D, int group, float sl2) {
    __shared__ float red[4];
    __shared__ uint8_t pc[128];
    __shared__ int colof[32];
    const int64_t r = blockIdx.x;
    const int h = blockIdx.y, hk = h / group, t = threadIdx.x;
    const int64_t nqb = (Sq + H3_SAGE8_BQ - 1) / H3_SAGE8_BQ, nkb = (Skv + H3_SAGE8_BK - 1) / H3_SAGE8_BK;
    if (t < 32) colof[vt_token(t)] = t;
    const int8_t *qr = qc + ((int64_t)h * Sq + r) * D;
    const int8_t *kh = kc + (int64_t)hk * Skv * D;
    const uint8_t *vh = vt + (int64_t)hk * D * P;
    const float fq = q_scale[h * nqb + r / H3_SAGE8_BQ] * sl2, l448 = 8.807354922057604f;
    float m = -INFINITY, l = 0.0f, o[2] = {0.0f, 0.0f}, pv[2] = {0.0f, 0.0f};
    for (int64_t j = 0; j < nkb; j++) {
        const int64_t n0 = j * H3_SAGE8_BK;
        const int nn = (int)(Skv - n0 < H3_SAGE8_BK ? Skv - n0 : H3_SAGE8_BK);
        const float fsc = fq * k_scale[hk * nkb + j];
        float f = -INFINITY;
        if (t < nn) {
            int32_t acc = 0;
            for (int d = 0; d < D; d++) acc += (int32_t)qr[d] * (int32_t)kh[(n0 + t) * D + d];
            f = (float)acc;
        }
        const float mx = block_max(f, red);
        const float mn = fmaxf(m, mx * fsc), corr = exp2f(m - mn), cb = l448 - mn;
        m = mn;
        const float p = t < nn ? exp2f(fmaf(f, fsc, cb)) : 0.0f;
        pc[t] = e4m3(p);
        l = l * corr + block_sum(p, red); /* block_sum's barriers also publish pc */
        for (int i = 0; i < 2; i++) {
            int d = t + 128 * i;
            if (d >= D) break;
            const uint8_t *vr = vh + (int64_t)d * P + n0;
            float acc = 0.0f;
            for (int n = 0; n < nn; n++) acc += e4m3f(pc[n]) * e4m3f(vr[(n & ~31) + colof[n & 31]]);
            o[i] = (o[i] + pv[i]) * corr;
            pv[i] = acc;
        }
        __syncthreads(); /* pc is rewritten by the next tile */
    }
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    for (int i = 0; i < 2; i++) {
        int d = t + 128 * i;
        if (d >= D) break;
        float y = ((o[i] + pv[i]) * inv) * v_scale[(int64_t)hk * D + d];
        out[r * o_rs + (int64_t)h * D + d] = __bfloat16_as_ushort(__float2bfloat16_rn(y));
    }
}

} /* namespace */

extern "C" void cuda_sage8_set_variant(h3_backend *be, int v) { cuda_of(be)->sage8_variant = v; }

extern "C" void cuda_sage8_quantize(h3_backend *be, h3_sage8_codes *c, const h3_bf16 *q, int64_t q_rs, int64_t q_hs,
                                    const h3_bf16 *k, int64_t k_rs, int64_t k_hs, const h3_bf16 *v, int64_t v_rs,
                                    int64_t v_hs) {
    cudaStream_t st = cuda_of(be)->stream;
    const int D = c->D;
    if (c->Sq <= 0 || c->Hq <= 0) return;
    if (c->Skv <= 0 || c->Hkv <= 0 || D <= 0 || D > 256 || c->Hq % c->Hkv) {
        cuda_record_error(be, "sage8_quantize", "Skv > 0, 0 < D <= 256 and Hq a multiple of Hkv");
        return;
    }
    const int nch = (int)((c->Skv + CH - 1) / CH);
    const size_t np = (size_t)nch * c->Hkv * D;
    double *ksum = (double *)cuda_scratch(be, np * (sizeof(double) + sizeof(float)));
    if (!ksum) return;
    float *vmax = (float *)(ksum + np);
    const int vec = D % 4 == 0 && !(((uintptr_t)k | (uintptr_t)v) & 7) && !((k_rs | k_hs | v_rs | v_hs) & 3);
    if (vec)
        k_colstats4<<<dim3((unsigned)nch, (unsigned)c->Hkv), dim3(32, 8), 0, st>>>(ksum, vmax, k, k_rs, k_hs, v, v_rs, v_hs,
                                                                                 c->Skv, D);
    else
        k_colstats<<<dim3((unsigned)nch, (unsigned)c->Hkv), 128, 0, st>>>(ksum, vmax, k, k_rs, k_hs, v, v_rs, v_hs, c->Skv, D);
    k_colfinal<<<c->Hkv, 128, 0, st>>>(c->k_mean, c->v_scale, ksum, vmax, nch, c->Skv, D);
    const int64_t nqb = (c->Sq + H3_SAGE8_BQ - 1) / H3_SAGE8_BQ, nkb = (c->Skv + H3_SAGE8_BK - 1) / H3_SAGE8_BK;
    /* 16-byte vectors where the rows allow them (the DiT's fused q|k|v rows do) */
    const int v8 = D % 8 == 0 && !(((uintptr_t)q | (uintptr_t)k | (uintptr_t)v) & 15) &&
                   !((q_rs | q_hs | k_rs | k_hs | v_rs | v_hs) & 7);
    const dim3 gq((unsigned)nqb, (unsigned)c->Hq), gk((unsigned)nkb, (unsigned)c->Hkv);
    if (v8) {
        k_quant_rows8<H3_SAGE8_BQ><<<gq, 256, 0, st>>>(c->q, c->q_scale, q, q_rs, q_hs, c->Sq, D, nullptr);
        k_quant_rows8<H3_SAGE8_BK><<<gk, 256, 0, st>>>(c->k, c->k_scale, k, k_rs, k_hs, c->Skv, D, c->k_mean);
        k_quant_vt8<<<gk, 256, 128 * (D + 4), st>>>(c->vt, v, v_rs, v_hs, c->v_scale, c->Skv, c->Skv_pad, D);
    } else {
        k_quant_rows<<<gq, 256, 0, st>>>(c->q, c->q_scale, q, q_rs, q_hs, c->Sq, D, H3_SAGE8_BQ, nullptr);
        k_quant_rows<<<gk, 256, 0, st>>>(c->k, c->k_scale, k, k_rs, k_hs, c->Skv, D, H3_SAGE8_BK, c->k_mean);
        k_quant_vt<<<gk, 256, 128 * (D + 4), st>>>(c->vt, v, v_rs, v_hs, c->v_scale, c->Skv, c->Skv_pad, D);
    }
    CUDA_LAUNCHED(be, "sage8_quantize");
    cuda_free(be, ksum);
}

extern "C" void cuda_sage8_attention_codes(h3_backend *be, h3_bf16 *out, int64_t o_rs, const h3_sage8_codes *c,
                                           float scale) {
    if (c->Sq <= 0 || c->Hq <= 0) return;
    if (c->Skv <= 0 || c->Hkv <= 0 || c->D <= 0 || c->D > 256 || c->Hq % c->Hkv) {
        cuda_record_error(be, "sage8_attention", "Skv > 0, 0 < D <= 256 and Hq a multiple of Hkv");
        return;
    }
    if (cuda_of(be)->sage8_variant < cuda_sage8_sm90_variants() && cuda_sage8_sm90(be, out, o_rs, c, scale) == 0)
        return;
    k_sage8_plain<<<dim3((unsigned)c->Sq, (unsigned)c->Hq), 128, 0, cuda_of(be)->stream>>>(
        out, o_rs, c->q, c->k, c->vt, c->q_scale, c->k_scale, c->v_scale, c->Sq, c->Skv, c->Skv_pad, c->D,
        c->Hq / c->Hkv, scale * 1.4426950408889634f);
    CUDA_LAUNCHED(be, "sage8_attention (plain)");
}

extern "C" void cuda_sage8_attention(h3_backend *be, h3_bf16 *out, int64_t o_rs, const h3_bf16 *q, int64_t q_rs,
                                     int64_t q_hs, const h3_bf16 *k, int64_t k_rs, int64_t k_hs, const h3_bf16 *v,
                                     int64_t v_rs, int64_t v_hs, int64_t Sq, int64_t Skv, int Hq, int Hkv, int D,
                                     float scale) {
    if (Sq <= 0 || Hq <= 0) return;
    void *buf = cuda_scratch(be, h3_sage8_codes_bytes(Sq, Skv, Hq, Hkv, D));
    if (!buf) return;
    h3_sage8_codes c;
    h3_sage8_codes_layout(&c, buf, Sq, Skv, Hq, Hkv, D);
    cuda_sage8_quantize(be, &c, q, q_rs, q_hs, k, k_rs, k_hs, v, v_rs, v_hs);
    cuda_sage8_attention_codes(be, out, o_rs, &c, scale);
    cuda_free(be, buf);
}
